//! An exact, lock-free sliding-window-log rate limiter.
//!
//! `slidelog` admits at most `limit` requests in **any** window `(t - W, t]`
//! — exactly, not approximately — with one compare-and-swap deciding each
//! admission and loads only per denial. Its concurrent protocol is model-checked with
//! [loom](https://docs.rs/loom).
//!
//! # Quick start
//!
//! ```
//! use std::time::Duration;
//! use slidelog::{KeyedLimiter, Limiter};
//!
//! // Several limits at once, exactly and all or nothing: 10 per second
//! // AND 100 per minute AND 1,000 per hour, on one ring of 1,000 slots.
//! let api = Limiter::builder(10, Duration::from_secs(1))
//!     .and(100, Duration::from_secs(60))
//!     .and(1_000, Duration::from_secs(3600))
//!     .build()?;
//! if let Err(denied) = api.check() {
//!     // Which policy decided the wait, and the exact wait.
//!     println!("policy {} says retry in {:?}", denied.policy(), denied.retry_after());
//! }
//!
//! // One limit for everything: 100 requests per second.
//! let limiter = Limiter::new(100, Duration::from_secs(1))?;
//! match limiter.check() {
//!     Ok(admitted) => println!("go ahead, {} left", admitted.remaining()),
//!     Err(denied) => println!("slow down, retry in {:?}", denied.retry_after()),
//! }
//!
//! // One limit per user, IP or API key.
//! let per_user = KeyedLimiter::<String>::new(10, Duration::from_secs(60))?;
//! assert!(per_user.check("alice").is_ok());
//!
//! // Weighted requests are all-or-nothing.
//! assert!(limiter.check_n(5).is_ok());
//! # Ok::<(), slidelog::ConfigError>(())
//! ```
//!
//! Share limiters between threads with `Arc`: [`Limiter`] and
//! [`KeyedLimiter`] are `Send + Sync`. A thread deciding many keys at once
//! (a batch of jobs, one request's client, user and route) can pin a
//! [`KeyedLimiter`] for the batch ([`KeyedLimiter::pin`]): the
//! [`PinnedKeys`] it returns answers as the limiter does, each call sparing
//! the map's per-call pin.
//!
//! # Which type to pick
//!
//! | you want | use |
//! |---|---|
//! | one limit for one resource (a process, an upstream, a job queue) | [`Limiter`] |
//! | a limit per user, IP or API key | [`KeyedLimiter`]; [`KeyedLimiter::pin`] for a batch of keys |
//! | several limits at once, all or nothing ("10 a second and 1,000 an hour") | [`Limiter::builder`]`(..).and(..)`, [`KeyedBuilder::and`], or a [`Quota`] per key |
//! | limits in the millions per window, where a few percent over is fine | [`SlidingCounter`]; per key [`KeyedCounter`] (builder `.sliding_counter(N)`) |
//! | code that takes the exact log or the counter | the [`RateLimit`] trait |
//! | to wait rather than be refused | `until_ready().await` (feature `async`) |
//! | one limit shared by many processes | [`RedisLimiter`](crate::redis::RedisLimiter) (feature `redis`) |
//! | HTTP or gRPC requests limited in a tower stack (axum, tonic, hyper) | [`RateLimitLayer`](crate::tower::RateLimitLayer) (feature `tower`) |
//! | limits that change while the program runs | `reconfigure` (below, "Changing limits at run time") |
//! | a restart that is not a free burst | `snapshot` and `restore` (feature `serde`, module `slidelog::snapshot`) |
//! | tests, simulations, replaying a log | [`ManualClock`], or the `_at` forms that take the time (see "Clocks") |
//! | an Envoy rate-limit service | the `slidelog serve` command (its manual is the repository's `docs/serve.md`) |
//!
//! "Which algorithm when" below compares the exact log with the counter.
//!
//! # Changing limits at run time
//!
//! A tenant upgraded, an incident that tightens every limit, a config file
//! reloaded: change the policies of a running limiter with `&self`, while
//! other threads check it, without a restart and without forgetting what
//! was admitted a second ago.
//!
//! ```
//! use std::time::Duration;
//! use slidelog::{KeyedLimiter, ManualClock, Quota};
//!
//! let limiter = KeyedLimiter::<String, ManualClock>::with_clock(
//!     100, Duration::from_secs(60), ManualClock::new())?;
//! limiter.check_n("alice", 80).unwrap();
//! // Incident: everyone is cut to 50 a minute, at once, over their history.
//! limiter.reconfigure(Quota::new(50, Duration::from_secs(60))?)?;
//! assert!(limiter.check("alice").is_err());
//! // Alice upgrades: her own quota from now on. The cut kept all 80 of her
//! // admissions (each still in the window), and they still count.
//! limiter.set_quota("alice".to_string(), Quota::new(1_000, Duration::from_secs(60))?)?;
//! assert_eq!(limiter.check("alice").unwrap().remaining(), 919);
//! # Ok::<(), slidelog::ConfigError>(())
//! ```
//!
//! **The contract.** A limiter keeps the newest `L` admissions, `L` the
//! largest limit of its current policies. After a reconfiguration, every
//! check is judged entirely by the new policies over the retained history:
//! the admissions the old configuration kept, then everything after. A
//! reconfiguration keeps every admission of the old ring that is still
//! inside a window of the old or the new policies (and at least the newest
//! `L_new`): a ring cut below what it holds carries the surplus, up to the
//! old ring's size, until a later reconfiguration finds it outside every
//! such window (a keyed state's carried surplus is also forgotten with the
//! key when evicted). So for every sequence of reconfigurations, no window
//! `(t - W, t]` holds more admissions than the largest limit in force in
//! it, whenever every configuration in force in it had a window of at least
//! `W`: 10 a minute, all used, cut to 5 and restored to 10 a second later
//! admits nothing more in that minute. [`Admitted::remaining`],
//! [`Denied::retry_after`] and [`Denied::policy`] answer for the new
//! policies at once (a request of zero units is always admitted, with
//! `remaining` 0 while a cut leaves the window over the new limit).
//!
//! * **Shrinking** — a smaller limit, a shorter window, an added policy —
//!   is exact in every window: a client that used 80 of 100 and is cut to
//!   50 is denied until its window holds fewer than 50.
//! * **Growing** forgets only what the old configuration had already let
//!   go: a limit raised beyond what the old ring held cannot count more
//!   than the admissions it kept, and a window grown beyond every window in
//!   force cannot recall an admission that had already left them all (or
//!   that more than the old ring's size of newer ones had pushed out). Two
//!   reconfigurations in a row compose: a cut from 4 to 2 then a raise back
//!   to 4 within the window keeps all 4 admissions the window held.
//! * A keyed limiter evicts a key idle for its longest window plus the
//!   idle margin, as always: an evicted key starts afresh under the
//!   current policies.
//!
//! **Progress.** Checks never wait for a reconfiguration: the old ring is
//! closed by one compare-and-swap at its frontier after its successor is
//! linked, and a check that meets the closed ring moves to the successor
//! (a keyed check swaps the key's successor into the map itself).
//! Reconfigurations are serialised with each other; each copies a log once
//! per attempt and retries only when an admission landed meanwhile. A
//! limiter never reconfigured keeps its first ring inline (no pointer to
//! follow; a few instructions more per check, measured in BENCHMARKS.md);
//! a reconfigured one pays one shared-pointer load per check. [`KeyedLimiter::reconfigure`] moves every live key before it
//! returns (`O(keys · L)`), keys inserted while it runs included: it waits
//! for the inserts in flight that may have chosen the old policies (a
//! grace period; checks never wait).
//! A [`SlidingCounter`] changes only its limit (up to
//! [`SlidingCounter::max_limit`]), keeping its counts; the Redis limiter
//! sends the new policies with every call, and a key keeps what every
//! policy set calling it can count (its ring grows to the largest limit
//! and longest window met while it lives, never shrinks).
//! The tower layer's `RateLimit-Policy` follows every change.
//!
//! # Which algorithm when
//!
//! | | [`Limiter`] (exact log) | [`SlidingCounter`] `Slots(N)` | [`SlidingCounter`] `TwoWindow` |
//! |---|---|---|---|
//! | per key | [`KeyedLimiter<K>`](KeyedLimiter) | [`KeyedCounter<K>`](KeyedCounter): builder `.sliding_counter(N)` | builder `.two_window()` |
//! | accuracy | exact | never denies what the log admits; over by at most one slot's count | ±, assumes even spread |
//! | fullest window at 1.5x load, L = 100 | 100 | 112 (N = 10), 105 (N = 60) | 109 |
//! | fullest window, worst case (a crafted pattern) | L | 2L, for every N | 2L - 1 (W at least 2L ns) |
//! | memory per key (state + ~56 B map entry; a state of up to 12 words is kept inside the entry) | `8 (L + 1)` bytes (`8 (L + 2)` from `L = 64`) | `8 (N + 3)` bytes | 24 bytes |
//! | `retry_after` | exact | exact for the estimate: when enough slots have left | exact for the estimate: when it has fallen enough |
//! | allow, 1 thread, time passed in (with `QuantaClock`; `governor`: 9.9) | 9.2 ns (10.8) | 35.9 ns (26.7): N = 10, a new slot every call | not measured |
//! | deny, 1 thread, time passed in (with `QuantaClock`; `governor`: 9.7) | 2.6 ns (9.6) | 14.7 ns (23.9): N = 10, head + summary | not measured |
//! | keyed, 10k keys, 1 thread: allow / deny (`governor`: 30 / 27) | 50 / 44 ns | 65 / 70 ns (N = 10) | not measured |
//! | a request of `n` units (`check_n`) | `O(n)`: a slot written per unit, each by a CAS (`check_n(4)`, time passed in: ~3x governor's) | `O(1)` | `O(1)` |
//! | limit up to | 2^20 per window | 2^24 - 1 | 2^24 - 1 |
//!
//! (Times from one criterion run, `cargo bench --bench single_thread` and
//! `--bench keyed`, on a noisy 2-core AMD EPYC VM whose clock read alone
//! costs 9.6 ns: compare within a column set, not across machines;
//! `BENCHMARKS.md` has the full runs.)
//!
//! Choose the exact log whenever `8 (L + 1)` bytes per key is affordable
//! (up to tens of thousands per window for many keys, a million for one);
//! the counter for huge limits, where a few percent of error is fine.
//! One key: both implement [`RateLimit`], so code can take either. Per key:
//! [`KeyedLimiter`] takes either as its [`Algorithm`](algorithm::Algorithm)
//! parameter, and the tower layer and `until_ready` work with both.
//!
//! # Migrating from governor
//!
//! | governor / tower_governor | slidelog |
//! |---|---|
//! | `RateLimiter::direct(Quota::per_second(nonzero!(10u32)))` | `Limiter::new(10, Duration::from_secs(1))?` |
//! | `RateLimiter::keyed(quota)` + `check_key(&key)` | `KeyedLimiter::<K>::new(10, Duration::from_secs(1))?` + `check(&key)` |
//! | `check()` → `Err(NotUntil)`, `wait_time_from(clock.now())` | `check()` → `Err(Denied)`, [`Denied::retry_after`] (exact, from the same reading); `Ok` also counts [`Admitted::remaining`] |
//! | `check()` → `Ok(())` when the count is not needed | [`Limiter::admit`] → `Ok(())` (the same decision, no count: the shortest path) |
//! | `check_n(n)` → `Err(InsufficientCapacity)` | `check_n(n)` → `Err(Denied)` with [`DenyReason::ExceedsLimit`]; [`Limiter::admit_n`] when the count is not needed |
//! | `RateLimiter::direct(..).with_middleware::<StateInformationMiddleware>()`, `check()` → `Ok(StateSnapshot)`, `remaining_burst_capacity()` | `check()` → [`Admitted::remaining`]; [`Limiter::check_n_with_growth`] also says when it grows (the IETF `RateLimit` `t`), from the same pass |
//! | `until_ready().await`, `until_key_ready(&k).await`, `until_n_ready(n)` | `until_ready().await`, `until_ready(&k).await` (a `Result`: a new key can be refused at the key cap), `until_n_ready(n)`, `until_n_ready_with_jitter(n, max)` |
//! | `retain_recent()`, `len()` | the same names; idle keys are also evicted automatically under memory pressure |
//! | `GovernorLayer` with `GovernorConfigBuilder::default().per_second(s).burst_size(b)` | [`tower::RateLimitLayer::new`](crate::tower)`(Arc::new(KeyedLimiter::<IpAddr>::new(b, ..)?), PeerIp::new())` |
//! | `PeerIpKeyExtractor` / `SmartIpKeyExtractor` | `PeerIp::new()` / `PeerIp::new().trust_forwarded()` (the rightmost untrusted address, not the leftmost: see "Behind proxies"; and `.ipv6_prefix(64)` for IPv6 clients) |
//!
//! The semantics differ in one way to know: governor's GCRA with
//! `Quota::per_second(10)` allows a burst of 10 and then one request every
//! 100 ms, smoothly; `Limiter::new(10, 1 s)` allows any 10 requests in any
//! one-second window, exactly (a burst of 10, then the next when the
//! oldest leaves the window). To keep GCRA's smooth spacing with a burst
//! allowance, stack two policies: a burst limit and a per-interval one.
//!
//! ```
//! use std::time::Duration;
//! use slidelog::{KeyedLimiter, Limiter, ManualClock};
//!
//! // governor: RateLimiter::direct(Quota::per_second(nonzero!(10u32)))
//! let limiter = Limiter::with_clock(10, Duration::from_secs(1), ManualClock::new())?;
//! for _ in 0..10 {
//!     assert!(limiter.check().is_ok());
//! }
//! // governor: Err(not_until) => not_until.wait_time_from(clock.now())
//! let denied = limiter.check().unwrap_err();
//! assert_eq!(denied.retry_after(), Duration::from_secs(1));
//!
//! // governor: RateLimiter::keyed(quota).check_key(&"alice")
//! let per_user = KeyedLimiter::<&'static str>::new(10, Duration::from_secs(1))?;
//! assert!(per_user.check(&"alice").is_ok());
//! assert_eq!(per_user.peek(&"alice").unwrap().remaining(), 8); // a dry run
//! # Ok::<(), slidelog::ConfigError>(())
//! ```
//!
//! # Behind proxies: which address is the client's
//!
//! A limiter keyed by client address is only as good as the address. The
//! connection's peer cannot be forged, but behind a reverse proxy it is
//! the proxy. Forwarding headers carry the client's address, and anyone
//! can write them: proxies **append** to `X-Forwarded-For` (nginx
//! `$proxy_add_x_forwarded_for`, cloud load balancers) and pass a
//! client-sent `Forwarded` through untouched, so a limiter that keys by the
//! leftmost entry, or reads `Forwarded` first, lets a client send
//! `X-Forwarded-For: <random>` and get a fresh key — and a fresh limit — on
//! every request. `tower::PeerIp` therefore ignores forwarding headers
//! unless told which proxies to trust, and then keys by the **rightmost
//! address no trusted proxy added** (nginx's `real_ip_recursive` rule):
//!
//! * nginx in front, appending `X-Forwarded-For`:
//!   `PeerIp::new().trust_forwarded()` (one trusted hop: the peer).
//! * A cloud load balancer, then nginx: `.trusted_hops(2)`; or, sturdier
//!   when some requests skip a proxy, the proxies' networks:
//!   `.trusted_network("10.0.0.0/8".parse()?)` for each.
//! * A proxy that sets `X-Real-IP` or RFC 7239 `Forwarded`:
//!   `.forwarded_by(ForwardedHeader::XRealIp)` (or `Forwarded`) with the
//!   same trust.
//!
//! Only the named header is read; a malformed chain keys by the peer. See
//! `tower::PeerIp` for the exact rule and examples (feature `tower`).
//!
//! # Cargo features
//!
//! None is on by default: the core alone (the ring, the keyed map, the
//! counter, the weighted log). The `slidelog` command is the package
//! `slidelog-cli` (`cargo install slidelog-cli`).
//!
//! * `serve`: [`serve`], an Envoy rate-limit service (gRPC
//!   `ShouldRateLimit`, envoyproxy/ratelimit's YAML) with exact sliding
//!   windows, in process or on Redis, to run or to mount in a tonic server
//!   of your own (pulls in tonic and Envoy's protos; implies `tower`,
//!   `redis`, `redis-tls`, `metrics`, `serde`).
//! * `async`: `until_ready()` / `until_n_ready(n)` on every limiter, sleeping
//!   exactly `retry_after` on tokio timers (cancel-safe).
//! * `tower`: [`tower::RateLimitLayer`](crate::tower), answering 429 with
//!   `Retry-After` and IETF `RateLimit` headers (implies `async`).
//! * `redis`: [`redis::RedisLimiter`](crate::redis), the same exact log on
//!   Redis, shared across processes (sorted set or ring layout).
//! * `redis-tls`: Redis over TLS, `rediss://` URLs (rustls on ring), with
//!   [`tls_root_cert`](crate::redis::RedisBuilder::tls_root_cert),
//!   [`tls_client_cert`](crate::redis::RedisBuilder::tls_client_cert) and
//!   [`tls_accept_invalid_hostnames`](crate::redis::RedisBuilder::tls_accept_invalid_hostnames)
//!   (implies `redis`).
//! * `tracing`: debug-level `tracing` events (target `slidelog`) for the
//!   denials the tower layer answers, sweeps that evict, new keys refused at
//!   the cap and failed Redis checks; never on the in-process check path
//!   (implied by `tower`).
//! * `metrics`: counters, gauges and a histogram through the `metrics`
//!   facade, one label set per family, each described, labelled by the
//!   `limiter` that emitted them (`name(..)` on the layer and builders):
//!   `slidelog_requests_total{limiter, decision}`,
//!   `slidelog_denials_total{limiter, reason, policy}`,
//!   `slidelog_keys_live{limiter}` (current on every insert and eviction),
//!   `slidelog_keys_evicted_total`, `slidelog_keys_refused_total`,
//!   `slidelog_redis_round_trips_total`, `slidelog_redis_local_denials_total`,
//!   `slidelog_redis_failures_total`, `slidelog_redis_round_trip_seconds`
//!   (see `examples/prometheus.rs`, which serves `/metrics`).
//! * `serde`: snapshot and restore (module `slidelog::snapshot`): a limiter's live
//!   admissions as a serde value, so a restart is not a free burst; and
//!   `Serialize`/`Deserialize` on [`Policy`].
//! * `axum`: the same as `tower` (which reads axum's `ConnectInfo<SocketAddr>`
//!   for `tower::PeerIp` itself).
//!
//! # Guarantees
//!
//! This is where the guarantees are stated; docs/design.md §5 says how each
//! is proven (by its label), and the README lists them in brief under the
//! same labels.
//!
//! * **P1, never over-admits**, under any interleaving of threads and any
//!   timestamps, including clocks that go backwards: every admission is
//!   recorded at an effective time ([`Admitted::at`]) and no window of length
//!   `W` holds more than `limit` of them. (Windows of the clock's time: in
//!   real time too with a clock consistent across cores, such as
//!   [`MonotonicClock`]; a TSC skewed by `S` between cores can add what `S`
//!   of clock time holds, see [`Clock`] and "Clocks" below.) Admission `k` claims slot `k mod L`
//!   of a ring only if admission `k - L` in that slot is at least `W` older —
//!   with one CAS, the linearization point.
//! * **P2, exact.** Called sequentially with non-decreasing time, every decision,
//!   every [`Admitted::remaining`] and every [`Denied::retry_after`] equals
//!   the classic sliding-window log (a deque of admitted timestamps, purged
//!   of entries at or before `t - W`). `retry_after` is exact: at
//!   `now + retry_after` the same request is admitted if nothing else is.
//! * **P3, never spuriously denies**: threads racing at one instant on `L` free
//!   slots admit exactly `L`.
//! * **P4, all or nothing**: [`Limiter::check_n`] takes `n` slots or none.
//! * **P5, keyed limiters, eviction included.** The same holds per key of a
//!   [`KeyedLimiter`] with no assumption on the callers' clock readings:
//!   evicting an idle key forgets its ring, so every keyed check is judged
//!   at `max(now, floor)`, where the *eviction floor* is raised by each sweep
//!   (before it closes a state) to the evicted state's newest deadline
//!   (`t_eff + W`; for a [`KeyedCounter`], the end of the newest admission's
//!   counted span). A caller whose reading predates an eviction is admitted
//!   at the floor ([`Admitted::at`] says so; `retry_after` still counts from
//!   its own reading), never next to the history it cannot see. The floor
//!   trails the limiter's clock by at least the idle margin, so callers
//!   with current readings never meet it. Sweeps judge idleness by the
//!   limiter's own [`Clock`], never by the reading of the call that
//!   triggered them: a reading from the future evicts nothing that is live
//!   at the present.
//! * **P6, linearizable**: every concurrent history equals some sequential order
//!   of the same calls fed to the reference model at their effective times.
//! * **P7, several policies, exactly.** A limiter built with
//!   [`Limiter::builder`]`(..).and(..)` (or [`KeyedBuilder::and`], or a
//!   per-key [`Quota`]) admits a request iff *every* policy `(L_i, W_i)`
//!   has room, against one log of effective times: the reference is the
//!   classic log checked once per policy. A request one policy refuses
//!   records nothing in the others (a chain of limiters leaks a unit
//!   there); `retry_after` is the longest wait over the violated policies,
//!   [`Denied::policy`] names that policy and [`Admitted::remaining`] is the
//!   least room over all of them. Everything above holds unchanged (the
//!   same loom models, with two policies and negative controls).
//! * **P8, progress.** A single-unit check ([`Limiter::check`]) and every
//!   denial are lock-free: a thread that finds another's admission half
//!   done (slot claimed, `head` not moved) finishes it instead of waiting.
//!   A weighted check (`n >= 2`) is lock-free against singles but waits for
//!   another *weighted* check on the same key that announced itself in
//!   `head` and has not committed its first slot yet (one announcement
//!   stands at a time): if that thread is descheduled between its two
//!   steps, other weighted checks on the key back off until it resumes or
//!   a single check takes the announced slot. Singles never wait.
//! * **P9, live reconfiguration keeps the history.** After
//!   [`Limiter::reconfigure`] (or [`KeyedLimiter::reconfigure`],
//!   [`KeyedLimiter::set_quota`], [`SlidingCounter::reconfigure`],
//!   `RedisLimiter::reconfigure`) returns, every check is judged entirely
//!   by the new policies — never a mix — over the admissions the old
//!   configuration kept and everything after; in process a cut keeps every
//!   admission still inside a window in force, so no sequence of changes
//!   lets a window hold more than the largest limit in force in it. A
//!   racing check is judged by exactly one of the two. Racing checks never
//!   wait for it (see "Changing limits at run time").
//! * **Denials record nothing**, and write only to finish another
//!   thread's half-done admission they meet (P8's helping): an overloaded
//!   key does not bounce its cache line between cores.
//!
//! These are checked by loom models of the shipped ring code (with negative
//! controls: deliberately broken variants that the same models catch), by
//! property tests against the reference model, and by real-thread stress
//! tests: docs/design.md §5 maps each label to its checks. Loom does not
//! cover `papaya` (real-thread stress tests do) nor real clocks (the ring
//! never reads one).
//!
//! # Clocks
//!
//! Time is nanoseconds from an arbitrary origin, as a `u64`, from a
//! [`Clock`]:
//!
//! * [`QuantaClock`] (the default) reads the calibrated TSC (10-15 ns);
//!   [`QuantaClock::recent`] reads a time updated by an upkeep thread instead
//!   (under 1 ns, at the upkeep interval's granularity).
//! * [`MonotonicClock`] reads the operating system's monotonic clock
//!   (20-25 ns), which the kernel keeps consistent across cores.
//! * [`ClockChoice::within`]`(bound)` measures how far the TSC steps back
//!   between cores ([`QuantaClock::measure_skew`]) and takes it if that is
//!   at most `bound`, else the monotonic clock (with the [`Skew`] that
//!   refused the TSC, to log). On a host whose cores' counters disagree,
//!   an admission on a lagging core leaves the window early for the others
//!   (see [`Clock`]).
//! * [`ManualClock`] moves only when told to: tests, simulations, replay.
//! * The in-process limiters take the time directly in their `_at` forms
//!   ([`Limiter::check_at`], `check_n_at`, `admit_at`, `admit_n_at`,
//!   `check_n_with_growth_at`, `peek_n_at`; the same on [`KeyedLimiter`],
//!   [`PinnedKeys`] and [`SlidingCounter`]), for callers that already hold
//!   a timestamp. The Redis limiter reads Redis `TIME` and has none.
//!
//! # Memory
//!
//! A limiter of limit `L` holds `L` slots of 8 bytes plus a small header: a
//! [`Limiter`] of `L = 100` is about 1 KiB (after a cut, up to the old
//! ring's slots while it carries admissions still in a window in force). A [`KeyedLimiter`] stores each
//! key's ring of `8 (L + 1)` bytes (8 more from `L = 64` on, for the
//! count's expiry hint; with several policies, 8 per policy) with about 56 bytes of map entry and table; up to
//! `L = 11` the ring lives inside the entry, one allocation per key
//! (measured: 144 bytes per key at `L = 10`; see
//! [`KeyedLimiter::bytes_per_key`]). Idle keys
//! are evicted without changing any decision for callers with current
//! clock readings (an older reading is judged at the eviction floor: P5),
//! and two caps bound the live keys: `max_keys` (default: what fits 256 MiB) and a byte budget,
//! [`KeyedBuilder::max_bytes`] (default 256 MiB), that counts each key's own
//! heap bytes ([`KeySize`]) beside its ring and map entry. So memory stays
//! below `max_bytes` plus the map's table slack (measured: 8,000 new
//! 64 KiB `String` keys against the default configuration peaked at
//! 256.04 MiB of heap, 4,042 admitted and the rest refused with
//! [`DenyReason::KeyCapacity`]) whatever the keys weigh: an attacker's long
//! keys fill the budget sooner, never past it. The tower layer's
//! `HeaderKey` keys header values longer than 256 bytes by a keyed 128-bit
//! digest, and the Redis backend refuses keys longer than 512 bytes.
//!
//! For limits in the millions per window, where 8 bytes per admission is too
//! much, use the approximate [`SlidingCounter`] instead, or per key a
//! [`KeyedCounter`] (`8 (N + 3)` bytes of state per key whatever the limit,
//! with the same eviction and `max_keys` cap).
//!
//! # Performance
//!
//! A [`Limiter`]'s admission is one CAS on the slot, plus one on `head`
//! once a lap or every 17th admission, whichever comes first (meanwhile a
//! verified guess beside `head` tells readers where the frontier is); a
//! [`KeyedLimiter`] state's is one
//! on the slot and one on `head`. An admission that loses that CAS to a
//! racing one pauses for about a microsecond before it looks again, so two
//! threads on one key take turns instead of trading cache lines on every
//! attempt. A denial records nothing and only loads (it writes only to
//! finish another thread's half-done admission it meets). A [`Limiter`] under
//! one policy denies one unit (`check`, `admit`) from the guess and three
//! slot reads, with no `head` at all (the slots' stamps prove the
//! frontier), whenever the guess checks out; every other denial — a keyed
//! state's (which keeps no guess), a weighted request's, a peek's, one
//! under several policies, one whose guess does not check out — reads the
//! view at `head` (`head`, the slots, `head` again). `check` also counts
//! `remaining` exactly (a few more loads when the window holds live
//! admissions); `admit` decides the same without counting. No lock, no
//! allocation and no division on any check (the ring index is laid out in
//! mixed radix: `lap << bits | position`). See `BENCHMARKS.md`
//! for measurements against `governor` and a `Mutex<VecDeque>` log.

#![cfg_attr(docsrs, feature(doc_cfg))]
// Links to the feature-gated modules (`tower`, `redis`, `snapshot`) resolve
// in the documented build (all features: docs.rs, and CI with `-D
// warnings`); a `cargo doc` without those features would only warn.
#![cfg_attr(
    not(all(feature = "tower", feature = "redis", feature = "serde")),
    allow(rustdoc::broken_intra_doc_links)
)]

pub mod algorithm;
#[cfg(not(slidelog_loom))]
mod backend;
mod clock;
mod config;
mod counter;
mod decision;
mod error;
mod flaw;
mod floor;
mod grace;
mod key_size;
#[cfg(not(slidelog_loom))]
mod keyed;
mod limiter;
mod link;
#[cfg(not(slidelog_loom))]
mod observe;
mod policy;
mod quota;
#[cfg(all(feature = "redis", not(slidelog_loom)))]
pub mod redis;
mod ring;
#[cfg(all(feature = "serve", not(slidelog_loom)))]
pub mod serve;
#[cfg(feature = "serde")]
pub mod snapshot;
mod sync;
#[cfg(all(feature = "tower", not(slidelog_loom)))]
pub mod tower;
#[cfg(all(feature = "async", not(slidelog_loom)))]
mod wait;
pub mod weighted;

pub use crate::algorithm::RateLimit;
#[cfg(not(slidelog_loom))]
pub use crate::backend::{Backend, Request, Verdict};
pub use crate::clock::{Clock, ClockChoice, ManualClock, MonotonicClock, QuantaClock, Upkeep};
#[cfg(not(slidelog_loom))]
pub use crate::clock::{PairSkew, Skew, SkewReport};
pub use crate::config::{MAX_LIMIT, MAX_WINDOW};
pub use crate::counter::{CounterMode, MAX_COUNTER_LIMIT, MAX_SLOTS, SlidingCounter};
pub use crate::decision::{Admitted, DecidedBy, Denied, DenyReason, PolicySet, PolicyStates};
pub use crate::error::ConfigError;
pub use crate::key_size::KeySize;
#[cfg(not(slidelog_loom))]
pub use crate::keyed::{KeyedBuilder, KeyedCounter, KeyedLimiter, PinnedKeys};
pub use crate::limiter::{Limiter, LimiterBuilder};
pub use crate::policy::{MAX_POLICIES, Policy};
pub use crate::quota::Quota;

#[cfg(slidelog_loom)]
#[doc(hidden)]
pub mod loom_hooks {
    //! Only under `--cfg slidelog_loom`: the deliberately broken variants.
    pub use crate::flaw::Flaw;
    pub use crate::floor::Floor;
    pub use crate::grace::{Entered, Grace};
    pub use crate::limiter::Swept;
}

/// The README's Rust blocks, compiled and run as doc tests (with the
/// features their examples use).
#[cfg(all(doctest, feature = "tower", feature = "redis"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

#[cfg(all(test, not(slidelog_loom)))]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn limiters_are_send_and_sync() {
        assert_send_sync::<Limiter>();
        assert_send_sync::<Limiter<ManualClock>>();
        assert_send_sync::<KeyedLimiter<u64>>();
        assert_send_sync::<KeyedLimiter<String, ManualClock>>();
        assert_send_sync::<KeyedCounter<String, ManualClock>>();
        assert_send_sync::<SlidingCounter>();
    }
}

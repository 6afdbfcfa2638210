//! Shared by the loom models: the reference model of docs/design.md §1 and the
//! checks run on every interleaving's results.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use slidelog::loom_hooks::{Flaw, Floor};
use slidelog::{Admitted, Denied, Limiter, ManualClock, SlidingCounter};

/// A shared limiter of several policies `(limit, window ns)` on a manual
/// clock, built with the given (possibly broken) protocol variant.
pub fn multi_limiter(policies: &[(u32, u64)], flaw: Flaw) -> Arc<Limiter<ManualClock>> {
    Arc::new(Limiter::with_flaw_policies(policies, ManualClock::new(), flaw).unwrap())
}

/// P1 for every policy: no window of any policy holds more than its limit.
pub fn assert_no_over_admission_policies(calls: &[Call], policies: &[(u32, u64)]) {
    for &(limit, window) in policies {
        assert_no_over_admission(calls, limit, window);
    }
}

/// The expiry hint's models (one policy in `linearizable.rs`, several in
/// `policies.rs`): admissions at these times first, so that six expire at
/// 10 for a 10 ns window while the one at 8 stays.
pub const HINT_PREFIX: [u64; 7] = [0, 0, 0, 0, 0, 0, 8];

/// The limiter of `policies` (one, or several) with protocol variant `flaw`,
/// [`HINT_PREFIX`] admitted.
fn hinted(policies: &[(u32, u64)], flaw: Flaw) -> Arc<Limiter<ManualClock>> {
    let limiter = match policies {
        &[(limit, window)] => self::limiter(limit, window, flaw),
        _ => multi_limiter(policies, flaw),
    };
    for t in HINT_PREFIX {
        limiter.check_at(t).unwrap();
    }
    limiter
}

/// A peek at 12 racing an admission at 9 after [`HINT_PREFIX`]: the
/// admission is linearizable however the peek's count stores (or, rightly,
/// does not store) the expiry hints.
pub fn hint_race(policies: &'static [(u32, u64)], flaw: Flaw) {
    explore(2, move || {
        let limiter = hinted(policies, flaw);
        let tickets = Tickets::new();
        let peeker = {
            let (l, tickets) = (Arc::clone(&limiter), tickets.clone());
            loom::thread::spawn(move || vec![tickets.call(12, 1, || l.peek_n_at(1, 12))])
        };
        let admitter = {
            let (l, tickets) = (Arc::clone(&limiter), tickets.clone());
            loom::thread::spawn(move || vec![tickets.call(9, 1, || l.check_at(9))])
        };
        let mut results = vec![peeker.join().unwrap(), admitter.join().unwrap()];
        // The peek recorded nothing: judge only the admission.
        results.remove(0);
        assert_linearizable_policies(&results, policies, &HINT_PREFIX);
    });
}

/// Two admitters after [`HINT_PREFIX`], at 9 and at 10 then 17, each
/// reading and writing the expiry hints: linearizable in every
/// interleaving, across the moment (10) the six admissions at 0 leave a
/// 10 ns window.
pub fn hint_admitters(policies: &'static [(u32, u64)], flaw: Flaw) {
    explore(2, move || {
        let limiter = hinted(policies, flaw);
        let tickets = Tickets::new();
        let spawn = |times: &'static [u64]| {
            let (l, tickets) = (Arc::clone(&limiter), tickets.clone());
            loom::thread::spawn(move || {
                times
                    .iter()
                    .map(|&t| tickets.call(t, 1, || l.check_at(t)))
                    .collect::<Vec<Call>>()
            })
        };
        let a = spawn(&[9]);
        let b = spawn(&[10, 17]);
        let results = vec![a.join().unwrap(), b.join().unwrap()];
        assert_linearizable_policies(&results, policies, &HINT_PREFIX);
    });
}

/// A shared limiter of `limit` per `window` ns on a manual clock, built with
/// the given (possibly broken) protocol variant.
pub fn limiter(limit: u32, window: u64, flaw: Flaw) -> Arc<Limiter<ManualClock>> {
    Arc::new(
        Limiter::with_flaw(
            limit,
            Duration::from_nanos(window),
            ManualClock::new(),
            flaw,
        )
        .unwrap(),
    )
}

/// A limiter whose singles always take the general path (the lazy-head
/// scan): the races of a lazy head then arise between two threads (with the
/// fast path, a single moves head right after its claim, and the same
/// races need a third thread, beyond what loom can explore in minutes).
#[allow(dead_code)]
pub fn limiter_general(limit: u32, window: u64, flaw: Flaw) -> Arc<Limiter<ManualClock>> {
    Arc::new(
        Limiter::with_flaw_general(
            limit,
            Duration::from_nanos(window),
            ManualClock::new(),
            flaw,
        )
        .unwrap(),
    )
}

/// Runs `f` under loom with exactly `preemptions` pre-emptions, whatever
/// `LOOM_MAX_PREEMPTIONS` says: for three-thread models, which do not finish
/// in CI's time at three.
pub fn explore_exactly<F>(preemptions: usize, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder.check(f);
}

/// Runs `f` under loom with at least `min_preemptions` pre-emptions
/// (`LOOM_MAX_PREEMPTIONS` when larger). The lazy head's races need three:
/// a thread pre-empted between two slot loads while another completes two
/// checks, counted the way loom counts switches (the negative control of the
/// torn weighted view is caught at three, not at two).
pub fn explore<F>(min_preemptions: usize, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(
        builder
            .preemption_bound
            .map_or(min_preemptions, |p| p.max(min_preemptions)),
    );
    builder.check(f);
}

/// One call a thread made and what it got, with its real-time interval:
/// `start` and `end` are tickets from one shared counter ([`Tickets`]),
/// taken just before the call and just after it returned (0 and
/// `usize::MAX` when the model does not track real time).
#[derive(Clone, Copy, Debug)]
pub struct Call {
    pub now: u64,
    pub n: u32,
    pub result: Result<Admitted, Denied>,
    pub start: usize,
    pub end: usize,
}

impl Call {
    /// A call with no real-time interval.
    pub fn untimed(now: u64, n: u32, result: Result<Admitted, Denied>) -> Call {
        Call {
            now,
            n,
            result,
            start: 0,
            end: usize::MAX,
        }
    }
}

/// A shared ticket counter that orders calls in real time: a call that
/// returned before another started has a smaller `end` than the other's
/// `start` (SeqCst read-modify-writes on one word form one total order
/// consistent with happens-before).
#[derive(Clone)]
pub struct Tickets(Arc<loom::sync::atomic::AtomicUsize>);

impl Tickets {
    pub fn new() -> Self {
        Tickets(Arc::new(loom::sync::atomic::AtomicUsize::new(1)))
    }

    fn take(&self) -> usize {
        self.0.fetch_add(1, loom::sync::atomic::Ordering::SeqCst)
    }

    /// Runs `f` (a call of `n` units at `now`) between two tickets.
    pub fn call(&self, now: u64, n: u32, f: impl FnOnce() -> Result<Admitted, Denied>) -> Call {
        let start = self.take();
        let result = f();
        let end = self.take();
        Call {
            now,
            n,
            result,
            start,
            end,
        }
    }
}

/// The classic log with one or more policies (the test oracle): the same
/// model the property tests use.
#[path = "../../../tests/common/multi.rs"]
mod multi;

use multi::{MultiModel, observed_multi};

/// P1: no window of length `window` holds more than `limit` of the admitted
/// `at()` times (one per unit).
pub fn assert_no_over_admission(calls: &[Call], limit: u32, window: u64) {
    let mut times: Vec<u64> = calls
        .iter()
        .filter_map(|c| c.result.ok().map(|a| (a.at(), c.n)))
        .flat_map(|(t, n)| std::iter::repeat_n(t, n as usize))
        .collect();
    times.sort_unstable();
    let mut lo = 0;
    for hi in 0..times.len() {
        while times[lo] + window <= times[hi] {
            lo += 1;
        }
        assert!(
            hi - lo < limit as usize,
            "over-admission: {} admissions in a window of {window} ns (limit {limit}): {times:?}",
            hi - lo + 1
        );
    }
}

/// Linearizability: some interleaving of the threads' calls, in program order
/// per thread and in real-time order (a call that returned before another
/// started comes first, see [`Tickets`]), fed to the model at each call's
/// effective time (its `now`, clamped to the newest admission so far),
/// reproduces every decision, every `at()`, every `remaining()` and every
/// absolute retry time (`now + retry_after`).
pub fn assert_linearizable(threads: &[Vec<Call>], limit: u32, window: u64, prefix: &[u64]) {
    assert_linearizable_policies(threads, &[(limit, window)], prefix);
}

/// [`assert_linearizable`] for a limiter of several policies: also every
/// reported policy index ([`Admitted::policy`], [`Denied::policy`]).
pub fn assert_linearizable_policies(
    threads: &[Vec<Call>],
    policies: &[(u32, u64)],
    prefix: &[u64],
) {
    let mut cursor = vec![0; threads.len()];
    let mut model = MultiModel::with_prefix(policies, prefix);
    let total: usize = threads.iter().map(Vec::len).sum();
    assert!(
        search(threads, &mut cursor, &mut model, total),
        "no sequential order explains {threads:#?}"
    );
}

fn search(
    threads: &[Vec<Call>],
    cursor: &mut [usize],
    model: &mut MultiModel,
    left: usize,
) -> bool {
    if left == 0 {
        return true;
    }
    for t in 0..threads.len() {
        let Some(call) = threads[t].get(cursor[t]) else {
            continue;
        };
        // Real time: no pending call of another thread returned before this
        // one started (each thread's own calls are in order already).
        let overtakes = (0..threads.len())
            .filter(|&u| u != t)
            .filter_map(|u| threads[u].get(cursor[u]))
            .any(|other| other.end < call.start);
        if overtakes {
            continue;
        }
        let saved = model.clone();
        // The model judges the call at its effective time (`now` clamped to
        // the newest admission) and must give the same decision, `at()`,
        // `remaining()`, absolute retry time and policy.
        if model.decide(call.now, call.n) == observed_multi(call.now, call.result) {
            cursor[t] += 1;
            if search(threads, cursor, model, left - 1) {
                return true;
            }
            cursor[t] -= 1;
        }
        *model = saved;
    }
    false
}

/// Admitted units in a list of calls.
pub fn admitted_units(calls: &[Call]) -> u32 {
    calls.iter().filter(|c| c.result.is_ok()).map(|c| c.n).sum()
}

/// A key's state that the keyed map can evict: the exact ring (through
/// [`Limiter`]) or the counter (through [`SlidingCounter`]).
pub trait Evictable: Send + Sync + 'static {
    /// One unit at `now`, judged no earlier than the floor as a keyed
    /// limiter does; `None` if the state was closed for eviction.
    fn try_check_at(&self, now: u64, floor: &Floor) -> Option<Result<Admitted, Denied>>;
    /// Closes the state if idle at `now` with `margin`, raising `floor`.
    fn close_if_idle(&self, now: u64, margin: u64, floor: &Floor) -> bool;
}

impl Evictable for Limiter<ManualClock> {
    fn try_check_at(&self, now: u64, floor: &Floor) -> Option<Result<Admitted, Denied>> {
        self.try_check_n_at(1, now, floor)
    }
    fn close_if_idle(&self, now: u64, margin: u64, floor: &Floor) -> bool {
        Limiter::close_if_idle(self, now, margin, floor)
    }
}

impl Evictable for SlidingCounter<ManualClock> {
    fn try_check_at(&self, now: u64, floor: &Floor) -> Option<Result<Admitted, Denied>> {
        self.try_check_n_at(1, now, floor)
    }
    fn close_if_idle(&self, now: u64, margin: u64, floor: &Floor) -> bool {
        SlidingCounter::close_if_idle(self, now, margin, floor)
    }
}

/// One key of the keyed map, modelled (papaya itself is not loom-aware;
/// real-thread stress tests cover it): a generation word choosing between
/// the key's old state and its replacement, and the limiter's eviction
/// floor.
pub struct KeyMap<T> {
    states: [T; 2],
    current: loom::sync::atomic::AtomicUsize,
    floor: Floor,
}

impl<T: Evictable> KeyMap<T> {
    pub fn new(states: [T; 2]) -> Arc<Self> {
        Arc::new(KeyMap {
            states,
            current: loom::sync::atomic::AtomicUsize::new(0),
            floor: Floor::new(),
        })
    }

    /// The evictor: closes the old state at 25 (margin 10), raising the
    /// floor, then publishes the new one (the map's removal).
    pub fn evict(&self) {
        use loom::sync::atomic::Ordering;
        if self.states[0].close_if_idle(25, 10, &self.floor) {
            // Release pairs with the admitters' Acquire loads.
            let _ = self
                .current
                .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// An admitter at `now`, as the keyed limiter does: a state found closed
    /// is replaced in the "map" (remove it, insert a fresh one; whoever
    /// comes first wins) and the key looked up again.
    pub fn admit(&self, now: u64) -> Result<Admitted, Denied> {
        use loom::sync::atomic::Ordering;
        loop {
            // Acquire pairs with the publication in `evict`.
            let g = self.current.load(Ordering::Acquire);
            match self.states[g].try_check_at(now, &self.floor) {
                Some(result) => return result,
                None => {
                    let _ =
                        self.current
                            .compare_exchange(g, 1, Ordering::AcqRel, Ordering::Acquire);
                }
            }
        }
    }

    /// The key's current state checked at `now`.
    pub fn check_current(&self, now: u64) -> Option<Result<Admitted, Denied>> {
        let g = self.current.load(loom::sync::atomic::Ordering::Acquire);
        self.states[g].try_check_at(now, &self.floor)
    }
}

/// P5, the keyed map's eviction handshake over two states of one key
/// ([`KeyMap`]): the evictor closes the old state at 25 (margin 10), then
/// publishes the new one; two admitters at 25 that find the old one closed
/// publish it themselves (first one wins) and look again.
///
/// `make` returns (old, new) for a limit of 1, the old one holding one unit
/// at 0 that has left the window by 15. Exactly one admitter succeeds, and
/// its admission is visible to the key's current state at 26.
pub fn evict_while_admitting<T: Evictable>(make: impl Fn() -> [T; 2] + Send + Sync + 'static) {
    use loom::thread;
    loom::model(move || {
        let map = KeyMap::new(make());
        let admit = |now: u64| {
            let map = Arc::clone(&map);
            thread::spawn(move || map.admit(now).is_ok())
        };
        let evictor = {
            let map = Arc::clone(&map);
            thread::spawn(move || map.evict())
        };
        let a = admit(25);
        let b = admit(25);
        evictor.join().unwrap();
        let admitted = [a.join().unwrap(), b.join().unwrap()];
        assert_eq!(
            admitted.iter().filter(|&&x| x).count(),
            1,
            "duplicated or lost: {admitted:?}"
        );
        // The admission at 25 must be visible to the key's current state.
        assert!(
            map.check_current(26).is_some_and(|r| r.is_err()),
            "lost admission: the current state admits again at 26"
        );
    });
}

/// The eviction floor (P5): a caller whose clock reading (`stale`)
/// predates an eviction reaches the key only after the evictor closed the
/// old state (at 25, margin 10) and a fresh one replaced it. The old state
/// (limit 1) holds one admission at 0. Whatever the interleaving, the
/// admissions' effective times — the one at 0 and the stale caller's, on
/// whichever state it lands — satisfy `within_limit(times)` (the log: no
/// two within the window; the counter: no two in one slot).
pub fn stale_reader_across_eviction<T: Evictable>(
    make: impl Fn() -> [T; 2] + Send + Sync + 'static,
    stale: u64,
    within_limit: fn(&[u64]) -> bool,
) {
    use loom::thread;
    loom::model(move || {
        let map = KeyMap::new(make());
        let evictor = {
            let map = Arc::clone(&map);
            thread::spawn(move || map.evict())
        };
        let admitter = {
            let map = Arc::clone(&map);
            thread::spawn(move || map.admit(stale))
        };
        evictor.join().unwrap();
        let result = admitter.join().unwrap();
        let mut times = vec![0];
        if let Ok(admitted) = result {
            times.push(admitted.at());
        }
        assert!(
            within_limit(&times),
            "over-admission across the eviction: effective times {times:?}"
        );
    });
}

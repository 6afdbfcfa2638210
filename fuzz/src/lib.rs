//! The fuzz targets' bodies: each takes libFuzzer's bytes, drives one of
//! slidelog's untrusted inputs with them, and checks what must hold for
//! every input (no panic, and the property named on each).
//!
//! `slidelog serve`'s parsers are the library's (`slidelog::serve`, some
//! of them `#[doc(hidden)]` for these targets); `slidelog replay`'s input
//! reader is the binary package's (`slidelog_cli::input`, doc-hidden).

#![allow(dead_code)]

use slidelog::serve;
use slidelog::serve::parse;
use slidelog_cli::input;

/// The reference model of docs/design.md §1 (the tests' own).
#[path = "../../tests/common/multi.rs"]
mod multi;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use libfuzzer_sys::arbitrary::{Arbitrary, Result as ArbitraryResult, Unstructured};
use slidelog::snapshot::{Anchor, KeyAdmissions, KeyedSnapshot, Snapshot};
use slidelog::tower::{ForwardedHeader, IpNet, KeyExtractor, PeerIp};
use slidelog::{KeyedLimiter, Limiter, ManualClock};

/// `slidelog serve`'s configuration file: any text is refused with a
/// message or parsed, never a panic; a parsed tree answers any lookup.
pub fn serve_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match serve::Config::from_yaml(text) {
        Ok(config) => {
            let domain = config.domains().next().expect("one domain").to_owned();
            // Look up the paths the file's own words spell.
            let words: Vec<String> = text
                .split(|c: char| c.is_whitespace() || c == ':' || c == ',')
                .take(8)
                .map(str::to_string)
                .collect();
            for pair in words.chunks(2) {
                let entries = vec![(pair[0].clone(), pair.get(1).cloned().unwrap_or_default())];
                let _ = config.matches(&domain, &entries);
            }
        }
        Err(message) => assert!(!message.is_empty(), "an empty error for {text:?}"),
    }
}

/// What users type for a duration or a policy (`250ms`, `100/1m`: the
/// command line's flags, and `window:` in `slidelog serve`'s config): any
/// text is refused with a message or parsed, and what is parsed is shown
/// as text that parses back to the same value.
pub fn durations(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse::duration(text) {
        Ok(d) => {
            let shown = parse::show_duration(d);
            assert_eq!(
                parse::duration(&shown),
                Ok(d),
                "{text:?} shown as {shown:?}"
            );
            assert_eq!(parse::window(text).is_ok(), !d.is_zero());
        }
        Err(message) => {
            assert!(!message.is_empty());
            assert!(parse::window(text).is_err());
        }
    }
    if let Ok(policy) = parse::policy(text) {
        let shown = policy.to_string();
        assert_eq!(
            parse::policy(&shown),
            Ok(policy),
            "{text:?} shown as {shown:?}"
        );
        assert!(policy.limit >= 1 && !policy.window.is_zero());
    }
}

/// A descriptor as the key encoding sees it.
#[derive(Debug, PartialEq, Eq)]
struct Descriptor {
    domain: String,
    entries: Vec<(String, String)>,
    over: Option<(u32, serve::Unit)>,
}

impl<'a> Arbitrary<'a> for Descriptor {
    fn arbitrary(u: &mut Unstructured<'a>) -> ArbitraryResult<Self> {
        let units = serve::Unit::ALL;
        let over = Option::<(u32, u8)>::arbitrary(u)?
            .map(|(requests, unit)| (requests, units[usize::from(unit) % units.len()]));
        Ok(Descriptor {
            domain: String::arbitrary(u)?,
            entries: Vec::arbitrary(u)?,
            over,
        })
    }
}

impl Descriptor {
    fn key(&self) -> String {
        serve::key::encode(&self.domain, &self.entries, self.over)
    }
}

/// `slidelog serve`'s `POST /json` body: any bytes are read as a request
/// or refused with a message naming where, never a panic; a request read
/// is answered, as the service would answer it, with JSON that reads back.
pub fn serve_json(data: &[u8]) {
    match serve::json::request(data) {
        Ok(request) => {
            // Echo what was read as a response's statuses: the printer
            // takes any values the reader let through.
            use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
            use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
                DescriptorStatus, RateLimit,
            };
            let statuses = request
                .descriptors
                .iter()
                .map(|d| DescriptorStatus {
                    code: d.limit.map_or(0, |l| l.unit),
                    current_limit: d.limit.map(|l| RateLimit {
                        name: request.domain.clone(),
                        requests_per_unit: l.requests_per_unit,
                        unit: l.unit,
                    }),
                    limit_remaining: request.hits_addend,
                    ..Default::default()
                })
                .collect();
            let response = RateLimitResponse {
                overall_code: i32::try_from(request.hits_addend).unwrap_or(-1),
                statuses,
                ..Default::default()
            };
            let text = serve::json::response(&response).to_string();
            let back: serde_json::Value =
                serde_json::from_str(&text).expect("the printer writes JSON");
            // A status each (the list left out only when empty), and each
            // limit's count as read.
            let printed = back["statuses"].as_array().cloned().unwrap_or_default();
            assert_eq!(printed.len(), request.descriptors.len(), "{text}");
            for (status, d) in printed.iter().zip(&request.descriptors) {
                let rpu = d.limit.map_or(0, |l| l.requests_per_unit);
                let shown = status["currentLimit"]["requestsPerUnit"]
                    .as_u64()
                    .unwrap_or(0);
                assert_eq!(shown, u64::from(rpu), "{text}");
            }
        }
        Err(message) => assert!(!message.is_empty()),
    }
}

/// `slidelog serve`'s limiter keys, built from a client's descriptor
/// entries: a key reads back as exactly what was written, two descriptors
/// share a key only if they are equal, and any other string is no key or
/// its own.
pub fn serve_key(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data)
        && let Some(d) = serve::key::decode(text)
    {
        let back = serve::key::encode(&d.domain, &d.entries, d.over);
        assert_eq!(back, text, "{d:?} read from a string it does not write");
    }
    let mut u = Unstructured::new(data);
    let (Ok(a), Ok(b)) = (Descriptor::arbitrary(&mut u), Descriptor::arbitrary(&mut u)) else {
        return;
    };
    let key = a.key();
    let decoded = serve::key::decode(&key).expect("a written key reads back");
    assert_eq!(
        (&decoded.domain, &decoded.entries, decoded.over),
        (&a.domain, &a.entries, a.over)
    );
    assert_eq!(key == b.key(), a == b, "{a:?} and {b:?}");
}

/// `slidelog replay`'s input in every format: any bytes are read as
/// requests or refused line by line with a message naming the line, never
/// a panic; each request's time is parsed or refused; and no message
/// shows the log's control characters or direction overrides raw.
pub fn replay_input(data: &[u8]) {
    let Some((&choice, input)) = data.split_first() else {
        return;
    };
    let format = match choice % 3 {
        0 => input::InputFormat::Csv,
        1 => input::InputFormat::Tsv,
        _ => input::InputFormat::Combined,
    };
    let delimiter = if format == input::InputFormat::Tsv {
        b'\t'
    } else {
        b','
    };
    let columns = input::Columns {
        time: (choice & 4 != 0 && format != input::InputFormat::Combined).then(|| "time".into()),
        key: (choice & 8 != 0).then(|| {
            if format == input::InputFormat::Combined {
                "user"
            } else {
                "key"
            }
            .into()
        }),
        no_header: choice & 16 != 0,
    };
    let clock = input::Clock {
        unit: None,
        tz: jiff::tz::TimeZone::UTC,
        tz_name: "UTC".into(),
    };
    let Ok(mut requests) = input::Requests::open(input, format, delimiter, &columns) else {
        return;
    };
    // Each call moves past at least one line, or fails again on the line it
    // failed on (which `replay` takes as the end); a bound against a loop
    // that never ends.
    let mut last_error = None;
    for _ in 0..=input.len() + 1 {
        match requests.next_request(&columns) {
            Ok(Some(request)) => {
                assert!(request.line >= 1);
                if let Err(message) = clock.parse(&request.time) {
                    assert!(
                        !message.contains(input::is_hidden),
                        "a timestamp's error shows it raw: {message:?}"
                    );
                }
            }
            Ok(None) => return,
            Err(message) => {
                assert!(
                    !message.contains(input::is_hidden),
                    "an error shows the log's text raw: {message:?}"
                );
                let line = message
                    .strip_prefix("line ")
                    .and_then(|rest| rest.split([':', ',']).next())
                    .and_then(|n| n.parse::<u64>().ok());
                // An error for the whole input, or the same line again, ends
                // the read.
                if line.is_none() || line == last_error {
                    return;
                }
                last_error = line;
            }
        }
    }
    panic!("more requests than lines in {} bytes", input.len());
}

/// An address from two fuzz bytes' worth of choice.
fn address(u: &mut Unstructured<'_>) -> ArbitraryResult<IpAddr> {
    Ok(if bool::arbitrary(u)? {
        IpAddr::V4(Ipv4Addr::from(u32::arbitrary(u)?))
    } else {
        IpAddr::V6(Ipv6Addr::from(u128::arbitrary(u)?))
    })
}

/// How a proxy writes the address it saw.
fn node(header: ForwardedHeader, ip: IpAddr) -> String {
    match (header, ip) {
        (ForwardedHeader::XForwardedFor, ip) => ip.to_string(),
        (_, IpAddr::V4(v4)) => format!("for={v4}"),
        (_, IpAddr::V6(v6)) => format!("for=\"[{v6}]\""),
    }
}

/// The request an application behind `proxies` sees: the client's own
/// forwarding lines (any bytes a header value may hold), then each proxy
/// appending the address it received from, into the last line or as a
/// line of its own.
fn forwarded_request(
    header: ForwardedHeader,
    client_lines: &[Vec<u8>],
    client: IpAddr,
    proxies: &[IpAddr],
    own_lines: bool,
) -> Option<http::Request<()>> {
    let name = match header {
        ForwardedHeader::XForwardedFor => "x-forwarded-for",
        _ => "forwarded",
    };
    let mut lines: Vec<Vec<u8>> = client_lines.to_vec();
    let mut from = client;
    for &proxy in proxies {
        let entry = node(header, from).into_bytes();
        match lines.last_mut() {
            Some(last) if !own_lines => {
                last.extend_from_slice(b", ");
                last.extend_from_slice(&entry);
            }
            _ => lines.push(entry),
        }
        from = proxy;
    }
    let mut request = http::Request::new(());
    for line in lines {
        let value = http::HeaderValue::from_bytes(&line).ok()?;
        request.headers_mut().append(name, value);
    }
    request.extensions_mut().insert(SocketAddr::new(from, 443));
    Some(request)
}

/// `ip` as `PeerIp::ipv6_prefix(prefix)` keys it.
fn masked(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u32::from(prefix.min(128));
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - bits)
            };
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
        }
        v4 => v4,
    }
}

/// `tower::PeerIp` behind trusted proxies: whatever bytes a client puts in
/// its own forwarding header, its key is the address the first proxy saw
/// (masked as configured), never anything the client wrote; and any
/// header lines at all give a key without a panic.
pub fn forwarded(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(()) = forwarded_inner(&mut u) else {
        return;
    };
}

fn forwarded_inner(u: &mut Unstructured<'_>) -> ArbitraryResult<()> {
    let header = if bool::arbitrary(u)? {
        ForwardedHeader::XForwardedFor
    } else {
        ForwardedHeader::Forwarded
    };
    let client_lines: Vec<Vec<u8>> = Vec::arbitrary(u)?;
    let client = address(u)?;
    let proxies: Vec<IpAddr> = (0..u.int_in_range(1..=3)?)
        .map(|_| address(u))
        .collect::<ArbitraryResult<_>>()?;
    let own_lines = bool::arbitrary(u)?;
    let by_network = bool::arbitrary(u)?;
    let prefix = u.int_in_range(0..=128)?;
    let mut peer_ip = PeerIp::new().forwarded_by(header).ipv6_prefix(prefix);
    if by_network {
        for &proxy in &proxies {
            // A proxy's own address, as a /32 or /128 network.
            peer_ip = peer_ip.trusted_network(IpNet::from(proxy));
        }
    } else {
        peer_ip = peer_ip.trusted_hops(proxies.len() as u8);
    }
    let Some(request) = forwarded_request(header, &client_lines, client, &proxies, own_lines)
    else {
        return Ok(());
    };
    let key = KeyExtractor::<()>::extract(&peer_ip, &request).expect("a peer address");
    // The key of `client` alone: the same chain with no client bytes.
    let alone = forwarded_request(header, &[], client, &proxies, own_lines).expect("valid lines");
    let expected = KeyExtractor::<()>::extract(&peer_ip, &alone).expect("a peer address");
    let client_is_a_proxy = by_network
        && proxies
            .iter()
            .any(|p| p.to_canonical() == client.to_canonical());
    if !client_is_a_proxy {
        assert_eq!(
            expected,
            masked(client, prefix),
            "the chain alone: {header:?}, client {client}, proxies {proxies:?}, own lines \
             {own_lines}, by network {by_network}, prefix {prefix}"
        );
        assert_eq!(
            key, expected,
            "the client's own bytes {client_lines:?} chose its key"
        );
    }
    // Raw lines with no chain around them: any key, no panic.
    let mut raw = http::Request::new(());
    for line in &client_lines {
        if let Ok(value) = http::HeaderValue::from_bytes(line) {
            raw.headers_mut().append("x-forwarded-for", value.clone());
            raw.headers_mut().append("forwarded", value);
        }
    }
    raw.extensions_mut().insert(SocketAddr::new(proxies[0], 80));
    let _ = KeyExtractor::<()>::extract(&peer_ip, &raw);
    Ok(())
}

/// A snapshot file is untrusted input: any bytes are refused with an error
/// or restored, and a restored history never lets a window hold more than
/// its limit.
pub fn snapshot(data: &[u8]) {
    let _ = serde_json::from_slice::<Snapshot>(data);
    let _ = serde_json::from_slice::<KeyedSnapshot<String>>(data);
    let mut u = Unstructured::new(data);
    let Ok((limit, window, times, keys, anchor)) =
        <(u8, u32, Vec<u64>, Vec<u8>, (u64, u64))>::arbitrary(&mut u)
    else {
        return;
    };
    let limit = u32::from(limit % 16) + 1;
    let window = Duration::from_nanos(u64::from(window) + 1);
    let anchor = Anchor::new(anchor.0, anchor.1);
    let clock = ManualClock::new();
    clock.set(anchor.clock_nanos);
    let mut one = Limiter::builder(limit, window)
        .clock(clock.clone())
        .build()
        .unwrap();
    let snapshot = Snapshot {
        version: slidelog::snapshot::SNAPSHOT_VERSION,
        taken_at_unix_nanos: anchor.unix_nanos,
        policies: Vec::new(),
        generation: 0,
        admissions: times.clone(),
    };
    if one.restore_at(&snapshot, anchor).is_ok() {
        let admitted = (0..=limit)
            .filter(|_| one.check_at(anchor.clock_nanos).is_ok())
            .count();
        assert!(
            admitted as u32 <= limit,
            "{admitted} admitted under a limit of {limit}"
        );
    }
    let mut keyed = KeyedLimiter::<u8, ManualClock>::with_clock(limit, window, clock).unwrap();
    let keyed_snapshot = KeyedSnapshot {
        version: slidelog::snapshot::SNAPSHOT_VERSION,
        taken_at_unix_nanos: anchor.unix_nanos,
        policies: Vec::new(),
        generation: 0,
        keys: keys
            .iter()
            .map(|&key| KeyAdmissions {
                key,
                admissions: times.clone(),
            })
            .collect(),
    };
    if keyed.restore_at(&keyed_snapshot, anchor).is_ok() {
        for &key in &keys {
            let admitted = (0..=limit)
                .filter(|_| keyed.check_at(&key, anchor.clock_nanos).is_ok())
                .count();
            assert!(
                admitted as u32 <= limit,
                "key {key}: {admitted} admitted under {limit}"
            );
        }
    }
}

/// One call of the `model` target.
#[derive(Clone, Copy, Debug)]
enum Call {
    Check,
    Admit,
    Peek,
}

/// The lock-free ring against the reference model (docs/design.md §1), one
/// key and keyed, on sequences of calls the fuzzer steers: 1 to 3 policies
/// (limits up to 12, or one of 64 to 70, where a ring keeps more words),
/// clock moves forwards, onto window edges and backwards, weighted calls
/// up to past the limit, `check_n`, `admit_n` and `peek_n`. Every answer
/// equals the model's: admitted or denied alike, with the same `at`,
/// `remaining`, policy and retry time.
pub fn model(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let _ = model_inner(&mut u);
}

fn model_inner(u: &mut Unstructured<'_>) -> ArbitraryResult<()> {
    use multi::{MultiDecision, MultiModel, observed_multi};
    let count = u.int_in_range(1..=3)?;
    let mut policies = Vec::with_capacity(count);
    for _ in 0..count {
        let limit = if u.ratio(1, 8)? {
            u.int_in_range(64..=70)?
        } else {
            u.int_in_range(1..=12)?
        };
        let window = u.int_in_range(1..=60u64)?;
        policies.push((limit, window));
    }
    let smallest = policies.iter().map(|p| p.0).min().unwrap_or(1);
    let mut b = Limiter::builder(policies[0].0, Duration::from_nanos(policies[0].1));
    for &(limit, window) in &policies[1..] {
        b = b.and(limit, Duration::from_nanos(window));
    }
    let one = b.clock(ManualClock::new()).build().expect("valid policies");
    let mut b = KeyedLimiter::<u8>::builder(policies[0].0, Duration::from_nanos(policies[0].1));
    for &(limit, window) in &policies[1..] {
        b = b.and(limit, Duration::from_nanos(window));
    }
    let keyed = b.clock(ManualClock::new()).build().expect("valid policies");
    // Model 0 is the one-key limiter's, 1 and 2 the keyed limiter's keys.
    let mut models = [
        MultiModel::new(&policies),
        MultiModel::new(&policies),
        MultiModel::new(&policies),
    ];
    let mut now: u64 = 100;
    for step in 0..200 {
        if u.is_empty() {
            break;
        }
        let choice = u8::arbitrary(u)?;
        now = match choice % 8 {
            0..=2 => now,
            3..=5 => now + u64::from(choice >> 4),
            6 => now + policies[usize::from(choice >> 3) % policies.len()].1,
            _ => now.saturating_sub(u64::from(choice >> 4)),
        };
        let n = if u.ratio(3, 4)? {
            1
        } else {
            u.int_in_range(0..=smallest + 1)?
        };
        let call = match u8::arbitrary(u)? % 3 {
            0 => Call::Check,
            1 => Call::Admit,
            _ => Call::Peek,
        };
        let which = usize::from(u8::arbitrary(u)? % 3);
        let model = &mut models[which];
        let key = which as u8;
        let ask = |peek: bool| match (which, peek) {
            (0, false) => one.check_n_at(n, now),
            (0, true) => one.peek_n_at(n, now),
            (_, false) => keyed.check_n_at(&key, n, now),
            (_, true) => keyed.peek_n_at(&key, n, now),
        };
        let context = || {
            format!("step {step}, {call:?} {n} at {now}, limiter {which}, policies {policies:?}")
        };
        match call {
            Call::Peek => {
                let mut shadow = model.clone();
                assert_eq!(
                    observed_multi(now, ask(true)),
                    shadow.decide(now, n),
                    "{}",
                    context()
                );
            }
            Call::Check => {
                assert_eq!(
                    observed_multi(now, ask(false)),
                    model.decide(now, n),
                    "{}",
                    context()
                );
            }
            Call::Admit => {
                let admitted = if which == 0 {
                    one.admit_n_at(n, now)
                } else {
                    keyed.admit_n_at(&key, n, now)
                };
                let want = model.decide(now, n);
                match admitted {
                    Ok(()) => assert!(
                        matches!(want, MultiDecision::Admitted { .. }),
                        "{}: admitted, the model says {want:?}",
                        context()
                    ),
                    Err(denied) => {
                        assert_eq!(observed_multi(now, Err(denied)), want, "{}", context());
                    }
                }
            }
        }
    }
    Ok(())
}

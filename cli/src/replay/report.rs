//! What `slidelog replay` prints: the table, or the JSON.

use super::{Options, Summary};
use crate::input;

/// A key, [`input::printable`], shortened to `width` characters for the
/// table (the JSON keeps it whole, escaped as JSON).
fn shorten(key: &str, width: usize) -> String {
    let key = input::printable(key);
    if key.chars().count() <= width {
        return key.into_owned();
    }
    let mut short: String = key.chars().take(width.saturating_sub(1)).collect();
    short.push('…');
    short
}

/// The top offenders: `(key, admitted, denied)`.
pub(super) fn top_keys(s: &Summary, options: &Options) -> Vec<(String, u64, u64)> {
    s.keys
        .iter()
        .take(options.top)
        .filter(|(_, k)| k.denied > 0)
        .map(|(key, k)| (key.clone(), k.admitted, k.denied))
        .collect()
}

pub(super) fn print_table(s: &Summary, options: &Options) {
    println!(
        "{:<28} {:>12} {:>12} {:>12}",
        "", "requests", "admitted", "denied"
    );
    println!(
        "{:<28} {:>12} {:>12} {:>12}",
        "exact log", s.requests, s.admitted, s.denied
    );
    println!(
        "{:<28} {:>12} {:>12} {:>12}",
        format!("counter ({} slots)", s.slots),
        s.requests,
        s.counter_admitted,
        s.counter_denied
    );
    println!(
        "the counter decides differently on {} requests ({:.2}%)",
        s.differs,
        100.0 * s.differs as f64 / s.requests.max(1) as f64
    );
    println!();
    for (policy, denied) in &s.policies {
        println!("policy {policy}: decided {denied} denials");
    }
    println!();
    let keys = match s.keys.len() {
        1 => "1 key".to_string(),
        n => format!("{n} keys"),
    };
    let top = top_keys(s, options);
    if top.is_empty() {
        println!("{keys}; none was denied");
        return;
    }
    println!("{keys}; top offenders:");
    println!(
        "{:<32} {:>12} {:>12} {:>12}",
        "key", "requests", "admitted", "denied"
    );
    for (key, admitted, denied) in top {
        println!(
            "{:<32} {:>12} {:>12} {:>12}",
            shorten(&key, 32),
            admitted + denied,
            admitted,
            denied
        );
    }
}

/// JSON: the top-level `admitted` and `denied` are the totals.
pub(super) fn to_json(s: &Summary, options: &Options) -> String {
    let policies: Vec<serde_json::Value> = s
        .policies
        .iter()
        .map(|(p, denied)| {
            serde_json::json!({
                "policy": p.to_string(),
                "limit": p.limit,
                "window_ms": p.window.as_secs_f64() * 1000.0,
                "decided": denied,
            })
        })
        .collect();
    let offenders: Vec<serde_json::Value> = s
        .keys
        .iter()
        .take(options.top)
        .filter(|(_, k)| k.denied > 0)
        .map(|(key, k)| {
            serde_json::json!({
                "key": key,
                "requests": k.admitted + k.denied,
                "admitted": k.admitted,
                "denied": k.denied,
            })
        })
        .collect();
    serde_json::json!({
        "requests": s.requests,
        "admitted": s.admitted,
        "denied": s.denied,
        "keys": s.keys.len(),
        "policies": policies,
        "counter": {
            "slots": s.slots,
            "admitted": s.counter_admitted,
            "denied": s.counter_denied,
            "differs": s.differs,
        },
        "top_offenders": offenders,
        "malformed": s.malformed,
    })
    .to_string()
}

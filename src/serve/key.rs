//! A limiter key: a matched descriptor's domain, entries and limit override
//! written as one string (the keyed limiter's key, and the Redis key's
//! name), and read back when the limiter asks for the key's quota.
//!
//! The entries are the client's text (a header's value, a JWT claim, any
//! string another client of the gRPC API sends), so the encoding is
//! **injective**: the separators below are written escaped wherever they
//! occur inside a domain, key or value, and [`decode`] gives back exactly
//! what [`encode`] was given. Two descriptors share a log only if they are
//! equal, and a key's quota is the one its own descriptor matches (a
//! value ending `\u{1f}\u{0}1000/Second` is a value, not an override).
//!
//! Text without the four special characters is written as it is, so the
//! key of an ordinary descriptor (and its Redis name) is its plain text.

use std::fmt::Write as _;

use super::config::Unit;

/// Before each entry, and before the override.
const FIELD: char = '\u{1f}';
/// Between an entry's key and its value.
const PAIR: char = '\u{1e}';
/// Starts the override's field (`\0{requests}/{Unit:?}`).
const OVER: char = '\u{0}';
/// Starts an escape: [`ESCAPES`]' second characters follow it.
const ESC: char = '\u{1b}';

/// Each special character and the letter standing for it after [`ESC`].
const ESCAPES: [(char, char); 4] = [(ESC, 'e'), (FIELD, 'f'), (PAIR, 'p'), (OVER, '0')];

/// What a limiter key holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    pub domain: String,
    pub entries: Vec<(String, String)>,
    pub over: Option<(u32, Unit)>,
}

/// The limiter key of a matched descriptor.
pub fn encode(domain: &str, entries: &[(String, String)], over: Option<(u32, Unit)>) -> String {
    let text: usize = entries.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    let mut key = String::with_capacity(domain.len() + text + 24);
    push_escaped(&mut key, domain);
    for (k, v) in entries {
        key.push(FIELD);
        push_escaped(&mut key, k);
        key.push(PAIR);
        push_escaped(&mut key, v);
    }
    if let Some((requests, unit)) = over {
        key.push(FIELD);
        key.push(OVER);
        // Writing to a `String` cannot fail.
        let _ = write!(key, "{requests}/{unit:?}");
    }
    key
}

/// What `encode` wrote into `key`; `None` for a string it cannot have
/// written.
pub fn decode(key: &str) -> Option<Decoded> {
    let mut fields = key.split(FIELD);
    let domain = unescape(fields.next()?)?;
    let mut entries = Vec::new();
    let mut over = None;
    for field in fields {
        if over.is_some() {
            // The override is the last field.
            return None;
        }
        if let Some(text) = field.strip_prefix(OVER) {
            let (requests, unit) = text.split_once('/')?;
            // Written by `u32`'s `Display`: digits, no leading zero.
            let canonical = requests.bytes().all(|b| b.is_ascii_digit())
                && !(requests.len() > 1 && requests.starts_with('0'));
            if !canonical {
                return None;
            }
            over = Some((requests.parse().ok()?, unit_named(unit)?));
            continue;
        }
        let (k, v) = field.split_once(PAIR)?;
        entries.push((unescape(k)?, unescape(v)?));
    }
    Some(Decoded {
        domain,
        entries,
        over,
    })
}

fn is_special(c: char) -> bool {
    ESCAPES.iter().any(|&(special, _)| special == c)
}

fn push_escaped(key: &mut String, text: &str) {
    if !text.contains(is_special) {
        key.push_str(text);
        return;
    }
    for c in text.chars() {
        match ESCAPES.iter().find(|&&(special, _)| special == c) {
            Some(&(_, letter)) => {
                key.push(ESC);
                key.push(letter);
            }
            None => key.push(c),
        }
    }
}

/// The text `push_escaped` wrote as `written`; `None` if `written` holds an
/// unescaped special character or an unknown escape.
fn unescape(written: &str) -> Option<String> {
    let mut text = String::with_capacity(written.len());
    let mut chars = written.chars();
    while let Some(c) = chars.next() {
        if c == ESC {
            let letter = chars.next()?;
            let &(special, _) = ESCAPES.iter().find(|&&(_, l)| l == letter)?;
            text.push(special);
        } else if is_special(c) {
            return None;
        } else {
            text.push(c);
        }
    }
    Some(text)
}

fn unit_named(text: &str) -> Option<Unit> {
    Unit::ALL.into_iter().find(|u| format!("{u:?}") == text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Text drawn mostly from the special characters and a few others.
    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just('\u{1f}'),
                Just('\u{1e}'),
                Just('\u{0}'),
                Just('\u{1b}'),
                Just('e'),
                Just('f'),
                Just('p'),
                Just('0'),
                Just('/'),
                Just('1'),
                any::<char>(),
            ],
            0..8,
        )
        .prop_map(|chars| chars.into_iter().collect())
    }

    fn unit() -> impl Strategy<Value = Unit> {
        proptest::sample::select(&Unit::ALL[..])
    }

    fn decoded() -> impl Strategy<Value = Decoded> {
        (
            text(),
            proptest::collection::vec((text(), text()), 0..4),
            proptest::option::of((any::<u32>(), unit())),
        )
            .prop_map(|(domain, entries, over)| Decoded {
                domain,
                entries,
                over,
            })
    }

    fn encoded(d: &Decoded) -> String {
        encode(&d.domain, &d.entries, d.over)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4_000))]

        /// Every key reads back as what was written.
        #[test]
        fn keys_read_back_as_written(d in decoded()) {
            prop_assert_eq!(decode(&encoded(&d)), Some(d));
        }

        /// Two descriptors share a key only if they are equal.
        #[test]
        fn distinct_descriptors_have_distinct_keys(a in decoded(), b in decoded()) {
            prop_assert_eq!(encoded(&a) == encoded(&b), a == b);
        }

        /// Any string either is not a key or is the key of what it reads as.
        #[test]
        fn any_string_reads_back_only_as_its_own_key(key in text()) {
            if let Some(d) = decode(&key) {
                prop_assert_eq!(encoded(&d), key);
            }
        }
    }

    /// An ordinary descriptor's key is its plain text; the special
    /// characters inside its text are escaped.
    #[test]
    fn plain_text_is_written_as_it_is() {
        let entries = [("remote_address".to_string(), "10.0.0.1".to_string())];
        assert_eq!(
            encode("edge", &entries, Some((5, Unit::Hour))),
            "edge\u{1f}remote_address\u{1e}10.0.0.1\u{1f}\u{0}5/Hour"
        );
        assert_eq!(
            encode("edge", &[("a\u{1f}".into(), "\u{0}".into())], None),
            "edge\u{1f}a\u{1b}f\u{1e}\u{1b}0"
        );
    }
}

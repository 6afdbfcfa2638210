//! Policies (`100/1m`) for `slidelog replay`. The other parsers of what
//! users type (durations, sizes, addresses) are the library's
//! `slidelog::serve::parse`, compiled in here from its source when the
//! library is built without `serve`.

use std::num::{IntErrorKind, ParseIntError};
use std::time::Duration;

use slidelog::MAX_LIMIT;

#[cfg(feature = "serve")]
pub(crate) use slidelog::serve::parse::*;

#[cfg(not(feature = "serve"))]
#[allow(unreachable_pub, dead_code)]
#[path = "../../serve/parse.rs"]
mod common;
#[cfg(not(feature = "serve"))]
pub(crate) use common::*;

/// A policy `N/WINDOW`, e.g. `100/1m`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Policy {
    pub(crate) limit: u32,
    pub(crate) window: Duration,
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.limit, show_duration(self.window))
    }
}

pub(crate) fn policy(text: &str) -> Result<Policy, String> {
    let (limit, window) = text
        .split_once('/')
        .ok_or_else(|| format!("`{text}` is not a policy: write N/WINDOW, e.g. 100/1m"))?;
    let above = || format!("`{text}`: the limit is above the maximum of {MAX_LIMIT}");
    let limit: u32 = limit.trim().parse().map_err(|e: ParseIntError| {
        if *e.kind() == IntErrorKind::PosOverflow {
            above()
        } else {
            format!("`{limit}` in `{text}` is not a whole number of requests")
        }
    })?;
    if limit == 0 {
        return Err(format!("`{text}`: the limit must be at least 1"));
    }
    if limit > MAX_LIMIT {
        return Err(above());
    }
    Ok(Policy {
        limit,
        window: self::window(window)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn policies() {
        assert_eq!(
            policy("100/1m"),
            Ok(Policy {
                limit: 100,
                window: Duration::from_secs(60)
            })
        );
        assert_eq!(policy("5/250ms").unwrap().to_string(), "5/250ms");
        for bad in [
            "100",
            "0/1s",
            "x/1s",
            "10/",
            "/1s",
            "10/0s",
            "99999999999/1s",
        ] {
            assert!(policy(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_limit_too_large_says_so() {
        assert!(policy(&format!("{MAX_LIMIT}/1s")).is_ok());
        let most = format!("the maximum of {MAX_LIMIT}");
        for big in [
            format!("{}/1s", MAX_LIMIT + 1),
            format!("{}/1s", u32::MAX),
            "99999999999/1s".to_string(),
        ] {
            let error = policy(&big).unwrap_err();
            assert!(error.contains(&most), "{big}: {error}");
        }
        let error = policy("-1/1s").unwrap_err();
        assert!(error.contains("not a whole number"), "{error}");
    }

    proptest! {
        /// No input panics the parser.
        #[test]
        fn policies_never_panic(s in "\\PC{0,40}") {
            let _ = policy(&s);
        }
    }
}

//! `peek_at(key, t)` answers as `peek` does with the clock at `t`.

use std::time::Duration;

use crate::{KeyedLimiter, ManualClock};

/// Across admissions and expiries, for a key present and one absent, a
/// peek with the time passed in equals a peek reading the clock at that
/// time, and neither records anything nor creates a key.
#[test]
fn peek_at_equals_peek_on_the_clock() {
    let clock = ManualClock::new();
    let limiter = KeyedLimiter::<u64>::builder(3, Duration::from_nanos(10))
        .and(5, Duration::from_nanos(25))
        .clock(clock.clone())
        .build()
        .unwrap();
    for t in 0..80u64 {
        clock.set(t);
        for key in [1, 2] {
            let (at, now) = (limiter.peek_at(&key, t), limiter.peek(&key));
            assert_eq!(at, now, "key {key} at {t} ns");
        }
        // Key 2 is never checked: no peek created it.
        assert!(limiter.len() <= 1, "at {t} ns");
        if t % 3 == 0 {
            let peeked = limiter.peek_at(&1, t);
            assert_eq!(limiter.check(&1).is_ok(), peeked.is_ok(), "at {t} ns");
        }
    }
}

//! `peek_at(t)` answers as `peek` does with the clock at `t`.

use std::time::Duration;

use crate::{Limiter, ManualClock};

/// Across admissions and expiries, on one policy and on several, a peek
/// with the time passed in equals a peek reading the clock at that time,
/// and neither records anything.
#[test]
fn peek_at_equals_peek_on_the_clock() {
    for policies in [&[(3, 10)][..], &[(2, 5), (4, 20)][..]] {
        let clock = ManualClock::new();
        let (limit, window) = policies[0];
        let mut builder = Limiter::builder(limit, Duration::from_nanos(window));
        for &(limit, window) in &policies[1..] {
            builder = builder.and(limit, Duration::from_nanos(window));
        }
        let limiter = builder.clock(clock.clone()).build().unwrap();
        for t in 0..60u64 {
            clock.set(t);
            let (at, now) = (limiter.peek_at(t), limiter.peek());
            assert_eq!(at, now, "at {t} ns, policies {policies:?}");
            // Only every third call checks: the rest leave time to expire.
            if t % 3 == 0 {
                assert_eq!(limiter.check().is_ok(), at.is_ok(), "at {t} ns");
            }
        }
    }
}

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

/// `requota`: a live key whose quota function answers otherwise is judged
/// by the new answer, over the log it kept; a key the function no longer
/// answers for goes to the default, which stays the builder's.
#[test]
fn requota_rereads_the_quota_function_keeping_the_log() {
    use std::sync::Arc;

    use crate::Quota;
    use crate::sync::atomic::{AtomicU32, Ordering};

    let window = Duration::from_secs(60);
    // 0: no quota of its own.
    let limit = Arc::new(AtomicU32::new(5));
    let configured = Arc::clone(&limit);
    let limiter = KeyedLimiter::<u64>::builder(100, window)
        .clock(ManualClock::new())
        .quota(move |&key| {
            let limit = configured.load(Ordering::SeqCst);
            (key == 1 && limit > 0).then(|| Quota::new(limit, window).unwrap())
        })
        .build()
        .unwrap();
    limiter.check_n(&1, 3).unwrap();
    assert_eq!(limiter.check(&1).unwrap().remaining(), 1);
    // The function's source changes: until `requota` the live key keeps
    // the quota it was created with.
    limit.store(3, Ordering::SeqCst);
    assert_eq!(limiter.policies_for(&1)[0].limit, 5);
    let generation = limiter.generation();
    limiter.requota();
    assert_eq!(limiter.generation(), generation + 1);
    assert_eq!(limiter.policies_for(&1)[0].limit, 3);
    // Its 4 admissions are kept: over the new 3 a minute.
    assert!(limiter.check(&1).is_err());
    limit.store(10, Ordering::SeqCst);
    limiter.requota();
    assert_eq!(limiter.check(&1).unwrap().remaining(), 5, "10 - 4 - 1");
    // No quota of its own: the default, the builder's.
    limit.store(0, Ordering::SeqCst);
    limiter.requota();
    assert_eq!(limiter.policies_for(&1)[0].limit, 100);
    assert_eq!(limiter.check(&1).unwrap().remaining(), 100 - 6);
    assert_eq!(limiter.policies()[0].limit, 100);
}

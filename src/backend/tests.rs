//! Every in-process store judges a request's units alike: recorded or
//! dry, through the future or at once.

use core::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::{Backend, Request, Verdict};
use crate::{DenyReason, KeyedLimiter, Limiter, ManualClock, RateLimit, SlidingCounter};

/// The verdict `judge` answers, checked against `judge_now`'s on a twin
/// store: the two forms agree.
fn judged<B: Backend<u64> + ?Sized>(store: &B, twin: &B, request: Request) -> Verdict {
    let now = twin.judge_now(&7, request).expect("decided in process");
    let waker = std::task::Waker::noop();
    let mut future = core::pin::pin!(store.judge(7, request));
    let std::task::Poll::Ready(verdict) = future
        .as_mut()
        .poll(&mut std::task::Context::from_waker(waker))
    else {
        panic!("an in-process store decides at once");
    };
    assert_eq!(verdict.decision, now.decision, "{request:?}");
    assert_eq!(verdict.wait, now.wait, "{request:?}");
    verdict
}

/// 10 a minute: a look at 4 records nothing, 4 recorded leave 6 and wait
/// (an exact log: the window), a look at 7 is denied, 7 recorded are
/// denied and record nothing, 11 can never fit.
fn judges_units<B: Backend<u64> + ?Sized>(store: &B, twin: &B, exact: bool) {
    let look = judged(store, twin, Request::units(4).dry());
    assert_eq!(look.decision.unwrap().remaining(), 6);
    assert_eq!(look.wait, Duration::ZERO, "a dry run waits for nothing");
    let four = judged(store, twin, Request::units(4));
    assert_eq!(
        four.decision.unwrap().remaining(),
        6,
        "the look recorded nothing"
    );
    if exact {
        assert_eq!(four.wait, Duration::from_secs(60));
    } else {
        assert!(four.wait > Duration::ZERO, "{four:?}");
    }
    assert!(
        judged(store, twin, Request::units(7).dry())
            .decision
            .is_err()
    );
    let seven = judged(store, twin, Request::units(7)).decision.unwrap_err();
    assert_eq!(seven.reason(), DenyReason::RateLimited);
    let one = judged(store, twin, Request::one());
    assert_eq!(
        one.decision.unwrap().remaining(),
        5,
        "the denial recorded nothing"
    );
    let never = judged(store, twin, Request::units(11))
        .decision
        .unwrap_err();
    assert!(
        matches!(
            never.reason(),
            DenyReason::ExceedsLimit {
                requested: 11,
                limit: 10
            }
        ),
        "{never:?}"
    );
}

#[test]
fn every_in_process_store_judges_units() {
    let window = Duration::from_secs(60);
    let keyed = || KeyedLimiter::<u64, ManualClock>::with_clock(10, window, ManualClock::new());
    judges_units(&keyed().unwrap(), &keyed().unwrap(), true);
    let single = || Limiter::with_clock(10, window, ManualClock::new());
    judges_units(&single().unwrap(), &single().unwrap(), true);
    let counter = || SlidingCounter::with_clock(10, window, 10, ManualClock::new());
    judges_units(&counter().unwrap(), &counter().unwrap(), false);
    let dynamic = || -> Arc<dyn RateLimit> { Arc::new(single().unwrap()) };
    judges_units(&*dynamic(), &*dynamic(), true);
}

/// `check` is `judge` of one unit, `check_now` `judge_now` of it: for the
/// keyed limiter, the same verdict, each policy's state included.
#[test]
fn check_is_judge_of_one() {
    let build = || {
        KeyedLimiter::<u64>::builder(3, Duration::from_secs(1))
            .and(10, Duration::from_secs(60))
            .clock(ManualClock::new())
            .build()
            .unwrap()
    };
    let (checked, judged) = (build(), build());
    for _ in 0..5 {
        let a = Backend::check_now(&checked, &7).unwrap();
        let b = Backend::judge_now(&judged, &7, Request::one()).unwrap();
        assert_eq!(a, b);
        assert!(a.per_policy.is_some(), "several policies: each one's state");
    }
}

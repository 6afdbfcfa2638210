//! Clocks: the monotonic clock and a clock chosen at run time behind every
//! limiter's constructors and builders, and what a clock skewed across
//! cores does to the guarantee in real time (the bound `Clock`'s docs
//! state).

use std::time::Duration;

use proptest::prelude::*;
use slidelog::{
    Clock, ClockChoice, KeyedLimiter, Limiter, ManualClock, MonotonicClock, SlidingCounter,
};

#[test]
fn every_limiter_takes_the_monotonic_clock_and_a_chosen_one() {
    let window = Duration::from_secs(60);
    let one = Limiter::builder(1, window)
        .clock(MonotonicClock::new())
        .build()
        .unwrap();
    assert!(one.check().is_ok());
    assert!(one.check().is_err());
    let keyed = KeyedLimiter::<u64>::builder(1, window)
        .clock(MonotonicClock::new())
        .build()
        .unwrap();
    assert!(keyed.check(&1).is_ok());
    assert!(keyed.check(&1).is_err());
    let counter = SlidingCounter::with_clock(1, window, 6, MonotonicClock::new()).unwrap();
    assert!(counter.check().is_ok());
    assert!(counter.check().is_err());
    // Whichever clock is chosen, it counts from its creation plus the head
    // start.
    let (chosen, refused) = ClockChoice::within(Duration::from_secs(1));
    assert_eq!(
        matches!(chosen, ClockChoice::Monotonic(_)),
        refused.is_some()
    );
    assert!(chosen.now() >= MonotonicClock::ORIGIN);
    let limiter = Limiter::with_clock(1, window, chosen).unwrap();
    assert!(limiter.check().is_ok());
    assert!(limiter.check().is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Two cores whose clocks read the real time less an offset of up to
    /// `S`: the admissions of any real window `(τ - W, τ]` are at most `L`
    /// plus those recorded in the `S` of clock time before the window's
    /// clock start; with no skew, at most `L` (the exact guarantee in real
    /// time).
    #[test]
    fn a_skewed_clock_over_admits_by_what_its_skew_holds(
        limit in 1..5u32,
        window in 10..100u64,
        skew_part in 0..100u64,
        steps in prop::collection::vec((any::<bool>(), 0..15u64), 1..200),
    ) {
        let skew = skew_part * window / 100;
        let offsets = [0, skew];
        let limiter = Limiter::with_clock(limit, Duration::from_nanos(window), ManualClock::new()).unwrap();
        // (real time, recorded time) of each admission.
        let mut admitted: Vec<(u64, u64)> = Vec::new();
        let mut real = 1_000;
        for (core, dt) in steps {
            real += dt;
            let reading = real - offsets[usize::from(core)];
            if let Ok(a) = limiter.check_at(reading) {
                admitted.push((real, a.at()));
            }
        }
        for &(tau, _) in &admitted {
            let in_real = admitted.iter().filter(|&&(r, _)| r + window > tau && r <= tau).count();
            let in_skew = admitted
                .iter()
                .filter(|&&(_, at)| at + window + skew > tau && at + window <= tau)
                .count();
            prop_assert!(in_real <= limit as usize + in_skew, "{} in (τ - W, τ] at τ = {}", in_real, tau);
            if skew == 0 {
                prop_assert!(in_real <= limit as usize);
            }
        }
    }
}

//! An exact, lock-free sliding-window-log rate limiter.
//!
//! (Crate guide: see the README; written out in full below once the API is complete.)

#![cfg_attr(docsrs, feature(doc_cfg))]

mod clock;
mod config;
mod decision;
mod error;
mod limiter;
mod ring;
mod sync;

pub use crate::clock::{Clock, ManualClock, QuantaClock, Upkeep};
pub use crate::config::{MAX_LIMIT, MAX_WINDOW};
pub use crate::decision::{Admitted, Denied, DenyReason};
pub use crate::error::ConfigError;
pub use crate::limiter::Limiter;

#[cfg(slidelog_loom)]
#[doc(hidden)]
pub mod loom_hooks {
    //! Only under `--cfg slidelog_loom`: the deliberately broken variants.
    pub use crate::ring::Flaw;
}

//! The library's test helpers (`tests/common/` at the repository's root:
//! the reference models, Redis servers), and what the tests of the binary
//! add to them: running `slidelog serve` and asking it (`serve.rs`).

#![allow(dead_code, unreachable_pub)]

#[path = "../../../tests/common/mod.rs"]
mod shared;

#[allow(unused_imports)]
pub use shared::*;

#[cfg(feature = "serve")]
pub mod serve;

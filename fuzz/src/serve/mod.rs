//! `slidelog serve`'s configuration and limiter keys, from the binary's
//! sources.

#[path = "../../../src/bin/slidelog/serve/config.rs"]
pub(crate) mod config;
#[path = "../../../src/bin/slidelog/serve/key.rs"]
pub(crate) mod key;

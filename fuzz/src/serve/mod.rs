//! `slidelog serve`'s configuration, limiter keys and `/json` bodies,
//! from the binary's sources.

#[path = "../../../src/bin/slidelog/serve/config.rs"]
pub(crate) mod config;
#[path = "../../../src/bin/slidelog/serve/json.rs"]
pub(crate) mod json;
#[path = "../../../src/bin/slidelog/serve/key.rs"]
pub(crate) mod key;

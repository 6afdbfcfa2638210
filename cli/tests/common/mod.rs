//! The library's Redis test helpers (`tests/common/` at the repository's
//! root: real redis-server processes, a Redis Cluster, TLS), and what the
//! tests of the binary add to them: running `slidelog serve` and asking it
//! (`serve.rs`).

#![allow(dead_code, unreachable_pub)]

/// The reference model and the helpers of the library's tests. Its Redis
/// modules switch on the library's features, which this package does not
/// have; they are compiled in below, always.
#[allow(unexpected_cfgs)]
#[path = "../../../tests/common/mod.rs"]
mod shared;

#[allow(unused_imports)]
pub use shared::*;

#[path = "../../../tests/common/redis_cluster.rs"]
pub mod redis_cluster;
#[path = "../../../tests/common/redis_server.rs"]
pub mod redis_server;
#[path = "../../../tests/common/redis_tls.rs"]
pub mod redis_tls;
pub mod serve;

//! What users type (durations, policies, sizes, addresses): the library's
//! `slidelog::serve::parse`, compiled in here from its source when the
//! library is built without `serve`.

#[cfg(feature = "serve")]
pub(crate) use slidelog::serve::parse::*;

#[cfg(not(feature = "serve"))]
use slidelog::MAX_LIMIT;

#[cfg(not(feature = "serve"))]
#[allow(unreachable_pub, dead_code)]
#[path = "../../serve/parse.rs"]
mod common;
#[cfg(not(feature = "serve"))]
pub(crate) use common::*;

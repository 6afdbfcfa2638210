//! The `slidelog` command's log reader as a library, for the fuzz targets
//! (`fuzz/`), which drive the parser the binary ships. Not an API: the
//! binary (`src/main.rs`) is this package's product.

#[doc(hidden)]
pub mod input;

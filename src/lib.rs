//! dshs: validate, inspect and repair DeepSeek Harness (DSH) session logs.
//!
//! The [`log`] module is the whole format core: one streaming pass over a log
//! ([`log::scan`]) that checks every rule of the format version the header names and folds
//! the surface the way DSH's `SurfaceManager` does.

pub mod log;

//! The library core: reading, checking and folding DSH session logs. No clap, no colours,
//! no printing, no process exit: commands and renderers live in the binary.
//!
//! Each arrow of the pipeline (`shared/STYLE.md`) and the module that owns it:
//!
//! - rows from a source: `input` (plain lines, at positions via `input/chunks.rs`, or a
//!   pipe), `input::zstd` (zstd frames), `sqlite` (the rows of a session store)
//! - → positioned rows: `input` (`LineReader`, `Line`; `Pos` is in `finding`); the torn
//!   final fragment is recognised by `scan` (`TornTail`)
//! - → header (version → dialect): `header`, which picks the `dialect` (every per-version
//!   difference is a property there)
//! - → rows → events: `rows` (envelope, packed rows expanded, seq ranges decoded),
//!   `event` (the type interned as a `Kind`), `legacy` (v0 shapes normalized)
//! - → checks + surface fold: `scan` runs the pass, one event at a time in
//!   `scan::fold_candidate`, in this order: envelope (`rows`), vocabulary (`vocab`), shapes
//!   (`payload`), compaction (`compaction`), surface fold (`surface`), lifecycle
//!   (`lifecycle`), closers (`closers`); bad rows and the committed prefix are decided in
//!   `scan` (`Pass::line`, `classify_row`), its end-of-log rules in `scan::finish`;
//!   `scan/pipeline.rs` runs the same pass on several threads
//! - → consumer: a `Sink` (`finding`) and an `Observer` (`scan`): findings (`finding`),
//!   surface (`surface`), derived messages (`derive`), repair plan (`repair`, `closers`),
//!   compaction plan (`compact`), stats (`stats`), grep (`grep`)
//! - → renderer: not here; `src/render/` (human, JSON)
//! - → writer (repair/compact only): `append` (lock → scan → plan → verify → write) over
//!   `write` (lock, append, fsync, roll back); `sqlite::write` for a store

pub mod append;
pub mod closers;
pub mod codes;
pub mod compact;
pub mod compaction;
pub mod derive;
pub mod dialect;
pub mod event;
pub mod finding;
pub mod follow;
pub mod grep;
pub mod header;
pub mod idset;
pub mod input;
pub mod json;
pub mod legacy;
pub mod lifecycle;
pub mod limits;
pub mod payload;
pub mod repair;
pub mod rows;
pub mod scan;
pub mod sqlite;
pub mod stats;
pub mod surface;
#[cfg(test)]
mod test_support;
pub mod text;
pub mod usage;
pub mod vocab;
pub mod write;

pub use codes::{Code, Severity};
pub use finding::{Finding, Pos, Sink};
pub use scan::{Observer, Scan, ScanOptions, Status, scan};

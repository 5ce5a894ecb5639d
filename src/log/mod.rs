//! The library core: reading, checking and folding DSH session logs. No clap, no colours,
//! no printing, no process exit: commands and renderers live in the binary.

pub mod append;
pub mod closers;
pub mod codes;
pub mod compact;
pub mod compaction;
pub mod derive;
pub mod dialect;
pub mod event;
pub mod finding;
pub mod grep;
pub mod header;
pub mod idset;
pub mod input;
pub mod json;
pub mod legacy;
pub mod lifecycle;
pub mod payload;
pub mod repair;
pub mod rows;
pub mod scan;
pub mod sqlite;
pub mod stats;
pub mod surface;
pub mod text;
pub mod vocab;
pub mod write;

pub use codes::{Code, Severity};
pub use finding::{Finding, Pos, Sink};
pub use scan::{Observer, Scan, ScanOptions, Status, scan};

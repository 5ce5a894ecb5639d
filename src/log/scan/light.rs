//! The light pass: the same pass and the same fold, over rows read as envelopes.
//!
//! A command that reads little of each event (`grep` reads the text of its candidate lines
//! only; `surface` and `ls`'s table read what the fold decided) asks for it with
//! [`super::ScanOptions::light`]. Each line is then parsed into a tree that holds the
//! envelope (`type`, `seq`, `time`, `surfaceOp`, `sourceEventSeqs`, `ignorable`) and every
//! part of `data` the fold and its rules read (turn, step, the message with its role, source,
//! content and ids, call ids, reasons, headers, compaction records); what no rule of the fold
//! reads is passed over structurally ([`Shape::Envelope`]: strings and nesting checked, no
//! tree built) or, where a rule still reads a little of it, left lean ([`Shape::Lean`],
//! [`Shape::LeanPacked`]). The lines the command names ([`FullLines`]) get the whole tree.
//!
//! Every decision of the fold — which rows are bad, the surface and its shadow marks, the
//! crash tail and the committed prefix, admission, the developer binding, compaction, the
//! legacy v0 rewrites — is the full pass's: the parts passed over are read by none of them.
//! What the light pass does not check is [`UNCHECKED`], and only that: its findings are
//! dropped whatever the trees (so a pass forced whole with `DSHS_FULL_PASS=1` reports the
//! same). `validate`, `repair` and `compact` never ask for it, nor does a report that counts
//! warnings (`stats`, `ls --format json`).
//!
//! `light_pass_folds_like_the_full_pass` (scan tests) compares both passes on every log of
//! `testdata/`, damaged variants of them and generated logs.

use std::sync::Arc;

use crate::log::codes::Code;
use crate::log::dialect::Dialect;
use crate::log::json::Shape;

/// The findings a light pass does not make, with why; `validate` makes them. One list: the
/// note of a command that used the light pass names them (see [`unchecked_summary`]).
pub const UNCHECKED: &[(Code, &str)] = &[
    (
        // The records of `data.stream` (formats 2 and 3) are passed over unread: their types
        // are checked by this rule alone (format 4's, which admission reads, are kept).
        Code::AssistantStreamMissing,
        "the records of assistant messages' embedded streams",
    ),
    (
        // Objects passed over are not built, so their keys are not compared.
        Code::DuplicateJsonKey,
        "repeated JSON keys",
    ),
];

/// Whether the light pass leaves the rule of `code` to `validate`.
pub fn unchecked(code: Code) -> bool {
    UNCHECKED.iter().any(|(c, _)| *c == code)
}

/// What the light pass does not check, in words (for a command's note on a bad log).
pub fn unchecked_summary() -> String {
    let what: Vec<&str> = UNCHECKED.iter().map(|(_, what)| *what).collect();
    what.join(" or ")
}

/// Hidden, for tests: set to 1, a pass asked to be light reads every line whole (its trees
/// are the full pass's) while it reports what a light pass reports, and a store session is
/// read the exact way at once: not first with its packed rows (format 0/1) kept packed, nor
/// with its stored texts left for the parsing threads. The differential tests compare the
/// two.
pub const FULL_PASS_ENV: &str = "DSHS_FULL_PASS";

/// Whether [`FULL_PASS_ENV`] forces the whole trees.
pub fn full_pass_forced() -> bool {
    std::env::var_os(FULL_PASS_ENV).is_some_and(|v| v == "1")
}

/// The lines of a light pass that get the whole tree: those starting at one of `offsets`
/// (ascending), and every line from `from` on.
#[derive(Debug, Clone)]
pub struct FullLines {
    offsets: Arc<[u64]>,
    from: u64,
}

impl Default for FullLines {
    /// No line: every row is read as an envelope.
    fn default() -> Self {
        FullLines {
            offsets: Arc::from(Vec::new()),
            from: u64::MAX,
        }
    }
}

impl FullLines {
    /// The lines starting at `offsets` (ascending) and every line from `from` on.
    pub fn new(offsets: Vec<u64>, from: u64) -> FullLines {
        debug_assert!(offsets.is_sorted());
        FullLines {
            offsets: Arc::from(offsets),
            from,
        }
    }

    /// Every line (a light pass that reports as one but reads every line whole).
    pub fn all() -> FullLines {
        FullLines {
            offsets: Arc::from(Vec::new()),
            from: 0,
        }
    }

    /// Whether the line starting at `byte` gets the whole tree.
    pub fn contains(&self, byte: u64) -> bool {
        byte >= self.from || self.offsets.binary_search(&byte).is_ok()
    }
}

/// The tree a light pass builds of a line no command reads whole, in `dialect`, for an
/// observer that wants each member of a packed row or not: format 4's embedded streams keep
/// their records' types (admission reads them, §9.2), earlier ones are passed over; the
/// members of packed rows past the first are tallied (see [`Shape::LeanPacked`]).
pub fn shape(dialect: &Dialect, wants_each_event: bool) -> Shape {
    if dialect.embedded_stream && dialect.v4_payloads {
        Shape::Lean
    } else if dialect.embedded_stream {
        Shape::Envelope
    } else if dialect.packed_rows && !wants_each_event {
        Shape::LeanPacked
    } else {
        Shape::Full
    }
}

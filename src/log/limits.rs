//! dshs's own limits (issue 37 item 2): a line longer than the line-size guard, JSON nested
//! deeper than the depth guard. A row past a guard is not damage — DSH itself reads it — so
//! it is never called bad and never cut: reading stops with a [`LimitHit`] that says which
//! guard, its limit, by how much the row exceeds it, where, and what raises the guard. It
//! travels as an [`io::Error`] (the channel every reader already has for "cannot read on"),
//! and the binary turns it into exit status 4.

use std::fmt;
use std::io;

/// Default longest line (plain or zstd JSONL) or decoded SQLite row dshs reads (256 MiB).
pub const DEFAULT_MAX_LINE: u64 = 256 << 20;

/// The environment variable that overrides [`DEFAULT_MAX_LINE`] (bytes).
pub const MAX_LINE_ENV: &str = "DSHS_MAX_LINE_BYTES";

/// Default deepest JSON nesting dshs reads: far past what DSH writes (its events nest a
/// few levels), low enough that every recursive walk over a tree (parsing, checks, hashing,
/// rendering) stays inside a thread's stack with room to spare. Deeper text is measured
/// without recursion before any recursive code sees it.
pub const DEFAULT_MAX_DEPTH: u32 = 1_000;

/// The environment variable that overrides [`DEFAULT_MAX_DEPTH`] (levels). It is capped at
/// [`HARD_MAX_DEPTH`]: past that the walks over a tree could overflow the stack.
pub const MAX_DEPTH_ENV: &str = "DSHS_MAX_JSON_DEPTH";

/// The most the depth guard can be raised to. Measured on a debug build, the deepest walk
/// (`show`) needs about 1.4 KiB of stack per level: 2,000 levels fit in [`THREAD_STACK`]
/// three times over; a release build needs far less.
pub const HARD_MAX_DEPTH: u32 = 2_000;

/// The stack of every thread that parses or walks a tree (the main thread has 8 MiB).
pub const THREAD_STACK: usize = 8 << 20;

/// `scope.spawn` with a [`THREAD_STACK`]-byte stack (the default, 2 MiB, holds too few
/// levels of a tree near the depth guard).
pub fn spawn_scoped<'scope, 'env, F, T>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    f: F,
) -> std::thread::ScopedJoinHandle<'scope, T>
where
    F: FnOnce() -> T + Send + 'scope,
    T: Send + 'scope,
{
    match std::thread::Builder::new()
        .stack_size(THREAD_STACK)
        .spawn_scoped(scope, f)
    {
        Ok(handle) => handle,
        // As `scope.spawn` does when the system has no thread to give.
        Err(e) => panic!("failed to spawn thread: {e}"),
    }
}

/// Run `pass` on a thread of its own (see [`spawn_scoped`]) while this thread runs `meanwhile`
/// (say, copying what the pass writes to the output); a panic of the pass goes on here.
pub fn beside<T: Send, U>(
    pass: impl FnOnce() -> T + Send,
    meanwhile: impl FnOnce() -> U,
) -> (T, U) {
    std::thread::scope(|scope| {
        let handle = spawn_scoped(scope, pass);
        let other = meanwhile();
        let done = handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (done, other)
    })
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n| n > 0)
}

/// The longest line (or decoded row) read before reading stops.
pub fn max_line_bytes() -> u64 {
    env_number(MAX_LINE_ENV).unwrap_or(DEFAULT_MAX_LINE)
}

/// The deepest JSON nesting read before reading stops.
pub fn max_json_depth() -> u32 {
    use std::sync::OnceLock;
    // Asked once per line on the hot path: read the environment once.
    static DEPTH: OnceLock<u32> = OnceLock::new();
    *DEPTH.get_or_init(|| {
        env_number(MAX_DEPTH_ENV).map_or(DEFAULT_MAX_DEPTH, |n| {
            n.min(u64::from(HARD_MAX_DEPTH)) as u32
        })
    })
}

/// Which guard a row passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// Bytes of one line (or one decoded row).
    LineBytes,
    /// Nesting levels of one JSON text.
    JsonDepth,
}

impl Guard {
    pub fn name(self) -> &'static str {
        match self {
            Guard::LineBytes => "line-size guard",
            Guard::JsonDepth => "JSON depth guard",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Guard::LineBytes => "bytes",
            Guard::JsonDepth => "levels",
        }
    }

    pub fn env(self) -> &'static str {
        match self {
            Guard::LineBytes => MAX_LINE_ENV,
            Guard::JsonDepth => MAX_DEPTH_ENV,
        }
    }
}

/// A row dshs does not read because of one of its own limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitHit {
    pub guard: Guard,
    pub limit: u64,
    /// What the row holds, or at least holds when `at_least` (reading stopped there).
    pub found: u64,
    pub at_least: bool,
    /// Where: "line 12 (byte 3456)", "seq 7 of session \"a\"", "zstd frame 3, line 9".
    pub at: String,
}

impl LimitHit {
    pub fn new(
        guard: Guard,
        limit: u64,
        found: u64,
        at_least: bool,
        at: impl Into<String>,
    ) -> Self {
        LimitHit {
            guard,
            limit,
            found,
            at_least,
            at: at.into(),
        }
    }

    /// The same hit, said of a place (`at` replaced when it was not known yet).
    pub fn at(mut self, at: impl Into<String>) -> Self {
        self.at = at.into();
        self
    }

    /// As the error a reader returns.
    pub fn into_io(self) -> io::Error {
        io::Error::other(self)
    }

    /// The hit an I/O error carries, if it is one.
    pub fn of_io(e: &io::Error) -> Option<&LimitHit> {
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<LimitHit>())
    }

    /// The hit anywhere in an error's chain of sources.
    pub fn in_chain<'e>(e: &'e (dyn std::error::Error + 'static)) -> Option<&'e LimitHit> {
        let mut cur = Some(e);
        while let Some(err) = cur {
            if let Some(hit) = err.downcast_ref::<LimitHit>() {
                return Some(hit);
            }
            if let Some(hit) = err.downcast_ref::<io::Error>().and_then(LimitHit::of_io) {
                return Some(hit);
            }
            cur = err.source();
        }
        None
    }
}

impl fmt::Display for LimitHit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let over = self.found.saturating_sub(self.limit);
        let least = if self.at_least { "at least " } else { "" };
        let unit = self.guard.unit();
        write!(
            f,
            "{} is past dshs's {}: it holds {least}{} {unit}, {least}{over} {unit} more than the limit of {} {unit}; not damage (DSH reads it), so dshs refuses rather than call it bad; raise the limit with {}=N{}",
            if self.at.is_empty() {
                "a row"
            } else {
                &self.at
            },
            self.guard.name(),
            self.found,
            self.limit,
            self.guard.env(),
            match self.guard {
                Guard::JsonDepth => format!(" (up to {HARD_MAX_DEPTH})"),
                Guard::LineBytes => String::new(),
            },
        )
    }
}

impl std::error::Error for LimitHit {}

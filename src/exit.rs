//! The one closed set of outcomes and their exit codes (CLI.md, "Exit status").

use std::process::ExitCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// 0: success; for validate, the log loads.
    Success,
    /// 1: the log is invalid or corrupt (or repair/compact refused because of it).
    Invalid,
    /// 2: usage error, unreadable file, I/O failure.
    Failure,
    /// 3: refused as unsupported (format version, V4 draft, unknown type, live writer).
    Unsupported,
    /// 1: `grep` found nothing (the grep convention).
    NoMatch,
}

impl Outcome {
    pub fn code(self) -> u8 {
        match self {
            Outcome::Success => 0,
            Outcome::Invalid => 1,
            Outcome::Failure => 2,
            Outcome::Unsupported => 3,
            Outcome::NoMatch => 1,
        }
    }

    /// The outcome for several files: the worst (highest) status wins.
    pub fn worst(self, other: Outcome) -> Outcome {
        if other.code() > self.code() {
            other
        } else {
            self
        }
    }
}

impl From<Outcome> for ExitCode {
    fn from(o: Outcome) -> ExitCode {
        ExitCode::from(o.code())
    }
}

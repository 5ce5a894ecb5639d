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
    /// 4: a row past one of dshs's own limits (a size or depth guard): refused, never
    /// called damage.
    Limit,
}

impl Outcome {
    pub fn code(self) -> u8 {
        match self {
            Outcome::Success => 0,
            Outcome::Invalid => 1,
            Outcome::Failure => 2,
            Outcome::Unsupported => 3,
            Outcome::NoMatch => 1,
            Outcome::Limit => 4,
        }
    }

    /// The exit status of a read that failed: 4 when it stopped at one of dshs's limits,
    /// else 2.
    pub fn of_read(e: &std::io::Error) -> Outcome {
        if dshs::log::limits::LimitHit::of_io(e).is_some() {
            Outcome::Limit
        } else {
            Outcome::Failure
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

/// Why a command stopped short: what `main` says once (`dshs: error: …`) and the exit status
/// it ends with. Commands return it with `?` (wrapped in an `anyhow::Error`); any other
/// error is an I/O failure (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub outcome: Outcome,
    pub message: String,
}

impl Failure {
    /// The error to return: `Err(Failure::of(Outcome::Invalid, "…"))?`.
    pub fn of(outcome: Outcome, message: impl Into<String>) -> anyhow::Error {
        anyhow::Error::new(Failure {
            outcome,
            message: message.into(),
        })
    }

    /// A usage error, an unreadable file, an I/O failure (exit 2).
    pub fn usage(message: impl Into<String>) -> anyhow::Error {
        Failure::of(Outcome::Failure, message)
    }

    /// The exit status of an error a command returned: its own, or 4 when a reader stopped
    /// at one of dshs's limits anywhere in its chain, else 2.
    pub fn outcome_of(e: &anyhow::Error) -> Outcome {
        if let Some(f) = e.downcast_ref::<Failure>() {
            return f.outcome;
        }
        let limit = |c: &(dyn std::error::Error + 'static)| {
            dshs::log::limits::LimitHit::in_chain(c).is_some()
                || c.downcast_ref::<dshs::log::sqlite::StoreError>()
                    .is_some_and(|s| s.class() == dshs::log::sqlite::Class::Limit)
        };
        if e.chain().any(limit) {
            return Outcome::Limit;
        }
        Outcome::Failure
    }
}

impl From<Outcome> for ExitCode {
    fn from(o: Outcome) -> ExitCode {
        ExitCode::from(o.code())
    }
}

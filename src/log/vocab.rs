//! The event vocabulary: built-in per-version lists (§7.2) plus user extensions (§21.4).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::dialect::{COMMON_TYPES, Dialect, SurfaceKind};

/// Types a user declared known (log-only), per version.
#[derive(Debug, Clone, Default)]
pub struct KnownTypes {
    /// (type, versions it applies to; None = all)
    entries: Vec<(String, Option<Vec<u8>>)>,
}

#[derive(Debug, thiserror::Error)]
pub enum KnownTypesError {
    #[error("cannot read known-types file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {why}")]
    Malformed {
        path: String,
        line: usize,
        why: String,
    },
}

impl KnownTypes {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn load(&mut self, path: &Path) -> Result<(), KnownTypesError> {
        let text = std::fs::read_to_string(path).map_err(|source| KnownTypesError::Io {
            path: path.display().to_string(),
            source,
        })?;
        self.parse(&path.display().to_string(), &text)
    }

    /// One type per line; `#` comments and blank lines ignored; an optional version list
    /// (`0,1,2` or `3-4`) after whitespace restricts the line.
    pub fn parse(&mut self, origin: &str, text: &str) -> Result<(), KnownTypesError> {
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: String| KnownTypesError::Malformed {
                path: origin.to_owned(),
                line: i + 1,
                why,
            };
            let mut parts = line.split_whitespace();
            let ty = parts.next().unwrap_or_default();
            if !ty.contains('/') && !ty.contains(':') {
                return Err(bad(format!(
                    "`{ty}` does not look like an event type (expected e.g. `slots/dispatch`)"
                )));
            }
            let versions = match parts.next() {
                None => None,
                Some(list) => Some(parse_versions(list).map_err(bad)?),
            };
            if let Some(extra) = parts.next() {
                return Err(bad(format!("unexpected `{extra}` after the version list")));
            }
            self.entries.push((ty.to_owned(), versions));
        }
        Ok(())
    }

    fn types_for(&self, version: u8) -> HashSet<String> {
        self.entries
            .iter()
            .filter(|(_, v)| v.as_ref().is_none_or(|v| v.contains(&version)))
            .map(|(t, _)| t.clone())
            .collect()
    }
}

fn parse_versions(list: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for part in list.split(',') {
        let num = |s: &str| -> Result<u8, String> {
            s.parse::<u8>()
                .ok()
                .filter(|v| *v <= 4)
                .ok_or_else(|| format!("`{s}` is not a format version 0–4"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("version range `{part}` is reversed"));
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    Ok(out)
}

/// How the fold treats an event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeClass {
    /// Surface-eligible in this version.
    Surface(SurfaceKind),
    /// Known, never on the surface.
    LogOnly,
    /// Unknown (or retired) but `ignorable: true`: kept opaque.
    Opaque,
    /// Unknown and not ignorable: the log is unsupported.
    UnknownRequired,
    /// A retired type (v3+ `tool/code-dispatch*`) without `ignorable`.
    RetiredRequired,
}

#[derive(Debug, Clone)]
pub struct Vocabulary {
    /// Every type this version (plus extensions) knows, with how the fold treats it when
    /// it is not marked ignorable: one hash lookup per event instead of list scans.
    known: HashMap<String, TypeClass, BuildFnv>,
}

/// A cheap hash for the vocabulary (FNV-1a, by words for longer names): type names are short
/// and the table is fixed when the pass starts (a log can look names up but never insert
/// any), so SipHash's flood resistance buys nothing here and there are two lookups per event.
#[derive(Debug, Clone, Default)]
struct BuildFnv;

struct Fnv(u64);

impl std::hash::BuildHasher for BuildFnv {
    type Hasher = Fnv;
    fn build_hasher(&self) -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Names of 8 bytes or more (nearly all) are taken a word at a time: their first and
        // last 8 bytes and their length, one multiply (equal names still hash alike; the
        // table compares the names themselves).
        const PRIME: u64 = 0x0100_0000_01b3;
        let n = bytes.len();
        if let (Some(head), Some(tail)) = (bytes.first_chunk::<8>(), bytes.last_chunk::<8>()) {
            let word = u64::from_le_bytes(*head) ^ u64::from_le_bytes(*tail).rotate_left(29);
            self.0 = (self.0 ^ word ^ n as u64).wrapping_mul(PRIME);
            self.0 ^= self.0 >> 32;
        } else {
            for &b in bytes {
                self.0 = (self.0 ^ u64::from(b)).wrapping_mul(PRIME);
            }
        }
    }
}

impl Vocabulary {
    pub fn new(dialect: &'static Dialect, known: &KnownTypes) -> Self {
        let mut map = HashMap::with_hasher(BuildFnv);
        for t in known.types_for(dialect.version) {
            map.insert(t, TypeClass::LogOnly);
        }
        for t in COMMON_TYPES.iter().chain(dialect.extra_types) {
            let class = match dialect.surface_kind(t) {
                Some(kind) => TypeClass::Surface(kind),
                None => TypeClass::LogOnly,
            };
            map.insert((*t).to_owned(), class);
        }
        // Extensions cannot un-retire a type (§21.4).
        for t in dialect.retired_types {
            map.insert((*t).to_owned(), TypeClass::RetiredRequired);
        }
        Vocabulary { known: map }
    }

    pub fn classify(&self, event_type: &str, ignorable: bool) -> TypeClass {
        match self.known.get(event_type) {
            Some(TypeClass::RetiredRequired) if ignorable => TypeClass::Opaque,
            Some(class) => *class,
            None if ignorable => TypeClass::Opaque,
            None => TypeClass::UnknownRequired,
        }
    }
}

/// Types that older DSH builds wrote and later builds retired: no format's vocabulary (§7.2)
/// has them, yet real logs hold them (seen in a corpus of 330 public
/// DSH logs from forks, issue 24; FORMAT.md §20 names `context/message` as a surface type of
/// the oldest design note). They are unknown to every format version (§7.1: refused, exit 3);
/// knowing them only lets the message say the log is old, not new. The v0 reader's retired
/// legacy types (§7.3) are here too: in v0 they are `retired-legacy-event`, elsewhere unknown.
const RETIRED_TYPES: &[&str] = &[
    "bash/sandbox-mode",
    "context/message",
    "mode/set",
    "prompt/blocked",
    "request/header-delta",
    "session/inherited",
    "usage",
];

/// What is known about a type that `version`'s vocabulary does not know: whether it is a
/// type of DSH's past (a pre-release type, or one of an earlier format version dropped
/// since) or of another format version, rather than of a newer harness or a fork.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeHistory {
    /// Written by older DSH builds and retired: in no format's vocabulary.
    Retired,
    /// Known to formats `first..=last`, all before `version`: retired since.
    RetiredAfter { first: u8, last: u8 },
    /// Known from a later format (`since`) on: the log's bodies and header disagree.
    Later { since: u8 },
    /// Not a built-in type of any format: a newer harness, or a fork's addition.
    Unknown,
}

/// The history of `event_type`, a type `version` does not know (§7.2, per-version lists).
pub fn type_history(event_type: &str, version: u8) -> TypeHistory {
    if RETIRED_TYPES.contains(&event_type) {
        return TypeHistory::Retired;
    }
    let knowing: Vec<u8> = super::dialect::DIALECTS
        .iter()
        .filter(|d| d.knows(event_type) && !d.is_retired(event_type))
        .map(|d| d.version)
        .collect();
    match (knowing.first(), knowing.last()) {
        (Some(&first), Some(&last)) if last < version => TypeHistory::RetiredAfter { first, last },
        (Some(_), _) => match knowing.iter().find(|&&v| v > version) {
            Some(&since) => TypeHistory::Later { since },
            None => TypeHistory::Unknown,
        },
        _ => TypeHistory::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::dialect::DIALECTS;

    #[test]
    fn known_types_file_with_version_lists() {
        let mut k = KnownTypes::default();
        k.parse(
            "t",
            "# fork types\nslots/dispatch 3-4\n\nacme/ping 0,2\nacme/all\n",
        )
        .unwrap();
        let v3 = Vocabulary::new(&DIALECTS[3], &k);
        assert_eq!(v3.classify("slots/dispatch", false), TypeClass::LogOnly);
        assert_eq!(v3.classify("acme/ping", false), TypeClass::UnknownRequired);
        assert_eq!(v3.classify("acme/all", false), TypeClass::LogOnly);
        let v0 = Vocabulary::new(&DIALECTS[0], &k);
        assert_eq!(v0.classify("acme/ping", false), TypeClass::LogOnly);
        assert_eq!(v0.classify("slots/dispatch", true), TypeClass::Opaque);
    }

    #[test]
    fn malformed_known_types_lines_are_errors() {
        let mut k = KnownTypes::default();
        assert!(k.parse("t", "slots/dispatch 5").is_err());
        assert!(k.parse("t", "slots/dispatch 4-3").is_err());
        assert!(k.parse("t", "nodelimiter").is_err());
        assert!(k.parse("t", "a/b 1 extra").is_err());
    }

    #[test]
    fn extensions_cannot_unretire_code_dispatch() {
        let mut k = KnownTypes::default();
        k.parse("t", "tool/code-dispatch").unwrap();
        let v3 = Vocabulary::new(&DIALECTS[3], &k);
        assert_eq!(
            v3.classify("tool/code-dispatch", false),
            TypeClass::RetiredRequired
        );
        assert_eq!(v3.classify("tool/code-dispatch", true), TypeClass::Opaque);
        let v2 = Vocabulary::new(&DIALECTS[2], &KnownTypes::default());
        assert_eq!(v2.classify("tool/code-dispatch", false), TypeClass::LogOnly);
    }

    #[test]
    fn surface_types_per_version() {
        let none = KnownTypes::default();
        let v2 = Vocabulary::new(&DIALECTS[2], &none);
        assert_eq!(
            v2.classify("system/message", false),
            TypeClass::UnknownRequired
        );
        let v3 = Vocabulary::new(&DIALECTS[3], &none);
        assert_eq!(
            v3.classify("system/message", false),
            TypeClass::Surface(SurfaceKind::System)
        );
    }
}

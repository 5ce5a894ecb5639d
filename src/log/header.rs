//! The header line (§4): version refusal first, then the per-version field rules.

use std::path::Path;

use super::codes::Code;
use super::dialect::{Dialect, SeedField};
use super::finding::{Pos, Reporter, Sink};
use super::input::canonical_generation;
use super::json::{self, Json};

/// The facts later stages and `stats` need from the header.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Header {
    pub version: u8,
    pub id: Option<String>,
    pub created_at: Option<i64>,
    pub cwd: Option<String>,
    pub parent_session: Option<String>,
    pub seed_length: Option<u64>,
    pub is_seeded: Option<bool>,
    pub origin: Option<String>,
    pub delegation_depth: Option<u64>,
    pub agent_preset: Option<String>,
    /// A DSH session header (`type`, `id`, `createdAt` as they must be) without
    /// `delegationDepth`, as in early v0 snapshots: an error (the released reader refuses it,
    /// §4.2), though what follows is a DSH log all the same.
    pub lacks_delegation_depth: bool,
}

/// What reading the header decided.
pub enum HeaderVerdict {
    /// The version is known: check the events with this dialect.
    Read(Header, &'static Dialect),
    /// The version is missing or unusable, or unsupported: nothing more can be checked.
    Stop { version: Option<i64> },
}

/// The header keys of every version, but for the seed key: `seedLength` in v0/v1 and
/// `isSeeded` from v2 (see [`SeedField`]).
const KEYS: &[&str] = &[
    "type",
    "version",
    "id",
    "createdAt",
    "cwd",
    "parentSession",
    "origin",
    "delegationDepth",
    "agentPreset",
];

pub fn check(text: &[u8], pos: Pos, path: Option<&Path>, sink: &mut dyn Sink) -> HeaderVerdict {
    let at = |version| Reporter::untyped(version, pos);
    let decoded = String::from_utf8_lossy(text);
    let value = match json::parse(decoded.as_bytes()) {
        Ok(v) => v,
        Err(why) => {
            let bom = if text.starts_with(&[0xEF, 0xBB, 0xBF]) {
                " (the line starts with a UTF-8 byte-order mark, which JSON.parse rejects)"
            } else {
                ""
            };
            return stop(
                sink,
                pos,
                Code::HeaderNotJson,
                format!("header line is not valid JSON: {why}{bom}"),
            );
        }
    };
    if !value.is_obj() {
        return stop(
            sink,
            pos,
            Code::HeaderFieldInvalid,
            format!(
                "first line is not a session header: expected an object, found {}",
                value.kind_name()
            ),
        );
    }
    // Version refusal comes before every other header rule (§4.1).
    let raw_version = match value.get("version") {
        Some(Json::Num(n)) => *n,
        Some(other) => {
            return stop(
                sink,
                pos,
                Code::HeaderFieldInvalid,
                format!(
                    "header `version` must be a number, found {}; without it the format cannot be chosen",
                    other.kind_name()
                ),
            );
        }
        None => {
            return stop(
                sink,
                pos,
                Code::HeaderFieldInvalid,
                "header has no `version`; without it the format cannot be chosen",
            );
        }
    };
    let dialect = raw_version
        .safe_int()
        .filter(|v| (0..=4).contains(v))
        .and_then(|v| Dialect::for_version(v as u8));
    let Some(dialect) = dialect else {
        let id = value.get("id").and_then(Json::as_str).unwrap_or("?");
        let direction = if raw_version.as_f64() > 4.0 {
            "was written by a newer or forked harness"
        } else {
            "is not a released format"
        };
        sink.push(at(None).finding(
            Code::FormatVersionUnsupported,
            format!(
                "session \"{}\" uses log format v{raw_version}, but dshs reads only v0–v4: the log {direction}",
                crate::log::text::clip(id, 80)
            ),
        ));
        return HeaderVerdict::Stop {
            version: raw_version.safe_int(),
        };
    };
    if std::str::from_utf8(text).is_err() {
        sink.push(at(Some(dialect.version)).finding(
            Code::InvalidUtf8,
            "header line holds bytes that are not UTF-8 (read as U+FFFD, like DSH does)",
        ));
    }
    let header = check_fields(&value, dialect, &at(Some(dialect.version)), sink);
    if let Some(path) = path {
        check_path(&header, path, &at(Some(dialect.version)), sink);
    }
    HeaderVerdict::Read(header, dialect)
}

/// A first line the reader cannot go past: its one finding, and no version to read on with.
fn stop(sink: &mut dyn Sink, pos: Pos, code: Code, message: impl Into<String>) -> HeaderVerdict {
    sink.push(Reporter::untyped(None, pos).finding(code, message));
    HeaderVerdict::Stop { version: None }
}

fn check_fields(v: &Json<'_>, d: &Dialect, at: &Reporter<'_>, sink: &mut dyn Sink) -> Header {
    let mut h = Header {
        version: d.version,
        ..Header::default()
    };
    let mut bad = |field: &str, why: String| {
        sink.push(at.finding(
            Code::HeaderFieldInvalid,
            format!("first line is not a session header: `{field}` {why}"),
        ));
    };
    let mut type_ok = false;
    match v.get("type") {
        Some(Json::Str(s)) if s == "session" => type_ok = true,
        Some(other) => bad(
            "type",
            format!("must be \"session\", found {}", show(other)),
        ),
        None => bad("type", "is missing".into()),
    }
    match v.get("id") {
        Some(Json::Str(s)) => h.id = Some(s.to_string()),
        Some(other) => bad(
            "id",
            format!("must be a string, found {}", other.kind_name()),
        ),
        None => bad("id", "is missing".into()),
    }
    match v.get("createdAt") {
        Some(n) if n.is_neg_zero() => bad("createdAt", "must not be -0".into()),
        Some(n) => match n.safe_uint() {
            Some(t) => h.created_at = Some(t as i64),
            None => bad(
                "createdAt",
                format!("must be a safe integer ≥ 0, found {}", show(n)),
            ),
        },
        None => bad("createdAt", "is missing".into()),
    }
    match v.get("delegationDepth") {
        Some(n) if n.is_neg_zero() => bad("delegationDepth", "must not be -0".into()),
        Some(n) => match n.safe_uint() {
            Some(t) => h.delegation_depth = Some(t),
            None => bad(
                "delegationDepth",
                format!("must be a safe integer ≥ 0, found {}", show(n)),
            ),
        },
        // The hint only for what is otherwise a DSH session header, not for any JSON line.
        None if type_ok && h.id.is_some() && h.created_at.is_some() => {
            h.lacks_delegation_depth = true;
            bad(
                "delegationDepth",
                "is missing (early v0 snapshots lack it; the released v0 reader refuses such a header)"
                    .into(),
            );
        }
        None => bad("delegationDepth", "is missing".into()),
    }
    match v.get("origin") {
        None => {}
        Some(Json::Str(s)) if s == "subagent" => h.origin = Some(s.to_string()),
        Some(other) => bad(
            "origin",
            format!("may only be \"subagent\", found {}", show(other)),
        ),
    }
    let optional_strings = [
        ("agentPreset", &mut h.agent_preset),
        ("parentSession", &mut h.parent_session),
    ];
    for (key, slot) in optional_strings {
        match v.get(key) {
            None => {}
            Some(Json::Str(s)) => *slot = Some(s.to_string()),
            Some(other) => bad(
                key,
                format!("must be a string, found {}", other.kind_name()),
            ),
        }
    }
    match d.seed_field {
        SeedField::Length => match v.get("seedLength") {
            None => {}
            Some(n) => match n.safe_uint() {
                Some(len) => h.seed_length = Some(len),
                None => bad(
                    "seedLength",
                    format!("must be a safe integer ≥ 0, found {}", show(n)),
                ),
            },
        },
        SeedField::Flag => {
            match v.get("isSeeded") {
                Some(Json::Bool(b)) => h.is_seeded = Some(*b),
                Some(other) => bad(
                    "isSeeded",
                    format!("must be a boolean, found {}", other.kind_name()),
                ),
                None => bad("isSeeded", format!("is required in format v{}", d.version)),
            }
            if v.has("seedLength") {
                sink.push(at.finding(
                    Code::HeaderSeedField,
                    format!(
                        "header has `seedLength`, a v0/v1 field; format v{} records seeding with `isSeeded` and an inherited `session/end-seed` marker",
                        d.version
                    ),
                ));
            }
        }
    }
    match v.get("cwd") {
        None => {}
        Some(Json::Str(s)) => {
            if is_absolute(s) {
                h.cwd = Some(s.to_string());
            } else {
                sink.push(at.finding(
                    Code::HeaderCwdNotAbsolute,
                    format!(
                        "session header cwd must be an absolute path, got \"{}\"",
                        crate::log::text::clip(s, 200)
                    ),
                ));
            }
        }
        Some(other) => sink.push(at.finding(
            Code::HeaderCwdNotAbsolute,
            format!(
                "session header cwd must be a string, found {}",
                other.kind_name()
            ),
        )),
    }
    let seed_key = match d.seed_field {
        SeedField::Length => "seedLength",
        SeedField::Flag => "isSeeded",
    };
    for key in v.keys() {
        if key == "sandboxMode" || key == "approvalPolicy" {
            sink.push(at.finding(
                Code::HeaderRetiredField,
                format!("session header uses retired policy baseline field `{key}`"),
            ));
        } else if key == "seedLength" && d.seed_field == SeedField::Flag {
            // Reported as header-seed-field above.
        } else if key != seed_key && !KEYS.contains(&key) {
            let consequence = if d.strict_header {
                "the codec refuses it"
            } else {
                "the v0 reader ignores it"
            };
            sink.push(at.finding(
                Code::HeaderUnexpectedField,
                format!(
                    "session header has unexpected field `{}` for format v{} ({consequence})",
                    crate::log::text::clip(key, 80),
                    d.version
                ),
            ));
        }
    }
    h
}

fn show(v: &Json<'_>) -> String {
    match v {
        Json::Num(n) => n.to_string(),
        Json::Str(s) => format!("\"{}\"", crate::log::text::clip(s, 60)),
        other => other.kind_name().to_owned(),
    }
}

/// POSIX (`/…`) or Windows (`C:\…`, `C:/…`, `\\server\…`) absolute paths, so logs can be
/// checked on another OS than the one that wrote them.
pub fn is_absolute(p: &str) -> bool {
    let b = p.as_bytes();
    p.starts_with('/')
        || p.starts_with("\\\\")
        || (b.len() >= 3
            && b[0].is_ascii_alphabetic()
            && b[1] == b':'
            && matches!(b[2], b'\\' | b'/'))
}

/// DSH's `encodeSegment`: keep `A–Z a–z 0–9 . _ -`, escape every other UTF-16 unit as `~XXXX`.
pub fn encode_segment(id: &str) -> Option<String> {
    if id.is_empty() {
        return None;
    }
    if id == "." || id == ".." {
        return Some("~002E".repeat(id.len()));
    }
    let mut out = String::with_capacity(id.len());
    for unit in id.encode_utf16() {
        match u8::try_from(unit) {
            Ok(b) if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("~{unit:04X}")),
        }
    }
    Some(out)
}

/// DSH's project directory name for a `cwd`: the same escaping, but runs of `/`, `\`, `:`
/// become one `-`, leading `-` are stripped, cut to 251 code units, wrapped in `--…--`.
pub fn project_key(cwd: &str) -> String {
    let mut slug = String::new();
    let mut in_sep = false;
    for unit in cwd.encode_utf16() {
        let sep = matches!(unit, 0x2F | 0x5C | 0x3A);
        if sep {
            if !in_sep {
                slug.push('-');
            }
            in_sep = true;
            continue;
        }
        in_sep = false;
        match u8::try_from(unit) {
            Ok(b) if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') => {
                slug.push(b as char)
            }
            _ => slug.push_str(&format!("~{unit:04X}")),
        }
    }
    let slug = slug.trim_start_matches('-');
    let slug = if slug.is_empty() { "root" } else { slug };
    let cut: String = slug.chars().take(251).collect();
    format!("--{cut}--")
}

fn check_path(h: &Header, path: &Path, at: &Reporter<'_>, sink: &mut dyn Sink) {
    let Some(file_name) = path.file_name().and_then(|n| n.to_str()) else {
        return;
    };
    let base = file_name
        .strip_suffix(".zstd")
        .or_else(|| file_name.strip_suffix(".zst"))
        .unwrap_or(file_name);
    let Some(generation) = canonical_generation(base) else {
        // Not a DSH generation file name: nothing to compare.
        return;
    };
    if generation != u64::from(h.version) {
        sink.push(at.finding(
            Code::GenerationNameMismatch,
            format!(
                "file name `{file_name}` is generation v{generation} but the header says version {}",
                h.version
            ),
        ));
    }
    // Only a path shaped like DSH's layout (<project>/<encoded-id>/session…) is compared.
    let session_dir = path.parent();
    let project_dir = session_dir.and_then(Path::parent);
    let (Some(session_dir), Some(project_dir)) = (session_dir, project_dir) else {
        return;
    };
    let dir_name = |p: &Path| p.file_name().and_then(|n| n.to_str()).map(str::to_owned);
    let (Some(session_name), Some(project_name)) = (dir_name(session_dir), dir_name(project_dir))
    else {
        return;
    };
    let project_shaped = project_name == "_no-cwd"
        || (project_name.starts_with("--")
            && project_name.ends_with("--")
            && project_name.len() > 4);
    if !project_shaped {
        return;
    }
    if let Some(id) = &h.id
        && encode_segment(id).as_deref() != Some(session_name.as_str())
    {
        sink.push(at.finding(
                Code::HeaderIdPathMismatch,
                format!(
                    "header id \"{}\" encodes to directory `{}`, but the log sits in `{session_name}`; DSH opening this session by id will not find it here",
                    crate::log::text::clip(id, 80),
                    encode_segment(id).unwrap_or_default()
                ),
            ));
    }
    let expected_project = h
        .cwd
        .as_deref()
        .map_or_else(|| "_no-cwd".to_owned(), project_key);
    if expected_project != project_name {
        sink.push(at.finding(
            Code::HeaderIdPathMismatch,
            format!(
                "header cwd maps to project directory `{expected_project}`, but the log sits in `{project_name}`"
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::codes::Code;
    use crate::log::finding::Finding;

    fn run(line: &str) -> (Vec<Code>, Option<u8>) {
        let mut f: Vec<Finding> = Vec::new();
        let v = check(line.as_bytes(), Pos { line: 1, byte: 0 }, None, &mut f);
        let version = match v {
            HeaderVerdict::Read(h, _) => Some(h.version),
            HeaderVerdict::Stop { .. } => None,
        };
        (f.iter().map(|f| f.code).collect(), version)
    }

    #[test]
    fn valid_headers_per_version() {
        let ok = [
            r#"{"type":"session","version":0,"id":"a","createdAt":1,"delegationDepth":0}"#,
            r#"{"type":"session","version":1,"id":"a","createdAt":1,"delegationDepth":0,"seedLength":3}"#,
            r#"{"type":"session","version":2,"id":"a","createdAt":1,"delegationDepth":0,"isSeeded":false}"#,
            r#"{"type":"session","version":3,"id":"a","createdAt":1,"delegationDepth":0,"isSeeded":true,"cwd":"C:\\w","origin":"subagent"}"#,
            r#"{"type":"session","version":4,"id":"a","createdAt":1,"delegationDepth":2,"isSeeded":false,"cwd":"/w","agentPreset":"x","parentSession":"p"}"#,
        ];
        for (i, line) in ok.iter().enumerate() {
            assert_eq!(run(line), (vec![], Some(i as u8)), "{line}");
        }
    }

    #[test]
    fn version_refusal_comes_before_every_other_rule() {
        let (codes, v) = run(r#"{"type":"nope","version":5}"#);
        assert_eq!(codes, vec![Code::FormatVersionUnsupported]);
        assert_eq!(v, None);
        for bad in ["-1", "3.5", "1e3"] {
            let (codes, _) = run(&format!(r#"{{"version":{bad}}}"#));
            assert_eq!(codes, vec![Code::FormatVersionUnsupported], "{bad}");
        }
    }

    #[test]
    fn missing_or_non_numeric_version_is_a_header_error() {
        assert_eq!(
            run(r#"{"type":"session","id":"a"}"#).0,
            vec![Code::HeaderFieldInvalid]
        );
        assert_eq!(run(r#"{"version":"3"}"#).0, vec![Code::HeaderFieldInvalid]);
        assert_eq!(run(r#"[1]"#).0, vec![Code::HeaderFieldInvalid]);
        assert_eq!(run("\u{feff}{}").0, vec![Code::HeaderNotJson]);
    }

    #[test]
    fn field_rules() {
        let base = r#""type":"session","id":"a","createdAt":1,"delegationDepth":0"#;
        let case = |extra: &str, v: u8| {
            let seed = if v >= 2 { r#","isSeeded":false"# } else { "" };
            run(&format!("{{{base},\"version\":{v}{seed}{extra}}}")).0
        };
        assert_eq!(
            case(r#","cwd":"rel/dir""#, 0),
            vec![Code::HeaderCwdNotAbsolute]
        );
        assert_eq!(
            case(r#","sandboxMode":"x""#, 0),
            vec![Code::HeaderRetiredField]
        );
        assert_eq!(case(r#","extra":1"#, 0), vec![Code::HeaderUnexpectedField]);
        assert_eq!(case(r#","extra":1"#, 3), vec![Code::HeaderUnexpectedField]);
        assert_eq!(case(r#","seedLength":1"#, 2), vec![Code::HeaderSeedField]);
        assert_eq!(
            case(r#","isSeeded":true"#, 1),
            vec![Code::HeaderUnexpectedField]
        );
        assert_eq!(
            case(r#","origin":"user""#, 4),
            vec![Code::HeaderFieldInvalid]
        );
        let neg =
            run(r#"{"type":"session","version":0,"id":"a","createdAt":-0,"delegationDepth":0}"#);
        assert_eq!(neg.0, vec![Code::HeaderFieldInvalid]);
        let missing = run(r#"{"type":"session","version":0,"id":"a","createdAt":1}"#);
        assert_eq!(missing.0, vec![Code::HeaderFieldInvalid]);
        let no_flag =
            run(r#"{"type":"session","version":2,"id":"a","createdAt":1,"delegationDepth":0}"#);
        assert_eq!(no_flag.0, vec![Code::HeaderFieldInvalid]);
    }

    #[test]
    fn directory_names_follow_dsh_encoding() {
        assert_eq!(encode_segment("abc-1.2_x").as_deref(), Some("abc-1.2_x"));
        assert_eq!(encode_segment("a b~").as_deref(), Some("a~0020b~007E"));
        assert_eq!(encode_segment("..").as_deref(), Some("~002E~002E"));
        assert_eq!(encode_segment(""), None);
        assert_eq!(project_key("/home/me/proj"), "--home-me-proj--");
        assert_eq!(project_key("C:\\Users\\me"), "--C-Users-me--");
        assert_eq!(project_key("/"), "--root--");
    }

    #[test]
    fn generation_name_and_layout_are_checked_only_when_dsh_shaped() {
        let line = r#"{"type":"session","version":3,"id":"s 1","createdAt":1,"delegationDepth":0,"isSeeded":false,"cwd":"/w"}"#;
        let mut f: Vec<Finding> = Vec::new();
        let p = Path::new("/x/--w--/s~00201/session.v3.jsonl");
        check(line.as_bytes(), Pos::default(), Some(p), &mut f);
        assert!(f.is_empty(), "{f:?}");
        let mut f: Vec<Finding> = Vec::new();
        let p = Path::new("/x/--other--/wrong/session.v4.jsonl");
        check(line.as_bytes(), Pos::default(), Some(p), &mut f);
        let codes: Vec<Code> = f.iter().map(|f| f.code).collect();
        assert_eq!(
            codes,
            vec![
                Code::GenerationNameMismatch,
                Code::HeaderIdPathMismatch,
                Code::HeaderIdPathMismatch
            ]
        );
        let mut f: Vec<Finding> = Vec::new();
        check(
            line.as_bytes(),
            Pos::default(),
            Some(Path::new("/tmp/anything.jsonl")),
            &mut f,
        );
        assert!(f.is_empty());
    }
}

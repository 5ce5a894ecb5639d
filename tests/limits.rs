//! dshs's own limits are never evidence of damage (issue 37 item 2): a row past the line-size
//! guard or the JSON depth guard — in a plain log, a zstd log or a SQLite store, inside the
//! committed region or at its very end — is neither committed damage nor a crash tail. Every
//! command refuses with exit 4, names the guard, its limit, by how much the row exceeds it,
//! where, and the variable that raises it; `repair` changes nothing. The guards are lowered
//! with their environment variables so that small inputs exercise them.

mod common;

#[path = "../benches/store/mod.rs"]
mod store;

use std::path::{Path, PathBuf};

use common::{dshs, testdata};
use rusqlite::params;

/// Every command that reads one log, with the arguments it needs before the file.
const COMMANDS: &[&[&str]] = &[
    &["validate"],
    &["validate", "--format", "json"],
    &["surface"],
    &["derive"],
    &["show"],
    &["stats"],
    &["repair", "--dry-run"],
    &["repair"],
    // A pattern every guarded line holds raw (its key `x`), so grep has to read that line: a
    // guard must not turn into a false "no match".
    &["grep", "-F", "x"],
    &["grep", "-F", "-c", "x"],
];

/// A small guard for the line-size tests (bytes).
const LINE_GUARD: usize = 64 * 1024;

/// The sample log's lines, with its last `turn/end` at the end.
fn sample() -> Vec<String> {
    std::fs::read_to_string(testdata("sample/session.v4.jsonl"))
        .expect("sample")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `sample` with an extra ignorable event (seq 27) holding `value` after the last turn end
/// (`at_end`), or with seq 25's data holding it, inside the committed region.
fn with_value(value: &str, at_end: bool) -> Vec<u8> {
    let mut lines = sample();
    if at_end {
        lines.push(format!(
            r#"{{"type":"x/extra","seq":27,"time":1027,"data":{{"x":{value}}},"ignorable":true}}"#
        ));
    } else {
        let n = lines.len();
        lines[n - 2] = format!(
            r#"{{"type":"step/end","seq":25,"time":1025,"data":{{"turn":1,"step":2,"x":{value}}}}}"#
        );
    }
    let mut text = lines.join("\n");
    text.push('\n');
    text.into_bytes()
}

fn nested(levels: usize) -> String {
    format!("{}{}", "[".repeat(levels), "]".repeat(levels))
}

fn long_string(bytes: usize) -> String {
    format!("\"{}\"", "a".repeat(bytes))
}

/// Run every command on `path` with `env` set; each must exit 4 naming `guard` and `var`, and
/// the file must be unchanged (repair included).
fn assert_refused_everywhere(path: &Path, env: &[(&str, &str)], guard: &str, var: &str) {
    let before = std::fs::read(path).expect("read");
    for args in COMMANDS {
        let out = dshs()
            .envs(env.iter().copied())
            .args(*args)
            .arg(path)
            .output()
            .expect("dshs runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(4),
            "{args:?} on {}: stderr {stderr}",
            path.display()
        );
        assert!(
            stderr.contains(guard)
                && stderr.contains(var)
                && stderr.contains("more than the limit"),
            "{args:?}: {stderr}"
        );
        assert!(
            !stderr.contains("crash") && !stderr.contains("corrupt"),
            "{args:?}: never called damage: {stderr}"
        );
        if args.contains(&"json") {
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(stdout.contains(r#""status":"unreadable""#), "{stdout}");
        }
        assert_eq!(
            std::fs::read(path).expect("read"),
            before,
            "{args:?} changed the log"
        );
    }
    let dir = path.parent().expect("dir");
    let sidecars: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .flatten()
        .filter(|e| e.path() != path && !e.path().is_dir())
        .map(|e| e.path())
        .collect();
    assert!(
        sidecars.is_empty(),
        "nothing written beside it: {sidecars:?}"
    );
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let sub = dir.join(name.replace('.', "_"));
    std::fs::create_dir_all(&sub).expect("dir");
    let path = sub.join(name);
    std::fs::write(&path, bytes).expect("write");
    path
}

fn zstd_of(plain: &[u8]) -> Vec<u8> {
    // The header frame, then the rest in one frame.
    let header = plain.iter().position(|&b| b == b'\n').expect("header") + 1;
    let mut z = dshs::log::input::zstd::encode_frame(&plain[..header]).expect("zstd");
    z.extend(dshs::log::input::zstd::encode_frame(&plain[header..]).expect("zstd"));
    z
}

#[test]
fn a_line_past_the_line_size_guard_is_refused_with_exit_4_in_plain_and_zstd_logs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let guard = LINE_GUARD.to_string();
    let env = [("DSHS_MAX_LINE_BYTES", guard.as_str())];
    for at_end in [true, false] {
        let plain = with_value(&long_string(2 * LINE_GUARD), at_end);
        let name = if at_end { "end" } else { "inner" };
        let p = write(tmp.path(), &format!("{name}.jsonl"), &plain);
        assert_refused_everywhere(&p, &env, "line-size guard", "DSHS_MAX_LINE_BYTES");
        let z = write(tmp.path(), &format!("{name}.jsonl.zstd"), &zstd_of(&plain));
        assert_refused_everywhere(&z, &env, "line-size guard", "DSHS_MAX_LINE_BYTES");
    }
    // One rule for both: a line just under the guard is read, plain and compressed alike.
    let plain = with_value(&long_string(LINE_GUARD - 200), false);
    for (name, bytes) in [
        ("ok.jsonl", plain.clone()),
        ("ok.jsonl.zstd", zstd_of(&plain)),
    ] {
        let p = write(tmp.path(), name, &bytes);
        let out = dshs()
            .envs(env)
            .args(["validate"])
            .arg(&p)
            .output()
            .expect("dshs runs");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_refusal_says_where_by_how_much_and_how_to_raise_the_guard() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let plain = with_value(&long_string(2 * LINE_GUARD), true);
    let p = write(tmp.path(), "s.jsonl", &plain);
    let line_len = plain.split(|&b| b == b'\n').nth(28).expect("line 29").len();
    let out = dshs()
        .env("DSHS_MAX_LINE_BYTES", LINE_GUARD.to_string())
        .env("DSHS_THREADS", "1")
        .arg("validate")
        .arg(&p)
        .output()
        .expect("dshs runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("line 29 (byte "), "{stderr}");
    assert!(
        stderr.contains(&format!("limit of {LINE_GUARD} bytes")),
        "{stderr}"
    );
    assert!(stderr.contains("DSHS_MAX_LINE_BYTES=N"), "{stderr}");
    assert!(stderr.contains("more than the limit"), "{stderr}");
    // Raised past the line, the same log reads: the extra event is an ignorable one.
    let out = dshs()
        .env("DSHS_MAX_LINE_BYTES", (line_len + 1).to_string())
        .arg("validate")
        .arg(&p)
        .output()
        .expect("dshs runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn json_nested_past_the_depth_guard_is_refused_and_never_crashes_the_process() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // 100,000 levels: measured without recursion, so no stack overflow (an abort).
    for at_end in [true, false] {
        let plain = with_value(&nested(100_000), at_end);
        let name = if at_end { "end" } else { "inner" };
        let p = write(tmp.path(), &format!("deep-{name}.jsonl"), &plain);
        assert_refused_everywhere(&p, &[], "JSON depth guard", "DSHS_MAX_JSON_DEPTH");
        let z = write(
            tmp.path(),
            &format!("deep-{name}.jsonl.zstd"),
            &zstd_of(&plain),
        );
        assert_refused_everywhere(&z, &[], "JSON depth guard", "DSHS_MAX_JSON_DEPTH");
    }
    // Past serde_json's old 128 and up to the guard, the log is valid (as DSH, whose
    // JSON.parse takes any depth, reads it): inside the committed region and at the end.
    for at_end in [true, false] {
        let p = write(
            tmp.path(),
            &format!("ok-{at_end}.jsonl"),
            &with_value(&nested(990), at_end),
        );
        for args in COMMANDS {
            let out = dshs().args(*args).arg(&p).output().expect("dshs runs");
            // grep's own convention: 1 is "no match", not a failure.
            let ok = if args[0] == "grep" { 1 } else { 0 };
            assert!(
                out.status.code().is_some_and(|c| c <= ok),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    // The guard can be lowered (and raised, up to its cap) by its variable.
    let p = write(tmp.path(), "d300.jsonl", &with_value(&nested(300), true));
    assert_refused_everywhere(
        &p,
        &[("DSHS_MAX_JSON_DEPTH", "200")],
        "JSON depth guard",
        "DSHS_MAX_JSON_DEPTH",
    );
}

// ---------------------------------------------------------------------------------------
// SQLite stores: the same rule for rows
// ---------------------------------------------------------------------------------------

const TURN_START: &str = r#"{"turn":1}"#;
const TURN_END: &str = r#"{"turn":1,"reason":{"kind":"completed"}}"#;

/// A schema-17 store with session `s` (format 0): a turn, then `extra` as an ignorable
/// scalar row at seq 2 (`inner`: followed by another turn, so it is committed).
fn store_with(
    dir: &Path,
    name: &str,
    data: rusqlite::types::Value,
    sources: rusqlite::types::Value,
    inner: bool,
) -> PathBuf {
    let path = dir.join(name);
    let conn = store::create(&path, 17).expect("create");
    conn.pragma_update(None, "journal_mode", "DELETE")
        .expect("journal mode");
    store::insert_session(
        &conn,
        r#"{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"/w","delegationDepth":0}"#,
    )
    .expect("session");
    let ev = |seq: i64, ty: &str, data: rusqlite::types::Value| {
        conn.execute(
            "INSERT INTO events VALUES ('s', ?1, ?2, ?1, ?3, NULL, NULL, NULL)",
            params![seq, ty, data],
        )
        .expect("row");
    };
    let text = |s: &str| rusqlite::types::Value::Text(s.to_owned());
    ev(0, "turn/start", text(TURN_START));
    ev(1, "turn/end", text(TURN_END));
    conn.execute(
        "INSERT INTO events VALUES ('s', 2, 'x/extra', 2, ?1, ?2, NULL, 1)",
        params![data, sources],
    )
    .expect("row");
    if inner {
        ev(3, "turn/start", text(r#"{"turn":2}"#));
        ev(
            4,
            "turn/end",
            text(r#"{"turn":2,"reason":{"kind":"completed"}}"#),
        );
    }
    drop(conn);
    path
}

#[test]
fn a_store_row_past_the_line_size_guard_is_refused_as_blob_and_as_text_alike() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let guard = LINE_GUARD.to_string();
    let env = [("DSHS_MAX_LINE_BYTES", guard.as_str())];
    let big = format!(r#"{{"text":{}}}"#, long_string(4 * LINE_GUARD));
    let frame = zstd::bulk::compress(big.as_bytes(), 3).expect("zstd");
    for inner in [false, true] {
        for (form, data) in [
            ("blob", rusqlite::types::Value::Blob(frame.clone())),
            ("text", rusqlite::types::Value::Text(big.clone())),
        ] {
            let dir = tmp.path().join(format!("{form}-{inner}"));
            std::fs::create_dir_all(&dir).expect("dir");
            let db = store_with(&dir, "store.db", data, rusqlite::types::Value::Null, inner);
            assert_refused_everywhere(&db, &env, "line-size guard", "DSHS_MAX_LINE_BYTES");
        }
    }
    // Under the guard, the same BLOB row is an ordinary committed row (no crash tail).
    let dir = tmp.path().join("ok");
    std::fs::create_dir_all(&dir).expect("dir");
    let db = store_with(
        &dir,
        "store.db",
        rusqlite::types::Value::Blob(frame),
        rusqlite::types::Value::Null,
        false,
    );
    let out = dshs()
        .args(["validate", "--format", "json"])
        .arg(&db)
        .output()
        .expect("dshs runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(!stdout.contains("crash-tail"), "{stdout}");
}

#[test]
fn a_store_row_past_the_depth_guard_is_refused_canonical_or_not() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let deep = nested(100_000);
    // Canonical text is copied as it is; text with spaces is rebuilt the way JavaScript
    // would: either way past the guard, never damage.
    let spaced = format!("{} {}", "[".repeat(5_000), "]".repeat(5_000));
    for (name, text) in [("canonical", deep.as_str()), ("spaced", spaced.as_str())] {
        for inner in [false, true] {
            let dir = tmp.path().join(format!("{name}-{inner}"));
            std::fs::create_dir_all(&dir).expect("dir");
            let db = store_with(
                &dir,
                "store.db",
                rusqlite::types::Value::Text(text.to_owned()),
                rusqlite::types::Value::Null,
                inner,
            );
            assert_refused_everywhere(&db, &[], "JSON depth guard", "DSHS_MAX_JSON_DEPTH");
        }
    }
}

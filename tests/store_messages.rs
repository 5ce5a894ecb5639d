//! What the read side of a SQLite store says (issue 37 item 16): no derived `isSeeded` for a
//! version dshs does not read, a bounded list of ids when a command needs one session, and
//! a 0-byte database file read as the empty store it is.

mod common;

#[path = "../benches/store/mod.rs"]
mod store;

use std::path::{Path, PathBuf};

use common::{dshs, json_lines};

/// A schema-17 store holding one session per header.
fn store_of(dir: &Path, headers: &[String]) -> PathBuf {
    let path = dir.join("store.db");
    let conn = store::create(&path, 17).expect("create");
    conn.pragma_update(None, "journal_mode", "DELETE")
        .expect("journal mode");
    for h in headers {
        store::insert_session(&conn, h).expect("session");
    }
    drop(conn);
    path
}

fn header(id: &str, version: u32) -> String {
    format!(
        r#"{{"type":"session","version":{version},"id":"{id}","createdAt":1,"cwd":"/w","delegationDepth":0}}"#
    )
}

#[test]
fn is_seeded_is_not_derived_for_a_version_dshs_does_not_read() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (version, derived) in [(9, false), (3, true)] {
        let dir = tmp.path().join(version.to_string());
        std::fs::create_dir_all(&dir).expect("dir");
        let db = store_of(&dir, &[header("s", version)]);
        let out = dshs()
            .args(["validate", "--format", "json"])
            .arg(&db)
            .output()
            .expect("dshs runs");
        let codes: Vec<String> = json_lines(&out.stdout)
            .iter()
            .filter(|r| r["type"] == "finding")
            .map(|r| r["code"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(
            codes.iter().any(|c| c == "sqlite-is-seeded-derived"),
            derived,
            "version {version}: {codes:?}"
        );
        if !derived {
            assert_eq!(out.status.code(), Some(3), "unsupported: {codes:?}");
        }
    }
}

#[test]
fn a_command_needing_one_session_lists_a_bounded_number_of_ids() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let headers: Vec<String> = (0..45)
        .map(|i| header(&format!("sess-{i:03}"), 0))
        .collect();
    let db = store_of(tmp.path(), &headers);
    let out = dshs().arg("show").arg(&db).output().expect("dshs runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("holds 45 sessions"), "{stderr}");
    assert!(
        stderr.contains("sess-000") && stderr.contains("sess-019"),
        "{stderr}"
    );
    assert!(!stderr.contains("sess-020"), "at most 20 ids: {stderr}");
    assert!(stderr.contains("and 25 more"), "{stderr}");
}

#[test]
fn a_zero_byte_database_file_is_an_empty_store() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for name in ["e.db", "e.sqlite", "e.sqlite3"] {
        let path = tmp.path().join(name);
        std::fs::write(&path, b"").expect("write");
        let out = dshs()
            .args(["validate", "--format", "json"])
            .arg(&path)
            .output()
            .expect("dshs runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{name}: {stdout}");
        assert!(stdout.contains("sqlite-store-empty"), "{name}: {stdout}");
        assert!(!stdout.contains("file-no-header"), "{name}: {stdout}");
        // `ls` lists its zero sessions, as it lists any store.
        let out = dshs()
            .args(["ls", "--format", "json"])
            .arg(&path)
            .output()
            .expect("dshs runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "ls {name}: {stderr}");
        assert!(out.stdout.is_empty(), "ls {name}: no row");
        assert!(stderr.contains("empty SQLite store"), "ls {name}: {stderr}");
        // Read, not written: still 0 bytes, nothing beside it.
        assert_eq!(std::fs::metadata(&path).expect("meta").len(), 0);
    }
    assert_eq!(std::fs::read_dir(tmp.path()).expect("dir").count(), 3);
    // Any other name stays a log: an empty log has no header.
    let path = tmp.path().join("e.jsonl");
    std::fs::write(&path, b"").expect("write");
    let out = dshs()
        .args(["validate", "--format", "json"])
        .arg(&path)
        .output()
        .expect("dshs runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("file-no-header"));
}

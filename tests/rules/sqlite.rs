//! The storage-layer codes of SQLITE.md, each produced by the smallest database that shows
//! it (the catalogue test counts them with the codes of the minimal logs).

use std::collections::BTreeSet;
use std::path::Path;

use crate::store;
use dshs::log::sqlite::Store;

const HEADER: &str =
    r#"{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"/w","delegationDepth":0}"#;

/// A schema-17 store with session `s`, changed by `sql`.
fn store_with(dir: &Path, name: &str, sql: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    let conn = store::create(&path, 17).expect("create");
    conn.pragma_update(None, "journal_mode", "DELETE")
        .expect("journal mode");
    store::insert_session(&conn, HEADER).expect("session");
    conn.execute_batch(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    path
}

/// Every code the storage layer reports for `path`: its refusal, store findings, and the
/// findings of reading session `s` (asking for a derived `isSeeded`).
fn codes_of(path: &Path) -> Vec<&'static str> {
    let mut store = match Store::open(path) {
        Ok(s) => s,
        Err(e) => return e.code().map(|c| c.as_str()).into_iter().collect(),
    };
    let mut out: Vec<&'static str> = store.findings().iter().map(|f| f.code.as_str()).collect();
    if let Ok(mut r) = store.read("s") {
        r.derive_is_seeded().expect("derive");
        let mut sink = Vec::new();
        std::io::Read::read_to_end(&mut r, &mut sink).expect("stream");
        out.extend(
            r.finish()
                .expect("finish")
                .findings
                .iter()
                .map(|f| f.code.as_str()),
        );
    }
    out
}

/// (code, the database that produces it).
pub fn table(dir: &Path) -> Vec<(&'static str, std::path::PathBuf)> {
    let empty = dir.join("empty.db");
    std::fs::write(&empty, b"").expect("write");
    let turn = "INSERT INTO events VALUES ('s', 0, 'turn/start', 0, '{\"turn\":1}', NULL, NULL, NULL); \
                INSERT INTO events VALUES ('s', 1, 'turn/end', 0, '{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}', NULL, NULL, NULL);";
    vec![
        ("sqlite-store-empty", empty),
        (
            "sqlite-not-session-store",
            store_with(dir, "index.db", "PRAGMA application_id = 1146308689"),
        ),
        (
            "sqlite-schema-unsupported",
            store_with(dir, "v19.db", "PRAGMA user_version = 19"),
        ),
        (
            "sqlite-schema-mismatch",
            store_with(dir, "fork.db", "CREATE TABLE folders (id TEXT) STRICT"),
        ),
        (
            "sqlite-store-identity-invalid",
            store_with(dir, "noid.db", "DELETE FROM persistence_state"),
        ),
        (
            "sqlite-storage-class",
            store_with(
                dir,
                "class.db",
                "INSERT INTO events VALUES ('s', 0, 'x/y', 0, 7, NULL, NULL, NULL)",
            ),
        ),
        (
            "sqlite-session-row-invalid",
            store_with(dir, "row.db", "UPDATE sessions SET origin = 'fork'"),
        ),
        (
            "sqlite-is-seeded-derived",
            store_with(dir, "v2.db", "UPDATE sessions SET version = 2"),
        ),
        (
            "crash-tail",
            store_with(
                dir,
                "torn.db",
                &format!(
                    "{turn} INSERT INTO events VALUES ('s', 2, 'x/y', 0, '{{bad', NULL, NULL, NULL)"
                ),
            ),
        ),
        (
            "committed-malformed-row",
            store_with(
                dir,
                "bad.db",
                &format!(
                    "{} INSERT INTO events VALUES ('s', 2, 'turn/end', 0, '{{}}', NULL, NULL, NULL)",
                    turn.replace("'{\"turn\":1}'", "'{bad'")
                ),
            ),
        ),
        (
            "committed-seq-gap",
            store_with(
                dir,
                "gap.db",
                &turn.replace("'s', 1, 'turn/end'", "'s', 2, 'turn/end'"),
            ),
        ),
    ]
}

/// The codes the table's databases produce; each row must produce its own.
pub fn produced() -> BTreeSet<&'static str> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut all = BTreeSet::new();
    for (code, path) in table(dir.path()) {
        let codes = codes_of(&path);
        assert!(
            codes.contains(&code),
            "the database for {code} produced {codes:?}"
        );
        all.extend(codes);
    }
    all
}

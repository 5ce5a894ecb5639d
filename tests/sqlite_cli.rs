//! Every command on a session of DSH's SQLite session store (SQLITE.md S9, S11; CLI.md
//! "SQLite session stores"): the same answers as on the session's logical log written as
//! JSONL, one summary per session from `validate`, refusals with their exit codes, and the
//! writers' single transaction (S8.2) seen from the command line.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

use common::{dshs, json_lines};
use dshs::log::sqlite::Store;
use serde_json::Value;

fn fixtures() -> PathBuf {
    common::testdata("sqlite")
}

fn db(rel: &str) -> PathBuf {
    fixtures().join("db").join(rel)
}

/// A fixture database copied into a temporary directory (the originals stay untouched).
fn copy_of(rel: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let to = dir.path().join(Path::new(rel).file_name().expect("name"));
    std::fs::copy(db(rel), &to).expect("copy");
    (dir, to)
}

fn arg(p: &Path) -> String {
    p.display().to_string()
}

/// What a command printed and how it ended.
struct Run {
    code: i32,
    stdout: Vec<u8>,
    stderr: String,
}

/// The compaction the store tests make of `open-turn.repaired.db`'s session (summary and
/// target added by each).
const COMPACT_4_65: [&str; 5] = ["compact", "--start", "4", "--end", "65"];

fn run(args: &[&str]) -> Run {
    let out = dshs().args(args).output().expect("run dshs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `cmd` (with `env`) says byte for byte what it says when it reads the exact way at once
/// (`DSHS_FULL_PASS=1`): stdout, stderr and the exit status.
fn says_what_the_exact_read_says(cmd: &[&str], env: &[(&str, &str)], what: &str) {
    let run_with = |full: bool| {
        let mut c = dshs();
        c.args(cmd).envs(env.iter().copied());
        if full {
            c.env("DSHS_FULL_PASS", "1");
        }
        c.output().expect("run dshs")
    };
    let (fast, exact) = (run_with(false), run_with(true));
    assert_eq!(fast.status.code(), exact.status.code(), "{what}");
    assert_eq!(
        String::from_utf8_lossy(&fast.stdout),
        String::from_utf8_lossy(&exact.stdout),
        "{what}"
    );
    assert_eq!(
        String::from_utf8_lossy(&fast.stderr),
        String::from_utf8_lossy(&exact.stderr),
        "{what}"
    );
}

/// The logical log of one session, read through the library.
fn logical(path: &Path, id: &str) -> Vec<u8> {
    let mut store = Store::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut r = store.read(id).expect("read");
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut r, &mut out).expect("stream");
    r.finish().expect("finish");
    out
}

/// One session of a fixture: its id, its expected logical log, whether it has a torn tail.
type Session = (String, PathBuf, bool);

/// `(db relative to db/, its sessions)` for every fixture database that upstream's read
/// path reads.
fn readable() -> Vec<(String, Vec<Session>)> {
    let mut out = Vec::new();
    let root = fixtures().join("db");
    for dir in [root.clone(), root.join("per-fixture")] {
        for e in std::fs::read_dir(&dir).expect("fixture dir") {
            let p = e.expect("entry").path();
            if p.extension().is_none_or(|x| x != "db") {
                continue;
            }
            let rel = p.strip_prefix(&root).expect("under db").to_owned();
            let name = rel.to_string_lossy().trim_end_matches(".db").to_owned();
            let expected = fixtures().join("expected").join(&name);
            let Ok(index) = std::fs::read(expected.join("index.json")) else {
                continue;
            };
            let index: Value = serde_json::from_slice(&index).expect("index JSON");
            let sessions = index
                .as_array()
                .expect("a list")
                .iter()
                .map(|s| {
                    (
                        s["id"].as_str().expect("id").to_owned(),
                        expected.join(s["file"].as_str().expect("file")),
                        !s["tornMarker"].is_null(),
                    )
                })
                .collect();
            out.push((rel.to_string_lossy().into_owned(), sessions));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The reference JSONL for a session: upstream's logical log, with the `isSeeded` that
/// SQLITE.md S11.5 has dshs derive for format 2+ put into its header (before
/// `delegationDepth`), computed here from the log's own inherited `session/end-seed`.
fn reference(expected: &Path, dir: &Path) -> (PathBuf, bool) {
    let text = std::fs::read_to_string(expected).expect("expected log");
    let (header, rest) = text.split_once('\n').expect("a header line");
    let h: Value = serde_json::from_str(header).expect("header JSON");
    if h["version"].as_u64().is_none_or(|v| v < 2) {
        return (expected.to_owned(), false);
    }
    let seeded = rest.lines().any(|l| {
        let e: Value = serde_json::from_str(l).expect("event JSON");
        e["type"] == "session/end-seed" && e["data"]["inherited"] == true
    });
    assert!(header.contains(",\"delegationDepth\":"), "{header}");
    let header = header.replacen(
        ",\"delegationDepth\":",
        &format!(",\"isSeeded\":{seeded},\"delegationDepth\":"),
        1,
    );
    let to = dir.join(format!(
        "{}.jsonl",
        expected
            .parent()
            .and_then(Path::file_name)
            .expect("dir")
            .to_string_lossy()
    ));
    std::fs::write(&to, format!("{header}\n{rest}")).expect("write reference");
    (to, true)
}

fn without_file(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("file");
    }
    v
}

#[test]
fn every_fixture_session_answers_every_command_like_its_logical_log() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let mut sessions = 0;
    for (rel, index) in readable() {
        let path = db(&rel);
        for (id, expected, torn) in index {
            let named = format!("{}#{id}", arg(&path));
            let (reference, derived) = reference(&expected, scratch.path());
            let reference = arg(&reference);
            let what = format!("{rel} {id}");

            // validate: the same logical findings and summary; the storage layer adds its
            // own findings (no line), and they are exactly the torn tail and the derived
            // isSeeded.
            let got = run(&["validate", "--format", "json", &named]);
            let want = run(&["validate", "--format", "json", &reference]);
            let (g, w) = (json_lines(&got.stdout), json_lines(&want.stdout));
            let storage: Vec<&str> = g
                .iter()
                .filter(|r| r["type"] == "finding" && r["line"].is_null())
                .map(|r| r["code"].as_str().expect("code"))
                .collect();
            let mut expected_storage = Vec::new();
            if derived {
                expected_storage.push("sqlite-is-seeded-derived");
            }
            if torn {
                expected_storage.push("crash-tail");
            }
            assert_eq!(storage, expected_storage, "{what}: storage findings");
            for r in g.iter().filter(|r| r["line"].is_null()) {
                assert!(r["byte"].is_null(), "{what}: {r}");
                assert_eq!(r["file"], named.as_str(), "{what}");
            }
            let logical: Vec<Value> = g
                .iter()
                .filter(|r| r["type"] == "finding" && !r["line"].is_null())
                .cloned()
                .map(without_file)
                .collect();
            let want_findings: Vec<Value> = w
                .iter()
                .filter(|r| r["type"] == "finding")
                .cloned()
                .map(without_file)
                .collect();
            assert_eq!(logical, want_findings, "{what}: findings");
            let mut summary = without_file(g.last().expect("summary").clone());
            assert_eq!(g.last().expect("summary")["file"], named.as_str(), "{what}");
            let extra = expected_storage.len() as u64;
            summary["warnings"] = (summary["warnings"].as_u64().expect("warnings") - extra).into();
            assert_eq!(summary["tornTail"], torn, "{what}: tornTail");
            summary["tornTail"] = false.into();
            assert_eq!(
                summary,
                without_file(w.last().expect("summary").clone()),
                "{what}: summary"
            );
            assert_eq!(got.code, want.code, "{what}: validate exit");

            for cmd in [
                &["surface", "--format", "json"][..],
                &["surface"],
                &["derive"],
                &["derive", "--format", "ndjson"],
                &["stats", "--format", "json"],
                &["show", "--format", "json"],
            ] {
                let got = run(&[cmd, &[named.as_str()]].concat());
                let want = run(&[cmd, &[reference.as_str()]].concat());
                assert_eq!(got.code, want.code, "{what}: {cmd:?} exit: {}", got.stderr);
                if cmd[0] == "stats" {
                    let (mut g, mut w): (Value, Value) = (
                        serde_json::from_slice(&got.stdout).expect("stats JSON"),
                        serde_json::from_slice(&want.stdout).expect("stats JSON"),
                    );
                    assert_eq!(g["file"], named.as_str(), "{what}");
                    g["file"] = Value::Null;
                    w["file"] = Value::Null;
                    assert_eq!(g, w, "{what}: stats");
                } else {
                    let (got_stdout, want_stdout) = if cmd == ["surface"] {
                        // The table's summary line starts with the log's name (clipped).
                        let unnamed = |out: &[u8]| {
                            let text = String::from_utf8_lossy(out).into_owned();
                            match text.trim_end().rsplit_once('\n') {
                                Some((table, last)) => {
                                    let facts = last.rsplit_once(": v").map_or(last, |(_, f)| f);
                                    format!("{table}\n{facts}").into_bytes()
                                }
                                None => text.into_bytes(),
                            }
                        };
                        (unnamed(&got.stdout), unnamed(&want.stdout))
                    } else {
                        (got.stdout.clone(), want.stdout.clone())
                    };
                    if cmd[0] != "show" && got.code != 0 {
                        // What refuses the session is said at its line of the logical log.
                        assert_eq!(
                            got.stderr.replace(&named, &reference),
                            want.stderr,
                            "{what}: {cmd:?} stderr"
                        );
                    }
                    assert!(
                        got_stdout == want_stdout,
                        "{what}: {cmd:?} differs:\n{}\n---\n{}",
                        String::from_utf8_lossy(&got.stdout),
                        String::from_utf8_lossy(&want.stdout)
                    );
                }
            }
            sessions += 1;
        }
    }
    assert!(sessions >= 70, "only {sessions} sessions compared");
}

/// `surface`, `derive` and `ls` read a format 0/1 session with its packed rows kept packed,
/// and stand by that read only when it answers as the expanded log does: a finding that refuses
/// the session is said at its line of the expanded log, and a read the storage layer has
/// something to say of is done again, expanded. Each variant breaks one row of a session
/// whose packed rows lie before and after it.
#[test]
fn a_packed_read_answers_as_the_expanded_log_or_is_done_again() {
    const REL: &str = "per-fixture/deepseek-ai--packed-chunks-session.db";
    const ID: &str = "ff1c1e99-3bd4-4ef8-a954-80d607d628ba";
    // The store adds its own findings (no line) around the logical ones.
    let logical_lines = |e: &str, name: &str| -> Vec<String> {
        e.lines()
            .filter_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
            .map(str::to_owned)
            .collect()
    };
    // A replacement of a range that is not on the surface: a committed error that refuses
    // the session, on the row's line (rows 57, 61 and 121 lie after packed rows).
    // `ls` reads each session of a store as `validate` does: the same counts as `ls` of a
    // storage root holding the logical log (the unbroken session too).
    let ls_facts = |root: &str| -> Vec<Value> {
        let r = run(&["ls", "--format", "json", root]);
        let rows = json_lines(&r.stdout);
        assert_eq!(rows.len(), 1, "{root}: {}", r.stderr);
        [
            "lastEventTime",
            "events",
            "turns",
            "status",
            "errors",
            "warnings",
        ]
        .iter()
        .map(|k| rows[0][*k].clone())
        .collect()
    };
    // The session's cwd is /workspace: DSH's project directory for it is `--workspace--`.
    let whole = tempfile::tempdir().expect("tempdir");
    let session_dir = whole.path().join("--workspace--").join(ID);
    std::fs::create_dir_all(&session_dir).expect("session dir");
    std::fs::write(session_dir.join("session.jsonl"), logical(&db(REL), ID)).expect("log");
    assert_eq!(
        ls_facts(&arg(&copy_of(REL).1)),
        ls_facts(&arg(whole.path()))
    );
    for seq in [4, 5, 57, 61, 121] {
        let (dir, path) = copy_of(REL);
        rusqlite::Connection::open(&path)
            .and_then(|c| {
                c.execute(
                    r#"UPDATE events SET surface_op = '{"op":"replace","start":999,"end":1000}' WHERE seq = ?1"#,
                    [seq],
                )
            })
            .expect("break the row");
        let session_dir = dir.path().join("root").join("--workspace--").join(ID);
        std::fs::create_dir_all(&session_dir).expect("session dir");
        let reference = session_dir.join("session.jsonl");
        std::fs::write(&reference, logical(&path, ID)).expect("write the logical log");
        assert_eq!(
            ls_facts(&arg(&path)),
            ls_facts(&arg(&dir.path().join("root"))),
            "seq {seq}: ls"
        );
        let (named, reference) = (format!("{}#{ID}", arg(&path)), arg(&reference));
        for cmd in [
            &["surface"][..],
            &["surface", "--format", "json"],
            &["derive"],
        ] {
            let got = run(&[cmd, &[named.as_str()]].concat());
            let want = run(&[cmd, &[reference.as_str()]].concat());
            assert_eq!(
                got.code, want.code,
                "seq {seq}: {cmd:?} exit: {}",
                got.stderr
            );
            assert_eq!(got.stdout, want.stdout, "seq {seq}: {cmd:?}");
            let (g, w) = (
                logical_lines(&got.stderr, &named),
                logical_lines(&want.stderr, &reference),
            );
            assert!(
                w.iter().any(|l| l.contains(&format!("seq {seq}:"))),
                "seq {seq}: {cmd:?} is refused for the row: {}",
                want.stderr
            );
            assert_eq!(g, w, "seq {seq}: {cmd:?} stderr:\n{}", got.stderr);
        }
        // `stats` counts as on the expanded log (bytes included), and its note names the
        // first error at its line there.
        let got = run(&["stats", "--format", "json", &named]);
        let want = run(&["stats", "--format", "json", &reference]);
        assert_eq!(got.code, want.code, "seq {seq}: stats exit: {}", got.stderr);
        let unnamed = |out: &[u8]| {
            let mut v: Value = serde_json::from_slice(out).expect("stats JSON");
            v["file"] = Value::Null;
            v
        };
        assert_eq!(
            unnamed(&got.stdout),
            unnamed(&want.stdout),
            "seq {seq}: stats"
        );
        let note = |e: &str, name: &str| {
            e.lines()
                .find_map(|l| Some(l.strip_prefix("dshs: ")?.strip_prefix(name)?.to_owned()))
        };
        let (g, w) = (note(&got.stderr, &named), note(&want.stderr, &reference));
        assert!(
            w.as_ref().is_some_and(|n| n.contains("; first: line ")),
            "seq {seq}: stats note: {}",
            want.stderr
        );
        assert_eq!(g, w, "seq {seq}: stats note");
    }
    // A row that does not decode: before the last turn/end, the storage layer refuses the
    // session; as that turn/end, it is a torn tail the read drops (the read is done again,
    // expanded, and shows what the logical log without it shows).
    for seq in [58, 123] {
        let (dir, path) = copy_of(REL);
        rusqlite::Connection::open(&path)
            .and_then(|c| c.execute("UPDATE events SET data = '{bad' WHERE seq = ?1", [seq]))
            .expect("break the row");
        let reference = dir.path().join("logical.jsonl");
        std::fs::write(&reference, logical(&path, ID)).expect("write the logical log");
        let (named, reference) = (format!("{}#{ID}", arg(&path)), arg(&reference));
        if seq == 123 {
            // Read again, expanded: each turn and event counted once, up to seq 122 (time 1843).
            let facts = serde_json::json!([1843, 123, 1, "torn", 0, 2]);
            assert_eq!(Value::from(ls_facts(&arg(&path))), facts, "ls");
            // `stats` too, from the read done again: the logical log without the torn row.
            let stats = |name: &str| {
                let r = run(&["stats", "--format", "json", name]);
                let mut v: Value = serde_json::from_slice(&r.stdout).expect("stats JSON");
                v["file"] = Value::Null;
                v
            };
            assert_eq!(stats(&named), stats(&reference), "stats");
        }
        for cmd in [&["surface", "--format", "json"][..], &["derive"]] {
            let got = run(&[cmd, &[named.as_str()]].concat());
            if seq == 123 {
                let want = run(&[cmd, &[reference.as_str()]].concat());
                assert_eq!((got.code, &got.stdout), (0, &want.stdout), "{cmd:?}");
                continue;
            }
            assert_eq!(got.code, 1, "seq {seq}: {cmd:?}: {}", got.stderr);
            assert!(got.stdout.is_empty(), "seq {seq}: {cmd:?}");
            assert!(
                got.stderr.contains(&format!(
                    "error[committed-malformed-row] seq {seq}: corrupt session log"
                )),
                "seq {seq}: {cmd:?}: {}",
                got.stderr
            );
            assert_eq!(logical_lines(&got.stderr, &named), Vec::<String>::new());
        }
    }
    // A storage-class violation (a packed row, a row after packed rows, the last row): that
    // read checks the rules row by row and ends unclean at the row; read again, the session
    // is refused before its first line, as every command refuses it.
    for seq in [10, 58, 123] {
        let (_dir, path) = copy_of(REL);
        rusqlite::Connection::open(&path)
            .and_then(|c| c.execute("UPDATE events SET data = 5 WHERE seq = ?1", [seq]))
            .expect("break the row");
        let named = format!("{}#{ID}", arg(&path));
        for cmd in [
            &["surface"][..],
            &["surface", "--format", "json"],
            &["derive"],
        ] {
            let got = run(&[cmd, &[named.as_str()]].concat());
            assert_eq!(got.code, 1, "seq {seq}: {cmd:?}: {}", got.stderr);
            assert!(got.stdout.is_empty(), "seq {seq}: {cmd:?}");
            let refusal = format!("{named}: error[sqlite-storage-class] seq {seq}: ");
            assert!(
                got.stderr.starts_with(&refusal) && got.stderr.contains("cannot be read"),
                "seq {seq}: {cmd:?}: {}",
                got.stderr
            );
            assert_eq!(logical_lines(&got.stderr, &named), Vec::<String>::new());
        }
    }
}

/// The packed read against the expanded read it stands for (`DSHS_FULL_PASS=1` reads a store
/// session expanded at once): for rows broken every way the storage layer and the fold judge
/// (storage class, undecodable data, bad surface metadata, a seq gap), in a packed row, before,
/// between and after them, every command that reads packed first (`surface`, `derive`,
/// `stats`, `ls`, `usage`, `grep`) says byte for byte what the expanded read says, on stdout
/// and stderr, with the same exit status.
#[test]
fn the_packed_read_says_what_the_expanded_read_says_of_broken_rows() {
    const REL: &str = "per-fixture/deepseek-ai--packed-chunks-session.db";
    const ID: &str = "ff1c1e99-3bd4-4ef8-a954-80d607d628ba";
    let breaks = [
        // Unbroken: the packed read stands, every position moved.
        "time = time",
        "data = 5",
        "data = '{bad'",
        "data = X'7b7d'",
        "source_event_seqs = 7",
        r#"surface_op = '{"op":"append"}'"#,
        r#"surface_op = '{"op":"replace","start":999,"end":1000}'"#,
        "ignorable = 1",
    ];
    let mut compared = 0;
    for seq in [1, 10, 58, 87, 121, 123] {
        for set in breaks {
            let (_dir, path) = copy_of(REL);
            rusqlite::Connection::open(&path)
                .and_then(|c| c.execute(&format!("UPDATE events SET {set} WHERE seq = ?1"), [seq]))
                .expect("break the row");
            let named = format!("{}#{ID}", arg(&path));
            let listed = arg(&path);
            for cmd in [
                &["surface", named.as_str()][..],
                &["surface", "--format", "json", &named],
                &["derive", &named],
                &["stats", &named],
                &["stats", "--format", "json", &named],
                &["ls", "--format", "json", &listed],
                &["usage", &named],
                &["usage", "--by", "session", "--format", "json", &named],
                &["grep", "--format", "json", "-C", "1", "bash", &named],
                &["grep", "--surface", "bash", &named],
                &["grep", "-c", "--chunks", "HELLO", &named],
                &["validate", "--format", "json", &named],
            ] {
                says_what_the_exact_read_says(cmd, &[], &format!("seq {seq}, {set}: {cmd:?}"));
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 6 * 8 * 12);
    // The same session in a store and as its logical log: `usage` counts the copy with the
    // most lines, the store's first of equals; the packed read counts the expanded lines.
    let (dir, path) = copy_of(REL);
    let jsonl = dir.path().join("logical.jsonl");
    std::fs::write(&jsonl, logical(&path, ID)).expect("write the logical log");
    let cmd = [
        "usage",
        "--by",
        "session",
        &format!("{}#{ID}", arg(&path)),
        &arg(&jsonl),
    ];
    let packed = run(&cmd);
    let out = dshs()
        .args(cmd)
        .env("DSHS_FULL_PASS", "1")
        .output()
        .expect("run dshs");
    assert!(
        packed.stderr.contains("counted once, from"),
        "{}",
        packed.stderr
    );
    assert_eq!(packed.stderr, String::from_utf8_lossy(&out.stderr));
    assert_eq!(packed.stdout, out.stdout);
}

#[test]
fn validate_on_a_store_gives_one_summary_per_session_in_rowid_order() {
    let path = db("many-sessions.db");
    let r = run(&["validate", "--format", "json", &arg(&path)]);
    let index: Value = serde_json::from_slice(
        &std::fs::read(fixtures().join("expected/many-sessions/index.json")).expect("index"),
    )
    .expect("index JSON");
    let want: Vec<String> = index
        .as_array()
        .expect("list")
        .iter()
        .map(|s| format!("{}#{}", arg(&path), s["id"].as_str().expect("id")))
        .collect();
    let got: Vec<String> = json_lines(&r.stdout)
        .into_iter()
        .filter(|l| l["type"] == "summary")
        .map(|l| l["file"].as_str().expect("file").to_owned())
        .collect();
    assert_eq!(got, want);
    assert_eq!(want.len(), 31);

    // --session picks (repeatable); human output names each session too.
    let ids: Vec<&str> = want
        .iter()
        .map(|w| w.rsplit_once('#').expect("#").1)
        .collect();
    let r = run(&[
        "validate",
        "--session",
        ids[3],
        "--session",
        ids[1],
        &arg(&path),
    ]);
    let lines: Vec<&str> = std::str::from_utf8(&r.stdout)
        .expect("UTF-8")
        .lines()
        .filter(|l| l.contains(": v"))
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with(&want[3]) && lines[1].starts_with(&want[1]));

    // The exit code is the worst session's: a torn tail is a warning, an open turn too.
    assert_eq!(run(&["validate", &arg(&db("torn-packed-tail.db"))]).code, 0);
    assert_eq!(
        run(&[
            "validate",
            "--deny-warnings",
            &arg(&db("torn-packed-tail.db"))
        ])
        .code,
        1
    );
}

#[test]
fn refused_databases_exit_3_naming_what_was_found() {
    for (rel, code, says) in [
        (
            "identity-foreign-application-id.db",
            "sqlite-not-session-store",
            "application id 12345 (0x00003039), expected 1146308688",
        ),
        (
            "identity-user-version-16.db",
            "sqlite-schema-unsupported",
            "schema version 16",
        ),
    ] {
        let path = arg(&db(rel));
        for cmd in [
            &["validate"][..],
            &["surface"],
            &["derive"],
            &["stats"],
            &["show"],
            &["ls"],
            &["repair", "--dry-run"],
        ] {
            let r = run(&[cmd, &[path.as_str()]].concat());
            assert_eq!(r.code, 3, "{rel} {cmd:?}: {}", r.stderr);
            let all = format!("{}{}", String::from_utf8_lossy(&r.stdout), r.stderr);
            assert!(all.contains(says), "{rel} {cmd:?}: {all}");
        }
        let r = run(&["validate", "--format", "json", &path]);
        let lines = json_lines(&r.stdout);
        assert_eq!(lines[0]["code"], code, "{rel}");
        assert_eq!(lines[1]["status"], "unsupported", "{rel}");
    }
}

#[test]
fn a_session_dsh_refuses_is_invalid_in_every_command() {
    for (rel, code, seq) in [
        ("committed-corrupt-packed.db", "committed-malformed-row", 10),
        ("storage-class-integer-data.db", "sqlite-storage-class", 40),
    ] {
        let path = arg(&db(rel));
        let r = run(&["validate", "--format", "json", &path]);
        assert_eq!(r.code, 1, "{rel}");
        let lines = json_lines(&r.stdout);
        let f = lines
            .iter()
            .find(|l| l["code"] == code)
            .unwrap_or_else(|| panic!("{rel}: no {code}: {lines:?}"));
        assert_eq!(f["seq"], seq, "{rel}");
        assert!(f["line"].is_null() && f["byte"].is_null(), "{rel}");
        assert_eq!(lines.last().expect("summary")["status"], "invalid");
        for cmd in ["surface", "derive"] {
            let r = run(&[cmd, &path]);
            assert_eq!(r.code, 1, "{rel} {cmd}");
            assert!(r.stdout.is_empty(), "{rel} {cmd}: printed a result");
            assert!(r.stderr.contains(code), "{rel} {cmd}: {}", r.stderr);
        }
        for cmd in ["stats", "show"] {
            assert_eq!(run(&[cmd, &path]).code, 1, "{rel} {cmd}");
        }
        let r = run(&["ls", "--format", "json", &path]);
        assert_eq!(r.code, 0);
        assert_eq!(json_lines(&r.stdout)[0]["status"], "invalid", "{rel}");
        let r = run(&["repair", "--dry-run", &path]);
        assert_eq!(r.code, 1, "{rel}: {}", r.stderr);
    }
}

#[test]
fn commands_needing_one_session_refuse_a_multi_session_store_listing_the_ids() {
    let path = arg(&db("open-turn.db"));
    let ids = [
        "open-after-first-tool-call",
        "open-mid-tool-call-stream",
        "open-before-turn-end",
        "gen-v0-open-tail",
    ];
    for cmd in [
        &["surface"][..],
        &["derive"],
        &["show"],
        &["stats"],
        &["repair"],
        &["repair", "--dry-run"],
        &["compact", "--start", "4", "--end", "5", "--summary", "s"],
    ] {
        let r = run(&[cmd, &[path.as_str()]].concat());
        assert_eq!(r.code, 2, "{cmd:?}");
        assert!(
            r.stderr.contains("holds 4 sessions"),
            "{cmd:?}: {}",
            r.stderr
        );
        for id in ids {
            assert!(r.stderr.contains(id), "{cmd:?}: {}", r.stderr);
        }
        // An unknown id: exit 2, naming it and the ids there are.
        let r = run(&[cmd, &[format!("{path}#no-such-session").as_str()]].concat());
        assert_eq!(r.code, 2, "{cmd:?}");
        assert!(
            r.stderr.contains("no-such-session") && r.stderr.contains(ids[3]),
            "{cmd:?}: {}",
            r.stderr
        );
    }
}

#[test]
fn a_store_is_named_by_its_magic_and_sessions_by_hash_or_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A store named like a log, and a file whose own name holds a '#'.
    let odd = dir.path().join("odd#name.jsonl");
    std::fs::copy(db("torn-packed-tail.db"), &odd).expect("copy");
    let id = "open-mid-tool-call-stream";
    let want = run(&["derive", &arg(&db("torn-packed-tail.db"))]).stdout;
    assert!(!want.is_empty());
    for args in [
        vec!["derive".to_owned(), arg(&odd)],
        vec!["derive".to_owned(), format!("{}#{id}", arg(&odd))],
        vec![
            "derive".to_owned(),
            "--session".to_owned(),
            id.to_owned(),
            arg(&odd),
        ],
    ] {
        let r = dshs().args(&args).output().expect("run");
        assert_eq!(r.status.code(), Some(0), "{args:?}");
        assert_eq!(r.stdout, want, "{args:?}");
    }
    // Two different ids, or --session on a log, are usage errors.
    let r = run(&["derive", "--session", "x", &format!("{}#{id}", arg(&odd))]);
    assert_eq!(r.code, 2);
    let log = arg(&fixtures().join("expected/open-turn/0.jsonl"));
    let r = run(&["derive", "--session", "x", &log]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("not a SQLite session store"),
        "{}",
        r.stderr
    );
    // A database on standard input cannot be read.
    for cmd in [&["validate"][..], &["derive"], &["stats"]] {
        let out = dshs()
            .args([cmd, &["-"]].concat())
            .pipe_stdin(db("open-turn.db"))
            .expect("stdin")
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{cmd:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("holds a SQLite database"),
            "{cmd:?}"
        );
    }
}

#[test]
fn ls_lists_a_stores_sessions_newest_last_event_first() {
    let path = db("open-turn.db");
    let r = run(&["ls", "--format", "json", &arg(&path)]);
    assert_eq!(r.code, 0);
    let rows = json_lines(&r.stdout);
    assert_eq!(rows.len(), 4);
    let mut last = i64::MAX;
    for row in &rows {
        let id = row["id"].as_str().expect("id");
        assert_eq!(row["path"], format!("{}#{id}", arg(&path)).as_str());
        assert_eq!(row["status"], "interrupted", "{id}");
        assert!(row["rows"].as_u64().expect("rows") > 0);
        let t = row["lastEventTime"].as_i64().expect("time");
        assert!(t <= last, "sorted newest first");
        last = t;
        let events = logical(&path, id).iter().filter(|&&b| b == b'\n').count() - 1;
        assert_eq!(row["events"], events as u64, "{id}");
    }
    let r = run(&["ls", "--format", "json", &arg(&db("torn-packed-tail.db"))]);
    let row = &json_lines(&r.stdout)[0];
    assert_eq!(row["status"], "torn");
    assert_eq!(row["rows"], 14);
    let r = run(&["ls", &arg(&path)]);
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(
        text.lines().next().expect("header").contains("ROWS"),
        "{text}"
    );
}

/// The files of a directory and their bytes.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| {
            let p = e.expect("entry").path();
            (
                p.file_name().expect("name").to_string_lossy().into_owned(),
                std::fs::read(&p).expect("read"),
            )
        })
        .collect();
    out.sort();
    out
}

/// The files of a directory and their bytes, without SQLite's side files of a read (the
/// `-shm`, whose read marks readers change, and an empty `-wal`).
fn snapshot_without_read_side_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    snapshot(dir)
        .into_iter()
        .filter(|(name, bytes)| {
            !(name.ends_with("-shm") || name.ends_with("-wal") && bytes.is_empty())
        })
        .collect()
}

#[test]
fn reading_commands_leave_the_database_byte_identical_and_write_nothing_to_a_wal() {
    for rel in ["open-turn.db", "torn-packed-tail.db", "schema15.db"] {
        let (dir, path) = copy_of(rel);
        let before = snapshot(dir.path());
        let one = format!(
            "{}#{}",
            arg(&path),
            Store::open(&path)
                .expect("open")
                .sessions()
                .expect("sessions")[0]
                .row
                .id
        );
        for cmd in [
            vec!["validate", path.to_str().expect("utf-8")],
            vec!["validate", "--format", "json", &one],
            vec!["ls", path.to_str().expect("utf-8")],
            vec!["surface", &one],
            vec!["derive", &one],
            vec!["stats", &one],
            vec!["show", &one],
            vec!["grep", "e", path.to_str().expect("utf-8")],
            vec!["repair", "--dry-run", &one],
            vec![
                "compact",
                "--dry-run",
                "--start",
                "4",
                "--end",
                "5",
                "--summary",
                "s",
                &one,
            ],
        ] {
            run(&cmd);
            assert_eq!(
                snapshot_without_read_side_files(dir.path()),
                before,
                "{rel}: {cmd:?} changed the directory"
            );
        }
    }
}

#[test]
fn repair_reproduces_upstreams_repaired_databases_keeps_a_sidecar_and_is_idempotent() {
    for (rel, repaired) in [
        ("open-turn.db", "open-turn.repaired.db"),
        ("torn-packed-tail.db", "torn-packed-tail.repaired.db"),
    ] {
        let (dir, path) = copy_of(rel);
        let ids: Vec<String> = Store::open(&path)
            .expect("open")
            .sessions()
            .expect("sessions")
            .into_iter()
            .map(|s| s.row.id)
            .collect();
        for id in &ids {
            let named = format!("{}#{id}", arg(&path));
            // --dry-run prints exactly the events upstream's own repair inserted.
            let want = logical(&db(repaired), id);
            let before = logical(&path, id);
            let r = run(&["repair", "--dry-run", &named]);
            assert_eq!(r.code, 0, "{rel} {id}: {}", r.stderr);
            // The rows a repair keeps: what the storage layer streams (it drops a torn tail).
            let committed = before;
            assert!(
                want.starts_with(&committed),
                "{rel} {id}: upstream kept the prefix"
            );
            // JSON-equal: a JSONL closer puts surfaceOp before sourceEventSeqs, a row read
            // back from SQLite the other way round (SQLITE.md S4.4).
            assert_eq!(
                json_lines(&r.stdout),
                json_lines(&want[committed.len()..]),
                "{rel} {id}: dry-run closers"
            );
            let r = run(&["repair", &named]);
            assert_eq!(r.code, 0, "{rel} {id}: {}", r.stderr);
            assert_eq!(
                String::from_utf8_lossy(&logical(&path, id)),
                String::from_utf8_lossy(&want),
                "{rel} {id}: the repaired logical log"
            );
            // A second run writes nothing.
            let bytes = std::fs::read(&path).expect("db");
            let r = run(&["repair", &named]);
            assert_eq!(r.code, 0);
            assert!(
                String::from_utf8_lossy(&r.stdout).contains("nothing to repair"),
                "{}",
                String::from_utf8_lossy(&r.stdout)
            );
            assert_eq!(
                std::fs::read(&path).expect("db"),
                bytes,
                "{rel} {id}: rerun"
            );
        }
        let r = run(&["validate", "--format", "json", &arg(&path)]);
        assert_eq!(r.code, 0);
        for s in json_lines(&r.stdout)
            .iter()
            .filter(|l| l["type"] == "summary")
        {
            assert_eq!(s["openTurn"], false, "{s}");
            assert_eq!(s["tornTail"], false, "{s}");
            assert_eq!(s["warnings"], 0, "{s}");
        }
        // The torn tail's rows are in a sidecar, one JSON object per row.
        let sidecar = dir.path().join(format!("{rel}.dshs-cut-1"));
        if rel.starts_with("torn") {
            let text = std::fs::read_to_string(&sidecar).expect("a sidecar");
            let rows = json_lines(text.as_bytes());
            assert_eq!(rows.len(), 1);
            assert_eq!(rows[0]["seq"], 45);
            assert_eq!(rows[0]["type"], "tool-call-chunks");
            assert_eq!(rows[0]["ignorable"], 0);
        } else {
            assert!(!sidecar.exists(), "nothing was cut from {rel}");
        }
    }
}

#[test]
fn repair_output_writes_a_repaired_copy_or_the_repaired_logical_log() {
    let (dir, path) = copy_of("torn-packed-tail.db");
    let id = "open-mid-tool-call-stream";
    let named = format!("{}#{id}", arg(&path));
    let original = std::fs::read(&path).expect("db");
    let want = logical(&db("torn-packed-tail.repaired.db"), id);

    let copy = dir.path().join("copy.db");
    let r = run(&["repair", "--output", &arg(&copy), &named]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(logical(&copy, id), want);
    assert_eq!(std::fs::read(&path).expect("db"), original, "untouched");
    let jsonl = dir.path().join("out.jsonl");
    let r = run(&["repair", "--output", &arg(&jsonl), &named]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read(&jsonl).expect("out"), want);
    assert_eq!(std::fs::read(&path).expect("db"), original, "untouched");
    // Never over an existing file.
    let r = run(&["repair", "--output", &arg(&jsonl), &named]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("already exists"), "{}", r.stderr);
}

#[test]
fn a_schema_15_store_is_written_only_with_allow_old_schema() {
    let (_dir, path) = copy_of("schema15.db");
    let store = Store::open(&path).expect("open");
    let open: Vec<String> = store
        .sessions()
        .expect("sessions")
        .into_iter()
        .map(|s| s.row.id)
        .filter(|id| {
            run(&[
                "validate",
                "--format",
                "json",
                &format!("{}#{id}", arg(&path)),
            ])
            .stdout
            .windows(15)
            .any(|w| w == b"\"openTurn\":true")
        })
        .collect();
    drop(store);
    let Some(id) = open.first() else {
        panic!("schema15.db has no session with an open turn to repair");
    };
    let named = format!("{}#{id}", arg(&path));
    let before = std::fs::read(&path).expect("db");
    let r = run(&["repair", &named]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("schema-15"), "{}", r.stderr);
    assert_eq!(std::fs::read(&path).expect("db"), before);
    let r = run(&["repair", "--allow-old-schema", &named]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run(&["validate", "--format", "json", &named]);
    assert_eq!(
        json_lines(&r.stdout).last().expect("summary")["openTurn"],
        false
    );
}

#[test]
fn another_open_connection_makes_repair_and_compact_refuse_with_exit_3() {
    let (_dir, path) = copy_of("open-turn.repaired.db");
    let (_dir2, torn) = copy_of("torn-packed-tail.db");
    // An idle holder, as a running DSH keeps its connection: in WAL mode it holds a shared
    // lock on the WAL index, which the live-owner probe sees.
    let holders: Vec<rusqlite::Connection> = [&path, &torn]
        .iter()
        .map(|p| {
            let c = rusqlite::Connection::open(p).expect("holder");
            let n: i64 = c
                .query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))
                .expect("read");
            assert!(n > 0);
            c
        })
        .collect();
    let compact = || {
        let named = format!("{}#open-before-turn-end", arg(&path));
        run(&[&COMPACT_4_65[..], &["--summary", "s", &named]].concat())
    };
    // Refused as a live owner's session.
    let refused = |r: &Run| {
        assert_eq!(r.code, 3, "{}", r.stderr);
        assert!(
            r.stderr
                .contains("another process has the session database"),
            "{}",
            r.stderr
        );
    };
    let before = (
        std::fs::read(&path).expect("db"),
        std::fs::read(&torn).expect("db"),
    );
    let r = run(&[
        "repair",
        &format!("{}#open-mid-tool-call-stream", arg(&torn)),
    ]);
    refused(&r);
    let r = compact();
    refused(&r);
    assert_eq!(
        (
            std::fs::read(&path).expect("db"),
            std::fs::read(&torn).expect("db")
        ),
        before,
        "nothing was written"
    );
    drop(holders);
    // Without the holder both go through.
    let r = compact();
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run(&["validate", &format!("{}#open-before-turn-end", arg(&path))]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn a_repair_killed_at_any_point_of_its_transaction_leaves_the_session_untouched_or_repaired() {
    let id = "open-mid-tool-call-stream";
    let original = logical(&db("torn-packed-tail.db"), id);
    let repaired = logical(&db("torn-packed-tail.repaired.db"), id);
    for point in [
        "checked",
        "sidecar-synced",
        "deleted",
        "inserted",
        "bumped",
        "committed",
    ] {
        let (_dir, path) = copy_of("torn-packed-tail.db");
        let named = format!("{}#{id}", arg(&path));
        // The killed run cannot remove its copy of the logical log: it goes where this
        // test removes it.
        let tmp = tempfile::tempdir().expect("tempdir");
        let out = dshs()
            .args(["repair", &named])
            .env("TMPDIR", tmp.path())
            .env("DSHS_TEST_FAULT", format!("kill:{point}"))
            .output()
            .expect("run");
        assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{point}: {out:?}");
        let now = logical(&path, id);
        let untouched = now == original;
        assert!(
            untouched || now == repaired,
            "{point}: neither untouched nor repaired"
        );
        assert_eq!(untouched, point != "committed", "{point}");
        // A second run finishes the job.
        let r = run(&["repair", &named]);
        assert_eq!(r.code, 0, "{point}: {}", r.stderr);
        assert_eq!(logical(&path, id), repaired, "{point}: rerun");
    }
}

/// Two writers on one store session at once, many rounds: every success each reports is in
/// the store, the session validates afterwards, and two repairs never both write.
#[test]
fn concurrent_writers_on_a_store_never_lose_a_reported_success() {
    let count = |log: &[u8], what: &str| String::from_utf8_lossy(log).matches(what).count();
    for round in 0..12 {
        // Two compactions of the same range with different summaries.
        let (_dir, path) = copy_of("open-turn.repaired.db");
        let named = format!("{}#open-before-turn-end", arg(&path));
        let spawn = |summary: &str| {
            std::process::Command::new(assert_cmd::cargo::cargo_bin("dshs"))
                .args(COMPACT_4_65)
                .args(["--summary", summary])
                .arg(&named)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn")
        };
        let (a, b) = (spawn("SUMMARY-ALPHA"), spawn("SUMMARY-OMEGA"));
        let (a, b) = (
            a.wait_with_output().expect("wait"),
            b.wait_with_output().expect("wait"),
        );
        let log = logical(&path, "open-before-turn-end");
        for (out, summary) in [(&a, "SUMMARY-ALPHA"), (&b, "SUMMARY-OMEGA")] {
            let code = out.status.code();
            assert!(
                matches!(code, Some(0 | 1 | 3)),
                "round {round}: {summary}: {code:?} {}",
                String::from_utf8_lossy(&out.stderr)
            );
            if code == Some(0) {
                assert!(
                    count(&log, summary) > 0,
                    "round {round}: {summary} reported but missing"
                );
            } else {
                assert_eq!(
                    count(&log, summary),
                    0,
                    "round {round}: {summary} refused but written"
                );
            }
        }
        let r = run(&["validate", &named]);
        assert_eq!(r.code, 0, "round {round}: {}", r.stderr);

        // Two repairs of a torn tail: the result is upstream's repair, written once.
        let (_dir, torn) = copy_of("torn-packed-tail.db");
        let named = format!("{}#open-mid-tool-call-stream", arg(&torn));
        let spawn = || {
            std::process::Command::new(assert_cmd::cargo::cargo_bin("dshs"))
                .args(["repair", &named])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn")
        };
        let (a, b) = (spawn(), spawn());
        let outs = [
            a.wait_with_output().expect("wait"),
            b.wait_with_output().expect("wait"),
        ];
        let wrote = outs
            .iter()
            .filter(|o| String::from_utf8_lossy(&o.stdout).contains("appended"))
            .count();
        for o in &outs {
            assert!(
                matches!(o.status.code(), Some(0 | 3)),
                "round {round}: repair {:?} {}",
                o.status.code(),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        assert!(wrote <= 1, "round {round}: two repairs both wrote");
        let reported = outs.iter().any(|o| o.status.code() == Some(0));
        let log = logical(&torn, "open-mid-tool-call-stream");
        if reported {
            assert_eq!(
                log,
                logical(
                    &db("torn-packed-tail.repaired.db"),
                    "open-mid-tool-call-stream"
                ),
                "round {round}: a reported repair is not in the store"
            );
        }
    }
}

/// Commands read a store session with its stored texts left for their parsing threads
/// (`validate`, `ls`) or for helper threads (the others): where a text is not upstream's own
/// form (it is rebuilt) or does not decode, that read does not stand and the session is read
/// again the exact way. Either way they say what the exact read says, byte for byte
/// (`DSHS_FULL_PASS=1` reads the exact way at once).
#[test]
fn a_deferred_read_says_what_the_exact_read_says() {
    let zstd = |b: &[u8]| zstd::bulk::compress(b, 3).expect("zstd");
    let bom = zstd("\u{feff}{}".as_bytes());
    let rows: [(&str, &[i64]); 2] = [
        (
            "per-fixture/deepseek-ai--packed-chunks-session.db",
            &[10, 58, 123],
        ),
        (
            "per-fixture/wangnaiyu--compaction-recovery-session.v4.db",
            &[1, 13, 25],
        ),
    ];
    let breaks: [(&str, Option<Vec<u8>>); 7] = [
        ("whole", None),
        (r#"data = '{"a" : 1}'"#, None),
        ("data = CAST(X'7B2261223A22FF227D' AS TEXT)", None),
        ("data = ?2", Some(zstd(br#" {"a":1}"#))),
        ("data = ?2", Some(bom)),
        ("data = ?2", Some(zstd(b"{bad"))),
        ("data = ?2", Some(zstd(br#"{"b":"\u0062"}"#))),
    ];
    let mut compared = 0;
    for (rel, seqs) in rows {
        for &seq in seqs {
            for (set, value) in &breaks {
                for compressed in [false, true] {
                    let (_dir, path) = copy_of(rel);
                    let conn = rusqlite::Connection::open(&path).expect("open");
                    if compressed {
                        // Every scalar row's data as upstream compresses it.
                        let texts: Vec<(i64, String)> = conn
                            .prepare(
                                "SELECT seq, data FROM events WHERE typeof(data) = 'text' \
                                 AND ignorable IS NOT 0",
                            )
                            .and_then(|mut s| {
                                s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                                    .collect::<Result<_, _>>()
                            })
                            .expect("texts");
                        for (s, text) in texts {
                            conn.execute(
                                "UPDATE events SET data = ?1 WHERE seq = ?2",
                                rusqlite::params![zstd(text.as_bytes()), s],
                            )
                            .expect("compress");
                        }
                    }
                    if *set != "whole" {
                        let sql = format!("UPDATE events SET {set} WHERE seq = ?1");
                        match value {
                            Some(v) => conn.execute(&sql, rusqlite::params![seq, v]),
                            None => conn.execute(&sql, [seq]),
                        }
                        .expect("break the row");
                    }
                    drop(conn);
                    let listed = arg(&path);
                    for cmd in [
                        &["validate", listed.as_str()][..],
                        &["validate", "--format", "json", &listed],
                        &["ls", "--format", "json", &listed],
                        &["usage", "--by", "session", "--format", "json", &listed],
                        &["stats", "--format", "json", &listed],
                        &["surface", &listed],
                        &["derive", &listed],
                        &["grep", "--format", "json", "-C", "1", "e", &listed],
                    ] {
                        // Helper threads write the texts whatever the machine's cores.
                        says_what_the_exact_read_says(
                            cmd,
                            &[("DSHS_THREADS", "3")],
                            &format!("{rel} seq {seq}, {set}, compressed {compressed}: {cmd:?}"),
                        );
                        compared += 1;
                    }
                }
            }
        }
    }
    assert_eq!(compared, 2 * 3 * 7 * 2 * 8);
}

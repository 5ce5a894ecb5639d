//! Logs as DSH stores them (FORMAT.md §2, §3.3, §5.2): zstd frames, session directories and
//! generations, packed rows, whole storage trees (`dshs ls`).

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::{compress, dshs, json_lines, testdata};
use dshs::log::input::zstd::encode_frame;
use serde_json::Value;

fn fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(testdata("fixtures"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    v.sort();
    v
}

/// Run dshs, returning (exit code, stdout).
fn run(args: &[&str]) -> (i32, Vec<u8>, String) {
    let out = dshs().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// validate --format json records without the fields that name the file or frame.
fn findings_of(stdout: &[u8]) -> Vec<Value> {
    json_lines(stdout)
        .into_iter()
        .map(|mut v| {
            let o = v.as_object_mut().unwrap();
            o.remove("file");
            o.remove("frame");
            v
        })
        .collect()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn every_fixture_reads_the_same_plain_and_compressed() {
    let tmp = tempfile::tempdir().unwrap();
    for plain in fixtures() {
        let bytes = fs::read(&plain).unwrap();
        if !bytes.ends_with(b"\n") {
            continue; // a torn fixture cannot sit whole inside complete frames
        }
        for batch in [1, 3] {
            let z = write(
                tmp.path(),
                &format!(
                    "{}.{batch}.zstd",
                    plain.file_name().unwrap().to_string_lossy()
                ),
                &compress(&bytes, batch),
            );
            let (p, z) = (plain.to_str().unwrap(), z.to_str().unwrap());
            for cmd in [
                &["validate", "--format", "json"][..],
                &["surface", "--format", "json"],
                &["derive"],
                &["derive", "--format", "markdown"],
            ] {
                let a = run(&[cmd, &[p]].concat());
                let b = run(&[cmd, &[z]].concat());
                assert_eq!(a.0, b.0, "{cmd:?} {p}: exit status");
                if cmd[0] == "validate" {
                    assert_eq!(findings_of(&a.1), findings_of(&b.1), "{p}");
                } else {
                    assert_eq!(a.1, b.1, "{cmd:?} {p}");
                }
            }
        }
    }
}

#[test]
fn zstd_findings_name_their_frame() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = fs::read(testdata("sample/crashed.v3.jsonl")).unwrap();
    // Drop the torn final line: the rest is whole lines, ending in an open turn.
    let cut = plain[..plain.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap();
    let z = write(tmp.path(), "s.jsonl.zst", &compress(&plain[..=cut], 1));
    let (code, out, _) = run(&["validate", "--format", "json", z.to_str().unwrap()]);
    assert_eq!(code, 0);
    let recs = json_lines(&out);
    let open = recs
        .iter()
        .find(|r| r["code"] == "open-turn-at-end")
        .unwrap();
    // One line per frame after the header: the frame is the line number.
    assert_eq!(open["frame"], open["line"]);
    let (_, human, _) = run(&["validate", z.to_str().unwrap()]);
    let human = String::from_utf8(human).unwrap();
    assert!(
        human.contains(&format!("(frame {})", open["line"])),
        "{human}"
    );
}

/// A v3 log with an open turn, compressed one line per frame, plus a torn final frame that
/// holds one more complete line and a partial one.
fn torn_frame_log() -> (Vec<u8>, usize, Vec<u8>) {
    let plain = fs::read(testdata("sample/crashed.v3.jsonl")).unwrap();
    let lines: Vec<&[u8]> = plain.split_inclusive(|&b| b == b'\n').collect();
    // Everything but the last two complete lines (and the torn one) in complete frames.
    let n = lines.len();
    let head: Vec<u8> = lines[..n - 3].concat();
    let mut z = compress(&head, 1);
    let keep = z.len();
    let mut last = lines[n - 3].to_vec();
    last.extend_from_slice(&lines[n - 2][..20]);
    let frame = encode_frame(&last).unwrap();
    // Cut inside the frame: no checksum, not all blocks.
    z.extend_from_slice(&frame[..frame.len() - 3]);
    (z, keep, lines[n - 3].to_vec())
}

#[test]
fn a_torn_final_frame_is_a_warning_and_repair_cuts_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (bytes, keep, recovered) = torn_frame_log();
    let log = write(tmp.path(), "session.v3.jsonl.zstd", &bytes);
    let l = log.to_str().unwrap();
    let (code, out, _) = run(&["validate", "--format", "json", l]);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&out));
    let recs = json_lines(&out);
    assert!(recs.iter().any(|r| r["code"] == "zstd-torn-frame"));
    let summary = recs.last().unwrap();
    assert_eq!(summary["tornTail"], true);
    assert_eq!(summary["status"], "valid");
    let events_before = summary["events"].as_u64().unwrap();

    let (code, _, err) = run(&["repair", l]);
    assert_eq!(code, 0, "{err}");
    let sidecar = fs::read(tmp.path().join("session.v3.jsonl.zstd.dshs-cut-1")).unwrap();
    assert_eq!(sidecar, bytes[keep..]);
    let repaired = fs::read(&log).unwrap();
    assert_eq!(
        repaired[..keep],
        bytes[..keep],
        "committed frames untouched"
    );
    // The repaired file is valid, closed, and still holds the recovered line.
    let (code, out, _) = run(&["validate", "--format", "json", "--deny-warnings", l]);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&out));
    let summary = json_lines(&out).pop().unwrap();
    assert_eq!(summary["tornTail"], false);
    assert_eq!(summary["openTurn"], false);
    assert!(summary["events"].as_u64().unwrap() > events_before);
    let (_, shown, _) = run(&["show", "--format", "json", l]);
    let recovered = String::from_utf8_lossy(&recovered[..recovered.len() - 1]).into_owned();
    let recovered: Value = serde_json::from_str(&recovered).unwrap();
    assert!(
        json_lines(&shown)
            .iter()
            .any(|r| r["seq"] == recovered["seq"] && r["type"] == recovered["type"])
    );
    // Idempotent.
    let (code, out, _) = run(&["repair", l]);
    assert_eq!(code, 0);
    assert!(String::from_utf8_lossy(&out).contains("nothing to repair"));
    assert_eq!(fs::read(&log).unwrap(), repaired);
}

#[test]
fn repair_closes_an_open_turn_with_one_new_frame() {
    let tmp = tempfile::tempdir().unwrap();
    let (bytes, keep, _) = torn_frame_log();
    let log = write(tmp.path(), "s.jsonl.zstd", &bytes[..keep]);
    let (code, _, err) = run(&["repair", log.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let repaired = fs::read(&log).unwrap();
    assert_eq!(repaired[..keep], bytes[..keep]);
    let added = &repaired[keep..];
    assert_eq!(added[..4], [0x28, 0xB5, 0x2F, 0xFD]);
    // Exactly one new frame, holding the closers.
    assert_eq!(frame_starts(added), [0]);
    let plain = String::from_utf8(zstd::decode_all(added).unwrap()).unwrap();
    assert!(
        plain.ends_with("\"reason\":{\"kind\":\"interrupted\"}}}\n"),
        "{plain}"
    );
    let (code, out, _) = run(&[
        "validate",
        "--format",
        "json",
        "--deny-warnings",
        log.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&out));
}

#[test]
fn a_corrupted_middle_frame_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = fs::read(testdata("sample/session.v4.jsonl")).unwrap();
    let mut z = compress(&plain, 1);
    let frames = frame_starts(&z);
    assert!(frames.len() > 3);
    // Flip a byte inside the checksum of frame 3 (its last 4 bytes).
    let end = frames[3];
    z[end - 2] ^= 0x55;
    let log = write(tmp.path(), "s.jsonl.zstd", &z);
    let (code, out, _) = run(&["validate", "--format", "json", log.to_str().unwrap()]);
    assert_eq!(code, 1);
    let recs = json_lines(&out);
    let bad = recs
        .iter()
        .find(|r| r["code"] == "zstd-frame-invalid")
        .unwrap();
    assert_eq!(bad["frame"], 3);
    assert_eq!(recs.last().unwrap()["status"], "invalid");
    // Repair refuses: that is not crash damage.
    let (code, _, _) = run(&["repair", log.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(fs::read(&log).unwrap(), z);
}

/// Compressed offsets where each frame starts (each frame re-encoded to know its size).
fn frame_starts(z: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut at = 0;
    while at < z.len() {
        starts.push(at);
        let size = zstd::zstd_safe::find_frame_compressed_size(&z[at..]).unwrap();
        at += size;
    }
    starts
}

#[test]
fn bad_lines_inside_complete_frames_are_never_a_crash_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = fs::read(testdata("sample/session.v4.jsonl")).unwrap();
    let mut with_tail = plain.clone();
    with_tail.extend_from_slice(b"not json\n");
    // Plain: a crash tail (warning). zstd, inside a complete frame: corruption.
    let p = write(tmp.path(), "p.jsonl", &with_tail);
    let (code, out, _) = run(&["validate", "--format", "json", p.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(json_lines(&out).iter().any(|r| r["code"] == "crash-tail"));
    let z = write(tmp.path(), "z.jsonl.zstd", &compress(&with_tail, 2));
    let (code, out, _) = run(&["validate", "--format", "json", z.to_str().unwrap()]);
    assert_eq!(code, 1);
    let recs = json_lines(&out);
    assert!(
        recs.iter()
            .any(|r| r["code"] == "zstd-torn-record-in-frame")
    );
    assert!(recs.iter().any(|r| r["code"] == "committed-unparsable"));
    // A complete frame ending inside a line is corrupt too.
    let mut torn = plain.clone();
    torn.extend_from_slice(b"{\"type\":\"tu");
    let z = write(tmp.path(), "t.jsonl.zstd", &compress(&torn, 100));
    let (code, out, _) = run(&["validate", "--format", "json", z.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        json_lines(&out)
            .iter()
            .any(|r| r["code"] == "zstd-torn-record-in-frame")
    );
}

#[test]
fn the_magic_decides_not_the_name_and_stdin_works() {
    let tmp = tempfile::tempdir().unwrap();
    let plain_path = testdata("sample/session.v4.jsonl");
    let plain = fs::read(&plain_path).unwrap();
    let z = compress(&plain, 2);
    let odd = write(tmp.path(), "log.txt", &z);
    let a = run(&["validate", "--format", "json", plain_path.to_str().unwrap()]);
    let b = run(&["validate", "--format", "json", odd.to_str().unwrap()]);
    assert_eq!((a.0, findings_of(&a.1)), (b.0, findings_of(&b.1)));
    let out = dshs()
        .args(["derive", "-"])
        .write_stdin(z.clone())
        .output()
        .unwrap();
    let direct = run(&["derive", plain_path.to_str().unwrap()]);
    assert_eq!(out.stdout, direct.1);
    let out = dshs()
        .args(["validate", "--format", "json", "-"])
        .write_stdin(z)
        .output()
        .unwrap();
    assert_eq!(findings_of(&out.stdout), findings_of(&a.1));
}

#[test]
fn a_zstd_bomb_stops_with_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let mut z = encode_frame(b"{\"type\":\"session\",\"version\":3}\n").unwrap();
    // 64 MiB of one line from a frame of a few KiB.
    z.extend(encode_frame(&vec![b'a'; 64 << 20]).unwrap());
    assert!(z.len() < 64 * 1024);
    let log = write(tmp.path(), "bomb.jsonl.zstd", &z);
    let out = dshs()
        .env("DSHS_MAX_LINE_BYTES", "1048576")
        .args(["validate", log.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("limit of 1048576 bytes"), "{err}");
}

#[test]
fn a_session_directory_reads_its_newest_generation() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sess");
    let v0 = fs::read(testdata("v0/packed-compaction.jsonl")).unwrap();
    let v4 = fs::read(testdata("sample/session.v4.jsonl")).unwrap();
    write(&dir, "session.jsonl.zstd", &compress(&v0, 4));
    write(&dir, "session.v2.jsonl", b"not read\n");
    write(&dir, "session.v4.jsonl.zstd", &compress(&v4, 4));
    write(&dir, "session.v04.jsonl", b"not canonical\n");
    let (code, out, err) = run(&["validate", "--format", "json", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json_lines(&out).last().unwrap()["version"], 4);
    assert!(
        err.contains("session.v4.jsonl.zstd")
            && err.contains("session.v2.jsonl")
            && err.contains("session.jsonl.zstd")
            && !err.contains("v04"),
        "{err}"
    );
    // -q silences the note.
    let (_, _, err) = run(&["-q", "validate", dir.to_str().unwrap()]);
    assert!(!err.contains("older"), "{err}");
}

// --- packed rows --------------------------------------------------------------------------

/// Expand the packed chunk rows of a v0/v1 log into one `assistant/chunk` line per member
/// (FORMAT.md §5.2), independently of dshs.
fn unpack(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let kind = match v["type"].as_str() {
            Some("text-chunks") => "text-delta",
            Some("reasoning-chunks") => "reasoning-delta",
            Some("tool-call-chunks") => "tool-call-delta",
            _ => {
                out.push_str(line);
                out.push('\n');
                continue;
            }
        };
        let d = &v["data"];
        let items = if kind == "tool-call-delta" {
            d["args"].as_array().unwrap()
        } else {
            d["texts"].as_array().unwrap()
        };
        let mut time = v["time0"].as_i64().unwrap();
        for (k, item) in items.iter().enumerate() {
            if k > 0 {
                time += d["dt"][k - 1].as_i64().unwrap();
            }
            let mut chunk = serde_json::Map::new();
            chunk.insert("type".into(), kind.into());
            chunk.insert("index".into(), d["index"].clone());
            if kind == "tool-call-delta" {
                chunk.insert("id".into(), d["id"].clone());
                if let Some(name) = d.get("name") {
                    chunk.insert("name".into(), name.clone());
                }
                chunk.insert("argumentsDelta".into(), item.clone());
            } else {
                chunk.insert("text".into(), item.clone());
            }
            let ev = serde_json::json!({
                "type": "assistant/chunk",
                "seq": v["seq0"].as_u64().unwrap() + k as u64,
                "time": time,
                "data": {"turn": d["turn"], "step": d["step"], "chunk": chunk},
            });
            out.push_str(&ev.to_string());
            out.push('\n');
        }
    }
    out
}

/// `show --format json` events without their physical position or storage form.
fn events_of(path: &Path) -> Vec<Value> {
    let (code, out, err) = run(&["show", "--format", "json", path.to_str().unwrap()]);
    assert!(code == 0 || code == 1, "{err}");
    json_lines(&out)
        .into_iter()
        .filter(|r| r["record"] == "event")
        .map(|mut r| {
            let o = r.as_object_mut().unwrap();
            for k in ["line", "byte", "packed"] {
                o.remove(k);
            }
            r
        })
        .collect()
}

#[test]
fn a_packed_row_log_equals_its_unpacked_twin_event_for_event() {
    let tmp = tempfile::tempdir().unwrap();
    for name in [
        "fixtures/upstream__acp-agent__packed-chunks__session.concrete.jsonl",
        "v0/packed-compaction.jsonl",
    ] {
        let packed = testdata(name);
        let text = fs::read_to_string(&packed).unwrap();
        let twin_text = unpack(&text);
        assert!(
            twin_text.lines().count() > text.lines().count(),
            "{name} has packed rows"
        );
        let twin = write(
            tmp.path(),
            &format!("{}.twin.jsonl", name.replace('/', "_")),
            twin_text.as_bytes(),
        );
        let (a, b) = (events_of(&packed), events_of(&twin));
        assert!(!a.is_empty());
        assert_eq!(a, b, "{name}");
        let sum = |p: &Path| {
            let (_, out, _) = run(&["validate", "--format", "json", p.to_str().unwrap()]);
            let mut s = json_lines(&out).pop().unwrap();
            s.as_object_mut().unwrap().remove("file");
            s
        };
        assert_eq!(sum(&packed), sum(&twin), "{name}");
        let d = |p: &Path| run(&["derive", p.to_str().unwrap()]).1;
        assert_eq!(d(&packed), d(&twin), "{name}");
    }
}

// --- trees and `dshs ls` ---------------------------------------------------------------------

const V3_HEADER: &str = r#"{"type":"session","version":3,"id":"ID","createdAt":CREATED,"cwd":"/work/p","delegationDepth":0,"isSeeded":false}"#;

fn v3_log(id: &str, created: i64, body: &[&str]) -> String {
    let mut s = V3_HEADER
        .replace("ID", id)
        .replace("CREATED", &created.to_string());
    s.push('\n');
    for l in body {
        s.push_str(l);
        s.push('\n');
    }
    s
}

const TURN: [&str; 2] = [
    r#"{"type":"turn/start","seq":0,"time":T0,"data":{"turn":1}}"#,
    r#"{"type":"turn/end","seq":1,"time":T1,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
];

fn turn_lines(t0: i64) -> Vec<String> {
    vec![
        TURN[0].replace("T0", &t0.to_string()),
        TURN[1].replace("T1", &(t0 + 5).to_string()),
    ]
}

/// A storage root with one session in each state, in two projects.
fn build_tree(root: &Path) {
    let p = root.join("--work-p--");
    let t = turn_lines(5000);
    let t: Vec<&str> = t.iter().map(String::as_str).collect();
    // valid, compressed
    let valid = v3_log("valid", 1000, &t);
    write(
        &p.join("valid"),
        "session.v3.jsonl.zstd",
        &compress(valid.as_bytes(), 1),
    );
    // interrupted: an open turn
    let open = v3_log("interrupted", 1000, &[&t[0].replace("5000", "9000")]);
    write(&p.join("interrupted"), "session.v3.jsonl", open.as_bytes());
    // torn: a torn final line after a complete turn
    let mut torn = v3_log("torn", 1000, &t);
    torn.push_str("{\"type\":\"turn/st");
    write(&p.join("torn"), "session.v3.jsonl", torn.as_bytes());
    // invalid: a seq gap before a turn end
    let gap = v3_log(
        "invalid",
        1000,
        &[
            &t[0].replace("5000", "7000"),
            r#"{"type":"turn/end","seq":5,"time":7001,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        ],
    );
    write(&p.join("invalid"), "session.v3.jsonl", gap.as_bytes());
    // unsupported: format 5, in the no-cwd project; and an old v0 generation beside it
    let q = root.join("_no-cwd");
    write(
        &q.join("newer"),
        "session.v5.jsonl",
        b"{\"type\":\"session\",\"version\":5,\"id\":\"newer\",\"createdAt\":3000}\n",
    );
    let v0 = "{\"type\":\"session\",\"version\":0,\"id\":\"old\",\"createdAt\":2000,\"delegationDepth\":0}\n";
    write(&q.join("old"), "session.jsonl", v0.as_bytes());
    // not a session directory: ignored
    write(&root.join("notes"), "readme.txt", b"hello");
}

#[test]
fn ls_lists_every_session_with_its_state_newest_first() {
    let tmp = tempfile::tempdir().unwrap();
    build_tree(tmp.path());
    let root = tmp.path().to_str().unwrap();
    let (code, out, err) = run(&["ls", "--format", "json", root]);
    assert_eq!(code, 0, "{err}");
    let rows = json_lines(&out);
    let got: Vec<(String, String, Value, u64, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["path"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_owned(),
                r["status"].as_str().unwrap().to_owned(),
                r["version"].clone(),
                r["events"].as_u64().unwrap(),
                r["turns"].as_u64().unwrap(),
            )
        })
        .collect();
    let v = |n: i64| Value::from(n);
    assert_eq!(
        got,
        [
            ("interrupted".into(), "interrupted".into(), v(3), 1, 1),
            ("invalid".into(), "invalid".into(), v(3), 2, 1),
            ("torn".into(), "torn".into(), v(3), 2, 1),
            ("valid".into(), "valid".into(), v(3), 2, 1),
            // An unsupported header still gives its id and creation time.
            ("newer".into(), "unsupported".into(), v(5), 0, 0),
            ("old".into(), "valid".into(), v(0), 0, 0),
        ]
    );
    let valid = &rows[3];
    assert_eq!(valid["id"], "valid");
    assert_eq!(valid["cwd"], "/work/p");
    assert_eq!(valid["createdAt"], 1000);
    assert_eq!(valid["lastEventTime"], 5005);
    assert_eq!(valid["file"], "session.v3.jsonl.zstd");
    // One thread lists the same.
    let (_, one, _) = run(&["ls", "--format", "json", "-j", "1", root]);
    assert_eq!(one, out);

    let (code, human, _) = run(&["ls", root]);
    assert_eq!(code, 0);
    let human = String::from_utf8(human).unwrap();
    let lines: Vec<&str> = human.lines().collect();
    assert!(lines[0].starts_with("LAST EVENT"), "{human}");
    assert!(lines[1].contains("interrupted") && lines[1].contains("/work/p"));
    assert!(
        lines[5].contains("unsupported") && lines[5].contains("newer"),
        "{human}"
    );
    assert!(
        lines[7].contains("6 sessions") && lines[7].contains("2 valid"),
        "{human}"
    );
}

#[test]
fn ls_escapes_log_text_and_defaults_to_dsh_home() {
    let tmp = tempfile::tempdir().unwrap();
    let sessions = tmp.path().join("sessions");
    // JSON escapes: the decoded id and cwd hold ESC and BEL.
    let log = v3_log("evil\\u001b[31mred", 1000, &[]).replace("/work/p", "/tmp/\\u0007bell");
    write(
        &sessions.join("--p--").join("e"),
        "session.v3.jsonl",
        log.as_bytes(),
    );
    let out = dshs()
        .env("DSH_HOME", tmp.path())
        .args(["ls"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("evil"), "{text}");
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
    // A root that does not exist is an error.
    let out = dshs()
        .args(["ls", tmp.path().join("nope").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn validate_takes_a_tree_root_and_several_paths_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    build_tree(tmp.path());
    let root = tmp.path().to_str().unwrap();
    let extra = testdata("sample/session.v4.jsonl");
    let args = [
        "validate",
        "--format",
        "json",
        root,
        extra.to_str().unwrap(),
    ];
    let (code, many, _) = run(&[&args[..], &["-j", "4"]].concat());
    assert_eq!(code, 3, "worst: unsupported");
    let (_, one, _) = run(&[&args[..], &["-j", "1"]].concat());
    assert_eq!(many, one, "same output, same order, whatever the threads");
    let files: Vec<String> = json_lines(&many)
        .iter()
        .filter(|r| r["type"] == "summary")
        .map(|r| r["file"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(files.len(), 7);
    assert!(files[0].ends_with("--work-p--/interrupted"), "{files:?}");
    assert!(files[6].ends_with("session.v4.jsonl"));
}

#[test]
fn a_complete_final_frame_failing_its_checksum_is_corruption_that_repair_refuses() {
    // §3.3 [src]: every complete frame is checksum-verified and a failure is corruption, the
    // final frame included. Only a frame cut short by EOF is crash damage. Repair must not
    // re-append lines decoded from a frame whose checksum says they are wrong.
    let tmp = tempfile::tempdir().unwrap();
    let plain = fs::read(testdata("sample/session.v4.jsonl")).unwrap();
    let mut z = compress(&plain, 1);
    let n = z.len();
    z[n - 1] ^= 0xFF; // the final frame's checksum
    let log = write(tmp.path(), "s.jsonl.zstd", &z);
    let l = log.to_str().unwrap();
    let (code, out, _) = run(&["validate", "--format", "json", l]);
    assert_eq!(code, 1, "{}", String::from_utf8_lossy(&out));
    let recs = json_lines(&out);
    let bad = recs
        .iter()
        .find(|r| r["code"] == "zstd-frame-invalid")
        .unwrap();
    assert!(bad["message"].as_str().unwrap().contains("checksum"));
    assert!(!recs.iter().any(|r| r["code"] == "zstd-torn-frame"));
    let (code, _, _) = run(&["repair", l]);
    assert_eq!(code, 1);
    assert_eq!(fs::read(&log).unwrap(), z, "nothing written");
    assert!(!tmp.path().join("s.jsonl.zstd.dshs-cut-1").exists());
}

#[test]
fn a_failed_zstd_repair_is_rolled_back_byte_for_byte() {
    let (bytes, keep, _) = torn_frame_log();
    for fault in ["append:5", "sync", "sidecar"] {
        let tmp = tempfile::tempdir().unwrap();
        let log = write(tmp.path(), "s.jsonl.zstd", &bytes);
        let out = dshs()
            .env("DSHS_TEST_FAULT", fault)
            .args(["repair", log.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{fault}");
        assert_eq!(fs::read(&log).unwrap(), bytes, "{fault}: restored");
        if fault != "sidecar" {
            let side = fs::read(tmp.path().join("s.jsonl.zstd.dshs-cut-1")).unwrap();
            assert_eq!(side, bytes[keep..], "{fault}: the cut bytes are kept");
        }
    }
}

// --- range-encoded provenance ------------------------------------------------------------

/// Rewrite every `sourceEventSeqs` list the way DSH writers store it (FORMAT.md §5.3): a
/// strictly increasing list has each maximal run of ≥ 3 consecutive integers written as
/// `[first,last]`; other lists stay verbatim. Textual, so every other byte is unchanged.
fn range_encode(text: &str) -> String {
    const KEY: &str = "\"sourceEventSeqs\":[";
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(KEY) {
        let (head, tail) = rest.split_at(i + KEY.len());
        out.push_str(head);
        let end = tail.find(']').unwrap();
        let body = &tail[..end];
        let nums: Option<Vec<u64>> = if body.is_empty() {
            Some(Vec::new())
        } else {
            body.split(',').map(|n| n.parse().ok()).collect()
        };
        match nums.filter(|n| n.windows(2).all(|w| w[0] < w[1])) {
            Some(n) => {
                let mut parts = Vec::new();
                let mut k = 0;
                while k < n.len() {
                    let mut j = k;
                    while j + 1 < n.len() && n[j + 1] == n[j] + 1 {
                        j += 1;
                    }
                    if j - k >= 2 {
                        parts.push(format!("[{},{}]", n[k], n[j]));
                    } else {
                        parts.extend(n[k..=j].iter().map(u64::to_string));
                    }
                    k = j + 1;
                }
                out.push_str(&parts.join(","));
            }
            None => out.push_str(body),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn range_encoded_provenance_reads_like_plain_lists_and_bad_ranges_are_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let mut encoded_some = 0;
    for plain in fixtures()
        .into_iter()
        .chain([testdata("v3/nested-replace.jsonl")])
    {
        let text = fs::read_to_string(&plain).unwrap();
        let ranged = range_encode(&text);
        if ranged == text {
            continue;
        }
        encoded_some += 1;
        let twin = write(tmp.path(), "ranged.jsonl", ranged.as_bytes());
        let (p, t) = (plain.to_str().unwrap(), twin.to_str().unwrap());
        let a = run(&["validate", "--format", "json", p]);
        let b = run(&["validate", "--format", "json", t]);
        // Shorter lines move byte offsets; everything else is the same.
        let unplaced = |out: &[u8]| {
            let mut v = findings_of(out);
            for r in &mut v {
                r.as_object_mut().unwrap().remove("byte");
            }
            v
        };
        assert_eq!((a.0, unplaced(&a.1)), (b.0, unplaced(&b.1)), "{p}");
        for cmd in [&["surface", "--format", "json"][..], &["derive"]] {
            assert_eq!(
                run(&[cmd, &[p]].concat()).1,
                run(&[cmd, &[t]].concat()).1,
                "{cmd:?} {p}"
            );
        }
        // A range reaching the carrying event's own seq is malformed (a bad row).
        let i = ranged
            .bytes()
            .zip(text.bytes())
            .position(|(a, b)| a != b)
            .unwrap();
        let comma = i + ranged[i..].find(',').unwrap();
        let close = i + ranged[i..].find(']').unwrap();
        assert_eq!(&ranged[i..=i], "[", "{p}");
        let bad = format!("{}999999{}", &ranged[..=comma], &ranged[close..]);
        let bad_log = write(tmp.path(), "bad.jsonl", bad.as_bytes());
        let (_, out, _) = run(&["validate", "--format", "json", bad_log.to_str().unwrap()]);
        assert!(
            json_lines(&out)
                .iter()
                .any(|r| r["code"] == "committed-malformed-row"
                    && r["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("rule source-ranges-malformed"))),
            "{p}"
        );
    }
    assert!(
        encoded_some >= 2,
        "fixtures with ranges to encode: {encoded_some}"
    );
}

#[test]
fn compact_appends_one_zstd_frame_and_derive_shows_the_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = fs::read(testdata("sample/session.v4.jsonl")).unwrap();
    let z = compress(&plain, 2);
    let log = write(tmp.path(), "session.v4.jsonl.zstd", &z);
    let l = log.to_str().unwrap();
    // The same plan as on the plain log (dry-run prints plain JSON Lines).
    let (code, out, err) = run(&[
        "compact",
        "--dry-run",
        "--start",
        "21",
        "--end",
        "15",
        "--summary",
        "S",
        l,
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json_lines(&out).len(), 4);
    assert_eq!(fs::read(&log).unwrap(), z, "dry-run writes nothing");

    let (code, _, err) = run(&[
        "compact",
        "--start",
        "21",
        "--end",
        "15",
        "--summary",
        "S",
        l,
    ]);
    assert_eq!(code, 0, "{err}");
    let after = fs::read(&log).unwrap();
    assert_eq!(after[..z.len()], z[..], "committed frames untouched");
    let added = &after[z.len()..];
    assert_eq!(frame_starts(added), [0], "exactly one new frame");
    let lines = String::from_utf8(zstd::decode_all(added).unwrap()).unwrap();
    let types: Vec<String> = json_lines(lines.as_bytes())
        .iter()
        .map(|v| v["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        types,
        [
            "compaction/start",
            "compaction/summary",
            "user/message",
            "compaction/end"
        ]
    );
    let (code, out, _) = run(&["validate", "--format", "json", "--deny-warnings", l]);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&out));
    let (code, out, _) = run(&["surface", "--format", "json", l]);
    assert_eq!(code, 0);
    let seqs: Vec<u64> = serde_json::from_slice::<Value>(&out).unwrap()["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [7, 29, 24]);
    let (code, out, _) = run(&["derive", "--format", "ndjson", l]);
    assert_eq!(code, 0);
    assert!(String::from_utf8_lossy(&out).contains("\"text\":\"S\""));
}

/// Issue 37 item 18: `ls` measures its cells in terminal columns, not characters: a CJK or
/// emoji id, cwd or path (two columns a character) keeps every later column in line.
#[test]
fn ls_aligns_wide_characters_by_display_width() {
    use unicode_width::UnicodeWidthStr;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("sessions");
    for (dir, id, cwd) in [
        ("会话", "会话一号", "/工作/项目"),
        ("plain", "plain-id", "/work/p"),
        ("emoji", "🚀🚀", "/w/🎉"),
    ] {
        let log = v3_log(id, 1000, &[]).replace("/work/p", cwd);
        write(
            &root.join("proj").join(dir),
            "session.v3.jsonl",
            log.as_bytes(),
        );
    }
    let out = dshs()
        .env("TZ", "UTC")
        .args(["ls", "--color", "never"])
        .arg(&root)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().take(4).collect();
    // Where the CREATED column starts (after ID and CWD), in columns, on every line.
    let starts: Vec<usize> = lines
        .iter()
        .map(|l| {
            let at = l
                .find("CREATED")
                .or_else(|| l.find("1970-01-01"))
                .unwrap_or_else(|| panic!("{l}"));
            // The last-event column holds a date too: take the second one on data lines.
            let at = if l.contains("CREATED") {
                at
            } else {
                l[at + 1..].find("1970-01-01").map_or(at, |i| at + 1 + i)
            };
            UnicodeWidthStr::width(&l[..at])
        })
        .collect();
    assert!(
        starts.windows(2).all(|w| w[0] == w[1]),
        "{starts:?}\n{text}"
    );
}

/// `ls` leaves a packed row's later members unseen (they are chunks: no turn starts among
/// them), and still takes the last event time from the last of them.
#[test]
fn ls_takes_the_last_event_time_from_a_packed_rows_last_member() {
    let tmp = tempfile::tempdir().unwrap();
    let log = concat!(
        "{\"type\":\"session\",\"version\":0,\"id\":\"packed\",\"createdAt\":2000,\"delegationDepth\":0}\n",
        "{\"type\":\"turn/start\",\"seq\":0,\"time\":3000,\"data\":{\"turn\":1}}\n",
        "{\"type\":\"step/start\",\"seq\":1,\"time\":3001,\"data\":{\"turn\":1,\"step\":1}}\n",
        "{\"type\":\"text-chunks\",\"seq0\":2,\"time0\":3010,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[5,7],\"texts\":[\"a\",\"b\",\"c\"]}}\n",
    );
    write(
        &tmp.path().join("--work--").join("packed"),
        "session.jsonl",
        log.as_bytes(),
    );
    let (code, out, err) = run(&["ls", "--format", "json", tmp.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let rows = json_lines(&out);
    let out = String::from_utf8_lossy(&out);
    assert_eq!(rows.len(), 1, "{out}");
    assert_eq!(rows[0]["events"], 5, "{out}");
    assert_eq!(rows[0]["turns"], 1, "{out}");
    assert_eq!(rows[0]["lastEventTime"], 3022, "{out}");
}

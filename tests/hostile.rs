//! The hostile-input corpus (`testdata/hostile/`, manifest `EXPECTED`): each row runs one
//! command on one file and checks the exit status, that nothing panicked, the findings of
//! `validate`, and that `repair` either wrote a log that validates cleanly or wrote nothing.
//! Large inputs (`@name` rows) are generated here into a temporary directory. Plus: text
//! from a log never reaches a terminal raw, even with colours forced on.

mod common;

use std::path::{Path, PathBuf};

use common::{dshs, json_lines, testdata};
use dshs::log::input::zstd::encode_frame;

const V3: &str =
    r#"{"type":"session","version":3,"id":"s","createdAt":1,"delegationDepth":0,"isSeeded":false}"#;
const START: &str = r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#;
const END: &str =
    r#"{"type":"turn/end","seq":1,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#;

fn lines(rows: &[&str]) -> Vec<u8> {
    rows.iter()
        .flat_map(|r| format!("{r}\n").into_bytes())
        .collect()
}

fn nested_arrays(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// The generated inputs, by name.
fn generated(name: &str) -> Vec<u8> {
    match name {
        "@string-10mb.jsonl" => {
            let user = format!(
                r#"{{"type":"user/message","seq":1,"time":0,"data":{{"id":"u","role":"user","content":[{{"type":"text","text":"{}"}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#,
                "x".repeat(10 * 1024 * 1024)
            );
            let end = END.replace(r#""seq":1"#, r#""seq":2"#);
            lines(&[V3, START, &user, &end])
        }
        "@nested-100k-header.jsonl" => lines(&[&nested_arrays(100_000)]),
        "@nested-100k-event.jsonl" => {
            let event = format!(
                r#"{{"type":"turn/start","seq":0,"time":0,"data":{{"turn":1,"x":{}}}}}"#,
                nested_arrays(100_000)
            );
            lines(&[V3, &event, END])
        }
        "@nested-100k-crash-tail.jsonl" => {
            let objects = format!("{}1{}", r#"{"a":"#.repeat(100_000), "}".repeat(100_000));
            lines(&[V3, START, END, &objects])
        }
        "@zstd-bomb-4gib.jsonl.zstd" => zstd_bomb(),
        "@zstd-corrupt-middle-frame.jsonl.zstd" => {
            let frames = v4_frames();
            let mut z = frames.concat();
            // Frame 13 (the 12th event line): one byte of its compressed body flipped.
            let start: usize = frames[..12].iter().map(Vec::len).sum();
            z[start + frames[12].len() / 2] ^= 0x55;
            z
        }
        "@zstd-torn-final-frame.jsonl.zstd" => {
            let mut z = v4_frames().concat();
            let next = br#"{"type":"turn/start","seq":27,"time":2000,"data":{"turn":2}}
{"type":"step/start","seq":28,"ti"#;
            let frame = encode_frame(next).expect("compress");
            z.extend_from_slice(&frame[..frame.len() - 3]);
            z
        }
        other => panic!("EXPECTED names an unknown generated input {other}"),
    }
}

/// The closed v4 sample, one line per zstd frame.
fn v4_frames() -> Vec<Vec<u8>> {
    let plain = std::fs::read(testdata("sample/session.v4.jsonl")).expect("sample");
    plain
        .split_inclusive(|b| *b == b'\n')
        .map(|l| encode_frame(l).expect("compress"))
        .collect()
}

/// A valid header frame, then one zstd frame of 32 768 RLE blocks of 128 KiB each: 4 GiB
/// of `a` without a newline (one enormous line) from about 128 KiB on disk. Built by hand
/// (RFC 8878): the encoder would need the 4 GiB in memory.
fn zstd_bomb() -> Vec<u8> {
    let mut z = encode_frame(format!("{V3}\n").as_bytes()).expect("compress");
    z.extend_from_slice(&dshs::log::input::ZSTD_MAGIC);
    // Frame header descriptor: no content size, not single-segment, no checksum, no
    // dictionary; window descriptor: 2^(10+7) = 128 KiB.
    z.extend_from_slice(&[0x00, 7 << 3]);
    const BLOCKS: u32 = 32_768;
    for i in 0..BLOCKS {
        let last = u32::from(i + 1 == BLOCKS);
        // Block header: last flag, type 1 (RLE), size 128 KiB; then the byte repeated.
        let header = last | (1 << 1) | ((128 * 1024) << 3);
        z.extend_from_slice(&header.to_le_bytes()[..3]);
        z.push(b'a');
    }
    z
}

struct Row {
    line: usize,
    file: String,
    command: String,
    exit: i32,
    findings: Vec<String>,
}

fn manifest() -> Vec<Row> {
    let text = std::fs::read_to_string(testdata("hostile/EXPECTED")).expect("manifest");
    let mut rows = Vec::new();
    for (i, l) in text.lines().enumerate() {
        if l.trim().is_empty() || l.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = l.split('|').map(str::trim).collect();
        assert_eq!(cols.len(), 5, "EXPECTED line {}: five columns", i + 1);
        rows.push(Row {
            line: i + 1,
            file: cols[0].to_owned(),
            command: cols[1].to_owned(),
            exit: cols[2].parse().expect("an exit status"),
            findings: match cols[3] {
                "-" => Vec::new(),
                f => f.split(',').map(str::to_owned).collect(),
            },
        });
    }
    rows
}

/// A fresh copy of the row's input (commands like `repair` write to it).
fn materialize(row: &Row, dir: &Path) -> PathBuf {
    let path = dir.join(row.file.trim_start_matches('@'));
    let bytes = if row.file.starts_with('@') {
        generated(&row.file)
    } else {
        std::fs::read(testdata("hostile").join(&row.file)).expect("corpus file")
    };
    std::fs::write(&path, bytes).expect("copy");
    path
}

fn check(row: &Row) {
    let at = format!("EXPECTED line {} ({} {})", row.line, row.command, row.file);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = materialize(row, dir.path());
    let before = std::fs::read(&path).expect("read");
    // The command column may hold arguments (`compact --start 1 --end 2 --summary s`).
    let out = dshs()
        .args(row.command.split_whitespace())
        .arg(&path)
        .output()
        .expect("dshs runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(row.exit), "{at}: {stderr}");
    assert!(!stderr.contains("panicked"), "{at}: {stderr}");
    match row.command.as_str() {
        "validate" => {
            let json = dshs()
                .args(["validate", "--format", "json"])
                .arg(&path)
                .output()
                .expect("dshs runs");
            assert_eq!(json.status.code(), Some(row.exit), "{at}");
            let records = json_lines(&json.stdout);
            let found: Vec<&serde_json::Value> =
                records.iter().filter(|r| r["type"] == "finding").collect();
            let codes: Vec<&str> = found.iter().filter_map(|f| f["code"].as_str()).collect();
            let want: Vec<&str> = row
                .findings
                .iter()
                .map(|f| f.split('~').next().unwrap_or_default())
                .collect();
            assert_eq!(codes, want, "{at}");
            for (f, w) in found.iter().zip(&row.findings) {
                if let Some((_, text)) = w.split_once('~') {
                    let message = f["message"].as_str().unwrap_or_default();
                    assert!(message.contains(text), "{at}: {message}");
                }
            }
        }
        "repair" if row.exit == 0 => {
            // The repaired log validates cleanly; what was cut is in a sidecar.
            let after = dshs()
                .args(["validate", "--format", "json"])
                .arg(&path)
                .output()
                .expect("dshs runs");
            assert_eq!(after.status.code(), Some(0), "{at}");
            let findings = json_lines(&after.stdout)
                .into_iter()
                .filter(|r| r["type"] == "finding")
                .count();
            assert_eq!(findings, 0, "{at}");
            let repaired = std::fs::read(&path).expect("read");
            let mut side = path.clone().into_os_string();
            side.push(".dshs-cut-1");
            let cut = std::fs::read(&side).unwrap_or_default();
            assert_eq!(
                [&repaired[..before.len() - cut.len()], &cut[..]].concat(),
                before,
                "{at}: committed prefix kept, cut bytes saved"
            );
        }
        "repair" => assert_eq!(std::fs::read(&path).expect("read"), before, "{at}"),
        c if c.starts_with("compact") => {
            let now = std::fs::read(&path).expect("read");
            if row.exit == 0 {
                // Only appended, and the result validates.
                assert!(now.len() > before.len() && now.starts_with(&before), "{at}");
                let v = dshs()
                    .arg("validate")
                    .arg(&path)
                    .output()
                    .expect("dshs runs");
                assert_eq!(v.status.code(), Some(0), "{at}");
            } else {
                assert_eq!(now, before, "{at}: a refused compaction writes nothing");
                if row.exit == 1 {
                    assert!(stderr.contains("nothing was written"), "{at}: {stderr}");
                }
            }
            let files = std::fs::read_dir(dir.path()).expect("dir").count();
            assert_eq!(files, 1, "{at}: no other file (sidecar, lock) left");
        }
        _ => {
            assert!(row.findings.is_empty(), "{at}: findings only for validate");
            assert_eq!(
                std::fs::read(&path).expect("read"),
                before,
                "{at}: read-only"
            );
            if row.file == "@string-10mb.jsonl" && row.command == "derive" {
                assert!(out.stdout.len() > 10 * 1024 * 1024, "{at}: derived whole");
            }
        }
    }
}

#[test]
fn every_hostile_input_gets_its_expected_exit_status_and_findings() {
    let rows = manifest();
    assert!(rows.len() >= 25);
    for row in &rows {
        check(row);
    }
    // Every committed corpus file is listed.
    for entry in std::fs::read_dir(testdata("hostile")).expect("corpus") {
        let name = entry
            .expect("entry")
            .file_name()
            .into_string()
            .expect("UTF-8");
        if name != "EXPECTED" {
            assert!(
                rows.iter().any(|r| r.file == name),
                "{name} is not in EXPECTED"
            );
        }
    }
}

/// Our own colour codes (`ESC [ digits ; m`) removed; what is left must hold no control
/// character but newline, and no C1 control.
fn assert_no_raw_controls(what: &str, out: &[u8]) {
    let text = String::from_utf8_lossy(out);
    let mut rest = text.as_ref();
    let mut plain = String::new();
    while let Some(i) = rest.find('\u{1b}') {
        plain.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let sgr = after.strip_prefix('[').and_then(|a| {
            let n = a.find(|c: char| !(c.is_ascii_digit() || c == ';'))?;
            a[n..].starts_with('m').then(|| &a[n + 1..])
        });
        match sgr {
            Some(next) => rest = next,
            None => panic!("{what}: a raw ESC that is not a colour code: {text:?}"),
        }
    }
    plain.push_str(rest);
    assert!(
        !plain
            .chars()
            .any(|c| (c.is_control() && c != '\n') || ('\u{80}'..='\u{9f}').contains(&c)),
        "{what}: raw control characters: {plain:?}"
    );
}

#[test]
fn terminal_escapes_in_log_text_never_reach_the_terminal_raw() {
    let path = testdata("hostile/terminal-escapes-in-message.jsonl");
    for args in [
        &["show"][..],
        &["surface"],
        &["stats"],
        &["validate"],
        &["show", "--color", "always"],
        &["surface", "--color", "always"],
        &["stats", "--color", "always"],
    ] {
        let out = dshs().args(args).arg(&path).output().expect("dshs runs");
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_no_raw_controls(&format!("{args:?}"), &out.stdout);
        assert_no_raw_controls(&format!("{args:?} stderr"), &out.stderr);
    }
    // The text is still there, visibly escaped.
    let out = dshs().arg("show").arg(&path).output().expect("dshs runs");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains(r"\u{1b}]0;pwned"), "{shown}");
    // derive is JSON: the escapes stay JSON escapes, byte for byte as stored.
    let out = dshs().arg("derive").arg(&path).output().expect("dshs runs");
    assert!(String::from_utf8_lossy(&out.stdout).contains(r"\u001b]0;pwned\u0007"));
    assert!(!out.stdout.contains(&0x1b));
}

/// The zstd bomb with the default line limit (256 MiB): a clear error naming the cause and
/// the knob, and peak memory bounded by the limit, not by the 4 GiB the file expands to.
#[test]
fn a_zstd_bomb_stops_at_the_default_line_limit_with_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bomb.jsonl.zstd");
    let bomb = zstd_bomb();
    assert!(bomb.len() < 200 * 1024, "{} bytes", bomb.len());
    std::fs::write(&path, bomb).expect("write");
    let out = dshs()
        .env_remove("DSHS_MAX_LINE_BYTES")
        .arg("validate")
        .arg(&path)
        .output()
        .expect("dshs runs");
    // dshs's own limit, not damage: exit 4 (issue 37 item 2).
    assert_eq!(out.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("limit of 268435456 bytes") && stderr.contains("DSHS_MAX_LINE_BYTES"),
        "{stderr}"
    );
    // Peak resident size of the largest child so far (this test binary's children only:
    // each dshs run here, and those of the other tests, all far below 4 GiB).
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        assert_eq!(
            libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()),
            0
        );
        usage.assume_init()
    };
    let peak_kib = usage.ru_maxrss as u64;
    assert!(peak_kib < 1024 * 1024, "peak {peak_kib} KiB");
}

/// Issue 37 item 18: line and paragraph separators, the byte order mark and zero width
/// spaces are invisible or break lines on a terminal: like control characters they are
/// escaped wherever log text reaches one (message text, a title, ids, the cwd, a tool name,
/// an event type), in every command's human output.
#[test]
fn invisible_and_line_breaking_characters_never_reach_the_terminal_raw() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = dir.path().join("root").join("proj").join("sess");
    std::fs::create_dir_all(&s).expect("mkdir");
    let sneaky = r"a\u2028b\u2029c\ufeffd\u200be";
    let log = [
        format!(
            r#"{{"type":"session","version":3,"id":"id-{sneaky}","createdAt":1,"cwd":"/w/{sneaky}","delegationDepth":0,"isSeeded":false}}"#
        ),
        START.to_owned(),
        format!(
            r#"{{"type":"user/message","seq":1,"time":0,"data":{{"id":"u","role":"user","content":[{{"type":"text","text":"hello {sneaky} world"}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#
        ),
        format!(
            r#"{{"type":"session/title","seq":2,"time":0,"data":{{"title":"hello {sneaky}","messageSeqs":[],"source":{{"kind":"fallback"}}}}}}"#
        ),
        format!(r#"{{"type":"acme/{sneaky}","seq":3,"time":0,"data":{{}},"ignorable":true}}"#),
        r#"{"type":"turn/end","seq":4,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#
            .to_owned(),
    ];
    let path = s.join("session.v3.jsonl");
    std::fs::write(&path, log.join("\n") + "\n").expect("write");
    let root = dir.path().join("root");
    let commands: Vec<Vec<&std::ffi::OsStr>> = vec![
        vec!["show".as_ref(), path.as_ref()],
        vec!["surface".as_ref(), path.as_ref()],
        vec!["stats".as_ref(), path.as_ref()],
        vec!["validate".as_ref(), path.as_ref()],
        vec!["grep".as_ref(), "hello".as_ref(), path.as_ref()],
        vec![
            "grep".as_ref(),
            "-C".as_ref(),
            "3".as_ref(),
            "world".as_ref(),
            root.as_ref(),
        ],
        vec!["ls".as_ref(), root.as_ref()],
    ];
    for args in &commands {
        let out = dshs().args(args).output().expect("dshs runs");
        let what = format!("{args:?}");
        assert!(!out.stdout.is_empty(), "{what}");
        for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            let text = String::from_utf8_lossy(bytes);
            for c in ['\u{2028}', '\u{2029}', '\u{feff}', '\u{200b}'] {
                assert!(
                    !text.contains(c),
                    "{what} {stream}: raw U+{:04X}: {text}",
                    c as u32
                );
            }
        }
    }
    let out = dshs()
        .args(["grep", "hello"])
        .arg(&path)
        .output()
        .expect("dshs runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(r"a\u{2028}b\u{2029}c\u{feff}d\u{200b}e"),
        "{text}"
    );
}

//! The light pass (`dshs::log::scan::light`) against the full pass at the command line:
//! `grep`, `surface`, `stats` and `ls` print the same bytes, say the same on stderr and exit
//! the same with `DSHS_FULL_PASS=1` (every line read whole) as without, on every log of
//! `testdata/` and damaged variants of them, laid out as a DSH storage root.

mod common;

use std::path::{Path, PathBuf};

use common::dshs;

/// Every `.jsonl` log under `testdata/`.
fn testdata_logs() -> Vec<PathBuf> {
    let mut logs = Vec::new();
    let mut dirs = vec![common::testdata("")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                logs.push(p);
            }
        }
    }
    logs.sort();
    logs
}

/// `log` and damaged variants of it: the last line torn or cut short, a middle line
/// corrupted or cut, a replacement marker pointing nowhere, a stream record of the wrong
/// kind, a key repeated in a stream.
fn variants(log: &[u8]) -> Vec<Vec<u8>> {
    let lines: Vec<Vec<u8>> = log
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect();
    let mut out = vec![log.to_vec()];
    if lines.len() < 3 {
        return out;
    }
    let (last, mid) = (lines.len() - 1, lines.len() / 2);
    let mut v = lines.clone();
    v[last].pop_if(|b| *b == b'\n');
    out.push(v.concat());
    // Line `i` cut to its first `keep` bytes, a newline kept after them.
    let cut = |i: usize, keep: usize| {
        let mut v = lines.clone();
        v[i].truncate(keep);
        v[i].push(b'\n');
        v.concat()
    };
    out.push(cut(last, lines[last].len() / 2));
    let mut v = lines.clone();
    v[mid] = b"{\"type\":\"tool/result\",\"seq\":\n".to_vec();
    out.push(v.concat());
    out.push(cut(mid, lines[mid].len() / 3));
    let edits: [(&[u8], &[u8]); 3] = [
        (
            br#""surfaceOp":"append""#,
            br#""surfaceOp":{"op":"replace","start":999999,"end":999999}"#,
        ),
        (br#""stream":[{"#, br#""stream":[7,{"#),
        (br#""stream":[{"#, br#""stream":[{"type":"x","#),
    ];
    for (from, to) in edits {
        if let Some((i, at)) = lines
            .iter()
            .enumerate()
            .skip(mid)
            .find_map(|(i, l)| memchr::memmem::find(l, from).map(|at| (i, at)))
        {
            let mut v = lines.clone();
            let mut edited = v[i][..at].to_vec();
            edited.extend_from_slice(to);
            edited.extend_from_slice(&v[i][at + from.len()..]);
            v[i] = edited;
            out.push(v.concat());
        }
    }
    out
}

/// The log's file name in a storage root, from its header's version.
fn file_name(log: &[u8]) -> String {
    let header = log.split(|&b| b == b'\n').next().unwrap_or_default();
    let version = serde_json::from_slice::<serde_json::Value>(header)
        .ok()
        .and_then(|h| h.get("version")?.as_u64());
    match version {
        Some(v) if v > 0 => format!("session.v{v}.jsonl"),
        _ => "session.jsonl".to_owned(),
    }
}

/// A storage root holding every testdata log and its variants, one session each; the logs'
/// paths, in order.
fn root(dir: &Path) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for (i, log) in testdata_logs().iter().enumerate() {
        let bytes = std::fs::read(log).unwrap();
        for (j, text) in variants(&bytes).into_iter().enumerate() {
            let session = dir.join("--w--").join(format!("s{i:03}-{j}"));
            std::fs::create_dir_all(&session).unwrap();
            let path = session.join(file_name(&text));
            std::fs::write(&path, &text).unwrap();
            paths.push(path);
        }
    }
    paths
}

/// What a command did: its exit code, standard output and standard error.
fn run(args: &[&str], full: bool) -> (Option<i32>, String, String) {
    let mut cmd = dshs();
    cmd.args(args).env("DSHS_THREADS", "2");
    if full {
        cmd.env("DSHS_FULL_PASS", "1");
    } else {
        cmd.env_remove("DSHS_FULL_PASS");
    }
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn same_with_and_without_the_full_pass(args: &[&str]) {
    let light = run(args, false);
    let full = run(args, true);
    assert!(
        light == full,
        "dshs {}: the light pass printed\n{light:#?}\nthe full pass\n{full:#?}",
        args.join(" ")
    );
}

#[test]
fn commands_print_the_same_with_the_light_pass_as_with_the_full_pass() {
    let dir = tempfile::tempdir().unwrap();
    let paths = root(dir.path());
    assert!(paths.len() > 500, "{} logs", paths.len());
    let root = dir.path().to_str().unwrap();
    for args in [
        &["grep", "-c", "the", root][..],
        &["grep", "--format", "json", r"\w+ing\b", root],
        &["grep", "--surface", "a", root],
        &["grep", "--chunks", "-c", "e", root],
        &["grep", "-C", "1", "tool", root],
        &["ls", root],
        &["ls", "--format", "json", root],
    ] {
        same_with_and_without_the_full_pass(args);
    }
    // Each log on its own: every ninth of them (each kind of damage comes round).
    for path in paths.iter().step_by(9) {
        let path = path.to_str().unwrap();
        for args in [
            &["surface", path][..],
            &["surface", "--format", "json", path],
            &["stats", "--format", "json", path],
        ] {
            same_with_and_without_the_full_pass(args);
        }
    }
}

#[test]
fn grep_names_what_the_light_pass_did_not_check() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("session.v3.jsonl");
    let text = std::fs::read(common::testdata("sample/corrupt.v3.jsonl")).unwrap();
    std::fs::write(&log, text).unwrap();
    let (_, _, stderr) = run(&["grep", "-c", ".", log.to_str().unwrap()], false);
    assert!(
        stderr.contains("checked for every rule but the records of assistant messages' embedded streams or repeated JSON keys; run `dshs validate` for every finding"),
        "{stderr}"
    );
}

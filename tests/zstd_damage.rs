//! Committed zstd damage is corruption, not a torn tail (FORMAT.md §3.3 "Damage that only
//! looks like a torn frame", §6, §14.5): a damaged block header in a mid-file frame makes it
//! seem to run past EOF, but complete frames follow it. `validate` reports
//! `zstd-committed-damage` (exit 1); `repair` and `compact` refuse (exit 1) and write
//! nothing. Only a frame truly cut short by EOF is a torn final frame.

mod common;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{dshs, json_lines, testdata};
use dshs::log::input::zstd::encode_frame;

/// The lines of the sample v4 session (one committed turn, ending in `turn/end`).
fn sample_lines() -> Vec<Vec<u8>> {
    let plain = fs::read(testdata("sample/session.v4.jsonl")).expect("sample log");
    plain
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// The sample compressed as DSH writes it: frame 1 holds the header line, then `frames - 1`
/// append batches of a few lines each, every frame with its checksum. Returns the bytes and
/// each frame's compressed start offset.
fn dsh_log(frames: usize) -> (Vec<u8>, Vec<usize>) {
    let lines = sample_lines();
    let events = &lines[1..];
    let (n, batches) = (events.len(), frames - 1);
    let mut out = encode_frame(&lines[0]).expect("compress");
    let mut starts = vec![0];
    for b in 0..batches {
        starts.push(out.len());
        let batch = &events[b * n / batches..(b + 1) * n / batches];
        out.extend(encode_frame(&batch.concat()).expect("compress"));
    }
    assert_eq!(starts.len(), frames, "{} events", events.len());
    (out, starts)
}

/// Offset of the first block header of the frame starting at `frame` (§3.3 frame header).
fn first_block_header(bytes: &[u8], frame: usize) -> usize {
    let d = bytes[frame + 4];
    let single = d & 0x20 != 0;
    let dict = [0, 1, 2, 4][usize::from(d & 3)];
    let size = match d >> 6 {
        0 => usize::from(single),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    frame + 5 + usize::from(!single) + dict + size
}

fn set_block_size(bytes: &mut [u8], at: usize, size: u32) {
    let h = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], 0]);
    let h = (h & 7) | (size << 3);
    bytes[at..at + 3].copy_from_slice(&h.to_le_bytes()[..3]);
}

/// Ways to damage one block header so that its frame seems to run past EOF.
#[derive(Debug, Clone, Copy)]
enum PastEof {
    /// A size beyond the file but within the block maximum: the decoder waits for input.
    Small,
    /// The largest size the field holds: the decoder refuses the block at once.
    Huge,
}

fn past_eof(bytes: &[u8], frame: usize, kind: PastEof) -> Vec<u8> {
    let mut d = bytes.to_vec();
    let at = first_block_header(&d, frame);
    let size = match kind {
        PastEof::Small => u32::try_from(d.len()).expect("small log"),
        PastEof::Huge => (1 << 21) - 1,
    };
    assert!(size as usize > d.len() - at, "the block runs past EOF");
    set_block_size(&mut d, at, size);
    d
}

fn run(args: &[&str]) -> (i32, Vec<u8>, String) {
    let out = dshs().args(args).output().expect("run dshs");
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn write_log(dir: &Path, bytes: &[u8]) -> PathBuf {
    let path = dir.join("session.v4.jsonl.zstd");
    fs::write(&path, bytes).expect("write log");
    path
}

/// The names in `dir` other than the log itself (a sidecar would show here).
fn others(dir: &Path, log: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("list dir")
        .flatten()
        .filter(|e| e.path() != log)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        // The session lock a writer takes (and leaves, as DSH does) is not a change.
        .filter(|n| n != "session.lock")
        .collect();
    names.sort();
    names
}

fn codes_of(stdout: &[u8]) -> Vec<String> {
    json_lines(stdout)
        .iter()
        .filter(|r| r["type"] == "finding")
        .map(|r| r["code"].as_str().unwrap_or_default().to_owned())
        .collect()
}

const COMPACT: [&str; 7] = ["compact", "--start", "21", "--end", "15", "--summary", "S"];

/// `repair` and `compact` refuse with exit 1 and leave the file byte-identical, no sidecar.
fn writers_refuse(dir: &Path, log: &Path, bytes: &[u8], what: &str) {
    let l = log.to_str().expect("utf-8 path");
    let (code, out, err) = run(&["repair", l]);
    assert_eq!(
        code,
        1,
        "{what}: repair: {err}{}",
        String::from_utf8_lossy(&out)
    );
    assert!(err.contains("refusing to repair"), "{what}: {err}");
    assert_eq!(fs::read(log).expect("log"), bytes, "{what}: repair wrote");
    assert!(
        others(dir, log).is_empty(),
        "{what}: {:?}",
        others(dir, log)
    );
    let mut compact: Vec<&str> = COMPACT.to_vec();
    compact.push(l);
    let (code, _, err) = run(&compact);
    assert_eq!(code, 1, "{what}: compact: {err}");
    assert!(err.contains("refusing to compact"), "{what}: {err}");
    assert_eq!(fs::read(log).expect("log"), bytes, "{what}: compact wrote");
    assert!(
        others(dir, log).is_empty(),
        "{what}: {:?}",
        others(dir, log)
    );
}

#[test]
fn the_undamaged_log_is_valid_and_compacts() {
    // The baseline the damage tests change one block header of.
    let (bytes, starts) = dsh_log(12);
    assert_eq!(starts.len(), 12);
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = write_log(tmp.path(), &bytes);
    let l = log.to_str().expect("utf-8 path");
    let (code, out, _) = run(&["validate", "--format", "json", "--deny-warnings", l]);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&out));
    let mut compact: Vec<&str> = COMPACT.to_vec();
    compact.extend(["--dry-run", l]);
    let (code, _, err) = run(&compact);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn a_damaged_block_header_in_frame_3_is_committed_damage() {
    let (good, starts) = dsh_log(12);
    for kind in [PastEof::Small, PastEof::Huge] {
        let bytes = past_eof(&good, starts[2], kind);
        let tmp = tempfile::tempdir().expect("tempdir");
        let log = write_log(tmp.path(), &bytes);
        let l = log.to_str().expect("utf-8 path");

        let (code, out, _) = run(&["validate", l]);
        let human = String::from_utf8_lossy(&out);
        assert_eq!(code, 1, "{kind:?}: {human}");
        assert!(
            human.contains("(frame 3): error[zstd-committed-damage]"),
            "{kind:?}: {human}"
        );
        assert!(!human.contains("zstd-torn-frame"), "{kind:?}: {human}");
        // The complete frame found inside the "torn" one is named by its offsets.
        let evidence = format!("compressed bytes {}..{}", starts[3], starts[4]);
        assert!(human.contains(&evidence), "{kind:?}: {human}");

        let (code, out, _) = run(&["validate", "--format", "json", l]);
        assert_eq!(code, 1);
        let records = json_lines(&out);
        let finding = records
            .iter()
            .find(|r| r["code"] == "zstd-committed-damage")
            .unwrap_or_else(|| panic!("{kind:?}: {records:?}"));
        assert_eq!(finding["severity"], "error");
        assert_eq!(finding["frame"], 3);
        let summary = records.last().expect("summary");
        assert_eq!(summary["status"], "invalid");
        assert_eq!(summary["tornTail"], false);

        writers_refuse(tmp.path(), &log, &bytes, &format!("{kind:?}"));
    }
}

/// A flipped byte in a block's payload leaves the structure whole: the frame fails to decode
/// (or its checksum), which was corruption before the probes and stays so.
#[test]
fn a_flipped_payload_byte_is_still_a_frame_that_fails_to_decode() {
    let (good, starts) = dsh_log(12);
    let at = first_block_header(&good, starts[2]) + 3 + 10;
    assert!(at < starts[3] - 4, "inside frame 3's first block");
    let mut bytes = good.clone();
    bytes[at] ^= 0x5A;
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = write_log(tmp.path(), &bytes);
    let (code, out, _) = run(&["validate", "--format", "json", log.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(codes_of(&out), ["zstd-frame-invalid"]);
    writers_refuse(tmp.path(), &log, &bytes, "payload byte");
}

#[test]
fn the_damage_is_found_in_a_log_read_from_a_pipe() {
    let (good, starts) = dsh_log(12);
    for kind in [PastEof::Small, PastEof::Huge] {
        let bytes = past_eof(&good, starts[2], kind);
        let bin = assert_cmd::cargo::cargo_bin("dshs");
        let mut child = Command::new(bin)
            .args(["validate", "--format", "json", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn dshs");
        let mut stdin = child.stdin.take().expect("stdin");
        // Written in small pieces, so the reader meets the input a little at a time.
        let writer = std::thread::spawn(move || {
            for piece in bytes.chunks(7) {
                if stdin.write_all(piece).is_err() {
                    break;
                }
            }
        });
        let out = child.wait_with_output().expect("dshs ends");
        writer.join().expect("writer");
        assert_eq!(out.status.code(), Some(1), "{kind:?}");
        let codes = codes_of(&out.stdout);
        assert_eq!(codes, ["zstd-committed-damage"], "{kind:?}");
    }
}

/// Every middle frame (the header frame included), damaged in several ways: never a silent
/// cut of complete frames. The damage that looks like a torn frame is named as committed
/// damage; the rest is some other framing error.
#[test]
fn damage_to_any_middle_frame_is_never_cut_silently() {
    let (good, starts) = dsh_log(12);
    let tmp = tempfile::tempdir().expect("tempdir");
    // The last frame is left out: damage there cannot be told from a crash (see below).
    for (i, &frame) in starts[..starts.len() - 1].iter().enumerate() {
        let n = i + 1;
        let at = first_block_header(&good, frame);
        let mut cases: Vec<(String, Vec<u8>, bool)> = vec![
            (
                format!("frame {n}: size past EOF"),
                past_eof(&good, frame, PastEof::Small),
                true,
            ),
            (
                format!("frame {n}: huge size"),
                past_eof(&good, frame, PastEof::Huge),
                true,
            ),
        ];
        // A size one larger, half as large, the last-block bit and the type bits flipped.
        let h = u32::from_le_bytes([good[at], good[at + 1], good[at + 2], 0]);
        for (what, new) in [
            ("size + 1", (h & 7) | (((h >> 3) + 1) << 3)),
            ("size / 2", (h & 7) | ((h >> 4) << 3)),
            ("last-block bit", h ^ 1),
            ("block type", h ^ 0b110),
        ] {
            let mut d = good.clone();
            d[at..at + 3].copy_from_slice(&new.to_le_bytes()[..3]);
            cases.push((format!("frame {n}: {what}"), d, false));
        }
        for (what, bytes, named) in cases {
            let dir = tmp.path().join(what.replace([' ', ':', '/', '+'], "_"));
            fs::create_dir(&dir).expect("case dir");
            let log = write_log(&dir, &bytes);
            let (code, out, _) = run(&["validate", "--format", "json", log.to_str().unwrap()]);
            let codes = codes_of(&out);
            assert_eq!(code, 1, "{what}: {codes:?}");
            assert!(
                !codes.iter().any(|c| c == "zstd-torn-frame"),
                "{what}: {codes:?}"
            );
            if named {
                assert!(
                    codes.iter().any(|c| c == "zstd-committed-damage"),
                    "{what}: {codes:?}"
                );
            }
            writers_refuse(&dir, &log, &bytes, &what);
        }
    }
}

#[test]
fn a_frame_truly_cut_by_eof_is_still_a_torn_tail_and_repairs() {
    let (good, starts) = dsh_log(12);
    let last = starts[11];
    for cut in [
        last + 1,
        last + 6,
        last + (good.len() - last) / 2,
        good.len() - 1,
    ] {
        let bytes = &good[..cut];
        let tmp = tempfile::tempdir().expect("tempdir");
        let log = write_log(tmp.path(), bytes);
        let l = log.to_str().expect("utf-8 path");
        let (code, out, _) = run(&["validate", "--format", "json", l]);
        assert_eq!(code, 0, "cut {cut}: {}", String::from_utf8_lossy(&out));
        // Findings come in line order: the open turn's line is before the torn frame's.
        assert!(
            codes_of(&out).contains(&"zstd-torn-frame".to_owned()),
            "cut {cut}"
        );
        let (code, _, err) = run(&["repair", l]);
        assert_eq!(code, 0, "cut {cut}: {err}");
        let repaired = fs::read(&log).expect("log");
        assert_eq!(
            repaired[..last],
            good[..last],
            "cut {cut}: committed frames kept"
        );
        let sidecar = tmp.path().join("session.v4.jsonl.zstd.dshs-cut-1");
        assert_eq!(fs::read(sidecar).expect("sidecar"), good[last..cut]);
        let (code, out, _) = run(&["validate", "--deny-warnings", l]);
        assert_eq!(code, 0, "cut {cut}: {}", String::from_utf8_lossy(&out));
    }
    // Through a pipe: a warning, exit 0.
    let out = dshs()
        .args(["validate", "--format", "json", "-"])
        .write_stdin(good[..good.len() - 1].to_vec())
        .output()
        .expect("run dshs");
    assert_eq!(out.status.code(), Some(0));
    assert!(codes_of(&out.stdout).contains(&"zstd-torn-frame".to_owned()));
}

/// Damage to the last frame that makes it run past EOF cannot be told from a crash: nothing
/// complete follows it. It stays a torn tail, as DSH reads it.
#[test]
fn damage_to_the_last_frame_stays_a_torn_tail() {
    let (good, starts) = dsh_log(12);
    let bytes = past_eof(&good, starts[11], PastEof::Small);
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = write_log(tmp.path(), &bytes);
    let (code, out, _) = run(&["validate", "--format", "json", log.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(codes_of(&out).contains(&"zstd-torn-frame".to_owned()));
}

//! Memory is bounded by the work, not by what follows the committed part (issue 20,
//! finding 3): rows after the last `turn/end` used to be held until the end of the log
//! (~250 bytes each), so a crash tail of blank lines grew memory without bound. Each case
//! runs dshs in a child whose address space is capped by `setrlimit(RLIMIT_AS)`, far below
//! what the old per-row state needed; an allocation failure aborts the child (exit by
//! SIGABRT), which the test reports.

mod common;

use std::os::unix::process::CommandExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output};

use common::testdata;

/// The cap. A normal run needs well under it (mimalloc reserves address space lazily);
/// two million held rows would need about twice it.
const ADDRESS_SPACE: u64 = 256 * 1000 * 1000;
const BLANK_LINES: usize = 2_000_000;

fn capped(args: &[&str], file: &Path) -> Output {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("dshs"));
    cmd.args(args).arg(file);
    // SAFETY: only setrlimit, which is async-signal-safe, runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: ADDRESS_SPACE as libc::rlim_t,
                rlim_max: ADDRESS_SPACE as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().expect("run dshs")
}

fn crashed_then_blank_lines() -> Vec<u8> {
    let mut log = std::fs::read(testdata("sample/crashed.v3.jsonl")).expect("sample");
    log.resize(log.len() + BLANK_LINES, b'\n');
    log
}

fn assert_bounded(out: &Output, what: &str) {
    assert!(
        out.status.signal().is_none(),
        "{what}: killed by signal {:?} under a {ADDRESS_SPACE}-byte address-space cap\nstderr: {}",
        out.status.signal(),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn two_million_blank_lines_after_the_committed_part_fit_in_a_small_address_space() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.jsonl");
    std::fs::write(&path, crashed_then_blank_lines()).expect("write");
    let out = capped(&["validate", "--format", "json"], &path);
    assert_bounded(&out, "validate");
    // The verdict is the ordinary one: a crash tail after an open turn.
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(summary.contains("crash-tail"), "{summary}");

    let out = capped(&["repair", "--dry-run"], &path);
    assert_bounded(&out, "repair --dry-run");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_small_zstd_file_expanding_to_two_million_blank_lines_fits_too() {
    use dshs::log::input::zstd::encode_frame;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.jsonl.zstd");
    // The header frame, then one complete frame of the rest followed by the blank lines:
    // about a kilobyte on disk.
    let plain = crashed_then_blank_lines();
    let header = plain.iter().position(|&b| b == b'\n').expect("header line") + 1;
    let mut file = encode_frame(&plain[..header]).expect("compress");
    file.extend(encode_frame(&plain[header..]).expect("compress"));
    assert!(file.len() < 16 * 1024, "{} bytes", file.len());
    std::fs::write(&path, file).expect("write");
    let out = capped(&["validate", "-q"], &path);
    assert_bounded(&out, "validate of zstd");
    // Blank lines inside a complete frame are committed damage (FORMAT.md §3.3): exit 1.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

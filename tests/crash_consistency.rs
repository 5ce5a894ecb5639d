//! Crash consistency and live writers, through the binary.
//!
//! A command that writes a log (`repair`; `compact` plugs into the same driver) is
//! interrupted at every point of its write, two ways, both deterministic (no timing):
//! - `DSHS_TEST_FAULT=kill:POINT` (debug builds) aborts the process at each named point of
//!   `write::apply_in_place` (`write::Point::ALL`): no destructor, no rollback — a crash;
//! - `RLIMIT_FSIZE = N` for many byte counts N past the original size: the kernel kills the
//!   child with SIGXFSZ at the write that would pass byte N (a crash in the middle of a
//!   write), or, with SIGXFSZ ignored, the write fails with EFBIG (the rollback path).
//!
//! After each interruption the log must be byte-identical to before, or be the committed
//! prefix followed by a prefix of the planned append (never half an event in the committed
//! region: a partial last line is a torn tail), the bytes cut must be in a sidecar, and
//! re-running the command must give exactly the result of an uninterrupted run.
//!
//! Live writers: another process holding `session.lock` makes `repair` refuse (exit 3)
//! without a write; a process appending without the lock while `repair` works (in the window
//! between planning and each stamp check, held open with `DSHS_TEST_FAULT=pause:POINT`) makes
//! it refuse (exit 3) and write nothing.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::compress;
use dshs::log::input::zstd::{ZstdReader, encode_frame};
use dshs::log::repair;
use dshs::log::write::Point;

// ---------------------------------------------------------------------------------------
// The driver (generic over the command: compact reuses it)
// ---------------------------------------------------------------------------------------

/// How a run is interrupted.
#[derive(Debug, Clone, Copy)]
enum Interrupt {
    /// `DSHS_TEST_FAULT=kill:POINT`: abort at a named point of the write.
    Kill(Point),
    /// RLIMIT_FSIZE = N, SIGXFSZ at its default action: killed at the write passing byte N.
    FileSizeKill(u64),
    /// RLIMIT_FSIZE = N with SIGXFSZ ignored: that write fails with EFBIG.
    FileSizeError(u64),
}

/// One interrupted run: the log file and what the process did.
struct Interrupted<'a> {
    how: Interrupt,
    dir: &'a Path,
    path: &'a Path,
    output: &'a Output,
}

/// `DSHS_TEST_MINT` (debug builds): `compact` mints fixed ids and this time, so that every
/// run plans the same bytes.
const MINT: &str = "1700000000000";

fn dshs_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_dshs"))
}

/// `dshs ARGS... FILE`, interrupted as asked.
fn run_interrupted(args: &[&str], path: &Path, how: Interrupt) -> Output {
    // A killed run cannot remove its temporary copies: they go to a directory removed here.
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(dshs_bin());
    cmd.args(args)
        .arg(path)
        .env("TMPDIR", tmp.path())
        .env_remove("DSHS_TEST_FAULT")
        .env_remove("DSHS_KNOWN_TYPES")
        .env("DSHS_TEST_MINT", MINT)
        .stdin(Stdio::null());
    match how {
        Interrupt::Kill(p) => {
            cmd.env("DSHS_TEST_FAULT", format!("kill:{}", p.name()));
        }
        Interrupt::FileSizeKill(n) | Interrupt::FileSizeError(n) => {
            let ignore = matches!(how, Interrupt::FileSizeError(_));
            // SAFETY: only async-signal-safe calls (setrlimit, signal) between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit {
                        rlim_cur: n as libc::rlim_t,
                        rlim_max: n as libc::rlim_t,
                    };
                    if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    let action = if ignore { libc::SIG_IGN } else { libc::SIG_DFL };
                    libc::signal(libc::SIGXFSZ, action);
                    Ok(())
                });
            }
        }
    }
    cmd.output().expect("dshs runs")
}

/// Byte limits worth trying between `from` (the original size: the log must fit) and `to`
/// (the size of the finished result): both ends, every line end of `result` in the range and
/// its neighbours, and evenly spaced points between.
fn limits(result: &[u8], from: u64, to: u64) -> Vec<u64> {
    let mut n: Vec<u64> = (0..=24).map(|k| from + (to - from) * k / 24).collect();
    for (i, b) in result.iter().enumerate() {
        let i = i as u64;
        if *b == b'\n' && i >= from && i < to {
            n.extend([i, i + 1, i + 2]);
        }
    }
    n.retain(|x| (from..to).contains(x));
    n.sort_unstable();
    n.dedup();
    n
}

/// Run `dshs ARGS FILE` on a fresh copy of `log` (named `name`) once per interruption —
/// killed at every named point, and at many byte counts by the file-size limit — and hand
/// each outcome to `check`. Returns the uninterrupted result (the file after a clean run).
fn interrupt_everywhere(
    log: &[u8],
    name: &str,
    args: &[&str],
    mut check: impl FnMut(&Interrupted<'_>, &[u8]),
) -> Vec<u8> {
    let clean = tempfile::tempdir().expect("tempdir");
    let path = clean.path().join(name);
    std::fs::write(&path, log).expect("write");
    let out = Command::new(dshs_bin())
        .args(args)
        .arg(&path)
        .env_remove("DSHS_TEST_FAULT")
        .env("DSHS_TEST_MINT", MINT)
        .output()
        .expect("dshs runs");
    assert!(out.status.success(), "{args:?}: {out:?}");
    let result = std::fs::read(&path).expect("read");

    let mut ways: Vec<Interrupt> = Point::ALL.into_iter().map(Interrupt::Kill).collect();
    let (from, to) = (log.len() as u64, result.len() as u64);
    if to > from {
        for n in limits(&result, from, to) {
            ways.push(Interrupt::FileSizeKill(n));
            ways.push(Interrupt::FileSizeError(n));
        }
    }
    for how in ways {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(name);
        std::fs::write(&path, log).expect("write");
        let output = run_interrupted(args, &path, how);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "{how:?}: {stderr}");
        check(
            &Interrupted {
                how,
                dir: dir.path(),
                path: &path,
                output: &output,
            },
            &result,
        );
    }
    result
}

// ---------------------------------------------------------------------------------------
// repair
// ---------------------------------------------------------------------------------------

/// The sidecars beside `path`, by number.
fn sidecars(dir: &Path, path: &Path) -> Vec<Vec<u8>> {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let mut found: Vec<(u32, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let n = e.file_name().to_string_lossy().into_owned();
            let k = n.strip_prefix(&format!("{name}.dshs-cut-"))?.parse().ok()?;
            Some((k, std::fs::read(e.path()).ok()?))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, b)| b).collect()
}

/// Every guarantee of `repair` after an interruption, then the re-run.
fn check_repair(log: &[u8], keep: usize, case: &Interrupted<'_>, result: &[u8]) {
    let how = case.how;
    let now = std::fs::read(case.path).expect("read");
    // How it ended: a signal (killed) or an exit status.
    match how {
        Interrupt::Kill(_) | Interrupt::FileSizeKill(_) => {
            let killed = case.output.status.signal().is_some();
            // A kill point the run never reaches (no sidecar when nothing is cut) ends cleanly.
            assert!(
                killed || case.output.status.success(),
                "{how:?}: {:?}",
                case.output
            );
        }
        Interrupt::FileSizeError(_) => {
            // The append failed and was rolled back: exit 2 and the original bytes.
            assert_eq!(case.output.status.code(), Some(2), "{how:?}");
            assert_eq!(now, log, "{how:?}: not rolled back");
        }
    }
    // Never half an event in the committed region: either the original, or the committed
    // prefix followed by a prefix of the append (a partial last line is only a torn tail).
    if now != log {
        assert!(
            now.len() >= keep && now[..keep] == log[..keep],
            "{how:?}: committed prefix changed"
        );
        assert!(
            result.starts_with(&now),
            "{how:?}: not a prefix of the result"
        );
        // The bytes cut are in the first sidecar, synced before the log was touched.
        if log.len() > keep {
            let side = sidecars(case.dir, case.path);
            assert_eq!(
                side.first().map(Vec::as_slice),
                Some(&log[keep..]),
                "{how:?}: cut bytes not in a sidecar"
            );
        }
    }
    // Whatever the interruption left is a log dshs accepts (warnings only)...
    let v = common::dshs()
        .arg("validate")
        .arg(case.path)
        .output()
        .expect("dshs runs");
    assert_eq!(v.status.code(), Some(0), "{how:?}: {v:?}");
    // ...and repairing it again gives exactly the uninterrupted result.
    let again = common::dshs()
        .arg("repair")
        .arg(case.path)
        .output()
        .expect("dshs runs");
    assert!(again.status.success(), "{how:?}: {again:?}");
    assert_eq!(
        std::fs::read(case.path).expect("read"),
        result,
        "{how:?}: re-run differs"
    );
    // And every byte ever cut is still somewhere: the original tail is in some sidecar.
    if log.len() > keep {
        let side = sidecars(case.dir, case.path);
        assert!(
            side.iter().any(|s| s == &log[keep..]),
            "{how:?}: lost bytes"
        );
    }
}

/// The committed prefix length of a log, as repair plans it.
fn keep_of(log: &[u8]) -> usize {
    let (s, _) = common::scan_text(std::str::from_utf8(log).expect("UTF-8 test log"));
    repair::plan(&s).expect("repairable").keep as usize
}

fn repair_is_crash_consistent(log: &[u8], name: &str) -> usize {
    let keep = keep_of(log);
    let mut cases = 0;
    let result = interrupt_everywhere(log, name, &["repair"], |case, result| {
        check_repair(log, keep, case, result);
        cases += 1;
    });
    assert_ne!(result, log, "the test log needs repairing");
    cases
}

#[test]
fn repair_of_the_crashed_sample_survives_a_crash_anywhere() {
    let log = std::fs::read(common::testdata("sample/crashed.v3.jsonl")).expect("sample");
    let cases = repair_is_crash_consistent(&log, "session.v3.jsonl");
    assert!(cases > 40, "{cases} interruptions");
}

const V4: &str =
    r#"{"type":"session","version":4,"id":"s","createdAt":1,"delegationDepth":0,"isSeeded":false}"#;
const V0: &str = r#"{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}"#;

fn open_turn(header: &str, torn: &str) -> Vec<u8> {
    let rows = [
        header,
        r#"{"type":"turn/start","seq":0,"time":10,"data":{"turn":1}}"#,
        r#"{"type":"step/start","seq":1,"time":11,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"assistant/message","seq":2,"time":12,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"bash","arguments":"{}"},{"type":"tool-call","id":"c2","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}"#,
        r#"{"type":"tool/call","seq":3,"time":13,"data":{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{}"}}"#,
    ];
    let mut out: Vec<u8> = rows
        .iter()
        .flat_map(|r| format!("{r}\n").into_bytes())
        .collect();
    out.extend_from_slice(torn.as_bytes());
    out
}

#[test]
fn repair_without_a_cut_and_in_v0_and_v4_survives_a_crash_anywhere() {
    // Nothing to cut (no sidecar): only the append can be interrupted.
    repair_is_crash_consistent(&open_turn(V4, ""), "session.v4.jsonl");
    // A torn line to cut, v0 closers.
    repair_is_crash_consistent(&open_turn(V0, r#"{"type":"tool/res"#), "session.v0.jsonl");
    // The same after a packed row, whose last member's seq and time (8, 20 + 1 + 2) the
    // closers follow: a repair plans them from the row's tally, without its members.
    let packed = std::fs::read(common::testdata("v0/crashed-packed.jsonl")).expect("sample");
    repair_is_crash_consistent(&packed, "session.v0.jsonl");
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("session.v0.jsonl");
    std::fs::write(&log, &packed).expect("log written");
    let out = Command::new(dshs_bin())
        .args(["repair", "-q"])
        .arg(&log)
        .output()
        .expect("dshs runs");
    assert!(out.status.success(), "{out:?}");
    let repaired = std::fs::read_to_string(&log).expect("log read");
    assert!(
        repaired.ends_with(
            "{\"type\":\"step/end\",\"seq\":9,\"time\":23,\"data\":{\"turn\":1,\"step\":2}}\n{\"type\":\"turn/end\",\"seq\":10,\"time\":23,\"data\":{\"turn\":1,\"reason\":{\"kind\":\"interrupted\"}}}\n"
        ),
        "{repaired}"
    );
}

// ---------------------------------------------------------------------------------------
// Live writers
// ---------------------------------------------------------------------------------------

/// Not a test of its own: when `DSHS_TEST_LOCK_HOLDER` names a lock file, this process
/// takes an exclusive lock on it (what a live DSH writer holds), says so on stdout and
/// keeps the lock until its standard input closes. The tests below run it as a child.
#[test]
fn lock_holder_helper() {
    let Some(lock) = std::env::var_os("DSHS_TEST_LOCK_HOLDER") else {
        return;
    };
    let file = std::fs::File::open(lock).expect("lock file");
    file.lock().expect("exclusive lock");
    // Straight to the file descriptor: the test harness captures `println!`.
    let mut out = std::io::stdout();
    out.write_all(b"\ndshs-test: lock held\n").expect("stdout");
    out.flush().expect("flush");
    let mut rest = String::new();
    let _ = std::io::stdin().read_line(&mut rest);
}

fn crashed_log(dir: &Path) -> (PathBuf, Vec<u8>) {
    let log = std::fs::read(common::testdata("sample/crashed.v3.jsonl")).expect("sample");
    let path = dir.join("session.v3.jsonl");
    std::fs::write(&path, &log).expect("write");
    (path, log)
}

/// Only the log itself and the files named in `allowed` are in `dir`.
fn assert_no_new_files(dir: &Path, allowed: &[&str]) {
    for e in std::fs::read_dir(dir).expect("dir") {
        let name = e.expect("entry").file_name().to_string_lossy().into_owned();
        assert!(
            name == "session.v3.jsonl" || allowed.contains(&name.as_str()),
            "unexpected file {name}"
        );
    }
}

/// Another process (this test binary, re-run as `lock_holder_helper`) holding an exclusive
/// lock on `dir/session.lock` until its stdin is closed; returns once the lock is held, with
/// the holder's stdout (kept open: the holder still writes to it when it lets go).
fn hold_session_lock(dir: &Path) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    let lock = dir.join("session.lock");
    std::fs::write(&lock, b"").expect("lock file");
    let mut holder = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "lock_holder_helper",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("DSHS_TEST_LOCK_HOLDER", &lock)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("lock holder");
    let mut out = BufReader::new(holder.stdout.take().expect("stdout"));
    let mut line = String::new();
    while line.trim() != "dshs-test: lock held" {
        line.clear();
        assert!(out.read_line(&mut line).expect("read") > 0, "holder died");
    }
    (holder, out)
}

#[test]
fn repair_refuses_while_another_process_holds_the_session_lock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, log) = crashed_log(dir.path());
    let (mut holder, _out) = hold_session_lock(dir.path());
    for args in [&["repair"][..], &["repair", "--dry-run"]] {
        let o = common::dshs().args(args).arg(&path).output().expect("dshs");
        // --dry-run writes nothing either way; in place, the live writer is a refusal.
        if args.len() == 1 {
            assert_eq!(o.status.code(), Some(3), "{o:?}");
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert!(stderr.contains("live writer"), "{stderr}");
        }
        assert_eq!(std::fs::read(&path).expect("read"), log);
        assert_no_new_files(dir.path(), &["session.lock"]);
    }
    drop(holder.stdin.take());
    assert!(holder.wait().expect("holder exits").success());
    // The lock released, the same command repairs.
    let o = common::dshs()
        .arg("repair")
        .arg(&path)
        .output()
        .expect("dshs");
    assert_eq!(o.status.code(), Some(0), "{o:?}");
}

/// A line a DSH writer might append (content does not matter to the stamp check).
const APPENDED: &[u8] =
    b"{\"type\":\"assistant/chunk\",\"seq\":18,\"time\":1,\"data\":{\"turn\":2,\"step\":1}}\n";

/// Run `dshs ARGS FILE` paused (debug-only hook) where it compares the file's stamp —
/// before touching the file, and the last look before the truncation/append — let an
/// unlocked writer append a line meanwhile, and check the command refuses (exit 3) and
/// writes nothing: the log is the original plus the writer's line, and no file is left.
fn refuses_an_unlocked_appender(args: &[&str], make_log: fn(&Path) -> (PathBuf, Vec<u8>)) {
    for point in [Point::Start, Point::SidecarSynced] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (path, log) = make_log(dir.path());
        let mut child = Command::new(dshs_bin())
            .args(args)
            .arg(&path)
            .env("DSHS_TEST_FAULT", format!("pause:{}", point.name()))
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("dshs");
        let mut err = BufReader::new(child.stderr.take().expect("stderr"));
        let mut line = String::new();
        err.read_line(&mut line).expect("read");
        assert_eq!(
            line.trim(),
            format!("dshs-test: paused at {}", point.name())
        );
        // The writer appends while dshs waits.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        f.write_all(APPENDED).expect("append");
        drop(f);
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(b"\n")
            .expect("resume");
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut err, &mut rest).expect("stderr");
        let status = child.wait().expect("exits");
        assert_eq!(status.code(), Some(3), "{args:?} {point:?}: {rest}");
        assert!(rest.contains("changed while dshs was working"), "{rest}");
        assert_eq!(
            std::fs::read(&path).expect("read"),
            [&log[..], APPENDED].concat(),
            "{args:?} {point:?}"
        );
        // The lock it took to write stays, as DSH leaves it (FORMAT.md §2.1); nothing else.
        assert_no_new_files(dir.path(), &["session.lock"]);
    }
}

#[test]
fn repair_refuses_when_an_unlocked_writer_appends_while_it_works() {
    refuses_an_unlocked_appender(&["repair"], crashed_log);
}

// ---------------------------------------------------------------------------------------
// compact (plain logs of v0, v3, v4 and a zstd log), and repair of a torn zstd frame
// ---------------------------------------------------------------------------------------

/// The plaintext of one complete zstd frame (or of plain bytes).
fn plaintext(bytes: &[u8]) -> Vec<u8> {
    if !bytes.starts_with(&dshs::log::input::ZSTD_MAGIC) {
        return bytes.to_vec();
    }
    let (mut r, _) = ZstdReader::new(bytes).expect("zstd");
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut r, &mut out).expect("a complete frame");
    out
}

/// Every guarantee of `compact` after an interruption. Compaction never cuts: the log is
/// the original followed by a prefix of the planned append, and no sidecar. The result
/// loads (warnings at most). `repair` then cuts only what is not a whole line (a torn last
/// line, or what a torn final zstd frame holds past its last newline), saved in a sidecar:
/// the log becomes the original plus the first K whole events of the bracket, never half an
/// event. K = 0 is exactly the original (re-running the compaction then gives exactly the
/// uninterrupted result) and K = 4 exactly the compacted result. 0 < K < 4 is what FORMAT.md
/// §15.1/§15.4 calls a crash during compaction: the complete lines are committed, the
/// unmatched `compaction/start` is the warning `compaction-open-at-end` (DSH expires it on
/// the next resume), and `compact` refuses to start another compaction over it.
fn check_compact(
    log: &[u8],
    args: &[&str],
    case: &Interrupted<'_>,
    result: &[u8],
) -> (usize, bool) {
    let how = case.how;
    let now = std::fs::read(case.path).expect("read");
    match how {
        Interrupt::Kill(_) | Interrupt::FileSizeKill(_) => {
            let killed = case.output.status.signal().is_some();
            assert!(
                killed || case.output.status.success(),
                "{how:?}: {:?}",
                case.output
            );
        }
        Interrupt::FileSizeError(_) => {
            assert_eq!(case.output.status.code(), Some(2), "{how:?}");
            assert_eq!(now, log, "{how:?}: not rolled back");
        }
    }
    assert!(now.starts_with(log), "{how:?}: the original bytes changed");
    assert!(
        result.starts_with(&now),
        "{how:?}: not the original plus a prefix of the append"
    );
    assert!(
        sidecars(case.dir, case.path).is_empty(),
        "{how:?}: compact never cuts, so never saves a sidecar"
    );
    let v = common::dshs()
        .arg("validate")
        .arg(case.path)
        .output()
        .expect("dshs runs");
    assert_eq!(v.status.code(), Some(0), "{how:?}: {v:?}");

    let r = common::dshs()
        .arg("repair")
        .arg(case.path)
        .output()
        .expect("dshs runs");
    assert!(r.status.success(), "{how:?}: {r:?}");
    let after = std::fs::read(case.path).expect("read");
    // What repair may leave: the original plus the first K whole events of the bracket.
    let zstd = log.starts_with(&dshs::log::input::ZSTD_MAGIC);
    let bracket = plaintext(&result[log.len()..]);
    let events: Vec<&[u8]> = bracket.split_inclusive(|b| *b == b'\n').collect();
    assert_eq!(events.len(), 4);
    let allowed: Vec<Vec<u8>> = (0..=4)
        .map(|k| {
            let lines = events[..k].concat();
            let tail = if zstd {
                encode_frame(&lines).expect("compress")
            } else {
                lines
            };
            [log, &tail[..]].concat()
        })
        .collect();
    let Some(k) = allowed.iter().position(|a| *a == after) else {
        panic!("{how:?}: repair left something other than the original plus whole events")
    };
    if now == log || now == result {
        assert_eq!(after, now, "{how:?}: repair changed a clean log");
    }
    // The bytes repair cut are in a sidecar; nothing else was cut.
    match sidecars(case.dir, case.path).first() {
        Some(side) => {
            let cut_at = if zstd { log.len() } else { allowed[k].len() };
            assert_eq!(
                side[..],
                now[cut_at..],
                "{how:?}: cut bytes not in the sidecar"
            );
        }
        None => assert_eq!(after, now, "{how:?}: bytes cut without a sidecar"),
    }
    let again = Command::new(dshs_bin())
        .args(args)
        .arg(case.path)
        .env("DSHS_TEST_MINT", MINT)
        .output()
        .expect("dshs runs");
    match k {
        0 => {
            assert!(again.status.success(), "{how:?}: {again:?}");
            assert_eq!(
                std::fs::read(case.path).expect("read"),
                result,
                "{how:?}: re-run differs"
            );
        }
        4 => {
            // Already compacted: the range is gone from the surface.
            assert_eq!(again.status.code(), Some(1), "{how:?}: {again:?}");
        }
        _ => {
            let stderr = String::from_utf8_lossy(&again.stderr);
            assert_eq!(again.status.code(), Some(1), "{how:?}: {stderr}");
            assert!(
                stderr.contains("another compaction is still running"),
                "{how:?}: {stderr}"
            );
        }
    }
    if k != 0 {
        assert_eq!(std::fs::read(case.path).expect("read"), after, "{how:?}");
    }
    (k, now != log && now != result)
}

fn compact_is_crash_consistent(log: &[u8], name: &str, start: &str, end: &str) -> usize {
    let args = [
        "compact",
        "--start",
        start,
        "--end",
        end,
        "--summary",
        "the summary",
    ];
    let mut cases = 0;
    let mut seen = [false; 5];
    let mut partial = false;
    let result = interrupt_everywhere(log, name, &args, |case, result| {
        let (k, torn) = check_compact(log, &args, case, result);
        seen[k] = true;
        partial |= torn;
        cases += 1;
    });
    assert!(result.len() > log.len() && result.starts_with(log));
    if log.starts_with(&dshs::log::input::ZSTD_MAGIC) {
        // The file-size limit cannot stop a zstd compaction inside its append: the plaintext
        // copy compact spools first is larger than the compressed log, so the limit kills it
        // before the log is touched. What a crash inside the one `write` leaves is the
        // original plus a prefix of the frame: check every such state directly.
        for n in limits(&result, log.len() as u64, result.len() as u64) {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join(name);
            std::fs::write(&path, &result[..n as usize]).expect("write");
            let output = Output {
                status: std::process::ExitStatus::from_raw(libc::SIGKILL),
                stdout: Vec::new(),
                stderr: Vec::new(),
            };
            let case = Interrupted {
                how: Interrupt::FileSizeKill(n),
                dir: dir.path(),
                path: &path,
                output: &output,
            };
            let (k, torn) = check_compact(log, &args, &case, &result);
            seen[k] = true;
            partial |= torn;
            cases += 1;
        }
    }
    // Not vacuous: interrupted before the append, inside it, and after it.
    assert!(seen[0] && seen[4] && partial, "{seen:?} {partial}");
    if !log.starts_with(&dshs::log::input::ZSTD_MAGIC) {
        // Plain: every count of whole events is reachable (a crash between two lines).
        assert!(seen.iter().all(|s| *s), "{seen:?}");
    }
    cases
}

#[test]
fn compact_of_a_v0_log_survives_a_crash_anywhere() {
    let log = std::fs::read(common::testdata("v0/packed-compaction.jsonl")).expect("v0");
    let cases = compact_is_crash_consistent(&log, "session.v0.jsonl", "29", "23");
    assert!(cases > 40, "{cases} interruptions");
}

#[test]
fn compact_of_a_v3_log_survives_a_crash_anywhere() {
    let log = std::fs::read(common::testdata("v3/nested-replace.jsonl")).expect("v3");
    let cases = compact_is_crash_consistent(&log, "session.v3.jsonl", "32", "27");
    assert!(cases > 40, "{cases} interruptions");
}

#[test]
fn compact_of_a_v4_log_survives_a_crash_anywhere() {
    let log = std::fs::read(common::testdata("sample/session.v4.jsonl")).expect("v4");
    let cases = compact_is_crash_consistent(&log, "session.v4.jsonl", "21", "15");
    assert!(cases > 40, "{cases} interruptions");
}

#[test]
fn compact_of_a_zstd_log_survives_a_crash_anywhere() {
    let plain = std::fs::read(common::testdata("sample/session.v4.jsonl")).expect("v4");
    let log = compress(&plain, 3);
    // The append is one frame: killed inside it, it is a torn final frame.
    let cases = compact_is_crash_consistent(&log, "session.v4.jsonl.zstd", "21", "15");
    assert!(cases > 20, "{cases} interruptions");
}

/// The crashed v3 sample compressed one line per frame, ending in a torn final frame that
/// holds one complete line (committed: repair re-appends it) and part of the next; with the
/// compressed length of the complete frames (where repair cuts).
fn torn_zstd_log() -> (Vec<u8>, usize, Vec<u8>) {
    let plain = std::fs::read(common::testdata("sample/crashed.v3.jsonl")).expect("sample");
    let lines: Vec<&[u8]> = plain.split_inclusive(|&b| b == b'\n').collect();
    let n = lines.len();
    let mut z = compress(&lines[..n - 3].concat(), 1);
    let keep = z.len();
    let mut last = lines[n - 3].to_vec();
    last.extend_from_slice(&lines[n - 2][..20]);
    let frame = encode_frame(&last).expect("compress");
    z.extend_from_slice(&frame[..frame.len() - 3]);
    (z, keep, lines[n - 3].to_vec())
}

#[test]
fn repair_of_a_torn_zstd_frame_survives_a_crash_anywhere() {
    let (log, keep, recovered) = torn_zstd_log();
    // Where the frame of the recovered line ends in the repaired log.
    let recovered_end = keep + encode_frame(&recovered).expect("compress").len();
    let mut cases = 0;
    let mut window = 0;
    let result = interrupt_everywhere(
        &log,
        "session.v3.jsonl.zstd",
        &["repair"],
        |case, result| {
            let now = std::fs::read(case.path).expect("read");
            if now != log && now.len() < recovered_end {
                // Killed after the truncation, before the recovered line's frame was whole:
                // the committed line is, for now, only in the sidecar and in the journal the
                // repair wrote before truncating. The re-run in check_repair must finish the
                // write from the journal (not just close the turn without the line).
                assert!(
                    dshs::log::write::journal_path(case.path).exists(),
                    "{:?}: no journal in the window",
                    case.how
                );
                window += 1;
            }
            check_repair(&log, keep, case, result);
            assert!(
                !dshs::log::write::journal_path(case.path).exists(),
                "{:?}: journal left behind",
                case.how
            );
            cases += 1;
        },
    );
    assert!(window > 0 && window < cases, "{window} of {cases}");
    // Cut at the torn frame, then the recovered line's frame and the closers' frame.
    assert_eq!(result[..keep], log[..keep]);
    assert!(result.len() > keep);
    assert!(cases > 20, "{cases} interruptions");
}

// ---------------------------------------------------------------------------------------
// Live writers and compact
// ---------------------------------------------------------------------------------------

/// A compactable log (the v4 sample) in `dir`, under the name the helpers above expect.
fn compactable_log(dir: &Path) -> (PathBuf, Vec<u8>) {
    let log = std::fs::read(common::testdata("sample/session.v4.jsonl")).expect("sample");
    let path = dir.join("session.v3.jsonl");
    std::fs::write(&path, &log).expect("write");
    (path, log)
}

const COMPACT: [&str; 7] = [
    "compact",
    "--start",
    "21",
    "--end",
    "15",
    "--summary",
    "the summary",
];

#[test]
fn compact_refuses_while_another_process_holds_the_session_lock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, log) = compactable_log(dir.path());
    let (mut holder, _out) = hold_session_lock(dir.path());
    let o = common::dshs()
        .args(COMPACT)
        .arg(&path)
        .output()
        .expect("dshs");
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("live writer"), "{stderr}");
    assert_eq!(std::fs::read(&path).expect("read"), log);
    assert_no_new_files(dir.path(), &["session.lock"]);
    drop(holder.stdin.take());
    assert!(holder.wait().expect("holder exits").success());
    // The lock released, the same command compacts.
    let o = common::dshs()
        .args(COMPACT)
        .arg(&path)
        .output()
        .expect("dshs");
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(std::fs::read(&path).expect("read").len() > log.len());
}

#[test]
fn compact_refuses_when_an_unlocked_writer_appends_while_it_works() {
    // compact cuts nothing: its second look comes just before the append.
    refuses_an_unlocked_appender(&COMPACT, compactable_log);
}

//! Helpers shared by the CLI tests.
#![allow(dead_code)]

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use dshs::log::Finding;
use dshs::log::scan::{Scan, ScanOptions, scan};

pub fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(rel)
}

pub fn dshs() -> Command {
    let mut c = Command::cargo_bin("dshs").expect("binary built");
    c.env_remove("NO_COLOR").env_remove("DSHS_KNOWN_TYPES");
    c
}

/// Run the core pass over a file.
pub fn scan_file(path: &Path) -> (Scan, Vec<Finding>) {
    let mut findings = Vec::new();
    let file = File::open(path).expect("test log exists");
    let s = scan(
        BufReader::new(file),
        Some(path),
        &ScanOptions::default(),
        &mut findings,
        &mut (),
    )
    .expect("readable");
    (s, findings)
}

/// Run the core pass over log text.
pub fn scan_text(text: &str) -> (Scan, Vec<Finding>) {
    let mut findings = Vec::new();
    let s = scan(
        text.as_bytes(),
        None,
        &ScanOptions::default(),
        &mut findings,
        &mut (),
    )
    .expect("in memory");
    (s, findings)
}

/// The codes of a finding list, in order.
pub fn codes(findings: &[Finding]) -> Vec<&'static str> {
    findings.iter().map(|f| f.code.as_str()).collect()
}

/// Parse JSON Lines output.
pub fn json_lines(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

/// Compress a plain log the way DSH stores it: the header line alone in frame 1, then
/// `batch` lines per frame (a final line without newline joins the last frame). Empty input
/// stays empty.
pub fn compress(plain: &[u8], batch: usize) -> Vec<u8> {
    use dshs::log::input::zstd::encode_frame;
    let mut lines: Vec<&[u8]> = plain.split_inclusive(|&b| b == b'\n').collect();
    if lines.is_empty() {
        return Vec::new();
    }
    let header = lines.remove(0);
    let mut out = encode_frame(header).expect("compress");
    for group in lines.chunks(batch.max(1)) {
        out.extend(encode_frame(&group.concat()).expect("compress"));
    }
    out
}

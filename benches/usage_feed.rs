//! `cargo bench --bench usage_feed`: `dshs usage`'s count of logs held in memory, fed to
//! `usage::Feed` in the 256 KiB blocks the command reads, in one process: no kernel copy and
//! no page cache, so two builds compare on a noisy machine where whole-command timings
//! spread. Figures are printed, never asserted.
//!
//! Logs: `DSHS_BENCH_LOGS` (paths joined by `:`, e.g. the largest logs of the grep root), else
//! generated logs of each format (`DSHS_BENCH_BYTES` each, default 64 MiB). Each set is fed
//! `DSHS_BENCH_ROUNDS` times (default 15); the best round is printed. Compare two builds by
//! running their bench binaries one after the other, a few times over (see benches/README.md).

#[path = "gen/mod.rs"]
mod generator;

use std::time::{Duration, Instant};

use dshs::log::usage::{self, BLOCK, Feed};

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The best time over `rounds` of counting every log of `logs`, and the calls counted.
fn best_of(logs: &[Vec<u8>], rounds: u64) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut calls = 0;
    for _ in 0..rounds.max(1) {
        let t = Instant::now();
        calls = 0;
        for log in logs {
            let mut feed = Feed::new();
            for block in log.chunks(BLOCK) {
                feed.bytes(std::hint::black_box(block));
            }
            let counted = feed.finish();
            calls += counted.calls.len();
            // As the command does: the call list goes back for the next log.
            usage::recycle(counted.calls);
        }
        best = best.min(t.elapsed());
    }
    (best, calls)
}

fn report(name: &str, logs: &[Vec<u8>], rounds: u64) {
    let bytes: usize = logs.iter().map(Vec::len).sum();
    let (best, calls) = best_of(logs, rounds);
    let mib = bytes as f64 / (1 << 20) as f64;
    println!(
        "{name:>12} {mib:>10.1} {calls:>10} {:>10.1} {:>10.0}",
        best.as_secs_f64() * 1e3,
        mib / best.as_secs_f64()
    );
}

fn main() {
    let rounds = env_number("DSHS_BENCH_ROUNDS", 15);
    println!(
        "{:>12} {:>10} {:>10} {:>10} {:>10}",
        "logs", "MiB", "calls", "best ms", "MiB/s"
    );
    if let Ok(paths) = std::env::var("DSHS_BENCH_LOGS") {
        let logs: Vec<Vec<u8>> = paths
            .split(':')
            .filter(|p| !p.is_empty())
            .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("cannot read {p}: {e}")))
            .collect();
        report("given", &logs, rounds);
        return;
    }
    let size = env_number("DSHS_BENCH_BYTES", 64 << 20);
    for version in 0..=4u8 {
        let mut buf = Vec::with_capacity(size as usize + (1 << 20));
        generator::Generator::new(&mut buf, version, 42)
            .run(size)
            .expect("generate");
        report(&format!("v{version}"), &[buf], rounds);
    }
}

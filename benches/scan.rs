//! `cargo bench`: throughput of the one streaming pass (validate's work) on generated logs
//! held in memory, per format version. Figures are printed, never asserted.

#[path = "gen/mod.rs"]
mod generator;

use std::time::Instant;

use dshs::log::scan::{ScanOptions, scan};

fn main() {
    let size: u64 = std::env::var("DSHS_BENCH_BYTES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64 << 20);
    println!(
        "{:>8} {:>10} {:>12} {:>10} {:>10}",
        "version", "MiB", "events", "secs", "MiB/s"
    );
    for version in [0u8, 2, 3, 4] {
        let mut buf = Vec::with_capacity(size as usize + (1 << 20));
        let mut g = generator::Generator::new(&mut buf, version, 42);
        g.run(size).expect("generate");
        let events = g.events();
        let mut findings = Vec::new();
        let t = Instant::now();
        let s = scan(
            &buf[..],
            None,
            &ScanOptions::default(),
            &mut findings,
            &mut (),
        )
        .expect("scan");
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(
            s.tally.errors, 0,
            "generated log must be valid: {findings:?}"
        );
        let mib = buf.len() as f64 / (1 << 20) as f64;
        println!(
            "{version:>8} {mib:>10.1} {events:>12} {secs:>10.3} {:>10.1}",
            mib / secs
        );
    }
}

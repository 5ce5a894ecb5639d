//! The SQLite benchmark's tool (see benches/README.md):
//!
//! ```text
//! sqlite-store store LOG.jsonl STORE.db [BATCH]   store a JSONL log as DSH's schema-17 store does
//! sqlite-store read STORE.db ID [--expand] [--inline]  read every line of a session through dshs
//! sqlite-store validate STORE.db ID               the pass of `dshs validate` over those lines
//! ```
//!
//! `store` packs chunk runs within append batches of BATCH events (default 256), compresses
//! `data` of 4,096 bytes or more, writes varint sources, one transaction and one revision
//! bump per batch. `read` streams the session's logical log through `dshs::log::sqlite` and
//! counts it, so its time is the storage layer's alone (no validation).

#[path = "store/mod.rs"]
mod store;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("store") if args.len() >= 3 => {
            let batch = args.get(3).and_then(|b| b.parse().ok()).unwrap_or(256);
            let t = Instant::now();
            let file = std::fs::File::open(&args[1]).expect("open the log");
            let lines = BufReader::with_capacity(1 << 20, file)
                .lines()
                .map(|l| l.expect("read"));
            let mut conn = store::create(Path::new(&args[2]), 17).expect("create the store");
            // Only the layout matters for the benchmark: skip DSH's fsyncs while building.
            conn.pragma_update(None, "synchronous", "OFF")
                .expect("pragma");
            let policy = store::Policy {
                schema: 17,
                compress: true,
                pack: true,
            };
            let (id, events) = store::store_lines(&mut conn, lines, policy, batch).expect("store");
            let rows: i64 = conn
                .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
                .expect("count");
            conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
                .expect("checkpoint");
            drop(conn);
            eprintln!(
                "stored {events} events in {rows} rows as session {id} in {:.1?}",
                t.elapsed()
            );
            println!("{id}");
        }
        Some("read") if args.len() >= 3 => {
            let t = Instant::now();
            let mut store = dshs::log::sqlite::Store::open(Path::new(&args[1])).expect("open");
            let mut r = store.read(&args[2]).expect("read");
            let flag = |f: &str| args[3..].iter().any(|a| a == f);
            if !flag("--expand") {
                r.keep_packed_rows();
            }
            if flag("--inline") {
                r.check_storage_class_inline();
            }
            let (mut lines, mut bytes) = (0u64, 0u64);
            while let Some(l) = r.next_line().expect("line") {
                lines += 1;
                bytes += l.bytes.len() as u64 + 1;
            }
            let end = r.finish().expect("finish");
            eprintln!(
                "{lines} lines, {bytes} bytes, {} rows, {} storage findings in {:.3?}",
                end.rows,
                end.findings.len(),
                t.elapsed()
            );
        }
        Some("validate") if args.len() == 3 => {
            let t = Instant::now();
            let mut store = dshs::log::sqlite::Store::open(Path::new(&args[1])).expect("open");
            let mut r = store.read(&args[2]).expect("read");
            r.keep_packed_rows();
            r.check_storage_class_inline();
            let mut findings = Vec::new();
            let opts = dshs::log::scan::ScanOptions::default();
            let s =
                dshs::log::scan::scan(&mut r, None, &opts, &mut findings, &mut ()).expect("scan");
            let end = r.finish().expect("finish");
            eprintln!(
                "{}: {} events, {} surface nodes, {} findings + {} storage findings in {:.3?}",
                dshs::log::sqlite::combined_status(s.status(), &end.findings).as_str(),
                s.events(),
                s.surface_nodes(),
                findings.len(),
                end.findings.len(),
                t.elapsed()
            );
        }
        _ => {
            eprintln!(
                "usage: sqlite-store store LOG.jsonl STORE.db [BATCH] | read STORE.db ID [--expand] [--inline] | validate STORE.db ID"
            );
            std::process::exit(2);
        }
    }
}

//! Compress a plain log the way DSH's JSONL backend stores it (FORMAT.md §3.3): frame 1 holds
//! only the header line, every later frame one append batch of whole lines, each frame with
//! the content checksum at the default level. For benchmarks and experiments.
//!
//! Usage: zstd-log [--batch N] IN OUT   (N lines per frame after the header; default 16)

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};

fn main() -> std::io::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut batch = 16usize;
    if args.first().is_some_and(|a| a == "--batch") {
        batch = args
            .get(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(16)
            .max(1);
        args.drain(..2);
    }
    let [input, output] = args.as_slice() else {
        eprintln!("usage: zstd-log [--batch N] IN OUT");
        std::process::exit(2);
    };
    let mut reader = BufReader::with_capacity(1 << 20, File::open(input)?);
    let mut out = BufWriter::with_capacity(1 << 20, File::create(output)?);
    let mut line = Vec::new();
    let mut pending = Vec::new();
    let mut lines = 0usize;
    let mut first = true;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n > 0 {
            pending.extend_from_slice(&line);
            lines += 1;
        }
        if (n == 0 && !pending.is_empty()) || first || lines == batch {
            if !pending.is_empty() {
                out.write_all(&dshs::log::input::zstd::encode_frame(&pending)?)?;
            }
            pending.clear();
            lines = 0;
            first = false;
        }
        if n == 0 {
            break;
        }
    }
    out.flush()
}

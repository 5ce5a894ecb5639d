//! Compress a plain log the way DSH's JSONL backend stores it (FORMAT.md §3.3): frame 1 holds
//! only the header line, every later frame one append batch of whole lines, each frame with
//! the content checksum at the default level. For benchmarks and experiments.
//!
//! Usage: zstd-log [--batch N] IN OUT   (N lines per frame after the header; default 16)
//!        zstd-log --decode IN           (decompress IN the way `dshs` reads it, output
//!                                        discarded: the cost of decompression alone)

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};

fn main() -> std::io::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--decode") && args.len() == 2 {
        return decode(&args[1]);
    }
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
        eprintln!("usage: zstd-log [--batch N] IN OUT | zstd-log --decode IN");
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

/// Read `input` through dshs's zstd reader (the structural walk, the decoder, the frame
/// bookkeeping) in the 256 KiB reads the pipeline makes, and discard the plaintext.
fn decode(input: &str) -> std::io::Result<()> {
    let start = std::time::Instant::now();
    let file = BufReader::with_capacity(128 * 1024, File::open(input)?);
    let (mut reader, framing) = dshs::log::input::zstd::ZstdReader::new(file)?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut plain = 0u64;
    loop {
        match reader.read(&mut buf)? {
            0 => break,
            n => plain += n as u64,
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let end = framing.end();
    println!(
        "{plain} plaintext bytes from {} frames in {secs:.3} s ({:.0} MB/s); issues: {}, torn: {}",
        end.frames,
        plain as f64 / secs / 1e6,
        end.issues.len(),
        end.torn.is_some()
    );
    Ok(())
}

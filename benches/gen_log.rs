//! Generate a large, realistic, valid DSH log for benchmarks.
//!
//! `cargo run --release --example gen-log -- --version 3 --size 1G > big.jsonl`

#[path = "gen/mod.rs"]
mod generator;

use std::io::{self, BufWriter};

fn parse_size(s: &str) -> Option<u64> {
    let (num, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mult)
}

fn main() -> io::Result<()> {
    let mut version = 3u8;
    let mut size = 100u64 << 20;
    let mut seed = 42u64;
    let mut pathological: Option<(usize, u64)> = None;
    let mut rejected: Option<(usize, u64, bool)> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let value = args.next();
        match (a.as_str(), value.as_deref()) {
            ("--version", Some(v)) => version = v.parse().unwrap_or(3).min(4),
            ("--size", Some(v)) => size = parse_size(v).unwrap_or(size),
            ("--seed", Some(v)) => seed = v.parse().unwrap_or(seed),
            // --pathological NODES,REPLACES (e.g. 1000000,100000)
            ("--pathological", Some(v)) => {
                pathological = v
                    .split_once(',')
                    .and_then(|(n, r)| Some((n.parse().ok()?, r.parse().ok()?)));
                if pathological.is_none() {
                    eprintln!("--pathological takes NODES,REPLACES");
                    std::process::exit(2);
                }
            }
            // --rejected-replaces NODES,REPLACES[,missing|reversed] (e.g. 100000,1000)
            ("--rejected-replaces", Some(v)) => {
                let parts: Vec<&str> = v.split(',').collect();
                rejected = match parts.as_slice() {
                    [n, r] | [n, r, "missing"] => n
                        .parse()
                        .ok()
                        .zip(r.parse().ok())
                        .map(|(n, r)| (n, r, false)),
                    [n, r, "reversed"] => n
                        .parse()
                        .ok()
                        .zip(r.parse().ok())
                        .map(|(n, r)| (n, r, true)),
                    _ => None,
                };
                if rejected.is_none() {
                    eprintln!("--rejected-replaces takes NODES,REPLACES[,missing|reversed]");
                    std::process::exit(2);
                }
            }
            _ => {
                eprintln!(
                    "usage: gen-log [--version 0-4] [--size N[K|M|G]] [--seed N] [--pathological NODES,REPLACES] [--rejected-replaces NODES,REPLACES[,missing|reversed]] > out.jsonl"
                );
                std::process::exit(2);
            }
        }
    }
    let stdout = io::stdout();
    let mut g = generator::Generator::new(
        BufWriter::with_capacity(1 << 20, stdout.lock()),
        version,
        seed,
    );
    match (pathological, rejected) {
        (_, Some((nodes, replaces, reversed))) => g.rejected_replaces(nodes, replaces, reversed)?,
        (Some((nodes, replaces)), None) => g.pathological(nodes, replaces)?,
        (None, None) => g.run(size)?,
    }
    eprintln!(
        "gen-log: v{version}, {} events, {} bytes",
        g.events(),
        g.bytes_written()
    );
    Ok(())
}

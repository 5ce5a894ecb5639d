//! `--follow` latency and cost: `dshs show -f` follows a log while this program appends one
//! event every `--interval-ms` for `--seconds`; it reports the delay from each write to the
//! printed line (median, 99th percentile), the CPU time per appended event, the CPU time
//! while idle, and the follower's peak RSS. Linux only (reads /proc).
//!
//! ```text
//! cargo run --release --example gen-log -- --version 3 --size 1G > /tmp/big.jsonl
//! cargo run --release --example follow-latency -- --dshs target/release/dshs --log /tmp/big.jsonl
//! ```
//!
//! The log is appended to: use a copy you can throw away.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Args {
    dshs: String,
    log: String,
    poll: Option<u64>,
    seconds: u64,
    interval_ms: u64,
    idle: u64,
}

fn args() -> Args {
    let mut a = Args {
        dshs: "target/release/dshs".into(),
        log: String::new(),
        poll: None,
        seconds: 30,
        interval_ms: 10,
        idle: 30,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_default();
        match k.as_str() {
            "--dshs" => a.dshs = v,
            "--log" => a.log = v,
            "--poll" => a.poll = v.parse().ok(),
            "--seconds" => a.seconds = v.parse().unwrap_or(30),
            "--interval-ms" => a.interval_ms = v.parse().unwrap_or(10),
            "--idle" => a.idle = v.parse().unwrap_or(30),
            _ => {
                eprintln!("unknown option {k}");
                std::process::exit(2);
            }
        }
    }
    if a.log.is_empty() {
        eprintln!("--log PATH is required");
        std::process::exit(2);
    }
    a
}

/// The `seq` of the last complete line of the log.
fn last_seq(path: &str) -> u64 {
    let mut f = std::fs::File::open(path).expect("log");
    let len = f.metadata().expect("size").len();
    let from = len.saturating_sub(1 << 20);
    f.seek(SeekFrom::Start(from)).expect("seek");
    let mut tail = String::new();
    f.read_to_string(&mut tail).expect("read");
    tail.lines()
        .rev()
        .find_map(seq_of)
        .expect("a line with a seq near the end")
}

fn seq_of(line: &str) -> Option<u64> {
    let at = line.find("\"seq\":")? + 6;
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// User plus system CPU time of a process.
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    // USER_HZ is 100 on Linux.
    Duration::from_millis(ticks * 10)
}

fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let a = args();
    let first = last_seq(&a.log) + 1;
    let mut cmd = Command::new(&a.dshs);
    // Only the appended events are printed: the initial read costs the fold, not output.
    cmd.args(["show", "--format", "json", "--type", "session/title", "-f"]);
    if let Some(ms) = a.poll {
        cmd.args(["--poll", &ms.to_string()]);
    }
    let mut child = cmd
        .arg(&a.log)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("dshs starts");
    let pid = child.id();
    let seen: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
    let stdout = child.stdout.take().expect("piped");
    let reader = {
        let seen = Arc::clone(&seen);
        std::thread::spawn(move || {
            for line in BufReader::with_capacity(1 << 20, stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(seq) = seq_of(&line).filter(|&s| s >= first) {
                    seen.lock().unwrap().insert(seq, Instant::now());
                }
            }
        })
    };
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(&a.log)
        .expect("log opened for appending");
    let event = |seq: u64, i: u64| {
        format!(
            "{{\"type\":\"session/title\",\"seq\":{seq},\"time\":{},\"data\":{{\"title\":\"bench {i}\"}}}}\n",
            1_800_000_000_000u64 + i
        )
    };
    // The first appended event marks the end of the initial read.
    let start = Instant::now();
    log.write_all(event(first, 0).as_bytes()).expect("append");
    while !seen.lock().unwrap().contains_key(&first) {
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            start.elapsed() < Duration::from_secs(3600),
            "never caught up"
        );
    }
    println!(
        "initial read: {:.1} s, CPU {:.1} s",
        start.elapsed().as_secs_f64(),
        cpu(pid).as_secs_f64()
    );

    let before_idle = cpu(pid);
    std::thread::sleep(Duration::from_secs(a.idle));
    let idle = cpu(pid) - before_idle;
    println!("idle {} s: CPU {} ms", a.idle, idle.as_millis());

    let first = first + 1;
    let n = a.seconds * 1000 / a.interval_ms;
    let mut written = Vec::with_capacity(n as usize);
    let before_writes = cpu(pid);
    let t0 = Instant::now();
    for i in 0..n {
        let due = t0 + Duration::from_millis(i * a.interval_ms);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        log.write_all(event(first + i, i + 1).as_bytes())
            .expect("append");
        written.push(Instant::now());
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.lock().unwrap().len() < n as usize + 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let busy = cpu(pid) - before_writes;
    let rss = peak_rss_kib(pid);
    let _ = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status();
    let _ = child.wait();
    let _ = reader.join();
    let seen = seen.lock().unwrap();
    let mut delays: Vec<Duration> = (0..n)
        .filter_map(|i| {
            let at = seen.get(&(first + i))?;
            Some(at.saturating_duration_since(written[i as usize]))
        })
        .collect();
    delays.sort();
    println!("events appended: {n}, printed: {}", delays.len());
    if !delays.is_empty() {
        println!(
            "delay write → printed: median {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            percentile(&delays, 0.5).as_secs_f64() * 1e3,
            percentile(&delays, 0.99).as_secs_f64() * 1e3,
            delays[delays.len() - 1].as_secs_f64() * 1e3
        );
    }
    println!(
        "CPU while appending: {} ms in all, {:.3} ms per event",
        busy.as_millis(),
        busy.as_secs_f64() * 1e3 / n as f64
    );
    println!("peak RSS: {} MiB", rss / 1024);
}

//! Helpers the unit tests of several modules share.

/// The replace-marker endpoint keys of format version `v` (§11.1), spelled out here rather
/// than read from the dialect, so that the tests check the dialect too.
pub fn replace_keys(v: usize) -> (&'static str, &'static str) {
    if v <= 2 {
        ("start", "end")
    } else {
        ("startSeq", "endSeq")
    }
}

/// Every plain log under `testdata/`.
pub fn testdata_logs() -> Vec<std::path::PathBuf> {
    let mut logs = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from("testdata")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                logs.push(p);
            }
        }
    }
    logs.sort();
    logs
}

/// Seqs from `start`, each `steps[i]` after the one before (a step of 0 repeats a seq), joined
/// by commas: the body of a generated `sourceEventSeqs` list.
pub fn stepped_seqs(start: u64, steps: &[u64]) -> String {
    let seqs: Vec<String> = steps
        .iter()
        .scan(start, |at, step| {
            *at += step;
            Some(at.to_string())
        })
        .collect();
    seqs.join(",")
}

/// Random rounds of a test: fewer under Miri, which interprets every one (what it checks is
/// the `unsafe` of the code under test, which a few hundred rounds reach on every path).
pub fn rounds(n: usize) -> usize {
    if cfg!(miri) { n / 100 } else { n }
}

/// A 64-byte window for the tests of a mask's lanes: random bytes, a quarter of them drawn
/// from `favoured` (the bytes the masks are about).
pub fn random_window(rng: &mut Rng, favoured: &[u8]) -> [u8; 64] {
    let mut w = [0u8; 64];
    for b in &mut w {
        *b = match rng.below(4) {
            0 => favoured[rng.below(favoured.len())],
            _ => rng.below(256) as u8,
        };
    }
    w
}

/// A tiny deterministic PRNG (xorshift64) for the model tests: the same seed, the same run.
pub struct Rng(pub u64);

impl Rng {
    /// A number in `[0, n)` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

//! A set of 64-bit id digests in about 8 bytes per id.
//!
//! The session-wide id rules (a tool call id advertised once, a `command/run` id used once)
//! need every id of the session, so this set is the one structure of the fold that grows
//! with the log. A hash set costs 10–20 bytes per digest (load factor, power-of-two growth,
//! and twice that while it grows); here the bulk of the digests sit in one sorted vector and
//! only the most recent ones in a small hash set, merged in batches.

use std::hash::{BuildHasherDefault, Hasher};

/// Seqs are dense integers: a multiplicative hash is enough and much cheaper than SipHash.
#[derive(Default, Clone, Copy)]
pub struct SeqHasher(u64);

impl Hasher for SeqHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    }
}

pub type SeqHash = BuildHasherDefault<SeqHasher>;

/// A set of seqs (or seq-like digests) with [`SeqHash`].
pub type SeqSet = std::collections::HashSet<u64, SeqHash>;

/// Recent digests kept unsorted before a merge.
const RECENT: usize = 4096;

/// The sorted digests are found through their top `BUCKET_BITS` bits: a lookup searches only
/// the digests that share them (digests are uniform, so a few dozen per bucket at 100,000s of
/// ids), near each other in memory, instead of binary-searching the whole vector, whose
/// first probes are a cache miss each.
const BUCKET_BITS: u32 = 12;

/// Steps [`IdSet::in_sorted`] walks from its guess before it searches.
const WALK: usize = 8;

#[derive(Debug, Clone, Default)]
pub struct IdSet {
    sorted: Vec<u64>,
    /// `sorted[starts[b]..starts[b + 1]]` holds the digests of bucket `b` (empty before the
    /// first merge).
    starts: Vec<usize>,
    recent: SeqSet,
}

/// The digest of an id (XXH3, 64 bits: two distinct ids of one session share one with a
/// chance of about n²/2⁶⁵, under 10⁻⁸ for a million ids).
pub fn digest(id: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(id.as_bytes())
}

impl IdSet {
    pub fn contains(&self, key: u64) -> bool {
        self.recent.contains(&key) || self.in_sorted(key)
    }

    fn in_sorted(&self, key: u64) -> bool {
        let b = (key >> (64 - BUCKET_BITS)) as usize;
        let (Some(&from), Some(&to)) = (self.starts.get(b), self.starts.get(b + 1)) else {
            return false;
        };
        let bucket = &self.sorted[from..to];
        if bucket.is_empty() {
            return false;
        }
        // Digests are uniform, so a key sits about as far into its bucket as its low bits are
        // into the bucket's range: the search starts there and walks a few steps, usually
        // within one cache line (a binary search takes several dependent cache misses). Keys
        // that are not spread evenly (or a walk
        // that goes on) fall back to a binary search of the side the key is on.
        let share = u128::from(key << BUCKET_BITS);
        let mut i = ((share * bucket.len() as u128) >> 64) as usize;
        for _ in 0..WALK {
            match bucket[i].cmp(&key) {
                std::cmp::Ordering::Equal => return true,
                std::cmp::Ordering::Less if i + 1 < bucket.len() && bucket[i + 1] <= key => i += 1,
                std::cmp::Ordering::Greater if i > 0 && bucket[i - 1] >= key => i -= 1,
                // The key lies between two neighbours (or past an end): absent.
                _ => return false,
            }
        }
        if bucket[i] < key {
            bucket[i..].binary_search(&key).is_ok()
        } else {
            bucket[..=i].binary_search(&key).is_ok()
        }
    }

    /// False when `key` was already in the set.
    pub fn insert(&mut self, key: u64) -> bool {
        if self.in_sorted(key) || !self.recent.insert(key) {
            return false;
        }
        if self.recent.len() >= RECENT {
            self.merge();
        }
        true
    }

    /// Move the recent digests into the sorted vector, merging from the back in place.
    fn merge(&mut self) {
        let mut recent: Vec<u64> = self.recent.drain().collect();
        recent.sort_unstable();
        let old = self.sorted.len();
        if self.sorted.capacity() < old + recent.len() {
            // Grow by a quarter: the vector is most of the set's memory.
            self.sorted.reserve_exact((old / 4).max(recent.len()));
        }
        self.sorted.resize(old + recent.len(), 0);
        let (mut i, mut j, mut k) = (old, recent.len(), old + recent.len());
        while j > 0 {
            k -= 1;
            if i > 0 && self.sorted[i - 1] > recent[j - 1] {
                self.sorted[k] = self.sorted[i - 1];
                i -= 1;
            } else {
                self.sorted[k] = recent[j - 1];
                j -= 1;
            }
        }
        // Bucket starts: the first index of each bucket, then the end.
        self.starts.clear();
        self.starts.reserve_exact((1 << BUCKET_BITS) + 1);
        let mut at = 0;
        for b in 0..=(1u64 << BUCKET_BITS) {
            while at < self.sorted.len() && self.sorted[at] >> (64 - BUCKET_BITS) < b {
                at += 1;
            }
            self.starts.push(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_a_hash_set_across_merges() {
        // Small keys (all in the first bucket) and keys spread over all 64 bits like digests.
        for spread in [1, 0x9E37_79B9_7F4A_7C15u64] {
            let mut set = IdSet::default();
            let mut reference = std::collections::HashSet::new();
            // A sequence with repeats spread far apart, so repeats hit both halves of the set.
            for n in 0..30_000u64 {
                let key = ((n * 7919) % 20_011).wrapping_mul(spread);
                assert_eq!(set.insert(key), reference.insert(key), "insert {key}");
            }
            // Every key inserted, and as many that never were (between and beyond them).
            for k in 0..40_022u64 {
                let key = k.wrapping_mul(spread);
                assert_eq!(
                    set.contains(key),
                    reference.contains(&key),
                    "contains {key}"
                );
            }
            assert!(set.sorted.windows(2).all(|w| w[0] < w[1]));
            let buckets = set.starts.windows(2).filter(|w| w[0] < w[1]).count();
            assert!(buckets > if spread == 1 { 0 } else { 1000 }, "{buckets}");
        }
    }
}

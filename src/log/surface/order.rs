//! Order statistics over surface labels, so a replace is checked without walking its range.
//!
//! Every node holds a *label*: an append takes the next one, a replacing node the label of
//! the first node it shadows, so labels follow surface order. [`Fenwick`] counts live labels
//! (positions, range sizes, the k-th node). [`PointSet`] counts points `(seq, label)` in a
//! rectangle, for the nodes whose seq is not the seq that created their label.

/// A Fenwick (binary indexed) tree of small counts, indexed from 0.
#[derive(Debug, Clone, Default)]
pub(crate) struct Fenwick {
    /// 1-based: `tree[0]` is unused.
    tree: Vec<u32>,
}

impl Fenwick {
    pub fn len(&self) -> usize {
        self.tree.len().saturating_sub(1)
    }

    /// A tree over `values`, in O(n).
    pub fn build(values: impl Iterator<Item = u32>) -> Self {
        let mut tree = vec![0];
        tree.extend(values);
        for j in 1..tree.len() {
            let parent = j + (j & j.wrapping_neg());
            if parent < tree.len() {
                tree[parent] += tree[j];
            }
        }
        Fenwick { tree }
    }

    /// Append an element holding `v`.
    pub fn push(&mut self, v: u32) {
        if self.tree.is_empty() {
            self.tree.push(0);
        }
        let j = self.tree.len();
        let low = j & j.wrapping_neg();
        // The new cell covers (j - low, j]: the element itself and the `low - 1` before it.
        let below = self.prefix(j - 1) - self.prefix(j - low);
        self.tree.push(v + below);
    }

    pub fn add(&mut self, i: usize, delta: i32) {
        let mut j = i + 1;
        while j < self.tree.len() {
            self.tree[j] = self.tree[j].wrapping_add_signed(delta);
            j += j & j.wrapping_neg();
        }
    }

    /// The sum of elements `[0, i)`.
    pub fn prefix(&self, i: usize) -> u32 {
        let mut j = i.min(self.len());
        let mut s = 0;
        while j > 0 {
            s += self.tree[j];
            j &= j - 1;
        }
        s
    }

    /// The sum of elements `[lo, hi)`.
    pub fn between(&self, lo: usize, hi: usize) -> u32 {
        if hi <= lo {
            return 0;
        }
        self.prefix(hi) - self.prefix(lo)
    }

    /// The index of the element where the running sum passes `k` (for 0/1 elements: the
    /// `k`-th one, from 0), or `len()` when the total is `k` or less.
    pub fn select(&self, k: u32) -> usize {
        select2(self, None, k)
    }
}

/// [`Fenwick::select`] over the element-wise sum of two trees of the same length.
pub(crate) fn select2(a: &Fenwick, b: Option<&Fenwick>, mut k: u32) -> usize {
    let n = a.len();
    let mut pos = 0;
    let mut step = if n == 0 { 0 } else { 1 << n.ilog2() };
    while step > 0 {
        let next = pos + step;
        if next <= n {
            let cell = a.tree[next] + b.map_or(0, |b| b.tree[next]);
            if cell <= k {
                pos = next;
                k -= cell;
            }
        }
        step >>= 1;
    }
    pos
}

/// A bit vector with constant-time rank.
#[derive(Debug, Clone, Default)]
struct Bits {
    words: Vec<u64>,
    /// Ones in `words[..w]`, for every `w` up to `words.len()`.
    ranks: Vec<u32>,
}

impl Bits {
    fn from_fn(len: usize, bit: impl Fn(usize) -> bool) -> Self {
        let mut words = vec![0u64; len.div_ceil(64)];
        for i in 0..len {
            if bit(i) {
                words[i / 64] |= 1 << (i % 64);
            }
        }
        let mut ranks = Vec::with_capacity(words.len() + 1);
        let mut total = 0;
        for w in &words {
            ranks.push(total);
            total += w.count_ones();
        }
        ranks.push(total);
        Bits { words, ranks }
    }

    /// Ones in `[0, i)`.
    fn rank1(&self, i: usize) -> usize {
        let (w, b) = (i / 64, i % 64);
        let below = if b == 0 {
            0
        } else {
            (self.words[w] << (64 - b)).count_ones()
        };
        (self.ranks[w] + below) as usize
    }
}

/// Label bits: labels are `u32`.
const LEVELS: u32 = 32;

/// A wavelet matrix over `u32` values: how many values in a range of positions lie below a
/// bound, in [`LEVELS`] rank steps.
#[derive(Debug, Clone, Default)]
struct Wavelet {
    levels: Vec<(Bits, usize)>,
}

impl Wavelet {
    fn build(values: &[u32]) -> Self {
        let mut cur = values.to_vec();
        let mut levels = Vec::with_capacity(LEVELS as usize);
        for l in 0..LEVELS {
            let shift = LEVELS - 1 - l;
            let bits = Bits::from_fn(cur.len(), |i| (cur[i] >> shift) & 1 == 1);
            let (zeros, ones): (Vec<u32>, Vec<u32>) =
                cur.iter().partition(|v| (**v >> shift) & 1 == 0);
            levels.push((bits, zeros.len()));
            cur = zeros;
            cur.extend(ones);
        }
        Wavelet { levels }
    }

    /// Values below `x` at positions `[s, e)`.
    fn count_less(&self, mut s: usize, mut e: usize, x: u64) -> usize {
        if x > u64::from(u32::MAX) {
            return e - s;
        }
        let mut below = 0;
        for (l, (bits, zeros)) in self.levels.iter().enumerate() {
            let shift = LEVELS - 1 - l as u32;
            let (s1, e1) = (bits.rank1(s), bits.rank1(e));
            if (x >> shift) & 1 == 1 {
                below += (e - s) - (e1 - s1);
                s = zeros + s1;
                e = zeros + e1;
            } else {
                s -= s1;
                e -= e1;
            }
        }
        below
    }
}

/// A static set of points, sorted by seq.
#[derive(Debug, Clone, Default)]
struct Block {
    seqs: Vec<u64>,
    labels: Vec<u32>,
    wavelet: Wavelet,
}

impl Block {
    fn build(mut points: Vec<(u64, u32)>) -> Self {
        points.sort_unstable();
        let labels: Vec<u32> = points.iter().map(|p| p.1).collect();
        Block {
            wavelet: Wavelet::build(&labels),
            seqs: points.iter().map(|p| p.0).collect(),
            labels,
        }
    }

    /// Points with seq in `[a, b]` and label below `x`.
    fn count_less(&self, a: u64, b: u64, x: u64) -> usize {
        let s = self.seqs.partition_point(|&q| q < a);
        let e = self.seqs.partition_point(|&q| q <= b);
        if s >= e {
            return 0;
        }
        self.wavelet.count_less(s, e, x)
    }
}

/// Points added below this count are scanned; more are merged into static blocks.
const BUFFER: usize = 32;

/// A growing multiset of points `(seq, label)` with rectangle counts: the logarithmic method
/// over static blocks (block `i` holds `BUFFER << i` points), so an insertion costs
/// O(log² n) amortized and a count O(log n) wavelet queries.
#[derive(Debug, Clone, Default)]
struct Points {
    buffer: Vec<(u64, u32)>,
    blocks: Vec<Option<Block>>,
    len: usize,
}

impl Points {
    fn insert(&mut self, seq: u64, label: u32) {
        self.len += 1;
        self.buffer.push((seq, label));
        if self.buffer.len() < BUFFER {
            return;
        }
        let mut merged = std::mem::take(&mut self.buffer);
        let mut i = 0;
        while let Some(slot) = self.blocks.get_mut(i) {
            match slot.take() {
                Some(b) => {
                    merged.extend(b.seqs.iter().copied().zip(b.labels.iter().copied()));
                    i += 1;
                }
                None => break,
            }
        }
        if i == self.blocks.len() {
            self.blocks.push(None);
        }
        self.blocks[i] = Some(Block::build(merged));
    }

    /// Points with seq in `[a, b]` and label below `x`.
    fn count_less(&self, a: u64, b: u64, x: u64) -> usize {
        let buffered = self
            .buffer
            .iter()
            .filter(|(s, l)| (a..=b).contains(s) && u64::from(*l) < x)
            .count();
        buffered
            + self
                .blocks
                .iter()
                .flatten()
                .map(|blk| blk.count_less(a, b, x))
                .sum::<usize>()
    }
}

/// The live points `(seq, label)` of a dynamic set: every point added, minus every point
/// removed, each kept as a [`Points`]; rebuilt from the live points when the removed ones
/// outnumber them, so memory follows the live set.
#[derive(Debug, Clone, Default)]
pub(crate) struct PointSet {
    added: Points,
    removed: Points,
}

impl PointSet {
    pub fn insert(&mut self, seq: u64, label: u32) {
        self.added.insert(seq, label);
    }

    pub fn remove(&mut self, seq: u64, label: u32) {
        self.removed.insert(seq, label);
    }

    pub fn len(&self) -> usize {
        self.added.len - self.removed.len
    }

    /// Whether the removed points are worth dropping (see [`PointSet::rebuild`]).
    pub fn wants_rebuild(&self) -> bool {
        self.removed.len > BUFFER && self.removed.len > self.len()
    }

    /// Start again from the live points (with their current labels).
    pub fn rebuild(&mut self, live: impl Iterator<Item = (u64, u32)>) {
        *self = PointSet::default();
        let points: Vec<(u64, u32)> = live.collect();
        self.added.len = points.len();
        // The blocks that inserting them one by one would have left: one per set bit.
        let mut it = points.into_iter();
        let buffered = self.added.len % BUFFER;
        self.added.buffer = it.by_ref().take(buffered).collect();
        let chunks = self.added.len / BUFFER;
        let mut level = 0;
        while chunks >> level > 0 {
            let block = (chunks & (1 << level) != 0)
                .then(|| Block::build(it.by_ref().take(BUFFER << level).collect()));
            self.added.blocks.push(block);
            level += 1;
        }
    }

    /// Live points with seq in `[a, b]` and label below `x`.
    pub fn count_less(&self, a: u64, b: u64, x: u64) -> usize {
        if a > b {
            return 0;
        }
        self.added.count_less(a, b, x) - self.removed.count_less(a, b, x)
    }

    /// Live points with seq in `[a, b]` and label in `[lo, hi]`.
    pub fn count(&self, a: u64, b: u64, lo: u32, hi: u32) -> usize {
        if lo > hi {
            return 0;
        }
        self.count_less(a, b, u64::from(hi) + 1) - self.count_less(a, b, u64::from(lo))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenwick_counts_and_selects() {
        let values = [1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1];
        let built = Fenwick::build(values.iter().copied());
        let mut pushed = Fenwick::default();
        for v in values {
            pushed.push(v);
        }
        for i in 0..=values.len() {
            let want: u32 = values[..i].iter().sum();
            assert_eq!(built.prefix(i), want);
            assert_eq!(pushed.prefix(i), want);
        }
        let ones: Vec<usize> = (0..values.len()).filter(|&i| values[i] == 1).collect();
        for (k, &i) in ones.iter().enumerate() {
            assert_eq!(built.select(k as u32), i);
        }
        assert_eq!(built.select(ones.len() as u32), values.len());
        let mut f = built.clone();
        f.add(2, -1);
        assert_eq!(f.prefix(3), 1);
        assert_eq!(f.select(1), 3);
        assert_eq!(select2(&f, Some(&built), 2), 2);
    }

    #[test]
    fn point_set_matches_a_brute_force_count() {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut set = PointSet::default();
        let mut live: Vec<(u64, u32)> = Vec::new();
        for seq in 0..3000u64 {
            if !live.is_empty() && next(3) == 0 {
                let (s, l) = live.swap_remove(next(live.len() as u64) as usize);
                set.remove(s, l);
                if set.wants_rebuild() {
                    set.rebuild(live.iter().copied());
                }
            } else {
                let label = next(500) as u32;
                set.insert(seq, label);
                live.push((seq, label));
            }
            if seq % 97 == 0 {
                for _ in 0..20 {
                    let (a, b) = (next(3000), next(3000));
                    let (lo, hi) = (next(520) as u32, next(520) as u32);
                    let want = live
                        .iter()
                        .filter(|(s, l)| (a..=b).contains(s) && (lo..=hi).contains(l))
                        .count();
                    assert_eq!(set.count(a, b, lo, hi), want, "{a}..={b} × {lo}..={hi}");
                }
            }
        }
        assert_eq!(set.len(), live.len());
    }
}

//! Order statistics over surface labels, so a replace is checked without walking its range.
//!
//! Every node holds a *label*: an append takes the next one, a replacing node the label of
//! the first node it shadows, so labels follow surface order. [`Counts`] counts live labels
//! (positions, range sizes, the k-th node). [`PointSet`] counts points `(seq, label)` in a
//! rectangle, for the nodes whose seq is not the seq that created their label.

/// Which of the two kinds of live label a count takes in (bit 0: a node whose seq created its
/// label; bit 1: a displaced node).
pub(crate) type Mask = u8;
pub(crate) const REGULAR: Mask = 1;
pub(crate) const DISPLACED: Mask = 2;
pub(crate) const LIVE: Mask = REGULAR | DISPLACED;

/// A Fenwick tree over words of labels, each cell holding one count per kind.
#[derive(Debug, Clone, Default)]
struct Fenwick {
    /// 1-based: `tree[0]` is unused.
    tree: Vec<[u32; 2]>,
}

fn masked(v: [u32; 2], mask: Mask) -> u32 {
    (if mask & REGULAR != 0 { v[0] } else { 0 }) + if mask & DISPLACED != 0 { v[1] } else { 0 }
}

impl Fenwick {
    fn len(&self) -> usize {
        self.tree.len().saturating_sub(1)
    }

    fn build(values: impl Iterator<Item = [u32; 2]>) -> Self {
        let mut tree = vec![[0, 0]];
        tree.extend(values);
        for j in 1..tree.len() {
            let parent = j + (j & j.wrapping_neg());
            if parent < tree.len() {
                let v = tree[j];
                tree[parent][0] += v[0];
                tree[parent][1] += v[1];
            }
        }
        Fenwick { tree }
    }

    fn push(&mut self, v: [u32; 2]) {
        if self.tree.is_empty() {
            self.tree.push([0, 0]);
        }
        let j = self.tree.len();
        let low = j & j.wrapping_neg();
        // The new cell covers (j - low, j]: the element itself and the `low - 1` before it.
        let (a, b) = (self.prefix(j - 1), self.prefix(j - low));
        self.tree.push([v[0] + a[0] - b[0], v[1] + a[1] - b[1]]);
    }

    fn add(&mut self, i: usize, kind: usize, delta: i32) {
        let mut j = i + 1;
        while j < self.tree.len() {
            self.tree[j][kind] = self.tree[j][kind].wrapping_add_signed(delta);
            j += j & j.wrapping_neg();
        }
    }

    /// The sums of cells `[0, i)`.
    fn prefix(&self, i: usize) -> [u32; 2] {
        let mut j = i.min(self.len());
        let mut s = [0, 0];
        while j > 0 {
            s[0] += self.tree[j][0];
            s[1] += self.tree[j][1];
            j &= j - 1;
        }
        s
    }

    /// The last cell index `w` with `prefix(w) <= k` (masked), and that prefix.
    fn descend(&self, mut k: u32, mask: Mask) -> (usize, u32) {
        let n = self.len();
        let (mut pos, mut below) = (0, 0);
        let mut step = if n == 0 { 0 } else { 1 << n.ilog2() };
        while step > 0 {
            let next = pos + step;
            if next <= n {
                let cell = masked(self.tree[next], mask);
                if cell <= k {
                    pos = next;
                    k -= cell;
                    below += cell;
                }
            }
            step >>= 1;
        }
        (pos, below)
    }
}

/// The live labels of the slab, by kind: two bits per label, and a Fenwick tree over the
/// complete 64-label words, so counts, ranks and selection cost O(log n), and an append
/// (which only sets a bit of the last word) costs O(1) amortized.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counts {
    words: Vec<[u64; 2]>,
    /// Over `words[..len / 64]` (the complete words).
    tree: Fenwick,
    len: usize,
}

/// The index of the `k`-th set bit of `w` (from 0), if there is one.
fn select_bit(mut w: u64, k: u32) -> Option<u32> {
    for _ in 0..k {
        w &= w.wrapping_sub(1);
    }
    (w != 0).then(|| w.trailing_zeros())
}

impl Counts {
    /// Counts over labels that are live as `kinds` says (`None`: dead).
    pub fn build(kinds: impl Iterator<Item = Option<Mask>>) -> Self {
        let mut c = Counts::default();
        for k in kinds {
            c.len += 1;
            if c.len % 64 == 1 {
                c.words.push([0, 0]);
            }
            if let Some(k) = k {
                let (w, b) = ((c.len - 1) / 64, (c.len - 1) % 64);
                c.words[w][usize::from(k == DISPLACED)] |= 1 << b;
            }
        }
        let full = c.len / 64;
        c.tree = Fenwick::build(c.words[..full].iter().map(word_counts));
        c
    }

    /// Append a dead label.
    pub fn push(&mut self) {
        if self.len.is_multiple_of(64) {
            self.words.push([0, 0]);
        }
        self.len += 1;
        if self.len.is_multiple_of(64) {
            // The last word is complete: it joins the tree.
            let w = self.len / 64 - 1;
            self.tree.push(word_counts(&self.words[w]));
        }
    }

    /// Make label `l` live as `kind` (`REGULAR` or `DISPLACED`), or dead (`kind` 0).
    pub fn set(&mut self, l: usize, kind: Mask) {
        let (w, b) = (l / 64, l % 64);
        for (ch, m) in [(0, REGULAR), (1, DISPLACED)] {
            let was = self.words[w][ch] >> b & 1 == 1;
            let now = kind == m;
            if was != now {
                self.words[w][ch] ^= 1 << b;
                if w < self.tree.len() {
                    self.tree.add(w, ch, if now { 1 } else { -1 });
                }
            }
        }
    }

    /// Live labels of `mask` in `[0, l)`.
    pub fn prefix(&self, l: usize, mask: Mask) -> u32 {
        let (w, b) = (l / 64, l % 64);
        let mut n = masked(self.tree.prefix(w), mask);
        if b > 0 {
            n += (masked_word(&self.words[w], mask) << (64 - b)).count_ones();
        }
        n
    }

    /// Live labels of `mask` in `[lo, hi)`.
    pub fn between(&self, lo: usize, hi: usize, mask: Mask) -> u32 {
        if hi <= lo {
            return 0;
        }
        self.prefix(hi, mask) - self.prefix(lo, mask)
    }

    /// The `k`-th live label of `mask` (from 0), or `len()` when there are no more.
    pub fn select(&self, k: u32, mask: Mask) -> usize {
        let (w, below) = self.tree.descend(k, mask);
        // `w` is the first word whose count takes the running sum past `k`, or the partial
        // last word.
        match self
            .words
            .get(w)
            .and_then(|word| select_bit(masked_word(word, mask), k - below))
        {
            Some(b) if w * 64 + (b as usize) < self.len => w * 64 + b as usize,
            _ => self.len,
        }
    }
}

fn word_counts(w: &[u64; 2]) -> [u32; 2] {
    [w[0].count_ones(), w[1].count_ones()]
}

fn masked_word(w: &[u64; 2], mask: Mask) -> u64 {
    (if mask & REGULAR != 0 { w[0] } else { 0 }) | if mask & DISPLACED != 0 { w[1] } else { 0 }
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
    use crate::log::test_support::Rng;

    #[test]
    fn counts_rank_and_select_like_a_list() {
        let mut rng = Rng(0x2545_F491_4F6C_DD1Du64);
        let mut next = move |n: u64| rng.below(n as usize) as u64;
        let mut model: Vec<Mask> = Vec::new();
        let mut c = Counts::default();
        for round in 0..3000 {
            if model.is_empty() || next(3) > 0 {
                let kind = [REGULAR, DISPLACED][next(2) as usize];
                c.push();
                c.set(model.len(), kind);
                model.push(kind);
            } else {
                let l = next(model.len() as u64) as usize;
                let kind = [0, REGULAR, DISPLACED][next(3) as usize];
                c.set(l, kind);
                model[l] = kind;
            }
            if round % 200 == 0 {
                c = Counts::build(model.iter().map(|&k| (k != 0).then_some(k)));
            }
            let l = next(model.len() as u64 + 1) as usize;
            for mask in [REGULAR, DISPLACED, LIVE] {
                let want = model[..l].iter().filter(|&&k| k & mask != 0).count() as u32;
                assert_eq!(c.prefix(l, mask), want, "round {round}");
                let nth: Vec<usize> = (0..model.len()).filter(|&i| model[i] & mask != 0).collect();
                let k = next(nth.len() as u64 + 1) as usize;
                assert_eq!(
                    c.select(k as u32, mask),
                    nth.get(k).copied().unwrap_or(model.len()),
                    "round {round}"
                );
            }
        }
    }

    #[test]
    fn point_set_matches_a_brute_force_count() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15u64);
        let mut next = move |n: u64| rng.below(n as usize) as u64;
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

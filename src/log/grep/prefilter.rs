//! Which lines of a log could hold a match, decided on the raw bytes before anything is parsed.
//!
//! A match is found in decoded text, and every piece of text `grep` searches is a JSON string
//! of the line (or a string inside a tool call's JSON arguments, itself such a string). The
//! regex's required literals (one of them is part of every match) say what must be there. In
//! the raw line a character of decoded text is either written as itself or escaped: `"`, `\`,
//! `/` and control characters may be short escapes (`\"`, `\n`, ...), and *any* character may
//! be `\uXXXX` (twice escaped inside tool-call arguments: `\\u00e9`). So each literal is cut at
//! the characters that have a short escape, and its longest remaining run must appear in the
//! raw line as it is, unless the line holds a `\u` escape; such a line is unescaped (once and
//! twice) and the runs are looked for in that. A line that is not UTF-8 (decoded with U+FFFD
//! by the scan) always counts. Nothing is ever missed: a line this says no to holds no text
//! the regex can match.

use std::io::{self, Read};

use regex_automata::MatchKind;
use regex_automata::util::prefilter::Prefilter;
use regex_syntax::hir::Hir;
use regex_syntax::hir::literal::{ExtractKind, Extractor, Seq};

/// Needles of at most this many bytes are not worth a pass over the line before the parse.
const MIN_USEFUL_RUN: usize = 1;

/// The raw-line test for one pattern.
#[derive(Clone, Debug)]
pub struct LinePrefilter {
    finder: Finder,
    /// The needles, for the test on unescaped text.
    needles: Vec<Vec<u8>>,
    /// A needle that is not UTF-8 (cut inside a character) or holds U+FFFD could be in the
    /// lossy decoding of a line that is not UTF-8 while not in its bytes: such lines must
    /// be found. Other needles are in such a decoding only where they are in the bytes
    /// (UTF-8 resynchronises at every lead byte).
    check_utf8: bool,
    /// Lines holding one of these (as they are or unescaped) are candidates whatever their
    /// needles: their text is searched joined across JSON strings (see [`LinePrefilter::keeping`]).
    markers: Option<Finder>,
}

#[derive(Clone, Debug)]
enum Finder {
    Auto(Prefilter),
    Aho(aho_corasick::AhoCorasick),
    /// ASCII case-insensitive needles: the regex engine's own literal prefilter (case
    /// variants of a rare part, verified by its DFA) beats an Aho-Corasick automaton
    /// without one.
    Folded(regex::bytes::Regex),
}

impl Finder {
    /// The fastest search for any of `needles` the regex engine knows (memmem for one,
    /// Teddy for a few), or an Aho-Corasick automaton when it has none.
    fn of<B: AsRef<[u8]>>(needles: &[B]) -> Option<Finder> {
        match Prefilter::new(MatchKind::LeftmostFirst, needles) {
            Some(p) => Some(Finder::Auto(p)),
            None => aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostFirst)
                .build(needles)
                .ok()
                .map(Finder::Aho),
        }
    }

    fn find(&self, hay: &[u8], from: usize) -> Option<usize> {
        match self {
            Finder::Auto(p) => p
                .find(hay, regex_automata::Span::from(from..hay.len()))
                .map(|s| s.start),
            Finder::Aho(ac) => ac
                .find(aho_corasick::Input::new(hay).span(from..hay.len()))
                .map(|m| m.start()),
            Finder::Folded(re) => re.find_at(hay, from).map(|m| m.start()),
        }
    }
}

/// A byte that decoded text may hold while the raw line spells it as an escape even from a
/// writer that escapes as little as JSON allows (`JSON.stringify`): the quote, the backslash,
/// the solidus (`\/` is legal) and the control characters.
fn escapable(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\' || b == b'/'
}

/// The longest run of `lit` without an escapable byte (nor, for `fold`, a byte whose
/// character has case variants outside ASCII: see [`LinePrefilter::ignoring_case`]).
fn longest_run(lit: &[u8], fold: bool) -> &[u8] {
    lit.split(|&b| escapable(b) || (fold && !folds_in_ascii(b)))
        .max_by_key(|r| r.len())
        .unwrap_or_default()
}

/// An ASCII byte whose simple case variants are all ASCII: every byte but the non-ASCII ones
/// and `k` and `s` (K is also KELVIN SIGN, s also LATIN SMALL LETTER LONG S).
fn folds_in_ascii(b: u8) -> bool {
    b.is_ascii() && !matches!(b, b'k' | b'K' | b's' | b'S')
}

/// Literal sets every match of `hir` holds one member of: its prefixes, its suffixes, and,
/// for a concatenation, the prefixes of each part (each match holds a match of each part).
fn literal_sets(hir: &Hir) -> Vec<Seq> {
    let mut sets = Vec::new();
    let mut prefixes = Extractor::new();
    prefixes.kind(ExtractKind::Prefix);
    let mut whole = prefixes.extract(hir);
    whole.optimize_for_prefix_by_preference();
    sets.push(whole);
    let mut suffixes = Extractor::new();
    suffixes.kind(ExtractKind::Suffix);
    let mut tail = suffixes.extract(hir);
    tail.optimize_for_suffix_by_preference();
    sets.push(tail);
    if let regex_syntax::hir::HirKind::Concat(parts) = hir.kind() {
        for part in parts {
            let mut seq = prefixes.extract(part);
            seq.optimize_for_prefix_by_preference();
            sets.push(seq);
        }
    }
    sets
}

/// The needles for `hir`: for the best literal set, each literal's longest run (deduplicated),
/// or None when no finite set with a run in every literal exists (every line must then be
/// searched).
pub fn needles(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    needles_of(hir, false)
}

fn needles_of(hir: &Hir, fold: bool) -> Option<Vec<Vec<u8>>> {
    let mut best: Option<(usize, Vec<Vec<u8>>)> = None;
    for seq in literal_sets(hir) {
        let Some(literals) = seq.literals() else {
            continue;
        };
        if literals.is_empty() {
            // A regex that can never match: any needle would do; the regex says no anyway.
            continue;
        }
        let mut runs: Vec<Vec<u8>> = literals
            .iter()
            .map(|l| {
                let run = longest_run(l.as_bytes(), fold);
                if fold {
                    run.to_ascii_lowercase()
                } else {
                    run.to_vec()
                }
            })
            .collect();
        let shortest = runs.iter().map(Vec::len).min().unwrap_or(0);
        if shortest < MIN_USEFUL_RUN {
            continue;
        }
        runs.sort();
        runs.dedup();
        let better = match &best {
            None => true,
            Some((len, set)) => shortest > *len || (shortest == *len && runs.len() < set.len()),
        };
        if better {
            best = Some((shortest, runs));
        }
    }
    best.map(|(_, runs)| runs)
}

impl LinePrefilter {
    /// The test for a parsed pattern, or None when it has no usable literal.
    pub fn new(hir: &Hir) -> Option<LinePrefilter> {
        let needles = needles(hir)?;
        let finder = Finder::of(&needles)?;
        let check_utf8 = needles
            .iter()
            .any(|n| std::str::from_utf8(n).map_or(true, |s| s.contains('\u{FFFD}')));
        Some(LinePrefilter {
            finder,
            needles,
            check_utf8,
            markers: None,
        })
    }

    /// The test for a pattern matched case-insensitively, from `hir`, the same pattern parsed
    /// *without* case-insensitivity: its literals are looked for ignoring ASCII case. That
    /// stays conservative because the literals are cut at every character with a case variant
    /// outside ASCII (`k`, `s`, anything not ASCII); it is what keeps `-i` selective, where
    /// the literals of the case-insensitive pattern are cut short (each letter doubles their
    /// number).
    pub fn ignoring_case(hir: &Hir) -> Option<LinePrefilter> {
        let needles = needles_of(hir, true)?;
        let alternatives: Vec<String> = needles
            .iter()
            .map(|n| regex::escape(&String::from_utf8_lossy(n)))
            .collect();
        let finder = Finder::Folded(
            regex::bytes::RegexBuilder::new(&alternatives.join("|"))
                .case_insensitive(true)
                .unicode(false)
                .build()
                .ok()?,
        );
        // ASCII only: no U+FFFD, never cut inside a character.
        Some(LinePrefilter {
            finder,
            needles,
            check_utf8: false,
            markers: None,
        })
    }

    /// This test, keeping also every line that holds one of `markers` (as it is, or once its
    /// `\u` escapes are undone). `grep` searches a cut-off stream's deltas joined: a match
    /// there may span two JSON strings, so no needle need be in the line; the type of the
    /// event (or the stream record) marks such a line instead. (The markers' search is the
    /// regex engine's prefilter: an Aho-Corasick automaton over `assistant/attempt` and
    /// `assistant\/attempt` stopped at every `a` of the log, a fifth of `grep -c`'s time
    /// for a pattern in every session.)
    pub fn keeping<S: AsRef<[u8]>>(&self, markers: &[S]) -> LinePrefilter {
        let mut kept = self.clone();
        kept.markers = (!markers.is_empty()).then(|| Finder::of(markers)).flatten();
        kept
    }

    fn marked(&self, line: &[u8]) -> bool {
        self.markers
            .as_ref()
            .is_some_and(|m| m.find(line, 0).is_some())
    }

    /// The length of the shortest needle: more is more selective.
    pub fn shortest(&self) -> usize {
        self.needles.iter().map(Vec::len).min().unwrap_or(0)
    }

    pub fn needles(&self) -> &[Vec<u8>] {
        &self.needles
    }

    /// Could this one line (without its `\n`) hold a match?
    pub fn may_match(&self, line: &[u8]) -> bool {
        self.finder.find(line, 0).is_some()
            || self.marked(line)
            || (memchr::memmem::find(line, b"\\u").is_some() && self.in_unescaped(line))
            || (self.check_utf8 && std::str::from_utf8(line).is_err())
    }

    /// Look for a needle in the line unescaped once and twice (see the module documentation).
    fn in_unescaped(&self, line: &[u8]) -> bool {
        let mut once = Vec::with_capacity(line.len());
        unescape_lenient(line, &mut once);
        if self.finder.find(&once, 0).is_some() || self.marked(&once) {
            return true;
        }
        let mut twice = Vec::with_capacity(once.len());
        unescape_lenient(&once, &mut twice);
        self.finder.find(&twice, 0).is_some()
    }

    /// The start offsets (`base` + position) of the lines of `block` that could hold a match,
    /// appended to `out` in order. `block` holds whole lines; its last may lack the `\n`.
    pub fn scan_block(&self, block: &[u8], base: u64, out: &mut Vec<u64>) {
        let first_new = out.len();
        let escape = memchr::memmem::Finder::new(b"\\u");
        // The next hit of each kind at or after `at` (recomputed only once `at` passes it).
        let mut needle: Option<Option<usize>> = None;
        let mut esc: Option<Option<usize>> = None;
        let mut mark: Option<Option<usize>> = None;
        let mut at = 0;
        while at < block.len() {
            let n = *needle
                .get_or_insert_with(|| self.finder.find(block, at))
                .get_or_insert(usize::MAX);
            let e = *esc
                .get_or_insert_with(|| escape.find(&block[at..]).map(|i| at + i))
                .get_or_insert(usize::MAX);
            let m = *mark
                .get_or_insert_with(|| self.markers.as_ref().and_then(|f| f.find(block, at)))
                .get_or_insert(usize::MAX);
            let hit = n.min(e).min(m);
            if hit == usize::MAX {
                break;
            }
            let start = memchr::memrchr(b'\n', &block[at..hit]).map_or(at, |i| at + i + 1);
            let end = memchr::memchr(b'\n', &block[hit..]).map_or(block.len(), |i| hit + i);
            let line = &block[start..end];
            if n < end || m < end || self.in_unescaped(line) {
                out.push(base + start as u64);
            }
            at = end + 1;
            if n < at {
                needle = None;
            }
            if m < at {
                mark = None;
            }
            if e < at {
                esc = None;
            }
        }
        // Lines that are not UTF-8 are decoded with U+FFFD, which their bytes do not spell.
        if self.check_utf8 && simdutf8::basic::from_utf8(block).is_err() {
            let mut start = 0;
            for end in memchr::memchr_iter(b'\n', block).chain([block.len()]) {
                if start <= end && std::str::from_utf8(&block[start..end]).is_err() {
                    out.push(base + start as u64);
                }
                start = end + 1;
            }
            out[first_new..].sort_unstable();
            let mut kept = first_new;
            for i in first_new..out.len() {
                if kept == first_new || out[kept - 1] != out[i] {
                    out[kept] = out[i];
                    kept += 1;
                }
            }
            out.truncate(kept);
        }
    }
}

/// Unescape JSON string escapes wherever they are in `raw` (a whole line is fine: outside
/// strings valid JSON has no backslash): each string's decoded text comes out whole. Anything
/// that is not a valid escape stays as it is; a lone surrogate becomes U+FFFD.
pub fn unescape_lenient(raw: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while let Some(off) = memchr::memchr(b'\\', &raw[i..]) {
        out.extend_from_slice(&raw[i..i + off]);
        i += off;
        let Some(&kind) = raw.get(i + 1) else {
            break;
        };
        let short = match kind {
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            b'/' => Some(b'/'),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            _ => None,
        };
        if let Some(b) = short {
            out.push(b);
            i += 2;
            continue;
        }
        if kind == b'u'
            && let Some(unit) = hex4(raw, i + 2)
        {
            let mut len = 6;
            let c = if (0xD800..0xDC00).contains(&unit) {
                match (raw.get(i + 6..i + 8), hex4(raw, i + 8)) {
                    (Some(b"\\u"), Some(low)) if (0xDC00..0xE000).contains(&low) => {
                        len = 12;
                        char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
                    }
                    _ => None,
                }
            } else {
                char::from_u32(unit)
            };
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.unwrap_or('\u{FFFD}').encode_utf8(&mut buf).as_bytes());
            i += len;
            continue;
        }
        out.push(b'\\');
        i += 1;
    }
    out.extend_from_slice(&raw[i..]);
}

fn hex4(raw: &[u8], at: usize) -> Option<u32> {
    let digits = raw.get(at..at + 4)?;
    let text = std::str::from_utf8(digits).ok()?;
    if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(text, 16).ok()
}

/// What the raw pass over a log found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Candidates {
    /// No line can hold a match: the log need not be parsed.
    None,
    /// The start offsets of the lines that may (ascending); lines at or after `end` (written
    /// after the raw pass read the file, or not read by a pass that stopped early) count as
    /// candidates too.
    Lines { offsets: Vec<u64>, end: u64 },
    /// Every line may (no usable literal, too many candidates, or the raw pass could not
    /// finish: the scan reads and reports what it can).
    All,
}

impl Candidates {
    /// Whether the line starting at `byte` may hold a match, for offsets asked in ascending
    /// order; `cursor` remembers where the previous answer was found.
    pub fn contains(&self, byte: u64, cursor: &mut usize) -> bool {
        match self {
            Candidates::None => false,
            Candidates::All => true,
            Candidates::Lines { offsets, end } => {
                if byte >= *end {
                    return true;
                }
                while offsets.get(*cursor).is_some_and(|&o| o < byte) {
                    *cursor += 1;
                }
                offsets.get(*cursor) == Some(&byte)
            }
        }
    }
}

/// Bytes read at once by the raw pass (a block that stays in the cache while it is searched).
const BLOCK: usize = 256 * 1024;

/// The raw pass over a log's plaintext: the candidate lines of `filter` (None: every line
/// counts), at most `cap` offsets kept (more: [`Candidates::All`]). `header` is shown the
/// first line; when it says no, the pass stops and returns None (the log is not wanted).
pub fn candidate_lines(
    reader: &mut dyn Read,
    filter: Option<&LinePrefilter>,
    cap: usize,
    header: impl FnMut(&[u8]) -> bool,
) -> io::Result<Option<Candidates>> {
    let none = &mut Kept::none();
    raw_pass(reader, filter, cap, header, none, OnEnough::Stop, |_| false)
}

/// The candidate lines' bytes, kept by [`raw_pass`] up to a budget, for [`crate::log::grep::confirm`].
#[derive(Debug, Default)]
pub struct Kept {
    /// (offset, the line without its `\n`), in file order.
    pub lines: Vec<(u64, Vec<u8>)>,
    budget: usize,
    /// The budget ran out: `lines` is not all of them.
    pub overflowed: bool,
    /// A kept line was found enough ([`OnEnough::StopKeeping`]): no more lines are kept.
    pub settled: bool,
}

/// What [`raw_pass`] does once `enough` says yes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnEnough {
    /// Stop reading: one match is all that is asked (`-l`, `-q`).
    Stop,
    /// Read on for the candidate lines, keeping none any more: each copy would only be
    /// confirmed again for an answer already known.
    StopKeeping,
}

impl Kept {
    /// Keep up to `budget` bytes of candidate lines.
    pub fn with_budget(budget: usize) -> Kept {
        Kept {
            budget,
            ..Kept::default()
        }
    }

    fn none() -> Kept {
        Kept {
            overflowed: true,
            ..Kept::default()
        }
    }

    fn keep(&mut self, base: u64, block: &[u8], offsets: &[u64]) {
        for &o in offsets {
            if self.overflowed || self.settled {
                return;
            }
            let start = (o - base) as usize;
            let end = memchr::memchr(b'\n', &block[start..]).map_or(block.len(), |i| start + i);
            if end - start > self.budget {
                self.overflowed = true;
                self.lines.clear();
                return;
            }
            self.budget -= end - start;
            self.lines.push((o, block[start..end].to_vec()));
        }
    }
}

/// [`candidate_lines`], also keeping the candidate lines in `kept` (while its budget lasts).
/// `enough` is shown the lines kept from each block, each line once while the budget lasts.
/// When it says yes, [`OnEnough::Stop`] stops the pass after that block, and the lines after
/// it count as candidates (`-l` needs one match only); [`OnEnough::StopKeeping`] reads on,
/// keeping no more lines.
pub fn raw_pass(
    reader: &mut dyn Read,
    filter: Option<&LinePrefilter>,
    cap: usize,
    mut header: impl FnMut(&[u8]) -> bool,
    kept: &mut Kept,
    on_enough: OnEnough,
    mut enough: impl FnMut(&[(u64, Vec<u8>)]) -> bool,
) -> io::Result<Option<Candidates>> {
    let mut buf: Vec<u8> = vec![0; BLOCK];
    let mut filled = 0;
    let mut base = 0u64;
    let mut offsets = Vec::new();
    let mut header_seen = false;
    loop {
        if filled == buf.len() {
            // A line longer than the buffer: grow it (bounded by the longest line).
            buf.resize(buf.len() * 2, 0);
        }
        let n = match reader.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        filled += n;
        let at_end = n == 0;
        // Whole lines only, unless the input ended.
        let usable = if at_end {
            filled
        } else {
            match memchr::memrchr(b'\n', &buf[..filled]) {
                Some(i) => i + 1,
                None => continue,
            }
        };
        let mut from = 0;
        if !header_seen && usable > 0 {
            header_seen = true;
            let end = memchr::memchr(b'\n', &buf[..usable]).unwrap_or(usable);
            if !header(&buf[..end]) {
                return Ok(None);
            }
            from = (end + 1).min(usable);
        }
        match filter {
            None => {
                if header_seen {
                    kept.overflowed = true;
                    return Ok(Some(Candidates::All));
                }
            }
            Some(f) => {
                let first = offsets.len();
                f.scan_block(&buf[from..usable], base + from as u64, &mut offsets);
                if offsets.len() > cap {
                    return Ok(Some(Candidates::All));
                }
                let held = kept.lines.len();
                kept.keep(base, &buf[..usable], &offsets[first..]);
                if !kept.overflowed
                    && !kept.settled
                    && kept.lines.len() > held
                    && enough(&kept.lines[held..])
                {
                    if on_enough == OnEnough::Stop {
                        return Ok(Some(Candidates::Lines {
                            offsets,
                            end: base + usable as u64,
                        }));
                    }
                    kept.settled = true;
                    kept.lines = Vec::new();
                }
            }
        }
        if at_end {
            break;
        }
        buf.copy_within(usable..filled, 0);
        filled -= usable;
        base += usable as u64;
    }
    let end = base + filled as u64;
    if !header_seen {
        // An empty file: the scan says what is wrong with it.
        kept.overflowed = true;
        return Ok(Some(Candidates::All));
    }
    Ok(Some(if offsets.is_empty() {
        Candidates::None
    } else {
        Candidates::Lines { offsets, end }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(pattern: &str) -> Option<LinePrefilter> {
        let hir = regex_syntax::parse(pattern).expect("pattern");
        LinePrefilter::new(&hir)
    }

    /// A header, a candidate (`needle`) in the first block, then more than a block of lines
    /// with another candidate far on (at the offset returned).
    fn two_needles() -> (Vec<u8>, u64) {
        let mut log = b"{\"type\":\"session\"}\nneedle one\n".to_vec();
        let filler = "x".repeat(99) + "\n";
        while log.len() < 3 * BLOCK {
            log.extend_from_slice(filler.as_bytes());
        }
        let far = log.len() as u64;
        log.extend_from_slice(b"needle two\n");
        (log, far)
    }

    #[test]
    fn the_raw_pass_stops_after_the_block_where_enough_is_found() {
        let f = filter("needle").unwrap();
        let (log, far) = two_needles();
        type Enough<'e> = &'e mut dyn FnMut(&[(u64, Vec<u8>)]) -> bool;
        let pass = |kept: &mut Kept, enough: Enough<'_>| {
            raw_pass(
                &mut &log[..],
                Some(&f),
                100,
                |_| true,
                kept,
                OnEnough::Stop,
                enough,
            )
        };
        let all = pass(&mut Kept::with_budget(1 << 20), &mut |_| false);
        let Ok(Some(Candidates::Lines { offsets, end })) = all else {
            panic!("{all:?}")
        };
        assert_eq!((offsets, end), (vec![19, far], log.len() as u64));
        let mut shown = Vec::new();
        let mut kept = Kept::with_budget(1 << 20);
        let early = pass(&mut kept, &mut |lines| {
            shown.extend(lines.iter().map(|(o, _)| *o));
            true
        });
        let Ok(Some(c @ Candidates::Lines { .. })) = early else {
            panic!("{early:?}")
        };
        assert_eq!(shown, [19]);
        assert_eq!(kept.lines, [(19, b"needle one".to_vec())]);
        // Every line past the block read counts as a candidate: the far one among them.
        let Candidates::Lines { offsets, end } = &c else {
            unreachable!()
        };
        assert_eq!(offsets, &[19]);
        assert!(*end <= BLOCK as u64 + 1, "{end}");
        let mut cursor = 0;
        assert!(c.contains(19, &mut cursor) && c.contains(far, &mut cursor));
        assert!(
            !Candidates::Lines {
                offsets: vec![19],
                end: far + 1
            }
            .contains(far, &mut 0)
        );
    }

    /// A match known, the pass reads on for every candidate but copies no more lines.
    #[test]
    fn the_raw_pass_keeps_no_more_lines_once_enough_is_found() {
        let f = filter("needle").unwrap();
        let (log, far) = two_needles();
        // The pass with `enough` always answering `answer`: its result, the lines shown, kept.
        let pass = |answer: bool| {
            let (mut shown, mut kept) = (Vec::new(), Kept::with_budget(1 << 20));
            let on = OnEnough::StopKeeping;
            let got = raw_pass(
                &mut &log[..],
                Some(&f),
                100,
                |_| true,
                &mut kept,
                on,
                |lines| {
                    shown.extend(lines.iter().map(|(o, _)| *o));
                    answer
                },
            );
            (got, shown, kept)
        };
        let (got, shown, kept) = pass(true);
        let Ok(Some(Candidates::Lines { offsets, end })) = got else {
            panic!("{got:?}")
        };
        assert_eq!((offsets, end), (vec![19, far], log.len() as u64));
        assert_eq!(shown, [19]);
        assert!(kept.settled && !kept.overflowed && kept.lines.is_empty());
        // Told no, it keeps and shows every candidate line.
        let (got, shown, kept) = pass(false);
        assert!(matches!(got, Ok(Some(Candidates::Lines { .. }))), "{got:?}");
        assert_eq!(shown, [19, far]);
        assert!(!kept.settled && kept.lines.len() == 2);
    }

    #[test]
    fn literals_are_cut_at_characters_json_may_escape() {
        let f = filter(r#"echo "hi there""#).unwrap();
        assert_eq!(f.needles(), [b"hi there".to_vec()]);
        let f = filter(r"src/fold\.rs").unwrap();
        assert_eq!(f.needles(), [b"fold.rs".to_vec()]);
        // Nothing left that must appear as it is.
        assert!(filter(r#"""#).is_none());
        assert!(filter(r"\w+").is_none());
    }

    #[test]
    fn an_inner_literal_is_used_when_prefixes_and_suffixes_are_unbounded() {
        let f = filter(r"\w+_needle_\w+").unwrap();
        assert_eq!(f.needles(), [b"_needle_".to_vec()]);
    }

    #[test]
    fn case_insensitive_literals_cover_every_case() {
        let f = filter("(?i)abc").unwrap();
        assert!(f.may_match(br#"{"text":"xAbCx"}"#));
        assert!(!f.may_match(br#"{"text":"xAbx"}"#));
    }

    #[test]
    fn ignoring_case_keeps_whole_ascii_literals_and_cuts_at_wider_case_variants() {
        let cs = regex_syntax::parse("compaction error fixed").unwrap();
        let f = LinePrefilter::ignoring_case(&cs).unwrap();
        assert_eq!(f.needles(), [b"compaction error fixed".to_vec()]);
        assert!(f.may_match(br#"{"t":"x COMPACTION Error fixed"}"#));
        assert!(f.may_match(br#"{"t":"x \u0043OMPACTION Error fixed"}"#));
        assert!(!f.may_match(br#"{"t":"x COMPACTION Error fixe"}"#));
        // `k` may match KELVIN SIGN and `s` LONG S, `é` É: the literal is cut there.
        let cs = regex_syntax::parse("risky thing").unwrap();
        let f = LinePrefilter::ignoring_case(&cs).unwrap();
        assert_eq!(f.needles(), [b"y thing".to_vec()]);
        let cs = regex_syntax::parse("cafébar").unwrap();
        assert_eq!(
            LinePrefilter::ignoring_case(&cs).unwrap().needles(),
            [b"bar".to_vec()]
        );
    }

    #[test]
    fn escaped_spellings_are_never_missed() {
        let f = filter("café").unwrap();
        assert!(f.may_match(br#"{"t":"caf\u00e9"}"#));
        // Twice escaped, inside tool-call arguments.
        assert!(f.may_match(br#"{"arguments":"{\"q\": \"caf\\u00e9\"}"}"#));
        assert!(f.may_match(br#"{"t":"\u0063af\u00E9"}"#));
        assert!(!f.may_match(br#"{"t":"cafe \u00e8"}"#));
        // A surrogate pair.
        let f = filter("😀").unwrap();
        assert!(f.may_match(br#"{"t":"\ud83d\ude00"}"#));
        // Not UTF-8: decoded with U+FFFD by the scan, which only a needle holding U+FFFD
        // (or cut inside a character) can be found in.
        assert!(!f.may_match(b"{\"t\":\"\xff\"}"));
        let f = filter("a\u{FFFD}b").unwrap();
        assert!(f.may_match(b"{\"t\":\"a\xffb\"}"));
        assert!(!f.may_match(b"{\"t\":\"ab\"}"));
    }

    #[test]
    fn unescaping_is_lenient() {
        let mut out = Vec::new();
        unescape_lenient(br#"a\n\"b\\u0041\u00e9\x\ud800z\"#, &mut out);
        assert_eq!(out, "a\n\"b\\u0041é\\x\u{FFFD}z\\".as_bytes());
    }

    #[test]
    fn the_raw_pass_lists_candidate_lines_across_blocks() {
        let f = filter("needle").unwrap();
        let mut log = b"{\"type\":\"session\",\"version\":3}\n".to_vec();
        let mut want = Vec::new();
        for i in 0..50_000 {
            if i % 997 == 0 {
                want.push(log.len() as u64);
                log.extend_from_slice(b"{\"t\":\"a needle here\"}\n");
            } else if i % 1009 == 0 {
                want.push(log.len() as u64);
                log.extend_from_slice(b"{\"t\":\"ne\\u0065dle\"}\n");
            } else {
                log.extend_from_slice(b"{\"t\":\"hay \\u00e9 hay\"}\n");
            }
        }
        let got = candidate_lines(&mut &log[..], Some(&f), usize::MAX, |_| true).unwrap();
        assert_eq!(
            got,
            Some(Candidates::Lines {
                offsets: want.clone(),
                end: log.len() as u64
            })
        );
        let capped = candidate_lines(&mut &log[..], Some(&f), 3, |_| true).unwrap();
        assert_eq!(capped, Some(Candidates::All));
        let none = candidate_lines(&mut &log[..], Some(&filter("absent").unwrap()), 9, |_| true);
        assert_eq!(none.unwrap(), Some(Candidates::None));
        let refused = candidate_lines(&mut &log[..], Some(&f), 9, |h| h.ends_with(b"4}"));
        assert_eq!(refused.unwrap(), None);
        let mut cursor = 0;
        let c = Candidates::Lines {
            offsets: want.clone(),
            end: log.len() as u64,
        };
        assert!(c.contains(want[0], &mut cursor));
        assert!(!c.contains(want[0] + 1, &mut cursor));
        assert!(c.contains(want[1], &mut cursor));
        assert!(c.contains(log.len() as u64, &mut cursor), "written later");
    }

    #[test]
    fn the_header_is_never_a_candidate() {
        let f = filter("session").unwrap();
        let log = b"{\"type\":\"session\"}\n{\"a\":1}\n";
        let got = candidate_lines(&mut &log[..], Some(&f), 9, |_| true).unwrap();
        assert_eq!(got, Some(Candidates::None));
    }
}

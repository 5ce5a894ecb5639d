//! The fast path for the lines that hold a call, a model or a turn: an `assistant/message`,
//! `assistant/attempt`, v0/v1 `assistant/chunk`, `request/header`, `turn/start` or
//! `turn/end` line is walked, not parsed. Only the members a call needs are located (`seq`,
//! `time`, `data.turn`, `data.step`, `data.usage`, `data.message.source.{provider,model}`,
//! the last usage record of `data.stream`, `data.chunk.{type,usage}`,
//! `data.header.config.{provider,model}`); every other value (the message's text, the
//! stream's chunks: most of the bytes of a log) is skipped 64 bytes at a time by masks of
//! its quotes, backslashes and brackets (AVX2 and carry-less multiplication where the CPU
//! has them, SSE2 otherwise), without building anything; a stream record is walked only if
//! a string in it starts with `u` or holds a `\u` escape, as a usage chunk's type must. A
//! usage object of plain integers is read here too ([`buckets`]); any other is parsed by the
//! real parser.
//!
//! Anything unusual (an escape in a key or in a model name, a number that is not a plain
//! integer, a structure that does not close) gives up, and the caller parses the line whole.
//! On a line of valid JSON the walk decides exactly as the parse (repeated keys keep the
//! last, as `JSON.parse` does; tested on every real log and on generated ones); the skipped
//! values' grammar is not checked, so a line damaged inside one (its brackets and quotes
//! still balanced) counts where the parse would call it unreadable.

use std::sync::LazyLock;

use memchr::memmem;

use super::LEAD;
use super::json::MAX_SAFE;
use crate::log::event::Kind;
use crate::log::json::{escaped, prefix_xor};

/// What a call needs of its line, as byte ranges of the line.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Found<'a> {
    pub ty: Option<&'a [u8]>,
    pub seq: Option<u64>,
    pub time: Option<i64>,
    pub turn: Option<u64>,
    pub step: Option<u64>,
    /// `data.usage`, the raw value.
    pub usage: Option<&'a [u8]>,
    pub provider: Option<&'a [u8]>,
    pub model: Option<&'a [u8]>,
    /// The `usage` of the last `{"type":"chunk","chunk":{"type":"usage",…}}` of `data.stream`,
    /// raw; `Some(None)`: that record has no `usage`.
    pub stream_usage: Option<Option<&'a [u8]>>,
    /// `data.header.config.{provider,model}` (a `request/header`).
    pub header_provider: Option<&'a [u8]>,
    pub header_model: Option<&'a [u8]>,
    /// `data.chunk.type` and `data.chunk.usage` (a v0/v1 `assistant/chunk`).
    pub chunk_type: Option<&'a [u8]>,
    pub chunk_usage: Option<&'a [u8]>,
    /// A `data.stream` was crossed unread: it followed the message's own `usage`, which a
    /// message counts before its stream's (U2).
    pub stream_unread: bool,
}

/// Gave up: parse the line instead.
#[derive(Debug)]
struct Unusual;

/// How [`Cur::skip_container_noting`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skipped {
    /// Past the container.
    Past,
    /// At a string that may spell `usage`: not moved.
    Noted,
}

type Walk<T> = Result<T, Unusual>;

struct Cur<'a> {
    b: &'a [u8],
    i: usize,
}

/// How deep the skipped values may nest before the walk gives up (the parser's own limit
/// then speaks).
const MAX_DEPTH: usize = 100;

impl<'a> Cur<'a> {
    #[inline(always)]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    #[inline(always)]
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    #[inline(always)]
    fn eat(&mut self, c: u8) -> Walk<()> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(Unusual)
        }
    }

    /// Past a string whose opening quote is at `i`; its body.
    fn string(&mut self) -> Walk<&'a [u8]> {
        self.string_escapes(false).map(|(s, _)| s)
    }

    /// Past a string whose opening quote is at `i`; its body, and (if `escapes` is asked)
    /// whether it holds a backslash.
    #[inline(always)]
    fn string_escapes(&mut self, escapes: bool) -> Walk<(&'a [u8], bool)> {
        self.eat(b'"')?;
        let start = self.i;
        let b = self.b;
        // Most strings walked are keys and names, a few bytes long: their first 16 bytes are
        // looked at as masks (no `memchr` call, no branch per byte); a longer string, or
        // one with a backslash there, takes the search below, out of line.
        if let Some(chunk) = b.get(start..start + 16).and_then(|c| c.try_into().ok()) {
            let m = masks16(chunk);
            if m.quote != 0 {
                let k = m.quote.trailing_zeros();
                if m.backslash & ((1u16 << k) - 1) == 0 {
                    let k = k as usize;
                    self.i = start + k + 1;
                    return Ok((&b[start..start + k], false));
                }
            } else if m.backslash == 0 {
                self.i = start + 16;
            }
        }
        self.string_rest(start, escapes)
    }

    /// The rest of a string from `i` whose body starts at `start`, quote to quote: a quote
    /// after an odd run of backslashes is escaped (so the many `\n` of a text cost nothing).
    #[inline(never)]
    fn string_rest(&mut self, start: usize, escapes: bool) -> Walk<(&'a [u8], bool)> {
        let b = self.b;
        loop {
            let Some(k) = memchr::memchr(b'"', &b[self.i..]) else {
                return Err(Unusual);
            };
            let end = self.i + k;
            self.i = end + 1;
            // Most quotes follow no backslash: no run to count.
            if end == start || b[end - 1] != b'\\' {
                break;
            }
            let backslashes = b[start..end]
                .iter()
                .rev()
                .take_while(|&&c| c == b'\\')
                .count();
            if backslashes % 2 == 0 {
                break;
            }
        }
        let body = &b[start..self.i - 1];
        Ok((body, escapes && memchr::memchr(b'\\', body).is_some()))
    }

    /// A string without escapes (a key, a name).
    fn plain_string(&mut self) -> Walk<&'a [u8]> {
        match self.string_escapes(true)? {
            (s, false) => Ok(s),
            (_, true) => Err(Unusual),
        }
    }

    /// A plain integer (`-`? digits, no fraction, no exponent) of at most 2^53 − 1.
    #[inline]
    fn int(&mut self) -> Walk<i64> {
        self.ws();
        let b = self.b;
        let mut i = self.i;
        let negative = b.get(i) == Some(&b'-');
        i += usize::from(negative);
        let digits = i;
        // Summed as read, at most 16 digits: the sum cannot overflow, no string is made.
        let mut magnitude = 0u64;
        while let Some(&c) = b.get(i) {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            if i - digits == 16 {
                return Err(Unusual);
            }
            magnitude = magnitude * 10 + u64::from(d);
            i += 1;
        }
        let n = i - digits;
        if n == 0 || (n > 1 && b[digits] == b'0') {
            return Err(Unusual);
        }
        if matches!(b.get(i), Some(b'.' | b'e' | b'E')) {
            return Err(Unusual);
        }
        if magnitude > MAX_SAFE || (negative && magnitude == 0) {
            return Err(Unusual);
        }
        self.i = i;
        let v = magnitude as i64;
        Ok(if negative { -v } else { v })
    }

    fn uint(&mut self) -> Walk<Option<u64>> {
        // Another type of value is not a number here: the parse would say the same.
        match self.peek() {
            Some(b'-' | b'0'..=b'9') => Ok(u64::try_from(self.int()?).ok()),
            _ => self.skip().map(|_| None),
        }
    }

    /// Past any value; its bytes.
    fn skip(&mut self) -> Walk<&'a [u8]> {
        let start = {
            self.ws();
            self.i
        };
        match self.b.get(self.i) {
            Some(b'"') => {
                self.string()?;
            }
            Some(b'{' | b'[') => self.skip_container()?,
            Some(_) => {
                // A number or a literal: up to the next delimiter.
                while let Some(&c) = self.b.get(self.i) {
                    if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    self.i += 1;
                }
                if self.i == start {
                    return Err(Unusual);
                }
            }
            None => return Err(Unusual),
        }
        Ok(&self.b[start..self.i])
    }

    /// Past an object or array (at `i`), 64 bytes at a time: a window's quotes, backslashes
    /// and brackets are found as bit masks, the strings' extent by a prefix XOR of the
    /// unescaped quotes (simdjson's way), so only the brackets outside strings are visited,
    /// not every string (a stream's `texts` hold a string every few bytes).
    fn skip_container(&mut self) -> Walk<()> {
        self.skip_container_noting::<false>().map(|_| ())
    }

    /// [`Cur::skip_container`]; with `NOTE`, it stops (leaving `i` as it was) at the first
    /// `u` after a quote or a backslash: a string that starts with `u`, or a `\u` escape, one
    /// of which a usage chunk's type must hold.
    fn skip_container_noting<const NOTE: bool>(&mut self) -> Walk<Skipped> {
        #[cfg(target_arch = "x86_64")]
        if let Some(avx2) = Avx2::new() {
            return avx2.skip::<NOTE>(self);
        }
        Sse2.skip::<NOTE>(self)
    }

    #[inline(always)]
    fn skip_container_with<L: Lanes, const NOTE: bool>(&mut self, lanes: L) -> Walk<Skipped> {
        let b = self.b;
        let mut j = self.i;
        // Carried from window to window: the next window's first byte is escaped; the
        // window starts inside a string (all ones).
        let mut carry_escape = 0u64;
        let mut in_string = 0u64;
        // The last window ended with an unescaped quote.
        let mut carry_quote = 0u64;
        // Bit `d`: the container at depth `d` is an object (so `}` closes it).
        let mut objects: u128 = 0;
        let mut depth = 0usize;
        while j < b.len() {
            let mut padded = [b' '; 64];
            let window = window_at(b, j, &mut padded);
            let m = lanes.masks(window);
            let escaped = escaped(m.backslash, &mut carry_escape);
            let quotes = m.quote & !escaped;
            // A `u` that follows a quote or is escaped (`\u`): see `skip_container_noting`.
            let noted = if NOTE {
                m.u & (escaped | quotes << 1 | carry_quote)
            } else {
                0
            };
            carry_quote = quotes >> 63;
            let strings = lanes.prefix_xor(quotes) ^ in_string;
            in_string = 0u64.wrapping_sub(strings >> 63);
            // A backslash outside a string is not JSON: the parse decides.
            let stray = m.backslash & !strings;
            let limit = if stray == 0 {
                64
            } else {
                stray.trailing_zeros()
            };
            let mut brackets = (m.open | m.close) & !strings;
            while brackets != 0 {
                let p = brackets.trailing_zeros();
                if p >= limit {
                    return Err(Unusual);
                }
                brackets &= brackets - 1;
                let c = window[p as usize];
                if c == b'{' || c == b'[' {
                    if depth >= MAX_DEPTH {
                        return Err(Unusual);
                    }
                    if c == b'{' {
                        objects |= 1 << depth;
                    } else {
                        objects &= !(1 << depth);
                    }
                    depth += 1;
                    continue;
                }
                let Some(d) = depth.checked_sub(1) else {
                    return Err(Unusual);
                };
                depth = d;
                let closer = if objects >> d & 1 == 1 { b'}' } else { b']' };
                if c != closer {
                    return Err(Unusual);
                }
                if depth == 0 {
                    if noted & ((1u64 << p) - 1) != 0 {
                        return Ok(Skipped::Noted);
                    }
                    self.i = j + p as usize + 1;
                    return Ok(Skipped::Past);
                }
            }
            if stray != 0 {
                return Err(Unusual);
            }
            if noted != 0 {
                return Ok(Skipped::Noted);
            }
            j += 64;
        }
        Err(Unusual)
    }

    /// The members of an object: `member(key, cur)` reads or skips each value.
    fn object(&mut self, member: impl FnMut(&[u8], &mut Cur<'a>) -> Walk<()>) -> Walk<()> {
        self.eat(b'{')?;
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        self.members(member)
    }

    /// The members of an object from a key on, to its `}`.
    fn members(&mut self, mut member: impl FnMut(&[u8], &mut Cur<'a>) -> Walk<()>) -> Walk<()> {
        loop {
            let key = self.plain_string()?;
            self.eat(b':')?;
            member(key, self)?;
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(Unusual),
            }
        }
    }

    /// An object's members if the value is one; anything else is skipped.
    fn maybe_object(&mut self, member: impl FnMut(&[u8], &mut Cur<'a>) -> Walk<()>) -> Walk<bool> {
        if self.peek() == Some(b'{') {
            self.object(member).map(|_| true)
        } else {
            self.skip().map(|_| false)
        }
    }

    /// A string without escapes, else `None` (another type); an escaped one gives up.
    fn name(&mut self) -> Walk<Option<&'a [u8]>> {
        if self.peek() == Some(b'"') {
            self.plain_string().map(Some)
        } else {
            self.skip().map(|_| None)
        }
    }
}

/// Where the body of a string ends (the index of its closing quote) if no backslash comes
/// first, else `None`. A line's type is found this way: its first 32 bytes as two masks, not
/// a `memchr` call or a branch per byte.
pub(super) fn string_end(body: &[u8]) -> Option<usize> {
    if let (Some(a), Some(b)) = (
        body.get(..16).and_then(|c| c.try_into().ok()),
        body.get(16..32).and_then(|c| c.try_into().ok()),
    ) {
        let (a, b) = (masks16(a), masks16(b));
        let quote = u32::from(a.quote) | u32::from(b.quote) << 16;
        let backslash = u32::from(a.backslash) | u32::from(b.backslash) << 16;
        if quote | backslash != 0 {
            let end = (quote | backslash).trailing_zeros();
            return (quote >> end & 1 == 1).then_some(end as usize);
        }
    }
    let end = memchr::memchr2(b'"', b'\\', body)?;
    (body[end] == b'"').then_some(end)
}

/// The 64 bytes of `b` from `j` (`j` < its length), padded with spaces past its end.
#[inline]
fn window_at<'w>(b: &'w [u8], j: usize, padded: &'w mut [u8; 64]) -> &'w [u8; 64] {
    match b.get(j..j + 64).and_then(|w| w.try_into().ok()) {
        Some(w) => w,
        None => {
            let rest = b.get(j..).unwrap_or(&[]);
            padded[..rest.len()].copy_from_slice(rest);
            padded
        }
    }
}

/// Calls `each` with the index of every `\n` of `b`, in order. Most lines of a log are
/// short: a 64-byte window's newlines are found as one mask, with no call per line; a
/// window without one is inside a long line, whose end `memchr` finds faster.
pub(super) fn each_newline(b: &[u8], mut each: impl FnMut(usize)) {
    let mut j = 0;
    while let Some(window) = b.get(j..j + 64).and_then(|w| <&[u8; 64]>::try_from(w).ok()) {
        let mut m = newlines64(window);
        if m == 0 {
            let Some(k) = memchr::memchr(b'\n', &b[j + 64..]) else {
                return;
            };
            let at = j + 64 + k;
            each(at);
            j = at + 1;
            continue;
        }
        while m != 0 {
            each(j + m.trailing_zeros() as usize);
            m &= m - 1;
        }
        j += 64;
    }
    for k in memchr::memchr_iter(b'\n', &b[j..]) {
        each(j + k);
    }
}

/// The newlines of a 64-byte window (bit `i`: byte `i`).
#[inline]
fn newlines64(window: &[u8; 64]) -> u64 {
    let mut m = 0u64;
    for (k, chunk) in window.chunks_exact(16).enumerate() {
        let Ok(chunk) = chunk.try_into() else { break };
        m |= u64::from(masks16(chunk).newline) << (16 * k);
    }
    m
}

/// A 64-byte window's quotes, backslashes, `{`/`[`, `}`/`]` and `u`s (bit `i`: byte `i`).
#[derive(Default)]
struct Masks {
    quote: u64,
    backslash: u64,
    open: u64,
    close: u64,
    u: u64,
}

#[inline]
fn masks(window: &[u8; 64]) -> Masks {
    let mut m = Masks::default();
    for (k, chunk) in window.chunks_exact(16).enumerate() {
        let Ok(chunk) = chunk.try_into() else { break };
        let s = masks16(chunk);
        let shift = 16 * k;
        m.quote |= u64::from(s.quote) << shift;
        m.backslash |= u64::from(s.backslash) << shift;
        m.open |= u64::from(s.open) << shift;
        m.close |= u64::from(s.close) << shift;
        m.u |= u64::from(s.u) << shift;
    }
    m
}

/// [`Masks`] of 16 bytes, and their newlines.
struct Masks16 {
    quote: u16,
    backslash: u16,
    open: u16,
    close: u16,
    u: u16,
    newline: u16,
}

#[inline]
fn masks16(chunk: &[u8; 16]) -> Masks16 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
            _mm_set1_epi8,
        };
        // SAFETY: SSE2 is always available on x86_64; the load reads the 16 bytes of
        // `chunk` (a fixed-size array), unaligned loads are allowed.
        unsafe {
            let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
            // `{` and `[` differ only in bit 0x20, as do `}` and `]`.
            let folded = _mm_or_si128(v, _mm_set1_epi8(0x20));
            let bits =
                |x, c: u8| _mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8(c as i8))) as u16;
            Masks16 {
                quote: bits(v, b'"'),
                backslash: bits(v, b'\\'),
                open: bits(folded, b'{'),
                close: bits(folded, b'}'),
                u: bits(v, b'u'),
                newline: bits(v, b'\n'),
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // At most 16 bytes: the masks fit in the low 16 bits.
        let m = masks_bytewise(chunk);
        Masks16 {
            quote: m.quote as u16,
            backslash: m.backslash as u16,
            open: m.open as u16,
            close: m.close as u16,
            u: m.u as u16,
            newline: chunk
                .iter()
                .enumerate()
                .fold(0, |n, (i, &c)| n | u16::from(c == b'\n') << i),
        }
    }
}

/// [`Masks`] of up to 64 bytes, a byte at a time: the portable path, and the tests' reference
/// for the SSE2 one.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn masks_bytewise(window: &[u8]) -> Masks {
    let mut m = Masks::default();
    for (i, &x) in window.iter().enumerate() {
        m.quote |= u64::from(x == b'"') << i;
        m.backslash |= u64::from(x == b'\\') << i;
        m.open |= u64::from(x == b'{' || x == b'[') << i;
        m.close |= u64::from(x == b'}' || x == b']') << i;
        m.u |= u64::from(x == b'u') << i;
    }
    m
}

/// How a window's masks and a prefix XOR are computed: [`Sse2`] on any x86_64 (and
/// portably elsewhere), [`Avx2`] where the CPU has AVX2 and carry-less multiplication. A
/// value of a lanes type exists only where its instructions run, so its methods are safe.
trait Lanes: Copy {
    fn masks(self, window: &[u8; 64]) -> Masks;
    fn prefix_xor(self, x: u64) -> u64;
    /// [`Cur::skip_container_noting`] in these lanes.
    fn skip<const NOTE: bool>(self, c: &mut Cur<'_>) -> Walk<Skipped>;
}

#[derive(Clone, Copy)]
struct Sse2;

impl Lanes for Sse2 {
    #[inline(always)]
    fn masks(self, window: &[u8; 64]) -> Masks {
        masks(window)
    }
    #[inline(always)]
    fn prefix_xor(self, x: u64) -> u64 {
        prefix_xor(x)
    }
    fn skip<const NOTE: bool>(self, c: &mut Cur<'_>) -> Walk<Skipped> {
        c.skip_container_with::<Sse2, NOTE>(self)
    }
}

/// Proof that the CPU has AVX2 and PCLMULQDQ: made only by [`Avx2::new`], which checks.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Avx2 {
    _checked: (),
}

#[cfg(target_arch = "x86_64")]
impl Avx2 {
    fn new() -> Option<Avx2> {
        (std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("pclmulqdq"))
        .then_some(Avx2 { _checked: () })
    }

    /// The skip compiled for these lanes' features, so that their masks are inlined.
    #[target_feature(enable = "avx2,pclmulqdq")]
    fn skip_compiled<const NOTE: bool>(self, c: &mut Cur<'_>) -> Walk<Skipped> {
        c.skip_container_with::<Avx2, NOTE>(self)
    }
}

#[cfg(target_arch = "x86_64")]
impl Lanes for Avx2 {
    #[inline(always)]
    fn masks(self, window: &[u8; 64]) -> Masks {
        use std::arch::x86_64::{
            __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256,
            _mm256_set1_epi8,
        };
        // SAFETY: `self` exists only where the CPU has AVX2 (`Avx2::new`); the loads read
        // the two halves of `window` (64 bytes), unaligned loads are allowed.
        unsafe {
            let lo = _mm256_loadu_si256(window.as_ptr().cast::<__m256i>());
            let hi = _mm256_loadu_si256(window.as_ptr().add(32).cast::<__m256i>());
            let eq = |lo, hi, c: u8| {
                let c = _mm256_set1_epi8(c as i8);
                let l = _mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, c)) as u32;
                let h = _mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, c)) as u32;
                u64::from(l) | u64::from(h) << 32
            };
            // `{` and `[` differ only in bit 0x20, as do `}` and `]`.
            let fold = _mm256_set1_epi8(0x20);
            let (flo, fhi) = (_mm256_or_si256(lo, fold), _mm256_or_si256(hi, fold));
            Masks {
                quote: eq(lo, hi, b'"'),
                backslash: eq(lo, hi, b'\\'),
                open: eq(flo, fhi, b'{'),
                close: eq(flo, fhi, b'}'),
                u: eq(lo, hi, b'u'),
            }
        }
    }

    #[inline(always)]
    fn prefix_xor(self, x: u64) -> u64 {
        use std::arch::x86_64::{_mm_clmulepi64_si128, _mm_cvtsi128_si64, _mm_set_epi64x};
        // SAFETY: `self` exists only where the CPU has PCLMULQDQ; a carry-less product with
        // all ones is the prefix XOR (simdjson's way).
        unsafe {
            let p = _mm_clmulepi64_si128(_mm_set_epi64x(0, x as i64), _mm_set_epi64x(0, -1), 0);
            _mm_cvtsi128_si64(p) as u64
        }
    }

    fn skip<const NOTE: bool>(self, c: &mut Cur<'_>) -> Walk<Skipped> {
        // SAFETY: `self` exists only where the CPU has AVX2 and PCLMULQDQ.
        unsafe { self.skip_compiled::<NOTE>(c) }
    }
}

/// Walk an event line for what a call needs; `None`: parse it instead.
pub(super) fn walk(line: &[u8]) -> Option<Found<'_>> {
    let mut c = Cur { b: line, i: 0 };
    let mut f = Found::default();
    let top = match envelope(line) {
        Some(e) => {
            (f.ty, f.seq, f.time) = (Some(e.ty), e.seq, Some(e.time));
            c.i = e.next;
            c.members(|key, c| top_member(key, c, &mut f))
        }
        None => c.object(|key, c| top_member(key, c, &mut f)),
    };
    if top.is_err() || c.peek().is_some() {
        return None;
    }
    // A later `type` made it another event (an attempt counts its stream): parse it.
    if f.stream_unread && f.ty != Some(MESSAGE) {
        return None;
    }
    Some(f)
}

/// The start DSH writes on every line, `{"type":"T","seq":N,"time":N,`, read in place.
pub(super) struct Envelope<'a> {
    pub ty: &'a [u8],
    /// As [`top_member`] reads it: `None` if negative.
    pub seq: Option<u64>,
    pub time: i64,
    /// Where the next key starts.
    pub next: usize,
}

/// A line's [`Envelope`]; `None`: the line starts otherwise, walk it member by member.
pub(super) fn envelope(line: &[u8]) -> Option<Envelope<'_>> {
    let body = line.strip_prefix(LEAD)?;
    let end = string_end(body)?;
    let mut c = Cur {
        b: line,
        i: LEAD.len() + end + 1,
    };
    let expect = |c: &mut Cur<'_>, lit: &[u8]| {
        let found = line.get(c.i..)?.starts_with(lit);
        c.i += lit.len();
        found.then_some(())
    };
    expect(&mut c, b",\"seq\":")?;
    let digits = |c: &Cur<'_>| matches!(line.get(c.i), Some(b'-' | b'0'..=b'9'));
    let seq = if digits(&c) {
        c.uint().ok()?
    } else {
        return None;
    };
    expect(&mut c, b",\"time\":")?;
    let time = if digits(&c) {
        c.int().ok()?
    } else {
        return None;
    };
    expect(&mut c, b",")?;
    Some(Envelope {
        ty: &body[..end],
        seq,
        time,
        next: c.i,
    })
}

/// A member of the event: `type`, `seq`, `time` and `data` are read, the rest skipped.
fn top_member<'a>(key: &[u8], c: &mut Cur<'a>, f: &mut Found<'a>) -> Walk<()> {
    match key {
        b"type" => f.ty = c.name()?,
        b"seq" => f.seq = c.uint()?,
        b"time" => {
            f.time = match c.peek() {
                Some(b'-' | b'0'..=b'9') => Some(c.int()?),
                _ => {
                    c.skip()?;
                    None
                }
            }
        }
        b"data" => {
            // A repeated `data` replaces the first whole.
            *f = Found {
                ty: f.ty,
                seq: f.seq,
                time: f.time,
                ..Found::default()
            };
            c.maybe_object(|key, c| data_member(key, c, f))?;
        }
        _ => {
            c.skip()?;
        }
    }
    Ok(())
}

/// `provider` and `model` of the object under `inner` (`message.source`, `header.config`);
/// a repeated key starts them over, as the last copy of a member is the one that counts.
fn names_under<'a>(
    c: &mut Cur<'a>,
    inner: &[u8],
    provider: &mut Option<&'a [u8]>,
    model: &mut Option<&'a [u8]>,
) -> Walk<()> {
    *provider = None;
    *model = None;
    c.maybe_object(|key, c| {
        if key == inner {
            *provider = None;
            *model = None;
            c.maybe_object(|key, c| {
                match key {
                    b"provider" => *provider = c.name()?,
                    b"model" => *model = c.name()?,
                    _ => {
                        c.skip()?;
                    }
                }
                Ok(())
            })?;
        } else {
            c.skip()?;
        }
        Ok(())
    })?;
    Ok(())
}

/// The type whose stream its own usage makes unread.
const MESSAGE: &[u8] = Kind::AssistantMessage.name().as_bytes();

fn data_member<'a>(key: &[u8], c: &mut Cur<'a>, d: &mut Found<'a>) -> Walk<()> {
    match key {
        b"turn" => d.turn = c.uint()?,
        b"step" => d.step = c.uint()?,
        b"usage" => d.usage = Some(c.skip()?),
        b"message" => names_under(c, b"source", &mut d.provider, &mut d.model)?,
        b"header" => names_under(c, b"config", &mut d.header_provider, &mut d.header_model)?,
        b"chunk" => {
            d.chunk_type = None;
            d.chunk_usage = None;
            c.maybe_object(|key, c| {
                match key {
                    b"type" => d.chunk_type = c.name()?,
                    b"usage" => d.chunk_usage = Some(c.skip()?),
                    _ => {
                        c.skip()?;
                    }
                }
                Ok(())
            })?;
        }
        b"stream" => {
            d.stream_usage = None;
            if d.usage.is_some() && d.ty == Some(MESSAGE) {
                d.stream_unread = true;
                c.skip()?;
                return Ok(());
            }
            if c.peek() != Some(b'[') {
                c.skip()?;
                return Ok(());
            }
            c.i += 1;
            if c.peek() == Some(b']') {
                c.i += 1;
                return Ok(());
            }
            loop {
                // A record that spells no string starting with `u` (nor a `\u`) is no usage
                // chunk: crossed by the masks; any other is walked.
                let walk =
                    c.peek() != Some(b'{') || c.skip_container_noting::<true>()? == Skipped::Noted;
                if walk && let Some(u) = record_usage(c)? {
                    d.stream_usage = Some(u);
                }
                match c.peek() {
                    Some(b',') => c.i += 1,
                    Some(b']') => {
                        c.i += 1;
                        break;
                    }
                    _ => return Err(Unusual),
                }
            }
        }
        _ => {
            c.skip()?;
        }
    }
    Ok(())
}

/// The byte strings looked for before a chunk line is walked.
#[derive(Debug, Clone, Copy)]
pub(super) enum Needle {
    /// `"usage"`
    Usage,
    /// `"finish"`
    Finish,
}

/// Whether `b` holds `needle`.
pub(super) fn holds(b: &[u8], needle: Needle) -> bool {
    // Built once: a searcher per line cost more than the search of a short line.
    static FINDERS: LazyLock<[memmem::Finder<'static>; 2]> =
        LazyLock::new(|| [&b"\"usage\""[..], b"\"finish\""].map(memmem::Finder::new));
    FINDERS[needle as usize].find(b).is_some()
}

/// One stream record: `Some(usage)` when it is a usage chunk.
fn record_usage<'a>(c: &mut Cur<'a>) -> Walk<Option<Option<&'a [u8]>>> {
    let mut ty = None;
    let mut chunk_ty = None;
    let mut usage = None;
    c.maybe_object(|key, c| {
        match key {
            b"type" => ty = c.name()?,
            b"chunk" => {
                chunk_ty = None;
                usage = None;
                c.maybe_object(|key, c| {
                    match key {
                        b"type" => chunk_ty = c.name()?,
                        b"usage" => usage = Some(c.skip()?),
                        _ => {
                            c.skip()?;
                        }
                    }
                    Ok(())
                })?;
            }
            _ => {
                c.skip()?;
            }
        }
        Ok(())
    })?;
    Ok((ty == Some(b"chunk") && chunk_ty == Some(b"usage")).then_some(usage))
}

/// A usage object's member as read: absent, a safe non-negative integer, or another value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Bucket {
    #[default]
    Absent,
    Count(u64),
    NotCount,
}

/// The members of a `TokenUsage` that U1 reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Buckets {
    pub input: Bucket,
    pub output: Bucket,
    pub cache_read: Bucket,
    pub cache_write: Bucket,
    pub reasoning: Bucket,
    pub total: Bucket,
}

/// A usage object spelled the plain way (an object of plain integers under escape-free
/// keys), without building a tree; `None`: anything else, parse it (so every grammar error
/// inside a usage object is still the parser's to find).
pub(super) fn buckets(raw: &[u8]) -> Option<Buckets> {
    let mut c = Cur { b: raw, i: 0 };
    let mut u = Buckets::default();
    c.object(|key, c| {
        // A control character in a key is not JSON.
        if key.iter().any(|&k| k < 0x20) {
            return Err(Unusual);
        }
        let n = match c.peek() {
            Some(b'-' | b'0'..=b'9') => c.int()?,
            _ => return Err(Unusual),
        };
        let bucket = u64::try_from(n).map_or(Bucket::NotCount, Bucket::Count);
        match key {
            b"inputTokens" => u.input = bucket,
            b"outputTokens" => u.output = bucket,
            b"cacheReadTokens" => u.cache_read = bucket,
            b"cacheWriteTokens" => u.cache_write = bucket,
            b"reasoningTokens" => u.reasoning = bucket,
            b"totalTokens" => u.total = bucket,
            _ => {}
        }
        Ok(())
    })
    .ok()?;
    (c.peek().is_none()).then_some(u)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::test_support::{Rng, random_window, rounds};

    /// Runs `$body` once per [`Lanes`] this CPU has, with `$l` the lanes.
    macro_rules! for_each_lanes {
        (|$l:ident| $body:block) => {{
            {
                let $l = Sse2;
                $body
            }
            #[cfg(target_arch = "x86_64")]
            if let Some($l) = Avx2::new() {
                $body
            }
        }};
    }

    #[test]
    fn finds_what_a_call_needs_and_skips_the_rest() {
        let line = br#"{"type":"assistant/message","seq":12,"time":-5,"data":{"turn":1,"step":2,"message":{"id":"m","content":[{"type":"text","text":"a \"usage\":{} \\ b"}],"source":{"kind":"model","provider":"p","model":"m1"}},"usage":{"inputTokens":3,"outputTokens":4},"stream":[{"type":"text-chunks","time0":1,"index":0,"dt":[],"texts":["x"]},{"type":"chunk","time":2,"chunk":{"type":"usage","usage":{"inputTokens":1,"outputTokens":1}}},{"type":"chunk","time":2,"chunk":{"type":"finish","reason":{"kind":"stop"}}}]},"surfaceOp":"append"}"#;
        let f = walk(line).unwrap();
        assert_eq!(f.ty, Some(&b"assistant/message"[..]));
        assert_eq!(
            (f.seq, f.time, f.turn, f.step),
            (Some(12), Some(-5), Some(1), Some(2))
        );
        assert_eq!(f.usage, Some(&br#"{"inputTokens":3,"outputTokens":4}"#[..]));
        assert_eq!((f.provider, f.model), (Some(&b"p"[..]), Some(&b"m1"[..])));
        // The message's own usage came first: its stream, which could not count, is unread.
        assert_eq!((f.stream_usage, f.stream_unread), (None, true));
        // A stream before the usage is read.
        let own = r#","usage":{"inputTokens":3,"outputTokens":4}"#;
        let text = std::str::from_utf8(line).unwrap().replacen(own, "", 1);
        let text = text.replacen(r#"]},"surfaceOp""#, &format!(r#"]{own}}},"surfaceOp""#), 1);
        let f = walk(text.as_bytes()).unwrap();
        assert_eq!(f.usage, Some(&br#"{"inputTokens":3,"outputTokens":4}"#[..]));
        assert_eq!(
            (f.stream_usage, f.stream_unread),
            (
                Some(Some(&br#"{"inputTokens":1,"outputTokens":1}"#[..])),
                false
            )
        );
    }

    /// A stream left unread for a message's own usage is read after all when a later `type`
    /// key makes the line an attempt (which counts its stream): the parser reads that line.
    #[test]
    fn a_stream_left_unread_is_read_if_the_line_turns_out_an_attempt() {
        let line = r#"{"type":"assistant/message","seq":1,"time":1,"data":{"usage":{"inputTokens":1,"outputTokens":1},"stream":[{"type":"chunk","chunk":{"type":"usage","usage":{"inputTokens":2,"outputTokens":2}}}]}}"#;
        assert!(walk(line.as_bytes()).is_some_and(|f| f.stream_unread));
        let retyped = line.replacen(r#"}}]}}"#, r#"}}]},"type":"assistant/attempt"}"#, 1);
        assert!(retyped.ends_with(r#""assistant/attempt"}"#));
        assert_eq!(walk(retyped.as_bytes()), None);
    }

    /// A stream is crossed whole unless it may hold a usage chunk: one whose type is spelled
    /// with an escape is still looked at (and left to the parser), one with none is not.
    #[test]
    fn a_stream_without_a_usage_chunk_is_crossed_whole() {
        let line = |chunk: &str| {
            format!(
                r#"{{"type":"assistant/message","seq":1,"time":1,"data":{{"stream":[{{"type":"chunk","chunk":{chunk}}}]}}}}"#
            )
        };
        let walked = |chunk: &str| {
            let text = line(chunk);
            walk(text.as_bytes()).map(|f| f.stream_usage.map(|u| u.map(<[u8]>::to_vec)))
        };
        let usage = r#"{"type":"usage","usage":{"inputTokens":1}}"#;
        assert_eq!(
            walked(usage),
            Some(Some(Some(br#"{"inputTokens":1}"#.to_vec())))
        );
        // A usage chunk with no usage: a record the count must see, spelled plainly or not.
        assert_eq!(walked(r#"{"type":"usage"}"#), Some(Some(None)));
        assert_eq!(walked(r#"{"type":"\u0075sage"}"#), None);
        assert_eq!(walked(r#"{"type":"finish"}"#), Some(None));
    }

    /// The envelope read where DSH writes it gives what the member walk gives, and any
    /// other start is walked member by member.
    #[test]
    fn the_envelope_read_in_place_is_the_member_walk() {
        fn generic(line: &[u8]) -> Option<Found<'_>> {
            let mut c = Cur { b: line, i: 0 };
            let mut f = Found::default();
            let top = c.object(|key, c| top_member(key, c, &mut f));
            (top.is_ok() && c.peek().is_none()).then_some(f)
        }
        let rest = r#""data":{"turn":2},"surfaceOp":"append"}"#;
        let mut in_place = 0;
        for head in [
            r#"{"type":"turn/start","seq":3,"time":4,"#,
            r#"{"type":"turn/start","seq":-3,"time":-4,"#,
            r#"{"type":"turn/start","seq":3.5,"time":4,"#,
            r#"{"type":"turn/start","seq":9007199254740992,"time":4,"#,
            r#"{"type":"turn/start","seq":"3","time":4,"#,
            r#"{"type":"turn/start","seq":3,"time":null,"#,
            r#"{"type":"turn/start","seq":3,"time":4 ,"#,
            r#"{"type":"turn/start", "seq":3,"time":4,"#,
            r#"{"type":"turn\/start","seq":3,"time":4,"#,
            r#"{"type":"turn/start","seq":3,"time":4,"seq":5,"type":"x","#,
            r#"{"type":"turn/start","time":4,"seq":3,"#,
            r#"{ "type":"turn/start","seq":3,"time":4,"#,
        ] {
            let line = format!("{head}{rest}");
            let line = line.as_bytes();
            assert_eq!(walk(line), generic(line), "{head}");
            in_place += usize::from(envelope(line).is_some());
        }
        // And a line that ends after its time.
        let line = br#"{"type":"turn/start","seq":3,"time":4}"#;
        assert_eq!(walk(line), generic(line));
        assert_eq!(in_place, 3);
    }

    #[test]
    fn unusual_lines_are_left_to_the_parser() {
        for line in [
            &br#"{"type":"assistant/message","seq":1.0,"time":1,"data":{}}"#[..],
            br#"{"type":"assistant/message","seq":1,"time":1,"data":{"message":{"source":{"model":"m\u0031"}}}}"#,
            br#"{"type":"assistant/message","seq":1,"time":1,"data":{"turn":1"#,
            br#"{"type":"assistant/message","seq":1,"time":1,"data":{}} x"#,
            br#"{"ty\u0070e":"assistant/message","seq":1,"time":1,"data":{}}"#,
            br#"{"type":"assistant/message","seq":1,"time":1,"data":{"usage":{"a":[}}}"#,
        ] {
            assert_eq!(walk(line), None, "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn integers_are_read_up_to_the_safe_limit() {
        let f = |seq: &str| {
            let line = format!(r#"{{"type":"x","seq":0,"time":{seq}}}"#);
            walk(line.as_bytes()).map(|f| f.time)
        };
        assert_eq!(f("9007199254740991"), Some(Some(9_007_199_254_740_991)));
        assert_eq!(f("-9007199254740991"), Some(Some(-9_007_199_254_740_991)));
        assert_eq!(f("0"), Some(Some(0)));
        assert_eq!(f("-12"), Some(Some(-12)));
        for unusual in [
            "9007199254740992",
            "-0",
            "01",
            "-",
            "12345678901234567",
            "1.5",
        ] {
            assert_eq!(f(unusual), None, "{unusual}");
        }
    }

    #[test]
    fn repeated_keys_keep_the_last() {
        let line = br#"{"type":"x","seq":1,"seq":2,"time":1,"data":{"usage":{"a":1},"usage":{"b":2},"turn":3}}"#;
        let f = walk(line).unwrap();
        assert_eq!(f.seq, Some(2));
        assert_eq!(f.usage, Some(&br#"{"b":2}"#[..]));
        assert_eq!(f.turn, Some(3));
        // A repeated `data` replaces the first whole; the envelope stays.
        let line =
            br#"{"type":"x","seq":1,"time":1,"data":{"turn":3,"usage":{"a":1}},"data":{"step":4}}"#;
        let f = walk(line).unwrap();
        assert_eq!(
            (f.seq, f.time, f.turn, f.step),
            (Some(1), Some(1), None, Some(4))
        );
        assert_eq!((f.ty, f.usage), (Some(&b"x"[..]), None));
    }

    /// The container skip a byte at a time (the walk before the masks, a backslash outside
    /// a string refused): where it ends, or `None`.
    fn skip_bytewise(b: &[u8]) -> Option<usize> {
        let mut stack: Vec<u8> = Vec::new();
        let mut i = 0;
        let mut in_string = false;
        while let Some(&c) = b.get(i) {
            if in_string {
                match c {
                    b'\\' => i += 1,
                    b'"' => in_string = false,
                    _ => {}
                }
            } else {
                match c {
                    b'"' => in_string = true,
                    b'\\' => return None,
                    b'{' | b'[' => {
                        if stack.len() >= MAX_DEPTH {
                            return None;
                        }
                        stack.push(if c == b'{' { b'}' } else { b']' });
                    }
                    b'}' | b']' => {
                        if stack.pop() != Some(c) {
                            return None;
                        }
                        if stack.is_empty() {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
            }
            i += 1;
        }
        None
    }

    /// The masked skip ends every container where the byte-at-a-time one does (or both give
    /// up), on random text of brackets, quotes and backslash runs across window edges, in
    /// every lane this CPU has; noting, it stops instead where a `u` follows a quote or a
    /// backslash (a string that may be `usage`) inside the container.
    #[test]
    fn the_masked_skip_ends_where_the_bytewise_one_does() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let mut next = |n| rng.below(n);
        let alphabet = b"{}[]\"\\\\ a,:u";
        let (mut ended, mut noted) = (0, 0);
        for round in 0..rounds(20_000) {
            let len = 1 + next(300);
            let mut text = vec![if next(2) == 0 { b'{' } else { b'[' }];
            // Mostly balanced text, so that many containers do end.
            let mut opened = vec![text[0]];
            let mut in_string = false;
            while text.len() < len {
                let c = alphabet[next(alphabet.len())];
                match c {
                    b'{' | b'[' if !in_string => opened.push(c),
                    b'}' | b']' if !in_string && next(4) != 0 => {
                        let Some(o) = opened.pop() else { break };
                        text.push(if o == b'{' { b'}' } else { b']' });
                        if opened.is_empty() {
                            break;
                        }
                        continue;
                    }
                    b'"' => in_string = !in_string,
                    b'\\' if !in_string && next(8) != 0 => continue,
                    _ => {}
                }
                text.push(c);
                if c == b'\\' && in_string {
                    text.push(alphabet[next(alphabet.len())]);
                }
                // Now and then a string that starts with `u`.
                if c == b'"' && in_string && next(2) == 0 {
                    text.push(b'u');
                }
            }
            let want = skip_bytewise(&text);
            let note = want.map(|end| noted_bytewise(&text[..end]));
            for_each_lanes!(|lanes| {
                let mut c = Cur { b: &text, i: 0 };
                let fast = lanes.skip::<false>(&mut c);
                assert_eq!(
                    fast.ok().map(|_| c.i),
                    want,
                    "round {round}: {}",
                    String::from_utf8_lossy(&text)
                );
                let mut c = Cur { b: &text, i: 0 };
                match (lanes.skip::<true>(&mut c), note) {
                    (Ok(Skipped::Past), Some(false)) => assert_eq!(Some(c.i), want),
                    (Ok(Skipped::Noted), Some(true)) => assert_eq!(c.i, 0),
                    // Text that is no container may be noted before it fails.
                    (Ok(Skipped::Noted) | Err(Unusual), None) => {}
                    (got, want) => panic!(
                        "round {round}: {got:?}, want noted {want:?}: {}",
                        String::from_utf8_lossy(&text)
                    ),
                }
            });
            ended += usize::from(want.is_some());
            noted += usize::from(note == Some(true));
        }
        assert!(ended > rounds(20_000) / 10, "{ended}");
        assert!(
            noted > ended / 10 && noted < ended * 9 / 10,
            "{noted} of {ended}"
        );
    }

    /// A quote or backslash that ends a window notes the `u` that starts the next one.
    #[test]
    fn a_u_across_a_window_edge_is_noted() {
        let quote = format!("[{}\"usage\"]", " ".repeat(62));
        let escape = format!("[\"{}\\u0075\"]", "a".repeat(61));
        let neither = format!("[{}\"xusage\"]", " ".repeat(62));
        for (text, noted) in [(quote, true), (escape, true), (neither, false)] {
            assert_eq!(noted_bytewise(text.as_bytes()), noted, "{text}");
            for_each_lanes!(|lanes| {
                let mut c = Cur {
                    b: text.as_bytes(),
                    i: 0,
                };
                let got = lanes.skip::<true>(&mut c).ok();
                let want = if noted { Skipped::Noted } else { Skipped::Past };
                assert_eq!(got, Some(want), "{text}");
            });
        }
    }

    /// Whether a `u` of `b` follows a quote or is escaped, a byte at a time (quotes and
    /// escapes read as the masks read them, whether inside a string or not).
    fn noted_bytewise(b: &[u8]) -> bool {
        let mut escaped = false;
        let mut after_quote = false;
        for &c in b {
            if c == b'u' && (escaped || after_quote) {
                return true;
            }
            after_quote = c == b'"' && !escaped;
            escaped = c == b'\\' && !escaped;
        }
        false
    }

    #[test]
    fn the_masks_are_the_bytes() {
        // Built with AVX2 and PCLMULQDQ (as CI's second Miri run is), those lanes run too.
        #[cfg(target_arch = "x86_64")]
        assert!(
            Avx2::new().is_some()
                || !cfg!(all(target_feature = "avx2", target_feature = "pclmulqdq"))
        );
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..rounds(2_000) {
            let w = random_window(&mut rng, b"{}[]\"\\u");
            let r = masks_bytewise(&w);
            for_each_lanes!(|lanes| {
                let m = lanes.masks(&w);
                assert_eq!(
                    (m.quote, m.backslash, m.open, m.close, m.u),
                    (r.quote, r.backslash, r.open, r.close, r.u)
                );
            });
        }
    }

    /// The prefix XOR by carry-less multiplication is the one by shifts.
    #[test]
    fn the_prefix_xors_agree() {
        let mut rng = Rng(0xdead_beef);
        let mut next = |n| rng.below(n);
        for _ in 0..rounds(2_000) {
            let x = (next(1 << 32) as u64) << 32 | next(1 << 32) as u64;
            let want = (0..64).fold(0u64, |m, i| {
                m | u64::from((x & (u64::MAX >> (63 - i))).count_ones() % 2 == 1) << i
            });
            for_each_lanes!(|lanes| {
                assert_eq!(lanes.prefix_xor(x), want, "{x:#x}");
            });
        }
    }

    /// Every newline is found, in order, whatever the lines' lengths (short ones found by
    /// masks, long ones by `memchr`, a tail shorter than a window).
    #[test]
    fn each_newline_is_every_newline() {
        let mut rng = Rng(0x51ed_270b);
        let mut next = |n| rng.below(n);
        for _ in 0..rounds(3_000) {
            let len = next(700);
            // Short lines, long ones, or none.
            let every = [3, 40, 200, 1_000][next(4)];
            let b: Vec<u8> = (0..len)
                .map(|_| if next(every) == 0 { b'\n' } else { b'a' })
                .collect();
            let mut got = Vec::new();
            each_newline(&b, |i| got.push(i));
            let want: Vec<usize> = memchr::memchr_iter(b'\n', &b).collect();
            assert_eq!(got, want, "{}", String::from_utf8_lossy(&b));
        }
    }

    /// The escaped bytes are those after an odd run of backslashes, across windows.
    #[test]
    fn escapes_carry_across_windows() {
        let mut rng = Rng(7);
        let mut next = |n| rng.below(n);
        for _ in 0..rounds(2_000) {
            let bits: Vec<bool> = (0..256).map(|_| next(3) == 0).collect();
            let mut want = Vec::new();
            let mut after_escape = false;
            for &bs in &bits {
                want.push(after_escape);
                after_escape = bs && !after_escape;
            }
            let mut carry = 0;
            for (k, chunk) in bits.chunks(64).enumerate() {
                let backslash = chunk
                    .iter()
                    .enumerate()
                    .fold(0u64, |m, (i, &b)| m | u64::from(b) << i);
                let got = escaped(backslash, &mut carry);
                for i in 0..64 {
                    assert_eq!(got >> i & 1 == 1, want[k * 64 + i], "{k} {i}");
                }
            }
        }
    }

    /// A string ends at its first quote after no odd run of backslashes, whether that is in
    /// the first 64 bytes (masks) or later (quote to quote), and says if it holds one.
    #[test]
    fn the_string_scan_ends_where_the_bytewise_one_does() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let mut next = |n| rng.below(n);
        for round in 0..rounds(20_000) {
            let mut text = vec![b'"'];
            for _ in 0..next(160) {
                text.extend_from_slice([&b"a"[..], b"\\", b"\"", "é".as_bytes()][next(4)]);
            }
            let want = {
                let (mut i, mut end) = (1, None);
                while let Some(&c) = text.get(i) {
                    match c {
                        b'\\' => i += 1,
                        b'"' => {
                            end = Some(i);
                            break;
                        }
                        _ => {}
                    }
                    i += 1;
                }
                end.map(|e| (e, text[1..e].contains(&b'\\')))
            };
            let mut c = Cur { b: &text, i: 0 };
            let got = c
                .string_escapes(true)
                .ok()
                .map(|(s, escapes)| (s.len() + 1, escapes));
            assert_eq!(
                got,
                want,
                "round {round}: {}",
                String::from_utf8_lossy(&text)
            );
            if let Some((end, _)) = want {
                assert_eq!(c.i, end + 1);
            }
        }
    }

    #[test]
    fn a_type_ends_at_its_first_quote_unless_a_backslash_comes_first() {
        let mut rng = Rng(99);
        let mut next = |n| rng.below(n);
        for _ in 0..rounds(20_000) {
            let body: Vec<u8> = (0..next(80))
                .map(|_| match next(12) {
                    0 => b'"',
                    1 => b'\\',
                    _ => b'a',
                })
                .collect();
            let want = body
                .iter()
                .position(|&c| c == b'"' || c == b'\\')
                .filter(|&e| body[e] == b'"');
            assert_eq!(
                string_end(&body),
                want,
                "{}",
                String::from_utf8_lossy(&body)
            );
        }
    }
}

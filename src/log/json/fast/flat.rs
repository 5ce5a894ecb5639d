//! Arrays a tree leaves out, passed over 64 bytes at a time when they are flat.
//!
//! The records of an embedded stream (formats 2–4) hold long arrays of tiny items: the
//! `dt` of each chunk (small integers) and the `texts` or `args` pieces (short strings). A
//! lean tree drops them, but the parser still checked them an item at a time, nearly a
//! third of a format-3 pass. Here a run of such items is checked with masks of whole
//! windows (simdjson's way): which bytes are digits, commas, quotes, escaped, inside a
//! string. Only the two shapes that fill those arrays are taken, written as `JSON.stringify`
//! writes them (no whitespace): every item a plain non-negative integer of at most 16
//! digits, or every item a string whose escapes are all short ones (`\n`, `\"`, …, not
//! `\u`); [`Flat`] narrows that for the store's check of the `JSON.stringify` form. Anything
//! else, valid or not, gets `None`, and the caller reads the array item by item as before:
//! so what is accepted, and where the array ends, is never decided differently.

use super::{SIMPLE_ESCAPES, escaped, masks64, prefix_xor};

/// Which flat arrays are taken.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Flat {
    /// Those the parser reads the same item by item: integers of up to 16 digits, strings
    /// with any short escape.
    Json,
    /// Those `JSON.stringify` writes back byte for byte (the store's check of each stored
    /// text, `sqlite::js`): integers of up to 15 digits (exact in a double, printed as
    /// written), strings whose short escapes are `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`
    /// (`\/` is written back as `/`).
    Stringify,
}

impl Flat {
    fn max_digits(self) -> u32 {
        match self {
            Flat::Json => 16,
            Flat::Stringify => 15,
        }
    }

    /// The bytes that may follow a backslash, as [`SIMPLE_ESCAPES`] lists them.
    fn escapes(self) -> [u64; 4] {
        match self {
            Flat::Json => SIMPLE_ESCAPES,
            Flat::Stringify => {
                let mut set = SIMPLE_ESCAPES;
                set[0] &= !(1 << b'/');
                set
            }
        }
    }
}

/// At the first item of an array (past its `[` and any whitespace): when the array is flat
/// (see the module documentation) and valid, the index just past its closing `]`.
#[inline]
pub(crate) fn array_end(s: &[u8], i: usize, flat: Flat) -> Option<usize> {
    array_items(s, i, flat).map(|a| a.end)
}

/// A flat array [`array_items`] took.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct FlatArray {
    /// The first item.
    pub start: usize,
    /// Just past the closing `]`.
    pub end: usize,
    /// How many items it holds.
    pub items: usize,
    /// Whether they are strings (else integers).
    pub strings: bool,
}

/// [`array_end`], with how many items the array holds and of which kind (a packed row kept
/// packed needs only that of its members, `sqlite::js::run_fast`).
#[inline]
pub(crate) fn array_items(s: &[u8], i: usize, flat: Flat) -> Option<FlatArray> {
    let (end, items, strings) = match s.get(i)? {
        b'"' => strings_end(s, i, flat.escapes()).map(|(end, n)| (end, n, true))?,
        b'0'..=b'9' => integers_end(s, i, flat).map(|(end, n)| (end, n, false))?,
        _ => return None,
    };
    Some(FlatArray {
        start: i,
        end,
        items,
        strings,
    })
}

impl FlatArray {
    /// The values of an array of integers, in order: each item is a run of at most 16 digits
    /// (see [`integers_end`]), so a `u64` holds it.
    pub(crate) fn integers<'s>(&self, s: &'s [u8]) -> impl Iterator<Item = u64> + 's {
        debug_assert!(!self.strings);
        s[self.start..self.end - 1]
            .split(|&b| b == b',')
            .map(|digits| {
                digits
                    .iter()
                    .fold(0u64, |v, d| v * 10 + u64::from(d - b'0'))
            })
    }
}

/// The 64 bytes from `j`, padded with spaces past the end of `s`: a space ends no string
/// and is not the `]` that ends an array, so a window that runs past the end never ends one.
#[inline(always)]
fn window<'w>(s: &'w [u8], j: usize, pad: &'w mut [u8; 64]) -> Option<&'w [u8; 64]> {
    match s.get(j..j + 64) {
        Some(w) => w.try_into().ok(),
        None => {
            let rest = s.get(j..)?;
            *pad = [b' '; 64];
            pad.get_mut(..rest.len())?.copy_from_slice(rest);
            Some(pad)
        }
    }
}

/// Below bit `stop` (all bits when `stop` is 64).
#[inline(always)]
fn below(stop: u32) -> u64 {
    1u64.checked_shl(stop).map_or(u64::MAX, |b| b - 1)
}

/// Bit `stop` (none when `stop` is 64).
#[inline(always)]
fn at(stop: u32) -> u64 {
    1u64.checked_shl(stop).unwrap_or(0)
}

/// Items that are plain integers: `0` or a digit run not starting with `0`, of at most
/// [`Flat::max_digits`] digits (longer ones are read, and audited, item by item), a comma
/// between two, `]` after the last: the end and how many items.
fn integers_end(s: &[u8], i: usize, flat: Flat) -> Option<(usize, usize)> {
    let max_digits = flat.max_digits();
    let mut pad = [0u8; 64];
    let mut j = i;
    // What the byte before the window was: a digit (and how many end there), a comma, a `0`
    // that starts an item.
    let (mut digit, mut run, mut comma, mut zero_start) = (0u64, 0u32, 0u64, 0u64);
    let mut items = 0;
    while j < s.len() {
        let w = window(s, j, &mut pad)?;
        let m = class_masks(w);
        let stop = (!(m.digit | m.comma)).trailing_zeros();
        let d = m.digit & below(stop);
        let c = m.comma & below(stop);
        // A comma is followed by a digit (one just before the stop faces a byte that is not).
        if ((c << 1) | comma) & !d != 0 {
            return None;
        }
        // An item that starts with `0` is `0`.
        let starts = d & !((d << 1) | digit);
        items += starts.count_ones() as usize;
        let zeros = starts & m.zero;
        if ((zeros << 1) | zero_start) & d != 0 {
            return None;
        }
        // No run longer than `max_digits`: the one continuing from the last window, then any
        // inside (bit `p` of `r`: 16 digits from `p`).
        if digit != 0 && run + (!d).trailing_zeros() > max_digits {
            return None;
        }
        let mut r = d & (d >> 1);
        r &= r >> 2;
        r &= r >> 4;
        r &= r >> 8;
        let too_long = match flat {
            Flat::Json => r & (d >> 16),
            Flat::Stringify => r,
        };
        if too_long != 0 {
            return None;
        }
        if stop < 64 {
            // The last item ends right before the `]`.
            let digit_before = ((d << 1) | digit) & at(stop) != 0;
            return (w[stop as usize] == b']' && digit_before)
                .then_some((j + stop as usize + 1, items));
        }
        run = match d {
            u64::MAX if digit != 0 => run + 64,
            _ => (!d).leading_zeros(),
        };
        digit = d >> 63;
        comma = c >> 63;
        zero_start = zeros >> 63;
        j += 64;
    }
    None
}

/// Items that are strings whose escapes are all in `escapes` (never `\u`): a comma between
/// two, `]` after the last: the end and how many items.
fn strings_end(s: &[u8], i: usize, escapes: [u64; 4]) -> Option<(usize, usize)> {
    let mut pad = [0u8; 64];
    let mut j = i;
    let mut escape_carry = 0u64;
    // All ones when the window starts inside a string.
    let mut inside = 0u64;
    // What the byte before the window was: a closing quote, a comma between items.
    let (mut closed, mut comma) = (0u64, 0u64);
    let mut items = 0;
    while j < s.len() {
        let w = window(s, j, &mut pad)?;
        let (quote, backslash, control) = masks64(w);
        let m = class_masks(w);
        let escaped = escaped(backslash, &mut escape_carry);
        let quotes = quote & !escaped;
        // From an opening quote up to (not including) its closing one.
        let strings = prefix_xor(quotes) ^ inside;
        let opening = quotes & strings;
        let closing = quotes & !strings;
        let outside = !strings & !quotes;
        // The first byte between strings that is not a comma ends the run.
        let stop = (outside & !m.comma).trailing_zeros();
        let below = below(stop);
        if control & strings & below != 0 {
            return None;
        }
        let mut esc = escaped & below;
        while esc != 0 {
            let c = w[esc.trailing_zeros() as usize];
            if escapes[usize::from(c >> 6)] >> (c & 63) & 1 == 0 {
                return None;
            }
            esc &= esc - 1;
        }
        // After a closing quote comes a comma or the stop; after a comma, an opening quote
        // (so the bytes between two strings are exactly one comma).
        let commas = m.comma & outside & below;
        let after_closing = (closing << 1) | closed;
        if after_closing & below & !commas != 0 {
            return None;
        }
        if ((commas << 1) | comma) & !opening != 0 {
            return None;
        }
        items += (opening & below).count_ones() as usize;
        if stop < 64 {
            let ends = w[stop as usize] == b']' && after_closing & at(stop) != 0;
            return ends.then_some((j + stop as usize + 1, items));
        }
        inside = if strings >> 63 != 0 { u64::MAX } else { 0 };
        closed = closing >> 63;
        comma = commas >> 63;
        j += 64;
    }
    None
}

/// A window's digits, `0`s and commas (bit `i`: byte `i`).
struct ClassMasks {
    digit: u64,
    zero: u64,
    comma: u64,
}

#[inline(always)]
fn class_masks(window: &[u8; 64]) -> ClassMasks {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_add_epi8, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8,
            _mm_movemask_epi8, _mm_set1_epi8,
        };
        let mut m = ClassMasks {
            digit: 0,
            zero: 0,
            comma: 0,
        };
        // SAFETY: SSE2 is always available on x86_64; each load reads the 16 bytes of a
        // `chunks_exact(16)` chunk of `window`, and unaligned loads are allowed.
        unsafe {
            let nine = _mm_set1_epi8(9);
            let zero = _mm_set1_epi8(b'0' as i8);
            let comma = _mm_set1_epi8(b',' as i8);
            for (k, chunk) in window.chunks_exact(16).enumerate() {
                let shift = 16 * k;
                let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
                let bits = |x| u64::from(_mm_movemask_epi8(x) as u16) << shift;
                // b - '0' (wrapping) is at most 9 exactly for the digits: max(x, 9) == 9.
                let offset = _mm_add_epi8(v, _mm_set1_epi8(-(b'0' as i8)));
                m.digit |= bits(_mm_cmpeq_epi8(_mm_max_epu8(offset, nine), nine));
                m.zero |= bits(_mm_cmpeq_epi8(v, zero));
                m.comma |= bits(_mm_cmpeq_epi8(v, comma));
            }
        }
        m
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        class_masks_bytewise(window)
    }
}

/// [`class_masks`] a byte at a time: the portable path, and the tests' reference.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn class_masks_bytewise(window: &[u8; 64]) -> ClassMasks {
    let mut m = ClassMasks {
        digit: 0,
        zero: 0,
        comma: 0,
    };
    for (i, &b) in window.iter().enumerate() {
        m.digit |= u64::from(b.is_ascii_digit()) << i;
        m.zero |= u64::from(b == b'0') << i;
        m.comma |= u64::from(b == b',') << i;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::super::{Shape, parse};
    use super::{Flat, FlatArray, array_end, array_items, class_masks, class_masks_bytewise};
    use crate::log::test_support::{Rng, random_window, rounds};

    /// Where serde_json ends the array `text` starts with, if it reads one there.
    fn serde_end(text: &[u8]) -> Option<usize> {
        serde_array(text).map(|a| a.end)
    }

    /// The array `text` starts with as serde_json reads it: where it ends, how many items,
    /// whether the first is a string.
    fn serde_array(text: &[u8]) -> Option<FlatArray> {
        let mut values =
            serde_json::Deserializer::from_slice(text).into_iter::<serde_json::Value>();
        match values.next() {
            Some(Ok(serde_json::Value::Array(items))) => Some(FlatArray {
                start: 1,
                end: values.byte_offset(),
                items: items.len(),
                strings: items.first().is_some_and(serde_json::Value::is_string),
            }),
            _ => None,
        }
    }

    /// A flat array `flat` takes, written as `JSON.stringify` writes it (but `\/` for
    /// [`Flat::Json`]), then what follows it in a line.
    fn flat_array(rng: &mut Rng, flat: Flat) -> (Vec<u8>, usize) {
        let mut text = b"[".to_vec();
        let items = 1 + rng.below(60);
        let strings = rng.below(2) == 0;
        for k in 0..items {
            if k > 0 {
                text.push(b',');
            }
            if strings {
                text.push(b'"');
                for _ in 0..rng.below(12) {
                    let piece: &[u8] = match rng.below(12) {
                        0 => b"\\n",
                        1 => b"\\\"",
                        2 => b"\\\\",
                        3 if flat == Flat::Json => b"\\/",
                        4 => b"\\t",
                        5 => "é".as_bytes(),
                        6 => b",",
                        7 => b"]",
                        8 => b" ",
                        _ => b"ab",
                    };
                    text.extend_from_slice(piece);
                }
                text.push(b'"');
            } else {
                let digits = 1 + rng.below(flat.max_digits() as usize);
                let first = if digits == 1 {
                    rng.below(10)
                } else {
                    1 + rng.below(9)
                };
                text.push(b'0' + first as u8);
                for _ in 1..digits {
                    text.push(b'0' + rng.below(10) as u8);
                }
            }
        }
        text.push(b']');
        let end = text.len();
        text.extend_from_slice(br#"},{"type":"x","dt":[1]}]}}"#);
        (text, end)
    }

    /// The flat arrays of streams end where the array does, across window edges.
    #[test]
    fn flat_arrays_are_taken_and_end_at_their_bracket() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..rounds(5_000) {
            for flat in [Flat::Json, Flat::Stringify] {
                let (text, end) = flat_array(&mut rng, flat);
                let shown = String::from_utf8_lossy(&text);
                assert_eq!(serde_end(&text), Some(end), "{shown}");
                assert_eq!(array_end(&text, 1, flat), Some(end), "{flat:?} {shown}");
                let taken = array_items(&text, 1, flat);
                assert_eq!(taken, serde_array(&text), "{flat:?} {shown}");
                if let Some(a) = taken.filter(|a| !a.strings) {
                    let value: serde_json::Value =
                        serde_json::from_slice(&text[..end]).expect("JSON");
                    let want: Vec<u64> = value
                        .as_array()
                        .expect("an array")
                        .iter()
                        .map(|v| v.as_u64().expect("an integer"))
                        .collect();
                    assert_eq!(a.integers(&text).collect::<Vec<_>>(), want, "{shown}");
                }
            }
        }
    }

    /// Whatever the bytes, an array the windows take is one serde_json reads and ends at the
    /// same byte (and, for [`Flat::Stringify`], one it writes back byte for byte, as
    /// `JSON.stringify` does these): random edits of flat arrays (quotes, backslashes,
    /// commas, brackets, control characters, `\u`, `\/`, leading zeros, long numbers,
    /// whitespace) never make them take text that is not so, nor end an array elsewhere.
    #[test]
    fn flat_arrays_taken_are_json_and_end_where_serde_json_ends_them() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let bytes = b"\"\\,]0123456789 \x01\x1fu[-.e/";
        let (mut taken, mut refused) = (0, 0);
        for round in 0..rounds(40_000) {
            let flat = if round % 2 == 0 {
                Flat::Json
            } else {
                Flat::Stringify
            };
            let (mut text, _) = flat_array(&mut rng, flat);
            for _ in 0..1 + rng.below(3) {
                let at = 1 + rng.below(text.len() - 1);
                let b = bytes[rng.below(bytes.len())];
                match rng.below(3) {
                    0 => text[at] = b,
                    1 => text.insert(at, b),
                    _ => {
                        text.remove(at);
                    }
                }
            }
            // The parser's lines are `str`s.
            if std::str::from_utf8(&text).is_err() {
                continue;
            }
            let shown = String::from_utf8_lossy(&text);
            let Some(end) = array_end(&text, 1, flat) else {
                refused += 1;
                continue;
            };
            taken += 1;
            assert_eq!(Some(end), serde_end(&text), "{shown}");
            assert_eq!(array_items(&text, 1, flat), serde_array(&text), "{shown}");
            if flat == Flat::Stringify {
                // serde_json escapes strings as JavaScript does, and prints these integers
                // as written.
                let value: serde_json::Value = serde_json::from_slice(&text[..end]).expect("JSON");
                let again = serde_json::to_string(&value).expect("written");
                assert_eq!(again.as_bytes(), &text[..end], "{shown}");
            }
        }
        // Both answers are exercised (an edit after the array keeps it flat).
        assert!(taken > 0 && refused > 0, "taken {taken}, refused {refused}");
    }

    #[test]
    fn what_is_left_to_the_item_by_item_read() {
        for text in [
            // Invalid.
            r#"[01]"#,
            r#"[1,]"#,
            r#"[1,,2]"#,
            r#"[1"#,
            r#"["a""b"]"#,
            r#"["a",]"#,
            r#"["a\x"]"#,
            "[\"a\u{1}\"]",
            r#"["a"#,
            // Valid, not flat as `JSON.stringify` writes it.
            r#"[12345678901234567]"#,
            r#"[1 ,2]"#,
            r#"[1, 2]"#,
            r#"["a", "b"]"#,
            r#"["\u0041"]"#,
            r#"[-1]"#,
            r#"[1.5]"#,
            r#"[1e3]"#,
            r#"[1,"a"]"#,
            r#"["a",1]"#,
            r#"[[1]]"#,
        ] {
            for flat in [Flat::Json, Flat::Stringify] {
                assert_eq!(array_end(text.as_bytes(), 1, flat), None, "{text}");
            }
        }
        assert_eq!(array_end(b"[1234567890123456]", 1, Flat::Json), Some(18));
        assert_eq!(array_end(br#"["a\"]",""]"#, 1, Flat::Json), Some(11));
        // Not what `JSON.stringify` writes back: `\/` (it writes `/`), and past 15 digits a
        // double's spelling, which the store's check compares item by item.
        assert_eq!(
            array_end(b"[123456789012345]", 1, Flat::Stringify),
            Some(17)
        );
        assert_eq!(array_end(b"[1234567890123456]", 1, Flat::Stringify), None);
        assert_eq!(array_end(br#"["a\/b"]"#, 1, Flat::Json), Some(8));
        assert_eq!(array_end(br#"["a\/b"]"#, 1, Flat::Stringify), None);
    }

    /// A lean tree (which drops a stream record's arrays) reads a line exactly when the full
    /// tree does, flat arrays or not.
    #[test]
    fn a_lean_line_with_a_bad_flat_array_is_refused_as_the_full_one_is() {
        let line = |dt: &str, texts: &str| {
            format!(
                r#"{{"type":"assistant/message","seq":1,"data":{{"stream":[{{"type":"text-chunks","dt":{dt},"texts":{texts}}}]}}}}"#
            )
        };
        for (dt, texts) in [
            ("[0,1,2]", r#"["a","b\n"]"#),
            ("[0,01]", r#"["a"]"#),
            ("[0,1]", r#"["a",]"#),
            ("[0,1]", "[\"a\u{1}\"]"),
            ("[12345678901234567890]", r#"["\u00e9"]"#),
        ] {
            let text = line(dt, texts);
            let full = parse(&text, None, None, Shape::Full).is_some();
            for shape in [Shape::Lean, Shape::Envelope] {
                assert_eq!(
                    parse(&text, None, None, shape).is_some(),
                    full,
                    "{shape:?} {text}"
                );
            }
        }
    }

    #[test]
    fn the_class_masks_are_the_bytes() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for _ in 0..rounds(2_000) {
            let w = random_window(&mut rng, b"0,9/:");
            let (m, want) = (class_masks(&w), class_masks_bytewise(&w));
            assert_eq!(
                (m.digit, m.zero, m.comma),
                (want.digit, want.zero, want.comma)
            );
        }
    }
}

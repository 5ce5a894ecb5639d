//! What upstream's read path does to a stored JSON text: `JSON.parse` it, then (writing the
//! logical log) `JSON.stringify` the value. For the text DSH itself stored — already
//! `JSON.stringify` output — the result is the same bytes, so [`write_value`] checks that
//! cheaply in one pass and copies; any other valid text (whitespace, other escapes, `-0`,
//! `1.0`, repeated keys, integer-like keys out of order) is rebuilt the way JavaScript
//! would, and invalid text is what makes a row undecodable (SQLITE.md S4.1, S7).

use std::borrow::Cow;
use std::collections::HashSet;

use super::decode::{Members, Run};
use crate::log::json::{Flat, flat_array_end, flat_array_items, js_number};

/// Objects with more keys than this look for repeated keys in a hash set, not a list.
const LINEAR_KEYS: usize = 16;

/// Append the `JSON.stringify(JSON.parse(text))` of `text` to `out`; `Err` says why
/// `JSON.parse` would throw.
pub fn write_value(text: &str, out: &mut Vec<u8>) -> Result<(), String> {
    if is_canonical(text)? {
        out.extend_from_slice(text.as_bytes());
        return Ok(());
    }
    let mut p = Parser::new(text);
    p.ws();
    p.rebuild(out, 0)?;
    Ok(())
}

/// Whether `text` is exactly what `JSON.stringify` writes for the value it holds; `Err` when
/// it is not JSON at all.
pub fn is_canonical(text: &str) -> Result<bool, String> {
    let mut c = Checker {
        b: text.as_bytes(),
        i: 0,
        canonical: true,
        stack: Vec::new(),
        keys: Vec::new(),
    };
    c.run()?;
    Ok(c.canonical)
}

#[derive(Debug)]
enum Frame<'a> {
    Arr,
    /// `start`: index of this object's first key in `Checker::keys`; `ints`: still in the
    /// leading run of integer-like keys, with the last one; `set`: the keys, once many.
    Obj {
        start: usize,
        ints: Option<Option<u32>>,
        set: Option<HashSet<&'a [u8]>>,
    },
}

/// Whether [`Checker`] reads strings in 64-byte windows (the tests turn them off to compare
/// with the reading a byte at a time).
#[cfg(not(test))]
fn windows_on() -> bool {
    true
}
#[cfg(test)]
fn windows_on() -> bool {
    !tests::BYTEWISE.with(std::cell::Cell::get)
}

struct Checker<'a> {
    b: &'a [u8],
    i: usize,
    canonical: bool,
    stack: Vec<Frame<'a>>,
    /// Byte spans (inside the quotes) of the keys of the open objects.
    keys: Vec<(usize, usize)>,
}

fn err(what: &str, at: usize) -> String {
    format!("invalid JSON: {what} at byte {at}")
}

impl<'a> Checker<'a> {
    fn ws(&mut self) {
        let start = self.i;
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
        if self.i != start {
            self.canonical = false;
        }
    }

    /// Steps over an opening bracket and the whitespace after it; an immediately following
    /// `close` is consumed too, and says the container is empty.
    fn opens_empty(&mut self, close: u8) -> bool {
        self.i += 1;
        self.ws();
        let empty = self.b.get(self.i) == Some(&close);
        if empty {
            self.i += 1;
        }
        empty
    }

    fn run(&mut self) -> Result<(), String> {
        'value: loop {
            self.ws();
            match self.b.get(self.i) {
                Some(b'{') => {
                    if !self.opens_empty(b'}') {
                        self.stack.push(Frame::Obj {
                            start: self.keys.len(),
                            ints: Some(None),
                            set: None,
                        });
                        self.key()?;
                        continue 'value;
                    }
                }
                Some(b'[') => {
                    if !self.opens_empty(b']') {
                        // A stream's `dt` and text pieces, checked a window at a time.
                        match flat_array_end(self.b, self.i, Flat::Stringify) {
                            Some(end) => self.i = end,
                            None => {
                                self.stack.push(Frame::Arr);
                                continue 'value;
                            }
                        }
                    }
                }
                Some(b'"') => {
                    self.string()?;
                }
                Some(b't') => self.literal("true")?,
                Some(b'f') => self.literal("false")?,
                Some(b'n') => self.literal("null")?,
                Some(b'-' | b'0'..=b'9') => self.number()?,
                Some(_) => return Err(err("unexpected character", self.i)),
                None => return Err(err("unexpected end of input", self.i)),
            }
            // After a value: close containers until one continues.
            loop {
                self.ws();
                let at = self.i;
                match self.stack.last() {
                    None => {
                        if at != self.b.len() {
                            return Err(err("unexpected data after the value", at));
                        }
                        return Ok(());
                    }
                    Some(Frame::Arr) => match self.b.get(at) {
                        Some(b',') => {
                            self.i += 1;
                            continue 'value;
                        }
                        Some(b']') => {
                            self.i += 1;
                            self.stack.pop();
                        }
                        _ => return Err(err("expected `,` or `]`", at)),
                    },
                    Some(Frame::Obj { start, .. }) => match self.b.get(at) {
                        Some(b',') => {
                            self.i += 1;
                            self.ws();
                            self.key()?;
                            continue 'value;
                        }
                        Some(b'}') => {
                            self.i += 1;
                            let start = *start;
                            self.keys.truncate(start);
                            self.stack.pop();
                        }
                        _ => return Err(err("expected `,` or `}`", at)),
                    },
                }
            }
        }
    }

    /// A member name and its `:`; records it for the repeated-key and key-order rules.
    fn key(&mut self) -> Result<(), String> {
        if self.b.get(self.i) != Some(&b'"') {
            return Err(err("expected a member name", self.i));
        }
        let span = self.string()?;
        self.ws();
        if self.b.get(self.i) != Some(&b':') {
            return Err(err("expected `:`", self.i));
        }
        self.i += 1;
        if !self.canonical {
            // Already rebuilt: the key rules need not be tracked any further.
            return Ok(());
        }
        let b: &'a [u8] = self.b;
        let key: &'a [u8] = &b[span.0..span.1];
        let Some(Frame::Obj { start, ints, set }) = self.stack.last_mut() else {
            return Ok(());
        };
        // JavaScript objects list integer-like keys first, ascending, then the others in
        // insertion order: any other order is rewritten by `JSON.stringify`.
        match (array_index(key), *ints) {
            (Some(n), Some(last)) => {
                if last.is_some_and(|l| n <= l) {
                    self.canonical = false;
                }
                *ints = Some(Some(n));
            }
            (Some(_), None) => self.canonical = false,
            (None, _) => *ints = None,
        }
        let own = &self.keys[*start..];
        let repeated = match set {
            Some(set) => !set.insert(key),
            None => {
                let hit = own.iter().any(|&(s, e)| &b[s..e] == key);
                if own.len() >= LINEAR_KEYS {
                    let mut all: HashSet<&[u8]> = own.iter().map(|&(s, e)| &b[s..e]).collect();
                    all.insert(key);
                    *set = Some(all);
                }
                hit
            }
        };
        if repeated {
            self.canonical = false;
        }
        self.keys.push(span);
        Ok(())
    }

    fn literal(&mut self, word: &str) -> Result<(), String> {
        if self.b[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(())
        } else {
            Err(err("invalid literal", self.i))
        }
    }

    /// A string starting at its `"`; the byte span of its contents.
    #[inline]
    fn string(&mut self) -> Result<(usize, usize), String> {
        let start = self.i + 1;
        let mut i = start;
        let b = self.b;
        // The first backslash hands the string to 64-byte windows, which take it to its end
        // when every escape is one JSON.stringify writes; otherwise it is read on from
        // where they stopped, a byte at a time.
        let mut windows = windows_on();
        loop {
            i = crate::log::json::string_plain_end(b, i);
            let Some(&c) = b.get(i) else {
                return Err(err("unterminated string", start - 1));
            };
            match c {
                b'"' => {
                    self.i = i + 1;
                    return Ok((start, i));
                }
                b'\\' if windows => {
                    windows = false;
                    match crate::log::json::stringify_string_end(b, i) {
                        Ok(end) => {
                            self.i = end + 1;
                            return Ok((start, end));
                        }
                        Err(at) => i = at,
                    }
                }
                b'\\' => {
                    let Some(&e) = b.get(i + 1) else {
                        return Err(err("unterminated string", start - 1));
                    };
                    match e {
                        b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                        b'/' => {
                            self.canonical = false;
                            i += 2;
                        }
                        b'u' => {
                            let (unit, lower) =
                                hex4(b, i + 2).ok_or_else(|| err("bad \\u escape", i))?;
                            i += 6;
                            match unit {
                                0xD800..=0xDBFF => {
                                    let paired = b.get(i) == Some(&b'\\')
                                        && b.get(i + 1) == Some(&b'u')
                                        && hex4(b, i + 2)
                                            .is_some_and(|(u, _)| (0xDC00..=0xDFFF).contains(&u));
                                    // A pair is written as the character; a lone surrogate as
                                    // a lower-case escape.
                                    if paired || !lower {
                                        self.canonical = false;
                                    }
                                }
                                0xDC00..=0xDFFF if lower => {}
                                0x00..=0x1F
                                    if lower
                                        && !matches!(unit, 0x08 | 0x09 | 0x0A | 0x0C | 0x0D) => {}
                                _ => self.canonical = false,
                            }
                        }
                        _ => return Err(err("bad escape", i)),
                    }
                }
                0x00..=0x1F => return Err(err("control character in a string", i)),
                _ => i += 1,
            }
        }
    }

    #[inline]
    fn number(&mut self) -> Result<(), String> {
        let start = self.i;
        let end = number_end(self.b, start).ok_or_else(|| err("invalid number", start))?;
        self.i = end;
        let text = &self.b[start..end];
        let plain = text.iter().all(u8::is_ascii_digit);
        // Up to 15 digits an integer is exact and printed back as written; anything else is
        // compared with its JavaScript spelling.
        if !(plain && text.len() <= 15) {
            // The span is ASCII digits, sign, point and exponent: always valid UTF-8.
            let s = std::str::from_utf8(text).unwrap_or_default();
            let x: f64 = s.parse().map_err(|_| err("invalid number", start))?;
            let mut js = Vec::new();
            js_number(x, &mut js);
            if js != text {
                self.canonical = false;
            }
        }
        Ok(())
    }
}

/// A packed row's run data as upstream writes it — `JSON.stringify` output with exactly the
/// keys of its kind, each once — read in one pass without building a tree. `None` for
/// anything else: the general reading (`decode::slow_run`) then decides, with its messages.
/// With `tally`, members that are all plain strings (see [`flat_strings`]) are counted and
/// measured, not listed: a row kept packed needs no more of them.
pub fn run_fast(text: &str, tool: bool, tally: bool) -> Option<Run<'_>> {
    let b = text.as_bytes();
    let mut c = Checker {
        b,
        i: 1,
        canonical: true,
        stack: Vec::new(),
        keys: Vec::new(),
    };
    if b.first() != Some(&b'{') {
        return None;
    }
    let mut nums: [Option<&str>; 3] = [None; 3];
    let (mut id, mut name) = (None, None);
    let (mut members, mut dt) = (None, None);
    let mut seen = 0u8;
    loop {
        if b.get(c.i) != Some(&b'"') {
            return None;
        }
        let (ks, ke) = c.string().ok()?;
        if b.get(c.i) != Some(&b':') {
            return None;
        }
        c.i += 1;
        let bit = match (&b[ks..ke], tool) {
            (b"turn", _) => 1,
            (b"step", _) => 2,
            (b"index", _) => 4,
            (b"dt", _) => 8,
            (b"texts", false) | (b"args", true) => 16,
            (b"id", true) => 32,
            (b"name", true) => 64,
            _ => return None,
        };
        if seen & bit != 0 {
            return None;
        }
        seen |= bit;
        match bit {
            1 | 2 | 4 => {
                let start = c.i;
                if !matches!(b.get(start), Some(b'-' | b'0'..=b'9')) {
                    return None;
                }
                c.number().ok()?;
                nums[bit.trailing_zeros() as usize] = Some(&text[start..c.i]);
            }
            32 | 64 => {
                if b.get(c.i) != Some(&b'"') {
                    return None;
                }
                let (s, e) = c.string().ok()?;
                *(if bit == 32 { &mut id } else { &mut name }) = Some(&text[s..e]);
            }
            8 => {
                if let Some((list, end)) = flat_integers(b, c.i) {
                    c.i = end;
                    dt = Some(list);
                } else {
                    let mut list = Vec::new();
                    c.array(|c| {
                        let start = c.i;
                        if !matches!(b.get(start), Some(b'-' | b'0'..=b'9')) {
                            return None;
                        }
                        c.number().ok()?;
                        list.push(Some(
                            small_int(&b[start..c.i]).or_else(|| text[start..c.i].parse().ok())?,
                        ));
                        Some(())
                    })?;
                    dt = Some(list);
                }
            }
            _ => {
                let tallied = if tally { flat_strings(b, c.i) } else { None };
                match tallied {
                    Some((tallied, end)) => {
                        c.i = end;
                        members = Some(tallied);
                    }
                    None => {
                        let mut list = Vec::new();
                        c.array(|c| {
                            if b.get(c.i) != Some(&b'"') {
                                return None;
                            }
                            let (s, e) = c.string().ok()?;
                            list.push(Some(&text[s..e]));
                            Some(())
                        })?;
                        members = Some(Members::Each(list));
                    }
                }
            }
        }
        match b.get(c.i) {
            Some(b',') => c.i += 1,
            Some(b'}') => {
                c.i += 1;
                break;
            }
            _ => return None,
        }
    }
    let need = 1 | 2 | 4 | 8 | 16 | if tool { 32 } else { 0 };
    if c.i != b.len() || !c.canonical || seen & need != need {
        return None;
    }
    Some(Run {
        turn: Cow::Borrowed(nums[0]?),
        step: Cow::Borrowed(nums[1]?),
        index: Cow::Borrowed(nums[2]?),
        id,
        name,
        members: members?,
        dt: dt?,
        canonical: true,
    })
}

/// At the `[` of an array: when it is flat (`json::flat_array_items`) and holds strings, in
/// `JSON.stringify`'s form and without `\u` escapes, how many and their bytes with their
/// quotes, and the index past its `]`.
fn flat_strings(b: &[u8], at: usize) -> Option<(Members<'static>, usize)> {
    if b.get(at) != Some(&b'[') {
        return None;
    }
    let a = flat_array_items(b, at + 1, Flat::Stringify).filter(|a| a.strings)?;
    // Between the brackets: each item and its quotes, a comma between two.
    let inside = a.end - 1 - (at + 1);
    let bytes = (inside + 1).checked_sub(a.items)? as u64;
    Some((
        Members::Tallied {
            count: a.items,
            bytes,
        },
        a.end,
    ))
}

/// At the `[` of an array: when it is flat (`json::flat_array_items`) and holds integers
/// (none negative, of at most 15 digits: exact as doubles), their values and the index past
/// its `]`.
fn flat_integers(b: &[u8], at: usize) -> Option<(Vec<Option<f64>>, usize)> {
    if b.get(at) != Some(&b'[') {
        return None;
    }
    let a = flat_array_items(b, at + 1, Flat::Stringify).filter(|a| !a.strings)?;
    let list: Vec<Option<f64>> = a.integers(b).map(|v| Some(v as f64)).collect();
    debug_assert_eq!(list.len(), a.items);
    Some((list, a.end))
}

/// A plain integer of at most 15 digits (exact as a double), without the float parser.
#[inline]
fn small_int(t: &[u8]) -> Option<f64> {
    let (neg, digits) = match t.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, t),
    };
    if digits.is_empty() || digits.len() > 15 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = digits
        .iter()
        .fold(0i64, |v, d| v * 10 + i64::from(d - b'0'));
    Some(if neg { -(v as f64) } else { v as f64 })
}

impl Checker<'_> {
    /// A `[...]` of items read by `item` (no whitespace), the cursor after it.
    fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        if self.b.get(self.i) != Some(&b'[') {
            return None;
        }
        self.i += 1;
        if self.b.get(self.i) == Some(&b']') {
            self.i += 1;
            return Some(());
        }
        loop {
            item(self)?;
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }
}

/// The end of a JSON number starting at `i`, if the grammar matches.
fn number_end(b: &[u8], mut i: usize) -> Option<usize> {
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
        }
        _ => return None,
    }
    crate::log::json::number_tail_end(b, i)
}

/// Four hex digits at `i`: the code unit, and whether every letter was lower case.
fn hex4(b: &[u8], i: usize) -> Option<(u32, bool)> {
    let digits = b.get(i..i + 4)?;
    let mut unit = 0;
    let mut lower = true;
    for &d in digits {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => {
                lower = false;
                d - b'A' + 10
            }
            _ => return None,
        };
        unit = unit * 16 + u32::from(v);
    }
    Some((unit, lower))
}

/// A JavaScript array index (`"0"`, `"17"`; below 2^32 − 1): such keys come first in an
/// object, ascending. The name is the raw text between the quotes.
fn array_index(raw: &[u8]) -> Option<u32> {
    if raw.is_empty() || raw.len() > 10 || (raw[0] == b'0' && raw.len() > 1) {
        return None;
    }
    if !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(raw).ok()?.parse().ok()?;
    (n < u64::from(u32::MAX)).then_some(n as u32)
}

/// A JSON string as `JSON.stringify` writes it, from the raw contents between its quotes
/// (already validated).
pub fn write_string(raw: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let b = raw.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c != b'\\' {
            push_unit_byte(c, out);
            i += 1;
            continue;
        }
        let e = b.get(i + 1).copied().unwrap_or(b'\\');
        i += 2;
        let unit = match e {
            b'b' => 0x08,
            b'f' => 0x0C,
            b'n' => 0x0A,
            b'r' => 0x0D,
            b't' => 0x09,
            b'u' => {
                let Some((u, _)) = hex4(b, i) else {
                    continue;
                };
                i += 4;
                u
            }
            other => u32::from(other),
        };
        if (0xD800..=0xDBFF).contains(&unit)
            && b.get(i) == Some(&b'\\')
            && b.get(i + 1) == Some(&b'u')
            && let Some((low, _)) = hex4(b, i + 2)
            && (0xDC00..=0xDFFF).contains(&low)
        {
            i += 6;
            let cp = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
            if let Some(ch) = char::from_u32(cp) {
                let mut buf = [0; 4];
                out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            }
            continue;
        }
        match unit {
            0xD800..=0xDFFF => {
                use std::io::Write;
                let _ = write!(out, "\\u{unit:04x}");
            }
            u if u < 0x80 => push_unit_byte(u as u8, out),
            u => {
                if let Some(ch) = char::from_u32(u) {
                    let mut buf = [0; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
    }
    out.push(b'"');
}

/// One byte of a string (an ASCII character or a byte of a multi-byte UTF-8 sequence),
/// escaped as `JSON.stringify` does.
fn push_unit_byte(c: u8, out: &mut Vec<u8>) {
    match c {
        b'"' => out.extend_from_slice(b"\\\""),
        b'\\' => out.extend_from_slice(b"\\\\"),
        0x08 => out.extend_from_slice(b"\\b"),
        0x0C => out.extend_from_slice(b"\\f"),
        b'\n' => out.extend_from_slice(b"\\n"),
        b'\r' => out.extend_from_slice(b"\\r"),
        b'\t' => out.extend_from_slice(b"\\t"),
        0x00..=0x1F => {
            use std::io::Write;
            let _ = write!(out, "\\u{c:04x}");
        }
        _ => out.push(c),
    }
}

/// A parsed value that keeps its strings and numbers as the raw text they were written in
/// (packed chunk rows read their members this way, S5).
#[derive(Debug)]
pub enum Value<'a> {
    Null,
    Bool(bool),
    Num(f64),
    /// The raw contents between the quotes.
    Str(&'a str),
    Arr(Vec<Value<'a>>),
    /// Members in text order, names raw; lookups take the last, like `JSON.parse`.
    Obj(Vec<(&'a str, Value<'a>)>),
}

impl<'a> Value<'a> {
    /// Parse a whole text, nested at most `max_depth` levels.
    pub fn parse(text: &'a str, max_depth: usize) -> Result<Value<'a>, String> {
        let mut p = Parser::new(text);
        p.ws();
        let v = p.value(max_depth)?;
        p.ws();
        if p.i != text.len() {
            return Err(err("unexpected data after the value", p.i));
        }
        Ok(v)
    }

    /// The member `name` (a plain ASCII name), the last one when repeated.
    pub fn get(&self, name: &str) -> Option<&Value<'a>> {
        match self {
            Value::Obj(m) => crate::log::json::last_member(m, |k| key_is(k, name)),
            _ => None,
        }
    }

    /// The distinct member names, as `JSON.stringify` would write them.
    pub fn keys(&self) -> Vec<Vec<u8>> {
        let Value::Obj(m) = self else {
            return Vec::new();
        };
        let mut seen: Vec<Vec<u8>> = Vec::new();
        for (k, _) in m {
            let mut name = Vec::new();
            write_string(k, &mut name);
            if !seen.contains(&name) {
                seen.push(name);
            }
        }
        seen
    }
}

/// Whether the raw member name `raw` means `name` (a plain name without escapes).
fn key_is(raw: &str, name: &str) -> bool {
    if !raw.contains('\\') {
        return raw == name;
    }
    let mut written = Vec::new();
    write_string(raw, &mut written);
    written.len() == name.len() + 2 && &written[1..written.len() - 1] == name.as_bytes()
}

struct Parser<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Parser<'a> {
    fn new(s: &'a str) -> Self {
        Parser { s, i: 0 }
    }

    fn b(&self) -> &'a [u8] {
        self.s.as_bytes()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b().get(self.i) {
            self.i += 1;
        }
    }

    /// Past the opening bracket at the cursor and any white space: whether the container is
    /// empty (its `close` is passed too).
    #[inline]
    fn opens_empty(&mut self, close: u8) -> bool {
        self.i += 1;
        self.ws();
        let empty = self.b().get(self.i) == Some(&close);
        if empty {
            self.i += 1;
        }
        empty
    }

    /// The members or items of the container at the cursor, up to its `close`: `each` reads
    /// one, from its first byte.
    fn elements(
        &mut self,
        close: u8,
        expected: &str,
        mut each: impl FnMut(&mut Self) -> Result<(), String>,
    ) -> Result<(), String> {
        if self.opens_empty(close) {
            return Ok(());
        }
        loop {
            self.ws();
            each(self)?;
            self.ws();
            if self.closes(close, expected)? {
                return Ok(());
            }
        }
    }

    /// A member's name and the `:` after it: the cursor is then at its value.
    fn member_name(&mut self) -> Result<&'a str, String> {
        if self.b().get(self.i) != Some(&b'"') {
            return Err(err("expected a member name", self.i));
        }
        let k = self.raw_string()?;
        self.ws();
        if self.b().get(self.i) != Some(&b':') {
            return Err(err("expected `:`", self.i));
        }
        self.i += 1;
        self.ws();
        Ok(k)
    }

    /// After a member or an element: `true` at the container's `close`, `false` after a
    /// `,` (either passed), else the error `expected`.
    #[inline]
    fn closes(&mut self, close: u8, expected: &str) -> Result<bool, String> {
        match self.b().get(self.i) {
            Some(b',') => {
                self.i += 1;
                Ok(false)
            }
            Some(&c) if c == close => {
                self.i += 1;
                Ok(true)
            }
            _ => Err(err(expected, self.i)),
        }
    }

    /// A string at its `"`: the raw contents (validated by a [`Checker`]).
    fn raw_string(&mut self) -> Result<&'a str, String> {
        let mut c = Checker {
            b: self.b(),
            i: self.i,
            canonical: true,
            stack: Vec::new(),
            keys: Vec::new(),
        };
        let (s, e) = c.string()?;
        self.i = c.i;
        Ok(&self.s[s..e])
    }

    fn value(&mut self, depth: usize) -> Result<Value<'a>, String> {
        let at = self.i;
        match self.b().get(at) {
            Some(b'{') | Some(b'[') if depth == 0 => Err(format!(
                "JSON nested deeper than dshs rebuilds (at byte {at})"
            )),
            Some(b'{') => {
                let mut members = Vec::new();
                self.elements(b'}', "expected `,` or `}`", |p| {
                    let k = p.member_name()?;
                    members.push((k, p.value(depth - 1)?));
                    Ok(())
                })?;
                Ok(Value::Obj(members))
            }
            Some(b'[') => {
                let mut items = Vec::new();
                self.elements(b']', "expected `,` or `]`", |p| {
                    items.push(p.value(depth - 1)?);
                    Ok(())
                })?;
                Ok(Value::Arr(items))
            }
            Some(b'"') => Ok(Value::Str(self.raw_string()?)),
            Some(b't') => self.word("true", Value::Bool(true)),
            Some(b'f') => self.word("false", Value::Bool(false)),
            Some(b'n') => self.word("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => Ok(Value::Num(self.parse_number()?)),
            Some(_) => Err(err("unexpected character", at)),
            None => Err(err("unexpected end of input", at)),
        }
    }

    /// The number at the cursor, which is stepped past it.
    fn parse_number(&mut self) -> Result<f64, String> {
        let at = self.i;
        let end = number_end(self.b(), at).ok_or_else(|| err("invalid number", at))?;
        self.i = end;
        self.s[at..end]
            .parse()
            .map_err(|_| err("invalid number", at))
    }

    fn word(&mut self, w: &str, v: Value<'a>) -> Result<Value<'a>, String> {
        if self.s[self.i..].starts_with(w) {
            self.i += w.len();
            Ok(v)
        } else {
            Err(err("invalid literal", self.i))
        }
    }

    /// Write the value at the cursor as `JSON.stringify` would (the text is valid JSON).
    fn rebuild(&mut self, out: &mut Vec<u8>, depth: usize) -> Result<(), String> {
        // The depth guard (canonical text of any depth is copied without recursion; the
        // caller tells a text past the guard from one `JSON.parse` refuses).
        let max = crate::log::limits::max_json_depth() as usize;
        if depth > max {
            return Err(format!(
                "JSON nested deeper than {max} levels that is not in JSON.stringify form"
            ));
        }
        let at = self.i;
        match self.b().get(at) {
            Some(b'{') => {
                // name as written by JSON.stringify → its value's bytes; first position wins,
                // the last value wins, integer-like names go first in ascending order.
                let mut members: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                let mut index: std::collections::HashMap<Vec<u8>, usize> =
                    std::collections::HashMap::new();
                self.elements(b'}', "expected `,` or `}`", |p| {
                    let mut name = Vec::new();
                    write_string(p.member_name()?, &mut name);
                    let mut v = Vec::new();
                    p.rebuild(&mut v, depth + 1)?;
                    match index.get(&name) {
                        Some(&slot) => members[slot].1 = v,
                        None => {
                            index.insert(name.clone(), members.len());
                            members.push((name, v));
                        }
                    }
                    Ok(())
                })?;
                let (mut ints, rest): (Vec<_>, Vec<_>) = members
                    .into_iter()
                    .partition(|(n, _)| array_index(&n[1..n.len() - 1]).is_some());
                ints.sort_by_key(|(n, _)| array_index(&n[1..n.len() - 1]));
                out.push(b'{');
                for (i, (n, v)) in ints.iter().chain(rest.iter()).enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(n);
                    out.push(b':');
                    out.extend_from_slice(v);
                }
                out.push(b'}');
                Ok(())
            }
            Some(b'[') => {
                out.push(b'[');
                let mut first = true;
                self.elements(b']', "expected `,` or `]`", |p| {
                    if !std::mem::take(&mut first) {
                        out.push(b',');
                    }
                    p.rebuild(out, depth + 1)
                })?;
                out.push(b']');
                Ok(())
            }
            Some(b'"') => {
                let raw = self.raw_string()?;
                write_string(raw, out);
                Ok(())
            }
            Some(b'-' | b'0'..=b'9') => {
                js_number(self.parse_number()?, out);
                Ok(())
            }
            _ => {
                for w in ["true", "false", "null"] {
                    if self.s[at..].starts_with(w) {
                        self.i += w.len();
                        out.extend_from_slice(w.as_bytes());
                        return Ok(());
                    }
                }
                Err(err("unexpected character", at))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    thread_local! {
        pub(super) static BYTEWISE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// `is_canonical` with strings read a byte at a time.
    fn bytewise(text: &str) -> Result<bool, String> {
        BYTEWISE.with(|b| b.set(true));
        let r = is_canonical(text);
        BYTEWISE.with(|b| b.set(false));
        r
    }

    /// String bodies rich in what the windows decide on: every escape, control characters,
    /// quotes, surrogates and multi-byte characters, often past 64 bytes.
    fn body() -> impl Strategy<Value = String> {
        let pieces = |p: &[&str]| {
            let p: Vec<String> = p.iter().map(|s| (*s).to_owned()).collect();
            prop::sample::select(p)
        };
        // Mostly what JSON.stringify writes, so that a string often stays valid and in its
        // form up to one other spelling (or one error) far into it.
        let piece = prop_oneof![
            30 => pieces(&["a", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "é💡", "\\\\", "\\\"", "\\n", "\\t", "\\b"]),
            2 => pieces(&["\\u001b", "\\ud800", "\\udc00"]),
            1 => pieces(&["\\/", "\\u001B", "\\u0041", "\\u000a", "\\ud83d\\ude00", "\\uD800"]),
            1 => pieces(&["\\x", "\"", "\u{1}", "\u{1f}", "\\", "\\u12"]),
        ];
        prop::collection::vec(piece, 0..60).prop_map(|p| p.concat())
    }

    proptest! {
        #[test]
        fn strings_read_in_windows_are_judged_as_read_a_byte_at_a_time(
            a in body(),
            b in body(),
        ) {
            for text in [
                format!("\"{a}\""),
                format!("[\"{a}\",\"{b}\"]"),
                format!("{{\"{a}\":\"{b}\"}}"),
                format!("\"{a}"),
            ] {
                prop_assert_eq!(is_canonical(&text), bytewise(&text), "{}", text);
            }
        }
    }

    fn js(text: &str) -> Result<String, String> {
        let mut out = Vec::new();
        write_value(text, &mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn canonical_text_is_copied() {
        for t in [
            r#"{"a":1,"b":[true,false,null],"c":"x\ny\u001f\"\\"}"#,
            r#"{"0":1,"2":2,"x":{"1":[]},"y":-3.5e-7}"#,
            r#""\ud800 lone""#,
            "[1e+21,123456789012345680000,0.000001,1.5]",
            "{}",
            "[]",
        ] {
            assert!(is_canonical(t).unwrap(), "{t}");
            assert_eq!(js(t).unwrap(), t);
        }
    }

    #[test]
    fn other_spellings_are_rebuilt_as_json_stringify_writes_them() {
        let cases = [
            (r#"{ "a" : 1 }"#, r#"{"a":1}"#),
            ("-0", "0"),
            ("[1.0,1e2,1E-7,1e400,-0.0]", "[1,100,1e-7,null,0]"),
            ("12345678901234567890", "12345678901234567000"),
            (r#""\u0041\/\u00e9\ud83d\ude00\uD800""#, "\"A/é😀\\ud800\""),
            (r#"{"b":1,"a":2,"b":3}"#, r#"{"b":3,"a":2}"#),
            (r#"{"x":1,"10":2,"2":3}"#, r#"{"2":3,"10":2,"x":1}"#),
            (r#""\u000A\u0008""#, r#""\n\b""#),
            (r#""\u001F""#, r#""\u001f""#),
        ];
        for (input, want) in cases {
            assert!(!is_canonical(input).unwrap(), "{input}");
            assert_eq!(js(input).unwrap(), want, "{input}");
        }
    }

    /// A stream's flat arrays are checked a window at a time (`json::flat_array_end`); what
    /// that leaves to the item-by-item check is judged as before.
    #[test]
    fn flat_arrays_are_judged_as_their_items_are() {
        let canonical = r#"{"dt":[0,7,123456789012345],"texts":["a","b\n\"c\\",""]}"#;
        assert!(is_canonical(canonical).unwrap());
        assert_eq!(js(canonical).unwrap(), canonical);
        let cases = [
            (r#"["a\/b","c"]"#, r#"["a/b","c"]"#),
            ("[1,12345678901234567]", "[1,12345678901234568]"),
            ("[9007199254740993]", "[9007199254740992]"),
            ("[1, 2]", "[1,2]"),
            (r#"["\u0041"]"#, r#"["A"]"#),
            ("[1,-0]", "[1,0]"),
        ];
        for (input, want) in cases {
            assert!(!is_canonical(input).unwrap(), "{input}");
            assert_eq!(js(input).unwrap(), want, "{input}");
        }
        for bad in [
            "[01]",
            "[1,]",
            r#"["a",]"#,
            "[\"a\u{1}\"]",
            r#"["a\x"]"#,
            "[1",
        ] {
            assert!(is_canonical(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn what_json_parse_refuses_is_an_error() {
        for t in [
            "",
            "{",
            "[1,]",
            "\u{feff}{}",
            "{\"a\":1}x",
            "\"a\u{1}b\"",
            "01",
            "1.",
            "\"\\x\"",
            "NaN",
            "{'a':1}",
        ] {
            assert!(is_canonical(t).is_err(), "{t:?}");
        }
    }

    #[test]
    fn many_keys_still_find_a_repeat() {
        let mut t = String::from("{");
        for i in 0..40 {
            t.push_str(&format!("\"k{i}\":{i},"));
        }
        t.push_str("\"k3\":0}");
        assert!(!is_canonical(&t).unwrap());
        let out = js(&t).unwrap();
        assert!(
            out.starts_with(r#"{"k0":0,"k1":1,"k2":2,"k3":0,"k4":4"#),
            "{out}"
        );
    }

    #[test]
    fn deep_canonical_text_needs_no_recursion() {
        let t = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(js(&t).unwrap(), t);
        let spaced = format!("{} {}", "[".repeat(2_000), "]".repeat(2_000));
        assert!(js(&spaced).is_err());
    }
}

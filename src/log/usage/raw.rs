//! The fast path for the big lines: an `assistant/message` or `assistant/attempt` line is
//! walked, not parsed. Only the members a call needs are located (`seq`, `time`, `data.turn`,
//! `data.step`, `data.usage`, `data.message.source.{provider,model}`, the last usage record of
//! `data.stream`); every other value (the message's text, the stream's chunks: most of the
//! bytes of a log) is skipped by searching its strings for their closing quote, without
//! building anything. The small values found are then parsed by the real parser.
//!
//! Anything unusual (an escape in a key or in a model name, a number that is not a plain
//! integer, a structure that does not close) gives up, and the caller parses the line whole.
//! On a line of valid JSON the walk decides exactly as the parse (repeated keys keep the
//! last, as `JSON.parse` does; tested on every real log and on generated ones); the skipped
//! values' grammar is not checked, so a line damaged inside one (its brackets and quotes
//! still balanced) counts where the parse would call it unreadable.

use super::json::MAX_SAFE;

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
}

/// Gave up: parse the line instead.
struct Unusual;

type Walk<T> = Result<T, Unusual>;

struct Cur<'a> {
    b: &'a [u8],
    i: usize,
}

/// How deep the skipped values may nest before the walk gives up (the parser's own limit
/// then speaks).
const MAX_DEPTH: usize = 100;

impl<'a> Cur<'a> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Walk<()> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(Unusual)
        }
    }

    /// Past a string whose opening quote is at `i`; its body. Quote to quote: a quote after
    /// an odd run of backslashes is escaped (so the many `\n` of a text cost nothing).
    fn string(&mut self) -> Walk<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.i;
        loop {
            let Some(k) = memchr::memchr(b'"', &self.b[self.i..]) else {
                return Err(Unusual);
            };
            let end = self.i + k;
            // Most quotes follow no backslash: no run to count.
            if end == start || self.b[end - 1] != b'\\' {
                self.i = end + 1;
                return Ok(&self.b[start..end]);
            }
            let backslashes = self.b[start..end]
                .iter()
                .rev()
                .take_while(|&&c| c == b'\\')
                .count();
            self.i = end + 1;
            if backslashes % 2 == 0 {
                return Ok(&self.b[start..end]);
            }
        }
    }

    /// A string without escapes (a key, a name).
    fn plain_string(&mut self) -> Walk<&'a [u8]> {
        let s = self.string()?;
        match memchr::memchr(b'\\', s) {
            None => Ok(s),
            Some(_) => Err(Unusual),
        }
    }

    /// A plain integer (`-`? digits, no fraction, no exponent) of at most 2^53 − 1.
    fn int(&mut self) -> Walk<i64> {
        self.ws();
        let start = self.i;
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        let digits = self.i;
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        let n = self.i - digits;
        if n == 0 || n > 16 || (n > 1 && self.b[digits] == b'0') {
            return Err(Unusual);
        }
        if matches!(self.b.get(self.i), Some(b'.' | b'e' | b'E')) {
            return Err(Unusual);
        }
        // At most 16 digits: the sum cannot overflow, and no string is made to parse.
        let magnitude = self.b[digits..self.i]
            .iter()
            .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
        let negative = digits > start;
        if magnitude > MAX_SAFE || (negative && magnitude == 0) {
            return Err(Unusual);
        }
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

    /// Past an object or array, strings skipped whole, brackets counted.
    fn skip_container(&mut self) -> Walk<()> {
        let mut stack: Vec<u8> = Vec::new();
        loop {
            let Some(&c) = self.b.get(self.i) else {
                return Err(Unusual);
            };
            match c {
                b'"' => {
                    self.string()?;
                    continue;
                }
                b'{' | b'[' => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(Unusual);
                    }
                    stack.push(if c == b'{' { b'}' } else { b']' });
                }
                b'}' | b']' => {
                    if stack.pop() != Some(c) {
                        return Err(Unusual);
                    }
                    if stack.is_empty() {
                        self.i += 1;
                        return Ok(());
                    }
                }
                _ => {}
            }
            self.i += 1;
        }
    }

    /// The members of an object: `member(key, cur)` reads or skips each value.
    fn object(&mut self, mut member: impl FnMut(&[u8], &mut Cur<'a>) -> Walk<()>) -> Walk<()> {
        self.eat(b'{')?;
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
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

/// Walk an event line for what a call needs; `None`: parse it instead.
pub(super) fn walk(line: &[u8]) -> Option<Found<'_>> {
    let mut c = Cur { b: line, i: 0 };
    let mut f = Found::default();
    let top = c.object(|key, c| {
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
                let mut d = Found::default();
                c.maybe_object(|key, c| data_member(key, c, &mut d))?;
                f.turn = d.turn;
                f.step = d.step;
                f.usage = d.usage;
                f.provider = d.provider;
                f.model = d.model;
                f.stream_usage = d.stream_usage;
                f.header_provider = d.header_provider;
                f.header_model = d.header_model;
            }
            _ => {
                c.skip()?;
            }
        }
        Ok(())
    });
    if top.is_err() || c.peek().is_some() {
        return None;
    }
    Some(f)
}

fn data_member<'a>(key: &[u8], c: &mut Cur<'a>, d: &mut Found<'a>) -> Walk<()> {
    match key {
        b"turn" => d.turn = c.uint()?,
        b"step" => d.step = c.uint()?,
        b"usage" => d.usage = Some(c.skip()?),
        b"message" => {
            d.provider = None;
            d.model = None;
            c.maybe_object(|key, c| {
                if key == b"source" {
                    d.provider = None;
                    d.model = None;
                    c.maybe_object(|key, c| {
                        match key {
                            b"provider" => d.provider = c.name()?,
                            b"model" => d.model = c.name()?,
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
        }
        b"header" => {
            d.header_provider = None;
            d.header_model = None;
            c.maybe_object(|key, c| {
                if key == b"config" {
                    d.header_provider = None;
                    d.header_model = None;
                    c.maybe_object(|key, c| {
                        match key {
                            b"provider" => d.header_provider = c.name()?,
                            b"model" => d.header_model = c.name()?,
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
        }
        b"stream" => {
            d.stream_usage = None;
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
                if let Some(u) = record_usage(c)? {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            f.stream_usage,
            Some(Some(&br#"{"inputTokens":1,"outputTokens":1}"#[..]))
        );
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
    }
}

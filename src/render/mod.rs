//! Output policy: colour decisions, escaping untrusted text for a terminal, progress on
//! stderr, and the human and JSON renderers.

pub mod human;
pub mod json;
pub mod markdown;
pub mod summary;
pub mod surface;

use std::borrow::Cow;
use std::io::{self, BufRead, IsTerminal, Read, Write};
use std::time::{Duration, Instant};

use crate::cli::ColorChoice;

/// Whether to colour a stream (CLI.md: auto = a terminal, `NO_COLOR` unset or empty, `TERM`
/// not `dumb`).
pub fn use_color(choice: ColorChoice, is_terminal: bool) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            is_terminal
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
        }
    }
}

/// A closed reader of our output (`| head`) is not an error.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// Characters that must never reach a terminal raw: controls (C0, DEL, C1) and bidi
/// overrides.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}')
}

/// Multi-line text from a log (a transcript) made safe for a terminal: like [`escape`], but
/// newlines and tabs stay as they are (a `\r` before `\n` is dropped).
pub fn escape_keeping_lines(text: &str) -> Cow<'_, str> {
    let bad = |c: char| unsafe_char(c) && c != '\n' && c != '\t';
    if !text.chars().any(bad) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\r' => out.push_str("\\r"),
            c if bad(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Text from a log, made safe for a terminal: control characters (C0, DEL, C1) and bidi
/// overrides are shown as escapes, never sent raw.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if unsafe_char(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Formats event times (`time`: Unix epoch milliseconds) as local date-times. The zone is
/// looked up once (`TZ`, else the system's); times jiff cannot represent (beyond year ±9999)
/// print as the raw number.
pub struct Clock {
    zone: jiff::tz::TimeZone,
}

impl Clock {
    pub fn local() -> Clock {
        Clock {
            zone: jiff::tz::TimeZone::system(),
        }
    }

    /// `2026-11-29 13:45:01.123`, or None when the instant is out of range.
    pub fn format(&self, ms: i64) -> Option<String> {
        let ts = jiff::Timestamp::from_millisecond(ms).ok()?;
        let dt = self.zone.to_datetime(ts);
        Some(format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03}",
            dt.year(),
            dt.month(),
            dt.day(),
            dt.hour(),
            dt.minute(),
            dt.second(),
            dt.millisecond()
        ))
    }

    /// [`Clock::format`], or `@<ms>` when out of range.
    pub fn format_or_raw(&self, ms: i64) -> String {
        self.format(ms).unwrap_or_else(|| format!("@{ms}"))
    }
}

/// Reports how far a long read has come, on stderr, when stderr is a terminal.
pub struct Progress<R> {
    inner: R,
    label: String,
    total: Option<u64>,
    done: u64,
    last: Instant,
    shown: bool,
    enabled: bool,
}

const PROGRESS_EVERY: Duration = Duration::from_millis(200);
const PROGRESS_MIN_BYTES: u64 = 64 * 1024 * 1024;

impl<R> Progress<R> {
    /// Progress is shown only for inputs of known size ≥ 64 MiB, on a terminal, unless quiet.
    pub fn new(inner: R, label: &str, total: Option<u64>, quiet: bool) -> Self {
        let enabled =
            !quiet && io::stderr().is_terminal() && total.is_some_and(|t| t >= PROGRESS_MIN_BYTES);
        Progress {
            inner,
            label: label.to_owned(),
            total,
            done: 0,
            last: Instant::now(),
            shown: false,
            enabled,
        }
    }

    fn advance(&mut self, n: usize) {
        self.done += n as u64;
        if self.enabled && self.last.elapsed() >= PROGRESS_EVERY {
            self.last = Instant::now();
            self.shown = true;
            let total = self.total.unwrap_or(self.done).max(1);
            let pct = self.done.saturating_mul(100) / total;
            let _ = write!(
                io::stderr(),
                "\r{}: {} / {} ({pct}%)\x1b[K",
                escape(&self.label),
                human_bytes(self.done),
                human_bytes(total)
            );
        }
    }
}

impl<R> Drop for Progress<R> {
    fn drop(&mut self) {
        if self.shown {
            let _ = write!(io::stderr(), "\r\x1b[K");
        }
    }
}

impl<R: Read> Read for Progress<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.advance(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Progress<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        self.inner.consume(amt);
        self.advance(amt);
    }
}

pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_neutralises_terminal_controls() {
        assert_eq!(escape("plain é"), "plain é");
        assert_eq!(escape("a\x1b[31mred\nb"), "a\\u{1b}[31mred\\nb");
        assert_eq!(escape("x\u{202E}y\u{85}"), "x\\u{202e}y\\u{85}");
    }

    #[test]
    fn clock_formats_epoch_milliseconds_in_a_zone() {
        let utc = Clock {
            zone: jiff::tz::TimeZone::UTC,
        };
        assert_eq!(utc.format(0).as_deref(), Some("1970-01-01 00:00:00.000"));
        assert_eq!(
            utc.format(1_795_959_901_123).as_deref(),
            Some("2026-11-29 13:45:01.123")
        );
        assert_eq!(utc.format(-1).as_deref(), Some("1969-12-31 23:59:59.999"));
        assert_eq!(
            utc.format_or_raw(9_007_199_254_740_991),
            "@9007199254740991"
        );
        let plus2 = Clock {
            zone: jiff::tz::TimeZone::fixed(jiff::tz::offset(2)),
        };
        assert_eq!(plus2.format(0).as_deref(), Some("1970-01-01 02:00:00.000"));
    }

    #[test]
    fn transcript_escaping_keeps_lines_and_tabs() {
        assert_eq!(escape_keeping_lines("a\n\tb"), "a\n\tb");
        assert_eq!(
            escape_keeping_lines("a\r\n\x1b[2J\u{202E}\rb"),
            "a\n\\u{1b}[2J\\u{202e}\\rb"
        );
    }

    #[test]
    fn bytes_are_shown_in_binary_units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(1 << 30), "1.0 GiB");
    }
}

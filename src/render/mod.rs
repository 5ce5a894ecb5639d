//! Output policy: colour decisions, escaping untrusted text for a terminal, progress on
//! stderr, and the human and JSON renderers.

pub mod export;
pub mod grep;
pub mod human;
pub mod json;
pub mod markdown;
pub mod summary;
pub mod surface;
pub mod usage;

use std::borrow::Cow;
use std::io::{self, BufRead, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::cli::ColorChoice;

/// Whether to colour a stream (CLI.md: auto = a terminal, `NO_COLOR` unset or empty, `TERM`
/// not `dumb`).
pub fn use_color(choice: ColorChoice, is_terminal: bool) -> bool {
    color_decision(
        choice,
        is_terminal,
        std::env::var_os("NO_COLOR").as_deref(),
        std::env::var_os("TERM").as_deref(),
    )
}

/// [`use_color`] on explicit inputs (the values of `NO_COLOR` and `TERM`).
fn color_decision(
    choice: ColorChoice,
    is_terminal: bool,
    no_color: Option<&std::ffi::OsStr>,
    term: Option<&std::ffi::OsStr>,
) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            is_terminal && no_color.is_none_or(|v| v.is_empty()) && term.is_none_or(|t| t != "dumb")
        }
    }
}

/// Set once by `--quiet`: diagnostics go nowhere.
static QUIET: AtomicBool = AtomicBool::new(false);

/// `--quiet`: from now on [`diag!`] prints nothing (main calls this before any command runs).
pub fn silence() {
    QUIET.store(true, Ordering::Relaxed);
}

/// Where diagnostics (errors, warnings, notes, progress) go: stderr, or nowhere under
/// `--quiet`. Every message for people passes through here or [`diag!`], never `eprintln!`.
pub fn diag_stream() -> Box<dyn Write> {
    if QUIET.load(Ordering::Relaxed) {
        Box::new(io::sink())
    } else {
        Box::new(io::stderr().lock())
    }
}

/// `eprintln!` that obeys `--quiet`; a closed stderr is not worth failing over.
macro_rules! diag {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!($crate::render::diag_stream(), $($arg)*);
    }};
}
pub(crate) use diag;

/// Say an error on stderr, once: `dshs: error: <message>` with its causes (those the message
/// does not name already), escaped for the terminal. `main` says a command's error this way,
/// and commands that go on with other files say each file's error this way.
pub fn error(e: &anyhow::Error) {
    let first = e.to_string();
    let mut msg = escape(&first).into_owned();
    for cause in e.chain().skip(1) {
        // Most errors already name their cause (`cannot read X: <io error>`).
        let cause = cause.to_string();
        if !first.contains(&cause) {
            msg.push_str(&format!("\n  caused by: {}", escape(&cause)));
        }
    }
    diag!("dshs: error: {msg}");
}

/// [`error`] for a message.
pub fn error_message(message: &str) {
    error(&anyhow::anyhow!("{message}"));
}

/// A closed reader of our output (`| head`) is not an error: an `io::Error` anywhere in the
/// chain, or one inside a `serde_json::Error` (whose `source()` skips the `io::Error` itself,
/// so `serde_json::to_writer(out, …)?` into a closed pipe used to end as a failure).
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .is_some_and(|j| j.io_error_kind() == Some(io::ErrorKind::BrokenPipe))
    })
}

/// Characters that must never reach a terminal raw: controls (C0, DEL, C1), bidi overrides
/// and marks, line and paragraph separators (U+2028, U+2029: a line break to some
/// terminals and editors), and invisible characters that hide or join text unseen (U+200B
/// zero width space, U+2060–U+2064 word joiner and invisible operators, U+FEFF byte order
/// mark, U+FFF9–U+FFFB annotation marks). Zero width (non-)joiners stay: emoji and scripts
/// need them.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{061C}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{200B}'
                | '\u{2060}'..='\u{2064}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
        )
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
    // Printable ASCII is never unsafe: only what follows the first other byte is decoded.
    let plain = text
        .bytes()
        .position(|b| !(0x20..0x7f).contains(&b))
        .unwrap_or(text.len());
    if !text.get(plain..).unwrap_or(text).chars().any(unsafe_char) {
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

/// When a progress bar may be drawn (it is drawn only once a read has taken
/// [`PROGRESS_SHOW_AFTER`]): stderr is a terminal, not `--quiet`, the output is not JSON, stdout
/// is not a terminal the command writes to while it reads (the bar would tear its lines), and
/// the input is big enough to take that long: a file of at least [`PROGRESS_MIN_BYTES`], or
/// standard input (size unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressPolicy {
    pub stderr_is_terminal: bool,
    pub quiet: bool,
    pub json: bool,
    pub interleaves: bool,
}

impl ProgressPolicy {
    pub fn wants(&self, size: Option<u64>) -> bool {
        self.stderr_is_terminal
            && !self.quiet
            && !self.json
            && !self.interleaves
            && size.is_none_or(|s| s >= PROGRESS_MIN_BYTES)
    }
}

/// Files smaller than this are read in well under a second.
pub const PROGRESS_MIN_BYTES: u64 = 64 * 1024 * 1024;
/// The bar appears only when a read has taken this long.
pub const PROGRESS_SHOW_AFTER: Duration = Duration::from_secs(1);
/// At most ten redraws a second.
const PROGRESS_DRAW_EVERY: Duration = Duration::from_millis(100);
/// The clock is looked at once per this many bytes, not per line.
const PROGRESS_CHECK_BYTES: u64 = 1024 * 1024;

/// A reader that draws a progress bar on stderr (bytes read, rate, ETA) while it is read,
/// when [`ProgressPolicy::wants`] it; otherwise it only counts bytes.
pub struct Progress<R> {
    inner: R,
    label: String,
    total: Option<u64>,
    done: u64,
    start: Instant,
    next_check: u64,
    last_draw: Option<Instant>,
    enabled: bool,
}

impl<R> Progress<R> {
    pub fn new(inner: R, label: &str, total: Option<u64>, enabled: bool) -> Self {
        Progress {
            inner,
            label: escape(label).into_owned(),
            total,
            done: 0,
            start: Instant::now(),
            next_check: PROGRESS_CHECK_BYTES,
            last_draw: None,
            enabled,
        }
    }

    /// Count up to `done` bytes in all (for a count kept elsewhere).
    pub fn advance_to(&mut self, done: u64) {
        if let Some(n) = done.checked_sub(self.done) {
            self.advance(usize::try_from(n).unwrap_or(usize::MAX));
        }
    }

    fn advance(&mut self, n: usize) {
        self.done += n as u64;
        if !self.enabled || self.done < self.next_check {
            return;
        }
        self.next_check = self.done + PROGRESS_CHECK_BYTES;
        let now = Instant::now();
        let elapsed = now.duration_since(self.start);
        if elapsed < PROGRESS_SHOW_AFTER
            || self
                .last_draw
                .is_some_and(|t| now.duration_since(t) < PROGRESS_DRAW_EVERY)
        {
            return;
        }
        self.last_draw = Some(now);
        let line = progress_line(&self.label, self.done, self.total, elapsed);
        let _ = write!(diag_stream(), "\r{line}\x1b[K");
    }
}

/// One progress line: `name [#####-----] 312.0 MiB / 1.0 GiB  156.0 MiB/s  ETA 4s` (no bar
/// and no ETA when the size is unknown).
pub fn progress_line(label: &str, done: u64, total: Option<u64>, elapsed: Duration) -> String {
    const WIDTH: u64 = 24;
    let secs = elapsed.as_secs_f64().max(0.001);
    let rate = done as f64 / secs;
    let label = dshs::log::text::clip(label, 40);
    match total {
        Some(total) if total > 0 => {
            let done = done.min(total);
            let filled = (done * WIDTH / total) as usize;
            let eta = if rate >= 1.0 {
                format!("{}s", ((total - done) as f64 / rate).ceil() as u64)
            } else {
                "?".to_owned()
            };
            format!(
                "{label} [{}{}] {} / {}  {}/s  ETA {eta}",
                "#".repeat(filled),
                "-".repeat(WIDTH as usize - filled),
                human_bytes(done),
                human_bytes(total),
                human_bytes(rate as u64),
            )
        }
        _ => format!(
            "{label} {}  {}/s",
            human_bytes(done),
            human_bytes(rate as u64)
        ),
    }
}

impl<R> Drop for Progress<R> {
    fn drop(&mut self) {
        if self.last_draw.is_some() {
            let _ = write!(diag_stream(), "\r\x1b[K");
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
        assert_eq!(
            escape("a\u{2028}b\u{2029}c\u{FEFF}d\u{200B}e\u{2060}f"),
            "a\\u{2028}b\\u{2029}c\\u{feff}d\\u{200b}e\\u{2060}f"
        );
        assert_eq!(escape_keeping_lines("a\u{2028}b"), "a\\u{2028}b");
        // An emoji sequence keeps its joiner.
        assert_eq!(
            escape("\u{1F468}\u{200D}\u{1F469}"),
            "\u{1F468}\u{200D}\u{1F469}"
        );
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
    fn colour_follows_the_choice_the_terminal_no_color_and_term() {
        use std::ffi::OsStr;
        let on = |choice, tty, no_color: Option<&str>, term: Option<&str>| {
            color_decision(choice, tty, no_color.map(OsStr::new), term.map(OsStr::new))
        };
        assert!(on(ColorChoice::Auto, true, None, Some("xterm")));
        assert!(
            on(ColorChoice::Auto, true, Some(""), None),
            "empty NO_COLOR is unset"
        );
        assert!(!on(ColorChoice::Auto, true, Some("1"), Some("xterm")));
        assert!(!on(ColorChoice::Auto, true, None, Some("dumb")));
        assert!(!on(ColorChoice::Auto, false, None, Some("xterm")));
        assert!(on(ColorChoice::Always, false, Some("1"), Some("dumb")));
        assert!(!on(ColorChoice::Never, true, None, Some("xterm")));
    }

    #[test]
    fn progress_only_on_a_terminal_not_quiet_not_json_and_for_big_or_unknown_inputs() {
        let base = ProgressPolicy {
            stderr_is_terminal: true,
            quiet: false,
            json: false,
            interleaves: false,
        };
        let big = Some(PROGRESS_MIN_BYTES);
        assert!(base.wants(big));
        assert!(
            base.wants(None),
            "standard input: size unknown, shown if it takes long"
        );
        assert!(
            !base.wants(Some(PROGRESS_MIN_BYTES - 1)),
            "small files never"
        );
        assert!(!base.wants(Some(0)));
        for off in [
            ProgressPolicy {
                stderr_is_terminal: false,
                ..base
            },
            ProgressPolicy {
                quiet: true,
                ..base
            },
            ProgressPolicy { json: true, ..base },
            ProgressPolicy {
                interleaves: true,
                ..base
            },
        ] {
            assert!(!off.wants(big), "{off:?}");
            assert!(!off.wants(None), "{off:?}");
        }
    }

    #[test]
    fn progress_line_shows_bytes_rate_and_eta() {
        let mib = 1024 * 1024;
        let line = progress_line(
            "s.jsonl",
            256 * mib,
            Some(1024 * mib),
            Duration::from_secs(2),
        );
        assert_eq!(
            line,
            "s.jsonl [######------------------] 256.0 MiB / 1.0 GiB  128.0 MiB/s  ETA 6s"
        );
        let done = progress_line(
            "s.jsonl",
            1024 * mib,
            Some(1024 * mib),
            Duration::from_secs(8),
        );
        assert!(done.contains("[########################]") && done.ends_with("ETA 0s"));
        // Standard input: no size, so no bar and no ETA.
        assert_eq!(
            progress_line("-", 3 * mib, None, Duration::from_secs(3)),
            "- 3.0 MiB  1.0 MiB/s"
        );
        // A long name is clipped.
        let long = "x".repeat(100);
        assert!(
            progress_line(&long, 0, Some(10), Duration::ZERO)
                .starts_with(&format!("{}… [", "x".repeat(40)))
        );
    }

    #[test]
    fn progress_counts_what_is_read_and_draws_nothing_when_disabled() {
        let data = vec![b'x'; 3 * 1024 * 1024];
        let mut p = Progress::new(&data[..], "t", Some(data.len() as u64), false);
        let mut sink = Vec::new();
        io::copy(&mut p, &mut sink).unwrap();
        assert_eq!(p.done, data.len() as u64);
        assert!(p.last_draw.is_none());
        // Via BufRead too (the scan consumes lines).
        let mut p = Progress::new(io::BufReader::new(&data[..]), "t", None, false);
        let mut n = 0;
        loop {
            let len = p.fill_buf().unwrap().len();
            if len == 0 {
                break;
            }
            p.consume(len);
            n += len;
        }
        assert_eq!((p.done, n), (data.len() as u64, data.len()));
    }

    #[test]
    fn bytes_are_shown_in_binary_units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(1 << 30), "1.0 GiB");
    }
}

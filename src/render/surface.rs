//! `dshs surface` output: the JSON document of CLI.md, and a table for people whose columns
//! are fixed up front so it can be printed in chunks (memory does not follow the surface).

use std::borrow::Cow;

use comfy_table::{Attribute, Cell, CellAlignment, Color, ColumnConstraint, Table, Width};
use serde::ser::SerializeSeq;
use serde::{Serialize, Serializer};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use dshs::log::dialect::SurfaceKind;
use dshs::log::surface::{Replacement, SurfaceManager};

use super::escape;

/// `{"version":3,"nodes":[…],"replaceGeneration":1,"replacements":[…]}` (CLI.md, MUST).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SurfaceDocument<'a> {
    pub version: Option<i64>,
    pub nodes: NodeList<'a>,
    pub replace_generation: u64,
    pub replacements: ReplacementList<'a>,
}

/// The nodes in model order, serialized straight from the surface (no copy).
pub struct NodeList<'a>(pub &'a SurfaceManager);

#[derive(Serialize)]
struct NodeRecord<'a> {
    seq: u64,
    #[serde(rename = "type")]
    ty: &'static str,
    op: &'static str,
    role: Option<&'a str>,
}

impl Serialize for NodeList<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|n| NodeRecord {
            seq: n.seq,
            ty: n.kind.type_name(),
            op: n.op.as_str(),
            role: n.role,
        }))
    }
}

/// The replacement history, read back record by record as it is serialized.
pub struct ReplacementList<'a>(pub &'a SurfaceManager);

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReplacementRecord {
    seq: u64,
    start_seq: u64,
    end_seq: u64,
    shadowed_seqs: Vec<u64>,
}

impl Serialize for ReplacementList<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut list = s.serialize_seq(None)?;
        for r in self.0.each_replacement() {
            let r: Replacement = r.map_err(serde::ser::Error::custom)?;
            list.serialize_element(&ReplacementRecord {
                seq: r.seq,
                start_seq: r.start,
                end_seq: r.end,
                shadowed_seqs: r.shadowed,
            })?;
        }
        list.end()
    }
}

/// What the preview column shows for a node.
pub enum Preview {
    /// Escaped text, and how many columns it takes.
    Text(String, usize),
    /// The node keeps its place but derives no message (§12.1).
    NoMessage,
    /// The stored event has no message object where §12.1 looks.
    Missing,
}

#[cfg(test)]
impl Preview {
    /// Text already escaped and clipped.
    pub fn text(text: String) -> Self {
        let width = width_of(&text);
        Preview::Text(text, width)
    }
}

/// One table row, its texts already escaped.
pub struct Row<'a> {
    pub seq: u64,
    pub kind: SurfaceKind,
    pub role: Cow<'a, str>,
    pub op: Cow<'static, str>,
    pub replaced: bool,
    pub preview: Preview,
}

const HEADERS: [&str; 5] = ["seq", "type", "role", "op", "preview"];
const MAX_ROLE: usize = 12;
const MIN_PREVIEW: usize = 16;
/// A separator between columns, plus one space of padding on each side of every cell (the
/// last cell's right padding is the one extra column counted in `fixed`).
const PER_COLUMN: usize = 3;

/// Column widths decided before any row is rendered, so chunks line up.
pub struct TableLayout {
    widths: [usize; 4],
    preview: usize,
    color: bool,
}

impl TableLayout {
    /// The widest seq, role and op text of all rows; `width` is the space to fill.
    pub fn new(max_seq: u64, max_role: usize, max_op: usize, width: usize, color: bool) -> Self {
        let seq = max_seq.to_string().len().max(HEADERS[0].len());
        let ty = SurfaceKind::Developer
            .type_name()
            .len()
            .max(SurfaceKind::Assistant.type_name().len());
        let role = max_role.clamp(HEADERS[2].len(), MAX_ROLE);
        let op = max_op.max(HEADERS[3].len());
        let widths = [seq, ty, role, op];
        let fixed: usize = widths.iter().map(|w| w + PER_COLUMN).sum::<usize>() + 2;
        TableLayout {
            widths,
            preview: width.saturating_sub(fixed).max(MIN_PREVIEW),
            color,
        }
    }

    /// Characters the preview may take.
    pub fn preview_width(&self) -> usize {
        self.preview
    }

    /// The lines of a chunk of rows (with the header when `header`), each ended by `\n`,
    /// added to `out`.
    pub fn render_into(&self, rows: &[Row], header: bool, out: &mut Vec<u8>) {
        let start = out.len();
        if !self.render_plain(rows, header, out) {
            out.truncate(start);
            for line in self.render_table(rows, header) {
                out.extend_from_slice(line.as_bytes());
                out.push(b'\n');
            }
        }
    }

    /// [`TableLayout::render_into`] as lines (for tests).
    #[cfg(test)]
    pub fn render(&self, rows: &[Row], header: bool) -> Vec<String> {
        let mut out = Vec::new();
        self.render_into(rows, header, &mut out);
        let text = String::from_utf8(out).expect("lines are UTF-8");
        text.lines().map(str::to_owned).collect()
    }

    /// What [`TableLayout::render_table`] prints without colour when every cell fits its
    /// column (the usual case: cells are clipped to their columns), written directly into
    /// `out`: the table crate is slow per row. False when a cell would wrap (`out` then holds
    /// part of the chunk).
    fn render_plain(&self, rows: &[Row], header: bool, out: &mut Vec<u8>) -> bool {
        if self.color {
            return false;
        }
        let widths = [
            self.widths[0],
            self.widths[1],
            self.widths[2],
            self.widths[3],
            self.preview,
        ];
        out.reserve(rows.len() * (widths.iter().sum::<usize>() + 20));
        if header {
            if !plain_line(
                out,
                &HEADERS.map(|h| (h.as_bytes(), h.len())),
                &widths,
                false,
            ) {
                return false;
            }
            let rule: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
            out.extend_from_slice(rule.join("┼").trim_end().as_bytes());
            out.push(b'\n');
        }
        for r in rows {
            let mut digits = itoa::Buffer::new();
            let seq = digits.format(r.seq).as_bytes();
            let (role, role_width) = clip_measured(&r.role, MAX_ROLE);
            let preview = match &r.preview {
                Preview::Text(t, w) => (t.as_str(), *w),
                Preview::NoMessage => (NO_MESSAGE, NO_MESSAGE.len()),
                Preview::Missing => (NO_OBJECT, NO_OBJECT.len()),
            };
            let cells = [
                (seq, seq.len()),
                (r.kind.type_name().as_bytes(), r.kind.type_name().len()),
                (role.as_bytes(), role_width),
                (r.op.as_bytes(), width_of(&r.op)),
                (preview.0.as_bytes(), preview.1),
            ];
            if !plain_line(out, &cells, &widths, true) {
                return false;
            }
        }
        true
    }

    fn render_table(&self, rows: &[Row], header: bool) -> Vec<String> {
        let mut t = Table::new();
        t.load_preset("     ─┼ │          ");
        if self.color {
            t.enforce_styling();
        } else {
            t.force_no_tty();
        }
        let mut constraints: Vec<ColumnConstraint> = self
            .widths
            .iter()
            .map(|w| ColumnConstraint::Absolute(Width::Fixed(col(w + 2))))
            .collect();
        constraints.push(ColumnConstraint::Absolute(Width::Fixed(col(
            self.preview + 2
        ))));
        if header {
            t.set_header(
                HEADERS
                    .iter()
                    .map(|h| self.style(Cell::new(h), |c| c.add_attribute(Attribute::Bold))),
            );
        }
        for r in rows {
            let role_color = match r.kind {
                SurfaceKind::User => Color::Green,
                SurfaceKind::Assistant => Color::Blue,
                SurfaceKind::ToolResult => Color::Cyan,
                SurfaceKind::System => Color::Magenta,
                SurfaceKind::Developer => Color::Yellow,
            };
            let (preview, dim) = match &r.preview {
                Preview::Text(t, _) => (t.clone(), false),
                Preview::NoMessage => (NO_MESSAGE.to_owned(), true),
                Preview::Missing => (NO_OBJECT.to_owned(), true),
            };
            t.add_row(vec![
                Cell::new(r.seq).set_alignment(CellAlignment::Right),
                Cell::new(r.kind.type_name()),
                self.style(Cell::new(clip_width(&r.role, MAX_ROLE)), |c| {
                    c.fg(role_color)
                }),
                if r.replaced {
                    self.style(Cell::new(&r.op), |c| c.fg(Color::Yellow))
                } else {
                    Cell::new(&r.op)
                },
                if dim {
                    self.style(Cell::new(preview), |c| c.add_attribute(Attribute::Dim))
                } else {
                    Cell::new(preview)
                },
            ]);
        }
        t.set_constraints(constraints);
        t.lines().map(|l| l.trim_end().to_owned()).collect()
    }

    fn style(&self, cell: Cell, f: impl FnOnce(Cell) -> Cell) -> Cell {
        if self.color { f(cell) } else { cell }
    }
}

const NO_MESSAGE: &str = "(derives no message: empty content)";
const NO_OBJECT: &str = "(no message object)";

/// One line of cells padded to their columns (one space each side, the first cell of a row
/// aligned right), joined by `│`, trailing spaces cut, ended by `\n`, added to `out`; false
/// (and `out` as it was) when a cell does not fit.
fn plain_line(
    out: &mut Vec<u8>,
    cells: &[(&[u8], usize)],
    widths: &[usize; 5],
    first_right: bool,
) -> bool {
    let start = out.len();
    for (i, (&(text, used), w)) in cells.iter().zip(widths).enumerate() {
        if used > *w || memchr::memchr(b'\n', text).is_some() {
            out.truncate(start);
            return false;
        }
        if i > 0 {
            out.extend_from_slice("│".as_bytes());
        }
        out.push(b' ');
        let pad = w - used;
        if i == 0 && first_right {
            pad_with_spaces(out, pad);
            out.extend_from_slice(text);
        } else {
            out.extend_from_slice(text);
            pad_with_spaces(out, pad);
        }
        out.push(b' ');
    }
    let kept = start + trimmed_len(&out[start..]);
    out.truncate(kept);
    out.push(b'\n');
    true
}

/// The length of `line` (UTF-8) without its trailing whitespace, as `str::trim_end` counts it.
fn trimmed_len(line: &[u8]) -> usize {
    let mut end = line.len();
    while let Some(&last) = line[..end].last() {
        if last.is_ascii() {
            if !char::from(last).is_whitespace() {
                break;
            }
            end -= 1;
            continue;
        }
        // The start of the last character: back over its continuation bytes.
        let mut at = end - 1;
        while at > 0 && line[at] & 0xc0 == 0x80 && end - at < 4 {
            at -= 1;
        }
        match std::str::from_utf8(&line[at..end])
            .ok()
            .and_then(|c| c.chars().next())
        {
            Some(c) if c.is_whitespace() => end = at,
            _ => break,
        }
    }
    end
}

/// `n` spaces, copied a block at a time.
fn pad_with_spaces(line: &mut Vec<u8>, mut n: usize) {
    const SPACES: &[u8] = b"                                                                ";
    while n > 0 {
        let k = n.min(SPACES.len());
        line.extend_from_slice(&SPACES[..k]);
        n -= k;
    }
}

fn col(w: usize) -> u16 {
    u16::try_from(w).unwrap_or(u16::MAX)
}

/// Display width of text as a terminal shows it.
pub fn width_of(text: &str) -> usize {
    // Printable ASCII takes one column a byte (most previews): no table lookups.
    let Some(ascii) = text.bytes().position(|b| !(0x20..0x7f).contains(&b)) else {
        return text.len();
    };
    // Among printable ASCII, Latin-1 letters and signs, the preview's `…` and `→` and CJK
    // ideographs no sequence rule applies: such text is as wide as its characters (a test
    // checks every pair).
    let mut width = ascii;
    for c in text[ascii..].chars() {
        let Some(w) = simple_width(c) else {
            return UnicodeWidthStr::width(text);
        };
        width += w;
    }
    width
}

/// The columns of a character no sequence rule applies to (see [`width_of`]); `None` for
/// any other.
fn simple_width(c: char) -> Option<usize> {
    match c {
        ' '..='~' | '\u{a1}'..='\u{ac}' | '\u{ae}'..='\u{ff}' | '…' | '→' => Some(1),
        '\u{4e00}'..='\u{9fff}' => Some(2),
        _ => None,
    }
}

/// At most `max` terminal columns of `text`, with `…` when cut.
pub fn clip_width(text: &str, max: usize) -> String {
    clip_measured(text, max).0.into_owned()
}

/// [`clip_width`] (the text itself when it fits), and how many columns the result takes.
fn clip_measured(text: &str, max: usize) -> (Cow<'_, str>, usize) {
    // Text of the characters `width_of` counts one by one (the usual preview) is measured
    // and clipped in one pass. `keep` is where the first character that does not fit with
    // the `…` starts, and the columns before it; in a run of printable ASCII that is byte
    // `max - 1`, found without decoding.
    let ascii = text
        .bytes()
        .position(|b| !(0x20..0x7f).contains(&b))
        .unwrap_or(text.len());
    let first = max.saturating_sub(1);
    let mut keep = (first < ascii).then_some((first, first));
    let mut used = ascii;
    for (i, c) in text[ascii..].char_indices() {
        let i = ascii + i;
        let Some(w) = simple_width(c) else {
            return clip_any(text, max);
        };
        if keep.is_none() && used + w + 1 > max {
            keep = Some((i, used));
        }
        used += w;
    }
    match keep {
        Some((end, kept)) if used > max => {
            let mut cut = String::with_capacity(end + '…'.len_utf8());
            cut.push_str(&text[..end]);
            cut.push('…');
            (Cow::Owned(cut), kept + 1)
        }
        _ => (Cow::Borrowed(text), used),
    }
}

/// [`clip_measured`] of any text.
fn clip_any(text: &str, max: usize) -> (Cow<'_, str>, usize) {
    let width = width_of(text);
    if width <= max {
        return (Cow::Borrowed(text), width);
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = if (' '..='~').contains(&c) {
            1
        } else {
            c.width().unwrap_or(0)
        };
        if used + w + 1 > max {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    // Measured again: a sequence can take fewer columns than its characters one by one.
    let width = width_of(&out);
    (Cow::Owned(out), width)
}

/// A preview made one safe line: escaped, clipped to the column (the text itself, not a
/// copy, when it needs neither).
pub fn preview_text(text: String, max: usize) -> Preview {
    // Printable ASCII, perhaps ended by the `…` of a cut (the usual preview), needs no escape
    // and takes a column a byte: what the general path gives, without decoding.
    let body = text.strip_suffix('…').unwrap_or(&text);
    if body.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        let width = body.len() + usize::from(body.len() < text.len());
        if width <= max {
            return Preview::Text(text, width);
        }
        let keep = max.saturating_sub(1);
        let mut cut = String::with_capacity(keep + '…'.len_utf8());
        cut.push_str(&body[..keep]);
        cut.push('…');
        return Preview::Text(cut, keep + 1);
    }
    general_preview_text(text, max)
}

/// [`preview_text`] of any text.
fn general_preview_text(text: String, max: usize) -> Preview {
    let escaped = escape(&text);
    let (clipped, width) = clip_measured(&escaped, max);
    let changed = match (&escaped, clipped) {
        (Cow::Borrowed(_), Cow::Borrowed(_)) => None,
        (_, clipped) => Some(clipped.into_owned()),
    };
    Preview::Text(changed.unwrap_or(text), width)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipping_counts_terminal_columns() {
        assert_eq!(clip_width("abcdef", 6), "abcdef");
        assert_eq!(clip_width("abcdef", 4), "abc…");
        // Wide characters take two columns each.
        assert_eq!(clip_width("日本語テキスト", 7), "日本語…");
        assert!(width_of(&clip_width("日本語テキスト", 6)) <= 6);
        for t in ["plain text ~!", "tab\there", "é", "\u{7f}x", ""] {
            assert_eq!(width_of(t), UnicodeWidthStr::width(t), "{t:?}");
        }
    }

    #[test]
    fn one_pass_clipping_is_the_general_clipping() {
        let texts = [
            "",
            "a",
            "plain text of some length here",
            "café naïve → résumé…",
            "日本語テキスト and ascii",
            "mixed 日本 é x",
            "e\u{301}te\u{301} combining",
            "👩\u{200d}💻 emoji",
            "tab\there",
            "a run of printable ascii before 日本語 and é",
        ];
        for t in texts {
            for max in 0..40 {
                let got = clip_measured(t, max);
                assert_eq!(got, clip_any(t, max), "{t:?} at {max}");
                assert_eq!(got.1, width_of(&got.0), "{t:?} at {max}");
            }
        }
    }

    #[test]
    fn simple_text_is_as_wide_as_its_characters() {
        let simple: Vec<char> = (' '..='~')
            .chain('\u{a1}'..='\u{ac}')
            .chain('\u{ae}'..='\u{ff}')
            .chain(['…', '→'])
            .collect();
        let cjk: Vec<char> = ('\u{4e00}'..='\u{9fff}').collect();
        for &c in simple.iter().chain(&cjk) {
            let s = c.to_string();
            assert_eq!(width_of(&s), UnicodeWidthStr::width(s.as_str()), "{c:?}");
        }
        // Sequence rules look at neighbours: every pair of the small set, and pairs and
        // triples with ideographs spread over their block.
        let mut s = String::new();
        for &a in &simple {
            for &b in &simple {
                s.clear();
                s.extend([a, b]);
                assert_eq!(width_of(&s), UnicodeWidthStr::width(s.as_str()), "{s:?}");
            }
        }
        for (i, &a) in cjk.iter().enumerate().step_by(7) {
            for &b in simple.iter().chain(&cjk[i % 97..i % 97 + 3]) {
                let c = simple[i % simple.len()];
                for t in [[a, b, c], [b, a, c], [c, b, a]] {
                    s.clear();
                    s.extend(t);
                    assert_eq!(width_of(&s), UnicodeWidthStr::width(s.as_str()), "{s:?}");
                }
            }
        }
    }

    #[test]
    fn previews_are_escaped_before_clipping() {
        let Preview::Text(text, width) = preview_text("a\u{1b}[31mb".to_owned(), 40) else {
            panic!("a text preview");
        };
        assert_eq!(text, "a\\u{1b}[31mb");
        assert_eq!(width, width_of(&text));
        let Preview::Text(text, width) = preview_text("日本語テキスト".to_owned(), 7) else {
            panic!("a text preview");
        };
        assert_eq!((text.as_str(), width), ("日本語…", 7));
    }

    #[test]
    fn the_ascii_preview_is_the_general_preview() {
        let texts = [
            "",
            "a",
            "plain text of some length here",
            "ends in a cut…",
            "…",
            "x…y",
            "tab\there",
            "a\u{1b}[31mb",
            "del\u{7f}",
            "日本語テキスト…",
            "café…",
            "  spaces  ",
            "~!@#$%^&*()_+{}|:\"<>?",
        ];
        let shown = |p: Preview| match p {
            Preview::Text(t, w) => (t, w),
            _ => panic!("a text preview"),
        };
        for t in texts {
            for max in 0..40 {
                assert_eq!(
                    shown(preview_text(t.to_owned(), max)),
                    shown(general_preview_text(t.to_owned(), max)),
                    "{t:?} at {max}"
                );
            }
        }
    }

    #[test]
    fn plain_rows_are_the_table_crate_rows() {
        let texts = [
            "ends in wide space\u{3000}",
            "ends in nbsp\u{a0}",
            "hello",
            "",
            "日本語テキスト",
            "e\u{301}te\u{301}",
            "👩\u{200d}💻 emoji",
            "tab\\t and quote\"",
            "x",
            "a very long preview text that goes on and on past any column width there is",
            "  spaces  ",
        ];
        let mut n = 0;
        for (width, max_role, max_op) in [(80, 9, 12), (40, 4, 6), (200, 12, 20), (30, 12, 30)] {
            let layout = TableLayout::new(123_456, max_role, max_op, width, false);
            let mut rows = Vec::new();
            for (i, t) in texts.iter().enumerate() {
                for (j, preview) in [
                    preview_text(t.to_string(), layout.preview_width()),
                    Preview::text((*t).to_owned()),
                    Preview::NoMessage,
                    Preview::Missing,
                ]
                .into_iter()
                .enumerate()
                {
                    rows.push(Row {
                        seq: (i * 1000 + j) as u64,
                        kind: [SurfaceKind::User, SurfaceKind::ToolResult][j % 2],
                        role: clip_width(texts[(i + j) % texts.len()], 12).into(),
                        op: ["append", "replace 1..2", "replace 10..200"][(i + j) % 3].into(),
                        replaced: j % 2 == 1,
                        preview,
                    });
                }
            }
            for chunk in rows.chunks(1) {
                for header in [true, false] {
                    let mut plain = Vec::new();
                    if layout.render_plain(chunk, header, &mut plain) {
                        n += 1;
                        let lines: Vec<&str> = std::str::from_utf8(&plain)
                            .expect("UTF-8")
                            .lines()
                            .collect();
                        assert_eq!(lines, layout.render_table(chunk, header));
                    }
                }
            }
        }
        assert!(n > 100, "the plain path was taken {n} times");
    }

    #[test]
    fn rows_fit_the_width_and_chunks_line_up() {
        let layout = TableLayout::new(120, 9, 12, 80, false);
        let row = |seq, preview: &str| Row {
            seq,
            kind: SurfaceKind::User,
            role: "user".into(),
            op: "append".into(),
            replaced: false,
            preview: preview_text(preview.to_owned(), layout.preview_width()),
        };
        let first = layout.render(&[row(2, "hello"), row(120, &"x".repeat(200))], true);
        let second = layout.render(&[row(7, &"y".repeat(200))], false);
        assert_eq!(first.len(), 4, "{first:#?}");
        assert_eq!(second.len(), 1, "{second:#?}");
        for l in first.iter().chain(&second) {
            assert!(width_of(l) <= 80, "too wide ({}): {l}", width_of(l));
        }
        // The type column starts at the same place in both chunks.
        let at = |l: &str| l.find("user/message").unwrap();
        assert_eq!(at(&first[2]), at(&second[0]));
    }
}

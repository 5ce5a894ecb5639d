//! `dshs usage` output: the table people know from ccusage (key, models, input, cache read,
//! cache write, output, total, cost; a total line; `--breakdown` lines per model; fewer
//! columns on a narrow terminal, never wrapped numbers), and the JSON Lines of CLI.md.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use dshs::log::usage::Tokens;

use crate::render::escape;
use crate::render::human::Painter;

/// What a row (or a model within it, or the total) adds up to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sums {
    pub calls: u64,
    pub calls_without_usage: u64,
    pub tokens: Tokens,
    /// USD of the priced tokens.
    pub cost: f64,
    pub priced_tokens: u64,
    pub unpriced_tokens: u64,
    /// Calls with tokens and a price in force.
    pub priced_calls: u64,
    /// Calls of a model without a price in force (with or without tokens).
    pub unpriced_calls: u64,
}

impl Sums {
    pub fn add(&mut self, o: &Sums) {
        self.calls += o.calls;
        self.calls_without_usage += o.calls_without_usage;
        self.tokens.add(&o.tokens);
        self.cost += o.cost;
        self.priced_tokens += o.priced_tokens;
        self.unpriced_tokens += o.unpriced_tokens;
        self.priced_calls += o.priced_calls;
        self.unpriced_calls += o.unpriced_calls;
    }

    /// `None` only when no call was priced and some had no price (never a cost of 0 for
    /// them).
    pub fn cost_usd(&self) -> Option<f64> {
        (self.priced_calls > 0 || self.unpriced_calls == 0).then_some(self.cost)
    }
}

/// One row of the report.
#[derive(Debug, Clone, Default)]
pub struct Row {
    pub key: String,
    pub models: BTreeMap<String, Sums>,
    pub sums: Sums,
    /// `--by session`: the log read, the session, its parent and title.
    pub file: Option<String>,
    pub session: Option<String>,
    pub parent_session: Option<String>,
    pub title: Option<String>,
    /// Sub-agent levels below a parent listed above it.
    pub depth: usize,
}

impl Row {
    pub fn new(key: String, models: BTreeMap<String, Sums>) -> Row {
        let mut sums = Sums::default();
        for s in models.values() {
            sums.add(s);
        }
        Row {
            key,
            models,
            sums,
            ..Row::default()
        }
    }
}

/// The whole report.
#[derive(Debug, Clone)]
pub struct Report {
    pub by: &'static str,
    pub rows: Vec<Row>,
    pub total: Sums,
    pub sessions: u64,
    /// Costs were asked for (not `--no-cost`).
    pub costs: bool,
}

impl Report {
    /// The models whose tokens had no price, with how many tokens.
    pub fn unpriced(&self) -> BTreeMap<&str, u64> {
        let mut out = BTreeMap::new();
        for r in &self.rows {
            for (m, s) in &r.models {
                if s.unpriced_calls > 0 {
                    *out.entry(m.as_str()).or_default() += s.unpriced_tokens;
                }
            }
        }
        out
    }
}

/// A cost to a billionth of a dollar (no float noise in the JSON).
fn rounded(c: f64) -> f64 {
    (c * 1e9).round() / 1e9
}

/// Token buckets and their total under the names `usage --format json` and the export page
/// both use (flattened into their records, so the two cannot drift apart).
#[derive(Debug, Clone, Copy, Default)]
pub struct TokenColumns(pub Tokens);

impl Serialize for TokenColumns {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let t = &self.0;
        let mut record = s.serialize_struct("TokenColumns", 6)?;
        record.serialize_field("inputTokens", &t.input)?;
        record.serialize_field("cacheReadTokens", &t.cache_read)?;
        record.serialize_field("cacheWriteTokens", &t.cache_write)?;
        record.serialize_field("outputTokens", &t.output)?;
        record.serialize_field("reasoningTokens", &t.reasoning)?;
        record.serialize_field("totalTokens", &t.total())?;
        record.end()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Numbers {
    calls: u64,
    calls_without_usage: u64,
    #[serde(flatten)]
    tokens: TokenColumns,
    #[serde(rename = "costUSD", skip_serializing_if = "Option::is_none")]
    cost_usd: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    unpriced_tokens: Option<u64>,
}

impl Numbers {
    fn of(s: &Sums, costs: bool) -> Numbers {
        Numbers {
            calls: s.calls,
            calls_without_usage: s.calls_without_usage,
            tokens: TokenColumns(s.tokens),
            cost_usd: costs.then(|| s.cost_usd().map(rounded)),
            unpriced_tokens: costs.then_some(s.unpriced_tokens),
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonRow<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    by: &'static str,
    key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_session: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    #[serde(flatten)]
    numbers: Numbers,
    models: Vec<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonModel<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    by: &'static str,
    key: &'a str,
    model: &'a str,
    #[serde(flatten)]
    numbers: Numbers,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonTotal {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    numbers: Numbers,
    sessions: u64,
}

/// JSON Lines: one object per row (each followed by its models under `--breakdown`), then
/// the total.
pub fn write_json(out: &mut dyn Write, r: &Report, breakdown: bool) -> io::Result<()> {
    let mut line = |v: &dyn erased::Ser| -> io::Result<()> {
        v.write_to(&mut *out)?;
        out.write_all(b"\n")
    };
    for row in &r.rows {
        line(&JsonRow {
            kind: "row",
            by: r.by,
            key: &row.key,
            file: row.file.as_deref(),
            session: row.session.as_deref(),
            parent_session: row.parent_session.as_deref(),
            title: row.title.as_deref(),
            numbers: Numbers::of(&row.sums, r.costs),
            models: row.models.keys().map(String::as_str).collect(),
        })?;
        if breakdown {
            for (model, s) in &row.models {
                line(&JsonModel {
                    kind: "model",
                    by: r.by,
                    key: &row.key,
                    model,
                    numbers: Numbers::of(s, r.costs),
                })?;
            }
        }
    }
    line(&JsonTotal {
        kind: "total",
        numbers: Numbers::of(&r.total, r.costs),
        sessions: r.sessions,
    })
}

/// One object-safe way to write any of the line types.
mod erased {
    pub trait Ser {
        fn write_to(&self, out: &mut dyn std::io::Write) -> std::io::Result<()>;
    }
    impl<T: serde::Serialize> Ser for T {
        fn write_to(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
            serde_json::to_writer(out, self).map_err(std::io::Error::other)
        }
    }
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Dollars: cents for a dollar and up, four decimals below (DeepSeek calls cost little).
pub fn money(c: f64) -> String {
    if c > 0.0 && c < 0.000_05 {
        "<$0.0001".to_owned()
    } else if c >= 1.0 {
        format!("${c:.2}")
    } else {
        format!("${c:.4}")
    }
}

/// The table's look.
pub struct Table {
    pub color: bool,
    pub breakdown: bool,
    /// The terminal's width; `None`: no limit (a pipe).
    pub width: Option<usize>,
}

/// Columns, in order; the droppable ones go in [`DROP_ORDER`] when the table is too wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    Key,
    Models,
    Input,
    CacheRead,
    CacheWrite,
    Output,
    Total,
    Cost,
}

const DROP_ORDER: [Col; 5] = [
    Col::Models,
    Col::CacheWrite,
    Col::CacheRead,
    Col::Input,
    Col::Output,
];

impl Table {
    pub fn write(&self, out: &mut dyn Write, r: &Report) -> io::Result<()> {
        let painter = Painter { color: self.color };
        let unpriced = r.unpriced();
        let key_title = r.by.to_uppercase();
        let mut cols = vec![
            Col::Key,
            Col::Models,
            Col::Input,
            Col::CacheRead,
            Col::CacheWrite,
            Col::Output,
            Col::Total,
        ];
        if r.costs {
            cols.push(Col::Cost);
        }
        let title = |c: Col| match c {
            Col::Key => key_title.clone(),
            Col::Models => "MODELS".into(),
            Col::Input => "INPUT".into(),
            Col::CacheRead => "CACHE READ".into(),
            Col::CacheWrite => "CACHE WRITE".into(),
            Col::Output => "OUTPUT".into(),
            Col::Total => "TOTAL".into(),
            Col::Cost => "COST".into(),
        };
        let cost_cell = |s: &Sums| match s.cost_usd() {
            None => "unpriced".to_owned(),
            Some(c) if s.unpriced_tokens > 0 => format!("{}*", money(c)),
            Some(c) => money(c),
        };
        let cell = |c: Col, key: &str, models: &str, s: &Sums| -> String {
            match c {
                Col::Key => key.to_owned(),
                Col::Models => models.to_owned(),
                Col::Input => thousands(s.tokens.input),
                Col::CacheRead => thousands(s.tokens.cache_read),
                Col::CacheWrite => thousands(s.tokens.cache_write),
                Col::Output => thousands(s.tokens.output),
                Col::Total => thousands(s.tokens.total()),
                Col::Cost => cost_cell(s),
            }
        };
        // (kind, cells by column): 0 row, 1 model line, 2 total.
        let mut lines: Vec<(u8, Vec<(Col, String)>)> = Vec::new();
        for row in &r.rows {
            let indent = if row.depth > 0 {
                format!("{}└ ", "  ".repeat(row.depth - 1))
            } else {
                String::new()
            };
            let key = format!("{indent}{}", escape(&row.key));
            let models: Vec<String> = row.models.keys().map(|m| escape(m).into_owned()).collect();
            let models = models.join(", ");
            lines.push((
                0,
                cols.iter()
                    .map(|&c| (c, cell(c, &key, &models, &row.sums)))
                    .collect(),
            ));
            if self.breakdown {
                for (m, s) in &row.models {
                    let key = format!(" └ {}", escape(m));
                    lines.push((1, cols.iter().map(|&c| (c, cell(c, &key, "", s))).collect()));
                }
            }
        }
        let total_key = "TOTAL".to_owned();
        lines.push((
            2,
            cols.iter()
                .map(|&c| (c, cell(c, &total_key, "", &r.total)))
                .collect(),
        ));
        let width_of = |c: Col, lines: &[(u8, Vec<(Col, String)>)]| {
            lines
                .iter()
                .filter_map(|(_, cells)| cells.iter().find(|(k, _)| *k == c))
                .map(|(_, s)| s.chars().count())
                .chain([title(c).chars().count()])
                .max()
                .unwrap_or(0)
        };
        let mut shown = cols.clone();
        if let Some(limit) = self.width {
            let total_width = |shown: &[Col]| {
                shown.iter().map(|&c| width_of(c, &lines)).sum::<usize>()
                    + 2 * shown.len().saturating_sub(1)
            };
            for drop in DROP_ORDER {
                if total_width(&shown) <= limit {
                    break;
                }
                shown.retain(|&c| c != drop);
            }
        }
        let widths: Vec<usize> = shown.iter().map(|&c| width_of(c, &lines)).collect();
        let render = |cells: &[(Col, String)]| -> String {
            let mut s = String::new();
            let last = shown.len() - 1;
            for (i, (&c, w)) in shown.iter().zip(&widths).enumerate() {
                let text = cells
                    .iter()
                    .find(|(k, _)| *k == c)
                    .map_or("", |(_, t)| t.as_str());
                if i > 0 {
                    s.push_str("  ");
                }
                let pad = w.saturating_sub(text.chars().count());
                match c {
                    Col::Key | Col::Models if i == last => s.push_str(text),
                    Col::Key | Col::Models => {
                        s.push_str(text);
                        s.push_str(&" ".repeat(pad));
                    }
                    _ => {
                        s.push_str(&" ".repeat(pad));
                        s.push_str(text);
                    }
                }
            }
            s.trim_end().to_owned()
        };
        let header: Vec<(Col, String)> = cols.iter().map(|&c| (c, title(c))).collect();
        writeln!(out, "{}", painter.bold(&render(&header)))?;
        for (kind, cells) in &lines {
            let text = render(cells);
            let text = match kind {
                1 => painter.dim(&text),
                2 => painter.bold(&text),
                _ => text,
            };
            writeln!(out, "{text}")?;
        }
        let n = r.sessions;
        let mut foot = format!("{n} session{}", if n == 1 { "" } else { "s" });
        if r.total.calls_without_usage > 0 {
            let k = r.total.calls_without_usage;
            foot.push_str(&format!(
                "; {k} call{} without usage (tokens unknown, not counted)",
                if k == 1 { "" } else { "s" }
            ));
        }
        writeln!(out, "{}", painter.dim(&foot))?;
        if !unpriced.is_empty() {
            let list: Vec<String> = unpriced
                .iter()
                .map(|(m, n)| format!("{} ({} tokens)", escape(m), thousands(*n)))
                .collect();
            writeln!(
                out,
                "{}",
                painter.dim(&format!(
                    "* the cost leaves out calls of models without a price at their time: {}; add prices with --pricing FILE",
                    list.join(", ")
                ))
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn all_unpriced_is_null_some_unpriced_is_the_priced_part() {
        let all = Sums {
            unpriced_tokens: 5,
            unpriced_calls: 1,
            ..Sums::default()
        };
        assert_eq!(all.cost_usd(), None);
        let some = Sums {
            unpriced_tokens: 5,
            unpriced_calls: 1,
            priced_tokens: 5,
            priced_calls: 1,
            cost: 0.5,
            ..Sums::default()
        };
        assert_eq!(some.cost_usd(), Some(0.5));
    }
}

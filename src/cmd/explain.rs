//! `dshs explain [CODE]`: what a finding code means, why it matters, how to fix it.

use std::io::Write;

use anyhow::Result;
use comfy_table::{
    ColumnConstraint, ContentArrangement, Table, Width, presets::UTF8_FULL_CONDENSED,
};

use dshs::log::codes::{CATALOGUE, Code, CodeInfo, SeverityRule};

use crate::cli::ExplainArgs;
use crate::exit::{Failure, Outcome};
use crate::render::human::Painter;

use super::Env;

fn severity_short(rule: SeverityRule) -> &'static str {
    match rule {
        SeverityRule::Error => "error",
        SeverityRule::Warning => "warning",
        SeverityRule::Unsupported => "unsupported",
        SeverityRule::WarningInV0 => "W v0, E v1+",
        SeverityRule::Lifecycle => "W v0–2, E v3+",
    }
}

fn severity_text(rule: SeverityRule) -> &'static str {
    match rule {
        SeverityRule::Error => "error",
        SeverityRule::Warning => "warning",
        SeverityRule::Unsupported => "unsupported (error, exit 3)",
        SeverityRule::WarningInV0 => "warning in v0, error in v1+",
        SeverityRule::Lifecycle => "warning in v0–v2, error in v3+",
    }
}

pub fn run(args: &ExplainArgs, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    let painter = Painter {
        color: env.color_out,
    };
    let Some(name) = &args.code else {
        let mut table = Table::new();
        table
            .load_preset(UTF8_FULL_CONDENSED)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_header(vec!["code", "severity", "area", "meaning"]);
        if table.width().is_none() {
            // Not a terminal: wrap to COLUMNS (or 100) instead of one endless line per code.
            let width = std::env::var("COLUMNS")
                .ok()
                .and_then(|c| c.trim().parse::<u16>().ok())
                .filter(|w| *w >= 40)
                .unwrap_or(120);
            table.set_width(width);
        }
        let fixed = [41, 15, 18];
        for (i, w) in fixed.into_iter().enumerate() {
            if let Some(col) = table.column_mut(i) {
                col.set_constraint(ColumnConstraint::Absolute(Width::Fixed(w)));
            }
        }
        for info in CATALOGUE {
            table.add_row(vec![
                info.name,
                severity_short(info.severity),
                info.code_area(),
                first_sentence(info.meaning),
            ]);
        }
        writeln!(out, "{table}")?;
        writeln!(out, "Run `dshs explain CODE` for the rule and the fix.")?;
        return Ok(Outcome::Success);
    };
    let Some(code) = Code::from_name(name.trim()) else {
        let close: Vec<&str> = CATALOGUE
            .iter()
            .map(|c| c.name)
            .filter(|n| n.contains(name.trim()) || name.contains(n))
            .take(5)
            .collect();
        let hint = if close.is_empty() {
            "run `dshs explain` to list all codes".to_owned()
        } else {
            format!("did you mean {}?", close.join(", "))
        };
        return Err(Failure::usage(format!(
            "unknown finding code `{name}`; {hint}"
        )));
    };
    let info: &CodeInfo = code.info();
    writeln!(out, "{}", painter.bold(info.name))?;
    writeln!(out, "  severity: {}", severity_text(info.severity))?;
    writeln!(out, "  area:     {}", info.code_area())?;
    writeln!(out, "  rule:     {}", info.rule())?;
    if info.blocks_fold {
        writeln!(
            out,
            "  effect:   DSH cannot load the log; `surface` and `derive` refuse it"
        )?;
    }
    writeln!(out)?;
    writeln!(out, "What it means:\n  {}", info.meaning)?;
    writeln!(out)?;
    writeln!(out, "How to fix it:\n  {}", info.fix)?;
    Ok(Outcome::Success)
}

/// The first sentence of a meaning, for the one-row-per-code listing.
fn first_sentence(text: &str) -> &str {
    text.find(". ").map_or(text, |i| &text[..=i])
}

trait AreaName {
    fn code_area(&self) -> &'static str;
}

impl AreaName for CodeInfo {
    fn code_area(&self) -> &'static str {
        self.area.name()
    }
}

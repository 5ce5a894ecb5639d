//! `dshs man`: the manual page (roff), rendered from the CLI definition with clap_mangen, so
//! it cannot drift from `--help`. One page for the whole tool: the global options, then a
//! COMMANDS section with each command's synopsis, description, options and examples, then
//! EXIT STATUS (from `cli::EXIT_CODES`), EXAMPLES (`cli::EXAMPLES`) and ENVIRONMENT.
//!
//! The committed copy is `doc/dshs.1`; `scripts/gen-shell.sh` regenerates it with the
//! completion scripts, and `tests/shell.rs` fails when it drifts.

use std::io::Write;

use anyhow::Result;
use clap::CommandFactory;
use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, roman};

use crate::cli::{self, Cli};
use crate::exit::Outcome;

pub fn run(out: &mut dyn Write) -> Result<Outcome> {
    out.write_all(page().as_bytes())?;
    Ok(Outcome::Success)
}

/// Environment variables dshs reads.
const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "NO_COLOR",
        "When set and not empty, --color auto does not colour.",
    ),
    ("TERM", "When dumb, --color auto does not colour."),
    (
        "DSHS_KNOWN_TYPES",
        "Files declaring extra log-only event types, separated like PATH; see --known-types.",
    ),
    (
        "DSHS_THREADS",
        "Threads that read and parse a log, the one that folds it included (default: one per core, at most 4, one fewer for a pipe; 1: one thread reads, parses and folds line by line).",
    ),
    (
        "DSHS_MAX_LINE_BYTES",
        "The line-size guard: the longest line (plain or zstd log) or decoded SQLite row, in bytes, dshs reads (default 268435456). A longer one stops the command with exit 4; it is never called damage or cut.",
    ),
    (
        "DSHS_MAX_JSON_DEPTH",
        "The JSON depth guard: the deepest nesting of arrays and objects dshs reads (default 1000, at most 2000). Deeper JSON stops the command with exit 4; it is never called damage or cut.",
    ),
    ("TZ", "The time zone of the times `show` prints."),
    (
        "COLUMNS",
        "The width of tables when standard output is not a terminal.",
    ),
];

/// The whole page.
pub fn page() -> String {
    let mut cmd = Cli::command();
    cmd.build();
    let man = Man::new(cmd.clone());
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    let mut piece = |f: &dyn Fn(&mut Vec<u8>) -> std::io::Result<()>| {
        let mut buf = Vec::new();
        // Writing into a Vec cannot fail.
        let _ = f(&mut buf);
        pieces.push(buf);
    };
    // Our own title line: clap_mangen drops an empty date argument, which shifts the source
    // and manual into the wrong footer slots. No date: the committed page must not change by
    // itself.
    piece(&|w| {
        writeln!(
            w,
            ".TH DSHS 1 \"\" \"dshs {}\" \"User Commands\"",
            env!("CARGO_PKG_VERSION")
        )
    });
    piece(&|w| man.render_name_section(w));
    piece(&|w| man.render_synopsis_section(w));
    piece(&|w| man.render_description_section(w));
    piece(&|w| man.render_options_section(w));
    piece(&|w| w.write_all(commands(&cmd).as_bytes()));
    piece(&|w| tail().to_writer(w));

    // Every piece but the title starts with the same roff preamble; keep it once, first.
    let mut page = String::new();
    for (i, bytes) in pieces.iter().enumerate().skip(1) {
        let text = String::from_utf8_lossy(bytes);
        if i == 1 {
            page.push_str(&text[..text.len() - strip_preamble(&text).len()]);
            page.push_str(&String::from_utf8_lossy(&pieces[0]));
        }
        page.push_str(strip_preamble(&text));
    }
    ascii_roff(&page)
}

/// Non-ASCII characters as roff escapes (`–` → `\[u2013]`): groff without a preprocessor and
/// other man implementations then render them the same way.
fn ascii_roff(page: &str) -> String {
    let mut out = String::with_capacity(page.len() + 64);
    for c in page.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            out.push_str(&format!("\\[u{:04X}]", c as u32));
        }
    }
    out
}

/// Drop what comes before the first section or title macro.
fn strip_preamble(text: &str) -> &str {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.starts_with(".SH") || line.starts_with(".TH") {
            return &text[at..];
        }
        at += line.len();
    }
    text
}

/// Drop the `.SH` line a clap_mangen section starts with (and the preamble before it): the
/// section becomes part of a command's subsection.
fn body_of(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = strip_preamble(&text);
    match text.split_once('\n') {
        Some((first, rest)) if first.starts_with(".SH") => rest.to_owned(),
        _ => text.to_owned(),
    }
}

/// Our own roff, without the preamble (the page starts with it once).
fn roff_body(roff: &Roff) -> String {
    strip_preamble(&roff.render()).to_owned()
}

/// COMMANDS: one subsection per visible command.
fn commands(root: &clap::Command) -> String {
    let globals: Vec<clap::Id> = root
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| a.get_id().clone())
        .collect();
    let mut page = roff_body(Roff::new().control("SH", ["COMMANDS"]));
    for sub in root.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        // The global options and -h are described once, at the top.
        let mut sub = sub.clone();
        for id in globals.iter().chain([&clap::Id::from("help")]) {
            if sub.get_arguments().any(|a| a.get_id() == id) {
                sub = sub.mut_arg(id, |a| a.hide(true));
            }
        }
        let name = sub.get_bin_name().unwrap_or(sub.get_name()).to_owned();
        page.push_str(&roff_body(Roff::new().control("SS", [name.as_str()])));
        let man = Man::new(sub.clone());
        let mut synopsis = Vec::new();
        let _ = man.render_synopsis_section(&mut synopsis);
        let mut description = Vec::new();
        let _ = man.render_description_section(&mut description);
        let mut options = Vec::new();
        if sub.get_arguments().any(|a| !a.is_hide_set()) {
            let _ = man.render_options_section(&mut options);
        }
        page.push_str(&body_of(&synopsis));
        page.push_str(&roff_body(Roff::new().control("PP", [])));
        page.push_str(&body_of(&description));
        page.push_str(&body_of(&options));
        if let Some(after) = sub.get_after_long_help().or(sub.get_after_help()) {
            // The common exit-status table is the page's EXIT STATUS; others stay.
            let after = after.to_string().replace(cli::EXIT_CODES, "");
            let mut roff = Roff::new();
            roff.control("PP", []);
            preformatted(&mut roff, after.trim_end());
            page.push_str(&roff_body(&roff));
        }
    }
    page
}

/// EXIT STATUS, EXAMPLES, ENVIRONMENT.
fn tail() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    for (code, meaning) in cli::exit_table(cli::EXIT_CODES) {
        roff.control("TP", []);
        roff.text([bold(code)]);
        roff.text([roman(meaning)]);
    }
    roff.control("PP", []);
    roff.text([roman(
        "With several files the status is the worst one. show and stats print what they \
         can read in every case; their status says whether the log is valid.",
    )]);
    roff.control("SH", ["EXAMPLES"]);
    preformatted(
        &mut roff,
        cli::EXAMPLES.split_once('\n').map_or("", |x| x.1),
    );
    roff.control("SH", ["ENVIRONMENT"]);
    for (name, meaning) in ENVIRONMENT {
        roff.control("TP", []);
        roff.text([bold(*name)]);
        roff.text([roman(*meaning)]);
    }
    roff
}

/// Lines kept as they are (no filling), indented.
fn preformatted(roff: &mut Roff, text: &str) {
    roff.control("RS", []);
    roff.control("nf", []);
    for line in text.lines() {
        roff.text([roman(line)]);
    }
    roff.control("fi", []);
    roff.control("RE", []);
}

//! `dshs surface`: the current surface in model order, as a table or as the JSON document of
//! CLI.md; `--at SEQ` replays the log up to SEQ.

use std::borrow::Cow;
use std::io::{IsTerminal, Write};
use std::ops::Range;

use anyhow::{Context, Result};

use dshs::log::derive::{DeriveError, Deriver, MessageError};
use dshs::log::surface::{EntryOp, Node};

use crate::cli::{SurfaceArgs, SurfaceFormat};
use crate::exit::Outcome;
use crate::render::escape;
use crate::render::human::{Painter, plural};
use crate::render::surface::{
    NodeList, Preview, ReplacementList, Row, SurfaceDocument, TableLayout, clip_width,
    preview_text, width_of,
};

use super::Env;
use super::fold::{self, Folded, Want};

/// Rows rendered (and message lines fetched) at a time.
const CHUNK: usize = 256;
/// Width used when standard output is not a terminal and `COLUMNS` is not set.
const DEFAULT_WIDTH: usize = 120;

/// What this command's output is like (for the progress bar).
pub fn output(args: &SurfaceArgs) -> super::Output {
    super::Output {
        json: args.format == SurfaceFormat::Json,
        writes_while_reading: false,
    }
}

pub fn run(args: &SurfaceArgs, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    let env = &env.for_output(output(args));
    let want = Want {
        at: args.at,
        lines: args.format == SurfaceFormat::Table,
        // The full history is only printed in JSON; the table needs live ranges only.
        replacements: args.format == SurfaceFormat::Json,
    };
    // Previews are read from the lines themselves: the fold needs no more than envelopes.
    let folded = fold::load_light(&args.file, args.session.as_deref(), &want, env)?;
    match args.format {
        SurfaceFormat::Json => write_json(&folded, out)?,
        SurfaceFormat::Table => write_table(&folded, env, out)?,
    }
    Ok(if folded.invalid {
        Outcome::Invalid
    } else {
        Outcome::Success
    })
}

fn write_json(f: &Folded, out: &mut dyn Write) -> Result<()> {
    let surface = &f.state.surface;
    // The history is read back from its spool as it is written out; read it through once
    // first, so a failure cannot leave half a document on standard output.
    for r in surface.each_replacement() {
        r.context("cannot read back the replacement history")?;
    }
    let doc = SurfaceDocument {
        version: f.scan.version,
        nodes: NodeList(surface),
        replace_generation: surface.replace_generation(),
        replacements: ReplacementList(surface),
    };
    serde_json::to_writer(&mut *out, &doc)?;
    out.write_all(b"\n")?;
    Ok(())
}

fn terminal_width() -> usize {
    if std::io::stdout().is_terminal()
        && let Some(w) = comfy_table::Table::new().width()
    {
        return usize::from(w);
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse().ok())
        .filter(|&w: &usize| w > 0)
        .unwrap_or(DEFAULT_WIDTH)
}

fn write_table<'s>(f: &'s Folded, env: &Env, out: &mut dyn Write) -> Result<()> {
    let surface = &f.state.surface;
    // Looked up for replacing nodes only: most nodes are appended.
    let replaced = |n: &Node| match n.op {
        EntryOp::Replace => surface.replaced_range(n.seq),
        _ => None,
    };
    let op_text = |n: &Node| -> Cow<'static, str> {
        match replaced(n) {
            Some((s, e)) => Cow::Owned(format!("replace {s}..{e}")),
            None => Cow::Borrowed(n.op.as_str()),
        }
    };
    let role_text = |n: &Node<'s>| -> Cow<'s, str> { n.role.map_or(Cow::Borrowed("-"), escape) };
    // Rows are made on up to `workers` threads, each fetching its messages through a reader
    // of its own: fetching and previewing a message costs more than folding its event.
    let workers = output_workers(env);
    // Column widths, decided before the first row is printed.
    let measure = |at: Range<usize>| {
        let mut w = Widths::default();
        let mut last_role = None;
        for n in surface.iter_at(at) {
            w.max_seq = w.max_seq.max(n.seq);
            // Most nodes share one of a few stored roles: each is measured once in a row.
            let role = n.role.map(|r| (r.as_ptr(), r.len()));
            if role.is_none() || role != last_role {
                last_role = role;
                w.max_role = w.max_role.max(n.role.map_or(1, |r| width_of(&escape(r))));
            }
            w.max_op = w.max_op.max(match replaced(&n) {
                Some((s, e)) => "replace ..".len() + digits(s) + digits(e),
                None => n.op.as_str().len(),
            });
            w.silent += usize::from(!n.derives);
        }
        w
    };
    let len = surface.len();
    let w = if workers > 1 {
        std::thread::scope(|scope| {
            let first = scope.spawn(|| measure(0..len / 2));
            let second = measure(len / 2..len);
            first
                .join()
                .map(|first| first.merge(second))
                .map_err(|_| anyhow::anyhow!("a thread measuring the table failed"))
        })?
    } else {
        measure(0..len)
    };
    let layout = TableLayout::new(
        w.max_seq,
        w.max_role,
        w.max_op,
        terminal_width(),
        env.color_out,
    );

    let mut derivers = Vec::new();
    if let Some(path) = &f.lines {
        for _ in 0..workers {
            derivers.push(Deriver::open(path).with_context(|| {
                format!("cannot reopen {} to read its messages", escape(&f.name))
            })?);
        }
    }
    let place = f.place();
    let row_of = |n: &Node<'s>, deriver: Option<&mut Deriver>| -> Result<Row<'s>> {
        Ok(Row {
            seq: n.seq,
            kind: n.kind,
            role: role_text(n),
            op: op_text(n),
            replaced: n.op == EntryOp::Replace,
            preview: preview_of(place, n, deriver, layout.preview_width())?,
        })
    };
    // The lines of chunk `index`, the header with the first (an empty surface has that one
    // chunk alone).
    let chunks = len.div_ceil(CHUNK).max(1);
    let chunk_lines = |index: usize, mut deriver: Option<&mut Deriver>| -> Result<Vec<u8>> {
        let rows = surface
            .iter_at(index * CHUNK..((index + 1) * CHUNK).min(len))
            .map(|n| row_of(&n, deriver.as_deref_mut()))
            .collect::<Result<Vec<Row>>>()?;
        let mut lines = Vec::new();
        layout.render_into(&rows, index == 0, &mut lines);
        Ok(lines)
    };
    if derivers.len() > 1 {
        write_in_parallel(chunks, &mut derivers, &chunk_lines, out)?;
    } else {
        for index in 0..chunks {
            out.write_all(&chunk_lines(index, derivers.first_mut())?)?;
        }
    }
    if !env.quiet {
        let painter = Painter {
            color: env.color_out,
        };
        writeln!(out, "{}", painter.dim(&summary(f, w.silent)))?;
    }
    Ok(())
}

/// What the table's columns must hold, over some of its rows.
#[derive(Default, Clone, Copy)]
struct Widths {
    max_seq: u64,
    max_role: usize,
    max_op: usize,
    /// Rows that derive no message.
    silent: usize,
}

impl Widths {
    fn merge(self, other: Widths) -> Widths {
        Widths {
            max_seq: self.max_seq.max(other.max_seq),
            max_role: self.max_role.max(other.max_role),
            max_op: self.max_op.max(other.max_op),
            silent: self.silent + other.silent,
        }
    }
}

/// Makes the lines of one chunk of table rows, by number, through a deriver.
type ChunkLines<'a> = dyn Fn(usize, Option<&mut Deriver>) -> Result<Vec<u8>> + Sync + 'a;

/// The lines of `chunks` chunks of table rows, each made by `chunk_lines` on one thread per
/// deriver, while this thread hands out the chunks and writes their lines in order. Lines are
/// written a batch (a chunk per thread) at a time, and a row that fails stops the output
/// before its batch, wherever the failing row lies in it.
fn write_in_parallel(
    chunks: usize,
    derivers: &mut [Deriver],
    chunk_lines: &ChunkLines,
    out: &mut dyn Write,
) -> Result<()> {
    type Made = Result<Vec<u8>>;
    let workers = derivers.len();
    // Chunks handed out and not written yet: a slow chunk holds up at most this many.
    let limit = 4 * workers;
    std::thread::scope(|scope| -> Result<()> {
        // Made here, so that any way out of this closure closes them and the threads end.
        let (jobs, taken) = crossbeam_channel::bounded::<usize>(limit);
        let (made, finished) = crossbeam_channel::unbounded::<(usize, Made)>();
        for d in derivers.iter_mut() {
            let (taken, made) = (taken.clone(), made.clone());
            dshs::log::limits::spawn_scoped(scope, move || {
                for index in taken {
                    let lines = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        chunk_lines(index, Some(&mut *d))
                    }))
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a thread making table rows failed")));
                    if made.send((index, lines)).is_err() {
                        return;
                    }
                }
            });
        }
        drop((taken, made));
        let (mut sent, mut written) = (0, 0);
        let mut waiting = std::collections::BTreeMap::<usize, Made>::new();
        loop {
            while sent - written < limit && sent < chunks {
                if jobs.send(sent).is_err() {
                    return Err(anyhow::anyhow!("a thread making table rows failed"));
                }
                sent += 1;
            }
            let all_sent = sent == chunks;
            // Every batch made by now, in order (the last may be short). Until the chunks run
            // out, `limit` chunks are out after the hand-out above and whole batches leave,
            // so what stays out is a whole number of batches: if one is not written, a chunk
            // of it is still being made, and the wait below ends.
            loop {
                let end = (written + workers).min(sent);
                let whole = end == written + workers || all_sent;
                if end == written || !whole || (written..end).any(|i| !waiting.contains_key(&i)) {
                    break;
                }
                let mut batch = Vec::with_capacity(end - written);
                for i in written..end {
                    match waiting.remove(&i) {
                        Some(Ok(lines)) => batch.push(lines),
                        Some(Err(e)) => return Err(e),
                        None => unreachable!("every chunk of the batch was checked above"),
                    }
                }
                for lines in &batch {
                    out.write_all(lines)?;
                }
                written = end;
            }
            if written == sent {
                if !all_sent {
                    // Everything handed out is written: hand out more before waiting.
                    continue;
                }
                return Ok(());
            }
            match finished.recv() {
                Ok((index, lines)) => {
                    waiting.insert(index, lines);
                }
                Err(_) => return Err(anyhow::anyhow!("a thread making table rows failed")),
            }
        }
    })
}

/// Threads that make table rows: as many as the scan would parse on, at most 2 (one more
/// reader of the file each).
fn output_workers(env: &Env) -> usize {
    let n = match env.threads {
        0 => std::env::var(dshs::log::scan::THREADS_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        n => n,
    };
    n.clamp(1, 2)
}

fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// The preview column of one node.
fn preview_of(
    place: fold::Place<'_>,
    n: &Node,
    deriver: Option<&mut Deriver>,
    width: usize,
) -> Result<Preview> {
    if !n.derives {
        return Ok(Preview::NoMessage);
    }
    let Some(deriver) = deriver else {
        return Ok(Preview::Text(String::new(), 0));
    };
    // Ask the core for a little more than fits, so a cut shows as `…`.
    let text = match deriver.preview(n, width + 1) {
        Ok(text) => text,
        Err(DeriveError::Message {
            source: MessageError::Missing(_),
            ..
        }) => return Ok(Preview::Missing),
        Err(e) => return Err(place.reread_failure(n, &e)),
    };
    Ok(preview_text(text, width))
}

/// `FILE: v4, 5 surface nodes after seq 26, replace generation 1`, plus what was left out.
fn summary(f: &Folded, silent: usize) -> String {
    let surface = &f.state.surface;
    let version = f
        .scan
        .version
        .map_or_else(|| "version ?".to_owned(), |v| format!("v{v}"));
    let after = match f.after_seq() {
        Some(seq) => format!(" after seq {seq}"),
        None => String::new(),
    };
    let nodes = surface.len();
    let mut text = format!(
        "{}: {version}, {nodes} surface node{}{after}, replace generation {}",
        clip_width(&escape(&f.name), 80),
        plural(nodes as u64),
        surface.replace_generation()
    );
    if silent > 0 {
        text.push_str(&format!(", {silent} deriving no message"));
    }
    if let Some(c) = f.scan.crash {
        text.push_str(&format!(
            "; crash tail of {} row{} ignored",
            c.rows,
            plural(c.rows)
        ));
    }
    if f.scan.torn.is_some() {
        text.push_str("; torn final line ignored");
    }
    if f.scan.tally.errors > 0 {
        text.push_str(&format!(
            "; validate reports {} error{}",
            f.scan.tally.errors,
            plural(f.scan.tally.errors)
        ));
    }
    text
}

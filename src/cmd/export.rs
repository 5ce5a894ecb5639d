//! `dshs export`: a session as one self-contained web page (CLI.md "export").
//!
//! The log is folded once, as `derive` folds it, with an observer that keeps what the
//! surface forgets: where each node that ever joined the surface lies in the file (to show
//! the history a replacement shadowed), turns, the title and the latest tool definitions.
//! Messages are then read back from their lines in page order, byte-for-byte as `derive`
//! gives them. Several sessions (or a storage root) go to a directory with an index.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_channel::Sender;

use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::value::RawValue;

use dshs::log::derive::{DeriveError, Deriver, MessageError, Stored};
use dshs::log::event::Kind;
use dshs::log::json::Json;
use dshs::log::scan::{EventInfo, FoldState, Observer};
use dshs::log::usage;
use dshs::log::{Pos, Severity, Sink, input};

use crate::cli::{ExportArgs, TurnRange};
use crate::exit::{Failure, Outcome};
use crate::render::escape;
use crate::render::export::{self as page, Facts, Link};
use crate::render::usage::TokenColumns;

use super::Env;
use super::fold::{self, Want};

/// What this command's output is like (for the progress bar).
pub fn output(_args: &ExportArgs) -> super::Output {
    super::Output {
        json: true,
        writes_while_reading: false,
    }
}

/// At most this many findings are shown on a page (the count of the rest is said).
const KEEP_FINDINGS: usize = 2000;

pub fn run(args: &ExportArgs, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    let env = &env.for_output(output(args));
    let many = args.paths.len() > 1
        || args.paths.iter().any(|p| is_root(Path::new(p)))
        || args.output.as_deref().is_some_and(Path::is_dir);
    if !many {
        let path = &args.paths[0];
        let made = match &args.output {
            None => export_one(path, args, env, &Links::default(), out)?,
            Some(file) => export_file(path, args, env, &Links::default(), file)?,
        };
        say_redacted(&made.name, made.redacted);
        return Ok(made.outcome);
    }
    let Some(dir) = &args.output else {
        return Err(Failure::usage(
            "several sessions (or a storage root) make a directory of pages: name it with -o DIR",
        ));
    };
    export_many(args, dir, env)
}

fn say_redacted(name: &str, redacted: Option<u64>) {
    if let Some(n) = redacted.filter(|n| *n > 0) {
        crate::render::diag!(
            "dshs: note: {}: {n} secret{} redacted in the page (--no-redact keeps them)",
            escape(name),
            crate::render::human::plural(n)
        );
    }
}

/// A directory holding session directories rather than being one.
fn is_root(path: &Path) -> bool {
    path.is_dir()
        && input::find_sessions(path)
            .is_ok_and(|s| s.len() != 1 || s.first().is_some_and(|d| d != path))
}

/// Links of a page to its parent and sub-agent pages (directory exports only).
#[derive(Default)]
struct Links {
    parent: Option<Link>,
    children: Vec<Link>,
}

struct Made {
    name: String,
    /// Secrets masked (None: `--no-redact`).
    redacted: Option<u64>,
    outcome: Outcome,
    /// For the index.
    row: Row,
}

#[derive(Default, Clone)]
struct Row {
    title: Option<String>,
    session: Option<String>,
    created: Option<i64>,
    turns: usize,
    messages: usize,
    errors: u64,
    warnings: u64,
    tokens: Option<page::Tokens>,
}

/// [`export_one`] into `file`, through a temporary file beside it renamed over it once
/// complete: a reader never sees half a page, and a failure leaves no partial file. A
/// device or FIFO (`-o /dev/stdout`) is written as it goes: it cannot be renamed over.
fn export_file(
    path: &str,
    args: &ExportArgs,
    env: &Env,
    links: &Links,
    file: &Path,
) -> Result<Made> {
    let Some(file) = &replaced(file)? else {
        let fail = |e: std::io::Error| cannot("write", file, e);
        let stream = std::fs::OpenOptions::new()
            .write(true)
            .open(file)
            .map_err(fail)?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, stream);
        let made = export_one(path, args, env, links, &mut w)?;
        w.flush().map_err(fail)?;
        return Ok(made);
    };
    let mut tmp = temp_beside(file)?;
    let fail = |e: std::io::Error| cannot("write", file, e);
    let early = tmp.as_file().try_clone().ok();
    let synced = std::sync::Mutex::new(Ok(()));
    let made = std::thread::scope(|scope| {
        // What is written is synced behind the writer as it goes, so the sync before the
        // rename has only the last part left to wait for.
        let (ask, asked) = crossbeam_channel::bounded::<()>(1);
        if let Some(early) = early {
            let synced = &synced;
            let _ = std::thread::Builder::new().spawn_scoped(scope, move || {
                for () in asked {
                    if let Err(e) = early.sync_data() {
                        // Kept: a sync that fails may not fail again for the last one.
                        *synced.lock().unwrap_or_else(|p| p.into_inner()) = Err(e);
                        return;
                    }
                }
            });
        }
        let ahead = SyncBehind {
            file: tmp.as_file_mut(),
            written: 0,
            ask,
        };
        let mut w = std::io::BufWriter::with_capacity(1 << 20, ahead);
        let made = export_one(path, args, env, links, &mut w)?;
        w.flush().map_err(fail)?;
        Ok::<_, anyhow::Error>(made)
    })?;
    synced
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .map_err(fail)?;
    publish(tmp, file)?;
    Ok(made)
}

/// Bytes written to a page file between two syncs behind the writer.
const SYNC_EVERY: u64 = 32 << 20;

/// The page's file, asking for a sync of what it holds each [`SYNC_EVERY`] bytes (a request
/// made while one runs is dropped: the next covers it).
struct SyncBehind<'a> {
    file: &'a mut std::fs::File,
    written: u64,
    ask: Sender<()>,
}

impl Write for SyncBehind<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        let before = self.written;
        self.written += n as u64;
        if self.written / SYNC_EVERY > before / SYNC_EVERY {
            let _ = self.ask.try_send(());
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// A complete temporary file, synced, renamed over `path`. A temporary file is private
/// (0600); the page gets the mode of the file it replaces, or the usual 0644.
fn publish(tmp: tempfile::NamedTempFile, path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).map_or(0o644, |m| m.permissions().mode() & 0o777);
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(mode))
            .map_err(|e| cannot("write", path, e))?;
    }
    tmp.as_file()
        .sync_all()
        .map_err(|e| cannot("write", path, e))?;
    tmp.persist(path)
        .map_err(|e| cannot("rename into", path, e.error))?;
    Ok(())
}

/// Folds the log at `path` and writes its page to `out`.
fn export_one(
    path: &str,
    args: &ExportArgs,
    env: &Env,
    links: &Links,
    out: &mut dyn Write,
) -> Result<Made> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        // The tokens are counted by a pass of their own: over a plain log, on a thread beside
        // the fold (whose second thread is mostly idle), else afterwards from the fold's copy.
        let early = plain_log(path, args).and_then(|file| {
            let stop = &stop;
            std::thread::Builder::new()
                .stack_size(dshs::log::limits::THREAD_STACK)
                .spawn_scoped(scope, move || {
                    let counted = usage_of(&file, args.at, stop);
                    (file, counted)
                })
                .ok()
        });
        let made = export_folded(path, args, env, links, out, early);
        // On an early error the count is of no use: it ends at its next read.
        stop.store(true, Ordering::Relaxed);
        made
    })
}

type Counted = (HashMap<i64, page::Tokens>, Option<page::Tokens>);

/// The file a plain log named by `path` is read from, when the tokens can be counted from
/// it while the fold reads it (not standard input, a store, or a zstd log).
fn plain_log(path: &str, args: &ExportArgs) -> Option<PathBuf> {
    if args.session.is_some() || path == "-" {
        return None;
    }
    let file = input::resolve(Path::new(path)).ok()?;
    // Looked at before it is opened: opening a FIFO would wait for its writer, and reading
    // it would take bytes from the fold.
    if !std::fs::metadata(&file).ok()?.is_file() {
        return None;
    }
    let mut first = [0u8; 1];
    let mut f = std::fs::File::open(&file).ok()?;
    (f.metadata().ok()?.is_file() && f.read_exact(&mut first).is_ok() && first[0] == b'{')
        .then_some(file)
}

/// [`export_one`] once the tokens are being counted (`early`, over the file it names).
fn export_folded(
    path: &str,
    args: &ExportArgs,
    env: &Env,
    links: &Links,
    out: &mut dyn Write,
    early: Option<std::thread::ScopedJoinHandle<'_, (PathBuf, Counted)>>,
) -> Result<Made> {
    let want = Want {
        at: args.at,
        lines: true,
        replacements: true,
    };
    let mut seen = Collect::default();
    let mut findings = Findings::default();
    let folded = fold::load_observed(
        path,
        args.session.as_deref(),
        &want,
        env,
        Some(&mut findings),
        &mut seen,
    )?;
    let lines = folded
        .lines
        .as_deref()
        .context("the log has no file to read messages from")?;

    // What each replacement shadowed; the nodes of the surface, kept with the others.
    let replacements = folded
        .state
        .surface
        .replacements()
        .map_err(|e| super::read_failure(&folded.name, &e))?;
    let shadowed: HashMap<u64, Vec<u64>> = replacements
        .into_iter()
        .map(|r| (r.seq, r.shadowed))
        .collect();
    let surface: Vec<u64> = folded.state.surface.iter().map(|n| n.seq).collect();
    for node in folded.state.surface.iter() {
        seen.nodes.entry(node.seq).or_insert_with(|| Seen {
            stored: Stored::of(&node),
            time: 0,
            turn: None,
        });
    }

    let header = folded.scan.header.as_ref();
    let title = seen
        .title
        .clone()
        .or_else(|| header.and_then(|h| h.id.clone()))
        .unwrap_or_else(|| folded.name.clone());
    let mut page = page::PageWriter::start(out, &title, !args.no_redact)?;
    // Pre-order: each node, then what it replaced (one level deeper), in surface order.
    let mut order: Vec<Planned<'_>> = Vec::new();
    let mut todo: Vec<(u64, u32)> = surface.iter().rev().map(|s| (*s, 0)).collect();
    while let Some((seq, depth)) = todo.pop() {
        let Some(rec) = seen.nodes.get(&seq) else {
            continue;
        };
        if depth == 0
            && let Some(range) = args.turn
            && !rec.turn.is_some_and(|t| range.contains(t))
        {
            continue;
        }
        let under = shadowed.get(&seq).map_or(&[][..], Vec::as_slice);
        order.push(Planned {
            seq,
            depth,
            replaced: under.len(),
            rec,
        });
        for s in under.iter().rev() {
            todo.push((*s, depth + 1));
        }
    }
    let messages = write_nodes(
        &mut page,
        &order,
        lines,
        &folded.name,
        !args.no_redact,
        (workers(env), CHUNK_BYTES),
    )?;
    drop(order);

    let (tools, system) = match seen.header_at {
        Some(pos) => request_header(lines, pos),
        None => (None, None),
    };
    let early = early.and_then(|h| h.join().ok());
    let (by_turn, mut tokens) = match early {
        Some((file, counted)) if folded.lines.as_deref() == Some(file.as_path()) => counted,
        _ => usage_of(lines, args.at, &AtomicBool::new(false)),
    };
    let turns: Vec<page::Turn> = seen
        .turns
        .iter()
        .filter(|t| args.turn.is_none_or(|r: TurnRange| r.contains(t.n)))
        .map(|t| page::Turn {
            usage: by_turn.get(&t.n).cloned(),
            ..t.clone()
        })
        .collect();
    if args.turn.is_some() {
        // The session's figure is that of the turns shown.
        tokens = (!turns.is_empty()).then(|| {
            let mut sum = page::Tokens::default();
            for u in turns.iter().filter_map(|t| t.usage.as_ref()) {
                add_tokens(&mut sum, u);
            }
            sum
        });
    }
    let (errors, warnings) = findings.counts;
    let facts = Facts {
        title: seen.title.clone(),
        session: header.and_then(|h| h.id.clone()),
        version: header.map(|h| h.version),
        file: folded.name.clone(),
        at: args.at,
        created: header.and_then(|h| h.created_at),
        cwd: header.and_then(|h| h.cwd.clone()),
        tools,
        system,
        turns,
        tokens,
        findings: findings.kept,
        findings_omitted: findings.more,
        parent_page: links.parent.clone(),
        children: links.children.clone(),
    };
    let row = Row {
        // The index is a page too: what the pages mask, it masks.
        title: facts.title.as_deref().map(|t| masked(t, !args.no_redact)),
        session: facts.session.clone(),
        created: facts.created,
        turns: facts.turns.len(),
        messages,
        errors,
        warnings,
        tokens: facts.tokens.clone(),
    };
    let (_, redacted) = page.finish(&facts)?;
    Ok(Made {
        name: folded.name.clone(),
        redacted,
        outcome: if folded.invalid {
            Outcome::Invalid
        } else {
            Outcome::Success
        },
        row,
    })
}

/// A node of the page, in page order.
struct Planned<'a> {
    seq: u64,
    depth: u32,
    replaced: usize,
    rec: &'a Seen,
}

/// Nodes encoded as one piece of work.
const CHUNK: usize = 64;
/// Past this many bytes a piece of work is handed over as it stands and the writer encodes
/// the rest of it itself: pieces waiting their turn stay small whatever the messages' sizes.
const CHUNK_BYTES: usize = 4 << 20;

/// Nodes of a piece of work, encoded.
struct Encoded {
    bytes: Vec<u8>,
    /// Nodes in `bytes`: fewer than asked past [`CHUNK_BYTES`], or before a failure.
    nodes: usize,
    masked: u64,
    /// Surface nodes with a message.
    messages: usize,
    failed: Option<anyhow::Error>,
}

impl Encoded {
    fn empty(bytes: Vec<u8>) -> Self {
        Encoded {
            bytes,
            nodes: 0,
            masked: 0,
            messages: 0,
            failed: None,
        }
    }
}

/// Reads nodes' messages back from their lines and encodes the nodes (one per thread).
struct Encoder<'a> {
    deriver: Deriver,
    page: page::NodeEncoder,
    name: &'a str,
}

impl<'a> Encoder<'a> {
    fn open(lines: &Path, name: &'a str, redact: bool) -> Result<Self> {
        let deriver = Deriver::open(lines)
            .with_context(|| format!("cannot reopen {} to read its messages", escape(name)))?;
        Ok(Encoder {
            deriver,
            page: page::NodeEncoder::new(redact),
            name,
        })
    }

    /// Nodes `from..to` of `order` into `bytes`, until they pass `cap` bytes.
    fn run(
        &mut self,
        order: &[Planned<'_>],
        (from, to): (usize, usize),
        cap: usize,
        bytes: Vec<u8>,
    ) -> Encoded {
        let mut done = Encoded::empty(bytes);
        for (i, p) in order[from..to].iter().enumerate() {
            if done.bytes.len() >= cap {
                break;
            }
            let stored = &p.rec.stored;
            let message = if stored.derives {
                match self.deriver.message_of(stored) {
                    Ok(bytes) => Some(bytes),
                    Err(DeriveError::Message {
                        source: MessageError::Missing(_),
                        ..
                    }) => None,
                    Err(e) => {
                        done.failed = Some(fold::reread_failure_at(
                            self.name,
                            stored.pos.line,
                            stored.seq,
                            &e,
                        ));
                        break;
                    }
                }
            } else {
                None
            };
            if p.depth == 0 && message.is_some() {
                done.messages += 1;
            }
            done.masked += self.page.encode(
                &page::Node {
                    seq: p.seq,
                    event_type: stored.kind.type_name(),
                    time: p.rec.time,
                    turn: p.rec.turn,
                    depth: p.depth,
                    replaced: p.replaced,
                    message: message.as_deref(),
                },
                from + i == 0,
                &mut done.bytes,
            );
            done.nodes += 1;
        }
        done
    }
}

/// Writes the nodes of `order` to the page, each message read back from `lines`: on
/// `workers` threads that encode pieces of [`CHUNK`] nodes (up to `cap` bytes of each,
/// [`CHUNK_BYTES`]) while this one writes them in order. Returns how many surface nodes have
/// a message.
fn write_nodes<W: Write>(
    page: &mut page::PageWriter<W>,
    order: &[Planned<'_>],
    lines: &Path,
    name: &str,
    redact: bool,
    (workers, cap): (usize, usize),
) -> Result<usize> {
    let mut mine = Encoder::open(lines, name, redact)?;
    let mut messages = 0usize;
    // Writes what was encoded of the piece `from..to`, then encodes and writes the rest of
    // it here; gives back a buffer and the piece's messages.
    let mut put = |page: &mut page::PageWriter<W>, mut e: Encoded, from: usize, to: usize| {
        let mut at = from;
        let mut found = 0;
        loop {
            page.encoded(&e.bytes, e.nodes, e.masked)?;
            found += e.messages;
            at += e.nodes;
            if let Some(failed) = e.failed {
                return Err(failed);
            }
            if at >= to {
                return Ok((e.bytes, found));
            }
            let mut bytes = e.bytes;
            bytes.clear();
            e = mine.run(order, (at, to), cap, bytes);
        }
    };
    let chunks = order.len().div_ceil(CHUNK);
    let piece = |k: usize| (k * CHUNK, ((k + 1) * CHUNK).min(order.len()));
    if workers <= 1 || chunks <= 1 {
        let mut bytes = Vec::new();
        for k in 0..chunks {
            let (from, to) = piece(k);
            bytes.clear();
            let found;
            (bytes, found) = put(page, Encoded::empty(bytes), from, to)?;
            messages += found;
        }
        return Ok(messages);
    }
    std::thread::scope(|scope| {
        let (jobs, taken) = crossbeam_channel::unbounded::<(usize, Sender<Encoded>)>();
        let (spare, spares) = crossbeam_channel::unbounded::<Vec<u8>>();
        for _ in 0..workers.min(chunks) {
            let (taken, spares) = (taken.clone(), spares.clone());
            dshs::log::limits::spawn_scoped(scope, move || {
                let mut encoder: Option<Encoder<'_>> = None;
                for (k, done) in taken {
                    let (from, to) = piece(k);
                    let bytes = spares.try_recv().unwrap_or_default();
                    let encoded = match &mut encoder {
                        Some(e) => e.run(order, (from, to), cap, bytes),
                        None => match Encoder::open(lines, name, redact) {
                            Ok(e) => encoder.insert(e).run(order, (from, to), cap, bytes),
                            Err(e) => Encoded {
                                failed: Some(e),
                                ..Encoded::empty(bytes)
                            },
                        },
                    };
                    if done.send(encoded).is_err() {
                        break;
                    }
                }
            });
        }
        drop(taken);
        // Pieces handed out and not yet written: enough to keep every worker busy.
        let mut pending = std::collections::VecDeque::new();
        let mut next = 0;
        loop {
            while pending.len() < 2 * workers && next < chunks {
                let (done, result) = crossbeam_channel::bounded(1);
                if jobs.send((next, done)).is_err() {
                    break;
                }
                pending.push_back((next, result));
                next += 1;
            }
            let Some((k, result)) = pending.pop_front() else {
                break;
            };
            let encoded = result
                .recv()
                .map_err(|_| anyhow::anyhow!("a thread encoding the page's nodes stopped"))?;
            let (from, to) = piece(k);
            let (mut bytes, found) = put(page, encoded, from, to)?;
            messages += found;
            bytes.clear();
            let _ = spare.send(bytes);
        }
        Ok(messages)
    })
}

/// Threads that encode the page's nodes: those the pass would parse with.
fn workers(env: &Env) -> usize {
    if env.threads > 0 {
        return env.threads;
    }
    std::env::var(dshs::log::scan::THREADS_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .clamp(1, dshs::log::scan::MAX_THREADS)
        })
}

/// The log for the count of tokens, which stops reading once `stop` is set.
struct Stoppable<'a> {
    file: std::fs::File,
    stop: &'a AtomicBool,
}

impl Read for Stoppable<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(std::io::Error::other("the page is not made"));
        }
        self.file.read(buf)
    }
}

fn masked(text: &str, redact: bool) -> String {
    if redact {
        page::redact::redact(text).0.into_owned()
    } else {
        text.to_owned()
    }
}

/// Tokens and cost per turn and for the session (`USAGE.md`, counted by `log::usage`), up
/// to `--at`; nothing when the log cannot be counted.
fn usage_of(lines: &Path, at: Option<u64>, stop: &AtomicBool) -> Counted {
    let counted = std::fs::File::open(lines).and_then(|file| usage::read(Stoppable { file, stop }));
    let Ok(counted) = counted else {
        return (HashMap::new(), None);
    };
    if counted.refused.is_some() {
        return (HashMap::new(), None);
    }
    let prices = usage::PriceTable::shipped();
    let mut by_turn: HashMap<i64, page::Tokens> = HashMap::new();
    let mut all = page::Tokens::default();
    for call in counted
        .calls
        .iter()
        .filter(|c| at.is_none_or(|at| c.seq <= at))
    {
        let one = call_tokens(call, &prices);
        if let Some(turn) = call.turn.and_then(|t| i64::try_from(t).ok()) {
            add_tokens(by_turn.entry(turn).or_default(), &one);
        }
        add_tokens(&mut all, &one);
    }
    (by_turn, Some(all))
}

/// One call as the page counts it.
fn call_tokens(call: &usage::Call, prices: &usage::PriceTable) -> page::Tokens {
    let Some(t) = call.tokens else {
        return page::Tokens {
            calls: 1,
            calls_without_usage: 1,
            ..page::Tokens::default()
        };
    };
    let cost = call
        .model
        .as_deref()
        .and_then(|m| prices.cost(m, call.provider.as_deref(), call.time, &t));
    page::Tokens {
        calls: 1,
        calls_without_usage: 0,
        tokens: TokenColumns(t),
        cost_usd: cost,
        unpriced_tokens: if cost.is_some() { 0 } else { t.total() },
    }
}

fn add_tokens(sum: &mut page::Tokens, t: &page::Tokens) {
    sum.calls += t.calls;
    sum.calls_without_usage += t.calls_without_usage;
    // The total of the sums is the sum of the totals (both saturate only past u64::MAX).
    sum.tokens.0.add(&t.tokens.0);
    sum.unpriced_tokens = sum.unpriced_tokens.saturating_add(t.unpriced_tokens);
    sum.cost_usd = match (sum.cost_usd, t.cost_usd) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    };
}

/// The tool definitions (and, before format 3, the system prompt) of the `request/header`
/// whose line starts at `pos`, as stored; nothing when the line does not read as one.
fn request_header(path: &Path, pos: Pos) -> (Option<Box<RawValue>>, Option<Box<RawValue>>) {
    #[derive(Deserialize)]
    struct Row<'a> {
        #[serde(borrow)]
        data: Option<HeaderData<'a>>,
    }
    #[derive(Deserialize)]
    struct HeaderData<'a> {
        #[serde(borrow)]
        header: Option<HeaderIn<'a>>,
    }
    #[derive(Deserialize)]
    struct HeaderIn<'a> {
        #[serde(borrow)]
        tools: Option<&'a RawValue>,
        #[serde(borrow)]
        system: Option<&'a RawValue>,
    }
    let read = || -> std::io::Result<Vec<u8>> {
        let mut f = std::fs::File::open(path)?;
        f.seek(SeekFrom::Start(pos.byte))?;
        let mut line = Vec::new();
        std::io::BufReader::new(f).read_until(b'\n', &mut line)?;
        Ok(line)
    };
    let Ok(line) = read() else {
        return (None, None);
    };
    let Ok(row) = serde_json::from_slice::<Row<'_>>(&line) else {
        return (None, None);
    };
    let Some(h) = row.data.and_then(|d| d.header) else {
        return (None, None);
    };
    (
        h.tools.map(RawValue::to_owned),
        h.system.map(RawValue::to_owned),
    )
}

/// A node that joined the surface at some point, with what the page says of it.
struct Seen {
    stored: Stored,
    time: i64,
    turn: Option<i64>,
}

/// Keeps, during the pass, what the final surface no longer knows.
#[derive(Default)]
struct Collect {
    nodes: HashMap<u64, Seen>,
    turns: Vec<page::Turn>,
    turn: Option<i64>,
    title: Option<String>,
    header_at: Option<Pos>,
    /// Rolled back with a speculation that ends as a crash tail.
    saved: Option<Saved>,
}

struct Saved {
    added: Vec<u64>,
    turns: usize,
    turn: Option<i64>,
    title: Option<String>,
    header_at: Option<Pos>,
}

impl Observer for Collect {
    fn wants_each_event(&self) -> bool {
        false
    }

    fn reads_stream_records(&self) -> bool {
        false
    }

    fn event(&mut self, info: &EventInfo<'_, '_>, state: &FoldState) {
        let ev = info.event;
        match ev.kind {
            Kind::TurnStart => {
                if let Some(n) = ev.data.get("turn").and_then(Json::safe_int) {
                    self.turn = Some(n);
                    self.turns.push(page::Turn {
                        n,
                        start: ev.time,
                        end: None,
                        reason: None,
                        usage: None,
                    });
                }
            }
            Kind::TurnEnd => {
                let n = ev.data.get("turn").and_then(Json::safe_int);
                if let Some(t) = self.turns.iter_mut().rev().find(|t| Some(t.n) == n) {
                    t.end = Some(ev.time);
                    t.reason = ev
                        .data
                        .get("reason")
                        .and_then(|r| r.get("kind"))
                        .and_then(Json::as_str)
                        .map(str::to_owned);
                }
            }
            Kind::SessionTitle => {
                if let Some(t) = ev.data.get("title").and_then(Json::as_text) {
                    self.title = Some(t.to_owned());
                }
            }
            Kind::RequestHeader if !ev.packed => self.header_at = Some(ev.pos),
            _ => {}
        }
        if info.accepted
            && let Some(node) = state.surface.node(ev.seq)
        {
            let turn = ev.data.get("turn").and_then(Json::safe_int).or(self.turn);
            self.nodes.insert(
                ev.seq,
                Seen {
                    stored: Stored::of(&node),
                    time: ev.time,
                    turn,
                },
            );
            if let Some(saved) = &mut self.saved {
                saved.added.push(ev.seq);
            }
        }
    }

    fn speculation_started(&mut self) {
        self.saved = Some(Saved {
            added: Vec::new(),
            turns: self.turns.len(),
            turn: self.turn,
            title: self.title.clone(),
            header_at: self.header_at,
        });
    }

    fn speculation_ended(&mut self, committed: bool) {
        if let Some(saved) = self.saved.take()
            && !committed
        {
            for seq in saved.added {
                self.nodes.remove(&seq);
            }
            self.turns.truncate(saved.turns);
            self.turn = saved.turn;
            self.title = saved.title;
            self.header_at = saved.header_at;
        }
    }
}

/// The findings of the pass, as the page shows them.
#[derive(Default)]
struct Findings {
    kept: Vec<page::Finding>,
    more: u64,
    /// (errors, warnings)
    counts: (u64, u64),
}

impl Sink for Findings {
    fn push(&mut self, f: dshs::log::Finding) {
        match f.severity {
            Severity::Error => self.counts.0 += 1,
            _ => self.counts.1 += 1,
        }
        if self.kept.len() >= KEEP_FINDINGS {
            self.more += 1;
            return;
        }
        self.kept.push(page::Finding {
            seq: f.seq,
            line: f.pos.line,
            severity: f.severity.as_str(),
            code: f.code.as_str(),
            message: f.message,
        });
    }
}

/// Write `bytes` to `path` through a temporary file beside it, renamed over it once
/// complete: a reader never sees half a page, and a failure leaves no partial file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let Some(path) = &replaced(path)? else {
        return std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(|e| cannot("write", path, e));
    };
    let mut tmp = temp_beside(path)?;
    tmp.write_all(bytes).map_err(|e| cannot("write", path, e))?;
    publish(tmp, path)
}

/// The regular file a page written to `path` replaces: `path`, or the file a link at `path`
/// leads to (the link stays); `None` when `path` is something else that exists (a device,
/// a FIFO), which is written to instead of replaced.
fn replaced(path: &Path) -> Result<Option<PathBuf>> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Ok(None),
        Ok(_) if path.is_symlink() => std::fs::canonicalize(path)
            .map(Some)
            .map_err(|e| cannot("follow the link", path, e)),
        Ok(_) => Ok(Some(path.to_path_buf())),
        Err(_) if path.is_symlink() => Err(Failure::usage(format!(
            "{} is a link to nothing: name the file the page is to be written to",
            path.display()
        ))),
        Err(_) => Ok(Some(path.to_path_buf())),
    }
}

/// A temporary file in the directory of `path`, to be renamed over it once complete.
fn temp_beside(path: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    tempfile::Builder::new()
        .prefix(".dshs-export-")
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(|e| cannot("create a temporary file for", path, e))
}

/// The error of a page file that cannot be made.
fn cannot(what: &str, path: &Path, e: std::io::Error) -> anyhow::Error {
    Failure::usage(format!("cannot {what} {}: {e}", path.display()))
}

/// Several sessions: a page each, named by session id, and `index.html`.
fn export_many(args: &ExportArgs, dir: &Path, env: &Env) -> Result<Outcome> {
    let mut inputs: Vec<String> = Vec::new();
    for p in &args.paths {
        let path = Path::new(p);
        if is_root(path) {
            let found = input::find_sessions(path)
                .map_err(|e| Failure::usage(format!("cannot list {}: {e}", escape(p))))?;
            inputs.extend(found.into_iter().map(|d| d.display().to_string()));
        } else {
            inputs.push(p.clone());
        }
    }
    if inputs.is_empty() {
        return Err(Failure::usage("no session to export"));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::usage(format!("cannot create {}: {e}", dir.display())))?;
    // First the headers: page names and who is whose sub-agent.
    let heads: Vec<(Option<String>, Option<String>)> =
        inputs.iter().map(|p| header_ids(p)).collect();
    let mut names: Vec<String> = Vec::new();
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    for (i, (id, _)) in heads.iter().enumerate() {
        let base = page_name(id.as_deref().unwrap_or(&inputs[i]));
        let n = taken.entry(base.clone()).or_insert(0);
        *n += 1;
        names.push(if *n == 1 {
            format!("{base}.html")
        } else {
            format!("{base}-{n}.html")
        });
    }
    let by_id: HashMap<&str, usize> = heads
        .iter()
        .enumerate()
        .filter_map(|(i, (id, _))| id.as_deref().map(|id| (id, i)))
        .collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); inputs.len()];
    for (i, (_, parent)) in heads.iter().enumerate() {
        if let Some(p) = parent.as_deref().and_then(|p| by_id.get(p)) {
            children[*p].push(i);
        }
    }
    let label = |i: usize| heads[i].0.clone().unwrap_or_else(|| inputs[i].clone());
    let mut rows: Vec<(usize, Result<Row, String>)> = Vec::new();
    let mut worst = Outcome::Success;
    let mut redacted = 0u64;
    for (i, path) in inputs.iter().enumerate() {
        let links = Links {
            parent: heads[i]
                .1
                .as_deref()
                .and_then(|p| by_id.get(p))
                .map(|p| Link {
                    label: label(*p),
                    href: names[*p].clone(),
                }),
            children: children[i]
                .iter()
                .map(|c| Link {
                    label: label(*c),
                    href: names[*c].clone(),
                })
                .collect(),
        };
        match export_file(path, args, env, &links, &dir.join(&names[i])) {
            Ok(made) => {
                redacted += made.redacted.unwrap_or(0);
                worst = worst.worst(made.outcome);
                rows.push((i, Ok(made.row)));
            }
            Err(e) => {
                crate::render::diag!("dshs: warning: {}: no page: {e:#}", escape(path));
                worst = worst.worst(crate::exit::Failure::outcome_of(&e));
                rows.push((i, Err(format!("{e:#}"))));
            }
        }
    }
    let index = index_page(&inputs, &names, &rows, &children);
    write_atomically(&dir.join("index.html"), index.as_bytes())?;
    if !args.no_redact && redacted > 0 {
        crate::render::diag!(
            "dshs: note: {redacted} secret{} redacted in the pages (--no-redact keeps them)",
            crate::render::human::plural(redacted)
        );
    }
    Ok(worst)
}

/// A session's id and parent, from its header line alone.
fn header_ids(path: &str) -> (Option<String>, Option<String>) {
    // Opened quietly: the pass that makes the page says what there is to say about the file.
    let Ok(mut opened) =
        input::resolve(Path::new(path)).and_then(|file| input::open_file(&file, path.to_owned()))
    else {
        return (None, None);
    };
    let mut line = Vec::new();
    // A header is small; a longer first line is no header dshs reads.
    if (&mut opened.reader)
        .take(1 << 20)
        .read_until(b'\n', &mut line)
        .is_err()
    {
        return (None, None);
    }
    let v: serde_json::Value = match serde_json::from_slice(&line) {
        Ok(v) => v,
        Err(_) => return (None, None),
    };
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_owned);
    (s("id"), s("parentSession"))
}

/// A file name from a session id: letters, digits, `.`, `_`, `-`; nothing else survives.
fn page_name(id: &str) -> String {
    let mut name: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    if name.is_empty() || name == "index" {
        name.insert_str(0, "session-");
    }
    name
}

/// `index.html`: one row per session, sub-agents under their parents. No script: static
/// HTML, every text escaped.
fn index_page(
    inputs: &[String],
    names: &[String],
    rows: &[(usize, Result<Row, String>)],
    children: &[Vec<usize>],
) -> String {
    use crate::render::export::html_text as h;
    use std::fmt::Write as _;
    let by_input: HashMap<usize, &Result<Row, String>> =
        rows.iter().map(|(i, r)| (*i, r)).collect();
    let is_child: Vec<bool> = {
        let mut v = vec![false; inputs.len()];
        for c in children.iter().flatten() {
            v[*c] = true;
        }
        v
    };
    let mut body = String::new();
    let _ = write!(
        body,
        "<table class=\"index\"><thead><tr><th>session</th><th>started (UTC)</th><th>turns</th><th>messages</th><th>tokens, cost</th><th>validity</th></tr></thead><tbody>"
    );
    // Parents first, each followed by its sub-agents (depth-first, iteratively).
    let mut order: Vec<(usize, usize)> = Vec::new();
    let mut done = vec![false; inputs.len()];
    for top in (0..inputs.len()).filter(|i| !is_child[*i]) {
        let mut stack = vec![(top, 0usize)];
        while let Some((i, depth)) = stack.pop() {
            if std::mem::replace(&mut done[i], true) {
                continue;
            }
            order.push((i, depth));
            for c in children[i].iter().rev() {
                stack.push((*c, depth + 1));
            }
        }
    }
    // Sub-agents whose parent chain is a cycle: listed at the top level.
    order.extend(
        done.iter()
            .enumerate()
            .filter(|(_, d)| !**d)
            .map(|(i, _)| (i, 0)),
    );
    for (i, depth) in order {
        let indent = "↳ ".repeat(depth);
        match by_input.get(&i) {
            Some(Ok(r)) => {
                let title = r
                    .title
                    .clone()
                    .or_else(|| r.session.clone())
                    .unwrap_or_else(|| inputs[i].clone());
                let started = r.created.and_then(utc).unwrap_or_default();
                let validity = if r.errors > 0 {
                    format!("invalid ({} errors)", r.errors)
                } else if r.warnings > 0 {
                    format!("valid ({} warnings)", r.warnings)
                } else {
                    "valid".to_owned()
                };
                let _ = write!(
                    body,
                    "<tr><td>{}<a href=\"{}\">{}</a><br><span class=\"note\">{}</span></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    h(&indent),
                    h(&names[i]),
                    h(&title),
                    h(r.session.as_deref().unwrap_or(&inputs[i])),
                    h(&started),
                    r.turns,
                    r.messages,
                    h(&r.tokens.as_ref().map_or_else(|| "—".to_owned(), token_cell)),
                    h(&validity)
                );
            }
            _ => {
                let why = match by_input.get(&i) {
                    Some(Err(e)) => e.clone(),
                    _ => String::new(),
                };
                let _ = write!(
                    body,
                    "<tr><td>{}{}</td><td></td><td></td><td></td><td></td><td>no page: {}</td></tr>",
                    h(&indent),
                    h(&inputs[i]),
                    h(&why)
                );
            }
        }
    }
    body.push_str("</tbody></table>");
    page::index(&body)
}

/// Tokens and cost in an index cell.
fn token_cell(t: &page::Tokens) -> String {
    let mut s = format!("{} tokens", t.tokens.0.total());
    if let Some(c) = t.cost_usd {
        s.push_str(&format!(", ${c:.4}"));
    }
    if t.unpriced_tokens > 0 {
        s.push_str(&format!(" ({} unpriced)", t.unpriced_tokens));
    }
    s
}

fn utc(ms: i64) -> Option<String> {
    let ts = jiff::Timestamp::from_millisecond(ms).ok()?;
    Some(ts.strftime("%Y-%m-%d %H:%M").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dshs::log::dialect::SurfaceKind;

    /// A log of `n` user messages, one a line, the one at `bad` (if any) not JSON; and the
    /// page's nodes for them, every fourth replaced by the next.
    fn log(n: usize, bad: Option<usize>) -> (tempfile::NamedTempFile, Vec<Seen>) {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        let mut seen = Vec::new();
        let mut at = 0u64;
        for i in 0..n {
            let line = if Some(i) == bad {
                "{\"data\":{\"role\":".to_owned()
            } else {
                format!(
                    r#"{{"seq":{i},"data":{{"role":"user","content":[{{"type":"text","text":"message {i} <b>{}</b> sk-0123456789abcdef0123456789abcdef"}}]}}}}"#,
                    "x".repeat(i * 37 % 500)
                )
            };
            writeln!(file, "{line}").unwrap();
            seen.push(Seen {
                stored: Stored {
                    seq: i as u64,
                    kind: SurfaceKind::User,
                    pos: Pos {
                        line: i as u64 + 1,
                        byte: at,
                    },
                    message_at: None,
                    derives: i % 7 != 3,
                    legacy: None,
                },
                time: i as i64 * 1000,
                turn: Some(i as i64 / 10),
            });
            at += line.len() as u64 + 1;
        }
        file.flush().unwrap();
        (file, seen)
    }

    fn page_of(
        lines: &Path,
        seen: &[Seen],
        redact: bool,
        threads: (usize, usize),
    ) -> (Vec<u8>, Result<usize>) {
        let order: Vec<Planned<'_>> = seen
            .iter()
            .enumerate()
            .map(|(i, rec)| Planned {
                seq: rec.stored.seq,
                depth: u32::from(i % 4 == 1),
                replaced: usize::from(i % 4 == 0),
                rec,
            })
            .collect();
        let mut page = page::PageWriter::start(Vec::new(), "t", redact).unwrap();
        let written = write_nodes(&mut page, &order, lines, "log", redact, threads);
        let (bytes, _) = page.finish(&Facts::default()).unwrap();
        (bytes, written)
    }

    #[test]
    fn nodes_encoded_on_threads_make_the_same_page_as_on_one() {
        let (file, seen) = log(3 * CHUNK + 5, None);
        for redact in [true, false] {
            let (one, n) = page_of(file.path(), &seen, redact, (1, CHUNK_BYTES));
            let n = n.unwrap();
            assert!(n > CHUNK, "{n} messages");
            // Pieces handed over whole, and pieces cut after each node (the rest encoded by
            // the writer): the same bytes, the same count.
            for threads in [(2, CHUNK_BYTES), (3, 1), (1, 1), (4, 5000)] {
                let (many, m) = page_of(file.path(), &seen, redact, threads);
                assert_eq!(m.unwrap(), n, "{threads:?}");
                assert!(one == many, "{threads:?}: the pages differ");
            }
            let text = String::from_utf8(one).unwrap();
            assert_eq!(text.contains("[redacted api-key]"), redact);
            let open = "id=\"data\">";
            let start = text.find(open).unwrap() + open.len();
            let data = &text[start..start + text[start..].find("</script>").unwrap()];
            let data: serde_json::Value = serde_json::from_str(data).expect("the data is JSON");
            let seqs: Vec<u64> = data["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n["seq"].as_u64().unwrap())
                .collect();
            assert_eq!(seqs, (0..seen.len() as u64).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_line_that_no_longer_reads_stops_the_page_at_it_on_any_thread() {
        let bad = 2 * CHUNK + 9;
        let (file, seen) = log(3 * CHUNK, Some(bad));
        let (one, e) = page_of(file.path(), &seen, true, (1, CHUNK_BYTES));
        let e = format!("{:#}", e.unwrap_err());
        assert!(e.contains(&format!("line {}, seq {bad}", bad + 1)), "{e}");
        for threads in [(2, CHUNK_BYTES), (3, 1)] {
            let (many, e2) = page_of(file.path(), &seen, true, threads);
            assert_eq!(format!("{:#}", e2.unwrap_err()), e, "{threads:?}");
            // Everything before the line was written, and nothing after it.
            assert!(one == many, "{threads:?}: the pages differ");
        }
    }
}

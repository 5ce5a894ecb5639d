//! The `SurfaceManager` (§11): the ordered list of surface nodes, folded one event at a time.
//!
//! Each event is first validated into a [`Plan`] without touching the state, then the plan is
//! committed; a rejected event leaves the state exactly as before.
//!
//! Nodes live in a slab indexed by *label* (struct of arrays, a few words per node). An
//! append takes the next label; a replacing node takes the label of the first node it
//! shadows, so labels follow surface order and the labels in between fall dead (the slab is
//! compacted when dead labels outnumber live ones). Order questions are then answered
//! without walking the surface (see the `order` module): "reversed" is a label comparison, a node's
//! index and a range's size are Fenwick counts, and whether a replace cites every node it
//! would shadow is counted from its `sourceEventSeqs` runs. Only an accepted replace visits
//! the nodes it shadows, each once, as it removes them.

use std::collections::HashMap;
use std::fs::File;
use std::hash::Hasher;
use std::io::{self, Read, Write};
use std::ops::Range;
use std::sync::{Arc, Mutex};

use super::codes::Code;
use super::derive::message_path;
use super::dialect::{Dialect, SurfaceKind};
use super::event::Kind;
use super::finding::{Finding, Pos, Reporter, Sink};
use super::idset::SeqHash;
use super::input::chunks::read_at;
use super::json::Json;
use super::rows::{Event, SeqList, SourceError, decode_sources, result_digest};
use super::text::seq_list_counted;
use super::vocab::TypeClass;

mod order;

use order::{Counts, PointSet};

/// How a node entered the surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryOp {
    Append,
    Replace,
}

impl EntryOp {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryOp::Append => "append",
            EntryOp::Replace => "replace",
        }
    }
}

/// One surface node, as read from the surface: enough to fold, derive and display it
/// without holding its bytes.
#[derive(Debug, Clone, Copy)]
pub struct Node<'a> {
    pub seq: u64,
    pub kind: SurfaceKind,
    pub op: EntryOp,
    /// The message role as stored (None when missing or not a string).
    pub role: Option<&'a str>,
    /// Where the event's line starts (for fetching the message when it is emitted).
    pub pos: Pos,
    /// Where the message object starts in that line, when the fold could tell (its first key
    /// unescaped, the line UTF-8 and repeating no key, not a v0 legacy rewrite); `None`: find
    /// it in the line.
    pub message_at: Option<u32>,
    /// Whether the node derives a message (§12.1): false for an assistant, system or
    /// developer message with empty content.
    pub derives: bool,
    /// Tool-call blocks in an assistant message (pairing balance, §15.3).
    pub tool_calls: u32,
    /// For tool results: hash of `data` with the result content blanked (§11.2 step 7.3).
    pub result_shape: u64,
    /// v0 only.
    legacy: Option<&'a LegacyNode>,
}

impl Node<'_> {
    /// v0 legacy shapes: the normalized message to derive instead of the stored bytes.
    pub fn legacy_message(&self) -> Option<&str> {
        self.legacy?.message.as_deref()
    }
}

/// What a v0 node needs beyond the file's bytes (§16).
#[derive(Debug, Clone, Default)]
struct LegacyNode {
    /// The normalized message of a pre-release shape: the file holds none to copy.
    message: Option<Box<str>>,
    /// A tool result's message id, which a legacy replacement reuses.
    message_id: Option<Box<str>>,
}

/// The roles a node can name without a side table (code = index + 1; 0 = no role).
const ROLES: [&str; 5] = ["system", "developer", "user", "assistant", "tool"];
/// The role code of a role outside [`ROLES`], kept in a side table.
const ROLE_OTHER: u16 = 6;

/// A node about to join the surface.
#[derive(Debug, Clone)]
pub struct NewNode {
    pub seq: u64,
    pub kind: SurfaceKind,
    pub op: EntryOp,
    pub pos: Pos,
    pub message_at: Option<u32>,
    pub derives: bool,
    pub tool_calls: u32,
    pub result_shape: u64,
    /// The role's code (see [`ROLES`]), and the role itself when it is not a common one.
    role: (u16, Option<Box<str>>),
    legacy: Option<Box<LegacyNode>>,
}

fn role_code(role: Option<&str>) -> (u16, Option<Box<str>>) {
    match role {
        None => (0, None),
        Some(r) => match ROLES.iter().position(|c| *c == r) {
            Some(i) => (i as u16 + 1, None),
            None => (ROLE_OTHER, Some(r.into())),
        },
    }
}

/// A replacement as recorded for `surface --format json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    pub seq: u64,
    pub start: u64,
    pub end: u64,
    pub shadowed: Vec<u64>,
}

/// The replacement history (for `surface --format json`), spooled to a temporary file so
/// memory does not follow the log's history. A clone (the state a speculation saves) shares
/// what is already spooled; a copy that writes on after the other did gets a file of its own.
#[derive(Debug, Clone, Default)]
struct History {
    spool: Option<Arc<Mutex<Spool>>>,
    /// Bytes of the spool that belong to this history.
    spooled: u64,
    /// Records not spooled yet (all of them when no temporary file can be written).
    pending: Vec<u8>,
    /// Spooling failed once: keep everything in memory from then on.
    in_memory: bool,
}

#[derive(Debug)]
struct Spool {
    file: File,
    /// Bytes written (the file's length).
    len: u64,
}

/// Records are spooled in batches of about this many bytes.
const SPOOL_BATCH: usize = 64 * 1024;

impl History {
    fn push(&mut self, r: &Replacement) {
        for v in [r.seq, r.start, r.end, r.shadowed.len() as u64] {
            self.pending.extend_from_slice(&v.to_le_bytes());
        }
        for s in &r.shadowed {
            self.pending.extend_from_slice(&s.to_le_bytes());
        }
        if self.pending.len() >= SPOOL_BATCH && !self.in_memory && self.spill().is_err() {
            self.in_memory = true;
        }
    }

    /// Write the pending records to the spool.
    fn spill(&mut self) -> io::Result<()> {
        let shared = match &self.spool {
            Some(s) if lock(s).len == self.spooled => s.clone(),
            // Another copy wrote past our part (or there is no spool yet): start our own,
            // with our part of the old one.
            old => {
                let mut file = tempfile::tempfile()?;
                if let Some(old) = old {
                    let mut part = SpoolReader::new(Some(old.clone()), self.spooled, &[]);
                    io::copy(&mut part, &mut file)?;
                }
                let s = Arc::new(Mutex::new(Spool {
                    file,
                    len: self.spooled,
                }));
                self.spool = Some(s.clone());
                s
            }
        };
        let mut spool = lock(&shared);
        spool.file.write_all(&self.pending)?;
        spool.len += self.pending.len() as u64;
        self.spooled = spool.len;
        self.pending.clear();
        Ok(())
    }

    fn iter(&self) -> impl Iterator<Item = io::Result<Replacement>> + '_ {
        let mut r = io::BufReader::with_capacity(
            SPOOL_BATCH,
            SpoolReader::new(self.spool.clone(), self.spooled, &self.pending),
        );
        let mut failed = false;
        std::iter::from_fn(move || {
            if failed {
                return None;
            }
            let mut word = || -> io::Result<u64> {
                let mut b = [0u8; 8];
                r.read_exact(&mut b)?;
                Ok(u64::from_le_bytes(b))
            };
            let seq = match word() {
                Ok(v) => v,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return None,
                Err(e) => {
                    failed = true;
                    return Some(Err(e));
                }
            };
            let record = (|| {
                let (start, end, n) = (word()?, word()?, word()?);
                let shadowed = (0..n).map(|_| word()).collect::<io::Result<Vec<u64>>>()?;
                Ok(Replacement {
                    seq,
                    start,
                    end,
                    shadowed,
                })
            })();
            failed = record.is_err();
            Some(record)
        })
    }
}

fn lock(s: &Mutex<Spool>) -> std::sync::MutexGuard<'_, Spool> {
    s.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The first `len` bytes of a spool, then `tail`.
struct SpoolReader<'a> {
    spool: Option<Arc<Mutex<Spool>>>,
    at: u64,
    len: u64,
    tail: &'a [u8],
}

impl<'a> SpoolReader<'a> {
    fn new(spool: Option<Arc<Mutex<Spool>>>, len: u64, tail: &'a [u8]) -> Self {
        SpoolReader {
            spool,
            at: 0,
            len,
            tail,
        }
    }
}

impl Read for SpoolReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.at < self.len
            && let Some(s) = &self.spool
        {
            let want = buf
                .len()
                .min(usize::try_from(self.len - self.at).unwrap_or(usize::MAX));
            let n = read_at(&lock(s).file, &mut buf[..want], self.at)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the spooled replacement history is shorter than what was written",
                ));
            }
            self.at += n as u64;
            return Ok(n);
        }
        self.tail.read(buf)
    }
}

/// A validated change, ready to commit.
#[derive(Debug)]
pub enum Plan {
    /// Not a surface action.
    Nothing,
    Append(NewNode),
    /// Replace the live nodes from label `first` to label `last` (inclusive).
    Replace(Replace),
}

/// A replace that passed its checks: the new node, the range it names (`start..=end`, seqs)
/// and the labels of the live nodes it takes (`first..=last`).
#[derive(Debug)]
pub struct Replace {
    node: NewNode,
    start: u64,
    end: u64,
    first: usize,
    last: usize,
}

/// Why a range of the surface cannot be taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeError {
    StartMissing,
    EndMissing,
    Reversed,
}

/// How many uncited shadowed seqs a `replace-missing-shadowed-source` message lists.
const LISTED: usize = 20;

/// Displaced nodes in a range up to this many are checked one by one; more are counted.
const FEW_DISPLACED: u32 = 64;

/// Dead labels tolerated beyond the number of live ones before the slab is compacted.
const SLACK: usize = 4096;

// Per-label flags (`Slots::meta`).
const LIVE: u16 = 1;
/// The node's seq is not the seq that created its label (a replacing node, or an append
/// that came after a seq regression in damaged input): kept in `SurfaceManager::displaced`.
const DISPLACED: u16 = 1 << 1;
const REPLACED: u16 = 1 << 2;
const DERIVES: u16 = 1 << 3;
const KIND_SHIFT: u32 = 4;
const ROLE_SHIFT: u32 = 7;

const KINDS: [SurfaceKind; 5] = [
    SurfaceKind::User,
    SurfaceKind::Assistant,
    SurfaceKind::ToolResult,
    SurfaceKind::System,
    SurfaceKind::Developer,
];

fn kind_code(kind: SurfaceKind) -> u16 {
    KINDS.iter().position(|k| *k == kind).unwrap_or_default() as u16
}

/// The nodes, by label.
#[derive(Debug, Clone, Default)]
struct Slots {
    /// The seq of the append that created each label: strictly increasing, so the label of
    /// a seq is a binary search away. For a node that is not displaced it is the node's seq.
    creator: Vec<u64>,
    /// The line number, or `u32::MAX` when it does not fit (see `SurfaceManager::long_lines`).
    line: Vec<u32>,
    /// The line's start and, where known, the message's offset in it (see [`pack_byte`]).
    byte: Vec<u64>,
    /// `tool_calls` of an assistant message, `result_shape` of a tool result.
    extra: Vec<u64>,
    meta: Vec<u16>,
    /// `creator` of every 64th label: a seq is looked up in this (small, so cached) index
    /// first, then among 64 creators, instead of across the whole array.
    every64: Vec<u64>,
}

/// A node's message offset rides in the top bits of its line's start: set when known, then the
/// offset (23 bits) above the start (40 bits, a TiB). Anything larger is kept as the bare
/// start (the message is then found in the line), so no node needs more room.
const MESSAGE_AT: u64 = 1 << 63;
const BYTE_BITS: u32 = 40;
const AT_BITS: u32 = 23;

fn pack_byte(byte: u64, message_at: Option<u32>) -> u64 {
    match message_at {
        Some(at) if byte >> BYTE_BITS == 0 && at >> AT_BITS == 0 => {
            MESSAGE_AT | u64::from(at) << BYTE_BITS | byte
        }
        _ => byte,
    }
}

fn unpack_byte(packed: u64) -> (u64, Option<u32>) {
    if packed & MESSAGE_AT == 0 {
        return (packed, None);
    }
    let at = (packed >> BYTE_BITS) & ((1 << AT_BITS) - 1);
    (packed & ((1 << BYTE_BITS) - 1), u32::try_from(at).ok())
}

/// The message object a node of `kind` derives, in the event's `data` (the path of
/// [`message_path`], last duplicates winning as in `JSON.parse`).
fn message_of<'v, 'a>(data: &'v Json<'a>, kind: SurfaceKind) -> Option<&'v Json<'a>> {
    message_path(kind)[1..]
        .iter()
        .try_fold(data, |v, key| v.get(key))
}

impl Slots {
    fn len(&self) -> usize {
        self.creator.len()
    }

    fn push(&mut self, creator: u64, node: &NewNode, meta: u16) {
        if self.creator.len().is_multiple_of(64) {
            self.every64.push(creator);
        }
        self.creator.push(creator);
        self.line.push(0);
        self.byte.push(0);
        self.extra.push(0);
        self.meta.push(0);
        self.set(self.len() - 1, node, meta);
    }

    fn set(&mut self, l: usize, node: &NewNode, meta: u16) {
        self.line[l] = u32::try_from(node.pos.line).unwrap_or(u32::MAX);
        self.byte[l] = pack_byte(node.pos.byte, node.message_at);
        self.extra[l] = match node.kind {
            SurfaceKind::Assistant => u64::from(node.tool_calls),
            SurfaceKind::ToolResult => node.result_shape,
            _ => 0,
        };
        self.meta[l] = meta
            | if node.derives { DERIVES } else { 0 }
            | if node.op == EntryOp::Replace {
                REPLACED
            } else {
                0
            }
            | kind_code(node.kind) << KIND_SHIFT
            | node.role.0 << ROLE_SHIFT;
    }

    /// Drop the dead labels, keeping the order of the live ones.
    fn retain_live(&mut self) {
        let mut to = 0;
        for from in 0..self.len() {
            if self.meta[from] & LIVE != 0 {
                self.creator[to] = self.creator[from];
                self.line[to] = self.line[from];
                self.byte[to] = self.byte[from];
                self.extra[to] = self.extra[from];
                self.meta[to] = self.meta[from];
                to += 1;
            }
        }
        self.creator.truncate(to);
        self.every64 = self.creator.iter().step_by(64).copied().collect();
        self.line.truncate(to);
        self.byte.truncate(to);
        self.extra.truncate(to);
        self.meta.truncate(to);
    }
}

/// What a displaced node keeps beside its slot.
#[derive(Debug, Clone, Copy)]
struct Displaced {
    seq: u64,
    /// The endpoints a replacing node replaced.
    range: Option<(u64, u64)>,
}

/// Counts label visits in tests, so a test can tell a walk of the surface from a count.
#[cfg(test)]
#[derive(Debug, Default)]
struct Visits(std::sync::atomic::AtomicU64);

#[cfg(test)]
impl Clone for Visits {
    fn clone(&self) -> Self {
        Visits(self.0.load(std::sync::atomic::Ordering::Relaxed).into())
    }
}

/// A tool definition from a `request/header` (for v4 developer binding, §9.3).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ToolDef {
    name: String,
    complete: bool,
    defer_loading_ok: bool,
}

/// Which seqs are `request/header` events and the tool list each carries. One bit per event
/// marks the headers; tool lists are kept as runs (a new run only when the list changes) and
/// identical lists share one allocation, so memory follows the number of tool-set changes,
/// not the number of requests.
#[derive(Debug, Clone, Default)]
struct HeaderTools {
    is_header: Vec<u64>,
    /// (first header seq of the run, its tools), in seq order.
    runs: Vec<(u64, Arc<[ToolDef]>)>,
    distinct: HashMap<u64, Arc<[ToolDef]>>,
}

impl HeaderTools {
    fn record(&mut self, seq: u64, data: &Json<'_>) {
        let tools: Vec<ToolDef> = data
            .get("header")
            .and_then(|h| h.get("tools"))
            .and_then(Json::as_arr)
            .unwrap_or_default()
            .iter()
            .map(|t| ToolDef {
                name: t
                    .get("name")
                    .and_then(Json::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                complete: t.get("description").is_some_and(|d| d.as_str().is_some())
                    && t.get("parameters").is_some_and(Json::is_obj),
                defer_loading_ok: t.get("deferLoading").is_none_or(|d| d == &Json::Bool(true)),
            })
            .collect();
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if self.is_header.len() <= word {
            self.is_header.resize(word + 1, 0);
        }
        self.is_header[word] |= 1 << bit;
        if self
            .runs
            .last()
            .is_some_and(|(_, last)| last.as_ref() == tools.as_slice())
        {
            return;
        }
        let mut h = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&tools, &mut h);
        let key = h.finish();
        let shared = match self.distinct.get(&key) {
            Some(existing) if existing.as_ref() == tools.as_slice() => existing.clone(),
            _ => {
                let arc: Arc<[ToolDef]> = tools.into();
                self.distinct.insert(key, arc.clone());
                arc
            }
        };
        self.runs.push((seq, shared));
    }

    /// The tools of the `request/header` at `seq`, or None when that event is not one.
    fn get(&self, seq: u64) -> Option<&Arc<[ToolDef]>> {
        let word = self.is_header.get(usize::try_from(seq / 64).ok()?)?;
        if word & (1 << (seq % 64)) == 0 {
            return None;
        }
        let i = self.runs.partition_point(|(first, _)| *first <= seq);
        self.runs.get(i.checked_sub(1)?).map(|(_, tools)| tools)
    }
}

#[derive(Debug, Clone)]
pub struct SurfaceManager {
    dialect: &'static Dialect,
    slots: Slots,
    /// Which labels are live, and whether their node is displaced.
    counts: Counts,
    /// Displaced nodes by label, and their labels by seq.
    displaced: HashMap<u32, Displaced, SeqHash>,
    displaced_at: HashMap<u64, u32, SeqHash>,
    /// `(seq, label)` of every displaced node, for counting them in a rectangle: built the
    /// first time a replace spans more displaced nodes than are checked one by one, then kept.
    points: Option<PointSet>,
    /// Roles outside [`ROLES`], by label.
    odd_roles: HashMap<u32, Box<str>, SeqHash>,
    /// v0 only, by label (most nodes never need it).
    legacy: HashMap<u32, Box<LegacyNode>, SeqHash>,
    /// Line numbers past `u32::MAX`, by label.
    long_lines: HashMap<u32, u64, SeqHash>,
    /// Live nodes.
    count: usize,
    next_seq: u64,
    generation: u64,
    replacements: Option<History>,
    /// The latest replacement, when kept ([`SurfaceManager::keep_last_replacement`]).
    last_replacement: Option<Option<Replacement>>,
    /// The highest seq ever linked: no node has a higher one.
    top: Option<u64>,
    headers: HeaderTools,
    /// §21.9a: a surface-eligible event without `surfaceOp` is appended instead of rejected
    /// (the linear scan of a log written before DSH's surface existed).
    linear: bool,
    #[cfg(test)]
    visits: Visits,
}

impl SurfaceManager {
    pub fn new(dialect: &'static Dialect) -> Self {
        SurfaceManager {
            dialect,
            slots: Slots::default(),
            counts: Counts::default(),
            displaced: HashMap::default(),
            displaced_at: HashMap::default(),
            points: None,
            odd_roles: HashMap::default(),
            legacy: HashMap::default(),
            long_lines: HashMap::default(),
            count: 0,
            next_seq: 0,
            generation: 0,
            replacements: None,
            last_replacement: None,
            top: None,
            headers: HeaderTools::default(),
            linear: false,
            #[cfg(test)]
            visits: Visits::default(),
        }
    }

    /// Fold a log that carries no `surfaceOp` marker by the linear scan of §21.9a: every
    /// surface-eligible event without a marker is appended in log order. Not DSH's rule
    /// (it rejects such events, `surface-op-missing`); only for showing such a log.
    pub fn append_unmarked(&mut self) {
        self.linear = true;
    }

    /// Keep every replacement (for `surface --format json`); off by default to keep memory
    /// independent of the log's history.
    pub fn record_replacements(&mut self) {
        self.replacements.get_or_insert_with(History::default);
    }

    /// Keep the latest replacement (memory: one replacement, whatever the history).
    pub fn keep_last_replacement(&mut self) {
        self.last_replacement.get_or_insert(None);
    }

    /// The latest replacement, when kept (see [`SurfaceManager::keep_last_replacement`]).
    pub fn last_replacement(&self) -> Option<&Replacement> {
        self.last_replacement.as_ref().and_then(Option::as_ref)
    }

    /// The range a node on the surface replaced (`None` for appended nodes).
    pub fn replaced_range(&self, seq: u64) -> Option<(u64, u64)> {
        let l = self.displaced_at.get(&seq)?;
        self.displaced.get(l)?.range
    }

    /// Every replacement, in fold order, read back from the history (empty unless
    /// [`SurfaceManager::record_replacements`] was called).
    pub fn each_replacement(&self) -> impl Iterator<Item = io::Result<Replacement>> + '_ {
        self.replacements.iter().flat_map(History::iter)
    }

    /// [`SurfaceManager::each_replacement`], collected.
    pub fn replacements(&self) -> io::Result<Vec<Replacement>> {
        self.each_replacement().collect()
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn replace_generation(&self) -> u64 {
        self.generation
    }

    /// The seq the next event must carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// After a seq gap in damaged input, continue from the observed seq (§6.3).
    pub fn resync(&mut self, seq: u64) {
        self.next_seq = seq;
    }

    /// An event that occupies a seq but is never folded (bad envelope).
    pub fn skip(&mut self, seq: u64) {
        self.next_seq = seq.saturating_add(1);
    }

    /// The highest seq ever linked onto the surface.
    pub fn top(&self) -> Option<u64> {
        self.top
    }

    pub fn contains(&self, seq: u64) -> bool {
        self.label_of(seq).is_some()
    }

    pub fn node(&self, seq: u64) -> Option<Node<'_>> {
        self.label_of(seq).map(|l| self.node_at(l))
    }

    pub fn head(&self) -> Option<Node<'_>> {
        self.next_live(0).map(|l| self.node_at(l))
    }

    /// Nodes in model order.
    pub fn iter(&self) -> impl Iterator<Item = Node<'_>> + '_ {
        self.live_from(0)
    }

    /// The nodes at positions `at` (from 0) in model order: a search for the first, then the
    /// nodes returned. Parts of the surface can so be read on several threads.
    pub fn iter_at(&self, at: Range<usize>) -> impl Iterator<Item = Node<'_>> + '_ {
        let first = match u32::try_from(at.start) {
            Ok(k) if at.start < self.count => self.counts.select(k, order::LIVE),
            _ => self.slots.len(),
        };
        self.live_from(first).take(at.len())
    }

    /// The live nodes from label `first` on, in model order.
    fn live_from(&self, first: usize) -> impl Iterator<Item = Node<'_>> + '_ {
        (first..self.slots.len())
            .filter(|&l| self.slots.meta[l] & LIVE != 0)
            .map(|l| {
                self.visit();
                self.node_at(l)
            })
    }

    pub fn seqs(&self) -> Vec<u64> {
        self.iter().map(|n| n.seq).collect()
    }

    /// 0-based position of a node.
    pub fn index_of(&self, seq: u64) -> Option<usize> {
        self.label_of(seq).map(|l| self.live_before(l))
    }

    /// The nodes from `start` to `end` inclusive, in surface order; the cost is the number
    /// of nodes returned (an error costs no walk).
    pub fn range(&self, start: u64, end: u64) -> Result<Vec<u64>, RangeError> {
        let (first, last) = self.range_labels(start, end)?;
        Ok(self.walk(first, last).map(|l| self.seq_at(l)).collect())
    }

    /// The labels of `start` and `end`, checked to be live and in order.
    fn range_labels(&self, start: u64, end: u64) -> Result<(usize, usize), RangeError> {
        let first = self.label_of(start).ok_or(RangeError::StartMissing)?;
        let last = self.label_of(end).ok_or(RangeError::EndMissing)?;
        if first > last {
            return Err(RangeError::Reversed);
        }
        Ok((first, last))
    }

    /// Pairing balance of the cuts before `start` and after `end` (§15.3): the running count
    /// of open tool calls (assistant tool-call blocks minus tool results) is zero at both.
    /// Returns the counter before `start` and after `end`; a negative counter anywhere is
    /// reported as `Err(seq)` of the node where it went negative.
    pub fn balance_around(&self, start: u64, end: u64) -> Result<(i64, i64), u64> {
        let mut count: i64 = 0;
        let mut before = None;
        let mut after = None;
        for n in self.iter() {
            if n.seq == start {
                before = Some(count);
            }
            count += i64::from(n.tool_calls);
            if n.kind == SurfaceKind::ToolResult {
                count -= 1;
            }
            if count < 0 {
                return Err(n.seq);
            }
            if n.seq == end {
                after = Some(count);
            }
        }
        Ok((before.unwrap_or(0), after.unwrap_or(0)))
    }

    #[cfg(test)]
    fn visit(&self) {
        self.visits
            .0
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    #[cfg(not(test))]
    #[inline(always)]
    fn visit(&self) {}

    /// The live label holding `seq`.
    fn label_of(&self, seq: u64) -> Option<usize> {
        if let Some(&l) = self.displaced_at.get(&seq) {
            return Some(l as usize);
        }
        let block = self
            .slots
            .every64
            .partition_point(|&c| c <= seq)
            .checked_sub(1)?;
        let from = block * 64;
        let near = &self.slots.creator[from..(from + 64).min(self.slots.len())];
        let l = from + near.partition_point(|&c| c < seq);
        (self.slots.creator.get(l) == Some(&seq) && self.slots.meta[l] & (LIVE | DISPLACED) == LIVE)
            .then_some(l)
    }

    fn seq_at(&self, l: usize) -> u64 {
        if self.slots.meta[l] & DISPLACED == 0 {
            return self.slots.creator[l];
        }
        self.displaced
            .get(&(l as u32))
            .map_or(self.slots.creator[l], |d| d.seq)
    }

    fn node_at(&self, l: usize) -> Node<'_> {
        let meta = self.slots.meta[l];
        let kind = KINDS[usize::from((meta >> KIND_SHIFT) & 7).min(KINDS.len() - 1)];
        let extra = self.slots.extra[l];
        let (byte, message_at) = unpack_byte(self.slots.byte[l]);
        let role = match (meta >> ROLE_SHIFT) & 7 {
            0 => None,
            ROLE_OTHER => self.odd_roles.get(&(l as u32)).map(|r| &**r),
            c => ROLES.get(usize::from(c) - 1).copied(),
        };
        Node {
            seq: self.seq_at(l),
            kind,
            op: if meta & REPLACED != 0 {
                EntryOp::Replace
            } else {
                EntryOp::Append
            },
            role,
            pos: Pos {
                line: match self.slots.line[l] {
                    u32::MAX => self
                        .long_lines
                        .get(&(l as u32))
                        .copied()
                        .unwrap_or(u64::from(u32::MAX)),
                    line => u64::from(line),
                },
                byte,
            },
            message_at,
            derives: meta & DERIVES != 0,
            tool_calls: if kind == SurfaceKind::Assistant {
                u32::try_from(extra).unwrap_or(u32::MAX)
            } else {
                0
            },
            result_shape: if kind == SurfaceKind::ToolResult {
                extra
            } else {
                0
            },
            legacy: if self.legacy.is_empty() {
                None
            } else {
                self.legacy.get(&(l as u32)).map(|b| &**b)
            },
        }
    }

    /// Live labels before label `l` (its 0-based index when it is live).
    fn live_before(&self, l: usize) -> usize {
        self.counts.prefix(l, order::LIVE) as usize
    }

    /// The first live label at or after `l`.
    fn next_live(&self, l: usize) -> Option<usize> {
        if self.slots.meta.get(l)? & LIVE != 0 {
            return Some(l);
        }
        let k = self.live_before(l) as u32;
        let next = self.counts.select(k, order::LIVE);
        (next < self.slots.len()).then_some(next)
    }

    /// The live labels from `first` to `last` inclusive (both live), visiting each once.
    fn walk(&self, first: usize, last: usize) -> impl Iterator<Item = usize> + '_ {
        let mut cur = Some(first);
        std::iter::from_fn(move || {
            let l = cur?;
            self.visit();
            cur = if l >= last {
                None
            } else {
                self.next_live(l + 1).filter(|&n| n <= last)
            };
            Some(l)
        })
    }

    /// Fold one event: plan, then commit or reject. Returns whether the event was accepted.
    pub fn fold(&mut self, ev: &Event<'_>, class: TypeClass, sink: &mut dyn Sink) -> bool {
        let at = Reporter {
            version: Some(self.dialect.version),
            pos: ev.pos,
            seq: Some(ev.seq),
            event_type: Some(&ev.ty),
        };
        if ev.kind == Kind::RequestHeader && self.dialect.developer {
            self.headers.record(ev.seq, &ev.data);
        }
        self.prepare(ev, class);
        let planned = self.plan(ev, class, &at);
        self.next_seq = ev.seq.saturating_add(1);
        match planned {
            Ok((plan, warnings)) => {
                for w in warnings {
                    sink.push(w);
                }
                self.commit(plan);
                true
            }
            Err(f) => {
                sink.push(f);
                false
            }
        }
    }

    /// Validate an event into a plan (§11.2) without changing anything.
    pub fn plan(
        &self,
        ev: &Event<'_>,
        class: TypeClass,
        at: &Reporter<'_>,
    ) -> Result<(Plan, Vec<Finding>), Finding> {
        let d = self.dialect;
        // Step 1 — seq.
        if ev.seq != self.next_seq {
            return Err(at.finding(
                Code::SeqNotContiguous,
                format!(
                    "session event seq {} is not contiguous; expected {}",
                    ev.seq, self.next_seq
                ),
            ));
        }
        // A scan resynchronises on the observed seq after a gap (§6.3), which in damaged
        // input can go back to a seq already on the surface: folding it would link the node
        // twice (found by fuzzing, testdata/fuzz/repeated-seq-on-surface). Only a seq no
        // higher than the highest ever linked can be on it: the lookup is skipped otherwise.
        if self.top.is_some_and(|t| ev.seq <= t) && self.contains(ev.seq) {
            return Err(at.finding(
                Code::SeqNotContiguous,
                format!(
                    "session event seq {} repeats the seq of an event already on the surface",
                    ev.seq
                ),
            ));
        }
        // Step 2 — eligibility and marker shape.
        let kind = match class {
            TypeClass::Surface(kind) => kind,
            TypeClass::Opaque if d.opaque_unknown_metadata => return Ok((Plan::Nothing, vec![])),
            // Refused types were reported by the vocabulary check; never interpret them.
            TypeClass::UnknownRequired | TypeClass::RetiredRequired => {
                return Ok((Plan::Nothing, vec![]));
            }
            TypeClass::LogOnly | TypeClass::Opaque => {
                return self.plan_log_only(ev, class, at);
            }
        };
        let endpoints = if self.linear && ev.surface_op.is_none() {
            None
        } else {
            marker(d, ev, at)?
        };
        // Step 3 — event-local references (v3+).
        let mut sources = None;
        if d.canonical {
            if let Some((s, e)) = endpoints
                && (s >= ev.seq || e >= ev.seq)
            {
                return Err(at.finding(
                        Code::ReplaceEndpointNotEarlier,
                        format!(
                            "surface replace at seq {}: startSeq and endSeq must reference earlier events (got {s}..{e})",
                            ev.seq
                        ),
                    ));
            }
            sources = self.provenance(ev, kind, at)?;
        }
        // Step 4 — developer binding (v4).
        if d.developer {
            self.developer_binding(ev, kind, at)?;
        }
        // Step 6 for v0–v2 appends.
        if !d.canonical && endpoints.is_none() {
            self.provenance(ev, kind, at)?;
        }
        let node = self.node_for(ev, kind, endpoints.is_some());
        let Some((start, end)) = endpoints else {
            return Ok((Plan::Append(node), vec![]));
        };
        // Step 7.1 — the range, by surface position (labels follow it).
        let (first, last) = self.range_labels(start, end).map_err(|e| match e {
            RangeError::StartMissing => at.finding(
                Code::ReplaceStartNotOnSurface,
                format!("surface replace: start seq {start} not found in surface"),
            ),
            RangeError::EndMissing => at.finding(
                Code::ReplaceEndNotOnSurface,
                format!("surface replace: end seq {end} not found in surface"),
            ),
            RangeError::Reversed => at.finding(
                Code::ReplaceRangeReversed,
                format!(
                    "surface replace: start seq {start} (index {}) is after end seq {end} (index {})",
                    self.index_of(start).unwrap_or_default(),
                    self.index_of(end).unwrap_or_default()
                ),
            ),
        })?;
        let shadowed = self.live_before(last + 1) - self.live_before(first);
        // Step 7.2 — provenance (v0–v2: a–g; v3+: g).
        if !d.canonical {
            sources = self.provenance(ev, kind, at)?;
        }
        let (missing, listed) = self.uncited(sources.as_ref(), first, last);
        if missing > 0 {
            return Err(at.finding(
                Code::ReplaceMissingShadowedSource,
                format!(
                    "surface replace: sourceEventSeqs must include every shadowed surface node; missing {}",
                    seq_list_counted(&listed, missing, LISTED)
                ),
            ));
        }
        // Step 7.3 — tool-result rule.
        if kind == SurfaceKind::ToolResult {
            if shadowed != 1 {
                return Err(at.finding(
                    Code::ToolResultReplaceNotSingle,
                    format!(
                        "tool/result surface replacement must rewrite exactly one current node, but {start}..{end} covers {shadowed} nodes"
                    ),
                ));
            }
            let target = self.node_at(first);
            if target.kind != SurfaceKind::ToolResult {
                return Err(at.finding(
                    Code::ToolResultReplaceTargetNotResult,
                    format!(
                        "tool/result surface replacement must target a current tool/result, but seq {} is a {}",
                        target.seq,
                        target.kind.type_name()
                    ),
                ));
            }
            if target.result_shape != node.result_shape {
                return Err(at.finding(
                    Code::ToolResultReplaceChangesMore,
                    format!(
                        "tool/result surface replacement may change only content, but its data differs from seq {} elsewhere (turn, step, error, meta, message id, source, toolCallId or isError)",
                        target.seq
                    ),
                ));
            }
        }
        // Step 7.4 — protected system head (v3+).
        if d.system_head && self.next_live(0) == Some(first) {
            let head_is_system = self.node_at(first).kind == SurfaceKind::System;
            if head_is_system && (kind != SurfaceKind::System || shadowed != 1) {
                return Err(at.finding(
                    Code::SystemHeadProtected,
                    format!(
                        "surface replace: node 0 holds the system prompt and may be rewritten only by a system/message over exactly that node (this {} covers {} node{})",
                        kind.type_name(),
                        shadowed,
                        if shadowed == 1 { "" } else { "s" }
                    ),
                ));
            }
        }
        Ok((
            Plan::Replace(Replace {
                node,
                start,
                end,
                first,
                last,
            }),
            vec![],
        ))
    }

    /// The uncited displaced nodes at labels `first..=last`, counted per gap; the first
    /// [`LISTED`] found by bisection on the counts.
    fn uncited_displaced(
        &self,
        points: &PointSet,
        gaps: &[(u64, u64)],
        first: usize,
        last: usize,
        total: &mut u64,
        labels: &mut Vec<usize>,
    ) {
        let (lo, hi) = (first as u32, last as u32);
        let hit: Vec<(u64, u64)> = gaps
            .iter()
            .copied()
            .filter(|&(a, b)| {
                let n = points.count(a, b, lo, hi) as u64;
                *total += n;
                n > 0
            })
            .collect();
        let any_in =
            |from: u32, to: u32| hit.iter().any(|&(a, b)| points.count(a, b, from, to) > 0);
        let (mut from, mut found) = (lo, 0);
        // The next uncited displaced label, by bisection on the counts.
        while found < LISTED && from <= hi && any_in(from, hi) {
            let (mut a, mut b) = (from, hi);
            while a < b {
                let mid = a + (b - a) / 2;
                if any_in(from, mid) {
                    b = mid;
                } else {
                    a = mid + 1;
                }
            }
            labels.push(a as usize);
            found += 1;
            from = a + 1;
        }
    }

    /// The nodes at the live labels `first..=last` whose seq `cited` lacks (§11.2 step 6 g):
    /// how many, and the seqs of the first [`LISTED`] of them in surface order. The cost
    /// follows the number of runs in `cited`, never the length of the range: a replace that
    /// is rejected leaves its range in place, and a walk would be paid again by the next one.
    fn uncited(&self, cited: Option<&SeqList>, first: usize, last: usize) -> (u64, Vec<u64>) {
        let gaps = gaps(cited, self.top.unwrap_or(0));
        let mut total = 0u64;
        let mut labels: Vec<usize> = Vec::new();
        // Nodes that are not displaced: their seq is their label's creator, which grows with
        // the label, so those whose seq lies in one gap hold one run of labels.
        let creators = &self.slots.creator[first..=last];
        let (low, high) = (creators[0], creators[creators.len() - 1]);
        let mut from = 0;
        for &(a, b) in &gaps[gaps.partition_point(|g| g.1 < low)..] {
            if a > high {
                break;
            }
            let lo = from + creators[from..].partition_point(|&c| c < a);
            let hi = lo + creators[lo..].partition_point(|&c| c <= b);
            from = hi;
            let n = self.counts.between(first + lo, first + hi, order::REGULAR);
            total += u64::from(n);
            let k = self.counts.prefix(first + lo, order::REGULAR);
            let take = n.min(LISTED.saturating_sub(labels.len()) as u32);
            labels.extend((k..k + take).map(|k| self.counts.select(k, order::REGULAR)));
        }
        // Displaced nodes: checked one by one when there are few, else counted per gap.
        let displaced = self.counts.between(first, last + 1, order::DISPLACED);
        let points = self.points.as_ref().filter(|_| displaced > FEW_DISPLACED);
        if let Some(points) = points {
            self.uncited_displaced(points, &gaps, first, last, &mut total, &mut labels);
        } else {
            let k = self.counts.prefix(first, order::DISPLACED);
            for l in (k..k + displaced).map(|k| self.counts.select(k, order::DISPLACED)) {
                self.visit();
                if in_gaps(&gaps, self.seq_at(l)) {
                    total += 1;
                    labels.push(l);
                }
            }
        }
        labels.sort_unstable();
        labels.truncate(LISTED);
        (total, labels.into_iter().map(|l| self.seq_at(l)).collect())
    }

    fn plan_log_only(
        &self,
        ev: &Event<'_>,
        class: TypeClass,
        at: &Reporter<'_>,
    ) -> Result<(Plan, Vec<Finding>), Finding> {
        let what = if class == TypeClass::Opaque {
            "an unknown ignorable event"
        } else {
            "not surface-eligible"
        };
        let carried = if ev.surface_op.is_some() {
            Some("surfaceOp")
        } else {
            ev.source_seqs.as_ref().map(|_| "sourceEventSeqs")
        };
        if let Some(member) = carried {
            return Err(at.finding(
                Code::SurfaceMetadataOnLogOnly,
                format!(
                    "session event \"{}\" is {what} and cannot carry {member}",
                    ev.ty
                ),
            ));
        }
        let mut warnings = vec![];
        // Step 5 — message projections (v4).
        if self.dialect.message_projections && ev.kind == Kind::ImageOffload {
            warnings.push(at.finding(
                Code::MessageProjectionNotApplied,
                "image/offload rewrites derived messages through its owning plugin, which dshs does not have; derive shows the stored messages",
            ));
        }
        Ok((Plan::Nothing, warnings))
    }

    /// Step 6 a–f: the local provenance rules. Returns the decoded list, if any.
    fn provenance(
        &self,
        ev: &Event<'_>,
        kind: SurfaceKind,
        at: &Reporter<'_>,
    ) -> Result<Option<super::rows::SeqList>, Finding> {
        let d = self.dialect;
        let Some(stored) = &ev.source_seqs else {
            return Ok(None);
        };
        if d.canonical && kind == SurfaceKind::Assistant {
            return Err(at.finding(
                Code::SourceSeqsOnAssistant,
                "assistant/message embeds its source stream and cannot carry sourceEventSeqs",
            ));
        }
        let Some(items) = stored.as_arr() else {
            return Err(at.finding(
                Code::SourceSeqsNotArray,
                format!(
                    "sourceEventSeqs on event at seq {} must be an array when present",
                    ev.seq
                ),
            ));
        };
        if items.is_empty() && (d.canonical || kind != SurfaceKind::Assistant) {
            let msg = if d.canonical {
                "sourceEventSeqs must not be empty"
            } else {
                "sourceEventSeqs must not be empty except on assistant/message"
            };
            return Err(at.finding(Code::SourceSeqsEmpty, msg));
        }
        let neg_zero = |v: &Json<'_>| match v {
            Json::Arr(pair) => pair.iter().any(Json::is_neg_zero),
            other => other.is_neg_zero(),
        };
        let invalid = |why: String| {
            at.finding(
                Code::SourceSeqsInvalidElement,
                format!(
                    "session event \"{}\" sourceEventSeqs must densely contain non-negative safe integers ({why})",
                    ev.ty
                ),
            )
        };
        if d.canonical && items.iter().any(neg_zero) {
            return Err(invalid("found -0".into()));
        }
        match decode_sources(stored, Some(ev.seq)) {
            Ok(list) => Ok(Some(list)),
            Err(SourceError::NotArray) => unreachable_not_array(at, ev),
            Err(SourceError::BadElement(why)) => Err(invalid(why)),
            Err(SourceError::NotIncreasing) => Err(invalid(
                "a range-encoded list must be strictly increasing".into(),
            )),
            Err(SourceError::Duplicate(v)) => Err(at.finding(
                Code::SourceSeqsDuplicate,
                format!("sourceEventSeqs must not contain duplicates ({v} repeats)"),
            )),
            Err(SourceError::NotEarlier { value, seq }) => Err(at.finding(
                Code::SourceSeqsNotEarlier,
                format!(
                    "sourceEventSeqs must reference earlier events: {value} >= current seq {seq}"
                ),
            )),
        }
    }

    /// §9.3: developer messages and tool-change blocks (v4).
    fn developer_binding(
        &self,
        ev: &Event<'_>,
        kind: SurfaceKind,
        at: &Reporter<'_>,
    ) -> Result<(), Finding> {
        let message = ev.message();
        let role_is_developer =
            message.and_then(|m| m.get("role")).and_then(Json::as_str) == Some("developer");
        if (kind == SurfaceKind::Developer) != role_is_developer {
            return Err(at.finding(
                Code::DeveloperRoleMismatch,
                "developer/message and developer role must occur together",
            ));
        }
        let blocks = message
            .and_then(|m| m.get("content"))
            .and_then(Json::as_arr)
            .unwrap_or_default();
        let changes: Vec<&Json<'_>> = blocks
            .iter()
            .filter(|b| {
                matches!(
                    b.get("type").and_then(Json::as_str),
                    Some("tool-addition" | "tool-removal")
                )
            })
            .collect();
        if kind != SurfaceKind::Developer {
            if !changes.is_empty() {
                return Err(at.finding(
                    Code::ToolChangeBlockMisplaced,
                    format!(
                        "tool-change blocks require developer role (found in {})",
                        ev.ty
                    ),
                ));
            }
            return Ok(());
        }
        let mut additions = Vec::new();
        for b in &changes {
            let block_type = b.get("type").and_then(Json::as_str).unwrap_or_default();
            let Some(name) = b.get("toolName").and_then(Json::as_text) else {
                return Err(at.finding(
                    Code::ToolChangeBlockInvalid,
                    format!("{block_type} requires a nonempty toolName"),
                ));
            };
            if block_type == "tool-addition" {
                if b.has("tool") {
                    return Err(at.finding(
                        Code::ToolChangeBlockInvalid,
                        "tool-addition must omit inline tool definitions",
                    ));
                }
                additions.push(name);
            }
        }
        let header_seq = ev.data.get("headerSeq");
        if header_seq.is_some() == additions.is_empty() {
            return Err(at.finding(
                Code::DeveloperHeaderSeq,
                "developer/message requires headerSeq exactly when tool additions are present",
            ));
        }
        let Some(header_seq) = header_seq else {
            return Ok(());
        };
        let Some(hs) = header_seq.safe_uint() else {
            return Err(at.finding(
                Code::DeveloperHeaderSeq,
                "developer/message headerSeq must be a safe integer ≥ 0",
            ));
        };
        let tools = match self.headers.get(hs) {
            Some(tools) if hs < ev.seq => tools,
            _ => {
                return Err(at.finding(
                    Code::DeveloperHeaderSeq,
                    format!(
                        "developer/message headerSeq must reference an earlier request/header (seq {hs} is not one)"
                    ),
                ));
            }
        };
        for name in additions {
            let matching: Vec<&ToolDef> = tools.iter().filter(|t| t.name == name).collect();
            let [tool] = matching.as_slice() else {
                return Err(at.finding(
                    Code::DeveloperToolBinding,
                    format!(
                        "developer/message tool-addition \"{}\" must name exactly one tool in headerSeq {hs} (found {})",
                        crate::log::text::clip(name, 80),
                        matching.len()
                    ),
                ));
            };
            if !tool.complete {
                return Err(at.finding(
                    Code::DeveloperToolBinding,
                    format!(
                        "developer/message tool-addition \"{}\" requires a complete tool definition in headerSeq {hs} (string description and object parameters)",
                        crate::log::text::clip(name, 80)
                    ),
                ));
            }
            if !tool.defer_loading_ok {
                return Err(at.finding(
                    Code::DeveloperToolBinding,
                    "developer/message referenced tool deferLoading must be true when present",
                ));
            }
        }
        Ok(())
    }

    fn node_for(&self, ev: &Event<'_>, kind: SurfaceKind, replace: bool) -> NewNode {
        let message = ev.message();
        let content = message.and_then(|m| m.get("content"));
        let empty = content
            .and_then(Json::as_arr)
            .is_some_and(<[Json<'_>]>::is_empty);
        let derives = match kind {
            SurfaceKind::User | SurfaceKind::ToolResult => true,
            SurfaceKind::Assistant | SurfaceKind::System | SurfaceKind::Developer => !empty,
        };
        let tool_calls = if kind == SurfaceKind::Assistant {
            ev.tool_call_blocks().count() as u32
        } else {
            0
        };
        let result_shape = if kind == SurfaceKind::ToolResult {
            ev.result_digest
                .unwrap_or_else(|| result_digest(self.dialect, &ev.data, false))
        } else {
            0
        };
        NewNode {
            seq: ev.seq,
            kind,
            op: if replace {
                EntryOp::Replace
            } else {
                EntryOp::Append
            },
            role: role_code(message.and_then(|m| m.get("role")).and_then(Json::as_str)),
            pos: ev.pos,
            message_at: if ev.normalized {
                None
            } else {
                message_of(&ev.data, kind)
                    .and_then(|m| ev.offset_in_line(m))
                    .and_then(|at| u32::try_from(at).ok())
            },
            derives,
            tool_calls,
            result_shape,
            legacy: self
                .dialect
                .legacy_v0
                .then(|| LegacyNode {
                    message: ev
                        .normalized
                        .then(|| message.map(|m| m.to_js_string().into()))
                        .flatten(),
                    message_id: (kind == SurfaceKind::ToolResult)
                        .then(|| {
                            message
                                .and_then(|m| m.get("id"))
                                .and_then(Json::as_str)
                                .map(Box::from)
                        })
                        .flatten(),
                })
                .filter(|l| l.message.is_some() || l.message_id.is_some())
                .map(Box::new),
        }
    }

    /// Apply a plan.
    pub fn commit(&mut self, plan: Plan) {
        match plan {
            Plan::Nothing => {}
            Plan::Append(node) => self.push_back(node),
            Plan::Replace(r) => {
                let (start, end) = (r.start, r.end);
                let shadowed: Vec<usize> = self.walk(r.first, r.last).collect();
                let seqs: Vec<u64> = shadowed.iter().map(|&l| self.seq_at(l)).collect();
                for (&l, &seq) in shadowed.iter().zip(&seqs) {
                    self.kill(l, seq);
                }
                let seq = r.node.seq;
                self.top = self.top.max(Some(seq));
                self.revive(r.first, r.node, Some((start, end)));
                self.generation += 1;
                let r = Replacement {
                    seq,
                    start,
                    end,
                    shadowed: seqs,
                };
                if let Some(h) = &mut self.replacements {
                    h.push(&r);
                }
                if let Some(last) = &mut self.last_replacement {
                    *last = Some(r);
                }
                if self.points.as_ref().is_some_and(PointSet::wants_rebuild) {
                    self.rebuild_points();
                }
                if self.slots.len() - self.count > self.count + SLACK {
                    self.compact();
                }
            }
        }
    }

    fn push_back(&mut self, node: NewNode) {
        let last = self.slots.creator.last().copied();
        // Creators must stay strictly increasing: an append whose seq is not above every
        // earlier one (only after a seq regression in damaged input) is kept as displaced.
        let regular = last.is_none_or(|c| node.seq > c);
        let l = self.slots.len();
        self.slots
            .push(if regular { node.seq } else { last.unwrap_or(0) }, &node, 0);
        self.counts.push();
        self.top = self.top.max(Some(node.seq));
        self.revive(l, node, None);
    }

    /// Put `node` at the dead (or new) label `l`.
    fn revive(&mut self, l: usize, mut node: NewNode, range: Option<(u64, u64)>) {
        let key = l as u32;
        let displaced = self.slots.creator[l] != node.seq;
        self.slots
            .set(l, &node, LIVE | if displaced { DISPLACED } else { 0 });
        if let Some(role) = node.role.1.take() {
            self.odd_roles.insert(key, role);
        }
        if let Some(legacy) = node.legacy.take() {
            self.legacy.insert(key, legacy);
        }
        if node.pos.line >= u64::from(u32::MAX) {
            self.long_lines.insert(key, node.pos.line);
        }
        if displaced {
            self.counts.set(l, order::DISPLACED);
            self.displaced.insert(
                key,
                Displaced {
                    seq: node.seq,
                    range,
                },
            );
            self.displaced_at.insert(node.seq, key);
            if let Some(p) = &mut self.points {
                p.insert(node.seq, key);
            }
        } else {
            self.counts.set(l, order::REGULAR);
        }
        self.count += 1;
    }

    /// Take the node with `seq` at label `l` off the surface.
    fn kill(&mut self, l: usize, seq: u64) {
        let key = l as u32;
        let meta = self.slots.meta[l];
        self.slots.meta[l] = meta & !LIVE;
        if meta & DISPLACED != 0 {
            self.counts.set(l, 0);
            self.displaced.remove(&key);
            self.displaced_at.remove(&seq);
            if let Some(p) = &mut self.points {
                p.remove(seq, key);
            }
        } else {
            self.counts.set(l, 0);
        }
        if (meta >> ROLE_SHIFT) & 7 == ROLE_OTHER {
            self.odd_roles.remove(&key);
        }
        if !self.legacy.is_empty() {
            self.legacy.remove(&key);
        }
        if self.slots.line[l] == u32::MAX {
            self.long_lines.remove(&key);
        }
        self.count -= 1;
    }

    fn rebuild_points(&mut self) {
        if let Some(p) = &mut self.points {
            p.rebuild(self.displaced.iter().map(|(l, d)| (d.seq, *l)));
        }
    }

    /// Before planning a replace whose range holds more displaced nodes than are checked one
    /// by one: make sure they can be counted instead (see `points`).
    fn prepare(&mut self, ev: &Event<'_>, class: TypeClass) {
        if self.points.is_some() || !matches!(class, TypeClass::Surface(_)) {
            return;
        }
        let at = Reporter::untyped(None, ev.pos);
        let Ok(Some((start, end))) = marker(self.dialect, ev, &at) else {
            return;
        };
        if let Ok((first, last)) = self.range_labels(start, end)
            && self.counts.between(first, last + 1, order::DISPLACED) > FEW_DISPLACED
        {
            let mut p = PointSet::default();
            p.rebuild(self.displaced.iter().map(|(l, d)| (d.seq, *l)));
            self.points = Some(p);
        }
    }

    /// Drop the dead labels: live ones are renumbered in order, so surface order, creators'
    /// order and every count stay as they were.
    fn compact(&mut self) {
        let mut displaced = HashMap::default();
        let mut odd_roles = HashMap::default();
        let mut legacy = HashMap::default();
        let mut long_lines = HashMap::default();
        let mut to = 0u32;
        for from in 0..self.slots.len() {
            if self.slots.meta[from] & LIVE == 0 {
                continue;
            }
            let from = from as u32;
            if let Some(d) = self.displaced.remove(&from) {
                self.displaced_at.insert(d.seq, to);
                displaced.insert(to, d);
            }
            if let Some(r) = self.odd_roles.remove(&from) {
                odd_roles.insert(to, r);
            }
            if let Some(x) = self.legacy.remove(&from) {
                legacy.insert(to, x);
            }
            if let Some(x) = self.long_lines.remove(&from) {
                long_lines.insert(to, x);
            }
            to += 1;
        }
        self.slots.retain_live();
        (self.displaced, self.odd_roles, self.legacy) = (displaced, odd_roles, legacy);
        self.long_lines = long_lines;
        let metas = &self.slots.meta;
        self.counts = Counts::build(metas.iter().map(|m| {
            Some(if m & DISPLACED == 0 {
                order::REGULAR
            } else {
                order::DISPLACED
            })
        }));
        self.rebuild_points();
    }
}

/// The seqs in `[0, top]` that `cited` does not list, as sorted disjoint inclusive runs
/// (every seq on the surface is at most `top`). An absent list cites nothing.
fn gaps(cited: Option<&SeqList>, top: u64) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = cited.map(|l| l.runs().to_vec()).unwrap_or_default();
    if !runs.is_sorted() {
        runs.sort_unstable();
    }
    let mut gaps = Vec::new();
    // The lowest seq not yet covered.
    let mut next = 0u64;
    for (a, b) in runs {
        if next > top || a > top {
            break;
        }
        if a > next {
            gaps.push((next, a - 1));
        }
        next = next.max(b.saturating_add(1));
    }
    if next <= top {
        gaps.push((next, top));
    }
    gaps
}

fn in_gaps(gaps: &[(u64, u64)], seq: u64) -> bool {
    let i = gaps.partition_point(|g| g.1 < seq);
    gaps.get(i).is_some_and(|g| g.0 <= seq)
}

/// Step 2 for a surface-eligible event: `None` for append, `Some((start, end))` for replace.
fn marker(d: &Dialect, ev: &Event<'_>, at: &Reporter<'_>) -> Result<Option<(u64, u64)>, Finding> {
    let Some(op) = &ev.surface_op else {
        return Err(at.finding(
            Code::SurfaceOpMissing,
            format!(
                "session event \"{}\" is surface-eligible and requires a surfaceOp marker",
                ev.ty
            ),
        ));
    };
    match op {
        Json::Str(s) if s == "append" => Ok(None),
        Json::Obj(_) => {
            let (sk, ek) = d.replace_keys;
            let keys = op.keys();
            let endpoint = |k: &str| -> Option<u64> {
                let v = op.get(k)?;
                if d.canonical && v.is_neg_zero() {
                    return None;
                }
                v.safe_uint()
            };
            let shaped = keys.len() == 3
                && op.get("op").and_then(Json::as_str) == Some("replace")
                && keys.contains(&sk)
                && keys.contains(&ek);
            match (shaped, endpoint(sk), endpoint(ek)) {
                (true, Some(s), Some(e)) => Ok(Some((s, e))),
                _ => Err(at.finding(
                    Code::ReplaceOpInvalid,
                    format!(
                        "session event \"{}\" carries an invalid replace surfaceOp {}: format v{} needs exactly {{\"op\":\"replace\",\"{sk}\":S,\"{ek}\":E}} with safe integers ≥ 0",
                        ev.ty,
                        crate::log::text::clip(&op.to_js_string(), 80),
                        d.version
                    ),
                )),
            }
        }
        other => Err(at.finding(
            Code::SurfaceOpInvalid,
            format!(
                "session event \"{}\" carries an invalid surfaceOp {}",
                ev.ty,
                crate::log::text::clip(&other.to_js_string(), 80)
            ),
        )),
    }
}

/// §8 C1–C5: the event-local surface rules of the canonical envelope (v3+). A violation
/// makes the row bad (§6.1 B5); the fold reports it when the row turns out to be committed.
pub fn surface_metadata_violation(d: &Dialect, ev: &Event<'_>, class: TypeClass) -> Option<Code> {
    if !d.canonical {
        return None;
    }
    let at = Reporter::untyped(Some(d.version), ev.pos);
    match class {
        TypeClass::Surface(kind) => {
            match marker(d, ev, &at) {
                Err(f) => return Some(f.code),
                Ok(Some((s, e))) if s >= ev.seq || e >= ev.seq => {
                    return Some(Code::ReplaceEndpointNotEarlier);
                }
                Ok(_) => {}
            }
            (kind == SurfaceKind::Assistant && ev.source_seqs.is_some())
                .then_some(Code::SourceSeqsOnAssistant)
        }
        TypeClass::LogOnly => (ev.surface_op.is_some() || ev.source_seqs.is_some())
            .then_some(Code::SurfaceMetadataOnLogOnly),
        _ => None,
    }
}

impl super::legacy::MessageIds for SurfaceManager {
    fn message_id(&self, seq: u64) -> Option<String> {
        let legacy = self.legacy.get(&(self.label_of(seq)? as u32))?;
        legacy.message_id.as_deref().map(str::to_owned)
    }
}

fn unreachable_not_array(
    at: &Reporter<'_>,
    ev: &Event<'_>,
) -> Result<Option<super::rows::SeqList>, Finding> {
    // `provenance` checked the array shape before decoding; keep a finding, not a panic.
    Err(at.finding(
        Code::SourceSeqsNotArray,
        format!(
            "sourceEventSeqs on event at seq {} must be an array when present",
            ev.seq
        ),
    ))
}

#[cfg(test)]
mod tests;

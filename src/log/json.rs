//! A small JSON value tree with the semantics DSH (JavaScript) gives a log line.
//!
//! `serde_json::Value` loses what the format rules need: it keeps only the last of duplicate
//! keys without telling, and it owns every string. This tree borrows strings from the line
//! buffer where it can, keeps every member in file order (lookups are last-wins, like
//! `JSON.parse`), and keeps numbers as parsed so `-0` stays visible.

use std::borrow::Cow;
use std::fmt;
use std::hash::Hasher;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::log::limits::{self, Guard, LimitHit};

mod fast;

pub(crate) use fast::scan as string_plain_end;
pub(crate) use fast::{
    Flat, escaped, flat_array_end, flat_array_items, prefix_xor, stringify_string_end,
};

pub(crate) use fast::escaped_char;

/// Largest integer JavaScript represents exactly (`Number.MAX_SAFE_INTEGER`).
pub const MAX_SAFE: u64 = (1 << 53) - 1;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    U(u64),
    I(i64),
    F(f64),
}

impl Num {
    pub fn as_f64(self) -> f64 {
        match self {
            Num::U(u) => u as f64,
            Num::I(i) => i as f64,
            Num::F(f) => f,
        }
    }

    /// The value as an integer when it is a JavaScript safe integer (spelling is irrelevant:
    /// `5`, `5.0` and `5e0` are all 5).
    pub fn safe_int(self) -> Option<i64> {
        match self {
            Num::U(u) if u <= MAX_SAFE => Some(u as i64),
            Num::I(i) if i.unsigned_abs() <= MAX_SAFE => Some(i),
            Num::F(f) if f.fract() == 0.0 && f.abs() <= MAX_SAFE as f64 => Some(f as i64),
            _ => None,
        }
    }

    pub fn is_neg_zero(self) -> bool {
        matches!(self, Num::F(f) if f == 0.0 && f.is_sign_negative())
    }
}

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Num::U(u) => write!(f, "{u}"),
            Num::I(i) => write!(f, "{i}"),
            Num::F(x) if x.is_sign_negative() && *x == 0.0 => write!(f, "-0"),
            Num::F(x) => write!(f, "{x}"),
        }
    }
}

/// An object member: its key and value.
pub type Member<'a> = (Cow<'a, str>, Json<'a>);

/// An object's members being built (see [`List`] for the stored form).
pub type Members<'a> = Vec<Member<'a>>;

#[derive(Debug, PartialEq)]
pub enum Json<'a> {
    Null,
    Bool(bool),
    Num(Num),
    Str(JStr<'a>),
    Arr(List<'a, Json<'a>>),
    Obj(List<'a, Member<'a>>),
}

/// A value made by [`Json::into_owned`], kept past its line (the open turn and step of the
/// closers, a running compaction's ids). Unlike a `Json` in general it may move to another
/// thread with the fold state (see `scan::pipeline`): it holds only owned strings and owned
/// lists, never an arena list, a string unescaped on demand (a cell, into an arena) or
/// anything borrowed. Only [`OwnedJson::new`] makes one, and it is never changed in place.
#[derive(Debug, PartialEq)]
pub struct OwnedJson(Json<'static>);

// SAFETY: what keeps `Json` from being `Send` are its variants that refer to an arena (`&[T]`
// lists, `&Lazy` strings: references to non-`Sync` data) and the `OnceCell` of a lazily
// unescaped string, which `Json::into_owned` never produces (strings become `Cow::Owned`
// text, lists `List::Owned`) and `Clone` keeps as they are; the field is private and only
// read, so no other value can get in. What remains (`String`, `Vec`, numbers) is `Send`.
unsafe impl Send for OwnedJson {}

impl OwnedJson {
    pub fn new(v: Json<'_>) -> Self {
        OwnedJson(v.into_owned())
    }
}

impl Clone for OwnedJson {
    fn clone(&self) -> Self {
        // Cloning owned strings and lists makes owned ones (see the `Send` impl).
        OwnedJson(self.0.clone())
    }
}

impl std::ops::Deref for OwnedJson {
    type Target = Json<'static>;
    fn deref(&self) -> &Json<'static> {
        &self.0
    }
}

/// Written out so the common copies (scalars, borrowed strings, arena lists) are inlined
/// where they are made; only owned values call out.
impl Clone for Json<'_> {
    #[inline]
    fn clone(&self) -> Self {
        match self {
            Json::Null => Json::Null,
            Json::Bool(b) => Json::Bool(*b),
            Json::Num(n) => Json::Num(*n),
            Json::Str(s) => Json::Str(s.clone()),
            Json::Arr(a) => Json::Arr(a.clone()),
            Json::Obj(m) => Json::Obj(m.clone()),
        }
    }
}

impl Clone for JStr<'_> {
    #[inline]
    fn clone(&self) -> Self {
        JStr(match &self.0 {
            Repr::Text(Cow::Borrowed(t)) => Repr::Text(Cow::Borrowed(t)),
            Repr::InArena(raw, lazy) => Repr::InArena(raw, lazy),
            Repr::Text(Cow::Owned(t)) => Repr::Text(Cow::Owned(t.clone())),
            Repr::Escaped(raw, cooked) => Repr::Escaped(raw, cooked.clone()),
        })
    }
}

/// Where the scan's parsers put a line's tree (see [`List`]): a bump arena, reset (and kept)
/// for the next line or block.
#[derive(Default)]
pub struct Arena {
    bump: bumpalo::Bump,
}

impl Arena {
    /// Free everything the arena holds (keeping its largest chunk for reuse).
    pub fn reset(&mut self) {
        self.bump.reset();
    }

    /// Bytes the arena has taken from the allocator.
    pub fn allocated_bytes(&self) -> usize {
        self.bump.allocated_bytes()
    }

    pub(crate) fn bump(&self) -> &bumpalo::Bump {
        &self.bump
    }
}

/// The fast parser's two scratch stacks (the members and items of the open objects and
/// arrays), kept empty from one line to the next of a block: each line taking its own had
/// put every line on fresh allocator pages.
#[derive(Default)]
pub struct Scratch<'a> {
    pub(crate) members: Members<'a>,
    pub(crate) items: Vec<Json<'a>>,
}

impl Scratch<'_> {
    /// The same stacks, emptied, for trees of another lifetime (the next line's arena): the
    /// collect runs in place, so their allocations are kept and nothing else is.
    pub fn recycle<'b>(self) -> Scratch<'b> {
        fn empty<T, U>(mut v: Vec<T>) -> Vec<U> {
            v.clear();
            v.into_iter()
                .map(|_| unreachable!("the vector is empty"))
                .collect()
        }
        Scratch {
            members: empty(self.members),
            items: empty(self.items),
        }
    }
}

/// The items of an array or the members of an object.
///
/// A line parsed on the scan's hot path puts them in the arena of its block
/// ([`parse_audited_in`]): made by bumping a pointer, freed all at once with the arena, never
/// walked to be dropped (a tenth of a pass went to freeing trees node by node). Everything
/// inside an arena list is borrowed (strings from the line or the arena, lists from the
/// arena), so nothing in it needs dropping. Values built or changed in memory own theirs; a
/// change to an arena list copies it out first (shallowly: its items are borrowed).
pub enum List<'a, T> {
    Arena(&'a [T]),
    Owned(Vec<T>),
}

impl<T> std::ops::Deref for List<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            List::Arena(s) => s,
            List::Owned(v) => v,
        }
    }
}

impl<T: Clone> List<'_, T> {
    /// The owned list, copying an arena list out first.
    pub fn to_mut(&mut self) -> &mut Vec<T> {
        if let List::Arena(s) = self {
            *self = List::Owned(s.to_vec());
        }
        match self {
            List::Owned(v) => v,
            List::Arena(_) => unreachable!("made owned just above"),
        }
    }

    pub fn into_vec(self) -> Vec<T> {
        match self {
            List::Arena(s) => s.to_vec(),
            List::Owned(v) => v,
        }
    }
}

impl<T: Clone> Clone for List<'_, T> {
    #[inline]
    fn clone(&self) -> Self {
        match self {
            List::Arena(s) => List::Arena(s),
            List::Owned(v) => List::Owned(v.clone()),
        }
    }
}

impl<T: PartialEq> PartialEq for List<'_, T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: fmt::Debug> fmt::Debug for List<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T> From<Vec<T>> for List<'_, T> {
    fn from(v: Vec<T>) -> Self {
        List::Owned(v)
    }
}

impl<T> FromIterator<T> for List<'_, T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        List::Owned(items.into_iter().collect())
    }
}

impl<'l, T> IntoIterator for &'l List<'_, T> {
    type Item = &'l T;
    type IntoIter = std::slice::Iter<'l, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// A list's items by value: moved out of an owned list, copied out of an arena list (the
/// copies are shallow: what they hold is borrowed too).
pub enum ListIntoIter<'a, T> {
    Arena(std::slice::Iter<'a, T>),
    Owned(std::vec::IntoIter<T>),
}

impl<T: Clone> Iterator for ListIntoIter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        match self {
            ListIntoIter::Arena(i) => i.next().cloned(),
            ListIntoIter::Owned(i) => i.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            ListIntoIter::Arena(i) => i.size_hint(),
            ListIntoIter::Owned(i) => i.size_hint(),
        }
    }
}

impl<T: Clone> ExactSizeIterator for ListIntoIter<'_, T> {}

impl<T: Clone> DoubleEndedIterator for ListIntoIter<'_, T> {
    fn next_back(&mut self) -> Option<T> {
        match self {
            ListIntoIter::Arena(i) => i.next_back().cloned(),
            ListIntoIter::Owned(i) => i.next_back(),
        }
    }
}

impl<'a, T: Clone> IntoIterator for List<'a, T> {
    type Item = T;
    type IntoIter = ListIntoIter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        match self {
            List::Arena(s) => ListIntoIter::Arena(s.iter()),
            List::Owned(v) => ListIntoIter::Owned(v.into_iter()),
        }
    }
}

/// A JSON string value. One without escapes is borrowed from the line; one with escapes is
/// kept as its raw (already validated) text and unescaped the first time it is read, so the
/// big tool outputs no rule looks inside cost one scan and no allocation.
pub struct JStr<'a>(Repr<'a>);

enum Repr<'a> {
    Text(Cow<'a, str>),
    /// The body between the quotes, escapes validated by the parser; unescaped on demand.
    /// (The cell boxed: in place it made every value 40 bytes instead of 32.)
    Escaped(&'a str, Box<std::cell::OnceCell<Box<str>>>),
    /// The same in a tree in an arena: unescaped on demand into the arena.
    InArena(&'a str, &'a Lazy<'a>),
}

/// Where an escaped string of a tree in an arena is unescaped to, the first time it is read.
struct Lazy<'a> {
    /// The unescaped text, in `arena`. (A pointer, not a `&'a str`: a reference in a cell
    /// would make every tree invariant in `'a`.)
    text: std::cell::OnceCell<std::ptr::NonNull<str>>,
    arena: &'a bumpalo::Bump,
}

impl<'a> JStr<'a> {
    /// `raw` must be a string body whose escapes [`fast`] has validated (no lone
    /// surrogates).
    fn escaped(raw: &'a str) -> Self {
        JStr(Repr::Escaped(raw, Box::default()))
    }

    /// `raw` as [`Self::escaped`], in a tree in `arena`.
    fn escaped_in(raw: &'a str, arena: &'a bumpalo::Bump) -> Self {
        let lazy = arena.alloc(Lazy {
            text: std::cell::OnceCell::new(),
            arena,
        });
        JStr(Repr::InArena(raw, lazy))
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Text(t) => t,
            Repr::Escaped(raw, cooked) => cooked.get_or_init(|| fast::unescape(raw).into()),
            Repr::InArena(raw, lazy) => Self::cooked(raw, lazy),
        }
    }

    fn cooked(raw: &str, lazy: &Lazy<'a>) -> &'a str {
        let text = lazy.text.get_or_init(|| {
            let mut text = bumpalo::collections::String::with_capacity_in(raw.len(), lazy.arena);
            fast::unescape_into(raw, &mut text);
            std::ptr::NonNull::from(text.into_bump_str())
        });
        // SAFETY: the text was put in the arena, which lives for `'a` and never moves or
        // frees what it holds before it is reset or dropped, which `'a` outlasts.
        unsafe { text.as_ref() }
    }

    /// A 64-bit digest (XXH3) of the text in its escaped JSON form (`"`, `\` and control
    /// characters escaped: with `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, else `\u00xx`):
    /// two texts have the same digest exactly when they are equal (but for a collision, about
    /// 2⁻⁶⁴). A stored string whose escapes are all short ones is already in that form, so
    /// it is hashed as stored, not unescaped first: most tool-call arguments (JSON text full of
    /// `\"`) are compared this way.
    pub fn digest(&self) -> u64 {
        let stored = match &self.0 {
            Repr::Escaped(raw, _) | Repr::InArena(raw, _) => Some(*raw),
            Repr::Text(_) => None,
        };
        if let Some(raw) = stored.filter(|raw| short_escapes_only(raw)) {
            return xxhash_rust::xxh3::xxh3_64(raw.as_bytes());
        }
        let text = self.as_str();
        if !text.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
            return xxhash_rust::xxh3::xxh3_64(text.as_bytes());
        }
        // serde_json writes exactly that form (between the quotes it adds).
        let quoted = serde_json::to_string(text).unwrap_or_default();
        let escaped = quoted
            .strip_prefix('"')
            .and_then(|q| q.strip_suffix('"'))
            .unwrap_or(&quoted);
        xxhash_rust::xxh3::xxh3_64(escaped.as_bytes())
    }

    pub fn into_cow(self) -> Cow<'a, str> {
        match self.0 {
            Repr::Text(t) => t,
            Repr::InArena(raw, lazy) => Cow::Borrowed(Self::cooked(raw, lazy)),
            Repr::Escaped(raw, cooked) => Cow::Owned(
                (*cooked)
                    .into_inner()
                    .map_or_else(|| fast::unescape(raw), String::from),
            ),
        }
    }

    /// Borrowed text (no unescaped copy to own, now or later).
    #[cfg(test)]
    fn is_borrowed(&self) -> bool {
        matches!(self.0, Repr::Text(Cow::Borrowed(_)) | Repr::InArena(..))
    }

    pub fn into_owned(self) -> JStr<'static> {
        JStr(Repr::Text(Cow::Owned(self.into_cow().into_owned())))
    }
}

/// A string body (escapes validated) whose escapes are all `\"`, `\\`, `\b`, `\f`, `\n`, `\r`
/// or `\t`: the escaped form [`JStr::digest`] hashes.
fn short_escapes_only(raw: &str) -> bool {
    // A plain loop: these strings are short and dense with escapes (memchr per escape cost
    // more than reading every byte).
    let mut bytes = raw.bytes();
    while let Some(b) = bytes.next() {
        if b == b'\\'
            && !matches!(
                bytes.next(),
                Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't')
            )
        {
            return false;
        }
    }
    true
}

impl std::ops::Deref for JStr<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for JStr<'_> {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for JStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for JStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for JStr<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<str> for JStr<'_> {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for JStr<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl<'a> From<&'a str> for JStr<'a> {
    fn from(s: &'a str) -> Self {
        JStr(Repr::Text(Cow::Borrowed(s)))
    }
}

impl From<String> for JStr<'_> {
    fn from(s: String) -> Self {
        JStr(Repr::Text(Cow::Owned(s)))
    }
}

impl<'a> From<Cow<'a, str>> for JStr<'a> {
    fn from(s: Cow<'a, str>) -> Self {
        JStr(Repr::Text(s))
    }
}

/// Why a line is not usable JSON, in words a user can act on.
pub fn parse(bytes: &[u8]) -> Result<Json<'_>, String> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse_str(text),
        Err(_) => {
            if let Some(deep) = too_deep(bytes) {
                return Err(deep);
            }
            let mut de = serde_json::Deserializer::from_slice(bytes);
            de.disable_recursion_limit();
            let value = Json::deserialize(&mut de).map_err(describe_error)?;
            de.end().map_err(describe_error)?;
            Ok(value)
        }
    }
}

/// Parse text that is already known to be UTF-8 (no second validation pass).
pub fn parse_str(text: &str) -> Result<Json<'_>, String> {
    match fast::parse(text, None, None, Shape::Full) {
        Some((v, _)) => Ok(v),
        None => parse_careful(text),
    }
}

/// [`parse_str`] and [`audit`] in one walk over the line (the common case); the careful
/// path and a separate audit for lines the fast parser leaves to serde_json.
pub fn parse_audited(text: &str) -> Result<(Json<'_>, Audit), String> {
    parse_audited_in(text, None, None, Shape::Full)
}

/// What a parsed line's tree holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Shape {
    /// Every value.
    #[default]
    Full,
    /// Every value but the arrays inside the records of `data.stream` (the provider chunks'
    /// `dt`, `texts` and `args`), which are parsed and audited, then left out: a member holds
    /// an empty array in their place. For passes whose readers never look inside a chunk
    /// record; on a format-3 log those arrays are most of the values, and of the memory the
    /// trees of the lines in flight take. The careful path (serde_json) always builds the
    /// whole tree.
    Lean,
    /// Every value but the member arrays of a packed chunk row (§5.2, formats 0 and 1: a
    /// top-level object whose `type`, read before its `data`, is a packed row's tag): `dt`
    /// is left out, and of `texts` or `args` only the first item is kept. Each is parsed and
    /// audited, and what the row's checks need of it is kept in a [`Tally`] instead. For
    /// passes that fold only a row's first member when the rest follow cleanly; a row whose
    /// members must each be folded is parsed again whole. And in every row, a top-level
    /// `sourceEventSeqs` that is a strictly increasing list of safe integers ≥ 0 is kept in
    /// its range-encoded storage form (§5.3), which decodes to the same list. The careful
    /// path builds the whole tree and no tally.
    LeanPacked,
    /// [`Shape::Lean`], but `data.stream` (a provider's chunk records) is passed over whole:
    /// its strings, numbers and nesting are checked as JSON, no value of it is built, and it
    /// holds an empty array (or object) in the tree. The objects passed over are not audited
    /// for repeated keys. For the light pass ([`crate::log::scan::light`]) over formats 2 and
    /// 3, where no rule but the records' own shape reads them. The careful path builds the
    /// whole tree.
    Envelope,
}

/// What a [`Shape::LeanPacked`] parse kept of the member arrays of a packed chunk row it left
/// out (the last of each name in the row's `data`; `None` where it left none out).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub texts: Option<Pieces>,
    pub args: Option<Pieces>,
    pub dt: Option<Steps>,
}

/// A `texts` or `args` array: how many items, and whether each is a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pieces {
    pub len: usize,
    pub strings: bool,
}

impl Pieces {
    pub fn of(items: &[Json<'_>]) -> Pieces {
        Pieces {
            len: items.len(),
            // The variant, not `as_str`: that would unescape every piece to look at it.
            strings: items.iter().all(|v| matches!(v, Json::Str(_))),
        }
    }
}

/// A `dt` array, read in order up to its first item that is not a safe integer: the least
/// and greatest of the running sums so far (0 counts: before the first step) and the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Steps {
    pub len: usize,
    /// Every item is a safe integer.
    pub safe: bool,
    pub low: i128,
    pub high: i128,
    pub sum: i128,
}

impl Steps {
    pub fn of(items: &[Json<'_>]) -> Steps {
        Steps::over(items.len(), items.iter().map(Json::safe_int))
    }

    /// The steps of `len` items whose values (`None`: not a safe integer) are `values`.
    pub(crate) fn over(len: usize, values: impl Iterator<Item = Option<i64>>) -> Steps {
        let mut steps = Steps {
            len,
            safe: true,
            low: 0,
            high: 0,
            sum: 0,
        };
        for v in values {
            let Some(d) = v else {
                steps.safe = false;
                break;
            };
            steps.sum += i128::from(d);
            steps.low = steps.low.min(steps.sum);
            steps.high = steps.high.max(steps.sum);
        }
        steps
    }
}

/// [`parse_audited`] with the tree's lists and unescaped strings in `arena` (see [`List`]),
/// and the parser's stacks taken from `scratch` (and given back, empty); a line the fast
/// parser leaves to serde_json gets an owned tree.
pub fn parse_audited_in<'a>(
    text: &'a str,
    arena: Option<&'a Arena>,
    scratch: Option<&mut Scratch<'a>>,
    shape: Shape,
) -> Result<(Json<'a>, Audit), String> {
    debug_assert!(
        shape != Shape::LeanPacked,
        "its tally would be lost: parse_tallied_in"
    );
    parse_tallied_in(text, arena, scratch, shape).map(|(v, a, _)| (v, a))
}

/// [`parse_audited_in`], with the [`Tally`] of a packed row's arrays a
/// [`Shape::LeanPacked`] tree left out (`None`: the tree left nothing out).
pub fn parse_tallied_in<'a>(
    text: &'a str,
    arena: Option<&'a Arena>,
    scratch: Option<&mut Scratch<'a>>,
    shape: Shape,
) -> Result<(Json<'a>, Audit, Option<Box<Tally>>), String> {
    match fast::parse_tallied(text, arena, scratch, shape) {
        Some(parsed) => Ok(parsed),
        None => parse_careful(text).map(|v| {
            let a = audit(&v);
            (v, a, None)
        }),
    }
}

/// How deep the arrays and objects of a JSON text nest (strings skipped), counted without
/// recursion; invalid text is counted as far as it goes.
pub fn nesting_depth(text: &[u8]) -> u64 {
    let (mut depth, mut deepest) = (0u64, 0u64);
    let mut i = 0;
    while let Some(at) = memchr::memchr3(b'"', b'[', b'{', &text[i..]).map(|k| i + k) {
        // Closers between here and there.
        depth = depth.saturating_sub(memchr::memchr2_iter(b']', b'}', &text[i..at]).count() as u64);
        match text[at] {
            b'"' => {
                // To the closing quote: past escapes.
                let mut j = at + 1;
                loop {
                    match memchr::memchr2(b'"', b'\\', &text[j..]) {
                        Some(k) if text[j + k] == b'\\' => j += k + 2,
                        Some(k) => {
                            j += k + 1;
                            break;
                        }
                        None => return deepest,
                    }
                }
                i = j.min(text.len());
            }
            _ => {
                depth += 1;
                deepest = deepest.max(depth);
                i = at + 1;
            }
        }
    }
    deepest
}

/// The text nests deeper than the depth guard: the guard it passes (see
/// [`crate::log::limits`]), with no place yet.
pub fn depth_limit(text: &[u8]) -> Option<LimitHit> {
    let max = u64::from(limits::max_json_depth());
    // Cheap first: a text this short cannot nest that deep.
    if (text.len() as u64) <= max {
        return None;
    }
    let depth = nesting_depth(text);
    (depth > max).then(|| LimitHit::new(Guard::JsonDepth, max, depth, false, String::new()))
}

/// The error of a text past the depth guard (said before any recursive parser sees it).
fn too_deep(text: &[u8]) -> Option<String> {
    depth_limit(text).map(|hit| hit.to_string())
}

/// serde_json with DSH's JavaScript corner cases (the reference the fast path must match).
fn parse_careful(text: &str) -> Result<Json<'_>, String> {
    if let Some(deep) = too_deep(text.as_bytes()) {
        return Err(deep);
    }
    match parse_exact(text) {
        Ok(v) => Ok(v),
        Err(e) if e.contains("number out of range") => {
            // `JSON.parse("1e400")` is Infinity; serde_json refuses the number. Read it as
            // ±Infinity (the audit then reports it) rather than calling the line unparsable.
            match replace_infinite_numbers(text) {
                Some(fixed) => parse_careful(&fixed)
                    .map(|v| restore_infinity(v.into_owned()))
                    .map_err(|_| e),
                None => Err(e),
            }
        }
        Err(e) if e.contains("surrogate") || e.contains("hex escape") => {
            // `JSON.parse` accepts lone UTF-16 surrogate escapes (`"\ud800"`); serde_json
            // does not. Read them as U+FFFD, so such a line is not mistaken for damage.
            match replace_lone_surrogates(text) {
                Some(fixed) => parse_exact(&fixed).map(Json::into_owned).map_err(|_| e),
                None => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// The value of the last member whose key `is` the one asked for: `JSON.parse` keeps the last
/// of repeated keys. For this module's values and the SQLite store reader's; always inlined,
/// as the body of `Json::get` it is on the hot path of every payload check.
#[inline(always)]
pub(crate) fn last_member<K, V>(members: &[(K, V)], is: impl Fn(&K) -> bool) -> Option<&V> {
    members.iter().rev().find(|(k, _)| is(k)).map(|(_, v)| v)
}

/// Where a JSON number whose integer part ends at `i` ends: past its fraction and exponent,
/// if it has them and they match the grammar. One grammar for the fast parser and the SQLite
/// store's reader.
#[inline]
pub(crate) fn number_tail_end(s: &[u8], mut i: usize) -> Option<usize> {
    // The end of the one or more digits that must start at `d`.
    let digits = |d: usize| {
        let mut i = d;
        while s.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        (i > d).then_some(i)
    };
    if s.get(i) == Some(&b'.') {
        i = digits(i + 1)?;
    }
    if let Some(b'e' | b'E') = s.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = s.get(i) {
            i += 1;
        }
        i = digits(i)?;
    }
    Some(i)
}

fn parse_exact(text: &str) -> Result<Json<'_>, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    // `JSON.parse` takes any depth: the depth guard (checked before, without recursion)
    // bounds it here instead of serde_json's 128.
    de.disable_recursion_limit();
    let value = Json::deserialize(&mut de).map_err(describe_error)?;
    de.end().map_err(describe_error)?;
    Ok(value)
}

/// The stand-in for an infinite number while serde parses the line (restored afterwards).
const INFINITY_STAND_IN: f64 = f64::MAX;

/// Rewrite number tokens (outside strings) that overflow a double as ±`f64::MAX`.
fn replace_infinite_numbers(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let (mut out, mut last, mut i, mut in_string) = (String::new(), 0, 0, false);
    while i < b.len() {
        let c = b[i];
        if in_string {
            i += match c {
                b'\\' => 2,
                b'"' => {
                    in_string = false;
                    1
                }
                _ => 1,
            };
            continue;
        }
        if c == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        if c != b'-' && !c.is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
            i += 1;
        }
        let token = &text[start..i];
        if token.parse::<f64>().is_ok_and(f64::is_infinite) {
            out.push_str(&text[last..start]);
            out.push_str(if token.starts_with('-') { "-" } else { "" });
            out.push_str("1.7976931348623157e308");
            last = i;
        }
    }
    if last == 0 {
        return None;
    }
    out.push_str(&text[last..]);
    Some(out)
}

fn restore_infinity(v: Json<'static>) -> Json<'static> {
    match v {
        Json::Num(Num::F(f)) if f.abs() == INFINITY_STAND_IN => {
            Json::Num(Num::F(f.signum() * f64::INFINITY))
        }
        Json::Arr(items) => Json::Arr(items.into_iter().map(restore_infinity).collect()),
        Json::Obj(m) => Json::Obj(
            m.into_iter()
                .map(|(k, v)| (k, restore_infinity(v)))
                .collect(),
        ),
        other => other,
    }
}

/// Rewrite `\uXXXX` escapes of unpaired surrogates as `\ufffd` (None: there were none).
fn replace_lone_surrogates(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let hex4 = |at: usize| -> Option<u32> {
        let digits = b.get(at..at + 4)?;
        u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    };
    let escape_at = |at: usize| -> Option<u32> {
        (b.get(at) == Some(&b'\\') && b.get(at + 1) == Some(&b'u'))
            .then(|| hex4(at + 2))
            .flatten()
    };
    let (mut out, mut last, mut i) = (String::new(), 0, 0);
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        let Some(unit) = escape_at(i) else {
            i += 2;
            continue;
        };
        let paired = (0xD800..0xDC00).contains(&unit)
            && escape_at(i + 6).is_some_and(|next| (0xDC00..0xE000).contains(&next));
        if paired {
            i += 12;
        } else if (0xD800..0xE000).contains(&unit) {
            out.push_str(&text[last..i]);
            out.push_str("\\ufffd");
            i += 6;
            last = i;
        } else {
            i += 6;
        }
    }
    if last == 0 {
        return None;
    }
    out.push_str(&text[last..]);
    Some(out)
}

fn describe_error(e: serde_json::Error) -> String {
    let text = e.to_string();
    if text.starts_with("recursion limit exceeded") {
        format!("JSON nested deeper than 128 levels is not accepted ({text})")
    } else {
        format!("invalid JSON: {text}")
    }
}

impl<'a> Json<'a> {
    /// Member lookup with JavaScript semantics: the last occurrence of a key wins.
    #[inline]
    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        match self {
            Json::Obj(m) => last_member(m, |k| same_key(k, key)),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Json<'a>> {
        match self {
            Json::Obj(m) => m
                .to_mut()
                .iter_mut()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s.as_str()),
            _ => None,
        }
    }

    /// A non-empty string.
    pub fn as_text(&self) -> Option<&str> {
        self.as_str().filter(|s| !s.is_empty())
    }

    pub fn as_arr(&self) -> Option<&[Json<'a>]> {
        match self {
            Json::Arr(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_obj(&self) -> Option<&[Member<'a>]> {
        match self {
            Json::Obj(m) => Some(m),
            _ => None,
        }
    }

    pub fn as_num(&self) -> Option<Num> {
        match self {
            Json::Num(n) => Some(*n),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn is_obj(&self) -> bool {
        matches!(self, Json::Obj(_))
    }

    /// A JavaScript safe integer (any spelling).
    pub fn safe_int(&self) -> Option<i64> {
        self.as_num().and_then(Num::safe_int)
    }

    /// A safe integer ≥ 0 (`-0` counts as 0 here; rules that refuse `-0` check it separately).
    pub fn safe_uint(&self) -> Option<u64> {
        self.safe_int().filter(|v| *v >= 0).map(|v| v as u64)
    }

    pub fn is_neg_zero(&self) -> bool {
        matches!(self, Json::Num(n) if n.is_neg_zero())
    }

    /// The distinct member names, in first-seen order.
    pub fn keys(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        if let Json::Obj(m) = self {
            for (k, _) in m {
                if !out.contains(&k.as_ref()) {
                    out.push(k);
                }
            }
        }
        out
    }

    /// Remove every member named `key`; returns the winning (last) value.
    pub fn take(&mut self, key: &str) -> Option<Json<'a>> {
        match self {
            Json::Obj(m) => {
                if !m.iter().any(|(k, _)| k == key) {
                    return None;
                }
                let mut found = None;
                m.to_mut().retain_mut(|(k, v)| {
                    if k == key {
                        found = Some(std::mem::replace(v, Json::Null));
                        false
                    } else {
                        true
                    }
                });
                found
            }
            _ => None,
        }
    }

    /// Set a member (replacing every existing occurrence) at the end of the object.
    pub fn set(&mut self, key: &'a str, value: Json<'a>) {
        if let Json::Obj(m) = self {
            let m = m.to_mut();
            m.retain(|(k, _)| k != key);
            m.push((Cow::Borrowed(key), value));
        }
    }

    /// Nothing in this value owns memory: every string is borrowed and every list is in an
    /// arena (checked all the way down). What may be put in an arena list (see [`List`]); the
    /// parser's tests check every tree it puts in an arena.
    #[cfg(test)]
    pub(crate) fn arena_only(&self) -> bool {
        match self {
            Json::Null | Json::Bool(_) | Json::Num(_) => true,
            Json::Str(s) => s.is_borrowed(),
            Json::Arr(List::Arena(items)) => items.iter().all(Json::arena_only),
            Json::Obj(List::Arena(m)) => m
                .iter()
                .all(|(k, v)| matches!(k, Cow::Borrowed(_)) && v.arena_only()),
            Json::Arr(List::Owned(_)) | Json::Obj(List::Owned(_)) => false,
        }
    }

    /// A string's [`JStr::digest`]; `None` for any other value.
    pub fn text_digest(&self) -> Option<u64> {
        match self {
            Json::Str(s) => Some(s.digest()),
            _ => None,
        }
    }

    pub fn kind_name(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Num(_) => "a number",
            Json::Str(_) => "a string",
            Json::Arr(_) => "an array",
            Json::Obj(_) => "an object",
        }
    }

    pub fn into_owned(self) -> Json<'static> {
        match self {
            Json::Null => Json::Null,
            Json::Bool(b) => Json::Bool(b),
            Json::Num(n) => Json::Num(n),
            Json::Str(s) => Json::Str(s.into_owned()),
            Json::Arr(a) => Json::Arr(a.iter().cloned().map(Json::into_owned).collect()),
            Json::Obj(m) => Json::Obj(
                m.iter()
                    .cloned()
                    .map(|(k, v)| (Cow::Owned(k.into_owned()), v.into_owned()))
                    .collect(),
            ),
        }
    }

    /// Compact serialization as JavaScript's `JSON.stringify` writes it (member order kept,
    /// duplicate keys collapsed last-wins at their last position, like a JS object would
    /// not: JS keeps the first position. Only used for values dshs itself built).
    pub fn to_js_string(&self) -> String {
        let mut out = String::new();
        self.write_js(&mut out);
        out
    }

    fn write_js(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Num(n) => write_js_number(*n, out),
            Json::Str(s) => write_js_str(s, out),
            Json::Arr(a) => {
                out.push('[');
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write_js(out);
                }
                out.push(']');
            }
            Json::Obj(m) => {
                out.push('{');
                let mut first = true;
                let keys = KeySpans::of(m);
                for (i, (k, _)) in m.iter().enumerate() {
                    // JavaScript objects hold one value per key: the first position, the last value.
                    let (first_at, last_at) = keys.span(m, i);
                    if first_at != i {
                        continue;
                    }
                    let winner = &m[last_at].1;
                    if !first {
                        out.push(',');
                    }
                    first = false;
                    write_js_str(k, out);
                    out.push(':');
                    winner.write_js(out);
                }
                out.push('}');
            }
        }
    }
}

/// A number as `JSON.stringify` writes what `JSON.parse` made of it: every JSON number is a
/// double in JavaScript, so integers past 2^53 print rounded, as they would there.
fn write_js_number(n: Num, out: &mut String) {
    let mut bytes = Vec::with_capacity(24);
    js_number(n.as_f64(), &mut bytes);
    // js_number writes only ASCII digits, signs, '.', 'e' and "null".
    out.push_str(std::str::from_utf8(&bytes).unwrap_or("null"));
}

/// `Number.prototype.toString` of a double, as `JSON.stringify` writes it (`null` for the
/// infinities that `JSON.parse` makes of `1e400`). `ryu-js` implements ECMAScript's
/// algorithm (shortest digits, `1e+21`, `1e-7`, `-0` as `0`) without allocating.
pub fn js_number(x: f64, out: &mut Vec<u8>) {
    if !x.is_finite() {
        out.extend_from_slice(b"null");
        return;
    }
    out.extend_from_slice(ryu_js::Buffer::new().format_finite(x).as_bytes());
}

/// String escaping exactly as ECMAScript `JSON.stringify` does it.
pub fn write_js_str(s: &str, out: &mut String) {
    use std::fmt::Write;
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// What a walk over a whole event finds that `JSON.parse` hides or DSH refuses.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Audit {
    /// The first duplicated member name, if any.
    pub duplicate_key: Option<String>,
    /// A `-0` number anywhere.
    pub negative_zero: bool,
    /// A number beyond the double range (`1e400`), which JavaScript reads as Infinity.
    pub non_finite: bool,
}

pub fn audit(value: &Json<'_>) -> Audit {
    let mut a = Audit::default();
    audit_into(value, &mut a);
    a
}

fn audit_into(value: &Json<'_>, a: &mut Audit) {
    match value {
        Json::Num(n) => {
            a.negative_zero |= n.is_neg_zero();
            a.non_finite |= !n.as_f64().is_finite();
        }
        Json::Arr(items) => items.iter().for_each(|v| audit_into(v, a)),
        Json::Obj(m) => {
            if a.duplicate_key.is_none() {
                a.duplicate_key = first_duplicate(m).map(str::to_owned);
            }
            m.iter().for_each(|(_, v)| audit_into(v, a));
        }
        _ => {}
    }
}

fn first_duplicate<'m>(m: &'m [Member<'_>]) -> Option<&'m str> {
    if m.len() < 2 {
        None
    } else if m.len() <= 16 {
        // A cheap fingerprint per key rules out almost every pair without comparing strings;
        // only equal fingerprints are compared in full. It holds the first and last 4 bytes
        // (the whole key, up to 8 bytes: most of a log's keys) and the length: `type` and
        // `time` differ, which length and end bytes alone do not tell. Fixed-size reads only
        // (a copy of a short slice of varying length would call memcpy).
        let print = |k: &str| {
            let b = k.as_bytes();
            let n = b.len();
            let body = if n >= 4 {
                let head = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                let tail = u32::from_le_bytes([b[n - 4], b[n - 3], b[n - 2], b[n - 1]]);
                u64::from(head) << 32 | u64::from(tail)
            } else {
                b.iter().fold(0, |w, &c| w << 8 | u64::from(c))
            };
            body ^ n as u64
        };
        let mut prints = [0u64; 16];
        let mut suspect = false;
        for (i, (k, _)) in m.iter().enumerate() {
            prints[i] = print(k);
            suspect |= prints[..i].contains(&prints[i]);
        }
        if !suspect {
            return None;
        }
        for (i, (k, _)) in m.iter().enumerate() {
            if m[..i].iter().any(|(k2, _)| k2 == k) {
                return Some(k);
            }
        }
        None
    } else {
        let mut seen = std::collections::HashSet::with_capacity(m.len());
        m.iter().map(|(k, _)| k.as_ref()).find(|k| !seen.insert(*k))
    }
}

/// `a == b`, for the short keys of a log: unequal lengths (most pairs) without a call, and
/// keys of up to 16 bytes compared a word or two at a time (`memcmp`, called for each pair
/// of equal length, showed in profiles of the lookups the rules make).
#[inline]
fn same_key(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let n = a.len();
    let word = |s: &[u8], at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&s[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let half = |s: &[u8], at: usize| {
        let mut w = [0u8; 4];
        w.copy_from_slice(&s[at..at + 4]);
        u32::from_le_bytes(w)
    };
    // Two overlapping words (or half-words) cover a key of 4 to 16 bytes.
    match n {
        0..=3 => a == b,
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

/// The hasher behind [`canonical_hash`]: each byte string is one XXH3 call seeded with the
/// state so far, and each fixed-width word (the tags, terminators and counts) is mixed in by
/// a folded 64×64→128-bit multiply, as foldhash and ahash do. XXH3 is a well-tested 64-bit
/// hash, much cheaper than std's SipHash (a keyed hash protects hash tables from flooding,
/// which this digest is not used for), and one call per tag byte would cost more than the
/// strings.
#[derive(Default)]
struct Chain(u64);

impl Chain {
    fn mix(&mut self, v: u64) {
        // The fractional digits of pi (as in foldhash); any odd constant with mixed bits.
        const K: u64 = 0x243F_6A88_85A3_08D3;
        let p = u128::from(self.0 ^ v ^ 0x1319_8A2E_0370_7344) * u128::from(K);
        self.0 = (p as u64) ^ ((p >> 64) as u64);
    }
}

impl Hasher for Chain {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.0);
    }

    fn write_u8(&mut self, v: u8) {
        self.mix(u64::from(v));
    }

    fn write_u64(&mut self, v: u64) {
        // Two rounds, so that the word's high bits reach every bit of the state.
        self.mix(v);
        self.mix(0);
    }

    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A path segment for [`canonical_hash`]'s blanking.
#[derive(Debug, Clone, Copy)]
pub enum Seg {
    Key(&'static str),
    Index(usize),
}

/// A 64-bit hash of the value under DSH's JSON equality (`isDeepEqualJson`): key order is
/// ignored, duplicate keys resolve last-wins, numbers compare by value. The member at
/// `blank` (if it exists) is hashed as `null`, which is how the tool-result replacement rule
/// compares "everything but the content". `keys_unique`: no object in `value` holds a key
/// twice (the parser's audit found none), so no member needs to be checked for a later
/// one of its key.
pub fn canonical_hash(value: &Json<'_>, blank: Option<&[Seg]>, keys_unique: bool) -> u64 {
    let mut h = Chain::default();
    hash_into(value, blank, keys_unique, &mut h);
    h.finish()
}

fn hash_into<H: Hasher>(value: &Json<'_>, blank: Option<&[Seg]>, unique: bool, h: &mut H) {
    // A path of length 0 means "this node is blanked".
    if let Some([]) = blank {
        h.write_u8(0);
        return;
    }
    match value {
        Json::Null => h.write_u8(0),
        Json::Bool(b) => {
            h.write_u8(1);
            h.write_u8(*b as u8);
        }
        Json::Num(n) => {
            h.write_u8(2);
            let f = n.as_f64();
            let f = if f == 0.0 { 0.0 } else { f };
            h.write_u64(f.to_bits());
        }
        Json::Str(s) => {
            h.write_u8(3);
            h.write(s.as_bytes());
            h.write_u8(0xff);
        }
        Json::Arr(items) => {
            h.write_u8(4);
            h.write_usize(items.len());
            for (i, v) in items.iter().enumerate() {
                let sub = match blank {
                    Some([Seg::Index(j), rest @ ..]) if *j == i => Some(rest),
                    _ => None,
                };
                hash_into(v, sub, unique, h);
            }
        }
        Json::Obj(m) => {
            // Key order is irrelevant: each winning member (the last of its key) is hashed on
            // its own and the member hashes are summed. No allocation, no sort.
            h.write_u8(5);
            let (mut count, mut sum) = (0u64, 0u64);
            let keys = if unique {
                KeySpans::Unique
            } else {
                KeySpans::of(m)
            };
            for (i, (k, v)) in m.iter().enumerate() {
                if keys.span(m, i).1 != i {
                    continue;
                }
                let mut member = Chain::default();
                member.write(k.as_bytes());
                member.write_u8(0xff);
                let sub = match blank {
                    Some([Seg::Key(want), rest @ ..]) if *want == k => Some(rest),
                    _ => None,
                };
                hash_into(v, sub, unique, &mut member);
                count += 1;
                sum = sum.wrapping_add(member.finish());
            }
            h.write_u64(count);
            h.write_u64(sum);
        }
    }
}

/// Structural equality under DSH's rules (see [`canonical_hash`]).
pub fn json_equal(a: &Json<'_>, b: &Json<'_>) -> bool {
    match (a, b) {
        (Json::Num(x), Json::Num(y)) => x.as_f64() == y.as_f64(),
        (Json::Arr(x), Json::Arr(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (Json::Obj(_), Json::Obj(_)) => {
            let (ka, kb) = (a.keys(), b.keys());
            ka.len() == kb.len()
                && ka.iter().all(|k| match (a.get(k), b.get(k)) {
                    (Some(p), Some(q)) => json_equal(p, q),
                    _ => false,
                })
        }
        _ => a == b,
    }
}

impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Json::Num(Num::I(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Json::Num(Num::U(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Json::Num(Num::F(v)))
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Json::Str(v.into()))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Json::Str(v.to_owned().into()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Json::Str(v.into()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Json::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(v) = seq.next_element()? {
            items.push(v);
        }
        Ok(Json::Arr(items.into()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(k) = map.next_key::<Key<'de>>()? {
            let v = map.next_value()?;
            members.push((k.0, v));
        }
        Ok(Json::Obj(members.into()))
    }
}

struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

/// Where each key of an object first and last occurs (JavaScript keeps one member per key:
/// the first position, the last value). An object without duplicate keys (nearly all of
/// them, told by [`first_duplicate`]'s cheap fingerprints) needs no search; other small
/// objects are scanned directly; large ones get a map, so an object with 100,000 keys costs
/// linear time, not quadratic.
enum KeySpans<'m> {
    Unique,
    Small,
    Map(std::collections::HashMap<&'m str, (usize, usize)>),
}

impl<'m> KeySpans<'m> {
    fn of(m: &'m [Member<'_>]) -> Self {
        if m.len() <= 16 {
            return match first_duplicate(m) {
                None => KeySpans::Unique,
                Some(_) => KeySpans::Small,
            };
        }
        let mut map = std::collections::HashMap::with_capacity(m.len());
        for (i, (k, _)) in m.iter().enumerate() {
            map.entry(&**k)
                .and_modify(|e: &mut (usize, usize)| e.1 = i)
                .or_insert((i, i));
        }
        KeySpans::Map(map)
    }

    /// (first, last) index of the key of member `i`.
    fn span(&self, m: &[Member<'_>], i: usize) -> (usize, usize) {
        let k = &m[i].0;
        match self {
            KeySpans::Unique => (i, i),
            KeySpans::Map(map) => map.get(&**k).copied().unwrap_or((i, i)),
            KeySpans::Small => (
                m.iter().position(|(k2, _)| k2 == k).unwrap_or(i),
                m.iter().rposition(|(k2, _)| k2 == k).unwrap_or(i),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The canonical digest of a whole value, duplicate keys checked: what most tests compare.
    fn hash(v: &Json<'_>) -> u64 {
        canonical_hash(v, None, false)
    }

    #[test]
    fn a_value_takes_four_words_and_a_member_seven() {
        // A block's arena holds its trees, 3-9 times the size of the text: a value's size
        // is the pass's memory. An escaped string's cell kept in place made both 8 bytes more.
        assert_eq!(size_of::<Json<'_>>(), 32);
        assert_eq!(size_of::<Member<'_>>(), 56);
    }

    #[test]
    fn numbers_are_written_as_number_to_string_writes_them() {
        // ECMAScript switches to exponent form at 1e21 and below 1e-6, with an explicit '+'.
        let cases = [
            (1.0, "1"),
            (-0.0, "0"),
            (0.1, "0.1"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e21, "1e+21"),
            (999999999999999900000.0, "999999999999999900000"),
            (1e20, "100000000000000000000"),
            (-1e21, "-1e+21"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (0.000001, "0.000001"),
            (0.0000015, "0.0000015"),
            (-2.5, "-2.5"),
            (123.456, "123.456"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (f64::INFINITY, "null"),
            (f64::NAN, "null"),
        ];
        for (x, want) in cases {
            let mut out = Vec::new();
            js_number(x, &mut out);
            assert_eq!(String::from_utf8(out).unwrap(), want, "{x:e}");
        }
    }

    #[test]
    fn a_tree_is_written_with_javascripts_numbers() {
        // JSON.stringify(JSON.parse(text)): every number went through a double.
        let cases = [
            (r#"{"a":1e-7,"b":1e21}"#, r#"{"a":1e-7,"b":1e+21}"#),
            (r#"[1.0,5e0,-0,1E2,0.5e-6]"#, r#"[1,5,0,100,5e-7]"#),
            (
                r#"[9007199254740993,18446744073709551615]"#,
                r#"[9007199254740992,18446744073709552000]"#,
            ),
            (
                r#"[-9223372036854775808,1e400]"#,
                r#"[-9223372036854776000,null]"#,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(
                parse(text.as_bytes()).unwrap().to_js_string(),
                want,
                "{text}"
            );
        }
    }

    #[test]
    fn duplicate_keys_resolve_last_wins_and_are_reported() {
        let v = parse(br#"{"a":1,"b":2,"a":3}"#).unwrap();
        assert_eq!(v.get("a").and_then(Json::safe_int), Some(3));
        assert_eq!(audit(&v).duplicate_key.as_deref(), Some("a"));
    }

    #[test]
    fn negative_zero_is_visible() {
        let v = parse(br#"{"x":[1,{"y":-0}]}"#).unwrap();
        assert!(audit(&v).negative_zero);
        assert!(!audit(&parse(b"[0, -1, 0.5]").unwrap()).negative_zero);
    }

    #[test]
    fn safe_integers_by_value_not_spelling() {
        for s in ["5", "5.0", "5e0", "0.5e1"] {
            assert_eq!(parse(s.as_bytes()).unwrap().safe_int(), Some(5), "{s}");
        }
        assert_eq!(
            parse(b"9007199254740991").unwrap().safe_int(),
            Some(MAX_SAFE as i64)
        );
        assert_eq!(parse(b"9007199254740992").unwrap().safe_int(), None);
        assert_eq!(parse(b"18446744073709551616").unwrap().safe_int(), None);
        assert_eq!(parse(b"1.5").unwrap().safe_int(), None);
    }

    #[test]
    fn numbers_beyond_double_range_read_as_infinity_and_are_audited() {
        let v = parse(br#"{"seq":1e400,"x":[-2e999],"s":"1e400"}"#).unwrap();
        let seq = v.get("seq").and_then(Json::as_num).map(Num::as_f64);
        assert_eq!(seq, Some(f64::INFINITY));
        assert_eq!(v.get("seq").and_then(Json::safe_int), None);
        assert_eq!(v.get("s").and_then(Json::as_str), Some("1e400"));
        assert!(audit(&v).non_finite);
        assert!(!audit(&parse(b"[1e308, 5]").unwrap()).non_finite);
    }

    #[test]
    fn lone_surrogate_escapes_parse_like_javascript() {
        let v = parse(br#"{"id":"c\ud800x","t":"\udc00","ok":"\ud83d\ude00","lit":"\\ud800"}"#)
            .unwrap();
        assert_eq!(v.get("id").and_then(Json::as_str), Some("c\u{fffd}x"));
        assert_eq!(v.get("t").and_then(Json::as_str), Some("\u{fffd}"));
        assert_eq!(v.get("ok").and_then(Json::as_str), Some("😀"));
        assert_eq!(v.get("lit").and_then(Json::as_str), Some("\\ud800"));
        assert!(parse(br#""\u12""#).is_err());
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        // Past the guard either way; Miri interprets every byte, so it gets a shorter one.
        let levels = if cfg!(miri) { 3_000 } else { 100_000 };
        let deep = "[".repeat(levels) + &"]".repeat(levels);
        let err = parse(deep.as_bytes()).unwrap_err();
        assert!(err.contains("JSON depth guard"), "{err}");
        assert!(depth_limit(deep.as_bytes()).is_some());
        // Deeper than serde_json's own 128 and the fast parser's 100, within the guard: read.
        let ok = "[".repeat(900) + &"]".repeat(900);
        assert!(parse(ok.as_bytes()).is_ok());
        assert!(depth_limit(ok.as_bytes()).is_none());
    }

    #[test]
    fn nesting_is_counted_outside_strings_only() {
        assert_eq!(nesting_depth(b"[]"), 1);
        assert_eq!(nesting_depth(br#"{"a":[1,{"b":[]}],"c":{}}"#), 4);
        assert_eq!(nesting_depth(br#"["[[[[", "\"[[[", "\\", [[]]]"#), 3);
        assert_eq!(nesting_depth(br#"[][][]"#), 1);
        assert_eq!(nesting_depth(b"\"unterminated [[["), 0);
        assert_eq!(nesting_depth(b"42"), 0);
    }

    #[test]
    fn equality_ignores_key_order_and_number_spelling() {
        let a = parse(br#"{"a":1,"b":[1.0,{"c":"x","d":null}]}"#).unwrap();
        let b = parse(br#"{"b":[1,{"d":null,"c":"x"}],"a":1e0}"#).unwrap();
        assert!(json_equal(&a, &b));
        assert_eq!(hash(&a), hash(&b));
        // Without duplicate keys, skipping the duplicate check changes nothing.
        assert_eq!(canonical_hash(&a, None, true), hash(&b));
        let c = parse(br#"{"b":[1,{"d":null,"c":"y"}],"a":1}"#).unwrap();
        assert!(!json_equal(&a, &c));
        assert_ne!(hash(&a), hash(&c));
    }

    #[test]
    fn blanking_ignores_one_member() {
        let path = [Seg::Key("m"), Seg::Index(0), Seg::Key("content")];
        let a = parse(br#"{"m":[{"content":"old","id":1}]}"#).unwrap();
        let b = parse(br#"{"m":[{"id":1,"content":["new"]}]}"#).unwrap();
        let c = parse(br#"{"m":[{"id":2,"content":"old"}]}"#).unwrap();
        assert_eq!(
            canonical_hash(&a, Some(&path), false),
            canonical_hash(&b, Some(&path), false)
        );
        assert_ne!(
            canonical_hash(&a, Some(&path), false),
            canonical_hash(&c, Some(&path), false)
        );
    }

    #[test]
    fn js_string_escaping_matches_json_stringify() {
        let mut s = String::new();
        write_js_str("a\"b\\c\n\u{1}/é\u{2028}", &mut s);
        assert_eq!(s, "\"a\\\"b\\\\c\\n\\u0001/é\u{2028}\"");
    }

    #[test]
    fn small_objects_with_duplicate_keys_keep_first_position_last_value() {
        let v = parse(br#"{"a":1,"b":2,"a":3}"#).unwrap();
        assert_eq!(v.to_js_string(), r#"{"a":3,"b":2}"#);
        let same = parse(br#"{"b":2,"a":3}"#).unwrap();
        let first_wins = parse(br#"{"a":1,"b":2}"#).unwrap();
        assert_eq!(hash(&v), hash(&same));
        assert_ne!(hash(&v), hash(&first_wins));
        // Told (wrongly) that keys are unique, the digest hashes the losing member too.
        assert_ne!(canonical_hash(&v, None, true), hash(&same));
    }

    #[test]
    fn recycled_scratch_keeps_its_allocations() {
        let mut s = Scratch::default();
        s.items.reserve(1000);
        let cap = s.items.capacity();
        let again: Scratch<'static> = s.recycle();
        assert_eq!(again.items.capacity(), cap);
    }

    #[test]
    // A test of time, not of memory safety: far too slow under Miri's interpreter.
    #[cfg_attr(miri, ignore)]
    fn large_objects_keep_first_position_last_value_in_linear_time() {
        let keys: Vec<String> = (0..20).map(|i| format!("\"k{i}\":{i}")).collect();
        let text = format!("{{\"a\":1,{},\"a\":2}}", keys.join(","));
        let v = parse(text.as_bytes()).unwrap();
        assert_eq!(v.to_js_string(), format!("{{\"a\":2,{}}}", keys.join(",")));
        let reordered = format!("{{{},\"a\":2}}", keys.join(","));
        assert_eq!(
            hash(&v),
            canonical_hash(&parse(reordered.as_bytes()).unwrap(), None, false)
        );
        // 100,000 keys: no quadratic scan (this would take minutes if there were one).
        let many: Vec<String> = (0..100_000).map(|i| format!("\"k{i}\":{i}")).collect();
        let big = format!("{{{}}}", many.join(","));
        let v = parse(big.as_bytes()).unwrap();
        assert_eq!(v.to_js_string().len(), big.len());
        hash(&v);
    }
}

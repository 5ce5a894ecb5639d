//! The fast path of [`super::parse_audited`]: a hand-written parser for the common case of a
//! log line, building the same [`Json`] tree serde_json would and auditing it (duplicate
//! keys, `-0`) in the same walk.
//!
//! It accepts only what it is sure to read exactly like the serde_json path: anything unusual
//! (an error of any kind, a lone surrogate escape, a number that is not a plain integer of
//! at most 18 digits and that serde_json refuses, nesting deeper than [`MAX_DEPTH`]) makes it
//! answer `None`, and the caller parses the line again the careful way. So error messages and
//! the JavaScript corner cases stay those of the original parser.
//!
//! Speed comes from scanning string bodies 16 bytes at a time for the three bytes that end
//! the fast run (`"`, `\`, and control characters), borrowing every string without escapes,
//! and unescaping the others in one pass.

use std::borrow::Cow;

use bumpalo::Bump;

use super::{
    Arena, Audit, JStr, Json, List, MAX_SAFE, Member, Members, Num, Pieces, Scratch, Shape, Steps,
    Tally, first_duplicate,
};
use crate::log::rows::PACKED_TAGS;

mod flat;
pub(crate) use flat::{Flat, array_end as flat_array_end, array_items as flat_array_items};

/// Deeper lines go to the careful path, which checks them against the depth guard
/// ([`crate::log::limits`]) without recursion first: this parser's recursion stays shallow.
const MAX_DEPTH: u32 = 100;

/// Parse a whole line (surrounding JSON whitespace allowed); `None`: use the careful path.
/// With an arena, every list goes into it, and an escaped string is unescaped into it when
/// first read (see [`List`]); without, the tree owns its lists and unescaped strings.
///
/// A lean tree ([`Shape::Lean`]) leaves out the arrays inside the records of `data.stream`
/// (the `dt`, `texts` and `args` of each provider chunk, most of an assistant message's
/// values): they are parsed and audited like the rest of the line, then dropped, and the
/// member holds an empty array. [`Shape::LeanPacked`] does the same to a packed row's member
/// arrays (see [`parse_tallied`]).
pub(super) fn parse<'a>(
    text: &'a str,
    arena: Option<&'a Arena>,
    scratch: Option<&mut Scratch<'a>>,
    shape: Shape,
) -> Option<(Json<'a>, Audit)> {
    parse_tallied(text, arena, scratch, shape).map(|(v, a, _)| (v, a))
}

/// [`parse`], with what a [`Shape::LeanPacked`] tree kept of the packed row's arrays it left
/// out: `dt` left out whole, and all of `texts` or `args` but the first item (which the
/// row's first member needs).
pub(super) fn parse_tallied<'a>(
    text: &'a str,
    arena: Option<&'a Arena>,
    mut scratch: Option<&mut Scratch<'a>>,
    shape: Shape,
) -> Option<(Json<'a>, Audit, Option<Box<Tally>>)> {
    let (members, items) = match scratch.as_deref_mut() {
        Some(s) => (std::mem::take(&mut s.members), std::mem::take(&mut s.items)),
        None => (Vec::with_capacity(32), Vec::with_capacity(32)),
    };
    let mut p = Parser {
        arena: arena.map(Arena::bump),
        src: text,
        s: text.as_bytes(),
        i: 0,
        depth: 0,
        audit: Audit::default(),
        objects: 0,
        duplicate_in: u64::MAX,
        lean: shape != Shape::Full,
        packed: shape == Shape::LeanPacked,
        envelope: shape == Shape::Envelope,
        path: Path::Outside,
        tally: None,
        summed_from: 0,
        members,
        items,
    };
    p.ws();
    let v = p.value();
    p.ws();
    let whole = p.i == p.s.len();
    if let Some(s) = scratch {
        // Empty again (a failed parse may leave values behind).
        let (mut members, mut items) = (p.members, p.items);
        members.clear();
        items.clear();
        s.members = members;
        s.items = items;
    }
    let v = v.filter(|_| whole)?;
    Some((v, p.audit, p.tally))
}

struct Parser<'a> {
    arena: Option<&'a Bump>,
    src: &'a str,
    s: &'a [u8],
    i: usize,
    depth: u32,
    audit: Audit,
    /// Objects started so far: a pre-order index, so the duplicate key reported is the one of
    /// the first object in document order (as the tree walk of [`super::audit`] finds it).
    objects: u64,
    /// The pre-order index of the object whose duplicate key is in `audit`.
    duplicate_in: u64,
    /// A lean tree is asked for: see [`parse`].
    lean: bool,
    /// The lean tree leaves out a packed row's arrays, not those of `data.stream`.
    packed: bool,
    /// The lean tree passes over `data.stream` whole ([`Shape::Envelope`]).
    envelope: bool,
    /// For a lean tree, how far along `data.stream` (or a packed row's `data`) the value
    /// being parsed lies.
    path: Path,
    /// What the arrays a [`Shape::LeanPacked`] tree left out held (boxed: most lines have
    /// none, and a parse's result is moved several times on its way to its row).
    tally: Option<Box<Tally>>,
    /// Where on the items stack the array being tallied starts.
    summed_from: usize,
    /// Scratch stacks: the members (items) of the open objects (arrays), moved into one
    /// exactly sized Vec when the container closes (one allocation, no regrowth).
    members: Members<'a>,
    items: Vec<Json<'a>>,
}

impl<'a> Parser<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// A whole value (the line's, or a container's uncommon one).
    fn value(&mut self) -> Option<Json<'a>> {
        match self.peek()? {
            b'"' => self.string().map(Json::Str),
            b'{' => {
                let base = self.object()?;
                Some(Json::Obj(self.members_from(base)))
            }
            b'[' => {
                let base = self.array()?;
                Some(Json::Arr(self.items_from(base)))
            }
            b't' => self.literal(b"true").then_some(Json::Bool(true)),
            b'f' => self.literal(b"false").then_some(Json::Bool(false)),
            b'n' => self.literal(b"null").then_some(Json::Null),
            b'-' | b'0'..=b'9' => self.number().map(Json::Num),
            _ => None,
        }
    }

    /// Past `word` if it is next.
    #[inline]
    fn literal(&mut self, word: &[u8]) -> bool {
        let found = self.s[self.i..].starts_with(word);
        if found {
            self.i += word.len();
        }
        found
    }

    // How a container's values are stored. Each is written where it is read, straight into
    // its slot on the scratch stack: a member goes onto the stack when its key is read (with
    // a `null` placeholder its value then replaces), an item when it is read. The common
    // values (plain strings, integers) are parsed inline and written from registers; the rest
    // go to the out-of-line `*_other`. A value returned through memory and then copied (as
    // `Vec::push` does, or a value built before room is made for it) is read back with wide
    // loads just after the narrow stores that wrote it, which the CPU cannot forward: a stall
    // of a dozen cycles per value, a tenth of a format 3 pass.

    /// At `{`: parse the object's members onto the members stack; where they start.
    fn object(&mut self) -> Option<usize> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        self.i += 1;
        self.ws();
        // Counted apart from the step past `{`: the two adjacent counters were bumped as
        // one 16-byte load and store, the load stalling on the last narrow store to `i`.
        let id = self.objects;
        self.objects += 1;
        let base = self.members.len();
        // A two-bit Bloom filter of the keys so far: a key whose bits are all set already may
        // repeat one, and only then are the keys compared (most objects never are).
        let mut seen = 0u64;
        let mut suspect = false;
        if self.peek()? == b'}' {
            self.i += 1;
        } else {
            loop {
                if self.peek()? != b'"' {
                    return None;
                }
                let start = self.i + 1;
                let j = scan(self.s, start);
                if self.s.get(j) == Some(&b'"') {
                    self.i = j + 1;
                    let k = self.between_quotes(start, j);
                    let bits = key_bits(k.as_bytes());
                    suspect |= seen & bits == bits;
                    seen |= bits;
                    push(&mut self.members, || (Cow::Borrowed(k), Json::Null));
                } else {
                    // Its text is known once unescaped: compared in any case.
                    suspect = true;
                    self.escaped_key()?;
                }
                let slot = self.members.len() - 1;
                self.colon()?;
                match self.peek()? {
                    b'"' => match self.plain_string() {
                        Some(text) => self.set_member(slot, Json::Str(JStr::from(text))),
                        None => self.member_other(slot)?,
                    },
                    b'-' | b'0'..=b'9' => match self.number()? {
                        // Each kind written with its own tags (a `Num` passed on whole went
                        // through memory).
                        Num::U(u) => self.set_member(slot, Json::Num(Num::U(u))),
                        Num::I(i) => self.set_member(slot, Json::Num(Num::I(i))),
                        Num::F(f) => self.set_member(slot, Json::Num(Num::F(f))),
                    },
                    _ => self.member_other(slot)?,
                }
                if !self.more_members()? {
                    break;
                }
            }
        }
        if suspect
            && id < self.duplicate_in
            && let Some(k) = first_duplicate(&self.members[base..])
        {
            self.audit.duplicate_key = Some(k.to_owned());
            self.duplicate_in = id;
        }
        self.depth -= 1;
        Some(base)
    }

    /// At `[`: parse the array's items onto the items stack; where they start.
    fn array(&mut self) -> Option<usize> {
        let base = self.items.len();
        if self.array_opens()? {
            loop {
                match self.peek()? {
                    b'"' => match self.plain_string() {
                        Some(text) => push(&mut self.items, || Json::Str(JStr::from(text))),
                        None => self.item_other()?,
                    },
                    b'-' | b'0'..=b'9' => match self.number()? {
                        Num::U(u) => push(&mut self.items, || Json::Num(Num::U(u))),
                        Num::I(i) => push(&mut self.items, || Json::Num(Num::I(i))),
                        Num::F(f) => push(&mut self.items, || Json::Num(Num::F(f))),
                    },
                    _ => self.item_other()?,
                }
                if !self.more_items()? {
                    break;
                }
            }
        }
        self.depth -= 1;
        Some(base)
    }

    /// At an array's `[`: one level deeper and past it; whether an item follows (else past
    /// the `]` of an empty array too).
    #[inline(always)]
    fn array_opens(&mut self) -> Option<bool> {
        self.opens(b']')
    }

    /// At a container's opening bracket: one level deeper and past it; whether a value
    /// follows (else past `close` too).
    #[inline(always)]
    fn opens(&mut self, close: u8) -> Option<bool> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        self.i += 1;
        self.ws();
        if self.peek()? == close {
            self.i += 1;
            return Some(false);
        }
        Some(true)
    }

    /// After a member's key: past the `:` and the whitespace around it.
    #[inline(always)]
    fn colon(&mut self) -> Option<()> {
        self.ws();
        if self.peek()? != b':' {
            return None;
        }
        self.i += 1;
        self.ws();
        Some(())
    }

    /// After a member's value: past the `,` before the next (true) or the closing `}`.
    #[inline(always)]
    fn more_members(&mut self) -> Option<bool> {
        self.more(b'}')
    }

    /// After an array's item: past the `,` before the next (true) or the closing `]`.
    #[inline(always)]
    fn more_items(&mut self) -> Option<bool> {
        self.more(b']')
    }

    /// After a container's value: past the `,` before the next (true) or `close`.
    #[inline(always)]
    fn more(&mut self, close: u8) -> Option<bool> {
        self.ws();
        match self.peek()? {
            b',' => {
                self.i += 1;
                self.ws();
                Some(true)
            }
            b if b == close => {
                self.i += 1;
                Some(false)
            }
            _ => None,
        }
    }

    /// The members from `base` up, off the stack, as a closed object's list.
    #[inline(always)]
    fn members_from(&mut self, base: usize) -> List<'a, Member<'a>> {
        match self.arena {
            Some(arena) => List::Arena(move_into(arena, &mut self.members, base)),
            None => List::Owned(self.members.split_off(base)),
        }
    }

    /// The items from `base` up, off the stack, as a closed array's list.
    #[inline(always)]
    fn items_from(&mut self, base: usize) -> List<'a, Json<'a>> {
        match self.arena {
            Some(arena) => List::Arena(move_into(arena, &mut self.items, base)),
            None => List::Owned(self.items.split_off(base)),
        }
    }

    /// At an opening quote: past a string without escapes, its text; `None` (not moved) for
    /// any other.
    #[inline(always)]
    fn plain_string(&mut self) -> Option<&'a str> {
        let start = self.i + 1;
        let j = scan(self.s, start);
        if self.s.get(j) == Some(&b'"') {
            self.i = j + 1;
            Some(self.between_quotes(start, j))
        } else {
            None
        }
    }

    /// The value of the member at `slot` (pushed with a `null` placeholder by its key).
    #[inline(always)]
    fn set_member(&mut self, slot: usize, v: Json<'a>) {
        debug_assert!(slot < self.members.len() && self.members[slot].1 == Json::Null);
        // SAFETY: `slot` is a member of an open object, below the stack's length (nested
        // values push and pop only above it). Its placeholder is `null`, which owns nothing,
        // so overwriting it without a drop leaks nothing.
        unsafe { std::ptr::write(&mut (*self.members.as_mut_ptr().add(slot)).1, v) };
    }

    /// A key with escapes (rare): pushed as a member with a `null` placeholder.
    #[inline(never)]
    fn escaped_key(&mut self) -> Option<()> {
        let k = self.string()?.into_cow();
        push(&mut self.members, || (k, Json::Null));
        Some(())
    }

    /// Any value but a plain string or an integer, into the member at `slot`.
    #[inline(never)]
    fn member_other(&mut self, slot: usize) -> Option<()> {
        if self.lean
            && let Some(into) = self.member_step(slot)
        {
            return self.along(into, |p, v| p.set_member(slot, v));
        }
        self.other(
            #[inline(always)]
            |p, v| p.set_member(slot, v),
        )
    }

    /// Any value but a plain string or an integer, pushed as an item.
    #[inline(never)]
    fn item_other(&mut self) -> Option<()> {
        if self.lean {
            match self.path {
                Path::Stream if self.depth == 3 => {
                    return self.along(Path::Record, |p, v| push(&mut p.items, || v));
                }
                Path::Summed(_) => return self.summed_item(),
                _ => {}
            }
        }
        self.other(
            #[inline(always)]
            |p, v| push(&mut p.items, || v),
        )
    }

    /// For a lean tree: the step along `data.stream` the value of the member at `slot` takes,
    /// if any. The path runs through containers only, and every container value is parsed
    /// through [`Self::member_other`]: the members of the top-level object are at depth 1, of
    /// `data` at 2, of a record at 4.
    ///
    /// For a packed row's arrays ([`Shape::LeanPacked`]) the path runs from the top-level
    /// object's `data`, when a member read before it says the row is packed, to its `texts`,
    /// `args` and `dt` arrays at depth 2. That shape also takes the top-level
    /// `sourceEventSeqs` of any row one step (see [`Self::sources`]).
    fn member_step(&self, slot: usize) -> Option<Path> {
        let key = &self.members[slot].0;
        match (self.path, self.depth) {
            (Path::Outside, 1) if key == "data" => match self.packed {
                false => Some(Path::Data),
                true => self.packed_row(slot).then_some(Path::Packed),
            },
            (Path::Outside, 1)
                if self.packed && key == "sourceEventSeqs" && self.peek() == Some(b'[') =>
            {
                Some(Path::Sources)
            }
            (Path::Data, 2) if key == "stream" && self.envelope => Some(Path::Skipped),
            (Path::Data, 2) if key == "stream" => Some(Path::Stream),
            (Path::Record, 4) if self.peek() == Some(b'[') => Some(Path::Dropped),
            (Path::Packed, 2) if self.peek() == Some(b'[') => match key.as_ref() {
                "texts" => Some(Path::Summed(Summed::Texts)),
                "args" => Some(Path::Summed(Summed::Args)),
                "dt" => Some(Path::Summed(Summed::Dt)),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether the top-level object's members before `slot` name it a packed row (its
    /// `type` is a packed row's tag). A repeated `type` may say otherwise later: the caller
    /// reads such a line again whole (see [`crate::log::rows::decode_in`]).
    fn packed_row(&self, slot: usize) -> bool {
        self.members[..slot].iter().any(|(k, v)| {
            k == "type" && matches!(v, Json::Str(t) if PACKED_TAGS.contains(&t.as_str()))
        })
    }

    /// A value one step further along `data.stream` or a packed row's `data` (lean trees).
    #[inline(never)]
    fn along(&mut self, into: Path, put: impl Fn(&mut Self, Json<'a>)) -> Option<()> {
        let was = std::mem::replace(&mut self.path, into);
        let done = match into {
            Path::Summed(which) => self.summed(which, put),
            Path::Skipped => self.passed_over(put),
            Path::Sources => self.sources(put),
            _ => self.other(put),
        };
        self.path = was;
        done
    }

    /// At the `[` of a packed row's member array: its items parsed and tallied, and all but
    /// those the tree keeps (the first of `texts` or `args`) forgotten.
    fn summed(&mut self, which: Summed, put: impl Fn(&mut Self, Json<'a>)) -> Option<()> {
        if self.summed_flat(which, &put) {
            return Some(());
        }
        self.summed_from = self.items.len();
        let base = self.array()?;
        let items = &self.items[base..];
        let tally = self.tally.get_or_insert_default();
        let keep = match which {
            Summed::Texts => {
                tally.texts = Some(Pieces::of(items));
                items.len().min(1)
            }
            Summed::Args => {
                tally.args = Some(Pieces::of(items));
                items.len().min(1)
            }
            Summed::Dt => {
                tally.dt = Some(Steps::of(items));
                0
            }
        };
        Self::close(self.arena, &mut self.items, base + keep, true);
        let list = Self::close(self.arena, &mut self.items, base, false);
        put(self, Json::Arr(list));
        Some(())
    }

    /// [`Self::summed`] of a flat array (see [`flat`]), checked and tallied a window at a
    /// time: the same tally and the same kept item, or false (nothing read) for the item by
    /// item path. A member array is taken only when its first member, which the tree keeps,
    /// has no escape.
    fn summed_flat(&mut self, which: Summed, put: &impl Fn(&mut Self, Json<'a>)) -> bool {
        let at = self.i;
        if self.depth >= MAX_DEPTH {
            return false;
        }
        let Some(a) = flat::array_items(self.s, at + 1, Flat::Json) else {
            return false;
        };
        let list = match which {
            Summed::Dt if !a.strings => {
                let values = a.integers(self.s).map(|v| Num::U(v).safe_int());
                self.tally.get_or_insert_default().dt = Some(Steps::over(a.items, values));
                List::Arena(&[])
            }
            Summed::Texts | Summed::Args if a.strings => {
                let first = at + 2;
                let Some(close) = memchr::memchr(b'"', &self.s[first..a.end]) else {
                    return false;
                };
                if memchr::memchr(b'\\', &self.s[first..first + close]).is_some() {
                    return false;
                }
                let text = self.between_quotes(first, first + close);
                let pieces = Some(Pieces {
                    len: a.items,
                    strings: true,
                });
                let tally = self.tally.get_or_insert_default();
                match which {
                    Summed::Texts => tally.texts = pieces,
                    _ => tally.args = pieces,
                }
                let base = self.items.len();
                push(&mut self.items, || Json::Str(JStr::from(text)));
                Self::close(self.arena, &mut self.items, base, false)
            }
            _ => return false,
        };
        self.i = a.end;
        put(self, Json::Arr(list));
        true
    }

    /// At the `[` of the top-level `sourceEventSeqs` ([`Shape::LeanPacked`]): a strictly
    /// increasing list of safe integers ≥ 0 is kept in its range-encoded storage form (§5.3:
    /// each run of at least three consecutive seqs as a pair `[first,last]`), which decodes to
    /// the same list with the same verdicts; format 0 writes the chunks of each assistant
    /// message as such a plain list, thousands of seqs long. Any other list is read again and
    /// kept as it stands.
    #[inline(never)]
    fn sources(&mut self, put: impl Fn(&mut Self, Json<'a>)) -> Option<()> {
        let (at, depth, base) = (self.i, self.depth, self.items.len());
        if self.seq_runs() == Some(true) {
            let list = Self::close(self.arena, &mut self.items, base, false);
            put(self, Json::Arr(list));
            return Some(());
        }
        // Read again from its `[`, by the ordinary path (which also fails a list that is not
        // JSON): at most twice a list's bytes, and nothing has been audited here that the
        // second read does not audit again.
        Self::close(self.arena, &mut self.items, base, true);
        (self.i, self.depth) = (at, depth);
        self.other(put)
    }

    /// The items of a strictly increasing list of safe integers ≥ 0 pushed run-encoded;
    /// `Some(false)` at the first item that makes it another list, `None` if it is not JSON.
    fn seq_runs(&mut self) -> Option<bool> {
        let mut run: Option<(u64, u64)> = None;
        if self.array_opens()? {
            loop {
                if !self.peek()?.is_ascii_digit() {
                    return Some(false);
                }
                let v = match self.number()? {
                    Num::U(v) if v <= MAX_SAFE => v,
                    _ => return Some(false),
                };
                run = match run {
                    None => Some((v, v)),
                    Some((first, last)) if v == last + 1 => Some((first, v)),
                    Some((first, last)) if v > last => {
                        self.push_run(first, last);
                        Some((v, v))
                    }
                    Some(_) => return Some(false),
                };
                if !self.more_items()? {
                    break;
                }
            }
        }
        if let Some((first, last)) = run {
            self.push_run(first, last);
        }
        self.depth -= 1;
        Some(true)
    }

    /// One run of consecutive seqs as DSH writers store it: a pair from three seqs on.
    fn push_run(&mut self, first: u64, last: u64) {
        if last - first >= 2 {
            let pair = self.items.len();
            push(&mut self.items, || Json::Num(Num::U(first)));
            push(&mut self.items, || Json::Num(Num::U(last)));
            let pair = Self::close(self.arena, &mut self.items, pair, false);
            push(&mut self.items, || Json::Arr(pair));
        } else {
            for v in first..=last {
                push(&mut self.items, || Json::Num(Num::U(v)));
            }
        }
    }

    /// An item of a tallied array that is not a plain string or an integer. A string past
    /// the first is only counted (an escaped one is not kept to be unescaped); a container
    /// is audited and left out, since only its kind counts.
    #[inline(never)]
    fn summed_item(&mut self) -> Option<()> {
        let put = |p: &mut Self, v| push(&mut p.items, || v);
        match self.peek()? {
            b'"' if self.items.len() > self.summed_from => {
                self.skip_string()?;
                put(self, Json::Str(JStr::from("")));
                Some(())
            }
            b'{' | b'[' => {
                let was = std::mem::replace(&mut self.path, Path::Dropped);
                let done = self.other(put);
                self.path = was;
                done
            }
            _ => self.other(put),
        }
    }

    /// A closed container's items (or members) from `base` up: moved into the tree, or,
    /// inside an array a lean tree leaves out, dropped (an empty list in their place).
    #[inline(always)]
    fn close<T>(
        arena: Option<&'a Bump>,
        stack: &mut Vec<T>,
        base: usize,
        discard: bool,
    ) -> List<'a, T> {
        match arena {
            Some(_) if discard => {
                // SAFETY: shortening a Vec only forgets the values past the new length. A
                // tree built in an arena owns nothing (see [`List`]), so forgetting them
                // leaks nothing, and skips the drop walk over thousands of values a message.
                unsafe { stack.set_len(base) };
                List::Arena(&[])
            }
            None if discard => {
                stack.truncate(base);
                List::Arena(&[])
            }
            Some(arena) => List::Arena(move_into(arena, stack, base)),
            None => List::Owned(stack.split_off(base)),
        }
    }

    /// A value of a container, stored by `put`: each kind is built where it is stored.
    #[inline(always)]
    fn other(&mut self, put: impl Fn(&mut Self, Json<'a>)) -> Option<()> {
        match self.peek()? {
            b'"' if self.path == Path::Dropped => {
                self.skip_string()?;
                put(self, Json::Null);
            }
            b'"' => {
                let v = self.string()?;
                put(self, Json::Str(v));
            }
            b'{' => {
                let base = self.object()?;
                let discard = self.path == Path::Dropped;
                let list = Self::close(self.arena, &mut self.members, base, discard);
                put(self, Json::Obj(list));
            }
            b'[' if self.path == Path::Dropped => {
                self.skip_array()?;
                put(self, Json::Arr(List::Arena(&[])));
            }
            b'[' => {
                let base = self.array()?;
                let list = Self::close(self.arena, &mut self.items, base, false);
                put(self, Json::Arr(list));
            }
            b't' if self.literal(b"true") => put(self, Json::Bool(true)),
            b'f' if self.literal(b"false") => put(self, Json::Bool(false)),
            b'n' if self.literal(b"null") => put(self, Json::Null),
            b'-' | b'0'..=b'9' => {
                let n = self.number()?;
                put(self, Json::Num(n));
            }
            _ => return None,
        }
        Some(())
    }

    /// The text from `start` (just past an opening quote) to `end` (at the closing quote).
    #[inline]
    fn between_quotes(&self, start: usize, end: usize) -> &'a str {
        debug_assert!(self.s[start - 1] == b'"' && self.s[end] == b'"' && start <= end);
        // SAFETY: `src` is a `str`, and quotes are ASCII, so the bytes just after one and at
        // another are char boundaries; both are in bounds (the callers found the quotes).
        unsafe { self.src.get_unchecked(start..end) }
    }

    /// At an opening quote. The plain case is inlined; escapes go to [`Self::escaped`].
    #[inline]
    fn string(&mut self) -> Option<JStr<'a>> {
        let start = self.i + 1;
        let j = scan(self.s, start);
        match self.s.get(j)? {
            b'"' => {
                self.i = j + 1;
                Some(JStr::from(self.between_quotes(start, j)))
            }
            b'\\' => self.escaped(start, j),
            _ => None,
        }
    }

    /// The rest of a string body from `start` with an escape at `j`: validate the escapes on
    /// the way to the closing quote and keep the raw body; it is unescaped only if a rule
    /// reads it (most big strings are never read).
    #[inline(never)]
    fn escaped(&mut self, start: usize, j: usize) -> Option<JStr<'a>> {
        let end = escaped_end(self.s, j)?;
        self.i = end + 1;
        let raw = self.between_quotes(start, end);
        Some(match self.arena {
            Some(arena) => JStr::escaped_in(raw, arena),
            None => JStr::escaped(raw),
        })
    }

    /// A value passed over ([`Shape::Envelope`]): past it, checked as JSON as the full parse
    /// checks it (strings, escapes, numbers, nesting), nothing of it built; a container
    /// leaves an empty one of its kind in the tree, any other value stands as read.
    #[inline(never)]
    fn passed_over(&mut self, put: impl Fn(&mut Self, Json<'a>)) -> Option<()> {
        match self.peek()? {
            b'[' => {
                self.skip_value()?;
                put(self, Json::Arr(List::Arena(&[])));
            }
            b'{' => {
                self.skip_value()?;
                put(self, Json::Obj(List::Arena(&[])));
            }
            _ => return self.other(put),
        }
        Some(())
    }

    /// Past one value, checked as JSON and not built (the objects in it are not audited for
    /// repeated keys; its numbers are, for `-0` and overflow, as they are read).
    fn skip_value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.skip_string(),
            b'{' => {
                if self.opens(b'}')? {
                    loop {
                        if self.peek()? != b'"' {
                            return None;
                        }
                        self.skip_string()?;
                        self.colon()?;
                        self.skip_value()?;
                        if !self.more_members()? {
                            break;
                        }
                    }
                }
                self.depth -= 1;
                Some(())
            }
            b'[' => {
                if self.array_opens()? {
                    if self.flat_rest() {
                        return Some(());
                    }
                    loop {
                        self.skip_value()?;
                        if !self.more_items()? {
                            break;
                        }
                    }
                }
                self.depth -= 1;
                Some(())
            }
            b't' => self.literal(b"true").then_some(()),
            b'f' => self.literal(b"false").then_some(()),
            b'n' => self.literal(b"null").then_some(()),
            b'-' | b'0'..=b'9' => self.number().map(drop),
            _ => None,
        }
    }

    /// At the first item of an array passed over: when the array is flat (a stream's `dt`
    /// and text pieces, see [`flat`]), past its `]`, checked a window at a time, and out of
    /// its level.
    #[inline(always)]
    fn flat_rest(&mut self) -> bool {
        match flat::array_end(self.s, self.i, Flat::Json) {
            Some(end) => {
                self.i = end;
                self.depth -= 1;
                true
            }
            None => false,
        }
    }

    /// At the `[` of an array a lean tree leaves out: past it, read and audited as
    /// [`Self::array`] reads it, but its items are not built (an object among them is, and
    /// then dropped: its keys are compared for repeats).
    #[inline(never)]
    fn skip_array(&mut self) -> Option<()> {
        if self.array_opens()? {
            if self.flat_rest() {
                return Some(());
            }
            loop {
                match self.peek()? {
                    // A plain string is passed inline (the common case), others out of line.
                    b'"' => {
                        if self.plain_string().is_none() {
                            self.skip_string()?;
                        }
                    }
                    b'-' | b'0'..=b'9' => {
                        self.number()?;
                    }
                    b'[' => self.skip_array()?,
                    b'{' => {
                        let base = self.object()?;
                        Self::close(self.arena, &mut self.members, base, true);
                    }
                    b't' if self.literal(b"true") => {}
                    b'f' if self.literal(b"false") => {}
                    b'n' if self.literal(b"null") => {}
                    _ => return None,
                }
                if !self.more_items()? {
                    break;
                }
            }
        }
        self.depth -= 1;
        Some(())
    }

    /// At an opening quote: past the string, its escapes checked (a string left out of a lean
    /// tree: nothing is kept of it).
    #[inline(never)]
    fn skip_string(&mut self) -> Option<()> {
        let j = scan(self.s, self.i + 1);
        self.i = match self.s.get(j)? {
            b'"' => j,
            b'\\' => escaped_end(self.s, j)?,
            _ => return None,
        } + 1;
        Some(())
    }

    /// At a number. Plain integers of at most 18 digits (nearly all of a log's numbers) are
    /// read here, inlined where the value is stored; the rest go to [`Self::long_number`].
    #[inline(always)]
    fn number(&mut self) -> Option<Num> {
        let s = self.s;
        let start = self.i;
        let mut i = start;
        let negative = s[i] == b'-';
        if negative {
            i += 1;
        }
        let int_start = i;
        // The integer part's value, read as it is scanned (it wraps past 19 digits, and is
        // then not used).
        let mut v = 0u64;
        match s.get(i)? {
            b'0' => i += 1,
            b'1'..=b'9' => {
                while let Some(d) = s.get(i).filter(|d| d.is_ascii_digit()) {
                    v = v.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
                    i += 1;
                }
            }
            _ => return None,
        }
        if matches!(s.get(i), Some(b'.' | b'e' | b'E')) || i - int_start > 18 {
            return self.long_number(start, i);
        }
        self.i = i;
        Some(match (negative, v) {
            (false, v) => Num::U(v),
            // serde_json reads `-0` as the double -0.0.
            (true, 0) => {
                self.audit.negative_zero = true;
                Num::F(-0.0)
            }
            (true, v) => Num::I(-(v as i64)),
        })
    }

    /// The rest of a number starting at `start` whose integer part ends at `i`: fractions,
    /// exponents and long integers, read exactly as serde_json reads them.
    #[inline(never)]
    fn long_number(&mut self, start: usize, i: usize) -> Option<Num> {
        let i = super::number_tail_end(self.s, i)?;
        self.i = i;
        let Ok(Json::Num(n)) = super::parse_exact(self.src.get(start..i)?) else {
            return None;
        };
        if n.is_neg_zero() {
            self.audit.negative_zero = true;
        }
        if !n.as_f64().is_finite() {
            self.audit.non_finite = true;
        }
        Some(n)
    }
}

/// A key's two bits for the filter of [`Parser::object`]: equal keys have equal bits. From
/// its length and its first and last four bytes (the whole of most keys), hashed by one
/// multiply; the bits are two 6-bit fields of the product's top.
#[inline(always)]
fn key_bits(k: &[u8]) -> u64 {
    let n = k.len();
    let body = match (k.first_chunk::<4>(), k.last_chunk::<4>()) {
        (Some(head), Some(tail)) => {
            u64::from(u32::from_le_bytes(*head)) << 32 | u64::from(u32::from_le_bytes(*tail))
        }
        _ => k.iter().fold(0, |w, &c| w << 8 | u64::from(c)),
    };
    let h = (body ^ ((n as u64) << 56)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (1 << (h >> 58)) | (1 << ((h >> 52) & 63))
}

/// `Vec::push`, always inlined, with room made before the value is built: so a value built
/// from registers where it is used (a plain key, a plain string) is written straight into its
/// slot. (`Vec::push`, outlined when called from several places, or a value built before
/// the room is made, goes through a copy in memory: wide loads just after the narrow stores
/// that wrote it, which the CPU cannot forward — a stall of a dozen cycles per member, a
/// tenth of a format 3 pass.)
#[inline(always)]
fn push<T>(stack: &mut Vec<T>, make: impl FnOnce() -> T) {
    if stack.len() == stack.capacity() {
        stack.reserve(1);
    }
    let value = make();
    // SAFETY: there is room for one more value (reserved above); it is written once into the
    // first unused slot, which the length then covers.
    unsafe {
        stack.as_mut_ptr().add(stack.len()).write(value);
        stack.set_len(stack.len() + 1);
    }
}

/// Move `stack[from..]` into `arena` (one copy of the bytes, like `Vec::split_off`).
fn move_into<'a, T>(arena: &'a Bump, stack: &mut Vec<T>, from: usize) -> &'a [T] {
    let n = stack.len() - from;
    let Ok(layout) = std::alloc::Layout::array::<T>(n) else {
        unreachable!("{n} values fit in memory: the stack holds them")
    };
    let to = arena.alloc_layout(layout).cast::<T>();
    // SAFETY: `to` is fresh arena memory for `n` values of `T`; the `n` values after `from`
    // are moved there bitwise, and the stack forgets them (its length drops to `from`), so
    // each is owned once. The arena never drops them, which is sound (a leak at worst) and,
    // for the borrowed-only values a tree in an arena holds, leaks nothing (see [`List`]).
    unsafe {
        std::ptr::copy_nonoverlapping(stack.as_ptr().add(from), to.as_ptr(), n);
        stack.set_len(from);
        std::slice::from_raw_parts(to.as_ptr(), n)
    }
}

/// How far along `data.stream` a value of a lean tree lies.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    Outside,
    /// In the top-level object's `data`.
    Data,
    /// In `data.stream`.
    Stream,
    /// In one of its records.
    Record,
    /// In an array of a record: left out of the tree.
    Dropped,
    /// In a packed row's `data` ([`Shape::LeanPacked`]).
    Packed,
    /// In one of its member arrays, which is tallied.
    Summed(Summed),
    /// In the top-level `sourceEventSeqs` ([`Shape::LeanPacked`]).
    Sources,
    /// `data.stream`, passed over whole ([`Shape::Envelope`]).
    Skipped,
}

/// Which member array of a packed row is tallied.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Summed {
    Texts,
    Args,
    Dt,
}

/// The closing quote of a string body with an escape at `j`, every escape before it valid.
/// Sixty-four bytes at a time while they last (most escaped strings are long tool outputs with
/// an escape every few dozen bytes); the rest, and any `\u` escape, one escape at a time.
#[inline(always)]
fn escaped_end(s: &[u8], j: usize) -> Option<usize> {
    let mut j = match escaped_windows(s, j) {
        Windows::End(end) => return Some(end),
        Windows::Invalid => return None,
        Windows::Rest(at) => at,
    };
    loop {
        match s.get(j)? {
            b'"' => return Some(j),
            b'\\' => {
                j = escape_end(s, j)?;
                j = scan(s, j);
            }
            _ => return None,
        }
    }
}

/// Where [`escaped_windows`] stopped.
#[derive(Debug, PartialEq)]
enum Windows {
    /// At the closing quote, every escape before it valid.
    End(usize),
    /// A control character or an invalid escape before the closing quote.
    Invalid,
    /// Go on one escape at a time from this index, a backslash or an unescaped quote or
    /// control character (fewer than 64 bytes were left, or a `\u` escape needs its
    /// digits read).
    Rest(usize),
}

/// Scan a string body from `j` (a backslash that is not itself escaped) in windows of 64
/// bytes: one mask per window each for quotes, backslashes and control characters, the
/// escaped bytes found from the backslash runs without a branch per escape (simdjson's
/// method, with the carry of a run that crosses windows), and each escaped byte checked
/// against the valid escapes.
fn escaped_windows(s: &[u8], j: usize) -> Windows {
    windows_with(s, j, &SIMPLE_ESCAPES)
}

/// For the check that a stored text is `JSON.stringify`'s form (`sqlite::js`): from `j` in a
/// string body, a backslash that is not itself escaped, the index of the closing quote when
/// every escape before it is one `JSON.stringify` writes as such (`\"`, `\\`, `\b`, `\f`,
/// `\n`, `\r`, `\t`) and no control character comes first. `Err(k)`: the caller goes on one
/// byte at a time from `k`, the start of a window or a backslash that is not itself escaped
/// (a `\u` escape, another escape or a control character lies ahead, or fewer than 64 bytes
/// are left).
pub(crate) fn stringify_string_end(s: &[u8], j: usize) -> Result<usize, usize> {
    match windows_with(s, j, &STRINGIFY_ESCAPES) {
        Windows::End(end) => Ok(end),
        Windows::Rest(at) => Err(at),
        Windows::Invalid => Err(j),
    }
}

/// [`escaped_windows`] with `allowed` the escapes (but `\u`) taken in the windows.
#[inline(always)]
fn windows_with(s: &[u8], mut j: usize, allowed: &[u64; 4]) -> Windows {
    // Whether the first byte of the window is escaped by a backslash ending the last one.
    let mut carry = 0u64;
    while let Some(window) = s.get(j..j + 64) {
        let (quote, backslash, control) = masks64(window);
        // Sets `carry` for the next window: whether an odd run of backslashes ends this one.
        let escaped = escaped(backslash, &mut carry);
        let ends = quote & !escaped;
        let before = if ends == 0 {
            u64::MAX
        } else {
            (ends & ends.wrapping_neg()) - 1
        };
        if control & before != 0 {
            return Windows::Invalid;
        }
        let mut check = escaped & before;
        while check != 0 {
            let at = check.trailing_zeros() as usize;
            let c = window[at];
            // A bit test (a `match` here was a jump table: an indirect branch per escape,
            // often mispredicted in text mixing `\n`, `\"` and `\\`).
            if allowed[usize::from(c >> 6)] >> (c & 63) & 1 == 0 {
                return match c {
                    // Its backslash, one byte back (in this window or ending the last).
                    b'u' => Windows::Rest(j + at - 1),
                    _ => Windows::Invalid,
                };
            }
            check &= check - 1;
        }
        if ends != 0 {
            return Windows::End(j + ends.trailing_zeros() as usize);
        }
        j += 64;
    }
    // Fewer than 64 bytes left: from the escaping backslash, or from the next byte that
    // ends a plain run.
    Windows::Rest(if carry != 0 { j - 1 } else { scan(s, j) })
}

/// The bytes escaped by a backslash (the one after an odd run of them), given the window's
/// backslashes; `carry` says the window's first byte is escaped, and is set for the next
/// window (simdjson's branchless scan). Shared by this parser's string windows and
/// `usage`'s walk.
#[inline(always)]
pub(crate) fn escaped(backslash: u64, carry: &mut u64) -> u64 {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    let backslash = backslash & !*carry;
    let follows = (backslash << 1) | *carry;
    let odd_starts = backslash & !EVEN & !follows;
    let (even_runs, overflow) = odd_starts.overflowing_add(backslash);
    *carry = u64::from(overflow);
    (EVEN ^ (even_runs << 1)) & follows
}

/// Bit `i` is the XOR of bits `0..=i`: inside a string from its opening quote up to (not
/// including) its closing one.
pub(crate) fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

/// The bytes that may follow a backslash but `u`, as a bit set (bit `c % 64` of word
/// `c / 64` for byte `c`): `"`, `\`, `/`, `b`, `f`, `n`, `r`, `t`.
const SIMPLE_ESCAPES: [u64; 4] = byte_set(b"\"\\/bfnrt");

/// Those of them `JSON.stringify` writes (it writes `/` as it is).
const STRINGIFY_ESCAPES: [u64; 4] = byte_set(b"\"\\bfnrt");

const fn byte_set(bytes: &[u8]) -> [u64; 4] {
    let mut set = [0u64; 4];
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        set[(c >> 6) as usize] |= 1 << (c & 63);
        i += 1;
    }
    set
}

/// Masks of the quotes, backslashes and control characters in a 64-byte window (bit `i`:
/// byte `i`).
#[inline]
fn masks64(window: &[u8]) -> (u64, u64, u64) {
    debug_assert_eq!(window.len(), 64);
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8,
            _mm_set1_epi8,
        };
        // SAFETY: SSE2 is always available on x86_64; each load reads 16 bytes of the
        // 64-byte `window` (checked by the slicing below), unaligned loads are allowed.
        unsafe {
            let quote = _mm_set1_epi8(b'"' as i8);
            let backslash = _mm_set1_epi8(b'\\' as i8);
            let control = _mm_set1_epi8(0x1f);
            let (mut q, mut b, mut c) = (0u64, 0u64, 0u64);
            for k in 0..4 {
                let chunk = &window[k * 16..k * 16 + 16];
                let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
                let shift = 16 * k;
                q |= u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(v, quote)) as u16) << shift;
                b |= u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(v, backslash)) as u16) << shift;
                // max(b, 0x1f) == 0x1f exactly when b <= 0x1f (unsigned).
                let low = _mm_cmpeq_epi8(_mm_max_epu8(v, control), control);
                c |= u64::from(_mm_movemask_epi8(low) as u16) << shift;
            }
            (q, b, c)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let (mut q, mut b, mut c) = (0u64, 0u64, 0u64);
        for (i, &x) in window.iter().enumerate() {
            q |= u64::from(x == b'"') << i;
            b |= u64::from(x == b'\\') << i;
            c |= u64::from(x < 0x20) << i;
        }
        (q, b, c)
    }
}

/// At a backslash: the index just past a valid escape (`None` for an invalid one or a lone
/// surrogate, which the careful path reads as U+FFFD).
fn escape_end(s: &[u8], j: usize) -> Option<usize> {
    match s.get(j + 1)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(j + 2),
        b'u' => match hex4(s, j + 2)? {
            0xD800..=0xDBFF => {
                if s.get(j + 6) != Some(&b'\\') || s.get(j + 7) != Some(&b'u') {
                    return None;
                }
                (0xDC00..=0xDFFF)
                    .contains(&hex4(s, j + 8)?)
                    .then_some(j + 12)
            }
            0xDC00..=0xDFFF => None,
            _ => Some(j + 6),
        },
        _ => None,
    }
}

/// At a backslash: the character a valid escape stands for, and the index just past it
/// (`None` where [`escape_end`] finds none: an invalid escape or a lone surrogate).
pub(crate) fn escaped_char(s: &[u8], j: usize) -> Option<(char, usize)> {
    let end = escape_end(s, j)?;
    let c = match s[j + 1] {
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let unit = hex4(s, j + 2)?;
            if (0xD800..0xDC00).contains(&unit) {
                char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (hex4(s, j + 8)? - 0xDC00))?
            } else {
                char::from_u32(unit)?
            }
        }
        // `"`, `\` and `/` stand for themselves.
        other => char::from(other),
    };
    Some((c, end))
}

/// What [`unescape_into`] writes to.
pub(super) trait Text {
    fn push_str(&mut self, s: &str);
    fn push(&mut self, c: char);
}

impl Text for String {
    fn push_str(&mut self, s: &str) {
        String::push_str(self, s);
    }
    fn push(&mut self, c: char) {
        String::push(self, c);
    }
}

impl Text for bumpalo::collections::String<'_> {
    fn push_str(&mut self, s: &str) {
        bumpalo::collections::String::push_str(self, s);
    }
    fn push(&mut self, c: char) {
        bumpalo::collections::String::push(self, c);
    }
}

/// Unescape a string body [`escape_end`] has validated (so every escape is well formed).
pub(super) fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    unescape_into(raw, &mut out);
    out
}

/// [`unescape`] into `out` (an arena's string: no heap allocation and copy).
pub(super) fn unescape_into(raw: &str, out: &mut impl Text) {
    let s = raw.as_bytes();
    let (mut run, mut j) = (0, 0);
    while let Some(k) = memchr::memchr(b'\\', &s[j..]) {
        let at = j + k;
        out.push_str(&raw[run..at]);
        let e = s.get(at + 1).copied().unwrap_or(b'\\');
        j = at + 2;
        match e {
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'n' => out.push('\n'),
            b'r' => out.push('\r'),
            b't' => out.push('\t'),
            b'u' => {
                let unit = hex4(s, j).unwrap_or(0xFFFD);
                j += 4;
                let c = if (0xD800..0xDC00).contains(&unit) {
                    let low = hex4(s, j + 2).unwrap_or(0xDC00);
                    j += 6;
                    char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
                } else {
                    char::from_u32(unit)
                };
                out.push(c.unwrap_or('\u{fffd}'));
            }
            // `"`, `\` and `/` stand for themselves.
            other => out.push(char::from(other)),
        }
        run = j;
    }
    out.push_str(&raw[run..]);
}

fn hex4(s: &[u8], at: usize) -> Option<u32> {
    let digits = s.get(at..at + 4)?;
    digits.iter().try_fold(0u32, |acc, &d| {
        let v = (d as char).to_digit(16)?;
        Some(acc * 16 + v)
    })
}

/// The index of the first byte at or after `j` that is `"`, `\` or a control character
/// (`s.len()` when there is none): the bytes of a string that need no attention.
#[inline]
pub(crate) fn scan(s: &[u8], mut j: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        // SSE2 is part of x86_64: sixteen bytes per step.
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8,
            _mm_or_si128, _mm_set1_epi8,
        };
        // SAFETY: SSE2 is always available on x86_64; every load reads `chunk`, a checked
        // 16-byte subslice, and `_mm_loadu_si128` has no alignment requirement.
        unsafe {
            let quote = _mm_set1_epi8(b'"' as i8);
            let backslash = _mm_set1_epi8(b'\\' as i8);
            let control = _mm_set1_epi8(0x1f);
            while let Some(chunk) = s.get(j..j + 16) {
                let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
                let hits = _mm_or_si128(
                    _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                    // max(b, 0x1f) == 0x1f exactly when b <= 0x1f (unsigned).
                    _mm_cmpeq_epi8(_mm_max_epu8(v, control), control),
                );
                let mask = _mm_movemask_epi8(hits);
                if mask != 0 {
                    return j + mask.trailing_zeros() as usize;
                }
                j += 16;
            }
        }
    }
    while let Some(&b) = s.get(j) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            return j;
        }
        j += 1;
    }
    s.len()
}

#[cfg(test)]
mod tests {
    use super::super::{List, audit, parse_careful};
    use super::{Json, MAX_SAFE, Num, PACKED_TAGS, Pieces, Shape, Steps, Tally};
    use crate::log::rows::{SourceItem, encode_sources};
    use proptest::prelude::*;

    /// Whenever the fast path answers, it answers exactly what the careful path does (tree,
    /// member order, number kinds, and the audit).
    fn agrees(text: &str) {
        if let Some((fast, fast_audit)) = super::parse(text, None, None, Shape::Full) {
            let careful = parse_careful(text).expect("fast path accepted what serde refuses");
            assert_eq!(format!("{fast:?}"), format!("{careful:?}"), "{text}");
            assert_eq!(fast_audit, audit(&careful), "{text}");
        }
        // In an arena: the same tree and audit, and nothing in it owns memory.
        let arena = super::super::Arena::default();
        let in_arena = super::parse(
            text,
            Some(&arena),
            Some(&mut super::Scratch::default()),
            Shape::Full,
        );
        assert_eq!(
            format!("{in_arena:?}"),
            format!("{:?}", super::parse(text, None, None, Shape::Full)),
            "{text}"
        );
        if let Some((v, _)) = &in_arena {
            assert!(v.arena_only(), "{text}: {v:?}");
        }
    }

    #[test]
    fn agrees_with_the_careful_path_on_corner_cases() {
        let accepted = [
            r#"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
            r#" {"a" : -0 , "b":[ -0.0, 0, -5, 18446744073709551615, 123456789012345678]} "#,
            r#"{"a":1,"a":2,"b":{"c":1,"c":2},"x":{"y":{"z":0,"z":1}}}"#,
            r#"{"x":{"y":1,"y":2},"z":{"w":3,"w":4}}"#,
            r#"{"s":"tab\there \"q\" \\ \/ \b\f\n\r \u00e9 \ud83d\ude00 \u0000"}"#,
            r#"{"n":[1.5,1e3,1E-3,-2.5e+10,0.1,123456789012345678901234567890]}"#,
            r#""plain""#,
            "[]",
            "{}",
            "[[],{},[{}]]",
            r#"{"é":"日本語","k":"a\u00e9b"}"#,
        ];
        for t in accepted {
            assert!(
                super::parse(t, None, None, Shape::Full).is_some(),
                "fast path should read {t}"
            );
            agrees(t);
        }
        // Left to the careful path: errors, lone surrogates, overflowing numbers, deep nesting.
        let refused = [
            "",
            "{",
            r#"{"a":1,}"#,
            "[1,]",
            "01",
            "-",
            "1.",
            "1e",
            "tru",
            r#"{"a":"\ud800"}"#,
            r#"{"a":"\udc00x"}"#,
            r#"{"a":"\x"}"#,
            "{\"a\":\"tab\tinside\"}",
            r#"{"a":1e400}"#,
            r#"[1] x"#,
        ];
        for t in refused {
            assert!(
                super::parse(t, None, None, Shape::Full).is_none(),
                "fast path should leave {t:?}"
            );
        }
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(super::parse(&deep, None, None, Shape::Full).is_none());
        let ok_deep = "[".repeat(50) + &"]".repeat(50);
        agrees(&ok_deep);
    }

    fn json_text() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("true".to_owned()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_map(|f| format!("{f:e}")),
            prop::sample::select(vec![
                "-0",
                "0.0",
                "-0e0",
                "1e-400",
                "9007199254740993",
                "1.0"
            ])
            .prop_map(str::to_owned),
            "[a-z\\\\\"/\n\t\u{e9}\u{1F600} ]{0,40}"
                .prop_map(|s| serde_json::to_string(&s).unwrap_or_default()),
            prop::sample::select(vec![
                r#""\u00e9\u002F""#,
                r#""\ud83d\ude00""#,
                r#""a\u0000b""#
            ])
            .prop_map(str::to_owned),
        ];
        leaf.prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec(
                    (
                        prop::sample::select(vec!["a", "b", "type", "é", "a\\n"]),
                        inner
                    ),
                    0..6
                )
                .prop_map(|m| {
                    let members: Vec<String> = m
                        .into_iter()
                        .map(|(k, v)| format!("\"{k}\" : {v}"))
                        .collect();
                    format!("{{ {} }}", members.join(" ,"))
                }),
            ]
        })
    }

    /// `text` as a JSON string with every character as a `\u` escape (surrogate pairs beyond
    /// the BMP), and with only `/` escaped on top of serde_json's escapes.
    fn other_escapings(text: &str) -> [String; 2] {
        let mut all = String::from("\"");
        for unit in text.encode_utf16() {
            all.push_str(&format!("\\u{unit:04X}"));
        }
        all.push('"');
        let slash = serde_json::to_string(text)
            .unwrap_or_default()
            .replace('/', "\\/");
        [all, slash]
    }

    /// The digest of the string a line holds, parsed every way a string can be held: borrowed
    /// or escaped by the fast path, in an arena or not, unescaped by the careful path.
    fn digests(line: &str) -> Vec<u64> {
        let arena = super::super::Arena::default();
        let mut out = Vec::new();
        for v in [
            super::parse(line, None, None, Shape::Full).map(|(v, _)| v),
            super::parse(
                line,
                Some(&arena),
                Some(&mut super::Scratch::default()),
                Shape::Full,
            )
            .map(|(v, _)| v),
            parse_careful(line).ok(),
        ]
        .into_iter()
        .flatten()
        {
            out.push(v.text_digest().expect("a string"));
        }
        out
    }

    /// The one-escape-at-a-time scan of a string body from a backslash at `j`: the closing
    /// quote's index, or `None`.
    fn scalar_end(s: &[u8], mut j: usize) -> Option<usize> {
        loop {
            match s.get(j)? {
                b'"' => return Some(j),
                b'\\' => j = super::scan(s, super::escape_end(s, j)?),
                _ => return None,
            }
        }
    }

    /// [`super::escaped_windows`], finished one escape at a time as the parser does.
    fn windowed_end(s: &[u8], j: usize) -> Option<usize> {
        match super::escaped_windows(s, j) {
            super::Windows::End(e) => Some(e),
            super::Windows::Invalid => None,
            super::Windows::Rest(at) => scalar_end(s, at),
        }
    }

    #[test]
    fn windows_carry_backslash_runs_across_their_edges() {
        // A run of backslashes ending exactly at a window's end, odd and even.
        for run in 1..6 {
            for pad in 58..66 {
                let body = format!("\\n{}{}\"x\"", "a".repeat(pad), "\\".repeat(run));
                let s = body.as_bytes();
                assert_eq!(windowed_end(s, 0), scalar_end(s, 0), "{body}");
            }
        }
    }

    /// What a lean tree of `full` holds, written over the tree rather than the parse: every
    /// array that is a member of an object in the `stream` array of the `data` object of the
    /// top-level object (each of repeated keys alike) emptied.
    fn lean_of(mut full: Json<'_>) -> Json<'_> {
        let members = |v: &mut Json<'_>, key: &str, each: &mut dyn FnMut(&mut Json<'_>)| {
            if let Json::Obj(list) = v {
                for (k, v) in list.to_mut() {
                    if k == key {
                        each(v);
                    }
                }
            }
        };
        members(&mut full, "data", &mut |data| {
            members(data, "stream", &mut |stream| {
                if let Json::Arr(records) = stream {
                    for record in records.to_mut() {
                        if let Json::Obj(list) = record {
                            for (_, v) in list.to_mut() {
                                if let Json::Arr(_) = v {
                                    *v = Json::Arr(List::Owned(Vec::new()));
                                }
                            }
                        }
                    }
                }
            })
        });
        full
    }

    /// A parse of the lean `shape` (in an arena and not) is the full parse with `expected`
    /// applied (the tree, and the tally it kept), and its audit is the full parse's: the arrays
    /// left out are still read and audited.
    fn shape_agrees(
        text: &str,
        shape: Shape,
        expected: for<'a> fn(Json<'a>) -> (Json<'a>, Option<Tally>),
    ) {
        let Some((full, full_audit)) = super::parse(text, None, None, Shape::Full) else {
            return;
        };
        let (tree, kept) = expected(full);
        let arena = super::super::Arena::default();
        for (lean, lean_audit, tally) in [
            super::parse_tallied(text, None, None, shape),
            super::parse_tallied(text, Some(&arena), Some(&mut Default::default()), shape),
        ]
        .into_iter()
        .map(|parsed| parsed.expect("the lean parse reads what the full one does"))
        {
            assert!(lean == tree, "{text}:\n{lean:?}\n!= {tree:?}");
            assert_eq!(tally.as_deref(), kept.as_ref(), "{text}");
            assert_eq!(lean_audit, full_audit, "{text}");
        }
    }

    fn lean_agrees(text: &str) {
        shape_agrees(text, Shape::Lean, |full| (lean_of(full), None));
    }

    #[test]
    fn a_lean_tree_leaves_out_only_the_arrays_of_stream_records() {
        let line = r#"{"type":"assistant/message","seq":3,"stream":[{"dt":[1]}],"data":{"turn":1,"message":{"content":[{"type":"text","text":"hi"}],"stream":[{"dt":[2]}]},"stream":[{"type":"chunk","time":5,"chunk":{"type":"block-end","block":{"type":"tool-result","content":[1]}}},{"type":"text-chunks","time0":6,"index":0,"dt":[0,-0,3],"texts":["a\nb","c",["d"],{"k":1,"k":2}]},{"type":"tool-call-chunks","args":["{\"x\"",":1}"],"dt":[1,1]},[[1]],"s"],"usage":{"in":[1,2]}}}"#;
        let arena = super::super::Arena::default();
        let (lean, audit) = super::parse(
            line,
            Some(&arena),
            Some(&mut Default::default()),
            Shape::Lean,
        )
        .expect("parsed");
        let expected = r#"{"type":"assistant/message","seq":3,"stream":[{"dt":[1]}],"data":{"turn":1,"message":{"content":[{"type":"text","text":"hi"}],"stream":[{"dt":[2]}]},"stream":[{"type":"chunk","time":5,"chunk":{"type":"block-end","block":{"type":"tool-result","content":[1]}}},{"type":"text-chunks","time0":6,"index":0,"dt":[],"texts":[]},{"type":"tool-call-chunks","args":[],"dt":[]},[[1]],"s"],"usage":{"in":[1,2]}}}"#;
        let (want, _) = super::parse(expected, None, None, Shape::Full).expect("parsed");
        assert!(lean == want, "{lean:?}");
        // A `-0` and a repeated key inside the arrays left out are still reported.
        assert!(audit.negative_zero);
        assert_eq!(audit.duplicate_key.as_deref(), Some("k"));
        lean_agrees(line);
        // Only in the top-level object's `data`: elsewhere a `stream` is kept whole.
        for kept in [
            r#"{"x":{"stream":[{"dt":[1]}]}}"#,
            r#"[{"data":{"stream":[{"dt":[1]}]}}]"#,
            r#"{"data":[{"stream":[{"dt":[1]}]}]}"#,
            r#"{"data":{"x":{"stream":[{"dt":[1]}]}}}"#,
        ] {
            let (full, _) = super::parse(kept, None, None, Shape::Full).expect("parsed");
            let (lean, _) = super::parse(kept, None, None, Shape::Lean).expect("parsed");
            assert!(lean == full, "{kept}");
        }
        // Repeated `data` and `stream` keys, and escaped ones, are each followed.
        lean_agrees(
            r#"{"data":{"stream":[{"a":[1]}],"stream":[{"b":[2]}]},"data":{"str\u0065am":[{"c":[3]}]}}"#,
        );
    }

    /// What a [`Shape::LeanPacked`] tree of `full` holds, and the tally of what it left out,
    /// written over the tree: in the `data` objects of the top-level object that follow a
    /// `type` member naming a packed row, each array `dt` emptied and each array `texts` or
    /// `args` cut to its first item (itself emptied if a container), the tally taken from
    /// the last of each name; and each top-level `sourceEventSeqs` that holds only safe
    /// integers ≥ 0, strictly increasing, as DSH writers encode it.
    fn packed_of(mut full: Json<'_>) -> (Json<'_>, Option<Tally>) {
        let mut tally = Tally::default();
        let mut packed = false;
        if let Json::Obj(list) = &mut full {
            for (k, v) in list.to_mut() {
                if k == "type" {
                    packed |= matches!(v, Json::Str(t) if PACKED_TAGS.contains(&t.as_str()));
                }
                if k == "sourceEventSeqs"
                    && let Some(encoded) = encoded_sources(v)
                {
                    *v = encoded;
                }
                let Json::Obj(data) = v else { continue };
                if k != "data" || !packed {
                    continue;
                }
                for (k, v) in data.to_mut() {
                    let Json::Arr(items) = v else { continue };
                    let keep = match k.as_ref() {
                        "dt" => {
                            tally.dt = Some(Steps::of(items));
                            0
                        }
                        "texts" | "args" => {
                            let pieces = Some(Pieces::of(items));
                            if k == "args" {
                                tally.args = pieces;
                            } else {
                                tally.texts = pieces;
                            }
                            1
                        }
                        _ => continue,
                    };
                    let items = items.to_mut();
                    items.truncate(keep);
                    for item in items {
                        match item {
                            Json::Arr(_) => *item = Json::Arr(List::Owned(Vec::new())),
                            Json::Obj(_) => *item = Json::Obj(List::Owned(Vec::new())),
                            _ => {}
                        }
                    }
                }
            }
        }
        (full, (tally != Tally::default()).then_some(tally))
    }

    /// A list of safe integers ≥ 0 in strictly increasing order, encoded by
    /// [`encode_sources`]; `None` for any other value.
    fn encoded_sources(v: &Json<'_>) -> Option<Json<'static>> {
        let seqs: Vec<u64> = v
            .as_arr()?
            .iter()
            .map(|item| match item {
                Json::Num(Num::U(v)) if *v <= MAX_SAFE => Some(*v),
                _ => None,
            })
            .collect::<Option<_>>()?;
        if !seqs.windows(2).all(|w| w[0] < w[1]) {
            return None;
        }
        let seq = |v| Json::Num(Num::U(v));
        let items = encode_sources(&seqs).into_iter().map(|item| match item {
            SourceItem::Seq(v) => seq(v),
            SourceItem::Run(a, b) => Json::Arr(List::Owned(vec![seq(a), seq(b)])),
        });
        Some(Json::Arr(List::Owned(items.collect())))
    }

    fn packed_agrees(text: &str) {
        shape_agrees(text, Shape::LeanPacked, packed_of);
    }

    /// A [`Shape::LeanPacked`] parse of `line` in `arena`, with scratch stacks.
    fn lean_packed_in<'a>(
        line: &'a str,
        arena: &'a super::super::Arena,
    ) -> (Json<'a>, super::super::Audit, Option<Box<Tally>>) {
        super::parse_tallied(
            line,
            Some(arena),
            Some(&mut Default::default()),
            Shape::LeanPacked,
        )
        .expect("parsed")
    }

    #[test]
    fn a_lean_packed_row_keeps_the_first_piece_and_tallies_the_rest() {
        let line = r#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[5,-0,7.5,"x",3],"texts":["a\nb","c\"","d",{"k":1,"k":2},["e"]]}}"#;
        let arena = super::super::Arena::default();
        let (lean, audit, tally) = lean_packed_in(line, &arena);
        let expected = r#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a\nb"]}}"#;
        let (want, _) = super::parse(expected, None, None, Shape::Full).expect("parsed");
        assert!(lean == want, "{lean:?}");
        let tally = tally.expect("a tally");
        assert_eq!(
            tally.texts,
            Some(Pieces {
                len: 5,
                strings: false
            })
        );
        // Read up to the first step that is not a safe integer (7.5).
        assert_eq!(
            tally.dt,
            Some(Steps {
                len: 5,
                safe: false,
                low: 0,
                high: 5,
                sum: 5
            })
        );
        assert_eq!(tally.args, None);
        assert!(audit.negative_zero);
        assert_eq!(audit.duplicate_key.as_deref(), Some("k"));
        packed_agrees(line);
        // Only a row named packed by a `type` read before its `data`, at the top level.
        for kept in [
            r#"{"data":{"dt":[1],"texts":["a","b"]},"type":"text-chunks"}"#,
            r#"{"type":"assistant/chunk","data":{"dt":[1],"texts":["a","b"]}}"#,
            r#"{"type":"text-chunks","x":{"data":{"dt":[1]}}}"#,
            r#"[{"type":"text-chunks","data":{"dt":[1]}}]"#,
            r#"{"type":"text-chunks","data":{"x":{"dt":[1]},"dt":2,"texts":"ab"}}"#,
            r#"{"type":"text-chunks","data":[{"dt":[1]}]}"#,
        ] {
            let (full, _) = super::parse(kept, None, None, Shape::Full).expect("parsed");
            let (lean, _, tally) =
                super::parse_tallied(kept, None, None, Shape::LeanPacked).expect("parsed");
            assert!(lean == full, "{kept}");
            assert_eq!(tally, None::<Box<Tally>>, "{kept}");
        }
        // Repeated and escaped keys, and each tag, are followed as the tree reads them.
        for line in [
            r#"{"type":"tool-call-chunks","data":{"args":["{","}"],"dt":[1]},"type":"x","data":{"dt":[2,3],"args":[]}}"#,
            r#"{"type":"reasoning-chunks","type":"x","data":{"texts":["a"],"texts":["b","c"],"dt":[9007199254740991,9007199254740991]}}"#,
            r#"{"type":"text-chunks","data":{"texts":[[1],"b"],"dt":[-9007199254740991,-1]}}"#,
        ] {
            packed_agrees(line);
        }
    }

    #[test]
    fn a_lean_packed_tree_keeps_an_increasing_source_list_range_encoded() {
        let encoded = |line: &str| {
            let arena = super::super::Arena::default();
            let (tree, _, _) = lean_packed_in(line, &arena);
            packed_agrees(line);
            tree.get("sourceEventSeqs").map(Json::to_js_string)
        };
        let row = |list: &str| {
            format!(
                r#"{{"type":"assistant/message","seq":99,"data":{{}},"sourceEventSeqs":{list}}}"#
            )
        };
        for (list, kept) in [
            ("[9,10,11,12,13]", "[[9,13]]"),
            ("[1,2,4,5,6,9,11,12]", "[1,2,[4,6],9,11,12]"),
            ("[ 0 , 1 ,2 ]", "[[0,2]]"),
            (
                "[9007199254740989,9007199254740990,9007199254740991]",
                "[[9007199254740989,9007199254740991]]",
            ),
            ("[]", "[]"),
            ("[7]", "[7]"),
            // Any other list stands as it is.
            ("[5,6,7,1]", "[5,6,7,1]"),
            ("[1,2,3,3]", "[1,2,3,3]"),
            ("[1,2,3,-0]", "[1,2,3,0]"),
            ("[1,2,3,4.0]", "[1,2,3,4]"),
            ("[1,2,3,9007199254740992]", "[1,2,3,9007199254740992]"),
            ("[[1,3],4,5,6]", "[[1,3],4,5,6]"),
            ("[1,2,3,\"4\"]", "[1,2,3,\"4\"]"),
            ("[1,2,3,{\"k\":1,\"k\":2}]", "[1,2,3,{\"k\":2}]"),
        ] {
            assert_eq!(encoded(&row(list)).as_deref(), Some(kept), "{list}");
        }
        // Not JSON, as the ordinary path reads it.
        for bad in ["[1,2,3", "[1,2,3,]", "[1,2,03]", "[1 2]"] {
            let line = row(bad);
            assert!(
                super::parse(&line, None, None, Shape::LeanPacked).is_none(),
                "{bad}"
            );
        }
        // Only at the top level of a lean packed tree; an escaped or repeated key alike.
        packed_agrees(r#"{"source\u0045ventSeqs":[1,2,3],"sourceEventSeqs":[4,5,6,8]}"#);
        for kept in [
            r#"{"data":{"sourceEventSeqs":[1,2,3]}}"#,
            r#"[{"sourceEventSeqs":[1,2,3]}]"#,
        ] {
            let (full, _) = super::parse(kept, None, None, Shape::Full).expect("parsed");
            let (lean, _) = super::parse(kept, None, None, Shape::LeanPacked).expect("parsed");
            assert!(lean == full, "{kept}");
        }
        for shape in [Shape::Full, Shape::Lean] {
            let line = row("[1,2,3]");
            let (tree, _) = super::parse(&line, None, None, shape).expect("parsed");
            assert_eq!(
                tree.get("sourceEventSeqs")
                    .map(Json::to_js_string)
                    .as_deref(),
                Some("[1,2,3]")
            );
        }
    }

    proptest! {
        #[test]
        fn a_lean_tree_is_the_full_tree_without_the_arrays_of_stream_records(
            a in json_text(),
            b in json_text(),
            c in json_text(),
        ) {
            lean_agrees(&format!(r#"{{"type":"x","data":{{"turn":1,"stream":[{{"type":"chunk","dt":{a},"texts":{b}}},{c}]}},"stream":{c}}}"#));
            lean_agrees(&format!(r#"{{"data":{{"stream":{a}}},"x":{b}}}"#));
        }

        #[test]
        fn a_lean_packed_row_is_the_full_row_without_its_member_arrays(
            a in json_text(),
            b in json_text(),
            c in json_text(),
            tag in prop::sample::select(vec!["text-chunks", "tool-call-chunks", "x"]),
        ) {
            packed_agrees(&format!(r#"{{"type":"{tag}","seq0":1,"data":{{"turn":1,"dt":{a},"texts":{b},"args":{c}}}}}"#));
            packed_agrees(&format!(r#"{{"type":"{tag}","data":{{"dt":[{a},{b}],"texts":[{c},{a}]}},"data":{b}}}"#));
            packed_agrees(&format!(r#"{{"data":{a},"type":"{tag}","data":{{"dt":{b},"args":[{c}]}}}}"#));
            packed_agrees(&format!(r#"{{"type":"{tag}","sourceEventSeqs":{a},"data":{b}}}"#));
        }

        #[test]
        fn a_lean_packed_tree_keeps_any_source_list_as_it_decodes(
            steps in prop::collection::vec(prop::sample::select(vec![1u64, 1, 1, 2, 5, 0]), 0..40),
            start in prop::sample::select(vec![0u64, 7, MAX_SAFE - 45]),
            tail in prop::sample::select(vec!["", ",-0", ",3", ",\"x\"", ",[1,2]", ",1.0"]),
        ) {
            let list = format!("[{}{tail}]", crate::log::test_support::stepped_seqs(start, &steps));
            packed_agrees(&format!(r#"{{"type":"user/message","seq":1,"sourceEventSeqs":{list}}}"#));
        }

        #[test]
        fn escape_windows_end_strings_where_one_escape_at_a_time_does(
            pieces in prop::collection::vec(
                prop::sample::select(vec![
                    "a", "bcdefgh", "日本", "\\\\", "\\\"", "\\n", "\\/", "\\u00e9",
                    "\\ud83d\\ude00", "\\ud800", "\\x", "\\", "\"", "\t", "\u{1}", " ",
                ]),
                0..160,
            ),
        ) {
            let body = format!("\\n{}\"", pieces.concat());
            let s = body.as_bytes();
            prop_assert_eq!(windowed_end(s, 0), scalar_end(s, 0), "{}", body);
        }

        #[test]
        fn a_string_digest_is_that_of_its_text_however_it_was_escaped(
            text in "[a-z\\\\\"/\u{0}-\u{1f}\u{7f}\u{e9}\u{2028}\u{1F600} ]{0,24}",
            other in "[a-z\\\\\"\n]{0,6}",
        ) {
            // serde_json writes the escaped form the digest is defined on.
            let canonical = serde_json::to_string(&text).unwrap_or_default();
            let expected = xxhash_rust::xxh3::xxh3_64(&canonical.as_bytes()[1..canonical.len() - 1]);
            let [all, slash] = other_escapings(&text);
            for line in [&canonical, &all, &slash] {
                let got = digests(line);
                prop_assert!(got.len() >= 2, "{line}: {got:?}");
                for d in got {
                    prop_assert_eq!(d, expected, "{}", line);
                }
            }
            if other != text {
                let other = serde_json::to_string(&other).unwrap_or_default();
                prop_assert!(digests(&other).iter().all(|&d| d != expected));
            }
        }

        #[test]
        fn fast_and_careful_paths_agree(text in json_text()) {
            agrees(&text);
            // A damaged copy: whatever the fast path accepts, serde accepts identically.
            if let Some(cut) = text.get(..text.len() / 2) {
                agrees(cut);
            }
        }
    }
}

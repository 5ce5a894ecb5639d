//! A list of a log's matches that keeps memory bounded: what passes a byte budget goes to an
//! unnamed temporary file (deleted when the list is dropped), read back in order. A log's
//! matches can be marked only once it is folded to its end, and its output printed only in
//! its turn; held whole, a log of a million matching lines held hundreds of megabytes.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::ops::Range;

use super::{Hit, Mark, PartKind, Role};
use crate::log::finding::Pos;

/// Bytes of matches held in memory per log before the rest goes to disk.
pub const BUDGET: usize = 4 << 20;

/// The matches of one log, in the order they were pushed.
pub struct Spill {
    mem: Vec<Hit>,
    bytes: usize,
    budget: usize,
    file: Option<BufWriter<File>>,
    /// Records in the file.
    spilled: u64,
    /// The first failure to write the file (reported when the list is read).
    failed: Option<io::Error>,
}

impl Default for Spill {
    fn default() -> Self {
        Spill::with_budget(BUDGET)
    }
}

impl Spill {
    pub fn with_budget(budget: usize) -> Spill {
        Spill {
            mem: Vec::new(),
            bytes: 0,
            budget,
            file: None,
            spilled: 0,
            failed: None,
        }
    }

    pub fn push(&mut self, hit: Hit) {
        self.bytes += size_of_hit(&hit);
        self.mem.push(hit);
        if self.bytes > self.budget {
            self.write_out();
        }
    }

    pub fn is_empty(&self) -> bool {
        self.mem.is_empty() && self.spilled == 0
    }

    fn write_out(&mut self) {
        if self.failed.is_some() {
            return;
        }
        let result = (|| -> io::Result<()> {
            if self.file.is_none() {
                self.file = Some(BufWriter::with_capacity(128 * 1024, tempfile::tempfile()?));
            }
            let Some(file) = self.file.as_mut() else {
                return Ok(());
            };
            let mut buf = Vec::new();
            for h in &self.mem {
                buf.clear();
                encode(h, &mut buf);
                let len = u32::try_from(buf.len()).map_err(io::Error::other)?;
                file.write_all(&len.to_le_bytes())?;
                file.write_all(&buf)?;
            }
            Ok(())
        })();
        match result {
            Ok(()) => {
                self.spilled += self.mem.len() as u64;
                self.mem.clear();
                self.bytes = 0;
            }
            Err(e) => self.failed = Some(e),
        }
    }

    /// Each match in order (those on disk first, read back one at a time); repeatable (what
    /// `f` changes in a match is not kept, or not reliably).
    pub fn for_each(&mut self, mut f: impl FnMut(&mut Hit) -> io::Result<()>) -> io::Result<()> {
        if let Some(e) = self.failed.take() {
            return Err(io::Error::new(
                e.kind(),
                format!("cannot hold the matches in a temporary file: {e}"),
            ));
        }
        if let Some(file) = self.file.as_mut() {
            file.flush()?;
            let mut reader = BufReader::with_capacity(128 * 1024, file.get_ref().try_clone()?);
            reader.seek(SeekFrom::Start(0))?;
            let mut buf = Vec::new();
            for _ in 0..self.spilled {
                let mut len = [0u8; 4];
                reader.read_exact(&mut len)?;
                buf.resize(u32::from_le_bytes(len) as usize, 0);
                reader.read_exact(&mut buf)?;
                let mut hit = decode(&mut &buf[..])
                    .ok_or_else(|| io::Error::other("a spilled match does not decode"))?;
                f(&mut hit)?;
            }
            // Later writes go after what was read.
            file.get_mut().seek(SeekFrom::End(0))?;
        }
        self.mem.iter_mut().try_for_each(f)
    }
}

/// Roughly what a match holds in memory.
fn size_of_hit(h: &Hit) -> usize {
    std::mem::size_of::<Hit>()
        + h.text.len()
        + h.event_type.len()
        + h.tool.as_ref().map_or(0, String::len)
        + h.key.as_ref().map_or(0, String::len)
        + h.submatches.len() * std::mem::size_of::<Range<usize>>()
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

fn put_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => out.push(0),
        Some(s) => {
            out.push(1);
            put_str(out, s);
        }
    }
}

const ROLES: [Role; 5] = [
    Role::User,
    Role::Assistant,
    Role::System,
    Role::Tool,
    Role::Developer,
];
const KINDS: [PartKind; 8] = [
    PartKind::Text,
    PartKind::Reasoning,
    PartKind::ToolName,
    PartKind::Arguments,
    PartKind::Summary,
    PartKind::SystemPrompt,
    PartKind::Title,
    PartKind::Todo,
];
const MARKS: [Mark; 5] = [
    Mark::Visible,
    Mark::Shadowed,
    Mark::Rejected,
    Mark::LogOnly,
    Mark::CrashTail,
];

fn index_in<T: PartialEq>(list: &[T], v: &T) -> u8 {
    list.iter().position(|x| x == v).unwrap_or_default() as u8
}

fn encode(h: &Hit, out: &mut Vec<u8>) {
    let flags = u8::from(h.is_match)
        | u8::from(h.surface) << 1
        | u8::from(h.accepted) << 2
        | u8::from(h.speculative) << 3
        | u8::from(h.clipped.0) << 4
        | u8::from(h.clipped.1) << 5
        | u8::from(h.turn.is_some()) << 6;
    out.push(flags);
    put_u64(out, h.seq);
    put_u64(out, h.pos.line);
    put_u64(out, h.pos.byte);
    put_u64(out, h.time as u64);
    put_u64(out, h.turn.unwrap_or_default() as u64);
    put_str(out, &h.event_type);
    out.push(h.role.map_or(0, |r| 1 + index_in(&ROLES, &r)));
    out.push(index_in(&KINDS, &h.kind));
    put_opt_str(out, h.tool.as_deref());
    put_opt_str(out, h.key.as_deref());
    out.extend_from_slice(&h.text_line.to_le_bytes());
    put_str(out, &h.text);
    put_u64(out, h.submatches.len() as u64);
    for r in &h.submatches {
        put_u64(out, r.start as u64);
        put_u64(out, r.end as u64);
    }
    out.push(index_in(&MARKS, &h.mark));
    put_u64(out, h.event_index);
    out.extend_from_slice(&h.epoch.to_le_bytes());
}

fn take<'a>(r: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (head, rest) = r.split_at_checked(n)?;
    *r = rest;
    Some(head)
}

fn get_u8(r: &mut &[u8]) -> Option<u8> {
    take(r, 1).map(|b| b[0])
}

fn get_u32(r: &mut &[u8]) -> Option<u32> {
    take(r, 4).map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default()))
}

fn get_u64(r: &mut &[u8]) -> Option<u64> {
    take(r, 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
}

fn get_str(r: &mut &[u8]) -> Option<String> {
    let len = usize::try_from(get_u64(r)?).ok()?;
    String::from_utf8(take(r, len)?.to_vec()).ok()
}

fn get_opt_str(r: &mut &[u8]) -> Option<Option<String>> {
    match get_u8(r)? {
        0 => Some(None),
        _ => get_str(r).map(Some),
    }
}

fn decode(r: &mut &[u8]) -> Option<Hit> {
    let flags = get_u8(r)?;
    let bit = |n: u8| flags & (1 << n) != 0;
    let seq = get_u64(r)?;
    let pos = Pos {
        line: get_u64(r)?,
        byte: get_u64(r)?,
    };
    let time = get_u64(r)? as i64;
    let turn = get_u64(r)? as i64;
    let event_type = get_str(r)?;
    let role = match get_u8(r)? {
        0 => None,
        n => Some(*ROLES.get(usize::from(n) - 1)?),
    };
    let kind = *KINDS.get(usize::from(get_u8(r)?))?;
    let tool = get_opt_str(r)?;
    let key = get_opt_str(r)?;
    let text_line = get_u32(r)?;
    let text = get_str(r)?;
    let n = usize::try_from(get_u64(r)?).ok()?;
    let mut submatches = Vec::with_capacity(n.min(r.len() / 16));
    for _ in 0..n {
        let start = usize::try_from(get_u64(r)?).ok()?;
        let end = usize::try_from(get_u64(r)?).ok()?;
        submatches.push(start..end);
    }
    let mark = *MARKS.get(usize::from(get_u8(r)?))?;
    let event_index = get_u64(r)?;
    let epoch = get_u32(r)?;
    Some(Hit {
        is_match: bit(0),
        seq,
        pos,
        time,
        turn: bit(6).then_some(turn),
        event_type,
        role,
        kind,
        tool,
        key,
        text_line,
        text,
        submatches,
        clipped: (bit(4), bit(5)),
        mark,
        event_index,
        surface: bit(1),
        accepted: bit(2),
        speculative: bit(3),
        epoch,
    })
}

#[cfg(test)]
#[allow(clippy::manual_is_multiple_of)]
mod tests {
    use super::*;

    fn hit(i: u64) -> Hit {
        Hit {
            is_match: i % 2 == 0,
            seq: i,
            pos: Pos {
                line: i + 1,
                byte: i * 7,
            },
            time: -(i as i64),
            turn: (i % 3 != 0).then_some(i as i64),
            event_type: format!("type/{i}"),
            role: (i % 4 != 0).then_some(ROLES[(i % 5) as usize]),
            kind: KINDS[(i % 8) as usize],
            tool: (i % 2 == 1).then(|| "bash".to_owned()),
            key: (i % 3 == 1).then(|| "edits[0].old".to_owned()),
            text_line: i as u32,
            text: "é".repeat(i as usize % 50),
            submatches: (0..i % 4).map(|k| k as usize..k as usize + 2).collect(),
            clipped: (i % 2 == 0, i % 3 == 0),
            mark: MARKS[(i % 5) as usize],
            event_index: i / 2,
            surface: i % 2 == 1,
            accepted: i % 3 != 1,
            speculative: i % 7 == 0,
            epoch: (i % 11) as u32,
        }
    }

    #[test]
    fn matches_past_the_budget_come_back_from_disk_in_order_and_whole() {
        let mut s = Spill::with_budget(2000);
        for i in 0..500 {
            s.push(hit(i));
        }
        assert!(s.spilled > 0 && !s.mem.is_empty());
        for _ in 0..2 {
            let mut got = Vec::new();
            s.for_each(|h| {
                got.push(h.clone());
                Ok(())
            })
            .unwrap();
            assert_eq!(got.len(), 500);
            for (i, h) in got.iter().enumerate() {
                assert_eq!(format!("{h:?}"), format!("{:?}", hit(i as u64)));
            }
        }
        // Pushing after a read appends.
        s.push(hit(500));
        let mut n = 0;
        s.for_each(|_| {
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 501);
    }
}

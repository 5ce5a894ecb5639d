//! Storing a JSONL session log into a SQLite session store the way DSH's schema-17 store
//! does (SQLITE.md S3–S5): the header as a `sessions` row, events appended in batches, each
//! batch one transaction with one revision bump, runs of chunk deltas packed into rows of
//! 3–1,024 members within a batch (at most 1 MiB of `data`), `data` of 4,096 bytes or more
//! zstd-compressed (level 3) when that is smaller, `source_event_seqs` as the varint/ZigZag
//! BLOB. Schema 15 stores one row per event with JSON text columns.
//!
//! Written from the specification alone, not from dshs's reader, so the tests that store
//! with it and read back with dshs check one against the other. Used by `tests/sqlite_*.rs`
//! and by the `sqlite-store` benchmark tool.
#![allow(dead_code)]

use rusqlite::{Connection, params};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

pub const STORE_APP_ID: i64 = 0x4453_4850;

/// Create a new store at `path` with the schema of `version` (17 or 15), in WAL mode.
pub fn create(path: &std::path::Path, version: i64) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    let ddl = if version == 17 {
        dshs::log::sqlite::identity::SCHEMA_17
    } else {
        dshs::log::sqlite::identity::SCHEMA_15
    };
    conn.execute_batch(ddl)?;
    conn.execute(
        "INSERT INTO persistence_state (singleton, store_id) VALUES (1, ?1)",
        ["0b6a3e62-3c1f-4d5e-9a7b-2f1e4c5d6a7b"],
    )?;
    conn.pragma_update(None, "application_id", STORE_APP_ID)?;
    conn.pragma_update(None, "user_version", version)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    Ok(conn)
}

/// One logical event, split into the columns a store keeps.
#[derive(Debug, Clone)]
pub struct Event {
    pub ty: String,
    pub seq: u64,
    pub time: i64,
    /// `JSON.stringify(data)` (the JSONL line's own text: its writers are JavaScript's).
    pub data: String,
    pub sources: Option<Vec<u64>>,
    pub surface_op: Option<String>,
    pub ignorable: bool,
    /// A chunk delta that may be packed: (kind, turn, step, index, id, name, text).
    pub delta: Option<Delta>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Delta {
    pub tag: &'static str,
    pub turn: String,
    pub step: String,
    pub index: String,
    pub id: Option<String>,
    pub name: Option<String>,
    /// The member string as JSON text (quoted).
    pub text: String,
}

impl Delta {
    fn same_run(&self, o: &Delta) -> bool {
        self.tag == o.tag
            && self.turn == o.turn
            && self.step == o.step
            && self.index == o.index
            && self.id == o.id
            && self.name == o.name
    }
}

impl Event {
    /// The event as one line of the logical log (SQLITE.md S4.4 key order).
    pub fn line(&self) -> String {
        let mut s = format!(
            "{{\"type\":{},\"seq\":{},\"time\":{},\"data\":{}",
            serde_json::to_string(&self.ty).unwrap_or_default(),
            self.seq,
            self.time,
            self.data
        );
        if let Some(src) = &self.sources {
            let list: Vec<String> = src.iter().map(u64::to_string).collect();
            s.push_str(&format!(",\"sourceEventSeqs\":[{}]", list.join(",")));
        }
        if let Some(op) = &self.surface_op {
            s.push_str(&format!(",\"surfaceOp\":{op}"));
        }
        if self.ignorable {
            s.push_str(",\"ignorable\":true");
        }
        s.push('}');
        s
    }
}

#[derive(Deserialize)]
struct Row<'a> {
    #[serde(rename = "type")]
    ty: String,
    seq: Option<u64>,
    seq0: Option<u64>,
    time: Option<i64>,
    time0: Option<i64>,
    #[serde(borrow)]
    data: &'a RawValue,
    #[serde(rename = "sourceEventSeqs")]
    sources: Option<Vec<Value>>,
    #[serde(rename = "surfaceOp", borrow)]
    surface_op: Option<&'a RawValue>,
    ignorable: Option<bool>,
}

fn text(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// The logical events of one JSONL event line: a JSONL packed row expanded (FORMAT.md
/// §5.2), range-encoded `sourceEventSeqs` expanded (§5.3).
pub fn events_of_line(line: &str) -> Vec<Event> {
    let row: Row<'_> = serde_json::from_str(line).expect("a generated event line");
    if let Some(seq0) = row.seq0 {
        let data: Value = serde_json::from_str(row.data.get()).expect("packed data");
        let tag: &'static str = match row.ty.as_str() {
            "text-chunks" => "text-delta",
            "reasoning-chunks" => "reasoning-delta",
            _ => "tool-call-delta",
        };
        let members = data
            .get("texts")
            .or_else(|| data.get("args"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let dt = data["dt"].as_array().cloned().unwrap_or_default();
        let mut t = row.time0.unwrap_or(0);
        let mut out = Vec::new();
        for (k, m) in members.iter().enumerate() {
            if k > 0 {
                t += dt[k - 1].as_i64().unwrap_or(0);
            }
            let mut chunk = format!("{{\"type\":\"{tag}\",\"index\":{}", text(&data["index"]));
            if let Some(id) = data.get("id") {
                chunk.push_str(&format!(",\"id\":{}", text(id)));
            }
            if let Some(name) = data.get("name") {
                chunk.push_str(&format!(",\"name\":{}", text(name)));
            }
            let key = if tag == "tool-call-delta" {
                "argumentsDelta"
            } else {
                "text"
            };
            chunk.push_str(&format!(",\"{key}\":{}}}", text(m)));
            let d = format!(
                "{{\"turn\":{},\"step\":{},\"chunk\":{chunk}}}",
                text(&data["turn"]),
                text(&data["step"])
            );
            let ev = Event {
                ty: "assistant/chunk".into(),
                seq: seq0 + k as u64,
                time: t,
                data: d,
                sources: None,
                surface_op: None,
                ignorable: false,
                delta: None,
            };
            out.push(with_delta(ev, true));
        }
        return out;
    }
    let sources = row.sources.map(|list| {
        let mut seqs = Vec::new();
        for v in list {
            match v {
                Value::Array(pair) => {
                    let (a, b) = (pair[0].as_u64().unwrap_or(0), pair[1].as_u64().unwrap_or(0));
                    seqs.extend(a..=b);
                }
                other => seqs.push(other.as_u64().unwrap_or(0)),
            }
        }
        seqs
    });
    let plain = sources.is_none() && row.surface_op.is_none() && row.ignorable.is_none();
    let ev = Event {
        ty: row.ty,
        seq: row.seq.unwrap_or(0),
        time: row.time.unwrap_or(0),
        data: row.data.get().to_owned(),
        sources,
        surface_op: row.surface_op.map(|r| r.get().to_owned()),
        ignorable: row.ignorable == Some(true),
        delta: None,
    };
    vec![with_delta(ev, plain)]
}

/// Whether `ev` is a chunk delta eligible for packing (S5 writer): envelope exactly
/// type/seq/time/data, data exactly turn/step/chunk, the chunk exactly the keys of its kind.
fn with_delta(mut ev: Event, plain_envelope: bool) -> Event {
    if ev.ty != "assistant/chunk" || !plain_envelope {
        return ev;
    }
    let Ok(Value::Object(d)) = serde_json::from_str::<Value>(&ev.data) else {
        return ev;
    };
    let Some(Value::Object(c)) = d.get("chunk") else {
        return ev;
    };
    if d.len() != 3 || !d.contains_key("turn") || !d.contains_key("step") {
        return ev;
    }
    let kind = c.get("type").and_then(Value::as_str).unwrap_or("");
    let tag = match kind {
        "text-delta" => "text-chunks",
        "reasoning-delta" => "reasoning-chunks",
        "tool-call-delta" => "tool-call-chunks",
        _ => return ev,
    };
    let (keys, member): (&[&str], &str) = if tag == "tool-call-chunks" {
        (&["type", "index", "id", "argumentsDelta"], "argumentsDelta")
    } else {
        (&["type", "index", "text"], "text")
    };
    let extra = usize::from(tag == "tool-call-chunks" && c.contains_key("name"));
    if c.len() != keys.len() + extra || !keys.iter().all(|k| c.contains_key(*k)) {
        return ev;
    }
    let Some(m) = c.get(member).filter(|m| m.is_string()) else {
        return ev;
    };
    if tag == "tool-call-chunks"
        && (!c["id"].is_string() || c.get("name").is_some_and(|n| !n.is_string()))
    {
        return ev;
    }
    if !d["turn"].is_number() || !d["step"].is_number() || !c["index"].is_number() {
        return ev;
    }
    ev.delta = Some(Delta {
        tag,
        turn: text(&d["turn"]),
        step: text(&d["step"]),
        index: text(&c["index"]),
        id: c.get("id").map(text),
        name: c.get("name").map(text),
        text: text(m),
    });
    ev
}

/// The header line's fields as a `sessions` row.
pub fn insert_session(conn: &Connection, header: &str) -> rusqlite::Result<String> {
    let h: Value = serde_json::from_str(header).expect("header JSON");
    let id = h["id"].as_str().unwrap_or("").to_owned();
    conn.execute(
        "INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length, origin, \
         delegation_depth, agent_preset, incarnation, revision) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 0)",
        params![
            id,
            h["version"].as_i64(),
            h["createdAt"].as_i64(),
            h.get("cwd").and_then(Value::as_str),
            h.get("parentSession").and_then(Value::as_str),
            h.get("seedLength").and_then(Value::as_i64),
            h.get("origin").and_then(Value::as_str),
            h.get("delegationDepth").and_then(Value::as_i64),
            h.get("agentPreset").and_then(Value::as_str),
            "5c1d7f0e-8a2b-4c3d-9e4f-1a2b3c4d5e6f",
        ],
    )?;
    Ok(id)
}

/// Upstream's `data` policy: TEXT below 4,096 bytes, else a level-3 zstd frame when shorter.
pub fn data_value(text: &str, compress: bool) -> rusqlite::types::Value {
    if compress && text.len() >= 4096 {
        let frame = zstd::bulk::compress(text.as_bytes(), 3).expect("zstd");
        if frame.len() < text.len() {
            return rusqlite::types::Value::Blob(frame);
        }
    }
    rusqlite::types::Value::Text(text.to_owned())
}

/// The S4.2 BLOB: first seq, then ZigZag deltas, LEB128 each.
pub fn varints(seqs: &[u64]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut prev = 0i64;
    for (i, &s) in seqs.iter().enumerate() {
        let mut v = if i == 0 {
            s
        } else {
            let d = s as i64 - prev;
            ((d << 1) ^ (d >> 63)) as u64
        };
        prev = s as i64;
        while v >= 0x80 {
            out.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    out
}

/// How a store is written.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// 17 or 15.
    pub schema: i64,
    /// Compress large `data` (schema 17).
    pub compress: bool,
    /// Pack chunk runs (schema 17).
    pub pack: bool,
}

/// Insert one append batch as DSH does: one transaction, packed runs, one revision bump.
pub fn append_batch(
    conn: &mut Connection,
    id: &str,
    batch: &[Event],
    policy: Policy,
) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare(
            "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        let mut i = 0;
        while i < batch.len() {
            let run = if policy.schema == 17 && policy.pack {
                run_len(batch, i)
            } else {
                0
            };
            if run >= 3 {
                let (n, data) = packed_row(&batch[i..i + run]);
                if n >= 3 {
                    let first = &batch[i];
                    let tag = first.delta.as_ref().map_or("", |d| d.tag);
                    insert.execute(params![
                        id,
                        first.seq as i64,
                        tag,
                        first.time,
                        data_value(&data, policy.compress),
                        Option::<Vec<u8>>::None,
                        Option::<String>::None,
                        0i64
                    ])?;
                    i += n;
                    continue;
                }
            }
            let e = &batch[i];
            let (data, sources) = if policy.schema == 17 {
                (
                    data_value(&e.data, policy.compress),
                    e.sources
                        .as_ref()
                        .map(|s| rusqlite::types::Value::Blob(varints(s))),
                )
            } else {
                (
                    rusqlite::types::Value::Text(e.data.clone()),
                    e.sources.as_ref().map(|s| {
                        rusqlite::types::Value::Text(serde_json::to_string(s).unwrap_or_default())
                    }),
                )
            };
            insert.execute(params![
                id,
                e.seq as i64,
                e.ty,
                e.time,
                data,
                sources,
                e.surface_op,
                e.ignorable.then_some(1i64)
            ])?;
            i += 1;
        }
    }
    tx.execute(
        "UPDATE sessions SET revision = revision + 1 WHERE id = ?1",
        [id],
    )?;
    tx.commit()
}

/// The length of the maximal packable run starting at `i` (0 when `i` is not packable).
fn run_len(batch: &[Event], i: usize) -> usize {
    let Some(first) = &batch[i].delta else {
        return 0;
    };
    let mut n = 1;
    while i + n < batch.len() {
        let e = &batch[i + n];
        match &e.delta {
            Some(d) if d.same_run(first) && e.seq == batch[i + n - 1].seq + 1 => n += 1,
            _ => break,
        }
    }
    n
}

fn run_data(run: &[Event]) -> String {
    let d = run[0].delta.as_ref().expect("a delta");
    let dt: Vec<String> = run
        .windows(2)
        .map(|w| (w[1].time - w[0].time).to_string())
        .collect();
    let members: Vec<&str> = run
        .iter()
        .map(|e| e.delta.as_ref().map_or("", |d| d.text.as_str()))
        .collect();
    if d.tag == "tool-call-chunks" {
        format!(
            "{{\"turn\":{},\"step\":{},\"index\":{},\"id\":{}{},\"dt\":[{}],\"args\":[{}]}}",
            d.turn,
            d.step,
            d.index,
            d.id.as_deref().unwrap_or("\"\""),
            d.name
                .as_ref()
                .map_or(String::new(), |n| format!(",\"name\":{n}")),
            dt.join(","),
            members.join(",")
        )
    } else {
        format!(
            "{{\"turn\":{},\"step\":{},\"index\":{},\"dt\":[{}],\"texts\":[{}]}}",
            d.turn,
            d.step,
            d.index,
            dt.join(","),
            members.join(",")
        )
    }
}

/// The first packed row of `run` (S5 `emitBoundedRun`): up to 1,024 members, fewer while
/// the data exceeds 1 MiB (the largest count ≥ 3 that fits); `(0, _)` if not even 3 fit.
fn packed_row(run: &[Event]) -> (usize, String) {
    let mut n = run.len().min(1024);
    let data = run_data(&run[..n]);
    if data.len() <= 1 << 20 {
        return (n, data);
    }
    let (mut lo, mut hi) = (3usize, n);
    if run_data(&run[..3]).len() > 1 << 20 {
        return (0, String::new());
    }
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if run_data(&run[..mid]).len() <= 1 << 20 {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    n = lo;
    (n, run_data(&run[..n]))
}

/// Store a JSONL log read line by line (for logs too large to hold): the number of logical
/// events stored.
pub fn store_lines<I: Iterator<Item = String>>(
    conn: &mut Connection,
    mut lines: I,
    policy: Policy,
    batch: usize,
) -> rusqlite::Result<(String, u64)> {
    let header = lines.next().expect("a header");
    let id = insert_session(conn, &header)?;
    let mut pending: Vec<Event> = Vec::new();
    let mut events = 0;
    for line in lines {
        for e in events_of_line(&line) {
            pending.push(e);
            events += 1;
            if pending.len() >= batch {
                append_batch(conn, &id, &pending, policy)?;
                pending.clear();
            }
        }
    }
    if !pending.is_empty() {
        append_batch(conn, &id, &pending, policy)?;
    }
    Ok((id, events))
}

/// Store the whole JSONL log `text` as a new session, in batches whose sizes `batch` picks;
/// the logical log a reader must return (header line, then one line per event).
pub fn store_log(
    conn: &mut Connection,
    text: &str,
    policy: Policy,
    mut batch: impl FnMut() -> usize,
) -> rusqlite::Result<(String, String)> {
    let mut lines = text.lines();
    let header = lines.next().expect("a header");
    let id = insert_session(conn, header)?;
    let mut logical = String::new();
    let mut pending: Vec<Event> = Vec::new();
    let mut want = batch().max(1);
    for line in lines {
        for e in events_of_line(line) {
            logical.push_str(&e.line());
            logical.push('\n');
            pending.push(e);
            if pending.len() >= want {
                append_batch(conn, &id, &pending, policy)?;
                pending.clear();
                want = batch().max(1);
            }
        }
    }
    if !pending.is_empty() {
        append_batch(conn, &id, &pending, policy)?;
    }
    Ok((id, logical))
}

//! The `sessions` row: its rules (SQLITE.md S3) and the JSONL header line it stands for
//! (`toHeaderLine`'s key order; a NULL `delegation_depth` written as 0).

use std::io::Write;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension};

use super::Schema;
use super::decode::{storage_class, write_plain_str};
use super::identity::is_uuid;
use crate::log::header::is_absolute;
use crate::log::json::MAX_SAFE;

/// A `sessions` row as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub id: String,
    pub version: Option<i64>,
    pub created_at: Option<i64>,
    pub cwd: Option<String>,
    pub parent_session: Option<String>,
    pub seed_length: Option<i64>,
    pub origin: Option<String>,
    pub delegation_depth: Option<i64>,
    pub agent_preset: Option<String>,
    pub incarnation: Option<String>,
    pub revision: Option<i64>,
    /// Columns whose storage class is not the declared one (impossible under the canonical
    /// STRICT tables, kept so a broken value is named rather than misread).
    wrong_class: Vec<String>,
}

pub const COLUMNS: &str = "id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, agent_preset, incarnation, revision";

impl SessionRow {
    pub fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRow> {
        let mut wrong_class = Vec::new();
        let mut text = |i: usize, name: &str| -> rusqlite::Result<Option<String>> {
            Ok(match r.get_ref(i)? {
                ValueRef::Null => None,
                ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
                other => {
                    wrong_class.push(format!("{name} is {}", storage_class(other)));
                    None
                }
            })
        };
        let id = text(0, "id")?.unwrap_or_default();
        let cwd = text(3, "cwd")?;
        let parent_session = text(4, "parent_session")?;
        let origin = text(6, "origin")?;
        let agent_preset = text(8, "agent_preset")?;
        let incarnation = text(9, "incarnation")?;
        let mut int = |i: usize, name: &str| -> rusqlite::Result<Option<i64>> {
            Ok(match r.get_ref(i)? {
                ValueRef::Null => None,
                ValueRef::Integer(v) => Some(v),
                other => {
                    wrong_class.push(format!("{name} is {}", storage_class(other)));
                    None
                }
            })
        };
        Ok(SessionRow {
            version: int(1, "version")?,
            created_at: int(2, "created_at")?,
            seed_length: int(5, "seed_length")?,
            delegation_depth: int(7, "delegation_depth")?,
            revision: int(10, "revision")?,
            id,
            cwd,
            parent_session,
            origin,
            agent_preset,
            incarnation,
            wrong_class,
        })
    }

    /// The row of session `id`, if it exists.
    pub fn read(conn: &Connection, id: &str) -> rusqlite::Result<Option<SessionRow>> {
        conn.query_row(
            &format!("SELECT {COLUMNS} FROM sessions WHERE id = ?1"),
            [id],
            SessionRow::from_row,
        )
        .optional()
    }

    /// What breaks S3's rules (schema 15's open code checked `created_at` only).
    pub fn problems(&self, schema: Schema) -> Vec<String> {
        let mut p = self.wrong_class.clone();
        let safe = |v: i64| v.unsigned_abs() <= MAX_SAFE;
        let count = |v: Option<i64>, name: &str, required: bool, p: &mut Vec<String>| match v {
            None if required => p.push(format!("{name} is NULL")),
            Some(v) if !safe(v) || v < 0 => {
                p.push(format!("{name} is {v}, not a safe integer ≥ 0"));
            }
            _ => {}
        };
        count(self.created_at, "created_at", true, &mut p);
        if schema == Schema::V15 {
            return p;
        }
        if self.id.is_empty() {
            p.push("id is empty".into());
        }
        match self.version {
            None => p.push("version is NULL".into()),
            Some(v) if !safe(v) => p.push(format!("version is {v}, not a safe integer")),
            Some(_) => {}
        }
        if let Some(cwd) = &self.cwd
            && !is_absolute(cwd)
        {
            p.push(format!("cwd {cwd:?} is not an absolute path"));
        }
        count(self.seed_length, "seed_length", false, &mut p);
        if let Some(o) = &self.origin
            && o != "subagent"
        {
            p.push(format!("origin is {o:?}; only \"subagent\" is allowed"));
        }
        count(self.delegation_depth, "delegation_depth", false, &mut p);
        match &self.incarnation {
            Some(i) if is_uuid(i) => {}
            Some(i) => p.push(format!("incarnation {i:?} is not a UUID")),
            None => p.push("incarnation is NULL".into()),
        }
        count(self.revision, "revision", true, &mut p);
        p
    }

    /// The JSONL header line (no newline). `is_seeded`: the value derived for a format
    /// version ≥ 2, whose header requires the field (S11.5).
    pub fn header_line(&self, is_seeded: Option<bool>) -> Vec<u8> {
        let mut out = Vec::with_capacity(160);
        out.extend_from_slice(b"{\"type\":\"session\",\"version\":");
        let _ = write!(out, "{}", self.version.unwrap_or(0));
        out.extend_from_slice(b",\"id\":");
        write_plain_str(&self.id, &mut out);
        let _ = write!(out, ",\"createdAt\":{}", self.created_at.unwrap_or(0));
        let text = |out: &mut Vec<u8>, key: &str, v: &Option<String>| {
            if let Some(v) = v {
                let _ = write!(out, ",\"{key}\":");
                write_plain_str(v, out);
            }
        };
        text(&mut out, "cwd", &self.cwd);
        text(&mut out, "parentSession", &self.parent_session);
        if let Some(n) = self.seed_length {
            let _ = write!(out, ",\"seedLength\":{n}");
        }
        text(&mut out, "origin", &self.origin);
        if let Some(s) = is_seeded {
            let _ = write!(out, ",\"isSeeded\":{s}");
        }
        let _ = write!(
            out,
            ",\"delegationDepth\":{}",
            self.delegation_depth.unwrap_or(0)
        );
        text(&mut out, "agentPreset", &self.agent_preset);
        out.push(b'}');
        out
    }
}

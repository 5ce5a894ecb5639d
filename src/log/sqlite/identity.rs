//! Is this database a DSH session store dshs can read? (SQLITE.md S1, S2.) The checks run on
//! an open connection inside a transaction, the same way for a read and, again, under the
//! write lock of a repair.

use rusqlite::Connection;

use super::{Schema, StoreError};
use crate::log::codes::Code;

/// `PRAGMA application_id` of a session store: ASCII "DSHP".
pub const STORE_APPLICATION_ID: i64 = 0x4453_4850;

/// `PRAGMA application_id` of DSH's session search index: ASCII "DSHQ".
pub const INDEX_APPLICATION_ID: i64 = 0x4453_4851;

/// Schema 17's `resources/sql/schema.sql`, as upstream's store creates it.
pub const SCHEMA_17: &str = "CREATE TABLE persistence_state (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  store_id  TEXT NOT NULL
) STRICT;
CREATE TABLE sessions (
  id               TEXT PRIMARY KEY,
  version          INTEGER NOT NULL,
  created_at       INTEGER NOT NULL,
  cwd              TEXT,
  parent_session   TEXT,
  seed_length      INTEGER,
  origin           TEXT,
  delegation_depth INTEGER,
  agent_preset     TEXT,
  incarnation      TEXT NOT NULL,
  revision         INTEGER NOT NULL
) STRICT;
CREATE TABLE events (
  session_id        TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq               INTEGER NOT NULL,
  type              TEXT NOT NULL,
  time              INTEGER NOT NULL,
  data              ANY NOT NULL,
  source_event_seqs ANY,
  surface_op        TEXT,
  ignorable         INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)),
  PRIMARY KEY (session_id, seq)
) STRICT;
";

/// The three tables of schema 15, as its open code (and the Rust port) created them.
pub const SCHEMA_15: &str = "
      CREATE TABLE IF NOT EXISTS persistence_state (
        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
        store_id  TEXT NOT NULL
      ) STRICT;

      CREATE TABLE IF NOT EXISTS sessions (
        id               TEXT PRIMARY KEY,
        version          INTEGER NOT NULL,
        created_at       INTEGER NOT NULL,
        cwd              TEXT,
        parent_session   TEXT,
        seed_length      INTEGER,
        origin           TEXT,
        delegation_depth INTEGER,
        agent_preset    TEXT,
        incarnation      TEXT NOT NULL,
        revision         INTEGER NOT NULL
      ) STRICT;

      CREATE TABLE IF NOT EXISTS events (
        session_id        TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq               INTEGER NOT NULL,
        type              TEXT NOT NULL,
        time              INTEGER NOT NULL,
        data              TEXT NOT NULL,
        source_event_seqs TEXT,
        surface_op        TEXT,
        ignorable         INTEGER,
        PRIMARY KEY (session_id, seq)
      ) STRICT
";

/// What the identity checks found in a database that can be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// No version, application id or object: DSH would initialise it (S2).
    Empty,
    Store {
        schema: Schema,
        store_id: String,
    },
}

/// One row of `sqlite_schema` as compared (S2 step 4).
type SchemaRow = (String, String, String, String);

fn schema_rows(conn: &Connection) -> rusqlite::Result<Vec<SchemaRow>> {
    let mut stmt = conn.prepare(
        "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema \
         WHERE name NOT GLOB 'sqlite_*' ORDER BY type, name",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            normalize(&r.get::<_, String>(3)?),
        ))
    })?;
    rows.collect()
}

/// Whitespace runs collapsed to one space (JavaScript's `\s+`), ends trimmed.
pub fn normalize(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut space = false;
    for c in sql.chars() {
        if c.is_whitespace() || c == '\u{feff}' {
            space = true;
        } else {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.push(c);
        }
    }
    out
}

/// The canonical objects of a layout, from a scratch in-memory database built from its DDL.
fn canonical_rows(ddl: &str) -> rusqlite::Result<Vec<SchemaRow>> {
    let scratch = Connection::open_in_memory()?;
    scratch.execute_batch(ddl)?;
    schema_rows(&scratch)
}

/// What the S1 history says about a layout version dshs does not read.
fn history(version: i64) -> String {
    let what = match version {
        1..=9 => {
            "a development layout of mid-2026, before the application id was stamped (10); its version does not even identify one layout (3 and 5 each had two)"
        }
        10..=14 => {
            "an older one-row-per-event layout of upstream DSH (10: application id; 11–12: policy columns; 13: origin; 14: agent_preset)"
        }
        16 => {
            "never released: the number of a temporary sibling package; upstream's tests use it as \"an older schema\""
        }
        18 => "not a layout any known build writes (upstream went from 17 to none later than rc.8)",
        19 => {
            "the layout of the cyg720/deepseek-harness fork (integer session ids with session_key, is_packed instead of ignorable)"
        }
        20 => {
            "the layout of the gmnstr/deepseek-harness fork (the cyg720 layout 19 plus sessions.ownership_epoch)"
        }
        v if v < 0 => "not a version any DSH build writes",
        _ => "newer than any layout dshs knows",
    };
    format!(
        "schema version {version} ({what}); dshs reads 17 (current upstream, dsh-v0.1.0-rc.8) and 15 (the last one-row-per-event layout)"
    )
}

fn refused(code: Code, message: String) -> StoreError {
    StoreError::Refused { code, message }
}

fn has_table(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1",
        [name],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

/// Run the checks of S2 (as the table of "How dshs decides" orders them). `shown` names the
/// database in messages.
pub fn check(conn: &Connection, shown: &str) -> Result<Identity, StoreError> {
    let sql = |e| StoreError::sqlite(shown, e);
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(sql)?;
    let app: i64 = conn
        .pragma_query_value(None, "application_id", |r| r.get(0))
        .map_err(sql)?;
    let objects: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name NOT GLOB 'sqlite_*'",
            [],
            |r| r.get(0),
        )
        .map_err(sql)?;
    if version == 0 && app == 0 && objects == 0 {
        return Ok(Identity::Empty);
    }
    if app == INDEX_APPLICATION_ID {
        return Err(refused(
            Code::SqliteNotSessionStore,
            format!(
                "{shown} is a DSH session search index (application id 0x44534851 \"DSHQ\", user_version {version}), not a session store: the index is rebuilt from the store and holds no session of its own"
            ),
        ));
    }
    if version == 0 {
        return Err(refused(
            Code::SqliteNotSessionStore,
            format!(
                "{shown} is not a DSH session store: it has no schema version (user_version 0) but {objects} schema object{} and application id {app} (DSH refuses such a database: \"unversioned schema or application identity\"; the generic key/value storage backend looks like this)",
                if objects == 1 { "" } else { "s" }
            ),
        ));
    }
    let looks_like_store =
        has_table(conn, "sessions").map_err(sql)? && has_table(conn, "events").map_err(sql)?;
    if app == 0 && (1..=9).contains(&version) && looks_like_store {
        return Err(refused(
            Code::SqliteSchemaUnsupported,
            format!("{shown} is a DSH session store of {}", history(version)),
        ));
    }
    if app != STORE_APPLICATION_ID {
        return Err(refused(
            Code::SqliteNotSessionStore,
            format!(
                "{shown} is not a DSH session store: it has application id {app} (0x{app:08x}), expected 1146308688 (0x44534850 \"DSHP\")"
            ),
        ));
    }
    let schema = match version {
        17 => Schema::V17,
        15 => Schema::V15,
        v => {
            return Err(refused(
                Code::SqliteSchemaUnsupported,
                format!("{shown} has {}", history(v)),
            ));
        }
    };
    let found = schema_rows(conn).map_err(sql)?;
    match schema {
        Schema::V17 => {
            let want = canonical_rows(SCHEMA_17).map_err(sql)?;
            if found != want {
                return Err(refused(
                    Code::SqliteSchemaMismatch,
                    format!(
                        "{shown} has schema version 17 but its schema objects differ from upstream's schema.sql: {}",
                        differences(&found, &want)
                    ),
                ));
            }
        }
        Schema::V15 => {
            let want = canonical_rows(SCHEMA_15).map_err(sql)?;
            let tables: Vec<SchemaRow> = found
                .iter()
                .filter(|r| want.iter().any(|w| w.0 == r.0 && w.1 == r.1))
                .cloned()
                .collect();
            if tables != want {
                return Err(refused(
                    Code::SqliteSchemaMismatch,
                    format!(
                        "{shown} has schema version 15 but its tables differ from the schema-15 DDL: {}",
                        differences(&tables, &want)
                    ),
                ));
            }
        }
    }
    let store_id: Option<rusqlite::types::Value> = conn
        .query_row(
            "SELECT store_id FROM persistence_state WHERE singleton = 1",
            [],
            |r| r.get(0),
        )
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })
        .map_err(sql)?;
    let store_id = match store_id {
        None => {
            return Err(refused(
                Code::SqliteStoreIdentityInvalid,
                format!("{shown} has no store identity (no persistence_state row)"),
            ));
        }
        Some(rusqlite::types::Value::Text(t)) => t,
        Some(_) => {
            return Err(refused(
                Code::SqliteStoreIdentityInvalid,
                format!("{shown} has no valid store identity (store_id is not text)"),
            ));
        }
    };
    if store_id.is_empty() {
        return Err(refused(
            Code::SqliteStoreIdentityInvalid,
            format!("{shown} has no valid store identity (store_id is empty)"),
        ));
    }
    if schema == Schema::V17 && !is_uuid(&store_id) {
        return Err(refused(
            Code::SqliteStoreIdentityInvalid,
            format!(
                "{shown} has no valid store identity: store_id {:?} is not a UUID",
                store_id
            ),
        ));
    }
    Ok(Identity::Store { schema, store_id })
}

/// Name what differs between the objects found and the canonical ones.
fn differences(found: &[SchemaRow], want: &[SchemaRow]) -> String {
    let mut out = Vec::new();
    for w in want {
        match found.iter().find(|f| f.0 == w.0 && f.1 == w.1) {
            None => out.push(format!("{} {} is missing", w.0, w.1)),
            Some(f) if f != w => {
                out.push(format!("{} {} is `{}`, expected `{}`", w.0, w.1, f.3, w.3))
            }
            Some(_) => {}
        }
    }
    for f in found {
        if !want.iter().any(|w| w.0 == f.0 && w.1 == f.1) {
            // A trigger, index or view is named with the table it belongs to.
            out.push(if f.0 == "table" || f.1 == f.2 {
                format!("extra {} {}", f.0, f.1)
            } else {
                format!("extra {} \"{}\" on \"{}\"", f.0, f.1, f.2)
            });
        }
    }
    if out.is_empty() {
        out.push("the objects are listed in another order".into());
    }
    let more = out.len().saturating_sub(4);
    out.truncate(4);
    let mut s = out.join("; ");
    if more > 0 {
        s.push_str(&format!(
            "; and {more} more difference{}",
            if more == 1 { "" } else { "s" }
        ));
    }
    s
}

/// RFC 4122 text: 8-4-4-4-12 hex digits, version 1–8, variant 8–b, any case (S2 step 6).
pub fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 36 {
        return false;
    }
    for (i, &c) in b.iter().enumerate() {
        let dash = matches!(i, 8 | 13 | 18 | 23);
        if dash != (c == b'-') || (!dash && !c.is_ascii_hexdigit()) {
            return false;
        }
    }
    matches!(b[14], b'1'..=b'8') && matches!(b[19].to_ascii_lowercase(), b'8' | b'9' | b'a' | b'b')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_need_version_and_variant() {
        assert!(is_uuid("275e9223-618d-4b3b-92a7-cfe9cc5d18b2"));
        assert!(is_uuid("275E9223-618D-4B3B-A2A7-CFE9CC5D18B2"));
        assert!(!is_uuid("275e9223-618d-0b3b-92a7-cfe9cc5d18b2"));
        assert!(!is_uuid("275e9223-618d-4b3b-c2a7-cfe9cc5d18b2"));
        assert!(!is_uuid("275e9223618d4b3b92a7cfe9cc5d18b2"));
        assert!(!is_uuid("275e9223-618d-4b3b-92a7-cfe9cc5d18bz"));
    }

    #[test]
    fn whitespace_runs_collapse() {
        assert_eq!(
            normalize("  CREATE TABLE a (\n  x  INT\n)  "),
            "CREATE TABLE a ( x INT )"
        );
    }
}

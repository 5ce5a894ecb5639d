//! Following one session of a SQLite store (`store.db#ID`): polled, with SQLite's own change
//! counter (`PRAGMA data_version`) saying whether another connection committed since the last
//! look. No transaction is held between polls, so the writer is never kept waiting.
//!
//! When the counter moves, the session's logical log is read again through the store reader
//! (its S7 verdicts stay the store reader's), the part already handed out is checked to be
//! unchanged (a hash), and only the new complete lines are handed on: the pass folds each new
//! event once. Reading the session again costs a pass over its rows per change (not per
//! event: changes that land between two polls are read together); a counter that does not
//! move costs one query.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use xxhash_rust::xxh3::Xxh3;

use super::{Control, Ended};
use crate::log::finding::Finding;
use crate::log::sqlite::Store;

/// What the store reader said of the session at the last read: its storage findings (S7,
/// S11.6) and whether rows were dropped as a torn tail. Reported when following stops, as a
/// one-shot run over the store reports them.
#[derive(Debug, Clone, Default)]
pub struct StorageEnd {
    pub findings: Vec<Finding>,
    pub torn: bool,
}

/// Reads a growing session of a SQLite store, waiting at its end (see the module doc).
pub struct StoreFollow {
    path: PathBuf,
    id: String,
    /// For `PRAGMA data_version` only; in autocommit mode between polls (no lock held).
    conn: Connection,
    version: Option<i64>,
    /// Bytes handed out so far, and their hash.
    fed: u64,
    hash: Xxh3,
    ready: Vec<u8>,
    start: usize,
    control: Arc<Control>,
    interval: Duration,
    ended: Arc<Mutex<Option<Ended>>>,
    storage: Arc<Mutex<StorageEnd>>,
}

impl StoreFollow {
    pub fn open(
        path: &Path,
        id: &str,
        control: Arc<Control>,
        interval: Duration,
    ) -> io::Result<StoreFollow> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(io::Error::other)?;
        Ok(StoreFollow {
            path: path.to_path_buf(),
            id: id.to_owned(),
            conn,
            version: None,
            fed: 0,
            hash: Xxh3::new(),
            ready: Vec::new(),
            start: 0,
            control,
            interval,
            ended: Arc::new(Mutex::new(None)),
            storage: Arc::default(),
        })
    }

    pub fn ended(&self) -> Arc<Mutex<Option<Ended>>> {
        Arc::clone(&self.ended)
    }

    /// The storage layer's word at the last read (see [`StorageEnd`]).
    pub fn storage(&self) -> Arc<Mutex<StorageEnd>> {
        Arc::clone(&self.storage)
    }

    fn end(&mut self, why: Ended) -> io::Result<usize> {
        *self.ended.lock().unwrap_or_else(PoisonError::into_inner) = Some(why);
        Ok(0)
    }

    /// Whether another connection committed since the last call.
    fn changed(&mut self) -> io::Result<bool> {
        let v: i64 = self
            .conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map_err(io::Error::other)?;
        Ok(self.version.replace(v) != Some(v))
    }

    /// Read the session's logical log again: the new complete lines into `ready`, or why
    /// what was handed out no longer stands.
    fn refresh(&mut self) -> io::Result<Option<String>> {
        let store = Store::open(&self.path).map_err(|e| io::Error::other(e.to_string()))?;
        let mut reader = store
            .into_reader(&self.id)
            .map_err(|e| io::Error::other(e.to_string()))?;
        let mut check = Xxh3::new();
        let mut seen = 0u64;
        let mut new = Vec::new();
        let mut buf = vec![0; 64 * 1024];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let old = (self.fed.saturating_sub(seen) as usize).min(n);
            check.update(&buf[..old]);
            seen += old as u64;
            new.extend_from_slice(&buf[old..n]);
        }
        let end = reader
            .finish()
            .map_err(|e| io::Error::other(e.to_string()))?;
        *self.storage.lock().unwrap_or_else(PoisonError::into_inner) = StorageEnd {
            findings: end.findings,
            torn: end.snapshot.torn.is_some(),
        };
        if seen < self.fed || check.digest128() != self.hash.digest128() {
            return Ok(Some(
                "the session's rows changed before the point read so far".to_owned(),
            ));
        }
        // A line is handed on once it is whole.
        let whole = memchr::memrchr(b'\n', &new).map_or(0, |i| i + 1);
        new.truncate(whole);
        self.hash.update(&new);
        self.fed += new.len() as u64;
        self.ready = new;
        self.start = 0;
        Ok(None)
    }
}

impl Read for StoreFollow {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.start < self.ready.len() {
                let n = buf.len().min(self.ready.len() - self.start);
                buf[..n].copy_from_slice(&self.ready[self.start..self.start + n]);
                self.start += n;
                return Ok(n);
            }
            let stopping = self.control.stopped();
            if self.changed()? {
                if let Some(why) = self.refresh()? {
                    return self.end(Ended::Replaced(why));
                }
                continue;
            }
            if stopping {
                return self.end(Ended::Stopped);
            }
            self.control.wait(self.interval);
        }
    }
}

//! The default store backend: one redb file in the data directory, one fsync'd transaction per
//! group of writes.
//! Tables: `objects` (key → JSON), `events` (revision → type, key, JSON) for watch replay across
//! restarts, and `meta` (current and compacted revision).
//!
//! After a failed commit (a full disk) redb refuses every later transaction ("Previous I/O
//! error occurred. Please close and re-open the database"); the backend then closes and
//! reopens the file, so the store recovers by itself once space is freed. The failed
//! transaction was never committed: the file holds the last committed state.

use super::{Backend, Commit, EventType, Loaded, Revision, StoreError};
use bytes::Bytes;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// redb-backed durable storage.
pub struct RedbBackend {
    path: PathBuf,
    /// `None` after a failed reopen: the next commit tries again.
    db: Mutex<Option<Database>>,
}

fn backend_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

/// Bytes an unprivileged writer may still use on the filesystem holding `path`.
fn available_on(path: &Path) -> Option<u64> {
    let dir = path.parent().unwrap_or(path);
    let s = nix::sys::statvfs::statvfs(dir).ok()?;
    Some(s.blocks_available().saturating_mul(s.fragment_size()))
}

impl RedbBackend {
    /// Opens (or creates) the store file at `path`.
    pub fn open(path: &Path) -> Result<RedbBackend, StoreError> {
        Ok(RedbBackend {
            path: path.to_path_buf(),
            db: Mutex::new(Some(open_database(path)?)),
        })
    }

    fn db(&self) -> MutexGuard<'_, Option<Database>> {
        self.db.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Closes the database and opens the file again (redb's remedy after an I/O error).
    fn reopen(&self, db: &mut Option<Database>) {
        // Closed first: redb lets one handle hold the file.
        drop(db.take());
        match open_file(&self.path) {
            Ok(fresh) => {
                tracing::info!(path = %self.path.display(), "store file reopened after a failed commit");
                *db = Some(fresh);
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "store file cannot be reopened yet")
            }
        }
    }
}

/// Opens (or creates) the redb file at `path` with the store's tables.
fn open_database(path: &Path) -> Result<Database, StoreError> {
    let db = open_file(path)?;
    let txn = db.begin_write().map_err(backend_err)?;
    {
        txn.open_table(OBJECTS).map_err(backend_err)?;
        txn.open_table(EVENTS).map_err(backend_err)?;
        txn.open_table(META).map_err(backend_err)?;
    }
    txn.commit().map_err(backend_err)?;
    Ok(db)
}

/// Opens the redb file at `path` as it is (no transaction: a reopen on a full disk).
fn open_file(path: &Path) -> Result<Database, StoreError> {
    // Every object is held in memory above this backend, so redb needs little cache of its
    // own (its default would grow to gigabytes of RSS under a large store). 4 MiB instead of
    // 16: 19 MB less RSS with 10,000 pods, create latency within the runs' noise (README).
    // Created private: the store holds every Secret's value.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| StoreError::Backend(format!("{}: {e}", path.display())))?;
    Database::builder()
        .set_cache_size(4 << 20)
        .create_with_backend(redb::backends::FileBackend::new(file).map_err(backend_err)?)
        .map_err(backend_err)
}

/// What [`read_objects`] found.
pub enum FileRead {
    /// Every object (key, JSON) and the revision they are consistent at.
    Objects(Revision, Vec<(String, Bytes)>),
    /// Another process (a running controller) has the file open.
    InUse,
}

/// Reads every object of the store file at `path` in one read transaction, unless another
/// process holds it (redb locks the file for one process).
pub fn read_objects(path: &Path) -> Result<FileRead, StoreError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| StoreError::Backend(format!("{}: {e}", path.display())))?;
    let backend = match redb::backends::FileBackend::new(file) {
        Ok(b) => b,
        Err(redb::DatabaseError::DatabaseAlreadyOpen) => return Ok(FileRead::InUse),
        Err(e) => return Err(backend_err(e)),
    };
    // redb takes its lock either on the backend or when the database opens, by version.
    let db = match Database::builder()
        .set_cache_size(4 << 20)
        .create_with_backend(backend)
    {
        Ok(db) => db,
        Err(redb::DatabaseError::DatabaseAlreadyOpen) => return Ok(FileRead::InUse),
        Err(e) => return Err(backend_err(e)),
    };
    let txn = db.begin_read().map_err(backend_err)?;
    let revision = match txn.open_table(META) {
        Ok(meta) => meta
            .get("revision")
            .map_err(backend_err)?
            .map(|v| v.value())
            .unwrap_or(0),
        Err(redb::TableError::TableDoesNotExist(_)) => 0,
        Err(e) => return Err(backend_err(e)),
    };
    let mut objects = Vec::new();
    match txn.open_table(OBJECTS) {
        Ok(table) => {
            for row in table.iter().map_err(backend_err)? {
                let (k, v) = row.map_err(backend_err)?;
                objects.push((k.value().to_string(), Bytes::copy_from_slice(v.value())));
            }
        }
        Err(redb::TableError::TableDoesNotExist(_)) => {}
        Err(e) => return Err(backend_err(e)),
    }
    Ok(FileRead::Objects(revision, objects))
}

/// Creates the store file at `path` (which must not exist) holding `objects` at `revision`:
/// the revision counter resumes there, and the event history starts empty (compacted at
/// `revision`: a watch from before it gets 410). Built under a temporary name and renamed, so
/// a failed restore leaves no store behind.
pub fn create_restored(
    path: &Path,
    revision: Revision,
    objects: &[(String, Bytes)],
) -> Result<(), StoreError> {
    if path.exists() {
        return Err(StoreError::Backend(format!(
            "{} exists: restore only into an empty data directory",
            path.display()
        )));
    }
    let tmp = path.with_extension("redb.restoring");
    let _ = std::fs::remove_file(&tmp);
    let built = (|| {
        let db = open_database(&tmp)?;
        let mut txn = db.begin_write().map_err(backend_err)?;
        txn.set_durability(Durability::Immediate)
            .map_err(backend_err)?;
        {
            let mut table = txn.open_table(OBJECTS).map_err(backend_err)?;
            for (key, data) in objects {
                table
                    .insert(key.as_str(), data.as_ref())
                    .map_err(backend_err)?;
            }
            let mut meta = txn.open_table(META).map_err(backend_err)?;
            meta.insert("revision", revision).map_err(backend_err)?;
            meta.insert("compacted", revision).map_err(backend_err)?;
        }
        txn.commit().map_err(backend_err)?;
        drop(db);
        std::fs::rename(&tmp, path)
            .map_err(|e| StoreError::Backend(format!("{}: {e}", path.display())))?;
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| StoreError::Backend(format!("{}: {e}", dir.display())))?;
        }
        Ok(())
    })();
    if built.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    built
}

fn type_byte(t: EventType) -> u8 {
    match t {
        EventType::Added => b'A',
        EventType::Modified => b'M',
        EventType::Deleted => b'D',
    }
}

fn type_of(b: u8) -> EventType {
    match b {
        b'A' => EventType::Added,
        b'D' => EventType::Deleted,
        _ => EventType::Modified,
    }
}

/// Event record layout: type byte, key length (u32 LE), key bytes, object bytes.
fn encode_event(t: EventType, key: &str, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + key.len() + data.len());
    out.push(type_byte(t));
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(data);
    out
}

fn decode_event(raw: &[u8]) -> Option<(EventType, String, Bytes)> {
    let t = type_of(*raw.first()?);
    let len = u32::from_le_bytes(raw.get(1..5)?.try_into().ok()?) as usize;
    let key = std::str::from_utf8(raw.get(5..5 + len)?).ok()?.to_string();
    let data = Bytes::copy_from_slice(raw.get(5 + len..)?);
    Some((t, key, data))
}

impl Backend for RedbBackend {
    fn load(&self) -> Result<Loaded, StoreError> {
        let guard = self.db();
        let db = guard
            .as_ref()
            .ok_or_else(|| StoreError::Backend("the store file is not open".into()))?;
        let txn = db.begin_read().map_err(backend_err)?;
        let meta = txn.open_table(META).map_err(backend_err)?;
        let revision = meta
            .get("revision")
            .map_err(backend_err)?
            .map(|v| v.value())
            .unwrap_or(0);
        let compacted = meta
            .get("compacted")
            .map_err(backend_err)?
            .map(|v| v.value())
            .unwrap_or(0);
        let objects_table = txn.open_table(OBJECTS).map_err(backend_err)?;
        let mut objects = Vec::new();
        for row in objects_table.iter().map_err(backend_err)? {
            let (k, v) = row.map_err(backend_err)?;
            objects.push((k.value().to_string(), Bytes::copy_from_slice(v.value())));
        }
        let events_table = txn.open_table(EVENTS).map_err(backend_err)?;
        let mut events = Vec::new();
        for row in events_table.iter().map_err(backend_err)? {
            let (k, v) = row.map_err(backend_err)?;
            let rev: Revision = k.value();
            let (t, key, data) = decode_event(v.value())
                .ok_or_else(|| StoreError::Backend(format!("corrupt event record {rev}")))?;
            events.push((rev, t, key, data));
        }
        Ok(Loaded {
            revision,
            compacted,
            objects,
            events,
        })
    }

    fn commit(&self, batch: &[Commit<'_>], compact_to: Option<Revision>) -> Result<(), StoreError> {
        let mut guard = self.db();
        if guard.is_none() {
            self.reopen(&mut guard);
        }
        let Some(db) = guard.as_ref() else {
            return Err(StoreError::Backend(format!(
                "{}: the store file cannot be opened",
                self.path.display()
            )));
        };
        let result = commit_to(db, batch, compact_to);
        if result.is_err() {
            self.reopen(&mut guard);
        }
        result
    }

    fn available_bytes(&self) -> Option<u64> {
        available_on(&self.path)
    }
}

/// One durable transaction of `batch` (and the compaction of the event log to `compact_to`).
fn commit_to(
    db: &Database,
    batch: &[Commit<'_>],
    compact_to: Option<Revision>,
) -> Result<(), StoreError> {
    let mut txn = db.begin_write().map_err(backend_err)?;
    txn.set_durability(Durability::Immediate)
        .map_err(backend_err)?;
    {
        let mut objects = txn.open_table(OBJECTS).map_err(backend_err)?;
        let mut events = txn.open_table(EVENTS).map_err(backend_err)?;
        let mut meta = txn.open_table(META).map_err(backend_err)?;
        for c in batch {
            match c.event_type {
                EventType::Deleted => {
                    objects.remove(c.key).map_err(backend_err)?;
                }
                _ => {
                    objects.insert(c.key, c.data).map_err(backend_err)?;
                }
            }
            events
                .insert(
                    c.revision,
                    encode_event(c.event_type, c.key, c.data).as_slice(),
                )
                .map_err(backend_err)?;
        }
        if let Some(last) = batch.last() {
            meta.insert("revision", last.revision)
                .map_err(backend_err)?;
        }
        if let Some(to) = compact_to {
            events.retain_in(..=to, |_, _| false).map_err(backend_err)?;
            meta.insert("compacted", to).map_err(backend_err)?;
        }
    }
    txn.commit().map_err(backend_err)?;
    Ok(())
}

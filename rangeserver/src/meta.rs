//! The range server meta log: the small persistent record of which tables and ranges this
//! engine holds and which cell-store files make up each access group (docs/formats/metalog.md).
//!
//! It is a log of checksummed records, each a list of operations applied atomically: a split is
//! one record that adds both halves and removes the parent. When the log grows it is rewritten as
//! a snapshot into the next numbered file, which counts only once its closing `SnapshotEnd`
//! record is on disk; older files are removed after that.

use std::collections::{BTreeMap, BTreeSet};

use common::TableSchema;
use dfs_broker::{AppendFlag, BlockingFs, BlockingWriter, join};
use serde::{Deserialize, Serialize};

use crate::commitlog::{LogRecord, LogTrack};
use crate::error::{Error, Result};

const FILE_MAGIC: &[u8; 8] = b"HTMETA\x00\x01";
const FORMAT_VERSION: u32 = 1;
const FILE_HEADER_LEN: usize = 8 + 4 + 4;
const RECORD_HEADER_LEN: usize = 4 + 4;
/// Most bytes one record may have; a longer length field means corruption.
const MAX_RECORD_BYTES: u32 = 256 << 20;
/// Records after which the log is rewritten as a snapshot.
const SNAPSHOT_AFTER_RECORDS: u64 = 1000;

/// One access group of a range, as persisted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRecord {
    pub name: String,
    /// Cell-store file paths, in the order they were added.
    pub stores: Vec<String>,
    /// Every cell of this group with revision <= this is in `stores`; replay skips those.
    pub flushed_revision: i64,
    /// Number for the next cell-store file of this group in this range.
    pub next_store: u64,
}

/// A range, as persisted. Rows in `[start_row, end_row)`; `None` is unbounded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeRecord {
    pub id: u64,
    pub table_id: u32,
    pub start_row: Option<Vec<u8>>,
    pub end_row: Option<Vec<u8>>,
    pub groups: Vec<GroupRecord>,
}

/// One state change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MetaOp {
    PutTable(TableSchema),
    DropTable(u32),
    PutRange(RangeRecord),
    RemoveRange(u64),
    /// The next range id to hand out (ids are never reused).
    NextRangeId(u64),
    /// The highest table id ever created here (table ids are never reused).
    MaxTableId(u32),
    /// Closes a snapshot; a file without it (other than file 0) is ignored.
    SnapshotEnd,
    /// Sets an attribute: a small key/value store for the layer that embeds the engine
    /// (namespace names, id counters).
    PutAttr(String, String),
    DeleteAttr(String),
    /// Cell-store files handed to another engine with an unloaded range (`Engine::unload_range`):
    /// this engine must never delete them, also after a restart, until the table is dropped.
    ExportStores {
        table_id: u32,
        stores: Vec<String>,
    },
    /// Exported cell-store files the master's garbage collection found unused by every server
    /// (`Engine::release_exported`): removed from the file system before this record, and
    /// forgotten.
    ReleaseExports(Vec<String>),
    /// Table ids dropped here (in snapshots): such an id is never registered again, since the
    /// commit log may still hold the dropped table's cells.
    DroppedTables(Vec<u32>),
    /// The record an unload of a range returned, kept (per table and end row, the latest) so
    /// that a repeated `unload_range` whose first answer was lost returns it again.
    Unloaded(RangeRecord),
    /// The commit log's fragments: where they start, where closed ones end, the highest
    /// created (docs/formats/commitlog.md "Replay rules"), so that a missing, truncated or
    /// damaged fragment is an error rather than a torn tail.
    Log(LogRecord),
}

/// The state the meta log describes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetaState {
    pub tables: BTreeMap<u32, TableSchema>,
    pub ranges: BTreeMap<u64, RangeRecord>,
    pub next_range_id: u64,
    /// The highest table id ever created (0 if none).
    pub max_table_id: u32,
    pub attrs: BTreeMap<String, String>,
    /// Exported cell-store paths (never deleted by this engine) and the table each belongs to.
    pub exported: BTreeMap<String, u32>,
    /// Tables dropped here; their ids are never registered again.
    pub dropped_tables: BTreeSet<u32>,
    /// The last record unloaded per (table, end row), for repeated unloads.
    pub unloaded: BTreeMap<(u32, Option<Vec<u8>>), RangeRecord>,
    /// The commit log's fragments; `None` for a log written before they were recorded.
    pub log: Option<LogTrack>,
}

impl MetaState {
    /// True if `path` was handed to another engine and must not be deleted here.
    pub fn is_exported(&self, path: &str) -> bool {
        self.exported.contains_key(path)
    }

    fn apply(&mut self, op: &MetaOp) {
        match op {
            MetaOp::PutTable(s) => {
                self.max_table_id = self.max_table_id.max(s.id);
                self.tables.insert(s.id, s.clone());
            }
            MetaOp::MaxTableId(n) => self.max_table_id = self.max_table_id.max(*n),
            MetaOp::DropTable(id) => {
                self.tables.remove(id);
                self.ranges.retain(|_, r| r.table_id != *id);
                // Every server drops the table: its exported files may go now.
                self.exported.retain(|_, t| t != id);
                self.unloaded.retain(|(t, _), _| t != id);
                self.dropped_tables.insert(*id);
            }
            MetaOp::PutRange(r) => {
                self.next_range_id = self.next_range_id.max(r.id + 1);
                self.ranges.insert(r.id, r.clone());
            }
            MetaOp::RemoveRange(id) => {
                self.ranges.remove(id);
            }
            MetaOp::NextRangeId(n) => self.next_range_id = self.next_range_id.max(*n),
            MetaOp::SnapshotEnd => {}
            MetaOp::PutAttr(k, v) => {
                self.attrs.insert(k.clone(), v.clone());
            }
            MetaOp::DeleteAttr(k) => {
                self.attrs.remove(k);
            }
            MetaOp::ExportStores { table_id, stores } => {
                for p in stores {
                    self.exported.insert(p.clone(), *table_id);
                }
            }
            MetaOp::ReleaseExports(paths) => {
                for p in paths {
                    self.exported.remove(p);
                }
            }
            MetaOp::DroppedTables(ids) => self.dropped_tables.extend(ids.iter().copied()),
            MetaOp::Unloaded(r) => {
                self.unloaded
                    .insert((r.table_id, r.end_row.clone()), r.clone());
            }
            MetaOp::Log(r) => self.log.get_or_insert_default().apply(r),
        }
    }

    fn snapshot_ops(&self) -> Vec<MetaOp> {
        let mut ops: Vec<MetaOp> = self
            .tables
            .values()
            .cloned()
            .map(MetaOp::PutTable)
            .collect();
        ops.extend(self.ranges.values().cloned().map(MetaOp::PutRange));
        ops.push(MetaOp::NextRangeId(self.next_range_id));
        ops.push(MetaOp::MaxTableId(self.max_table_id));
        ops.extend(
            self.attrs
                .iter()
                .map(|(k, v)| MetaOp::PutAttr(k.clone(), v.clone())),
        );
        let mut by_table: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        for (p, t) in &self.exported {
            by_table.entry(*t).or_default().push(p.clone());
        }
        ops.extend(
            by_table
                .into_iter()
                .map(|(table_id, stores)| MetaOp::ExportStores { table_id, stores }),
        );
        ops.extend(self.unloaded.values().cloned().map(MetaOp::Unloaded));
        if !self.dropped_tables.is_empty() {
            ops.push(MetaOp::DroppedTables(
                self.dropped_tables.iter().copied().collect(),
            ));
        }
        if let Some(t) = &self.log {
            ops.push(MetaOp::Log(LogRecord {
                start: Some(t.start),
                ends: t.ends.iter().map(|(&n, &e)| (n, e)).collect(),
                created: t.created,
            }));
        }
        ops
    }
}

/// The open meta log.
pub struct MetaLog {
    fs: BlockingFs,
    dir: String,
    number: u64,
    writer: BlockingWriter,
    state: MetaState,
    records: u64,
    /// Where open cut a torn last record (file and offset), if it did.
    torn_tail: Option<String>,
    /// The file open read the state from (since rewritten into the next one).
    read_from: Option<String>,
}

fn file_header() -> Vec<u8> {
    let mut h = Vec::with_capacity(FILE_HEADER_LEN);
    h.extend_from_slice(FILE_MAGIC);
    h.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    let crc = crc32c::crc32c(&h);
    h.extend_from_slice(&crc.to_le_bytes());
    h
}

fn encode_record(ops: &[MetaOp]) -> Vec<u8> {
    let payload = serde_json::to_vec(ops).expect("meta ops serialize");
    let mut rec = Vec::with_capacity(RECORD_HEADER_LEN + payload.len());
    rec.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    rec.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    rec.extend_from_slice(&payload);
    rec
}

/// Reads one meta-log file: its records, and whether it ends in a complete snapshot or is file 0.
/// Only in the newest file (`newest`) may the last record be torn (a crash while appending it,
/// never acknowledged): it is ignored with a warning that says how many bytes were cut. Any
/// other damage is an error naming the file and offset.
/// The third value is where a torn last record was cut, if one was.
fn read_file(
    fs: &BlockingFs,
    path: &str,
    newest: bool,
) -> Result<(Vec<Vec<MetaOp>>, bool, Option<u64>)> {
    let len = fs.length(path)?;
    let data = if len == 0 {
        Vec::new()
    } else {
        fs.open(path)?.pread(0, len as usize)?
    };
    if data.len() < FILE_HEADER_LEN {
        return Err(Error::Corrupt {
            file: path.into(),
            offset: 0,
            msg: format!("meta log file header is incomplete ({} bytes)", data.len()),
        });
    }
    if &data[..8] != FILE_MAGIC {
        return Err(Error::Corrupt {
            file: path.into(),
            offset: 0,
            msg: "not a meta log file (bad magic)".into(),
        });
    }
    let crc = u32::from_le_bytes(data[12..16].try_into().expect("4 bytes"));
    if crc != crc32c::crc32c(&data[..12]) {
        return Err(Error::Checksum {
            file: path.into(),
            offset: 0,
            what: "meta log file header".into(),
        });
    }
    let version = u32::from_le_bytes(data[8..12].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(Error::UnsupportedVersion {
            file: path.into(),
            version,
        });
    }
    let mut records = Vec::new();
    let mut snapshot_end = false;
    let mut cut_at = None;
    let mut off = FILE_HEADER_LEN;
    while off < data.len() {
        let torn = |what: &str| -> Result<()> {
            let cut = data.len() - off;
            if !newest {
                return Err(Error::Corrupt {
                    file: path.into(),
                    offset: off as u64,
                    msg: format!(
                        "meta log record is damaged ({what}) in a file a newer one followed"
                    ),
                });
            }
            tracing::warn!(
                file = path,
                offset = off,
                cut_bytes = cut,
                "meta log: torn last record ({what}) ignored: {cut} bytes cut"
            );
            Ok(())
        };
        if data.len() - off < RECORD_HEADER_LEN {
            torn("short header")?;
            cut_at = Some(off as u64);
            break;
        }
        let n = u32::from_le_bytes(data[off..off + 4].try_into().expect("4 bytes"));
        let crc = u32::from_le_bytes(data[off + 4..off + 8].try_into().expect("4 bytes"));
        let end = off + RECORD_HEADER_LEN + n as usize;
        if n > MAX_RECORD_BYTES || end > data.len() {
            // Only the last record may be incomplete (a crash while appending it).
            torn("short payload")?;
            cut_at = Some(off as u64);
            break;
        }
        let payload = &data[off + RECORD_HEADER_LEN..end];
        if crc32c::crc32c(payload) != crc {
            if end == data.len() {
                torn("checksum")?;
                cut_at = Some(off as u64);
                break;
            }
            return Err(Error::Checksum {
                file: path.into(),
                offset: off as u64,
                what: "meta log record".into(),
            });
        }
        let ops: Vec<MetaOp> = serde_json::from_slice(payload).map_err(|e| Error::Corrupt {
            file: path.into(),
            offset: off as u64,
            msg: format!("meta log record does not parse: {e}"),
        })?;
        if ops.contains(&MetaOp::SnapshotEnd) {
            snapshot_end = true;
        }
        records.push(ops);
        off = end;
    }
    Ok((records, snapshot_end, cut_at))
}

/// The numbers of the meta-log files in `dir`, ascending.
fn file_numbers(fs: &BlockingFs, dir: &str) -> Result<Vec<u64>> {
    let mut numbers: Vec<u64> = fs
        .readdir(dir)?
        .into_iter()
        .filter(|e| !e.is_dir)
        .filter_map(|e| e.name.strip_prefix("meta.").and_then(|n| n.parse().ok()))
        .collect();
    numbers.sort_unstable();
    Ok(numbers)
}

/// Reads the state of the meta log in `dir` without changing anything: the newest file if it
/// ends a snapshot (or is file 0); if it is a snapshot that a crash interrupted (at most the
/// snapshot's own record, no `SnapshotEnd`), the file before it, which then still counts.
/// Returns its number, the state and its number of records; `None` if `dir` holds no meta-log
/// file, or only the remains of an interrupted first snapshot. Anything else that does not read
/// is an error naming the file: a damaged newest file never falls back to an older one.
/// The last value names a torn last record that was cut (file and offset).
fn load(fs: &BlockingFs, dir: &str) -> Result<Option<Loaded>> {
    let numbers = file_numbers(fs, dir)?;
    let Some((&newest, older)) = numbers.split_last() else {
        return Ok(None);
    };
    let path = join(dir, &format!("meta.{newest}"));
    // A file shorter than its header is a snapshot interrupted right after its create.
    let header_torn = newest > 0 && fs.length(&path)? < FILE_HEADER_LEN as u64;
    let (records, complete, cut_at) = if header_torn {
        (Vec::new(), false, None)
    } else {
        read_file(fs, &path, true)?
    };
    let cut = cut_at.map(|off| format!("{path} at offset {off}"));
    let (n, records) = if complete || newest == 0 {
        (newest, records)
    } else if records.len() > 1 {
        return Err(Error::Corrupt {
            file: path,
            offset: 0,
            msg: format!(
                "meta log file holds {} records but no complete snapshot",
                records.len()
            ),
        });
    } else if let Some(&prev) = older.last() {
        (prev, read_older(fs, dir, prev, &path)?)
    } else {
        tracing::warn!(file = path, "meta log: interrupted first snapshot ignored");
        return Ok(None);
    };
    let mut state = MetaState::default();
    for ops in &records {
        for op in ops {
            state.apply(op);
        }
    }
    Ok(Some((n, state, records.len() as u64, cut)))
}

type Loaded = (u64, MetaState, u64, Option<String>);

/// Reads file `prev`, which counts because the newer `interrupted` snapshot never completed.
fn read_older(
    fs: &BlockingFs,
    dir: &str,
    prev: u64,
    interrupted: &str,
) -> Result<Vec<Vec<MetaOp>>> {
    let path = join(dir, &format!("meta.{prev}"));
    let (records, complete, _) = read_file(fs, &path, false)?;
    if !complete && prev > 0 {
        return Err(Error::Corrupt {
            file: path,
            offset: 0,
            msg: "meta log file ends no snapshot, and the newer one is incomplete".into(),
        });
    }
    tracing::warn!(
        file = interrupted,
        "meta log: interrupted snapshot ignored; the previous file counts"
    );
    Ok(records)
}

/// Reads another engine's meta log in `dir` (a dead server's `<root>/meta`) without writing,
/// repairing, locking or removing anything: the state its owner would open with. A torn last
/// record is ignored as at open. A directory without meta-log files is an error.
pub fn read_state(fs: &BlockingFs, dir: &str) -> Result<MetaState> {
    // The owner may be rewriting a snapshot and removing older files meanwhile (if it still
    // runs): a file that vanished between listing and reading means "list again".
    let mut attempts = 0;
    loop {
        attempts += 1;
        match load(fs, dir) {
            Ok(Some((_, state, _, _))) => return Ok(state),
            Ok(None) => {
                return Err(Error::InvalidInput(format!(
                    "{dir}: no meta log (no meta.<N> file) to read"
                )));
            }
            Err(Error::Fs(e)) if e.is_not_found() && attempts < 3 => continue,
            Err(e) => return Err(e),
        }
    }
}

impl MetaLog {
    /// Opens the meta log in `dir` and returns it with the state it holds. Only with
    /// `may_create` does a directory without a meta log start an empty one: the caller says
    /// whether the engine's root holds nothing else, since a lost meta log must never turn into
    /// a new, empty database.
    pub fn open(fs: BlockingFs, dir: &str, may_create: bool) -> Result<Self> {
        fs.mkdirs(dir)?;
        let (number, state, records, torn_tail) = match load(&fs, dir)? {
            Some(loaded) => loaded,
            None if may_create => (0, MetaState::default(), 0, None),
            None => {
                let found = file_numbers(&fs, dir)?.last().copied();
                let (file, what) = match found {
                    Some(n) => (join(dir, &format!("meta.{n}")), "an incomplete meta log"),
                    None => (join(dir, "meta.<N>"), "no meta log"),
                };
                return Err(Error::Corrupt {
                    file,
                    offset: 0,
                    msg: format!(
                        "{what}, but the engine's root holds tables or a commit log: \
                         refusing to open it as a new database"
                    ),
                });
            }
        };
        // Rewrite into a fresh file: that drops any torn tail and leftover files.
        let mut log = Self {
            writer: Self::start_file(&fs, dir, number + 1, &state)?,
            fs,
            dir: dir.to_string(),
            number: number + 1,
            state,
            records,
            torn_tail,
            read_from: (records > 0).then(|| join(dir, &format!("meta.{number}"))),
        };
        log.remove_older_files()?;
        log.records = 0;
        Ok(log)
    }

    fn start_file(
        fs: &BlockingFs,
        dir: &str,
        number: u64,
        state: &MetaState,
    ) -> Result<BlockingWriter> {
        let path = join(dir, &format!("meta.{number}"));
        let mut w = fs.create(&path, true)?;
        let mut data = file_header();
        data.extend_from_slice(&encode_record(&state.snapshot_ops()));
        data.extend_from_slice(&encode_record(&[MetaOp::SnapshotEnd]));
        if let Err(e) = w.append(&data, AppendFlag::Sync) {
            // Leave no partial file behind (the older file still counts).
            let _ = w.close();
            let _ = fs.remove(&path);
            return Err(e.into());
        }
        Ok(w)
    }

    fn remove_older_files(&self) -> Result<()> {
        for e in self.fs.readdir(&self.dir)? {
            if let Some(n) = e
                .name
                .strip_prefix("meta.")
                .and_then(|n| n.parse::<u64>().ok())
                && n < self.number
            {
                self.fs.remove(&join(&self.dir, &e.name))?;
            }
        }
        Ok(())
    }

    /// Where open cut a torn last record (file and offset), if it did: what to name when the
    /// state read proves inconsistent with the engine's other files.
    pub fn torn_tail(&self) -> Option<&str> {
        self.torn_tail.as_deref()
    }

    /// The file open read the state from, if any (it is rewritten into the next number at
    /// open): what to name when the state proves inconsistent with the engine's other files.
    pub fn read_from(&self) -> Option<&str> {
        self.read_from.as_deref()
    }

    /// The state as of the last record written.
    pub fn state(&self) -> &MetaState {
        &self.state
    }

    /// Appends one atomic record and syncs it; the state changes only if that succeeds.
    pub fn write(&mut self, ops: Vec<MetaOp>) -> Result<()> {
        self.writer.append(&encode_record(&ops), AppendFlag::Sync)?;
        for op in &ops {
            self.state.apply(op);
        }
        self.records += 1;
        if self.records >= SNAPSHOT_AFTER_RECORDS {
            let next = self.number + 1;
            let w = Self::start_file(&self.fs, &self.dir, next, &self.state)?;
            let mut old = std::mem::replace(&mut self.writer, w);
            let _ = old.close();
            self.number = next;
            self.records = 0;
            self.remove_older_files()?;
        }
        Ok(())
    }

    /// Closes the current file.
    pub fn close(&mut self) -> Result<()> {
        self.writer.close()?;
        Ok(())
    }
}

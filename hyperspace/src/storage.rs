//! The durable Raft storage: [`DiskStorage`] implements [`raft::Storage`] on files.
//!
//! All entries after the latest snapshot are kept in memory as well, so reads never touch the
//! disk; the log is bounded by [`DiskStorage::compact`], which the node calls past a threshold.
//! On disk (`docs/formats/hyperspace-log.md`):
//!
//! - `log-<seq>.hlog` segments: a header, then checksummed records. Every segment is created
//!   (under a temporary name, synced, renamed) with a `State` record holding the full hard state
//!   and conf state, so any prefix of segments can be deleted. `persist` appends exactly one
//!   `Append` record (entries and/or hard state) and syncs once; `set_conf_state` appends one
//!   `State` record. An `Append` whose first entry index is `<=` the last index replaces the
//!   suffix from that index on replay, exactly as when it was written.
//! - `snapshot-<index>.hsnap`: index, term, hard state, conf state, data, and the first segment
//!   that is still part of the log. Renaming it into place is the commit point of `compact` and
//!   `apply_snapshot`; segments below its first segment and older snapshots are then deleted
//!   (again at the next open if a crash came first).

mod format;
mod segment;

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{RwLock, RwLockReadGuard};
use raft::prelude::{ConfState, Entry, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState};

use format::SnapshotFile;
use segment::{Replay, Segment, create_segment, open_for_append};

/// Tuning of a [`DiskStorage`].
#[derive(Debug, Clone)]
pub struct StorageOptions {
    /// A segment that reached this many bytes is closed; the next write starts a new one.
    pub segment_bytes: u64,
    /// Sync (fdatasync / fsync) every durable write. `false` only for tests and benchmarks.
    pub sync: bool,
}

impl Default for StorageOptions {
    fn default() -> Self {
        StorageOptions {
            segment_bytes: 64 << 20,
            sync: true,
        }
    }
}

/// Errors of [`DiskStorage`].
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("corrupt Hyperspace storage file {path} at offset {offset}: {what}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        what: String,
    },
    #[error("{path}: unsupported format version {version}")]
    UnsupportedVersion { path: PathBuf, version: u32 },
    #[error("{what} of {len} bytes is too large")]
    TooLarge { what: String, len: u64 },
    #[error("protobuf encoding failed: {0}")]
    Encode(String),
    #[error("storage is not empty: cannot initialize it")]
    NotEmpty,
    #[error("invalid append: {0}")]
    InvalidAppend(String),
    #[error("invalid hard state: {0}")]
    InvalidHardState(String),
    #[error("cannot compact to index {index}: must be in ({snapshot_index}, {last_index}]")]
    InvalidCompact {
        index: u64,
        snapshot_index: u64,
        last_index: u64,
    },
    #[error("snapshot at index {index} is out of date: the log starts at {first_index}")]
    SnapshotOutOfDate { index: u64, first_index: u64 },
    #[error("an earlier write failed; the storage refuses writes until it is reopened")]
    Broken,
}

impl From<StorageError> for raft::Error {
    fn from(e: StorageError) -> Self {
        raft::Error::Store(raft::StorageError::Other(Box::new(e)))
    }
}

struct Inner {
    dir: PathBuf,
    opts: StorageOptions,
    hard_state: HardState,
    conf_state: ConfState,
    /// The latest snapshot (default: none); its index and term bound the log.
    snapshot: Snapshot,
    /// Entries `snapshot.index + 1 ..= last_index`.
    entries: Vec<Entry>,
    /// Live segments in order; the last one is appended to.
    segments: Vec<Segment>,
    file: File,
    broken: bool,
}

/// Durable `raft::Storage`: a cheap-to-clone handle to shared state (like `raft::MemStorage`).
#[derive(Clone)]
pub struct DiskStorage {
    inner: Arc<RwLock<Inner>>,
}

impl std::fmt::Debug for DiskStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = self.inner.read();
        f.debug_struct("DiskStorage")
            .field("dir", &i.dir)
            .field("first_index", &i.first_index())
            .field("last_index", &i.last_index())
            .field("segments", &i.segments.len())
            .finish()
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StorageError + '_ {
    move |source| StorageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn remove_best_effort(path: &Path) {
    if let Err(e) = fs::remove_file(path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), error = %e, "cannot remove obsolete Hyperspace storage file");
    }
}

impl Inner {
    fn snap_index(&self) -> u64 {
        self.snapshot.get_metadata().index
    }

    fn first_index(&self) -> u64 {
        self.snap_index() + 1
    }

    fn last_index(&self) -> u64 {
        self.entries.last().map_or(self.snap_index(), |e| e.index)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        let meta = self.snapshot.get_metadata();
        if idx == meta.index {
            return Ok(meta.term);
        }
        if idx < self.first_index() {
            return Err(raft::Error::Store(raft::StorageError::Compacted));
        }
        if idx > self.last_index() {
            return Err(raft::Error::Store(raft::StorageError::Unavailable));
        }
        Ok(self.entries[(idx - self.first_index()) as usize].term)
    }

    /// Replaces entries from `ents[0].index` on by `ents`, dropping those `<=` the snapshot.
    /// The caller checked that there is no gap.
    fn splice(&mut self, ents: &[Entry]) {
        let Some(first) = ents.first() else { return };
        let keep = first.index.saturating_sub(self.first_index()) as usize;
        self.entries.truncate(keep);
        let snap = self.snap_index();
        let skip = ents.iter().take_while(|e| e.index <= snap).count();
        self.entries.extend_from_slice(&ents[skip..]);
    }

    fn check_writable(&self) -> Result<(), StorageError> {
        if self.broken {
            Err(StorageError::Broken)
        } else {
            Ok(())
        }
    }

    fn current(&mut self) -> &mut Segment {
        // `open` always leaves at least one segment and nothing removes the last one.
        let n = self.segments.len();
        &mut self.segments[n - 1]
    }

    /// Appends one framed record to the current segment (rolling first if it is full) and
    /// syncs. Any failure poisons the storage: the tail of the segment is then unknown.
    fn write_record(&mut self, ty: u8, payload: &[u8], max_index: u64) -> Result<(), StorageError> {
        self.check_writable()?;
        let mut buf = Vec::with_capacity(payload.len() + format::RECORD_HEADER_LEN);
        format::frame_record(&mut buf, ty, payload)?;
        if self.current().bytes >= self.opts.segment_bytes {
            let seq = self.current().seq + 1;
            let end = self.log_end();
            let (seg, file) = create_segment(
                &self.dir,
                seq,
                &self.hard_state,
                &self.conf_state,
                end,
                self.opts.sync,
            )?;
            self.segments.push(seg);
            self.file = file;
            // Records go to the new segment only once HEAD names it.
            if let Err(e) = format::write_head(&self.dir, self.head(), self.opts.sync) {
                self.broken = true;
                return Err(e);
            }
        }
        let sync = self.opts.sync;
        let res = self
            .file
            .write_all(&buf)
            .and_then(|()| if sync { self.file.sync_data() } else { Ok(()) });
        if let Err(e) = res {
            self.broken = true;
            return Err(io_err(&self.current().path)(e));
        }
        let seg = self.current();
        seg.bytes += buf.len() as u64;
        seg.max_index = seg.max_index.max(max_index);
        Ok(())
    }

    /// The last entry's index and term (the snapshot's without entries).
    fn log_end(&self) -> format::LogEnd {
        match self.entries.last() {
            Some(e) => (e.index, e.term),
            None => (self.snap_index(), self.snapshot.get_metadata().term),
        }
    }

    /// What `HEAD` should say now.
    fn head(&self) -> format::Head {
        format::Head {
            newest_segment: self.segments.last().map_or(0, |s| s.seq),
            snapshot_index: self.snap_index(),
        }
    }

    /// Removes segments below `first_segment` and snapshot files other than the current one.
    fn remove_obsolete(&mut self, first_segment: u64) {
        let (old, live): (Vec<Segment>, Vec<Segment>) = std::mem::take(&mut self.segments)
            .into_iter()
            .partition(|s| s.seq < first_segment);
        self.segments = live;
        for s in old {
            remove_best_effort(&s.path);
        }
        let current = format::snapshot_name(self.snap_index());
        if let Ok(rd) = fs::read_dir(&self.dir) {
            for ent in rd.flatten() {
                let name = ent.file_name();
                let Some(name) = name.to_str() else { continue };
                if format::parse_name(name, "snapshot-", ".hsnap").is_some() && name != current {
                    remove_best_effort(&ent.path());
                }
            }
        }
        if self.opts.sync
            && let Err(e) = format::sync_dir(&self.dir)
        {
            tracing::warn!(error = %e, "cannot sync the Hyperspace storage directory after removals");
        }
    }
}

impl DiskStorage {
    /// Opens (creating if missing) the storage in `dir` and replays it.
    ///
    /// A torn or checksum-failing record at the very tail of the last segment (nothing valid
    /// after it) is the end of a crash-interrupted write: it is cut off, also on disk. Damage
    /// anywhere else, a damaged snapshot file or a missing segment is an error naming the file.
    pub fn open(dir: &Path, opts: StorageOptions) -> Result<Self, StorageError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let mut seg_seqs = Vec::new();
        let mut snap_indexes = Vec::new();
        for ent in fs::read_dir(dir).map_err(io_err(dir))? {
            let ent = ent.map_err(io_err(dir))?;
            let name = ent.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(seq) = format::parse_name(name, "log-", ".hlog") {
                seg_seqs.push(seq);
            } else if let Some(idx) = format::parse_name(name, "snapshot-", ".hsnap") {
                snap_indexes.push(idx);
            } else if name.ends_with(".tmp")
                && (name.starts_with("log-")
                    || name.starts_with("snapshot-")
                    || name == format!("{}.tmp", format::HEAD_NAME))
            {
                // An interrupted creation: never part of the state.
                remove_best_effort(&ent.path());
            }
        }
        seg_seqs.sort_unstable();
        snap_indexes.sort_unstable();

        // The latest snapshot, verified in full; no fallback to older ones (their log may be gone).
        let snap = match snap_indexes.last() {
            Some(&idx) => {
                let path = dir.join(format::snapshot_name(idx));
                let s = format::read_snapshot(&path)?;
                if s.index != idx {
                    return Err(StorageError::Corrupt {
                        path,
                        offset: 8,
                        what: format!("snapshot index {} differs from the file name", s.index),
                    });
                }
                Some(s)
            }
            None => None,
        };
        let first_segment = match &snap {
            Some(s) => s.first_segment,
            None => seg_seqs.first().copied().unwrap_or(1),
        };
        let mut snapshot = Snapshot::default();
        let (mut hard_state, mut conf_state) = (HardState::default(), ConfState::default());
        if let Some(s) = &snap {
            let meta = snapshot.mut_metadata();
            meta.index = s.index;
            meta.term = s.term;
            meta.set_conf_state(s.conf_state.clone());
            snapshot.data = s.data.clone().into();
            hard_state = s.hard_state.clone();
            conf_state = s.conf_state.clone();
        }
        // HEAD names the newest segment and snapshot ever written: finding less means a file
        // was lost (each is written before HEAD names it, so a crash leaves HEAD behind, never
        // ahead). A directory without HEAD (older than it, or HEAD lost) is taken as found.
        let head = format::read_head(dir)?;
        if let Some(h) = head {
            if h.snapshot_index > 0 && snap.as_ref().map_or(0, |s| s.index) < h.snapshot_index {
                return Err(StorageError::Corrupt {
                    path: dir.join(format::snapshot_name(h.snapshot_index)),
                    offset: 0,
                    what: format!(
                        "snapshot missing ({} names it as the latest)",
                        format::HEAD_NAME
                    ),
                });
            }
            // Segments below the snapshot's first segment may be gone: they are obsolete.
            let newest = seg_seqs
                .last()
                .copied()
                .unwrap_or(0)
                .max(first_segment.saturating_sub(1));
            if newest < h.newest_segment {
                return Err(StorageError::Corrupt {
                    path: dir.join(format::segment_name(h.newest_segment)),
                    offset: 0,
                    what: format!(
                        "log segment missing ({} names it as the newest)",
                        format::HEAD_NAME
                    ),
                });
            }
        }
        let live: Vec<u64> = seg_seqs
            .iter()
            .copied()
            .filter(|&s| s >= first_segment)
            .collect();
        for (i, &seq) in live.iter().enumerate() {
            if seq != first_segment + i as u64 {
                return Err(StorageError::Corrupt {
                    path: dir.join(format::segment_name(first_segment + i as u64)),
                    offset: 0,
                    what: "log segment missing".to_string(),
                });
            }
        }

        let mut inner_state = Replay {
            snapshot,
            hard_state,
            conf_state,
            entries: Vec::new(),
            previous: None,
            replayed_records: 0,
        };
        let mut segments = Vec::new();
        for (i, &seq) in live.iter().enumerate() {
            let path = dir.join(format::segment_name(seq));
            let seg = inner_state.replay_segment(path, seq, i + 1 == live.len(), opts.sync)?;
            segments.push(seg);
        }
        let Replay {
            snapshot,
            mut hard_state,
            conf_state,
            entries,
            ..
        } = inner_state;
        let snap_index = snapshot.get_metadata().index;
        let last_index = entries.last().map_or(snap_index, |e| e.index);
        // Raft panics if commit is outside [snapshot index, last index]. Below: compaction
        // vouched for entries the persisted hard state did not yet call committed. Above: only a
        // caller persisting a commit ahead of its entries (a segment that lost its end is caught
        // by the next segment's `State` record).
        if hard_state.commit > last_index {
            tracing::warn!(
                commit = hard_state.commit,
                last_index,
                "Hyperspace hard state commit past the last log index; lowered"
            );
            hard_state.commit = last_index;
        }
        hard_state.commit = hard_state.commit.max(snap_index);

        let file = match segments.last() {
            Some(seg) => open_for_append(&seg.path)?,
            None => {
                let seq = seg_seqs
                    .last()
                    .map_or(first_segment, |&m| m + 1)
                    .max(first_segment);
                let end = (snap_index, snapshot.get_metadata().term);
                let (seg, file) =
                    create_segment(dir, seq, &hard_state, &conf_state, end, opts.sync)?;
                segments.push(seg);
                file
            }
        };
        // Finish removals a crash may have interrupted.
        let mut removed = false;
        for &seq in seg_seqs.iter().filter(|&&s| s < first_segment) {
            remove_best_effort(&dir.join(format::segment_name(seq)));
            removed = true;
        }
        for &idx in snap_indexes.iter().rev().skip(1) {
            remove_best_effort(&dir.join(format::snapshot_name(idx)));
            removed = true;
        }
        if removed && opts.sync {
            format::sync_dir(dir)?;
        }
        let now = format::Head {
            newest_segment: segments.last().map_or(0, |s| s.seq),
            snapshot_index: snapshot.get_metadata().index,
        };
        if head != Some(now) {
            format::write_head(dir, now, opts.sync)?;
        }
        let inner = Inner {
            dir: dir.to_path_buf(),
            opts,
            hard_state,
            conf_state,
            snapshot,
            entries,
            segments,
            file,
            broken: false,
        };
        Ok(DiskStorage {
            inner: Arc::new(RwLock::new(inner)),
        })
    }

    fn rl(&self) -> RwLockReadGuard<'_, Inner> {
        self.inner.read()
    }

    /// True if nothing was ever persisted (a new replica).
    pub fn is_empty(&self) -> bool {
        let i = self.rl();
        i.snap_index() == 0
            && i.entries.is_empty()
            && i.hard_state == HardState::default()
            && i.conf_state == ConfState::default()
    }

    /// First boot of a founding member: sets the initial `ConfState` durably. Error if not empty.
    pub fn initialize(&self, conf_state: ConfState) -> Result<(), StorageError> {
        if !self.is_empty() {
            return Err(StorageError::NotEmpty);
        }
        self.set_conf_state(conf_state)
    }

    /// Appends `entries` (replacing a conflicting suffix when the first index is `<=` the last
    /// index) and/or sets the hard state, with one durable write (one fdatasync when syncing).
    pub fn persist(
        &self,
        entries: &[Entry],
        hard_state: Option<&HardState>,
    ) -> Result<(), StorageError> {
        if entries.is_empty() && hard_state.is_none() {
            return Ok(());
        }
        let mut i = self.inner.write();
        i.check_writable()?;
        if let Some(first) = entries.first() {
            if first.index < i.first_index() {
                return Err(StorageError::InvalidAppend(format!(
                    "entry {} is compacted (the log starts at {})",
                    first.index,
                    i.first_index()
                )));
            }
            if first.index > i.last_index() + 1 {
                return Err(StorageError::InvalidAppend(format!(
                    "gap: entry {} after last index {}",
                    first.index,
                    i.last_index()
                )));
            }
            if let Some(w) = entries.windows(2).find(|w| w[1].index != w[0].index + 1) {
                return Err(StorageError::InvalidAppend(format!(
                    "entries not contiguous: {} after {}",
                    w[1].index, w[0].index
                )));
            }
        }
        let payload = format::append_payload(hard_state, entries)?;
        let max_index = entries.last().map_or(0, |e| e.index);
        i.write_record(format::REC_APPEND, &payload, max_index)?;
        i.splice(entries);
        if let Some(hs) = hard_state {
            i.hard_state = hs.clone();
        }
        Ok(())
    }

    /// Installs a snapshot from the leader, durably: the snapshot file is written and synced,
    /// then the log restarts after it. All entries are dropped (as `MemStorage` does), the conf
    /// state becomes the snapshot's, the hard state's commit its index and term the max.
    pub fn apply_snapshot(&self, snapshot: Snapshot) -> Result<(), StorageError> {
        let mut i = self.inner.write();
        i.check_writable()?;
        let index = snapshot.get_metadata().index;
        if index < i.first_index() {
            return Err(StorageError::SnapshotOutOfDate {
                index,
                first_index: i.first_index(),
            });
        }
        let mut hs = i.hard_state.clone();
        hs.term = hs.term.max(snapshot.get_metadata().term);
        hs.commit = index;
        let cs = snapshot.get_metadata().get_conf_state().clone();
        let new_seq = i.current().seq + 1;
        let file = SnapshotFile {
            index,
            term: snapshot.get_metadata().term,
            first_segment: new_seq,
            hard_state: hs.clone(),
            conf_state: cs.clone(),
            data: snapshot.data.to_vec(),
        };
        // Once the snapshot file is renamed into place it is the commit point, and a failure
        // after that leaves memory behind the disk (appends would go to a segment that replay
        // skips): the handle refuses further writes until it is reopened.
        i.broken = true;
        format::write_snapshot(&i.dir, &file, i.opts.sync)?;
        let end = (index, snapshot.get_metadata().term);
        let (seg, f) = create_segment(&i.dir, new_seq, &hs, &cs, end, i.opts.sync)?;
        format::write_head(
            &i.dir,
            format::Head {
                newest_segment: new_seq,
                snapshot_index: index,
            },
            i.opts.sync,
        )?;
        i.broken = false;
        i.segments.push(seg);
        i.file = f;
        i.snapshot = snapshot;
        i.entries.clear();
        i.hard_state = hs;
        i.conf_state = cs;
        i.remove_obsolete(new_seq);
        Ok(())
    }

    /// Log compaction after the state machine applied through `index`: durably stores the
    /// snapshot `{index, term(index), conf_state, data}`, then drops entries `<= index` and
    /// deletes the segments entirely covered. Requires `snapshot index < index <= last index`.
    /// The hard state's commit is raised to `index` if it was below (applied entries are
    /// committed).
    pub fn compact(
        &self,
        index: u64,
        conf_state: ConfState,
        data: Vec<u8>,
    ) -> Result<(), StorageError> {
        let mut i = self.inner.write();
        i.check_writable()?;
        if index <= i.snap_index() || index > i.last_index() {
            return Err(StorageError::InvalidCompact {
                index,
                snapshot_index: i.snap_index(),
                last_index: i.last_index(),
            });
        }
        let term = i.entries[(index - i.first_index()) as usize].term;
        // Segments are removed only as a prefix: an older segment may hold entries above
        // `index` that a later one truncated, and replay needs the truncation to see them.
        let first_segment = i
            .segments
            .iter()
            .find(|s| s.max_index > index)
            .unwrap_or_else(|| &i.segments[i.segments.len() - 1])
            .seq;
        let mut hs = i.hard_state.clone();
        hs.commit = hs.commit.max(index);
        let mut snapshot = Snapshot::default();
        {
            let meta = snapshot.mut_metadata();
            meta.index = index;
            meta.term = term;
            meta.set_conf_state(conf_state);
        }
        snapshot.data = data.into();
        let file = SnapshotFile {
            index,
            term,
            first_segment,
            hard_state: hs.clone(),
            conf_state: snapshot.get_metadata().get_conf_state().clone(),
            data: snapshot.data.to_vec(),
        };
        format::write_snapshot(&i.dir, &file, i.opts.sync)?;
        let head = format::Head {
            newest_segment: i.current().seq,
            snapshot_index: index,
        };
        format::write_head(&i.dir, head, i.opts.sync)?;
        let drop = (index - i.snap_index()) as usize;
        i.entries.drain(..drop);
        i.snapshot = snapshot;
        i.hard_state = hs;
        i.remove_obsolete(first_segment);
        Ok(())
    }

    /// Records a new `ConfState` (after applying a conf change), durably.
    pub fn set_conf_state(&self, conf_state: ConfState) -> Result<(), StorageError> {
        let mut i = self.inner.write();
        let payload = format::state_payload(&i.hard_state, &conf_state, i.log_end())?;
        i.write_record(format::REC_STATE, &payload, 0)?;
        i.conf_state = conf_state;
        Ok(())
    }

    pub fn hard_state(&self) -> HardState {
        self.rl().hard_state.clone()
    }

    pub fn conf_state(&self) -> ConfState {
        self.rl().conf_state.clone()
    }

    /// The latest snapshot (an empty `Snapshot` if none): the node restores its state machine
    /// from its data on restart.
    pub fn snapshot_now(&self) -> Snapshot {
        self.rl().snapshot.clone()
    }

    /// The index of the latest snapshot (0 if none), without copying its data.
    pub fn snapshot_index(&self) -> u64 {
        self.rl().snapshot.get_metadata().index
    }

    /// Bytes of log segments currently on disk.
    pub fn log_bytes(&self) -> u64 {
        self.rl().segments.iter().map(|s| s.bytes).sum()
    }

    /// Number of entries after the snapshot.
    pub fn entries_len(&self) -> u64 {
        self.rl().entries.len() as u64
    }

    /// Number of log segment files currently live.
    pub fn segment_count(&self) -> usize {
        self.rl().segments.len()
    }

    /// The directory of this storage.
    pub fn dir(&self) -> PathBuf {
        self.rl().dir.clone()
    }
}

impl raft::Storage for DiskStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let i = self.rl();
        Ok(RaftState::new(i.hard_state.clone(), i.conf_state.clone()))
    }

    /// Entries `[low, high)`, at least one if any, limited to `max_size` bytes. `low` below
    /// the first index: `Compacted`; `high` past `last_index + 1` (or `low > high`):
    /// `Unavailable` (`MemStorage` panics there).
    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let i = self.rl();
        if low < i.first_index() {
            return Err(raft::Error::Store(raft::StorageError::Compacted));
        }
        if high > i.last_index() + 1 || low > high {
            return Err(raft::Error::Store(raft::StorageError::Unavailable));
        }
        let off = i.first_index();
        let mut ents = i.entries[(low - off) as usize..(high - off) as usize].to_vec();
        raft::util::limit_size(&mut ents, max_size.into());
        Ok(ents)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        self.rl().term(idx)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.rl().first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.rl().last_index())
    }

    /// The stored snapshot if its index is at least `request_index`; otherwise (or if there is
    /// none) `SnapshotTemporarilyUnavailable`: the node should compact to make a newer one.
    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let i = self.rl();
        let index = i.snap_index();
        if index == 0 || index < request_index {
            return Err(raft::Error::Store(
                raft::StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        Ok(i.snapshot.clone())
    }
}

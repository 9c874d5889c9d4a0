//! The commit log: numbered fragments of checksummed, compressed blocks (docs/formats/commitlog.md).
//!
//! [`CommitLog`] appends entries with group commit: appenders queue their entry and wait; one
//! writer thread turns everything queued into one block and one `append` call with the strongest
//! durability asked for. [`replay`] and [`CommitLog::replay_existing`] read the entries back,
//! cutting a torn block only at the end of the newest fragment and refusing damage, truncation
//! and missing fragments anywhere else ([`plan`]).

pub(crate) mod block;
pub mod entry;
mod fragment;
mod plan;
mod writer;

use std::sync::Arc;
use std::thread::JoinHandle;

use common::Durability;
use dfs_broker::{AppendFlag, BlockingFs};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::{Error, Result};
use fragment::Tail;
use writer::{Cur, Fragments, Shared, Writer};

pub use block::{BLOCK_HEADER_BYTES, MAX_PAYLOAD_BYTES};
pub use entry::EntryLayout;
pub use plan::{LogRecord, LogTrack, Recorder};

/// Tuning of a [`CommitLog`].
#[derive(Debug, Clone)]
pub struct CommitLogOptions {
    /// Roll to a new fragment when the current one passes this.
    pub fragment_size_bytes: u64,
    /// Most uncompressed payload bytes grouped into one block; also the largest entry.
    pub max_block_bytes: usize,
    /// Bound on bytes waiting in the group-commit queue; appenders block beyond it.
    pub queue_limit_bytes: usize,
    /// lz4 the block payloads (kept only where that shrinks them).
    pub compress: bool,
}

impl Default for CommitLogOptions {
    fn default() -> Self {
        CommitLogOptions {
            fragment_size_bytes: 64 << 20,
            max_block_bytes: 4 << 20,
            queue_limit_bytes: 64 << 20,
            compress: true,
        }
    }
}

/// Number, size and max revision of one fragment on disk.
#[derive(Debug, Clone, PartialEq)]
pub struct FragmentInfo {
    pub number: u64,
    pub size_bytes: u64,
    /// Highest revision of any entry in the fragment; `i64::MIN` if it has none, `i64::MAX` if
    /// its blocks could not be read at open (so purge never removes what it cannot vouch for).
    pub max_revision: i64,
}

/// What a replay read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayStats {
    pub fragments: u64,
    pub blocks: u64,
    pub entries: u64,
    /// Incomplete or damaged blocks at the end of the newest fragment that were cut.
    pub torn_blocks: u64,
    /// Bytes cut with them.
    pub cut_bytes: u64,
    /// Sum of the lengths of the entries delivered.
    pub bytes: u64,
}

/// A commit log open for appending. `Send + Sync`; share it as `Arc<CommitLog>`.
pub struct CommitLog {
    shared: Arc<Shared>,
    fs: BlockingFs,
    /// Fragments numbered below this existed when the log was opened.
    first_new: u64,
    /// How far each fragment that existed at open is read (its end, checked at open).
    ends: Vec<(u64, u64)>,
    recorder: Option<Recorder>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for CommitLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CommitLog({}, first new fragment {})",
            self.shared.dir, self.first_new
        )
    }
}

fn append_flag(d: Durability) -> AppendFlag {
    match d {
        Durability::None | Durability::Log => AppendFlag::None,
        Durability::Flush => AppendFlag::Flush,
        Durability::Sync => AppendFlag::Sync,
    }
}

impl CommitLog {
    /// Opens (creating) the log directory without a record of its fragments: they must be
    /// numbered without gaps and only the highest may end torn. See [`open_tracked`](Self::open_tracked).
    pub fn open(fs: BlockingFs, dir: &str, opts: CommitLogOptions) -> Result<Self> {
        Self::open_tracked(fs, dir, opts, None, None)
    }

    /// Opens (creating) the log directory. Existing fragments are checked against `track` (what
    /// the owner recorded; see [`plan`]) and left for replay; the newest one's torn tail, if any,
    /// is cut here with a warning. New appends go to a new fragment numbered after the highest
    /// one, created by the first append. `recorder` is called, before the log acts, with every
    /// change the owner must record: the first append's fragment (with the ends of the fragments
    /// found here), each roll, the close, each purge.
    pub fn open_tracked(
        fs: BlockingFs,
        dir: &str,
        opts: CommitLogOptions,
        track: Option<LogTrack>,
        recorder: Option<Recorder>,
    ) -> Result<Self> {
        if opts.max_block_bytes == 0 || opts.max_block_bytes > MAX_PAYLOAD_BYTES - 16 {
            return Err(Error::InvalidInput(format!(
                "commit log {dir}: max_block_bytes must be in 1..={}",
                MAX_PAYLOAD_BYTES - 16
            )));
        }
        fs.mkdirs(dir)?;
        let listed = fragment::list(&fs, dir)?;
        let plan = plan::plan(dir, &listed, track.as_ref())?;
        let mut list = Vec::new();
        for &n in &plan.leftovers {
            // Purged, but not yet removed: every cell in it is flushed.
            list.push(FragmentInfo {
                number: n,
                size_bytes: listed.iter().find(|f| f.0 == n).map_or(0, |f| f.1),
                max_revision: i64::MIN,
            });
        }
        let mut ends = Vec::new();
        for &(number, tail) in &plan.read {
            let path = dfs_broker::join(dir, &number.to_string());
            let s = match tail {
                Tail::End(_) => fragment::scan(&fs, &path, number, tail, None)?,
                // The one fragment that may be torn is read whole here, to know where it ends.
                Tail::MayTear => {
                    fragment::scan(&fs, &path, number, tail, Some(&mut |_, _| Ok(())))?
                }
            };
            ends.push((number, s.valid_end));
            list.push(FragmentInfo {
                number,
                size_bytes: s.valid_end,
                max_revision: s.max_revision,
            });
        }
        let highest = listed
            .last()
            .map(|f| f.0)
            .max(track.as_ref().and_then(|t| t.created));
        let first_new = match highest {
            None => 0,
            Some(n) => n.checked_add(1).ok_or_else(|| {
                Error::InvalidInput(format!("commit log {dir}: fragment numbers are exhausted"))
            })?,
        };
        // What the first append records before it creates its fragment: where every fragment
        // found here ends (a torn tail cut now stays cut), and, for a log not tracked before,
        // where its fragments start.
        let recorded = track.as_ref().map(|t| &t.ends);
        let record = LogRecord {
            start: match &track {
                Some(_) => None,
                None => Some(listed.first().map_or(first_new, |f| f.0)),
            },
            ends: ends
                .iter()
                .copied()
                .filter(|(n, e)| recorded.and_then(|r| r.get(n)) != Some(e))
                .collect(),
            created: Some(first_new),
        };
        let shared = Arc::new(Shared::new(
            dir.to_string(),
            opts,
            Fragments {
                list,
                current: first_new,
            },
        ));
        let writer = Writer::new(
            shared.clone(),
            fs.clone(),
            Cur::Pending {
                number: first_new,
                record,
            },
            recorder.clone(),
        );
        let thread = std::thread::Builder::new()
            .name("ht-commitlog".into())
            .spawn(move || writer.run())
            .map_err(|e| {
                Error::Internal(format!(
                    "commit log {dir}: cannot start the writer thread: {e}"
                ))
            })?;
        Ok(CommitLog {
            shared,
            fs,
            first_new,
            ends,
            recorder,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Appends one entry (at most `max_block_bytes`) whose cells have revisions <= `max_revision`
    /// and returns once it is as durable as `durability` says. Blocking; concurrent callers share
    /// one block append and one flush/sync (group commit).
    pub fn append(&self, entry: &[u8], max_revision: i64, durability: Durability) -> Result<()> {
        let ticket = self
            .shared
            .submit(
                entry,
                max_revision,
                append_flag(durability),
                &mut None,
                true,
            )?
            .expect("a blocking submit waits for room instead of giving up");
        self.shared.wait(ticket)
    }

    /// [`append`](Self::append) for async callers; never blocks the runtime thread.
    pub async fn append_async(
        &self,
        entry: Vec<u8>,
        max_revision: i64,
        durability: Durability,
    ) -> Result<()> {
        let flag = append_flag(durability);
        let (tx, rx) = oneshot::channel();
        let mut waiter = Some(tx);
        if self
            .shared
            .submit(&entry, max_revision, flag, &mut waiter, false)?
            .is_none()
        {
            // The queue is full: wait for room on a blocking thread.
            let shared = self.shared.clone();
            self.fs
                .handle()
                .spawn_blocking(move || {
                    shared
                        .submit(&entry, max_revision, flag, &mut waiter, true)
                        .map(|_| ())
                })
                .await
                .map_err(|e| Error::Internal(format!("commit log append task failed: {e}")))??;
        }
        rx.await.map_err(|_| Error::Closed)?
    }

    /// Closes the current fragment and starts the next one.
    pub fn roll(&self) -> Result<()> {
        let ticket = self.shared.submit_control(false)?;
        self.shared.wait(ticket)
    }

    /// Removes the fragments, lowest first and other than the current one, whose entries all
    /// have revision <= `revision` (stopping at the first that has a later one). Returns how
    /// many it removed.
    pub fn purge(&self, revision: i64) -> Result<usize> {
        // Only a prefix goes, so the fragments left are numbered without gaps; the new start is
        // recorded first, so a crash part-way leaves only fragments that are known purged.
        let victims: Vec<FragmentInfo> = {
            let mut f = self.shared.frags.lock();
            let current = f.current;
            let n = f
                .list
                .iter()
                .take_while(|i| i.number != current && i.max_revision <= revision)
                .count();
            if n == 0 {
                return Ok(0);
            }
            if let Some(rec) = &self.recorder {
                let start = f.list[n - 1].number + 1;
                rec(&LogRecord {
                    start: Some(start),
                    ..LogRecord::default()
                })?;
            }
            f.list.drain(..n).collect()
        };
        let mut removed = 0;
        let mut first_err = None;
        for v in victims {
            let path = dfs_broker::join(&self.shared.dir, &v.number.to_string());
            match self.fs.remove(&path) {
                Ok(()) => removed += 1,
                Err(e) if e.is_not_found() => removed += 1,
                Err(e) => {
                    let mut f = self.shared.frags.lock();
                    let at = f.list.partition_point(|i| i.number < v.number);
                    f.list.insert(at, v);
                    first_err.get_or_insert(e);
                }
            }
        }
        if removed > 0 {
            tracing::debug!(dir = %self.shared.dir, removed, revision, "commit-log fragments purged");
        }
        match first_err {
            Some(e) => Err(e.into()),
            None => Ok(removed),
        }
    }

    /// Numbers, sizes and max revisions of the fragments on disk, by number.
    pub fn fragments(&self) -> Vec<FragmentInfo> {
        self.shared.frags.lock().list.clone()
    }

    /// What the log holds now, as a record that starts tracking it: its first fragment, the
    /// ends of those it found at open, the highest number on disk.
    pub fn current_record(&self) -> LogRecord {
        let f = self.shared.frags.lock();
        LogRecord {
            start: Some(f.list.first().map_or(self.first_new, |i| i.number)),
            ends: self.ends.clone(),
            created: self.first_new.checked_sub(1),
        }
    }

    /// The number of the first fragment this log created; lower ones existed when it was opened.
    pub fn first_new_fragment(&self) -> u64 {
        self.first_new
    }

    /// Replays the fragments that existed when this log was opened (and have not been purged
    /// since), each up to the end checked at open.
    pub fn replay_existing(
        &self,
        mut f: impl FnMut(&[u8], EntryLayout) -> Result<()>,
    ) -> Result<ReplayStats> {
        let present: Vec<u64> = self
            .shared
            .frags
            .lock()
            .list
            .iter()
            .map(|i| i.number)
            .collect();
        let mut stats = ReplayStats::default();
        for &(number, end) in &self.ends {
            if present.binary_search(&number).is_err() {
                continue;
            }
            let path = dfs_broker::join(&self.shared.dir, &number.to_string());
            let s = fragment::scan(&self.fs, &path, number, Tail::End(end), Some(&mut f))?;
            stats.add(&s);
        }
        Ok(stats)
    }

    /// Reads every entry of the commit log in `dir` without opening it for appending: nothing
    /// is written, created, repaired or removed (recovery reads a dead server's log with this
    /// while that server's files must stay as they are). `track` is what its owner recorded
    /// (from its meta log); the rules are those of [`plan`], as at open.
    pub fn replay_dir(
        fs: &BlockingFs,
        dir: &str,
        track: Option<&LogTrack>,
        mut f: impl FnMut(&[u8], EntryLayout) -> Result<()>,
    ) -> Result<ReplayStats> {
        let listed = fragment::list(fs, dir)?;
        let plan = plan::plan(dir, &listed, track)?;
        let mut stats = ReplayStats::default();
        for (number, tail) in plan.read {
            let path = dfs_broker::join(dir, &number.to_string());
            let s = fragment::scan(fs, &path, number, tail, Some(&mut f))?;
            stats.add(&s);
        }
        Ok(stats)
    }

    /// Flushes and syncs what is buffered and stops the writer thread. Further appends fail
    /// with [`Error::Closed`]. Returns the log's write failure, if it had one.
    pub fn close(&self) -> Result<()> {
        let mut thread = self.thread.lock();
        let Some(handle) = thread.take() else {
            return Ok(());
        };
        let res = match self.shared.submit_control(true) {
            Ok(ticket) => self.shared.wait(ticket),
            Err(e) => Err(e),
        };
        handle.join().map_err(|_| {
            Error::Internal(format!(
                "commit log {}: writer thread panicked",
                self.shared.dir
            ))
        })?;
        res
    }
}

impl Drop for CommitLog {
    fn drop(&mut self) {
        if self.thread.get_mut().is_some()
            && let Err(e) = self.close()
        {
            tracing::warn!(dir = %self.shared.dir, error = %e, "commit log close on drop failed");
        }
    }
}

/// Reads every entry of every fragment in `dir`, in fragment-number then block order, calling
/// `f` with each, for a log read without its owner's record: the fragments must be numbered
/// without gaps and only the highest may end in a torn block (cut with a warning); any other
/// damage is an error naming the file and offset. Stops early and returns f's error if f fails.
pub fn replay(
    fs: &BlockingFs,
    dir: &str,
    f: impl FnMut(&[u8], EntryLayout) -> Result<()>,
) -> Result<ReplayStats> {
    CommitLog::replay_dir(fs, dir, None, f)
}

impl ReplayStats {
    fn add(&mut self, s: &fragment::FragmentScan) {
        self.fragments += 1;
        self.blocks += s.blocks;
        self.entries += s.entries;
        self.torn_blocks += s.torn_blocks;
        self.cut_bytes += s.len - s.valid_end;
        self.bytes += s.entry_bytes;
    }
}

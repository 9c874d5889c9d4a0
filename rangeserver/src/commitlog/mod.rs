//! The commit log: numbered fragments of checksummed, compressed blocks (docs/formats/commitlog.md).
//!
//! [`CommitLog`] appends entries with group commit: appenders queue their entry and wait; one
//! writer thread turns everything queued into one block and one `append` call with the strongest
//! durability asked for. [`replay`] and [`CommitLog::replay_existing`] read the entries back,
//! skipping a torn block at the end of a fragment and refusing corruption anywhere else.

pub(crate) mod block;
mod fragment;
mod writer;

use std::sync::Arc;
use std::thread::JoinHandle;

use common::Durability;
use dfs_broker::{AppendFlag, BlockingFs};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::{Error, Result};
use fragment::FRAGMENT_HEADER_BYTES;
use writer::{Fragments, Shared, Writer};

pub use block::{BLOCK_HEADER_BYTES, MAX_PAYLOAD_BYTES};

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
    /// Incomplete or damaged blocks at the end of a fragment that were skipped.
    pub torn_blocks: u64,
    /// Sum of the lengths of the entries delivered.
    pub bytes: u64,
}

/// A commit log open for appending. `Send + Sync`; share it as `Arc<CommitLog>`.
pub struct CommitLog {
    shared: Arc<Shared>,
    fs: BlockingFs,
    /// Fragments numbered below this existed when the log was opened.
    first_new: u64,
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
    /// Opens (creating) the log directory. Existing fragments are left for `replay`; new appends
    /// go to a new fragment numbered after the highest existing one. Scans the existing
    /// fragments' block headers (not payloads) to learn each fragment's max revision, for `purge`.
    pub fn open(fs: BlockingFs, dir: &str, opts: CommitLogOptions) -> Result<Self> {
        if opts.max_block_bytes == 0 || opts.max_block_bytes > MAX_PAYLOAD_BYTES - 16 {
            return Err(Error::InvalidInput(format!(
                "commit log {dir}: max_block_bytes must be in 1..={}",
                MAX_PAYLOAD_BYTES - 16
            )));
        }
        fs.mkdirs(dir)?;
        let mut list = Vec::new();
        for (number, len) in fragment::list(&fs, dir)? {
            let path = dfs_broker::join(dir, &number.to_string());
            let max_revision = match fragment::scan(&fs, &path, number, None) {
                Ok(s) => s.max_revision,
                Err(e) => {
                    tracing::warn!(file = %path, error = %e, "commit-log fragment unreadable at open; purge will keep it");
                    i64::MAX
                }
            };
            list.push(FragmentInfo {
                number,
                size_bytes: len,
                max_revision,
            });
        }
        let first_new = match list.last() {
            None => 0,
            Some(f) => f.number.checked_add(1).ok_or_else(|| {
                Error::InvalidInput(format!("commit log {dir}: fragment numbers are exhausted"))
            })?,
        };
        let w = writer::create_fragment(&fs, dir, first_new)?;
        list.push(FragmentInfo {
            number: first_new,
            size_bytes: FRAGMENT_HEADER_BYTES as u64,
            max_revision: i64::MIN,
        });
        let shared = Arc::new(Shared::new(
            dir.to_string(),
            opts,
            Fragments {
                list,
                current: first_new,
            },
        ));
        let writer = Writer::new(shared.clone(), fs.clone(), first_new, w);
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

    /// Removes every fragment other than the current one whose entries all have revision <=
    /// `revision`. Returns how many it removed.
    pub fn purge(&self, revision: i64) -> Result<usize> {
        let victims: Vec<FragmentInfo> = {
            let mut f = self.shared.frags.lock();
            let current = f.current;
            let (victims, keep) = std::mem::take(&mut f.list)
                .into_iter()
                .partition(|i| i.number != current && i.max_revision <= revision);
            f.list = keep;
            victims
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

    /// The number of the first fragment this log created; lower ones existed when it was opened.
    pub fn first_new_fragment(&self) -> u64 {
        self.first_new
    }

    /// Replays the fragments that existed when this log was opened (and have not been purged
    /// since), like [`replay`].
    pub fn replay_existing(&self, f: impl FnMut(&[u8]) -> Result<()>) -> Result<ReplayStats> {
        let first_new = self.first_new;
        replay_filtered(&self.fs, &self.shared.dir, |n| n < first_new, f)
    }

    /// Reads every entry of the commit log in `dir` without opening it for appending: nothing
    /// is written, created, repaired or removed (recovery reads a dead server's log with this
    /// while that server's files must stay as they are). Same checksum and torn-tail rules as
    /// replay at open ([`replay`]).
    pub fn replay_dir(
        fs: &BlockingFs,
        dir: &str,
        f: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<ReplayStats> {
        replay(fs, dir, f)
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
/// `f` with each. Stops early and returns f's error if f fails. A torn block at the end of a
/// fragment is skipped and counted; damage followed by valid blocks is an [`Error::Checksum`].
pub fn replay(
    fs: &BlockingFs,
    dir: &str,
    f: impl FnMut(&[u8]) -> Result<()>,
) -> Result<ReplayStats> {
    replay_filtered(fs, dir, |_| true, f)
}

fn replay_filtered(
    fs: &BlockingFs,
    dir: &str,
    want: impl Fn(u64) -> bool,
    mut f: impl FnMut(&[u8]) -> Result<()>,
) -> Result<ReplayStats> {
    let mut stats = ReplayStats::default();
    for (number, _) in fragment::list(fs, dir)? {
        if !want(number) {
            continue;
        }
        let path = dfs_broker::join(dir, &number.to_string());
        let s = fragment::scan(fs, &path, number, Some(&mut f))?;
        stats.fragments += 1;
        stats.blocks += s.blocks;
        stats.entries += s.entries;
        stats.torn_blocks += s.torn_blocks;
        stats.bytes += s.entry_bytes;
    }
    Ok(stats)
}

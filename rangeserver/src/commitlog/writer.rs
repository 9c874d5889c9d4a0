//! The group-commit queue and the single writer thread that drains it.
//!
//! Appenders frame their entry straight into the open batch at the back of the queue (one copy)
//! and wait for its ticket. The writer pops one item at a time, in order: a batch becomes one
//! block written with one `append` call carrying the strongest durability any of its appenders
//! asked for; `Roll` and `Close` are ordered with the batches around them. Tickets are processed
//! strictly in order, so "ticket `t` is done" is `completed > t`.

use std::collections::VecDeque;
use std::sync::Arc;

use dfs_broker::{AppendFlag, BlockingFs, BlockingWriter};
use parking_lot::{Condvar, Mutex, MutexGuard};
use tokio::sync::oneshot;

use super::block::{BLOCK_HEADER_BYTES, put_entry, seal};
use super::fragment::{FRAGMENT_HEADER_BYTES, encode_header};
use super::plan::{LogRecord, Recorder};
use super::{CommitLogOptions, FragmentInfo};
use crate::{Error, Result};
use common::codec::varint_len;

/// Spare batch buffers kept for reuse; more would only pin memory.
const POOL_BUFFERS: usize = 4;
/// Initial capacity of a new batch buffer; it grows up to max_block_bytes and keeps its size.
const INITIAL_BATCH_BYTES: usize = 256 * 1024;

pub(super) type AsyncWaiter = oneshot::Sender<Result<()>>;

/// One queued unit of work for the writer.
enum Item {
    Batch(Batch),
    Roll { ticket: u64 },
    Close { ticket: u64 },
}

/// Entries that will become one block.
struct Batch {
    ticket: u64,
    /// `BLOCK_HEADER_BYTES` reserved for the header, then the framed entries.
    buf: Vec<u8>,
    entries: u32,
    max_revision: i64,
    flag: AppendFlag,
    async_waiters: Vec<AsyncWaiter>,
}

impl Batch {
    fn payload_len(&self) -> usize {
        self.buf.len() - BLOCK_HEADER_BYTES
    }
}

struct State {
    queue: VecDeque<Item>,
    /// Framed entry bytes in queued batches (bounded by queue_limit_bytes).
    queued_bytes: usize,
    next_ticket: u64,
    /// Every ticket below this has been processed (successfully or not).
    completed: u64,
    /// The first ticket that failed and why; it and every later ticket fail.
    failure: Option<(u64, String)>,
    /// close() has been called: nothing new is accepted.
    closing: bool,
    pool: Vec<Vec<u8>>,
}

/// Fragment bookkeeping shared by the writer (which grows the current fragment) and purge.
pub(super) struct Fragments {
    /// Every fragment on disk, sorted by number; the current one is last.
    pub list: Vec<FragmentInfo>,
    pub current: u64,
}

/// What appenders, control calls and the writer thread share.
pub(super) struct Shared {
    state: Mutex<State>,
    /// Signalled when an item is queued (the writer waits on it).
    work: Condvar,
    /// Signalled when queued bytes drop, on failure and on close (appenders wait on it).
    room: Condvar,
    /// Signalled when tickets complete.
    done: Condvar,
    pub frags: Mutex<Fragments>,
    pub opts: CommitLogOptions,
    pub dir: String,
}

impl Shared {
    pub fn new(dir: String, opts: CommitLogOptions, frags: Fragments) -> Self {
        Shared {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                queued_bytes: 0,
                next_ticket: 0,
                completed: 0,
                failure: None,
                closing: false,
                pool: Vec::new(),
            }),
            work: Condvar::new(),
            room: Condvar::new(),
            done: Condvar::new(),
            frags: Mutex::new(frags),
            opts,
            dir,
        }
    }

    fn failure_error(&self, msg: &str) -> Error {
        Error::Internal(format!(
            "commit log {}: a write failed, the log accepts no more appends: {msg}",
            self.dir
        ))
    }

    /// Ok if new work may be queued.
    fn check_open(&self, st: &State) -> Result<()> {
        if st.closing {
            return Err(Error::Closed);
        }
        if let Some((_, msg)) = &st.failure {
            return Err(self.failure_error(msg));
        }
        Ok(())
    }

    /// Queues one entry. Waits for queue room if `block`; otherwise returns `Ok(None)` when the
    /// queue is full. On success `waiter` (if any) has been taken and the entry's ticket returned.
    pub fn submit(
        &self,
        entry: &[u8],
        max_revision: i64,
        flag: AppendFlag,
        waiter: &mut Option<AsyncWaiter>,
        block: bool,
    ) -> Result<Option<u64>> {
        if entry.len() > self.opts.max_block_bytes {
            return Err(Error::InvalidInput(format!(
                "commit log {}: entry of {} bytes exceeds max_block_bytes ({})",
                self.dir,
                entry.len(),
                self.opts.max_block_bytes
            )));
        }
        let need = varint_len(entry.len() as u64) + entry.len();
        let mut st = self.state.lock();
        loop {
            self.check_open(&st)?;
            // One entry may always be queued, however large, so progress never stalls.
            if st.queued_bytes == 0 || st.queued_bytes + need <= self.opts.queue_limit_bytes {
                break;
            }
            if !block {
                return Ok(None);
            }
            self.room.wait(&mut st);
        }
        let fits = matches!(st.queue.back(),
            Some(Item::Batch(b)) if b.payload_len() + need <= self.opts.max_block_bytes);
        if !fits {
            let ticket = st.next_ticket;
            st.next_ticket += 1;
            let mut buf = st.pool.pop().unwrap_or_else(|| {
                Vec::with_capacity(
                    BLOCK_HEADER_BYTES + INITIAL_BATCH_BYTES.min(self.opts.max_block_bytes + 16),
                )
            });
            buf.clear();
            buf.resize(BLOCK_HEADER_BYTES, 0);
            st.queue.push_back(Item::Batch(Batch {
                ticket,
                buf,
                entries: 0,
                max_revision: i64::MIN,
                flag: AppendFlag::None,
                async_waiters: Vec::new(),
            }));
        }
        st.queued_bytes += need;
        let Some(Item::Batch(b)) = st.queue.back_mut() else {
            unreachable!("a batch was just found or pushed at the back of the queue");
        };
        put_entry(&mut b.buf, entry);
        b.entries += 1;
        b.max_revision = b.max_revision.max(max_revision);
        b.flag = b.flag.max(flag);
        if let Some(w) = waiter.take() {
            b.async_waiters.push(w);
        }
        let ticket = b.ticket;
        drop(st);
        self.work.notify_one();
        Ok(Some(ticket))
    }

    /// Queues a roll (or, with `close`, the final close) and returns its ticket.
    pub fn submit_control(&self, close: bool) -> Result<u64> {
        let mut st = self.state.lock();
        if close {
            // Close is accepted even after a failure: the writer thread must still stop.
            if st.closing {
                return Err(Error::Closed);
            }
            st.closing = true;
            self.room.notify_all();
        } else {
            self.check_open(&st)?;
        }
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.queue.push_back(if close {
            Item::Close { ticket }
        } else {
            Item::Roll { ticket }
        });
        drop(st);
        self.work.notify_one();
        Ok(ticket)
    }

    /// Blocks until `ticket` has been processed and returns its outcome.
    pub fn wait(&self, ticket: u64) -> Result<()> {
        let mut st = self.state.lock();
        while st.completed <= ticket {
            self.done.wait(&mut st);
        }
        self.outcome(&st, ticket)
    }

    fn outcome(&self, st: &State, ticket: u64) -> Result<()> {
        match &st.failure {
            Some((first, msg)) if ticket >= *first => Err(self.failure_error(msg)),
            _ => Ok(()),
        }
    }

    /// Marks `ticket` processed, recording `failed` as the log's failure if it is the first.
    fn complete(
        &self,
        mut st: MutexGuard<'_, State>,
        ticket: u64,
        failed: Option<String>,
    ) -> Result<()> {
        if let Some(msg) = failed
            && st.failure.is_none()
        {
            tracing::error!(dir = %self.dir, error = %msg, "commit log write failed; refusing further appends");
            st.failure = Some((ticket, msg));
            self.room.notify_all();
        }
        debug_assert_eq!(st.completed, ticket, "tickets complete in order");
        st.completed = ticket + 1;
        let outcome = self.outcome(&st, ticket);
        drop(st);
        self.done.notify_all();
        outcome
    }
}

/// The fragment being appended to.
pub(super) struct Current {
    number: u64,
    w: BlockingWriter,
}

/// The fragment the writer appends to.
pub(super) enum Cur {
    /// Not created yet: the first append creates it (so an open that writes nothing leaves no
    /// file), after recording `record` (the ends of the fragments it found, and the new number).
    Pending {
        number: u64,
        record: LogRecord,
    },
    Open(Current),
    /// A roll failed: nothing can be appended any more.
    Broken,
}

/// Creates fragment `number` in `dir` and writes its header.
pub(super) fn create_fragment(fs: &BlockingFs, dir: &str, number: u64) -> Result<BlockingWriter> {
    let mut w = fs.create(&dfs_broker::join(dir, &number.to_string()), false)?;
    w.append(&encode_header(number), AppendFlag::None)?;
    Ok(w)
}

/// The writer thread: owns the current fragment and processes queue items until `Close`.
pub(super) struct Writer {
    shared: Arc<Shared>,
    fs: BlockingFs,
    cur: Cur,
    recorder: Option<Recorder>,
    /// Reused compression output buffer.
    scratch: Vec<u8>,
}

impl Writer {
    pub fn new(shared: Arc<Shared>, fs: BlockingFs, cur: Cur, recorder: Option<Recorder>) -> Self {
        Writer {
            shared,
            fs,
            cur,
            recorder,
            scratch: Vec::new(),
        }
    }

    fn record(&self, r: &LogRecord) -> std::result::Result<(), String> {
        match &self.recorder {
            Some(rec) => rec(r).map_err(|e| format!("recording commit-log fragments: {e}")),
            None => Ok(()),
        }
    }

    /// Creates fragment `number`, records it, and makes it current.
    fn start_fragment(
        &mut self,
        number: u64,
        record: &LogRecord,
    ) -> std::result::Result<(), String> {
        self.cur = Cur::Broken;
        // Created, then recorded, then appended to: a crash between leaves an unrecorded file
        // with at most a header, which the next open accepts (plan.rs).
        let w = create_fragment(&self.fs, &self.shared.dir, number).map_err(|e| e.to_string())?;
        self.record(record)?;
        let mut f = self.shared.frags.lock();
        f.list.push(FragmentInfo {
            number,
            size_bytes: FRAGMENT_HEADER_BYTES as u64,
            max_revision: i64::MIN,
        });
        f.current = number;
        drop(f);
        self.cur = Cur::Open(Current { number, w });
        Ok(())
    }

    pub fn run(mut self) {
        let _guard = PanicGuard(self.shared.clone());
        loop {
            let (item, failed) = {
                let mut st = self.shared.state.lock();
                let item = loop {
                    if let Some(item) = st.queue.pop_front() {
                        break item;
                    }
                    self.shared.work.wait(&mut st);
                };
                if let Item::Batch(b) = &item {
                    st.queued_bytes -= b.payload_len();
                    self.shared.room.notify_all();
                }
                (item, st.failure.is_some())
            };
            match item {
                Item::Batch(mut b) => {
                    let res = if failed {
                        Ok(())
                    } else {
                        self.write_batch(&mut b)
                    };
                    let mut st = self.shared.state.lock();
                    if st.pool.len() < POOL_BUFFERS {
                        st.pool.push(std::mem::take(&mut b.buf));
                    }
                    let outcome = self.shared.complete(st, b.ticket, res.err());
                    for w in b.async_waiters {
                        let _ = w.send(clone_outcome(&outcome));
                    }
                    if outcome.is_ok() && self.over_size() {
                        let res = self.roll();
                        if let Err(msg) = res {
                            self.fail_from(b.ticket + 1, msg);
                        }
                    }
                }
                Item::Roll { ticket } => {
                    let res = if failed { Ok(()) } else { self.roll() };
                    let st = self.shared.state.lock();
                    let _ = self.shared.complete(st, ticket, res.err());
                }
                Item::Close { ticket } => {
                    let res = match std::mem::replace(&mut self.cur, Cur::Broken) {
                        Cur::Open(mut c) if !failed => {
                            c.w.close().map_err(|e| e.to_string()).and_then(|()| {
                                self.record(&LogRecord {
                                    ends: vec![(c.number, c.w.position())],
                                    ..LogRecord::default()
                                })
                            })
                        }
                        Cur::Open(mut c) => {
                            // Best effort: the log already failed and reports that.
                            let _ = c.w.close();
                            Ok(())
                        }
                        Cur::Pending { .. } | Cur::Broken => Ok(()),
                    };
                    let st = self.shared.state.lock();
                    let _ = self.shared.complete(st, ticket, res.err());
                    return;
                }
            }
        }
    }

    /// Records a failure that is not tied to an item (a size-triggered roll): tickets from
    /// `first` on fail.
    fn fail_from(&self, first: u64, msg: String) {
        let mut st = self.shared.state.lock();
        if st.failure.is_none() {
            tracing::error!(dir = %self.shared.dir, error = %msg, "commit log roll failed; refusing further appends");
            st.failure = Some((first, msg));
        }
        drop(st);
        self.shared.room.notify_all();
        self.shared.done.notify_all();
    }

    fn over_size(&self) -> bool {
        matches!(&self.cur, Cur::Open(c) if c.w.position() >= self.shared.opts.fragment_size_bytes)
    }

    /// Seals the batch into a block and appends it with one call.
    fn write_batch(&mut self, b: &mut Batch) -> std::result::Result<(), String> {
        if let Cur::Pending { number, record } = &self.cur {
            let (number, record) = (*number, record.clone());
            self.start_fragment(number, &record)?;
        }
        let Cur::Open(cur) = &mut self.cur else {
            return Err("no current fragment (an earlier roll failed)".into());
        };
        let block = seal(
            &mut b.buf,
            &mut self.scratch,
            self.shared.opts.compress,
            b.entries,
            b.max_revision,
        );
        cur.w.append(block, b.flag).map_err(|e| e.to_string())?;
        let size = cur.w.position();
        let mut f = self.shared.frags.lock();
        if let Some(info) = f.list.last_mut() {
            debug_assert_eq!(info.number, cur.number);
            info.size_bytes = size;
            info.max_revision = info.max_revision.max(b.max_revision);
        }
        Ok(())
    }

    /// Closes the current fragment (flushing and syncing it) and starts the next one, recording
    /// the old one's end and the new number first. A log that has not written yet has nothing
    /// to roll.
    fn roll(&mut self) -> std::result::Result<(), String> {
        let mut cur = match std::mem::replace(&mut self.cur, Cur::Broken) {
            Cur::Open(c) => c,
            pending @ Cur::Pending { .. } => {
                self.cur = pending;
                return Ok(());
            }
            Cur::Broken => return Err("no current fragment (an earlier roll failed)".into()),
        };
        cur.w.close().map_err(|e| e.to_string())?;
        let number = cur.number + 1;
        self.start_fragment(
            number,
            &LogRecord {
                ends: vec![(cur.number, cur.w.position())],
                created: Some(number),
                start: None,
            },
        )?;
        tracing::debug!(dir = %self.shared.dir, fragment = number, "commit log rolled");
        Ok(())
    }
}

/// If the writer thread panics, fails the log and wakes everyone so no appender waits forever.
struct PanicGuard(Arc<Shared>);

impl Drop for PanicGuard {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let mut st = self.0.state.lock();
        if st.failure.is_none() {
            st.failure = Some((0, "the commit-log writer thread panicked".into()));
        }
        st.closing = true;
        st.completed = u64::MAX;
        // Dropping the queued batches drops their async waiters' senders: they see the log closed.
        st.queue.clear();
        drop(st);
        self.0.room.notify_all();
        self.0.done.notify_all();
    }
}

fn clone_outcome(r: &Result<()>) -> Result<()> {
    match r {
        Ok(()) => Ok(()),
        Err(e) => Err(Error::Internal(e.to_string())),
    }
}

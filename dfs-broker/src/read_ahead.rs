//! [`ReadAhead`]: what a networked [`FsReader`](crate::FsReader) does with
//! [`prefetch`](crate::FsReader::prefetch): it reads the hinted range in the background, in
//! one large request, into a *window* held in memory, and a later `pread` that falls inside a
//! window is answered from it (waiting for it if the read is still on its way).
//!
//! A cell-store scan reads its blocks in order and hints the next ~1 MiB of them at a time
//! (`rangeserver/src/cellstore/scanner.rs`); without a window, a remote backend pays one round
//! trip per 25 KiB block as the scanner gets there.
//!
//! Everything is bounded: a window is at most `window_bytes`, a reader keeps at most
//! `windows` (the least recently used goes), all readers of one client share a
//! [`ReadAheadBudget`] of bytes (a hint over it is ignored), and a window is dropped
//! `ttl` after its data arrived, read or not, so a scan that stops early pins nothing. A
//! window whose read fails answers nothing: the `pread` then reads as if there were no
//! window, and reports its own error, naming the file and offset.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::FutureExt as _;
use futures_util::future::{BoxFuture, Shared};
use parking_lot::Mutex;

use crate::FsResult;

/// Limits of one reader's read-ahead.
#[derive(Debug, Clone, Copy)]
pub struct ReadAheadOptions {
    /// Largest window (a longer hint is cut); 0 turns read-ahead off.
    pub window_bytes: usize,
    /// Windows one reader keeps; the least recently used is dropped for a new one.
    pub windows: usize,
    /// A window is dropped this long after its data arrived.
    pub ttl: Duration,
}

impl Default for ReadAheadOptions {
    fn default() -> Self {
        Self {
            window_bytes: 8 << 20,
            windows: 4,
            ttl: Duration::from_secs(10),
        }
    }
}

/// Bytes of read-ahead windows all the readers of one client may hold at once, with counters.
#[derive(Debug)]
pub struct ReadAheadBudget {
    limit: u64,
    used: AtomicU64,
    started: AtomicU64,
    hits: AtomicU64,
    refused: AtomicU64,
}

/// What a [`ReadAheadBudget`] has seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadAheadStats {
    /// Bytes held by windows now.
    pub bytes_held: u64,
    /// Windows started.
    pub windows_started: u64,
    /// Preads answered from a window.
    pub hits: u64,
    /// Hints ignored because the budget was spent.
    pub refused: u64,
}

impl ReadAheadBudget {
    pub fn new(limit_bytes: u64) -> Arc<Self> {
        Arc::new(Self {
            limit: limit_bytes,
            used: AtomicU64::new(0),
            started: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        })
    }

    pub fn stats(&self) -> ReadAheadStats {
        ReadAheadStats {
            bytes_held: self.used.load(Ordering::Relaxed),
            windows_started: self.started.load(Ordering::Relaxed),
            hits: self.hits.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
        }
    }

    fn take(self: &Arc<Self>, n: u64) -> Option<Grant> {
        let mut cur = self.used.load(Ordering::Relaxed);
        loop {
            if cur.saturating_add(n) > self.limit {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            match self
                .used
                .compare_exchange_weak(cur, cur + n, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    return Some(Grant {
                        budget: self.clone(),
                        n,
                    });
                }
                Err(now) => cur = now,
            }
        }
    }
}

/// Bytes taken from a budget, given back on drop.
struct Grant {
    budget: Arc<ReadAheadBudget>,
    n: u64,
}

impl Drop for Grant {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.n, Ordering::AcqRel);
    }
}

type Data = Shared<BoxFuture<'static, Option<Arc<Vec<u8>>>>>;

struct Window {
    id: u64,
    start: u64,
    end: u64,
    data: Data,
    used: u64,
    driver: tokio::task::JoinHandle<()>,
    _grant: Grant,
}

impl Drop for Window {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

#[derive(Default)]
struct Windows {
    list: Vec<Window>,
    tick: u64,
}

/// One reader's read-ahead windows (see the module documentation).
pub struct ReadAhead {
    options: ReadAheadOptions,
    budget: Arc<ReadAheadBudget>,
    /// The runtime the reads run on: the one the reader was opened on (hints come from
    /// synchronous engine threads). None: read-ahead is off.
    handle: Option<tokio::runtime::Handle>,
    windows: Arc<Mutex<Windows>>,
}

impl ReadAhead {
    /// Read-ahead on the current tokio runtime (off outside one).
    pub fn new(options: ReadAheadOptions, budget: Arc<ReadAheadBudget>) -> Self {
        Self {
            options,
            budget,
            handle: tokio::runtime::Handle::try_current().ok(),
            windows: Arc::default(),
        }
    }

    /// Starts reading `[offset, offset + len)` in the background with `fetch(offset, len)`,
    /// cut to `window_bytes` and to `file_len`, less what a window already covers. Ignored
    /// when read-ahead is off, nothing is left, or the budget is spent.
    pub fn start<F, Fut>(&self, offset: u64, len: usize, file_len: u64, fetch: F)
    where
        F: FnOnce(u64, usize) -> Fut,
        Fut: Future<Output = FsResult<Vec<u8>>> + Send + 'static,
    {
        let Some(handle) = &self.handle else {
            return;
        };
        if self.options.window_bytes == 0 || self.options.windows == 0 {
            return;
        }
        let end = offset
            .saturating_add(len.min(self.options.window_bytes) as u64)
            .min(file_len);
        let mut w = self.windows.lock();
        let mut start = offset;
        // Skip what the windows already cover (a scan's hints follow each other).
        while let Some(c) = w.list.iter().find(|c| c.start <= start && start < c.end) {
            start = c.end;
        }
        if start >= end {
            return;
        }
        let n = end - start;
        let Some(grant) = self.budget.take(n) else {
            return;
        };
        while w.list.len() >= self.options.windows {
            let lru = (0..w.list.len())
                .min_by_key(|&i| w.list[i].used)
                .unwrap_or(0);
            w.list.swap_remove(lru);
        }
        self.budget.started.fetch_add(1, Ordering::Relaxed);
        let read = fetch(start, n as usize);
        let data: Data = async move { read.await.ok().map(Arc::new) }
            .boxed()
            .shared();
        w.tick += 1;
        let id = w.tick;
        let driver = handle.spawn(drive(
            data.clone(),
            Arc::downgrade(&self.windows),
            id,
            self.options.ttl,
        ));
        let used = w.tick;
        w.list.push(Window {
            id,
            start,
            end,
            data,
            used,
            driver,
            _grant: grant,
        });
    }

    /// The bytes `[offset, offset + len)` when one window covers them (waiting for its read);
    /// None when none does or its read failed. A window read to its end is dropped.
    pub async fn read(&self, offset: u64, len: usize) -> Option<Vec<u8>> {
        let end = offset.checked_add(len as u64)?;
        let (start, data) = {
            let mut w = self.windows.lock();
            let i = w
                .list
                .iter()
                .position(|c| c.start <= offset && end <= c.end)?;
            w.tick += 1;
            let tick = w.tick;
            let c = &mut w.list[i];
            c.used = tick;
            let got = (c.start, c.data.clone());
            if end == c.end {
                w.list.swap_remove(i);
            }
            got
        };
        let bytes = data.await?;
        let at = usize::try_from(offset - start).ok()?;
        let out = bytes.get(at..at + len)?.to_vec();
        self.budget.hits.fetch_add(1, Ordering::Relaxed);
        Some(out)
    }

    /// Windows held now (for tests).
    pub fn windows(&self) -> usize {
        self.windows.lock().list.len()
    }
}

/// Drives a window's read to the end even when no pread waits for it, then drops the window
/// `ttl` later.
async fn drive(data: Data, windows: Weak<Mutex<Windows>>, id: u64, ttl: Duration) {
    data.await;
    tokio::time::sleep(ttl).await;
    if let Some(w) = windows.upgrade() {
        let gone = {
            let mut w = w.lock();
            w.list
                .iter()
                .position(|c| c.id == id)
                .map(|i| w.list.swap_remove(i))
        };
        // Dropping the window aborts this task: harmless, it ends here.
        drop(gone);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FsError;
    use std::sync::atomic::AtomicUsize;

    fn file() -> Arc<Vec<u8>> {
        Arc::new((0..100_000u32).map(|i| (i % 251) as u8).collect())
    }

    /// A fetch over `file` that counts its calls.
    fn fetcher(
        file: &Arc<Vec<u8>>,
        calls: &Arc<AtomicUsize>,
    ) -> impl FnOnce(u64, usize) -> BoxFuture<'static, FsResult<Vec<u8>>> {
        let (file, calls) = (file.clone(), calls.clone());
        move |off, len| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move { Ok(file[off as usize..off as usize + len].to_vec()) }.boxed()
        }
    }

    fn opts(window_bytes: usize, windows: usize) -> ReadAheadOptions {
        ReadAheadOptions {
            window_bytes,
            windows,
            ttl: Duration::from_secs(10),
        }
    }

    #[tokio::test]
    async fn a_window_answers_the_reads_it_covers_and_goes_when_read_to_its_end() {
        let (f, calls) = (file(), Arc::new(AtomicUsize::new(0)));
        let budget = ReadAheadBudget::new(1 << 20);
        let ra = ReadAhead::new(opts(10_000, 4), budget.clone());
        ra.start(1_000, 50_000, f.len() as u64, fetcher(&f, &calls));
        // Cut to window_bytes.
        assert_eq!(budget.stats().bytes_held, 10_000);
        assert_eq!(ra.read(1_000, 4_000).await.unwrap(), f[1_000..5_000]);
        assert_eq!(ra.read(5_000, 1).await.unwrap(), f[5_000..5_001]);
        // Not covered: outside, or across the window's end.
        assert!(ra.read(0, 10).await.is_none());
        assert!(ra.read(10_000, 2_000).await.is_none());
        assert_eq!(ra.read(9_000, 2_000).await.unwrap(), f[9_000..11_000]);
        assert_eq!(ra.windows(), 0, "a window read to its end stays");
        assert_eq!(budget.stats().bytes_held, 0, "its bytes not given back");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(budget.stats().hits, 3);
    }

    #[tokio::test]
    async fn hints_are_cut_to_the_file_and_to_what_windows_already_cover() {
        let (f, calls) = (file(), Arc::new(AtomicUsize::new(0)));
        let ra = ReadAhead::new(opts(10_000, 4), ReadAheadBudget::new(1 << 20));
        ra.start(0, 10_000, f.len() as u64, fetcher(&f, &calls));
        // Overlaps the first window: only [10_000, 15_000) is read.
        ra.start(5_000, 10_000, f.len() as u64, |off, len| {
            assert_eq!((off, len), (10_000, 5_000));
            fetcher(&f, &calls)(off, len)
        });
        ra.start(2_000, 1_000, f.len() as u64, fetcher(&f, &calls));
        assert_eq!(calls.load(Ordering::SeqCst), 2, "a covered hint was read");
        // Past the end of the file: cut; at the end: nothing.
        ra.start(99_000, 10_000, f.len() as u64, |off, len| {
            assert_eq!((off, len), (99_000, 1_000));
            fetcher(&f, &calls)(off, len)
        });
        ra.start(100_000, 10, f.len() as u64, fetcher(&f, &calls));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(ra.read(99_500, 500).await.unwrap(), f[99_500..]);
        assert_eq!(ra.read(12_000, 3_000).await.unwrap(), f[12_000..15_000]);
    }

    #[tokio::test]
    async fn windows_per_reader_and_bytes_per_budget_are_bounded() {
        let (f, calls) = (file(), Arc::new(AtomicUsize::new(0)));
        let budget = ReadAheadBudget::new(25_000);
        let a = ReadAhead::new(opts(10_000, 2), budget.clone());
        let b = ReadAhead::new(opts(10_000, 2), budget.clone());
        a.start(0, 10_000, 100_000, fetcher(&f, &calls));
        a.start(20_000, 10_000, 100_000, fetcher(&f, &calls));
        assert!(a.read(0, 10).await.is_some()); // the first is now the most recently used
        a.start(40_000, 5_000, 100_000, fetcher(&f, &calls));
        assert_eq!(a.windows(), 2);
        assert!(
            a.read(20_000, 10).await.is_none(),
            "the LRU window was kept"
        );
        assert!(a.read(40_000, 10).await.is_some());
        assert_eq!(budget.stats().bytes_held, 15_000);
        // b may take 10_000 more, not 20_000.
        b.start(0, 10_000, 100_000, fetcher(&f, &calls));
        b.start(50_000, 10_000, 100_000, fetcher(&f, &calls));
        assert_eq!(b.windows(), 1);
        assert_eq!(budget.stats().refused, 1);
        assert_eq!(budget.stats().bytes_held, 25_000);
        drop(b);
        assert_eq!(
            budget.stats().bytes_held,
            15_000,
            "a dropped reader held its bytes"
        );
    }

    #[tokio::test]
    async fn a_failed_read_answers_nothing() {
        let ra = ReadAhead::new(opts(10_000, 2), ReadAheadBudget::new(1 << 20));
        ra.start(0, 1_000, 1_000, |_, _| async {
            Err(FsError::Backend {
                op: "pread",
                path: "/f".into(),
                msg: "replica gone".into(),
            })
        });
        assert!(ra.read(0, 100).await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn an_unread_window_is_dropped_after_its_ttl() {
        let (f, calls) = (file(), Arc::new(AtomicUsize::new(0)));
        let budget = ReadAheadBudget::new(1 << 20);
        let ra = ReadAhead::new(opts(10_000, 2), budget.clone());
        ra.start(0, 10_000, 100_000, fetcher(&f, &calls));
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(ra.windows(), 1);
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert_eq!(ra.windows(), 0);
        assert_eq!(budget.stats().bytes_held, 0);
    }

    #[test]
    fn outside_a_runtime_hints_are_ignored() {
        let (f, calls) = (file(), Arc::new(AtomicUsize::new(0)));
        let ra = ReadAhead::new(opts(10_000, 2), ReadAheadBudget::new(1 << 20));
        ra.start(0, 10_000, 100_000, fetcher(&f, &calls));
        assert_eq!((ra.windows(), calls.load(Ordering::SeqCst)), (0, 0));
    }
}

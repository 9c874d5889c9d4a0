//! Commit-log tests: group commit, rolling, purge, replay rules (torn tails vs corruption),
//! reopen, and write failures.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Barrier};

use common::Durability;
use dfs_broker::{
    AppendFlag, BlockingFs, DirEntry, Fs, FsError, FsReader, FsResult, FsWriter, LocalFs,
};
use rangeserver::Error;
use rangeserver::commitlog::{
    CommitLog, CommitLogOptions, EntryLayout, FragmentInfo, ReplayStats, replay,
};

const DIR: &str = "/log";

struct Env {
    rt: tokio::runtime::Runtime,
    tmp: tempfile::TempDir,
    fs: BlockingFs,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn env() -> Env {
    let rt = runtime();
    // On the target disk rather than a tmpfs, so sync costs what it costs.
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let local = LocalFs::new(tmp.path()).expect("local fs");
    let fs = BlockingFs::new(Arc::new(local), rt.handle().clone());
    Env { rt, tmp, fs }
}

fn opts() -> CommitLogOptions {
    CommitLogOptions::default()
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// An entry naming its thread and sequence number, padded with bytes derived from both (partly
/// compressible, so both stored forms occur).
fn entry(thread: u32, seq: u32, len: usize) -> Vec<u8> {
    let mut e = Vec::with_capacity(8 + len);
    e.extend_from_slice(&thread.to_le_bytes());
    e.extend_from_slice(&seq.to_le_bytes());
    let mut r = Rng(u64::from(thread) << 32 | u64::from(seq) | 1);
    for i in 0..len {
        e.push(if i % 3 == 0 {
            r.next() as u8
        } else {
            b'a' + (i % 7) as u8
        });
    }
    e
}

fn check_entry(e: &[u8]) -> (u32, u32) {
    let thread = u32::from_le_bytes(e[0..4].try_into().expect("4 bytes"));
    let seq = u32::from_le_bytes(e[4..8].try_into().expect("4 bytes"));
    assert_eq!(
        e,
        &entry(thread, seq, e.len() - 8)[..],
        "entry {thread}/{seq} content"
    );
    (thread, seq)
}

fn replay_all(fs: &BlockingFs) -> (Vec<Vec<u8>>, ReplayStats) {
    let mut out = Vec::new();
    let stats = replay(fs, DIR, |e, _| {
        out.push(e.to_vec());
        Ok(())
    })
    .expect("replay");
    (out, stats)
}

fn real_path(env: &Env, number: u64) -> std::path::PathBuf {
    env.tmp.path().join("log").join(number.to_string())
}

#[test]
fn concurrent_appends_replay_exactly_once_in_order() {
    let env = env();
    let log = Arc::new(CommitLog::open(env.fs.clone(), DIR, opts()).expect("open"));
    let threads = 8u32;
    let per_thread = 300u32;
    std::thread::scope(|s| {
        for t in 0..threads {
            let log = log.clone();
            s.spawn(move || {
                let mut r = Rng(u64::from(t) + 99);
                for i in 0..per_thread {
                    let d = match r.below(10) {
                        0 => Durability::Sync,
                        1..=3 => Durability::Flush,
                        4 => Durability::None,
                        _ => Durability::Log,
                    };
                    let len = r.below(5000) as usize;
                    log.append(&entry(t, i, len), i64::from(i), d)
                        .expect("append");
                }
            });
        }
    });
    log.close().expect("close");
    let (entries, stats) = replay_all(&env.fs);
    assert_eq!(entries.len() as u32, threads * per_thread);
    assert_eq!(stats.entries, u64::from(threads * per_thread));
    assert_eq!(stats.torn_blocks, 0);
    let mut next: HashMap<u32, u32> = HashMap::new();
    for e in &entries {
        let (t, i) = check_entry(e);
        let n = next.entry(t).or_default();
        assert_eq!(i, *n, "thread {t} out of order");
        *n += 1;
    }
    assert!(next.values().all(|&n| n == per_thread));
    assert_eq!(
        stats.bytes,
        entries.iter().map(|e| e.len() as u64).sum::<u64>()
    );
}

#[test]
fn group_commit_shares_blocks_under_sync() {
    let env = env();
    let log = Arc::new(CommitLog::open(env.fs.clone(), DIR, opts()).expect("open"));
    let threads = 16u32;
    let barrier = Barrier::new(threads as usize);
    std::thread::scope(|s| {
        for t in 0..threads {
            let log = log.clone();
            let barrier = &barrier;
            s.spawn(move || {
                barrier.wait();
                for i in 0..50 {
                    log.append(&entry(t, i, 100), 1, Durability::Sync)
                        .expect("append");
                }
            });
        }
    });
    log.close().expect("close");
    let (entries, stats) = replay_all(&env.fs);
    assert_eq!(entries.len(), 800);
    assert!(
        stats.blocks < 400,
        "group commit should share blocks: {stats:?}"
    );
}

#[test]
fn rolls_at_fragment_size_and_on_request() {
    let env = env();
    let o = CommitLogOptions {
        fragment_size_bytes: 4096,
        compress: false,
        ..opts()
    };
    let log = CommitLog::open(env.fs.clone(), DIR, o).expect("open");
    for i in 0..200 {
        log.append(&entry(0, i, 500), i64::from(i), Durability::Log)
            .expect("append");
        if i == 100 {
            log.roll().expect("roll");
        }
    }
    let frags = log.fragments();
    assert!(
        frags.len() > 20,
        "expected many fragments, got {}",
        frags.len()
    );
    assert!(frags.windows(2).all(|w| w[0].number + 1 == w[1].number));
    log.close().expect("close");
    let (entries, stats) = replay_all(&env.fs);
    assert_eq!(stats.fragments, frags.len() as u64);
    let seqs: Vec<u32> = entries.iter().map(|e| check_entry(e).1).collect();
    assert_eq!(seqs, (0..200).collect::<Vec<_>>());
}

#[test]
fn purge_removes_only_fragments_at_or_below_the_revision() {
    let env = env();
    let log = CommitLog::open(env.fs.clone(), DIR, opts()).expect("open");
    // Fragment k holds revisions 10k .. 10k+9.
    for k in 0..5u32 {
        for j in 0..10u32 {
            let rev = 10 * k + j;
            log.append(&entry(0, rev, 50), i64::from(rev), Durability::Flush)
                .expect("append");
        }
        log.roll().expect("roll");
    }
    let before = log.fragments();
    assert_eq!(before.len(), 6);
    assert_eq!(before[1].max_revision, 19);
    assert_eq!(
        before[5].max_revision,
        i64::MIN,
        "the current fragment is empty"
    );
    assert_eq!(log.purge(25).expect("purge"), 2);
    let nums: Vec<u64> = log.fragments().iter().map(|f| f.number).collect();
    assert_eq!(nums, vec![2, 3, 4, 5]);
    assert_eq!(log.purge(25).expect("purge again"), 0);
    let (entries, _) = replay_all(&env.fs);
    let seqs: Vec<u32> = entries.iter().map(|e| check_entry(e).1).collect();
    assert_eq!(seqs, (20..50).collect::<Vec<_>>());
    // Everything old goes, never the current fragment, even though it is empty.
    log.append(&entry(0, 50, 10), 50, Durability::Log)
        .expect("append");
    assert_eq!(log.purge(i64::MAX).expect("purge all"), 3);
    assert_eq!(
        log.fragments().iter().map(|f| f.number).collect::<Vec<_>>(),
        vec![5]
    );
    log.close().expect("close");
    let (entries, _) = replay_all(&env.fs);
    assert_eq!(entries.len(), 1);
}

#[test]
fn purge_after_reopen_uses_scanned_max_revisions() {
    let env = env();
    let log = CommitLog::open(env.fs.clone(), DIR, opts()).expect("open");
    for k in 0..3i64 {
        log.append(&entry(0, k as u32, 10), 100 * k + 7, Durability::Log)
            .expect("append");
        log.roll().expect("roll");
    }
    log.close().expect("close");
    let log = CommitLog::open(env.fs.clone(), DIR, opts()).expect("reopen");
    let f = log.fragments();
    let revs: Vec<i64> = f.iter().map(|f| f.max_revision).collect();
    // The reopened log creates its fragment (4) only when it first appends.
    assert_eq!(revs, vec![7, 107, 207, i64::MIN]);
    assert_eq!(
        log.purge(107).expect("purge"),
        2,
        "fragments 0 and 1; the empty 3 stays behind 2, since purge removes only a prefix (no gaps)"
    );
    log.close().expect("close");
}

/// Appends `n` entries one by one (one block each), closes, and returns the last fragment's
/// path and the offset of its last block.
fn one_block_per_entry(env: &Env, n: u32) -> (std::path::PathBuf, u64) {
    let o = CommitLogOptions {
        compress: false,
        ..opts()
    };
    let log = CommitLog::open(env.fs.clone(), DIR, o).expect("open");
    for i in 0..n {
        log.append(&entry(0, i, 200), 1, Durability::Log)
            .expect("append");
    }
    let last = log.fragments().last().expect("a fragment").number;
    log.close().expect("close");
    let path = real_path(env, last);
    let len = std::fs::metadata(&path).expect("stat").len();
    // Every block is the same size: header + varint(208) (2 bytes) + 208 bytes.
    let block = 40 + 2 + 208;
    assert_eq!(len, 24 + u64::from(n) * block);
    (path, len - block)
}

#[test]
fn torn_tail_in_the_payload_is_skipped() {
    let env = env();
    let (path, last_block) = one_block_per_entry(&env, 10);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    f.set_len(last_block + 100).expect("truncate");
    let (entries, stats) = replay_all(&env.fs);
    assert_eq!(entries.len(), 9);
    assert_eq!(stats.torn_blocks, 1);
    assert_eq!(stats.blocks, 9);
}

#[test]
fn torn_tail_in_the_header_is_skipped() {
    let env = env();
    let (path, last_block) = one_block_per_entry(&env, 10);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    f.set_len(last_block + 17).expect("truncate");
    let (entries, stats) = replay_all(&env.fs);
    assert_eq!(entries.len(), 9);
    assert_eq!(stats.torn_blocks, 1);
}

#[test]
fn garbage_after_the_last_block_is_a_torn_block() {
    use std::io::Write;
    let env = env();
    let (path, _) = one_block_per_entry(&env, 10);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .expect("open");
    let mut r = Rng(7);
    let garbage: Vec<u8> = (0..300).map(|_| r.next() as u8).collect();
    f.write_all(&garbage).expect("write");
    let (entries, stats) = replay_all(&env.fs);
    assert_eq!(entries.len(), 10);
    assert_eq!(stats.torn_blocks, 1);
}

#[test]
fn zeroed_tail_is_a_torn_block() {
    // What a crash can leave when the file length was updated but the data never landed.
    let env = env();
    let (path, last_block) = one_block_per_entry(&env, 10);
    let mut data = std::fs::read(&path).expect("read");
    data[last_block as usize..].fill(0);
    std::fs::write(&path, &data).expect("write");
    let (entries, stats) = replay_all(&env.fs);
    assert_eq!(entries.len(), 9);
    assert_eq!(stats.torn_blocks, 1);
}

fn flip_and_replay(env: &Env, path: &std::path::Path, at: usize) -> Error {
    let mut data = std::fs::read(path).expect("read");
    data[at] ^= 0x40;
    std::fs::write(path, &data).expect("write");
    replay(&env.fs, DIR, |_, _| Ok(())).expect_err("corruption must be reported")
}

#[test]
fn corrupt_payload_before_valid_blocks_is_an_error() {
    let env = env();
    let (path, _) = one_block_per_entry(&env, 10);
    let err = flip_and_replay(&env, &path, 24 + 40 + 50);
    assert!(
        matches!(&err, Error::Checksum { file, offset: 24, .. } if file == "/log/0"),
        "got {err:?}"
    );
}

#[test]
fn corrupt_header_before_valid_blocks_is_an_error() {
    let env = env();
    let (path, _) = one_block_per_entry(&env, 10);
    let err = flip_and_replay(&env, &path, 24 + 9);
    assert!(
        matches!(&err, Error::Checksum { file, offset: 24, .. } if file == "/log/0"),
        "got {err:?}"
    );
}

#[test]
fn corrupt_last_complete_block_is_torn_but_earlier_ones_are_not() {
    // A damaged payload in the final block (nothing after it) is indistinguishable from a torn
    // write and is skipped; the same damage one block earlier is an error.
    let env = env();
    let (path, last_block) = one_block_per_entry(&env, 10);
    let mut data = std::fs::read(&path).expect("read");
    data[last_block as usize + 60] ^= 1;
    std::fs::write(&path, &data).expect("write");
    let (entries, stats) = replay_all(&env.fs);
    assert_eq!((entries.len(), stats.torn_blocks), (9, 1));
    let err = flip_and_replay(&env, &path, last_block as usize - 100);
    assert!(matches!(err, Error::Checksum { .. }), "got {err:?}");
}

#[test]
fn stray_file_is_recognised() {
    let env = env();
    std::fs::create_dir_all(env.tmp.path().join("log")).expect("mkdir");
    std::fs::write(
        real_path(&env, 3),
        b"this is not a commit log fragment at all",
    )
    .expect("write");
    let err = replay(&env.fs, DIR, |_, _| Ok(())).expect_err("stray file");
    assert!(
        matches!(err, Error::Corrupt { offset: 0, .. }),
        "got {err:?}"
    );
    // Open refuses it too, naming it, and removes nothing.
    let err = CommitLog::open(env.fs.clone(), DIR, opts()).expect_err("open");
    assert!(err.to_string().contains("/log/3"), "{err}");
    assert!(real_path(&env, 3).exists());
}

#[test]
fn reopen_appends_to_a_new_fragment_and_replays_the_old_ones() {
    let env = env();
    let log = CommitLog::open(env.fs.clone(), DIR, opts()).expect("open");
    for i in 0..20 {
        log.append(&entry(1, i, 300), 5, Durability::Flush)
            .expect("append");
    }
    log.roll().expect("roll");
    for i in 20..30 {
        log.append(&entry(1, i, 300), 6, Durability::Flush)
            .expect("append");
    }
    log.close().expect("close");
    assert!(matches!(
        log.append(b"late", 1, Durability::Log),
        Err(Error::Closed)
    ));
    assert!(matches!(log.roll(), Err(Error::Closed)));
    log.close().expect("close twice");
    drop(log);

    let log = CommitLog::open(env.fs.clone(), DIR, opts()).expect("reopen");
    assert_eq!(log.first_new_fragment(), 2);
    for i in 0..5 {
        log.append(&entry(2, i, 300), 7, Durability::Flush)
            .expect("append");
    }
    // Replay while open sees only what existed before open.
    let mut old = Vec::new();
    let stats = log
        .replay_existing(|e, _| {
            old.push(check_entry(e));
            Ok(())
        })
        .expect("replay existing");
    assert_eq!(stats.fragments, 2);
    assert_eq!(old, (0..30).map(|i| (1, i)).collect::<Vec<_>>());
    let frags = log.fragments();
    assert_eq!(frags.last().map(|f| f.number), Some(2));
    assert_eq!(frags.last().map(|f| f.max_revision), Some(7));
    log.close().expect("close");
    let (entries, _) = replay_all(&env.fs);
    assert_eq!(entries.len(), 35);
    assert_eq!(check_entry(&entries[30]), (2, 0));
}

#[test]
fn replay_stops_at_the_callers_error() {
    let env = env();
    let log = CommitLog::open(env.fs.clone(), DIR, opts()).expect("open");
    for i in 0..10 {
        log.append(&entry(0, i, 10), 1, Durability::Log)
            .expect("append");
    }
    log.close().expect("close");
    let mut seen = 0;
    let err = replay(&env.fs, DIR, |_, _| {
        seen += 1;
        if seen == 4 {
            Err(Error::InvalidInput("stop".into()))
        } else {
            Ok(())
        }
    })
    .expect_err("caller error");
    assert!(matches!(err, Error::InvalidInput(m) if m == "stop"));
    assert_eq!(seen, 4);
}

#[test]
fn oversized_entry_is_rejected() {
    let env = env();
    let o = CommitLogOptions {
        max_block_bytes: 1000,
        ..opts()
    };
    let log = CommitLog::open(env.fs.clone(), DIR, o).expect("open");
    assert!(matches!(
        log.append(&[0; 1001], 1, Durability::Log),
        Err(Error::InvalidInput(_))
    ));
    log.append(&[0; 1000], 1, Durability::Log)
        .expect("exactly the limit fits");
    log.close().expect("close");
    assert_eq!(replay_all(&env.fs).0, vec![vec![0u8; 1000]]);
}

#[test]
fn small_queue_limit_and_block_size_still_deliver_everything() {
    let env = env();
    let o = CommitLogOptions {
        max_block_bytes: 2048,
        queue_limit_bytes: 4096,
        fragment_size_bytes: 64 * 1024,
        compress: true,
    };
    let log = Arc::new(CommitLog::open(env.fs.clone(), DIR, o).expect("open"));
    std::thread::scope(|s| {
        for t in 0..6u32 {
            let log = log.clone();
            s.spawn(move || {
                for i in 0..200u32 {
                    log.append(&entry(t, i, 600), 1, Durability::Log)
                        .expect("append");
                }
            });
        }
    });
    log.close().expect("close");
    let (entries, stats) = replay_all(&env.fs);
    assert_eq!(entries.len(), 1200);
    assert!(stats.fragments > 1);
    let mut next: HashMap<u32, u32> = HashMap::new();
    for e in &entries {
        let (t, i) = check_entry(e);
        let n = next.entry(t).or_default();
        assert_eq!(i, *n);
        *n += 1;
    }
}

#[test]
fn async_appends_from_tasks() {
    let env = env();
    let log = Arc::new(CommitLog::open(env.fs.clone(), DIR, opts()).expect("open"));
    let o = CommitLogOptions {
        queue_limit_bytes: 2000,
        ..opts()
    };
    let small = Arc::new(CommitLog::open(env.fs.clone(), "/log2", o).expect("open"));
    env.rt.block_on(async {
        let mut tasks = Vec::new();
        for t in 0..8u32 {
            let log = log.clone();
            let small = small.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..100u32 {
                    let d = if i % 10 == 0 {
                        Durability::Sync
                    } else {
                        Durability::Flush
                    };
                    log.append_async(entry(t, i, 300), 1, d)
                        .await
                        .expect("append");
                    small
                        .append_async(entry(t, i, 700), 1, Durability::Log)
                        .await
                        .expect("append");
                }
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
    });
    log.close().expect("close");
    small.close().expect("close");
    assert_eq!(replay_all(&env.fs).0.len(), 800);
    let n = replay(&env.fs, "/log2", |e, _| {
        check_entry(e);
        Ok(())
    })
    .expect("replay")
    .entries;
    assert_eq!(n, 800);
}

// ---- A file system whose appends start failing after a budget ------------------------------

type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Wraps a backend; every append after the first `budget` fails with `FsError::Injected`.
struct FailingFs {
    inner: Arc<dyn Fs>,
    budget: Arc<AtomicI64>,
}

struct FailingWriter {
    inner: Box<dyn FsWriter>,
    budget: Arc<AtomicI64>,
}

impl Fs for FailingFs {
    fn create<'a, 'b, 'c>(
        &'a self,
        path: &'b str,
        overwrite: bool,
    ) -> BoxFut<'c, FsResult<Box<dyn FsWriter>>>
    where
        'a: 'c,
        'b: 'c,
        Self: 'c,
    {
        Box::pin(async move {
            let inner = self.inner.create(path, overwrite).await?;
            Ok(Box::new(FailingWriter {
                inner,
                budget: self.budget.clone(),
            }) as Box<dyn FsWriter>)
        })
    }
    fn open<'a, 'b, 'c>(&'a self, path: &'b str) -> BoxFut<'c, FsResult<Arc<dyn FsReader>>>
    where
        'a: 'c,
        'b: 'c,
        Self: 'c,
    {
        self.inner.open(path)
    }
    fn length<'a, 'b, 'c>(&'a self, path: &'b str) -> BoxFut<'c, FsResult<u64>>
    where
        'a: 'c,
        'b: 'c,
        Self: 'c,
    {
        self.inner.length(path)
    }
    fn remove<'a, 'b, 'c>(&'a self, path: &'b str) -> BoxFut<'c, FsResult<()>>
    where
        'a: 'c,
        'b: 'c,
        Self: 'c,
    {
        self.inner.remove(path)
    }
    fn rmdir<'a, 'b, 'c>(&'a self, path: &'b str, recursive: bool) -> BoxFut<'c, FsResult<()>>
    where
        'a: 'c,
        'b: 'c,
        Self: 'c,
    {
        self.inner.rmdir(path, recursive)
    }
    fn rename<'a, 'b, 'd, 'c>(&'a self, from: &'b str, to: &'d str) -> BoxFut<'c, FsResult<()>>
    where
        'a: 'c,
        'b: 'c,
        'd: 'c,
        Self: 'c,
    {
        self.inner.rename(from, to)
    }
    fn mkdirs<'a, 'b, 'c>(&'a self, path: &'b str) -> BoxFut<'c, FsResult<()>>
    where
        'a: 'c,
        'b: 'c,
        Self: 'c,
    {
        self.inner.mkdirs(path)
    }
    fn readdir<'a, 'b, 'c>(&'a self, path: &'b str) -> BoxFut<'c, FsResult<Vec<DirEntry>>>
    where
        'a: 'c,
        'b: 'c,
        Self: 'c,
    {
        self.inner.readdir(path)
    }
    fn exists<'a, 'b, 'c>(&'a self, path: &'b str) -> BoxFut<'c, FsResult<bool>>
    where
        'a: 'c,
        'b: 'c,
        Self: 'c,
    {
        self.inner.exists(path)
    }
    fn url(&self) -> String {
        format!("failing+{}", self.inner.url())
    }
}

impl FsWriter for FailingWriter {
    fn append<'a, 'b, 'c>(
        &'a mut self,
        data: &'b [u8],
        flag: AppendFlag,
    ) -> BoxFut<'c, FsResult<()>>
    where
        'a: 'c,
        'b: 'c,
        Self: 'c,
    {
        Box::pin(async move {
            if self.budget.fetch_sub(1, Ordering::SeqCst) <= 0 {
                return Err(FsError::Injected {
                    op: "append",
                    path: self.inner.path().to_string(),
                });
            }
            self.inner.append(data, flag).await
        })
    }
    fn position(&self) -> u64 {
        self.inner.position()
    }
    fn close<'a, 'c>(&'a mut self) -> BoxFut<'c, FsResult<()>>
    where
        'a: 'c,
        Self: 'c,
    {
        self.inner.close()
    }
    fn path(&self) -> &str {
        self.inner.path()
    }
}

#[test]
fn write_failure_fails_the_block_and_every_later_append() {
    let env = env();
    let budget = Arc::new(AtomicI64::new(1 + 10)); // the fragment header, then ten blocks
    let failing = FailingFs {
        inner: env.fs.inner().clone(),
        budget: budget.clone(),
    };
    let fs = BlockingFs::new(Arc::new(failing), env.rt.handle().clone());
    let log = Arc::new(CommitLog::open(fs, DIR, opts()).expect("open"));
    for i in 0..10 {
        log.append(&entry(0, i, 100), 1, Durability::Flush)
            .expect("within budget");
    }
    let err = log
        .append(&entry(0, 10, 100), 1, Durability::Flush)
        .expect_err("injected failure");
    assert!(err.to_string().contains("injected"), "got {err}");
    // Even once the file system recovers, the log refuses: what it wrote last is uncertain.
    budget.store(1000, Ordering::SeqCst);
    assert!(log.append(&entry(0, 11, 100), 1, Durability::Log).is_err());
    assert!(log.roll().is_err());
    // Concurrent appenders all get errors rather than hanging.
    std::thread::scope(|s| {
        for t in 0..4 {
            let log = log.clone();
            s.spawn(move || assert!(log.append(&entry(t, 0, 10), 1, Durability::Sync).is_err()));
        }
    });
    assert!(log.close().is_err(), "close reports the failure");
    assert!(matches!(
        log.append(b"x", 1, Durability::Log),
        Err(Error::Closed)
    ));
    // The ten acknowledged entries are all there.
    let (entries, _) = replay_all(&env.fs);
    assert_eq!(entries.len(), 10);
}

#[test]
fn fragment_info_tracks_sizes() {
    let env = env();
    let log = CommitLog::open(env.fs.clone(), DIR, opts()).expect("open");
    log.append(&entry(0, 0, 100), 42, Durability::Flush)
        .expect("append");
    let f: Vec<FragmentInfo> = log.fragments();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].number, 0);
    assert_eq!(f[0].max_revision, 42);
    log.close().expect("close");
    assert_eq!(
        f[0].size_bytes,
        std::fs::metadata(real_path(&env, 0)).expect("stat").len()
    );
}

/// Throughput figures: `cargo test --release -p rangeserver --test commitlog -- --ignored --nocapture`.
#[test]
#[ignore = "a benchmark; run explicitly in release mode"]
fn throughput() {
    let entry_bytes: usize = std::env::var("HT_CL_ENTRY_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30_000);
    let pool: Vec<Vec<u8>> = (0..64).map(|i| entry(0, i, entry_bytes)).collect();
    for d in [Durability::Log, Durability::Flush, Durability::Sync] {
        for threads in [1u32, 8] {
            let env = env();
            let o = CommitLogOptions {
                compress: std::env::var("HT_CL_COMPRESS").map_or(true, |v| v != "0"),
                ..opts()
            };
            let log = Arc::new(CommitLog::open(env.fs.clone(), DIR, o).expect("open"));
            let secs = 1.5;
            let start = std::time::Instant::now();
            let total: u64 = std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads)
                    .map(|_| {
                        let log = log.clone();
                        let pool = &pool;
                        s.spawn(move || {
                            let mut n = 0u64;
                            while start.elapsed().as_secs_f64() < secs {
                                log.append(&pool[n as usize % pool.len()], 1, d)
                                    .expect("append");
                                n += 1;
                            }
                            n
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().expect("thread")).sum()
            });
            let elapsed = start.elapsed().as_secs_f64();
            log.close().expect("close");
            let blocks = replay(&env.fs, DIR, |_, _| Ok(())).expect("replay").blocks;
            println!(
                "{:>5} {threads} threads: {:>9.0} entries/s {:>7.1} MB/s ({:.1} entries/block)",
                d.name(),
                total as f64 / elapsed,
                total as f64 * entry_bytes as f64 / elapsed / 1e6,
                total as f64 / blocks as f64
            );
        }
    }
}

/// Fragment 0 holding one block with the entry `hello` at revision 7, as format version 1 writes
/// it (docs/formats/commitlog.md, "Example"). Frozen: if this changes, the format changed.
const GOLDEN_V1: [u8; 70] = [
    0x48, 0x54, 0x4c, 0x46, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, //
    0x00, 0x00, 0x00, 0x00, 0xec, 0xb0, 0x23, 0x68, 0x48, 0x54, 0x4c, 0x42, 0x01, 0x00, 0x00,
    0x00, //
    0x06, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, //
    0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x9d, 0xed, 0xec, 0xd5, 0xc6, 0x60, 0xa4,
    0x08, //
    0x05, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
];

/// The same with block version 2 (entries of layout v2): only the block's version and its
/// header checksum differ. Frozen likewise.
const GOLDEN_V2: [u8; 70] = [
    0x48, 0x54, 0x4c, 0x46, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, //
    0x00, 0x00, 0x00, 0x00, 0xec, 0xb0, 0x23, 0x68, 0x48, 0x54, 0x4c, 0x42, 0x02, 0x00, 0x00,
    0x00, //
    0x06, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, //
    0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x9d, 0xed, 0xec, 0xd5, 0x9b, 0x11, 0x4f,
    0x4e, //
    0x05, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
];

#[test]
fn writes_the_frozen_v2_bytes() {
    let env = env();
    let log = CommitLog::open(env.fs.clone(), DIR, opts()).expect("open");
    log.append(b"hello", 7, Durability::Log).expect("append");
    log.close().expect("close");
    assert_eq!(std::fs::read(real_path(&env, 0)).expect("read"), GOLDEN_V2);
}

#[test]
fn each_block_tells_its_entries_layout() {
    for (golden, layout) in [(GOLDEN_V1, EntryLayout::V1), (GOLDEN_V2, EntryLayout::V2)] {
        let env = env();
        std::fs::create_dir_all(env.tmp.path().join("log")).expect("mkdir");
        std::fs::write(real_path(&env, 0), golden).expect("write");
        let mut seen = Vec::new();
        replay(&env.fs, DIR, |e, l| {
            seen.push((e.to_vec(), l));
            Ok(())
        })
        .expect("replay");
        assert_eq!(seen, vec![(b"hello".to_vec(), layout)]);
    }
}

#[test]
fn reads_the_frozen_v1_bytes() {
    let env = env();
    std::fs::create_dir_all(env.tmp.path().join("log")).expect("mkdir");
    std::fs::write(real_path(&env, 0), GOLDEN_V1).expect("write");
    let (entries, stats) = replay_all(&env.fs);
    assert_eq!(entries, vec![b"hello".to_vec()]);
    let want = ReplayStats {
        fragments: 1,
        blocks: 1,
        entries: 1,
        torn_blocks: 0,
        cut_bytes: 0,
        bytes: 5,
    };
    assert_eq!(stats, want);
    let log = CommitLog::open(env.fs.clone(), DIR, opts()).expect("open");
    assert_eq!(log.fragments()[0].max_revision, 7);
    log.close().expect("close");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Whatever single byte is damaged, replay never returns wrong data: it either fails or
    /// returns a prefix of what was written (the damaged block, if last, being torn).
    #[test]
    fn damage_never_yields_wrong_entries(
        sizes in proptest::collection::vec(0usize..3000, 1..12),
        at in 0.0f64..1.0,
        mask in 1u8..=255,
        compress in proptest::bool::ANY,
    ) {
        let env = env();
        let o = CommitLogOptions { compress, ..opts() };
        let log = CommitLog::open(env.fs.clone(), DIR, o).expect("open");
        let written: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| entry(0, i as u32, n)).collect();
        for e in &written {
            log.append(e, 1, Durability::Log).expect("append");
        }
        log.close().expect("close");
        let path = real_path(&env, 0);
        let mut data = std::fs::read(&path).expect("read");
        let i = ((data.len() as f64) * at) as usize % data.len();
        data[i] ^= mask;
        std::fs::write(&path, &data).expect("write");
        let mut got = Vec::new();
        if replay(&env.fs, DIR, |e, _| { got.push(e.to_vec()); Ok(()) }).is_ok() {
            proptest::prop_assert!(got.len() < written.len(), "damage at {} went unnoticed", i);
            proptest::prop_assert_eq!(&got[..], &written[..got.len()]);
        }
    }
}

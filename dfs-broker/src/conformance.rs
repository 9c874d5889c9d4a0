//! The conformance suite every [`Fs`] backend must pass: the contract of the trait, written as
//! checks that run against any backend (feature `conformance`).
//!
//! Each check is a `pub async fn(Arc<dyn Fs>)` that panics on a violation and expects an empty
//! file system. [`run_all`] runs them all, each on a fresh file system from a factory;
//! [`conformance_tests!`](crate::conformance_tests) expands to one `#[tokio::test]` per check,
//! which reports failures one by one:
//!
//! ```ignore
//! dfs_broker::conformance_tests!({
//!     let dir = tempfile::tempdir().unwrap();
//!     move || -> Arc<dyn Fs> { Arc::new(LocalFs::new(dir.path().join("fs")).unwrap()) }
//! });
//! ```
//!
//! The concurrency check needs a multi-threaded runtime to exercise anything.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::{AppendFlag, DirEntry, Fs, FsError, FsReader};

/// A check of the suite.
pub type Check = fn(Arc<dyn Fs>) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// Expands to one `#[tokio::test(flavor = "multi_thread")]` per check of
/// [`conformance`](crate::conformance). The argument is an expression, evaluated once per test
/// and kept alive until the test ends, that yields a `Fn() -> Arc<dyn Fs>` giving an empty file
/// system. The calling crate needs `tokio` (with `macros` and `rt-multi-thread`).
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::conformance_tests!(@each $make;
            invalid_paths,
            missing_files,
            create_exclusive_and_overwrite,
            create_makes_parents,
            create_on_directory_fails,
            empty_file,
            pread_bounds,
            rename_file,
            rename_errors,
            rmdir_semantics,
            remove_directory_fails,
            readdir_listing,
            exists_and_mkdirs,
            flush_makes_visible,
            buffered_append_visible_after_close,
            sync_append,
            close_twice_and_append_after_close,
            reader_sees_growth,
            concurrent_readers_see_prefix,
            large_file_random_preads,
            prefetched_reads,
            url_and_paths,
        );
    };
    (@each $make:expr; $($name:ident,)*) => {
        $(
            #[tokio::test(flavor = "multi_thread")]
            async fn $name() {
                let make = $make;
                $crate::conformance::$name(make()).await;
            }
        )*
    };
}

macro_rules! checks {
    ($($name:ident,)*) => {
        /// Every check, by name (the same list as [`conformance_tests!`](crate::conformance_tests)).
        pub const CHECKS: &[(&str, Check)] = &[$((stringify!($name), |fs| Box::pin($name(fs)))),*];
    };
}

checks!(
    invalid_paths,
    missing_files,
    create_exclusive_and_overwrite,
    create_makes_parents,
    create_on_directory_fails,
    empty_file,
    pread_bounds,
    rename_file,
    rename_errors,
    rmdir_semantics,
    remove_directory_fails,
    readdir_listing,
    exists_and_mkdirs,
    flush_makes_visible,
    buffered_append_visible_after_close,
    sync_append,
    close_twice_and_append_after_close,
    reader_sees_growth,
    concurrent_readers_see_prefix,
    large_file_random_preads,
    prefetched_reads,
    url_and_paths,
);

/// Runs every check, each on a fresh file system from `make`.
pub async fn run_all(make: &dyn Fn() -> Arc<dyn Fs>) {
    for (name, check) in CHECKS {
        tracing::info!("fs conformance: {name}");
        eprintln!("fs conformance: {name}");
        check(make()).await;
    }
}

/// Asserts that a result is an error matching a pattern, naming the call on failure.
macro_rules! assert_err {
    ($e:expr, $pat:pat) => {
        match $e {
            Err($pat) => {}
            Err(other) => panic!(
                "{}: expected {}, got error {other}",
                stringify!($e),
                stringify!($pat)
            ),
            Ok(_) => panic!("{}: expected {}, got Ok", stringify!($e), stringify!($pat)),
        }
    };
}

/// splitmix64: a tiny seeded generator, so failures replay.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
}

/// The byte at `offset` of a pattern file: any range can be checked without keeping the file.
fn pattern_byte(seed: u64, offset: u64) -> u8 {
    let mut r = Rng(seed ^ (offset / 8).wrapping_mul(0x2545_F491_4F6C_DD1D));
    r.next().to_le_bytes()[(offset % 8) as usize]
}

fn pattern(seed: u64, offset: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| pattern_byte(seed, offset + i))
        .collect()
}

fn check_range(what: &str, seed: u64, offset: u64, got: &[u8]) {
    let want = pattern(seed, offset, got.len());
    if got != want.as_slice() {
        let at = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "{what}: {} bytes at {offset} differ from what was written, first at offset {}",
            got.len(),
            offset + at as u64
        );
    }
}

async fn write_file(fs: &dyn Fs, path: &str, data: &[u8]) {
    let mut w = fs.create(path, false).await.expect("create");
    w.append(data, AppendFlag::None).await.expect("append");
    w.close().await.expect("close");
}

async fn read_all(fs: &dyn Fs, path: &str) -> Vec<u8> {
    let r = fs.open(path).await.expect("open");
    let len = r.length().await.expect("length");
    r.pread(0, len as usize).await.expect("pread")
}

/// Relative paths and `.`, `..` or empty components are refused by every operation.
pub async fn invalid_paths(fs: Arc<dyn Fs>) {
    fs.mkdirs("/ok").await.expect("mkdirs /ok");
    write_file(&*fs, "/ok/f", b"x").await;
    for bad in ["", "ok/f", "/ok/../f", "/ok/./f", "/ok//f", "/ok/f/", "/.."] {
        assert_err!(fs.create(bad, true).await, FsError::InvalidPath { .. });
        assert_err!(fs.open(bad).await, FsError::InvalidPath { .. });
        assert_err!(fs.length(bad).await, FsError::InvalidPath { .. });
        assert_err!(fs.remove(bad).await, FsError::InvalidPath { .. });
        assert_err!(fs.rmdir(bad, true).await, FsError::InvalidPath { .. });
        assert_err!(fs.rename(bad, "/ok/g").await, FsError::InvalidPath { .. });
        assert_err!(fs.rename("/ok/f", bad).await, FsError::InvalidPath { .. });
        assert_err!(fs.mkdirs(bad).await, FsError::InvalidPath { .. });
        assert_err!(fs.readdir(bad).await, FsError::InvalidPath { .. });
        assert_err!(fs.exists(bad).await, FsError::InvalidPath { .. });
    }
    assert_eq!(
        read_all(&*fs, "/ok/f").await,
        b"x",
        "a refused rename moved the file"
    );
    assert!(!fs.exists("/f").await.expect("exists /f"), "'..' escaped");
}

/// Operations on missing files and directories are `NotFound`.
pub async fn missing_files(fs: Arc<dyn Fs>) {
    assert_err!(fs.open("/nope").await, FsError::NotFound { .. });
    assert_err!(fs.length("/nope").await, FsError::NotFound { .. });
    assert_err!(fs.remove("/nope").await, FsError::NotFound { .. });
    assert_err!(fs.rename("/nope", "/other").await, FsError::NotFound { .. });
    assert_err!(fs.readdir("/nodir").await, FsError::NotFound { .. });
    assert_err!(fs.rmdir("/nodir", false).await, FsError::NotFound { .. });
    assert_err!(fs.rmdir("/nodir", true).await, FsError::NotFound { .. });
    assert_err!(fs.open("/a/b/c").await, FsError::NotFound { .. });
    assert!(!fs.exists("/nope").await.expect("exists"));
    assert!(!fs.exists("/other").await.expect("exists"));
    let e = fs
        .open("/nope")
        .await
        .err()
        .expect("open of a missing file failed");
    assert!(e.is_not_found());
    assert_eq!(e.kind(), common::ErrorKind::NotFound);
}

/// `create` of an existing file fails unless `overwrite`, which truncates it.
pub async fn create_exclusive_and_overwrite(fs: Arc<dyn Fs>) {
    write_file(&*fs, "/f", b"hello world").await;
    assert_err!(fs.create("/f", false).await, FsError::AlreadyExists { .. });
    assert_eq!(
        read_all(&*fs, "/f").await,
        b"hello world",
        "failed create changed the file"
    );

    let mut w = fs.create("/f", true).await.expect("create overwrite");
    assert_eq!(w.position(), 0);
    w.close().await.expect("close");
    assert_eq!(
        fs.length("/f").await.expect("length"),
        0,
        "overwrite did not truncate"
    );

    let mut w = fs.create("/f", true).await.expect("create overwrite");
    w.append(b"new", AppendFlag::Flush).await.expect("append");
    w.close().await.expect("close");
    assert_eq!(read_all(&*fs, "/f").await, b"new");
}

/// `create` makes missing parent directories.
pub async fn create_makes_parents(fs: Arc<dyn Fs>) {
    write_file(&*fs, "/a/b/c/f", b"data").await;
    assert!(fs.exists("/a").await.expect("exists"));
    assert!(fs.exists("/a/b/c").await.expect("exists"));
    let ls = fs.readdir("/a/b").await.expect("readdir");
    assert_eq!(
        ls,
        vec![DirEntry {
            name: "c".into(),
            is_dir: true,
            length: 0
        }]
    );
    assert_eq!(read_all(&*fs, "/a/b/c/f").await, b"data");
}

/// A directory cannot be created over, opened or measured as a file.
pub async fn create_on_directory_fails(fs: Arc<dyn Fs>) {
    fs.mkdirs("/d/e").await.expect("mkdirs");
    assert!(
        fs.create("/d", false).await.is_err(),
        "create over a directory"
    );
    assert!(
        fs.create("/d", true).await.is_err(),
        "create(overwrite) over a directory"
    );
    assert!(fs.open("/d").await.is_err(), "open of a directory");
    assert!(fs.length("/d").await.is_err(), "length of a directory");
    assert!(
        fs.exists("/d/e").await.expect("exists"),
        "directory damaged"
    );
}

/// An empty file exists, has length 0 and reads 0 bytes at 0.
pub async fn empty_file(fs: Arc<dyn Fs>) {
    let mut w = fs.create("/empty", false).await.expect("create");
    assert!(
        fs.exists("/empty").await.expect("exists"),
        "create did not make the file"
    );
    w.close().await.expect("close");
    assert_eq!(fs.length("/empty").await.expect("length"), 0);
    let r = fs.open("/empty").await.expect("open");
    assert_eq!(r.length().await.expect("length"), 0);
    assert_eq!(r.pread(0, 0).await.expect("pread"), Vec::<u8>::new());
    assert_err!(r.pread(0, 1).await, FsError::ReadPastEnd { .. });
}

/// `pread` returns exactly what is asked for or `ReadPastEnd`.
pub async fn pread_bounds(fs: Arc<dyn Fs>) {
    let data = pattern(1, 0, 1000);
    write_file(&*fs, "/f", &data).await;
    let r = fs.open("/f").await.expect("open");
    assert_eq!(r.length().await.expect("length"), 1000);
    assert_eq!(r.pread(0, 1000).await.expect("pread all"), data);
    assert_eq!(r.pread(10, 20).await.expect("pread"), &data[10..30]);
    assert_eq!(r.pread(999, 1).await.expect("pread last"), &data[999..]);
    assert_eq!(
        r.pread(1000, 0).await.expect("pread 0 at end"),
        Vec::<u8>::new()
    );
    assert_err!(r.pread(0, 1001).await, FsError::ReadPastEnd { .. });
    assert_err!(r.pread(999, 2).await, FsError::ReadPastEnd { .. });
    assert_err!(r.pread(1000, 1).await, FsError::ReadPastEnd { .. });
    assert_err!(r.pread(5000, 1).await, FsError::ReadPastEnd { .. });
    assert_err!(r.pread(1001, 0).await, FsError::ReadPastEnd { .. });
    // A huge length (say, from a corrupt block header) must be refused, not allocated.
    assert_err!(
        r.pread(0, usize::MAX / 2).await,
        FsError::ReadPastEnd { .. }
    );
    assert_err!(r.pread(u64::MAX - 1, 10).await, FsError::ReadPastEnd { .. });
    match r.pread(990, 20).await {
        Err(FsError::ReadPastEnd {
            offset,
            len,
            file_len,
            ..
        }) => assert_eq!((offset, len, file_len), (990, 20, 1000)),
        other => panic!("pread(990, 20) of a 1000-byte file: {other:?}"),
    }
    let e = r.pread(0, 1001).await.expect_err("past end");
    assert_eq!(e.kind(), common::ErrorKind::InvalidInput);
}

/// `rename` moves a file, its content intact, including into another existing directory.
pub async fn rename_file(fs: Arc<dyn Fs>) {
    write_file(&*fs, "/dir1/f", b"content").await;
    fs.mkdirs("/dir2").await.expect("mkdirs");
    fs.rename("/dir1/f", "/dir1/g").await.expect("rename");
    assert!(!fs.exists("/dir1/f").await.expect("exists"));
    assert_eq!(read_all(&*fs, "/dir1/g").await, b"content");
    fs.rename("/dir1/g", "/dir2/h")
        .await
        .expect("rename across directories");
    assert!(!fs.exists("/dir1/g").await.expect("exists"));
    assert_eq!(read_all(&*fs, "/dir2/h").await, b"content");
    assert_eq!(fs.length("/dir2/h").await.expect("length"), 7);
}

/// `rename` onto an existing file or from a missing one fails and changes nothing.
pub async fn rename_errors(fs: Arc<dyn Fs>) {
    write_file(&*fs, "/a", b"aaa").await;
    write_file(&*fs, "/b", b"bb").await;
    assert_err!(fs.rename("/a", "/b").await, FsError::AlreadyExists { .. });
    assert_eq!(read_all(&*fs, "/a").await, b"aaa");
    assert_eq!(read_all(&*fs, "/b").await, b"bb");
    assert_err!(fs.rename("/a", "/a").await, FsError::AlreadyExists { .. });
    assert_eq!(read_all(&*fs, "/a").await, b"aaa");
    assert_err!(fs.rename("/missing", "/c").await, FsError::NotFound { .. });
    assert!(!fs.exists("/c").await.expect("exists"));
}

/// `rmdir` refuses a non-empty directory unless recursive, and refuses files.
pub async fn rmdir_semantics(fs: Arc<dyn Fs>) {
    write_file(&*fs, "/d/sub/f", b"x").await;
    write_file(&*fs, "/d/g", b"y").await;
    assert_err!(
        fs.rmdir("/d", false).await,
        FsError::DirectoryNotEmpty { .. }
    );
    assert!(fs.exists("/d/sub/f").await.expect("exists"));
    assert!(fs.rmdir("/d/g", false).await.is_err(), "rmdir of a file");
    assert!(
        fs.rmdir("/d/g", true).await.is_err(),
        "recursive rmdir of a file"
    );
    assert!(fs.exists("/d/g").await.expect("exists"));

    fs.mkdirs("/e").await.expect("mkdirs");
    fs.rmdir("/e", false)
        .await
        .expect("rmdir of an empty directory");
    assert!(!fs.exists("/e").await.expect("exists"));

    fs.rmdir("/d", true).await.expect("recursive rmdir");
    assert!(!fs.exists("/d").await.expect("exists"));
    assert!(!fs.exists("/d/sub/f").await.expect("exists"));
    assert_err!(fs.rmdir("/d", true).await, FsError::NotFound { .. });
    // The name is free again.
    write_file(&*fs, "/d/sub/f", b"z").await;
    assert_eq!(read_all(&*fs, "/d/sub/f").await, b"z");

    // The root can be emptied, but stays.
    assert_err!(
        fs.rmdir("/", false).await,
        FsError::DirectoryNotEmpty { .. }
    );
    fs.rmdir("/", true).await.expect("recursive rmdir /");
    assert!(fs.exists("/").await.expect("exists /"));
    assert_eq!(fs.readdir("/").await.expect("readdir /"), vec![]);
    fs.rmdir("/", false).await.expect("rmdir of the empty root");
    write_file(&*fs, "/after", b"1").await;
    assert_eq!(read_all(&*fs, "/after").await, b"1");
}

/// `remove` refuses a directory and leaves it in place.
pub async fn remove_directory_fails(fs: Arc<dyn Fs>) {
    write_file(&*fs, "/d/f", b"x").await;
    fs.mkdirs("/empty").await.expect("mkdirs");
    assert!(
        fs.remove("/d").await.is_err(),
        "remove of a non-empty directory"
    );
    assert!(
        fs.remove("/empty").await.is_err(),
        "remove of an empty directory"
    );
    assert!(fs.exists("/d/f").await.expect("exists"));
    assert!(fs.exists("/empty").await.expect("exists"));
    fs.remove("/d/f").await.expect("remove");
    assert!(!fs.exists("/d/f").await.expect("exists"));
    assert!(
        fs.exists("/d").await.expect("exists"),
        "remove took the directory along"
    );
}

/// `readdir` lists names sorted, with kinds and lengths; a file is not a directory.
pub async fn readdir_listing(fs: Arc<dyn Fs>) {
    write_file(&*fs, "/d/b", &[7u8; 300]).await;
    write_file(&*fs, "/d/a", b"").await;
    write_file(&*fs, "/d/c10", b"12345").await;
    write_file(&*fs, "/d/c2/deep", b"1").await;
    fs.mkdirs("/d/z").await.expect("mkdirs");
    fs.mkdirs("/d/A").await.expect("mkdirs");
    let ls = fs.readdir("/d").await.expect("readdir");
    let want = vec![
        ("A", true, 0),
        ("a", false, 0),
        ("b", false, 300),
        ("c10", false, 5),
        ("c2", true, 0),
        ("z", true, 0),
    ];
    let got: Vec<(&str, bool, u64)> = ls
        .iter()
        .map(|e| (e.name.as_str(), e.is_dir, e.length))
        .collect();
    assert_eq!(got, want);
    assert_eq!(fs.readdir("/d/z").await.expect("readdir empty"), vec![]);
    let root = fs.readdir("/").await.expect("readdir /");
    assert_eq!(
        root.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
        ["d"]
    );
    assert!(fs.readdir("/d/b").await.is_err(), "readdir of a file");
}

/// `exists` sees files and directories; `mkdirs` makes parents and is idempotent.
pub async fn exists_and_mkdirs(fs: Arc<dyn Fs>) {
    assert!(fs.exists("/").await.expect("exists /"));
    assert!(!fs.exists("/x").await.expect("exists"));
    fs.mkdirs("/x/y/z").await.expect("mkdirs");
    fs.mkdirs("/x/y/z").await.expect("mkdirs again");
    fs.mkdirs("/x/y").await.expect("mkdirs of a parent");
    fs.mkdirs("/").await.expect("mkdirs /");
    assert!(fs.exists("/x").await.expect("exists"));
    assert!(fs.exists("/x/y/z").await.expect("exists"));
    assert_eq!(fs.readdir("/x/y/z").await.expect("readdir"), vec![]);
    write_file(&*fs, "/x/f", b"1").await;
    assert!(fs.exists("/x/f").await.expect("exists"));
    assert!(!fs.exists("/x/f/g").await.unwrap_or(false));
    assert!(fs.mkdirs("/x/f").await.is_err(), "mkdirs over a file");
    assert_eq!(read_all(&*fs, "/x/f").await, b"1");
}

/// After `append(Flush)` a separately opened reader sees every byte, before close.
pub async fn flush_makes_visible(fs: Arc<dyn Fs>) {
    let mut w = fs.create("/log", false).await.expect("create");
    w.append(&pattern(2, 0, 100), AppendFlag::None)
        .await
        .expect("append");
    w.append(&pattern(2, 100, 50), AppendFlag::Flush)
        .await
        .expect("append flush");
    assert_eq!(w.position(), 150);
    assert_eq!(fs.length("/log").await.expect("length"), 150);
    let r = fs.open("/log").await.expect("open");
    assert_eq!(r.length().await.expect("length"), 150);
    check_range("after flush", 2, 0, &r.pread(0, 150).await.expect("pread"));

    w.append(&pattern(2, 150, 10), AppendFlag::Flush)
        .await
        .expect("append flush");
    let r2 = fs.open("/log").await.expect("open");
    check_range(
        "after 2nd flush",
        2,
        0,
        &r2.pread(0, 160).await.expect("pread"),
    );
    w.close().await.expect("close");
    check_range("after close", 2, 0, &read_all(&*fs, "/log").await);
}

/// `append(None)` counts in `position()` at once; `close` makes it visible.
pub async fn buffered_append_visible_after_close(fs: Arc<dyn Fs>) {
    let mut w = fs.create("/buf", false).await.expect("create");
    let mut pos = 0u64;
    for len in [1usize, 10, 100, 1000, 10_000] {
        w.append(&pattern(3, pos, len), AppendFlag::None)
            .await
            .expect("append");
        pos += len as u64;
        assert_eq!(w.position(), pos);
    }
    w.close().await.expect("close");
    assert_eq!(fs.length("/buf").await.expect("length"), pos);
    check_range("after close", 3, 0, &read_all(&*fs, "/buf").await);
}

/// `append(Sync)` makes everything so far visible (and durable).
pub async fn sync_append(fs: Arc<dyn Fs>) {
    let mut w = fs.create("/s", false).await.expect("create");
    w.append(&pattern(4, 0, 500), AppendFlag::None)
        .await
        .expect("append");
    w.append(&pattern(4, 500, 0), AppendFlag::Sync)
        .await
        .expect("empty sync append");
    assert_eq!(fs.length("/s").await.expect("length"), 500);
    w.append(&pattern(4, 500, 300), AppendFlag::Sync)
        .await
        .expect("sync append");
    assert_eq!(w.position(), 800);
    let r = fs.open("/s").await.expect("open");
    check_range("after sync", 4, 0, &r.pread(0, 800).await.expect("pread"));
    w.close().await.expect("close");
    assert_eq!(fs.length("/s").await.expect("length"), 800);
}

/// Closing twice is fine; appending after close is an error that changes nothing.
pub async fn close_twice_and_append_after_close(fs: Arc<dyn Fs>) {
    let mut w = fs.create("/c", false).await.expect("create");
    w.append(b"abc", AppendFlag::None).await.expect("append");
    w.close().await.expect("close");
    w.close().await.expect("second close");
    assert!(
        w.append(b"def", AppendFlag::None).await.is_err(),
        "append(None) after close"
    );
    assert!(
        w.append(b"def", AppendFlag::Sync).await.is_err(),
        "append(Sync) after close"
    );
    w.close().await.expect("close after failed append");
    assert_eq!(w.position(), 3);
    assert_eq!(read_all(&*fs, "/c").await, b"abc");
}

/// A reader opened early sees the file grow as the writer flushes.
pub async fn reader_sees_growth(fs: Arc<dyn Fs>) {
    let mut w = fs.create("/g", false).await.expect("create");
    let r = fs.open("/g").await.expect("open while writing");
    assert_eq!(r.length().await.expect("length"), 0);
    let mut pos = 0u64;
    for len in [5usize, 5000, 1, 70_000] {
        w.append(&pattern(5, pos, len), AppendFlag::Flush)
            .await
            .expect("append");
        pos += len as u64;
        assert_eq!(r.length().await.expect("length"), pos);
        check_range(
            "growing file",
            5,
            0,
            &r.pread(0, pos as usize).await.expect("pread"),
        );
    }
    w.close().await.expect("close");
    assert_eq!(r.length().await.expect("length"), pos);
}

/// Several tasks pread while a writer appends and flushes: every read sees what was written,
/// and the length each reader sees never shrinks.
pub async fn concurrent_readers_see_prefix(fs: Arc<dyn Fs>) {
    const SEED: u64 = 6;
    const TOTAL: u64 = 4 << 20;
    let mut w = fs.create("/conc", false).await.expect("create");
    w.append(&pattern(SEED, 0, 1), AppendFlag::Flush)
        .await
        .expect("append");
    let done = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for t in 0..4u64 {
        let r: Arc<dyn FsReader> = fs.open("/conc").await.expect("open");
        let done = done.clone();
        readers.push(tokio::spawn(async move {
            let mut rng = Rng(100 + t);
            let mut last_len = 0u64;
            let mut reads = 0u64;
            loop {
                let finished = done.load(Ordering::SeqCst);
                let len = r.length().await.expect("length");
                assert!(len >= last_len, "length shrank from {last_len} to {len}");
                assert!(len <= TOTAL, "length {len} beyond what was written");
                last_len = len;
                let off = rng.range(0, len);
                let n = rng.range(0, (len - off).min(256 << 10) + 1) as usize;
                let got = r.pread(off, n).await.expect("pread within length");
                check_range("concurrent pread", SEED, off, &got);
                // The tail: read right up to the length just seen.
                let tail = (len - off).min(64 << 10) as usize;
                let got = r.pread(len - tail as u64, tail).await.expect("pread tail");
                check_range("concurrent tail pread", SEED, len - tail as u64, &got);
                reads += 1;
                if finished {
                    assert_eq!(len, TOTAL, "final length");
                    return reads;
                }
                tokio::task::yield_now().await;
            }
        }));
    }
    let mut rng = Rng(7);
    let mut pos = 1u64;
    while pos < TOTAL {
        let n = rng.range(1, 64 << 10).min(TOTAL - pos);
        let flag = if rng.next().is_multiple_of(8) {
            AppendFlag::None
        } else {
            AppendFlag::Flush
        };
        w.append(&pattern(SEED, pos, n as usize), flag)
            .await
            .expect("append");
        pos += n;
        assert_eq!(w.position(), pos);
        tokio::task::yield_now().await;
    }
    w.append(&[], AppendFlag::Flush).await.expect("final flush");
    done.store(true, Ordering::SeqCst);
    for h in readers {
        let reads = h.await.expect("reader task panicked");
        assert!(reads > 0);
    }
    w.close().await.expect("close");
}

/// A file of many MiB written in chunks of very different sizes with mixed flags reads back
/// byte for byte, in order and at random.
pub async fn large_file_random_preads(fs: Arc<dyn Fs>) {
    const SEED: u64 = 8;
    const TOTAL: u64 = 24 << 20;
    let mut rng = Rng(9);
    let mut w = fs.create("/big/file", false).await.expect("create");
    let mut pos = 0u64;
    let mut syncs = 0;
    while pos < TOTAL {
        let n = match rng.next() % 4 {
            0 => rng.range(1, 17),
            1 => rng.range(100, 5000),
            2 => rng.range(64 << 10, 300 << 10),
            _ => rng.range(1 << 20, 3 << 20),
        }
        .min(TOTAL - pos);
        let flag = match rng.next() % 10 {
            0..=5 => AppendFlag::None,
            6..=8 => AppendFlag::Flush,
            _ if syncs < 5 => {
                syncs += 1;
                AppendFlag::Sync
            }
            _ => AppendFlag::Flush,
        };
        w.append(&pattern(SEED, pos, n as usize), flag)
            .await
            .expect("append");
        pos += n;
        assert_eq!(w.position(), pos);
    }
    w.close().await.expect("close");
    assert_eq!(fs.length("/big/file").await.expect("length"), TOTAL);
    let ls = fs.readdir("/big").await.expect("readdir");
    assert_eq!(ls[0].length, TOTAL);

    let r = fs.open("/big/file").await.expect("open");
    let mut want_sum = Fnv::default();
    let mut got_sum = Fnv::default();
    let mut off = 0u64;
    while off < TOTAL {
        let n = (1u64 << 20).min(TOTAL - off) as usize;
        let got = r.pread(off, n).await.expect("sequential pread");
        got_sum.update(&got);
        want_sum.update(&pattern(SEED, off, n));
        off += n as u64;
    }
    assert_eq!(got_sum.0, want_sum.0, "checksum of the whole file");
    for _ in 0..300 {
        let off = rng.range(0, TOTAL);
        let n = rng.range(0, (TOTAL - off).min(200 << 10) + 1) as usize;
        check_range(
            "random pread",
            SEED,
            off,
            &r.pread(off, n).await.expect("pread"),
        );
    }
    assert_err!(r.pread(TOTAL - 10, 11).await, FsError::ReadPastEnd { .. });
}

/// A prefetch hint never changes what a read returns: hinted ranges (empty, overlapping, past
/// the end, at the end of the address space, hinted from a thread outside the runtime as the
/// engine does, given before the file grew) read back exactly what was written, in pieces as a
/// scan reads them and across a hinted range's edges; reads past the end still fail.
pub async fn prefetched_reads(fs: Arc<dyn Fs>) {
    const SEED: u64 = 10;
    const FIRST: u64 = 2 << 20;
    const TOTAL: u64 = 3 << 20;
    let mut w = fs.create("/ra/f", false).await.expect("create");
    w.append(&pattern(SEED, 0, FIRST as usize), AppendFlag::Flush)
        .await
        .expect("append");
    let r = fs.open("/ra/f").await.expect("open");
    let scan = |r: Arc<dyn FsReader>, from: u64, to: u64| async move {
        let mut at = from;
        while at < to {
            let n = 25_000.min(to - at) as usize;
            let what = format!("pread of {n} at {at} after a hint");
            check_range(&what, SEED, at, &r.pread(at, n).await.expect("pread"));
            at += n as u64;
        }
    };
    r.prefetch(0, 0);
    r.prefetch(FIRST, 1 << 20);
    r.prefetch(u64::MAX - 10, 100);
    let hinted = r.clone();
    tokio::task::spawn_blocking(move || {
        hinted.prefetch(100_000, 1 << 20);
        hinted.prefetch(600_000, 1 << 20);
    })
    .await
    .expect("a hint from a blocking thread");
    scan(r.clone(), 100_000, 1_800_000).await;
    r.prefetch(1_800_000, 200_000);
    check_range(
        "pread across a hinted range's start",
        SEED,
        1_700_000,
        &r.pread(1_700_000, 200_000).await.expect("pread"),
    );
    // The file grows past what the reader knew when hinted.
    r.prefetch(FIRST - 100_000, 1 << 20);
    w.append(
        &pattern(SEED, FIRST, (TOTAL - FIRST) as usize),
        AppendFlag::Flush,
    )
    .await
    .expect("append");
    r.prefetch(FIRST + 100_000, 1 << 20);
    scan(r.clone(), FIRST - 100_000, TOTAL).await;
    assert_err!(r.pread(TOTAL - 10, 11).await, FsError::ReadPastEnd { .. });
    w.close().await.expect("close");
    scan(r, 0, 100_000).await;
}

/// FNV-1a, a checksum needing no dependency.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn update(&mut self, data: &[u8]) {
        for &b in data {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Writers and readers report their path; the file system has a URL.
pub async fn url_and_paths(fs: Arc<dyn Fs>) {
    assert!(!fs.url().is_empty());
    let mut w = fs.create("/p/q", false).await.expect("create");
    assert_eq!(w.path(), "/p/q");
    w.close().await.expect("close");
    let r = fs.open("/p/q").await.expect("open");
    assert_eq!(r.path(), "/p/q");
}

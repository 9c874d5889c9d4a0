//! The file-system wrappers of `ht bench dfs`: [`Rooted`] (one run's files under a directory of
//! a shared backend) and [`Counting`] (what the engine asks of the file system, by kind of
//! file: bytes appended and read, appends, reads, files created and removed). The counts say
//! where a backend's time goes (RPCs per MiB, small appends) and give the write
//! amplification (bytes written per byte of user data).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dfs_broker::{AppendFlag, DirEntry, Fs, FsLock, FsReader, FsResult, FsWriter};

/// A file system seen under a directory of another (so runs on one backend do not share
/// files).
pub struct Rooted {
    pub fs: Arc<dyn Fs>,
    pub root: String,
}

impl Rooted {
    /// `fs` seen under `root`, as the engine takes it.
    pub fn arc(fs: Arc<dyn Fs>, root: &str) -> Arc<dyn Fs> {
        Arc::new(Rooted {
            fs,
            root: root.to_string(),
        })
    }

    fn at(&self, path: &str) -> String {
        if path == "/" {
            self.root.clone()
        } else {
            format!("{}{path}", self.root)
        }
    }
}

#[async_trait::async_trait]
impl Fs for Rooted {
    async fn create(&self, path: &str, overwrite: bool) -> FsResult<Box<dyn FsWriter>> {
        self.fs.create(&self.at(path), overwrite).await
    }
    async fn open(&self, path: &str) -> FsResult<Arc<dyn FsReader>> {
        self.fs.open(&self.at(path)).await
    }
    async fn length(&self, path: &str) -> FsResult<u64> {
        self.fs.length(&self.at(path)).await
    }
    async fn remove(&self, path: &str) -> FsResult<()> {
        self.fs.remove(&self.at(path)).await
    }
    async fn rmdir(&self, path: &str, recursive: bool) -> FsResult<()> {
        self.fs.rmdir(&self.at(path), recursive).await
    }
    async fn rename(&self, from: &str, to: &str) -> FsResult<()> {
        self.fs.rename(&self.at(from), &self.at(to)).await
    }
    async fn mkdirs(&self, path: &str) -> FsResult<()> {
        self.fs.mkdirs(&self.at(path)).await
    }
    async fn readdir(&self, path: &str) -> FsResult<Vec<DirEntry>> {
        self.fs.readdir(&self.at(path)).await
    }
    async fn exists(&self, path: &str) -> FsResult<bool> {
        self.fs.exists(&self.at(path)).await
    }
    fn url(&self) -> String {
        format!("{}{}", self.fs.url(), self.root)
    }
}

/// The kinds of file the engine writes, told apart by their place in its layout
/// (docs/formats: `log/<n>` commit-log fragments, `tables/<id>/<group>/<range>/cs<n>` cell
/// stores, `meta/` the meta log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    CommitLog,
    CellStore,
    MetaLog,
    Other,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::CommitLog, Kind::CellStore, Kind::MetaLog, Kind::Other];

    pub fn of(path: &str) -> Kind {
        if path.contains("/log/") {
            Kind::CommitLog
        } else if path.contains("/tables/") {
            Kind::CellStore
        } else if path.contains("/meta/") {
            Kind::MetaLog
        } else {
            Kind::Other
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::CommitLog => "commit log",
            Kind::CellStore => "cell stores",
            Kind::MetaLog => "meta log",
            Kind::Other => "other",
        }
    }
}

/// Counters of one kind of file.
#[derive(Debug, Default)]
pub struct KindCounters {
    pub bytes_written: AtomicU64,
    pub appends: AtomicU64,
    /// Appends that asked for durability (flush or sync).
    pub durable_appends: AtomicU64,
    pub bytes_read: AtomicU64,
    pub reads: AtomicU64,
    pub created: AtomicU64,
    pub removed: AtomicU64,
}

/// A plain copy of [`KindCounters`] at one moment.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    pub bytes_written: u64,
    pub appends: u64,
    pub durable_appends: u64,
    pub bytes_read: u64,
    pub reads: u64,
    pub created: u64,
    pub removed: u64,
}

impl std::ops::Sub for Snapshot {
    type Output = Snapshot;
    fn sub(self, o: Snapshot) -> Snapshot {
        Snapshot {
            bytes_written: self.bytes_written - o.bytes_written,
            appends: self.appends - o.appends,
            durable_appends: self.durable_appends - o.durable_appends,
            bytes_read: self.bytes_read - o.bytes_read,
            reads: self.reads - o.reads,
            created: self.created - o.created,
            removed: self.removed - o.removed,
        }
    }
}

impl KindCounters {
    fn snapshot(&self) -> Snapshot {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Snapshot {
            bytes_written: l(&self.bytes_written),
            appends: l(&self.appends),
            durable_appends: l(&self.durable_appends),
            bytes_read: l(&self.bytes_read),
            reads: l(&self.reads),
            created: l(&self.created),
            removed: l(&self.removed),
        }
    }
}

/// The counters of every kind.
#[derive(Debug, Default)]
pub struct Counters([KindCounters; 4]);

impl Counters {
    fn of(&self, path: &str) -> &KindCounters {
        &self.0[Kind::ALL
            .iter()
            .position(|k| *k == Kind::of(path))
            .expect("every kind is in ALL")]
    }

    /// Per kind, in [`Kind::ALL`] order.
    pub fn snapshot(&self) -> [Snapshot; 4] {
        [0, 1, 2, 3].map(|i| self.0[i].snapshot())
    }
}

/// A file system that counts what is asked of it (see the module documentation).
pub struct Counting {
    pub fs: Arc<dyn Fs>,
    pub counters: Arc<Counters>,
}

fn add(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

#[async_trait::async_trait]
impl Fs for Counting {
    async fn create(&self, path: &str, overwrite: bool) -> FsResult<Box<dyn FsWriter>> {
        let inner = self.fs.create(path, overwrite).await?;
        add(&self.counters.of(path).created, 1);
        Ok(Box::new(CountingWriter {
            inner,
            counters: self.counters.clone(),
        }))
    }
    async fn open(&self, path: &str) -> FsResult<Arc<dyn FsReader>> {
        let inner = self.fs.open(path).await?;
        Ok(Arc::new(CountingReader {
            inner,
            counters: self.counters.clone(),
        }))
    }
    async fn length(&self, path: &str) -> FsResult<u64> {
        self.fs.length(path).await
    }
    async fn remove(&self, path: &str) -> FsResult<()> {
        self.fs.remove(path).await?;
        add(&self.counters.of(path).removed, 1);
        Ok(())
    }
    async fn rmdir(&self, path: &str, recursive: bool) -> FsResult<()> {
        self.fs.rmdir(path, recursive).await
    }
    async fn rename(&self, from: &str, to: &str) -> FsResult<()> {
        self.fs.rename(from, to).await
    }
    async fn mkdirs(&self, path: &str) -> FsResult<()> {
        self.fs.mkdirs(path).await
    }
    async fn readdir(&self, path: &str) -> FsResult<Vec<DirEntry>> {
        self.fs.readdir(path).await
    }
    async fn exists(&self, path: &str) -> FsResult<bool> {
        self.fs.exists(path).await
    }
    fn url(&self) -> String {
        self.fs.url()
    }
    fn lock_exclusive(&self, path: &str) -> FsResult<Option<FsLock>> {
        self.fs.lock_exclusive(path)
    }
}

struct CountingWriter {
    inner: Box<dyn FsWriter>,
    counters: Arc<Counters>,
}

#[async_trait::async_trait]
impl FsWriter for CountingWriter {
    async fn append(&mut self, data: &[u8], flag: AppendFlag) -> FsResult<()> {
        self.inner.append(data, flag).await?;
        let c = self.counters.of(self.inner.path());
        add(&c.bytes_written, data.len() as u64);
        add(&c.appends, 1);
        if flag != AppendFlag::None {
            add(&c.durable_appends, 1);
        }
        Ok(())
    }
    fn position(&self) -> u64 {
        self.inner.position()
    }
    async fn close(&mut self) -> FsResult<()> {
        self.inner.close().await
    }
    fn path(&self) -> &str {
        self.inner.path()
    }
}

struct CountingReader {
    inner: Arc<dyn FsReader>,
    counters: Arc<Counters>,
}

#[async_trait::async_trait]
impl FsReader for CountingReader {
    async fn pread(&self, offset: u64, len: usize) -> FsResult<Vec<u8>> {
        let data = self.inner.pread(offset, len).await?;
        let c = self.counters.of(self.inner.path());
        add(&c.bytes_read, data.len() as u64);
        add(&c.reads, 1);
        Ok(data)
    }
    async fn length(&self) -> FsResult<u64> {
        self.inner.length().await
    }
    fn path(&self) -> &str {
        self.inner.path()
    }
    fn prefetch(&self, offset: u64, len: usize) {
        self.inner.prefetch(offset, len);
    }
}

/// The bytes of the files under `dir` as the file system lists their lengths (one copy:
/// replicas and parity not counted), and how many files.
pub async fn logical_bytes(fs: &dyn Fs, dir: &str) -> FsResult<(u64, u64)> {
    let mut todo = vec![dir.to_string()];
    let (mut bytes, mut files) = (0u64, 0u64);
    while let Some(d) = todo.pop() {
        for e in fs.readdir(&d).await? {
            if e.is_dir {
                todo.push(format!("{}/{}", d.trim_end_matches('/'), e.name));
            } else {
                bytes += e.length;
                files += 1;
            }
        }
    }
    Ok((bytes, files))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_the_engines_layout() {
        assert_eq!(Kind::of("/ht/log/12"), Kind::CommitLog);
        assert_eq!(Kind::of("/ht/tables/1/default/r1/cs0"), Kind::CellStore);
        assert_eq!(Kind::of("/ht/meta/meta.1"), Kind::MetaLog);
        assert_eq!(Kind::of("/ht/LOCK"), Kind::Other);
    }

    #[test]
    fn appends_reads_creates_and_removes_are_counted_by_kind() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let fs = Counting {
                fs: Arc::new(dfs_broker::LocalFs::new(dir.path()).expect("local")),
                counters: Arc::default(),
            };
            let mut w = fs.create("/ht/log/0", false).await.expect("create");
            w.append(b"abc", AppendFlag::None).await.expect("append");
            w.append(b"de", AppendFlag::Flush).await.expect("append");
            w.close().await.expect("close");
            let mut w = fs.create("/ht/tables/1/g/r1/cs0", false).await.expect("cs");
            w.append(&[7; 100], AppendFlag::Sync).await.expect("append");
            w.close().await.expect("close");
            let r = fs.open("/ht/tables/1/g/r1/cs0").await.expect("open");
            assert_eq!(r.pread(10, 20).await.expect("pread").len(), 20);
            fs.remove("/ht/log/0").await.expect("remove");
            let s = fs.counters.snapshot();
            let log = Snapshot {
                bytes_written: 5,
                appends: 2,
                durable_appends: 1,
                created: 1,
                removed: 1,
                ..Snapshot::default()
            };
            let cs = Snapshot {
                bytes_written: 100,
                appends: 1,
                durable_appends: 1,
                bytes_read: 20,
                reads: 1,
                created: 1,
                ..Snapshot::default()
            };
            assert_eq!(s, [log, cs, Snapshot::default(), Snapshot::default()]);
            assert_eq!(logical_bytes(&fs, "/ht").await.expect("walk"), (100, 1));
        });
    }
}

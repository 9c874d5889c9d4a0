//! The `local` backend: a directory of the local file system.
//!
//! `append(Flush)` hands data to the kernel with write(2), which survives the death of the
//! process; `append(Sync)` also calls fdatasync. Calls are plain blocking syscalls: the engine
//! calls them from blocking threads, and they are short except for sync. A writer whose write
//! or sync failed refuses every later append, since what reached the file is unknown.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;

use crate::{AppendFlag, DirEntry, Fs, FsError, FsReader, FsResult, FsWriter, check_path};

/// Size of the user-space buffer that holds `append(None)` data.
const WRITE_BUFFER_BYTES: usize = 256 * 1024;

/// A directory of the local file system used as an ht file system.
#[derive(Debug, Clone)]
pub struct LocalFs {
    root: PathBuf,
}

fn io_err(op: &'static str, path: &str, e: io::Error) -> FsError {
    match e.kind() {
        io::ErrorKind::NotFound => FsError::NotFound {
            op,
            path: path.to_string(),
        },
        io::ErrorKind::AlreadyExists => FsError::AlreadyExists {
            op,
            path: path.to_string(),
        },
        io::ErrorKind::DirectoryNotEmpty => FsError::DirectoryNotEmpty {
            op,
            path: path.to_string(),
        },
        io::ErrorKind::IsADirectory => FsError::IsADirectory {
            op,
            path: path.to_string(),
        },
        io::ErrorKind::NotADirectory => FsError::NotADirectory {
            op,
            path: path.to_string(),
        },
        _ => FsError::Io {
            op,
            path: path.to_string(),
            source: e,
        },
    }
}

impl LocalFs {
    /// A file system rooted at `root`, which is created if missing.
    pub fn new(root: impl Into<PathBuf>) -> FsResult<Self> {
        let root = root.into();
        fs::create_dir_all(&root).map_err(|e| io_err("mkdirs", &root.to_string_lossy(), e))?;
        Ok(Self { root })
    }

    /// The local directory this file system lives in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn real(&self, op: &'static str, path: &str) -> FsResult<PathBuf> {
        check_path(op, path)?;
        Ok(self.root.join(path.trim_start_matches('/')))
    }
}

fn sync_dir(dir: &Path) {
    // Makes a create/rename durable; failure is not fatal for correctness of reads.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[async_trait]
impl Fs for LocalFs {
    /// flock(2) on the file (`File::try_lock`): released by the kernel when the process dies,
    /// so a crash never leaves a stale lock.
    fn lock_exclusive(&self, path: &str) -> FsResult<Option<crate::FsLock>> {
        let real = self.real("lock", path)?;
        if let Some(parent) = real.parent() {
            fs::create_dir_all(parent).map_err(|e| io_err("lock", path, e))?;
        }
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&real)
            .map_err(|e| io_err("lock", path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(crate::FsLock::new(file))),
            Err(fs::TryLockError::WouldBlock) => Err(FsError::Backend {
                op: "lock",
                path: path.to_string(),
                msg: format!(
                    "held by another process ({}): the store is in use",
                    real.display()
                ),
            }),
            Err(fs::TryLockError::Error(e)) => Err(io_err("lock", path, e)),
        }
    }

    async fn create(&self, path: &str, overwrite: bool) -> FsResult<Box<dyn FsWriter>> {
        let real = self.real("create", path)?;
        if let Some(parent) = real.parent() {
            fs::create_dir_all(parent).map_err(|e| io_err("create", path, e))?;
        }
        if real.is_dir() {
            return Err(FsError::IsADirectory {
                op: "create",
                path: path.to_string(),
            });
        }
        let mut oo = OpenOptions::new();
        oo.write(true);
        if overwrite {
            oo.create(true).truncate(true);
        } else {
            oo.create_new(true);
        }
        let file = oo.open(&real).map_err(|e| io_err("create", path, e))?;
        if let Some(parent) = real.parent() {
            sync_dir(parent);
        }
        Ok(Box::new(LocalWriter {
            file: Some(file),
            path: path.to_string(),
            buf: Vec::new(),
            written: 0,
            failed: None,
        }))
    }

    async fn open(&self, path: &str) -> FsResult<Arc<dyn FsReader>> {
        let real = self.real("open", path)?;
        let file = File::open(&real).map_err(|e| io_err("open", path, e))?;
        let meta = file.metadata().map_err(|e| io_err("open", path, e))?;
        if meta.is_dir() {
            return Err(FsError::IsADirectory {
                op: "open",
                path: path.to_string(),
            });
        }
        Ok(Arc::new(LocalReader {
            file,
            path: path.to_string(),
            known_len: AtomicU64::new(0),
        }))
    }

    async fn length(&self, path: &str) -> FsResult<u64> {
        let real = self.real("length", path)?;
        let meta = fs::metadata(&real).map_err(|e| io_err("length", path, e))?;
        if meta.is_dir() {
            return Err(FsError::IsADirectory {
                op: "length",
                path: path.to_string(),
            });
        }
        Ok(meta.len())
    }

    async fn remove(&self, path: &str) -> FsResult<()> {
        let real = self.real("remove", path)?;
        if real.is_dir() {
            return Err(FsError::IsADirectory {
                op: "remove",
                path: path.to_string(),
            });
        }
        fs::remove_file(&real).map_err(|e| io_err("remove", path, e))
    }

    async fn rmdir(&self, path: &str, recursive: bool) -> FsResult<()> {
        let real = self.real("rmdir", path)?;
        let meta = fs::metadata(&real).map_err(|e| io_err("rmdir", path, e))?;
        if !meta.is_dir() {
            return Err(FsError::NotADirectory {
                op: "rmdir",
                path: path.to_string(),
            });
        }
        if path == "/" {
            // The root is the file system itself: empty it, but keep it.
            for ent in fs::read_dir(&real).map_err(|e| io_err("rmdir", path, e))? {
                let ent = ent.map_err(|e| io_err("rmdir", path, e))?;
                if !recursive {
                    return Err(FsError::DirectoryNotEmpty {
                        op: "rmdir",
                        path: path.to_string(),
                    });
                }
                let p = ent.path();
                let res = if ent.file_type().is_ok_and(|t| t.is_dir()) {
                    fs::remove_dir_all(&p)
                } else {
                    fs::remove_file(&p)
                };
                res.map_err(|e| io_err("rmdir", path, e))?;
            }
            Ok(())
        } else if recursive {
            fs::remove_dir_all(&real).map_err(|e| io_err("rmdir", path, e))
        } else {
            fs::remove_dir(&real).map_err(|e| io_err("rmdir", path, e))
        }
    }

    async fn rename(&self, from: &str, to: &str) -> FsResult<()> {
        let rf = self.real("rename", from)?;
        let rt = self.real("rename", to)?;
        if !rf.exists() {
            return Err(FsError::NotFound {
                op: "rename",
                path: from.to_string(),
            });
        }
        if rt.exists() {
            return Err(FsError::AlreadyExists {
                op: "rename",
                path: to.to_string(),
            });
        }
        if let Some(parent) = rt.parent() {
            fs::create_dir_all(parent).map_err(|e| io_err("rename", to, e))?;
        }
        fs::rename(&rf, &rt).map_err(|e| io_err("rename", from, e))?;
        if let Some(parent) = rt.parent() {
            sync_dir(parent);
        }
        Ok(())
    }

    async fn mkdirs(&self, path: &str) -> FsResult<()> {
        let real = self.real("mkdirs", path)?;
        fs::create_dir_all(&real).map_err(|e| io_err("mkdirs", path, e))
    }

    async fn readdir(&self, path: &str) -> FsResult<Vec<DirEntry>> {
        let real = self.real("readdir", path)?;
        let rd = fs::read_dir(&real).map_err(|e| io_err("readdir", path, e))?;
        let mut out = Vec::new();
        for ent in rd {
            let ent = ent.map_err(|e| io_err("readdir", path, e))?;
            let meta = ent.metadata().map_err(|e| io_err("readdir", path, e))?;
            out.push(DirEntry {
                name: ent.file_name().to_string_lossy().into_owned(),
                is_dir: meta.is_dir(),
                length: if meta.is_dir() { 0 } else { meta.len() },
            });
        }
        out.sort();
        Ok(out)
    }

    async fn exists(&self, path: &str) -> FsResult<bool> {
        let real = self.real("exists", path)?;
        Ok(real.exists())
    }

    fn url(&self) -> String {
        format!("file://{}", self.root.display())
    }
}

struct LocalWriter {
    file: Option<File>,
    path: String,
    buf: Vec<u8>,
    /// Bytes handed to the kernel.
    written: u64,
    /// Set when a write failed: how much of it reached the file is unknown, so `position()`
    /// no longer describes the file and every later append or close must fail.
    failed: Option<String>,
}

impl LocalWriter {
    fn file(&mut self, op: &'static str) -> FsResult<&mut File> {
        if let Some(msg) = &self.failed {
            return Err(FsError::Backend {
                op,
                path: self.path.clone(),
                msg: format!("an earlier write failed: {msg}"),
            });
        }
        match self.file.as_mut() {
            Some(f) => Ok(f),
            None => Err(FsError::Closed {
                op,
                path: self.path.clone(),
            }),
        }
    }

    fn write_out(&mut self, op: &'static str) -> FsResult<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.buf);
        let res = self.file(op)?.write_all(&buf);
        self.check(op, res)?;
        self.written += buf.len() as u64;
        self.buf = buf;
        self.buf.clear();
        Ok(())
    }

    /// Poisons the writer if a write or sync failed.
    fn check(&mut self, op: &'static str, res: io::Result<()>) -> FsResult<()> {
        res.map_err(|e| {
            self.failed = Some(e.to_string());
            io_err(op, &self.path, e)
        })
    }
}

#[async_trait]
impl FsWriter for LocalWriter {
    async fn append(&mut self, data: &[u8], flag: AppendFlag) -> FsResult<()> {
        self.file("append")?;
        if flag == AppendFlag::None && self.buf.len() + data.len() <= WRITE_BUFFER_BYTES {
            self.buf.extend_from_slice(data);
            return Ok(());
        }
        self.write_out("append")?;
        let res = self.file("append")?.write_all(data);
        self.check("append", res)?;
        self.written += data.len() as u64;
        if flag == AppendFlag::Sync {
            let res = self.file("append")?.sync_data();
            self.check("append", res)?;
        }
        Ok(())
    }

    fn position(&self) -> u64 {
        self.written + self.buf.len() as u64
    }

    async fn close(&mut self) -> FsResult<()> {
        if self.file.is_none() {
            return Ok(());
        }
        let res = self.write_out("close").and_then(|()| {
            let res = self.file("close")?.sync_data();
            self.check("close", res)
        });
        // A failed close still closes: retrying cannot tell what reached the file.
        self.file = None;
        res
    }

    fn path(&self) -> &str {
        &self.path
    }
}

struct LocalReader {
    file: File,
    path: String,
    /// The largest length the file was seen to have: a read within it skips the `fstat`
    /// (a file that shrank since fails the read itself, reported as a read past the end).
    known_len: AtomicU64,
}

#[async_trait]
impl FsReader for LocalReader {
    async fn pread(&self, offset: u64, len: usize) -> FsResult<Vec<u8>> {
        // Check the bounds before allocating: a corrupt length read from a file must come back
        // as ReadPastEnd, not abort the process trying to allocate it. This also makes a
        // zero-length read beyond the end an error, which read_exact_at would accept.
        let past_end = |file_len| FsError::ReadPastEnd {
            path: self.path.clone(),
            offset,
            len,
            file_len,
        };
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|end| end > self.known_len.load(Ordering::Relaxed)) {
            let file_len = self.length().await?;
            self.known_len.fetch_max(file_len, Ordering::Relaxed);
            match end {
                Some(end) if end <= file_len => {}
                _ => return Err(past_end(file_len)),
            }
        }
        let mut buf = vec![0u8; len];
        match self.file.read_exact_at(&mut buf, offset) {
            Ok(()) => Ok(buf),
            // The file shrank (was overwritten) since the length check.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                Err(past_end(self.file.metadata().map(|m| m.len()).unwrap_or(0)))
            }
            Err(e) => Err(io_err("pread", &self.path, e)),
        }
    }

    /// `posix_fadvise(WILLNEED)`: the kernel starts reading the bytes into the page cache.
    fn prefetch(&self, offset: u64, len: usize) {
        use std::os::fd::AsRawFd;
        let (Ok(off), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
            return;
        };
        // SAFETY: a hint on a descriptor this reader owns for its whole life; it reads or
        // writes no memory of this process. A failure only means no read-ahead.
        unsafe {
            libc::posix_fadvise(self.file.as_raw_fd(), off, len, libc::POSIX_FADV_WILLNEED);
        }
    }

    async fn length(&self) -> FsResult<u64> {
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| io_err("length", &self.path, e))
    }

    fn path(&self) -> &str {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local() -> (tempfile::TempDir, LocalFs) {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = LocalFs::new(dir.path().join("fs")).expect("LocalFs::new");
        (dir, fs)
    }

    /// Regression: pread allocated `len` bytes before checking the file length, so a corrupt
    /// length aborted the process; and a zero-length read beyond the end succeeded.
    #[tokio::test]
    async fn pread_checks_bounds_before_allocating() {
        let (_dir, fs) = local();
        let mut w = fs.create("/f", false).await.expect("create");
        w.append(b"0123456789", AppendFlag::Flush)
            .await
            .expect("append");
        let r = fs.open("/f").await.expect("open");
        assert!(matches!(
            r.pread(0, usize::MAX / 2).await,
            Err(FsError::ReadPastEnd { file_len: 10, .. })
        ));
        assert!(matches!(
            r.pread(11, 0).await,
            Err(FsError::ReadPastEnd { .. })
        ));
        assert!(matches!(
            r.pread(u64::MAX, 2).await,
            Err(FsError::ReadPastEnd { .. })
        ));
        assert_eq!(r.pread(10, 0).await.expect("empty read at the end"), b"");
    }

    /// Regression: a failed write dropped the buffered bytes and left the writer usable, so
    /// later appends landed after a hole of unknown size while `position()` went backwards.
    #[tokio::test]
    async fn failed_write_poisons_the_writer() {
        let (_dir, fs) = local();
        // /dev/full fails every write with ENOSPC.
        std::os::unix::fs::symlink("/dev/full", fs.root().join("full")).expect("symlink");
        let mut w = fs.create("/full", true).await.expect("create");
        w.append(b"abc", AppendFlag::None)
            .await
            .expect("buffered append");
        assert!(matches!(
            w.append(b"def", AppendFlag::Flush).await,
            Err(FsError::Io { .. })
        ));
        let later = w.append(b"ghi", AppendFlag::None).await;
        assert!(matches!(later, Err(FsError::Backend { .. })), "{later:?}");
        assert!(w.close().await.is_err(), "close of a failed writer");
        assert!(w.close().await.is_ok(), "second close");
    }

    /// Regression: rmdir("/", true) deleted the root directory itself.
    #[tokio::test]
    async fn rmdir_root_keeps_the_root() {
        let (_dir, fs) = local();
        fs.mkdirs("/a/b").await.expect("mkdirs");
        fs.rmdir("/", true).await.expect("rmdir /");
        assert!(fs.root().is_dir());
        assert!(fs.readdir("/").await.expect("readdir").is_empty());
    }
}

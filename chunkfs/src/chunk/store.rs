//! Chunk files on a chunk server's disk: `<id>.data` holds the bytes, `<id>.sum` a header and
//! one crc32c per 64 KiB piece (layout in `docs/formats/chunkfs.md`). Every read verifies the
//! checksums of the pieces it touches; a write updates them before it is acknowledged.
//!
//! All calls do blocking file I/O: the server runs them on blocking threads.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::drop_behind::DropBehind;
use crate::PIECE_BYTES;
use crate::messages::{ChunkError, chunk_code};

/// Magic bytes opening a `.sum` file.
pub const SUM_MAGIC: &[u8; 8] = b"HTCKSUM1";
pub const SUM_VERSION: u32 = 1;
/// Bytes of the `.sum` header (magic, version, piece size, chunk id, reserved, header crc).
pub const SUM_HEADER_BYTES: u64 = 32;

/// A chunk server's store error: a [`chunk_code`] and a message naming the chunk and file.
#[derive(Debug, Clone)]
pub struct StoreError {
    pub code: i32,
    pub message: String,
}

impl StoreError {
    fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    fn io(what: &str, path: &Path, e: std::io::Error) -> Self {
        Self::new(chunk_code::IO, format!("{what} {}: {e}", path.display()))
    }

    pub fn to_wire(&self, server: &str) -> ChunkError {
        ChunkError {
            code: self.code,
            message: format!("chunk server {server}: {}", self.message),
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// What is known of one chunk in memory.
#[derive(Debug)]
struct ChunkState {
    len: u64,
    crcs: Vec<u32>,
    /// Removed while a caller held it: its files are gone.
    deleted: bool,
    /// The data and checksum files, kept open while the chunk is being written (until it is
    /// finalized), at most [`MAX_OPEN_CHUNKS`] chunks at once.
    handles: Option<(File, File)>,
    /// What of the data was handed to write-back and dropped from the page cache.
    behind: DropBehind,
}

/// Chunks whose files are kept open between writes.
pub const MAX_OPEN_CHUNKS: usize = 1024;

/// The chunk files under one directory.
#[derive(Debug)]
pub struct ChunkStore {
    dir: PathBuf,
    max_chunk_bytes: u64,
    /// Drop-behind lag (`drop_behind.rs`); 0 keeps written data in the page cache.
    drop_behind_bytes: u64,
    chunks: Mutex<HashMap<u64, Arc<Mutex<ChunkState>>>>,
    /// Chunks holding open handles.
    open_handles: std::sync::atomic::AtomicUsize,
}

fn piece_range(p: usize, len: u64) -> (u64, u64) {
    let start = (p * PIECE_BYTES) as u64;
    (start, (start + PIECE_BYTES as u64).min(len))
}

fn header(chunk_id: u64) -> [u8; SUM_HEADER_BYTES as usize] {
    let mut h = [0u8; SUM_HEADER_BYTES as usize];
    h[..8].copy_from_slice(SUM_MAGIC);
    h[8..12].copy_from_slice(&SUM_VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&(PIECE_BYTES as u32).to_le_bytes());
    h[16..24].copy_from_slice(&chunk_id.to_le_bytes());
    let crc = crc32c::crc32c(&h[..28]);
    h[28..32].copy_from_slice(&crc.to_le_bytes());
    h
}

impl ChunkStore {
    /// Drops what is written from the page cache `bytes` behind the writes (`drop_behind.rs`;
    /// 0: keep it cached).
    pub fn with_drop_behind(mut self, bytes: u64) -> Self {
        self.drop_behind_bytes = bytes;
        self
    }

    /// Opens (creating) the store in `dir`, loading every chunk found there. A chunk whose last
    /// piece does not match its checksum but has a prefix that does (a crash between the data
    /// and the checksum write of an append) is cut back to that prefix; with no such prefix
    /// the piece is damaged, kept as it is, and reads of it fail with `CORRUPT`.
    pub fn open(dir: &Path, max_chunk_bytes: u64) -> StoreResult<Self> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create", dir, e))?;
        let store = Self {
            dir: dir.to_path_buf(),
            max_chunk_bytes,
            drop_behind_bytes: 0,
            chunks: Mutex::new(HashMap::new()),
            open_handles: std::sync::atomic::AtomicUsize::new(0),
        };
        let entries = std::fs::read_dir(dir).map_err(|e| StoreError::io("list", dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io("list", dir, e))?;
            let name = entry.file_name();
            let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_suffix(".sum"))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            match store.load(id) {
                Ok(state) => {
                    store.chunks.lock().insert(id, Arc::new(Mutex::new(state)));
                }
                Err(e) => {
                    // Not served (the metadata server repairs it from other replicas), but
                    // its files stay: a damaged header must not destroy the only copy.
                    tracing::error!(chunk = id, error = %e.message, "chunk store: not serving an unreadable chunk; its files are kept");
                }
            }
        }
        Ok(store)
    }

    fn data_path(&self, id: u64) -> PathBuf {
        self.dir.join(format!("{id}.data"))
    }

    fn sum_path(&self, id: u64) -> PathBuf {
        self.dir.join(format!("{id}.sum"))
    }

    /// The path of a chunk's data file (tests corrupt it).
    pub fn chunk_data_path(dir: &Path, id: u64) -> PathBuf {
        dir.join(format!("{id}.data"))
    }

    fn load(&self, id: u64) -> StoreResult<ChunkState> {
        let sum_path = self.sum_path(id);
        let data_path = self.data_path(id);
        let sum = std::fs::read(&sum_path).map_err(|e| StoreError::io("read", &sum_path, e))?;
        let bad = |why: &str| {
            StoreError::new(
                chunk_code::CORRUPT,
                format!("{}: {why}", sum_path.display()),
            )
        };
        if sum.len() < SUM_HEADER_BYTES as usize || &sum[..8] != SUM_MAGIC {
            return Err(bad("no chunk checksum header"));
        }
        let want = u32::from_le_bytes(sum[28..32].try_into().expect("4 bytes"));
        if crc32c::crc32c(&sum[..28]) != want {
            return Err(bad("header checksum mismatch"));
        }
        let version = u32::from_le_bytes(sum[8..12].try_into().expect("4 bytes"));
        let piece = u32::from_le_bytes(sum[12..16].try_into().expect("4 bytes"));
        let stored_id = u64::from_le_bytes(sum[16..24].try_into().expect("8 bytes"));
        if version != SUM_VERSION || piece as usize != PIECE_BYTES || stored_id != id {
            return Err(bad("unsupported version, piece size or wrong chunk id"));
        }
        let mut crcs: Vec<u32> = sum[SUM_HEADER_BYTES as usize..]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        let data = File::open(&data_path).map_err(|e| StoreError::io("open", &data_path, e))?;
        let mut len = data
            .metadata()
            .map_err(|e| StoreError::io("stat", &data_path, e))?
            .len();
        let pieces = len.div_ceil(PIECE_BYTES as u64) as usize;
        if crcs.len() < pieces {
            len = (crcs.len() * PIECE_BYTES) as u64;
        }
        crcs.truncate(len.div_ceil(PIECE_BYTES as u64) as usize);
        // Only the last piece can be torn by a crash: check it, and cut it back to the longest
        // prefix matching its checksum.
        if let Some(&last_crc) = crcs.last() {
            let p = crcs.len() - 1;
            let (start, end) = piece_range(p, len);
            let mut buf = vec![0u8; (end - start) as usize];
            data.read_exact_at(&mut buf, start)
                .map_err(|e| StoreError::io("read", &data_path, e))?;
            let mut good = None;
            if crc32c::crc32c(&buf) != last_crc {
                let mut crc = 0u32;
                if last_crc == 0 {
                    good = Some(0);
                }
                for (i, b) in buf.iter().enumerate() {
                    crc = crc32c::crc32c_append(crc, std::slice::from_ref(b));
                    if crc == last_crc {
                        good = Some(i + 1);
                    }
                }
                if good.is_none() {
                    tracing::error!(
                        chunk = id,
                        piece = p,
                        "chunk store: last piece fails its checksum; kept for reads to report"
                    );
                }
            }
            if let Some(keep) = good {
                let keep = keep as u64;
                tracing::warn!(
                    chunk = id,
                    from = len,
                    to = start + keep,
                    "chunk store: torn tail cut back"
                );
                len = start + keep;
                crcs.truncate(p);
                if keep > 0 {
                    crcs.push(last_crc);
                }
                let f = OpenOptions::new()
                    .write(true)
                    .open(&data_path)
                    .map_err(|e| StoreError::io("open", &data_path, e))?;
                f.set_len(len)
                    .map_err(|e| StoreError::io("truncate", &data_path, e))?;
            }
        }
        Ok(ChunkState {
            len,
            crcs,
            deleted: false,
            handles: None,
            behind: DropBehind::default(),
        })
    }

    fn remove_files(&self, id: u64) {
        let _ = std::fs::remove_file(self.data_path(id));
        let _ = std::fs::remove_file(self.sum_path(id));
    }

    fn get(&self, id: u64) -> StoreResult<Arc<Mutex<ChunkState>>> {
        self.chunks.lock().get(&id).cloned().ok_or_else(|| {
            StoreError::new(chunk_code::NOT_FOUND, format!("chunk {id}: no such chunk"))
        })
    }

    /// Every chunk and its length.
    pub fn list(&self) -> Vec<(u64, u64)> {
        let chunks: Vec<_> = self
            .chunks
            .lock()
            .iter()
            .map(|(id, c)| (*id, c.clone()))
            .collect();
        let mut out: Vec<(u64, u64)> = chunks
            .into_iter()
            .map(|(id, c)| (id, c.lock().len))
            .collect();
        out.sort_unstable();
        out
    }

    /// Bytes stored (data only).
    pub fn used_bytes(&self) -> u64 {
        self.list().iter().map(|(_, len)| len).sum()
    }

    /// The length of a chunk.
    pub fn length(&self, id: u64) -> StoreResult<u64> {
        Ok(self.get(id)?.lock().len)
    }

    /// Writes `data` at `offset` (at most the current length); `create` starts the chunk afresh.
    /// Returns the chunk's length after the write.
    pub fn write(
        &self,
        id: u64,
        offset: u64,
        data: &[u8],
        create: bool,
        sync: bool,
    ) -> StoreResult<u64> {
        let data_path = self.data_path(id);
        let sum_path = self.sum_path(id);
        let end = offset.saturating_add(data.len() as u64);
        if end > self.max_chunk_bytes {
            return Err(StoreError::new(
                chunk_code::INVALID,
                format!(
                    "chunk {id}: write of {} bytes at {offset} passes the chunk limit of {} bytes",
                    data.len(),
                    self.max_chunk_bytes
                ),
            ));
        }
        let chunk = if create {
            if offset != 0 {
                return Err(StoreError::new(
                    chunk_code::INVALID,
                    format!("chunk {id}: a new chunk starts at offset 0, not {offset}"),
                ));
            }
            let state = Arc::new(Mutex::new(ChunkState {
                len: 0,
                crcs: Vec::new(),
                deleted: false,
                handles: None,
                behind: DropBehind::default(),
            }));
            let old = self.chunks.lock().insert(id, state.clone());
            if let Some(old) = old {
                let mut old = old.lock();
                old.deleted = true;
                self.drop_handles(&mut old);
            }
            let mut guard = state.lock();
            let create = |path: &Path| {
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(path)
                    .map_err(|e| StoreError::io("create", path, e))
            };
            let f = create(&data_path)?;
            let s = create(&sum_path)?;
            s.write_all_at(&header(id), 0)
                .map_err(|e| StoreError::io("write", &sum_path, e))?;
            if sync {
                s.sync_data()
                    .map_err(|e| StoreError::io("sync", &sum_path, e))?;
                f.sync_data()
                    .map_err(|e| StoreError::io("sync", &data_path, e))?;
                if let Ok(d) = File::open(&self.dir) {
                    let _ = d.sync_all();
                }
            }
            guard.len = 0;
            self.keep_handles(&mut guard, (f, s));
            drop(guard);
            state
        } else {
            self.get(id)?
        };
        let mut st = chunk.lock();
        if st.deleted {
            return Err(StoreError::new(
                chunk_code::NOT_FOUND,
                format!("chunk {id}: deleted"),
            ));
        }
        if offset > st.len {
            return Err(StoreError::new(
                chunk_code::INVALID,
                format!(
                    "chunk {id}: write at {offset} leaves a hole after the end ({} bytes)",
                    st.len
                ),
            ));
        }
        let (f, s) = match st.handles.take() {
            Some(h) => {
                self.open_handles
                    .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                h
            }
            None => (
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&data_path)
                    .map_err(|e| StoreError::io("open", &data_path, e))?,
                OpenOptions::new()
                    .write(true)
                    .open(&sum_path)
                    .map_err(|e| StoreError::io("open", &sum_path, e))?,
            ),
        };
        if !data.is_empty() {
            f.write_all_at(data, offset)
                .map_err(|e| StoreError::io("write", &data_path, e))?;
            let new_len = st.len.max(end);
            let first = (offset / PIECE_BYTES as u64) as usize;
            let last = ((end - 1) / PIECE_BYTES as u64) as usize;
            let mut new_crcs = Vec::with_capacity(last - first + 1);
            if offset == st.len {
                // Appending: extend the running checksum of the partial last piece.
                let mut pos = offset;
                let mut rest = data;
                while !rest.is_empty() {
                    let p = (pos / PIECE_BYTES as u64) as usize;
                    let in_piece = (pos % PIECE_BYTES as u64) as usize;
                    let n = (PIECE_BYTES - in_piece).min(rest.len());
                    let crc = if in_piece == 0 {
                        crc32c::crc32c(&rest[..n])
                    } else {
                        crc32c::crc32c_append(st.crcs[p], &rest[..n])
                    };
                    new_crcs.push(crc);
                    pos += n as u64;
                    rest = &rest[n..];
                }
            } else {
                // Overwriting: checksum the affected pieces as they now are on disk.
                for p in first..=last {
                    let (start, stop) = piece_range(p, new_len);
                    let mut buf = vec![0u8; (stop - start) as usize];
                    f.read_exact_at(&mut buf, start)
                        .map_err(|e| StoreError::io("read", &data_path, e))?;
                    new_crcs.push(crc32c::crc32c(&buf));
                }
            }
            if st.crcs.len() <= last {
                st.crcs.resize(last + 1, 0);
            }
            let mut bytes = Vec::with_capacity(new_crcs.len() * 4);
            for (i, crc) in new_crcs.iter().enumerate() {
                st.crcs[first + i] = *crc;
                bytes.extend_from_slice(&crc.to_le_bytes());
            }
            s.write_all_at(&bytes, SUM_HEADER_BYTES + 4 * first as u64)
                .map_err(|e| StoreError::io("write", &sum_path, e))?;
            st.len = new_len;
        }
        let lag = self.drop_behind_bytes;
        if sync {
            f.sync_data()
                .map_err(|e| StoreError::io("sync", &data_path, e))?;
            s.sync_data()
                .map_err(|e| StoreError::io("sync", &sum_path, e))?;
            let len = st.len;
            st.behind.after_sync(&f, len, lag);
        } else {
            st.behind.after_write(&f, end, lag);
        }
        let len = st.len;
        self.keep_handles(&mut st, (f, s));
        Ok(len)
    }

    /// Keeps a chunk's files open for its next write, unless too many are open.
    fn keep_handles(&self, st: &mut ChunkState, handles: (File, File)) {
        use std::sync::atomic::Ordering;
        if self.open_handles.fetch_add(1, Ordering::Relaxed) < MAX_OPEN_CHUNKS {
            st.handles = Some(handles);
        } else {
            self.open_handles.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn drop_handles(&self, st: &mut ChunkState) {
        if st.handles.take().is_some() {
            self.open_handles
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Reads `len` bytes at `offset`, verifying every piece touched.
    pub fn read(&self, id: u64, offset: u64, len: usize) -> StoreResult<Vec<u8>> {
        let chunk = self.get(id)?;
        let st = chunk.lock();
        let end = offset.saturating_add(len as u64);
        if end > st.len {
            return Err(StoreError::new(
                chunk_code::INVALID,
                format!(
                    "chunk {id}: read of {len} bytes at {offset} passes its end ({} bytes)",
                    st.len
                ),
            ));
        }
        if len == 0 {
            return Ok(Vec::new());
        }
        let data_path = self.data_path(id);
        let f = File::open(&data_path).map_err(|e| StoreError::io("open", &data_path, e))?;
        let first = (offset / PIECE_BYTES as u64) as usize;
        let last = ((end - 1) / PIECE_BYTES as u64) as usize;
        let span_start = (first * PIECE_BYTES) as u64;
        let span_end = piece_range(last, st.len).1;
        let mut buf = vec![0u8; (span_end - span_start) as usize];
        f.read_exact_at(&mut buf, span_start)
            .map_err(|e| StoreError::io("read", &data_path, e))?;
        for p in first..=last {
            let (start, stop) = piece_range(p, st.len);
            let piece = &buf[(start - span_start) as usize..(stop - span_start) as usize];
            if crc32c::crc32c(piece) != st.crcs[p] {
                return Err(StoreError::new(
                    chunk_code::CORRUPT,
                    format!(
                        "chunk {id}: checksum mismatch in piece {p} (bytes {start}..{stop}) of {}",
                        data_path.display()
                    ),
                ));
            }
        }
        let at = (offset - span_start) as usize;
        buf.truncate(at + len);
        buf.drain(..at);
        Ok(buf)
    }

    /// Reads and verifies the whole chunk (the background scanner).
    pub fn verify(&self, id: u64) -> StoreResult<()> {
        let len = self.length(id)?;
        let mut off = 0u64;
        while off < len {
            let n = (len - off).min(4 << 20) as usize;
            self.read(id, off, n)?;
            off += n as u64;
        }
        Ok(())
    }

    /// Cuts the chunk to `length` and syncs it.
    /// Finalizing a chunk this server never got at length 0 succeeds: nothing to keep (a writer
    /// probing which servers are alive after a failed first write).
    pub fn finalize(&self, id: u64, length: u64) -> StoreResult<u64> {
        let chunk = match self.get(id) {
            Err(e) if e.code == chunk_code::NOT_FOUND && length == 0 => return Ok(0),
            other => other?,
        };
        let mut st = chunk.lock();
        self.drop_handles(&mut st);
        if length > st.len {
            return Err(StoreError::new(
                chunk_code::INVALID,
                format!(
                    "chunk {id}: cannot finalize at {length} bytes, the replica has {}",
                    st.len
                ),
            ));
        }
        let data_path = self.data_path(id);
        let sum_path = self.sum_path(id);
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&data_path)
            .map_err(|e| StoreError::io("open", &data_path, e))?;
        let s = OpenOptions::new()
            .write(true)
            .open(&sum_path)
            .map_err(|e| StoreError::io("open", &sum_path, e))?;
        if length < st.len {
            f.set_len(length)
                .map_err(|e| StoreError::io("truncate", &data_path, e))?;
            let pieces = length.div_ceil(PIECE_BYTES as u64) as usize;
            st.crcs.truncate(pieces);
            if !length.is_multiple_of(PIECE_BYTES as u64) {
                let (start, stop) = piece_range(pieces - 1, length);
                let mut buf = vec![0u8; (stop - start) as usize];
                f.read_exact_at(&mut buf, start)
                    .map_err(|e| StoreError::io("read", &data_path, e))?;
                let crc = crc32c::crc32c(&buf);
                st.crcs[pieces - 1] = crc;
                s.write_all_at(
                    &crc.to_le_bytes(),
                    SUM_HEADER_BYTES + 4 * (pieces as u64 - 1),
                )
                .map_err(|e| StoreError::io("write", &sum_path, e))?;
            }
            s.set_len(SUM_HEADER_BYTES + 4 * pieces as u64)
                .map_err(|e| StoreError::io("truncate", &sum_path, e))?;
            st.len = length;
            st.behind.truncated(length);
        }
        f.sync_data()
            .map_err(|e| StoreError::io("sync", &data_path, e))?;
        s.sync_data()
            .map_err(|e| StoreError::io("sync", &sum_path, e))?;
        let len = st.len;
        st.behind.after_sync(&f, len, self.drop_behind_bytes);
        Ok(st.len)
    }

    /// Deletes a chunk (absent is fine).
    pub fn delete(&self, id: u64) {
        let removed = self.chunks.lock().remove(&id);
        if let Some(chunk) = removed {
            let mut st = chunk.lock();
            st.deleted = true;
            self.drop_handles(&mut st);
            self.remove_files(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages of `path` in the page cache, and pages in all (`mincore` over a mapping).
    #[cfg(target_os = "linux")]
    fn cached_pages(path: &Path) -> (usize, usize) {
        use std::os::fd::AsRawFd;
        let f = File::open(path).unwrap();
        let len = f.metadata().unwrap().len() as usize;
        // SAFETY: sysconf has no memory arguments.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let mut vec = vec![0u8; len.div_ceil(page)];
        // SAFETY: a read-only shared mapping of `len` bytes of an open file, only passed to
        // mincore (with a vector of one byte per page) and unmapped; never dereferenced.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            assert_eq!(libc::mincore(p, len, vec.as_mut_ptr()), 0);
            libc::munmap(p, len);
        }
        (vec.iter().filter(|b| *b & 1 == 1).count(), vec.len())
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn drop_behind_keeps_written_chunks_out_of_the_page_cache() {
        // On disk (a tmpfs file cannot leave the page cache): beside the sources.
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let piece = vec![7u8; 256 << 10];
        for lag in [0u64, 1 << 20] {
            let sub = dir.path().join(lag.to_string());
            let store = ChunkStore::open(&sub, 64 << 20)
                .unwrap()
                .with_drop_behind(lag);
            for i in 0..64u64 {
                let off = i * piece.len() as u64;
                store.write(1, off, &piece, i == 0, false).unwrap();
            }
            let path = ChunkStore::chunk_data_path(&sub, 1);
            let (while_written, pages) = cached_pages(&path);
            store.finalize(1, 16 << 20).unwrap();
            let (finalized, _) = cached_pages(&path);
            if lag == 0 {
                assert!(
                    while_written > pages * 9 / 10 && finalized > pages * 9 / 10,
                    "kept in the cache: {while_written} then {finalized} of {pages} pages"
                );
            } else {
                assert!(
                    while_written < pages / 4,
                    "{while_written} of {pages} pages cached while written, lag 1 MiB"
                );
                assert!(
                    finalized < pages / 20,
                    "{finalized} of {pages} pages cached after finalize"
                );
            }
            assert_eq!(store.read(1, 0, piece.len()).unwrap(), piece);
        }
    }

    #[test]
    fn write_read_verify_and_detect_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkStore::open(dir.path(), 16 << 20).unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
        store.write(1, 0, &data[..100], true, false).unwrap();
        store
            .write(1, 100, &data[100..70_000], false, false)
            .unwrap();
        store
            .write(1, 70_000, &data[70_000..], false, true)
            .unwrap();
        assert_eq!(store.read(1, 0, data.len()).unwrap(), data);
        assert_eq!(store.read(1, 65_000, 1000).unwrap(), &data[65_000..66_000]);
        // Overwrite in the middle (a parity rewrite) keeps checksums right.
        store.write(1, 1000, &[9u8; 70_000], false, false).unwrap();
        let mut want = data.clone();
        want[1000..71_000].fill(9);
        assert_eq!(store.read(1, 0, want.len()).unwrap(), want);
        // Reopen: the same content.
        drop(store);
        let store = ChunkStore::open(dir.path(), 16 << 20).unwrap();
        assert_eq!(store.list(), vec![(1, 200_000)]);
        assert_eq!(store.read(1, 0, want.len()).unwrap(), want);
        // Flip one byte of the second piece on disk.
        let path = ChunkStore::chunk_data_path(dir.path(), 1);
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[0xAA], 100_000).unwrap();
        let e = store.read(1, 99_000, 10).unwrap_err();
        assert_eq!(e.code, chunk_code::CORRUPT, "{}", e.message);
        assert!(e.message.contains("piece 1"), "{}", e.message);
        assert!(store.verify(1).is_err());
        // The first piece is still good.
        assert_eq!(store.read(1, 0, 10).unwrap(), &want[..10]);
    }

    #[test]
    fn finalize_truncates_and_torn_tail_is_cut_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkStore::open(dir.path(), 16 << 20).unwrap();
        store.write(7, 0, &[1u8; 100_000], true, false).unwrap();
        assert_eq!(store.finalize(7, 70_000).unwrap(), 70_000);
        assert_eq!(store.read(7, 0, 70_000).unwrap(), vec![1u8; 70_000]);
        assert!(store.read(7, 0, 70_001).is_err());
        assert!(store.finalize(7, 80_000).is_err());
        drop(store);
        // Bytes written to the data file without their checksum (a crash between the two).
        let path = ChunkStore::chunk_data_path(dir.path(), 7);
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[2u8; 500], 70_000).unwrap();
        let store = ChunkStore::open(dir.path(), 16 << 20).unwrap();
        assert_eq!(store.length(7).unwrap(), 70_000);
        assert_eq!(store.read(7, 0, 70_000).unwrap(), vec![1u8; 70_000]);
        store.delete(7);
        assert!(store.read(7, 0, 1).is_err());
        assert!(store.list().is_empty());
    }

    #[test]
    fn bad_writes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = ChunkStore::open(dir.path(), 1000).unwrap();
        assert_eq!(
            store.write(1, 0, b"x", false, false).unwrap_err().code,
            chunk_code::NOT_FOUND
        );
        store.write(1, 0, b"abc", true, false).unwrap();
        assert_eq!(
            store.write(1, 10, b"x", false, false).unwrap_err().code,
            chunk_code::INVALID
        );
        assert_eq!(
            store.write(1, 3, &[0; 998], false, false).unwrap_err().code,
            chunk_code::INVALID
        );
        assert_eq!(store.read(1, 0, 3).unwrap(), b"abc");
    }
}

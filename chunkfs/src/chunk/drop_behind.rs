//! Drop-behind: a chunk server does not keep the chunks it writes in the page cache (HDFS's
//! `dfs.datanode.drop.cache.behind.writes` and `sync.behind.writes`, with its 8 MiB lag).
//!
//! A replica is written once and read back seldom (a reader takes one replica of three), so
//! caching every replica of every block makes the page cache hold three copies of what is
//! being written on a host with three servers, and each new page costs a page allocation. On a
//! VM whose free memory is handed back to the host (virtio-balloon free page reporting, as on
//! the development machine), a page the guest has not touched lately costs ~1-2 s of kernel
//! CPU per GB to fault in: writing 6 GiB through the page cache took 7.7 s of system time,
//! with drop-behind 2.2 s (`dd`-like loop, 1 MiB writes; recycled pages stay warm).
//!
//! After each write, once `lag` bytes have gathered since the last round, the server starts
//! their write-back (`sync_file_range(SYNC_FILE_RANGE_WRITE)`, which does not wait), waits for
//! the range it started one round before to reach the disk, and drops that range from the page
//! cache (`posix_fadvise(POSIX_FADV_DONTNEED)`, which drops only clean pages). A sync or a
//! finalize makes everything clean: all of it is dropped. Both calls are advice: a failure
//! changes nothing that a later fsync would not report, so it is ignored.

use std::fs::File;

/// How far a chunk's data has been handed to write-back and dropped from the page cache.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct DropBehind {
    /// Write-back was started for everything before this offset.
    started: u64,
    /// Everything before this offset was dropped from the page cache.
    dropped: u64,
}

impl DropBehind {
    /// After a write that left the data ending at `end`: with `lag` bytes or more written since
    /// the last round, starts their write-back and drops the round before (`lag` 0: off).
    pub(crate) fn after_write(&mut self, f: &File, end: u64, lag: u64) {
        if lag == 0 || end < self.started.saturating_add(lag) {
            return;
        }
        start_writeback(f, self.started, end - self.started);
        if self.started > self.dropped {
            wait_writeback(f, self.dropped, self.started - self.dropped);
            drop_cache(f, self.dropped, self.started - self.dropped);
            self.dropped = self.started;
        }
        self.started = end;
    }

    /// After an fsync that made the first `len` bytes clean: drops them.
    pub(crate) fn after_sync(&mut self, f: &File, len: u64, lag: u64) {
        if lag == 0 {
            return;
        }
        drop_cache(f, 0, len);
        self.started = len;
        self.dropped = len;
    }

    /// The chunk was cut to `len` bytes.
    pub(crate) fn truncated(&mut self, len: u64) {
        self.started = self.started.min(len);
        self.dropped = self.dropped.min(len);
    }
}

/// Starts write-back of a range without waiting.
fn start_writeback(f: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    sync_range(f, offset, len, libc::SYNC_FILE_RANGE_WRITE);
}

/// Writes a range back and waits until it is on the disk.
fn wait_writeback(f: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    sync_range(
        f,
        offset,
        len,
        libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER,
    );
}

#[cfg(target_os = "linux")]
fn sync_range(f: &File, offset: u64, len: u64, flags: libc::c_uint) {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain syscall on an open descriptor; no memory is passed.
    unsafe {
        libc::sync_file_range(
            f.as_raw_fd(),
            offset as libc::off64_t,
            len as libc::off64_t,
            flags,
        );
    }
}

#[cfg(target_os = "linux")]
fn drop_cache(f: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: as above.
    unsafe {
        libc::posix_fadvise(
            f.as_raw_fd(),
            offset as libc::off_t,
            len as libc::off_t,
            libc::POSIX_FADV_DONTNEED,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn drop_cache(_: &File, _: u64, _: u64) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_start_every_lag_bytes_and_drop_the_round_before() {
        let dir = tempfile::tempdir().unwrap();
        let f = File::create(dir.path().join("c")).unwrap();
        let mut d = DropBehind::default();
        d.after_write(&f, 5, 8);
        assert_eq!((d.started, d.dropped), (0, 0), "under the lag");
        d.after_write(&f, 9, 8);
        assert_eq!((d.started, d.dropped), (9, 0), "first round: started only");
        d.after_write(&f, 16, 8);
        assert_eq!((d.started, d.dropped), (9, 0));
        d.after_write(&f, 17, 8);
        assert_eq!(
            (d.started, d.dropped),
            (17, 9),
            "second round drops the first"
        );
        d.truncated(12);
        assert_eq!((d.started, d.dropped), (12, 9));
        d.after_sync(&f, 30, 8);
        assert_eq!((d.started, d.dropped), (30, 30));
        let mut off = DropBehind::default();
        off.after_write(&f, 1 << 30, 0);
        off.after_sync(&f, 1 << 30, 0);
        assert_eq!((off.started, off.dropped), (0, 0), "lag 0 is off");
    }
}

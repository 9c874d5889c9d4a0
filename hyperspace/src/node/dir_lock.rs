//! The directory lock: one process per replica directory (flock on `<dir>/LOCK`).

use crate::storage::StorageError;

use super::NodeError;

pub(super) const LOCK_FILE: &str = "LOCK";

/// Takes an exclusive advisory lock on `<dir>/LOCK`, so that two processes never drive one
/// replica's log.
pub(super) fn lock_dir(dir: &std::path::Path) -> Result<std::fs::File, NodeError> {
    use std::os::fd::AsRawFd;
    let path = dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| StorageError::Io {
            path: path.clone(),
            source,
        })?;
    // SAFETY: flock on a file descriptor we own; no memory is shared with the kernel.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(NodeError::Invalid(format!(
            "{} is in use by another process (hyperspace replica already running)",
            dir.display()
        )));
    }
    Ok(file)
}

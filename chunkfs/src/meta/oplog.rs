//! The metadata server's persistent state: checkpoints of the whole namespace plus an op log of
//! the changes since, each record checksummed (layout in `docs/formats/chunkfs.md`).
//!
//! Files in the metadata directory: `checkpoint.<N>` (the state after every op before it) and
//! `oplog.<N>` (the ops after checkpoint N). Recovery loads the newest checkpoint and replays its
//! log; only a record cut short (or zeroed) by a crash at the very end of the log is cut off.
//! A damaged checkpoint, a damaged record anywhere else or a missing file is an error naming the
//! file: falling back or cutting there would drop acknowledged namespace changes.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::namespace::{Namespace, Op};
use crate::Layout;

pub const CHECKPOINT_MAGIC: &[u8; 8] = b"HTCKPT01";
pub const CHECKPOINT_VERSION: u32 = 1;
/// Largest op-log record accepted on replay (a bigger length is a corrupt header).
pub const MAX_RECORD_BYTES: u32 = 16 << 20;

/// What a checkpoint holds: the format (fixed at `format` time) and the namespace.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkpoint {
    pub flavour: String,
    pub layout: Layout,
    pub block_bytes: u64,
    pub namespace: Namespace,
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("metadata log {path}: {what}: {source}")]
    Io {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
    #[error("metadata file {path}: {why}")]
    Corrupt { path: PathBuf, why: String },
}

fn io(path: &Path, what: &'static str) -> impl FnOnce(std::io::Error) -> LogError {
    let path = path.to_path_buf();
    move |source| LogError::Io { path, what, source }
}

/// The open op log.
#[derive(Debug)]
pub struct OpLog {
    dir: PathBuf,
    seq: u64,
    file: File,
    records_since_checkpoint: u64,
}

fn encode_checkpoint(cp: &Checkpoint) -> Vec<u8> {
    let payload = serde_json::to_vec(cp).expect("a checkpoint always serializes");
    let mut out = Vec::with_capacity(payload.len() + 28);
    out.extend_from_slice(CHECKPOINT_MAGIC);
    out.extend_from_slice(&CHECKPOINT_VERSION.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    let hcrc = crc32c::crc32c(&out[..24]);
    out.extend_from_slice(&hcrc.to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

fn decode_checkpoint(path: &Path, bytes: &[u8]) -> Result<Checkpoint, LogError> {
    let bad = |why: &str| LogError::Corrupt {
        path: path.to_path_buf(),
        why: why.to_string(),
    };
    if bytes.len() < 28 || &bytes[..8] != CHECKPOINT_MAGIC {
        return Err(bad("no checkpoint header"));
    }
    let hcrc = u32::from_le_bytes(bytes[24..28].try_into().expect("4 bytes"));
    if crc32c::crc32c(&bytes[..24]) != hcrc {
        return Err(bad("header checksum mismatch"));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != CHECKPOINT_VERSION {
        return Err(bad(&format!("unsupported version {version}")));
    }
    let len = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(bytes[20..24].try_into().expect("4 bytes"));
    let payload = &bytes[28..];
    if payload.len() as u64 != len {
        return Err(bad("truncated"));
    }
    if crc32c::crc32c(payload) != crc {
        return Err(bad("payload checksum mismatch"));
    }
    let mut cp: Checkpoint =
        serde_json::from_slice(payload).map_err(|e| bad(&format!("undecodable: {e}")))?;
    cp.namespace.reindex();
    Ok(cp)
}

/// Encodes one op-log record: length, crc32c of the payload, the payload (JSON).
pub fn encode_record(op: &Op) -> Vec<u8> {
    let payload = serde_json::to_vec(op).expect("an op always serializes");
    let mut out = Vec::with_capacity(payload.len() + 8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// The record at `at`: `Ok((op, end))`, or why it is bad.
fn decode_record(bytes: &[u8], at: usize) -> Result<(Op, usize), &'static str> {
    if bytes.len() - at < 8 {
        return Err("record header cut short");
    }
    let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes"));
    if len > MAX_RECORD_BYTES {
        return Err("record length over the limit");
    }
    if bytes.len() - at - 8 < len as usize {
        return Err("record extends past the end of the log");
    }
    let payload = &bytes[at + 8..at + 8 + len as usize];
    if crc32c::crc32c(payload) != crc {
        return Err("record checksum mismatch");
    }
    let op = serde_json::from_slice::<Op>(payload).map_err(|_| "undecodable record")?;
    Ok((op, at + 8 + len as usize))
}

/// True if the bad record at `at` is the shape a crash in the middle of appending it leaves:
/// cut short by the end of the log (not a whole record under a damaged length), or nothing but
/// zeroes to the end (a length that reached the disk before the data), with no valid record
/// after it. A whole record failing its checksum is damage, not a torn write.
fn torn_tail(bytes: &[u8], at: usize) -> bool {
    let rest = &bytes[at..];
    let shape = if rest.iter().all(|&b| b == 0) || rest.len() < 8 {
        true
    } else {
        let len = u32::from_le_bytes(rest[0..4].try_into().expect("4 bytes"));
        let crc = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
        len <= MAX_RECORD_BYTES
            && rest.len() - 8 < len as usize
            && crc32c::crc32c(&rest[8..]) != crc
    };
    shape && !(at + 1..bytes.len()).any(|p| decode_record(bytes, p).is_ok())
}

/// Decodes records until the end or the first bad one; returns them, the good length and, if
/// a bad record stopped it, why.
pub fn decode_records(bytes: &[u8]) -> (Vec<Op>, usize, Option<&'static str>) {
    let mut ops = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        match decode_record(bytes, at) {
            Ok((op, end)) => {
                ops.push(op);
                at = end;
            }
            Err(why) => return (ops, at, Some(why)),
        }
    }
    (ops, at, None)
}

fn seqs(dir: &Path, prefix: &str) -> Result<Vec<u64>, LogError> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io(dir, "list"))? {
        let e = e.map_err(io(dir, "list"))?;
        if let Some(n) = e
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|n| n.parse::<u64>().ok())
        {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir, "sync directory"))
}

/// Creates the empty `oplog.<seq>` durably (file and directory synced) and opens it to append.
fn create_log(dir: &Path, seq: u64) -> Result<File, LogError> {
    let path = dir.join(format!("oplog.{seq}"));
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(io(&path, "create"))?;
    f.sync_all().map_err(io(&path, "sync"))?;
    sync_dir(dir)?;
    Ok(f)
}

fn write_checkpoint(dir: &Path, seq: u64, cp: &Checkpoint) -> Result<(), LogError> {
    let tmp = dir.join(format!("checkpoint.{seq}.tmp"));
    let path = dir.join(format!("checkpoint.{seq}"));
    let mut f = File::create(&tmp).map_err(io(&tmp, "create"))?;
    f.write_all(&encode_checkpoint(cp))
        .map_err(io(&tmp, "write"))?;
    f.sync_all().map_err(io(&tmp, "sync"))?;
    std::fs::rename(&tmp, &path).map_err(io(&path, "rename"))?;
    sync_dir(dir)
}

impl OpLog {
    /// Opens the metadata directory: recovers the state, or formats it with `fresh` when empty.
    pub fn open(
        dir: &Path,
        fresh: impl FnOnce() -> Checkpoint,
    ) -> Result<(Self, Checkpoint), LogError> {
        std::fs::create_dir_all(dir).map_err(io(dir, "create"))?;
        let checkpoints = seqs(dir, "checkpoint.")?;
        let logs = seqs(dir, "oplog.")?;
        // The newest checkpoint, verified; no fallback to an older one, whose log would lack
        // the ops after the newer one (and an older pair exists only for a moment anyway).
        let (seq, mut cp) = match checkpoints.last() {
            Some(&seq) => {
                let path = dir.join(format!("checkpoint.{seq}"));
                let bytes = std::fs::read(&path).map_err(io(&path, "read"))?;
                (seq, decode_checkpoint(&path, &bytes)?)
            }
            None => {
                // A log starts before its checkpoint is renamed into place: a log without
                // one means the checkpoint was lost.
                if let Some(&n) = logs.last() {
                    return Err(LogError::Corrupt {
                        path: dir.join(format!("checkpoint.{n}")),
                        why: format!("missing, but oplog.{n} exists"),
                    });
                }
                let cp = fresh();
                create_log(dir, 0)?;
                write_checkpoint(dir, 0, &cp)?;
                (0, cp)
            }
        };
        // A newer log than the checkpoint: an interrupted checkpoint (empty) or a lost one.
        for &n in logs.iter().filter(|&&n| n > seq) {
            let path = dir.join(format!("oplog.{n}"));
            let len = std::fs::metadata(&path).map_err(io(&path, "stat"))?.len();
            if len > 0 {
                return Err(LogError::Corrupt {
                    path: dir.join(format!("checkpoint.{n}")),
                    why: format!("missing, but oplog.{n} holds {len} bytes"),
                });
            }
            std::fs::remove_file(&path).map_err(io(&path, "remove"))?;
        }
        let log_path = dir.join(format!("oplog.{seq}"));
        if !log_path.exists() {
            return Err(LogError::Corrupt {
                path: log_path,
                why: format!("missing, but checkpoint.{seq} exists"),
            });
        }
        let records = {
            let mut bytes = Vec::new();
            File::open(&log_path)
                .and_then(|mut f| f.read_to_end(&mut bytes))
                .map_err(io(&log_path, "read"))?;
            let (ops, good, bad) = decode_records(&bytes);
            if let Some(why) = bad
                && !torn_tail(&bytes, good)
            {
                return Err(LogError::Corrupt {
                    path: log_path,
                    why: format!("{why} at offset {good} (of {} bytes)", bytes.len()),
                });
            }
            for op in &ops {
                // An op that applied once applies again; a refusal here means the log and the
                // checkpoint disagree, which replay reports but survives.
                if let Err(e) = cp.namespace.apply(op) {
                    tracing::warn!(error = %e, "op log replay: op refused");
                }
            }
            if good < bytes.len() {
                tracing::warn!(path = %log_path.display(), good, len = bytes.len(), "op log: cutting a torn tail");
                let f = OpenOptions::new()
                    .write(true)
                    .open(&log_path)
                    .map_err(io(&log_path, "open"))?;
                f.set_len(good as u64).map_err(io(&log_path, "truncate"))?;
                f.sync_all().map_err(io(&log_path, "sync"))?;
            }
            ops.len() as u64
        };
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io(&log_path, "open"))?;
        Ok((
            Self {
                dir: dir.to_path_buf(),
                seq,
                file,
                records_since_checkpoint: records,
            },
            cp,
        ))
    }

    /// Appends a record; with `sync`, fsyncs the log before returning.
    pub fn append(&mut self, op: &Op, sync: bool) -> Result<(), LogError> {
        let path = self.dir.join(format!("oplog.{}", self.seq));
        self.file
            .write_all(&encode_record(op))
            .map_err(io(&path, "write"))?;
        if sync {
            self.file.sync_data().map_err(io(&path, "sync"))?;
        }
        self.records_since_checkpoint += 1;
        Ok(())
    }

    pub fn records_since_checkpoint(&self) -> u64 {
        self.records_since_checkpoint
    }

    /// Writes a checkpoint of `cp` and starts a new, empty log; the old ones are removed.
    pub fn checkpoint(&mut self, cp: &Checkpoint) -> Result<(), LogError> {
        let next = self.seq + 1;
        // The log exists before the checkpoint that needs it: a checkpoint without its log
        // is then always a lost file.
        let file = create_log(&self.dir, next)?;
        write_checkpoint(&self.dir, next, cp)?;
        self.file = file;
        let _ = std::fs::remove_file(self.dir.join(format!("oplog.{}", self.seq)));
        let _ = std::fs::remove_file(self.dir.join(format!("checkpoint.{}", self.seq)));
        self.seq = next;
        self.records_since_checkpoint = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh() -> Checkpoint {
        Checkpoint {
            flavour: "hdfs-like".into(),
            layout: Layout::Replicated { replicas: 3 },
            block_bytes: 1 << 20,
            namespace: Namespace::new(),
        }
    }

    #[test]
    fn restart_replays_checkpoint_and_log_and_cuts_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, mut cp) = OpLog::open(dir.path(), fresh).unwrap();
        for p in ["/a", "/b", "/c"] {
            let op = Op::Mkdirs { path: p.into() };
            cp.namespace.apply(&op).unwrap();
            log.append(&op, true).unwrap();
        }
        log.checkpoint(&cp).unwrap();
        let op = Op::Mkdirs { path: "/d".into() };
        cp.namespace.apply(&op).unwrap();
        log.append(&op, false).unwrap();
        drop(log);
        // A torn record at the end of the log.
        let path = dir.path().join("oplog.1");
        let mut bytes = std::fs::read(&path).unwrap();
        let good = bytes.len();
        bytes.extend_from_slice(&encode_record(&Op::Mkdirs { path: "/e".into() })[..10]);
        std::fs::write(&path, &bytes).unwrap();

        let (_log, cp2) = OpLog::open(dir.path(), || panic!("must not format again")).unwrap();
        let names: Vec<String> = cp2
            .namespace
            .readdir("/")
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), good as u64);
        assert!(!dir.path().join("checkpoint.0").exists());
    }

    #[test]
    fn a_corrupt_record_ends_replay() {
        let mut bytes = encode_record(&Op::Mkdirs { path: "/x".into() });
        let first = bytes.len();
        bytes.extend(encode_record(&Op::Mkdirs { path: "/y".into() }));
        let n = bytes.len();
        bytes[n - 2] ^= 1;
        let (ops, good, bad) = decode_records(&bytes);
        assert_eq!(ops.len(), 1);
        assert_eq!(good, first);
        assert_eq!(bad, Some("record checksum mismatch"));
        assert!(
            !torn_tail(&bytes, good),
            "a whole damaged record is not torn"
        );
        assert!(torn_tail(&bytes[..n - 1], good), "a cut one is");
    }
}

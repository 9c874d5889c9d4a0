//! Byte layout of the Hyperspace log segments and snapshot files (see
//! `docs/formats/hyperspace-log.md`). Pure encoding and decoding; no file handling except reading
//! and writing whole snapshot files.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use protobuf::Message;
use raft::prelude::{ConfState, Entry, HardState};

use super::StorageError;

/// Segment file magic: ASCII `HSLG`.
pub(super) const SEGMENT_MAGIC: [u8; 4] = *b"HSLG";
/// Snapshot file magic: ASCII `HSSN`.
pub(super) const SNAPSHOT_MAGIC: [u8; 4] = *b"HSSN";
/// Format version of both file kinds.
pub(super) const VERSION: u32 = 1;
pub(super) const SEGMENT_HEADER_LEN: usize = 24;
/// `[len u32][crc u32][type u8]`.
pub(super) const RECORD_HEADER_LEN: usize = 9;
/// Largest record payload accepted (1 GiB).
pub(super) const MAX_RECORD_LEN: usize = 1 << 30;
pub(super) const SNAPSHOT_HEADER_LEN: usize = 56;

/// Full hard state and conf state.
pub(super) const REC_STATE: u8 = 1;
/// Entries and/or a hard state, written by one `persist`.
pub(super) const REC_APPEND: u8 = 2;

pub(super) fn segment_name(seq: u64) -> String {
    format!("log-{seq:020}.hlog")
}

pub(super) fn snapshot_name(index: u64) -> String {
    format!("snapshot-{index:020}.hsnap")
}

/// Parses `log-<seq>.hlog` / `snapshot-<index>.hsnap` names.
pub(super) fn parse_name(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn put_u32(buf: &mut Vec<u8>, v: u32) {
    buf.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(&v.to_le_bytes());
}

/// The little-endian `u32` at `at`; callers have checked that the bytes are there.
fn get_u32(b: &[u8], at: usize) -> u32 {
    common::codec::le_u32(b, at).expect("length checked by the caller")
}

/// The little-endian `u64` at `at`; callers have checked that the bytes are there.
fn get_u64(b: &[u8], at: usize) -> u64 {
    common::codec::le_u64(b, at).expect("length checked by the caller")
}

fn len_u32(len: usize, what: &str) -> Result<u32, StorageError> {
    u32::try_from(len)
        .ok()
        .filter(|&l| (l as usize) <= MAX_RECORD_LEN)
        .ok_or_else(|| StorageError::TooLarge {
            what: what.to_string(),
            len: len as u64,
        })
}

fn encode_msg<M: Message>(m: &M) -> Result<Vec<u8>, StorageError> {
    m.write_to_bytes()
        .map_err(|e| StorageError::Encode(e.to_string()))
}

/// The 24-byte segment header.
pub(super) fn segment_header(seq: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(SEGMENT_HEADER_LEN);
    h.extend_from_slice(&SEGMENT_MAGIC);
    put_u32(&mut h, VERSION);
    put_u64(&mut h, seq);
    put_u32(&mut h, 0);
    let crc = crc32c::crc32c(&h);
    put_u32(&mut h, crc);
    h
}

/// Checks a segment header; returns the sequence number it holds.
pub(super) fn parse_segment_header(path: &Path, data: &[u8]) -> Result<u64, StorageError> {
    let corrupt = |what: &str| StorageError::Corrupt {
        path: path.to_path_buf(),
        offset: 0,
        what: what.to_string(),
    };
    if data.len() < SEGMENT_HEADER_LEN {
        return Err(corrupt("segment shorter than its header"));
    }
    if data[0..4] != SEGMENT_MAGIC {
        return Err(corrupt("bad segment magic"));
    }
    if crc32c::crc32c(&data[0..20]) != get_u32(data, 20) {
        return Err(corrupt("segment header checksum mismatch"));
    }
    let version = get_u32(data, 4);
    if version != VERSION {
        return Err(StorageError::UnsupportedVersion {
            path: path.to_path_buf(),
            version,
        });
    }
    if get_u32(data, 16) != 0 {
        return Err(corrupt("segment header reserved field is not 0"));
    }
    Ok(get_u64(data, 8))
}

/// Appends one framed record `[len][crc][type][payload]` to `buf`.
pub(super) fn frame_record(buf: &mut Vec<u8>, ty: u8, payload: &[u8]) -> Result<(), StorageError> {
    let len = len_u32(payload.len(), "record")?;
    put_u32(buf, len);
    put_u32(buf, crc32c::crc32c_append(crc32c::crc32c(&[ty]), payload));
    buf.push(ty);
    buf.extend_from_slice(payload);
    Ok(())
}

/// A decoded log record.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Record {
    State {
        hard_state: HardState,
        conf_state: ConfState,
        /// Where the log ended when the record was written.
        log_end: Option<LogEnd>,
    },
    Append {
        hard_state: Option<HardState>,
        entries: Vec<Entry>,
    },
}

/// `(index, term)` of the last entry of the log (the snapshot's when it has no entries).
pub(super) type LogEnd = (u64, u64);

pub(super) fn state_payload(
    hs: &HardState,
    cs: &ConfState,
    end: LogEnd,
) -> Result<Vec<u8>, StorageError> {
    let hs = encode_msg(hs)?;
    let cs = encode_msg(cs)?;
    let mut p = Vec::with_capacity(24 + hs.len() + cs.len());
    put_u32(&mut p, len_u32(hs.len(), "hard state")?);
    p.extend_from_slice(&hs);
    put_u32(&mut p, len_u32(cs.len(), "conf state")?);
    p.extend_from_slice(&cs);
    put_u64(&mut p, end.0);
    put_u64(&mut p, end.1);
    Ok(p)
}

pub(super) fn append_payload(
    hs: Option<&HardState>,
    entries: &[Entry],
) -> Result<Vec<u8>, StorageError> {
    let mut p = Vec::new();
    match hs {
        Some(hs) => {
            p.push(1);
            let b = encode_msg(hs)?;
            put_u32(&mut p, len_u32(b.len(), "hard state")?);
            p.extend_from_slice(&b);
        }
        None => p.push(0),
    }
    put_u32(&mut p, len_u32(entries.len(), "entry count")?);
    for e in entries {
        let b = encode_msg(e)?;
        put_u32(&mut p, len_u32(b.len(), "entry")?);
        p.extend_from_slice(&b);
    }
    Ok(p)
}

/// A cursor over a record payload; every short read is an error message.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.b.len() - self.at < n {
            return Err(format!(
                "payload too short: need {n} bytes at payload offset {}",
                self.at
            ));
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(get_u32(self.take(4)?, 0))
    }
    fn msg<M: Message>(&mut self, what: &str) -> Result<M, String> {
        let len = self.u32()? as usize;
        let b = self.take(len)?;
        M::parse_from_bytes(b).map_err(|e| format!("bad {what} protobuf: {e}"))
    }
}

/// Decodes a record whose checksum passed. `Err` is a description of what is wrong.
pub(super) fn decode_record(ty: u8, payload: &[u8]) -> Result<Record, String> {
    let mut c = Cursor { b: payload, at: 0 };
    let rec = match ty {
        REC_STATE => Record::State {
            hard_state: c.msg("hard state")?,
            conf_state: c.msg("conf state")?,
            // Absent in files written before it was added.
            log_end: if c.at < payload.len() {
                let b = c.take(16)?;
                Some((get_u64(b, 0), get_u64(b, 8)))
            } else {
                None
            },
        },
        REC_APPEND => {
            let hard_state = match c.u8()? {
                0 => None,
                1 => Some(c.msg("hard state")?),
                f => return Err(format!("unknown append flags {f:#x}")),
            };
            let n = c.u32()? as usize;
            // Each entry takes at least its 4-byte length: bounds the allocation.
            if n > (payload.len() - c.at) / 4 {
                return Err(format!("entry count {n} exceeds the payload"));
            }
            let mut entries: Vec<Entry> = Vec::with_capacity(n);
            for _ in 0..n {
                let e: Entry = c.msg("entry")?;
                if let Some(prev) = entries.last()
                    && e.index != prev.index + 1
                {
                    return Err(format!(
                        "entries not contiguous: {} after {}",
                        e.index, prev.index
                    ));
                }
                entries.push(e);
            }
            Record::Append {
                hard_state,
                entries,
            }
        }
        t => return Err(format!("unknown record type {t}")),
    };
    if c.at != payload.len() {
        return Err(format!(
            "{} trailing bytes after the record",
            payload.len() - c.at
        ));
    }
    Ok(rec)
}

/// Outcome of looking for a record at an offset.
pub(super) enum Probe<'a> {
    /// A record with a valid checksum and known type; `end` is the offset after it.
    Ok {
        ty: u8,
        payload: &'a [u8],
        end: usize,
    },
    /// Not a valid record; the reason.
    Bad(&'static str),
}

pub(super) fn probe_record(data: &[u8], off: usize) -> Probe<'_> {
    if data.len() - off < RECORD_HEADER_LEN {
        return Probe::Bad("record header cut short");
    }
    let len = get_u32(data, off) as usize;
    let crc = get_u32(data, off + 4);
    let ty = data[off + 8];
    if len > MAX_RECORD_LEN {
        return Probe::Bad("record length over the limit");
    }
    let start = off + RECORD_HEADER_LEN;
    if data.len() - start < len {
        return Probe::Bad("record extends past the end of the file");
    }
    let payload = &data[start..start + len];
    if crc32c::crc32c_append(crc32c::crc32c(&[ty]), payload) != crc {
        return Probe::Bad("record checksum mismatch");
    }
    if ty != REC_STATE && ty != REC_APPEND {
        return Probe::Bad("unknown record type");
    }
    Probe::Ok {
        ty,
        payload,
        end: start + len,
    }
}

/// True if the bad record at `off` has a shape a crash in the middle of its write can leave:
/// cut short by the end of the file (its header, or a payload running past the end that is not
/// a whole record under a damaged length), or nothing but zeroes from `off` to the end (a file
/// length that reached the disk before its data). A record that is whole but fails its crc, has
/// an unknown type or a length over the limit is damage, not a torn write.
pub(super) fn torn_shape(data: &[u8], off: usize) -> bool {
    let rest = &data[off..];
    if rest.iter().all(|&b| b == 0) || rest.len() < RECORD_HEADER_LEN {
        return true;
    }
    let len = get_u32(data, off) as usize;
    let payload = &rest[RECORD_HEADER_LEN..];
    if len > MAX_RECORD_LEN || payload.len() >= len {
        return false;
    }
    let (crc, ty) = (get_u32(data, off + 4), data[off + 8]);
    crc32c::crc32c_append(crc32c::crc32c(&[ty]), payload) != crc
}

/// True if a valid record starts at any offset in `from..`.
pub(super) fn valid_record_after(data: &[u8], from: usize) -> bool {
    (from..data.len().saturating_sub(RECORD_HEADER_LEN - 1))
        .any(|p| matches!(probe_record(data, p), Probe::Ok { .. }))
}

/// `HEAD`: which segment was created last and which snapshot was stored last.
pub(super) const HEAD_NAME: &str = "HEAD";
/// `HEAD` magic: ASCII `HSHD`.
const HEAD_MAGIC: [u8; 4] = *b"HSHD";
const HEAD_LEN: usize = 28;

/// What `HEAD` records, so that a deleted newest segment or snapshot is an error rather than a
/// shorter log (nothing else on disk would show it missing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Head {
    /// The highest segment number created.
    pub newest_segment: u64,
    /// The index of the latest snapshot stored (0: none).
    pub snapshot_index: u64,
}

/// Writes `dir/HEAD`: to `HEAD.tmp`, synced (if `sync`), renamed, directory synced.
pub(super) fn write_head(dir: &Path, head: Head, sync: bool) -> Result<(), StorageError> {
    let mut b = Vec::with_capacity(HEAD_LEN);
    b.extend_from_slice(&HEAD_MAGIC);
    put_u32(&mut b, VERSION);
    put_u64(&mut b, head.newest_segment);
    put_u64(&mut b, head.snapshot_index);
    let crc = crc32c::crc32c(&b);
    put_u32(&mut b, crc);
    write_replacing(dir, HEAD_NAME, &b, sync)?;
    Ok(())
}

/// Writes `bytes` as `dir/name` through `name.tmp`: written, synced (if `sync`), renamed over
/// `name`, the directory synced, so a crash leaves the old file or the new one, never a part.
pub(super) fn write_replacing(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    sync: bool,
) -> Result<PathBuf, StorageError> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        if sync {
            f.sync_all()?;
        }
        Ok(())
    };
    write().map_err(io_err(&tmp))?;
    fs::rename(&tmp, &path).map_err(io_err(&path))?;
    if sync {
        sync_dir(dir)?;
    }
    Ok(path)
}

/// Reads and verifies `dir/HEAD`; `None` if there is none (a new directory, or one written
/// before `HEAD` existed).
pub(super) fn read_head(dir: &Path) -> Result<Option<Head>, StorageError> {
    let path = dir.join(HEAD_NAME);
    let data = match fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(&path)(e)),
    };
    let corrupt = |what: &str| StorageError::Corrupt {
        path: path.clone(),
        offset: 0,
        what: what.to_string(),
    };
    if data.len() != HEAD_LEN {
        return Err(corrupt(&format!(
            "HEAD of {} bytes, expected {HEAD_LEN}",
            data.len()
        )));
    }
    if data[0..4] != HEAD_MAGIC {
        return Err(corrupt("bad HEAD magic"));
    }
    if crc32c::crc32c(&data[..24]) != get_u32(&data, 24) {
        return Err(corrupt("HEAD checksum mismatch"));
    }
    let version = get_u32(&data, 4);
    if version != VERSION {
        return Err(StorageError::UnsupportedVersion { path, version });
    }
    Ok(Some(Head {
        newest_segment: get_u64(&data, 8),
        snapshot_index: get_u64(&data, 16),
    }))
}

/// The contents of a snapshot file.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct SnapshotFile {
    pub index: u64,
    pub term: u64,
    /// The first log segment that is still part of the log; older ones are obsolete.
    pub first_segment: u64,
    pub hard_state: HardState,
    pub conf_state: ConfState,
    pub data: Vec<u8>,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StorageError + '_ {
    move |source| StorageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Syncs a directory so that created, renamed and removed names in it are durable.
pub(super) fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// Writes `snap` as `dir/snapshot-<index>.hsnap`: to a temporary name, synced (if `sync`),
/// renamed, directory synced. Returns the final path.
pub(super) fn write_snapshot(
    dir: &Path,
    snap: &SnapshotFile,
    sync: bool,
) -> Result<PathBuf, StorageError> {
    let hs = encode_msg(&snap.hard_state)?;
    let cs = encode_msg(&snap.conf_state)?;
    let mut h = Vec::with_capacity(SNAPSHOT_HEADER_LEN);
    h.extend_from_slice(&SNAPSHOT_MAGIC);
    put_u32(&mut h, VERSION);
    put_u64(&mut h, snap.index);
    put_u64(&mut h, snap.term);
    put_u64(&mut h, snap.first_segment);
    put_u32(&mut h, len_u32(hs.len(), "hard state")?);
    put_u32(&mut h, len_u32(cs.len(), "conf state")?);
    put_u64(&mut h, snap.data.len() as u64);
    put_u32(&mut h, 0);
    let crc = crc32c::crc32c(&h);
    put_u32(&mut h, crc);
    let body_crc = [hs.as_slice(), cs.as_slice(), snap.data.as_slice()]
        .iter()
        .fold(0, |c, part| crc32c::crc32c_append(c, part));

    let path = dir.join(snapshot_name(snap.index));
    let tmp = dir.join(format!("{}.tmp", snapshot_name(snap.index)));
    let write = || -> std::io::Result<()> {
        let mut w = BufWriter::new(File::create(&tmp)?);
        w.write_all(&h)?;
        w.write_all(&hs)?;
        w.write_all(&cs)?;
        w.write_all(&snap.data)?;
        w.write_all(&body_crc.to_le_bytes())?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        if sync {
            f.sync_all()?;
        }
        Ok(())
    };
    write().map_err(io_err(&tmp))?;
    fs::rename(&tmp, &path).map_err(io_err(&path))?;
    if sync {
        sync_dir(dir)?;
    }
    Ok(path)
}

/// Reads and fully verifies a snapshot file.
pub(super) fn read_snapshot(path: &Path) -> Result<SnapshotFile, StorageError> {
    let data = fs::read(path).map_err(io_err(path))?;
    let corrupt = |offset: usize, what: String| StorageError::Corrupt {
        path: path.to_path_buf(),
        offset: offset as u64,
        what,
    };
    if data.len() < SNAPSHOT_HEADER_LEN + 4 {
        return Err(corrupt(
            0,
            "snapshot file shorter than header and trailer".into(),
        ));
    }
    if data[0..4] != SNAPSHOT_MAGIC {
        return Err(corrupt(0, "bad snapshot magic".into()));
    }
    if crc32c::crc32c(&data[0..52]) != get_u32(&data, 52) {
        return Err(corrupt(0, "snapshot header checksum mismatch".into()));
    }
    let version = get_u32(&data, 4);
    if version != VERSION {
        return Err(StorageError::UnsupportedVersion {
            path: path.to_path_buf(),
            version,
        });
    }
    let index = get_u64(&data, 8);
    let term = get_u64(&data, 16);
    let first_segment = get_u64(&data, 24);
    let hs_len = get_u32(&data, 32) as usize;
    let cs_len = get_u32(&data, 36) as usize;
    let data_len = get_u64(&data, 40);
    let body = &data[SNAPSHOT_HEADER_LEN..data.len() - 4];
    let expected = (hs_len as u64)
        .checked_add(cs_len as u64)
        .and_then(|n| n.checked_add(data_len));
    if expected != Some(body.len() as u64) {
        return Err(corrupt(
            0,
            format!(
                "snapshot lengths (hard state {hs_len}, conf state {cs_len}, data {data_len}) do not match the file size {}",
                data.len()
            ),
        ));
    }
    let stored_crc = get_u32(&data, data.len() - 4);
    if crc32c::crc32c(body) != stored_crc {
        return Err(corrupt(
            SNAPSHOT_HEADER_LEN,
            "snapshot body checksum mismatch".into(),
        ));
    }
    let hard_state = HardState::parse_from_bytes(&body[..hs_len])
        .map_err(|e| corrupt(SNAPSHOT_HEADER_LEN, format!("bad hard state: {e}")))?;
    let conf_state = ConfState::parse_from_bytes(&body[hs_len..hs_len + cs_len])
        .map_err(|e| corrupt(SNAPSHOT_HEADER_LEN + hs_len, format!("bad conf state: {e}")))?;
    Ok(SnapshotFile {
        index,
        term,
        first_segment,
        hard_state,
        conf_state,
        data: body[hs_len + cs_len..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(segment_name(7), "log-00000000000000000007.hlog");
        assert_eq!(parse_name(&segment_name(7), "log-", ".hlog"), Some(7));
        assert_eq!(
            parse_name(&snapshot_name(u64::MAX), "snapshot-", ".hsnap"),
            Some(u64::MAX)
        );
        assert_eq!(parse_name("log-.hlog", "log-", ".hlog"), None);
        assert_eq!(parse_name("log-+1.hlog", "log-", ".hlog"), None);
        assert_eq!(parse_name("log-1.hlog.tmp", "log-", ".hlog"), None);
    }

    #[test]
    fn segment_header_layout() {
        let h = segment_header(3);
        assert_eq!(h.len(), SEGMENT_HEADER_LEN);
        assert_eq!(&h[0..4], b"HSLG");
        assert_eq!(&h[4..8], &[1, 0, 0, 0]);
        assert_eq!(&h[8..16], &[3, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(parse_segment_header(Path::new("x"), &h).ok(), Some(3));
    }

    #[test]
    fn records_round_trip() {
        let hs = HardState {
            term: 3,
            vote: 2,
            commit: 1,
            ..Default::default()
        };
        let cs = ConfState {
            voters: vec![1, 2, 3],
            ..Default::default()
        };
        let entries: Vec<Entry> = (5..8)
            .map(|i| Entry {
                index: i,
                term: 2,
                data: vec![i as u8; 3].into(),
                ..Default::default()
            })
            .collect();
        let mut buf = Vec::new();
        frame_record(
            &mut buf,
            REC_STATE,
            &state_payload(&hs, &cs, (4, 2)).unwrap(),
        )
        .unwrap();
        frame_record(
            &mut buf,
            REC_APPEND,
            &append_payload(Some(&hs), &entries).unwrap(),
        )
        .unwrap();
        let last_start = buf.len();
        frame_record(&mut buf, REC_APPEND, &append_payload(None, &[]).unwrap()).unwrap();
        let mut off = 0;
        let mut got = Vec::new();
        while off < buf.len() {
            match probe_record(&buf, off) {
                Probe::Ok { ty, payload, end } => {
                    got.push(decode_record(ty, payload).unwrap());
                    off = end;
                }
                Probe::Bad(why) => panic!("{why} at {off}"),
            }
        }
        assert_eq!(
            got,
            vec![
                Record::State {
                    hard_state: hs.clone(),
                    conf_state: cs,
                    log_end: Some((4, 2)),
                },
                Record::Append {
                    hard_state: Some(hs),
                    entries
                },
                Record::Append {
                    hard_state: None,
                    entries: vec![]
                },
            ]
        );
        assert!(valid_record_after(&buf, 1));
        assert!(valid_record_after(&buf, last_start));
        assert!(!valid_record_after(&buf, last_start + 1));
        // Non-contiguous entries do not decode even with a valid checksum.
        let gap = [
            Entry {
                index: 1,
                ..Default::default()
            },
            Entry {
                index: 3,
                ..Default::default()
            },
        ];
        assert!(decode_record(REC_APPEND, &append_payload(None, &gap).unwrap()).is_err());
    }

    #[test]
    fn snapshot_file_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let snap = SnapshotFile {
            index: 42,
            term: 7,
            first_segment: 3,
            hard_state: HardState {
                term: 8,
                vote: 1,
                commit: 42,
                ..Default::default()
            },
            conf_state: ConfState {
                voters: vec![1, 2],
                ..Default::default()
            },
            data: b"state".to_vec(),
        };
        let path = write_snapshot(dir.path(), &snap, true).unwrap();
        assert!(path.ends_with("snapshot-00000000000000000042.hsnap"));
        assert_eq!(read_snapshot(&path).unwrap(), snap);
    }
}

//! Log segment files: creation and replay (`docs/formats/hyperspace-log.md`).

use std::fs::{self, File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};

use raft::prelude::{ConfState, Entry, HardState, Snapshot};

use super::format::{self, Probe, Record};
use super::{StorageError, io_err};

/// One segment file of the log.
#[derive(Debug)]
pub(super) struct Segment {
    pub(super) seq: u64,
    pub(super) path: PathBuf,
    pub(super) bytes: u64,
    /// The highest entry index ever written to it (0 if none).
    pub(super) max_index: u64,
}

/// Creates segment `seq` holding the header and one `State` record: written under a temporary
/// name, synced, renamed, directory synced. Returns the open file (positioned at its end).
pub(super) fn create_segment(
    dir: &Path,
    seq: u64,
    hs: &HardState,
    cs: &ConfState,
    end: format::LogEnd,
    sync: bool,
) -> Result<(Segment, File), StorageError> {
    let mut buf = format::segment_header(seq);
    format::frame_record(
        &mut buf,
        format::REC_STATE,
        &format::state_payload(hs, cs, end)?,
    )?;
    let path = format::write_replacing(dir, &format::segment_name(seq), &buf, sync)?;
    let file = open_for_append(&path)?;
    let seg = Segment {
        seq,
        path,
        bytes: buf.len() as u64,
        max_index: 0,
    };
    Ok((seg, file))
}

pub(super) fn open_for_append(path: &Path) -> Result<File, StorageError> {
    let mut f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io_err(path))?;
    f.seek(SeekFrom::End(0)).map_err(io_err(path))?;
    Ok(f)
}

/// The state being rebuilt by `open`.
pub(super) struct Replay {
    pub(super) snapshot: Snapshot,
    pub(super) hard_state: HardState,
    pub(super) conf_state: ConfState,
    pub(super) entries: Vec<Entry>,
    /// The segment replayed before the current one: a gap at the current one's first entries
    /// usually means that one lost its end.
    pub(super) previous: Option<PathBuf>,
    /// Records replayed so far, over all segments.
    pub(super) replayed_records: u64,
}

impl Replay {
    pub(super) fn replay_segment(
        &mut self,
        path: PathBuf,
        seq: u64,
        is_last: bool,
        sync: bool,
    ) -> Result<Segment, StorageError> {
        let data = fs::read(&path).map_err(io_err(&path))?;
        let found = format::parse_segment_header(&path, &data)?;
        if found != seq {
            return Err(StorageError::Corrupt {
                path,
                offset: 8,
                what: format!("segment number {found} differs from the file name"),
            });
        }
        let mut off = format::SEGMENT_HEADER_LEN;
        let mut max_index = 0;
        let mut appended = false;
        while off < data.len() {
            let (ty, payload, end) = match format::probe_record(&data, off) {
                Probe::Ok { ty, payload, end } => (ty, payload, end),
                Probe::Bad(why) => {
                    if is_last
                        && format::torn_shape(&data, off)
                        && !format::valid_record_after(&data, off + 1)
                    {
                        tracing::warn!(
                            path = %path.display(),
                            offset = off,
                            reason = why,
                            "cutting off the torn tail of the Hyperspace log"
                        );
                        let f = OpenOptions::new()
                            .write(true)
                            .open(&path)
                            .map_err(io_err(&path))?;
                        f.set_len(off as u64).map_err(io_err(&path))?;
                        if sync {
                            f.sync_all().map_err(io_err(&path))?;
                        }
                        break;
                    }
                    return Err(StorageError::Corrupt {
                        path,
                        offset: off as u64,
                        what: why.to_string(),
                    });
                }
            };
            let corrupt = |what: String| StorageError::Corrupt {
                path: path.clone(),
                offset: off as u64,
                what,
            };
            match format::decode_record(ty, payload).map_err(corrupt)? {
                Record::State {
                    hard_state,
                    conf_state,
                    log_end,
                } => {
                    // Where the log ended when this was written must be where replay is now,
                    // except at the very first record (the log before it is in the snapshot or
                    // in segments already removed).
                    if let Some((index, term)) = log_end
                        && self.replayed_records > 0
                    {
                        let snap = self.snapshot.get_metadata();
                        let now = self
                            .entries
                            .last()
                            .map_or((snap.index, snap.term), |e| (e.index, e.term));
                        let want = if index > snap.index {
                            (index, term)
                        } else {
                            (snap.index, snap.term)
                        };
                        if now != want {
                            let why = format!(
                                "the log was at index {} term {} when this record was written, replay is at index {} term {}",
                                want.0, want.1, now.0, now.1
                            );
                            return Err(
                                match (&self.previous, off == format::SEGMENT_HEADER_LEN) {
                                    (Some(prev), true) => StorageError::Corrupt {
                                        path: prev.clone(),
                                        offset: fs::metadata(prev).map_or(0, |m| m.len()),
                                        what: format!(
                                            "{why} (in {}): entries at the end of this segment are missing",
                                            path.display()
                                        ),
                                    },
                                    _ => corrupt(why),
                                },
                            );
                        }
                    }
                    self.hard_state = hard_state;
                    self.conf_state = conf_state;
                }
                Record::Append {
                    hard_state,
                    entries,
                } => {
                    if let Some(first) = entries.first() {
                        let snap = self.snapshot.get_metadata().index;
                        let last = self.entries.last().map_or(snap, |e| e.index);
                        if first.index > last + 1 {
                            let after = match (&self.previous, appended) {
                                (Some(p), false) => format!(
                                    " (the last one in {}, which may have lost its end)",
                                    p.display()
                                ),
                                _ => String::new(),
                            };
                            return Err(corrupt(format!(
                                "gap in the log: entry {} after last index {last}{after}",
                                first.index
                            )));
                        }
                        appended = true;
                        let keep = first.index.saturating_sub(snap + 1) as usize;
                        self.entries.truncate(keep);
                        let skip = entries.iter().take_while(|e| e.index <= snap).count();
                        max_index = entries.last().map_or(max_index, |e| e.index.max(max_index));
                        self.entries.extend(entries.into_iter().skip(skip));
                    }
                    if let Some(hs) = hard_state {
                        self.hard_state = hs;
                    }
                }
            }
            off = end;
            self.replayed_records += 1;
        }
        self.previous = Some(path.clone());
        Ok(Segment {
            seq,
            path,
            bytes: off as u64,
            max_index,
        })
    }
}

//! Commit-log fragments: the fragment header, file naming, and the block-by-block scan shared by
//! replay (which reads payloads) and open (which reads only block headers).

use dfs_broker::{BlockingFs, BlockingReader};

use super::block::{
    BLOCK_HEADER_BYTES, BlockHeader, EntryError, HeaderProblem, for_each_entry, le_u32, unpack,
};
use super::entry::EntryLayout;
use crate::{Error, Result};

/// Magic bytes that start every fragment.
pub const FRAGMENT_MAGIC: [u8; 4] = *b"HTLF";
/// The fragment format version this code writes and reads.
pub const FRAGMENT_VERSION: u32 = 1;
/// Size of the fragment header.
pub const FRAGMENT_HEADER_BYTES: usize = 24;
/// How much a scan reads at once; blocks larger than this are read whole.
const WINDOW_BYTES: usize = 1 << 20;

/// The header written at offset 0 of fragment `number`.
pub fn encode_header(number: u64) -> [u8; FRAGMENT_HEADER_BYTES] {
    let mut b = [0u8; FRAGMENT_HEADER_BYTES];
    b[0..4].copy_from_slice(&FRAGMENT_MAGIC);
    b[4..8].copy_from_slice(&FRAGMENT_VERSION.to_le_bytes());
    b[8..16].copy_from_slice(&number.to_le_bytes());
    // b[16..20]: reserved flags, zero.
    let crc = crc32c::crc32c(&b[0..20]);
    b[20..24].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Checks a fragment header and returns the fragment number it names.
fn decode_header(file: &str, b: &[u8]) -> Result<u64> {
    if b[0..4] != FRAGMENT_MAGIC {
        return Err(Error::Corrupt {
            file: file.to_string(),
            offset: 0,
            msg: "not a commit-log fragment (bad magic)".into(),
        });
    }
    if crc32c::crc32c(&b[0..20]) != le_u32(&b[20..24]) {
        return Err(Error::Checksum {
            file: file.to_string(),
            offset: 0,
            what: "fragment header".into(),
        });
    }
    let version = le_u32(&b[4..8]);
    if version != FRAGMENT_VERSION {
        return Err(Error::UnsupportedVersion {
            file: file.to_string(),
            version,
        });
    }
    Ok(u64::from_le_bytes(
        b[8..16].try_into().expect("8-byte slice"),
    ))
}

/// The fragment number a directory entry names, if it is a fragment (canonical decimal u64).
pub fn parse_name(name: &str) -> Option<u64> {
    let n: u64 = name.parse().ok()?;
    (n.to_string() == name).then_some(n)
}

/// The fragments in `dir` as (number, length), sorted by number. A missing directory has none.
pub fn list(fs: &BlockingFs, dir: &str) -> Result<Vec<(u64, u64)>> {
    let entries = match fs.readdir(dir) {
        Ok(e) => e,
        Err(e) if e.is_not_found() => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut out: Vec<(u64, u64)> = entries
        .into_iter()
        .filter(|e| !e.is_dir)
        .filter_map(|e| match parse_name(&e.name) {
            Some(n) => Some((n, e.length)),
            None => {
                tracing::debug!(dir, name = %e.name, "ignoring non-fragment file in commit-log directory");
                None
            }
        })
        .collect();
    out.sort_unstable();
    Ok(out)
}

/// Positional reads through a window, so a scan of small blocks costs one read per MiB.
struct Window {
    reader: BlockingReader,
    len: u64,
    start: u64,
    buf: Vec<u8>,
}

impl Window {
    /// `n` bytes at `off`; the caller has checked that they lie within the file.
    fn get(&mut self, off: u64, n: usize) -> Result<&[u8]> {
        debug_assert!(off + n as u64 <= self.len);
        let end = self.start + self.buf.len() as u64;
        if off < self.start || off + n as u64 > end {
            let want = (n.max(WINDOW_BYTES) as u64).min(self.len - off) as usize;
            self.buf = self.reader.pread(off, want)?;
            self.start = off;
        }
        let at = (off - self.start) as usize;
        Ok(&self.buf[at..at + n])
    }

    /// True if a block header that passes its checksum starts anywhere in `[from, len)`.
    fn valid_header_after(&mut self, from: u64) -> Result<bool> {
        let mut pos = from;
        while pos + BLOCK_HEADER_BYTES as u64 <= self.len {
            if BlockHeader::looks_valid(self.get(pos, BLOCK_HEADER_BYTES)?) {
                return Ok(true);
            }
            pos += 1;
        }
        Ok(false)
    }
}

/// Called with each entry a replay reads, and its layout (from its block's version).
pub type EntryVisitor<'a> = dyn FnMut(&[u8], EntryLayout) -> Result<()> + 'a;

/// Where a fragment's valid data may end (docs/formats/commitlog.md "Replay rules").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// Its end is known (recorded when it was closed, or when an open accepted its torn
    /// tail): everything before it must be whole, and bytes after it are not read.
    End(u64),
    /// The newest fragment of a process that did not close it: its last write may be torn.
    MayTear,
}

/// What a scan of one fragment found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FragmentScan {
    pub len: u64,
    pub blocks: u64,
    pub entries: u64,
    pub entry_bytes: u64,
    pub torn_blocks: u64,
    pub max_revision: i64,
    /// Where the last whole block ends (the fragment's length as far as replay is concerned).
    pub valid_end: u64,
}

/// Reads fragment `number` at `path` block by block. With `visit`, checks every payload and
/// calls `visit` with each entry; without, reads only block headers (payload checksums are not
/// checked). Only a [`Tail::MayTear`] fragment may end in a torn block; with [`Tail::End`],
/// anything short of whole blocks up to that end is an error naming the file and offset.
pub fn scan(
    fs: &BlockingFs,
    path: &str,
    number: u64,
    tail: Tail,
    mut visit: Option<&mut EntryVisitor<'_>>,
) -> Result<FragmentScan> {
    let reader = fs.open(path)?;
    let file_len = reader.length()?;
    let len = match tail {
        Tail::End(end) if file_len < end => {
            return Err(Error::Corrupt {
                file: path.to_string(),
                offset: file_len,
                msg: format!(
                    "commit-log fragment is truncated: {file_len} bytes, but it was closed at {end}"
                ),
            });
        }
        Tail::End(end) => end,
        Tail::MayTear => file_len,
    };
    let mut st = FragmentScan {
        len,
        max_revision: i64::MIN,
        ..FragmentScan::default()
    };
    let may_tear = tail == Tail::MayTear;
    if len == 0 {
        if may_tear {
            tracing::warn!(
                file = path,
                "empty commit-log fragment (crash right after it was created)"
            );
        }
        return Ok(st);
    }
    if len < FRAGMENT_HEADER_BYTES as u64 {
        if !may_tear {
            // Recorded as ending inside its header: a torn header an earlier open accepted.
            return Ok(st);
        }
        tracing::warn!(
            file = path,
            offset = 0,
            cut_bytes = len,
            "torn commit-log fragment header cut ({len} bytes)"
        );
        st.torn_blocks = 1;
        return Ok(st);
    }
    let mut w = Window {
        reader,
        len,
        start: 0,
        buf: Vec::new(),
    };
    let found = decode_header(path, w.get(0, FRAGMENT_HEADER_BYTES)?)?;
    if found != number {
        return Err(Error::Corrupt {
            file: path.to_string(),
            offset: 0,
            msg: format!("fragment header says fragment {found}"),
        });
    }
    let mut off = FRAGMENT_HEADER_BYTES as u64;
    st.valid_end = off;
    let mut unpacked = Vec::new();
    // A torn block ends the newest fragment of a crashed process; anywhere else it is damage.
    let torn = |st: &mut FragmentScan, off: u64, why: &str| -> Result<()> {
        if !may_tear {
            return Err(Error::Corrupt {
                file: path.to_string(),
                offset: off,
                msg: format!(
                    "commit-log block is damaged ({why}) before the fragment's recorded end {len}"
                ),
            });
        }
        let cut = len - off;
        tracing::warn!(
            file = path,
            fragment = number,
            offset = off,
            cut_bytes = cut,
            why,
            "torn commit-log block at the end of the newest fragment: {cut} bytes cut"
        );
        st.torn_blocks += 1;
        Ok(())
    };
    while off < len {
        if len - off < BLOCK_HEADER_BYTES as u64 {
            torn(&mut st, off, "incomplete header")?;
            break;
        }
        let h = match BlockHeader::decode(w.get(off, BLOCK_HEADER_BYTES)?) {
            Ok(h) => h,
            Err(HeaderProblem::Checksum) => {
                if w.valid_header_after(off + 1)? {
                    return Err(Error::Checksum {
                        file: path.to_string(),
                        offset: off,
                        what: "commit-log block header (valid blocks follow it)".into(),
                    });
                }
                torn(&mut st, off, "bad header checksum")?;
                break;
            }
            Err(HeaderProblem::Version(v)) => {
                return Err(Error::UnsupportedVersion {
                    file: path.to_string(),
                    version: u32::from(v),
                });
            }
            Err(HeaderProblem::Invalid(msg)) => {
                return Err(Error::Corrupt {
                    file: path.to_string(),
                    offset: off,
                    msg: msg.into(),
                });
            }
        };
        let end = off + h.block_len();
        if end > len {
            torn(&mut st, off, "incomplete payload")?;
            break;
        }
        if let Some(visit) = visit.as_deref_mut() {
            let stored = w.get(off + BLOCK_HEADER_BYTES as u64, h.stored_len as usize)?;
            if crc32c::crc32c(stored) != h.payload_crc {
                if w.valid_header_after(end)? {
                    return Err(Error::Checksum {
                        file: path.to_string(),
                        offset: off,
                        what: "commit-log block payload (valid blocks follow it)".into(),
                    });
                }
                torn(&mut st, off, "bad payload checksum")?;
                break;
            }
            let corrupt = |msg: &str| Error::Corrupt {
                file: path.to_string(),
                offset: off,
                msg: msg.to_string(),
            };
            let payload = unpack(&h, stored, &mut unpacked).map_err(corrupt)?;
            let entry_bytes = &mut st.entry_bytes;
            let layout = h.entry_layout();
            let counted = |e: &[u8]| {
                *entry_bytes += e.len() as u64;
                visit(e, layout)
            };
            match for_each_entry(payload, h.entries, counted) {
                Ok(()) => {}
                Err(EntryError::Framing(msg)) => return Err(corrupt(msg)),
                Err(EntryError::Callback(e)) => return Err(e),
            }
        }
        st.blocks += 1;
        st.entries += u64::from(h.entries);
        st.max_revision = st.max_revision.max(h.max_revision);
        off = end;
        st.valid_end = off;
    }
    Ok(st)
}

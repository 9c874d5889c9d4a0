//! Packed cells: the byte layout of an `rs.update` batch ([`encode_cells`], [`decode_cells`],
//! read in place as `MutationRef`s) and of an `rs.scan` block ([`encode_scan_cell`],
//! [`PackedCells`], read one cell at a time in place). Layout: docs/formats/rangeserver-rpc.md.

use common::codec::{get_varint, put_varint};
use common::key::{Cell, CellFlag, Key, KeyRef};
use common::{AsMutationRef, MutationRef};

/// Bytes a packed cell takes besides its row, qualifier and value (flag, family, timestamp,
/// three lengths), at most.
pub const PACKED_CELL_OVERHEAD: usize = 3 + 8 + 3 * 5;

/// Appends the packed form of `cells` to `out`: per cell, `flag u8, family u8, has_ts u8,
/// [timestamp i64 LE], varint row length, row, varint qualifier length, qualifier, varint value
/// length, value`.
pub fn encode_cells<'a, M: AsMutationRef + 'a>(
    cells: impl IntoIterator<Item = &'a M>,
    out: &mut Vec<u8>,
) {
    for m in cells {
        let m = m.as_mutation_ref();
        out.push(m.flag as u8);
        out.push(m.family);
        match m.timestamp {
            Some(ts) => {
                out.push(1);
                out.extend_from_slice(&ts.to_le_bytes());
            }
            None => out.push(0),
        }
        for field in [m.row, m.qualifier, m.value] {
            put_varint(out, field.len() as u64);
            out.extend_from_slice(field);
        }
    }
}

/// Reads `count` packed cells from `buf` ([`encode_cells`]), borrowing their bytes. A malformed
/// buffer is an error naming the cell and byte offset, and nothing is returned.
pub fn decode_cells(buf: &[u8], count: u32) -> Result<Vec<MutationRef<'_>>, String> {
    // Every cell takes at least 6 bytes, so a lying count cannot make a huge allocation.
    let mut out = Vec::with_capacity((count as usize).min(buf.len() / 6 + 1));
    let mut r = PackedReader { buf, pos: 0 };
    for i in 0..count {
        let start = r.pos;
        let bad = |what: &str| format!("packed cell {i} at byte {start}: {what}");
        let head = r.fixed::<3>().ok_or_else(|| bad("truncated header"))?;
        let flag = cell_flag(head[0]).map_err(|e| bad(&e))?;
        let family = head[1];
        let timestamp = match head[2] {
            0 => None,
            1 => Some(i64::from_le_bytes(
                r.fixed::<8>().ok_or_else(|| bad("truncated timestamp"))?,
            )),
            other => return Err(bad(&format!("timestamp marker {other} is neither 0 nor 1"))),
        };
        let row = r.field("row").map_err(|e| bad(&e))?;
        let qualifier = r.field("qualifier").map_err(|e| bad(&e))?;
        let value = r.field("value").map_err(|e| bad(&e))?;
        out.push(MutationRef {
            row,
            family,
            qualifier,
            timestamp,
            flag,
            value,
        });
    }
    r.finish(count)?;
    Ok(out)
}

/// Bytes of a packed scan cell besides its row, qualifier and value (at most: the three
/// varints take up to 5 bytes each for fields below 4 GiB).
pub const PACKED_SCAN_CELL_OVERHEAD: usize = 2 + 16 + 3 * 5;

/// Appends the packed form of a scanned cell to `out`: `flag u8, family u8, timestamp i64 LE,
/// revision i64 LE, varint row length, row, varint qualifier length, qualifier, varint value
/// length, value`. At most `key.as_bytes().len() + value.len() + PACKED_SCAN_CELL_OVERHEAD`
/// bytes (a stored key holds its row and qualifier escaped, never shorter).
pub fn encode_scan_cell(key: &KeyRef<'_>, value: &[u8], out: &mut Vec<u8>) {
    out.push(key.flag() as u8);
    out.push(key.family());
    out.extend_from_slice(&key.timestamp().to_le_bytes());
    out.extend_from_slice(&key.revision().to_le_bytes());
    for field in [&*key.row(), &*key.qualifier(), value] {
        put_varint(out, field.len() as u64);
        out.extend_from_slice(field);
    }
}

/// A packed scan cell, borrowed from its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanCellRef<'a> {
    pub row: &'a [u8],
    pub family: u8,
    pub qualifier: &'a [u8],
    pub timestamp: i64,
    pub revision: i64,
    pub flag: CellFlag,
    pub value: &'a [u8],
}

impl ScanCellRef<'_> {
    pub fn to_cell(&self) -> Cell {
        Cell {
            key: Key {
                row: self.row.to_vec(),
                family: self.family,
                qualifier: self.qualifier.to_vec(),
                timestamp: self.timestamp,
                revision: self.revision,
                flag: self.flag,
            },
            value: self.value.to_vec(),
        }
    }
}

/// The packed cells of one `ScanBlock` ([`encode_scan_cell`]), read one at a time in place.
/// Reading checks every length against the message and, after the last cell, that no bytes
/// are left; an error names the cell and its byte offset in the message.
#[derive(Debug, Clone)]
pub struct PackedCells {
    bytes: bytes::Bytes,
    /// Offset of `bytes` in the message it came from (for errors).
    base: usize,
    /// Cells left, and the index of the next one in its message.
    left: u32,
    index: u32,
    pos: usize,
}

impl PackedCells {
    pub fn new(bytes: bytes::Bytes, count: u32) -> Self {
        Self {
            bytes,
            base: 0,
            left: count,
            index: 0,
            pos: 0,
        }
    }

    /// Cells not read yet.
    pub fn remaining(&self) -> u32 {
        self.left
    }

    /// Byte offset of the next cell.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// The cells between two offsets this reader has passed (`count` of them), as a reader of
    /// their own.
    pub fn slice(&self, from: usize, to: usize, count: u32, first_index: u32) -> PackedCells {
        PackedCells {
            bytes: self.bytes.slice(from..to),
            base: self.base + from,
            left: count,
            index: first_index,
            pos: 0,
        }
    }

    /// Index (in its message) of the next cell.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The next cell; `Ok(None)` after the last.
    pub fn next_ref(&mut self) -> Result<Option<ScanCellRef<'_>>, String> {
        if self.left == 0 {
            let r = PackedReader {
                buf: &self.bytes,
                pos: self.pos,
            };
            return r.finish(self.index).map(|()| None);
        }
        let start = self.pos;
        let (i, base) = (self.index, self.base);
        let bad = |what: &str| format!("packed cell {i} at byte {}: {what}", base + start);
        let mut r = PackedReader {
            buf: &self.bytes,
            pos: self.pos,
        };
        let head = r.fixed::<18>().ok_or_else(|| bad("truncated header"))?;
        let flag = cell_flag(head[0]).map_err(|e| bad(&e))?;
        let row = r.field("row").map_err(|e| bad(&e))?;
        let qualifier = r.field("qualifier").map_err(|e| bad(&e))?;
        let value = r.field("value").map_err(|e| bad(&e))?;
        self.pos = r.pos;
        self.left -= 1;
        self.index += 1;
        Ok(Some(ScanCellRef {
            row,
            family: head[1],
            qualifier,
            timestamp: i64::from_le_bytes(head[2..10].try_into().expect("8 bytes")),
            revision: i64::from_le_bytes(head[10..18].try_into().expect("8 bytes")),
            flag,
            value,
        }))
    }

    /// The next cell, owned; `Ok(None)` after the last.
    pub fn next_cell(&mut self) -> Result<Option<Cell>, String> {
        Ok(self.next_ref()?.map(|c| c.to_cell()))
    }
}

fn cell_flag(b: u8) -> Result<CellFlag, String> {
    CellFlag::from_u8(b).ok_or_else(|| format!("unknown cell flag {b}"))
}

/// A cursor over packed cells; `None` / `Err` on anything past the buffer's end.
struct PackedReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> PackedReader<'a> {
    fn fixed<const N: usize>(&mut self) -> Option<[u8; N]> {
        let b = self.buf.get(self.pos..self.pos.checked_add(N)?)?;
        self.pos += N;
        Some(b.try_into().expect("N bytes"))
    }

    /// A varint length and that many bytes.
    fn field(&mut self, name: &str) -> Result<&'a [u8], String> {
        let len =
            get_varint(self.buf, &mut self.pos).ok_or_else(|| format!("bad {name} length"))?;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| self.pos.checked_add(l))
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| format!("{name} of {len} bytes runs past the message"))?;
        let f = &self.buf[self.pos..end];
        self.pos = end;
        Ok(f)
    }

    /// Every byte must belong to one of the `count` cells.
    fn finish(&self, count: u32) -> Result<(), String> {
        if self.pos != self.buf.len() {
            return Err(format!(
                "{} bytes after the last of {count} packed cells",
                self.buf.len() - self.pos
            ));
        }
        Ok(())
    }
}

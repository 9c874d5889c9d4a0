//! Commit-log block encoding: the 40-byte block header, entry framing and payload compression.
//!
//! Byte layout is documented in `docs/formats/commitlog.md`; this file is its implementation.

use common::codec::{self, get_varint, put_varint};

use super::entry::EntryLayout;

/// Magic bytes that start every block header.
pub const BLOCK_MAGIC: [u8; 4] = *b"HTLB";
/// The block format version this code writes: 2, whose entries the engine lays out with
/// timestamps and revisions as deltas (`commitlog::entry`, layout v2).
pub const BLOCK_VERSION: u16 = 2;
/// The oldest block version this code reads (entries of layout v1).
pub const MIN_BLOCK_VERSION: u16 = 1;
/// Size of the fixed block header.
pub const BLOCK_HEADER_BYTES: usize = 40;
/// Flag bit: the payload is one lz4 block.
pub const FLAG_LZ4: u16 = 1;
/// Flags this version understands.
const KNOWN_FLAGS: u16 = FLAG_LZ4;
/// Upper bound on a block's stored or uncompressed payload; also bounds `max_block_bytes`.
pub const MAX_PAYLOAD_BYTES: usize = 1 << 30;

/// The decoded fixed header of one block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    /// [`BLOCK_VERSION`] for blocks written now; it tells the layout of the entries.
    pub version: u16,
    pub flags: u16,
    pub stored_len: u32,
    pub uncompressed_len: u32,
    pub entries: u32,
    pub max_revision: i64,
    pub payload_crc: u32,
}

/// Why a header did not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderProblem {
    /// Wrong magic or header checksum: not (or no longer) a block header.
    Checksum,
    /// A valid header of a newer format.
    Version(u16),
    /// A valid header that makes no sense (unknown flags, impossible lengths).
    Invalid(&'static str),
}

impl BlockHeader {
    /// Writes the header into `out[..BLOCK_HEADER_BYTES]`.
    pub fn encode(&self, out: &mut [u8]) {
        let out = &mut out[..BLOCK_HEADER_BYTES];
        out[0..4].copy_from_slice(&BLOCK_MAGIC);
        out[4..6].copy_from_slice(&self.version.to_le_bytes());
        out[6..8].copy_from_slice(&self.flags.to_le_bytes());
        out[8..12].copy_from_slice(&self.stored_len.to_le_bytes());
        out[12..16].copy_from_slice(&self.uncompressed_len.to_le_bytes());
        out[16..20].copy_from_slice(&self.entries.to_le_bytes());
        out[20..24].copy_from_slice(&0u32.to_le_bytes());
        out[24..32].copy_from_slice(&self.max_revision.to_le_bytes());
        out[32..36].copy_from_slice(&self.payload_crc.to_le_bytes());
        let crc = crc32c::crc32c(&out[0..36]);
        out[36..40].copy_from_slice(&crc.to_le_bytes());
    }

    /// True if `buf` starts with something that passes the magic and header-checksum tests.
    pub fn looks_valid(buf: &[u8]) -> bool {
        buf.len() >= BLOCK_HEADER_BYTES
            && buf[0..4] == BLOCK_MAGIC
            && crc32c::crc32c(&buf[0..36]) == le_u32(&buf[36..40])
    }

    /// Decodes and checks a header from `buf[..BLOCK_HEADER_BYTES]`.
    pub fn decode(buf: &[u8]) -> Result<Self, HeaderProblem> {
        if !Self::looks_valid(buf) {
            return Err(HeaderProblem::Checksum);
        }
        let version = u16::from_le_bytes([buf[4], buf[5]]);
        if !(MIN_BLOCK_VERSION..=BLOCK_VERSION).contains(&version) {
            return Err(HeaderProblem::Version(version));
        }
        let h = BlockHeader {
            version,
            flags: u16::from_le_bytes([buf[6], buf[7]]),
            stored_len: le_u32(&buf[8..12]),
            uncompressed_len: le_u32(&buf[12..16]),
            entries: le_u32(&buf[16..20]),
            max_revision: codec::le_u64(buf, 24).expect("a checked header") as i64,
            payload_crc: le_u32(&buf[32..36]),
        };
        if h.flags & !KNOWN_FLAGS != 0 {
            return Err(HeaderProblem::Invalid("unknown flag bits"));
        }
        if h.stored_len as usize > MAX_PAYLOAD_BYTES
            || h.uncompressed_len as usize > MAX_PAYLOAD_BYTES
        {
            return Err(HeaderProblem::Invalid(
                "payload length over the 1 GiB limit",
            ));
        }
        if h.flags & FLAG_LZ4 == 0 && h.stored_len != h.uncompressed_len {
            return Err(HeaderProblem::Invalid(
                "uncompressed block with stored length != uncompressed length",
            ));
        }
        Ok(h)
    }

    /// How the entries of this block are laid out.
    pub fn entry_layout(&self) -> EntryLayout {
        if self.version >= 2 {
            EntryLayout::V2
        } else {
            EntryLayout::V1
        }
    }

    /// Stored bytes of the whole block, header included.
    pub fn block_len(&self) -> u64 {
        BLOCK_HEADER_BYTES as u64 + u64::from(self.stored_len)
    }
}

/// The little-endian `u32` at the start of `b`. Callers pass fixed sub-slices of a buffer
/// whose length they checked (a header of `BLOCK_HEADER_BYTES`, a fragment header), so the
/// bytes are always there.
pub(crate) fn le_u32(b: &[u8]) -> u32 {
    codec::le_u32(b, 0).expect("a checked 4-byte slice")
}

/// Appends one framed entry (varint length, then the bytes) to a payload.
pub fn put_entry(out: &mut Vec<u8>, entry: &[u8]) {
    put_varint(out, entry.len() as u64);
    out.extend_from_slice(entry);
}

/// Splits an uncompressed payload into its entries, checking that it holds exactly `expected`.
pub fn for_each_entry(
    payload: &[u8],
    expected: u32,
    mut f: impl FnMut(&[u8]) -> crate::Result<()>,
) -> Result<(), EntryError<crate::Error>> {
    let mut pos = 0;
    let mut n = 0u32;
    while pos < payload.len() {
        let len =
            get_varint(payload, &mut pos).ok_or(EntryError::Framing("truncated entry length"))?;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| pos.checked_add(l))
            .filter(|&e| e <= payload.len())
            .ok_or(EntryError::Framing(
                "entry runs past the end of the payload",
            ))?;
        n = n
            .checked_add(1)
            .ok_or(EntryError::Framing("too many entries"))?;
        f(&payload[pos..end]).map_err(EntryError::Callback)?;
        pos = end;
    }
    if n != expected {
        return Err(EntryError::Framing("entry count differs from the header"));
    }
    Ok(())
}

/// A payload that does not frame, or the caller's own error.
#[derive(Debug)]
pub enum EntryError<E> {
    Framing(&'static str),
    Callback(E),
}

/// Turns a block buffer whose first [`BLOCK_HEADER_BYTES`] are reserved and whose remainder is the
/// uncompressed payload into a finished block: compresses into `scratch` when asked and when that
/// shrinks the payload, and fills in the header. Returns the bytes to append (either `buf` or a
/// prefix of `scratch`).
pub fn seal<'a>(
    buf: &'a mut [u8],
    scratch: &'a mut Vec<u8>,
    compress: bool,
    entries: u32,
    max_revision: i64,
) -> &'a [u8] {
    let payload_len = buf.len() - BLOCK_HEADER_BYTES;
    assert!(
        payload_len <= MAX_PAYLOAD_BYTES,
        "block payload over the limit"
    );
    if compress && payload_len > 64 {
        let need = BLOCK_HEADER_BYTES + lz4_flex::block::get_maximum_output_size(payload_len);
        if scratch.len() < need {
            scratch.resize(need, 0);
        }
        let n = lz4_flex::block::compress_into(
            &buf[BLOCK_HEADER_BYTES..],
            &mut scratch[BLOCK_HEADER_BYTES..],
        )
        .expect("output sized by get_maximum_output_size");
        if n < payload_len {
            let stored = &scratch[BLOCK_HEADER_BYTES..BLOCK_HEADER_BYTES + n];
            let header = BlockHeader {
                version: BLOCK_VERSION,
                flags: FLAG_LZ4,
                stored_len: n as u32,
                uncompressed_len: payload_len as u32,
                entries,
                max_revision,
                payload_crc: crc32c::crc32c(stored),
            };
            header.encode(&mut scratch[..]);
            return &scratch[..BLOCK_HEADER_BYTES + n];
        }
    }
    let header = BlockHeader {
        version: BLOCK_VERSION,
        flags: 0,
        stored_len: payload_len as u32,
        uncompressed_len: payload_len as u32,
        entries,
        max_revision,
        payload_crc: crc32c::crc32c(&buf[BLOCK_HEADER_BYTES..]),
    };
    header.encode(buf);
    buf
}

/// Decompresses (if flagged) a stored payload whose checksum has been verified, into `out`.
/// Returns the uncompressed payload: `stored` itself or `out`.
pub fn unpack<'a>(
    h: &BlockHeader,
    stored: &'a [u8],
    out: &'a mut Vec<u8>,
) -> Result<&'a [u8], &'static str> {
    if h.flags & FLAG_LZ4 == 0 {
        return Ok(stored);
    }
    let n = h.uncompressed_len as usize;
    // lz4 expands a byte to at most 255: a larger claim is damage, refused before allocating.
    if n > stored.len().saturating_mul(255).saturating_add(16) {
        return Err("uncompressed length exceeds what the lz4 payload can expand to");
    }
    out.clear();
    out.resize(n, 0);
    match lz4_flex::block::decompress_into(stored, out) {
        Ok(got) if got == n => Ok(&out[..]),
        Ok(_) => Err("decompressed length differs from the header"),
        Err(_) => Err("lz4 payload does not decompress"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_and_unpack() {
        for compress in [false, true] {
            let mut buf = vec![0u8; BLOCK_HEADER_BYTES];
            put_entry(&mut buf, &[7u8; 1000]);
            put_entry(&mut buf, b"hello");
            let mut scratch = Vec::new();
            let block = seal(&mut buf, &mut scratch, compress, 2, 42).to_vec();
            let h = BlockHeader::decode(&block).expect("valid header");
            assert_eq!(h.flags & FLAG_LZ4 != 0, compress);
            assert_eq!(h.max_revision, 42);
            assert_eq!(block.len() as u64, h.block_len());
            let stored = &block[BLOCK_HEADER_BYTES..];
            assert_eq!(crc32c::crc32c(stored), h.payload_crc);
            let mut out = Vec::new();
            let payload = unpack(&h, stored, &mut out).expect("unpacks");
            let mut got = Vec::new();
            for_each_entry(payload, 2, |e| {
                got.push(e.to_vec());
                Ok(())
            })
            .expect("frames");
            assert_eq!(got, vec![vec![7u8; 1000], b"hello".to_vec()]);
        }
    }

    #[test]
    fn header_checksum_detects_flip() {
        let mut buf = vec![0u8; BLOCK_HEADER_BYTES];
        put_entry(&mut buf, b"x");
        let mut scratch = Vec::new();
        let mut block = seal(&mut buf, &mut scratch, false, 1, 1).to_vec();
        block[10] ^= 1;
        assert_eq!(BlockHeader::decode(&block), Err(HeaderProblem::Checksum));
    }

    /// Versions 1 and 2 decode, each naming its entries' layout; any other version, with a
    /// good checksum, is refused as unsupported rather than read as damage.
    #[test]
    fn block_versions_name_the_entry_layout_and_others_are_refused() {
        let mut buf = vec![0u8; BLOCK_HEADER_BYTES];
        put_entry(&mut buf, b"x");
        let mut scratch = Vec::new();
        let block = seal(&mut buf, &mut scratch, false, 1, 1).to_vec();
        let mut h = BlockHeader::decode(&block).expect("valid header");
        assert_eq!((h.version, h.entry_layout()), (2, EntryLayout::V2));
        for (version, want) in [
            (1, Ok(EntryLayout::V1)),
            (2, Ok(EntryLayout::V2)),
            (0, Err(HeaderProblem::Version(0))),
            (3, Err(HeaderProblem::Version(3))),
        ] {
            h.version = version;
            let mut b = block.clone();
            h.encode(&mut b);
            assert_eq!(BlockHeader::decode(&b).map(|h| h.entry_layout()), want);
        }
    }
}

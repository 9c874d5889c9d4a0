//! The manifest object of an object-store file (docs/formats/objstore.md): its encoding, its
//! checks, and the mapping of a byte range of the file onto its segment objects.

use crate::{FsError, FsResult};

/// `HTOM`: ht object-store manifest.
pub(crate) const MAGIC: [u8; 4] = *b"HTOM";
pub(crate) const VERSION: u32 = 1;
/// Bytes before the segment lengths: magic, version, file id, total length, segment count.
const HEADER_BYTES: usize = 4 + 4 + 16 + 8 + 4;
/// Bytes after them: the crc.
const TRAILER_BYTES: usize = 4;
/// A manifest larger than this is refused as corrupt (it would list 128 Mi segments).
pub(crate) const MAX_MANIFEST_BYTES: u64 = 1 << 30;

/// What a manifest says about a file: the id naming its segments and their lengths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Manifest {
    /// Random, so that a renamed file keeps its segments and a re-created one gets new ones.
    pub id: u128,
    /// Cumulative ends of the segments: segment `n` holds bytes `ends[n-1]..ends[n]`.
    ends: Vec<u64>,
}

/// One piece of a read: `len` bytes at `offset` of segment `segment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    pub segment: usize,
    pub offset: u64,
    pub len: u64,
}

impl Manifest {
    /// An empty file.
    pub fn new(id: u128) -> Self {
        Self {
            id,
            ends: Vec::new(),
        }
    }

    /// A file of the given segment lengths.
    #[cfg(test)]
    pub fn from_lengths(id: u128, lengths: &[u64]) -> Self {
        let mut m = Self::new(id);
        for &l in lengths {
            m.push(l);
        }
        m
    }

    /// Appends a segment of `len` bytes.
    pub fn push(&mut self, len: u64) {
        let end = self.len() + len;
        self.ends.push(end);
    }

    /// The file length.
    pub fn len(&self) -> u64 {
        self.ends.last().copied().unwrap_or(0)
    }

    /// The number of segments.
    pub fn segments(&self) -> usize {
        self.ends.len()
    }

    /// The id as the segments' directory name: 32 lowercase hex digits.
    pub fn id_hex(&self) -> String {
        format!("{:032x}", self.id)
    }

    /// The encoded manifest (docs/formats/objstore.md).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + 8 * self.ends.len() + TRAILER_BYTES);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.len().to_le_bytes());
        out.extend_from_slice(&(self.ends.len() as u32).to_le_bytes());
        let mut prev = 0;
        for &end in &self.ends {
            out.extend_from_slice(&(end - prev).to_le_bytes());
            prev = end;
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes a manifest; `path` (the file) and `object` (the manifest's key) name it in errors.
    pub fn decode(op: &'static str, path: &str, object: &str, data: &[u8]) -> FsResult<Self> {
        let bad = |why: String| FsError::Backend {
            op,
            path: path.to_string(),
            msg: format!("corrupt manifest object {object}: {why}"),
        };
        if data.len() < HEADER_BYTES + TRAILER_BYTES {
            return Err(bad(format!(
                "truncated: {} bytes, a manifest has at least {}",
                data.len(),
                HEADER_BYTES + TRAILER_BYTES
            )));
        }
        if data[0..4] != MAGIC {
            return Err(bad(format!("bad magic {:02x?}", &data[0..4])));
        }
        let (body, crc) = data.split_at(data.len() - TRAILER_BYTES);
        let count = u32_at(data, 32) as usize;
        let want_len = HEADER_BYTES as u64 + 8 * count as u64 + TRAILER_BYTES as u64;
        if data.len() as u64 != want_len {
            return Err(bad(format!(
                "truncated or overlong: {} bytes, {count} segments need {want_len}",
                data.len()
            )));
        }
        let stored = u32_at(crc, 0);
        let computed = crc32c::crc32c(body);
        if stored != computed {
            return Err(bad(format!(
                "checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
            )));
        }
        let version = u32_at(data, 4);
        if version != VERSION {
            return Err(bad(format!("unsupported version {version}")));
        }
        let mut id = [0u8; 16];
        id.copy_from_slice(&data[8..24]);
        let id = u128::from_le_bytes(id);
        let total = u64_at(data, 24);
        let mut ends = Vec::with_capacity(count);
        let mut end = 0u64;
        for i in 0..count {
            let len = u64_at(data, HEADER_BYTES + 8 * i);
            end = end
                .checked_add(len)
                .ok_or_else(|| bad("segment lengths overflow".to_string()))?;
            ends.push(end);
        }
        if end != total {
            return Err(bad(format!(
                "segment lengths add up to {end}, the total says {total}"
            )));
        }
        Ok(Self { id, ends })
    }

    /// The pieces of segments holding `len` bytes at `offset`, in order; the range must lie
    /// within the file.
    pub fn map_range(&self, offset: u64, len: u64) -> Vec<Piece> {
        let mut out = Vec::new();
        let end = offset.saturating_add(len).min(self.len());
        let mut pos = offset;
        // The first segment whose end is past `offset`.
        let mut seg = self.ends.partition_point(|&e| e <= offset);
        while pos < end && seg < self.ends.len() {
            let start = if seg == 0 { 0 } else { self.ends[seg - 1] };
            let seg_end = self.ends[seg];
            let n = seg_end.min(end) - pos;
            if n > 0 {
                out.push(Piece {
                    segment: seg,
                    offset: pos - start,
                    len: n,
                });
            }
            pos += n;
            seg += 1;
        }
        out
    }
}

/// The little-endian `u32` at `at`; callers have checked that the bytes are there.
fn u32_at(data: &[u8], at: usize) -> u32 {
    common::codec::le_u32(data, at).expect("length checked by the caller")
}

/// The little-endian `u64` at `at`; callers have checked that the bytes are there.
fn u64_at(data: &[u8], at: usize) -> u64 {
    common::codec::le_u64(data, at).expect("length checked by the caller")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(data: &[u8]) -> FsResult<Manifest> {
        Manifest::decode("open", "/a/b", "files/a/b", data)
    }

    fn expect_corrupt(data: &[u8], what: &str) {
        match decode(data) {
            Err(FsError::Backend { path, msg, .. }) => {
                assert_eq!(path, "/a/b");
                assert!(msg.contains("files/a/b"), "{msg} does not name the object");
                assert!(msg.contains(what), "{msg} does not say {what}");
            }
            other => panic!("expected a corrupt-manifest error ({what}), got {other:?}"),
        }
    }

    #[test]
    fn round_trip() {
        for lengths in [vec![], vec![0], vec![5], vec![1, 2, 3, 1 << 40]] {
            let m = Manifest::from_lengths(0x0123_4567_89ab_cdef_0011_2233_4455_6677, &lengths);
            let enc = m.encode();
            assert_eq!(enc.len(), 40 + 8 * lengths.len());
            assert_eq!(&enc[0..4], b"HTOM");
            let back = decode(&enc).expect("decode");
            assert_eq!(back, m);
            assert_eq!(back.len(), lengths.iter().sum::<u64>());
            assert_eq!(back.segments(), lengths.len());
        }
        assert_eq!(
            Manifest::new(255).id_hex(),
            "000000000000000000000000000000ff"
        );
    }

    #[test]
    fn every_truncation_is_an_error() {
        let enc = Manifest::from_lengths(7, &[10, 20, 30]).encode();
        for n in 0..enc.len() {
            assert!(decode(&enc[..n]).is_err(), "{n}-byte prefix accepted");
        }
        expect_corrupt(&enc[..10], "truncated");
        expect_corrupt(&enc[..enc.len() - 8], "truncated");
        let mut long = enc.clone();
        long.extend_from_slice(&[0; 8]);
        expect_corrupt(&long, "overlong");
    }

    #[test]
    fn checksum_mismatch_is_an_error() {
        let enc = Manifest::from_lengths(7, &[10, 20, 30]).encode();
        // Every single-bit flip outside the count field is a checksum mismatch (flips in the
        // count field change the expected size first).
        for byte in (4..enc.len()).filter(|b| !(32..36).contains(b)) {
            let mut bad = enc.clone();
            bad[byte] ^= 0x10;
            expect_corrupt(&bad, "checksum mismatch");
        }
        let mut bad = enc.clone();
        bad[0] = b'X';
        expect_corrupt(&bad, "magic");
    }

    #[test]
    fn inconsistent_fields_are_errors() {
        // A total that disagrees with the segment lengths, with a valid crc.
        let mut enc = Manifest::from_lengths(1, &[10, 20]).encode();
        enc[24..32].copy_from_slice(&31u64.to_le_bytes());
        let n = enc.len();
        let crc = crc32c::crc32c(&enc[..n - 4]);
        enc[n - 4..].copy_from_slice(&crc.to_le_bytes());
        expect_corrupt(&enc, "add up");
        // A huge segment count does not allocate: it is a size mismatch.
        let mut enc = Manifest::from_lengths(1, &[10]).encode();
        enc[32..36].copy_from_slice(&u32::MAX.to_le_bytes());
        expect_corrupt(&enc, "truncated");
        // An unknown version, with a valid crc.
        let mut enc = Manifest::new(1).encode();
        enc[4..8].copy_from_slice(&2u32.to_le_bytes());
        let n = enc.len();
        let crc = crc32c::crc32c(&enc[..n - 4]);
        enc[n - 4..].copy_from_slice(&crc.to_le_bytes());
        expect_corrupt(&enc, "version");
    }

    #[test]
    fn map_range_spans_segments() {
        // Segments: [0,10) [10,10) empty [10,30) [30,31) [31,61)
        let m = Manifest::from_lengths(1, &[10, 0, 20, 1, 30]);
        let p = |segment, offset, len| Piece {
            segment,
            offset,
            len,
        };
        assert_eq!(m.map_range(0, 10), vec![p(0, 0, 10)]);
        assert_eq!(m.map_range(3, 4), vec![p(0, 3, 4)]);
        assert_eq!(m.map_range(9, 2), vec![p(0, 9, 1), p(2, 0, 1)]);
        assert_eq!(m.map_range(10, 20), vec![p(2, 0, 20)]);
        assert_eq!(
            m.map_range(5, 56),
            vec![p(0, 5, 5), p(2, 0, 20), p(3, 0, 1), p(4, 0, 30)]
        );
        assert_eq!(
            m.map_range(29, 3),
            vec![p(2, 19, 1), p(3, 0, 1), p(4, 0, 1)]
        );
        assert_eq!(m.map_range(60, 1), vec![p(4, 29, 1)]);
        assert_eq!(m.map_range(61, 0), vec![]);
        assert_eq!(m.map_range(20, 0), vec![]);
        // Every range of every length maps to pieces that tile it exactly.
        for off in 0..=61u64 {
            for len in 0..=(61 - off) {
                let pieces = m.map_range(off, len);
                assert_eq!(pieces.iter().map(|p| p.len).sum::<u64>(), len);
                assert!(pieces.iter().all(|p| p.len > 0));
                let mut pos = off;
                for pc in pieces {
                    let start = if pc.segment == 0 {
                        0
                    } else {
                        m.ends[pc.segment - 1]
                    };
                    assert_eq!(start + pc.offset, pos);
                    assert!(start + pc.offset + pc.len <= m.ends[pc.segment]);
                    pos += pc.len;
                }
            }
        }
    }
}

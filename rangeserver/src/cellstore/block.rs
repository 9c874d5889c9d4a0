//! Block framing shared by data, index and bloom blocks (a checksummed fixed header, then the
//! payload), varints, and the decoded form of a data block.

use common::codec;

use crate::error::{Error, Result};

/// Length of the fixed block header.
pub(crate) const HEADER_LEN: usize = 28;
pub(crate) const MAGIC_DATA: [u8; 4] = *b"CSDB";
pub(crate) const MAGIC_INDEX: [u8; 4] = *b"CSIX";
pub(crate) const MAGIC_BLOOM: [u8; 4] = *b"CSBF";
pub(crate) const COMPRESSION_NONE: u8 = 0;
pub(crate) const COMPRESSION_LZ4: u8 = 1;
/// Every this many entries a data block stores a full key (a restart point).
pub(crate) const RESTART_INTERVAL: u32 = 16;

pub(crate) use common::codec::{get_varint, get_varint32, put_varint};
pub(crate) use common::key_tail::{TAIL_LEN, decode_tail, encode_tail};

/// The little-endian `u32` at `buf[at..]`. Callers read fixed offsets of a block or trailer
/// whose length they checked first, so the bytes are always there.
pub(crate) fn read_u32(buf: &[u8], at: usize) -> u32 {
    codec::le_u32(buf, at).expect("a length-checked buffer")
}

/// The little-endian `u64` at `buf[at..]`; as for [`read_u32`], the caller checked the length.
pub(crate) fn read_u64(buf: &[u8], at: usize) -> u64 {
    codec::le_u64(buf, at).expect("a length-checked buffer")
}

pub(crate) fn corrupt(file: &str, offset: u64, msg: impl Into<String>) -> Error {
    Error::Corrupt {
        file: file.to_string(),
        offset,
        msg: msg.into(),
    }
}

/// Frames `payload` as a block into `out` (cleared first): header, then the payload, lz4-compressed
/// when `compress` is set and compression shrinks it.
pub(crate) fn encode_block(
    out: &mut Vec<u8>,
    magic: [u8; 4],
    compress: bool,
    entry_count: u32,
    payload: &[u8],
) {
    out.clear();
    out.resize(HEADER_LEN, 0);
    let mut compression = COMPRESSION_NONE;
    if compress && !payload.is_empty() {
        let max = lz4_flex::block::get_maximum_output_size(payload.len());
        out.resize(HEADER_LEN + max, 0);
        match lz4_flex::block::compress_into(payload, &mut out[HEADER_LEN..]) {
            Ok(n) if n < payload.len() => {
                out.truncate(HEADER_LEN + n);
                compression = COMPRESSION_LZ4;
            }
            _ => out.truncate(HEADER_LEN),
        }
    }
    if compression == COMPRESSION_NONE {
        out.extend_from_slice(payload);
    }
    let stored_len = (out.len() - HEADER_LEN) as u32;
    let payload_crc = crc32c::crc32c(&out[HEADER_LEN..]);
    let h = &mut out[..HEADER_LEN];
    h[0..4].copy_from_slice(&magic);
    h[4] = compression;
    h[5..8].fill(0);
    h[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[12..16].copy_from_slice(&stored_len.to_le_bytes());
    h[16..20].copy_from_slice(&entry_count.to_le_bytes());
    h[20..24].copy_from_slice(&payload_crc.to_le_bytes());
    let header_crc = crc32c::crc32c(&h[..24]);
    h[24..28].copy_from_slice(&header_crc.to_le_bytes());
}

/// Verifies and unpacks a whole stored block read from `file` at `offset`: returns its entry count
/// and uncompressed payload.
pub(crate) fn decode_block(
    file: &str,
    offset: u64,
    mut buf: Vec<u8>,
    magic: [u8; 4],
) -> Result<(u32, Vec<u8>)> {
    if buf.len() < HEADER_LEN {
        return Err(corrupt(
            file,
            offset,
            format!("block of {} bytes is shorter than its header", buf.len()),
        ));
    }
    let h = &buf[..HEADER_LEN];
    if crc32c::crc32c(&h[..24]) != read_u32(h, 24) {
        return Err(Error::Checksum {
            file: file.to_string(),
            offset,
            what: "block header".into(),
        });
    }
    if h[0..4] != magic {
        return Err(corrupt(
            file,
            offset,
            format!(
                "block magic {:?}, expected {:?}",
                String::from_utf8_lossy(&h[0..4]),
                String::from_utf8_lossy(&magic)
            ),
        ));
    }
    let compression = h[4];
    let uncompressed_len = read_u32(h, 8) as usize;
    let stored_len = read_u32(h, 12) as usize;
    let entry_count = read_u32(h, 16);
    let payload_crc = read_u32(h, 20);
    if stored_len != buf.len() - HEADER_LEN {
        return Err(corrupt(
            file,
            offset,
            format!(
                "block header says {stored_len} stored bytes, index says {}",
                buf.len() - HEADER_LEN
            ),
        ));
    }
    if crc32c::crc32c(&buf[HEADER_LEN..]) != payload_crc {
        return Err(Error::Checksum {
            file: file.to_string(),
            offset,
            what: "block payload".into(),
        });
    }
    match compression {
        COMPRESSION_NONE => {
            if uncompressed_len != stored_len {
                return Err(corrupt(
                    file,
                    offset,
                    "uncompressed block with differing lengths",
                ));
            }
            buf.drain(..HEADER_LEN);
            Ok((entry_count, buf))
        }
        COMPRESSION_LZ4 => {
            // The header's length sizes the allocation, so it must be one lz4 can produce
            // from the stored bytes (found by fuzz target cellstore_block: a 4 GiB claim).
            if uncompressed_len > lz4_max_expansion(stored_len) {
                return Err(corrupt(
                    file,
                    offset,
                    format!(
                        "lz4 block claims {uncompressed_len} bytes from {stored_len}, more than lz4 expands to"
                    ),
                ));
            }
            // Into uninitialised capacity (zeroing 64 KiB first was 8% of a scan from files);
            // the decoder is bounds-checked against it (`checked-decode`).
            match lz4_flex::block::decompress(&buf[HEADER_LEN..], uncompressed_len) {
                Ok(out) if out.len() == uncompressed_len => Ok((entry_count, out)),
                Ok(out) => Err(corrupt(
                    file,
                    offset,
                    format!(
                        "lz4 block decompressed to {} bytes, expected {uncompressed_len}",
                        out.len()
                    ),
                )),
                Err(e) => Err(corrupt(file, offset, format!("lz4: {e}"))),
            }
        }
        c => Err(corrupt(
            file,
            offset,
            format!("unknown compression type {c}"),
        )),
    }
}

/// The most bytes an lz4 block of `stored_len` bytes can decompress to: one length byte stands
/// for at most 255 bytes of a match.
pub(crate) fn lz4_max_expansion(stored_len: usize) -> usize {
    stored_len.saturating_mul(255).saturating_add(16)
}

/// A verified, decompressed data block: entries, then the restart array, then its count.
/// `tails` tells the layout of its entries: v1 (every key stored whole but for the shared
/// prefix) or v2 (entries may store their timestamp and revision as deltas, [`decode_entry`]).
///
/// Parsing also builds the block's restart search table: the bytes every restart key shares
/// (the common prefix of the first and last, since they are sorted) and, per restart point,
/// the next 8 bytes of its key as a big-endian `u64` (zero-padded). A seek binary-searches that
/// one small array instead of decoding an entry scattered over the block at every probe (a
/// cache miss each, when the block cache holds more than the CPU's caches); only restart keys
/// with the same 8 bytes as the target are compared whole.
#[derive(Debug)]
pub struct DataBlock {
    pub(crate) data: Vec<u8>,
    /// Where the entries end and the restart array starts.
    pub(crate) entries_end: usize,
    pub(crate) num_restarts: usize,
    /// Where in `data` the bytes shared by every restart key lie (the start of restart 0's key).
    shared_prefix: std::ops::Range<usize>,
    /// Per restart point: the 8 key bytes after the shared prefix, big-endian, zero-padded.
    restart_words: Vec<u64>,
    /// The v2 entry layout (format version 2 and later).
    pub(crate) tails: bool,
}

impl DataBlock {
    /// Checks the restart array of a payload that passed its checksum.
    pub(crate) fn parse(
        data: Vec<u8>,
        entry_count: u32,
        tails: bool,
        file: &str,
        offset: u64,
    ) -> Result<Self> {
        let bad = |msg: &str| corrupt(file, offset, format!("data block: {msg}"));
        if data.len() < 4 {
            return Err(bad("too short for a restart count"));
        }
        let num_restarts = read_u32(&data, data.len() - 4) as usize;
        let entries_end = num_restarts
            .checked_mul(4)
            .and_then(|n| (data.len() - 4).checked_sub(n))
            .ok_or_else(|| bad("restart array longer than the block"))?;
        let expected = entry_count.div_ceil(RESTART_INTERVAL) as usize;
        if entry_count == 0 || num_restarts != expected {
            return Err(bad("restart count does not match the entry count"));
        }
        let mut prev = 0usize;
        for i in 0..num_restarts {
            let r = read_u32(&data, entries_end + 4 * i) as usize;
            if (i == 0 && r != 0) || (i > 0 && r <= prev) || r >= entries_end {
                return Err(bad("restart offsets out of order or out of range"));
            }
            prev = r;
        }
        let mut b = Self {
            data,
            entries_end,
            num_restarts,
            shared_prefix: 0..0,
            restart_words: Vec::new(),
            tails,
        };
        let (shared, words) = {
            let key = |i| {
                b.restart_key(i)
                    .ok_or_else(|| bad("bad entry at a restart point"))
            };
            let (first, last) = (key(0)?, key(num_restarts - 1)?);
            let shared = first.iter().zip(last).take_while(|(a, b)| a == b).count();
            let mut words = Vec::with_capacity(num_restarts);
            for i in 0..num_restarts {
                let k = key(i)?;
                if k.len() < shared || k[..shared] != first[..shared] {
                    return Err(bad("restart keys out of order"));
                }
                words.push(common::key::prefix_word(&k[shared..]));
            }
            (shared, words)
        };
        if words.windows(2).any(|w| w[0] > w[1]) {
            return Err(bad("restart keys out of order"));
        }
        let at = decode_entry(&b.data, 0, entries_end, tails)
            .expect("restart 0 decoded above")
            .unshared_start;
        b.shared_prefix = at..at + shared;
        b.restart_words = words;
        Ok(b)
    }

    /// Asks the CPU to bring in what a seek in this block reads before its first entry: the
    /// restart words, the restart offsets at the block's end and the shared prefix. A seek's
    /// binary search then waits for one memory access instead of a chain of dependent ones (a
    /// block met by a seek is seldom in the CPU's caches when the block cache is large).
    /// In a block of many restart points (small cells) only the words the search's first
    /// three steps read and none of the offsets are asked for, so that a seek asks for a few
    /// lines, not every line of a large table.
    pub(crate) fn prefetch_search(&self) {
        let words = &self.restart_words;
        if words.len() <= PREFETCH_ALL_WORDS {
            prefetch_lines(words);
            prefetch_lines(&self.data[self.entries_end..]);
        } else {
            for i in 1..8 {
                prefetch_lines(&words[i * words.len() / 8..][..1]);
            }
        }
        let prefix =
            self.shared_prefix.start..self.shared_prefix.end.min(self.shared_prefix.start + 64);
        prefetch_lines(&self.data[prefix]);
    }

    pub(crate) fn restart(&self, i: usize) -> usize {
        read_u32(&self.data, self.entries_end + 4 * i) as usize
    }

    /// The key stored at restart point `i` (restart entries share nothing with the one
    /// before and store their key whole); `None` if the entry is damaged.
    fn restart_key(&self, i: usize) -> Option<&[u8]> {
        match decode_entry(&self.data, self.restart(i), self.entries_end, self.tails) {
            Some(e) if e.shared == 0 && e.tail.is_none() => {
                Some(&self.data[e.unshared_start..e.unshared_start + e.unshared_len])
            }
            _ => None,
        }
    }

    /// How many restart keys are below `target`: a seek for it starts decoding at the restart
    /// point before that many (the last restart key below it).
    pub(crate) fn restarts_below(&self, target: &[u8]) -> usize {
        let prefix = &self.data[self.shared_prefix.clone()];
        let p = prefix.len();
        if p > 0 {
            let n = p.min(target.len());
            match target[..n].cmp(&prefix[..n]) {
                std::cmp::Ordering::Less => return 0,
                std::cmp::Ordering::Greater => return self.num_restarts,
                // A target that is a proper prefix of the shared bytes is below every key.
                std::cmp::Ordering::Equal if n < p => return 0,
                std::cmp::Ordering::Equal => {}
            }
        }
        let t = common::key::prefix_word(&target[p..]);
        // Words are monotone in the keys: a smaller word means a smaller key, a larger word a
        // larger one; equal words need the whole keys.
        let lo = self.restart_words.partition_point(|&w| w < t);
        let hi = lo + self.restart_words[lo..].partition_point(|&w| w == t);
        let (mut lo, mut hi) = (lo, hi);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let k = self.restart_key(mid).expect("checked by parse");
            if common::key::bytes_cmp(k, target).is_lt() {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Size charged to the block cache.
    pub(crate) fn weight(&self) -> u64 {
        (self.data.len() + 8 * self.restart_words.len()).max(1) as u64
    }
}

/// Restart points up to which [`DataBlock::prefetch_search`] asks for the whole search table
/// (8 cache lines of words, 4 of offsets).
const PREFETCH_ALL_WORDS: usize = 64;

/// Prefetches the cache lines of `s` (a hint: no effect on what the program computes).
fn prefetch_lines<T>(s: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let start = s.as_ptr().cast::<i8>();
        let len = std::mem::size_of_val(s);
        let mut off = 0;
        while off < len {
            // SAFETY: a prefetch reads nothing the program sees and cannot fault; the address
            // lies inside `s`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.add(off)) };
            off += 64;
        }
        if len > 0 {
            // The last line, when `s` starts in the middle of one.
            // SAFETY: as above, the last byte of `s`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.add(len - 1)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = s;
}

/// One decoded entry header: where its pieces lie in the block.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    pub shared: usize,
    pub unshared_start: usize,
    pub unshared_len: usize,
    /// v2 entries storing their key's tail as deltas ([`decode_tail`]): the key is the first
    /// `shared` bytes of the previous key, the unshared bytes, then that tail. `None`: the
    /// unshared bytes end the key.
    pub tail: Option<(u64, u64)>,
    pub value_start: usize,
    pub value_len: usize,
    pub next: usize,
}

/// Decodes the entry at `pos` of `data[..end]` in the v1 layout or, with `tails`, the v2 one;
/// `None` if it does not fit.
#[inline]
pub(crate) fn decode_entry(data: &[u8], pos: usize, end: usize, tails: bool) -> Option<Entry> {
    let d = &data[..end];
    let mut p = pos;
    let shared = get_varint32(d, &mut p)? as usize;
    let mut unshared_len = get_varint32(d, &mut p)? as usize;
    let value_len = get_varint32(d, &mut p)? as usize;
    let unshared_start = p;
    let mut value_start = unshared_start.checked_add(unshared_len)?;
    let mut tail = None;
    if tails {
        // v2: the unshared length's low bit is 1 for a key stored whole.
        let whole = unshared_len & 1 == 1;
        unshared_len >>= 1;
        value_start = unshared_start + unshared_len;
        if !whole {
            let mut q = value_start;
            let rev = get_varint(d, &mut q)?;
            let ts = get_varint(d, &mut q)?;
            tail = Some((rev, ts));
            value_start = q;
        }
    }
    let next = value_start.checked_add(value_len)?;
    if next > end {
        return None;
    }
    Some(Entry {
        shared,
        unshared_start,
        unshared_len,
        tail,
        value_start,
        value_len,
        next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A data block payload holding `keys` (sorted) with empty values, prefix-compressed with a
    /// restart point every `RESTART_INTERVAL` entries, as the writer lays it out.
    fn payload(keys: &[Vec<u8>]) -> Vec<u8> {
        let (mut out, mut restarts, mut prev): (Vec<u8>, Vec<u32>, &[u8]) =
            (Vec::new(), Vec::new(), &[]);
        for (i, k) in keys.iter().enumerate() {
            let shared = if (i as u32).is_multiple_of(RESTART_INTERVAL) {
                restarts.push(out.len() as u32);
                0
            } else {
                k.iter().zip(prev).take_while(|(a, b)| a == b).count()
            };
            put_varint(&mut out, shared as u64);
            put_varint(&mut out, (k.len() - shared) as u64);
            put_varint(&mut out, 0);
            out.extend_from_slice(&k[shared..]);
            prev = k;
        }
        for r in &restarts {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out.extend_from_slice(&(restarts.len() as u32).to_le_bytes());
        out
    }

    proptest! {
        /// The restart search table counts exactly the restart keys below any target: keys
        /// with long shared prefixes, equal 8-byte words, keys that are prefixes of others.
        #[test]
        fn restarts_below_counts_the_restart_keys_below_the_target(
            keys in proptest::collection::btree_set(
                proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(0u8)], 0..14)
                    .prop_map(|tail| [b"shared/".to_vec(), tail].concat()),
                1..200),
            targets in proptest::collection::vec(
                (any::<bool>(), proptest::collection::vec(
                    prop_oneof![Just(b'a'), Just(b'b'), Just(0u8), Just(b's'), Just(b'z')], 0..18))
                    .prop_map(|(p, t)| if p { [b"shared/".to_vec(), t].concat() } else { t }),
                1..40),
        ) {
            let keys: Vec<Vec<u8>> = keys.into_iter().collect();
            let b = DataBlock::parse(payload(&keys), keys.len() as u32, false, "/x", 0).unwrap();
            let restart_keys: Vec<&Vec<u8>> = keys.iter().step_by(RESTART_INTERVAL as usize).collect();
            let mut targets = targets;
            targets.extend(keys.iter().cloned());
            targets.push(b"shared".to_vec());
            for t in &targets {
                let want = restart_keys.iter().filter(|k| k.as_slice() < t.as_slice()).count();
                prop_assert_eq!(b.restarts_below(t), want, "target {:?}", t);
            }
        }

        /// Arbitrary payloads either fail to parse or decode without panicking.
        #[test]
        fn parse_and_decode_never_panic(
            data in proptest::collection::vec(any::<u8>(), 0..200),
            count in 0u32..40,
            tails in any::<bool>(),
        ) {
            if let Ok(b) = DataBlock::parse(data, count, tails, "/x", 0) {
                for i in 0..b.num_restarts {
                    let _ = decode_entry(&b.data, b.restart(i), b.entries_end, tails);
                }
                let mut pos = 0;
                while let Some(e) = decode_entry(&b.data, pos, b.entries_end, tails) {
                    pos = e.next;
                }
            }
        }

        #[test]
        fn varint_roundtrip(v in any::<u32>()) {
            let mut buf = Vec::new();
            put_varint(&mut buf, u64::from(v));
            let mut pos = 0;
            prop_assert_eq!(get_varint32(&buf, &mut pos), Some(v));
            prop_assert_eq!(pos, buf.len());
        }

        #[test]
        fn decode_block_never_panics(data in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = decode_block("/x", 0, data, MAGIC_DATA);
        }
    }

    #[test]
    fn lz4_block_claiming_more_than_lz4_expands_to_is_refused_before_allocating() {
        let payload = vec![7u8; 100_000];
        let mut out = Vec::new();
        encode_block(&mut out, MAGIC_DATA, true, 1, &payload);
        assert_eq!(out[4], COMPRESSION_LZ4);
        let stored = out.len() - HEADER_LEN;
        assert!(
            payload.len() <= lz4_max_expansion(stored),
            "a real block is within the bound"
        );
        assert!(decode_block("/x", 0, out.clone(), MAGIC_DATA).is_ok());
        // A header (with a good checksum) claiming 4 GiB.
        out[8..12].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
        let crc = crc32c::crc32c(&out[..24]);
        out[24..28].copy_from_slice(&crc.to_le_bytes());
        match decode_block("/x", 0, out, MAGIC_DATA) {
            Err(Error::Corrupt { msg, .. }) => {
                assert!(msg.contains("more than lz4 expands to"), "{msg}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn blocks_roundtrip_with_and_without_compression() {
        let payload: Vec<u8> = b"abcabcabcabcabcabcabcabcabcabcabc".repeat(10);
        for compress in [false, true] {
            let mut out = Vec::new();
            encode_block(&mut out, MAGIC_INDEX, compress, 7, &payload);
            assert_eq!(
                out[4],
                if compress {
                    COMPRESSION_LZ4
                } else {
                    COMPRESSION_NONE
                }
            );
            let (n, p) = decode_block("/x", 0, out, MAGIC_INDEX).unwrap();
            assert_eq!((n, p), (7, payload.clone()));
        }
        // Incompressible data is stored raw even when compression is asked for.
        let noise: Vec<u8> = (0..64u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut out = Vec::new();
        encode_block(&mut out, MAGIC_DATA, true, 1, &noise);
        assert_eq!(out[4], COMPRESSION_NONE);
    }
}

//! Bloom filters of cell stores: XXH64 with double hashing over a bit array.
//!
//! Items are encoded key prefixes: a row is its escaped row plus terminator
//! (`common::key::row_start`), a cell its escaped row, family and qualifier (`cell_start`).
//! The hash function is part of the file format: changing it breaks old files.

use common::{BloomFilterMode, BloomFilterSpec};

use super::block::{MAGIC_BLOOM, read_u64};
use crate::error::{Error, Result};

/// Length of the bloom payload header before the bit array.
pub(crate) const BLOOM_HEADER_LEN: usize = 24;
/// Upper bound on the size of a filter (2^32 bits = 512 MiB).
const MAX_BITS: u64 = 1 << 32;
const MAX_HASHES: u32 = 32;

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

#[inline]
fn round(acc: u64, input: u64) -> u64 {
    acc.wrapping_add(input.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

#[inline]
fn merge_round(acc: u64, val: u64) -> u64 {
    (acc ^ round(0, val)).wrapping_mul(P1).wrapping_add(P4)
}

/// XXH64 of `data` with `seed` (the reference algorithm by Yann Collet).
pub fn xxh64(data: &[u8], seed: u64) -> u64 {
    let len = data.len();
    let mut p = 0;
    let r64 = |at: usize| read_u64(data, at);
    let mut h = if len >= 32 {
        let mut v1 = seed.wrapping_add(P1).wrapping_add(P2);
        let mut v2 = seed.wrapping_add(P2);
        let mut v3 = seed;
        let mut v4 = seed.wrapping_sub(P1);
        while p + 32 <= len {
            v1 = round(v1, r64(p));
            v2 = round(v2, r64(p + 8));
            v3 = round(v3, r64(p + 16));
            v4 = round(v4, r64(p + 24));
            p += 32;
        }
        let mut h = v1
            .rotate_left(1)
            .wrapping_add(v2.rotate_left(7))
            .wrapping_add(v3.rotate_left(12))
            .wrapping_add(v4.rotate_left(18));
        h = merge_round(h, v1);
        h = merge_round(h, v2);
        h = merge_round(h, v3);
        merge_round(h, v4)
    } else {
        seed.wrapping_add(P5)
    };
    h = h.wrapping_add(len as u64);
    while p + 8 <= len {
        h ^= round(0, r64(p));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        p += 8;
    }
    if p + 4 <= len {
        let k = u64::from(u32::from_le_bytes(
            data[p..p + 4].try_into().expect("4 bytes"),
        ));
        h ^= k.wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        p += 4;
    }
    while p < len {
        h ^= u64::from(data[p]).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
        p += 1;
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

/// The hash a filter stores for an item.
#[inline]
pub(crate) fn item_hash(item: &[u8]) -> u64 {
    xxh64(item, 0)
}

pub(crate) fn mode_to_u8(m: BloomFilterMode) -> u8 {
    match m {
        BloomFilterMode::None => 0,
        BloomFilterMode::Rows => 1,
        BloomFilterMode::RowsCols => 2,
    }
}

pub(crate) fn mode_from_u8(b: u8) -> Option<BloomFilterMode> {
    Some(match b {
        0 => BloomFilterMode::None,
        1 => BloomFilterMode::Rows,
        2 => BloomFilterMode::RowsCols,
        _ => return None,
    })
}

/// Checks a spec before any file is written.
pub(crate) fn validate_spec(spec: &BloomFilterSpec) -> std::result::Result<(), String> {
    if let Some(b) = spec.bits_per_item {
        if !(b.is_finite() && b > 0.0 && b <= 1024.0) {
            return Err(format!("bloom bits_per_item {b} is not in (0, 1024]"));
        }
    } else if !(spec.false_positive > 0.0 && spec.false_positive < 1.0) {
        return Err(format!(
            "bloom false_positive {} is not in (0, 1)",
            spec.false_positive
        ));
    }
    if let Some(k) = spec.num_hashes
        && !(1..=MAX_HASHES).contains(&k)
    {
        return Err(format!("bloom num_hashes {k} is not in 1..={MAX_HASHES}"));
    }
    Ok(())
}

/// Builds the bloom block payload for `hashes` (one per distinct item).
pub(crate) fn build_payload(spec: &BloomFilterSpec, hashes: &[u64]) -> Vec<u8> {
    let n = hashes.len() as u64;
    let (num_bits, k) = if n == 0 {
        (0u64, spec.num_hashes.unwrap_or(1))
    } else {
        let bits_per_item = spec.bits_per_item.unwrap_or_else(|| {
            let ln2 = std::f64::consts::LN_2;
            -spec.false_positive.ln() / (ln2 * ln2)
        });
        let bits = ((n as f64) * bits_per_item).ceil() as u64;
        let bits = bits.clamp(64, MAX_BITS).div_ceil(8) * 8;
        let k = spec.num_hashes.unwrap_or_else(|| {
            ((bits as f64 / n as f64) * std::f64::consts::LN_2)
                .round()
                .clamp(1.0, MAX_HASHES as f64) as u32
        });
        (bits, k)
    };
    let mut out = vec![0u8; BLOOM_HEADER_LEN + (num_bits / 8) as usize];
    out[0] = mode_to_u8(spec.mode);
    out[1] = k as u8;
    out[8..16].copy_from_slice(&n.to_le_bytes());
    out[16..24].copy_from_slice(&num_bits.to_le_bytes());
    if num_bits > 0 {
        let bits = &mut out[BLOOM_HEADER_LEN..];
        for &h in hashes {
            for pos in probes(h, k, num_bits) {
                bits[(pos >> 3) as usize] |= 1 << (pos & 7);
            }
        }
    }
    out
}

/// The `k` bit positions of hash `h` in a filter of `m` bits (Kirsch-Mitzenmacher double hashing).
#[inline]
fn probes(h: u64, k: u32, m: u64) -> impl Iterator<Item = u64> {
    let delta = h.rotate_left(32) | 1;
    (0..u64::from(k)).map(move |i| h.wrapping_add(i.wrapping_mul(delta)) % m)
}

/// A filter loaded from a cell store.
#[derive(Debug)]
pub(crate) struct Bloom {
    pub mode: BloomFilterMode,
    k: u32,
    num_bits: u64,
    bits: Vec<u8>,
}

impl Bloom {
    /// Bytes of its bit array.
    pub fn memory_bytes(&self) -> usize {
        self.bits.capacity()
    }

    /// Parses a verified bloom payload.
    pub(crate) fn parse(mut payload: Vec<u8>, file: &str, offset: u64) -> Result<Self> {
        let bad = |msg: String| Error::Corrupt {
            file: file.to_string(),
            offset,
            msg: format!(
                "bloom block ({:?}): {msg}",
                String::from_utf8_lossy(&MAGIC_BLOOM)
            ),
        };
        if payload.len() < BLOOM_HEADER_LEN {
            return Err(bad("too short".into()));
        }
        let mode =
            mode_from_u8(payload[0]).ok_or_else(|| bad(format!("unknown mode {}", payload[0])))?;
        let k = u32::from(payload[1]);
        let num_bits = read_u64(&payload, 16);
        if !(1..=MAX_HASHES).contains(&k) {
            return Err(bad(format!("num_hashes {k}")));
        }
        if !num_bits.is_multiple_of(8)
            || num_bits > MAX_BITS
            || (num_bits / 8) as usize != payload.len() - BLOOM_HEADER_LEN
        {
            return Err(bad(format!(
                "{num_bits} bits in {} bytes",
                payload.len() - BLOOM_HEADER_LEN
            )));
        }
        payload.drain(..BLOOM_HEADER_LEN);
        Ok(Self {
            mode,
            k,
            num_bits,
            bits: payload,
        })
    }

    /// False only if `item` was certainly not added.
    pub(crate) fn may_contain(&self, item: &[u8]) -> bool {
        if self.num_bits == 0 {
            return false;
        }
        let h = item_hash(item);
        probes(h, self.k, self.num_bits)
            .all(|pos| self.bits[(pos >> 3) as usize] & (1 << (pos & 7)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::xxh64;

    #[test]
    fn xxh64_reference_vectors() {
        assert_eq!(xxh64(b"", 0), 0xEF46_DB37_51D8_E999);
        assert_eq!(xxh64(b"a", 0), 0xD24E_C4F1_A98C_6E5B);
        assert_eq!(xxh64(b"abc", 0), 0x44BC_2CF5_AD77_0999);
        assert_eq!(
            xxh64(b"Nobody inspects the spammish repetition", 0),
            0xFBCE_A83C_8A37_8BF1
        );
    }
}

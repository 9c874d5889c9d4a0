//! The small binary codecs every format shares: LEB128 varints and little-endian integers.
//!
//! One copy for the commit log, cell stores, packed cells on the wire, Hyperspace's log and
//! the object-store manifests, so that a bound check fixed here is fixed everywhere. Readers
//! return `None` on truncated or over-long input and never panic.

/// Appends `v` as an unsigned LEB128 varint (7 bits per byte, low bits first).
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Encoded size of `v` as an LEB128 varint (1..=10).
#[inline]
pub fn varint_len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Reads an LEB128 varint of up to 64 bits at `*pos`, advancing `*pos` past it; `None` (and
/// `*pos` unspecified) if the input ends first or the varint is longer than 10 bytes or holds
/// more than 64 bits.
#[inline]
pub fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if i == 9 && b > 0x01 {
            return None;
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Reads a varint of at most 32 bits at `*pos`, advancing it only on success; `None` if
/// truncated, longer than 5 bytes, or over `u32::MAX`.
#[inline]
pub fn get_varint32(buf: &[u8], pos: &mut usize) -> Option<u32> {
    let b = *buf.get(*pos)?;
    if b < 0x80 {
        *pos += 1;
        return Some(u32::from(b));
    }
    let mut v: u32 = u32::from(b & 0x7F);
    let mut shift = 7;
    let mut p = *pos + 1;
    loop {
        let b = *buf.get(p)?;
        p += 1;
        if shift == 28 && b > 0x0F {
            return None;
        }
        v |= u32::from(b & 0x7F) << shift;
        if b < 0x80 {
            *pos = p;
            return Some(v);
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
    }
}

/// The little-endian `u16` at `buf[at..at + 2]`; `None` if `buf` is shorter.
#[inline]
pub fn le_u16(buf: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        buf.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// The little-endian `u32` at `buf[at..at + 4]`; `None` if `buf` is shorter.
#[inline]
pub fn le_u32(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        buf.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// The little-endian `u64` at `buf[at..at + 8]`; `None` if `buf` is shorter.
#[inline]
pub fn le_u64(buf: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        buf.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn varint_round_trip(v in any::<u64>()) {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            prop_assert_eq!(out.len(), varint_len(v));
            let mut pos = 0;
            prop_assert_eq!(get_varint(&out, &mut pos), Some(v));
            prop_assert_eq!(pos, out.len());
            // Every strict prefix is truncated, never a different value.
            for cut in 0..out.len() {
                let mut pos = 0;
                prop_assert_eq!(get_varint(&out[..cut], &mut pos), None);
            }
        }

        #[test]
        fn varint32_round_trip(v in any::<u32>()) {
            let mut out = Vec::new();
            put_varint(&mut out, u64::from(v));
            let mut pos = 0;
            prop_assert_eq!(get_varint32(&out, &mut pos), Some(v));
            prop_assert_eq!(pos, out.len());
        }

        #[test]
        fn varint_readers_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..16), at in 0usize..20) {
            let mut pos = at.min(buf.len());
            let _ = get_varint(&buf, &mut pos);
            let mut pos = at.min(buf.len());
            let _ = get_varint32(&buf, &mut pos);
            let _ = (le_u16(&buf, at), le_u32(&buf, at), le_u64(&buf, at));
        }
    }

    #[test]
    fn over_long_and_overflowing_varints_are_refused() {
        // 11 continuation bytes: longer than any u64.
        let mut pos = 0;
        assert_eq!(get_varint(&[0x80; 11], &mut pos), None);
        // Ten bytes whose last carries bits beyond 64.
        let mut bad = vec![0xFF; 9];
        bad.push(0x02);
        let mut pos = 0;
        assert_eq!(get_varint(&bad, &mut pos), None);
        let mut max = vec![0xFF; 9];
        max.push(0x01);
        let mut pos = 0;
        assert_eq!(get_varint(&max, &mut pos), Some(u64::MAX));
        // u32: a fifth byte over 0x0F overflows.
        let mut pos = 0;
        assert_eq!(
            get_varint32(&[0xFF, 0xFF, 0xFF, 0xFF, 0x10], &mut pos),
            None
        );
        assert_eq!(pos, 0);
    }

    #[test]
    fn little_endian_readers_check_bounds() {
        let b = [1u8, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(le_u16(&b, 0), Some(0x0201));
        assert_eq!(le_u32(&b, 4), Some(0x0807_0605));
        assert_eq!(le_u64(&b, 0), Some(0x0807_0605_0403_0201));
        assert_eq!(le_u32(&b, 5), None);
        assert_eq!(le_u64(&b, usize::MAX), None);
    }
}

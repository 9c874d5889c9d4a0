//! The tail of an encoded key (its timestamp and revision, `docs/formats/key.md`) coded as
//! differences from the previous key's: what cell stores (format v2) and commit-log entries
//! (block version 2) store in place of the 16 bytes, since neighbouring cells' revisions are
//! close and a timestamp the server assigned equals the revision.

/// The bytes at the end of every encoded key that are coded as deltas: the timestamp and the
/// revision, 8 bytes each, order-inverted big-endian.
pub const TAIL_LEN: usize = 16;

/// The zigzag code of a signed difference: small magnitudes, either sign, give small numbers.
#[inline]
pub fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

/// The difference a [`zigzag`] code stands for.
#[inline]
pub fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

/// The encoded-key tail of a v2 entry as its two varints: the revision as a difference from
/// the previous key's, the timestamp as a difference from this revision (low bit 0) or from the
/// previous timestamp (low bit 1), whichever is smaller. `prev` and `tail` are the 16 tail
/// bytes of the previous and this key. `None` when the timestamp's difference does not fit
/// (the entry is then stored whole).
#[inline]
pub fn encode_tail(prev: &[u8], tail: &[u8]) -> Option<(u64, u64)> {
    let word = |b: &[u8], at: usize| u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let (pt, pr, t, r) = (word(prev, 0), word(prev, 8), word(tail, 0), word(tail, 8));
    let rev = zigzag(r.wrapping_sub(pr) as i64);
    let from_rev = zigzag(t.wrapping_sub(r) as i64);
    let from_ts = zigzag(t.wrapping_sub(pt) as i64);
    let ts = if from_rev <= from_ts {
        from_rev.checked_mul(2)?
    } else {
        from_ts.checked_mul(2)? | 1
    };
    Some((rev, ts))
}

/// The 16 tail bytes [`encode_tail`] stood for, given the previous key's tail bytes.
#[inline]
pub fn decode_tail(prev: &[u8], rev: u64, ts: u64) -> [u8; TAIL_LEN] {
    let word = |b: &[u8], at: usize| u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let r = word(prev, 8).wrapping_add(unzigzag(rev) as u64);
    let base = if ts & 1 == 0 { r } else { word(prev, 0) };
    let t = base.wrapping_add(unzigzag(ts >> 1) as u64);
    let mut out = [0u8; TAIL_LEN];
    out[..8].copy_from_slice(&t.to_be_bytes());
    out[8..].copy_from_slice(&r.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any tail after any other comes back from its deltas, or is refused (stored whole)
        /// only when the timestamp's difference from both bases needs all 64 bits.
        #[test]
        fn tails_roundtrip(
            prev in proptest::array::uniform16(any::<u8>()),
            tail in proptest::array::uniform16(any::<u8>()),
            near in any::<bool>(),
            step in -3i64..1_000_000,
        ) {
            // Near: the timestamp is the revision, or close to the previous timestamp.
            let mut tail = tail;
            if near {
                let pr = u64::from_be_bytes(prev[8..].try_into().unwrap());
                let r = pr.wrapping_add(step as u64);
                tail[8..].copy_from_slice(&r.to_be_bytes());
                tail[..8].copy_from_slice(&r.to_be_bytes());
            }
            match encode_tail(&prev, &tail) {
                Some((rev, ts)) => {
                    prop_assert_eq!(decode_tail(&prev, rev, ts), tail);
                    if near {
                        prop_assert_eq!(ts, 0);
                        prop_assert!(rev < 1 << 21, "{} for a step of {}", rev, step);
                    }
                }
                None => prop_assert!(!near),
            }
        }

    }

    #[test]
    fn zigzag_round_trips_the_extremes() {
        for d in [0i64, 1, -1, 2, -2, i64::MAX, i64::MIN, 1 << 40, -(1 << 40)] {
            assert_eq!(unzigzag(zigzag(d)), d);
        }
        assert_eq!([zigzag(0), zigzag(-1), zigzag(1), zigzag(-2)], [0, 1, 2, 3]);
    }
}

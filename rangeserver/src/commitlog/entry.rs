//! One commit-log entry, the payload an apply logs: the table id, then its cells
//! (docs/formats/commitlog.md, "Entries"). Two layouts, told apart by the version of the block
//! that holds the entry ([`EntryLayout`]):
//!
//! ```text
//! v1: u32 LE table id | varint n | n x (varint key len | key | varint value len | value)
//! v2: u32 LE table id | varint n | n x (varint len << 1 | whole | key bytes
//!                                       | [varint rev | varint ts, unless whole]
//!                                       | varint value len | value)
//! ```
//!
//! A v2 cell that is not `whole` stores its key without the last 16 bytes (timestamp and
//! revision), which follow from the previous cell's ([`common::key_tail`]): the cells of a
//! batch have consecutive revisions and, unless the client set them, timestamps equal to them.

use std::ops::Range;

use common::codec::{get_varint, le_u32, put_varint};
use common::key_tail::{TAIL_LEN, decode_tail, encode_tail};

/// An encoded key and its value, borrowed from a decoded commit-log entry.
pub type LogCell<'a> = (&'a [u8], &'a [u8]);

/// How the cells of an entry are laid out; the version of the block holding it says which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryLayout {
    /// Block version 1: every key whole.
    V1,
    /// Block version 2: keys' timestamps and revisions as deltas.
    V2,
}

/// Builds one entry (layout v2) cell by cell. The cells' keys are kept whole beside the entry
/// and their values can be read back from it, through the spans [`EntryEncoder::push`]
/// returns, so the caches copy them from there.
pub struct EntryEncoder {
    buf: Vec<u8>,
    /// The pushed keys, whole, one after another.
    keys: Vec<u8>,
    /// The tail of the last key of at least [`TAIL_LEN`] bytes (zeros before any).
    prev_tail: [u8; TAIL_LEN],
}

/// Where one pushed cell's key lies in the encoder's keys and its value in the entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellSpan {
    pub key_start: usize,
    pub key_len: usize,
    pub value_start: usize,
    pub value_len: usize,
}

/// A finished entry and its cells' whole keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedEntry {
    /// The bytes to log.
    pub entry: Vec<u8>,
    /// The keys of the cells, whole, as [`CellSpan`]s name them.
    pub keys: Vec<u8>,
}

impl EntryEncoder {
    /// Starts the entry of `cells` cells of table `table_id`; `capacity` is a hint in bytes.
    pub fn new(table_id: u32, cells: usize, capacity: usize) -> Self {
        let mut buf = Vec::with_capacity(capacity);
        buf.extend_from_slice(&table_id.to_le_bytes());
        put_varint(&mut buf, cells as u64);
        Self {
            buf,
            keys: Vec::with_capacity(capacity.min(1 << 20) / 2),
            prev_tail: [0; TAIL_LEN],
        }
    }

    /// Appends one cell; the caller pushes exactly the number of cells given to `new`.
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> CellSpan {
        let key_start = self.keys.len();
        self.keys.extend_from_slice(key);
        let n = key.len();
        let tail = if n >= TAIL_LEN {
            let coded = encode_tail(&self.prev_tail, &key[n - TAIL_LEN..]);
            self.prev_tail.copy_from_slice(&key[n - TAIL_LEN..]);
            coded
        } else {
            None
        };
        match tail {
            Some((rev, ts)) => {
                put_varint(&mut self.buf, ((n - TAIL_LEN) as u64) << 1);
                self.buf.extend_from_slice(&key[..n - TAIL_LEN]);
                put_varint(&mut self.buf, rev);
                put_varint(&mut self.buf, ts);
            }
            None => {
                put_varint(&mut self.buf, ((n as u64) << 1) | 1);
                self.buf.extend_from_slice(key);
            }
        }
        put_varint(&mut self.buf, value.len() as u64);
        let value_start = self.buf.len();
        self.buf.extend_from_slice(value);
        CellSpan {
            key_start,
            key_len: n,
            value_start,
            value_len: value.len(),
        }
    }

    /// The finished entry, with its cells' keys.
    pub fn finish(self) -> EncodedEntry {
        EncodedEntry {
            entry: self.buf,
            keys: self.keys,
        }
    }
}

impl CellSpan {
    /// The cell's key and value in what the encoder produced.
    pub fn cell<'a>(&self, e: &'a EncodedEntry) -> LogCell<'a> {
        (
            &e.keys[self.key_start..self.key_start + self.key_len],
            &e.entry[self.value_start..self.value_start + self.value_len],
        )
    }
}

/// Encodes a whole entry at once (layout v2; the inverse of [`decode_log_entry`]).
pub fn encode_log_entry(table_id: u32, cells: &[LogCell<'_>]) -> Vec<u8> {
    let mut e = EntryEncoder::new(
        table_id,
        cells.len(),
        16 + cells
            .iter()
            .map(|(k, v)| k.len() + v.len() + 4)
            .sum::<usize>(),
    );
    for (k, v) in cells {
        e.push(k, v);
    }
    e.finish().entry
}

/// A decoded entry: its table and its cells, whose keys are rebuilt into one buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedEntry<'a> {
    pub table: u32,
    keys: Vec<u8>,
    cells: Vec<(Range<usize>, &'a [u8])>,
}

impl<'a> DecodedEntry<'a> {
    /// The cells in logged order.
    pub fn cells(&self) -> impl ExactSizeIterator<Item = LogCell<'_>> + '_ {
        self.cells.iter().map(|(k, v)| (&self.keys[k.clone()], *v))
    }

    /// How many cells the entry holds.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// True for an entry of no cells.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }
}

/// Splits a commit-log entry of `layout` into its table id and cells; `None` if it does not
/// parse (short, a length past the end, a delta-coded key with no bytes for its tail to follow,
/// or bytes left over). Never panics; memory is bounded by the entry's size.
pub fn decode_log_entry(entry: &[u8], layout: EntryLayout) -> Option<DecodedEntry<'_>> {
    let table = le_u32(entry, 0)?;
    let mut pos = 4;
    let n = get_varint(entry, &mut pos)? as usize;
    // Every cell takes at least two bytes, so the count is bounded by the entry's length.
    let mut cells = Vec::with_capacity(n.min(entry.len() / 2));
    let mut keys = Vec::with_capacity(entry.len().min(1 << 20));
    let mut prev_tail = [0u8; TAIL_LEN];
    for _ in 0..n {
        let field = get_varint(entry, &mut pos)?;
        let (kl, whole) = match layout {
            EntryLayout::V1 => (field, true),
            EntryLayout::V2 => (field >> 1, field & 1 == 1),
        };
        let kl = usize::try_from(kl).ok()?;
        let k = entry.get(pos..pos.checked_add(kl)?)?;
        pos += kl;
        let key_start = keys.len();
        keys.extend_from_slice(k);
        if whole {
            if layout == EntryLayout::V2 && kl >= TAIL_LEN {
                prev_tail.copy_from_slice(&k[kl - TAIL_LEN..]);
            }
        } else {
            let rev = get_varint(entry, &mut pos)?;
            let ts = get_varint(entry, &mut pos)?;
            prev_tail = decode_tail(&prev_tail, rev, ts);
            keys.extend_from_slice(&prev_tail);
        }
        let key_end = keys.len();
        let vl = usize::try_from(get_varint(entry, &mut pos)?).ok()?;
        let v = entry.get(pos..pos.checked_add(vl)?)?;
        pos += vl;
        cells.push((key_start..key_end, v));
    }
    (pos == entry.len()).then_some(DecodedEntry { table, keys, cells })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A v1 entry, as servers before block version 2 logged them.
    fn encode_v1(table_id: u32, cells: &[LogCell<'_>]) -> Vec<u8> {
        let mut out = table_id.to_le_bytes().to_vec();
        put_varint(&mut out, cells.len() as u64);
        for (k, v) in cells {
            put_varint(&mut out, k.len() as u64);
            out.extend_from_slice(k);
            put_varint(&mut out, v.len() as u64);
            out.extend_from_slice(v);
        }
        out
    }

    /// Owned cells: (key, value).
    type Cells = Vec<(Vec<u8>, Vec<u8>)>;

    fn decoded(entry: &[u8], layout: EntryLayout) -> Option<(u32, Cells)> {
        let d = decode_log_entry(entry, layout)?;
        let cells = d.cells().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        Some((d.table, cells))
    }

    #[test]
    fn bytes_are_the_documented_layout() {
        let e = encode_log_entry(7, &[(b"k1", b"v"), (b"", b"")]);
        assert_eq!(
            e,
            [7, 0, 0, 0, 2, 2 << 1 | 1, b'k', b'1', 1, b'v', 1, 0],
            "table id LE, count, then keys shorter than a tail whole, and values"
        );
        // Two keys with their timestamps equal to their revisions, one apart.
        let mut k1 = Vec::new();
        common::key::encode_parts(b"r", 1, b"", common::CellFlag::Insert, 100, 100, &mut k1);
        let mut k2 = Vec::new();
        common::key::encode_parts(b"s", 1, b"", common::CellFlag::Insert, 101, 101, &mut k2);
        let e = encode_log_entry(1, &[(&k1, b"a"), (&k2, b"b")]);
        let stem = k1.len() - TAIL_LEN;
        // The first tail is coded against zeros; the second is one revision on (zigzag -1 = 1:
        // revisions are stored inverted), its timestamp equal to it (0).
        let second = &e[e.len() - (1 + stem + 2 + 2)..];
        assert_eq!(second[0], (stem as u8) << 1);
        assert_eq!(&second[1..1 + stem], &k2[..stem]);
        assert_eq!(&second[1 + stem..], [1, 0, 1, b'b']);
        assert_eq!(
            decoded(&e, EntryLayout::V2),
            Some((1, vec![(k1, b"a".to_vec()), (k2, b"b".to_vec())]))
        );
    }

    #[test]
    fn v1_entries_still_decode() {
        let mut k = Vec::new();
        common::key::encode_parts(b"row", 2, b"q", common::CellFlag::Insert, 5, 9, &mut k);
        let cells: Vec<LogCell<'_>> = vec![(&k, b"value"), (b"short", b"")];
        let e = encode_v1(3, &cells);
        let (t, back) = decoded(&e, EntryLayout::V1).unwrap();
        assert_eq!(t, 3);
        assert_eq!(
            back,
            vec![
                (k.clone(), b"value".to_vec()),
                (b"short".to_vec(), Vec::new())
            ]
        );
    }

    #[test]
    fn trailing_or_missing_bytes_do_not_parse() {
        let e = encode_log_entry(1, &[(b"key", b"value")]);
        assert!(decode_log_entry(&e, EntryLayout::V2).is_some());
        let mut longer = e.clone();
        longer.push(0);
        assert_eq!(decode_log_entry(&longer, EntryLayout::V2), None);
        assert_eq!(decode_log_entry(&e[..e.len() - 1], EntryLayout::V2), None);
        assert_eq!(decode_log_entry(&e[..3], EntryLayout::V2), None);
    }

    #[test]
    fn spans_name_the_pushed_bytes() {
        let mut k = Vec::new();
        common::key::encode_parts(b"row", 1, b"", common::CellFlag::Insert, 1, 2, &mut k);
        let mut enc = EntryEncoder::new(3, 3, 0);
        let a = enc.push(b"first key", b"v1");
        let b = enc.push(b"k2", &[9; 200]);
        let c = enc.push(&k, b"v3");
        let entry = enc.finish();
        assert_eq!(a.cell(&entry), (&b"first key"[..], &b"v1"[..]));
        assert_eq!(b.cell(&entry), (&b"k2"[..], &[9u8; 200][..]));
        assert_eq!(c.cell(&entry), (k.as_slice(), &b"v3"[..]));
    }

    proptest! {
        #[test]
        fn round_trip(
            table in any::<u32>(),
            cells in prop::collection::vec(
                (prop::collection::vec(any::<u8>(), 0..300), prop::collection::vec(any::<u8>(), 0..300)),
                0..20,
            ),
        ) {
            let refs: Vec<LogCell<'_>> = cells.iter().map(|(k, v)| (k.as_slice(), v.as_slice())).collect();
            for (layout, entry) in [
                (EntryLayout::V2, encode_log_entry(table, &refs)),
                (EntryLayout::V1, encode_v1(table, &refs)),
            ] {
                let (t, back) = decoded(&entry, layout).expect("an encoded entry parses");
                prop_assert_eq!(t, table);
                prop_assert_eq!(&back, &cells);
            }
        }

        /// Real keys of a batch (consecutive revisions, timestamps set or not) round-trip.
        #[test]
        fn keys_of_a_batch_round_trip(
            base in any::<i64>(),
            cells in prop::collection::vec(
                (prop::collection::vec(any::<u8>(), 0..12), 1u8..4, prop::option::of(any::<i64>())),
                1..40,
            ),
        ) {
            let keys: Vec<Vec<u8>> = cells
                .iter()
                .enumerate()
                .map(|(i, (row, family, ts))| {
                    let rev = base.wrapping_add(i as i64);
                    let mut k = Vec::new();
                    common::key::encode_parts(
                        row, *family, b"q", common::CellFlag::Insert, ts.unwrap_or(rev), rev, &mut k,
                    );
                    k
                })
                .collect();
            let refs: Vec<LogCell<'_>> = keys.iter().map(|k| (k.as_slice(), &b"v"[..])).collect();
            let e = encode_log_entry(5, &refs);
            let (_, back) = decoded(&e, EntryLayout::V2).unwrap();
            let want: Vec<(Vec<u8>, Vec<u8>)> = keys.iter().map(|k| (k.clone(), b"v".to_vec())).collect();
            prop_assert_eq!(back, want);
        }

        #[test]
        fn never_panics_on_garbage(bytes in prop::collection::vec(any::<u8>(), 0..200), v2 in any::<bool>()) {
            let layout = if v2 { EntryLayout::V2 } else { EntryLayout::V1 };
            if let Some(d) = decode_log_entry(&bytes, layout) {
                // What parses is bounded by the input: at most 16 rebuilt bytes per cell.
                let held: usize = d.cells().map(|(k, v)| k.len() + v.len()).sum();
                prop_assert!(held <= bytes.len() + TAIL_LEN * d.len());
            }
        }

        #[test]
        fn never_panics_on_damaged_entries(
            cells in prop::collection::vec(
                (prop::collection::vec(any::<u8>(), 0..40), prop::collection::vec(any::<u8>(), 0..40)),
                1..6,
            ),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            cut in any::<prop::sample::Index>(),
        ) {
            let refs: Vec<LogCell<'_>> = cells.iter().map(|(k, v)| (k.as_slice(), v.as_slice())).collect();
            let mut entry = encode_log_entry(9, &refs);
            let i = at.index(entry.len());
            entry[i] = byte;
            entry.truncate(cut.index(entry.len() + 1));
            if let Some(d) = decode_log_entry(&entry, EntryLayout::V2) {
                let held: usize = d.cells().map(|(k, v)| k.len() + v.len()).sum();
                prop_assert!(held <= entry.len() + TAIL_LEN * d.len());
            }
        }
    }
}

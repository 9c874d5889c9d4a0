//! One commit-log entry, the payload an apply logs: the table id, then (key, value) pairs with
//! varint lengths (docs/formats/commitlog.md, "Entries").
//!
//! ```text
//! u32 LE table id | varint n | n x (varint key len | key | varint value len | value)
//! ```

use common::codec::{get_varint, le_u32, put_varint};

/// An encoded key and its value, borrowed from a commit-log entry.
pub type LogCell<'a> = (&'a [u8], &'a [u8]);

/// Builds one entry cell by cell. The cells' bytes can be read back from the finished entry
/// through the spans [`EntryEncoder::push`] returns, so the caches copy them from there.
pub struct EntryEncoder {
    buf: Vec<u8>,
}

/// Where one pushed cell's key and value lie in the entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellSpan {
    pub key_start: usize,
    pub key_len: usize,
    pub value_start: usize,
    pub value_len: usize,
}

impl EntryEncoder {
    /// Starts the entry of `cells` cells of table `table_id`; `capacity` is a hint in bytes.
    pub fn new(table_id: u32, cells: usize, capacity: usize) -> Self {
        let mut buf = Vec::with_capacity(capacity);
        buf.extend_from_slice(&table_id.to_le_bytes());
        put_varint(&mut buf, cells as u64);
        Self { buf }
    }

    /// Appends one cell; the caller pushes exactly the number of cells given to `new`.
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> CellSpan {
        put_varint(&mut self.buf, key.len() as u64);
        let key_start = self.buf.len();
        self.buf.extend_from_slice(key);
        put_varint(&mut self.buf, value.len() as u64);
        let value_start = self.buf.len();
        self.buf.extend_from_slice(value);
        CellSpan {
            key_start,
            key_len: key.len(),
            value_start,
            value_len: value.len(),
        }
    }

    /// The entry so far.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The finished entry.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

impl CellSpan {
    /// The cell's key and value in `entry`, the bytes the encoder produced.
    pub fn cell<'a>(&self, entry: &'a [u8]) -> LogCell<'a> {
        (
            &entry[self.key_start..self.key_start + self.key_len],
            &entry[self.value_start..self.value_start + self.value_len],
        )
    }
}

/// Encodes a whole entry at once (the inverse of [`decode_log_entry`]).
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
    e.finish()
}

/// Splits a commit-log entry into its table id and cells; `None` if it does not parse (short,
/// a length past the end, or bytes left over). Never panics.
pub fn decode_log_entry(entry: &[u8]) -> Option<(u32, Vec<LogCell<'_>>)> {
    let table = le_u32(entry, 0)?;
    let mut pos = 4;
    let n = get_varint(entry, &mut pos)? as usize;
    let mut cells = Vec::with_capacity(n.min(1 << 20));
    for _ in 0..n {
        let kl = get_varint(entry, &mut pos)? as usize;
        let k = entry.get(pos..pos.checked_add(kl)?)?;
        pos += kl;
        let vl = get_varint(entry, &mut pos)? as usize;
        let v = entry.get(pos..pos.checked_add(vl)?)?;
        pos += vl;
        cells.push((k, v));
    }
    (pos == entry.len()).then_some((table, cells))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bytes_are_the_documented_layout() {
        let e = encode_log_entry(7, &[(b"k1", b"v"), (b"", b"")]);
        assert_eq!(
            e,
            [7, 0, 0, 0, 2, 2, b'k', b'1', 1, b'v', 0, 0],
            "table id LE, count, then length-prefixed key and value"
        );
    }

    #[test]
    fn trailing_or_missing_bytes_do_not_parse() {
        let e = encode_log_entry(1, &[(b"key", b"value")]);
        assert!(decode_log_entry(&e).is_some());
        let mut longer = e.clone();
        longer.push(0);
        assert_eq!(decode_log_entry(&longer), None);
        assert_eq!(decode_log_entry(&e[..e.len() - 1]), None);
        assert_eq!(decode_log_entry(&e[..3]), None);
    }

    #[test]
    fn spans_name_the_pushed_bytes() {
        let mut enc = EntryEncoder::new(3, 2, 0);
        let a = enc.push(b"first key", b"v1");
        let b = enc.push(b"k2", &[9; 200]);
        let entry = enc.finish();
        assert_eq!(a.cell(&entry), (&b"first key"[..], &b"v1"[..]));
        assert_eq!(b.cell(&entry), (&b"k2"[..], &[9u8; 200][..]));
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
            let entry = encode_log_entry(table, &refs);
            let (t, back) = decode_log_entry(&entry).expect("an encoded entry parses");
            prop_assert_eq!(t, table);
            prop_assert_eq!(back, refs);
        }

        #[test]
        fn never_panics_on_garbage(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            if let Some((_, cells)) = decode_log_entry(&bytes) {
                // What parses lies inside the input, after the table id and the count.
                let held: usize = cells.iter().map(|(k, v)| k.len() + v.len()).sum();
                prop_assert!(held + 5 <= bytes.len());
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
            if let Some((_, back)) = decode_log_entry(&entry) {
                let held: usize = back.iter().map(|(k, v)| k.len() + v.len()).sum();
                prop_assert!(held + 5 <= entry.len());
            }
        }
    }
}

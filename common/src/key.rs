//! Cell keys and their serialized form, which sorts bytewise in ht's key order.
//!
//! Order (DESIGN.md section 1): row ascending, family id, qualifier ascending, flag (deletes before
//! inserts), timestamp newest first, revision newest first.
//!
//! Encoding, byte by byte (see docs/formats/key.md):
//! ```text
//! esc(row) 00 01 | family u8 | esc(qualifier) 00 01 | flag u8 | !ts (8, BE) | !rev (8, BE)
//! ```
//! `esc` writes every 0x00 byte as `00 FF`, so the terminator `00 01` sorts below any continuation
//! and a shorter row sorts before a longer one with the same prefix. Timestamps and revisions are
//! stored sign-flipped and inverted so that bigger values come first under plain `memcmp`.

use std::borrow::Cow;
use std::fmt;

/// Bytes after the qualifier terminator: flag, timestamp, revision.
pub const KEY_SUFFIX_LEN: usize = 1 + 8 + 8;
/// The family id of a row delete; user families are numbered from 1.
pub const DELETE_ROW_FAMILY: u8 = 0;

/// What a key means. The numeric values fix the sort order inside one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum CellFlag {
    /// Deletes every cell of the row with timestamp <= the delete's.
    DeleteRow = 0,
    /// Deletes every cell of the family in the row with timestamp <= the delete's.
    DeleteColumnFamily = 1,
    /// Deletes every version of the cell with timestamp <= the delete's.
    DeleteCell = 2,
    /// Deletes exactly the version with the delete's timestamp.
    DeleteCellVersion = 3,
    /// A value.
    Insert = 255,
}

impl CellFlag {
    /// The flag for a stored byte, or `None` for a byte no flag uses.
    pub fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            0 => Self::DeleteRow,
            1 => Self::DeleteColumnFamily,
            2 => Self::DeleteCell,
            3 => Self::DeleteCellVersion,
            255 => Self::Insert,
            _ => return None,
        })
    }

    /// True for the four delete kinds.
    pub fn is_delete(self) -> bool {
        self != Self::Insert
    }

    /// Hypertable's spelling, as in TSV dumps (`DELETE_ROW`, ...); `INSERT` for inserts.
    pub fn name(self) -> &'static str {
        match self {
            Self::DeleteRow => "DELETE_ROW",
            Self::DeleteColumnFamily => "DELETE_COLUMN_FAMILY",
            Self::DeleteCell => "DELETE_CELL",
            Self::DeleteCellVersion => "DELETE_CELL_VERSION",
            Self::Insert => "INSERT",
        }
    }
}

/// A decoded key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub row: Vec<u8>,
    /// Family id, 1..=255; 0 for a row delete.
    pub family: u8,
    pub qualifier: Vec<u8>,
    /// Nanoseconds since the Unix epoch.
    pub timestamp: i64,
    /// Assigned by the range server at commit; strictly increasing.
    pub revision: i64,
    pub flag: CellFlag,
}

/// A key together with its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub key: Key,
    pub value: Vec<u8>,
}

/// Why a byte string is not an encoded key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("encoded key of {0} bytes is too short")]
    TooShort(usize),
    #[error("encoded key has no row terminator")]
    NoRowTerminator,
    #[error("encoded key has no qualifier terminator")]
    NoQualifierTerminator,
    #[error("encoded key has a bad escape at byte {0}")]
    BadEscape(usize),
    #[error("encoded key has unknown flag byte {0}")]
    BadFlag(u8),
}

fn escape_into(bytes: &[u8], out: &mut Vec<u8>) {
    escape_bytes_into(bytes, out);
    out.extend_from_slice(&[0, 1]);
}

/// Appends `bytes` escaped as a row or qualifier is in a key (`00` as `00 FF`), without the
/// `00 01` terminator. Escaping keeps byte order: `a < b` exactly when
/// `escaped(a) < escaped(b)`, and a prefix stays a prefix.
pub fn escape_bytes_into(bytes: &[u8], out: &mut Vec<u8>) {
    if memchr0(bytes).is_none() {
        out.extend_from_slice(bytes);
    } else {
        for &b in bytes {
            out.push(b);
            if b == 0 {
                out.push(0xFF);
            }
        }
    }
}

/// Encodes an i64 so that larger values sort first bytewise.
fn desc_i64(v: i64) -> [u8; 8] {
    (!((v as u64) ^ (1 << 63))).to_be_bytes()
}

fn undesc_i64(b: [u8; 8]) -> i64 {
    ((!u64::from_be_bytes(b)) ^ (1 << 63)) as i64
}

/// Finds the `00 01` terminator of an escaped field starting at `from`; returns its index,
/// or the error for a zero byte that is neither an escape (`00 FF`) nor the terminator.
/// Eight bytes at a time: each zero byte of a word is classified by the byte after it (exact
/// per-byte masks, [`zero_bytes`]), so an escaped binary row dense in zeros (a big-endian
/// integer escapes each leading zero) costs a few word operations, where a `memchr` call per
/// zero cost more than the key's parse.
fn find_terminator(enc: &[u8], from: usize) -> Result<Option<usize>, KeyError> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let word = |at: usize| u64::from_le_bytes(enc[at..at + 8].try_into().expect("8 bytes"));
    let mut i = from;
    while i + 9 <= enc.len() {
        let zeros = zero_bytes(word(i));
        if zeros != 0 {
            let next = word(i + 1);
            let term = zeros & zero_bytes(next ^ ONES);
            let bad = zeros & !zero_bytes(next ^ ONES) & !zero_bytes(!next);
            let (t, b) = (term.trailing_zeros(), bad.trailing_zeros());
            if b < t {
                return Err(KeyError::BadEscape(i + (b / 8) as usize));
            }
            if term != 0 {
                return Ok(Some(i + (t / 8) as usize));
            }
        }
        i += 8;
    }
    while i + 1 < enc.len() {
        if enc[i] != 0 {
            i += 1;
            continue;
        }
        match enc[i + 1] {
            1 => return Ok(Some(i)),
            0xFF => i += 2,
            _ => return Err(KeyError::BadEscape(i)),
        }
    }
    Ok(None)
}

/// The high bit of each byte of `w` that is zero, and no other bit (no carries between bytes).
#[inline]
fn zero_bytes(w: u64) -> u64 {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    !(((w & LOW7).wrapping_add(LOW7)) | w | LOW7)
}

fn memchr0(s: &[u8]) -> Option<usize> {
    memchr::memchr(0, s)
}

fn unescape(enc: &[u8]) -> Cow<'_, [u8]> {
    if memchr0(enc).is_none() {
        return Cow::Borrowed(enc);
    }
    let mut out = Vec::with_capacity(enc.len());
    let mut i = 0;
    while i < enc.len() {
        out.push(enc[i]);
        i += if enc[i] == 0 { 2 } else { 1 };
    }
    Cow::Owned(out)
}

/// Whether an encoded key is a delete of any kind (row, family, cell or version). False for
/// anything too short to be a key.
pub fn is_delete(enc: &[u8]) -> bool {
    enc.len() >= KEY_SUFFIX_LEN
        && CellFlag::from_u8(enc[enc.len() - KEY_SUFFIX_LEN]) != Some(CellFlag::Insert)
}

/// The timestamp of an encoded key (the caller knows it is a key).
pub fn timestamp_of(enc: &[u8]) -> i64 {
    let n = enc.len();
    undesc_i64(enc[n - 16..n - 8].try_into().expect("8 bytes"))
}

/// The revision of an encoded key (its last eight bytes; the caller knows it is a key).
pub fn revision_of(enc: &[u8]) -> i64 {
    let n = enc.len();
    undesc_i64(enc[n - 8..].try_into().expect("8 bytes"))
}

/// Whether an encoded key is a row delete or a column-family delete (a "wide" delete: it
/// hides cells that sort after it in its row). False for anything too short to be a key.
pub fn is_wide_delete(enc: &[u8]) -> bool {
    enc.len() >= KEY_SUFFIX_LEN
        && matches!(
            CellFlag::from_u8(enc[enc.len() - KEY_SUFFIX_LEN]),
            Some(CellFlag::DeleteRow | CellFlag::DeleteColumnFamily)
        )
}

/// Appends the encoding of a row alone: the prefix every key of that row starts with.
pub fn encode_row_prefix(row: &[u8], out: &mut Vec<u8>) {
    escape_into(row, out);
}

/// The smallest encoded key of `row` (sorts before every key of the row).
pub fn row_start(row: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(row.len() + 2);
    escape_into(row, &mut v);
    v
}

/// A byte string that sorts after every key of `row` and before every key of any later row.
pub fn row_end(row: &[u8]) -> Vec<u8> {
    let mut v = row_start(row);
    let n = v.len();
    v[n - 1] = 2;
    v
}

/// The smallest encoded key of (`row`, `family`, `qualifier`).
pub fn cell_start(row: &[u8], family: u8, qualifier: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(row.len() + qualifier.len() + 5);
    escape_into(row, &mut v);
    v.push(family);
    escape_into(qualifier, &mut v);
    v
}

/// A byte string that sorts after every key of (`row`, `family`, `qualifier`) and before the next cell.
pub fn cell_end(row: &[u8], family: u8, qualifier: &[u8]) -> Vec<u8> {
    let mut v = cell_start(row, family, qualifier);
    let n = v.len();
    v[n - 1] = 2;
    v
}

/// [`cell_end`] of a key's encoded cell prefix ([`KeyRef::cell_prefix`]), written into `out`:
/// no unescaping and escaping again.
pub fn cell_end_into(cell_prefix: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(cell_prefix);
    if let Some(last) = out.last_mut() {
        *last = 2;
    }
}

/// A byte string that sorts after every key of (`row`, `family`) and before the next family.
pub fn family_end(row: &[u8], family: u8) -> Vec<u8> {
    let mut v = Vec::with_capacity(row.len() + 3);
    escape_into(row, &mut v);
    match family.checked_add(1) {
        Some(f) => v.push(f),
        None => {
            let n = v.len();
            v[n - 1] = 2;
        }
    }
    v
}

impl Key {
    /// A value key.
    pub fn insert(
        row: impl Into<Vec<u8>>,
        family: u8,
        qualifier: impl Into<Vec<u8>>,
        ts: i64,
    ) -> Self {
        Self {
            row: row.into(),
            family,
            qualifier: qualifier.into(),
            timestamp: ts,
            revision: 0,
            flag: CellFlag::Insert,
        }
    }

    /// Appends the encoded key to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        encode_parts(
            &self.row,
            self.family,
            &self.qualifier,
            self.flag,
            self.timestamp,
            self.revision,
            out,
        );
    }

    /// The encoded key.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.row.len() + self.qualifier.len() + 5 + KEY_SUFFIX_LEN);
        self.encode_into(&mut v);
        v
    }

    /// Decodes an encoded key.
    pub fn decode(enc: &[u8]) -> Result<Self, KeyError> {
        let r = KeyRef::new(enc)?;
        Ok(r.to_key())
    }
}

/// Appends the encoding of a key given by its parts.
pub fn encode_parts(
    row: &[u8],
    family: u8,
    qualifier: &[u8],
    flag: CellFlag,
    timestamp: i64,
    revision: i64,
    out: &mut Vec<u8>,
) {
    escape_into(row, out);
    out.push(family);
    escape_into(qualifier, out);
    out.push(flag as u8);
    out.extend_from_slice(&desc_i64(timestamp));
    out.extend_from_slice(&desc_i64(revision));
}

/// Rewrites the revision of an encoded key in place.
pub fn set_revision(enc: &mut [u8], revision: i64) {
    let n = enc.len();
    enc[n - 8..].copy_from_slice(&desc_i64(revision));
}

/// Rewrites the timestamp of an encoded key in place.
pub fn set_timestamp(enc: &mut [u8], timestamp: i64) {
    let n = enc.len();
    enc[n - 16..n - 8].copy_from_slice(&desc_i64(timestamp));
}

/// How many leading bytes `a` and `b` have in common, eight at a time inline (as
/// [`bytes_cmp`] compares them).
#[inline]
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().expect("8 bytes"));
        let y = u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if x != y {
            return i + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// The first 8 bytes of `k` as a big-endian number, zero-padded: `a < b` bytewise implies
/// `prefix_word(a) <= prefix_word(b)`, so sorting or searching by it first needs the bytes
/// only where words are equal.
#[inline]
pub fn prefix_word(k: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = k.len().min(8);
    b[..n].copy_from_slice(&k[..n]);
    u64::from_be_bytes(b)
}

/// Compares two byte strings as `<[u8]>::cmp` does, eight bytes at a time inline: encoded keys
/// are short, and a `memcmp` call per comparison dominated scans.
#[inline]
pub fn bytes_cmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_be_bytes(a[i..i + 8].try_into().expect("8 bytes"));
        let y = u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if x != y {
            return x.cmp(&y);
        }
        i += 8;
    }
    while i < n {
        if a[i] != b[i] {
            return a[i].cmp(&b[i]);
        }
        i += 1;
    }
    a.len().cmp(&b.len())
}

/// Equality of two byte strings, eight bytes at a time inline (see [`bytes_cmp`]).
#[inline]
pub fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bytes_cmp(a, b) == std::cmp::Ordering::Equal
}

/// A validated view of an encoded key; field access without copying.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeyRef<'a> {
    enc: &'a [u8],
    /// Index of the row terminator.
    row_end: usize,
}

impl<'a> KeyRef<'a> {
    /// Checks the layout of `enc` and returns a view of it.
    pub fn new(enc: &'a [u8]) -> Result<Self, KeyError> {
        // Shortest key: 00 01 | fam | 00 01 | suffix.
        if enc.len() < 5 + KEY_SUFFIX_LEN {
            return Err(KeyError::TooShort(enc.len()));
        }
        let row_end = find_terminator(enc, 0)?.ok_or(KeyError::NoRowTerminator)?;
        let qual_start = row_end + 3;
        let suffix = enc.len() - KEY_SUFFIX_LEN;
        if qual_start + 2 > suffix || enc[suffix - 2..suffix] != [0, 1] {
            return Err(KeyError::NoQualifierTerminator);
        }
        match find_terminator(enc, qual_start)? {
            Some(t) if t == suffix - 2 => {}
            _ => return Err(KeyError::NoQualifierTerminator),
        }
        let flag = enc[suffix];
        if CellFlag::from_u8(flag).is_none() {
            return Err(KeyError::BadFlag(flag));
        }
        Ok(Self { enc, row_end })
    }

    /// A view of a key that came from ht's own storage (a cell cache, or a checksummed block):
    /// checks the fixed structure (length, qualifier terminator, flag) and finds the row by its
    /// terminator, but does not re-validate the escapes inside the qualifier. For a
    /// well-formed key this is the same view as [`KeyRef::new`], several times faster on binary
    /// rows; for bytes from outside use `new`.
    pub fn from_trusted(enc: &'a [u8]) -> Result<Self, KeyError> {
        if enc.len() < 5 + KEY_SUFFIX_LEN {
            return Err(KeyError::TooShort(enc.len()));
        }
        let row_end = find_terminator(enc, 0)?.ok_or(KeyError::NoRowTerminator)?;
        let suffix = enc.len() - KEY_SUFFIX_LEN;
        if row_end + 3 + 2 > suffix || enc[suffix - 2..suffix] != [0, 1] {
            return Err(KeyError::NoQualifierTerminator);
        }
        let flag = enc[suffix];
        if CellFlag::from_u8(flag).is_none() {
            return Err(KeyError::BadFlag(flag));
        }
        Ok(Self { enc, row_end })
    }

    /// The encoded bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.enc
    }

    /// The row, unescaped (borrowed unless it contains NUL bytes).
    pub fn row(&self) -> Cow<'a, [u8]> {
        unescape(&self.enc[..self.row_end])
    }

    /// The encoded row including its terminator: equal for all keys of one row.
    pub fn row_prefix(&self) -> &'a [u8] {
        &self.enc[..self.row_end + 2]
    }

    /// The encoded (row, family, qualifier) including the qualifier terminator: equal for all
    /// versions of one cell.
    pub fn cell_prefix(&self) -> &'a [u8] {
        &self.enc[..self.enc.len() - KEY_SUFFIX_LEN]
    }

    /// The encoded (row, family) prefix.
    pub fn family_prefix(&self) -> &'a [u8] {
        &self.enc[..self.row_end + 3]
    }

    pub fn family(&self) -> u8 {
        self.enc[self.row_end + 2]
    }

    /// The qualifier as the key stores it: escaped, without its terminator.
    pub fn escaped_qualifier(&self) -> &'a [u8] {
        &self.enc[self.row_end + 3..self.enc.len() - KEY_SUFFIX_LEN - 2]
    }

    /// The qualifier, unescaped.
    pub fn qualifier(&self) -> Cow<'a, [u8]> {
        unescape(&self.enc[self.row_end + 3..self.enc.len() - KEY_SUFFIX_LEN - 2])
    }

    pub fn flag(&self) -> CellFlag {
        CellFlag::from_u8(self.enc[self.enc.len() - KEY_SUFFIX_LEN]).expect("validated in new")
    }

    pub fn timestamp(&self) -> i64 {
        let n = self.enc.len();
        undesc_i64(self.enc[n - 16..n - 8].try_into().expect("8 bytes"))
    }

    pub fn revision(&self) -> i64 {
        let n = self.enc.len();
        undesc_i64(self.enc[n - 8..].try_into().expect("8 bytes"))
    }

    /// An owned, decoded copy.
    pub fn to_key(&self) -> Key {
        Key {
            row: self.row().into_owned(),
            family: self.family(),
            qualifier: self.qualifier().into_owned(),
            timestamp: self.timestamp(),
            revision: self.revision(),
            flag: self.flag(),
        }
    }
}

impl fmt::Debug for KeyRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Key({:?}, {}, {:?}, {:?}, ts={}, rev={})",
            String::from_utf8_lossy(&self.row()),
            self.family(),
            String::from_utf8_lossy(&self.qualifier()),
            self.flag(),
            self.timestamp(),
            self.revision()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The terminator search as a byte loop: what [`find_terminator`] must answer.
    fn find_terminator_bytewise(enc: &[u8], from: usize) -> Result<Option<usize>, KeyError> {
        let mut i = from;
        while i + 1 < enc.len() {
            if enc[i] != 0 {
                i += 1;
                continue;
            }
            match enc[i + 1] {
                1 => return Ok(Some(i)),
                0xFF => i += 2,
                _ => return Err(KeyError::BadEscape(i)),
            }
        }
        Ok(None)
    }

    proptest! {
        /// The end of a cell taken from its encoded prefix is the one built from its parts.
        #[test]
        fn cell_end_into_matches_cell_end(
            row in proptest::collection::vec(prop_oneof![Just(0u8), any::<u8>()], 1..12),
            family in 1u8..=255,
            qualifier in proptest::collection::vec(prop_oneof![Just(0u8), any::<u8>()], 0..8),
            ts in any::<i64>(),
            rev in any::<i64>(),
        ) {
            let mut enc = Vec::new();
            encode_parts(&row, family, &qualifier, CellFlag::Insert, ts, rev, &mut enc);
            let k = KeyRef::from_trusted(&enc).unwrap();
            let mut out = vec![9, 9];
            cell_end_into(k.cell_prefix(), &mut out);
            prop_assert_eq!(out, cell_end(&row, family, &qualifier));
        }

        /// The word-at-a-time search answers what a byte loop answers, from any start, over
        /// bytes made of zeros, escapes, terminators and others in any mix.
        #[test]
        fn find_terminator_answers_what_a_byte_loop_answers(
            bytes in prop_oneof![
                proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(0xFFu8), any::<u8>()], 0..40),
                proptest::collection::vec(prop_oneof![Just(vec![0u8, 0xFF]), Just(vec![0u8, 1]), Just(vec![7u8])], 0..20)
                    .prop_map(|v| v.concat()),
            ],
            from in 0usize..6,
        ) {
            let from = from.min(bytes.len());
            prop_assert_eq!(
                format!("{:?}", find_terminator(&bytes, from)),
                format!("{:?}", find_terminator_bytewise(&bytes, from))
            );
        }
    }

    fn flag_strategy() -> impl Strategy<Value = CellFlag> {
        prop_oneof![
            Just(CellFlag::DeleteRow),
            Just(CellFlag::DeleteColumnFamily),
            Just(CellFlag::DeleteCell),
            Just(CellFlag::DeleteCellVersion),
            Just(CellFlag::Insert),
        ]
    }

    fn key_strategy() -> impl Strategy<Value = Key> {
        (
            proptest::collection::vec(
                prop_oneof![Just(0u8), Just(1u8), Just(2u8), any::<u8>()],
                0..6,
            ),
            any::<u8>(),
            proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..4),
            any::<i64>(),
            any::<i64>(),
            flag_strategy(),
        )
            .prop_map(|(row, family, qualifier, timestamp, revision, flag)| Key {
                row,
                family,
                qualifier,
                timestamp,
                revision,
                flag,
            })
    }

    fn model_cmp(a: &Key, b: &Key) -> std::cmp::Ordering {
        a.row
            .cmp(&b.row)
            .then(a.family.cmp(&b.family))
            .then(a.qualifier.cmp(&b.qualifier))
            .then(a.flag.cmp(&b.flag))
            .then(b.timestamp.cmp(&a.timestamp))
            .then(b.revision.cmp(&a.revision))
    }

    proptest! {
        #[test]
        fn roundtrip(k in key_strategy()) {
            let enc = k.encode();
            prop_assert_eq!(Key::decode(&enc).unwrap(), k);
        }

        #[test]
        fn bytewise_order_is_key_order(a in key_strategy(), b in key_strategy()) {
            prop_assert_eq!(a.encode().cmp(&b.encode()), model_cmp(&a, &b));
        }

        #[test]
        fn row_bounds_bracket_row(k in key_strategy(), other in key_strategy()) {
            let enc = k.encode();
            prop_assert!(row_start(&k.row) <= enc);
            prop_assert!(row_end(&k.row) > enc);
            let o = other.encode();
            if other.row > k.row {
                prop_assert!(o > row_end(&k.row));
            }
            if other.row < k.row {
                prop_assert!(o < row_start(&k.row));
            }
        }

        #[test]
        fn cell_and_family_bounds(k in key_strategy(), other in key_strategy()) {
            let enc = k.encode();
            prop_assert!(cell_start(&k.row, k.family, &k.qualifier) <= enc);
            prop_assert!(cell_end(&k.row, k.family, &k.qualifier) > enc);
            prop_assert!(family_end(&k.row, k.family) > enc);
            let o = other.encode();
            let same_cell = other.row == k.row && other.family == k.family && other.qualifier == k.qualifier;
            if !same_cell && model_cmp(&other, &k) == std::cmp::Ordering::Greater {
                prop_assert!(o > cell_end(&k.row, k.family, &k.qualifier));
            }
            if (other.row.clone(), other.family) > (k.row.clone(), k.family) {
                prop_assert!(o > family_end(&k.row, k.family));
            }
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = Key::decode(&bytes);
            if let Ok(r) = KeyRef::from_trusted(&bytes) {
                let _ = (r.row(), r.qualifier(), r.family(), r.timestamp(), r.revision());
            }
        }

        #[test]
        fn bytes_cmp_is_slice_cmp(a in proptest::collection::vec(any::<u8>(), 0..40), b in proptest::collection::vec(any::<u8>(), 0..40)) {
            prop_assert_eq!(bytes_cmp(&a, &b), a.cmp(&b));
            let lcp = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            prop_assert_eq!(common_prefix(&a, &b), lcp);
            if a < b {
                prop_assert!(prefix_word(&a) <= prefix_word(&b));
            }
            prop_assert_eq!(bytes_eq(&a, &b), a == b);
            let mut c = a.clone();
            c.extend_from_slice(&b);
            prop_assert_eq!(bytes_cmp(&a, &c), a.cmp(&c));
            prop_assert_eq!(common_prefix(&c, &a), a.len());
        }

        #[test]
        fn trusted_view_equals_checked_view(k in key_strategy()) {
            let enc = k.encode();
            let a = KeyRef::new(&enc).unwrap();
            let b = KeyRef::from_trusted(&enc).unwrap();
            prop_assert_eq!(a, b);
        }
    }

    #[test]
    fn accessors() {
        let k = Key {
            row: b"r\0w".to_vec(),
            family: 7,
            qualifier: b"q".to_vec(),
            timestamp: -5,
            revision: 99,
            flag: CellFlag::DeleteCell,
        };
        let enc = k.encode();
        let r = KeyRef::new(&enc).unwrap();
        assert_eq!(&*r.row(), b"r\0w");
        assert_eq!(r.family(), 7);
        assert_eq!(&*r.qualifier(), b"q");
        assert_eq!(r.timestamp(), -5);
        assert_eq!(r.revision(), 99);
        assert_eq!(r.flag(), CellFlag::DeleteCell);
        assert_eq!(r.row_prefix(), &row_start(b"r\0w")[..]);
        let mut e2 = enc.clone();
        set_revision(&mut e2, 7);
        set_timestamp(&mut e2, 8);
        let r2 = KeyRef::new(&e2).unwrap();
        assert_eq!((r2.timestamp(), r2.revision()), (8, 7));
    }
}

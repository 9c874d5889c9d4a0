//! Composite row keys (an ht extension): a table may declare that its rows are fixed-width
//! fields joined by one space, the text layout Hypertable's LOAD DATA builds with
//! `ROW_KEY_COLUMN="%010objectid"+fieldtype`. Rows stay plain byte strings; the declaration
//! ([`RowKeySpec`]) lets predicates name the parts and lets writers check the rows they build.
//!
//! A query's part predicates become a [`RowSkip`]: per part, the ranges its encoded bytes may
//! take. [`RowSkip::navigate`] is the seek-hint row filter of a skip scan (Phoenix's
//! `SkipScanFilter.navigate`): for a row it says take it, or seek to the first row that can
//! match, or stop because no later row can.

use std::ops::Bound;

use serde::{Deserialize, Serialize};

/// The byte between two parts of a composite row.
pub const SEPARATOR: u8 = b' ';

/// Widest `UINT(w)`: every value below `10^19` fits a `u64`.
pub const MAX_UINT_WIDTH: u8 = 19;

/// One part's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartKind {
    /// `UINT(w)`: an unsigned integer written as exactly `w` decimal digits, zero-padded on
    /// the left (`%0wname` in LOAD DATA's ROW_KEY_COLUMN), so byte order is numeric order.
    Uint { width: u8 },
    /// `CHAR(n)`: exactly `n` bytes, the value left-justified and padded with spaces
    /// (`%nname`); the value is what is left after trailing spaces are dropped.
    Char { width: u8 },
    /// `VARCHAR`: the rest of the row; allowed only as the last part.
    Varchar,
}

impl PartKind {
    /// The part's width in bytes, `None` for VARCHAR.
    pub fn width(self) -> Option<usize> {
        match self {
            Self::Uint { width } | Self::Char { width } => Some(width as usize),
            Self::Varchar => None,
        }
    }

    /// How HQL writes the type: `UINT(10)`, `CHAR(2)`, `VARCHAR`.
    pub fn hql(self) -> String {
        match self {
            Self::Uint { width } => format!("UINT({width})"),
            Self::Char { width } => format!("CHAR({width})"),
            Self::Varchar => "VARCHAR".to_string(),
        }
    }
}

/// One named part of a composite row key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyPart {
    pub name: String,
    pub kind: PartKind,
}

/// A value given for a part in a predicate or a loaded field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartValue {
    Int(u64),
    Text(Vec<u8>),
}

/// Names that cannot be key parts: the WHERE clause's own keywords.
const RESERVED: &[&str] = &["row", "cell", "timestamp", "value", "exists", "regexp"];

/// A table's composite row key: `ROW KEY (objectid UINT(10), fieldtype CHAR(2))` means rows
/// like `0000012345 F1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowKeySpec {
    pub parts: Vec<KeyPart>,
}

/// Why a declaration, a value or a row does not fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RowKeyError(pub String);

fn err(s: impl Into<String>) -> RowKeyError {
    RowKeyError(s.into())
}

impl RowKeySpec {
    /// Checks the declaration: at least one part, distinct names that are not WHERE keywords,
    /// widths in range, VARCHAR only last.
    pub fn validate(&self) -> Result<(), RowKeyError> {
        if self.parts.is_empty() {
            return Err(err("ROW KEY needs at least one part"));
        }
        for (i, p) in self.parts.iter().enumerate() {
            let ok_name = p
                .name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && p.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok_name {
                return Err(err(format!(
                    "ROW KEY part name {:?} is not a plain name (letters, digits, '_')",
                    p.name
                )));
            }
            if RESERVED.contains(&p.name.to_ascii_lowercase().as_str()) {
                return Err(err(format!(
                    "ROW KEY part name '{}' is reserved in WHERE clauses",
                    p.name
                )));
            }
            if self.parts[..i].iter().any(|o| o.name == p.name) {
                return Err(err(format!("duplicate ROW KEY part '{}'", p.name)));
            }
            match p.kind {
                PartKind::Uint { width } if width == 0 || width > MAX_UINT_WIDTH => {
                    return Err(err(format!(
                        "ROW KEY part '{}': UINT width must be 1 to {MAX_UINT_WIDTH}, not {width}",
                        p.name
                    )));
                }
                PartKind::Char { width: 0 } => {
                    return Err(err(format!(
                        "ROW KEY part '{}': CHAR width must be 1 to 255",
                        p.name
                    )));
                }
                PartKind::Varchar if i + 1 != self.parts.len() => {
                    return Err(err(format!(
                        "ROW KEY part '{}': only the last part may be VARCHAR",
                        p.name
                    )));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The part of this name and its position.
    pub fn part(&self, name: &str) -> Option<(usize, &KeyPart)> {
        self.parts.iter().enumerate().find(|(_, p)| p.name == name)
    }

    /// How HQL declares it: `ROW KEY (objectid UINT(10), fieldtype CHAR(2))`.
    pub fn hql(&self) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|p| format!("{} {}", p.name, p.kind.hql()))
            .collect();
        format!("ROW KEY ({})", parts.join(", "))
    }

    /// The bytes part `i` stores for `value`.
    pub fn encode(&self, i: usize, value: &PartValue) -> Result<Vec<u8>, RowKeyError> {
        match (self.parts[i].kind, value) {
            (PartKind::Uint { .. }, PartValue::Int(n)) => self.encode_uint(i, *n),
            (_, PartValue::Text(t)) => self.encode_text(i, t),
            (_, PartValue::Int(n)) => self.encode_text(i, n.to_string().as_bytes()),
        }
    }

    /// [`RowKeySpec::encode`] of a value given as text (a line of a key file).
    pub fn encode_text(&self, i: usize, t: &[u8]) -> Result<Vec<u8>, RowKeyError> {
        let p = &self.parts[i];
        match p.kind {
            PartKind::Uint { .. } => {
                let n = parse_uint(t).ok_or_else(|| {
                    err(format!(
                        "part '{}' is {}: {:?} is not an unsigned integer",
                        p.name,
                        p.kind.hql(),
                        String::from_utf8_lossy(t)
                    ))
                })?;
                self.encode_uint(i, n)
            }
            PartKind::Char { width } => {
                if t.len() > width as usize {
                    return Err(err(format!(
                        "part '{}' is {}: {:?} is longer than {width} bytes",
                        p.name,
                        p.kind.hql(),
                        String::from_utf8_lossy(t)
                    )));
                }
                if t.ends_with(b" ") {
                    return Err(err(format!(
                        "part '{}' is {}: {:?} ends in a space (the padding)",
                        p.name,
                        p.kind.hql(),
                        String::from_utf8_lossy(t)
                    )));
                }
                let mut out = Vec::with_capacity(width as usize);
                out.extend_from_slice(t);
                out.resize(width as usize, b' ');
                Ok(out)
            }
            PartKind::Varchar => Ok(t.to_vec()),
        }
    }

    /// [`RowKeySpec::encode`] of a number: its decimal digits, zero-padded to the part's
    /// width (a key set of 400K ids encodes each, so no formatting machinery).
    fn encode_uint(&self, i: usize, n: u64) -> Result<Vec<u8>, RowKeyError> {
        let p = &self.parts[i];
        let PartKind::Uint { width } = p.kind else {
            return self.encode_text(i, n.to_string().as_bytes());
        };
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut m = n;
        loop {
            at -= 1;
            digits[at] = b'0' + (m % 10) as u8;
            m /= 10;
            if m == 0 {
                break;
            }
        }
        let len = digits.len() - at;
        let width = width as usize;
        if len > width {
            return Err(err(format!(
                "part '{}' is {}: {n} has more than {width} digits",
                p.name,
                p.kind.hql()
            )));
        }
        let mut out = Vec::with_capacity(width);
        out.resize(width - len, b'0');
        out.extend_from_slice(&digits[at..]);
        Ok(out)
    }

    /// The row of these part values, each encoded as [`RowKeySpec::encode`] does.
    pub fn build(&self, values: &[PartValue]) -> Result<Vec<u8>, RowKeyError> {
        if values.len() != self.parts.len() {
            return Err(err(format!(
                "a row needs {} key parts, not {}",
                self.parts.len(),
                values.len()
            )));
        }
        let mut row = Vec::new();
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                row.push(SEPARATOR);
            }
            row.extend(self.encode(i, v)?);
        }
        Ok(row)
    }

    /// The layout a [`RowSkip`] splits rows by.
    pub fn layout(&self) -> Vec<PartLayout> {
        self.parts
            .iter()
            .map(|p| PartLayout {
                width: p.kind.width().map(|w| w as u16),
                digits: matches!(p.kind, PartKind::Uint { .. }),
            })
            .collect()
    }

    /// Checks that `row` is laid out as declared; the error names the first part that is not.
    pub fn check_row(&self, row: &[u8]) -> Result<(), RowKeyError> {
        let shown = || String::from_utf8_lossy(row).into_owned();
        let mut at = 0;
        for (i, p) in self.parts.iter().enumerate() {
            if i > 0 {
                if row.get(at) != Some(&SEPARATOR) {
                    return Err(err(format!(
                        "row {:?} does not fit {}: no space before part '{}' at byte {at}",
                        shown(),
                        self.hql(),
                        p.name
                    )));
                }
                at += 1;
            }
            let end = match p.kind.width() {
                Some(w) => at + w,
                None => row.len(),
            };
            let Some(bytes) = row.get(at..end) else {
                return Err(err(format!(
                    "row {:?} does not fit {}: part '{}' ({}) is cut short",
                    shown(),
                    self.hql(),
                    p.name,
                    p.kind.hql()
                )));
            };
            if matches!(p.kind, PartKind::Uint { .. }) && !bytes.iter().all(u8::is_ascii_digit) {
                return Err(err(format!(
                    "row {:?} does not fit {}: part '{}' ({}) is {:?}, not digits",
                    shown(),
                    self.hql(),
                    p.name,
                    p.kind.hql(),
                    String::from_utf8_lossy(bytes)
                )));
            }
            at = end;
        }
        if at != row.len() {
            return Err(err(format!(
                "row {:?} does not fit {}: {} bytes after the last part",
                shown(),
                self.hql(),
                row.len() - at
            )));
        }
        Ok(())
    }
}

fn parse_uint(t: &[u8]) -> Option<u64> {
    if t.is_empty() || !t.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(t).ok()?.parse().ok()
}

/// How a [`RowSkip`] finds a part in a row: `width` bytes (`None`: the rest of the row, last
/// part only), parts joined by [`SEPARATOR`]; `digits` parts hold only ASCII digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartLayout {
    pub width: Option<u16>,
    pub digits: bool,
}

/// A range of one part's encoded bytes.
pub type PartRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// What to do with a row (see [`RowSkip::navigate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Navigate {
    /// The row matches.
    Include,
    /// The row does not match; no row before this one (and after the current) does.
    SeekRow(Vec<u8>),
    /// Neither this row nor any later one matches.
    Done,
}

/// The part predicates of a scan over a composite row key: a row matches when it splits by
/// `layout` and each part's bytes lie in one of its slot's ranges (an empty slot: any value).
/// Slots are sorted and disjoint. With other row intervals, the skip applies inside each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowSkip {
    pub layout: Vec<PartLayout>,
    pub slots: Vec<Vec<PartRange>>,
}

/// Where each part of `row` lies (start, end), or `None` when the row does not split.
fn split(layout: &[PartLayout], row: &[u8]) -> Option<Vec<(usize, usize)>> {
    let mut out = Vec::with_capacity(layout.len());
    let mut at = 0;
    for (i, l) in layout.iter().enumerate() {
        if i > 0 {
            if row.get(at) != Some(&SEPARATOR) {
                return None;
            }
            at += 1;
        }
        let end = match l.width {
            Some(w) => at + w as usize,
            None => row.len(),
        };
        let bytes = row.get(at..end)?;
        if l.digits && !bytes.iter().all(u8::is_ascii_digit) {
            return None;
        }
        out.push((at, end));
        at = end;
    }
    (at == row.len()).then_some(out)
}

fn after_start(v: &[u8], start: &Bound<Vec<u8>>) -> bool {
    match start {
        Bound::Included(s) => v >= s.as_slice(),
        Bound::Excluded(s) => v > s.as_slice(),
        Bound::Unbounded => true,
    }
}

fn before_end(v: &[u8], end: &Bound<Vec<u8>>) -> bool {
    match end {
        Bound::Included(e) => v <= e.as_slice(),
        Bound::Excluded(e) => v < e.as_slice(),
        Bound::Unbounded => true,
    }
}

impl RowSkip {
    /// Whether `row` matches.
    pub fn matches(&self, row: &[u8]) -> bool {
        let Some(parts) = split(&self.layout, row) else {
            return false;
        };
        parts.iter().zip(&self.slots).all(|(&(s, e), slot)| {
            slot.is_empty()
                || slot
                    .iter()
                    .any(|(a, b)| after_start(&row[s..e], a) && before_end(&row[s..e], b))
        })
    }

    /// Take `row`, or seek to the first row after it that can match, or stop. The hint is
    /// always past `row`, and no row between them matches.
    pub fn navigate(&self, row: &[u8]) -> Navigate {
        let Some(parts) = split(&self.layout, row) else {
            return Navigate::SeekRow(next_row(row));
        };
        for (i, (&(s, e), slot)) in parts.iter().zip(&self.slots).enumerate() {
            if slot.is_empty() {
                continue;
            }
            let v = &row[s..e];
            // The first range that does not end before v.
            let k = slot.partition_point(|(_, end)| !before_end(v, end));
            let Some((start, _)) = slot.get(k) else {
                // Past the slot's last range: every row with these earlier parts is done.
                return self.carry(row, &parts, i);
            };
            if after_start(v, start) {
                continue;
            }
            let width = self.layout[i].width.map(usize::from);
            let mut hint = row[..s].to_vec();
            match start {
                Bound::Included(b) => hint.extend_from_slice(b),
                Bound::Excluded(b) => {
                    hint.extend_from_slice(b);
                    if width == Some(b.len()) {
                        // Every row holding exactly b here starts with the hint.
                        match crate::scan_spec::prefix_successor(&hint) {
                            Some(h) => hint = h,
                            None => return Navigate::Done,
                        }
                    } else {
                        hint.push(0);
                    }
                }
                Bound::Unbounded => unreachable!("v is after an unbounded start"),
            }
            if hint.as_slice() <= row {
                // Only a bound of another width than the part's can land here.
                return Navigate::SeekRow(next_row(row));
            }
            return Navigate::SeekRow(hint);
        }
        Navigate::Include
    }

    /// Checks what [`RowSkip::navigate`] relies on: a slot per part, only the last part
    /// without a width, and each slot's ranges in order: none starting after its own end, each
    /// ending before the next begins (only the first may start unbounded, only the last end
    /// unbounded). The error names the part (by position) and the range.
    pub fn check(&self) -> Result<(), String> {
        if self.slots.len() != self.layout.len() {
            return Err(format!(
                "{} key-part slots for {} parts",
                self.slots.len(),
                self.layout.len()
            ));
        }
        let n = self.layout.len();
        for (i, (l, slot)) in self.layout.iter().zip(&self.slots).enumerate() {
            if l.width.is_none() && i + 1 != n {
                return Err(format!(
                    "key part {i}: only the last key part may have no width"
                ));
            }
            for (k, (start, end)) in slot.iter().enumerate() {
                if let (
                    Bound::Included(s) | Bound::Excluded(s),
                    Bound::Included(e) | Bound::Excluded(e),
                ) = (start, end)
                    && s > e
                {
                    return Err(format!("key part {i}: range {k} starts after its end"));
                }
            }
            for (k, pair) in slot.windows(2).enumerate() {
                let ordered = match (&pair[0].1, &pair[1].0) {
                    (Bound::Included(e), Bound::Included(s)) => e < s,
                    (Bound::Included(e) | Bound::Excluded(e), Bound::Excluded(s))
                    | (Bound::Excluded(e), Bound::Included(s)) => e <= s,
                    _ => false,
                };
                if !ordered {
                    return Err(format!(
                        "key part {i}: range {} does not end before range {} begins",
                        k,
                        k + 1
                    ));
                }
            }
        }
        Ok(())
    }

    /// The first row past every row whose parts before `i` equal `row`'s.
    fn carry(&self, row: &[u8], parts: &[(usize, usize)], i: usize) -> Navigate {
        if i == 0 {
            return Navigate::Done;
        }
        match crate::scan_spec::prefix_successor(&row[..parts[i - 1].1]) {
            Some(h) => Navigate::SeekRow(h),
            None => Navigate::Done,
        }
    }
}

/// The smallest row after `row`.
fn next_row(row: &[u8]) -> Vec<u8> {
    let mut r = row.to_vec();
    r.push(0);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spec() -> RowKeySpec {
        RowKeySpec {
            parts: vec![
                KeyPart {
                    name: "objectid".into(),
                    kind: PartKind::Uint { width: 3 },
                },
                KeyPart {
                    name: "fieldtype".into(),
                    kind: PartKind::Char { width: 2 },
                },
            ],
        }
    }

    #[test]
    fn rows_are_built_and_checked_as_declared() {
        let s = spec();
        let row = s
            .build(&[PartValue::Int(12), PartValue::Text(b"F".to_vec())])
            .unwrap();
        assert_eq!(row, b"012 F ");
        s.check_row(&row).unwrap();
        assert!(s.build(&[PartValue::Int(1000), PartValue::Int(1)]).is_err());
        assert!(s.check_row(b"01x F1").unwrap_err().0.contains("'objectid'"));
        assert!(s.check_row(b"012F1").unwrap_err().0.contains("no space"));
        assert!(
            s.check_row(b"012 F1x")
                .unwrap_err()
                .0
                .contains("1 bytes after")
        );
        assert!(s.check_row(b"012 F").unwrap_err().0.contains("cut short"));
        assert_eq!(
            s.encode(0, &PartValue::Text(b"7".to_vec())).unwrap(),
            b"007"
        );
        assert!(s.encode(1, &PartValue::Text(b"a ".to_vec())).is_err());
        // Numbers are zero-padded to the width, from 0 to the widest that fits.
        for (n, want) in [(0, "000"), (5, "005"), (40, "040"), (999, "999")] {
            assert_eq!(s.encode(0, &PartValue::Int(n)).unwrap(), want.as_bytes());
            assert_eq!(
                s.encode_text(0, n.to_string().as_bytes()).unwrap(),
                want.as_bytes()
            );
        }
        assert!(
            s.encode_text(0, b"1000")
                .unwrap_err()
                .0
                .contains("more than 3 digits")
        );
        assert!(
            s.encode_text(0, b"-1")
                .unwrap_err()
                .0
                .contains("not an unsigned")
        );
        assert!(s.encode_text(0, b"").is_err());
        let mut wide = spec();
        wide.parts[0].kind = PartKind::Uint {
            width: MAX_UINT_WIDTH,
        };
        wide.validate().unwrap();
        let widest = 10u64.pow(MAX_UINT_WIDTH as u32) - 1;
        assert_eq!(
            wide.encode(0, &PartValue::Int(widest)).unwrap(),
            widest.to_string().as_bytes()
        );
        assert!(wide.encode(0, &PartValue::Int(u64::MAX)).is_err());
        assert_eq!(
            wide.encode(0, &PartValue::Int(1)).unwrap(),
            format!("{:019}", 1).as_bytes()
        );
        assert_eq!(s.encode(1, &PartValue::Int(7)).unwrap(), b"7 ");
    }

    #[test]
    fn declarations_are_validated() {
        let mut s = spec();
        s.validate().unwrap();
        s.parts[0].kind = PartKind::Varchar;
        assert!(s.validate().unwrap_err().0.contains("only the last"));
        s.parts[0].kind = PartKind::Uint { width: 20 };
        assert!(s.validate().is_err());
        s.parts[0] = KeyPart {
            name: "row".into(),
            kind: PartKind::Uint { width: 2 },
        };
        assert!(s.validate().unwrap_err().0.contains("reserved"));
        s.parts[0].name = "fieldtype".into();
        assert!(s.validate().unwrap_err().0.contains("duplicate"));
        assert_eq!(
            spec().hql(),
            "ROW KEY (objectid UINT(3), fieldtype CHAR(2))"
        );
    }

    fn b(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn navigate_seeks_to_the_next_candidate() {
        let skip = RowSkip {
            layout: spec().layout(),
            slots: vec![
                vec![
                    (Bound::Included(b("003")), Bound::Included(b("005"))),
                    (Bound::Excluded(b("007")), Bound::Unbounded),
                ],
                vec![(Bound::Included(b("F1")), Bound::Included(b("F1")))],
            ],
        };
        assert_eq!(skip.navigate(b"001 F1"), Navigate::SeekRow(b("003")));
        assert_eq!(skip.navigate(b"003 F0"), Navigate::SeekRow(b("003 F1")));
        assert_eq!(skip.navigate(b"003 F1"), Navigate::Include);
        assert_eq!(skip.navigate(b"003 F2"), Navigate::SeekRow(b("004")));
        assert_eq!(skip.navigate(b"006 A1"), Navigate::SeekRow(b("008")));
        assert_eq!(skip.navigate(b"007 F1"), Navigate::SeekRow(b("008")));
        assert_eq!(skip.navigate(b"999 F2"), Navigate::SeekRow(b("99:")));
        let first_only = RowSkip {
            layout: spec().layout(),
            slots: vec![skip.slots[0][..1].to_vec(), Vec::new()],
        };
        assert_eq!(first_only.navigate(b"004 ZZ"), Navigate::Include);
        assert_eq!(first_only.navigate(b"006 A1"), Navigate::Done);
        assert_eq!(skip.navigate(b"03 F1"), Navigate::SeekRow(b("03 F1\0")));
    }

    /// Rows over a small alphabet so that prefixes, separators and bad rows all occur.
    fn row() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop::sample::select(b"0125 F\xff".to_vec()), 0..8)
    }

    fn range() -> impl Strategy<Value = PartRange> {
        let bound = || {
            prop_oneof![
                Just(Bound::Unbounded),
                row().prop_map(Bound::Included),
                row().prop_map(Bound::Excluded),
            ]
        };
        (bound(), bound())
    }

    /// Sorted, disjoint ranges, as the executor builds them.
    fn slot() -> impl Strategy<Value = Vec<PartRange>> {
        prop::collection::vec(range(), 0..3).prop_map(|rs| {
            let mut rs: Vec<PartRange> = rs
                .into_iter()
                .filter(|(s, e)| match (s, e) {
                    (Bound::Included(a), Bound::Included(b)) => a <= b,
                    (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
                    | (Bound::Excluded(a), Bound::Included(b)) => a < b,
                    _ => true,
                })
                .collect();
            rs.sort_by(|a, b| cmp_start(&a.0, &b.0));
            let mut out: Vec<PartRange> = Vec::new();
            for r in rs {
                if let Some(last) = out.last()
                    && !ends_before(&last.1, &r.0)
                {
                    continue;
                }
                out.push(r);
            }
            out
        })
    }

    fn cmp_start(a: &Bound<Vec<u8>>, b: &Bound<Vec<u8>>) -> std::cmp::Ordering {
        use Bound::*;
        match (a, b) {
            (Unbounded, Unbounded) => std::cmp::Ordering::Equal,
            (Unbounded, _) => std::cmp::Ordering::Less,
            (_, Unbounded) => std::cmp::Ordering::Greater,
            (Included(x) | Excluded(x), Included(y) | Excluded(y)) => x.cmp(y),
        }
    }

    /// Whether a range ending at `end` lies wholly before one starting at `start`.
    fn ends_before(end: &Bound<Vec<u8>>, start: &Bound<Vec<u8>>) -> bool {
        use Bound::*;
        match (end, start) {
            (Unbounded, _) | (_, Unbounded) => false,
            (Included(e), Included(s)) => e < s,
            (Included(e) | Excluded(e), Excluded(s)) | (Excluded(e), Included(s)) => e <= s,
        }
    }

    proptest! {
        /// navigate never skips a matching row, always moves forward, and includes exactly the
        /// rows `matches` accepts.
        #[test]
        fn navigate_agrees_with_matches(
            a in slot(), b in slot(), rows in prop::collection::btree_set(row(), 0..60),
            varchar in any::<bool>(),
        ) {
            let layout = vec![
                PartLayout { width: Some(2), digits: false },
                PartLayout { width: (!varchar).then_some(1), digits: false },
            ];
            let skip = RowSkip { layout, slots: vec![a, b] };
            let rows: Vec<Vec<u8>> = rows.into_iter().collect();
            for (i, r) in rows.iter().enumerate() {
                match skip.navigate(r) {
                    Navigate::Include => prop_assert!(skip.matches(r)),
                    Navigate::SeekRow(h) => {
                        prop_assert!(!skip.matches(r));
                        prop_assert!(h.as_slice() > r.as_slice());
                        for later in &rows[i + 1..] {
                            if later.as_slice() < h.as_slice() {
                                prop_assert!(!skip.matches(later), "{:?} skipped", later);
                            }
                        }
                    }
                    Navigate::Done => {
                        for later in &rows[i..] {
                            prop_assert!(!skip.matches(later));
                        }
                    }
                }
            }
        }
    }
}

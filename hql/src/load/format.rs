//! The input formats of LOAD DATA INFILE: header detection, and one line of text to cells.
//!
//! Pure functions over bytes: no I/O, no threads. [`LineParser`] is built once from the header and
//! the statement's options, then shared by the parser threads.

use std::collections::HashMap;

use common::key::CellFlag;
use common::mutation::check_cell;
use common::{AsMutationRef, Mutation};

use common::row_key::{KeyPart, PartKind, RowKeySpec};

use crate::ast::{Justify, KeyFormat, LoadOptions, RowKeyColumn};

/// The four delete keywords of the single-cell format and their flags.
const DELETE_KEYWORDS: [(&[u8], CellFlag); 4] = [
    (b"DELETE_ROW", CellFlag::DeleteRow),
    (b"DELETE_COLUMN_FAMILY", CellFlag::DeleteColumnFamily),
    (b"DELETE_CELL", CellFlag::DeleteCell),
    (b"DELETE_CELL_VERSION", CellFlag::DeleteCellVersion),
];

/// Characters of ROW_UNIQUIFY_CHARS suffixes.
const UNIQUIFY_ALPHABET: &[u8] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The most ROW_UNIQUIFY_CHARS allows (Hypertable's limit).
pub const MAX_UNIQUIFY_CHARS: u32 = 21;

/// What a family name resolves to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FamilyInfo {
    pub id: u8,
    /// Counter families take only `n`, `+n`, `-n` or `=n`.
    pub counter: bool,
}

/// How family names are resolved.
#[derive(Debug, Clone)]
pub enum Families {
    /// Into a table: the live families of its schema.
    Schema(HashMap<Vec<u8>, FamilyInfo>),
    /// Into a file: any name is good. Cells carry family id [`ANY_FAMILY`] and the whole column
    /// text (`family` or `family:qualifier`, unescaped) as their qualifier.
    Any,
}

/// The family id of cells parsed with [`Families::Any`].
pub const ANY_FAMILY: u8 = 1;

/// The layout of the lines after the header.
#[derive(Debug, Clone, PartialEq)]
pub enum Layout {
    /// `[timestamp\t]row\tcolumn\tvalue[\tDELETE_…]`.
    SingleCell { timestamps: bool },
    /// One field per header entry.
    MultiCell(MultiCell),
}

/// A multi-cell layout resolved against the header and the families.
#[derive(Debug, Clone, PartialEq)]
pub struct MultiCell {
    /// Fields per line (the header's entries).
    pub fields: usize,
    /// Header entries of the row key, in order, with their widths.
    pub key: Vec<(usize, String, Option<KeyFormat>)>,
    pub timestamp: Option<(usize, String)>,
    /// Fields stored as cells: index, family, qualifier.
    pub cells: Vec<(usize, FamilyInfo, Vec<u8>)>,
}

/// Why a header or a line is refused; the caller adds the file and line.
pub type LineError = String;

/// What the first line of the input turned out to be.
#[derive(Debug, PartialEq)]
pub enum FirstLine {
    /// A header: consumed.
    Header,
    /// Data: to be parsed like any other line.
    Data,
}

/// Decides the layout from the header (HEADER_FILE's first line, or the input's first line) and
/// the options. See the module documentation of `load` for the rules.
pub fn detect_layout(
    first_line: &[u8],
    header_file_line: Option<&[u8]>,
    opts: &LoadOptions,
    sep: &[u8],
    families: &Families,
    row_key: Option<&RowKeySpec>,
) -> Result<(Layout, FirstLine), LineError> {
    let first_line = trim_eol(first_line);
    if let Some(h) = header_file_line {
        let layout = layout_from_header(trim_eol(h), opts, sep, families, row_key)?;
        return Ok((layout, FirstLine::Data));
    }
    if first_line.starts_with(b"#") && !opts.single_cell_format {
        let layout = layout_from_header(first_line, opts, sep, families, row_key)?;
        return Ok((layout, FirstLine::Header));
    }
    let header = strip_hash(first_line);
    if header == b"row\tcolumn\tvalue".as_slice() || header == b"rowkey\tcolumnkey\tvalue" {
        return Ok((Layout::SingleCell { timestamps: false }, FirstLine::Header));
    }
    if header == b"timestamp\trow\tcolumn\tvalue".as_slice()
        || header == b"timestamp\trowkey\tcolumnkey\tvalue"
    {
        return Ok((Layout::SingleCell { timestamps: true }, FirstLine::Header));
    }
    // No header: the number of fields of the first line tells the format.
    let fields = split_fields(first_line, sep);
    let last_is_delete = fields.last().is_some_and(|f| delete_flag(f).is_some());
    let timestamps = match (fields.len(), last_is_delete) {
        (3, false) | (4, true) => false,
        (4, false) | (5, true) => true,
        (n, _) => {
            return Err(format!(
                "cannot detect the input format: the first line has {n} fields and no '#' header \
                 (expected 3 or 4 fields, plus an optional delete flag)"
            ));
        }
    };
    let first = if first_line.starts_with(b"#") {
        FirstLine::Header
    } else {
        FirstLine::Data
    };
    Ok((Layout::SingleCell { timestamps }, first))
}

fn strip_hash(h: &[u8]) -> &[u8] {
    match h.strip_prefix(b"#") {
        Some(rest) => trim_start(rest),
        None => h,
    }
}

fn trim_start(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    s
}

/// A header line (with or without `#`) to a layout.
fn layout_from_header(
    header: &[u8],
    opts: &LoadOptions,
    sep: &[u8],
    families: &Families,
    row_key: Option<&RowKeySpec>,
) -> Result<Layout, LineError> {
    let header = strip_hash(header);
    let names: Vec<String> = split_fields(header, sep)
        .iter()
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    let is = |i: usize, alts: &[&str]| names.get(i).is_some_and(|n| alts.contains(&n.as_str()));
    let single = |at: usize| {
        is(at, &["row", "rowkey"]) && is(at + 1, &["column", "columnkey"]) && is(at + 2, &["value"])
    };
    if names.len() == 3 && single(0) {
        return Ok(Layout::SingleCell { timestamps: false });
    }
    if names.len() == 4 && is(0, &["timestamp"]) && single(1) {
        return Ok(Layout::SingleCell { timestamps: true });
    }
    if opts.single_cell_format {
        return Err(
            "SINGLE_CELL_FORMAT needs the header 'row, column, value' or \
                    'timestamp, row, column, value'"
                .into(),
        );
    }
    if names.len() < 2 {
        return Err("the header names fewer than two fields".into());
    }
    let position = |name: &str| names.iter().position(|n| n == name);
    let mut key = Vec::new();
    // A table with a ROW KEY builds its rows from the fields named like its parts, when the
    // header has them all and no ROW_KEY_COLUMN says otherwise.
    let declared: Vec<RowKeyColumn> = match row_key {
        Some(k)
            if opts.row_key_columns.is_empty()
                && k.parts.iter().all(|p| position(&p.name).is_some()) =>
        {
            k.parts.iter().map(key_column).collect()
        }
        _ => Vec::new(),
    };
    let key_columns = if declared.is_empty() {
        &opts.row_key_columns
    } else {
        &declared
    };
    for k in key_columns {
        let i = position(&k.name)
            .ok_or_else(|| format!("row key column '{}' is not in the header", k.name))?;
        key.push((i, k.name.clone(), k.format));
    }
    if key.is_empty() {
        key.push((0, names[0].clone(), None));
    }
    let timestamp = match &opts.timestamp_column {
        Some(t) => Some((
            position(t).ok_or_else(|| format!("timestamp column '{t}' is not in the header"))?,
            t.clone(),
        )),
        None => None,
    };
    let mut cells = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let is_key = key.iter().any(|k| k.0 == i) || timestamp.as_ref().is_some_and(|t| t.0 == i);
        if is_key && !opts.duplicate_key_columns {
            continue;
        }
        let (family, qualifier) = match name.split_once(':') {
            Some((f, q)) => (f, q.as_bytes().to_vec()),
            None => (name.as_str(), Vec::new()),
        };
        match families {
            Families::Any => cells.push((
                i,
                FamilyInfo {
                    id: ANY_FAMILY,
                    counter: false,
                },
                name.as_bytes().to_vec(),
            )),
            Families::Schema(map) => match map.get(family.as_bytes()) {
                Some(info) => cells.push((i, *info, qualifier)),
                None if opts.ignore_unknown_columns => {}
                None => return Err(format!("unknown family '{family}' in the header")),
            },
        }
    }
    Ok(Layout::MultiCell(MultiCell {
        fields: names.len(),
        key,
        timestamp,
        cells,
    }))
}

/// Cells parsed from one chunk of lines.
#[derive(Debug, Default)]
pub struct ParsedLines {
    pub cells: Vec<Mutation>,
    /// Cells of each line parsed, in order (0 for blank, skipped and bad lines).
    pub cells_per_line: Vec<u32>,
    /// Bad lines: index within the chunk (0-based) and what is wrong.
    pub bad: Vec<(usize, LineError)>,
    /// Lines whose families were unknown and ignored (IGNORE_UNKNOWN_COLUMNS), in single-cell
    /// format.
    pub ignored_cells: u64,
}

/// Turns lines into cells; one per parser thread (it holds scratch space and a random source).
#[derive(Debug, Clone)]
pub struct LineParser {
    layout: Layout,
    sep: Vec<u8>,
    escape: bool,
    families: Families,
    ignore_unknown: bool,
    uniquify_chars: u32,
    rng: u64,
    /// The longest line accepted, without its `\n`.
    max_line_bytes: usize,
    /// The table's composite row key: every row built is checked against it.
    row_key: Option<RowKeySpec>,
}

impl LineParser {
    pub fn new(
        layout: Layout,
        sep: Vec<u8>,
        opts: &LoadOptions,
        families: Families,
        seed: u64,
        max_line_bytes: usize,
        row_key: Option<RowKeySpec>,
    ) -> Self {
        Self {
            max_line_bytes,
            row_key,
            layout,
            sep,
            escape: !opts.no_escape,
            families,
            ignore_unknown: opts.ignore_unknown_columns,
            uniquify_chars: opts.row_uniquify_chars.unwrap_or(0),
            // xorshift needs a non-zero state.
            rng: seed | 1,
        }
    }

    /// A copy with its own random stream.
    pub fn fork(&self, seed: u64) -> Self {
        let mut p = self.clone();
        p.rng = (seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ self.rng) | 1;
        p
    }

    /// Parses the lines of `chunk` (each ending in `\n`, the last one maybe not). With
    /// `stop_at_bad`, stops at the first bad line (it is in `bad`, not in `cells_per_line`).
    pub fn parse_chunk(&mut self, chunk: &[u8], stop_at_bad: bool) -> ParsedLines {
        let mut out = ParsedLines::default();
        let mut fields: Vec<&[u8]> = Vec::new();
        for (index, line) in lines(chunk).enumerate() {
            let before = out.cells.len();
            let parsed = self.parse_line(line, &mut fields, &mut out).and_then(|()| {
                // The engine's own checks, here so that a cell it would refuse is a bad line
                // (named, skippable) instead of a failed write of a whole batch.
                out.cells[before..]
                    .iter()
                    .try_for_each(|m| check_cell(&m.as_mutation_ref()))
                    .map_err(|e| e.to_string())
            });
            match parsed {
                Ok(()) => out.cells_per_line.push((out.cells.len() - before) as u32),
                Err(e) => {
                    out.cells.truncate(before);
                    out.bad.push((index, e));
                    if stop_at_bad {
                        return out;
                    }
                    out.cells_per_line.push(0);
                }
            }
        }
        out
    }

    fn parse_line<'l>(
        &mut self,
        line: &'l [u8],
        fields: &mut Vec<&'l [u8]>,
        out: &mut ParsedLines,
    ) -> Result<(), LineError> {
        if line.len() > self.max_line_bytes {
            return Err(format!(
                "line of {} bytes is longer than {} bytes",
                line.len(),
                self.max_line_bytes
            ));
        }
        let line = trim_eol(line);
        if line.is_empty() {
            return Ok(());
        }
        fields.clear();
        split_into(line, &self.sep, fields);
        match &self.layout {
            Layout::SingleCell { timestamps } => {
                let timestamps = *timestamps;
                self.single_cell(fields, timestamps, out)
            }
            Layout::MultiCell(_) => self.multi_cell(fields, out),
        }
    }

    fn single_cell(
        &mut self,
        fields: &[&[u8]],
        timestamps: bool,
        out: &mut ParsedLines,
    ) -> Result<(), LineError> {
        let want = if timestamps { 4 } else { 3 };
        let (fields, flag) = match fields.len() {
            n if n == want => (fields, CellFlag::Insert),
            // Hypertable's bare DELETE: the row with no column, else the family, or the cell
            // when timestamps lead.
            n if n == want + 1 && fields[want] == b"DELETE" => {
                let column = fields[want - 2];
                let flag = if column.is_empty() {
                    CellFlag::DeleteRow
                } else if timestamps {
                    CellFlag::DeleteCell
                } else {
                    CellFlag::DeleteColumnFamily
                };
                (&fields[..want], flag)
            }
            n if n == want + 1 => match delete_flag(fields[want]) {
                Some(f) => (&fields[..want], f),
                None => {
                    return Err(format!(
                        "too many fields ({n}; expected {want}, or {} with a delete flag), or \
                         bad delete flag '{}'",
                        want + 1,
                        String::from_utf8_lossy(fields[want])
                    ));
                }
            },
            n => {
                return Err(format!(
                    "{} fields ({n}; expected {want})",
                    if n < want { "too few" } else { "too many" }
                ));
            }
        };
        let (timestamp, rest) = if timestamps {
            (Some(parse_timestamp(fields[0])?), &fields[1..])
        } else {
            (None, fields)
        };
        let row = self.row_from(rest[0])?;
        let column = rest[1];
        let value = rest.get(2).copied().unwrap_or_default();
        if flag == CellFlag::DeleteRow {
            out.cells
                .push(Mutation::delete(flag, row, 0, Vec::new(), timestamp));
            return Ok(());
        }
        if flag == CellFlag::DeleteCellVersion && timestamp.is_none() {
            return Err("DELETE_CELL_VERSION needs a timestamp (the 4-field format)".into());
        }
        let (family, qualifier) = match memchr::memchr(b':', column) {
            Some(i) => (&column[..i], Some(&column[i + 1..])),
            None => (column, None),
        };
        let (info, qualifier) = match &self.families {
            Families::Any => (
                FamilyInfo {
                    id: ANY_FAMILY,
                    counter: false,
                },
                self.unescape(column),
            ),
            Families::Schema(map) => match map.get(family) {
                Some(info) => (
                    *info,
                    qualifier.map(|q| self.unescape(q)).unwrap_or_default(),
                ),
                None if self.ignore_unknown => {
                    out.ignored_cells += 1;
                    return Ok(());
                }
                None if family.is_empty() => return Err("empty column family".into()),
                None => {
                    return Err(format!(
                        "unknown family '{}'",
                        String::from_utf8_lossy(family)
                    ));
                }
            },
        };
        if flag != CellFlag::Insert {
            out.cells
                .push(Mutation::delete(flag, row, info.id, qualifier, timestamp));
            return Ok(());
        }
        let value = self.unescape(value);
        check_counter(info, &value)?;
        out.cells.push(Mutation {
            row,
            family: info.id,
            qualifier,
            timestamp,
            flag,
            value,
        });
        Ok(())
    }

    fn multi_cell(&mut self, fields: &[&[u8]], out: &mut ParsedLines) -> Result<(), LineError> {
        let Layout::MultiCell(m) = &self.layout else {
            return Err("internal: not a multi-cell layout".into());
        };
        if fields.len() != m.fields {
            return Err(format!(
                "{} fields ({}; the header names {})",
                if fields.len() < m.fields {
                    "too few"
                } else {
                    "too many"
                },
                fields.len(),
                m.fields
            ));
        }
        let mut row = Vec::with_capacity(16);
        for (n, (i, name, format)) in m.key.iter().enumerate() {
            let raw = fields[*i];
            if raw.is_empty() {
                return Err(format!("empty row key field '{name}'"));
            }
            if n > 0 {
                row.push(b' ');
            }
            let text = unescape_cow(raw, self.escape);
            pad_into(&text, *format, &mut row);
        }
        self.check_row(&row)?;
        let timestamp = match &m.timestamp {
            Some((i, name)) => {
                if fields[*i].is_empty() {
                    return Err(format!("empty timestamp field '{name}'"));
                }
                Some(parse_timestamp(fields[*i])?)
            }
            None => None,
        };
        uniquify(&mut self.rng, self.uniquify_chars, &mut row);
        let mut n_cells = 0;
        for (i, info, _) in &m.cells {
            if !fields[*i].is_empty() {
                n_cells += 1;
                if info.counter {
                    check_counter(*info, &unescape_cow(fields[*i], self.escape))?;
                }
            }
        }
        let mut left = n_cells;
        for (i, info, qualifier) in &m.cells {
            let raw = fields[*i];
            if raw.is_empty() {
                continue;
            }
            left -= 1;
            // The last cell of the line takes the row instead of a copy.
            let row = if left == 0 {
                std::mem::take(&mut row)
            } else {
                row.clone()
            };
            out.cells.push(Mutation {
                row,
                family: info.id,
                qualifier: qualifier.clone(),
                timestamp,
                flag: CellFlag::Insert,
                value: unescape_cow(raw, self.escape).into_owned(),
            });
        }
        Ok(())
    }

    fn row_from(&mut self, raw: &[u8]) -> Result<Vec<u8>, LineError> {
        if raw.is_empty() {
            return Err("empty row key".into());
        }
        let mut row = self.unescape(raw);
        self.check_row(&row)?;
        uniquify(&mut self.rng, self.uniquify_chars, &mut row);
        Ok(row)
    }

    fn check_row(&self, row: &[u8]) -> Result<(), LineError> {
        match &self.row_key {
            Some(k) => k.check_row(row).map_err(|e| e.0),
            None => Ok(()),
        }
    }

    fn unescape(&self, raw: &[u8]) -> Vec<u8> {
        unescape_cow(raw, self.escape).into_owned()
    }
}

/// Appends a space and `chars` random characters, as Hypertable did.
fn uniquify(rng: &mut u64, chars: u32, row: &mut Vec<u8>) {
    if chars == 0 {
        return;
    }
    row.push(b' ');
    for _ in 0..chars {
        // xorshift64: enough to make rows distinct, no dependency.
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        row.push(UNIQUIFY_ALPHABET[(*rng >> 58) as usize]);
    }
}

fn check_counter(info: FamilyInfo, value: &[u8]) -> Result<(), LineError> {
    if !info.counter {
        return Ok(());
    }
    let ok = std::str::from_utf8(value).ok().is_some_and(|s| {
        let s = s.trim();
        let num = s.strip_prefix(['=', '+']).unwrap_or(s).trim();
        num.parse::<i64>().is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "bad counter value '{}' (expected n, +n, -n or =n)",
            String::from_utf8_lossy(value)
        ))
    }
}

fn parse_timestamp(raw: &[u8]) -> Result<i64, LineError> {
    std::str::from_utf8(raw)
        .ok()
        .and_then(crate::parse_nanos)
        .ok_or_else(|| format!("bad timestamp '{}'", String::from_utf8_lossy(raw)))
}

/// The ROW_KEY_COLUMN entry that builds a key part as declared: `%0w` for UINT(w), `%n` for
/// CHAR(n).
fn key_column(p: &KeyPart) -> RowKeyColumn {
    let format = match p.kind {
        PartKind::Uint { width } => Some(KeyFormat {
            width: u32::from(width),
            justify: Justify::RightZero,
        }),
        PartKind::Char { width } => Some(KeyFormat {
            width: u32::from(width),
            justify: Justify::LeftSpace,
        }),
        PartKind::Varchar => None,
    };
    RowKeyColumn {
        name: p.name.clone(),
        format,
    }
}

fn pad_into(text: &[u8], format: Option<KeyFormat>, out: &mut Vec<u8>) {
    let Some(KeyFormat { width, justify }) = format else {
        out.extend_from_slice(text);
        return;
    };
    let pad = (width as usize).saturating_sub(text.len());
    match justify {
        Justify::RightZero => out.extend(std::iter::repeat_n(b'0', pad)),
        Justify::RightSpace => out.extend(std::iter::repeat_n(b' ', pad)),
        Justify::LeftSpace => {}
    }
    out.extend_from_slice(text);
    if justify == Justify::LeftSpace {
        out.extend(std::iter::repeat_n(b' ', pad));
    }
}

/// The delete flag a keyword names.
pub fn delete_flag(field: &[u8]) -> Option<CellFlag> {
    DELETE_KEYWORDS
        .iter()
        .find(|(k, _)| *k == field)
        .map(|(_, f)| *f)
}

/// The keyword of a delete flag (`None` for an insert).
pub fn delete_keyword(flag: CellFlag) -> Option<&'static str> {
    DELETE_KEYWORDS
        .iter()
        .find(|(_, f)| *f == flag)
        .map(|(k, _)| std::str::from_utf8(k).expect("keywords are ASCII"))
}

/// The lines of a chunk, without their `\n`.
fn lines(chunk: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = chunk;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        match memchr::memchr(b'\n', rest) {
            Some(i) => {
                let line = &rest[..i];
                rest = &rest[i + 1..];
                Some(line)
            }
            None => Some(std::mem::take(&mut rest)),
        }
    })
}

/// Removes a trailing `\n` and `\r`.
pub fn trim_eol(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn split_fields<'a>(line: &'a [u8], sep: &[u8]) -> Vec<&'a [u8]> {
    let mut v = Vec::new();
    split_into(line, sep, &mut v);
    v
}

fn split_into<'a>(line: &'a [u8], sep: &[u8], out: &mut Vec<&'a [u8]>) {
    if let [b] = sep {
        let mut start = 0;
        for i in memchr::memchr_iter(*b, line) {
            out.push(&line[start..i]);
            start = i + 1;
        }
        out.push(&line[start..]);
    } else {
        let mut start = 0;
        for i in memchr::memmem::find_iter(line, sep) {
            if i < start {
                continue;
            }
            out.push(&line[start..i]);
            start = i + sep.len();
        }
        out.push(&line[start..]);
    }
}

/// `\n \r \t \0 \\` to newline, carriage return, tab, NUL and backslash; other backslashes
/// stay.
pub fn unescape_cow(raw: &[u8], escape: bool) -> std::borrow::Cow<'_, [u8]> {
    if !escape || memchr::memchr(b'\\', raw).is_none() {
        return std::borrow::Cow::Borrowed(raw);
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b == b'\\' && i + 1 < raw.len() {
            let mapped = match raw[i + 1] {
                b'n' => Some(b'\n'),
                b'r' => Some(b'\r'),
                b't' => Some(b'\t'),
                b'0' => Some(0),
                b'\\' => Some(b'\\'),
                _ => None,
            };
            if let Some(m) = mapped {
                out.push(m);
                i += 2;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    std::borrow::Cow::Owned(out)
}

/// The inverse of [`unescape_cow`]: backslash, newline, carriage return, tab and NUL written as
/// `\\ \n \r \t \0`. A carriage return is escaped because the loader drops one that ends a
/// line (CRLF input): unescaped, a value or row ending in `\r` would lose it on the way back.
pub fn escape_into(raw: &[u8], out: &mut Vec<u8>) {
    escape_write(raw, out).expect("writing to a Vec cannot fail");
}

/// Writes `raw` with backslash, newline, carriage return, tab and NUL escaped, in runs between escapes: the one
/// escaping routine of SELECT output, DUMP TABLE and LOAD ... INTO FILE.
pub fn escape_write<W: std::io::Write + ?Sized>(raw: &[u8], w: &mut W) -> std::io::Result<()> {
    let mut start = 0;
    for (i, &b) in raw.iter().enumerate() {
        let esc: &[u8] = match b {
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0 => b"\\0",
            _ => continue,
        };
        w.write_all(&raw[start..i])?;
        w.write_all(esc)?;
        start = i + 1;
    }
    w.write_all(&raw[start..])
}

pub use crate::timestamp::format_nanos;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_round_trip() {
        let raw = b"a\\b\tc\nd\0e";
        let mut esc = Vec::new();
        escape_into(raw, &mut esc);
        assert_eq!(esc, b"a\\\\b\\tc\\nd\\0e");
        assert_eq!(unescape_cow(&esc, true).as_ref(), raw);
        assert_eq!(unescape_cow(b"x\\qy\\", true).as_ref(), b"x\\qy\\");
    }

    #[test]
    fn timestamps_round_trip() {
        for ns in [0, 1, 1_154_390_400_123_456_789, -1, -86_400_000_000_001] {
            assert_eq!(crate::parse_nanos(&format_nanos(ns)), Some(ns), "{ns}");
        }
        assert_eq!(format_nanos(0), "1970-01-01 00:00:00.000000000");
    }

    #[test]
    fn padding() {
        let mut out = Vec::new();
        let f = |width, justify| Some(KeyFormat { width, justify });
        pad_into(b"42", f(5, Justify::RightZero), &mut out);
        pad_into(b"42", f(4, Justify::RightSpace), &mut out);
        pad_into(b"42", f(3, Justify::LeftSpace), &mut out);
        pad_into(b"123456", f(3, Justify::RightZero), &mut out);
        assert_eq!(out, b"00042  4242 123456");
    }

    #[test]
    fn multi_byte_separator() {
        assert_eq!(
            split_fields(b"a::b::::c", b"::"),
            vec![&b"a"[..], b"b", b"", b"c"]
        );
    }
}

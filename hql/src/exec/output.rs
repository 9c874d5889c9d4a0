//! Writing cells as Hypertable's tab-separated lines, and opening INTO FILE destinations.

use std::fs::File;
use std::io::{self, BufWriter, Write};

use common::key::CellFlag;
use common::{Cell, TableSchema};

use super::{ExecError, Result};
use crate::ast::FileScheme;
use crate::timestamp::format_nanos;

/// How cells are written.
#[derive(Debug, Clone)]
pub(super) struct CellFormat {
    pub timestamps: bool,
    pub revisions: bool,
    pub keys_only: bool,
    pub escape: bool,
    pub separator: Vec<u8>,
    /// Timestamps and revisions as integer nanoseconds instead of dates (DUMP TABLE, and the
    /// shell's `--timestamp-format nanos`).
    pub raw_timestamps: bool,
}

impl CellFormat {
    /// The header line INTO FILE and DUMP TABLE write first.
    /// As Hypertable writes it: `#[revision FS][timestamp FS]row` with KEYS_ONLY, else
    /// `...row FS column FS value`.
    pub fn header(&self) -> Vec<u8> {
        let mut fields = Vec::new();
        if self.revisions {
            fields.push("revision");
        }
        if self.timestamps {
            fields.push("timestamp");
        }
        fields.push("row");
        if !self.keys_only {
            fields.extend(["column", "value"]);
        }
        let mut h = b"#".to_vec();
        for (n, f) in fields.iter().enumerate() {
            if n > 0 {
                h.extend_from_slice(&self.separator);
            }
            h.extend_from_slice(f.as_bytes());
        }
        h.push(b'\n');
        h
    }
}

/// Family id -> name, for the live and dropped families of a schema.
pub(super) fn family_names(s: &TableSchema) -> Vec<Option<String>> {
    let mut names = vec![None; 256];
    for f in &s.families {
        names[f.id as usize] = Some(f.name.clone());
    }
    names
}

/// Writes `bytes`, escaping backslash, newline, tab and NUL when asked.
fn field(w: &mut dyn Write, bytes: &[u8], escape: bool) -> io::Result<()> {
    if !escape {
        return w.write_all(bytes);
    }
    crate::load::escape_write(bytes, w)
}

fn timestamp(w: &mut dyn Write, nanos: i64, raw: bool) -> io::Result<()> {
    if raw {
        write!(w, "{nanos}")
    } else {
        w.write_all(format_nanos(nanos).as_bytes())
    }
}

/// One cell as one line, as Hypertable's shell prints it:
/// `[revision FS][timestamp FS]row FS family[:qualifier] FS value` (revision and timestamp as
/// dates, or integer nanoseconds when [`CellFormat::raw_timestamps`]); with KEYS_ONLY `[revision FS][timestamp FS]row`, once per cell. A delete marker
/// (RETURN_DELETES) has an empty value and its kind after it: `row FS FS DELETE ROW`,
/// `row FS family FS FS DELETE COLUMN FAMILY`, `row FS family:qualifier FS FS DELETE CELL` or
/// `... DELETE CELL VERSION`.
pub(super) fn write_cell(
    w: &mut dyn Write,
    f: &CellFormat,
    cell: &Cell,
    families: &[Option<String>],
) -> io::Result<()> {
    let fs = &f.separator;
    let k = &cell.key;
    if f.revisions {
        timestamp(w, k.revision, f.raw_timestamps)?;
        w.write_all(fs)?;
    }
    if f.timestamps {
        timestamp(w, k.timestamp, f.raw_timestamps)?;
        w.write_all(fs)?;
    }
    field(w, &k.row, f.escape)?;
    if f.keys_only {
        return w.write_all(b"\n");
    }
    if k.flag != CellFlag::DeleteRow {
        w.write_all(fs)?;
        match families.get(k.family as usize).and_then(Option::as_ref) {
            Some(name) => w.write_all(name.as_bytes())?,
            None => write!(w, "{}", k.family)?,
        }
        if !k.qualifier.is_empty() {
            w.write_all(b":")?;
            field(w, &k.qualifier, f.escape)?;
        }
    }
    w.write_all(fs)?;
    if k.flag.is_delete() {
        w.write_all(fs)?;
        w.write_all(delete_label(k.flag).as_bytes())?;
    } else {
        field(w, &cell.value, f.escape)?;
    }
    w.write_all(b"\n")
}

/// The label Hypertable's shell prints for a delete marker.
fn delete_label(flag: CellFlag) -> &'static str {
    match flag {
        CellFlag::DeleteRow => "DELETE ROW",
        CellFlag::DeleteColumnFamily => "DELETE COLUMN FAMILY",
        CellFlag::DeleteCell => "DELETE CELL",
        CellFlag::DeleteCellVersion => "DELETE CELL VERSION",
        CellFlag::Insert => "BAD KEY FLAG",
    }
}

/// An INTO FILE destination.
pub(super) enum FileSink {
    Plain(BufWriter<File>),
    Gz(flate2::write::GzEncoder<BufWriter<File>>),
}

impl Write for FileSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Plain(w) => w.write(buf),
            Self::Gz(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Plain(w) => w.flush(),
            Self::Gz(w) => w.flush(),
        }
    }
}

impl FileSink {
    /// Opens `name` (`[file://]path`); names ending in `.gz` are gzip-compressed.
    pub fn create(name: &str) -> Result<Self> {
        let (scheme, path) = FileScheme::split(name);
        if scheme == FileScheme::Fs {
            return Err(ExecError::invalid(format!(
                "cannot write '{name}': fs:// files need a cluster file system; the embedded \
                 database writes local files only"
            )));
        }
        let file = File::create(path).map_err(|source| ExecError::Io {
            context: format!("cannot create '{path}'"),
            source,
        })?;
        let w = BufWriter::with_capacity(1 << 16, file);
        Ok(if path.ends_with(".gz") {
            Self::Gz(flate2::write::GzEncoder::new(
                w,
                flate2::Compression::default(),
            ))
        } else {
            Self::Plain(w)
        })
    }

    /// Flushes everything (and writes the gzip trailer), reporting errors.
    pub fn finish(self, name: &str) -> Result<()> {
        let err = |source| ExecError::Io {
            context: format!("cannot write '{name}'"),
            source,
        };
        let mut w = match self {
            Self::Plain(w) => w,
            Self::Gz(gz) => gz.finish().map_err(err)?,
        };
        w.flush().map_err(err)?;
        w.get_ref().sync_all().map_err(err)
    }
}

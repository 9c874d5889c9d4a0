//! Where loaded cells go: a table (through a buffered mutator) or a file in the dump format.

use std::fs::File;
use std::io::{BufWriter, Write};

use client::TableMutator;
use common::Mutation;
use common::key::CellFlag;
use flate2::write::GzEncoder;

use super::format::{delete_keyword, escape_into, format_nanos};

/// The inserting side of a load. Cells arrive in line order.
pub trait Sink: Send {
    /// Takes one cell; may send a buffer on.
    fn put(&mut self, m: Mutation) -> Result<(), String>;
    /// Returns once every cell put so far is durable.
    fn flush(&mut self) -> Result<(), String>;
    /// Cells known to be durable.
    fn committed(&self) -> u64;
    /// The last flush: after it the sink is not used again.
    fn finish(&mut self) -> Result<(), String> {
        self.flush()
    }
}

/// Into a table.
pub struct TableSink {
    mutator: Box<dyn TableMutator>,
}

impl TableSink {
    pub fn new(mutator: Box<dyn TableMutator>) -> Self {
        Self { mutator }
    }
}

impl Sink for TableSink {
    fn put(&mut self, m: Mutation) -> Result<(), String> {
        self.mutator.set(m).map_err(|e| e.to_string())
    }

    fn flush(&mut self) -> Result<(), String> {
        self.mutator.flush().map_err(|e| e.to_string())
    }

    fn committed(&self) -> u64 {
        self.mutator.cells_flushed()
    }
}

enum Out {
    Plain(BufWriter<File>),
    Gz(GzEncoder<BufWriter<File>>),
}

impl Out {
    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Self::Plain(w) => w,
            Self::Gz(w) => w,
        }
    }
}

/// Into a file, in DUMP TABLE's format: a `#timestamp\trow\tcolumn\tvalue` header, then one cell
/// per line, deletes with their keyword as a fifth field. Cells without a timestamp get one as a
/// server would: the load's start time, then one nanosecond more per cell.
pub struct FileSink {
    out: Option<Out>,
    path: String,
    escape: bool,
    buf: Vec<u8>,
    next_ts: i64,
    written: u64,
    committed: u64,
}

/// Bytes buffered before a write to the file.
const FILE_BUFFER_BYTES: usize = 1 << 20;

impl FileSink {
    /// Creates (truncating) the file; a name ending in `.gz` is compressed.
    pub fn create(path: &str, escape: bool, now_ns: i64) -> Result<Self, String> {
        let f = File::create(path).map_err(|e| format!("cannot create '{path}': {e}"))?;
        let w = BufWriter::with_capacity(FILE_BUFFER_BYTES, f);
        let out = if path.ends_with(".gz") {
            Out::Gz(GzEncoder::new(w, flate2::Compression::fast()))
        } else {
            Out::Plain(w)
        };
        let mut s = Self {
            out: Some(out),
            path: path.to_string(),
            escape,
            buf: Vec::with_capacity(FILE_BUFFER_BYTES),
            next_ts: now_ns,
            written: 0,
            committed: 0,
        };
        s.buf.extend_from_slice(b"#timestamp\trow\tcolumn\tvalue\n");
        Ok(s)
    }

    fn field(&mut self, raw: &[u8]) {
        if self.escape {
            escape_into(raw, &mut self.buf);
        } else {
            self.buf.extend_from_slice(raw);
        }
    }

    fn write_buf(&mut self) -> Result<(), String> {
        let out = self
            .out
            .as_mut()
            .ok_or_else(|| format!("'{}' is already closed", self.path))?;
        out.writer()
            .write_all(&self.buf)
            .map_err(|e| format!("writing '{}': {e}", self.path))?;
        self.buf.clear();
        Ok(())
    }
}

impl Sink for FileSink {
    fn put(&mut self, m: Mutation) -> Result<(), String> {
        let ts = match m.timestamp {
            Some(t) => t,
            None => {
                self.next_ts += 1;
                self.next_ts
            }
        };
        self.buf.extend_from_slice(format_nanos(ts).as_bytes());
        self.buf.push(b'\t');
        self.field(&m.row);
        self.buf.push(b'\t');
        // Cells for files carry the whole column text as their qualifier (Families::Any).
        if m.flag != CellFlag::DeleteRow {
            self.field(&m.qualifier);
        }
        self.buf.push(b'\t');
        self.field(&m.value);
        if let Some(k) = delete_keyword(m.flag) {
            self.buf.push(b'\t');
            self.buf.extend_from_slice(k.as_bytes());
        }
        self.buf.push(b'\n');
        self.written += 1;
        if self.buf.len() >= FILE_BUFFER_BYTES {
            self.write_buf()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), String> {
        self.write_buf()?;
        if let Some(out) = self.out.as_mut() {
            out.writer()
                .flush()
                .map_err(|e| format!("writing '{}': {e}", self.path))?;
        }
        self.committed = self.written;
        Ok(())
    }

    fn committed(&self) -> u64 {
        self.committed
    }

    fn finish(&mut self) -> Result<(), String> {
        self.flush()?;
        let file = match self.out.take() {
            Some(Out::Plain(w)) => w.into_inner().map_err(|e| e.to_string())?,
            Some(Out::Gz(w)) => w
                .finish()
                .map_err(|e| e.to_string())?
                .into_inner()
                .map_err(|e| e.to_string())?,
            None => return Ok(()),
        };
        file.sync_all()
            .map_err(|e| format!("syncing '{}': {e}", self.path))
    }
}

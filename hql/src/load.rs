//! LOAD DATA INFILE: the streaming TSV loader behind the HQL statement and `ht load`.
//!
//! Input rules (HQL.md "Bulk load and dump", made precise):
//! - With `HEADER_FILE`, that file's first line is the header and every input line is data.
//! - Otherwise a first line starting with `#` is the header (unless SINGLE_CELL_FORMAT). A header
//!   `row column value` or `timestamp row column value` (also `rowkey`, `columnkey`) means the
//!   single-cell format; any other header names the fields of the multi-cell format.
//! - Without a header (or with SINGLE_CELL_FORMAT) the first line's field count decides between
//!   the 3- and 4-field single-cell formats (one more field when it ends in a delete keyword);
//!   a `#` first line is then skipped.
//! - Multi-cell lines must have exactly the header's number of fields; empty fields make no cell.
//!   Key and timestamp fields are not stored unless DUPLICATE_KEY_COLUMNS; with it they are
//!   stored only if they name a family (else IGNORE_UNKNOWN_COLUMNS is needed).
//! - Single-cell lines have exactly 3 (4 with timestamps) fields, or one more that is
//!   `DELETE_ROW`, `DELETE_COLUMN_FAMILY`, `DELETE_CELL` or `DELETE_CELL_VERSION`.
//! - A trailing `\r` is dropped from every line (DUMP TABLE escapes a `\r` of a cell as `\r`);
//!   blank lines are skipped.
//! - A line longer than [`LoadLimits::max_line_bytes`] is a bad line (the first line, which
//!   decides the format, stops the load); the reader passes over it without keeping it.
//! - `INTO FILE` needs no table: every column name is accepted and the cells are written in
//!   DUMP TABLE's 4-field format.
//! - NO_LOG is a normal load (the commit log stays on) followed by the final flush.
//!
//! Line numbers in messages count every line of the input, the header included.

pub mod format;
mod pipeline;
mod sink;

use std::collections::HashMap;
use std::fmt;
use std::io::{BufRead, BufReader, IsTerminal, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use client::Client;
use common::mutation::{MAX_ROW_OR_QUALIFIER_BYTES, MAX_VALUE_BYTES};
use indicatif::{ProgressBar, ProgressStyle};

use crate::ast::{DataSource, FileScheme, LoadData, LoadTarget};

pub use format::{Families, FamilyInfo, escape_into, escape_write, format_nanos, unescape_cow};
use format::{FirstLine, LineParser, MAX_UNIQUIFY_CHARS, detect_layout};
use pipeline::Pipeline;
use sink::{FileSink, Sink, TableSink};

/// Bytes of input per chunk handed to a parser thread. A chunk parsed into cells takes several
/// times its text (a `Mutation` of three vectors per cell: about 8x for the query log's short
/// cells), so chunks are kept small: 4 MiB chunks, 6 in flight per load, held about 1 GB in
/// `ht bench dfs --seed-size`'s four loaders.
pub const CHUNK_BYTES: usize = 1 << 20;

/// Chunks in flight per load beyond one per parser thread: read ahead, parsed and waiting for
/// the inserter. With [`CHUNK_BYTES`] they bound a load's memory to about `(parsers + this) x
/// 9 MiB`.
pub const EXTRA_CHUNKS_IN_FLIGHT: usize = 2;

/// The default longest input line: a largest value and a longest row key and qualifier, each
/// escaped (every byte written as two at worst), and room for a timestamp and a delete flag.
pub const DEFAULT_MAX_LINE_BYTES: usize =
    2 * (MAX_VALUE_BYTES + 2 * MAX_ROW_OR_QUALIFIER_BYTES) + (64 << 10);

/// Bounds on what one load's input may make it hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadLimits {
    /// The longest line, without its `\n` (the header and HEADER_FILE's line included).
    pub max_line_bytes: usize,
    /// Bytes of input per chunk a parser thread turns into cells ([`CHUNK_BYTES`]).
    pub chunk_bytes: usize,
    /// Chunks in flight beyond one per parser thread ([`EXTRA_CHUNKS_IN_FLIGHT`]).
    pub extra_chunks_in_flight: usize,
}

impl Default for LoadLimits {
    fn default() -> Self {
        Self {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            chunk_bytes: CHUNK_BYTES,
            extra_chunks_in_flight: EXTRA_CHUNKS_IN_FLIGHT,
        }
    }
}

/// How a load runs.
pub struct LoadContext<'a> {
    pub client: &'a dyn Client,
    /// The current namespace, for relative table names (`/` or `/a/b`).
    pub namespace: &'a str,
    /// Show a progress bar (only when attached to a terminal).
    pub progress: bool,
    /// ht's addition: count, report and skip bad lines instead of stopping at the first.
    pub skip_bad_lines: bool,
    /// Bytes to read for standard input (`"-"`).
    pub stdin: Option<&'a mut dyn std::io::Read>,
}

/// What a load did; `Display` prints the report HQL.md describes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadReport {
    pub elapsed: Duration,
    /// Data lines read (the header not included).
    pub lines: u64,
    pub cells: u64,
    /// Bytes of row keys of the cells.
    pub key_bytes: u64,
    pub value_bytes: u64,
    pub skipped_lines: u64,
    /// The first few skipped lines: `FILE: line N: what`.
    pub skipped_samples: Vec<String>,
}

impl LoadReport {
    fn per_sec(&self, n: u64) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 { n as f64 / s } else { 0.0 }
    }

    /// Cells per second.
    pub fn cells_per_sec(&self) -> f64 {
        self.per_sec(self.cells)
    }

    /// Key and value bytes per second.
    pub fn bytes_per_sec(&self) -> f64 {
        self.per_sec(self.key_bytes + self.value_bytes)
    }

    pub fn avg_key_bytes(&self) -> f64 {
        avg(self.key_bytes, self.cells)
    }

    pub fn avg_value_bytes(&self) -> f64 {
        avg(self.value_bytes, self.cells)
    }
}

fn avg(total: u64, n: u64) -> f64 {
    if n == 0 { 0.0 } else { total as f64 / n as f64 }
}

impl fmt::Display for LoadReport {
    /// Hypertable's load report, with the skipped lines added.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Load complete.")?;
        writeln!(f)?;
        writeln!(f, "  Elapsed time:  {:.2} s", self.elapsed.as_secs_f64())?;
        writeln!(f, "Avg value size:  {:.2} bytes", self.avg_value_bytes())?;
        writeln!(f, "  Avg key size:  {:.2} bytes", self.avg_key_bytes())?;
        writeln!(f, "    Throughput:  {:.2} bytes/s", self.bytes_per_sec())?;
        writeln!(f, " Total inserts:  {}", self.cells)?;
        writeln!(f, "    Throughput:  {:.2} inserts/s", self.cells_per_sec())?;
        write!(f, " Lines skipped:  {}", self.skipped_lines)?;
        for s in &self.skipped_samples {
            write!(f, "\n  skipped {s}")?;
        }
        if self.skipped_lines > self.skipped_samples.len() as u64 {
            write!(
                f,
                "\n  ... and {} more",
                self.skipped_lines - self.skipped_samples.len() as u64
            )?;
        }
        Ok(())
    }
}

/// Why a load stopped.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct LoadError {
    pub message: String,
    /// The code Hypertable gives the failure.
    pub code: crate::error::Code,
    /// Hypertable's message where it differs from ht's (a missing file: its name; an error
    /// at a line: `line number N`).
    pub hypertable: Option<String>,
}

impl LoadError {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: crate::error::Code::HqlBadLoadFileFormat,
            hypertable: None,
        }
    }

    fn coded(code: crate::error::Code, message: impl Into<String>) -> Self {
        Self {
            code,
            ..Self::new(message)
        }
    }

    /// The message of Hypertable's error line.
    pub fn hypertable_message(&self) -> String {
        self.hypertable
            .clone()
            .unwrap_or_else(|| self.message.clone())
    }
}

/// Runs a LOAD DATA INFILE statement with the default [`LoadLimits`].
pub fn load_data(ctx: LoadContext<'_>, stmt: &LoadData) -> Result<LoadReport, LoadError> {
    load_data_with(ctx, stmt, LoadLimits::default())
}

/// Runs a LOAD DATA INFILE statement.
pub fn load_data_with(
    ctx: LoadContext<'_>,
    stmt: &LoadData,
    limits: LoadLimits,
) -> Result<LoadReport, LoadError> {
    let start = Instant::now();
    let opts = &stmt.options;
    if opts.row_uniquify_chars.unwrap_or(0) > MAX_UNIQUIFY_CHARS {
        return Err(LoadError::new(format!(
            "ROW_UNIQUIFY_CHARS must be at most {MAX_UNIQUIFY_CHARS}"
        )));
    }
    for k in &opts.row_key_columns {
        if let Some(f) = k.format
            && f.width as usize > MAX_ROW_OR_QUALIFIER_BYTES
        {
            return Err(LoadError::new(format!(
                "ROW_KEY_COLUMN '{}': width {} is more than the longest row key \
                 ({MAX_ROW_OR_QUALIFIER_BYTES} bytes)",
                k.name, f.width
            )));
        }
    }
    let max_line = limits.max_line_bytes.max(1);
    let sep = match &opts.field_separator {
        Some(s) if s.is_empty() => return Err(LoadError::new("FS must not be empty")),
        Some(s) if s.chars().count() != 1 => {
            return Err(LoadError::new(format!(
                "FS must be one character, not '{s}' ({} characters)",
                s.chars().count()
            )));
        }
        Some(s) if s == "\n" || s == "\r" => {
            return Err(LoadError::new("FS cannot be a newline or carriage return"));
        }
        Some(s) => s.as_bytes().to_vec(),
        None => b"\t".to_vec(),
    };
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0);

    // Where the cells go.
    let mut row_key = None;
    let (families, mut sink): (Families, Box<dyn Sink>) = match &stmt.target {
        LoadTarget::Table(t) => {
            let path = table_path(ctx.namespace, t);
            let schema = ctx.client.table_schema(&path).map_err(|e| {
                let (code, hypertable) = crate::exec::hypertable_client_error(&e);
                LoadError {
                    hypertable: Some(hypertable),
                    ..LoadError::coded(code, e.to_string())
                }
            })?;
            if let Some(k) = &schema.row_key {
                if opts.row_uniquify_chars.is_some_and(|n| n > 0) {
                    return Err(LoadError::new(format!(
                        "ROW_UNIQUIFY_CHARS cannot load into table '{path}': its rows must fit \
                         its {}",
                        k.hql()
                    )));
                }
                row_key = Some(k.clone());
            }
            let map: HashMap<Vec<u8>, FamilyInfo> = schema
                .families
                .iter()
                .filter(|f| !f.deleted)
                .map(|f| {
                    (
                        f.name.as_bytes().to_vec(),
                        FamilyInfo {
                            id: f.id,
                            counter: f.counter,
                        },
                    )
                })
                .collect();
            // Indexed families get their index entries (deletes in a load leave theirs).
            let mutator = client::index::mutator(ctx.client, None, &path)
                .map_err(|e| LoadError::new(e.to_string()))?;
            (Families::Schema(map), Box::new(TableSink::new(mutator)))
        }
        LoadTarget::File(f) => {
            let path = local_path(f)?;
            let sink = FileSink::create(path, !opts.no_escape, now_ns).map_err(LoadError::new)?;
            (Families::Any, Box::new(sink))
        }
    };

    // Where they come from.
    let counter = Arc::new(AtomicU64::new(0));
    let (source_name, reader, total_bytes): (String, Box<dyn Read + '_>, Option<u64>) =
        match &stmt.source {
            DataSource::Stdin => {
                let stdin = ctx.stdin.ok_or_else(|| {
                    LoadError::new("LOAD DATA INFILE \"-\": no standard input here")
                })?;
                let r = Counting {
                    inner: stdin,
                    n: Arc::clone(&counter),
                };
                ("(stdin)".into(), Box::new(r), None)
            }
            DataSource::File(name) => {
                let path = local_path(name)?;
                let f = std::fs::File::open(path).map_err(|e| LoadError {
                    hypertable: Some(name.clone()),
                    ..LoadError::coded(
                        if e.kind() == std::io::ErrorKind::NotFound {
                            crate::error::Code::FileNotFound
                        } else {
                            crate::error::Code::IoError
                        },
                        format!("cannot open '{name}': {e}"),
                    )
                })?;
                let size = f.metadata().ok().map(|m| m.len());
                let r = Counting {
                    inner: f,
                    n: Arc::clone(&counter),
                };
                let r: Box<dyn Read> = if path.ends_with(".gz") {
                    let mut raw = BufReader::with_capacity(1 << 16, r);
                    check_gzip_magic(&mut raw, name)?;
                    Box::new(GzipErrors(flate2::read::MultiGzDecoder::new(raw)))
                } else {
                    Box::new(r)
                };
                (name.clone(), r, size)
            }
        };
    let mut src = BufReader::with_capacity(1 << 20, reader);

    // The header.
    let header_line = match &opts.header_file {
        Some(h) => {
            let f = std::fs::File::open(local_path(h)?)
                .map_err(|e| LoadError::new(format!("cannot open header file '{h}': {e}")))?;
            let mut line = Vec::new();
            let whole = read_line_bounded(&mut BufReader::new(f), &mut line, max_line)
                .map_err(|e| LoadError::new(format!("reading header file '{h}': {e}")))?;
            if !whole {
                return Err(LoadError::new(format!(
                    "header file {h}: line 1 is longer than {max_line} bytes; nothing was loaded"
                )));
            }
            Some(line)
        }
        None => None,
    };
    let mut first = Vec::new();
    let whole = read_line_bounded(&mut src, &mut first, max_line)
        .map_err(|e| LoadError::new(format!("reading {source_name}: {e}")))?;
    if !whole {
        return Err(LoadError::new(format!(
            "{source_name}: line 1 is longer than {max_line} bytes (it decides the input format); \
             nothing was loaded"
        )));
    }
    if first.is_empty() && header_line.is_none() {
        sink.finish().map_err(LoadError::new)?;
        return Ok(LoadReport {
            elapsed: start.elapsed(),
            ..LoadReport::default()
        });
    }
    let (layout, first_kind) = detect_layout(
        &first,
        header_line.as_deref(),
        opts,
        &sep,
        &families,
        row_key.as_ref(),
    )
    .map_err(|e| {
        let at = match &opts.header_file {
            Some(h) => format!("header file {h}"),
            None => format!("{source_name}: line 1"),
        };
        LoadError::new(format!("{at}: {e}; nothing was loaded"))
    })?;
    let (prefix, lines_before) = match first_kind {
        FirstLine::Header => (Vec::new(), 1),
        FirstLine::Data => (first, 0),
    };
    let parser = LineParser::new(
        layout,
        sep,
        opts,
        families,
        now_ns as u64,
        max_line,
        row_key,
    );

    let bar = (ctx.progress && std::io::stderr().is_terminal())
        .then(|| progress_bar(total_bytes, &source_name));
    let on_chunk = || {
        if let Some(b) = &bar {
            b.set_position(counter.load(Ordering::Relaxed));
        }
    };
    let pipeline = Pipeline {
        source_name: &source_name,
        lines_before,
        skip_bad_lines: ctx.skip_bad_lines,
        parser_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        chunk_bytes: limits.chunk_bytes.max(1),
        max_chunks_in_flight: 0,
        max_line_bytes: max_line,
        on_chunk: &on_chunk,
    };
    let pipeline = Pipeline {
        max_chunks_in_flight: pipeline.parser_threads + limits.extra_chunks_in_flight,
        ..pipeline
    };
    let result = pipeline.run(&mut src, prefix, &parser, sink.as_mut());
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    match result {
        Ok(o) => Ok(LoadReport {
            elapsed: start.elapsed(),
            lines: o.lines,
            cells: o.cells,
            key_bytes: o.key_bytes,
            value_bytes: o.value_bytes,
            skipped_lines: o.bad_lines,
            skipped_samples: o.bad_samples,
        }),
        Err(f) => {
            let loaded = if f.committed_line == 0 {
                format!("nothing of {source_name} was loaded")
            } else {
                format!(
                    "loaded lines 1..={} of {source_name} ({} cells)",
                    f.committed_line, f.committed_cells
                )
            };
            let tail = match f.at_line {
                Some(at) => format!("{loaded}; the error is at line {at}"),
                None => format!("{loaded}; later lines may be partly loaded"),
            };
            Err(LoadError {
                hypertable: f.at_line.map(|at| format!("line number {at}")),
                ..LoadError::new(format!("{}; {tail}", f.message))
            })
        }
    }
}

/// The absolute table path for a name relative to `namespace`.
pub fn table_path(namespace: &str, table: &str) -> String {
    if table.starts_with('/') {
        table.to_string()
    } else {
        format!("{}/{table}", namespace.trim_end_matches('/'))
    }
}

fn local_path(name: &str) -> Result<&str, LoadError> {
    match FileScheme::split(name) {
        (FileScheme::Local, p) => Ok(p),
        (FileScheme::Fs, _) => Err(LoadError::new(format!(
            "'{name}': fs:// files are not supported by the loader yet; use a local file"
        ))),
    }
}

fn progress_bar(total: Option<u64>, name: &str) -> ProgressBar {
    let b = match total {
        Some(n) => ProgressBar::new(n).with_style(
            ProgressStyle::with_template(
                "{msg} [{bar:40}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{msg} {spinner} {bytes} {binary_bytes_per_sec}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        ),
    };
    b.with_message(format!("loading {name}"))
}

/// Reads one line, its `\n` included, into `line`, but no more than `max` bytes of it before
/// the `\n`: false when the line is longer (then `line` holds its first `max + 1` bytes).
fn read_line_bounded(
    src: &mut dyn BufRead,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<bool> {
    let limit = max as u64 + 1;
    let n = src.take(limit).read_until(b'\n', line)?;
    Ok(line.ends_with(b"\n") || (n as u64) < limit)
}

/// Refuses a `.gz` file that does not start with the gzip magic bytes (the decoder would
/// only say "unexpected end of file" or "invalid gzip header" later).
fn check_gzip_magic(src: &mut dyn BufRead, name: &str) -> Result<(), LoadError> {
    // Peeked, not consumed: the decoder reads from the start. A file's first read fills the
    // buffer with more than two bytes unless the file is shorter.
    let head = src
        .fill_buf()
        .map_err(|e| LoadError::new(format!("reading '{name}': {e}")))?;
    let head = &head[..head.len().min(2)];
    if head == [0x1f, 0x8b] {
        return Ok(());
    }
    let what = if head.is_empty() {
        "it is empty".to_string()
    } else {
        format!(
            "it starts with {}, not the gzip magic bytes 1f 8b",
            head.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        )
    };
    Err(LoadError::new(format!(
        "'{name}' is not a gzip file ({what}); a name ending in .gz is read as gzip"
    )))
}

/// Names what is wrong with gzip input that does not decode.
struct GzipErrors<R>(R);

impl<R: Read> Read for GzipErrors<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => std::io::Error::new(
                e.kind(),
                "the gzip data is truncated (unexpected end of file)",
            ),
            std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData => {
                std::io::Error::new(e.kind(), format!("the gzip data is corrupt: {e}"))
            }
            _ => e,
        })
    }
}

/// Counts the bytes read from the source (compressed bytes for `.gz`), for the progress bar.
struct Counting<R> {
    inner: R,
    n: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let got = self.inner.read(buf)?;
        self.n.fetch_add(got as u64, Ordering::Relaxed);
        Ok(got)
    }
}

//! The streaming load: a reader (the calling thread) cuts the input into chunks of whole lines,
//! parser threads turn chunks into cells, and one inserter thread hands them to the sink in line
//! order.
//!
//! Memory is bounded by [`Pipeline::max_chunks_in_flight`] chunks: the reader needs a free buffer
//! (a token) for every chunk it reads, and the inserter gives the buffer back only once the chunk
//! is in the sink. Because the inserter commits in line order, "cells durable so far" maps to a
//! line number: that is what an error reports.

use std::collections::{BTreeMap, VecDeque};
use std::io::BufRead;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

use super::format::{LineParser, ParsedLines};
use super::sink::Sink;

/// Bad lines whose messages are kept for the report.
pub const BAD_LINE_SAMPLES: usize = 10;

/// How to run the pipeline.
pub struct Pipeline<'a> {
    /// The file name as the user wrote it, for messages.
    pub source_name: &'a str,
    /// Lines of the input already consumed (the header line, if it was in the input).
    pub lines_before: u64,
    pub skip_bad_lines: bool,
    pub parser_threads: usize,
    pub chunk_bytes: usize,
    pub max_chunks_in_flight: usize,
    /// The longest line accepted (without its `\n`): bounds the memory one line can take. A
    /// longer line is a bad line; the reader passes over it without keeping it.
    pub max_line_bytes: usize,
    /// Called by the reader after each chunk (progress display).
    pub on_chunk: &'a (dyn Fn() + Sync),
}

/// What the inserter did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Data lines processed (after the header).
    pub lines: u64,
    pub cells: u64,
    pub key_bytes: u64,
    pub value_bytes: u64,
    pub bad_lines: u64,
    pub bad_samples: Vec<String>,
    pub ignored_cells: u64,
}

/// A failed load: the message, and the last line whose cells are all durable.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub committed_line: u64,
    pub committed_cells: u64,
    /// The line at fault, when one is (a bad line).
    pub at_line: Option<u64>,
}

struct Chunk {
    seq: u64,
    /// Whole lines.
    data: Vec<u8>,
    /// After them, a line longer than `max_line_bytes` that was not kept.
    overlong: Option<Overlong>,
}

/// A line the reader did not keep because it was longer than the limit.
#[derive(Debug, Clone, Copy)]
struct Overlong {
    /// Its length as far as it was read: all of it when the reader passed over it (bad lines
    /// skipped), else the bytes read before it stopped.
    bytes: u64,
    /// Whether all of it was read.
    whole: bool,
}

struct Parsed {
    seq: u64,
    buf: Vec<u8>,
    lines: ParsedLines,
    overlong: Option<Overlong>,
}

/// How a chunk read from the input ends.
enum ChunkEnd {
    /// At the end of the input.
    Eof,
    /// At `cut`, after a whole line; the bytes after it start the next line.
    Cut(usize),
    /// At `cut`, after a whole line; the bytes after it start a line longer than the limit.
    Overlong(usize),
}

impl Pipeline<'_> {
    /// Runs the load: `prefix` (a first line already read, or empty) then the rest of `src`.
    pub fn run(
        &self,
        src: &mut dyn BufRead,
        prefix: Vec<u8>,
        parser: &LineParser,
        sink: &mut dyn Sink,
    ) -> Result<Outcome, Failure> {
        let n_parsers = self.parser_threads.max(1);
        let in_flight = self.max_chunks_in_flight.max(n_parsers + 1);
        let (work_tx, work_rx) = sync_channel::<Chunk>(n_parsers);
        let work_rx = Arc::new(Mutex::new(work_rx));
        let (done_tx, done_rx) = sync_channel::<Parsed>(in_flight);
        let (token_tx, token_rx) = sync_channel::<Vec<u8>>(in_flight);
        for _ in 0..in_flight {
            token_tx
                .send(Vec::new())
                .expect("the token channel has room for every token");
        }
        std::thread::scope(|s| {
            for i in 0..n_parsers {
                let rx = Arc::clone(&work_rx);
                let tx = done_tx.clone();
                let mut p = parser.fork(i as u64 + 1);
                let stop_at_bad = !self.skip_bad_lines;
                std::thread::Builder::new()
                    .name(format!("ht-load-parse-{i}"))
                    .spawn_scoped(s, move || parse_loop(&rx, &tx, &mut p, stop_at_bad))
                    .expect("spawning a parser thread");
            }
            drop(done_tx);
            drop(work_rx);
            let inserter = std::thread::Builder::new()
                .name("ht-load-insert".into())
                .spawn_scoped(s, move || self.insert_loop(done_rx, token_tx, sink))
                .expect("spawning the inserter thread");
            let read = self.read_loop(src, prefix, &work_tx, &token_rx);
            drop(work_tx);
            drop(token_rx);
            let inserted = inserter.join().unwrap_or_else(|_| {
                Err(Failure {
                    message: "the inserter thread panicked".into(),
                    committed_line: 0,
                    committed_cells: 0,
                    at_line: None,
                })
            });
            match (inserted, read) {
                (Err(f), _) => Err(f),
                (Ok(o), Ok(())) => Ok(o),
                (Ok(o), Err(e)) => {
                    let line = self.lines_before + o.lines;
                    Err(Failure {
                        message: format!("reading {} after line {line}: {e}", self.source_name),
                        committed_line: line,
                        committed_cells: o.cells,
                        at_line: None,
                    })
                }
            }
        })
    }

    /// Cuts the input into chunks of whole lines; stops at the end, on an error, at a line
    /// longer than the limit (unless bad lines are skipped: then it passes over the line), or
    /// when the inserter has stopped (no more tokens).
    fn read_loop(
        &self,
        src: &mut dyn BufRead,
        prefix: Vec<u8>,
        work: &SyncSender<Chunk>,
        tokens: &Receiver<Vec<u8>>,
    ) -> std::io::Result<()> {
        // The start of a line not yet ended: never longer than the limit.
        let mut carry = prefix;
        let mut seq = 0;
        loop {
            let Ok(mut buf) = tokens.recv() else {
                return Ok(());
            };
            buf.clear();
            buf.append(&mut carry);
            let end = fill_chunk(src, &mut buf, self.chunk_bytes, self.max_line_bytes)?;
            let mut overlong = None;
            let mut last = false;
            match end {
                ChunkEnd::Eof => last = true,
                ChunkEnd::Cut(cut) => {
                    carry.extend_from_slice(&buf[cut..]);
                    buf.truncate(cut);
                }
                ChunkEnd::Overlong(cut) => {
                    let mut bytes = (buf.len() - cut) as u64;
                    buf.truncate(cut);
                    let whole = if self.skip_bad_lines {
                        let (passed, eof) = pass_line(src)?;
                        bytes += passed;
                        last = eof;
                        true
                    } else {
                        // The load stops at this line: read no further.
                        last = true;
                        false
                    };
                    overlong = Some(Overlong { bytes, whole });
                }
            }
            (self.on_chunk)();
            if !buf.is_empty() || overlong.is_some() {
                let chunk = Chunk {
                    seq,
                    data: buf,
                    overlong,
                };
                if work.send(chunk).is_err() {
                    return Ok(());
                }
                // Numbered as sent: the inserter waits for every number.
                seq += 1;
            }
            if last {
                return Ok(());
            }
        }
    }

    fn insert_loop(
        &self,
        done: Receiver<Parsed>,
        tokens: SyncSender<Vec<u8>>,
        sink: &mut dyn Sink,
    ) -> Result<Outcome, Failure> {
        let mut ins = Inserter {
            sink,
            out: Outcome::default(),
            line: self.lines_before,
            unflushed: VecDeque::new(),
            committed_line: self.lines_before,
            pipeline: self,
        };
        let mut pending: BTreeMap<u64, Parsed> = BTreeMap::new();
        let mut next = 0;
        for p in done {
            pending.insert(p.seq, p);
            while let Some(p) = pending.remove(&next) {
                next += 1;
                ins.chunk(p.lines, p.overlong)?;
                // The reader may be gone already; then nobody needs the buffer.
                let _ = tokens.send(p.buf);
            }
        }
        if !pending.is_empty() {
            return Err(ins.failure("a parser thread stopped early".into(), None));
        }
        if let Err(e) = ins.sink.finish() {
            return Err(ins.failure(e, None));
        }
        Ok(ins.out)
    }
}

/// Reads onto `buf` (which holds the start of a line, no `\n`) until it holds `chunk_bytes` and
/// ends in a whole line, the input ends, or its last line grows longer than `max_line_bytes`.
/// Memory stays below `chunk_bytes + max_line_bytes` plus one read.
fn fill_chunk(
    src: &mut dyn BufRead,
    buf: &mut Vec<u8>,
    chunk_bytes: usize,
    max_line_bytes: usize,
) -> std::io::Result<ChunkEnd> {
    // Where the last, unfinished line of `buf` starts; bytes before `scanned` hold no newline
    // after it.
    let mut line_start = 0;
    let mut scanned = buf.len();
    loop {
        let want = chunk_bytes.saturating_sub(buf.len()).max(64 << 10);
        // Room for exactly this read: `read_to_end` alone may double the buffer.
        buf.reserve_exact(want);
        let got =
            std::io::Read::read_to_end(&mut std::io::Read::take(&mut *src, want as u64), buf)?;
        if let Some(i) = memchr::memrchr(b'\n', &buf[scanned..]) {
            line_start = scanned + i + 1;
        }
        scanned = buf.len();
        if got < want {
            // A last line longer than the limit is the parser's to refuse.
            return Ok(ChunkEnd::Eof);
        }
        if buf.len() - line_start > max_line_bytes {
            return Ok(ChunkEnd::Overlong(line_start));
        }
        if buf.len() >= chunk_bytes && line_start > 0 {
            return Ok(ChunkEnd::Cut(line_start));
        }
    }
}

/// Reads past the rest of a line, keeping none of it: the bytes passed (its `\n` not counted)
/// and whether the input ended.
fn pass_line(src: &mut dyn BufRead) -> std::io::Result<(u64, bool)> {
    let mut passed = 0u64;
    loop {
        let avail = src.fill_buf()?;
        if avail.is_empty() {
            return Ok((passed, true));
        }
        match memchr::memchr(b'\n', avail) {
            Some(i) => {
                src.consume(i + 1);
                return Ok((passed + i as u64, false));
            }
            None => {
                let n = avail.len();
                src.consume(n);
                passed += n as u64;
            }
        }
    }
}

fn parse_loop(
    work: &Mutex<Receiver<Chunk>>,
    done: &SyncSender<Parsed>,
    parser: &mut LineParser,
    stop_at_bad: bool,
) {
    loop {
        let chunk = {
            let Ok(rx) = work.lock() else { return };
            match rx.recv() {
                Ok(c) => c,
                Err(_) => return,
            }
        };
        let lines = parser.parse_chunk(&chunk.data, stop_at_bad);
        let parsed = Parsed {
            seq: chunk.seq,
            buf: chunk.data,
            lines,
            overlong: chunk.overlong,
        };
        if done.send(parsed).is_err() {
            return;
        }
    }
}

struct Inserter<'a, 'p> {
    sink: &'a mut dyn Sink,
    out: Outcome,
    /// Line number of the last line handed to the sink.
    line: u64,
    /// Lines handed to the sink but not known durable: (line, cells put up to its end).
    unflushed: VecDeque<(u64, u64)>,
    committed_line: u64,
    pipeline: &'a Pipeline<'p>,
}

impl Inserter<'_, '_> {
    fn chunk(&mut self, parsed: ParsedLines, overlong: Option<Overlong>) -> Result<(), Failure> {
        let ParsedLines {
            cells,
            cells_per_line,
            bad,
            ignored_cells,
        } = parsed;
        let base = self.line;
        self.out.ignored_cells += ignored_cells;
        let mut cells = cells.into_iter();
        for n in cells_per_line {
            for m in cells.by_ref().take(n as usize) {
                self.out.key_bytes += m.row.len() as u64;
                self.out.value_bytes += m.value.len() as u64;
                if let Err(e) = self.sink.put(m) {
                    return Err(self.failure(format!("writing failed: {e}"), None));
                }
                self.out.cells += 1;
            }
            self.line += 1;
            self.out.lines += 1;
            self.unflushed.push_back((self.line, self.out.cells));
        }
        for (i, what) in &bad {
            let at = base + *i as u64 + 1;
            if !self.pipeline.skip_bad_lines {
                if let Err(e) = self.sink.flush() {
                    return Err(self.failure(format!("writing failed: {e}"), None));
                }
                let msg = format!("{}: line {at}: {what}", self.pipeline.source_name);
                return Err(self.failure(msg, Some(at)));
            }
            self.bad_line(at, what);
        }
        if let Some(o) = overlong {
            let at = self.line + 1;
            let max = self.pipeline.max_line_bytes;
            let what = if o.whole {
                format!("line of {} bytes is longer than {max} bytes", o.bytes)
            } else {
                format!("line is longer than {max} bytes")
            };
            if !self.pipeline.skip_bad_lines {
                if let Err(e) = self.sink.flush() {
                    return Err(self.failure(format!("writing failed: {e}"), None));
                }
                let msg = format!("{}: line {at}: {what}", self.pipeline.source_name);
                return Err(self.failure(msg, Some(at)));
            }
            self.bad_line(at, &what);
            self.line += 1;
            self.out.lines += 1;
            self.unflushed.push_back((self.line, self.out.cells));
        }
        self.advance_committed();
        Ok(())
    }

    /// Counts a skipped bad line, keeping the first few messages.
    fn bad_line(&mut self, at: u64, what: &str) {
        self.out.bad_lines += 1;
        if self.out.bad_samples.len() < BAD_LINE_SAMPLES {
            self.out
                .bad_samples
                .push(format!("{}: line {at}: {what}", self.pipeline.source_name));
        }
    }

    fn advance_committed(&mut self) {
        let durable = self.sink.committed();
        while let Some(&(line, cum)) = self.unflushed.front() {
            if cum > durable {
                break;
            }
            self.committed_line = line;
            self.unflushed.pop_front();
        }
    }

    fn failure(&mut self, message: String, at_line: Option<u64>) -> Failure {
        self.advance_committed();
        Failure {
            message,
            committed_line: self.committed_line,
            committed_cells: self.sink.committed(),
            at_line,
        }
    }
}

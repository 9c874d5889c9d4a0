//! Reading dumps: MediaWiki XML exports (plain, bz2, gz) and JSON lines.
//!
//! Both readers stream: they hold one page (or one line) at a time, and refuse
//! one larger than [`ReadOptions::max_page_bytes`] rather than growing without
//! bound. The XML reader does not parse the whole document with an XML parser:
//! it cuts the stream into `<page>...</page>` pieces (a literal `<` cannot
//! occur inside XML text, so the first `</page>` after `<page>` is the end of
//! the page) and parses each piece on its own with `quick-xml`. So one
//! malformed page is reported and skipped, and reading goes on.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use quick_xml::events::Event;

use crate::strip::strip_wikitext;

/// The default bound on one page (XML) or one line (JSON lines): 64 MiB. The
/// largest English Wikipedia pages are a few MiB of wikitext.
pub const DEFAULT_MAX_PAGE_BYTES: usize = 64 << 20;

/// Longest tag read outside a page (`<siteinfo>` and the like): longer ones
/// are skipped unread.
const MAX_TAG_BYTES: usize = 4096;

/// One article ready for indexing.
#[derive(Debug, Clone, PartialEq)]
pub struct Article {
    /// Wikipedia language: "en", "de", "simple", ... From the dump's
    /// `<dbname>` ("dewiki" → "de"), else from the file name
    /// ([`language_from_file_name`]), else [`ReadOptions::lang`], else "en".
    pub lang: String,
    /// The page id (`<page><id>`, not the revision id; JSON `"id"`).
    pub id: u64,
    /// The page title, as written.
    pub title: String,
    /// `<revision><timestamp>` as written (e.g. "2016-04-22T10:19:33Z"); `None` for JSON lines.
    pub timestamp: Option<String>,
    /// Plain text: XML wikitext passed through [`strip_wikitext`]; JSON
    /// `"text"` as is (it is already plain).
    pub text: String,
}

/// What went wrong while reading a dump, and where.
///
/// `at` is "byte N" for XML (offset in the *decompressed* XML of the start of
/// the page, or of the problem) or "line N" (1-based) for JSON lines.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A malformed page (missing id or title, bad JSON line, id not a number,
    /// larger than the bound, ...): reported and skipped; reading goes on.
    #[error("{file}: {at}: bad page: {msg}")]
    BadPage {
        /// The file being read.
        file: String,
        /// Where: "byte N" or "line N".
        at: String,
        /// What is wrong.
        msg: String,
    },
    /// The input ends in the middle of a page, a compressed stream is cut or
    /// corrupt, or the XML never closes: reading stops after this error.
    #[error("{file}: {at}: truncated: {msg}")]
    Truncated {
        /// The file being read.
        file: String,
        /// Where: "byte N" or "line N".
        at: String,
        /// What is wrong.
        msg: String,
    },
    /// The file cannot be opened, or its extension is not one we read.
    #[error("{file}: {msg}")]
    Io {
        /// The file.
        file: String,
        /// What is wrong.
        msg: String,
    },
}

/// Pages that were read but not returned as articles, counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Skipped {
    /// Namespace-0 pages that are redirects (a `<redirect/>` element, or text
    /// starting with `#REDIRECT` / `#WEITERLEITUNG`).
    pub redirects: u64,
    /// Pages outside namespace 0 (talk, user, project, template, ... pages).
    pub other_namespaces: u64,
    /// Pages or lines reported as [`ReadError::BadPage`].
    pub bad: u64,
}

/// The kind of dump a stream holds (after decompression).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A MediaWiki XML export (`pages-articles`).
    Xml,
    /// One JSON object per line with `id`, `title` and `text` (wikiextractor).
    JsonLines,
}

/// Options for [`open_with`] and [`Articles::from_reader`].
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// The largest page (XML, from `<page>` to `</page>`) or line (JSON lines)
    /// accepted, in bytes. A larger one is skipped without being held in
    /// memory and reported as [`ReadError::BadPage`].
    pub max_page_bytes: usize,
    /// The language when neither the dump (`<dbname>`) nor the file name
    /// tells it; "en" if `None`.
    pub lang: Option<String>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            max_page_bytes: DEFAULT_MAX_PAGE_BYTES,
            lang: None,
        }
    }
}

/// The file-name endings [`open`] accepts, with their format and compression.
const EXTENSIONS: &[(&str, Format, Compression)] = &[
    (".xml", Format::Xml, Compression::None),
    (".xml.bz2", Format::Xml, Compression::Bzip2),
    (".xml.gz", Format::Xml, Compression::Gzip),
    (".jsonl", Format::JsonLines, Compression::None),
    (".jsonl.gz", Format::JsonLines, Compression::Gzip),
    (".json", Format::JsonLines, Compression::None),
    (".json.gz", Format::JsonLines, Compression::Gzip),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compression {
    None,
    Gzip,
    Bzip2,
}

/// Opens a dump, choosing the reader by the file's extension: `.xml`,
/// `.xml.bz2`, `.xml.gz`, `.jsonl`, `.jsonl.gz` (and `.json`, `.json.gz`, read
/// as JSON lines). Bzip2 and gzip files may have several streams/members (as
/// the multistream dumps do).
///
/// An unknown extension or a file that cannot be opened gives
/// [`ReadError::Io`] naming the file. Nothing is read until the first
/// [`Iterator::next`].
pub fn open(path: &Path) -> Result<Articles, ReadError> {
    open_with(path, ReadOptions::default())
}

/// [`open`] with options (a smaller page bound, a fallback language).
pub fn open_with(path: &Path, options: ReadOptions) -> Result<Articles, ReadError> {
    let file = path.display().to_string();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let Some(&(_, format, compression)) = EXTENSIONS.iter().find(|(ext, _, _)| name.ends_with(ext))
    else {
        let accepted: Vec<&str> = EXTENSIONS.iter().map(|(e, _, _)| *e).collect();
        return Err(ReadError::Io {
            file,
            msg: format!("unknown extension: expected one of {}", accepted.join(", ")),
        });
    };
    let handle = File::open(path).map_err(|e| ReadError::Io {
        file: file.clone(),
        msg: format!("cannot open: {e}"),
    })?;
    let compressed = Arc::new(AtomicU64::new(0));
    let counted = Counting {
        inner: handle,
        count: Arc::clone(&compressed),
    };
    let stream: Box<dyn Read + Send> = match compression {
        Compression::None => Box::new(counted),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(counted)),
        Compression::Bzip2 => Box::new(bzip2::read::MultiBzDecoder::new(counted)),
    };
    let lang = language_from_file_name(path).or(options.lang.clone());
    let mut articles = Articles::new(file, format, stream, options, lang);
    articles.compressed = compressed;
    Ok(articles)
}

/// The language of a dump from its file name: the seed regex
/// `([a-z_]+)wiki.*`, searched in the file name (not the directory), leftmost
/// match, greedy. "enwiki-20170701-pages-articles.xml.bz2" → "en",
/// "dewiki-..." → "de", "simplewiki-..." → "simple", "zh_yuewiki-..." →
/// "zh_yue". `None` if nothing matches (for example "wikipedia.xml" or
/// "EnWiki.xml": the language must be lower case and come before "wiki").
pub fn language_from_file_name(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_string_lossy().into_owned();
    language_from_db_name(&name)
}

/// The regex `([a-z_]+)wiki` without the regex engine: the match lies inside
/// one maximal run of `[a-z_]`; the leftmost run holding "wiki" after at least
/// one character wins, and greediness takes the last such "wiki" in it.
fn language_from_db_name(name: &str) -> Option<String> {
    let is_class = |c: char| c.is_ascii_lowercase() || c == '_';
    name.split(|c: char| !is_class(c)).find_map(|run| {
        run.rfind("wiki")
            .filter(|&at| at > 0)
            .map(|at| run[..at].to_owned())
    })
}

/// Counts the bytes read from the file, for [`Articles::bytes_read`].
struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// The articles of a dump, in file order: an iterator of
/// `Result<Article, ReadError>`.
///
/// XML: only namespace-0 pages are returned; redirects are skipped; both are
/// counted in [`skipped`](Articles::skipped). A [`ReadError::BadPage`] is
/// returned in place of a malformed page and reading goes on; after a
/// [`ReadError::Truncated`] the iterator ends (returns `None`).
pub struct Articles {
    file: String,
    format: Format,
    input: Input,
    max: usize,
    /// From the file name or the options; `<dbname>` overrides it for XML.
    lang: Option<String>,
    skipped: Skipped,
    compressed: Arc<AtomicU64>,
    /// JSON lines: the number of the line last read.
    line: u64,
    finished: bool,
}

impl fmt::Debug for Articles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Articles")
            .field("file", &self.file)
            .field("format", &self.format)
            .field("lang", &self.lang)
            .field("skipped", &self.skipped)
            .field("decompressed_bytes", &self.input.pos)
            .field("finished", &self.finished)
            .finish()
    }
}

impl Articles {
    /// Reads articles from an already decompressed stream. `file` names the
    /// source in errors (and gives the language, as for [`open`]).
    /// [`bytes_read`](Articles::bytes_read) then counts bytes of `reader`.
    pub fn from_reader<R: Read + Send + 'static>(
        file: impl Into<String>,
        format: Format,
        reader: R,
        options: ReadOptions,
    ) -> Articles {
        let file = file.into();
        let lang = language_from_file_name(Path::new(&file)).or(options.lang.clone());
        let compressed = Arc::new(AtomicU64::new(0));
        let counted = Counting {
            inner: reader,
            count: Arc::clone(&compressed),
        };
        let mut articles = Articles::new(file, format, Box::new(counted), options, lang);
        articles.compressed = compressed;
        articles
    }

    fn new(
        file: String,
        format: Format,
        stream: Box<dyn Read + Send>,
        options: ReadOptions,
        lang: Option<String>,
    ) -> Articles {
        Articles {
            file,
            format,
            input: Input {
                r: Box::new(BufReader::with_capacity(1 << 16, stream)),
                pos: 0,
            },
            // A bound below a few bytes could not hold `<page>` itself.
            max: options.max_page_bytes.max(16),
            lang,
            skipped: Skipped::default(),
            compressed: Arc::new(AtomicU64::new(0)),
            line: 0,
            finished: false,
        }
    }

    /// Pages skipped so far (redirects, other namespaces, bad pages).
    pub fn skipped(&self) -> Skipped {
        self.skipped
    }

    /// Bytes consumed from the file so far (compressed bytes for `.bz2` and
    /// `.gz`), for a progress bar against the file size. Best effort: it runs
    /// ahead of the articles returned by up to the read buffers.
    pub fn bytes_read(&self) -> u64 {
        self.compressed.load(Ordering::Relaxed)
    }

    fn lang(&self) -> String {
        self.lang.clone().unwrap_or_else(|| "en".to_owned())
    }

    fn bad(&mut self, at: String, msg: impl Into<String>) -> ReadError {
        self.skipped.bad += 1;
        ReadError::BadPage {
            file: self.file.clone(),
            at,
            msg: msg.into(),
        }
    }

    fn truncated(&mut self, at: String, msg: impl Into<String>) -> ReadError {
        self.finished = true;
        ReadError::Truncated {
            file: self.file.clone(),
            at,
            msg: msg.into(),
        }
    }

    fn next_xml(&mut self) -> Option<Result<Article, ReadError>> {
        loop {
            let raw = match self.input.next_page(self.max) {
                Ok(raw) => raw,
                Err(Cut { at, msg }) => {
                    return Some(Err(self.truncated(format!("byte {at}"), msg)));
                }
            };
            let (at, bytes) = match raw {
                Raw::End => return None,
                Raw::DbName(name) => {
                    if let Some(lang) = language_from_db_name(&name) {
                        self.lang = Some(lang);
                    }
                    continue;
                }
                Raw::TooBig { at } => {
                    let msg = format!(
                        "page larger than {} bytes (ReadOptions::max_page_bytes)",
                        self.max
                    );
                    return Some(Err(self.bad(format!("byte {at}"), msg)));
                }
                Raw::Page { at, bytes } => (at, bytes),
            };
            let page = match parse_page(&bytes, at) {
                Ok(page) => page,
                Err((at, msg)) => return Some(Err(self.bad(format!("byte {at}"), msg))),
            };
            let here = format!("byte {at}");
            let title = match page.title {
                Some(t) if !t.trim().is_empty() => t,
                _ => return Some(Err(self.bad(here, "no <title>"))),
            };
            let Some(id) = page.id else {
                return Some(Err(self.bad(here, format!("no <id> in page {title:?}"))));
            };
            let Ok(id) = id.trim().parse::<u64>() else {
                return Some(Err(self.bad(
                    here,
                    format!("<id> {id:?} of page {title:?} is not a number"),
                )));
            };
            // Exports older than 0.5 have no <ns>: their pages are articles
            // unless titled otherwise, which we cannot tell; take them.
            let ns = match page.ns.as_deref().map(str::trim) {
                None => 0,
                Some(ns) => match ns.parse::<i64>() {
                    Ok(ns) => ns,
                    Err(_) => {
                        return Some(Err(self.bad(
                            here,
                            format!("<ns> {ns:?} of page {title:?} is not a number"),
                        )));
                    }
                },
            };
            if ns != 0 {
                self.skipped.other_namespaces += 1;
                continue;
            }
            let text = page.text.unwrap_or_default();
            if page.redirect || is_redirect_text(&text) {
                self.skipped.redirects += 1;
                continue;
            }
            return Some(Ok(Article {
                lang: self.lang(),
                id,
                title,
                timestamp: page.timestamp,
                text: strip_wikitext(&text),
            }));
        }
    }

    fn next_json(&mut self) -> Option<Result<Article, ReadError>> {
        loop {
            self.line += 1;
            let here = format!("line {}", self.line);
            let (bytes, complete) = match self.input.next_line(self.max) {
                Ok(Line::End) => return None,
                Ok(Line::TooLong) => {
                    let msg = format!(
                        "line longer than {} bytes (ReadOptions::max_page_bytes)",
                        self.max
                    );
                    return Some(Err(self.bad(here, msg)));
                }
                Ok(Line::Full { bytes, complete }) => (bytes, complete),
                Err(e) => {
                    return Some(Err(
                        self.truncated(here, format!("cannot read the stream: {e}"))
                    ));
                }
            };
            if bytes.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Some(match parse_json_line(&bytes) {
                Ok(article) => Ok(Article {
                    lang: self.lang(),
                    ..article
                }),
                // The last line, cut before its newline: the file was truncated.
                Err(e) if !complete => Err(self.truncated(
                    here,
                    format!("the last line is cut short (no newline; {e})"),
                )),
                Err(e) => Err(self.bad(here, e)),
            });
        }
    }
}

impl Iterator for Articles {
    type Item = Result<Article, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let next = match self.format {
            Format::Xml => self.next_xml(),
            Format::JsonLines => self.next_json(),
        };
        if next.is_none() {
            self.finished = true;
        }
        next
    }
}

/// Text that makes a page a redirect even without a `<redirect/>` element.
fn is_redirect_text(text: &str) -> bool {
    let t = text.trim_start().as_bytes();
    [b"#redirect".as_slice(), b"#weiterleitung".as_slice()]
        .iter()
        .any(|p| {
            t.get(..p.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(p))
        })
}

/// The input stream, with the count of (decompressed) bytes consumed.
struct Input {
    r: Box<dyn BufRead + Send>,
    pos: u64,
}

/// The stream ends early or cannot be read: where (byte offset or line) and why.
struct Cut {
    at: u64,
    msg: String,
}

enum Raw {
    Page { at: u64, bytes: Vec<u8> },
    TooBig { at: u64 },
    DbName(String),
    End,
}

enum Line {
    Full { bytes: Vec<u8>, complete: bool },
    TooLong,
    End,
}

/// The result of one bounded read: bytes appended, and whether it ended at
/// the delimiter, at the limit or at the end of the stream.
#[derive(PartialEq, Eq)]
enum Stop {
    Delim,
    Limit,
    Eof,
}

impl Input {
    /// Appends to `buf` up to and including `delim`, reading at most `limit`
    /// bytes.
    fn read_until(&mut self, delim: u8, buf: &mut Vec<u8>, limit: usize) -> io::Result<Stop> {
        let before = buf.len();
        let n = (&mut self.r).take(limit as u64).read_until(delim, buf)?;
        self.pos += n as u64;
        Ok(
            if n > 0 && buf.len() > before && buf.last() == Some(&delim) {
                Stop::Delim
            } else if n >= limit {
                Stop::Limit
            } else {
                Stop::Eof
            },
        )
    }

    /// Skips up to and including `delim` without holding more than a chunk.
    fn skip_until(&mut self, delim: u8) -> io::Result<bool> {
        let mut scratch = Vec::new();
        loop {
            scratch.clear();
            match self.read_until(delim, &mut scratch, 1 << 16)? {
                Stop::Delim => return Ok(true),
                Stop::Limit => {}
                Stop::Eof => return Ok(false),
            }
        }
    }

    fn cut(&self, e: io::Error) -> Cut {
        Cut {
            at: self.pos,
            msg: format!("cannot read the stream: {e}"),
        }
    }

    /// The next `<page>...</page>` (or the `<dbname>` seen on the way).
    fn next_page(&mut self, max: usize) -> Result<Raw, Cut> {
        let mut tag = Vec::new();
        loop {
            if !self.skip_until(b'<').map_err(|e| self.cut(e))? {
                return Err(Cut {
                    at: self.pos,
                    msg: "the XML ends before </mediawiki>".into(),
                });
            }
            let at = self.pos - 1;
            tag.clear();
            match self
                .read_until(b'>', &mut tag, MAX_TAG_BYTES)
                .map_err(|e| self.cut(e))?
            {
                Stop::Delim => {}
                Stop::Limit => continue,
                Stop::Eof => {
                    return Err(Cut {
                        at,
                        msg: "the XML ends inside a tag".into(),
                    });
                }
            }
            let name = &tag[..tag.len() - 1];
            if name == b"page" || (name.starts_with(b"page") && name[4].is_ascii_whitespace()) {
                if name.ends_with(b"/") {
                    continue; // <page/>: nothing in it
                }
                return self.rest_of_page(at, max, &tag);
            } else if name == b"dbname" {
                let mut db = Vec::new();
                if self
                    .read_until(b'<', &mut db, 256)
                    .map_err(|e| self.cut(e))?
                    == Stop::Delim
                {
                    db.pop();
                    return Ok(Raw::DbName(String::from_utf8_lossy(&db).trim().to_owned()));
                }
            } else if name == b"/mediawiki" {
                return Ok(Raw::End);
            }
        }
    }

    /// Reads a page whose opening tag (`<` + `tag`) started at byte `at`.
    fn rest_of_page(&mut self, at: u64, max: usize, tag: &[u8]) -> Result<Raw, Cut> {
        let mut buf = Vec::with_capacity(4096);
        buf.push(b'<');
        buf.extend_from_slice(tag);
        let inside = |e: io::Error, pos: u64| Cut {
            at,
            msg: format!(
                "cannot read the stream inside the page that starts here (at byte {pos}): {e}"
            ),
        };
        loop {
            for delim in [b'<', b'>'] {
                let room = max.saturating_sub(buf.len());
                let stop = if room == 0 {
                    Stop::Limit
                } else {
                    self.read_until(delim, &mut buf, room)
                        .map_err(|e| inside(e, self.pos))?
                };
                match stop {
                    Stop::Delim => {}
                    Stop::Limit => {
                        drop(buf);
                        return self.skip_page(at);
                    }
                    Stop::Eof => {
                        return Err(Cut {
                            at,
                            msg: "the input ends inside the page that starts here (no </page>)"
                                .into(),
                        });
                    }
                }
            }
            if buf.ends_with(b"</page>") {
                return Ok(Raw::Page { at, bytes: buf });
            }
        }
    }

    /// Skips the rest of a page too large to hold, up to its `</page>`.
    fn skip_page(&mut self, at: u64) -> Result<Raw, Cut> {
        let mut tag = Vec::new();
        loop {
            let found = self.skip_until(b'<').map_err(|e| self.cut(e))?;
            tag.clear();
            let stop = if found {
                self.read_until(b'>', &mut tag, 16)
                    .map_err(|e| self.cut(e))?
            } else {
                Stop::Eof
            };
            match stop {
                Stop::Delim if tag == b"/page>" => return Ok(Raw::TooBig { at }),
                Stop::Delim | Stop::Limit => {}
                Stop::Eof => {
                    return Err(Cut {
                        at,
                        msg: "the input ends inside the (oversized) page that starts here".into(),
                    });
                }
            }
        }
    }

    /// The next line of a JSON lines file, without its newline.
    fn next_line(&mut self, max: usize) -> io::Result<Line> {
        let mut bytes = Vec::new();
        // One byte more than allowed, so a line of exactly `max` bytes plus
        // its newline still fits.
        match self.read_until(b'\n', &mut bytes, max + 1)? {
            Stop::Delim => {
                bytes.pop();
                Ok(Line::Full {
                    bytes,
                    complete: true,
                })
            }
            Stop::Eof if bytes.is_empty() => Ok(Line::End),
            Stop::Eof => Ok(Line::Full {
                bytes,
                complete: false,
            }),
            Stop::Limit => {
                drop(bytes);
                self.skip_until(b'\n')?;
                Ok(Line::TooLong)
            }
        }
    }
}

/// What one `<page>` holds, before validation.
#[derive(Default)]
struct Page {
    title: Option<String>,
    ns: Option<String>,
    id: Option<String>,
    redirect: bool,
    timestamp: Option<String>,
    text: Option<String>,
}

/// Where text goes in a page, by element path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Title,
    Ns,
    Id,
    Timestamp,
    Text,
}

/// Parses one `<page>...</page>` piece that starts at byte `at` of the
/// stream. Errors give the byte offset of the problem and what it is.
fn parse_page(bytes: &[u8], at: u64) -> Result<Page, (u64, String)> {
    let mut reader = quick_xml::Reader::from_reader(bytes);
    let mut page = Page::default();
    let mut path: Vec<Vec<u8>> = Vec::new();
    let mut field: Option<(Field, String)> = None;
    loop {
        let event = reader.read_event().map_err(|e| {
            (
                at + reader.error_position(),
                format!("malformed XML in page: {e}"),
            )
        })?;
        match event {
            Event::Start(e) => {
                let name = e.local_name().as_ref().to_vec();
                if path.len() == 1 && name == b"redirect" {
                    page.redirect = true;
                }
                if path.len() == 1 && name == b"revision" {
                    // The last revision wins (full-history dumps have many).
                    page.timestamp = None;
                    page.text = None;
                }
                path.push(name);
                field = field_at(&path).map(|f| (f, String::new()));
            }
            Event::Empty(e) => {
                if path.len() == 1 && e.local_name().as_ref() == b"redirect" {
                    page.redirect = true;
                }
                if path.len() == 2 && path[1] == b"revision" && e.local_name().as_ref() == b"text" {
                    page.text = Some(String::new());
                }
            }
            Event::End(_) => {
                if let Some((f, value)) = field.take() {
                    let slot = match f {
                        Field::Title => &mut page.title,
                        Field::Ns => &mut page.ns,
                        Field::Id => &mut page.id,
                        Field::Timestamp => &mut page.timestamp,
                        Field::Text => &mut page.text,
                    };
                    *slot = Some(value);
                }
                path.pop();
            }
            Event::Text(e) => {
                if let Some((_, value)) = field.as_mut() {
                    let text = e
                        .xml10_content()
                        .map_err(|e| (at, format!("bad text: {e}")))?;
                    value.push_str(&text);
                }
            }
            Event::CData(e) => {
                if let Some((_, value)) = field.as_mut() {
                    value.push_str(&String::from_utf8_lossy(&e));
                }
            }
            Event::GeneralRef(e) => {
                if let Some((_, value)) = field.as_mut() {
                    let pos = at + reader.buffer_position();
                    match e.resolve_char_ref() {
                        Ok(Some(c)) => value.push(c),
                        Ok(None) => {
                            let name = e.decode().map_err(|e| (pos, format!("bad entity: {e}")))?;
                            let c = match name.as_ref() {
                                "amp" => '&',
                                "lt" => '<',
                                "gt" => '>',
                                "quot" => '"',
                                "apos" => '\'',
                                other => return Err((pos, format!("unknown entity &{other};"))),
                            };
                            value.push(c);
                        }
                        Err(e) => return Err((pos, format!("bad character reference: {e}"))),
                    }
                }
            }
            Event::Eof => break,
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
        }
    }
    Ok(page)
}

fn field_at(path: &[Vec<u8>]) -> Option<Field> {
    match path {
        [p, f] if p == b"page" => match f.as_slice() {
            b"title" => Some(Field::Title),
            b"ns" => Some(Field::Ns),
            b"id" => Some(Field::Id),
            _ => None,
        },
        [p, r, f] if p == b"page" && r == b"revision" => match f.as_slice() {
            b"timestamp" => Some(Field::Timestamp),
            b"text" => Some(Field::Text),
            _ => None,
        },
        _ => None,
    }
}

/// One wikiextractor JSON line. `id` is a string of digits there; a number is
/// accepted too.
#[derive(serde::Deserialize)]
struct JsonPage {
    id: serde_json::Value,
    title: String,
    text: String,
}

fn parse_json_line(bytes: &[u8]) -> Result<Article, String> {
    let page: JsonPage = serde_json::from_slice(bytes).map_err(|e| format!("bad JSON: {e}"))?;
    let id = match &page.id {
        serde_json::Value::String(s) => s.trim().parse::<u64>().ok(),
        serde_json::Value::Number(n) => n.as_u64(),
        _ => None,
    };
    let Some(id) = id else {
        return Err(format!(
            "\"id\" {} of page {:?} is not a number",
            page.id, page.title
        ));
    };
    Ok(Article {
        lang: String::new(),
        id,
        title: page.title,
        timestamp: None,
        text: page.text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_from_names() {
        let lang = |s: &str| language_from_file_name(Path::new(s));
        assert_eq!(
            lang("enwiki-20170701-pages-articles.xml.bz2").as_deref(),
            Some("en")
        );
        assert_eq!(
            lang("/data/dewiki-20170701-sample.xml.gz").as_deref(),
            Some("de")
        );
        assert_eq!(lang("simplewiki-latest.xml").as_deref(), Some("simple"));
        assert_eq!(lang("zh_yuewiki.xml").as_deref(), Some("zh_yue"));
        assert_eq!(lang("enwiki-articles-4540.jsonl.gz").as_deref(), Some("en"));
        // Leftmost run with a "wiki" after something: "wikipedia" has none.
        assert_eq!(lang("wikipedia-frwiki.xml").as_deref(), Some("fr"));
        // The directory does not count.
        assert_eq!(lang("/enwiki/articles.xml"), None);
        assert_eq!(lang("wikipedia.xml"), None);
        assert_eq!(lang("EnWiki.xml"), None);
        assert_eq!(lang("articles.jsonl"), None);
        assert_eq!(language_from_db_name("dewiki").as_deref(), Some("de"));
    }

    #[test]
    fn redirect_text() {
        assert!(is_redirect_text("#REDIRECT [[Foo]]"));
        assert!(is_redirect_text("  #redirect[[Foo]]"));
        assert!(is_redirect_text("#WEITERLEITUNG [[Köln]]"));
        assert!(!is_redirect_text("# REDIRECT"));
        assert!(!is_redirect_text("Redirect"));
        assert!(!is_redirect_text("#Re"));
    }
}

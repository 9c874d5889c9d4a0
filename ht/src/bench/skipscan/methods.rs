//! The table of `ht bench skipscan` (rows, loading) and the ways of answering its query:
//! ht's skip scan through HQL, batched single-row gets, a full scan filtered here, the key set
//! as point intervals streamed here ("today"), and SQLite through `bench/skipscan_sqlite.py`.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail, ensure};
use client::Client;
use common::Mutation;
use common::scan_spec::{ColumnSelector, QualifierMatch, RowInterval, ScanSpec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The table, in the root namespace.
pub const TABLE: &str = "/skipscan";
/// Hypertable's text layout of `ROW KEY (objectid UINT(7), fieldtype CHAR(2))`.
pub const CREATE: &str =
    "CREATE TABLE skipscan (attribid, val, ROW KEY (objectid UINT(7), fieldtype CHAR(2)))";
/// The field types of every object.
pub const FIELDTYPES: [&str; 2] = ["F1", "F2"];
/// `val` is uniform in `0..VAL_RANGE`.
const VAL_RANGE: u64 = 1_000_000;

/// The row of object `id`, field type `ft`.
pub fn row_of(id: u32, ft: &str) -> String {
    format!("{id:07} {ft}")
}

/// One row's cells, generated identically for ht and SQLite.
pub struct RowData {
    pub objectid: u32,
    pub fieldtype: &'static str,
    /// 1..=4: `A1`..`A4`.
    pub attrib: u8,
    pub val: u64,
}

/// The rows of the table in key order, from `seed`: objects `0..rows/2`, each F1 and F2.
pub fn rows(rows: u64, seed: u64) -> impl Iterator<Item = RowData> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..(rows / 2) as u32).flat_map(move |objectid| {
        FIELDTYPES
            .iter()
            .map(|ft| RowData {
                objectid,
                fieldtype: ft,
                attrib: rng.random_range(1..=4u8),
                val: rng.random_range(0..VAL_RANGE),
            })
            .collect::<Vec<_>>()
    })
}

/// Family ids of `attribid` and `val`.
#[derive(Debug, Clone, Copy)]
pub struct Families {
    pub attribid: u8,
    pub val: u8,
}

impl Families {
    pub fn of(client: &dyn Client) -> anyhow::Result<Self> {
        let s = client.table_schema(TABLE)?;
        let id = |n: &str| {
            s.family(n)
                .map(|f| f.id)
                .with_context(|| format!("{TABLE} has no family {n}"))
        };
        Ok(Self {
            attribid: id("attribid")?,
            val: id("val")?,
        })
    }
}

/// Creates the table through HQL, loads the rows with a mutator, compacts them into cell
/// stores and waits for maintenance.
pub fn create_and_load(
    client: Arc<dyn Client>,
    n: u64,
    seed: u64,
    blocksize: Option<u32>,
) -> anyhow::Result<()> {
    let mut ex = hql::exec::Executor::new(client.clone());
    let create = match blocksize {
        Some(b) => format!("{CREATE} BLOCKSIZE = {b}"),
        None => CREATE.to_string(),
    };
    let stmt = hql::parse_statement(&create)?;
    ex.execute(&stmt, &mut std::io::sink())
        .context("creating the table")?;
    let fam = Families::of(client.as_ref())?;
    let start = Instant::now();
    let mut m = client.mutator(TABLE)?;
    for r in rows(n, seed) {
        let row = row_of(r.objectid, r.fieldtype);
        m.set(Mutation::insert(
            row.clone(),
            fam.attribid,
            Vec::new(),
            format!("A{}", r.attrib),
        ))?;
        m.set(Mutation::insert(
            row,
            fam.val,
            Vec::new(),
            r.val.to_string(),
        ))?;
    }
    m.flush()?;
    let loaded = start.elapsed().as_secs_f64();
    client.wait_for_maintenance()?;
    client.compact(Some(TABLE), client::CompactionKind::Major)?;
    client.wait_for_maintenance()?;
    eprintln!(
        "  loaded {n} rows ({} cells) in {loaded:.1}s, compacted by {:.1}s",
        2 * n,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// What a query answered: rows counted and the average `val` (`None`: no rows).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Answer {
    pub count: u64,
    pub avg: Option<f64>,
}

impl Answer {
    /// True when `o` is the same answer: COUNT exactly, AVG within 1e-6 relative (SQLite and
    /// HQL format it differently).
    pub fn agrees(&self, o: &Answer) -> bool {
        self.count == o.count
            && match (self.avg, o.avg) {
                (None, None) => true,
                (Some(a), Some(b)) => (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1e-12),
                _ => false,
            }
    }

    pub fn avg_text(&self) -> String {
        self.avg
            .map_or_else(|| "NULL".into(), |a| format!("{a:.6}"))
    }

    /// Parses `COUNT AVG` (tab or space separated; AVG may be `NULL`).
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let mut w = text.split_whitespace();
        let (Some(c), Some(a)) = (w.next(), w.next()) else {
            bail!("not `COUNT AVG`: {text:?}");
        };
        Ok(Self {
            count: c.parse().with_context(|| format!("COUNT in {text:?}"))?,
            avg: match a {
                "NULL" | "None" => None,
                a => Some(a.parse().with_context(|| format!("AVG in {text:?}"))?),
            },
        })
    }
}

/// The methods, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    Skip,
    Gets1,
    Gets4,
    Scan,
    Today,
    Sqlite,
}

impl Method {
    pub const ALL: [Method; 6] = [
        Method::Skip,
        Method::Gets1,
        Method::Gets4,
        Method::Scan,
        Method::Today,
        Method::Sqlite,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Method::Skip => "skip",
            Method::Gets1 => "gets1",
            Method::Gets4 => "gets4",
            Method::Scan => "scan",
            Method::Today => "today",
            Method::Sqlite => "sqlite",
        }
    }

    pub fn parse(s: &str) -> anyhow::Result<Self> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .with_context(|| {
                format!("unknown method {s:?} (skip, gets1, gets4, scan, today, sqlite)")
            })
    }
}

/// A key set: object ids, in the order the key file lists them.
pub struct KeySet {
    pub ids: Vec<u32>,
    /// One id per line, for `objectid IN FILE` and SQLite.
    pub file: PathBuf,
}

impl KeySet {
    pub fn read(file: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let ids = text
            .lines()
            .enumerate()
            .map(|(i, l)| {
                l.trim()
                    .parse()
                    .with_context(|| format!("{}:{}: not an object id", file.display(), i + 1))
            })
            .collect::<anyhow::Result<Vec<u32>>>()?;
        Ok(Self {
            ids,
            file: file.to_path_buf(),
        })
    }

    /// The wanted rows (`id F1`) in ascending order.
    fn sorted_rows(&self) -> Vec<String> {
        let mut ids = self.ids.clone();
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter().map(|id| row_of(id, "F1")).collect()
    }
}

/// The HQL statement of the skip scan over `file`'s object ids.
pub fn skip_hql(file: &Path) -> String {
    format!(
        "SELECT COUNT(*), AVG(val) FROM skipscan WHERE objectid IN FILE \"{}\" AND fieldtype = \
         'F1' AND attribid = 'A1'",
        file.display()
    )
}

/// Runs one ht method (not SQLite) on `client`; (answer, milliseconds).
pub fn run_ht(
    method: Method,
    client: &Arc<dyn Client>,
    fam: Families,
    keys: &KeySet,
) -> anyhow::Result<(Answer, f64)> {
    let start = Instant::now();
    let answer = match method {
        Method::Skip => skip(client, &keys.file)?,
        Method::Gets1 => gets(client.as_ref(), fam, &keys.sorted_rows(), 1)?,
        Method::Gets4 => gets(client.as_ref(), fam, &keys.sorted_rows(), 4)?,
        Method::Scan => scan(client.as_ref(), fam, keys)?,
        Method::Today => today(client.as_ref(), fam, &keys.sorted_rows())?,
        Method::Sqlite => bail!("sqlite is not an ht method"),
    };
    Ok((answer, start.elapsed().as_secs_f64() * 1e3))
}

/// ht's skip scan, the user's path: the HQL statement through the executor, its one output
/// line parsed.
fn skip(client: &Arc<dyn Client>, file: &Path) -> anyhow::Result<Answer> {
    let q = skip_hql(file);
    let stmt = hql::parse_statement(&q).with_context(|| q.clone())?;
    let mut ex = hql::exec::Executor::new(client.clone());
    let mut out = Vec::new();
    ex.execute(&stmt, &mut out).with_context(|| q.clone())?;
    let text = String::from_utf8_lossy(&out);
    let line = text.lines().next().unwrap_or_default();
    Answer::parse(line).with_context(|| format!("the output of {q}"))
}

/// The newest `attribid` and `val` of the rows a scan returns, folded here: rows with
/// `attribid = A1` that `keep` accepts are counted and their `val` averaged.
struct ClientFold {
    fam: Families,
    row: Vec<u8>,
    in_row: bool,
    a1: bool,
    val: Option<i128>,
    count: u64,
    sum: i128,
    /// Rows counted with a val.
    vals: u64,
}

impl ClientFold {
    fn new(fam: Families) -> Self {
        Self {
            fam,
            row: Vec::new(),
            in_row: false,
            a1: false,
            val: None,
            count: 0,
            sum: 0,
            vals: 0,
        }
    }

    /// Adds a cell (cells in key order, newest version first: `max_versions = 1`).
    fn cell(&mut self, c: &common::Cell, keep: &impl Fn(&[u8]) -> bool) -> anyhow::Result<()> {
        if !self.in_row || self.row != c.key.row {
            self.end_row(keep);
            self.row.clear();
            self.row.extend_from_slice(&c.key.row);
            self.in_row = true;
        }
        if c.key.family == self.fam.attribid {
            self.a1 = c.value == b"A1";
        } else if c.key.family == self.fam.val {
            let v = std::str::from_utf8(&c.value)
                .ok()
                .and_then(|s| s.parse::<i128>().ok())
                .with_context(|| format!("row {:?}: val {:?}", c.key.row, c.value))?;
            self.val = Some(v);
        }
        Ok(())
    }

    fn end_row(&mut self, keep: &impl Fn(&[u8]) -> bool) {
        if self.in_row && self.a1 && keep(&self.row) {
            self.count += 1;
            if let Some(v) = self.val {
                self.sum += v;
                self.vals += 1;
            }
        }
        self.in_row = false;
        self.a1 = false;
        self.val = None;
    }

    fn merge(&mut self, o: &ClientFold) {
        self.count += o.count;
        self.sum += o.sum;
        self.vals += o.vals;
    }

    fn answer(&self) -> Answer {
        Answer {
            count: self.count,
            avg: (self.vals > 0).then(|| self.sum as f64 / self.vals as f64),
        }
    }

    fn scan(
        &mut self,
        client: &dyn Client,
        spec: ScanSpec,
        keep: &impl Fn(&[u8]) -> bool,
    ) -> anyhow::Result<()> {
        let mut s = client.scanner(TABLE, spec)?;
        while let Some(c) = s.next_cell()? {
            self.cell(&c, keep)?;
        }
        self.end_row(keep);
        Ok(())
    }
}

/// Both families, newest version only.
fn base_spec(fam: Families) -> ScanSpec {
    ScanSpec {
        columns: [fam.attribid, fam.val]
            .into_iter()
            .map(|family| ColumnSelector {
                family,
                qualifier: QualifierMatch::All,
            })
            .collect(),
        max_versions: 1,
        ..ScanSpec::default()
    }
}

/// One single-row scan per key, on `threads` threads (each a contiguous share of the sorted
/// keys); attribid tested and val averaged here.
fn gets(
    client: &dyn Client,
    fam: Families,
    rows: &[String],
    threads: usize,
) -> anyhow::Result<Answer> {
    let per = rows.len().div_ceil(threads).max(1);
    let folds = std::thread::scope(|s| {
        let handles: Vec<_> = rows
            .chunks(per)
            .map(|chunk| {
                s.spawn(move || {
                    let mut fold = ClientFold::new(fam);
                    for r in chunk {
                        let mut spec = base_spec(fam);
                        spec.row_intervals.push(RowInterval::row(r.as_bytes()));
                        fold.scan(client, spec, &|_| true)?;
                    }
                    anyhow::Ok(fold)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a gets thread panicked"))
            .collect::<anyhow::Result<Vec<_>>>()
    })?;
    let mut total = ClientFold::new(fam);
    for f in &folds {
        total.merge(f);
    }
    Ok(total.answer())
}

/// A scan of the whole table, rows kept here by a hash set of the wanted rows.
fn scan(client: &dyn Client, fam: Families, keys: &KeySet) -> anyhow::Result<Answer> {
    let wanted: HashSet<Vec<u8>> = keys
        .ids
        .iter()
        .map(|&id| row_of(id, "F1").into_bytes())
        .collect();
    let mut fold = ClientFold::new(fam);
    fold.scan(client, base_spec(fam), &|r| wanted.contains(r))?;
    Ok(fold.answer())
}

/// The path before issue 15's work: the key set as point row intervals of one scan, every
/// cell of those rows streamed here, attribid tested and val averaged here.
fn today(client: &dyn Client, fam: Families, rows: &[String]) -> anyhow::Result<Answer> {
    let mut spec = base_spec(fam);
    spec.row_intervals = rows
        .iter()
        .map(|r| RowInterval::row(r.as_bytes()))
        .collect();
    let mut fold = ClientFold::new(fam);
    if !rows.is_empty() {
        fold.scan(client, spec, &|_| true)?;
    }
    Ok(fold.answer())
}

/// `bench/skipscan_sqlite.py`, run by python3.
#[derive(Debug, Clone)]
pub struct Sqlite {
    pub script: PathBuf,
    pub db: PathBuf,
    /// SQLite's page cache, as large as ht's block cache.
    pub cache_bytes: u64,
}

impl Sqlite {
    fn command(&self, verb: &str) -> Command {
        let mut c = Command::new("python3");
        c.arg(&self.script)
            .arg(verb)
            .arg(&self.db)
            .arg(self.cache_bytes.to_string());
        c
    }

    /// Loads the TSV the ht load wrote into a fresh database.
    pub fn load(&self, tsv: &Path) -> anyhow::Result<()> {
        let _ = std::fs::remove_file(&self.db);
        let out = self
            .command("load")
            .arg(tsv)
            .output()
            .context("running python3")?;
        ensure!(
            out.status.success(),
            "{} load failed: {}",
            self.script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("  sqlite: {}", String::from_utf8_lossy(&out.stdout).trim());
        Ok(())
    }

    /// One query in a fresh python process (a cold run): (answer, ms as python timed it).
    pub fn query_once(&self, keys: &Path) -> anyhow::Result<(Answer, f64)> {
        let out = self
            .command("query")
            .arg(keys)
            .output()
            .context("running python3")?;
        ensure!(
            out.status.success(),
            "{} query failed: {}",
            self.script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        parse_timed(String::from_utf8_lossy(&out.stdout).trim())
    }

    /// A python process that keeps the database open and answers `query FILE` lines (warm
    /// runs: its page cache stays hot between queries).
    pub fn server(&self) -> anyhow::Result<SqliteServer> {
        let mut child = self
            .command("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("running python3")?;
        let stdin = child.stdin.take().context("python3's stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("python3's stdout")?);
        Ok(SqliteServer {
            child,
            stdin,
            stdout,
        })
    }
}

/// `COUNT AVG MS`.
fn parse_timed(line: &str) -> anyhow::Result<(Answer, f64)> {
    let ms = line
        .split_whitespace()
        .nth(2)
        .and_then(|m| m.parse().ok())
        .with_context(|| format!("the sqlite script printed {line:?}, not `COUNT AVG MS`"))?;
    Ok((Answer::parse(line)?, ms))
}

/// A running `skipscan_sqlite.py serve`.
pub struct SqliteServer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl SqliteServer {
    pub fn query(&mut self, keys: &Path) -> anyhow::Result<(Answer, f64)> {
        writeln!(self.stdin, "{}", keys.display())?;
        self.stdin.flush()?;
        let mut line = String::new();
        // Bounded: the script answers one short line per query.
        let n = std::io::Read::take(&mut self.stdout, 4096)
            .read_line(&mut line)
            .context("reading the sqlite script's answer")?;
        ensure!(n > 0, "the sqlite script exited");
        parse_timed(line.trim())
    }
}

impl Drop for SqliteServer {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let _ = self.child.wait();
    }
}

/// Drops every file under `dir` from the page cache (written back first: dirty pages would
/// stay).
pub fn drop_page_cache(dir: &Path) -> anyhow::Result<u64> {
    use std::os::fd::AsRawFd;
    let mut files = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let ft = e.file_type()?;
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file()
                && let Ok(f) = std::fs::File::open(e.path())
            {
                let _ = f.sync_all();
                // SAFETY: fadvise on a descriptor this function owns; it only drops cached
                // pages of the file.
                let rc =
                    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
                ensure!(
                    rc == 0,
                    "posix_fadvise({}) failed: {rc}",
                    e.path().display()
                );
                files += 1;
            }
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_agree_on_count_exactly_and_avg_within_a_millionth() {
        let a = Answer::parse("12\t500000.123456").expect("parse");
        assert!(a.agrees(&Answer::parse("12 500000.1234561").expect("parse")));
        assert!(!a.agrees(&Answer::parse("13 500000.123456").expect("parse")));
        assert!(!a.agrees(&Answer::parse("12 500001").expect("parse")));
        let none = Answer::parse("0\tNULL").expect("parse");
        assert!(none.agrees(&Answer::parse("0 None").expect("parse")));
        assert!(!none.agrees(&a));
    }

    #[test]
    fn rows_come_in_key_order_with_both_field_types() {
        let r: Vec<String> = rows(6, 1)
            .map(|r| row_of(r.objectid, r.fieldtype))
            .collect();
        assert_eq!(
            r,
            [
                "0000000 F1",
                "0000000 F2",
                "0000001 F1",
                "0000001 F2",
                "0000002 F1",
                "0000002 F2"
            ]
        );
        assert!(rows(100, 1).all(|r| (1..=4).contains(&r.attrib) && r.val < VAL_RANGE));
    }
}

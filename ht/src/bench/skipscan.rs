//! `ht bench skipscan`: Phoenix's skip-scan query answered by ht's skip scan against batched
//! gets, a full range scan, the key-set path before issue 15 and SQLite (issue 15, "Measure").
//!
//! The table is Phoenix's scaled by `--rows` (default 8M = 1/125): rows `%07objectid
//! fieldtype` (`ROW KEY (objectid UINT(7), fieldtype CHAR(2))`), objects `0..rows/2` with F1
//! and F2, families `attribid` (A1..A4) and `val` (an integer below 1,000,000), seeded. The
//! query is `SELECT COUNT(*), AVG(val) FROM t WHERE objectid IN (K ids) AND fieldtype = 'F1'
//! AND attribid = 'A1'` for K a fraction of the object ids, the same seeded key sets for every
//! method. Methods:
//! - **skip**: the HQL statement (`objectid IN FILE`) through the executor: point rows, the
//!   value predicate and the aggregate where the data is;
//! - **gets1/gets4**: one single-row scan per key on 1 or 4 threads, tested and averaged here;
//! - **scan**: the whole table streamed here and filtered by a hash set of wanted rows;
//! - **today**: the key set as point row intervals of one scan, every cell of those rows
//!   streamed here (no value predicate, no server aggregate);
//! - **sqlite**: a WITHOUT ROWID table with PRIMARY KEY (objectid, fieldtype) holding the same
//!   rows, keys in a temporary table, `IN (SELECT id FROM keys)` (`bench/skipscan_sqlite.py`).
//!
//! Every answer of every method, mode and cache state must agree (COUNT exactly, AVG to 1e-6
//! relative) or the run fails naming both. Warm: one untimed run of each method, then `--runs`
//! rounds of every method in turn (pairs). Cold: before each query the data files are dropped
//! from the page cache (posix_fadvise DONTNEED) and the query runs in a fresh process: this
//! binary re-executed with a hidden `--one-query` (embedded), fresh range servers (cluster:
//! stopped, dropped, started), a fresh python3 (SQLite). The bench prints a table per mode and
//! cache state, ratios pair by pair, draws `--chart`, appends to bench/RESULTS.md and ends with
//! one summary line per fraction, cache state and mode, e.g. `skipscan: fraction=1%
//! cache=warm mode=embedded skip_vs_gets=3.4x skip_vs_scan=12.1x skip_vs_sqlite=1.1x`
//! (skip_vs_gets against the faster of gets1 and gets4).

mod chart;
pub(super) mod methods;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use anyhow::{Context, bail, ensure};
use clap::Args;
use client::Client;
use rand::SeedableRng;
use rand::rngs::StdRng;

use methods::{Answer, Families, KeySet, Method, Sqlite};

/// Options of `ht bench skipscan`.
#[derive(Args, Debug, Clone)]
pub struct SkipscanArgs {
    /// Rows of the table (objects 0..rows/2, each F1 and F2); even.
    #[arg(long, default_value_t = 8_000_000)]
    rows: u64,
    /// Key sets as percentages of the object ids.
    #[arg(long, value_delimiter = ',', default_value = "0.025,0.1,0.3,1,3,10")]
    fractions: Vec<f64>,
    /// Timed runs per method, fraction, mode and cache state (medians of these).
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// `embedded`, `cluster` (a local cluster of `--rangeservers` range servers).
    #[arg(long, value_delimiter = ',', default_value = "embedded,cluster")]
    modes: Vec<String>,
    /// `warm` (block cache hot), `cold` (fresh process, files dropped from the page cache).
    #[arg(long, value_delimiter = ',', default_value = "warm,cold")]
    caches: Vec<String>,
    /// Methods: skip, gets1, gets4, scan, today, sqlite.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "skip,gets1,gets4,scan,today,sqlite"
    )]
    methods: Vec<String>,
    /// Methods run cold on the cluster (each cold query restarts the cluster); default: all
    /// of `--methods`.
    #[arg(long, value_delimiter = ',')]
    cluster_cold_methods: Option<Vec<String>>,
    /// Range servers of the local cluster.
    #[arg(long, default_value_t = 2)]
    rangeservers: usize,
    /// Range servers split a range past this many bytes (default: rows*4, about a third of
    /// the compacted table, whose cell stores hold about 14 bytes a row: a few ranges spread
    /// over the servers; rows*16 left the whole table one range once stores got smaller).
    #[arg(long = "split-bytes")]
    split_bytes: Option<u64>,
    /// The table's cell-store block size in bytes (`BLOCKSIZE`; default: the engine's,
    /// 64 KiB as in Hypertable). Smaller blocks make a cold key set read and inflate less.
    #[arg(long)]
    blocksize: Option<u32>,
    /// The block cache of ht (embedded and every range server) and SQLite's page cache, in MiB:
    /// "warm" means the table's blocks are in it (8M rows decompress to about 500 MiB).
    #[arg(long = "block-cache-mb", default_value_t = 1024)]
    block_cache_mb: u64,
    /// Seed of the rows and the key sets.
    #[arg(long, default_value_t = 15)]
    seed: u64,
    /// Where the data goes (default: a temporary directory under /tmp).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The chart (relative paths are taken from the repository root).
    #[arg(long, default_value = "bench/skipscan.svg")]
    chart: PathBuf,
    /// The SQLite script (relative paths are taken from the repository root).
    #[arg(long, default_value = "bench/skipscan_sqlite.py")]
    sqlite_script: PathBuf,
    /// Print the result line instead of appending it to bench/RESULTS.md.
    #[arg(long)]
    no_record: bool,
    /// Internal (cold embedded runs): open the database in `--dir`, run this one method over
    /// `--keys` and print its answer and milliseconds.
    #[arg(long, hide = true)]
    one_query: Option<String>,
    /// Internal: the key file of `--one-query`.
    #[arg(long, hide = true)]
    keys: Option<PathBuf>,
    /// With `--one-query`: run the query this many times in the one process and print each
    /// answer (the later runs are warm; for profiling one method).
    #[arg(long, default_value_t = 1)]
    repeat: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Mode {
    Embedded,
    Cluster,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Embedded => "embedded",
            Mode::Cluster => "cluster",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Cache {
    Warm,
    Cold,
}

impl Cache {
    fn name(self) -> &'static str {
        match self {
            Cache::Warm => "warm",
            Cache::Cold => "cold",
        }
    }
}

/// Milliseconds of every timed run, in run order, by (mode, cache, fraction index, method).
type Times = BTreeMap<(Mode, Cache, usize, Method), Vec<f64>>;

/// Everything the runs share.
struct Bench {
    args: SkipscanArgs,
    base: PathBuf,
    methods: Vec<Method>,
    cluster_cold: Vec<Method>,
    keysets: Vec<KeySet>,
    sqlite: Option<Sqlite>,
    /// Per fraction, the first answer and who gave it: every later one must agree.
    answers: Vec<Option<(String, Answer)>>,
    times: Times,
}

/// Runs the benchmark (or, with `--one-query`, one cold query) and reports it.
pub fn run(args: SkipscanArgs) -> anyhow::Result<()> {
    if let Some(m) = &args.one_query {
        return one_query(&args, Method::parse(m)?);
    }
    ensure!(
        args.rows >= 2 && args.rows.is_multiple_of(2) && args.rows / 2 <= u64::from(u32::MAX),
        "--rows must be even and at least 2"
    );
    ensure!(args.runs > 0, "--runs must be at least 1");
    ensure!(
        !args.fractions.is_empty()
            && args
                .fractions
                .iter()
                .all(|f| f.is_finite() && *f > 0.0 && *f <= 100.0),
        "--fractions are percentages in (0, 100]"
    );
    let parse_methods = |v: &[String]| -> anyhow::Result<Vec<Method>> {
        v.iter().map(|m| Method::parse(m)).collect()
    };
    let mut methods: Vec<Method> = parse_methods(&args.methods)?;
    methods.sort();
    methods.dedup();
    ensure!(
        methods.contains(&Method::Skip),
        "--methods must include skip (the ratios are taken against it)"
    );
    let mut cluster_cold: Vec<Method> = match &args.cluster_cold_methods {
        Some(v) => parse_methods(v)?,
        None => methods.clone(),
    };
    cluster_cold.retain(|m| methods.contains(m));
    cluster_cold.sort();
    cluster_cold.dedup();
    let mut modes = Vec::new();
    for m in &args.modes {
        modes.push(match m.as_str() {
            "embedded" => Mode::Embedded,
            "cluster" => Mode::Cluster,
            _ => bail!("unknown mode {m:?} (embedded, cluster)"),
        });
    }
    let mut caches = Vec::new();
    for c in &args.caches {
        caches.push(match c.as_str() {
            "warm" => Cache::Warm,
            "cold" => Cache::Cold,
            _ => bail!("unknown cache state {c:?} (warm, cold)"),
        });
    }
    ensure!(
        !modes.is_empty() && !caches.is_empty(),
        "no --modes or --caches"
    );
    let (base, _tmp) = super::work_dir(&args.dir, "ht-bench-skipscan-")?;
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    let base = base.canonicalize()?;
    println!(
        "ht bench skipscan: {} rows, key sets of {}% of {} object ids, {} runs, modes {}, \
         caches {}; dir={} ({})",
        args.rows,
        args.fractions
            .iter()
            .map(|f| f.to_string())
            .collect::<Vec<_>>()
            .join("%, "),
        args.rows / 2,
        args.runs,
        args.modes.join(","),
        args.caches.join(","),
        base.display(),
        super::machine()
    );
    let keysets = write_keysets(&args, &base)?;
    let sqlite = if methods.contains(&Method::Sqlite) {
        let script = super::repo_path(&args.sqlite_script);
        ensure!(
            script.exists(),
            "SQLite script {} not found (use --sqlite-script, or leave sqlite out of --methods)",
            script.display()
        );
        let ok = Command::new("python3")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        ensure!(
            ok,
            "python3 is needed for the sqlite method (or leave it out of --methods)"
        );
        let dir = base.join("sqlite");
        std::fs::create_dir_all(&dir)?;
        let s = Sqlite {
            script,
            db: dir.join("t.db"),
            cache_bytes: args.block_cache_mb << 20,
        };
        let tsv = base.join("rows.tsv");
        write_tsv(&args, &tsv)?;
        s.load(&tsv)?;
        let _ = std::fs::remove_file(&tsv);
        Some(s)
    } else {
        None
    };
    let mut bench = Bench {
        answers: vec![None; keysets.len()],
        args,
        base,
        methods,
        cluster_cold,
        keysets,
        sqlite,
        times: Times::new(),
    };
    for &mode in &modes {
        match mode {
            Mode::Embedded => bench.embedded(&caches)?,
            Mode::Cluster => bench.cluster(&caches)?,
        }
    }
    bench.report(&modes, &caches)
}

/// The key set of every fraction, written to `<base>/keys/keys-<i>.txt` in random order.
fn write_keysets(args: &SkipscanArgs, base: &Path) -> anyhow::Result<Vec<KeySet>> {
    let dir = base.join("keys");
    std::fs::create_dir_all(&dir)?;
    let ids = (args.rows / 2) as usize;
    let mut rng = StdRng::seed_from_u64(args.seed ^ 0x6b65_7973);
    args.fractions
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let k = ((f / 100.0 * ids as f64).round() as usize).clamp(1, ids);
            let picked = rand::seq::index::sample(&mut rng, ids, k);
            let file = dir.join(format!("keys-{i}.txt"));
            let mut text = String::with_capacity(k * 8);
            for id in picked.iter() {
                text.push_str(&id.to_string());
                text.push('\n');
            }
            std::fs::write(&file, text)?;
            KeySet::read(&file)
        })
        .collect()
}

/// The rows as TSV for SQLite, generated exactly as the ht load generates them.
fn write_tsv(args: &SkipscanArgs, path: &Path) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for r in methods::rows(args.rows, args.seed) {
        writeln!(
            out,
            "{}\t{}\tA{}\t{}",
            r.objectid, r.fieldtype, r.attrib, r.val
        )?;
    }
    out.flush()?;
    Ok(())
}

/// The embedded database's options: the default but for the block cache.
fn embedded_options(args: &SkipscanArgs) -> embedded::EmbeddedOptions {
    let mut o = embedded::EmbeddedOptions::default();
    o.engine.block_cache_bytes = args.block_cache_mb << 20;
    o
}

/// `--one-query`: opens the embedded database in `--dir`, runs one method, prints
/// `answer COUNT AVG MS`.
fn one_query(args: &SkipscanArgs, method: Method) -> anyhow::Result<()> {
    let dir = args.dir.as_ref().context("--one-query needs --dir")?;
    let keys = KeySet::read(args.keys.as_ref().context("--one-query needs --keys")?)?;
    let db = embedded::EmbeddedClient::open(dir, embedded_options(args))
        .with_context(|| format!("opening {}", dir.display()))?;
    let client: Arc<dyn Client> = Arc::new(db);
    let fam = Families::of(client.as_ref())?;
    for _ in 0..args.repeat.max(1) {
        let (a, ms) = methods::run_ht(method, &client, fam, &keys)?;
        println!("answer {} {} {ms:.3}", a.count, a.avg_text());
    }
    Ok(())
}

impl Bench {
    fn fraction(&self, i: usize) -> String {
        format!("{}%", self.args.fractions[i])
    }

    /// Fails unless `a` agrees with the first answer for fraction `i`.
    fn check(&mut self, i: usize, who: String, a: Answer) -> anyhow::Result<()> {
        match &self.answers[i] {
            None => self.answers[i] = Some((who, a)),
            Some((first, f)) => ensure!(
                f.agrees(&a),
                "fraction {}: {first} answered COUNT={} AVG={} but {who} answered COUNT={} \
                 AVG={} (keys in {})",
                self.fraction(i),
                f.count,
                f.avg_text(),
                a.count,
                a.avg_text(),
                self.keysets[i].file.display()
            ),
        }
        Ok(())
    }

    fn record(&mut self, mode: Mode, cache: Cache, i: usize, m: Method, ms: f64) {
        self.times.entry((mode, cache, i, m)).or_default().push(ms);
    }

    fn who(mode: Mode, cache: Cache, m: Method) -> String {
        format!("{} ({} {})", m.name(), mode.name(), cache.name())
    }

    /// One query of `m` on a database already warm or already cold.
    fn query(
        &self,
        m: Method,
        client: &Arc<dyn Client>,
        fam: Families,
        i: usize,
        sqlite: Option<&mut methods::SqliteServer>,
    ) -> anyhow::Result<(Answer, f64)> {
        match m {
            Method::Sqlite => sqlite
                .context("no SQLite server")?
                .query(&self.keysets[i].file),
            m => methods::run_ht(m, client, fam, &self.keysets[i]),
        }
    }

    /// Warm runs on `client`: per fraction one untimed run of each method, then `runs`
    /// rounds of every method in turn.
    fn warm(&mut self, mode: Mode, client: &Arc<dyn Client>) -> anyhow::Result<()> {
        let fam = Families::of(client.as_ref())?;
        let mut server = match &self.sqlite {
            Some(s) => Some(s.server()?),
            None => None,
        };
        let methods = self.methods.clone();
        for i in 0..self.keysets.len() {
            for &m in &methods {
                let (a, _) = self.query(m, client, fam, i, server.as_mut())?;
                self.check(i, format!("{} warm-up", Self::who(mode, Cache::Warm, m)), a)?;
            }
            for _ in 0..self.args.runs {
                for &m in &methods {
                    let (a, ms) = self.query(m, client, fam, i, server.as_mut())?;
                    self.check(i, Self::who(mode, Cache::Warm, m), a)?;
                    self.record(mode, Cache::Warm, i, m, ms);
                }
            }
            self.progress(mode, Cache::Warm, i);
        }
        Ok(())
    }

    fn progress(&self, mode: Mode, cache: Cache, i: usize) {
        let figures: Vec<String> = self
            .methods
            .iter()
            .filter_map(|&m| {
                let t = self.times.get(&(mode, cache, i, m))?;
                Some(format!("{} {:.1}ms", m.name(), super::median(t)))
            })
            .collect();
        eprintln!(
            "  {} {} {} ({} keys): {}",
            mode.name(),
            cache.name(),
            self.fraction(i),
            self.keysets[i].ids.len(),
            figures.join(", ")
        );
    }

    /// A cold SQLite query: its files dropped from the page cache, a fresh python3.
    fn sqlite_cold(&self, i: usize) -> anyhow::Result<(Answer, f64)> {
        let s = self.sqlite.as_ref().context("no SQLite database")?;
        let dir = s.db.parent().context("the SQLite database's directory")?;
        methods::drop_page_cache(dir)?;
        s.query_once(&self.keysets[i].file)
    }

    fn embedded(&mut self, caches: &[Cache]) -> anyhow::Result<()> {
        let dir = self.base.join("embedded");
        let _ = std::fs::remove_dir_all(&dir);
        {
            let db = embedded::EmbeddedClient::open(&dir, embedded_options(&self.args))
                .with_context(|| format!("opening {}", dir.display()))?;
            let client: Arc<dyn Client> = Arc::new(db);
            eprintln!("embedded: loading");
            methods::create_and_load(
                client.clone(),
                self.args.rows,
                self.args.seed,
                self.args.blocksize,
            )?;
            if caches.contains(&Cache::Warm) {
                self.warm(Mode::Embedded, &client)?;
            }
            client.close()?;
        }
        if !caches.contains(&Cache::Cold) {
            return Ok(());
        }
        let exe = std::env::current_exe().context("finding this binary")?;
        let methods = self.methods.clone();
        for i in 0..self.keysets.len() {
            for _ in 0..self.args.runs {
                for &m in &methods {
                    let (a, ms) = if m == Method::Sqlite {
                        self.sqlite_cold(i)?
                    } else {
                        methods::drop_page_cache(&dir)?;
                        let out = Command::new(&exe)
                            .args(["bench", "skipscan", "--one-query", m.name(), "--dir"])
                            .arg(&dir)
                            .arg("--keys")
                            .arg(&self.keysets[i].file)
                            .arg("--block-cache-mb")
                            .arg(self.args.block_cache_mb.to_string())
                            .output()
                            .context("running a cold query")?;
                        let stdout = String::from_utf8_lossy(&out.stdout);
                        ensure!(
                            out.status.success(),
                            "the cold {} query failed: {}{}",
                            m.name(),
                            stdout,
                            String::from_utf8_lossy(&out.stderr)
                        );
                        let line = stdout
                            .lines()
                            .find_map(|l| l.strip_prefix("answer "))
                            .with_context(|| format!("the cold query printed {stdout:?}"))?;
                        let ms = line
                            .split_whitespace()
                            .nth(2)
                            .and_then(|v| v.parse().ok())
                            .with_context(|| format!("no milliseconds in {line:?}"))?;
                        (Answer::parse(line)?, ms)
                    };
                    self.check(i, Self::who(Mode::Embedded, Cache::Cold, m), a)?;
                    self.record(Mode::Embedded, Cache::Cold, i, m, ms);
                }
            }
            self.progress(Mode::Embedded, Cache::Cold, i);
        }
        Ok(())
    }

    fn start_args(&self, dir: &Path) -> crate::cluster_cmd::StartArgs {
        crate::cluster_cmd::StartArgs {
            data_dir: dir.to_path_buf(),
            hyperspace: 1,
            rangeservers: self.args.rangeservers,
            masters: 1,
            dfs: None,
            chunkservers: None,
            split_bytes: Some(
                self.args
                    .split_bytes
                    .unwrap_or((self.args.rows * 4).max(256 << 10)),
            ),
            master_poll_ms: None,
            master_gc_ms: None,
            block_cache_mb: Some(self.args.block_cache_mb),
            wait_secs: 60,
        }
    }

    fn cluster(&mut self, caches: &[Cache]) -> anyhow::Result<()> {
        let dir = self.base.join("cluster");
        let _ = std::fs::remove_dir_all(&dir);
        crate::cluster_cmd::start(self.start_args(&dir))?;
        let result = self.cluster_runs(&dir, caches);
        let stopped = crate::cluster_cmd::stop(crate::cluster_cmd::DirArgs {
            data_dir: dir.clone(),
        });
        result?;
        stopped
    }

    fn cluster_runs(&mut self, dir: &Path, caches: &[Cache]) -> anyhow::Result<()> {
        {
            let client: Arc<dyn Client> = Arc::new(crate::cluster_cmd::connect(dir)?);
            eprintln!("cluster: loading");
            methods::create_and_load(
                client.clone(),
                self.args.rows,
                self.args.seed,
                self.args.blocksize,
            )?;
            spread(client.as_ref(), self.args.rangeservers)?;
            // Ranges that moved may compact where they arrived: timed queries must not share
            // the cores with that.
            client.wait_for_maintenance()?;
            if caches.contains(&Cache::Warm) {
                self.warm(Mode::Cluster, &client)?;
            }
        }
        if !caches.contains(&Cache::Cold) {
            return Ok(());
        }
        let methods = self.cluster_cold.clone();
        for i in 0..self.keysets.len() {
            for _ in 0..self.args.runs {
                for &m in &methods {
                    let (a, ms) = if m == Method::Sqlite {
                        self.sqlite_cold(i)?
                    } else {
                        crate::cluster_cmd::stop(crate::cluster_cmd::DirArgs {
                            data_dir: dir.to_path_buf(),
                        })?;
                        methods::drop_page_cache(dir)?;
                        crate::cluster_cmd::start(self.start_args(dir))?;
                        let client: Arc<dyn Client> = Arc::new(crate::cluster_cmd::connect(dir)?);
                        // Not timed: the ranges are served again (no data is read).
                        client.table_ranges(methods::TABLE)?;
                        let fam = Families::of(client.as_ref())?;
                        methods::run_ht(m, &client, fam, &self.keysets[i])?
                    };
                    self.check(i, Self::who(Mode::Cluster, Cache::Cold, m), a)?;
                    self.record(Mode::Cluster, Cache::Cold, i, m, ms);
                }
            }
            self.progress(Mode::Cluster, Cache::Cold, i);
        }
        Ok(())
    }

    /// The median of the per-run ratios `other / skip` (>1: skip is faster).
    fn ratio(&self, mode: Mode, cache: Cache, i: usize, other: Method) -> f64 {
        let (Some(s), Some(o)) = (
            self.times.get(&(mode, cache, i, Method::Skip)),
            self.times.get(&(mode, cache, i, other)),
        ) else {
            return f64::NAN;
        };
        let r: Vec<f64> = s.iter().zip(o).map(|(s, o)| o / s.max(1e-6)).collect();
        super::median(&r)
    }

    fn median_ms(&self, mode: Mode, cache: Cache, i: usize, m: Method) -> f64 {
        self.times
            .get(&(mode, cache, i, m))
            .map_or(f64::NAN, |t| super::median(t))
    }

    /// The faster (by median) of gets1 and gets4 that ran.
    fn gets(&self, mode: Mode, cache: Cache, i: usize) -> Option<Method> {
        [Method::Gets1, Method::Gets4]
            .into_iter()
            .filter(|&m| self.median_ms(mode, cache, i, m).is_finite())
            .min_by(|&a, &b| {
                self.median_ms(mode, cache, i, a)
                    .total_cmp(&self.median_ms(mode, cache, i, b))
            })
    }

    fn report(&self, modes: &[Mode], caches: &[Cache]) -> anyhow::Result<()> {
        let n = self.keysets.len();
        let mut figures = Vec::new();
        let mut summaries = Vec::new();
        let mut panels = Vec::new();
        for &mode in modes {
            for &cache in caches {
                println!();
                println!(
                    "{} {}: median ms of {} runs ({} rows)",
                    mode.name(),
                    cache.name(),
                    self.args.runs,
                    self.args.rows
                );
                let mut head = "| method |".to_string();
                let mut rule = "|---|".to_string();
                for i in 0..n {
                    head += &format!(
                        " {} ({} keys) |",
                        self.fraction(i),
                        self.keysets[i].ids.len()
                    );
                    rule += "---:|";
                }
                println!("{head}\n{rule}");
                let mut lines = Vec::new();
                for &m in &self.methods {
                    let t: Vec<f64> = (0..n).map(|i| self.median_ms(mode, cache, i, m)).collect();
                    if t.iter().all(|v| v.is_nan()) {
                        continue;
                    }
                    println!(
                        "| {} |{}",
                        m.name(),
                        t.iter()
                            .map(|v| format!(" {} |", fmt_ms(*v)))
                            .collect::<String>()
                    );
                    lines.push((m.name(), t));
                }
                println!(
                    "| COUNT |{}",
                    (0..n)
                        .map(|i| format!(
                            " {} |",
                            self.answers[i].as_ref().map_or(0, |(_, a)| a.count)
                        ))
                        .collect::<String>()
                );
                println!(
                    "| ratios (x, pair by pair) | gets1/skip, gets4/skip, scan/skip, today/skip, \
                     sqlite/skip |"
                );
                for i in 0..n {
                    let r = |m| fmt_x(self.ratio(mode, cache, i, m));
                    println!(
                        "| {} | {}, {}, {}, {}, {} |",
                        self.fraction(i),
                        r(Method::Gets1),
                        r(Method::Gets4),
                        r(Method::Scan),
                        r(Method::Today),
                        r(Method::Sqlite)
                    );
                    let gets = self.gets(mode, cache, i);
                    let gx = gets.map_or(f64::NAN, |g| self.ratio(mode, cache, i, g));
                    summaries.push(summary_line(
                        &self.fraction(i),
                        cache.name(),
                        mode.name(),
                        gx,
                        self.ratio(mode, cache, i, Method::Scan),
                        self.ratio(mode, cache, i, Method::Sqlite),
                    ));
                    figures.push(format!(
                        "{} {} {}: skip {}ms, gets {} ({}), scan {}, today {}, sqlite {}",
                        mode.name(),
                        cache.name(),
                        self.fraction(i),
                        fmt_ms(self.median_ms(mode, cache, i, Method::Skip)),
                        fmt_x(gx),
                        gets.map_or("-", Method::name),
                        r(Method::Scan),
                        r(Method::Today),
                        r(Method::Sqlite)
                    ));
                }
                panels.push(chart::Panel {
                    title: format!("{} {}", mode.name(), cache.name()),
                    fractions: self.args.fractions.clone(),
                    lines: lines
                        .into_iter()
                        .map(|(name, t)| (name.to_string(), t))
                        .collect(),
                });
            }
        }
        self.targets(modes, caches);
        let chart_path = super::repo_path(&self.args.chart);
        chart::draw(&chart_path, &panels, self.args.rows)?;
        let line = format!(
            "| {} | {} | {} | `{}` | skipscan: {} rows, {} runs, x = other/skip (gets: the faster \
             of gets1/gets4); {} |",
            super::utc_now(),
            super::git_commit(),
            super::machine(),
            super::command_line(),
            self.args.rows,
            self.args.runs,
            figures.join("; ")
        );
        if self.args.no_record {
            println!("\n{line}");
            println!("(chart {})", chart_path.display());
        } else {
            let path = super::append_result(&line)?;
            println!(
                "(medians of {} runs, ratios pair by pair; chart {}; appended to {})",
                self.args.runs,
                chart_path.display(),
                path.display()
            );
        }
        for s in summaries {
            println!("{s}");
        }
        Ok(())
    }

    /// The targets at 1% of the keys, where 1% was run.
    fn targets(&self, modes: &[Mode], caches: &[Cache]) {
        let Some(i) = self.args.fractions.iter().position(|&f| f == 1.0) else {
            return;
        };
        println!();
        for &mode in modes {
            let warm_gets = self
                .gets(mode, Cache::Warm, i)
                .map_or(f64::NAN, |g| self.ratio(mode, Cache::Warm, i, g));
            for &cache in caches {
                let gx = self
                    .gets(mode, cache, i)
                    .map_or(f64::NAN, |g| self.ratio(mode, cache, i, g));
                let sx = self.ratio(mode, cache, i, Method::Scan);
                let (gets_goal, scan_goal) = match cache {
                    Cache::Warm => (3.0, 10.0),
                    // "More than warm" for gets: at least the warm ratio, and at least 3x.
                    Cache::Cold => (warm_gets.max(3.0), 25.0),
                };
                let mut t = vec![
                    target("skip_vs_gets", gx, gets_goal),
                    target("skip_vs_scan", sx, scan_goal),
                ];
                if cache == Cache::Warm {
                    t.push(target(
                        "skip_vs_sqlite",
                        self.ratio(mode, cache, i, Method::Sqlite),
                        1.0,
                    ));
                }
                println!(
                    "targets at 1% ({} {}): {}",
                    mode.name(),
                    cache.name(),
                    t.join(", ")
                );
            }
        }
    }
}

fn target(name: &str, got: f64, goal: f64) -> String {
    if !got.is_finite() {
        return format!("{name} not measured");
    }
    let verdict = if got >= goal { "met" } else { "MISSED" };
    format!("{name}={got:.1}x (goal >= {goal:.1}x) {verdict}")
}

/// Waits (up to a minute, balancing) until the table's ranges are on `servers` range servers.
fn spread(client: &dyn Client, servers: usize) -> anyhow::Result<()> {
    let (ranges, on) = super::spread(client, methods::TABLE, servers)?;
    eprintln!(
        "  cluster: {ranges} ranges on {on} range servers{}",
        if on < servers {
            " (not spread over all: too few ranges?)"
        } else {
            ""
        }
    );
    Ok(())
}

/// `skipscan: fraction=1% cache=warm mode=embedded skip_vs_gets=3.4x skip_vs_scan=12.1x
/// skip_vs_sqlite=1.1x` (`-` for a method not run).
fn summary_line(
    fraction: &str,
    cache: &str,
    mode: &str,
    gets: f64,
    scan: f64,
    sqlite: f64,
) -> String {
    format!(
        "skipscan: fraction={fraction} cache={cache} mode={mode} skip_vs_gets={} skip_vs_scan={} \
         skip_vs_sqlite={}",
        fmt_x(gets),
        fmt_x(scan),
        fmt_x(sqlite)
    )
}

fn fmt_x(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}x")
    } else {
        "-".into()
    }
}

fn fmt_ms(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v < 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line_has_the_agreed_shape() {
        assert_eq!(
            summary_line("1%", "warm", "embedded", 3.44, 12.1, 1.06),
            "skipscan: fraction=1% cache=warm mode=embedded skip_vs_gets=3.4x skip_vs_scan=12.1x \
             skip_vs_sqlite=1.1x"
        );
        assert_eq!(
            summary_line("0.025%", "cold", "cluster", 2.0, f64::NAN, f64::NAN),
            "skipscan: fraction=0.025% cache=cold mode=cluster skip_vs_gets=2.0x skip_vs_scan=- \
             skip_vs_sqlite=-"
        );
    }
}

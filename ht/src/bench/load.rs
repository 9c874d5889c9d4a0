//! `ht bench load`: LOAD DATA INFILE of a query log (BENCH.md section 2) against the engine's
//! own write rate for the same cells.
//!
//! Each run loads the log into `/query-log` (families query, item, click_url) of a fresh embedded
//! database, then applies the same cells, in file order, in batches of 1000 directly to the
//! engine of another fresh database (the reference). Loader and reference alternate run by run;
//! the table shows medians and the median of the per-run ratios load/engine.
//!
//! With `--cluster N` the same loaders load the embedded database and a local cluster in turn,
//! and each run ends with one full scan of the table through the same client (scan rate, and a
//! check that both hold the same number of cells).

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::sync::mpsc::sync_channel;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use client::{Client, Mutation, ScanSpec, TableSchema};
use common::schema::Durability;
use embedded::{EmbeddedClient, EmbeddedOptions};
use hql::ast::{DataSource, LoadData, LoadOptions, LoadTarget};
use hql::load::{LoadContext, LoadReport, load_data};

use super::querylog::{self, HEADER};

pub(super) const TABLE: &str = "/query-log";
pub(super) const FAMILIES: [&str; 3] = ["query", "item", "click_url"];
/// Cells per engine batch in the reference run (db_bench's --batch_size).
const ENGINE_BATCH: usize = 1000;

/// Options of `ht bench load`.
#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Input files: AOL logs (5 columns, converted on the fly) or query logs in the generated
    /// format (4 columns, `#anon_id` header); `.gz` allowed. Several files load as one stream.
    #[arg(long, num_args = 1..)]
    file: Vec<PathBuf>,
    /// Without --file: generate a log of this many lines first (not timed).
    #[arg(long, default_value_t = 1_000_000)]
    lines: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The table's durability: none, log, flush or sync.
    #[arg(long, default_value = "flush")]
    durability: String,
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// Where the databases (and a generated log) go; default a temporary directory in /tmp.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Skip the engine reference runs.
    #[arg(long)]
    no_engine: bool,
    /// Also load into a local cluster of this many range servers (processes started like
    /// `ht start`; the loaders talk to them over QUIC) and compare with the embedded database.
    #[arg(long)]
    cluster: Option<usize>,
    /// Concurrent loaders (threads of this process, one generated file each) in cluster mode.
    #[arg(long, default_value_t = 1)]
    loaders: usize,
    /// Cluster mode: the range servers' split size in bytes (default the engine's, 512 MiB, so
    /// a table stays one range during a run); smaller spreads the table over the servers.
    #[arg(long)]
    split_bytes: Option<u64>,
}

/// One load run's figures.
struct Run {
    report: LoadReport,
    peak_rss_kb: Option<u64>,
    engine_cells_per_sec: Option<f64>,
}

/// Runs the benchmark.
pub fn run(args: LoadArgs) -> anyhow::Result<()> {
    let durability = Durability::parse(&args.durability)
        .with_context(|| format!("bad --durability '{}'", args.durability))?;
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if let Some(servers) = args.cluster {
        return cluster_bench(&args, servers, durability);
    }
    let (base, _tmp) = super::work_dir(&args.dir, "ht-bench-load-")?;
    std::fs::create_dir_all(&base)?;
    let files = if args.file.is_empty() {
        let p = base.join(format!("query-log-{}-{}.tsv", args.lines, args.seed));
        let start = Instant::now();
        let f = std::fs::File::create(&p)?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        querylog::generate(args.lines, args.seed, &mut w)?;
        std::io::Write::flush(&mut w)?;
        eprintln!(
            "generated {} lines in {:.1}s: {}",
            args.lines,
            start.elapsed().as_secs_f64(),
            p.display()
        );
        vec![p]
    } else {
        args.file.clone()
    };
    println!(
        "ht bench load: {} runs, durability {}, input {} ({})",
        args.runs,
        durability.name(),
        files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(" "),
        super::machine()
    );
    let mut runs = Vec::new();
    for i in 1..=args.runs {
        let dir = base.join(format!("load-{i}"));
        reset_peak_rss();
        let report = load_once(&dir, &files, durability)?;
        let peak_rss_kb = super::peak_rss_kb();
        let _ = std::fs::remove_dir_all(&dir);
        println!("run {i} load:\n{report}");
        let engine_cells_per_sec = if args.no_engine {
            None
        } else {
            let dir = base.join(format!("engine-{i}"));
            let (cells, t) = engine_once(&dir, &files, durability)?;
            let _ = std::fs::remove_dir_all(&dir);
            let rate = cells as f64 / t.as_secs_f64();
            println!(
                "run {i} engine: {cells} cells in {:.2}s of apply: {rate:.0} cells/s",
                t.as_secs_f64()
            );
            Some(rate)
        };
        runs.push(Run {
            report,
            peak_rss_kb,
            engine_cells_per_sec,
        });
    }
    report(&args, &runs)
}

/// VmHWM restarts from the current RSS (Linux `clear_refs` 5), so each run has its own peak.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn load_once(dir: &Path, files: &[PathBuf], durability: Durability) -> anyhow::Result<LoadReport> {
    let client = open_db(dir, durability)?;
    let stmt = LoadData {
        options: LoadOptions::default(),
        source: DataSource::Stdin,
        target: LoadTarget::Table(TABLE.into()),
    };
    let mut input = QueryLogReader::open(files)?;
    let ctx = LoadContext {
        client: &client,
        namespace: "/",
        progress: true,
        skip_bad_lines: false,
        stdin: Some(&mut input),
    };
    let report = load_data(ctx, &stmt)?;
    client.close()?;
    Ok(report)
}

fn open_db(dir: &Path, durability: Durability) -> anyhow::Result<EmbeddedClient> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let client = EmbeddedClient::open(dir, EmbeddedOptions::default())?;
    let mut schema = TableSchema::new(0, "");
    for f in FAMILIES {
        schema.add_family(f);
    }
    schema.durability = durability;
    client.create_table(TABLE, schema)?;
    Ok(client)
}

/// The same cells straight into the engine: a reader thread parses lines into batches, this
/// thread applies them; only the time inside `apply` counts.
fn engine_once(
    dir: &Path,
    files: &[PathBuf],
    durability: Durability,
) -> anyhow::Result<(u64, Duration)> {
    let client = open_db(dir, durability)?;
    let schema = client.table_schema(TABLE)?;
    let ids: Vec<u8> = FAMILIES
        .iter()
        .map(|f| schema.family(f).map(|s| s.id).context("family"))
        .collect::<anyhow::Result<_>>()?;
    let table_id = schema.id;
    let mut input = QueryLogReader::open(files)?;
    let (tx, rx) = sync_channel::<Vec<Mutation>>(4);
    let (cells, spent) = std::thread::scope(|s| -> anyhow::Result<(u64, Duration)> {
        let producer = s.spawn(move || -> anyhow::Result<()> {
            let mut batch = Vec::with_capacity(ENGINE_BATCH);
            let mut line = Vec::new();
            input.skip_header()?;
            loop {
                line.clear();
                if input.read_line(&mut line)? == 0 {
                    break;
                }
                let text = line.strip_suffix(b"\n").unwrap_or(&line);
                let mut f = text.split(|&b| b == b'\t');
                let row = f.next().unwrap_or_default().to_vec();
                let qualifiers: [&[u8]; 3] = [b"", b"rank", b""];
                for (i, v) in f.take(3).enumerate() {
                    if !v.is_empty() {
                        batch.push(Mutation::insert(row.clone(), ids[i], qualifiers[i], v));
                        if batch.len() == ENGINE_BATCH {
                            let full =
                                std::mem::replace(&mut batch, Vec::with_capacity(ENGINE_BATCH));
                            if tx.send(full).is_err() {
                                return Ok(());
                            }
                        }
                    }
                }
            }
            if !batch.is_empty() {
                let _ = tx.send(batch);
            }
            Ok(())
        });
        let mut cells = 0u64;
        let mut spent = Duration::ZERO;
        for batch in rx {
            let t = Instant::now();
            client.engine().apply(table_id, &batch)?;
            spent += t.elapsed();
            cells += batch.len() as u64;
        }
        producer
            .join()
            .map_err(|_| anyhow::anyhow!("the reader thread panicked"))??;
        Ok((cells, spent))
    })?;
    client.close()?;
    Ok((cells, spent))
}

/// Reads query logs as one stream in the generated format: generated files pass through,
/// AOL files (5 columns, header `AnonID...`) lose their QueryTime column and get the header.
pub(super) struct QueryLogReader {
    files: Vec<PathBuf>,
    next: usize,
    cur: Option<(Box<dyn BufRead + Send>, bool)>,
    /// Converted bytes not yet returned.
    pending: Vec<u8>,
    at: usize,
    header_sent: bool,
    line: Vec<u8>,
}

impl QueryLogReader {
    pub(super) fn open(files: &[PathBuf]) -> anyhow::Result<Self> {
        Ok(Self {
            files: files.to_vec(),
            next: 0,
            cur: None,
            pending: Vec::with_capacity(1 << 20),
            at: 0,
            header_sent: false,
            line: Vec::new(),
        })
    }

    fn skip_header(&mut self) -> std::io::Result<()> {
        let mut l = Vec::new();
        self.read_line(&mut l)?;
        Ok(())
    }

    fn read_line(&mut self, out: &mut Vec<u8>) -> std::io::Result<usize> {
        loop {
            if self.at < self.pending.len() {
                let rest = &self.pending[self.at..];
                let n = memchr_nl(rest).map_or(rest.len(), |i| i + 1);
                out.extend_from_slice(&rest[..n]);
                self.at += n;
                return Ok(n);
            }
            if !self.refill()? {
                return Ok(0);
            }
        }
    }

    /// Converts the next block of lines into `pending`; false at the end of the last file.
    fn refill(&mut self) -> std::io::Result<bool> {
        self.pending.clear();
        self.at = 0;
        if !self.header_sent {
            self.header_sent = true;
            self.pending.extend_from_slice(HEADER.as_bytes());
            self.pending.push(b'\n');
            return Ok(true);
        }
        loop {
            if self.cur.is_none() {
                let Some(path) = self.files.get(self.next) else {
                    return Ok(false);
                };
                self.next += 1;
                let mut r = querylog::open_maybe_gz(path).map_err(std::io::Error::other)?;
                let mut first = Vec::new();
                r.read_until(b'\n', &mut first)?;
                let aol = !first.starts_with(b"#");
                self.cur = Some((r, aol));
            }
            let Some((r, aol)) = self.cur.as_mut() else {
                continue;
            };
            while self.pending.len() < (1 << 20) {
                self.line.clear();
                if r.read_until(b'\n', &mut self.line)? == 0 {
                    break;
                }
                let text = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
                if *aol {
                    // AnonID Query QueryTime ItemRank ClickURL -> anon_id query item:rank click_url
                    for (i, f) in text.split(|&b| b == b'\t').enumerate() {
                        if i == 2 {
                            continue;
                        }
                        if i > 0 {
                            self.pending.push(b'\t');
                        }
                        self.pending.extend_from_slice(f);
                    }
                } else {
                    self.pending.extend_from_slice(text);
                }
                self.pending.push(b'\n');
            }
            if !self.pending.is_empty() {
                return Ok(true);
            }
            self.cur = None;
        }
    }
}

fn memchr_nl(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

impl Read for QueryLogReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at >= self.pending.len() && !self.refill()? {
            return Ok(0);
        }
        let n = buf.len().min(self.pending.len() - self.at);
        buf[..n].copy_from_slice(&self.pending[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fn report(args: &LoadArgs, runs: &[Run]) -> anyhow::Result<()> {
    let med = |f: &dyn Fn(&Run) -> Option<f64>| {
        super::median(&runs.iter().filter_map(f).collect::<Vec<_>>())
    };
    let elapsed = med(&|r| Some(r.report.elapsed.as_secs_f64()));
    let key = med(&|r| Some(r.report.avg_key_bytes()));
    let value = med(&|r| Some(r.report.avg_value_bytes()));
    let bytes = med(&|r| Some(r.report.bytes_per_sec()));
    let inserts = runs.first().map_or(0, |r| r.report.cells);
    let rate = med(&|r| Some(r.report.cells_per_sec()));
    let rss = med(&|r| r.peak_rss_kb.map(|k| k as f64 / 1024.0));
    let engine = med(&|r| r.engine_cells_per_sec);
    let ratio = med(&|r| Some(r.report.cells_per_sec() / r.engine_cells_per_sec?));
    println!();
    println!(
        "| elapsed s | avg key B | avg value B | bytes/s | total inserts | inserts/s | peak RSS MiB | engine cells/s | load/engine |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {elapsed:.2} | {key:.2} | {value:.2} | {bytes:.0} | {inserts} | {rate:.0} | {rss:.0} | {engine:.0} | {ratio:.2} |"
    );
    let line = format!(
        "| {} | {} | {} | `{}` | load: elapsed {elapsed:.2} s, avg key {key:.2} B, avg value {value:.2} B, {bytes:.0} bytes/s, {inserts} inserts, {rate:.0} inserts/s, peak RSS {rss:.0} MiB; engine {engine:.0} cells/s; load/engine {ratio:.2} |",
        super::utc_now(),
        super::git_commit(),
        super::machine(),
        super::command_line(),
    );
    let path = super::append_result(&line)?;
    println!(
        "(medians of {} runs, the ratio of each run's pair; appended to {})",
        args.runs,
        path.display()
    );
    Ok(())
}

/// Loads `files` concurrently, one loader thread per file, into [`TABLE`] of `client`; returns
/// the elapsed seconds and each loader's report.
pub(crate) fn parallel_load(
    client: &dyn Client,
    files: &[PathBuf],
) -> anyhow::Result<(f64, Vec<LoadReport>)> {
    let start = Instant::now();
    let reports = std::thread::scope(|s| -> anyhow::Result<Vec<LoadReport>> {
        let handles: Vec<_> = files
            .iter()
            .map(|file| {
                s.spawn(move || -> anyhow::Result<LoadReport> {
                    let stmt = LoadData {
                        options: LoadOptions::default(),
                        source: DataSource::Stdin,
                        target: LoadTarget::Table(TABLE.into()),
                    };
                    let mut input = QueryLogReader::open(std::slice::from_ref(file))?;
                    let ctx = LoadContext {
                        client,
                        namespace: "/",
                        progress: false,
                        skip_bad_lines: false,
                        stdin: Some(&mut input),
                    };
                    Ok(load_data(ctx, &stmt)?)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow::anyhow!("a loader panicked"))?)
            .collect()
    })?;
    Ok((start.elapsed().as_secs_f64(), reports))
}

fn table_schema(durability: Durability) -> TableSchema {
    let mut schema = TableSchema::new(0, "");
    for f in FAMILIES {
        schema.add_family(f);
    }
    schema.durability = durability;
    schema
}

/// One row of the cluster comparison.
struct ClusterRow {
    mode: String,
    elapsed_s: f64,
    cells: u64,
    per_loader: Vec<f64>,
    /// A full scan of the table after the load: seconds and cells read.
    scan_s: f64,
    scanned: u64,
}

/// Reads the whole table once, as one client; (seconds, cells).
fn full_scan(client: &dyn Client) -> anyhow::Result<(f64, u64)> {
    let start = Instant::now();
    let mut scanner = client.scanner(TABLE, ScanSpec::default())?;
    let mut cells = 0u64;
    while scanner.next_cell()?.is_some() {
        cells += 1;
    }
    Ok((start.elapsed().as_secs_f64(), cells))
}

/// `--cluster N`: the same files loaded by the same loaders into the embedded database and
/// into a local cluster of N range servers; the cluster's rate relative to the embedded one.
fn cluster_bench(args: &LoadArgs, servers: usize, durability: Durability) -> anyhow::Result<()> {
    let loaders = args.loaders.max(1);
    let (base, _tmp) = super::work_dir(&args.dir, "ht-bench-load-")?;
    std::fs::create_dir_all(&base)?;
    let mut files = Vec::new();
    for i in 0..loaders {
        let p = base.join(format!(
            "query-log-{}-{}.tsv",
            args.lines,
            args.seed + i as u64
        ));
        if !p.exists() {
            let mut w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&p)?);
            querylog::generate(args.lines, args.seed + i as u64, &mut w)?;
            std::io::Write::flush(&mut w)?;
        }
        files.push(p);
    }
    println!(
        "ht bench load --cluster {servers}: {} runs, {loaders} loaders x {} lines, durability {} ({})",
        args.runs,
        args.lines,
        durability.name(),
        super::machine()
    );
    let mut rows: Vec<ClusterRow> = Vec::new();
    for run in 1..=args.runs {
        let dir = base.join(format!("embedded-{run}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let client = EmbeddedClient::open(&dir, EmbeddedOptions::default())?;
        client.create_table(TABLE, table_schema(durability))?;
        let (elapsed_s, reports) = parallel_load(&client, &files)?;
        let (scan_s, scanned) = full_scan(&client)?;
        client.close()?;
        drop(client);
        let _ = std::fs::remove_dir_all(&dir);
        rows.push(ClusterRow {
            mode: "embedded".into(),
            elapsed_s,
            cells: reports.iter().map(|r| r.cells).sum(),
            per_loader: reports.iter().map(|r| r.cells_per_sec()).collect(),
            scan_s,
            scanned,
        });
        let dir = base.join(format!("cluster-{run}"));
        let _ = std::fs::remove_dir_all(&dir);
        crate::cluster_cmd::start(crate::cluster_cmd::StartArgs {
            data_dir: dir.clone(),
            hyperspace: 1,
            rangeservers: servers,
            masters: 1,
            dfs: None,
            chunkservers: None,
            split_bytes: args.split_bytes,
            master_poll_ms: None,
            master_gc_ms: None,
            block_cache_mb: None,
            wait_secs: 60,
        })?;
        let loaded = (|| -> anyhow::Result<(f64, Vec<LoadReport>, (f64, u64))> {
            let client = crate::cluster_cmd::connect(&dir)?;
            client.create_table(TABLE, table_schema(durability))?;
            let (elapsed_s, reports) = parallel_load(&client, &files)?;
            let scan = full_scan(&client)?;
            let locations = client.table_locations(TABLE)?;
            let servers: std::collections::BTreeSet<&str> =
                locations.iter().map(|l| l.location.as_str()).collect();
            eprintln!(
                "run {run}: the table ended as {} ranges on {} range servers",
                locations.len(),
                servers.len()
            );
            Ok((elapsed_s, reports, scan))
        })();
        let stopped = crate::cluster_cmd::stop(crate::cluster_cmd::DirArgs {
            data_dir: dir.clone(),
        });
        let (elapsed_s, reports, (scan_s, scanned)) = loaded?;
        stopped?;
        let _ = std::fs::remove_dir_all(&dir);
        rows.push(ClusterRow {
            mode: format!("cluster, {servers} range servers"),
            elapsed_s,
            cells: reports.iter().map(|r| r.cells).sum(),
            per_loader: reports.iter().map(|r| r.cells_per_sec()).collect(),
            scan_s,
            scanned,
        });
        let pair = &rows[rows.len() - 2..];
        if pair[0].scanned != pair[1].scanned {
            bail!(
                "run {run}: a full scan read {} cells from the embedded database but {} from the cluster",
                pair[0].scanned,
                pair[1].scanned
            );
        }
        for r in &rows[rows.len() - 2..] {
            eprintln!(
                "run {run} {}: {:.0} inserts/s, full scan {:.0} cells/s",
                r.mode,
                r.cells as f64 / r.elapsed_s,
                r.scanned as f64 / r.scan_s
            );
        }
    }
    let med = |mode: &str, f: &dyn Fn(&ClusterRow) -> f64| {
        super::median(
            &rows
                .iter()
                .filter(|r| r.mode == mode)
                .map(f)
                .collect::<Vec<_>>(),
        )
    };
    let modes = [
        "embedded".to_string(),
        format!("cluster, {servers} range servers"),
    ];
    let rate = |r: &ClusterRow| r.cells as f64 / r.elapsed_s;
    // Runs alternate embedded, cluster: the ratio is the median of each run's pair, so a slow
    // patch of the machine weighs on both sides of a pair.
    let pair_ratio = |f: &dyn Fn(&ClusterRow) -> f64| {
        super::median(
            &rows
                .chunks(2)
                .map(|pair| f(&pair[1]) / f(&pair[0]))
                .collect::<Vec<_>>(),
        )
    };
    let ratio = pair_ratio(&rate);
    let scan_rate = |r: &ClusterRow| r.scanned as f64 / r.scan_s;
    let scan_ratio = pair_ratio(&scan_rate);
    println!();
    println!(
        "| mode | loaders | elapsed s | inserts | inserts/s total | inserts/s per loader | ratio to embedded |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut summary = Vec::new();
    for m in &modes {
        let total = med(m, &rate);
        let per = med(m, &|r| super::median(&r.per_loader));
        let elapsed = med(m, &|r| r.elapsed_s);
        let cells = rows.iter().find(|r| &r.mode == m).map_or(0, |r| r.cells);
        let r = if m == &modes[0] { 1.0 } else { ratio };
        println!("| {m} | {loaders} | {elapsed:.2} | {cells} | {total:.0} | {per:.0} | {r:.2} |");
        let scan = med(m, &scan_rate);
        let sr = if m == &modes[0] { 1.0 } else { scan_ratio };
        summary.push(format!(
            "{m}: {total:.0} inserts/s ({per:.0} per loader, {r:.2}x embedded), full scan {scan:.0} cells/s ({sr:.2}x)"
        ));
    }
    println!();
    println!("| mode | cells scanned | scan s | cells/s | ratio to embedded |");
    println!("|---|---:|---:|---:|---:|");
    for m in &modes {
        let scanned = rows.iter().find(|r| &r.mode == m).map_or(0, |r| r.scanned);
        let secs = med(m, &|r| r.scan_s);
        let scan = med(m, &scan_rate);
        let sr = if m == &modes[0] { 1.0 } else { scan_ratio };
        println!("| {m} | {scanned} | {secs:.2} | {scan:.0} | {sr:.2} |");
    }
    let line = format!(
        "| {} | {} | {} | `{}` | load --cluster: {loaders} loaders x {} lines; {} |",
        super::utc_now(),
        super::git_commit(),
        super::machine(),
        super::command_line(),
        args.lines,
        summary.join("; ")
    );
    let path = super::append_result(&line)?;
    println!(
        "(medians of {} runs, the ratio of each run's pair; appended to {})",
        args.runs,
        path.display()
    );
    Ok(())
}

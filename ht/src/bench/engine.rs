//! `ht bench engine`: the range server engine against RocksDB's db_bench on the same workloads.
//!
//! Both sides write 8-byte big-endian keys (db_bench's binary key format) with 16-byte values in
//! batches of 1000 from one thread, then read them back, overwrite them, and read while a second
//! thread writes. ht runs and RocksDB runs (`bench/db_bench.sh`) alternate pair by pair; the table
//! shows medians and the median of the per-pair ratios, and the write amplification of the
//! fillrandom database (bytes written to the file system per byte of user data: ht's commit log,
//! cell stores and meta log; RocksDB's write-ahead log, flushes and compactions).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use common::schema::{Durability, TableSchema};
use dfs_broker::{Fs, LocalFs};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rangeserver::engine::{Engine, EngineOptions, MutationRef};
use rangeserver::scan::spec::{RowInterval, ScanSpec};

use super::dfs::counting::{Counters, Counting, Kind};

/// The workloads in table order; the names are db_bench's (plus the script's `_sync` suffix).
pub const WORKLOADS: [&str; 7] = [
    "fillrandom",
    "fillseq",
    "fillrandom_sync",
    "overwrite",
    "readseq",
    "readrandom",
    "readwhilewriting",
];

/// The key of the write amplification in [`Figures`] (not ops/s: lower is better).
const WRITE_AMP: &str = "write_amplification";
/// Bytes of user data per cell: the key and the value, as RocksDB's `rocksdb.bytes.written`.
const USER_BYTES_PER_CELL: u64 = 8 + VALUE_BYTES as u64;

/// Cells per `apply`, as db_bench's `--batch_size=1000`.
const BATCH: usize = 1000;
const VALUE_BYTES: usize = 16;
const TABLE_ID: u32 = 1;
/// Point reads are capped like this so that a large N does not make the run hours long.
const MAX_READS: u64 = 1_000_000;

/// Options of `ht bench engine`.
#[derive(Args, Debug)]
pub struct EngineArgs {
    /// Keys per workload (the key space is 0..N).
    #[arg(long, default_value_t = 1_000_000)]
    num: u64,
    /// ht/RocksDB pairs of runs.
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// Where the data goes (default: a temporary directory under /tmp).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Run only the ht side.
    #[arg(long)]
    no_rocksdb: bool,
    /// The RocksDB side (`NUM READS DIR` -> `<workload> <ops/s>` lines and
    /// `write_amplification <x>`), relative to the repository root.
    #[arg(long, default_value = "bench/db_bench.sh")]
    rocksdb_script: PathBuf,
    /// Cell-store block size of the ht table, in bytes: db_bench's `--block_size` default (4
    /// KiB), where ht's own default is Hypertable's 64 KiB, a size for scans.
    #[arg(long, default_value_t = 4096)]
    blocksize: u32,
    /// The engine's `max_stores_per_group` (default: the engine's own, 6): more overlapping
    /// stores than this in a group start a merge. Lower costs writes, higher costs scans.
    #[arg(long)]
    max_stores: Option<usize>,
    /// Only these workloads of the ht side, comma-separated (db_bench's names; the reads still
    /// run on a database made by fillrandom); needs `--no-rocksdb`. Default: all.
    #[arg(long, value_delimiter = ',')]
    benchmarks: Vec<String>,
    /// Seed of the random key orders.
    #[arg(long, default_value_t = 301)]
    seed: u64,
    /// Print the result line instead of appending it to bench/RESULTS.md.
    #[arg(long)]
    no_record: bool,
}

/// Ops/s per workload from one run of one side.
type Figures = HashMap<String, f64>;

/// Runs the benchmark and reports it.
pub fn run(args: EngineArgs) -> anyhow::Result<()> {
    if args.num == 0 || args.runs == 0 {
        bail!("--num and --runs must be at least 1");
    }
    let (base, _tmp) = super::work_dir(&args.dir, "ht-bench-")?;
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    if let Some(w) = args
        .benchmarks
        .iter()
        .find(|w| !WORKLOADS.contains(&w.as_str()))
    {
        bail!(
            "unknown workload {w:?} in --benchmarks (known: {})",
            WORKLOADS.join(", ")
        );
    }
    if !args.benchmarks.is_empty() && !args.no_rocksdb {
        bail!("--benchmarks picks workloads of the ht side only: add --no-rocksdb");
    }
    if !args.no_rocksdb && !args.rocksdb_script.exists() {
        bail!(
            "RocksDB script {} not found (use --rocksdb-script or --no-rocksdb)",
            args.rocksdb_script.display()
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    println!(
        "ht bench engine: N={} runs={} dir={} ({})",
        args.num,
        args.runs,
        base.display(),
        super::machine()
    );
    let mut ht_runs: Vec<Figures> = Vec::new();
    let mut rdb_runs: Vec<Figures> = Vec::new();
    for run in 1..=args.runs {
        let ht = run_ht(&args, &base.join(format!("ht-{run}")), &rt)?;
        println!("run {run} ht:      {}", format_figures(&ht));
        ht_runs.push(ht);
        if !args.no_rocksdb {
            let rdb = run_rocksdb(&args, &base.join(format!("rocksdb-{run}")))?;
            println!("run {run} RocksDB: {}", format_figures(&rdb));
            rdb_runs.push(rdb);
        }
    }
    report(&args, &ht_runs, &rdb_runs)?;
    match super::peak_rss_kb() {
        Some(kb) => println!("peak RSS (ht process): {:.1} MiB", kb as f64 / 1024.0),
        None => println!("peak RSS: unknown"),
    }
    Ok(())
}

fn format_figures(f: &Figures) -> String {
    let mut parts: Vec<String> = WORKLOADS
        .iter()
        .filter_map(|w| f.get(*w).map(|v| format!("{w}={v:.0}")))
        .collect();
    if let Some(w) = f.get(WRITE_AMP) {
        parts.push(format!("{WRITE_AMP}={w:.2}"));
    }
    parts.join(" ")
}

/// Prints the table and appends the line to bench/RESULTS.md.
fn report(args: &EngineArgs, ht: &[Figures], rdb: &[Figures]) -> anyhow::Result<()> {
    println!();
    println!("| workload | ht ops/s | RocksDB ops/s | ht/RocksDB |");
    println!("|---|---:|---:|---:|");
    let mut figures = Vec::new();
    for w in WORKLOADS {
        let h: Vec<f64> = ht.iter().filter_map(|f| f.get(w).copied()).collect();
        let r: Vec<f64> = rdb.iter().filter_map(|f| f.get(w).copied()).collect();
        let ratios: Vec<f64> = ht
            .iter()
            .zip(rdb)
            .filter_map(|(a, b)| Some(a.get(w)? / b.get(w)?))
            .collect();
        let (hm, rm, xm) = (super::median(&h), super::median(&r), super::median(&ratios));
        println!(
            "| {w} | {} | {} | {} |",
            fmt_ops(hm),
            fmt_ops(rm),
            fmt_ratio(xm)
        );
        figures.push(format!(
            "{w} {}/{} ({})",
            fmt_ops(hm),
            fmt_ops(rm),
            fmt_ratio(xm)
        ));
    }
    let h: Vec<f64> = ht
        .iter()
        .filter_map(|f| f.get(WRITE_AMP).copied())
        .collect();
    let r: Vec<f64> = rdb
        .iter()
        .filter_map(|f| f.get(WRITE_AMP).copied())
        .collect();
    let (hm, rm) = (super::median(&h), super::median(&r));
    let x = if hm.is_finite() && rm.is_finite() && rm > 0.0 {
        hm / rm
    } else {
        f64::NAN
    };
    println!(
        "| write amplification (lower is better) | {} | {} | {} |",
        fmt_ratio(hm),
        fmt_ratio(rm),
        fmt_ratio(x)
    );
    figures.push(format!(
        "write amplification {}/{} ({})",
        fmt_ratio(hm),
        fmt_ratio(rm),
        fmt_ratio(x)
    ));
    let line = format!(
        "| {} | {} | {} | `{}` | {} |",
        super::utc_now(),
        super::git_commit(),
        super::machine(),
        super::command_line(),
        figures.join("; ")
    );
    if args.no_record {
        println!("(medians of {} runs)\n{line}", args.runs);
    } else {
        let path = super::append_result(&line)?;
        println!(
            "(medians of {} runs; appended to {})",
            args.runs,
            path.display()
        );
    }
    Ok(())
}

fn fmt_ops(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.0}")
    } else {
        "-".into()
    }
}

fn fmt_ratio(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}")
    } else {
        "-".into()
    }
}

/// One run of the RocksDB script; parses its `<workload> <ops_per_sec>` lines.
fn run_rocksdb(args: &EngineArgs, dir: &Path) -> anyhow::Result<Figures> {
    let out = Command::new("bash")
        .arg(&args.rocksdb_script)
        .arg(args.num.to_string())
        .arg(args.num.min(MAX_READS).to_string())
        .arg(dir)
        .output()
        .with_context(|| format!("running {}", args.rocksdb_script.display()))?;
    if !out.status.success() {
        bail!(
            "{} failed: {}",
            args.rocksdb_script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(dir);
    let mut f = Figures::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut it = line.split_whitespace();
        if let (Some(w), Some(v)) = (it.next(), it.next())
            && let Ok(v) = v.parse::<f64>()
        {
            f.insert(w.to_string(), v);
        }
    }
    Ok(f)
}

/// One run of every workload on ht, grouped as the RocksDB script groups them: fillrandom then
/// the reads on one database, fillseq on a fresh one, fillrandom_sync on a fresh one.
fn run_ht(args: &EngineArgs, dir: &Path, rt: &tokio::runtime::Runtime) -> anyhow::Result<Figures> {
    let mut f = Figures::new();
    let mut rng = StdRng::seed_from_u64(args.seed);
    let values = ValueGen::new(&mut rng);
    let n = args.num;

    let want = |w: &str| args.benchmarks.is_empty() || args.benchmarks.iter().any(|b| b == w);
    let reads = ["readseq", "readrandom", "overwrite", "readwhilewriting"];
    if want("fillrandom") || reads.iter().any(|w| want(w)) {
        run_ht_random(args, dir, rt, &mut rng, &values, &want, &mut f)?;
    }
    if want("fillseq") {
        let counters = Arc::new(Counters::default());
        let db = HtDb::open(
            &dir.join("b"),
            rt,
            Durability::Flush,
            args,
            Some(counters.clone()),
        )?;
        let keys: Vec<u64> = (0..n).collect();
        let t = db.fill(&keys, &values)?;
        f.insert("fillseq".into(), n as f64 / t.as_secs_f64());
        let s = db.engine.stats();
        eprintln!(
            "  ht fillseq: {:.2}s; {} minor, {} merging, {} major compactions, {} splits, {} stores, {} ranges; {}",
            t.as_secs_f64(),
            s.minor_compactions,
            s.merging_compactions,
            s.major_compactions,
            s.splits,
            s.stores,
            s.ranges,
            written_by_kind(&counters)
        );
        db.close()?;
    }
    if want("fillrandom_sync") {
        let db = HtDb::open(&dir.join("c"), rt, Durability::Sync, args, None)?;
        let keys: Vec<u64> = (0..n).map(|_| rng.random_range(0..n)).collect();
        let t = db.fill(&keys, &values)?;
        f.insert("fillrandom_sync".into(), n as f64 / t.as_secs_f64());
        db.close()?;
    }
    let _ = std::fs::remove_dir_all(dir);
    Ok(f)
}

/// fillrandom and the workloads on its database (those `want` names), as the RocksDB script's
/// first two db_bench runs; the write amplification when all ran.
fn run_ht_random(
    args: &EngineArgs,
    dir: &Path,
    rt: &tokio::runtime::Runtime,
    rng: &mut StdRng,
    values: &ValueGen,
    want: &dyn Fn(&str) -> bool,
    f: &mut Figures,
) -> anyhow::Result<()> {
    let n = args.num;
    let counters = Arc::new(Counters::default());
    let db = HtDb::open(
        &dir.join("a"),
        rt,
        Durability::Flush,
        args,
        Some(counters.clone()),
    )?;
    let keys: Vec<u64> = (0..n).map(|_| rng.random_range(0..n)).collect();
    let t = db.fill(&keys, values)?;
    if want("fillrandom") {
        f.insert("fillrandom".into(), n as f64 / t.as_secs_f64());
    }
    let drain = Instant::now();
    db.engine.wait_for_maintenance();
    let drain = drain.elapsed();
    let s = db.engine.stats();
    eprintln!(
        "  ht fillrandom: {:.2}s, then {:.2}s draining maintenance; {} minor, {} merging, {} major compactions, {} stores, {} ranges",
        t.as_secs_f64(),
        drain.as_secs_f64(),
        s.minor_compactions,
        s.merging_compactions,
        s.major_compactions,
        s.stores,
        s.ranges
    );
    if want("readseq") {
        let (cells, t) = db.readseq()?;
        f.insert("readseq".into(), cells as f64 / t.as_secs_f64());
        eprintln!("  ht readseq {cells} cells");
    }
    let reads: Vec<u64> = (0..n.min(MAX_READS))
        .map(|_| rng.random_range(0..n))
        .collect();
    if want("readrandom") {
        let before = db.engine.stats();
        let (found, t) = db.readrandom(&reads)?;
        let after = db.engine.stats();
        f.insert("readrandom".into(), reads.len() as f64 / t.as_secs_f64());
        eprintln!(
            "  ht readrandom {found} of {} found, block cache {} hits {} misses",
            reads.len(),
            after.block_cache_hits - before.block_cache_hits,
            after.block_cache_misses - before.block_cache_misses
        );
    }
    if !want("overwrite") && !want("readwhilewriting") {
        return db.close();
    }
    let keys: Vec<u64> = (0..n).map(|_| rng.random_range(0..n)).collect();
    let t = db.fill(&keys, values)?;
    if want("overwrite") {
        f.insert("overwrite".into(), n as f64 / t.as_secs_f64());
    }
    if !want("readwhilewriting") {
        return db.close();
    }
    let reads: Vec<u64> = (0..n.min(MAX_READS))
        .map(|_| rng.random_range(0..n))
        .collect();
    let (found, written, t) = db.read_while_writing(&reads, n, values, rng.random())?;
    f.insert(
        "readwhilewriting".into(),
        reads.len() as f64 / t.as_secs_f64(),
    );
    db.close()?;
    let user = (2 * n + written) * USER_BYTES_PER_CELL;
    let wrote: u64 = counters.snapshot().iter().map(|k| k.bytes_written).sum();
    eprintln!(
        "  ht readwhilewriting {found} of {} found while {written} cells were written one at a time; {} for {:.1} MiB of user data",
        reads.len(),
        written_by_kind(&counters),
        user as f64 / 1048576.0
    );

    if want("fillrandom") && want("overwrite") {
        f.insert(WRITE_AMP.into(), wrote as f64 / user as f64);
    }
    Ok(())
}

/// What `counters` saw written, in all and by kind of file, in MiB.
fn written_by_kind(counters: &Counters) -> String {
    let kinds = counters.snapshot();
    let mib = |b: u64| b as f64 / 1048576.0;
    format!(
        "{:.1} MiB written ({})",
        mib(kinds.iter().map(|k| k.bytes_written).sum()),
        Kind::ALL
            .iter()
            .zip(&kinds)
            .map(|(k, s)| format!("{} {:.1}", k.name(), mib(s.bytes_written)))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Compressible 16-byte values, like db_bench's default `--compression_ratio=0.5`: each value is
/// 8 random bytes repeated once.
struct ValueGen {
    pool: Vec<u8>,
}

impl ValueGen {
    const POOL_VALUES: usize = 1 << 14;

    fn new(rng: &mut StdRng) -> Self {
        let mut pool = Vec::with_capacity(Self::POOL_VALUES * VALUE_BYTES);
        for _ in 0..Self::POOL_VALUES {
            let half: [u8; VALUE_BYTES / 2] =
                std::array::from_fn(|_| rng.random_range(b' '..=b'~'));
            pool.extend_from_slice(&half);
            pool.extend_from_slice(&half);
        }
        Self { pool }
    }

    fn value(&self, i: u64) -> &[u8] {
        let at = (i as usize % Self::POOL_VALUES) * VALUE_BYTES;
        &self.pool[at..at + VALUE_BYTES]
    }
}

/// One engine with one table (one family, one version per cell, as a key-value store).
struct HtDb {
    engine: Engine,
    dir: PathBuf,
    family: u8,
}

impl HtDb {
    /// A fresh database in `dir`; with `counters`, what it writes to the file system is counted.
    fn open(
        dir: &Path,
        rt: &tokio::runtime::Runtime,
        durability: Durability,
        args: &EngineArgs,
        counters: Option<Arc<Counters>>,
    ) -> anyhow::Result<Self> {
        let _ = std::fs::remove_dir_all(dir);
        let mut fs: Arc<dyn Fs> = Arc::new(LocalFs::new(dir)?);
        if let Some(counters) = counters {
            fs = Arc::new(Counting { fs, counters });
        }
        let mut opts = EngineOptions::default();
        if let Some(m) = args.max_stores {
            opts.max_stores_per_group = m;
        }
        let engine = Engine::open(fs, "/ht", opts, rt.handle().clone())?;
        let mut schema = TableSchema::new(TABLE_ID, "/bench");
        let family = schema.add_family("v");
        schema.families[0].max_versions = 1;
        for g in &mut schema.access_groups {
            g.blocksize_bytes = args.blocksize;
        }
        schema.durability = durability;
        engine.create_table(schema)?;
        Ok(Self {
            engine,
            dir: dir.to_path_buf(),
            family,
        })
    }

    /// Writes one cell per key in batches of [`BATCH`]; returns the time the writes took.
    fn fill(&self, keys: &[u64], values: &ValueGen) -> anyhow::Result<Duration> {
        let start = Instant::now();
        let mut rows: Vec<[u8; 8]> = Vec::with_capacity(BATCH);
        for (i, chunk) in keys.chunks(BATCH).enumerate() {
            // Borrowed cells, as db_bench's WriteBatch holds its keys in one buffer.
            rows.clear();
            rows.extend(chunk.iter().map(|k| k.to_be_bytes()));
            let mut batch: Vec<MutationRef<'_>> = Vec::with_capacity(BATCH);
            for (j, row) in rows.iter().enumerate() {
                let v = values.value((i * BATCH + j) as u64);
                batch.push(MutationRef::insert(row, self.family, &[], v));
            }
            self.engine.apply(TABLE_ID, &batch)?;
        }
        Ok(start.elapsed())
    }

    /// Scans the whole table; returns the cells seen and the time taken.
    fn readseq(&self) -> anyhow::Result<(u64, Duration)> {
        let start = Instant::now();
        let mut bytes = 0usize;
        let cells = self
            .engine
            .scan(TABLE_ID, &ScanSpec::default())?
            .for_each_raw(|k, v| bytes += k.len() + v.len())?;
        std::hint::black_box(bytes);
        Ok((cells, start.elapsed()))
    }

    /// One single-row scan per key; returns how many keys were found and the time taken.
    fn readrandom(&self, keys: &[u64]) -> anyhow::Result<(u64, Duration)> {
        let start = Instant::now();
        let mut spec = ScanSpec::default();
        let mut found = 0;
        for k in keys {
            spec.row_intervals.clear();
            spec.row_intervals
                .push(RowInterval::row(k.to_be_bytes().to_vec()));
            let mut bytes = 0usize;
            let n = self
                .engine
                .scan(TABLE_ID, &spec)?
                .for_each_raw(|_, v| bytes += v.len())?;
            std::hint::black_box(bytes);
            found += u64::from(n > 0);
        }
        Ok((found, start.elapsed()))
    }

    /// Point reads of `keys` while another thread writes random keys of `0..space` one at a
    /// time, as db_bench's readwhilewriting; returns the keys found, the cells written and the
    /// reads' time.
    fn read_while_writing(
        &self,
        keys: &[u64],
        space: u64,
        values: &ValueGen,
        seed: u64,
    ) -> anyhow::Result<(u64, u64, Duration)> {
        let stop = std::sync::atomic::AtomicBool::new(false);
        let n = space.max(1);
        std::thread::scope(|scope| {
            let writer = std::thread::Builder::new()
                .name("bench-writer".into())
                .spawn_scoped(scope, || -> anyhow::Result<u64> {
                    let mut rng = StdRng::seed_from_u64(seed);
                    let mut written = 0u64;
                    // One cell per write, as db_bench's writer makes one Put per key.
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let row = rng.random_range(0..n).to_be_bytes();
                        let cell =
                            MutationRef::insert(&row, self.family, &[], values.value(written));
                        self.engine.apply(TABLE_ID, &[cell])?;
                        written += 1;
                    }
                    Ok(written)
                })?;
            let read = self.readrandom(keys);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            let written = writer
                .join()
                .map_err(|_| anyhow::anyhow!("the readwhilewriting writer panicked"))??;
            let (found, t) = read?;
            Ok((found, written, t))
        })
    }

    fn close(self) -> anyhow::Result<()> {
        self.engine.wait_for_maintenance();
        self.engine.close()?;
        drop(self.engine);
        let _ = std::fs::remove_dir_all(&self.dir);
        Ok(())
    }
}

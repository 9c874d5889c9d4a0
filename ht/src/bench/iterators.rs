//! `ht bench iterators`: combiner families against RocksDB's merge operator, and value
//! predicates run in the range servers against filtering in the client (issue 14, "Measure").
//!
//! - **sum ingest and reads**: increments (8-byte big-endian 1s) to random keys of a small key
//!   space, in batches of 1000 with the commit log on (durability `flush`), into an embedded
//!   engine whose one family is `COMBINER sum(ENCODING = 'fixed64')`; then random point reads
//!   of the merged values, each checked against the increments written to its key (and a
//!   full scan checks every key). Beside it, `bench/rocksdb-merge.sh` runs db_bench's
//!   `mergerandom` (`uint64add`) and `readrandom` with the same key count, merge count, reads
//!   and WAL setting. Pairs alternate ht, RocksDB; ratios are taken pair by pair.
//! - **filtered cluster scan**: a local cluster (`ht start`: processes on loopback) holds a
//!   table where 1% of the cells carry the value a predicate asks for; a scan with the
//!   predicate in `ScanSpec.value_predicates` (filtered in the range servers) against a scan of
//!   everything filtered here, as the HQL executor did before: elapsed time and the key and
//!   value bytes that reached the client. One uncounted scan first warms the range server's
//!   caches for both.
//!
//! The last line is the summary, e.g. `iterators: sum_ingest_vs_rocksdb=1.8x
//! sum_read_vs_rocksdb=1.6x filter_scan_speedup=7.2x` (>1 means ht, or the server-side
//! filter, is faster).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use clap::Args;
use common::iterators::{CombinerSpec, IterOptions, ValuePredicate, ValuePredicates, ValueTest};
use common::key::KEY_SUFFIX_LEN;
use common::scan_spec::{ColumnSelector, QualifierMatch, RowInterval, ScanSpec};
use common::schema::{Durability, TableSchema};
use common::{Cell, Mutation};
use dfs_broker::{Fs, LocalFs};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rangeserver::engine::{Engine, EngineOptions, MutationRef};

/// Increments per `apply`, as db_bench's `--batch_size=1000`.
const BATCH: usize = 1000;
const TABLE_ID: u32 = 1;
/// The cluster table of the filtered scan.
const SCAN_TABLE: &str = "/filter_bench";
/// Cells of the scan table per match: 1% of the cells pass the predicate.
const MATCH_EVERY: u64 = 100;

/// Options of `ht bench iterators`.
#[derive(Args, Debug)]
pub struct IteratorsArgs {
    /// Distinct keys the increments go to (db_bench `--num`).
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    /// Increments written (db_bench `mergerandom`'s `--writes`).
    #[arg(long, default_value_t = 10_000_000)]
    merges: u64,
    /// Random point reads of merged values after the increments.
    #[arg(long, default_value_t = 100_000)]
    reads: u64,
    /// Declare the sum family APPEND_ONLY, so that minor and merging compactions combine too.
    #[arg(long)]
    append_only: bool,
    /// Cells of the table the filtered cluster scan reads (1 in 100 matches).
    #[arg(long, default_value_t = 1_000_000)]
    scan_cells: u64,
    /// Bytes of each value of the scan table.
    #[arg(long, default_value_t = 100)]
    scan_value_bytes: usize,
    /// Range servers of the local cluster.
    #[arg(long, default_value_t = 1)]
    rangeservers: usize,
    /// Range servers split a range once it holds more than this many bytes (default: the
    /// engine's 512 MiB, so the scan table stays one range).
    #[arg(long = "split-bytes")]
    split_bytes: Option<u64>,
    /// ht/RocksDB pairs, and server/client pairs of filtered scans.
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// A small size for a smoke run: 1,000 keys, 200,000 increments, 10,000 reads, a scan of
    /// 20,000 cells, one run of each.
    #[arg(long)]
    quick: bool,
    /// Where the data goes (default: a temporary directory under /tmp).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Run only ht's side of the sum comparison.
    #[arg(long)]
    no_rocksdb: bool,
    /// Skip the filtered cluster scan.
    #[arg(long)]
    no_cluster: bool,
    /// Skip the sum comparison (only the filtered cluster scan).
    #[arg(long)]
    no_sum: bool,
    /// Print the result line instead of appending it to bench/RESULTS.md.
    #[arg(long)]
    no_record: bool,
    /// The RocksDB script (relative paths are taken from the repository root).
    #[arg(long, default_value = "bench/rocksdb-merge.sh")]
    rocksdb_script: PathBuf,
    /// Seed of the random keys.
    #[arg(long, default_value_t = 301)]
    seed: u64,
    /// Server-side filtered scans to run after the pairs, not counted (a window to profile
    /// the range server in).
    #[arg(long, default_value_t = 0)]
    extra_server_scans: u32,
}

impl IteratorsArgs {
    /// `--quick` applied.
    fn sized(mut self) -> Self {
        if self.quick {
            self.keys = 1_000;
            self.merges = 200_000;
            self.reads = 10_000;
            self.scan_cells = 20_000;
            self.runs = 1;
        }
        self
    }
}

/// Ops/s of one run of the sum workloads.
#[derive(Debug, Clone, Copy)]
struct SumRun {
    ingest: f64,
    read: f64,
}

/// One filtered scan.
#[derive(Debug, Clone, Copy)]
struct ScanRun {
    secs: f64,
    /// Key and value bytes of the cells that reached the client.
    bytes: u64,
    /// Cells that reached the client.
    cells: u64,
    /// Cells that passed the predicate.
    matches: u64,
}

/// Runs the benchmark and reports it.
pub fn run(args: IteratorsArgs) -> anyhow::Result<()> {
    let args = args.sized();
    ensure!(
        args.keys > 0 && args.merges > 0 && args.reads > 0 && args.runs > 0,
        "--keys, --merges, --reads and --runs must be at least 1"
    );
    ensure!(
        args.no_cluster || (args.scan_cells >= MATCH_EVERY && args.rangeservers > 0),
        "--scan-cells must be at least {MATCH_EVERY} and --rangeservers at least 1"
    );
    ensure!(
        args.scan_value_bytes >= KEEP_PREFIX.len(),
        "--scan-value-bytes must be at least {}",
        KEEP_PREFIX.len()
    );
    let script = super::repo_path(&args.rocksdb_script);
    if !args.no_sum && !args.no_rocksdb && !script.exists() {
        bail!(
            "RocksDB script {} not found (use --rocksdb-script or --no-rocksdb)",
            script.display()
        );
    }
    let (base, _tmp) = super::work_dir(&args.dir, "ht-bench-iterators-")?;
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    println!(
        "ht bench iterators: {} increments over {} keys, {} reads, {} runs{}; dir={} ({})",
        args.merges,
        args.keys,
        args.reads,
        args.runs,
        if args.append_only {
            ", APPEND_ONLY"
        } else {
            ""
        },
        base.display(),
        super::machine()
    );
    let mut ht_runs = Vec::new();
    let mut rdb_runs = Vec::new();
    for run in (1..=args.runs).filter(|_| !args.no_sum) {
        let ht = sum_run(&args, &base.join(format!("ht-{run}")), &rt)?;
        println!(
            "run {run} ht:      ingest {:.0}/s, reads {:.0}/s (sums checked)",
            ht.ingest, ht.read
        );
        ht_runs.push(ht);
        if !args.no_rocksdb {
            let rdb = rocksdb_run(&args, &script, &base.join(format!("rocksdb-{run}")))?;
            println!(
                "run {run} RocksDB: mergerandom {:.0}/s, readrandom {:.0}/s",
                rdb.ingest, rdb.read
            );
            rdb_runs.push(rdb);
        }
    }
    let scans = if args.no_cluster {
        Vec::new()
    } else {
        cluster_scans(&args, &base.join("cluster"))?
    };
    report(&args, &ht_runs, &rdb_runs, &scans)
}

/// The value a matching cell holds: this prefix, padded.
const KEEP_PREFIX: &[u8] = b"keep:";

fn keep_value(len: usize) -> Vec<u8> {
    let mut v = KEEP_PREFIX.to_vec();
    v.resize(len, b'=');
    v
}

/// One run of ht's sum workloads on a fresh engine: the increments, then the point reads,
/// then a full scan that checks every key's sum.
fn sum_run(
    args: &IteratorsArgs,
    dir: &Path,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<SumRun> {
    let _ = std::fs::remove_dir_all(dir);
    let fs: Arc<dyn Fs> = Arc::new(LocalFs::new(dir)?);
    let engine = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone())?;
    engine.create_table(sum_schema(args.append_only))?;
    let family = 1;
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut written = vec![0i64; args.keys as usize];

    let one = 1i64.to_be_bytes();
    let start = Instant::now();
    let mut rows: Vec<[u8; 8]> = Vec::with_capacity(BATCH);
    let mut left = args.merges;
    while left > 0 {
        let n = left.min(BATCH as u64) as usize;
        left -= n as u64;
        rows.clear();
        for _ in 0..n {
            let k = rng.random_range(0..args.keys);
            written[k as usize] += 1;
            rows.push(k.to_be_bytes());
        }
        let batch: Vec<MutationRef<'_>> = rows
            .iter()
            .map(|r| MutationRef::insert(r, family, &[], &one))
            .collect();
        engine.apply(TABLE_ID, &batch)?;
    }
    let ingest = start.elapsed();
    let s = engine.stats();
    eprintln!(
        "  ht ingest: {:.2}s; {} minor, {} merging, {} major compactions so far, {} stores",
        ingest.as_secs_f64(),
        s.minor_compactions,
        s.merging_compactions,
        s.major_compactions,
        s.stores
    );

    // Reads start at once, as db_bench's readrandom follows mergerandom: maintenance the
    // increments started runs beside them on both sides.
    let reads: Vec<u64> = (0..args.reads)
        .map(|_| rng.random_range(0..args.keys))
        .collect();
    let start = Instant::now();
    let mut spec = ScanSpec::default();
    for &k in &reads {
        spec.row_intervals.clear();
        spec.row_intervals
            .push(RowInterval::row(k.to_be_bytes().to_vec()));
        let mut got: Option<Vec<u8>> = None;
        let mut cells = 0u64;
        engine.scan(TABLE_ID, &spec)?.for_each_raw(|_, v| {
            cells += 1;
            got = Some(v.to_vec());
        })?;
        check_sum(k, written[k as usize], cells, got.as_deref())?;
    }
    let read = start.elapsed();
    check_all_sums(&engine, &written)?;
    engine.wait_for_maintenance();
    let s = engine.stats();
    eprintln!(
        "  ht reads: {:.2}s; then {} minor, {} merging, {} major compactions, {} stores",
        read.as_secs_f64(),
        s.minor_compactions,
        s.merging_compactions,
        s.major_compactions,
        s.stores
    );
    engine.close()?;
    drop(engine);
    let _ = std::fs::remove_dir_all(dir);
    Ok(SumRun {
        ingest: args.merges as f64 / secs(ingest),
        read: args.reads as f64 / secs(read),
    })
}

/// A table of one family `COMBINER sum(ENCODING = 'fixed64')`, durability `flush`.
pub(crate) fn sum_schema(append_only: bool) -> TableSchema {
    let mut schema = TableSchema::new(TABLE_ID, "/sum_bench");
    schema.add_family("n");
    schema.families[0].combiner = Some(CombinerSpec {
        kind: "sum".into(),
        options: IterOptions::from([("ENCODING".to_string(), "fixed64".to_string())]),
    });
    schema.families[0].append_only = append_only;
    schema.durability = Durability::Flush;
    schema
}

/// Fails unless a read of key `k` returned one cell holding `expected` as fixed64 (or nothing,
/// for a key never written).
pub(crate) fn check_sum(
    k: u64,
    expected: i64,
    cells: u64,
    value: Option<&[u8]>,
) -> anyhow::Result<()> {
    if expected == 0 {
        ensure!(
            cells == 0,
            "key {k} was never incremented but a read returned {cells} cells"
        );
        return Ok(());
    }
    ensure!(
        cells == 1,
        "key {k}: a read returned {cells} cells, not the one combined value of {expected} increments"
    );
    let v = value.unwrap_or_default();
    let b: [u8; 8] = v.try_into().map_err(|_| {
        anyhow::anyhow!(
            "key {k}: the combined value is {} bytes, not 8 (fixed64)",
            v.len()
        )
    })?;
    let got = i64::from_be_bytes(b);
    ensure!(
        got == expected,
        "key {k}: the sum reads {got}, but {expected} increments of 1 were written"
    );
    Ok(())
}

/// A full scan: every key written reads back its sum, and no other key appears.
fn check_all_sums(engine: &Engine, written: &[i64]) -> anyhow::Result<()> {
    let mut seen = vec![false; written.len()];
    let mut bad: Option<anyhow::Error> = None;
    engine
        .scan(TABLE_ID, &ScanSpec::default())?
        .for_each_raw(|k, v| {
            if bad.is_some() {
                return;
            }
            let key = match common::key::KeyRef::new(k) {
                Ok(key) => key,
                Err(e) => {
                    bad = Some(anyhow::anyhow!("a scanned key does not decode: {e}"));
                    return;
                }
            };
            let row = key.row();
            let Some(k) = <[u8; 8]>::try_from(row.as_ref())
                .ok()
                .map(u64::from_be_bytes)
                .filter(|&k| (k as usize) < written.len())
            else {
                bad = Some(anyhow::anyhow!(
                    "a full scan found row {row:?}, which was never written"
                ));
                return;
            };
            if std::mem::replace(&mut seen[k as usize], true) {
                bad = Some(anyhow::anyhow!("a full scan returned key {k} twice"));
                return;
            }
            if let Err(e) = check_sum(k, written[k as usize], 1, Some(v)) {
                bad = Some(e);
            }
        })?;
    if let Some(e) = bad {
        return Err(e.context("checking every sum with a full scan"));
    }
    if let Some(k) = (0..written.len()).find(|&k| written[k] > 0 && !seen[k]) {
        bail!(
            "a full scan did not return key {k}, which got {} increments",
            written[k]
        );
    }
    Ok(())
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64().max(1e-9)
}

/// One run of `bench/rocksdb-merge.sh KEYS MERGES READS DIR`; parses its
/// `<workload> <ops_per_sec>` lines.
fn rocksdb_run(args: &IteratorsArgs, script: &Path, dir: &Path) -> anyhow::Result<SumRun> {
    let out = Command::new("bash")
        .arg(script)
        .arg(args.keys.to_string())
        .arg(args.merges.to_string())
        .arg(args.reads.to_string())
        .arg(dir)
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!(
            "{} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let figure = |name: &str| -> anyhow::Result<f64> {
        stdout
            .lines()
            .filter_map(|l| l.split_once(' '))
            .find(|(w, _)| *w == name)
            .and_then(|(_, v)| v.trim().parse::<f64>().ok())
            .with_context(|| format!("{} printed no {name} figure:\n{stdout}", script.display()))
    };
    Ok(SumRun {
        ingest: figure("mergerandom")?,
        read: figure("readrandom")?,
    })
}

/// The filtered scans on a local cluster: loads the table once, then `runs` pairs of a scan
/// filtered by the range servers and a scan filtered here.
fn cluster_scans(args: &IteratorsArgs, dir: &Path) -> anyhow::Result<Vec<(ScanRun, ScanRun)>> {
    let _ = std::fs::remove_dir_all(dir);
    crate::cluster_cmd::start(crate::cluster_cmd::StartArgs {
        data_dir: dir.to_path_buf(),
        hyperspace: 1,
        rangeservers: args.rangeservers,
        masters: 1,
        dfs: None,
        chunkservers: None,
        split_bytes: args.split_bytes,
        master_poll_ms: None,
        master_gc_ms: None,
        block_cache_mb: None,
        wait_secs: 60,
    })?;
    let result = (|| {
        let cluster = crate::cluster_cmd::connect(dir)?;
        let client: &dyn client::Client = &cluster;
        let family = load_scan_table(args, client)?;
        let locations = cluster.table_locations(SCAN_TABLE)?;
        let servers: std::collections::BTreeSet<&str> =
            locations.iter().map(|l| l.location.as_str()).collect();
        eprintln!(
            "  cluster: the table is {} ranges on {} range servers",
            locations.len(),
            servers.len()
        );
        let expected = args.scan_cells.div_ceil(MATCH_EVERY);
        let keep = keep_value(args.scan_value_bytes);
        // One scan first, not counted: the first pair's server-side scan would otherwise be
        // the one that loads the blocks into the range server's caches.
        scan_client_side(client, family, &keep)?;
        let mut pairs = Vec::new();
        for run in 1..=args.runs {
            let server = scan_server_side(client, family, &keep)?;
            let local = scan_client_side(client, family, &keep)?;
            for (what, s) in [("server-side", &server), ("client-side", &local)] {
                ensure!(
                    s.matches == expected,
                    "run {run}: the {what} filter found {} matching cells, not {expected}",
                    s.matches
                );
            }
            ensure!(
                server.cells == server.matches,
                "run {run}: the server-side filter sent {} cells, {} of them matching",
                server.cells,
                server.matches
            );
            println!(
                "run {run} scan: server-side {:.3}s {} B, client-side {:.3}s {} B ({} cells read)",
                server.secs, server.bytes, local.secs, local.bytes, local.cells
            );
            pairs.push((server, local));
        }
        if args.extra_server_scans > 0 {
            eprintln!("  {} more server-side scans", args.extra_server_scans);
            let start = Instant::now();
            for _ in 0..args.extra_server_scans {
                scan_server_side(client, family, &keep)?;
            }
            eprintln!(
                "  {:.3}s per server-side scan",
                start.elapsed().as_secs_f64() / f64::from(args.extra_server_scans)
            );
        }
        anyhow::Ok(pairs)
    })();
    let stopped = crate::cluster_cmd::stop(crate::cluster_cmd::DirArgs {
        data_dir: dir.to_path_buf(),
    });
    let pairs = result?;
    stopped?;
    let _ = std::fs::remove_dir_all(dir);
    Ok(pairs)
}

/// Creates the scan table and writes `scan_cells` rows of one cell; every `MATCH_EVERY`-th
/// holds [`keep_value`], the others a value of the same length that does not match. Returns
/// the family id.
fn load_scan_table(args: &IteratorsArgs, client: &dyn client::Client) -> anyhow::Result<u8> {
    let mut schema = TableSchema::new(0, "");
    let family = schema.add_family("v");
    schema.durability = Durability::Flush;
    client.create_table(SCAN_TABLE, schema)?;
    let keep = keep_value(args.scan_value_bytes);
    let mut rng = StdRng::seed_from_u64(args.seed ^ 0x5ca7);
    let start = Instant::now();
    let mut m = client.mutator(SCAN_TABLE)?;
    for i in 0..args.scan_cells {
        let value = if i % MATCH_EVERY == 0 {
            keep.clone()
        } else {
            let mut v: Vec<u8> = (0..args.scan_value_bytes)
                .map(|_| rng.random_range(b'a'..=b'z'))
                .collect();
            v[0] = b'x';
            v
        };
        m.set(Mutation::insert(
            format!("row{i:010}"),
            family,
            Vec::new(),
            value,
        ))?;
    }
    m.flush()?;
    client.wait_for_maintenance()?;
    eprintln!(
        "  cluster: {} cells of {} bytes loaded in {:.2}s",
        args.scan_cells,
        args.scan_value_bytes,
        start.elapsed().as_secs_f64()
    );
    Ok(family)
}

/// Key and value bytes of a cell as it reached the client: row, family, qualifier, the
/// flag/timestamp/revision suffix and the value.
fn cell_bytes(c: &Cell) -> u64 {
    (c.key.row.len() + 1 + c.key.qualifier.len() + KEY_SUFFIX_LEN + c.value.len()) as u64
}

fn family_scan(family: u8) -> ScanSpec {
    ScanSpec {
        columns: vec![ColumnSelector {
            family,
            qualifier: QualifierMatch::All,
        }],
        ..ScanSpec::default()
    }
}

/// The predicate `v = keep` in the range servers.
fn scan_server_side(
    client: &dyn client::Client,
    family: u8,
    keep: &[u8],
) -> anyhow::Result<ScanRun> {
    let mut spec = family_scan(family);
    spec.value_predicates = Some(ValuePredicates {
        tests: vec![ValuePredicate {
            family,
            qualifier: None,
            test: ValueTest::Equals(keep.to_vec()),
        }],
        output: Vec::new(),
    });
    scan(client, spec, keep)
}

/// Every cell to the client, filtered here (what the HQL executor did before the predicates
/// moved into the range servers).
fn scan_client_side(
    client: &dyn client::Client,
    family: u8,
    keep: &[u8],
) -> anyhow::Result<ScanRun> {
    scan(client, family_scan(family), keep)
}

fn scan(client: &dyn client::Client, spec: ScanSpec, keep: &[u8]) -> anyhow::Result<ScanRun> {
    let start = Instant::now();
    let mut scanner = client.scanner(SCAN_TABLE, spec)?;
    let mut r = ScanRun {
        secs: 0.0,
        bytes: 0,
        cells: 0,
        matches: 0,
    };
    while let Some(c) = scanner.next_cell()? {
        r.cells += 1;
        r.bytes += cell_bytes(&c);
        r.matches += u64::from(c.value == keep);
    }
    r.secs = secs(start.elapsed());
    Ok(r)
}

/// Prints the tables, appends the line to bench/RESULTS.md and prints the summary line.
fn report(
    args: &IteratorsArgs,
    ht: &[SumRun],
    rdb: &[SumRun],
    scans: &[(ScanRun, ScanRun)],
) -> anyhow::Result<()> {
    let med = |v: Vec<f64>| super::median(&v);
    let ingest_ratio = med(ht
        .iter()
        .zip(rdb)
        .map(|(a, b)| a.ingest / b.ingest)
        .collect());
    let read_ratio = med(ht.iter().zip(rdb).map(|(a, b)| a.read / b.read).collect());
    let (hi, hr) = (
        med(ht.iter().map(|r| r.ingest).collect()),
        med(ht.iter().map(|r| r.read).collect()),
    );
    let (ri, rr) = (
        med(rdb.iter().map(|r| r.ingest).collect()),
        med(rdb.iter().map(|r| r.read).collect()),
    );
    println!();
    println!("| workload | ht ops/s | RocksDB ops/s | ht/RocksDB |");
    println!("|---|---:|---:|---:|");
    println!(
        "| sum ingest / mergerandom | {} | {} | {} |",
        fmt_ops(hi),
        fmt_ops(ri),
        fmt_ratio(ingest_ratio)
    );
    println!(
        "| sum point reads / readrandom | {} | {} | {} |",
        fmt_ops(hr),
        fmt_ops(rr),
        fmt_ratio(read_ratio)
    );
    let mut figures = vec![format!(
        "sum ingest {}/{} ({}); sum reads {}/{} ({})",
        fmt_ops(hi),
        fmt_ops(ri),
        fmt_ratio(ingest_ratio),
        fmt_ops(hr),
        fmt_ops(rr),
        fmt_ratio(read_ratio)
    )];
    let speedup = med(scans.iter().map(|(s, c)| c.secs / s.secs).collect());
    if !scans.is_empty() {
        let bytes_ratio = med(scans
            .iter()
            .map(|(s, c)| c.bytes as f64 / s.bytes as f64)
            .collect());
        let (ss, cs) = (
            med(scans.iter().map(|p| p.0.secs).collect()),
            med(scans.iter().map(|p| p.1.secs).collect()),
        );
        let (sb, cb) = (scans[0].0.bytes, scans[0].1.bytes);
        println!();
        println!(
            "| scan of {} cells, 1% match, {} range servers | elapsed s | cells to the client | bytes to the client |",
            args.scan_cells, args.rangeservers
        );
        println!("|---|---:|---:|---:|");
        println!(
            "| server-side filter (value_predicates) | {ss:.3} | {} | {sb} |",
            scans[0].0.cells
        );
        println!(
            "| client-side filter | {cs:.3} | {} | {cb} |",
            scans[0].1.cells
        );
        println!(
            "| client/server | {} | | {} |",
            fmt_ratio(speedup),
            fmt_ratio(bytes_ratio)
        );
        figures.push(format!(
            "filtered scan of {} cells (1% match, {} range servers): server-side {ss:.3}s {sb} B, client-side {cs:.3}s {cb} B ({} faster, {} fewer bytes)",
            args.scan_cells,
            args.rangeservers,
            fmt_ratio(speedup),
            fmt_ratio(bytes_ratio)
        ));
    }
    let line = format!(
        "| {} | {} | {} | `{}` | iterators: {} increments over {} keys{}, {} reads; {} |",
        super::utc_now(),
        super::git_commit(),
        super::machine(),
        super::command_line(),
        args.merges,
        args.keys,
        if args.append_only {
            " (APPEND_ONLY)"
        } else {
            ""
        },
        args.reads,
        figures.join("; ")
    );
    if args.no_record {
        println!("\n{line}");
    } else {
        let path = super::append_result(&line)?;
        println!(
            "(medians of {} runs, ratios pair by pair; appended to {})",
            args.runs,
            path.display()
        );
    }
    println!("{}", summary_line(ingest_ratio, read_ratio, speedup));
    Ok(())
}

/// `iterators: sum_ingest_vs_rocksdb=1.8x sum_read_vs_rocksdb=1.6x filter_scan_speedup=7.2x`
/// (`-` for a comparison not run).
pub(crate) fn summary_line(ingest: f64, read: f64, scan: f64) -> String {
    let x = |v: f64| {
        if v.is_finite() {
            format!("{v:.1}x")
        } else {
            "-".into()
        }
    };
    format!(
        "iterators: sum_ingest_vs_rocksdb={} sum_read_vs_rocksdb={} filter_scan_speedup={}",
        x(ingest),
        x(read),
        x(scan)
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line_has_the_agreed_shape() {
        assert_eq!(
            summary_line(1.83, 1.6, 7.24),
            "iterators: sum_ingest_vs_rocksdb=1.8x sum_read_vs_rocksdb=1.6x filter_scan_speedup=7.2x"
        );
        assert_eq!(
            summary_line(f64::NAN, 2.0, f64::NAN),
            "iterators: sum_ingest_vs_rocksdb=- sum_read_vs_rocksdb=2.0x filter_scan_speedup=-"
        );
    }

    #[test]
    fn a_wrong_sum_fails_loudly() {
        let v = 7i64.to_be_bytes();
        assert!(check_sum(3, 7, 1, Some(&v)).is_ok());
        assert!(check_sum(3, 0, 0, None).is_ok());
        let e = check_sum(3, 8, 1, Some(&v)).expect_err("7 is not 8");
        assert!(e.to_string().contains("key 3") && e.to_string().contains("8 increments"));
        assert!(check_sum(3, 7, 2, Some(&v)).is_err(), "two cells");
        assert!(check_sum(3, 7, 1, Some(b"7")).is_err(), "not fixed64");
        assert!(check_sum(3, 0, 1, Some(&v)).is_err(), "a key never written");
    }

    /// The combiner check of the benchmark, on a small run of its own ht side: the engine's
    /// `sum` family must return exactly the increments written per key, also after the cell
    /// caches were written out and compacted.
    #[test]
    fn the_sum_family_reads_back_the_increments_per_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let fs: Arc<dyn Fs> = Arc::new(LocalFs::new(dir.path()).expect("fs"));
        let engine =
            Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone()).expect("open");
        engine.create_table(sum_schema(false)).expect("create");
        let mut written = vec![0i64; 50];
        let one = 1i64.to_be_bytes();
        let mut rng = StdRng::seed_from_u64(7);
        for round in 0..3 {
            let rows: Vec<[u8; 8]> = (0..2000)
                .map(|_| {
                    let k = rng.random_range(0..40u64);
                    written[k as usize] += 1;
                    k.to_be_bytes()
                })
                .collect();
            let batch: Vec<MutationRef<'_>> = rows
                .iter()
                .map(|r| MutationRef::insert(r, 1, &[], &one))
                .collect();
            engine.apply(TABLE_ID, &batch).expect("apply");
            check_all_sums(&engine, &written).expect("sums before compacting");
            let kind = [
                common::CompactionKind::Minor,
                common::CompactionKind::Merging,
                common::CompactionKind::Major,
            ][round];
            engine.compact(Some(TABLE_ID), kind).expect("compact");
            check_all_sums(&engine, &written).expect("sums after compacting");
        }
        engine.close().expect("close");
    }
}

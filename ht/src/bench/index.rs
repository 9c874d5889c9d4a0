//! `ht bench index`: a value predicate answered through a secondary index against the same
//! predicate over a full scan (issue 17, "Measure": 0.1% of 1M rows, >= 20x).
//!
//! Two tables get the same rows: `t (a, b, INDEX a)` and `u (a, b)`. Row keys are a
//! pseudo-random permutation, so the rows a value names are spread over the whole table; `a`
//! takes `--values` distinct values in turn (1,000: each selects 0.1% of the rows), `b` holds
//! `--value-bytes` of filler. Both tables are major-compacted, so the queries read cell stores.
//! Each run asks `SELECT * FROM t WHERE a = 'vNNNN'` (the index path) and the same of `u` (a
//! full scan, the predicate run in the range servers) through the HQL executor, for a value
//! not asked before; both must return the same cells. A full scan of each table first, not
//! counted, brings their blocks into the block cache (`--block-cache-mb`, 512 by default,
//! holds both at 1M rows). Medians over the runs and the median of the per-run ratios, embedded and
//! on a local cluster; the last lines are one summary per mode, e.g. `index: mode=embedded
//! rows=1000000 fraction=0.1% index_ms=3.1 scan_ms=812.0 speedup=261.9x`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, ensure};
use clap::Args;
use client::{Client, CompactionKind, Mutation};
use hql::exec::Executor;

/// Options of `ht bench index`.
#[derive(Args, Debug)]
pub struct IndexArgs {
    /// Rows in each table.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Distinct values of the indexed family (each selects rows / values of the rows).
    #[arg(long, default_value_t = 1_000)]
    values: u64,
    /// Bytes of the filler family's value per row.
    #[arg(long = "value-bytes", default_value_t = 100)]
    value_bytes: usize,
    /// Query pairs (index, scan) per mode.
    #[arg(long, default_value_t = 5)]
    runs: u32,
    /// `embedded`, `cluster`, or both (comma-separated).
    #[arg(long, default_value = "embedded,cluster")]
    modes: String,
    /// Range servers of the local cluster.
    #[arg(long, default_value_t = 2)]
    rangeservers: usize,
    /// On the cluster, range servers split a range past this many bytes (default: rows*8,
    /// about a third of a compacted table, so that each table is a few ranges and the full
    /// scan runs on every server at once, as a scan of a large table does).
    #[arg(long = "split-bytes")]
    split_bytes: Option<u64>,
    /// Block cache of the embedded database and of each range server, MiB (the default holds
    /// both tables at 1M rows, so that warm means cached, as in the anchor's runs).
    #[arg(long = "block-cache-mb", default_value_t = 512)]
    block_cache_mb: u64,
    /// Run the full scans with NO_CACHE (they then leave the block cache to the index queries,
    /// as a table scan beside point queries should).
    #[arg(long)]
    scan_no_cache: bool,
    /// After the pairs, this many more index queries alone (their mean time is printed; for
    /// profiling the index path).
    #[arg(long, default_value_t = 0)]
    extra_index_runs: u64,
    /// With `--extra-index-runs`: time the index path's two steps apart as well (the prefix
    /// scan of `^t`, then the key-set scan of t's candidate rows) over as many more queries.
    #[arg(long)]
    breakdown: bool,
    /// Work directory (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print the result line instead of appending it to bench/RESULTS.md.
    #[arg(long)]
    no_record: bool,
}

/// One mode's medians.
struct ModeResult {
    mode: String,
    index_ms: f64,
    scan_ms: f64,
    speedup: f64,
    cells: usize,
}

pub fn run(args: IndexArgs) -> anyhow::Result<()> {
    ensure!(
        args.values > 0 && args.rows >= args.values,
        "--rows must be at least --values (> 0)"
    );
    ensure!(
        u64::from(args.runs) < args.values,
        "--runs must be below --values (each run asks for a new value)"
    );
    let (base, _guard) = super::work_dir(&args.dir, "ht-bench-index")?;
    let mut results = Vec::new();
    for mode in args.modes.split(',').map(str::trim) {
        let dir = base.join(mode);
        let _ = std::fs::remove_dir_all(&dir);
        let r = match mode {
            "embedded" => {
                let mut opts = embedded::EmbeddedOptions::default();
                opts.engine.block_cache_bytes = args.block_cache_mb << 20;
                let client = Arc::new(embedded::EmbeddedClient::open(&dir, opts)?);
                let r = measure(&args, mode, client.clone());
                client.close()?;
                r?
            }
            "cluster" => {
                crate::cluster_cmd::start(crate::cluster_cmd::StartArgs {
                    data_dir: dir.clone(),
                    hyperspace: 1,
                    rangeservers: args.rangeservers,
                    masters: 1,
                    dfs: None,
                    chunkservers: None,
                    split_bytes: Some(args.split_bytes.unwrap_or((args.rows * 8).max(256 << 10))),
                    master_poll_ms: None,
                    master_gc_ms: None,
                    block_cache_mb: Some(args.block_cache_mb),
                    wait_secs: 60,
                })?;
                let r = crate::cluster_cmd::connect(&dir)
                    .and_then(|c| measure(&args, mode, Arc::new(c)));
                let stopped = crate::cluster_cmd::stop(crate::cluster_cmd::DirArgs {
                    data_dir: dir.clone(),
                });
                let r = r?;
                stopped?;
                r
            }
            other => anyhow::bail!("unknown mode '{other}' (embedded, cluster)"),
        };
        let _ = std::fs::remove_dir_all(&dir);
        results.push(r);
    }
    report(&args, &results)
}

/// A permutation of 0..n (splitmix64 of the index, as hex: distinct for distinct inputs).
fn row_key(i: u64) -> String {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    format!("{:016x}", z ^ (z >> 31))
}

fn value_of(i: u64) -> String {
    format!("v{i:06}")
}

fn exec(ex: &mut Executor, stmt: &str) -> anyhow::Result<String> {
    let s = hql::parse_statement(stmt).map_err(|e| anyhow::anyhow!("{stmt}: {e}"))?;
    let mut out = Vec::new();
    ex.execute(&s, &mut out).with_context(|| stmt.to_string())?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn measure(args: &IndexArgs, mode: &str, client: Arc<dyn Client>) -> anyhow::Result<ModeResult> {
    let mut ex = Executor::new(client.clone());
    exec(&mut ex, "CREATE TABLE t (a, b, INDEX a)")?;
    exec(&mut ex, "CREATE TABLE u (a, b)")?;
    let filler = vec![b'x'; args.value_bytes];
    let start = Instant::now();
    let (fa, fb) = (1u8, 2u8);
    for (table, indexed) in [("/t", true), ("/u", false)] {
        let mut m = if indexed {
            client::index::mutator(client.as_ref(), None, table)?
        } else {
            client.mutator(table)?
        };
        for i in 0..args.rows {
            let row = row_key(i);
            m.set(Mutation::insert(
                row.clone(),
                fa,
                "",
                value_of(i % args.values),
            ))?;
            m.set(Mutation::insert(row, fb, "", filler.clone()))?;
        }
        m.flush()?;
    }
    eprintln!(
        "  {mode}: {} rows into t (indexed) and u in {:.1}s",
        args.rows,
        start.elapsed().as_secs_f64()
    );
    let start = Instant::now();
    for table in ["/t", "/^t", "/u"] {
        client.compact(Some(table), CompactionKind::Major)?;
    }
    client.wait_for_maintenance()?;
    eprintln!(
        "  {mode}: major compactions in {:.1}s",
        start.elapsed().as_secs_f64()
    );
    // Where the tables lie: the full scan runs on every server holding a range of u at once,
    // the index path's row reads on the servers holding t's candidate rows.
    let servers = if mode == "cluster" {
        args.rangeservers
    } else {
        1
    };
    for table in ["/t", "/u"] {
        let (ranges, on) = super::spread(client.as_ref(), table, servers)?;
        eprintln!("  {mode}: {table}: {ranges} ranges on {on} servers");
    }
    let expected = (args.rows / args.values) as usize * 2;
    let query = |ex: &mut Executor, table: &str, v: u64| -> anyhow::Result<(f64, usize)> {
        let mut q = format!("SELECT * FROM {table} WHERE a = '{}'", value_of(v));
        if table == "u" && args.scan_no_cache {
            q.push_str(" NO_CACHE");
        }
        let start = Instant::now();
        let out = exec(ex, &q)?;
        Ok((start.elapsed().as_secs_f64() * 1e3, out.lines().count()))
    };
    // Warm-up, not counted: a full scan of each table (a regex predicate, which no index
    // answers) brings every block into the block cache, as the anchor's "data blocks cached".
    for table in ["t", "u"] {
        exec(
            &mut ex,
            &format!("SELECT * FROM {table} WHERE a =~ /^none$/"),
        )?;
    }
    query(&mut ex, "t", args.values - 1)?;
    query(&mut ex, "u", args.values - 1)?;
    let (mut index_ms, mut scan_ms, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut cells = 0;
    for run in 0..u64::from(args.runs) {
        let v = run * 7 % (args.values - 1);
        let (ti, ni) = query(&mut ex, "t", v)?;
        let (ts, ns) = query(&mut ex, "u", v)?;
        ensure!(
            ni == ns && ni >= expected,
            "run {run}: the index query returned {ni} cells, the scan {ns} (expected {expected})"
        );
        cells = ni;
        println!(
            "{mode} run {}: index {ti:.1} ms, scan {ts:.1} ms ({ni} cells)",
            run + 1
        );
        index_ms.push(ti);
        scan_ms.push(ts);
        ratios.push(ts / ti);
    }
    if args.extra_index_runs > 0 {
        let start = Instant::now();
        for n in 0..args.extra_index_runs {
            query(&mut ex, "t", n % (args.values - 1))?;
        }
        eprintln!(
            "  {mode}: {:.2} ms per index query over {} more",
            start.elapsed().as_secs_f64() * 1e3 / args.extra_index_runs as f64,
            args.extra_index_runs
        );
        if args.breakdown {
            breakdown(args, mode, client.as_ref())?;
        }
    }
    Ok(ModeResult {
        mode: mode.to_string(),
        index_ms: super::median(&index_ms),
        scan_ms: super::median(&scan_ms),
        speedup: super::median(&ratios),
        cells,
    })
}

/// The index path's steps timed apart, as `SELECT * FROM t WHERE a = ...` runs them: the
/// candidate rows from `^t` (`client::index::candidate_rows`), then a scan of those rows of t
/// (one interval).
fn breakdown(args: &IndexArgs, mode: &str, client: &dyn Client) -> anyhow::Result<()> {
    let (mut lookup, mut rows_scan, mut cells) = (0.0, 0.0, 0usize);
    let on: Vec<String> = client
        .table_ranges("/t")?
        .iter()
        .map(|r| r.location.clone())
        .collect();
    eprintln!("  {mode}: t's ranges, in row order, on {on:?}");
    let schema = client.table_schema("/t")?;
    let family = schema.family("a").context("t has no family a")?.id;
    for n in 0..args.extra_index_runs {
        let start = Instant::now();
        let test = common::iterators::ValuePredicate {
            family,
            qualifier: None,
            test: common::iterators::ValueTest::Equals(
                value_of(n % (args.values - 1)).into_bytes(),
            ),
        };
        let rows = client::index::candidate_rows(client, "/t", &schema, &[test], usize::MAX)?
            .context("the index of t cannot answer a = '...'")?;
        let mid = Instant::now();
        let spec = common::ScanSpec {
            row_intervals: rows
                .into_iter()
                .map(common::scan_spec::RowInterval::row)
                .collect(),
            one_interval: true,
            ..common::ScanSpec::default()
        };
        let mut s = client.scanner("/t", spec)?;
        while s.next_cell()?.is_some() {
            cells += 1;
        }
        lookup += (mid - start).as_secs_f64();
        rows_scan += mid.elapsed().as_secs_f64();
    }
    let k = 1e3 / args.extra_index_runs as f64;
    eprintln!(
        "  {mode}: breakdown: ^t prefix scan {:.2} ms, key-set scan of t {:.2} ms ({} cells a query)",
        lookup * k,
        rows_scan * k,
        cells / args.extra_index_runs as usize
    );
    Ok(())
}

fn report(args: &IndexArgs, results: &[ModeResult]) -> anyhow::Result<()> {
    let fraction = 100.0 / args.values as f64;
    let mut figures = Vec::new();
    for r in results {
        figures.push(format!(
            "{}: index {:.1} ms, scan {:.1} ms, {:.1}x ({} cells)",
            r.mode, r.index_ms, r.scan_ms, r.speedup, r.cells
        ));
    }
    let line = format!(
        "| {} | {} | {} | `{}` | {} rows, {}% per value: {} |",
        super::utc_now(),
        super::git_commit(),
        super::machine(),
        super::command_line(),
        args.rows,
        fraction,
        figures.join("; ")
    );
    if args.no_record {
        println!("{line}");
    } else {
        let path = super::append_result(&line)?;
        eprintln!("  appended to {}", path.display());
    }
    for r in results {
        println!(
            "index: mode={} rows={} fraction={}% index_ms={:.1} scan_ms={:.1} speedup={:.1}x",
            r.mode, args.rows, fraction, r.index_ms, r.scan_ms, r.speedup
        );
    }
    Ok(())
}

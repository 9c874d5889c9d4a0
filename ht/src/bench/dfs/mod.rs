//! `ht bench dfs`: BENCH.md section 3, the DFS backend comparison. Concurrent loaders (threads,
//! each its own query log) LOAD DATA INFILE into one table of an embedded database whose engine
//! writes through each backend in turn, with the commit log not flushed (durability `log`) and
//! flushed (`flush`). One row per backend and mode in the form of Hypertable's load report, the
//! ratio to `local`, and an SVG chart.
//!
//! Backends: `local` (the data directory), `broker` (a DFS broker over QUIC on loopback in front
//! of a local directory), `objstore` (a moto S3 server on loopback), and ht's own chunkfs as
//! processes on loopback (`chunkfs::launch::LocalDfs`): `hdfs-like` (3 chunk servers, pipeline
//! of 3), `kfs-like` (3 chunk servers, 3 replicas written in parallel) and `kfs-like-rs` (9 chunk
//! servers, Reed-Solomon 6+3).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use client::{Client, TableSchema};
use common::schema::Durability;
use dfs_broker::broker::{BrokerFs, BrokerFsOptions, BrokerOptions, BrokerService};
use dfs_broker::objstore::s3_server::S3TestServer;
use embedded::{EmbeddedClient, EmbeddedOptions, FsFactory};
use hql::load::LoadReport;
use rpc::ClusterCredentials;

use super::load::{FAMILIES, TABLE};

mod chart;
pub(crate) mod counting;
mod memory;

use counting::{Counters, Counting, Kind, Rooted, Snapshot};

#[derive(Args, Debug)]
pub struct DfsBenchArgs {
    /// Lines of query log per loader.
    #[arg(long, default_value_t = 250_000)]
    lines: u64,
    /// Concurrent loaders.
    #[arg(long, default_value_t = 4)]
    loaders: usize,
    /// Backends to measure, comma-separated: local, broker, objstore, hdfs-like, kfs-like,
    /// kfs-like-rs.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "local,broker,objstore,hdfs-like,kfs-like,kfs-like-rs"
    )]
    backends: Vec<String>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where the data goes; default a temporary directory in /tmp.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Where the chart goes; by default bench/dfs.svg, and none with --no-record.
    #[arg(long)]
    chart: Option<PathBuf>,
    /// The seed's size: 4 loaders of 9.8M lines (about 15M inserts each, 60M in all), as
    /// Hypertable's KFS-vs-HDFS test loaded; overrides --lines and --loaders.
    #[arg(long)]
    seed_size: bool,
    /// Print the result line instead of appending it to bench/RESULTS.md.
    #[arg(long)]
    no_record: bool,
}

/// One backend and mode's figures.
struct Row {
    backend: String,
    flush: bool,
    elapsed_s: f64,
    cells: u64,
    key_bytes: u64,
    value_bytes: u64,
    reports: Vec<LoadReport>,
    /// What the load asked of the file system, per kind ([`Kind::ALL`] order).
    load_io: [Snapshot; 4],
    /// The full scan after the load: cells, seconds, what it read.
    scanned: u64,
    scan_s: f64,
    scan_io: [Snapshot; 4],
    /// One copy of the files left (lengths as listed), and how many.
    logical: (u64, u64),
    /// Bytes this run added to this machine's disk (replicas included), where the backend
    /// keeps them in a directory of its own.
    physical: Option<u64>,
    /// Peak resident set of the process during the load and scan, kB.
    peak_rss_kb: Option<u64>,
    /// What the process held at the highest resident set sampled during the load, and during
    /// the scan.
    memory: [memory::MemorySample; 2],
    /// CPU seconds the load took in this process, and in the backend's own processes (chunkfs
    /// metadata and chunk servers), where it has any.
    load_cpu_s: (f64, Option<f64>),
}

impl Row {
    fn inserts_per_sec(&self) -> f64 {
        self.cells as f64 / self.elapsed_s
    }

    fn scan_cells_per_sec(&self) -> f64 {
        self.scanned as f64 / self.scan_s
    }

    fn user_bytes(&self) -> u64 {
        self.key_bytes + self.value_bytes
    }

    fn mode(&self) -> &'static str {
        if self.flush { "on" } else { "off" }
    }
}

/// Reads one run's counters and the file system it opened last.
#[derive(Clone, Default)]
struct Probe {
    counters: Arc<Counters>,
    fs: Arc<std::sync::Mutex<Option<Arc<dyn dfs_broker::Fs>>>>,
}

/// What the backends need for the whole run: a broker, an S3 server, chunkfs clusters.
struct Backends {
    base: PathBuf,
    rt: tokio::runtime::Runtime,
    broker: Option<(rpc::Server, std::net::SocketAddr, ClusterCredentials)>,
    s3: Option<S3TestServer>,
    chunkfs: Vec<(String, chunkfs::launch::LocalDfs)>,
}

impl Backends {
    fn start(base: &Path, names: &[String]) -> anyhow::Result<Backends> {
        let rt = tokio::runtime::Runtime::new()?;
        // What an earlier run left in a reused --dir is no part of this one: a chunkfs
        // cluster started on it would still hold that run's tables.
        for own in [
            "certs",
            "broker-backend",
            "hdfs-like",
            "kfs-like",
            "kfs-like-rs",
        ] {
            match std::fs::remove_dir_all(base.join(own)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e)
                        .with_context(|| format!("clearing {}", base.join(own).display()));
                }
                _ => {}
            }
        }
        let broker = if names.iter().any(|n| n == "broker") {
            let certs = base.join("certs");
            ClusterCredentials::create(&certs)?;
            for name in ["dfs-broker", "client"] {
                ClusterCredentials::issue(&certs, name)?;
            }
            let backend_dir = base.join("broker-backend");
            std::fs::create_dir_all(&backend_dir)?;
            let server = rt.block_on(async {
                let backend = Arc::new(dfs_broker::LocalFs::new(&backend_dir)?);
                let creds = ClusterCredentials::load(&certs, "dfs-broker")?;
                let server = BrokerService::new(
                    backend as Arc<dyn dfs_broker::Fs>,
                    BrokerOptions::default(),
                )
                .bind("127.0.0.1:0".parse()?, &creds)?;
                anyhow::Ok(server)
            })?;
            let addr = server.local_addr();
            Some((server, addr, ClusterCredentials::load(&certs, "client")?))
        } else {
            None
        };
        let s3 = if names.iter().any(|n| n == "objstore") {
            Some(S3TestServer::start("ht-bench").map_err(anyhow::Error::msg)?)
        } else {
            None
        };
        let mut chunkfs = Vec::new();
        for name in names {
            use chunkfs::launch::{LocalDfs, LocalDfsOptions};
            let options = match name.as_str() {
                "hdfs-like" => LocalDfsOptions::hdfs_like(),
                "kfs-like" => LocalDfsOptions::kfs_like(),
                "kfs-like-rs" => LocalDfsOptions::kfs_like_rs(),
                _ => continue,
            };
            let ht = std::env::current_exe().context("where is the ht binary")?;
            let dfs = LocalDfs::start(&ht, &base.join(name), options)
                .with_context(|| format!("starting {name}"))?;
            rt.block_on(dfs.connect(std::time::Duration::from_secs(30)))
                .with_context(|| format!("{name} did not come up"))?;
            chunkfs.push((name.clone(), dfs));
        }
        Ok(Backends {
            base: base.to_path_buf(),
            rt,
            broker,
            s3,
            chunkfs,
        })
    }

    /// The embedded database's options for one run on `backend` (data directory `dir`), its
    /// file system wrapped in [`Counting`], and the probe that reads its counters.
    fn options(
        &self,
        backend: &str,
        run: usize,
        dir: &Path,
    ) -> anyhow::Result<(EmbeddedOptions, Probe)> {
        let storage =
            |e: dfs_broker::FsError| client::ClientError::storage(e.kind(), e.to_string());
        let fs: FsFactory = match backend {
            "local" => {
                // What the embedded database opens by default, made here to be counted.
                let dir = dir.to_path_buf();
                Arc::new(move |_: &tokio::runtime::Handle| {
                    let fs = dfs_broker::LocalFs::new(&dir).map_err(storage)?;
                    Ok(Arc::new(fs) as Arc<dyn dfs_broker::Fs>)
                })
            }
            "broker" => {
                let (_, addr, creds) = self.broker.as_ref().context("no broker")?;
                let (addr, creds) = (*addr, creds.clone());
                // Each run under its own directory of the broker's backend.
                let root = format!("/run{run}");
                Arc::new(move |h: &tokio::runtime::Handle| {
                    let fs = h
                        .block_on(BrokerFs::connect(addr, &creds, BrokerFsOptions::default()))
                        .map_err(storage)?;
                    Ok(Rooted::arc(Arc::new(fs), &root))
                })
            }
            "objstore" => {
                let fs = self
                    .s3
                    .as_ref()
                    .context("no S3 server")?
                    .fs(&format!("run{run}"))?;
                let fs: Arc<dyn dfs_broker::Fs> = Arc::new(fs);
                Arc::new(move |_: &tokio::runtime::Handle| Ok(fs.clone()))
            }
            name if self.chunkfs.iter().any(|(n, _)| n == name) => {
                let (_, dfs) = self
                    .chunkfs
                    .iter()
                    .find(|(n, _)| n == name)
                    .expect("checked");
                let (meta, creds) = (dfs.meta_addr(), dfs.credentials().clone());
                let root = format!("/run{run}");
                Arc::new(move |h: &tokio::runtime::Handle| {
                    let fs = h
                        .block_on(chunkfs::launch::connect_ready(
                            meta,
                            &creds,
                            1,
                            std::time::Duration::from_secs(30),
                        ))
                        .map_err(storage)?;
                    Ok(Rooted::arc(Arc::new(fs), &root))
                })
            }
            other => bail!(
                "unknown backend {other:?} (built: local, broker, objstore, hdfs-like, kfs-like, kfs-like-rs)"
            ),
        };
        let probe = Probe::default();
        let counted: FsFactory = {
            let probe = probe.clone();
            Arc::new(move |h: &tokio::runtime::Handle| {
                let fs: Arc<dyn dfs_broker::Fs> = Arc::new(Counting {
                    fs: fs(h)?,
                    counters: probe.counters.clone(),
                });
                *probe
                    .fs
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(fs.clone());
                Ok(fs)
            })
        };
        let options = EmbeddedOptions {
            fs: Some(counted),
            ..Default::default()
        };
        Ok((options, probe))
    }
}

impl Drop for Backends {
    fn drop(&mut self) {
        if let Some((server, _, _)) = self.broker.take() {
            self.rt
                .block_on(server.shutdown(std::time::Duration::from_millis(200)));
        }
    }
}

/// The seed's size: Hypertable's KFS-vs-HDFS test, 4 loaders of about 15 million inserts each
/// (9.8M lines of the generated query log give 15.0M cells).
const SEED_LINES: u64 = 9_800_000;
const SEED_LOADERS: usize = 4;

fn open_db(dir: &Path, options: EmbeddedOptions) -> anyhow::Result<EmbeddedClient> {
    Ok(EmbeddedClient::open(dir, options)?)
}

/// Loads the files into a new table, closes the database, opens it again (an empty block
/// cache; the stores come back through the file system) and scans the whole table.
fn run_one(
    backends: &Backends,
    backend: &str,
    run: usize,
    dir: &Path,
    files: &[PathBuf],
    flush: bool,
) -> anyhow::Result<Row> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    // Where the backend keeps this run's bytes on this machine: its growth over the run is
    // the run's footprint (a chunkfs directory holds every run of its backend).
    let physical_dir = match backend {
        "local" => Some(dir.to_path_buf()),
        "broker" => Some(
            backends
                .base
                .join("broker-backend")
                .join(format!("run{run}")),
        ),
        "objstore" => None,
        chunk => Some(backends.base.join(chunk)),
    };
    let physical_before = physical_dir.as_deref().map_or(0, disk_bytes);
    let cpu_dir = backends
        .chunkfs
        .iter()
        .any(|(n, _)| n == backend)
        .then(|| backends.base.join(backend));
    reset_peak_rss();
    let (options, probe) = backends.options(backend, run, dir)?;
    let client = open_db(dir, options.clone())?;
    let mut schema = TableSchema::new(0, "");
    for f in FAMILIES {
        schema.add_family(f);
    }
    schema.durability = if flush {
        Durability::Flush
    } else {
        Durability::Log
    };
    client.create_table(TABLE, schema)?;
    let sampler = memory::Sampler::start(client.engine().clone());
    let cpu_before = (
        cpu_seconds("self"),
        cpu_dir.as_deref().map(processes_cpu_seconds),
    );
    let loaded = super::load::parallel_load(&client, files);
    let load_memory = sampler.finish();
    let (elapsed_s, reports) = loaded?;
    let s = client.engine().stats();
    eprintln!(
        "{backend} flush {}: {} minor, {} merging, {} major compactions, {} splits; {} stores \
         in {} ranges at the end of the load; {} writes waited {:.1} s for cache memory",
        if flush { "on" } else { "off" },
        s.minor_compactions,
        s.merging_compactions,
        s.major_compactions,
        s.splits,
        s.stores,
        s.ranges,
        s.memory_waits,
        s.memory_wait_ms as f64 / 1000.0
    );
    client.close()?;
    drop(client);
    let load_cpu_s = (
        cpu_seconds("self") - cpu_before.0,
        cpu_dir
            .as_deref()
            .map(processes_cpu_seconds)
            .zip(cpu_before.1)
            .map(|(after, before)| after - before),
    );
    let load_io = probe.counters.snapshot();

    let client = open_db(dir, options)?;
    let sampler = memory::Sampler::start(client.engine().clone());
    let start = std::time::Instant::now();
    let scanned = (|| {
        let mut scanner = client.scanner(TABLE, client::ScanSpec::default())?;
        let mut scanned = 0u64;
        while scanner.next_cell()?.is_some() {
            scanned += 1;
        }
        anyhow::Ok(scanned)
    })();
    let scan_s = start.elapsed().as_secs_f64();
    let scan_memory = sampler.finish();
    let scanned = scanned?;
    let after = probe.counters.snapshot();
    let scan_io = [0, 1, 2, 3].map(|i| after[i] - load_io[i]);
    // Listed while the database is open: closing it closes its file system.
    let fs = probe
        .fs
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
        .context("the database opened no file system")?;
    let logical = backends
        .rt
        .block_on(counting::logical_bytes(fs.as_ref(), "/"))
        .context("listing the files left")?;
    drop(fs);
    client.close()?;
    drop(client);
    if cpu_dir.is_some() {
        // A chunkfs deletes replaced files' chunks at the servers' next heartbeats.
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    let physical = physical_dir.map(|d| disk_bytes(&d).saturating_sub(physical_before));
    Ok(Row {
        backend: backend.to_string(),
        flush,
        elapsed_s,
        cells: reports.iter().map(|r| r.cells).sum(),
        key_bytes: reports.iter().map(|r| r.key_bytes).sum(),
        value_bytes: reports.iter().map(|r| r.value_bytes).sum(),
        reports,
        load_io,
        scanned,
        scan_s,
        scan_io,
        logical,
        physical,
        peak_rss_kb: super::peak_rss_kb(),
        memory: [load_memory, scan_memory],
        load_cpu_s,
    })
}

/// User and system CPU seconds of process `pid` (`self`: this one), all its threads; 0 when
/// /proc does not tell.
fn cpu_seconds(pid: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) in parentheses: state is the
    // 3rd field, utime the 14th and stime the 15th.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // SAFETY: sysconf reads a constant of the system; no memory of this process is touched.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) as f64 / hz
}

/// CPU seconds of the processes whose command line names `dir` (a chunkfs started by
/// [`chunkfs::launch::LocalDfs`] passes its directory to every server it runs).
fn processes_cpu_seconds(dir: &Path) -> f64 {
    let want = dir.as_os_str().as_encoded_bytes();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    procs
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.bytes().all(|b| b.is_ascii_digit()).then_some(name)
        })
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                // The directory or a path below it (`kfs-like` must not match
                // `kfs-like-rs`).
                c.split(|b| *b == 0).any(|arg| {
                    arg.strip_prefix(want)
                        .is_some_and(|rest| rest.is_empty() || rest[0] == b'/')
                })
            })
        })
        .map(|pid| cpu_seconds(&pid))
        .sum()
}

/// Resets the process's peak resident set (VmHWM) so that each run reports its own; ignored
/// where the kernel does not offer it.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Bytes allocated on disk under `path` (as `du` counts them).
fn disk_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.blocks() * 512;
    }
    std::fs::read_dir(path)
        .map(|d| d.flatten().map(|e| disk_bytes(&e.path())).sum())
        .unwrap_or(0)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

pub fn run(mut args: DfsBenchArgs) -> anyhow::Result<()> {
    if args.seed_size {
        args.lines = SEED_LINES;
        args.loaders = SEED_LOADERS;
    }
    if args.loaders == 0 || args.lines == 0 {
        bail!("--loaders and --lines must be at least 1");
    }
    let (base, _tmp) = super::work_dir(&args.dir, "ht-bench-dfs-")?;
    std::fs::create_dir_all(&base)?;
    let mut files = Vec::new();
    for i in 0..args.loaders {
        let p = base.join(format!("query-log-{i}.tsv"));
        let mut w = std::io::BufWriter::new(std::fs::File::create(&p)?);
        super::querylog::generate(args.lines, args.seed + i as u64, &mut w)?;
        std::io::Write::flush(&mut w)?;
        files.push(p);
    }
    let backends = Backends::start(&base, &args.backends)?;
    let engine = embedded::EmbeddedOptions::default().engine;
    let load = hql::load::LoadLimits::default();
    let parsers = std::thread::available_parallelism().map_or(1, |n| n.get());
    eprintln!(
        "limits: cell caches {} MiB (flushed at {} MiB a group), block cache {} MiB, commit-log \
         queue {} MiB, {} maintenance threads; per loader {} chunks of {} MiB in flight",
        mib(engine.cell_cache_limit_bytes),
        mib(engine.cell_cache_flush_bytes),
        mib(engine.block_cache_bytes),
        mib(engine.commit_log.queue_limit_bytes as u64),
        engine.maintenance_threads,
        parsers + load.extra_chunks_in_flight,
        mib(load.chunk_bytes as u64),
    );
    let mut rows: Vec<Row> = Vec::new();
    let mut run = 0;
    for backend in &args.backends {
        for flush in [false, true] {
            run += 1;
            let dir = base.join(format!("db{run}"));
            let row = run_one(&backends, backend, run, &dir, &files, flush)
                .with_context(|| format!("{backend}, commit-log flush {flush}"))?;
            eprintln!(
                "{backend} flush {}: {:.0} inserts/s, scan {:.0} cells/s",
                row.mode(),
                row.inserts_per_sec(),
                row.scan_cells_per_sec()
            );
            for (i, r) in row.reports.iter().enumerate() {
                eprintln!("loader {}:\n{}", i + 1, seed_report(r));
            }
            // The table of this backend is not needed again: free its disk for the next.
            let _ = std::fs::remove_dir_all(&dir);
            rows.push(row);
        }
    }
    report(&args, &rows)
}

/// Hypertable's load report as the seed printed it for each loader.
fn seed_report(r: &LoadReport) -> String {
    format!(
        "  Elapsed time:  {:.2} s\nAvg value size:  {:.2} bytes\n  Avg key size:  {:.2} bytes\n    Throughput:  {:.2} bytes/s\n Total inserts:  {}\n    Throughput:  {:.2} inserts/s",
        r.elapsed.as_secs_f64(),
        r.avg_value_bytes(),
        r.avg_key_bytes(),
        r.bytes_per_sec(),
        r.cells,
        r.cells_per_sec()
    )
}

fn report(args: &DfsBenchArgs, rows: &[Row]) -> anyhow::Result<()> {
    let local = |r: &Row| {
        rows.iter()
            .find(|l| l.backend == "local" && l.flush == r.flush)
    };
    let ratio = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.2}"));
    println!(
        "| backend | commit-log flush | elapsed s | avg key B | avg value B | bytes/s | inserts/s per loader | inserts/s total | ratio to local | scan s | scan cells/s | scan ratio |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut figures = Vec::new();
    for r in rows {
        let l = local(r);
        let load_ratio = ratio(l.map(|l| r.inserts_per_sec() / l.inserts_per_sec()));
        let scan_ratio = ratio(l.map(|l| r.scan_cells_per_sec() / l.scan_cells_per_sec()));
        let per_loader =
            r.reports.iter().map(LoadReport::cells_per_sec).sum::<f64>() / r.reports.len() as f64;
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.0} | {per_loader:.0} | {:.0} | {load_ratio} | {:.2} | {:.0} | {scan_ratio} |",
            r.backend,
            r.mode(),
            r.elapsed_s,
            r.key_bytes as f64 / r.cells as f64,
            r.value_bytes as f64 / r.cells as f64,
            r.user_bytes() as f64 / r.elapsed_s,
            r.inserts_per_sec(),
            r.scan_s,
            r.scan_cells_per_sec(),
        );
        figures.push(format!(
            "{} flush {}: {:.0} inserts/s ({per_loader:.0}/loader), ratio {load_ratio}, scan {:.0} cells/s, scan ratio {scan_ratio}",
            r.backend,
            r.mode(),
            r.inserts_per_sec(),
            r.scan_cells_per_sec(),
        ));
    }
    println!();
    println!(
        "| backend | flush | kind | MiB written | appends | durable appends | KiB/append | MiB read (load) | reads (load) | MiB read (scan) | reads (scan) | files made | files removed |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        for (i, kind) in Kind::ALL.iter().enumerate() {
            let (w, s) = (r.load_io[i], r.scan_io[i]);
            if w == Snapshot::default() && s == Snapshot::default() {
                continue;
            }
            println!(
                "| {} | {} | {} | {:.1} | {} | {} | {:.1} | {:.1} | {} | {:.1} | {} | {} | {} |",
                r.backend,
                r.mode(),
                kind.name(),
                mib(w.bytes_written),
                w.appends,
                w.durable_appends,
                w.bytes_written as f64 / 1024.0 / w.appends.max(1) as f64,
                mib(w.bytes_read),
                w.reads,
                mib(s.bytes_read),
                s.reads,
                w.created,
                w.removed
            );
        }
    }
    println!();
    println!(
        "| backend | flush | user MiB | MiB written | write amplification | files left | MiB left (one copy) | MiB on disk | peak RSS MiB | load CPU s (bench) | load CPU s (servers) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let written: u64 = r.load_io.iter().map(|s| s.bytes_written).sum();
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.2} | {} | {:.1} | {} | {} | {:.1} | {} |",
            r.backend,
            r.mode(),
            mib(r.user_bytes()),
            mib(written),
            written as f64 / r.user_bytes().max(1) as f64,
            r.logical.1,
            mib(r.logical.0),
            r.physical.map_or("-".into(), |b| format!("{:.1}", mib(b))),
            r.peak_rss_kb
                .map_or("-".into(), |k| format!("{:.0}", k as f64 / 1024.0)),
            r.load_cpu_s.0,
            r.load_cpu_s.1.map_or("-".into(), |s| format!("{s:.1}")),
        );
    }
    println!();
    println!(
        "| backend | flush | phase | RSS MiB at its peak | live heap MiB | cell caches MiB | block cache MiB | store indexes and blooms MiB | rest of the heap MiB |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        for (phase, m) in ["load", "scan"].iter().zip(&r.memory) {
            let counted = m.cell_caches + m.block_cache + m.store_indexes;
            println!(
                "| {} | {} | {phase} | {:.0} | {} | {:.0} | {:.0} | {:.1} | {} |",
                r.backend,
                r.mode(),
                mib(m.rss),
                m.heap.map_or("-".into(), |h| format!("{:.0}", mib(h))),
                mib(m.cell_caches),
                mib(m.block_cache),
                mib(m.store_indexes),
                m.heap.map_or("-".into(), |h| format!(
                    "{:.0}",
                    mib(h.saturating_sub(counted))
                )),
            );
        }
    }
    println!();
    let mut bars: Vec<chart::Bars> = Vec::new();
    for r in rows {
        let i = usize::from(r.flush);
        match bars.iter_mut().find(|b| b.backend == r.backend) {
            Some(b) => {
                b.inserts_per_s[i] = r.inserts_per_sec();
                b.scan_cells_per_s[i] = r.scan_cells_per_sec();
            }
            None => {
                let mut b = chart::Bars {
                    backend: r.backend.clone(),
                    inserts_per_s: [f64::NAN; 2],
                    scan_cells_per_s: [f64::NAN; 2],
                };
                b.inserts_per_s[i] = r.inserts_per_sec();
                b.scan_cells_per_s[i] = r.scan_cells_per_sec();
                bars.push(b);
            }
        }
    }
    let title = format!(
        "ht bench dfs: {} loaders x {} lines ({} inserts)",
        args.loaders,
        args.lines,
        rows.first().map_or(0, |r| r.cells)
    );
    // A run that records nothing changes no file of the repository unless told to.
    let chart = match (&args.chart, args.no_record) {
        (Some(c), _) => Some(super::repo_path(c)),
        (None, false) => Some(super::repo_path(Path::new("bench/dfs.svg"))),
        (None, true) => None,
    };
    if let Some(c) = &chart {
        chart::draw(c, &title, &bars)?;
    }
    for r in rows {
        let l = local(r);
        println!(
            "dfs: backend={} flush={} inserts_per_s={:.0} ratio={} scan_ratio={} cells={}",
            r.backend,
            r.mode(),
            r.inserts_per_sec(),
            ratio(l.map(|l| r.inserts_per_sec() / l.inserts_per_sec())),
            ratio(l.map(|l| r.scan_cells_per_sec() / l.scan_cells_per_sec())),
            r.scanned
        );
    }
    // Every backend and mode must end with the same table.
    let want = rows.first().map_or(0, |r| r.scanned);
    let bad: Vec<String> = rows
        .iter()
        .filter(|r| r.scanned != want || r.scanned == 0)
        .map(|r| format!("{} flush {}: {} cells", r.backend, r.mode(), r.scanned))
        .collect();
    if !args.no_record {
        let line = format!(
            "| {} | {} | {} | `{}` | dfs, {} loaders x {} lines: {} |",
            super::utc_now(),
            super::git_commit(),
            super::machine(),
            super::command_line(),
            args.loaders,
            args.lines,
            figures.join("; ")
        );
        let path = super::append_result(&line)?;
        println!(
            "(chart {}; appended to {})",
            chart.as_deref().unwrap_or(Path::new("-")).display(),
            path.display()
        );
    }
    if !bad.is_empty() {
        bail!(
            "the scans disagree (the first run scanned {want} cells): {}",
            bad.join(", ")
        );
    }
    Ok(())
}

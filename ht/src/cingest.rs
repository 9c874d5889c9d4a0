//! `ht cingest`: continuous ingest with an agitator, after Accumulo's long-running check
//! (`accumulo-testing`'s cingest). Ingest clients write linked lists of random rows
//! (`cingest/ingest.rs`, layout in `cingest/node.rs`), walkers follow the links while they are
//! written (`cingest/walk.rs`), an agitator kills and restarts servers (`cingest/agitate.rs`),
//! and verify scans everything and counts REFERENCED, UNREFERENCED and UNDEFINED rows
//! (`cingest/verify.rs`): UNDEFINED > 0 means an acknowledged cell was lost.
//! `ht cingest run` does it all on a local cluster for a given time.

mod agitate;
mod ingest;
mod node;
#[cfg(test)]
mod tests;
mod verify;
mod walk;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use client::cluster::{ClusterClient, ClusterOptions};

use crate::cluster_cmd::{self, ClusterFile};
use agitate::{AgitateConfig, Kills, Kind};
use ingest::{IngestConfig, IngestStats};
use walk::{WalkConfig, WalkStats};

/// A stop signal that threads poll, and sleep on.
#[derive(Debug, Default)]
pub struct Stop(AtomicBool);

impl Stop {
    pub fn set(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Sleeps for `d` or until set; true if set.
    pub fn sleep(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        while !self.is_set() {
            let now = Instant::now();
            if now >= until {
                return false;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(50)));
        }
        true
    }
}

#[derive(Subcommand)]
pub enum CingestCommand {
    /// Writes linked lists of random rows for --seconds (or --entries cells).
    Ingest(IngestArgs),
    /// Follows the lists one row at a time for --seconds, checking every referenced row exists.
    Walk(WalkArgs),
    /// Looks up batches of referenced rows in one scan each for --seconds.
    Batchwalk(WalkArgs),
    /// Scans the whole table: prints REFERENCED, UNREFERENCED, UNDEFINED (lost) and CORRUPT
    /// counts; exits non-zero if a row is undefined or a cell corrupt. Run it with ingest
    /// stopped.
    Verify(VerifyArgs),
    /// Kills (SIGKILL) and restarts a random range server, the active master or the
    /// Hyperspace leader of a local cluster every --kill-every seconds.
    Agitate(AgitateArgs),
    /// Starts a local cluster (or uses the one running in --data-dir), runs ingest, walkers and
    /// the agitator for --seconds, then verify; the last line is `cingest: written=W
    /// referenced=R unreferenced=U undefined=X kills=K`. Exits non-zero on a loss.
    Run(RunArgs),
}

#[derive(Args, Debug, Clone)]
pub struct TableArgs {
    /// The cluster's directory (`ht start --data-dir`).
    #[arg(long = "data-dir", default_value = "./ht-cluster")]
    data_dir: PathBuf,
    /// The table the lists live in.
    #[arg(long, default_value = "/cingest")]
    table: String,
}

#[derive(Args, Debug, Clone)]
pub struct IngestOpts {
    /// Nodes an ingest client writes between two flushes (Accumulo's flushInterval).
    #[arg(long, default_value_t = 10_000)]
    flush_interval: usize,
    /// Batches of nodes per set of lists (Accumulo's maxDepth).
    #[arg(long, default_value_t = 25)]
    max_depth: u32,
    /// Column families of a new table (1..=255).
    #[arg(long, default_value_t = 8)]
    families: usize,
    /// Qualifiers are random numbers below this (at most 65536).
    #[arg(long, default_value_t = 32_768)]
    max_qualifier: u32,
    /// Failed flushes in a row after which an ingest client gives up.
    #[arg(long, default_value_t = 5)]
    max_failed_flushes: u32,
}

#[derive(Args, Debug, Clone)]
pub struct WalkOpts {
    /// Milliseconds a walker waits between two lookups.
    #[arg(long, default_value_t = 10)]
    walker_sleep_ms: u64,
    /// Lookups of one walk before the walker starts over at a random row.
    #[arg(long, default_value_t = 1_000)]
    walk_steps: u32,
    /// Rows a batch walker looks up in one scan.
    #[arg(long, default_value_t = 100)]
    batch_size: usize,
    /// Times a row that was not found is looked up again before it counts as missing.
    #[arg(long, default_value_t = 3)]
    miss_retries: u32,
    /// Milliseconds before each of those lookups.
    #[arg(long, default_value_t = 2_000)]
    miss_retry_ms: u64,
}

#[derive(Args, Debug)]
pub struct IngestArgs {
    #[command(flatten)]
    table: TableArgs,
    #[command(flatten)]
    opts: IngestOpts,
    /// Seconds to write for.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Stop after this many cells (0: only --seconds bounds it).
    #[arg(long, default_value_t = 0)]
    entries: u64,
    /// Seed of the random rows (default: random).
    #[arg(long)]
    seed: Option<u64>,
}

#[derive(Args, Debug)]
pub struct WalkArgs {
    #[command(flatten)]
    table: TableArgs,
    #[command(flatten)]
    opts: WalkOpts,
    /// Seconds to walk for.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    #[arg(long)]
    seed: Option<u64>,
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    #[command(flatten)]
    table: TableArgs,
    /// The most distinct rows (seen or pointed at) verify holds in memory (about 20 bytes
    /// each).
    #[arg(long, default_value_t = 200_000_000)]
    max_rows: usize,
}

#[derive(Args, Debug, Clone)]
pub struct AgitateOpts {
    /// Milliseconds between a kill and the restart.
    #[arg(long, default_value_t = 1_000)]
    restart_after_ms: u64,
    /// What to kill (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Kind::ALL)]
    kill: Vec<Kind>,
    /// Never kill the range server that holds METADATA (works around a master that stalls
    /// when that server dies while a range move is under way; see bench/RESULTS.md).
    #[arg(long)]
    spare_root: bool,
}

#[derive(Args, Debug)]
pub struct AgitateArgs {
    /// The cluster's directory (`ht start --data-dir`).
    #[arg(long = "data-dir", default_value = "./ht-cluster")]
    data_dir: PathBuf,
    /// Seconds between kills.
    #[arg(long)]
    kill_every: u64,
    #[command(flatten)]
    opts: AgitateOpts,
    /// Seconds to agitate for.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    #[arg(long)]
    seed: Option<u64>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    table: TableArgs,
    /// Seconds of ingest, walks and agitation before verify.
    #[arg(long)]
    seconds: u64,
    /// Kill and restart a server every this many seconds (no agitator without it).
    #[arg(long)]
    agitate_every: Option<u64>,
    #[command(flatten)]
    agitate: AgitateOpts,
    /// Ingest clients.
    #[arg(long, default_value_t = 2)]
    ingesters: usize,
    /// Walkers.
    #[arg(long, default_value_t = 1)]
    walkers: usize,
    /// Batch walkers.
    #[arg(long, default_value_t = 1)]
    batch_walkers: usize,
    #[command(flatten)]
    ingest: IngestOpts,
    #[command(flatten)]
    walk: WalkOpts,
    /// The most distinct rows verify holds in memory (about 20 bytes each).
    #[arg(long, default_value_t = 200_000_000)]
    max_rows: usize,
    /// A cluster this command starts: range servers.
    #[arg(long, default_value_t = 3)]
    rangeservers: usize,
    /// A cluster this command starts: its range servers split ranges above this many bytes
    /// (small, so ranges split and move while the agitator kills).
    #[arg(long, default_value_t = 4 << 20)]
    split_bytes: u64,
    /// Leave a cluster this command started running afterwards.
    #[arg(long)]
    keep_cluster: bool,
    #[arg(long)]
    seed: Option<u64>,
}

/// Runs a `ht cingest` command; returns the process exit code.
pub fn main(cmd: CingestCommand) -> anyhow::Result<i32> {
    match cmd {
        CingestCommand::Ingest(a) => ingest_cmd(a),
        CingestCommand::Walk(a) => walk_cmd(a, false),
        CingestCommand::Batchwalk(a) => walk_cmd(a, true),
        CingestCommand::Verify(a) => verify_cmd(a),
        CingestCommand::Agitate(a) => agitate_cmd(a),
        CingestCommand::Run(a) => run(a),
    }
}

fn seed_or_random(seed: Option<u64>) -> u64 {
    seed.unwrap_or_else(rand::random)
}

fn ingest_config(o: &IngestOpts, entries: u64, seed: u64) -> IngestConfig {
    IngestConfig {
        flush_interval: o.flush_interval,
        max_depth: o.max_depth,
        max_qualifier: o.max_qualifier,
        entries,
        max_failed_flushes: o.max_failed_flushes.max(1),
        seed,
    }
}

fn walk_config(o: &WalkOpts, seed: u64) -> WalkConfig {
    WalkConfig {
        sleep_ms: o.walker_sleep_ms,
        max_steps: o.walk_steps.max(1),
        batch_size: o.batch_size.max(1),
        miss_retries: o.miss_retries,
        miss_retry_ms: o.miss_retry_ms,
        seed,
    }
}

/// Connects to the cluster in `dir` with calls retrying for `retry_for`.
fn connect(dir: &Path, retry_for: Option<Duration>) -> anyhow::Result<ClusterClient> {
    let file = ClusterFile::read(dir)?;
    let creds = rpc::ClusterCredentials::load(dir, "client")
        .with_context(|| format!("cannot load the client credentials from {}", dir.display()))?;
    let mut opts = ClusterOptions::new(file.hyperspace_addrs()?);
    if let Some(r) = retry_for {
        opts.retry_for = r;
    }
    ClusterClient::connect(creds, opts)
        .with_context(|| format!("cannot connect to the cluster in {}", dir.display()))
}

/// Sets `stop` after `seconds` (from a thread of its own).
fn stop_after(stop: &std::sync::Arc<Stop>, seconds: u64) {
    let stop = stop.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(seconds));
        stop.set();
    });
}

fn ingest_cmd(a: IngestArgs) -> anyhow::Result<i32> {
    let client = connect(&a.table.data_dir, None)?;
    let families = node::ensure_table(&client, &a.table.table, a.opts.families)?;
    let stop = std::sync::Arc::new(Stop::default());
    stop_after(&stop, a.seconds);
    let stats = IngestStats::default();
    let started = Instant::now();
    let cfg = ingest_config(&a.opts, a.entries, seed_or_random(a.seed));
    let r = ingest::ingest(&client, &a.table.table, &families, &cfg, &stop, &stats);
    println!("{}", ingest_summary(&stats, started));
    r?;
    Ok(0)
}

fn ingest_summary(s: &IngestStats, started: Instant) -> String {
    let acked = s.acked_cells.load(Ordering::Relaxed);
    format!(
        "ingest: {acked} cells acknowledged ({} new rows) in {} flushes, {:.0} cells/s; {} \
         flushes failed ({} cells unknown)",
        s.acked_nodes.load(Ordering::Relaxed),
        s.flushes.load(Ordering::Relaxed),
        ingest::rate(acked, started),
        s.failed_flushes.load(Ordering::Relaxed),
        s.unknown_cells.load(Ordering::Relaxed)
    )
}

fn walk_summary(s: &WalkStats) -> String {
    let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    format!(
        "walkers: {} rows looked up in {} walks and {} batches; {} scans failed \
         (unavailable); late={} missing={} corrupt={}",
        n(&s.lookups),
        n(&s.walks),
        n(&s.batches),
        n(&s.errors),
        n(&s.late),
        n(&s.missing),
        n(&s.corrupt)
    )
}

fn walk_cmd(a: WalkArgs, batch: bool) -> anyhow::Result<i32> {
    let client = connect(&a.table.data_dir, None)?;
    let families = node::open_table(&client, &a.table.table)?;
    let stop = std::sync::Arc::new(Stop::default());
    stop_after(&stop, a.seconds);
    let stats = WalkStats::default();
    let cfg = walk_config(&a.opts, seed_or_random(a.seed));
    if batch {
        walk::batch_walk(&client, &a.table.table, &families, &cfg, &stop, &stats);
    } else {
        walk::walk(&client, &a.table.table, &families, &cfg, &stop, &stats);
    }
    println!("{}", walk_summary(&stats));
    Ok(if stats.failures() > 0 { 1 } else { 0 })
}

fn verify_cmd(a: VerifyArgs) -> anyhow::Result<i32> {
    let client = connect(&a.table.data_dir, None)?;
    let families = node::open_table(&client, &a.table.table)?;
    let report = verify::verify(&client, &a.table.table, &families, a.max_rows)?;
    report.print();
    Ok(if report.ok() { 0 } else { 1 })
}

fn agitate_config(o: &AgitateOpts, every: u64, seed: u64) -> anyhow::Result<AgitateConfig> {
    if every == 0 {
        bail!("--kill-every 0: must be at least 1 second");
    }
    Ok(AgitateConfig {
        kill_every: Duration::from_secs(every),
        restart_after: Duration::from_millis(o.restart_after_ms),
        kinds: o.kill.clone(),
        spare_root: o.spare_root,
        seed,
    })
}

/// The agitator's client: its status calls give up sooner than a writer's.
const AGITATOR_RETRY: Duration = Duration::from_secs(10);

fn agitate_cmd(a: AgitateArgs) -> anyhow::Result<i32> {
    let dir = a.data_dir.canonicalize()?;
    let client = connect(&dir, Some(AGITATOR_RETRY))?;
    let cfg = agitate_config(&a.opts, a.kill_every, seed_or_random(a.seed))?;
    let stop = std::sync::Arc::new(Stop::default());
    stop_after(&stop, a.seconds);
    let kills = Kills::default();
    let r = agitate::agitate(&dir, &client, &cfg, &stop, &kills);
    println!("agitator: kills {}", kills.summary());
    r?;
    Ok(0)
}

/// `ht cingest run`.
fn run(a: RunArgs) -> anyhow::Result<i32> {
    let dir = &a.table.data_dir;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))?;
    let running = ClusterFile::read(&dir)
        .map(|f| f.processes.iter().any(|p| cluster_cmd::alive(p.pid)))
        .unwrap_or(false);
    if running {
        eprintln!("cingest: using the cluster running in {}", dir.display());
    } else {
        cluster_cmd::start(cluster_cmd::StartArgs {
            data_dir: dir.clone(),
            hyperspace: 3,
            rangeservers: a.rangeservers,
            masters: 2,
            dfs: None,
            chunkservers: None,
            split_bytes: Some(a.split_bytes),
            master_poll_ms: None,
            master_gc_ms: None,
            block_cache_mb: None,
            wait_secs: 90,
        })?;
    }
    let result = run_on(&dir, &a);
    if !running
        && !a.keep_cluster
        && let Err(e) = cluster_cmd::stop(cluster_cmd::DirArgs {
            data_dir: dir.clone(),
        })
    {
        eprintln!(
            "cingest: cannot stop the cluster in {}: {e:#}",
            dir.display()
        );
    }
    result
}

fn run_on(dir: &Path, a: &RunArgs) -> anyhow::Result<i32> {
    let table = a.table.table.as_str();
    let admin = connect(dir, None)?;
    let families = node::ensure_table(&admin, table, a.ingest.families)?;
    let seed = seed_or_random(a.seed);
    eprintln!("cingest: seed {seed}");
    let ingest_cfg = ingest_config(&a.ingest, 0, seed);
    ingest_cfg.check()?;
    let agitate_cfg = a
        .agitate_every
        .map(|every| agitate_config(&a.agitate, every, seed ^ 0xa617))
        .transpose()?;
    let stop = Stop::default();
    let ingest_stats = IngestStats::default();
    let walk_stats = WalkStats::default();
    let kills = Kills::default();
    let started = Instant::now();
    let mut failures: Vec<String> = Vec::new();
    std::thread::scope(|s| -> anyhow::Result<()> {
        let mut ingesters = Vec::new();
        for i in 0..a.ingesters {
            let client = connect(dir, None)?;
            let cfg = IngestConfig {
                seed: seed.wrapping_add(1 + i as u64),
                ..ingest_cfg.clone()
            };
            let (families, stop, stats) = (&families, &stop, &ingest_stats);
            ingesters
                .push(s.spawn(move || ingest::ingest(&client, table, families, &cfg, stop, stats)));
        }
        let mut readers = Vec::new();
        for i in 0..a.walkers + a.batch_walkers {
            let client = connect(dir, None)?;
            let cfg = walk_config(&a.walk, seed.wrapping_add(1_000 + i as u64));
            let batch = i >= a.walkers;
            let (families, stop, stats) = (&families, &stop, &walk_stats);
            readers.push(s.spawn(move || {
                if batch {
                    walk::batch_walk(&client, table, families, &cfg, stop, stats)
                } else {
                    walk::walk(&client, table, families, &cfg, stop, stats)
                }
            }));
        }
        let agitator = match &agitate_cfg {
            Some(cfg) => {
                let client = connect(dir, Some(AGITATOR_RETRY))?;
                let (stop, kills) = (&stop, &kills);
                Some(s.spawn(move || agitate::agitate(dir, &client, cfg, stop, kills)))
            }
            None => None,
        };
        let until = started + Duration::from_secs(a.seconds);
        let mut next_report = started + Duration::from_secs(10);
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(200));
            if Instant::now() >= next_report {
                next_report += Duration::from_secs(10);
                eprintln!(
                    "cingest: {:>4} s  {}  kills {}",
                    started.elapsed().as_secs(),
                    ingest_summary(&ingest_stats, started),
                    kills.summary()
                );
            }
            if ingesters.iter().all(|h| h.is_finished()) {
                break;
            }
            if agitator.as_ref().is_some_and(|h| h.is_finished()) {
                break;
            }
        }
        stop.set();
        for h in ingesters {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failures.push(format!("an ingest client stopped: {e:#}")),
                Err(_) => failures.push("an ingest client panicked".into()),
            }
        }
        for h in readers {
            if h.join().is_err() {
                failures.push("a walker panicked".into());
            }
        }
        if let Some(h) = agitator {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failures.push(format!("the agitator stopped: {e:#}")),
                Err(_) => failures.push("the agitator panicked".into()),
            }
        }
        Ok(())
    })?;
    let ran = started.elapsed();
    println!("cingest: ran {:.0} s", ran.as_secs_f64());
    println!("cingest: {}", ingest_summary(&ingest_stats, started));
    println!("cingest: {}", walk_summary(&walk_stats));
    if let Ok(r) = walk_stats.reported.lock() {
        for line in r.iter() {
            println!("cingest: walker: {line}");
        }
    }
    println!("cingest: kills {}", kills.summary());
    let verify_started = Instant::now();
    let report = verify::verify(&admin, table, &families, a.max_rows)?;
    println!(
        "cingest: verify scanned {} cells in {:.1} s",
        report.cells,
        verify_started.elapsed().as_secs_f64()
    );
    report.print();
    let acked_nodes = ingest_stats.acked_nodes.load(Ordering::Relaxed);
    if report.defined() < acked_nodes {
        failures.push(format!(
            "the table holds {} rows, fewer than the {acked_nodes} new rows acknowledged",
            report.defined()
        ));
    }
    if walk_stats.failures() > 0 {
        failures.push(format!("the walkers failed: {}", walk_summary(&walk_stats)));
    }
    if !report.ok() {
        failures.push(format!(
            "verify found {} undefined rows and {} corrupt cells",
            report.undefined, report.corrupt
        ));
    }
    for f in &failures {
        println!("cingest: FAILED: {f}");
    }
    println!(
        "cingest: written={} referenced={} unreferenced={} undefined={} kills={}",
        ingest_stats.acked_cells.load(Ordering::Relaxed),
        report.referenced,
        report.unreferenced,
        report.undefined,
        kills.total()
    );
    Ok(if failures.is_empty() { 0 } else { 1 })
}

//! `ht bench hyperspace`: lock acquire+release pairs and attribute sets per second on a local
//! group of replica processes, with 1 and with N concurrent clients (each its own session),
//! with p50/p99 latency per operation.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use hyperspace::client::{ClientOptions, Hyperspace};
use hyperspace::command::{LockMode, flags};
use hyperspace::launch::{GroupOptions, LocalGroup};

#[derive(Args)]
pub struct HyperspaceBenchArgs {
    /// Replica processes.
    #[arg(long, default_value_t = 3)]
    replicas: u64,
    /// Concurrent client counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    clients: Vec<usize>,
    /// Seconds per workload and client count.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Replicas skip fdatasync of the Raft log (not durable; shows the cost of the sync).
    #[arg(long)]
    no_sync: bool,
    /// Where the replicas' data goes; default a temporary directory in /tmp.
    #[arg(long)]
    dir: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq)]
enum Workload {
    /// Exclusive lock then release on the client's own file: two log entries per pair.
    LockPairs,
    /// attr_set on the client's own file: one log entry.
    AttrSets,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::LockPairs => "lock+release pairs",
            Workload::AttrSets => "attr sets",
        }
    }
}

struct Outcome {
    ops_per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn measure(
    group: &LocalGroup,
    workload: Workload,
    clients: usize,
    seconds: u64,
) -> anyhow::Result<Outcome> {
    let mut sessions = Vec::new();
    for i in 0..clients {
        let (hs, _events) = Hyperspace::connect(
            group.addrs(),
            group.credentials().clone(),
            ClientOptions::default(),
        )
        .await
        .context("open a session")?;
        let path = format!("/bench/c{i}");
        let handle = hs
            .open(&path, flags::CREATE | flags::WRITE | flags::LOCK, 0)
            .await?;
        sessions.push((hs, handle));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (hs, handle) in sessions.iter().cloned() {
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                match workload {
                    Workload::LockPairs => {
                        hs.lock(handle, LockMode::Exclusive).await?;
                        hs.release(handle).await?;
                    }
                    Workload::AttrSets => {
                        hs.attr_set(handle, "v", n.to_string()).await?;
                    }
                }
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
                n += 1;
            }
            anyhow::Ok(lat)
        }));
    }
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await??);
    }
    let elapsed = start.elapsed().as_secs_f64();
    for (hs, handle) in sessions {
        hs.close(handle).await.ok();
        hs.close_session().await.ok();
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    Ok(Outcome {
        ops_per_sec: lat.len() as f64 / elapsed,
        p50_ms: percentile(&lat, 0.50),
        p99_ms: percentile(&lat, 0.99),
    })
}

pub fn run(args: HyperspaceBenchArgs) -> anyhow::Result<()> {
    if args.clients.is_empty() || args.clients.contains(&0) {
        bail!("--clients needs counts of at least 1");
    }
    let (dir, _tmp) = super::work_dir(&args.dir, "ht-bench-hyperspace-")?;
    let ht = std::env::current_exe()?;
    let rt = tokio::runtime::Runtime::new()?;
    let mut rows = Vec::new();
    rt.block_on(async {
        let group = LocalGroup::start(
            &ht,
            &dir,
            GroupOptions {
                replicas: args.replicas,
                sync: !args.no_sync,
                ..Default::default()
            },
        )?;
        group
            .leader(Duration::from_secs(30))
            .await
            .map_err(anyhow::Error::msg)?;
        let (admin, _e) = Hyperspace::connect(
            group.addrs(),
            group.credentials().clone(),
            ClientOptions::default(),
        )
        .await?;
        admin.mkdirs("/bench").await?;
        for workload in [Workload::LockPairs, Workload::AttrSets] {
            for &clients in &args.clients {
                let o = measure(&group, workload, clients, args.seconds).await?;
                println!(
                    "{:<20} clients {:>3}: {:>9.0} ops/s  p50 {:>7.2} ms  p99 {:>7.2} ms",
                    workload.name(),
                    clients,
                    o.ops_per_sec,
                    o.p50_ms,
                    o.p99_ms
                );
                rows.push((workload, clients, o));
            }
        }
        admin.close_session().await.ok();
        anyhow::Ok(())
    })?;
    let figures: Vec<String> = rows
        .iter()
        .map(|(w, c, o)| {
            format!(
                "{} x{c}: {:.0}/s p50 {:.2} ms p99 {:.2} ms",
                w.name(),
                o.ops_per_sec,
                o.p50_ms,
                o.p99_ms
            )
        })
        .collect();
    let line = format!(
        "| {} | {} | {} | `{}` | hyperspace, {} replicas{}: {} |",
        super::utc_now(),
        super::git_commit(),
        super::machine(),
        super::command_line(),
        args.replicas,
        if args.no_sync { ", no fsync" } else { "" },
        figures.join("; ")
    );
    let path = super::append_result(&line)?;
    println!("(appended to {})", path.display());
    Ok(())
}

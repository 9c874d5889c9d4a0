//! The cluster roles of `ht serve`: a master (`ht serve master`) and a range server that
//! joins a cluster (`ht serve rangeserver --hyperspace ...`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use client::cluster::layout::*;
use hyperspace::client::{ClientOptions as HsOptions, Hyperspace, SessionState};
use hyperspace::command::{LockMode, flags};

use crate::serve_cmd::{RangeserverArgs, wait_for_signal};

#[derive(Args)]
pub struct MasterArgs {
    /// Address to serve on once this master is active.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub(crate) listen: SocketAddr,
    /// The Hyperspace replicas (comma-separated).
    #[arg(long, value_delimiter = ',', required = true)]
    hyperspace: Vec<SocketAddr>,
    /// The cluster data directory (credentials `master` in `<dir>/tls`).
    #[arg(long = "data-dir", default_value = "./ht-data")]
    data_dir: PathBuf,
    /// The file system the range servers share (default `file://<data-dir>/fs`).
    #[arg(long)]
    dfs: Option<String>,
    /// Milliseconds between looks at the range servers.
    #[arg(long, default_value_t = 500)]
    poll_ms: u64,
    /// Do not move ranges to balance the servers on its own (BALANCE still does).
    #[arg(long)]
    no_auto_balance: bool,
}

/// The shared file system's URL: `--dfs` or `file://<data-dir>/fs`.
pub fn shared_fs_url(dfs: Option<&str>, data_dir: &Path) -> anyhow::Result<String> {
    if let Some(u) = dfs {
        return Ok(u.to_string());
    }
    let dir = data_dir.join("fs");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))?;
    Ok(format!("file://{}", dir.display()))
}

fn credentials(data_dir: &Path, name: &str) -> anyhow::Result<rpc::ClusterCredentials> {
    rpc::ClusterCredentials::load(data_dir, name).with_context(|| {
        format!(
            "cannot load the {name} credentials from {} (run `ht init` first)",
            data_dir.display()
        )
    })
}

/// Session settings of servers: a short lease, so a dead server is noticed in seconds.
fn server_session() -> HsOptions {
    HsOptions {
        lease: Duration::from_secs(6),
        grace: Duration::from_secs(10),
        ..HsOptions::default()
    }
}

pub fn master(args: MasterArgs) -> anyhow::Result<()> {
    let creds = credentials(&args.data_dir, client::cluster::proto::MASTER_NAME)?;
    let url = shared_fs_url(args.dfs.as_deref(), &args.data_dir)?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let fs = crate::fs_url::open_any_url(&url, Some(&creds))
            .await
            .with_context(|| format!("cannot open the file system {url}"))?;
        let mut config = master::MasterConfig::new(args.hyperspace, creds, args.listen, fs);
        config.poll_interval = Duration::from_millis(args.poll_ms.max(10));
        config.auto_balance = !args.no_auto_balance;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            wait_for_signal().await;
            let _ = stop_tx.send(true);
        });
        master::run(config, stop_rx)
            .await
            .context("the master stopped")
    })
}

/// A range server in a cluster: a new incarnation `rs<N>` each start, with its engine at
/// `/servers/rs<N>` on the shared file system, registered under `/ht/servers/rs<N>` with an
/// exclusive lock it holds while it lives.
pub fn rangeserver(args: RangeserverArgs) -> anyhow::Result<()> {
    use rangeserver::engine::{Engine, EngineOptions};
    use rangeserver::server::{RangeServerOptions, RangeServerService, SERVER_NAME};
    let creds = credentials(&args.data_dir, SERVER_NAME)?;
    let url = shared_fs_url(args.dfs.as_deref(), &args.data_dir)?;
    let rt = tokio::runtime::Runtime::new()?;
    let (hs, location, fs) = rt.block_on(async {
        let (hs, _events) =
            Hyperspace::connect(args.hyperspace.clone(), creds.clone(), server_session())
                .await
                .context("cannot open a hyperspace session")?;
        hs.mkdirs(SERVERS).await?;
        let n = hs.attr_incr(HT, NEXT_SERVER_ID, 1).await?;
        let fs = crate::fs_url::open_any_url(&url, Some(&creds))
            .await
            .with_context(|| format!("cannot open the file system {url}"))?;
        anyhow::Ok((hs, format!("rs{n}"), fs))
    })?;
    let root = server_root(&location);
    let mut options = EngineOptions::default();
    if let Some(split) = args.split_bytes {
        options.split_size_bytes = split;
        // Caches are written out before they alone could pass the split size.
        options.cell_cache_flush_bytes =
            options.cell_cache_flush_bytes.min((split / 2).max(1 << 20));
    }
    let engine = Engine::open(fs, &root, options, rt.handle().clone())
        .with_context(|| format!("cannot open the engine at {root} on {url}"))?;
    let served = rt.block_on(async {
        let service = RangeServerService::new(engine.clone(), RangeServerOptions::default());
        let paused = service.pause_switch();
        let server = service
            .bind(args.listen, &creds)
            .with_context(|| format!("cannot serve on {}", args.listen))?;
        let addr = server.local_addr();
        let node = server_node(&location);
        let handle = hs
            .open(
                &node,
                flags::READ | flags::WRITE | flags::LOCK | flags::CREATE | flags::EXCL,
                0,
            )
            .await
            .with_context(|| format!("cannot create {node}"))?;
        hs.lock(handle, LockMode::Exclusive).await?;
        hs.attr_set(node.as_str(), ROOT_ATTR, root.clone()).await?;
        // Last: the address tells the master the server is ready.
        hs.attr_set(node.as_str(), ADDR_ATTR, addr.to_string())
            .await?;
        println!("range server {location} serving on {addr}");
        let reporter = tokio::spawn(report_to_master(hs.clone(), creds.clone(), engine.clone()));
        let mut state = hs.state_watch();
        // In jeopardy the lock may be gone any moment: refuse updates and scans until the
        // session is safe again. Expired: another server may already hold our ranges, so stop
        // at once, without touching the files (the master replays our log).
        let watch = async {
            loop {
                let s = *state.borrow_and_update();
                match s {
                    SessionState::Expired => return,
                    SessionState::Jeopardy => {
                        if !paused.swap(true, std::sync::atomic::Ordering::AcqRel) {
                            eprintln!(
                                "range server {location}: hyperspace session in jeopardy; paused"
                            );
                        }
                    }
                    SessionState::Safe => {
                        if paused.swap(false, std::sync::atomic::Ordering::AcqRel) {
                            eprintln!(
                                "range server {location}: hyperspace session safe again; serving"
                            );
                        }
                    }
                }
                if state.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::select! {
            _ = wait_for_signal() => {}
            _ = watch => {
                paused.store(true, std::sync::atomic::Ordering::Release);
                eprintln!("range server {location}: hyperspace session expired; stopping at once");
                std::process::exit(3);
            }
        }
        reporter.abort();
        server.shutdown(Duration::from_secs(5)).await;
        anyhow::Ok(())
    });
    let closed = engine.close().context("cannot close the engine");
    // Closing the session releases the lock: the master recovers this incarnation's ranges
    // into the live servers (a restarted server is a new incarnation).
    rt.block_on(async {
        let _ = tokio::time::timeout(Duration::from_secs(2), hs.close_session()).await;
    });
    served.and(closed)
}

/// Reports to the active master that this range server's ranges changed: once when it has
/// registered, then after every split it makes (checked every 200 ms), so the master records
/// new ranges in METADATA at once instead of at its next poll. A report that fails is made
/// again at the next check; the master's polling stays the safety net.
async fn report_to_master(
    hs: Hyperspace,
    creds: rpc::ClusterCredentials,
    engine: rangeserver::engine::Engine,
) {
    use client::cluster::proto::{DdlReply, DdlRequest, method};
    let mut reported = None;
    let mut master: Option<rpc::Client> = None;
    loop {
        let splits = engine.split_count();
        if reported != Some(splits) {
            let sent = async {
                if master.is_none() {
                    let c = client::cluster::connect_master(&hs, &creds, Duration::from_secs(4))
                        .await
                        .map_err(|e| e.to_string())?;
                    master = Some(c);
                }
                let c = master.as_ref().expect("connected above");
                c.call_message::<_, DdlReply>(
                    method::NUDGE,
                    &DdlRequest::default(),
                    Duration::from_secs(10),
                )
                .await
                .map_err(|e| e.to_string())?
                .into_result()
                .map_err(|e| e.to_string())?;
                Ok::<(), String>(())
            }
            .await;
            match sent {
                Ok(()) => reported = Some(splits),
                Err(e) => {
                    tracing::debug!(error = %e, "cannot report to the master; will retry");
                    master = None;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

//! The cluster roles of `ht serve`: a master (`ht serve master`) and a range server that
//! joins a cluster (`ht serve rangeserver --hyperspace ...`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use rangeserver::iterators::Registry;

use crate::signal::wait_for_signal;

#[derive(Args)]
pub struct RangeserverArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:38060")]
    pub(crate) listen: SocketAddr,
    /// The cluster data directory (credentials `rangeserver` in `<dir>/tls`; run `ht init`
    /// first).
    #[arg(long = "data-dir", default_value = "./ht-data")]
    pub(crate) data_dir: PathBuf,
    /// The file system the engine writes through (`file:///abs/path`, `broker://host:port`,
    /// `hdfs-like://meta:port`, `kfs-like://meta:port`, object-store URLs); default
    /// `file://<data-dir>/rangeserver` (`file://<data-dir>/fs`, shared by all range servers,
    /// with `--hyperspace`).
    #[arg(long)]
    pub(crate) dfs: Option<String>,
    /// Join the cluster whose Hyperspace replicas are these (comma-separated): register, take
    /// ranges from the master, stop at once if the Hyperspace session is lost.
    #[arg(long, value_delimiter = ',')]
    pub(crate) hyperspace: Vec<SocketAddr>,
    /// Split a range once it holds more than this many bytes (default: the engine's, 512 MiB).
    #[arg(long = "split-bytes")]
    pub(crate) split_bytes: Option<u64>,
    /// The block cache of decompressed cell-store blocks, in MiB (default: the engine's, 128).
    #[arg(long = "block-cache-mb", env = "HT_BLOCK_CACHE_MB")]
    pub(crate) block_cache_mb: Option<u64>,
}

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
    /// Milliseconds between rounds of the garbage collection of cell stores shared across
    /// range servers (0: never).
    #[arg(long, default_value_t = 300_000)]
    gc_ms: u64,
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

/// It checks schemas against the kinds of `registry` (and those of the live range servers).
pub fn master(args: MasterArgs, registry: &Arc<Registry>) -> anyhow::Result<()> {
    let creds = credentials(&args.data_dir, proto::master::MASTER_NAME)?;
    let url = shared_fs_url(args.dfs.as_deref(), &args.data_dir)?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let fs = crate::fs_url::open_any_url(&url, Some(&creds))
            .await
            .with_context(|| format!("cannot open the file system {url}"))?;
        let mut config = master::MasterConfig::new(args.hyperspace, creds, args.listen, fs);
        config.poll_interval = Duration::from_millis(args.poll_ms.max(10));
        config.auto_balance = !args.no_auto_balance;
        config.gc_interval = (args.gc_ms > 0).then(|| Duration::from_millis(args.gc_ms));
        config.registry = registry.clone();
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

/// A range server in a cluster (`rangeserver::server::membership`): a new incarnation `rs<N>`
/// each start, with its engine at `/servers/rs<N>` on the shared file system, registered under
/// `/ht/servers/rs<N>` with an exclusive lock it holds while it lives. Exits with status 3 at
/// once, without closing anything, when its Hyperspace session expires.
/// Its engine runs the kinds of `registry`.
pub fn rangeserver(args: RangeserverArgs, registry: &Arc<Registry>) -> anyhow::Result<()> {
    use rangeserver::engine::{Engine, EngineOptions};
    use rangeserver::server::membership::{Ended, Incarnation, MembershipOptions};
    use rangeserver::server::{RangeServerOptions, RangeServerService, SERVER_NAME};
    let creds = credentials(&args.data_dir, SERVER_NAME)?;
    let url = shared_fs_url(args.dfs.as_deref(), &args.data_dir)?;
    let rt = tokio::runtime::Runtime::new()?;
    let membership = MembershipOptions::new(args.hyperspace.clone());
    let (me, fs) = rt.block_on(async {
        let me = Incarnation::begin(&membership, &creds).await?;
        let fs = crate::fs_url::open_any_url(&url, Some(&creds))
            .await
            .with_context(|| format!("cannot open the file system {url}"))?;
        anyhow::Ok((me, fs))
    })?;
    let root = me.root();
    let mut options = EngineOptions {
        registry: registry.clone(),
        // METADATA is one range: clients and the master read it whole where `/ht/root` says.
        unsplit_tables: vec![proto::layout::METADATA_ID],
        ..EngineOptions::default()
    };
    if let Some(mb) = args.block_cache_mb {
        options.block_cache_bytes = mb << 20;
    }
    if let Some(split) = args.split_bytes {
        options.split_size_bytes = split;
        // Caches are written out before they alone could pass the split size.
        options.cell_cache_flush_bytes =
            options.cell_cache_flush_bytes.min((split / 2).max(1 << 20));
    }
    // Opening is blocking (it reaches the file system through the runtime): not inside
    // `block_on`.
    let engine = Engine::open(fs, &root, options, rt.handle().clone())
        .with_context(|| format!("cannot open the engine at {root} on {url}"))?;
    let served = rt.block_on(async {
        let service = RangeServerService::new(engine.clone(), RangeServerOptions::default());
        me.serve(engine.clone(), service, args.listen, wait_for_signal())
            .await
    });
    if let Ok(Ended::Expired) = served {
        std::process::exit(3);
    }
    let closed = engine.close().context("cannot close the engine");
    rt.block_on(me.leave());
    served.map(|_| ()).map_err(anyhow::Error::from).and(closed)
}

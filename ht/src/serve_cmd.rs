//! `ht serve <role>`: runs one server role in the foreground until SIGINT/SIGTERM.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use hyperspace::node::NodeConfig;
use hyperspace::service::{Replica, ReplicaConfig, TransportOptions};

#[derive(Subcommand)]
pub enum ServeCommand {
    /// One Hyperspace replica.
    Hyperspace(HyperspaceArgs),
    /// A DFS broker: serves a file-system backend to the cluster over rpc.
    DfsBroker(DfsBrokerArgs),
    /// A range server: serves the ranges of its engine over rpc.
    Rangeserver(RangeserverArgs),
    /// A master (or a standby, until it gets the master lock).
    Master(crate::serve_cluster::MasterArgs),
}

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
    /// object-store URLs); default `file://<data-dir>/rangeserver` (`file://<data-dir>/fs`,
    /// shared by all range servers, with `--hyperspace`).
    #[arg(long)]
    pub(crate) dfs: Option<String>,
    /// Join the cluster whose Hyperspace replicas are these (comma-separated): register, take
    /// ranges from the master, stop at once if the Hyperspace session is lost.
    #[arg(long, value_delimiter = ',')]
    pub(crate) hyperspace: Vec<SocketAddr>,
    /// Split a range once it holds more than this many bytes (default: the engine's, 512 MiB).
    #[arg(long = "split-bytes")]
    pub(crate) split_bytes: Option<u64>,
}

#[derive(Args)]
pub struct DfsBrokerArgs {
    /// The file system to serve: `file:///abs/path` (a local directory).
    #[arg(long)]
    backend: String,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:38030")]
    listen: SocketAddr,
    /// The cluster data directory (credentials `dfs-broker` in `<dir>/tls`; run `ht init` first).
    #[arg(long = "data-dir", default_value = "./ht-data")]
    data_dir: PathBuf,
    /// Writers open at once, over all clients.
    #[arg(long, default_value_t = 4096)]
    max_open_writers: usize,
    /// Backend readers kept open for reads.
    #[arg(long, default_value_t = 1024)]
    max_cached_readers: usize,
    /// Seconds after which a writer its client no longer keeps alive is closed.
    #[arg(long, default_value_t = 120)]
    writer_idle_secs: u64,
}

#[derive(Args)]
pub struct HyperspaceArgs {
    /// This replica's id (1, 2, ...).
    #[arg(long)]
    id: u64,
    /// The founding replicas as `id@host:port`, comma-separated, this one included.
    #[arg(long, value_delimiter = ',')]
    peers: Vec<String>,
    /// Join an existing group instead of founding one (then add it with `ht hyperspace member add`).
    #[arg(long)]
    join: bool,
    /// Address to listen on (default: this replica's address in --peers).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// The cluster data directory (credentials in `<dir>/tls`, state in `<dir>/hyperspace/<id>`).
    #[arg(long = "data-dir", default_value = "./ht-data")]
    data_dir: PathBuf,
    /// Raft tick in milliseconds (elections after 10 to 20 ticks without a leader).
    #[arg(long, default_value_t = 100)]
    tick_ms: u64,
    /// Compact the Raft log after this many applied entries.
    #[arg(long, default_value_t = 10_000)]
    snapshot_entries: u64,
    /// Do not fdatasync the Raft log (faster, loses the durability promise; benchmarks only).
    #[arg(long)]
    no_sync: bool,
}

/// Parses `id@host:port` items.
pub fn parse_peers(items: &[String]) -> anyhow::Result<BTreeMap<u64, String>> {
    let mut peers = BTreeMap::new();
    for item in items {
        let (id, addr) = item
            .split_once('@')
            .with_context(|| format!("peer {item:?} is not id@host:port"))?;
        let id: u64 = id
            .parse()
            .with_context(|| format!("peer {item:?}: bad id {id:?}"))?;
        let _: SocketAddr = addr
            .parse()
            .with_context(|| format!("peer {item:?}: bad address {addr:?}"))?;
        if peers.insert(id, addr.to_string()).is_some() {
            bail!("peer id {id} given twice");
        }
    }
    Ok(peers)
}

pub fn run(cmd: ServeCommand) -> anyhow::Result<()> {
    // Servers log (structured, to stderr); RUST_LOG overrides the default.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,raft=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match cmd {
        ServeCommand::Hyperspace(args) => serve_hyperspace(args),
        ServeCommand::DfsBroker(args) => serve_dfs_broker(args),
        ServeCommand::Rangeserver(args) if !args.hyperspace.is_empty() => {
            crate::serve_cluster::rangeserver(args)
        }
        ServeCommand::Rangeserver(args) => serve_rangeserver(args),
        ServeCommand::Master(args) => crate::serve_cluster::master(args),
    }
}

fn serve_dfs_broker(args: DfsBrokerArgs) -> anyhow::Result<()> {
    use dfs_broker::broker::{BrokerOptions, BrokerService, SERVER_NAME};
    let credentials =
        rpc::ClusterCredentials::load(&args.data_dir, SERVER_NAME).with_context(|| {
            format!(
                "cannot load the {SERVER_NAME} credentials from {} (run `ht init` first)",
                args.data_dir.display()
            )
        })?;
    let options = BrokerOptions {
        max_open_writers: args.max_open_writers.max(1),
        max_cached_readers: args.max_cached_readers,
        writer_idle_timeout: std::time::Duration::from_secs(args.writer_idle_secs.max(1)),
        ..BrokerOptions::default()
    };
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let backend = dfs_broker::open_backend(&args.backend)
            .with_context(|| format!("cannot open the backend {}", args.backend))?;
        let url = backend.url();
        let service = BrokerService::new(backend, options);
        let server = service
            .bind(args.listen, &credentials)
            .with_context(|| format!("cannot serve on {}", args.listen))?;
        println!("dfs broker serving {url} on {}", server.local_addr());
        wait_for_signal().await;
        server.shutdown(std::time::Duration::from_secs(5)).await;
        // Calls have ended: close what clients left open, so buffered data reaches the backend.
        service.close_all_writers().await;
        anyhow::Ok(())
    })
}

fn serve_rangeserver(args: RangeserverArgs) -> anyhow::Result<()> {
    use rangeserver::engine::{Engine, EngineOptions};
    use rangeserver::server::{RangeServerOptions, RangeServerService, SERVER_NAME};
    let credentials =
        rpc::ClusterCredentials::load(&args.data_dir, SERVER_NAME).with_context(|| {
            format!(
                "cannot load the {SERVER_NAME} credentials from {} (run `ht init` first)",
                args.data_dir.display()
            )
        })?;
    let url = match args.dfs {
        Some(url) => url,
        None => {
            let dir = args.data_dir.join("rangeserver");
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            // file:// needs an absolute path.
            let dir = dir
                .canonicalize()
                .with_context(|| format!("cannot resolve {}", dir.display()))?;
            format!("file://{}", dir.display())
        }
    };
    let rt = tokio::runtime::Runtime::new()?;
    let fs = rt
        .block_on(dfs_broker::open_url(&url, Some(&credentials)))
        .with_context(|| format!("cannot open the file system {url}"))?;
    // Opening is blocking (it reaches the file system through the runtime): not inside
    // `block_on`.
    let engine = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone())
        .with_context(|| format!("cannot open the engine on {url}"))?;
    let served = rt.block_on(async {
        let server = RangeServerService::new(engine.clone(), RangeServerOptions::default())
            .bind(args.listen, &credentials)
            .with_context(|| format!("cannot serve on {}", args.listen))?;
        println!("range server serving on {}", server.local_addr());
        wait_for_signal().await;
        server.shutdown(std::time::Duration::from_secs(5)).await;
        anyhow::Ok(())
    });
    // Calls have ended (or serving failed): close the engine either way, so its log is synced.
    let closed = engine.close().context("cannot close the engine");
    served.and(closed)
}

fn serve_hyperspace(args: HyperspaceArgs) -> anyhow::Result<()> {
    let peers = parse_peers(&args.peers)?;
    let listen = match args.listen {
        Some(a) => a,
        None => peers
            .get(&args.id)
            .with_context(|| format!("--listen not given and id {} not in --peers", args.id))?
            .parse()?,
    };
    let mut node = NodeConfig::new(
        args.id,
        args.data_dir.join("hyperspace").join(args.id.to_string()),
        peers,
    );
    node.join = args.join;
    node.tick = std::time::Duration::from_millis(args.tick_ms.max(1));
    node.snapshot_entries = args.snapshot_entries.max(1);
    node.storage.sync = !args.no_sync;
    let config = ReplicaConfig {
        node,
        listen,
        credentials_dir: args.data_dir.clone(),
        server: rpc::ServerOptions::default(),
        transport: TransportOptions::default(),
    };
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let replica = Replica::start(config)
            .await
            .with_context(|| format!("cannot start hyperspace replica {}", args.id))?;
        println!(
            "hyperspace replica {} serving on {}",
            args.id,
            replica.local_addr()
        );
        wait_for_signal().await;
        replica.shutdown().await;
        anyhow::Ok(())
    })
}

/// Waits for SIGINT or SIGTERM.
pub async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

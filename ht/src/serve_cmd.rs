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
    }
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

//! `ht serve <role>`: runs one server role in the foreground until SIGINT/SIGTERM.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use hyperspace::node::NodeConfig;
use hyperspace::service::{Replica, ReplicaConfig, TransportOptions};
use rangeserver::iterators::Registry;

use crate::serve_cluster::RangeserverArgs;
use crate::signal::wait_for_signal;

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
    /// chunkfs metadata server: the namespace and block map of ht's own DFS.
    ChunkfsMeta(chunkfs_serve::MetaArgs),
    /// chunkfs chunk server: stores checksummed chunks for a chunkfs metadata server.
    Chunkserver(chunkfs_serve::ChunkArgs),
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

/// Runs the role; a range server's engine runs the kinds of `registry`.
pub fn run(cmd: ServeCommand, registry: &Arc<Registry>) -> anyhow::Result<()> {
    // Servers log (structured, to stderr); RUST_LOG overrides the default.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,raft=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    // Outgoing connections leave from the interface this process serves on (docs/formats/rpc.md).
    rpc::set_local_ip(listen_addr(&cmd)?.ip());
    match cmd {
        ServeCommand::Hyperspace(args) => serve_hyperspace(args),
        ServeCommand::DfsBroker(args) => serve_dfs_broker(args),
        ServeCommand::Rangeserver(args) if !args.hyperspace.is_empty() => {
            crate::serve_cluster::rangeserver(args, registry)
        }
        ServeCommand::Rangeserver(args) => serve_rangeserver(args, registry),
        ServeCommand::Master(args) => crate::serve_cluster::master(args, registry),
        ServeCommand::ChunkfsMeta(args) => chunkfs_serve::serve_meta(args),
        ServeCommand::Chunkserver(args) => chunkfs_serve::serve_chunk(args),
    }
}

/// The address the role of `cmd` serves on.
fn listen_addr(cmd: &ServeCommand) -> anyhow::Result<SocketAddr> {
    Ok(match cmd {
        ServeCommand::Hyperspace(args) => hyperspace_listen(args)?,
        ServeCommand::DfsBroker(args) => args.listen,
        ServeCommand::Rangeserver(args) => args.listen,
        ServeCommand::Master(args) => args.listen,
        ServeCommand::ChunkfsMeta(args) => args.listen,
        ServeCommand::Chunkserver(args) => args.listen,
    })
}

/// A replica's address: `--listen`, or its own in `--peers`.
fn hyperspace_listen(args: &HyperspaceArgs) -> anyhow::Result<SocketAddr> {
    match args.listen {
        Some(a) => Ok(a),
        None => Ok(parse_peers(&args.peers)?
            .get(&args.id)
            .with_context(|| format!("--listen not given and id {} not in --peers", args.id))?
            .parse()?),
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

fn serve_rangeserver(args: RangeserverArgs, registry: &Arc<Registry>) -> anyhow::Result<()> {
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
        .block_on(crate::fs_url::open_any_url(&url, Some(&credentials)))
        .with_context(|| format!("cannot open the file system {url}"))?;
    // Opening is blocking (it reaches the file system through the runtime): not inside
    // `block_on`.
    let mut options = EngineOptions {
        registry: registry.clone(),
        ..EngineOptions::default()
    };
    if let Some(mb) = args.block_cache_mb {
        options.block_cache_bytes = mb << 20;
    }
    let engine = Engine::open(fs, "/ht", options, rt.handle().clone())
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
    let listen = hyperspace_listen(&args)?;
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

/// `ht serve chunkfs-meta` and `ht serve chunkserver` (ht's own DFS, the chunkfs crate).
mod chunkfs_serve {
    use std::net::SocketAddr;
    use std::path::PathBuf;

    use anyhow::{Context, bail};
    use chunkfs::chunk::{ChunkServer, ChunkServerOptions};
    use chunkfs::meta::{MetaOptions, MetaServer};
    use chunkfs::{CHUNK_SERVER_NAME, Flavour, Layout, META_SERVER_NAME};
    use clap::Args;

    use crate::signal::wait_for_signal;

    #[derive(Args)]
    pub struct MetaArgs {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:38040")]
        pub(crate) listen: SocketAddr,
        /// The cluster data directory (credentials `chunkfs-meta` in `<dir>/tls`).
        #[arg(long = "data-dir", default_value = "./ht-data")]
        data_dir: PathBuf,
        /// Where the metadata goes (default `<data-dir>/chunkfs-meta`).
        #[arg(long)]
        store: Option<PathBuf>,
        /// `hdfs-like` or `kfs-like`; fixed when the store is formatted (first start).
        #[arg(long)]
        flavour: String,
        /// Replicas per block (replicated layouts).
        #[arg(long, default_value_t = 3)]
        replication: u32,
        /// Reed-Solomon striping `DATA+PARITY` (kfs-like only), e.g. `6+3`.
        #[arg(long)]
        rs: Option<String>,
        /// Reed-Solomon cell size.
        #[arg(long, default_value_t = 64 << 10)]
        cell_bytes: u32,
        /// Logical bytes per block.
        #[arg(long, default_value_t = 64 << 20)]
        block_bytes: u64,
        /// Liveness and repair check period.
        #[arg(long, default_value_t = 500)]
        tick_ms: u64,
        /// A chunk server silent this long is dead and its replicas are re-created.
        #[arg(long, default_value_t = 5_000)]
        dead_after_ms: u64,
        /// Log records between checkpoints.
        #[arg(long, default_value_t = 100_000)]
        checkpoint_ops: u64,
        /// A file whose writer was silent this long is closed at its committed length.
        #[arg(long, default_value_t = 60_000)]
        lease_timeout_ms: u64,
    }

    #[derive(Args)]
    pub struct ChunkArgs {
        /// Address to listen on (also the server's identity at the metadata server).
        #[arg(long, default_value = "127.0.0.1:38050")]
        pub(crate) listen: SocketAddr,
        /// The cluster data directory (credentials `chunkserver` in `<dir>/tls`).
        #[arg(long = "data-dir", default_value = "./ht-data")]
        data_dir: PathBuf,
        /// Where the chunk files go (default `<data-dir>/chunkserver`).
        #[arg(long)]
        store: Option<PathBuf>,
        /// The metadata server's address.
        #[arg(long)]
        meta: SocketAddr,
        #[arg(long, default_value_t = 500)]
        heartbeat_ms: u64,
        /// Every chunk is listed to the metadata server this often, which answers the ones no
        /// file owns (to delete) (0: only after start).
        #[arg(long, default_value_t = 60_000)]
        block_report_ms: u64,
        /// Every chunk's checksums are verified this often (0: never).
        #[arg(long, default_value_t = 300_000)]
        scan_interval_ms: u64,
        /// Written data is dropped from the page cache this many bytes behind the writes, as
        /// HDFS's drop-behind does (0: keep it cached).
        #[arg(long, default_value_t = 8 << 20)]
        drop_behind_bytes: u64,
    }

    fn parse_rs(s: &str) -> anyhow::Result<(u32, u32)> {
        let (d, p) = s
            .split_once('+')
            .with_context(|| format!("--rs {s:?} is not DATA+PARITY (e.g. 6+3)"))?;
        let d: u32 = d
            .parse()
            .with_context(|| format!("--rs {s:?}: bad data count"))?;
        let p: u32 = p
            .parse()
            .with_context(|| format!("--rs {s:?}: bad parity count"))?;
        if d == 0 || p == 0 || d + p > 255 {
            bail!("--rs {s:?}: data and parity must be at least 1 and at most 255 together");
        }
        Ok((d, p))
    }

    fn load(dir: &std::path::Path, name: &str) -> anyhow::Result<rpc::ClusterCredentials> {
        rpc::ClusterCredentials::load(dir, name).with_context(|| {
            format!(
                "cannot load the {name} credentials from {} (run `ht init` first)",
                dir.display()
            )
        })
    }

    pub fn serve_meta(args: MetaArgs) -> anyhow::Result<()> {
        let flavour = Flavour::parse(&args.flavour)
            .with_context(|| format!("--flavour {:?}: hdfs-like or kfs-like", args.flavour))?;
        let layout = match &args.rs {
            Some(rs) => {
                if flavour != Flavour::KfsLike {
                    bail!("--rs needs --flavour kfs-like");
                }
                let (data, parity) = parse_rs(rs)?;
                Layout::Striped {
                    data,
                    parity,
                    cell_bytes: args.cell_bytes.max(4096),
                }
            }
            None => Layout::Replicated {
                replicas: args.replication.max(1),
            },
        };
        let credentials = load(&args.data_dir, META_SERVER_NAME)?;
        let store = args
            .store
            .clone()
            .unwrap_or_else(|| args.data_dir.join("chunkfs-meta"));
        let mut options = MetaOptions::new(store.clone(), flavour, layout);
        options.block_bytes = args.block_bytes.max(1);
        options.tick_ms = args.tick_ms.max(10);
        options.dead_after_ms = args.dead_after_ms.max(1);
        options.checkpoint_ops = args.checkpoint_ops.max(1);
        options.lease_timeout_ms = args.lease_timeout_ms.max(1);
        let rt = tokio::runtime::Runtime::new()?;
        rt.block_on(async move {
            let server = MetaServer::start(args.listen, &credentials, options)
                .await
                .map_err(anyhow::Error::msg)
                .with_context(|| {
                    format!(
                        "cannot start the chunkfs metadata server in {}",
                        store.display()
                    )
                })?;
            println!(
                "chunkfs metadata server ({}) serving on {}",
                flavour.name(),
                server.local_addr()
            );
            wait_for_signal().await;
            server.shutdown().await;
            anyhow::Ok(())
        })
    }

    pub fn serve_chunk(args: ChunkArgs) -> anyhow::Result<()> {
        let credentials = load(&args.data_dir, CHUNK_SERVER_NAME)?;
        let store = args
            .store
            .clone()
            .unwrap_or_else(|| args.data_dir.join("chunkserver"));
        let mut options = ChunkServerOptions::new(store.clone(), args.meta);
        options.heartbeat_ms = args.heartbeat_ms.max(10);
        options.scan_interval_ms = args.scan_interval_ms;
        options.block_report_ms = args.block_report_ms;
        options.drop_behind_bytes = args.drop_behind_bytes;
        let rt = tokio::runtime::Runtime::new()?;
        rt.block_on(async move {
            let server = ChunkServer::start(args.listen, &credentials, options)
                .await
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("cannot start the chunk server in {}", store.display()))?;
            println!("chunk server serving on {}", server.local_addr());
            wait_for_signal().await;
            server.shutdown().await;
            anyhow::Ok(())
        })
    }
}

//! Local chunkfs clusters on loopback: [`LocalDfs`] runs a metadata server and N chunk servers
//! as processes of the `ht` binary (`ht serve chunkfs-meta`, `ht serve chunkserver`) for process
//! tests, benchmarks and `ht start --dfs`, with kill -9 and restart of any one of them;
//! [`InProcessDfs`] runs the same servers inside the calling process (conformance tests).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dfs_broker::{FsError, FsResult};
use rpc::ClusterCredentials;

use crate::chunk::{ChunkServer, ChunkServerOptions};
use crate::client::{ChunkFs, ChunkFsOptions};
use crate::meta::{MetaOptions, MetaServer};
use crate::{CHUNK_SERVER_NAME, Flavour, Layout, META_SERVER_NAME};

/// A free UDP port on loopback, outside the kernel's ephemeral range ([`rpc::free_loopback_addr`]).
pub fn free_addr() -> std::io::Result<SocketAddr> {
    rpc::free_loopback_addr()
}

/// The shape and timings of a local cluster.
#[derive(Debug, Clone)]
pub struct LocalDfsOptions {
    pub flavour: Flavour,
    pub layout: Layout,
    pub chunk_servers: usize,
    pub block_bytes: u64,
    pub heartbeat_ms: u64,
    pub dead_after_ms: u64,
    /// 0: no background checksum scan.
    pub scan_interval_ms: u64,
    /// Chunk servers list their chunks this often (chunks no file owns are deleted); 0: only
    /// after start.
    pub block_report_ms: u64,
    /// The metadata server closes a file whose writer was silent this long.
    pub lease_timeout_ms: u64,
}

impl LocalDfsOptions {
    /// hdfs-like, 3 replicas, 3 chunk servers.
    pub fn hdfs_like() -> Self {
        Self {
            flavour: Flavour::HdfsLike,
            layout: Layout::Replicated { replicas: 3 },
            chunk_servers: 3,
            block_bytes: 64 << 20,
            heartbeat_ms: 200,
            dead_after_ms: 3_000,
            scan_interval_ms: 0,
            block_report_ms: 60_000,
            lease_timeout_ms: 60_000,
        }
    }

    /// kfs-like, 3 replicas written in parallel, 3 chunk servers.
    pub fn kfs_like() -> Self {
        Self {
            flavour: Flavour::KfsLike,
            ..Self::hdfs_like()
        }
    }

    /// kfs-like, Reed-Solomon 6+3 in 64 KiB cells, 9 chunk servers.
    pub fn kfs_like_rs() -> Self {
        Self {
            flavour: Flavour::KfsLike,
            layout: Layout::Striped {
                data: 6,
                parity: 3,
                cell_bytes: 64 << 10,
            },
            chunk_servers: 9,
            ..Self::hdfs_like()
        }
    }

    fn url(&self, meta: SocketAddr) -> String {
        format!("{}://{meta}", self.flavour.name())
    }
}

/// Issues the cluster CA and the certificates chunkfs needs in `dir` unless they exist.
pub fn ensure_credentials(dir: &Path) -> std::io::Result<()> {
    let err = |e: rpc::TlsError| std::io::Error::other(e.to_string());
    if !rpc::tls::tls_dir(dir).join(rpc::tls::CA_CERT_FILE).exists() {
        ClusterCredentials::create(dir).map_err(err)?;
    }
    for name in [META_SERVER_NAME, CHUNK_SERVER_NAME, "client"] {
        if ClusterCredentials::load(dir, name).is_err() {
            ClusterCredentials::issue(dir, name).map_err(err)?;
        }
    }
    Ok(())
}

/// A metadata server and chunk servers as processes; killed when dropped.
pub struct LocalDfs {
    ht: PathBuf,
    dir: PathBuf,
    options: LocalDfsOptions,
    meta_addr: SocketAddr,
    chunk_addrs: Vec<SocketAddr>,
    meta: Option<Child>,
    chunks: Vec<Option<Child>>,
    credentials: ClusterCredentials,
}

impl LocalDfs {
    /// Starts the servers with the `ht` binary at `ht`, everything under `dir` (credentials are
    /// made there if missing).
    pub fn start(ht: &Path, dir: &Path, options: LocalDfsOptions) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        ensure_credentials(dir)?;
        let credentials = ClusterCredentials::load(dir, "client")
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let meta_addr = free_addr()?;
        let chunk_addrs = (0..options.chunk_servers)
            .map(|_| free_addr())
            .collect::<std::io::Result<Vec<_>>>()?;
        let mut dfs = Self {
            ht: ht.to_path_buf(),
            dir: dir.to_path_buf(),
            meta_addr,
            chunks: (0..chunk_addrs.len()).map(|_| None).collect(),
            chunk_addrs,
            options,
            meta: None,
            credentials,
        };
        dfs.spawn_meta()?;
        for i in 0..dfs.chunk_addrs.len() {
            dfs.spawn_chunk(i)?;
        }
        Ok(dfs)
    }

    fn log(&self, name: &str) -> std::io::Result<std::fs::File> {
        let logs = self.dir.join("logs");
        std::fs::create_dir_all(&logs)?;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(logs.join(format!("{name}.log")))
    }

    fn spawn_meta(&mut self) -> std::io::Result<()> {
        let log = self.log("chunkfs-meta")?;
        let o = &self.options;
        let mut cmd = Command::new(&self.ht);
        cmd.args(["serve", "chunkfs-meta", "--listen"])
            .arg(self.meta_addr.to_string())
            .arg("--data-dir")
            .arg(&self.dir)
            .arg("--store")
            .arg(self.dir.join("meta"))
            .args(["--flavour", o.flavour.name()])
            .args(["--block-bytes", &o.block_bytes.to_string()])
            .args(["--tick-ms", &o.heartbeat_ms.to_string()])
            .args(["--dead-after-ms", &o.dead_after_ms.to_string()])
            .args(["--lease-timeout-ms", &o.lease_timeout_ms.to_string()]);
        match o.layout {
            Layout::Replicated { replicas } => {
                cmd.args(["--replication", &replicas.to_string()]);
            }
            Layout::Striped {
                data,
                parity,
                cell_bytes,
            } => {
                cmd.args(["--rs", &format!("{data}+{parity}")])
                    .args(["--cell-bytes", &cell_bytes.to_string()]);
            }
        }
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        self.meta = Some(cmd.spawn()?);
        Ok(())
    }

    /// The store directory of chunk server `i`.
    pub fn chunk_dir(&self, i: usize) -> PathBuf {
        self.dir.join(format!("chunkserver-{i}"))
    }

    /// The data file of chunk `chunk_id` on chunk server `i` (tests corrupt it).
    pub fn chunk_file(&self, i: usize, chunk_id: u64) -> PathBuf {
        crate::chunk::store::ChunkStore::chunk_data_path(
            &self.chunk_dir(i).join("chunks"),
            chunk_id,
        )
    }

    fn spawn_chunk(&mut self, i: usize) -> std::io::Result<()> {
        let log = self.log(&format!("chunkserver-{i}"))?;
        let o = &self.options;
        let mut cmd = Command::new(&self.ht);
        cmd.args(["serve", "chunkserver", "--listen"])
            .arg(self.chunk_addrs[i].to_string())
            .arg("--data-dir")
            .arg(&self.dir)
            .arg("--store")
            .arg(self.chunk_dir(i))
            .arg("--meta")
            .arg(self.meta_addr.to_string())
            .args(["--heartbeat-ms", &o.heartbeat_ms.to_string()])
            .args(["--scan-interval-ms", &o.scan_interval_ms.to_string()])
            .args(["--block-report-ms", &o.block_report_ms.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        self.chunks[i] = Some(cmd.spawn()?);
        Ok(())
    }

    pub fn url(&self) -> String {
        self.options.url(self.meta_addr)
    }

    pub fn meta_addr(&self) -> SocketAddr {
        self.meta_addr
    }

    pub fn chunk_addr(&self, i: usize) -> SocketAddr {
        self.chunk_addrs[i]
    }

    pub fn credentials(&self) -> &ClusterCredentials {
        &self.credentials
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// kill -9 of chunk server `i`.
    pub fn kill_chunk_server(&mut self, i: usize) {
        if let Some(mut c) = self.chunks[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts chunk server `i` again on its store.
    pub fn restart_chunk_server(&mut self, i: usize) -> std::io::Result<()> {
        self.kill_chunk_server(i);
        self.spawn_chunk(i)
    }

    /// kill -9 of the metadata server.
    pub fn kill_meta(&mut self) {
        if let Some(mut c) = self.meta.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the metadata server again on its directory.
    pub fn restart_meta(&mut self) -> std::io::Result<()> {
        self.kill_meta();
        self.spawn_meta()
    }

    /// Connects a client, waiting up to `timeout` for the metadata server and for every running
    /// chunk server to be live there.
    pub async fn connect(&self, timeout: Duration) -> FsResult<ChunkFs> {
        let want = self.chunks.iter().filter(|c| c.is_some()).count();
        connect_ready(self.meta_addr, &self.credentials, want, timeout)
            .await
            .map_err(|e| match e {
                FsError::Backend { op, path, msg } => FsError::Backend {
                    op,
                    path,
                    msg: format!("{msg} (server logs in {})", self.dir.join("logs").display()),
                },
                e => e,
            })
    }

    /// Stops every server (SIGKILL).
    pub fn stop(&mut self) {
        for i in 0..self.chunks.len() {
            self.kill_chunk_server(i);
        }
        self.kill_meta();
    }
}

impl Drop for LocalDfs {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Connects to the metadata server at `meta` and waits until `servers` chunk servers are live.
pub async fn connect_ready(
    meta: SocketAddr,
    credentials: &ClusterCredentials,
    servers: usize,
    timeout: Duration,
) -> FsResult<ChunkFs> {
    let start = Instant::now();
    let mut last = String::new();
    while start.elapsed() < timeout {
        match ChunkFs::connect(meta, credentials, ChunkFsOptions::default()).await {
            Ok(fs) => match fs.status().await {
                Ok(st) if st.servers.iter().filter(|s| s.live).count() >= servers => {
                    return Ok(fs);
                }
                Ok(st) => {
                    let live = st.servers.iter().filter(|s| s.live).count();
                    last = format!(
                        "{live} of {servers} chunk servers live ({} registered)",
                        st.servers.len()
                    );
                }
                Err(e) => last = e.to_string(),
            },
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(FsError::Backend {
        op: "connect",
        path: "/".into(),
        msg: format!("chunkfs at {meta} not ready within {timeout:?}: {last}"),
    })
}

/// A metadata server and chunk servers inside this process (on the current tokio runtime).
pub struct InProcessDfs {
    pub meta: MetaServer,
    pub chunks: Vec<ChunkServer>,
    pub credentials: ClusterCredentials,
    _dir: tempfile::TempDir,
}

impl InProcessDfs {
    /// Starts a cluster in a fresh temporary directory and connects a client to it.
    pub async fn start(options: LocalDfsOptions) -> Result<(Self, ChunkFs), String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        ensure_credentials(dir.path()).map_err(|e| e.to_string())?;
        let load = |n: &str| ClusterCredentials::load(dir.path(), n).map_err(|e| e.to_string());
        let mut mo = MetaOptions::new(dir.path().join("meta"), options.flavour, options.layout);
        mo.block_bytes = options.block_bytes;
        mo.tick_ms = options.heartbeat_ms;
        mo.dead_after_ms = options.dead_after_ms;
        mo.lease_timeout_ms = options.lease_timeout_ms;
        let meta = MetaServer::start(
            "127.0.0.1:0".parse().expect("an address"),
            &load(META_SERVER_NAME)?,
            mo,
        )
        .await?;
        let mut chunks = Vec::new();
        for i in 0..options.chunk_servers {
            let mut co =
                ChunkServerOptions::new(dir.path().join(format!("cs{i}")), meta.local_addr());
            co.heartbeat_ms = options.heartbeat_ms;
            co.scan_interval_ms = options.scan_interval_ms;
            co.block_report_ms = options.block_report_ms;
            chunks.push(
                ChunkServer::start(
                    "127.0.0.1:0".parse().expect("an address"),
                    &load(CHUNK_SERVER_NAME)?,
                    co,
                )
                .await?,
            );
        }
        let credentials = load("client")?;
        let fs = connect_ready(
            meta.local_addr(),
            &credentials,
            options.chunk_servers,
            Duration::from_secs(20),
        )
        .await
        .map_err(|e| e.to_string())?;
        Ok((
            Self {
                meta,
                chunks,
                credentials,
                _dir: dir,
            },
            fs,
        ))
    }
}

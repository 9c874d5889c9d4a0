//! `ht start`, `ht stop`, `ht status`: a local cluster of separate processes on loopback
//! (Hyperspace replicas, masters, range servers), described by `<data-dir>/cluster.json`.
//! Also how `ht shell --cluster` finds and connects to a cluster.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use client::cluster::{ClusterClient, ClusterOptions};
use serde::{Deserialize, Serialize};

/// The file `ht start` writes and `ht stop`/`ht status`/`ht shell --cluster` read.
pub const CLUSTER_FILE: &str = "cluster.json";

/// One process of a local cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Proc {
    /// `hyperspace`, `master` or `rangeserver`.
    pub role: String,
    pub name: String,
    pub pid: u32,
    pub log: PathBuf,
    /// The arguments after `ht serve <role>` (how `ht cingest agitate` restarts a process it
    /// killed; empty in files written before they were recorded).
    #[serde(default)]
    pub args: Vec<String>,
}

/// What `ht start` launched.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClusterFile {
    /// Hyperspace replicas as `id@host:port` (kept across restarts: they hold the state).
    pub hyperspace: Vec<String>,
    /// The shared file system's URL.
    pub dfs: String,
    /// ht's own DFS when `ht start --dfs hdfs-like|kfs-like|kfs-like-rs` runs one: the
    /// metadata server's and the chunk servers' addresses (their identities: kept across
    /// restarts).
    #[serde(default)]
    pub chunkfs: Option<ChunkfsProcs>,
    pub processes: Vec<Proc>,
}

/// The chunkfs processes of a local cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChunkfsProcs {
    /// `hdfs-like`, `kfs-like` or `kfs-like-rs`.
    pub flavour: String,
    pub meta: String,
    pub chunkservers: Vec<String>,
}

impl ClusterFile {
    pub fn read(dir: &Path) -> anyhow::Result<Self> {
        let p = dir.join(CLUSTER_FILE);
        let text = std::fs::read_to_string(&p)
            .with_context(|| format!("cannot read {} (run `ht start` first)", p.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{}: not a cluster file", p.display()))
    }

    pub(crate) fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let p = dir.join(CLUSTER_FILE);
        let tmp = dir.join(format!("{CLUSTER_FILE}.tmp"));
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, &p).with_context(|| format!("cannot write {}", p.display()))
    }

    pub fn hyperspace_addrs(&self) -> anyhow::Result<Vec<SocketAddr>> {
        self.hyperspace
            .iter()
            .map(|p| {
                let a = p.split_once('@').map_or(p.as_str(), |(_, a)| a);
                a.parse()
                    .with_context(|| format!("bad hyperspace address {a:?} in the cluster file"))
            })
            .collect()
    }
}

#[derive(Args)]
pub struct StartArgs {
    /// The cluster's directory (credentials, Hyperspace state, shared file system, logs).
    #[arg(long = "data-dir", default_value = "./ht-cluster")]
    pub(crate) data_dir: PathBuf,
    /// Hyperspace replicas.
    #[arg(long, default_value_t = 3)]
    pub(crate) hyperspace: u64,
    /// Range servers.
    #[arg(long, default_value_t = 3)]
    pub(crate) rangeservers: usize,
    /// Masters (the first to get the master lock is active, the others stand by).
    #[arg(long, default_value_t = 2)]
    pub(crate) masters: usize,
    /// The file system the range servers share: a URL (default `file://<data-dir>/fs`), or
    /// `hdfs-like`, `kfs-like` (3 replicas written in parallel) or `kfs-like-rs` (Reed-Solomon
    /// 6+3) to run ht's own DFS with the cluster.
    #[arg(long)]
    pub(crate) dfs: Option<String>,
    /// Chunk servers of ht's own DFS (default 3; 9 for kfs-like-rs).
    #[arg(long)]
    pub(crate) chunkservers: Option<usize>,
    /// Range servers split a range once it holds more than this many bytes.
    #[arg(long = "split-bytes")]
    pub(crate) split_bytes: Option<u64>,
    /// Each range server's block cache, in MiB (default: the engine's, 128).
    #[arg(long = "block-cache-mb")]
    pub(crate) block_cache_mb: Option<u64>,
    /// Milliseconds between the masters' looks at the range servers (default 500; range
    /// servers also report splits and registration at once).
    #[arg(long = "master-poll-ms")]
    pub(crate) master_poll_ms: Option<u64>,
    /// Milliseconds between the active master's rounds of garbage collection of cell stores
    /// shared across range servers (default 300000; 0: never).
    #[arg(long = "master-gc-ms")]
    pub(crate) master_gc_ms: Option<u64>,
    /// Seconds to wait for the cluster to be ready.
    #[arg(long, default_value_t = 60)]
    pub(crate) wait_secs: u64,
}

#[derive(Args)]
pub struct DirArgs {
    /// The cluster's directory.
    #[arg(long = "data-dir", default_value = "./ht-cluster")]
    pub(crate) data_dir: PathBuf,
}

fn this_exe() -> anyhow::Result<PathBuf> {
    std::env::current_exe().context("cannot find the ht binary")
}

/// Starts `ht serve ...` detached (own process group, output to a log file).
pub(crate) fn spawn(dir: &Path, role: &str, name: &str, args: &[String]) -> anyhow::Result<Proc> {
    use std::os::unix::process::CommandExt;
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs)?;
    let log = logs.join(format!("{name}.log"));
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .with_context(|| format!("cannot open {}", log.display()))?;
    let child = Command::new(this_exe()?)
        .arg("serve")
        .arg(role)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start {name}"))?;
    Ok(Proc {
        role: role.to_string(),
        name: name.to_string(),
        pid: child.id(),
        log,
        args: args.to_vec(),
    })
}

/// True if process `pid` exists (and is not a zombie of ours).
pub fn alive(pid: u32) -> bool {
    // A child of this process (`ht bench load --cluster` starts the cluster itself) that has
    // exited stays a zombie until reaped, and kill(pid, 0) succeeds on zombies: reap it first.
    let mut status = 0;
    // SAFETY: waitpid with WNOHANG on one pid; fails harmlessly (ECHILD) if not our child.
    if unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG) } == pid as i32 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

pub(crate) fn signal(pid: u32, sig: i32) {
    // SAFETY: sends a signal to a process this cluster started.
    unsafe {
        libc::kill(pid as i32, sig);
    }
}

/// Connects a client to the cluster described in `dir`.
pub fn connect(dir: &Path) -> anyhow::Result<ClusterClient> {
    let file = ClusterFile::read(dir)?;
    connect_addrs(file.hyperspace_addrs()?, dir)
}

/// Connects a client to the cluster whose Hyperspace replicas are `addrs`, with the `client`
/// certificate of `cred_dir`.
pub fn connect_addrs(addrs: Vec<SocketAddr>, cred_dir: &Path) -> anyhow::Result<ClusterClient> {
    let creds = rpc::ClusterCredentials::load(cred_dir, "client").with_context(|| {
        format!(
            "cannot load the client credentials from {}",
            cred_dir.display()
        )
    })?;
    ClusterClient::connect(creds, ClusterOptions::new(addrs))
        .context("cannot connect to the cluster")
}

/// `--cluster`: a cluster directory (with `cluster.json`), or Hyperspace addresses
/// (comma-separated) with credentials from `data_dir`.
pub fn connect_arg(arg: &str, data_dir: &Path) -> anyhow::Result<ClusterClient> {
    let p = Path::new(arg);
    if p.join(CLUSTER_FILE).exists() {
        return connect(p);
    }
    let addrs = arg
        .split(',')
        .map(|a| {
            a.trim().parse::<SocketAddr>().with_context(|| {
                format!("--cluster {arg:?}: not a cluster directory nor host:port")
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    connect_addrs(addrs, data_dir)
}

pub fn start(args: StartArgs) -> anyhow::Result<()> {
    let dir = &args.data_dir;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let dir = dir.canonicalize()?;
    let mut file = ClusterFile::read(&dir).unwrap_or_default();
    if file.processes.iter().any(|p| alive(p.pid)) {
        bail!(
            "a cluster is already running from {} (ht stop --data-dir {0})",
            dir.display()
        );
    }
    if rpc::ClusterCredentials::load(&dir, "client").is_err() {
        let out = Command::new(this_exe()?)
            .args(["init", "--data-dir"])
            .arg(&dir)
            .output()?;
        if !out.status.success() {
            bail!("ht init failed: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    if file.hyperspace.len() as u64 != args.hyperspace {
        file.hyperspace = (1..=args.hyperspace)
            .map(|id| Ok(format!("{id}@{}", hyperspace::launch::free_addr()?)))
            .collect::<std::io::Result<_>>()?;
    }
    file.processes.clear();
    let d = dir.display().to_string();
    let flavour = args
        .dfs
        .as_deref()
        .filter(|f| ["hdfs-like", "kfs-like", "kfs-like-rs"].contains(f));
    if let Some(flavour) = flavour {
        let n = args
            .chunkservers
            .unwrap_or(if flavour == "kfs-like-rs" { 9 } else { 3 });
        let reuse = file
            .chunkfs
            .as_ref()
            .filter(|c| c.flavour == flavour && c.chunkservers.len() == n)
            .cloned();
        let procs = match reuse {
            Some(c) => c,
            None => ChunkfsProcs {
                flavour: flavour.to_string(),
                meta: hyperspace::launch::free_addr()?.to_string(),
                chunkservers: (0..n)
                    .map(|_| Ok(hyperspace::launch::free_addr()?.to_string()))
                    .collect::<std::io::Result<_>>()?,
            },
        };
        let mut meta_args: Vec<String> = vec![
            "--listen".into(),
            procs.meta.clone(),
            "--data-dir".into(),
            d.clone(),
            "--flavour".into(),
            flavour.trim_end_matches("-rs").to_string(),
        ];
        if flavour == "kfs-like-rs" {
            meta_args.extend(["--rs".to_string(), "6+3".to_string()]);
        }
        file.processes
            .push(spawn(&dir, "chunkfs-meta", "chunkfs-meta", &meta_args)?);
        for (i, addr) in procs.chunkservers.iter().enumerate() {
            let store = dir.join(format!("chunkserver-{}", i + 1));
            file.processes.push(spawn(
                &dir,
                "chunkserver",
                &format!("chunkserver-{}", i + 1),
                &[
                    "--listen".into(),
                    addr.clone(),
                    "--data-dir".into(),
                    d.clone(),
                    "--store".into(),
                    store.display().to_string(),
                    "--meta".into(),
                    procs.meta.clone(),
                ],
            )?);
        }
        file.dfs = format!("{}://{}", flavour.trim_end_matches("-rs"), procs.meta);
        file.chunkfs = Some(procs);
        file.write(&dir)?;
        wait_for_dfs(&dir, &file.dfs, Duration::from_secs(args.wait_secs))?;
    } else {
        file.chunkfs = None;
        file.dfs = crate::serve_cluster::shared_fs_url(args.dfs.as_deref(), &dir)?;
    }
    let peers = file.hyperspace.join(",");
    for p in file.hyperspace.clone() {
        let id = p.split_once('@').map_or("", |(i, _)| i).to_string();
        let proc = spawn(
            &dir,
            "hyperspace",
            &format!("hyperspace-{id}"),
            &[
                "--id".into(),
                id.clone(),
                "--peers".into(),
                peers.clone(),
                "--data-dir".into(),
                d.clone(),
                "--tick-ms".into(),
                "50".into(),
            ],
        )?;
        file.processes.push(proc);
    }
    file.write(&dir)?;
    let hs = file
        .hyperspace_addrs()?
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let common = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = vec![
            "--hyperspace".into(),
            hs.clone(),
            "--data-dir".into(),
            d.clone(),
            "--dfs".into(),
            file.dfs.clone(),
        ];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let mut procs = Vec::new();
    for i in 1..=args.masters {
        let poll = args.master_poll_ms.map(|ms| ms.to_string());
        let gc = args.master_gc_ms.map(|ms| ms.to_string());
        let mut extra: Vec<&str> = Vec::new();
        if let Some(ms) = &poll {
            extra.extend(["--poll-ms", ms.as_str()]);
        }
        if let Some(ms) = &gc {
            extra.extend(["--gc-ms", ms.as_str()]);
        }
        procs.push(spawn(
            &dir,
            "master",
            &format!("master-{i}"),
            &common(&extra),
        )?);
    }
    for i in 1..=args.rangeservers {
        procs.push(spawn(&dir, "rangeserver", &format!("rangeserver-{i}"), &{
            let mut a = common(&["--listen", "127.0.0.1:0"]);
            if let Some(b) = args.split_bytes {
                a.extend(["--split-bytes".to_string(), b.to_string()]);
            }
            if let Some(mb) = args.block_cache_mb {
                a.extend(["--block-cache-mb".to_string(), mb.to_string()]);
            }
            a
        })?);
    }
    file.processes.extend(procs);
    file.write(&dir)?;
    // Ready: a master answers, METADATA is assigned, every new range server is live.
    let deadline = Instant::now() + Duration::from_secs(args.wait_secs);
    let client = loop {
        match connect(&dir) {
            Ok(c) => break c,
            Err(e) if Instant::now() < deadline => {
                tracing::debug!(error = %e, "cluster not reachable yet");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => return Err(e.context("the cluster did not come up")),
        }
    };
    loop {
        let ready = match client.master_status() {
            Ok(s) => {
                !s.root_location.is_empty()
                    && s.servers.iter().filter(|s| s.live).count() >= args.rangeservers
                    && s.operations.is_empty()
            }
            Err(_) => false,
        };
        if ready {
            break;
        }
        if Instant::now() >= deadline {
            bail!(
                "the cluster in {} is not ready after {} s; see its logs in {}/logs",
                dir.display(),
                args.wait_secs,
                dir.display()
            );
        }
        for p in &file.processes {
            if !alive(p.pid) {
                bail!("{} exited; see {}", p.name, p.log.display());
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    println!(
        "cluster ready in {}: {} hyperspace replicas, {} masters, {} range servers (ht shell --cluster {0})",
        dir.display(),
        args.hyperspace,
        args.masters,
        args.rangeservers
    );
    Ok(())
}

/// Waits until the file system at `url` takes a synced write (its servers are up and enough
/// chunk servers registered).
fn wait_for_dfs(dir: &Path, url: &str, limit: Duration) -> anyhow::Result<()> {
    async fn probe(url: &str, creds: &rpc::ClusterCredentials) -> dfs_broker::FsResult<()> {
        let fs = crate::fs_url::open_any_url(url, Some(creds)).await?;
        let mut w = fs.create("/.ht-start-probe", true).await?;
        w.append(b"ready", dfs_broker::AppendFlag::Sync).await?;
        w.close().await?;
        fs.remove("/.ht-start-probe").await
    }
    let creds = rpc::ClusterCredentials::load(dir, "client")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let deadline = Instant::now() + limit;
    loop {
        let attempt = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), probe(url, &creds)).await
        });
        let why = match attempt {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "a probe write took over 5 s".to_string(),
        };
        if Instant::now() >= deadline {
            bail!(
                "the file system {url} is not ready: {why}; see the logs in {}/logs",
                dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub fn stop(args: DirArgs) -> anyhow::Result<()> {
    let dir = &args.data_dir;
    let mut file = ClusterFile::read(dir)?;
    // Range servers and masters first, Hyperspace last (the others need it to stop cleanly).
    for roles in [
        &["rangeserver", "master"][..],
        &["chunkserver", "chunkfs-meta"][..],
        &["hyperspace"][..],
    ] {
        let procs: Vec<&Proc> = file
            .processes
            .iter()
            .filter(|p| roles.contains(&p.role.as_str()))
            .collect();
        for p in &procs {
            signal(p.pid, 15);
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        while procs.iter().any(|p| alive(p.pid)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        for p in &procs {
            if alive(p.pid) {
                eprintln!("{} did not stop in 15 s; killing it", p.name);
                signal(p.pid, 9);
            }
        }
    }
    let n = file.processes.len();
    file.processes.clear();
    file.write(dir)?;
    println!("stopped {n} processes of the cluster in {}", dir.display());
    Ok(())
}

/// Why the cluster of `file` cannot be running, judged from its recorded processes alone:
/// none recorded (`ht stop` clears them), every one exited, or no Hyperspace replica left.
fn not_running(file: &ClusterFile) -> Option<String> {
    let procs = &file.processes;
    if procs.is_empty() {
        return Some("no process is recorded in its cluster file (stopped)".into());
    }
    if !procs.iter().any(|p| alive(p.pid)) {
        return Some(format!(
            "all {} recorded processes have exited",
            procs.len()
        ));
    }
    let replicas: Vec<&Proc> = procs.iter().filter(|p| p.role == "hyperspace").collect();
    if !replicas.is_empty() && !replicas.iter().any(|p| alive(p.pid)) {
        return Some(format!(
            "all {} Hyperspace replicas have exited",
            replicas.len()
        ));
    }
    None
}

pub fn status(args: DirArgs) -> anyhow::Result<()> {
    let dir = &args.data_dir;
    let file = ClusterFile::read(dir)?;
    for p in &file.processes {
        println!(
            "{:<14} pid {:<8} {}",
            p.name,
            p.pid,
            if alive(p.pid) { "running" } else { "EXITED" }
        );
    }
    // Connecting to replicas that are not there would wait out the Hyperspace request timeout.
    if let Some(why) = not_running(&file) {
        bail!(
            "the cluster in {} is not running: {why} (start it with `ht start --data-dir {0}`)",
            dir.display()
        );
    }
    let client = connect(dir)?;
    match client.hyperspace_status() {
        Ok(s) => println!(
            "hyperspace: leader {} at {}, term {}, commit {}",
            s.leader_id, s.leader_addr, s.term, s.commit
        ),
        Err(e) => println!("hyperspace: {e}"),
    }
    let st = client
        .master_status()
        .context("the master does not answer")?;
    println!("METADATA on {}", st.root_location);
    println!("range servers:");
    for s in &st.servers {
        println!(
            "  {:<6} {:<22} {:>5} ranges {:>10.0} cells/s  {}",
            s.location,
            s.addr,
            s.ranges,
            s.load,
            if s.live { "live" } else { "dead (recovering)" }
        );
    }
    println!(
        "moves {}, recoveries {}, unfinished operations {}",
        st.moves,
        st.recoveries,
        st.operations.len()
    );
    for op in &st.operations {
        println!("  {op}");
    }
    println!(
        "garbage collection of shared stores: {} rounds, {} cell stores and {} retired roots removed",
        st.gc_rounds, st.gc_removed_stores, st.gc_removed_roots
    );
    Ok(())
}

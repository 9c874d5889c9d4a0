//! A local group of Hyperspace replicas as separate processes (`ht serve hyperspace`) on
//! loopback: for process tests, `ht bench hyperspace` and `ht start`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use prost::Message as _;
use rpc::ClusterCredentials;

use crate::service::{FaultRequest, SERVER_NAME, StatusReply};

/// How to run the replicas.
#[derive(Debug, Clone)]
pub struct GroupOptions {
    pub replicas: u64,
    pub tick_ms: u64,
    pub snapshot_entries: u64,
    pub sync: bool,
}

impl Default for GroupOptions {
    fn default() -> Self {
        Self {
            replicas: 3,
            tick_ms: 50,
            snapshot_entries: 10_000,
            sync: true,
        }
    }
}

/// Replica processes; killed when dropped.
pub struct LocalGroup {
    ht: PathBuf,
    dir: PathBuf,
    options: GroupOptions,
    members: BTreeMap<u64, String>,
    procs: BTreeMap<u64, Child>,
    credentials: ClusterCredentials,
    /// The replicas' own identity, for replica-only methods (fault injection, membership).
    server_credentials: ClusterCredentials,
}

/// A free UDP port on loopback, outside the kernel's ephemeral range ([`rpc::free_loopback_addr`]).
pub fn free_addr() -> std::io::Result<SocketAddr> {
    rpc::free_loopback_addr()
}

impl LocalGroup {
    /// Starts the replicas with the `ht` binary at `ht`, in `dir` (which gets cluster
    /// credentials from `ht init` if it has none).
    pub fn start(ht: &Path, dir: &Path, options: GroupOptions) -> std::io::Result<LocalGroup> {
        if ClusterCredentials::load(dir, "client").is_err() {
            let out = Command::new(ht)
                .args(["init", "--data-dir"])
                .arg(dir)
                .output()?;
            if !out.status.success() {
                return Err(std::io::Error::other(format!(
                    "ht init failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                )));
            }
        }
        let credentials = ClusterCredentials::load(dir, "client")
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let server_credentials = ClusterCredentials::load(dir, SERVER_NAME)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let mut members = BTreeMap::new();
        for id in 1..=options.replicas {
            members.insert(id, free_addr()?.to_string());
        }
        let mut group = LocalGroup {
            ht: ht.to_path_buf(),
            dir: dir.to_path_buf(),
            options,
            members,
            procs: BTreeMap::new(),
            credentials,
            server_credentials,
        };
        for id in group.members.keys().copied().collect::<Vec<_>>() {
            group.spawn(id)?;
        }
        Ok(group)
    }

    pub fn members(&self) -> &BTreeMap<u64, String> {
        &self.members
    }

    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.members
            .values()
            .map(|a| a.parse().expect("addresses are parsed when made"))
            .collect()
    }

    pub fn addr(&self, id: u64) -> SocketAddr {
        self.members[&id]
            .parse()
            .expect("addresses are parsed when made")
    }

    pub fn credentials(&self) -> &ClusterCredentials {
        &self.credentials
    }

    /// The replicas' own credentials (replica-only methods).
    pub fn server_credentials(&self) -> &ClusterCredentials {
        &self.server_credentials
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn spawn(&mut self, id: u64) -> std::io::Result<()> {
        self.spawn_with(id, false)
    }

    fn spawn_with(&mut self, id: u64, join: bool) -> std::io::Result<()> {
        let peers: Vec<String> = self
            .members
            .iter()
            .map(|(id, a)| format!("{id}@{a}"))
            .collect();
        let logs = self.dir.join("logs");
        std::fs::create_dir_all(&logs)?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(logs.join(format!("hyperspace-{id}.log")))?;
        let mut cmd = Command::new(&self.ht);
        cmd.args(["serve", "hyperspace", "--id", &id.to_string(), "--peers"])
            .arg(peers.join(","))
            .arg("--data-dir")
            .arg(&self.dir)
            .args(["--tick-ms", &self.options.tick_ms.to_string()])
            .args([
                "--snapshot-entries",
                &self.options.snapshot_entries.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        if !self.options.sync {
            cmd.arg("--no-sync");
        }
        if join {
            cmd.arg("--join");
        }
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info,raft=warn");
        }
        let child = cmd.spawn()?;
        self.procs.insert(id, child);
        Ok(())
    }

    /// kill -9 of one replica.
    pub fn kill(&mut self, id: u64) {
        if let Some(mut child) = self.procs.remove(&id) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a killed replica again on its data.
    pub fn restart(&mut self, id: u64) -> std::io::Result<()> {
        self.kill(id);
        self.spawn(id)
    }

    pub fn is_running(&self, id: u64) -> bool {
        self.procs.contains_key(&id)
    }

    async fn client(&self, id: u64) -> Result<rpc::Client, String> {
        tokio::time::timeout(
            Duration::from_secs(2),
            rpc::Client::connect(self.addr(id), SERVER_NAME, &self.server_credentials),
        )
        .await
        .map_err(|_| format!("connect to replica {id} timed out"))?
        .map_err(|e| e.to_string())
    }

    /// The status of one replica.
    pub async fn status(&self, id: u64) -> Result<StatusReply, String> {
        let c = self.client(id).await?;
        let bytes = c
            .call("hs.status", bytes::Bytes::new(), Duration::from_secs(2))
            .await
            .map_err(|e| e.to_string())?;
        c.close().await;
        StatusReply::decode(bytes).map_err(|e| e.to_string())
    }

    /// Waits until a running replica says it is the leader; returns its id.
    pub async fn leader(&self, timeout: Duration) -> Result<u64, String> {
        let start = Instant::now();
        loop {
            for &id in self.procs.keys() {
                if let Ok(st) = self.status(id).await
                    && st.role == "Leader"
                {
                    return Ok(id);
                }
            }
            if start.elapsed() > timeout {
                return Err(format!("no leader within {timeout:?}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Makes replica `id` drop all Raft traffic to and from `from` (empty: heal).
    pub async fn isolate(&self, id: u64, from: Vec<u64>) -> Result<(), String> {
        let c = self.client(id).await?;
        c.call(
            "hs.fault",
            FaultRequest {
                isolated_from: from,
            }
            .encode_to_vec()
            .into(),
            Duration::from_secs(2),
        )
        .await
        .map_err(|e| e.to_string())?;
        c.close().await;
        Ok(())
    }

    /// Starts replica `id` at `addr` as a new, empty member that waits to be added
    /// ([`change_member`]).
    pub fn spawn_joiner(&mut self, id: u64, addr: String) -> std::io::Result<()> {
        self.members.insert(id, addr);
        self.spawn_with(id, true)
    }

    /// Stops every replica (SIGKILL; the log is durable, so nothing is lost).
    pub fn stop(&mut self) {
        for id in self.procs.keys().copied().collect::<Vec<_>>() {
            self.kill(id);
        }
    }
}

/// Adds (`add`) or removes replica `id` (at `addr`) through a Raft configuration change,
/// asking each of `replicas` until the leader accepts. `credentials` must be the replicas' own
/// (`hyperspace`).
pub async fn change_member(
    replicas: &[SocketAddr],
    credentials: &ClusterCredentials,
    add: bool,
    id: u64,
    addr: &str,
    timeout: Duration,
) -> Result<(), String> {
    let request = crate::service::MemberRequest {
        add,
        id,
        addr: addr.to_string(),
    }
    .encode_to_vec();
    let start = Instant::now();
    let mut last = String::from("no replica tried");
    while start.elapsed() < timeout {
        for &r in replicas {
            let c = match tokio::time::timeout(
                Duration::from_secs(1),
                rpc::Client::connect(r, SERVER_NAME, credentials),
            )
            .await
            {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    last = e.to_string();
                    continue;
                }
                Err(_) => {
                    last = format!("connect to {r} timed out");
                    continue;
                }
            };
            let result = c
                .call("hs.member", request.clone().into(), Duration::from_secs(10))
                .await;
            c.close().await;
            match result {
                Ok(_) => return Ok(()),
                Err(e) => last = e.to_string(),
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!(
        "membership change not accepted within {timeout:?}: {last}"
    ))
}

impl Drop for LocalGroup {
    fn drop(&mut self) {
        self.stop();
    }
}

//! Network set-up as an operator meets it: a shell or client holding another cluster's
//! credentials fails at once naming the certificate, `ht status` on a stopped cluster answers
//! at once, and servers connect from the address they listen on.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use client::Client;
use client::cluster::{ClusterClient, ClusterOptions};
use hyperspace::launch::{GroupOptions, LocalGroup};
use rpc::{Bytes, ClusterCredentials, PeerInfo, RpcError, Server};

fn ht() -> &'static str {
    env!("CARGO_BIN_EXE_ht")
}

/// `ht init` in `dir`: a cluster CA and every node certificate.
fn init(dir: &Path) {
    let out = Command::new(ht())
        .args(["init", "--data-dir"])
        .arg(dir)
        .output()
        .expect("run ht init");
    assert!(out.status.success(), "ht init: {}", text(&out));
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `ht args...`; returns its output and how long it took.
fn timed(args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let out = Command::new(ht()).args(args).output().expect("run ht");
    (out, started.elapsed())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// One Hyperspace replica of the cluster whose credentials are in `dir`, with a leader.
fn hyperspace_of(dir: &Path, rt: &tokio::runtime::Runtime) -> LocalGroup {
    let group = LocalGroup::start(
        Path::new(ht()),
        dir,
        GroupOptions {
            replicas: 1,
            ..GroupOptions::default()
        },
    )
    .expect("start hyperspace");
    rt.block_on(group.leader(Duration::from_secs(30)))
        .expect("a leader");
    group
}

/// A failure must come well before the 30 s a retry loop would have waited.
const FAST: Duration = Duration::from_secs(8);

#[test]
fn hyperspace_shell_with_another_clusters_ca_fails_fast_naming_the_certificate() {
    let ours = tempfile::tempdir().expect("tempdir");
    let theirs = tempfile::tempdir().expect("tempdir");
    init(ours.path());
    init(theirs.path());
    let rt = runtime();
    let group = hyperspace_of(theirs.path(), &rt);
    let addrs = group.addrs();
    let list = addrs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let dir = ours.path().display().to_string();

    let (out, took) = timed(&[
        "hyperspace",
        "--data-dir",
        &dir,
        "--hyperspace",
        &list,
        "-e",
        "ls /",
    ]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(took < FAST, "took {took:?}: {said}");
    assert!(
        said.contains("certificate") && said.contains("cluster CA"),
        "{said}"
    );
    assert!(!said.contains("timed out"), "{said}");

    // The HQL shell on the cluster fails the same way.
    let (out, took) = timed(&[
        "shell",
        "--batch",
        "--data-dir",
        &dir,
        "--cluster",
        &list,
        "-e",
        "SHOW TABLES;",
    ]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(took < FAST, "took {took:?}: {said}");
    assert!(
        said.contains("certificate") && said.contains("cluster CA"),
        "{said}"
    );
}

/// Refuses every call; for a server that must never be reached.
struct Nobody;

#[async_trait::async_trait]
impl rpc::Service for Nobody {
    async fn call(
        &self,
        _peer: &PeerInfo,
        method: &str,
        _payload: Bytes,
    ) -> Result<Bytes, RpcError> {
        Err(RpcError::service(
            common::ErrorKind::Unavailable,
            format!("{method}: not served here"),
        ))
    }
}

#[test]
fn cluster_client_stops_retrying_a_master_of_another_cluster() {
    // Hyperspace is ours, but the master it names is another cluster's: the DDL call gives up
    // at once with the TLS cause instead of retrying for retry_for.
    let ours = tempfile::tempdir().expect("tempdir");
    let theirs = tempfile::tempdir().expect("tempdir");
    init(ours.path());
    init(theirs.path());
    let rt = runtime();
    let group = hyperspace_of(ours.path(), &rt);
    let foreign_master = rt
        .block_on(async {
            Server::bind(
                "127.0.0.1:0".parse().expect("addr"),
                &ClusterCredentials::load(theirs.path(), "master").expect("creds"),
                Nobody,
            )
        })
        .expect("bind");
    let creds = ClusterCredentials::load(ours.path(), "client").expect("creds");
    rt.block_on(async {
        let (hs, _events) = hyperspace::client::Hyperspace::connect(
            group.addrs(),
            creds.clone(),
            hyperspace::client::ClientOptions::default(),
        )
        .await
        .expect("session");
        hs.mkdirs("/ht").await.expect("mkdirs");
        let h = hs
            .open(
                "/ht/master",
                hyperspace::command::flags::READ
                    | hyperspace::command::flags::WRITE
                    | hyperspace::command::flags::CREATE,
                0,
            )
            .await
            .expect("open");
        hs.close(h).await.expect("close");
        hs.attr_set(
            "/ht/master",
            "addr",
            foreign_master.local_addr().to_string(),
        )
        .await
        .expect("attr");
        hs.close_session().await.expect("close session");
    });
    let mut opts = ClusterOptions::new(group.addrs());
    opts.retry_for = Duration::from_secs(30);
    let client = ClusterClient::connect(creds, opts).expect("connect");
    let started = Instant::now();
    let err = client
        .create_namespace("/refused")
        .expect_err("another cluster's master");
    let took = started.elapsed();
    let said = err.to_string();
    assert!(took < FAST, "took {took:?}: {said}");
    assert!(
        said.contains("certificate") && said.contains("cluster CA"),
        "{said}"
    );
    assert_ne!(err.kind(), common::ErrorKind::Unavailable, "{said}");
}

#[test]
fn a_refusing_address_among_the_hyperspace_replicas_is_passed_over() {
    // One address of the list is another cluster's server: the session is opened on the
    // replica that is ours instead of failing on the first refusal.
    let ours = tempfile::tempdir().expect("tempdir");
    let theirs = tempfile::tempdir().expect("tempdir");
    init(ours.path());
    init(theirs.path());
    let rt = runtime();
    let group = hyperspace_of(ours.path(), &rt);
    let foreign = rt
        .block_on(async {
            Server::bind(
                "127.0.0.1:0".parse().expect("addr"),
                &ClusterCredentials::load(theirs.path(), "hyperspace").expect("creds"),
                Nobody,
            )
        })
        .expect("bind");
    let mut addrs = vec![foreign.local_addr()];
    addrs.extend(group.addrs());
    let creds = ClusterCredentials::load(ours.path(), "client").expect("creds");
    rt.block_on(async {
        let (hs, _events) = hyperspace::client::Hyperspace::connect(
            addrs,
            creds,
            hyperspace::client::ClientOptions::default(),
        )
        .await
        .expect("a session on the replica of our cluster");
        hs.mkdirs("/passed/over").await.expect("mkdirs");
        assert!(hs.exists("/passed/over").await.expect("exists"));
        hs.close_session().await.expect("close session");
    });
}

/// A cluster file like `ht start` writes, recording `pids` as its processes.
fn write_cluster_file(dir: &Path, hyperspace: &[SocketAddr], pids: &[u32]) {
    let procs: Vec<serde_json::Value> = pids
        .iter()
        .enumerate()
        .map(|(i, pid)| {
            let role = if i < hyperspace.len() {
                "hyperspace"
            } else {
                "rangeserver"
            };
            serde_json::json!({
                "role": role,
                "name": format!("{role}-{}", i + 1),
                "pid": pid,
                "log": dir.join("logs").join(format!("{role}-{}.log", i + 1)),
            })
        })
        .collect();
    let file = serde_json::json!({
        "hyperspace": hyperspace
            .iter()
            .enumerate()
            .map(|(i, a)| format!("{}@{a}", i + 1))
            .collect::<Vec<_>>(),
        "dfs": format!("file://{}/fs", dir.display()),
        "processes": procs,
    });
    std::fs::write(
        dir.join("cluster.json"),
        serde_json::to_vec_pretty(&file).expect("json"),
    )
    .expect("write cluster file");
}

/// The pid of a process that has exited (and been reaped).
fn dead_pid() -> u32 {
    let mut child: Child = Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    child.wait().expect("wait");
    pid
}

#[test]
fn ht_status_on_a_stopped_cluster_answers_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    init(dir.path());
    let hyperspace: Vec<SocketAddr> = (0..3)
        .map(|_| hyperspace::launch::free_addr().expect("free addr"))
        .collect();
    let path = dir.path().display().to_string();

    // Every recorded process has exited (killed, or the machine restarted).
    let pids: Vec<u32> = (0..5).map(|_| dead_pid()).collect();
    write_cluster_file(dir.path(), &hyperspace, &pids);
    let (out, took) = timed(&["status", "--data-dir", &path]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(took < Duration::from_secs(5), "took {took:?}: {said}");
    assert!(
        said.contains("all 5 recorded processes have exited"),
        "{said}"
    );
    assert!(said.contains("EXITED"), "{said}");

    // After `ht stop`: no process recorded at all.
    write_cluster_file(dir.path(), &hyperspace, &[]);
    let (out, took) = timed(&["status", "--data-dir", &path]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(took < Duration::from_secs(5), "took {took:?}: {said}");
    assert!(said.contains("not running"), "{said}");

    // A live process, but every Hyperspace replica gone.
    let mut live = Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("spawn sleep");
    let pids = vec![dead_pid(), dead_pid(), dead_pid(), live.id()];
    write_cluster_file(dir.path(), &hyperspace, &pids);
    let (out, took) = timed(&["status", "--data-dir", &path]);
    let _ = live.kill();
    let _ = live.wait();
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(took < Duration::from_secs(5), "took {took:?}: {said}");
    assert!(
        said.contains("all 3 Hyperspace replicas have exited"),
        "{said}"
    );
}

/// Records the address of every caller (and refuses the call).
struct PeerRecorder {
    seen: Arc<Mutex<Vec<SocketAddr>>>,
}

#[async_trait::async_trait]
impl rpc::Service for PeerRecorder {
    async fn call(
        &self,
        peer: &PeerInfo,
        method: &str,
        _payload: Bytes,
    ) -> Result<Bytes, RpcError> {
        self.seen.lock().expect("lock").push(peer.addr);
        Err(RpcError::service(
            common::ErrorKind::Unavailable,
            format!("{method}: a recorder, not a server"),
        ))
    }
}

/// Kills a child when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn servers_connect_from_the_ip_they_listen_on() {
    // The processes listen on 127.0.0.2, another loopback IP: an unbound socket sending to
    // 127.0.0.1 would leave from 127.0.0.1.
    let dir = tempfile::tempdir().expect("tempdir");
    init(dir.path());
    let rt = runtime();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = rt
        .block_on(async {
            Server::bind(
                "127.0.0.1:0".parse().expect("addr"),
                &ClusterCredentials::load(dir.path(), "hyperspace").expect("creds"),
                PeerRecorder { seen: seen.clone() },
            )
        })
        .expect("bind");
    let target = recorder.local_addr().to_string();
    let d = dir.path().display().to_string();
    let replica = {
        let s = std::net::UdpSocket::bind("127.0.0.2:0").expect("a port on 127.0.0.2");
        s.local_addr().expect("addr").to_string()
    };
    let peers = format!("1@{replica},2@{target}");
    let roles: Vec<(&str, Vec<&str>)> = vec![
        (
            "range server",
            vec![
                "serve",
                "rangeserver",
                "--listen",
                "127.0.0.2:0",
                "--hyperspace",
                &target,
                "--data-dir",
                &d,
            ],
        ),
        (
            "master",
            vec![
                "serve",
                "master",
                "--listen",
                "127.0.0.2:0",
                "--hyperspace",
                &target,
                "--data-dir",
                &d,
            ],
        ),
        (
            "hyperspace replica",
            vec![
                "serve",
                "hyperspace",
                "--id",
                "1",
                "--peers",
                &peers,
                "--data-dir",
                &d,
                "--tick-ms",
                "20",
            ],
        ),
    ];
    for (role, args) in roles {
        seen.lock().expect("lock").clear();
        let _child = Killed(
            Command::new(ht())
                .args(&args)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("spawn"),
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        let first = loop {
            if let Some(a) = seen.lock().expect("lock").first().copied() {
                break a;
            }
            assert!(Instant::now() < deadline, "the {role} never called");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(
            first.ip().to_string(),
            "127.0.0.2",
            "the {role} called from {first}"
        );
    }
}

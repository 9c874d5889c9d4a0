//! An in-process cluster for the master's tests: one Hyperspace replica, a master and range
//! servers (each with its own registry of iterator and combiner kinds) on loopback, sharing a
//! local file system, and the cluster client.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::cluster::{ClusterClient, ClusterOptions};
use dfs_broker::LocalFs;
use hyperspace::node::NodeConfig;
use hyperspace::service::{Replica, ReplicaConfig, TransportOptions};
use rangeserver::engine::{Engine, EngineOptions};
use rangeserver::iterators::Registry;
use rangeserver::server::membership::{Incarnation, MembershipOptions};
use rangeserver::server::{RangeServerOptions, RangeServerService};
use rpc::ClusterCredentials;
use tokio::sync::{oneshot, watch};

/// A range server running in the cluster's runtime.
pub struct Server {
    pub location: String,
    pub engine: Engine,
    stop: Option<oneshot::Sender<()>>,
    done: Option<tokio::task::JoinHandle<Incarnation>>,
}

pub struct TestCluster {
    pub dir: tempfile::TempDir,
    pub rt: tokio::runtime::Runtime,
    pub hs_addr: SocketAddr,
    fs: Arc<LocalFs>,
    replica: Option<Replica>,
    master_stop: Option<watch::Sender<bool>>,
    master_done: Option<tokio::task::JoinHandle<()>>,
    pub servers: Vec<Server>,
}

impl TestCluster {
    /// Hyperspace and a master whose registry is `master_registry`; no range server yet.
    pub fn start(master_registry: Registry) -> TestCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        ClusterCredentials::create(dir.path()).expect("create CA");
        for name in ["hyperspace", "rangeserver", "master", "client"] {
            ClusterCredentials::issue(dir.path(), name).expect("issue");
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let hs_addr = hyperspace::launch::free_addr().expect("free port");
        let mut node = NodeConfig::new(1, dir.path().join("hs"), [(1, hs_addr.to_string())].into());
        node.tick = Duration::from_millis(20);
        let replica = rt
            .block_on(Replica::start(ReplicaConfig {
                node,
                listen: hs_addr,
                credentials_dir: dir.path().to_path_buf(),
                server: rpc::ServerOptions::default(),
                transport: TransportOptions::default(),
            }))
            .expect("hyperspace replica");
        let fs = Arc::new(LocalFs::new(dir.path().join("fs")).expect("fs"));
        let creds = ClusterCredentials::load(dir.path(), "master").expect("master creds");
        let mut config = master::MasterConfig::new(
            vec![hs_addr],
            creds,
            "127.0.0.1:0".parse().expect("addr"),
            fs.clone(),
        );
        config.poll_interval = Duration::from_millis(100);
        config.auto_balance = false;
        config.registry = Arc::new(master_registry);
        let (stop_tx, stop_rx) = watch::channel(false);
        let master_done = rt.spawn(async move {
            if let Err(e) = master::run(config, stop_rx).await {
                eprintln!("master stopped: {e}");
            }
        });
        TestCluster {
            dir,
            rt,
            hs_addr,
            fs,
            replica: Some(replica),
            master_stop: Some(stop_tx),
            master_done: Some(master_done),
            servers: Vec::new(),
        }
    }

    /// Starts a range server whose engine has `registry` (and `split_size_bytes` 0: splits only
    /// when a test makes them); returns its location once the master counts it live.
    pub fn add_server(&mut self, registry: Registry, client: &ClusterClient) -> String {
        self.add_server_with(registry, RangeServerOptions::default(), client)
    }

    /// [`TestCluster::add_server`] with the range server's own limits.
    pub fn add_server_with(
        &mut self,
        registry: Registry,
        rs_options: RangeServerOptions,
        client: &ClusterClient,
    ) -> String {
        let creds = ClusterCredentials::load(self.dir.path(), "rangeserver").expect("rs creds");
        let membership = MembershipOptions::new(vec![self.hs_addr]);
        let me = self
            .rt
            .block_on(Incarnation::begin(&membership, &creds))
            .expect("incarnation");
        let options = EngineOptions {
            registry: Arc::new(registry),
            split_size_bytes: 0,
            unsplit_tables: vec![proto::layout::METADATA_ID],
            ..EngineOptions::default()
        };
        let engine = Engine::open(
            self.fs.clone(),
            &me.root(),
            options,
            self.rt.handle().clone(),
        )
        .expect("open engine");
        let service = RangeServerService::new(engine.clone(), rs_options);
        let location = me.location().to_string();
        let (stop, stopped) = oneshot::channel::<()>();
        let served = engine.clone();
        let done = self.rt.spawn(async move {
            let listen = "127.0.0.1:0".parse().expect("addr");
            if let Err(e) = me
                .serve(served, service, listen, async {
                    let _ = stopped.await;
                })
                .await
            {
                eprintln!("range server stopped: {e}");
            }
            me
        });
        self.servers.push(Server {
            location: location.clone(),
            engine,
            stop: Some(stop),
            done: Some(done),
        });
        let live = self.servers.len();
        wait_for("the master to count the range server live", || {
            client.master_status().is_ok_and(|s| {
                !s.root_location.is_empty()
                    && s.servers.iter().filter(|s| s.live).count() == live
                    && s.servers.iter().any(|s| s.live && s.location == location)
            })
        });
        location
    }

    /// A cluster client.
    pub fn client(&self) -> ClusterClient {
        self.client_with(|_| {})
    }

    /// A cluster client with its options changed by `f`.
    pub fn client_with(&self, f: impl FnOnce(&mut ClusterOptions)) -> ClusterClient {
        let creds = ClusterCredentials::load(self.dir.path(), "client").expect("client creds");
        let mut options = ClusterOptions::new(vec![self.hs_addr]);
        f(&mut options);
        ClusterClient::connect(creds, options).expect("connect")
    }

    /// The engine of the server at `location`.
    pub fn engine(&self, location: &str) -> &Engine {
        &self
            .servers
            .iter()
            .find(|s| s.location == location)
            .unwrap_or_else(|| panic!("no range server {location}"))
            .engine
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for s in &mut self.servers {
            if let Some(stop) = s.stop.take() {
                let _ = stop.send(());
            }
            if let Some(done) = s.done.take()
                && let Ok(me) = self.rt.block_on(done)
            {
                let _ = s.engine.close();
                self.rt.block_on(me.leave());
            }
        }
        if let Some(stop) = self.master_stop.take() {
            let _ = stop.send(true);
        }
        if let Some(done) = self.master_done.take() {
            let _ = self.rt.block_on(done);
        }
        if let Some(r) = self.replica.take() {
            self.rt.block_on(r.shutdown());
        }
    }
}

/// Polls `ok` every 50 ms for up to 60 s.
pub fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

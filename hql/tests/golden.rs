//! Golden tests of the shell on the embedded database (the runner is `hql::golden`; the
//! cluster runs the same scripts in `ht/tests/cluster.rs`). `UPDATE_GOLDEN=1 cargo test -p
//! hql --test golden` rewrites the expected files.

use std::path::Path;
use std::sync::Arc;

use dfs_broker::LocalFs;
use dfs_broker::broker::{BrokerFs, BrokerFsOptions, BrokerOptions, BrokerService};
use embedded::{EmbeddedClient, EmbeddedOptions, FsFactory};
use rpc::ClusterCredentials;

/// Where the engine of a script's database keeps its files.
#[derive(Clone, Copy, PartialEq)]
enum Backend {
    /// The data directory on the local file system.
    Local,
    /// A DFS broker over QUIC on loopback, in front of a local directory.
    Broker,
}

/// A DFS broker serving `dir` on loopback, and a factory for clients of it.
struct BrokerSetup {
    rt: tokio::runtime::Runtime,
    server: Option<rpc::Server>,
    factory: FsFactory,
}

impl BrokerSetup {
    fn start(dir: &Path) -> BrokerSetup {
        let certs = dir.join("certs");
        ClusterCredentials::create(&certs).expect("CA");
        for name in ["dfs-broker", "client"] {
            ClusterCredentials::issue(&certs, name).expect("certificate");
        }
        let backend_dir = dir.join("dfs");
        std::fs::create_dir(&backend_dir).expect("backend dir");
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let server = rt.block_on(async {
            let backend = Arc::new(LocalFs::new(&backend_dir).expect("local fs"));
            let creds = ClusterCredentials::load(&certs, "dfs-broker").expect("creds");
            BrokerService::new(backend as Arc<dyn dfs_broker::Fs>, BrokerOptions::default())
                .bind("127.0.0.1:0".parse().expect("addr"), &creds)
                .expect("bind")
        });
        let addr = server.local_addr();
        let creds = ClusterCredentials::load(&certs, "client").expect("client creds");
        let factory: FsFactory = Arc::new(move |handle: &tokio::runtime::Handle| {
            let fs = handle
                .block_on(BrokerFs::connect(addr, &creds, BrokerFsOptions::default()))
                .map_err(|e| client::ClientError::storage(e.kind(), e.to_string()))?;
            Ok(Arc::new(fs) as Arc<dyn dfs_broker::Fs>)
        });
        BrokerSetup {
            rt,
            server: Some(server),
            factory,
        }
    }
}

impl Drop for BrokerSetup {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            self.rt
                .block_on(server.shutdown(std::time::Duration::from_millis(200)));
        }
    }
}

fn run_script(script: &str, backend: Backend) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = (backend == Backend::Broker).then(|| BrokerSetup::start(dir.path()));
    let options = EmbeddedOptions {
        fs: broker.as_ref().map(|b| b.factory.clone()),
        ..Default::default()
    };
    let client = Arc::new(EmbeddedClient::open(dir.path().join("db"), options).expect("open"));
    let out = hql::golden::run_script(client, script, dir.path());
    if backend == Backend::Broker {
        // The engine's files went through the broker into its backend directory.
        assert!(
            dir.path().join("dfs/ht").is_dir(),
            "nothing written through the broker"
        );
        assert!(
            !dir.path().join("db/ht").exists(),
            "the engine wrote locally"
        );
    }
    out
}

#[test]
fn golden() {
    check_all(Backend::Local);
}

/// The same scripts with the engine writing through a DFS broker over QUIC.
#[test]
fn golden_through_a_dfs_broker() {
    check_all(Backend::Broker);
}

fn check_all(backend: Backend) {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let scripts = hql::golden::scripts();
    assert!(!scripts.is_empty());
    let mut failed = Vec::new();
    for (name, script) in scripts {
        let text = std::fs::read_to_string(&script).expect("read script");
        let actual = run_script(&text, backend);
        if update && backend == Backend::Local {
            std::fs::write(script.with_extension("golden"), &actual).expect("write golden");
            continue;
        }
        if let Some(diff) = hql::golden::check(&name, &script, None, &actual) {
            eprintln!("{diff}");
            failed.push(name);
        }
    }
    assert!(
        failed.is_empty(),
        "golden files differ: {failed:?} (UPDATE_GOLDEN=1 rewrites them)"
    );
}

//! Golden tests of the shell: each `tests/golden/*.hql` runs in test mode against a fresh
//! embedded database and its output must equal the `.golden` file beside it.
//!
//! `$DATA` stands for `tests/golden/data/` (input files for LOAD DATA INFILE).
//! `$TMP` in a script stands for a scratch directory; files the script writes under
//! `$TMP/files/` are appended to the output (gzip files decompressed) so that INTO FILE and
//! DUMP TABLE output is checked too. `UPDATE_GOLDEN=1 cargo test -p hql --test golden`
//! rewrites the expected files.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use client::embedded::{EmbeddedClient, EmbeddedOptions, FsFactory};
use dfs_broker::LocalFs;
use dfs_broker::broker::{BrokerFs, BrokerFsOptions, BrokerOptions, BrokerService};
use hql::shell::{Shell, ShellOptions};
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
                .map_err(|e| client::ClientError::Storage {
                    kind: e.kind(),
                    message: e.to_string(),
                })?;
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
    let files = dir.path().join("files");
    std::fs::create_dir(&files).expect("files dir");
    let tmp = dir.path().to_str().expect("utf-8 temp path").to_string();
    let broker = (backend == Backend::Broker).then(|| BrokerSetup::start(dir.path()));
    let options = EmbeddedOptions {
        fs: broker.as_ref().map(|b| b.factory.clone()),
        ..Default::default()
    };
    let client = Arc::new(EmbeddedClient::open(dir.path().join("db"), options).expect("open"));
    let mut shell = Shell::new(
        client.clone(),
        ShellOptions {
            batch: true,
            test_mode: true,
            namespace: None,
            // A script that starts with `# --skip-bad-lines` runs as `ht shell --skip-bad-lines`.
            skip_bad_lines: script.starts_with("# --skip-bad-lines"),
        },
    )
    .expect("shell");
    let mut out = Vec::new();
    let mut err = Vec::new();
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/data");
    let script = script.replace("$TMP", &tmp).replace("$DATA", data);
    shell.run_script(&script, &mut out, &mut err);
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
    assert!(
        err.is_empty(),
        "test mode wrote to stderr: {}",
        String::from_utf8_lossy(&err)
    );
    let mut names: Vec<_> = std::fs::read_dir(&files)
        .expect("read files")
        .map(|e| e.expect("entry").path())
        .collect();
    names.sort();
    for p in names {
        let raw = std::fs::read(&p).expect("read file");
        let name = p.file_name().expect("name").to_string_lossy().to_string();
        let content = if name.ends_with(".gz") {
            let mut s = Vec::new();
            flate2::read::GzDecoder::new(raw.as_slice())
                .read_to_end(&mut s)
                .expect("gunzip");
            s
        } else {
            raw
        };
        out.extend_from_slice(format!("--- file {name} ---\n").as_bytes());
        out.extend_from_slice(&content);
    }
    String::from_utf8_lossy(&out)
        .replace(&tmp, "$TMP")
        .replace(data, "$DATA")
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
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let only = std::env::var("GOLDEN").ok();
    let mut scripts: Vec<_> = std::fs::read_dir(&dir)
        .expect("golden dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "hql"))
        .collect();
    scripts.sort();
    assert!(!scripts.is_empty());
    let mut failed = Vec::new();
    for script in scripts {
        let name = script
            .file_stem()
            .expect("stem")
            .to_string_lossy()
            .to_string();
        if only.as_ref().is_some_and(|o| *o != name) {
            continue;
        }
        let text = std::fs::read_to_string(&script).expect("read script");
        let actual = run_script(&text, backend);
        let golden = script.with_extension("golden");
        if update && backend == Backend::Local {
            std::fs::write(&golden, &actual).expect("write golden");
            continue;
        }
        let expected = std::fs::read_to_string(&golden).unwrap_or_default();
        if actual != expected {
            let line = actual
                .lines()
                .zip(expected.lines())
                .position(|(a, e)| a != e)
                .unwrap_or(actual.lines().count().min(expected.lines().count()));
            eprintln!(
                "{name}: output differs from {} at line {}:\n  expected: {:?}\n  actual:   {:?}",
                golden.display(),
                line + 1,
                expected.lines().nth(line),
                actual.lines().nth(line)
            );
            failed.push(name);
        }
    }
    assert!(
        failed.is_empty(),
        "golden files differ: {failed:?} (UPDATE_GOLDEN=1 rewrites them)"
    );
}

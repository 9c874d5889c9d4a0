//! The `Fs` conformance suite against `BrokerFs` -> `BrokerService` over real QUIC on
//! 127.0.0.1 -> `LocalFs`, and the broker's own promises: authentication, handle ownership,
//! restarts, reclaim of idle handles, bounded tables, large transfers, and a throughput probe.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dfs_broker::broker::messages::{AppendReply, AppendRequest, HandleRequest, UnitReply, method};
use dfs_broker::broker::{BrokerFs, BrokerFsOptions, BrokerOptions, BrokerService};
use dfs_broker::{AppendFlag, Fs, FsError, FsWriter, LocalFs};
use parking_lot::Mutex;
use rpc::ClusterCredentials;

/// Cluster credentials in a temporary directory: `dfs-broker` for the server, `client`.
struct Creds {
    _dir: tempfile::TempDir,
    server: ClusterCredentials,
    client: ClusterCredentials,
}

fn creds() -> Creds {
    let dir = tempfile::tempdir().expect("tempdir");
    ClusterCredentials::create(dir.path()).expect("create CA");
    for name in ["dfs-broker", "client"] {
        ClusterCredentials::issue(dir.path(), name).expect("issue");
    }
    Creds {
        server: ClusterCredentials::load(dir.path(), "dfs-broker").expect("load"),
        client: ClusterCredentials::load(dir.path(), "client").expect("load"),
        _dir: dir,
    }
}

fn localhost() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// A broker serving a `LocalFs` at `root`.
struct Broker {
    server: rpc::Server,
    service: BrokerService,
}

impl Broker {
    fn addr(&self) -> SocketAddr {
        self.server.local_addr()
    }
}

fn start(creds: &Creds, root: &Path, options: BrokerOptions, addr: SocketAddr) -> Broker {
    let backend: Arc<dyn Fs> = Arc::new(LocalFs::new(root).expect("LocalFs"));
    let service = BrokerService::new(backend, options);
    // A restarted broker rebinds its old port, which the old endpoint may still hold briefly.
    let mut tries = 0;
    let server = loop {
        match service.bind(addr, &creds.server) {
            Ok(s) => break s,
            Err(e) if tries < 50 => {
                tries += 1;
                eprintln!("bind {addr}: {e}; retrying");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("bind {addr}: {e}"),
        }
    };
    Broker { server, service }
}

async fn connect(creds: &Creds, addr: SocketAddr, options: BrokerFsOptions) -> BrokerFs {
    BrokerFs::connect(addr, &creds.client, options)
        .await
        .expect("connect to the broker")
}

/// A factory of empty file systems, each a `BrokerFs` talking to its own broker over its own
/// `LocalFs` directory. Brokers live as long as the factory.
fn broker_factory() -> impl Fn() -> Arc<dyn Fs> {
    let creds = creds();
    let dir = tempfile::tempdir().expect("tempdir");
    let brokers: Mutex<Vec<Broker>> = Mutex::new(Vec::new());
    move || -> Arc<dyn Fs> {
        let root = dir.path().join(brokers.lock().len().to_string());
        // The suite's factory is synchronous; the test runtime is multi-threaded.
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(async {
                let broker = start(&creds, &root, BrokerOptions::default(), localhost());
                let fs = connect(&creds, broker.addr(), BrokerFsOptions::default()).await;
                brokers.lock().push(broker);
                Arc::new(fs) as Arc<dyn Fs>
            })
        })
    }
}

mod broker {
    dfs_broker::conformance_tests!(super::broker_factory());
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 13) as u8)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn client_without_certificate_is_refused() {
    let c = creds();
    let root = tempfile::tempdir().expect("tempdir");
    let broker = start(&c, root.path(), BrokerOptions::default(), localhost());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(c.client.ca_cert().clone()).expect("root");
    let mut tls = rustls::ClientConfig::builder_with_provider(rpc::tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("tls13")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![rpc::tls::ALPN.to_vec()];
    let config = rpc::tls::quic_client_config(tls, Duration::from_secs(10)).expect("config");
    let options = BrokerFsOptions {
        call_timeout: Duration::from_secs(3),
        connect_timeout: Duration::from_secs(3),
        ..Default::default()
    };
    let err = BrokerFs::connect_with_config(broker.addr(), config, options)
        .await
        .expect_err("a client without a certificate must be refused");
    let msg = err.to_string();
    assert!(
        msg.contains(&broker.addr().to_string()),
        "error does not name the broker: {msg}"
    );
    assert_eq!(broker.service.open_writers(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn writer_handle_of_another_client_is_refused() {
    let c = creds();
    let root = tempfile::tempdir().expect("tempdir");
    let broker = start(&c, root.path(), BrokerOptions::default(), localhost());
    let fs = connect(&c, broker.addr(), BrokerFsOptions::default()).await;
    let mut w = fs.create_writer("/owned", false).await.expect("create");
    w.append(b"mine", AppendFlag::Flush).await.expect("append");

    // Another connection, same cluster certificate, presenting the stolen handle.
    let thief = rpc::Client::connect(broker.addr(), "dfs-broker", &c.client)
        .await
        .expect("connect");
    let req = AppendRequest {
        handle: w.handle(),
        data: bytes::Bytes::from_static(b"theirs"),
        flag: 1,
    };
    let reply: AppendReply = thief
        .call_message(method::APPEND, &req, Duration::from_secs(10))
        .await
        .expect("call");
    let err = reply
        .error
        .expect("append with another client's handle refused");
    assert!(err.message.contains("belongs to another client"), "{err:?}");
    let reply: UnitReply = thief
        .call_message(
            method::CLOSE,
            &HandleRequest { handle: w.handle() },
            Duration::from_secs(10),
        )
        .await
        .expect("call");
    assert!(reply.error.is_some(), "close with another client's handle");

    // The owner is unaffected.
    w.append(b"!", AppendFlag::Flush).await.expect("append");
    w.close().await.expect("close");
    assert_eq!(
        std::fs::read(root.path().join("owned")).expect("read"),
        b"mine!"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn broker_restart_mid_write_fails_the_next_append_cleanly() {
    let c = creds();
    let root = tempfile::tempdir().expect("tempdir");
    let broker = start(&c, root.path(), BrokerOptions::default(), localhost());
    let addr = broker.addr();
    let options = BrokerFsOptions {
        call_timeout: Duration::from_secs(5),
        ..Default::default()
    };
    let fs = connect(&c, addr, options).await;
    let mut w = fs.create("/log", false).await.expect("create");
    w.append(b"acknowledged ", AppendFlag::Flush)
        .await
        .expect("append");
    w.append(b"buffered", AppendFlag::None)
        .await
        .expect("append");

    // Not a graceful close of the writers: the broker's process "dies".
    broker.server.shutdown(Duration::from_millis(100)).await;
    drop(broker.service);
    let broker = start(&c, root.path(), BrokerOptions::default(), addr);

    let err = w
        .append(b"more", AppendFlag::Flush)
        .await
        .expect_err("append to a handle of the previous broker");
    let msg = err.to_string();
    assert!(matches!(err, FsError::Backend { .. }), "{err:?}");
    assert!(msg.contains("append") && msg.contains("/log"), "{msg}");
    // The writer stays failed: the file's end is unknown to it.
    assert!(w.append(b"x", AppendFlag::None).await.is_err());
    assert!(
        w.close().await.is_err(),
        "close of a handle the broker lost"
    );

    // What was acknowledged as flushed is there, read through the same client.
    let r = fs.open("/log").await.expect("open after restart");
    let len = r.length().await.expect("length");
    assert!(len >= 13, "flushed data lost: length {len}");
    assert_eq!(r.pread(0, 13).await.expect("pread"), b"acknowledged ");
    // And the new broker serves new writers.
    let mut w2 = fs
        .create("/log2", false)
        .await
        .expect("create after restart");
    w2.append(b"ok", AppendFlag::Sync).await.expect("append");
    w2.close().await.expect("close");
    assert_eq!(broker.service.open_writers(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn transport_failure_is_a_clean_error_naming_broker_and_operation() {
    let c = creds();
    let root = tempfile::tempdir().expect("tempdir");
    let broker = start(&c, root.path(), BrokerOptions::default(), localhost());
    let addr = broker.addr();
    let options = BrokerFsOptions {
        call_timeout: Duration::from_millis(500),
        connect_timeout: Duration::from_millis(500),
        retry: rpc::RetryPolicy {
            max_attempts: 2,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(10),
        },
        ..Default::default()
    };
    let fs = connect(&c, addr, options).await;
    let mut w = fs.create("/f", false).await.expect("create");
    broker.server.shutdown(Duration::from_millis(100)).await;
    let err = fs.exists("/f").await.expect_err("broker is gone");
    let msg = err.to_string();
    assert!(
        msg.contains(&addr.to_string()) && msg.contains("exists"),
        "{msg}"
    );
    let err = w
        .append(b"x", AppendFlag::Sync)
        .await
        .expect_err("broker is gone");
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_handles_of_a_vanished_client_are_reclaimed() {
    let c = creds();
    let root = tempfile::tempdir().expect("tempdir");
    let options = BrokerOptions {
        writer_idle_timeout: Duration::from_millis(400),
        ..Default::default()
    };
    let broker = start(&c, root.path(), options, localhost());
    let live_options = BrokerFsOptions {
        keepalive_interval: Duration::from_millis(50),
        ..Default::default()
    };
    let live = connect(&c, broker.addr(), live_options.clone()).await;
    let mut kept = live.create("/kept", false).await.expect("create");
    kept.append(b"a", AppendFlag::Flush).await.expect("append");
    {
        let gone = connect(&c, broker.addr(), live_options).await;
        let mut w = gone.create("/abandoned", false).await.expect("create");
        w.append(b"buffered, never closed", AppendFlag::None)
            .await
            .expect("append");
        assert_eq!(broker.service.open_writers(), 2);
        gone.close().await;
        // Dropped without close: the client vanished.
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while broker.service.open_writers() > 1 {
        assert!(
            Instant::now() < deadline,
            "abandoned handle never reclaimed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Reclaiming closed the backend writer, so what it buffered reached the file.
    assert_eq!(
        std::fs::read(root.path().join("abandoned")).expect("read"),
        b"buffered, never closed"
    );
    // The live client's writer sat idle far past the timeout but was kept alive.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(broker.service.open_writers(), 1);
    kept.append(b"b", AppendFlag::Flush)
        .await
        .expect("append to a kept-alive writer");
    kept.close().await.expect("close");
    assert_eq!(
        std::fs::read(root.path().join("kept")).expect("read"),
        b"ab"
    );
    assert_eq!(broker.service.open_writers(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn open_writers_are_bounded() {
    let c = creds();
    let root = tempfile::tempdir().expect("tempdir");
    let options = BrokerOptions {
        max_open_writers: 2,
        max_cached_readers: 1,
        ..Default::default()
    };
    let broker = start(&c, root.path(), options, localhost());
    let fs = connect(&c, broker.addr(), BrokerFsOptions::default()).await;
    let mut a = fs.create("/a", false).await.expect("create");
    let _b = fs.create("/b", false).await.expect("create");
    let err = fs
        .create("/c", false)
        .await
        .err()
        .expect("third writer refused");
    assert!(err.to_string().contains("limit"), "{err}");
    assert!(
        !fs.exists("/c").await.expect("exists"),
        "refused create made the file"
    );
    a.close().await.expect("close");
    fs.create("/c", false).await.expect("create after a close");
    // Readers: a cache of one still serves several files.
    for p in ["/a", "/b", "/c", "/a"] {
        assert_eq!(
            fs.open(p).await.expect("open").length().await.expect("len"),
            0
        );
    }
    assert!(broker.service.cached_readers() <= 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn recreated_file_is_not_read_through_a_stale_reader() {
    let c = creds();
    let root = tempfile::tempdir().expect("tempdir");
    let broker = start(&c, root.path(), BrokerOptions::default(), localhost());
    let fs = connect(&c, broker.addr(), BrokerFsOptions::default()).await;
    for (content, how) in [(&b"first"[..], 0), (b"second", 1), (b"third", 2)] {
        match how {
            1 => fs.remove("/f").await.expect("remove"),
            2 => {
                fs.rename("/f", "/g").await.expect("rename");
            }
            _ => {}
        }
        let mut w = fs.create("/f", false).await.expect("create");
        w.append(content, AppendFlag::Flush).await.expect("append");
        w.close().await.expect("close");
        let r = fs.open("/f").await.expect("open");
        assert_eq!(r.pread(0, content.len()).await.expect("pread"), content);
    }
    assert_eq!(
        fs.open("/g")
            .await
            .expect("open")
            .pread(0, 6)
            .await
            .expect("pread"),
        b"second"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_mib_written_in_flushes_reads_back_in_one_pread() {
    let c = creds();
    let root = tempfile::tempdir().expect("tempdir");
    let broker = start(&c, root.path(), BrokerOptions::default(), localhost());
    let fs = connect(&c, broker.addr(), BrokerFsOptions::default()).await;
    const TOTAL: usize = 20 << 20;
    let data = pattern(7, TOTAL);
    let mut w = fs.create("/big", false).await.expect("create");
    // 512 KiB flushes, then one 9 MiB append that must be split into pieces.
    let (small, big) = data.split_at(TOTAL - (9 << 20));
    for piece in small.chunks(512 << 10) {
        w.append(piece, AppendFlag::Flush).await.expect("append");
    }
    w.append(big, AppendFlag::Flush)
        .await
        .expect("large append");
    assert_eq!(w.position(), TOTAL as u64);
    // Flushed, not closed: visible to a reader already.
    let r = fs.open("/big").await.expect("open");
    assert_eq!(r.length().await.expect("length"), TOTAL as u64);
    let got = r.pread(0, TOTAL).await.expect("one pread of 20 MiB");
    assert!(got == data, "20 MiB read back differs");
    let got = r.pread(3 << 20, 9 << 20).await.expect("pread");
    assert!(got[..] == data[3 << 20..12 << 20]);
    assert!(matches!(
        r.pread(1, TOTAL).await,
        Err(FsError::ReadPastEnd { offset: 1, .. })
    ));
    w.close().await.expect("close");
    assert_eq!(
        std::fs::metadata(root.path().join("big"))
            .expect("stat")
            .len(),
        TOTAL as u64
    );
}

#[tokio::test]
async fn broker_urls_need_credentials_and_an_address() {
    for (url, why) in [
        ("broker://not-an-address", "bad broker address"),
        ("broker://127.0.0.1:1", "needs cluster credentials"),
    ] {
        let err = dfs_broker::open_url(url, None)
            .await
            .err()
            .expect("refused");
        assert!(err.to_string().contains(why), "{url}: {err}");
    }
}

#[test]
fn open_backend_knows_file_and_object_store_urls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root: PathBuf = dir.path().join("fs");
    let url = format!("file://{}", root.display());
    let fs = dfs_broker::open_backend(&url).expect("file:// backend");
    assert_eq!(fs.url(), url);
    let mem = dfs_broker::open_backend("memory://").expect("memory:// backend");
    assert_eq!(mem.url(), "memory://");
    for bad in [
        "hdfs://nn:9000/ht",
        "file://relative/path",
        "/no/scheme",
        "broker://127.0.0.1:1",
    ] {
        let err = dfs_broker::open_backend(bad).err().expect("refused");
        assert!(err.to_string().contains(bad), "{err}");
    }
}

/// Throughput through the broker against `LocalFs` directly:
/// `cargo test -p dfs-broker --release --test conformance_broker -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread")]
#[ignore]
async fn throughput_broker_vs_local() {
    const TOTAL: usize = 256 << 20;
    let c = creds();
    let root = tempfile::tempdir().expect("tempdir");
    let broker = start(
        &c,
        &root.path().join("broker"),
        BrokerOptions::default(),
        localhost(),
    );
    let remote = connect(&c, broker.addr(), BrokerFsOptions::default()).await;
    let local: Arc<dyn Fs> = Arc::new(LocalFs::new(root.path().join("local")).expect("LocalFs"));
    let remote: Arc<dyn Fs> = Arc::new(remote);
    let block = pattern(3, 64 << 10);
    for (name, fs) in [("local", local), ("broker", remote)] {
        let start = Instant::now();
        let mut w: Box<dyn FsWriter> = fs.create("/t", true).await.expect("create");
        for _ in 0..TOTAL / block.len() {
            w.append(&block, AppendFlag::Flush).await.expect("append");
        }
        w.close().await.expect("close");
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{name}: append+flush 64 KiB: {:.0} MiB/s ({:.0} appends/s)",
            TOTAL as f64 / secs / 1048576.0,
            (TOTAL / block.len()) as f64 / secs
        );
        let r = fs.open("/t").await.expect("open");
        let start = Instant::now();
        let mut off = 0;
        while off < TOTAL {
            let got = r.pread(off as u64, 1 << 20).await.expect("pread");
            assert_eq!(got.len(), 1 << 20);
            off += 1 << 20;
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{name}: pread 1 MiB: {:.0} MiB/s ({:.0} reads/s)",
            TOTAL as f64 / secs / 1048576.0,
            (TOTAL >> 20) as f64 / secs
        );
        // Four readers at once: tells per-call latency from a bandwidth limit.
        let start = Instant::now();
        let mut tasks = Vec::new();
        for t in 0..4usize {
            let r = r.clone();
            tasks.push(tokio::spawn(async move {
                let mut off = t << 20;
                while off < TOTAL {
                    let got = r.pread(off as u64, 1 << 20).await.expect("pread");
                    assert_eq!(got.len(), 1 << 20);
                    off += 4 << 20;
                }
            }));
        }
        for t in tasks {
            t.await.expect("reader");
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{name}: pread 1 MiB, 4 concurrent readers: {:.0} MiB/s",
            TOTAL as f64 / secs / 1048576.0
        );
        let start = Instant::now();
        let got = r.pread(0, 64 << 20).await.expect("pread 64 MiB");
        assert_eq!(got.len(), 64 << 20);
        println!(
            "{name}: one pread of 64 MiB: {:.0} MiB/s",
            64.0 / start.elapsed().as_secs_f64()
        );
    }
}

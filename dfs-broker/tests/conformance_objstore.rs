//! Runs the `Fs` conformance suite against `ObjectStoreFs` on `memory://`, on `file://` in a
//! temporary directory, and on a real S3-compatible server (moto, started by the test on a
//! loopback port); plus an ignored test printing append/flush and read-back timings.
//!
//! The S3 tests need `python3 -m moto.server` (`pip install 'moto[server]'`); without it they
//! fail, saying so. `HT_MOTO_PYTHON` names another Python interpreter.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dfs_broker::objstore::{ObjectStoreFs, ObjectStoreOptions};
use dfs_broker::{AppendFlag, Fs};

fn memory_factory(segment_bytes: usize) -> impl Fn() -> Arc<dyn Fs> {
    move || -> Arc<dyn Fs> {
        let opts = ObjectStoreOptions {
            segment_bytes,
            ..Default::default()
        };
        Arc::new(ObjectStoreFs::from_url("memory://", opts).expect("from_url memory://"))
    }
}

/// Empty file systems in subdirectories of one temporary directory, removed with the factory.
fn file_factory() -> impl Fn() -> Arc<dyn Fs> {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = AtomicU64::new(0);
    move || -> Arc<dyn Fs> {
        let sub = dir
            .path()
            .join(n.fetch_add(1, Ordering::Relaxed).to_string());
        let url = format!("file://{}", sub.display());
        Arc::new(ObjectStoreFs::from_url(&url, ObjectStoreOptions::default()).expect("from_url"))
    }
}

/// A moto S3 server on a loopback port, killed when dropped.
struct Moto {
    child: Child,
    port: u16,
    _log_dir: tempfile::TempDir,
}

const BUCKET: &str = "ht-test";

impl Moto {
    /// Starts moto and creates the test bucket; panics, saying why, if it cannot.
    fn start() -> Self {
        let python = std::env::var("HT_MOTO_PYTHON").unwrap_or_else(|_| "python3".to_string());
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let log_dir = tempfile::tempdir().expect("tempdir");
        let log_path = log_dir.path().join("moto.log");
        let log = std::fs::File::create(&log_path).expect("moto log file");
        let log2 = log.try_clone().expect("moto log file");
        let child = Command::new(&python)
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start the S3 test server: `{python} -m moto.server` failed: {e}; \
                     install it with `python3 -m pip install 'moto[server]'`"
                )
            });
        let mut moto = Self {
            child,
            port,
            _log_dir: log_dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = moto.child.try_wait() {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                panic!(
                    "the S3 test server (`{python} -m moto.server`) exited with {status}; is \
                     moto installed (`python3 -m pip install 'moto[server]'`)? Its output:\n{log}"
                );
            }
            if let Ok(status) = moto.request("PUT", &format!("/{BUCKET}")) {
                assert!(
                    status == 200,
                    "creating bucket {BUCKET} on moto answered HTTP {status}"
                );
                return moto;
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                panic!("the S3 test server did not answer on port {port} within 60 s:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends a bodiless HTTP/1.1 request; returns the status code.
    fn request(&self, method: &str, target: &str) -> std::io::Result<u16> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            s,
            "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n",
            self.port
        )?;
        let mut resp = String::new();
        s.read_to_string(&mut resp)?;
        resp.split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad HTTP response: {resp:.200}")))
    }

    fn options(&self) -> ObjectStoreOptions {
        ObjectStoreOptions {
            endpoint: Some(format!("http://127.0.0.1:{}", self.port)),
            region: Some("us-east-1".into()),
            access_key_id: Some("testing".into()),
            secret_access_key: Some("testing".into()),
            allow_http: Some(true),
            ..Default::default()
        }
    }

    /// A file system under a fresh prefix of the bucket.
    fn fs(&self, prefix: &str) -> ObjectStoreFs {
        let url = format!("s3://{BUCKET}/{prefix}");
        ObjectStoreFs::from_url(&url, self.options()).expect("from_url s3://")
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Empty file systems under distinct prefixes of one bucket of a moto server that lives as
/// long as the factory.
fn s3_factory() -> impl Fn() -> Arc<dyn Fs> {
    let moto = Moto::start();
    let n = AtomicU64::new(0);
    move || -> Arc<dyn Fs> {
        Arc::new(moto.fs(&format!("fs{}", n.fetch_add(1, Ordering::Relaxed))))
    }
}

mod memory {
    dfs_broker::conformance_tests!(super::memory_factory(
        dfs_broker::objstore::DEFAULT_SEGMENT_BYTES
    ));
}

/// Small segments: buffered appends spill into many segments, reads span many.
mod memory_small_segments {
    dfs_broker::conformance_tests!(super::memory_factory(1000));
}

mod file {
    dfs_broker::conformance_tests!(super::file_factory());
}

mod s3 {
    dfs_broker::conformance_tests!(super::s3_factory());
}

/// The S3 server is really used: objects appear in the bucket.
#[tokio::test(flavor = "multi_thread")]
async fn s3_objects_land_in_the_bucket() {
    let make = s3_factory();
    let fs = make();
    let mut w = fs.create("/dir/f", false).await.expect("create");
    w.append(b"hello", AppendFlag::Flush).await.expect("append");
    w.close().await.expect("close");
    assert!(fs.url().starts_with("s3://ht-test/"));
}

/// With conditional puts (`aws_conditional_put=etag`, If-None-Match), `create` and `rename`
/// refuse an existing target in the put itself instead of a HEAD before it.
#[tokio::test(flavor = "multi_thread")]
async fn s3_with_conditional_put() {
    let moto = Moto::start();
    let mut opts = moto.options();
    opts.config
        .push(("aws_conditional_put".into(), "etag".into()));
    let make = |prefix: &str| -> Arc<dyn Fs> {
        let url = format!("s3://{BUCKET}/{prefix}");
        Arc::new(ObjectStoreFs::from_url(&url, opts.clone()).expect("from_url"))
    };
    dfs_broker::conformance::create_exclusive_and_overwrite(make("cp1")).await;
    dfs_broker::conformance::rename_errors(make("cp2")).await;
    dfs_broker::conformance::rename_file(make("cp3")).await;
}

/// Prints the time to append 1 MiB in 64 KiB flushes and to read it back, per store.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement: cargo test -p dfs-broker --test conformance_objstore -- --ignored --nocapture"]
async fn measure_append_flush_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let moto = Moto::start();
    let stores: Vec<(&str, Arc<dyn Fs>)> = vec![
        (
            "memory://",
            Arc::new(
                ObjectStoreFs::from_url("memory://", ObjectStoreOptions::default())
                    .expect("memory"),
            ),
        ),
        (
            "file://",
            Arc::new(
                ObjectStoreFs::from_url(
                    &format!("file://{}", dir.path().join("fs").display()),
                    ObjectStoreOptions::default(),
                )
                .expect("file"),
            ),
        ),
        ("s3 (moto)", Arc::new(moto.fs("bench"))),
    ];
    const CHUNK: usize = 64 << 10;
    const TOTAL: usize = 1 << 20;
    let data: Vec<u8> = (0..TOTAL).map(|i| (i * 7 % 251) as u8).collect();
    for (name, fs) in stores {
        for round in 0..3 {
            let path = format!("/bench/{round}");
            let t = Instant::now();
            let mut w = fs.create(&path, false).await.expect("create");
            for c in data.chunks(CHUNK) {
                w.append(c, AppendFlag::Flush).await.expect("append");
            }
            w.close().await.expect("close");
            let write = t.elapsed();
            let t = Instant::now();
            let r = fs.open(&path).await.expect("open");
            let got = r.pread(0, TOTAL).await.expect("pread");
            let read_whole = t.elapsed();
            assert_eq!(got, data);
            let t = Instant::now();
            let mut off = 0;
            while off < TOTAL {
                let got = r.pread(off as u64, CHUNK).await.expect("pread");
                assert_eq!(got, &data[off..off + CHUNK]);
                off += CHUNK;
            }
            let read_chunks = t.elapsed();
            println!(
                "{name:10} round {round}: append+flush 16 x 64 KiB {:8.2} ms ({:6.2} ms/flush), \
                 read 1 MiB in one pread {:7.2} ms, in 16 preads {:7.2} ms",
                write.as_secs_f64() * 1e3,
                write.as_secs_f64() * 1e3 / 16.0,
                read_whole.as_secs_f64() * 1e3,
                read_chunks.as_secs_f64() * 1e3,
            );
        }
    }
}

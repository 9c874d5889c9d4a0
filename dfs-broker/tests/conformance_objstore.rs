//! Runs the `Fs` conformance suite against `ObjectStoreFs` on `memory://`, on `file://` in a
//! temporary directory, and on a real S3-compatible server (moto, started by the test on a
//! loopback port); plus an ignored test printing append/flush and read-back timings.
//!
//! The S3 tests need `python3 -m moto.server` (`pip install 'moto[server]'`); without it they
//! fail, saying so. `HT_MOTO_PYTHON` names another Python interpreter.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use dfs_broker::objstore::s3_server::S3TestServer;
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

/// The loopback S3 server of the tests; a test fails, saying why, if it cannot start.
struct Moto(S3TestServer);

const BUCKET: &str = "ht-test";

impl Moto {
    fn start() -> Self {
        Moto(S3TestServer::start(BUCKET).unwrap_or_else(|e| panic!("{e}")))
    }

    fn options(&self) -> ObjectStoreOptions {
        self.0.options()
    }

    fn fs(&self, prefix: &str) -> ObjectStoreFs {
        self.0.fs(prefix).expect("from_url s3://")
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

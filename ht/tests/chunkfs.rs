//! chunkfs as real processes (`ht serve chunkfs-meta`, `ht serve chunkserver` through
//! `chunkfs::launch::LocalDfs`): kill -9 of a chunk server while files are written, kill -9 and
//! restart of the metadata server, and a corrupted replica on disk.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chunkfs::ChunkFs;
use chunkfs::launch::{LocalDfs, LocalDfsOptions};
use dfs_broker::{AppendFlag, Fs};

fn ht() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ht"))
}

/// The byte at `offset` of file number `seed`: any range can be checked without keeping it.
fn byte(seed: u64, offset: u64) -> u8 {
    let x = (offset ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x >> 29) as u8
}

fn pattern(seed: u64, offset: u64, len: usize) -> Vec<u8> {
    (0..len as u64).map(|i| byte(seed, offset + i)).collect()
}

fn check(what: &str, seed: u64, offset: u64, got: &[u8]) {
    let want = pattern(seed, offset, got.len());
    if let Some(at) = got.iter().zip(&want).position(|(a, b)| a != b) {
        panic!(
            "{what}: byte {} differs from what was written",
            offset + at as u64
        );
    }
}

async fn read_all(fs: &ChunkFs, path: &str) -> Vec<u8> {
    let r = fs.open(path).await.expect("open");
    let len = r.length().await.expect("length");
    r.pread(0, len as usize).await.expect("pread")
}

/// Waits until every chunk of every complete block of `paths` has `replicas` servers, none of
/// them `dead`, and the metadata server counts nothing under-replicated. (Until the metadata
/// server notices the death, a block written before it still lists the dead server among its
/// `replicas`: the count alone can look complete while nothing was re-created yet.)
async fn wait_replicated(
    fs: &ChunkFs,
    paths: &[String],
    replicas: usize,
    dead: &str,
    timeout: Duration,
) {
    let start = Instant::now();
    loop {
        let status = fs.status().await.expect("status");
        let mut short = Vec::new();
        for p in paths {
            let stat = fs.stat(p).await.expect("stat");
            for b in stat.blocks.iter().filter(|b| b.length > 0) {
                for c in &b.chunks {
                    if c.servers.len() < replicas || c.servers.iter().any(|s| s == dead) {
                        short.push(format!("{p} chunk {} on {:?}", c.chunk_id, c.servers));
                    }
                }
            }
        }
        if short.is_empty() && status.under_replicated == 0 {
            return;
        }
        assert!(
            start.elapsed() < timeout,
            "not re-replicated within {timeout:?}: {short:?}, status {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn small(mut o: LocalDfsOptions) -> LocalDfsOptions {
    o.block_bytes = 256 << 10;
    o.heartbeat_ms = 100;
    o.dead_after_ms = 1_500;
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_a_chunk_server_while_writing_keeps_every_synced_byte_and_re_replicates() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Four servers: after one dies, three are left to hold three replicas.
    let mut dfs = LocalDfs::start(
        ht(),
        dir.path(),
        LocalDfsOptions {
            chunk_servers: 4,
            ..small(LocalDfsOptions::hdfs_like())
        },
    )
    .expect("start chunkfs");
    let fs = Arc::new(dfs.connect(Duration::from_secs(20)).await.expect("connect"));

    // Three writers append with a sync every few appends; each reports its synced lengths.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(u64, u64)>(1024);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for seed in 0..3u64 {
        let fs = fs.clone();
        let tx = tx.clone();
        let stop = stop.clone();
        writers.push(tokio::spawn(async move {
            let path = format!("/logs/w{seed}");
            let mut w = fs.create(&path, false).await.expect("create");
            let mut pos = 0u64;
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) || i < 40 {
                let n = [100usize, 7_000, 40_000, 130_000][(i % 4) as usize];
                let flag = if i % 3 == 2 {
                    AppendFlag::Sync
                } else {
                    AppendFlag::None
                };
                w.append(&pattern(seed, pos, n), flag)
                    .await
                    .unwrap_or_else(|e| panic!("{path}: append at {pos}: {e}"));
                pos += n as u64;
                if flag == AppendFlag::Sync {
                    let _ = tx.send((seed, pos)).await;
                }
                i += 1;
            }
            w.append(&[], AppendFlag::Sync).await.expect("final sync");
            (path, w, pos)
        }));
    }
    drop(tx);
    // Let them write, then kill -9 one server in the middle of it.
    let mut synced = [0u64; 3];
    while synced.iter().any(|s| *s < 600_000) {
        let (seed, pos) = rx.recv().await.expect("writers report");
        synced[seed as usize] = pos;
    }
    // No more reports are read: without the receiver the writers' sends fail at once instead
    // of waiting forever once the channel is full (CI hung here after 1,024 of them).
    drop(rx);
    dfs.kill_chunk_server(1);
    let killed = dfs.chunk_addr(1).to_string();
    // Every byte synced before the kill is readable now, while the writers go on.
    for (seed, &len) in synced.iter().enumerate() {
        let r = fs.open(&format!("/logs/w{seed}")).await.expect("open");
        assert!(r.length().await.expect("length") >= len);
        let got = r.pread(0, len as usize).await.expect("pread synced prefix");
        check("synced before the kill", seed as u64, 0, &got);
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut paths = Vec::new();
    for h in writers {
        let (path, mut w, pos) = h.await.expect("writer task");
        // Synced, not closed: what a crashed writer leaves behind is readable too.
        assert_eq!(fs.length(&path).await.expect("length"), pos);
        let seed = path
            .trim_start_matches("/logs/w")
            .parse::<u64>()
            .expect("seed");
        check(&path, seed, 0, &read_all(&fs, &path).await);
        w.close().await.expect("close");
        paths.push(path);
    }
    // The dead server's replicas are re-created on the others.
    wait_replicated(&fs, &paths, 3, &killed, Duration::from_secs(25)).await;
    for p in &paths {
        for b in fs.stat(p).await.expect("stat").blocks {
            for c in &b.chunks {
                assert!(
                    !c.servers.contains(&killed),
                    "{p}: dead server still listed"
                );
            }
        }
    }
    let status = fs.status().await.expect("status");
    assert!(
        status.repairs_done > 0,
        "nothing was re-replicated: {status:?}"
    );
    for (i, p) in paths.iter().enumerate() {
        check(p, i as u64, 0, &read_all(&fs, p).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_the_metadata_server_and_restart_keeps_the_namespace() {
    let dir = tempfile::tempdir().expect("tempdir");
    // `ht init` issues the chunkfs certificates by default.
    let init = std::process::Command::new(ht())
        .args(["init", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("run ht init");
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    for name in ["chunkfs-meta", "chunkserver"] {
        assert!(
            dir.path().join("tls").join(format!("{name}.pem")).exists(),
            "ht init made no {name} certificate"
        );
    }
    let mut dfs = LocalDfs::start(ht(), dir.path(), small(LocalDfsOptions::kfs_like()))
        .expect("start chunkfs");
    let fs = dfs.connect(Duration::from_secs(20)).await.expect("connect");
    for (i, path) in ["/ht/a/f1", "/ht/a/f2", "/ht/b/c/f3"].iter().enumerate() {
        let mut w = fs.create(path, false).await.expect("create");
        w.append(&pattern(i as u64, 0, 300_000 * (i + 1)), AppendFlag::None)
            .await
            .expect("append");
        w.close().await.expect("close");
    }
    fs.mkdirs("/ht/empty/dir").await.expect("mkdirs");
    fs.rename("/ht/a/f2", "/ht/b/moved").await.expect("rename");
    fs.remove("/ht/a/f1").await.expect("remove");
    // A file still being written, synced.
    let mut open = fs.create("/ht/log/open", false).await.expect("create");
    open.append(&pattern(9, 0, 500_000), AppendFlag::Sync)
        .await
        .expect("sync");
    let before = tree(&fs, "/").await;

    dfs.kill_meta();
    dfs.restart_meta().expect("restart the metadata server");
    let fs2 = dfs
        .connect(Duration::from_secs(20))
        .await
        .expect("reconnect");
    assert_eq!(
        tree(&fs2, "/").await,
        before,
        "namespace changed across the restart"
    );
    check("moved file", 1, 0, &read_all(&fs2, "/ht/b/moved").await);
    check("f3", 2, 0, &read_all(&fs2, "/ht/b/c/f3").await);
    check(
        "open file's synced bytes",
        9,
        0,
        &read_all(&fs2, "/ht/log/open").await,
    );
    assert!(!fs2.exists("/ht/a/f1").await.expect("exists"));
    // The writer from before the restart goes on (its lease survived), and new files work.
    open.append(&pattern(9, 500_000, 100_000), AppendFlag::Flush)
        .await
        .expect("append after the metadata restart");
    open.close().await.expect("close");
    check("open file", 9, 0, &read_all(&fs2, "/ht/log/open").await);
    assert_eq!(fs2.length("/ht/log/open").await.expect("length"), 600_000);
    let mut w = fs2
        .create("/ht/new", false)
        .await
        .expect("create after restart");
    w.append(b"after", AppendFlag::Sync).await.expect("append");
    w.close().await.expect("close");
    assert_eq!(read_all(&fs2, "/ht/new").await, b"after");
    // A second kill finds the same again.
    let before = tree(&fs2, "/").await;
    dfs.restart_meta().expect("restart again");
    let fs3 = dfs
        .connect(Duration::from_secs(20))
        .await
        .expect("reconnect");
    assert_eq!(tree(&fs3, "/").await, before);
}

/// Every path below `dir` with its kind and length, sorted.
async fn tree(fs: &ChunkFs, dir: &str) -> Vec<(String, bool, u64)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_string()];
    while let Some(d) = todo.pop() {
        for e in fs.readdir(&d).await.expect("readdir") {
            let p = dfs_broker::join(&d, &e.name);
            if e.is_dir {
                todo.push(p.clone());
            }
            out.push((p, e.is_dir, e.length));
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_corrupt_replica_is_read_around_and_repaired() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = small(LocalDfsOptions::hdfs_like());
    options.scan_interval_ms = 500;
    let dfs = LocalDfs::start(ht(), dir.path(), options).expect("start chunkfs");
    let fs = dfs.connect(Duration::from_secs(20)).await.expect("connect");
    let data = pattern(5, 0, 600_000);
    let mut w = fs.create("/cs/0", false).await.expect("create");
    w.append(&data, AppendFlag::None).await.expect("append");
    w.close().await.expect("close");

    let stat = fs.stat("/cs/0").await.expect("stat");
    let chunk = stat.blocks[1].chunks[0].clone();
    let victim = chunk.servers[0].clone();
    let i = (0..3)
        .find(|&i| dfs.chunk_addr(i).to_string() == victim)
        .expect("the victim is one of ours");
    let file = dfs.chunk_file(i, chunk.chunk_id);
    let mut bytes = std::fs::read(&file).expect("read the chunk file");
    for b in &mut bytes[100_000..100_010] {
        *b ^= 0x5A;
    }
    std::fs::write(&file, &bytes).expect("corrupt the chunk file");
    assert!(
        fs.read_replica(&victim, chunk.chunk_id, 0, 150_000)
            .await
            .is_err(),
        "the corrupt replica passed its checksums"
    );

    // Reads go around the corrupt replica (it is the first one tried).
    assert_eq!(read_all(&fs, "/cs/0").await, data);
    let r = fs.open("/cs/0").await.expect("open");
    check(
        "block 1",
        5,
        256 << 10,
        &r.pread(256 << 10, 256 << 10).await.expect("pread block 1"),
    );

    // The replica is replaced: three good replicas again, each passing its checksums.
    let start = Instant::now();
    loop {
        let stat = fs.stat("/cs/0").await.expect("stat");
        let c = &stat.blocks[1].chunks[0];
        let len = stat.blocks[1].length as usize;
        let mut good = 0;
        for s in &c.servers {
            if let Ok(d) = fs.read_replica(s, c.chunk_id, 0, len).await {
                check("repaired replica", 5, 256 << 10, &d);
                good += 1;
            }
        }
        if good == 3 && c.servers.len() == 3 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(25),
            "not repaired: servers {:?}, {good} good",
            c.servers
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(fs.status().await.expect("status").repairs_done >= 1);
}

/// The HQL shell's engine on chunkfs (`--dfs hdfs-like://` and `kfs-like://`, resolved by
/// `fs_url::open_any_url`): a table written, read back, and its files found in chunkfs. A URL
/// whose scheme does not match the metadata server's flavour is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shell_engine_on_chunkfs_urls() {
    for options in [LocalDfsOptions::hdfs_like(), LocalDfsOptions::kfs_like_rs()] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut options = small(options);
        options.block_bytes = 6 * (64 << 10);
        let dfs = LocalDfs::start(ht(), dir.path(), options).expect("start chunkfs");
        let fs = dfs.connect(Duration::from_secs(20)).await.expect("connect");
        let shell = std::process::Command::new(ht())
            .args(["shell", "--batch", "--data-dir"])
            .arg(dir.path())
            .args(["--dfs", &dfs.url(), "-e"])
            .arg("CREATE TABLE t (a); INSERT INTO t VALUES ('r1', 'a', 'v1'); SELECT * FROM t;")
            .output()
            .expect("run ht shell");
        let out = String::from_utf8_lossy(&shell.stdout);
        assert!(
            shell.status.success(),
            "{} {out} {}",
            dfs.url(),
            String::from_utf8_lossy(&shell.stderr)
        );
        assert!(out.contains("r1\ta\tv1"), "{out}");
        assert!(
            !fs.readdir("/ht").await.expect("readdir /ht").is_empty(),
            "the engine wrote nothing to {}",
            dfs.url()
        );
        // The wrong scheme for this metadata server.
        let wrong = if dfs.url().starts_with("hdfs-like") {
            dfs.url().replace("hdfs-like", "kfs-like")
        } else {
            dfs.url().replace("kfs-like", "hdfs-like")
        };
        let shell = std::process::Command::new(ht())
            .args(["shell", "--batch", "--data-dir"])
            .arg(dir.path())
            .args(["--dfs", &wrong, "-e", "SHOW TABLES;"])
            .output()
            .expect("run ht shell");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&shell.stdout),
            String::from_utf8_lossy(&shell.stderr)
        );
        assert!(
            !shell.status.success() && text.contains("serves a"),
            "{wrong} was accepted: {text}"
        );
    }
}

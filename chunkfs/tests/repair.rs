//! Repairs with in-process servers: a Reed-Solomon file stays readable when a chunk server
//! stops (reads rebuild the missing cells), and the lost chunks are rebuilt on other servers.

use std::time::{Duration, Instant};

use chunkfs::launch::{InProcessDfs, LocalDfsOptions};
use chunkfs::{Flavour, Layout};
use dfs_broker::{AppendFlag, Fs};

fn data(len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(0x9E37_79B9) >> 7) as u8)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reed_solomon_survives_a_lost_server_and_rebuilds_its_chunks() {
    let options = LocalDfsOptions {
        flavour: Flavour::KfsLike,
        layout: Layout::Striped {
            data: 6,
            parity: 3,
            cell_bytes: 16 << 10,
        },
        // One spare server to rebuild on.
        chunk_servers: 10,
        block_bytes: 6 * (64 << 10),
        heartbeat_ms: 100,
        dead_after_ms: 1_000,
        scan_interval_ms: 0,
        block_report_ms: 60_000,
        lease_timeout_ms: 60_000,
    };
    let (mut dfs, fs) = InProcessDfs::start(options).await.expect("start");
    let want = data(1_000_000);
    let mut w = fs.create("/rs/f", false).await.expect("create");
    w.append(&want[..300_000], AppendFlag::Flush)
        .await
        .expect("append");
    w.append(&want[300_000..], AppendFlag::Sync)
        .await
        .expect("append");
    w.close().await.expect("close");

    // Stop a server that holds a chunk of the first block.
    let stat = fs.stat("/rs/f").await.expect("stat");
    assert!(stat.blocks.len() >= 3, "{} blocks", stat.blocks.len());
    let victim = stat.blocks[0].chunks[2].servers[0].clone();
    let i = dfs
        .chunks
        .iter()
        .position(|c| c.local_addr().to_string() == victim)
        .expect("victim is ours");
    dfs.chunks.remove(i).shutdown().await;

    // Degraded reads rebuild the missing cells.
    let r = fs.open("/rs/f").await.expect("open");
    assert_eq!(r.pread(0, want.len()).await.expect("degraded read"), want);
    assert_eq!(
        r.pread(100_000, 50_000).await.expect("degraded pread"),
        &want[100_000..150_000]
    );

    // Every lost chunk is rebuilt elsewhere, byte for byte.
    let start = Instant::now();
    loop {
        let status = fs.status().await.expect("status");
        let stat = fs.stat("/rs/f").await.expect("stat");
        let missing = stat
            .blocks
            .iter()
            .flat_map(|b| &b.chunks)
            .filter(|c| c.servers.is_empty() || c.servers.contains(&victim))
            .count();
        if missing == 0 && status.under_replicated == 0 {
            assert!(status.repairs_done > 0);
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(25),
            "{missing} chunks not rebuilt: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Each rebuilt chunk matches what the writer wrote: read every data chunk directly.
    let stat = fs.stat("/rs/f").await.expect("stat");
    let mut offset = 0usize;
    for b in &stat.blocks {
        let block = &want[offset..offset + b.length as usize];
        for k in 0..6usize {
            let c = &b.chunks[k];
            let len = chunkfs::rs::chunk_len(fs.layout(), b.length, k) as usize;
            let got = fs
                .read_replica(&c.servers[0], c.chunk_id, 0, len)
                .await
                .expect("read a chunk");
            // Cell j of chunk k is bytes [(j*6+k)*cell, +cell) of the block.
            let cell = 16 << 10;
            for (j, piece) in got.chunks(cell).enumerate() {
                let at = (j * 6 + k) * cell;
                assert_eq!(
                    piece,
                    &block[at..at + piece.len()],
                    "block {} chunk {k} cell {j}",
                    b.block_id
                );
            }
        }
        offset += b.length as usize;
    }
    assert_eq!(
        fs.open("/rs/f")
            .await
            .unwrap()
            .pread(0, want.len())
            .await
            .unwrap(),
        want
    );
}

/// A file's id is its writer's lease: once another writer replaces the file, the old writer's
/// appends and close fail, and what the new writer wrote is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replaced_file_fences_its_old_writer() {
    let options = LocalDfsOptions {
        block_bytes: 64 << 10,
        heartbeat_ms: 100,
        ..LocalDfsOptions::hdfs_like()
    };
    let (_dfs, fs) = InProcessDfs::start(options).await.expect("start");
    let mut old = fs.create("/lease/f", false).await.expect("create");
    old.append(&data(100_000), AppendFlag::Flush)
        .await
        .expect("append");
    let mut new = fs.create("/lease/f", true).await.expect("create over it");
    new.append(b"new writer", AppendFlag::Sync)
        .await
        .expect("append");
    let e = old
        .append(&data(70_000), AppendFlag::Flush)
        .await
        .expect_err("the old writer appended to a replaced file");
    assert!(e.to_string().contains("/lease/f"), "{e}");
    assert!(
        old.close().await.is_err(),
        "the old writer closed a replaced file"
    );
    new.close().await.expect("close");
    let r = fs.open("/lease/f").await.expect("open");
    assert_eq!(r.length().await.expect("length"), 10);
    assert_eq!(r.pread(0, 10).await.expect("pread"), b"new writer");
}

/// A corrupt chunk of a striped block: reads rebuild the bad cells from the other chunks, and
/// the chunk is rebuilt (on another server) from its siblings.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_corrupt_striped_chunk_is_read_around_and_rebuilt() {
    let options = LocalDfsOptions {
        flavour: Flavour::KfsLike,
        layout: Layout::Striped {
            data: 6,
            parity: 3,
            cell_bytes: 16 << 10,
        },
        chunk_servers: 10,
        block_bytes: 6 * (64 << 10),
        heartbeat_ms: 100,
        dead_after_ms: 1_000,
        scan_interval_ms: 0,
        block_report_ms: 60_000,
        lease_timeout_ms: 60_000,
    };
    let (dfs, fs) = InProcessDfs::start(options).await.expect("start");
    let want = data(700_000);
    let mut w = fs.create("/rs/c", false).await.expect("create");
    w.append(&want, AppendFlag::None).await.expect("append");
    w.close().await.expect("close");
    let stat = fs.stat("/rs/c").await.expect("stat");
    let chunk = stat.blocks[0].chunks[1].clone();
    let server = chunk.servers[0].clone();
    let cs = dfs
        .chunks
        .iter()
        .find(|c| c.local_addr().to_string() == server)
        .expect("ours");
    let path = cs.chunk_file(chunk.chunk_id);
    let mut bytes = std::fs::read(&path).expect("read chunk file");
    bytes[20_000] ^= 0xFF;
    std::fs::write(&path, &bytes).expect("corrupt it");

    let r = fs.open("/rs/c").await.expect("open");
    assert_eq!(r.pread(0, want.len()).await.expect("read around"), want);

    let start = Instant::now();
    loop {
        let stat = fs.stat("/rs/c").await.expect("stat");
        let c = &stat.blocks[0].chunks[1];
        let len = chunkfs::rs::chunk_len(fs.layout(), stat.blocks[0].length, 1) as usize;
        if c.servers.len() == 1
            && let Ok(got) = fs.read_replica(&c.servers[0], c.chunk_id, 0, len).await
        {
            // Cell j of chunk 1 is bytes [(j*6+1)*cell, +cell) of the block.
            let cell = 16 << 10;
            for (j, piece) in got.chunks(cell).enumerate() {
                let at = (j * 6 + 1) * cell;
                assert_eq!(piece, &want[at..at + piece.len()], "cell {j}");
            }
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "not rebuilt: {:?}",
            c.servers
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(fs.status().await.expect("status").repairs_done >= 1);
    assert_eq!(
        fs.open("/rs/c")
            .await
            .unwrap()
            .pread(0, want.len())
            .await
            .unwrap(),
        want
    );
}

/// Lease recovery: a writer that vanished without closing loses its lease after the timeout
/// and its file is closed at the length it last flushed; a writer that is idle but alive keeps
/// renewing its lease and can still append.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_abandoned_writer_loses_its_lease_an_idle_one_keeps_it() {
    let options = LocalDfsOptions {
        block_bytes: 64 << 10,
        heartbeat_ms: 100,
        lease_timeout_ms: 1_000,
        ..LocalDfsOptions::hdfs_like()
    };
    let (dfs, _) = InProcessDfs::start(options).await.expect("start");
    let client = chunkfs::ChunkFs::connect(
        dfs.meta.local_addr(),
        &dfs.credentials,
        chunkfs::ChunkFsOptions {
            lease_renew_interval: Duration::from_millis(200),
            ..Default::default()
        },
    )
    .await
    .expect("connect");
    let want = data(150_000);
    let mut gone = client.create("/lease/gone", false).await.expect("create");
    gone.append(&want[..100_000], AppendFlag::Flush)
        .await
        .expect("flush");
    // Sent, never flushed: not part of the file after recovery.
    gone.append(&want[100_000..], AppendFlag::None)
        .await
        .expect("append");
    drop(gone);
    let mut idle = client.create("/lease/idle", false).await.expect("create");
    idle.append(b"before", AppendFlag::Flush)
        .await
        .expect("flush");

    let start = Instant::now();
    loop {
        let stat = client.stat("/lease/gone").await.expect("stat");
        if !stat.open {
            assert_eq!(stat.length, 100_000);
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the abandoned file is still open"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = client.open("/lease/gone").await.expect("open");
    assert_eq!(r.pread(0, 100_000).await.expect("pread"), &want[..100_000]);
    // Make sure the idle writer sat out more than a lease timeout.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(client.stat("/lease/idle").await.expect("stat").open);
    idle.append(b" after", AppendFlag::Flush)
        .await
        .expect("an idle writer still holds its lease");
    idle.close().await.expect("close");
    let r = client.open("/lease/idle").await.expect("open");
    assert_eq!(r.pread(0, 12).await.expect("pread"), b"before after");
}

/// A chunk server of the block being written stops mid-write (Reed-Solomon): the writer cuts
/// the block where every server had acknowledged, puts back the parity of the last partial
/// stripe, and goes on in a new block; every byte reads back, and the lost chunks are rebuilt.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reed_solomon_writer_survives_a_server_lost_mid_block() {
    let options = LocalDfsOptions {
        flavour: Flavour::KfsLike,
        layout: Layout::Striped {
            data: 6,
            parity: 3,
            cell_bytes: 16 << 10,
        },
        chunk_servers: 11,
        block_bytes: 6 * (256 << 10),
        heartbeat_ms: 100,
        dead_after_ms: 1_000,
        scan_interval_ms: 0,
        block_report_ms: 60_000,
        lease_timeout_ms: 60_000,
    };
    let (mut dfs, fs) = InProcessDfs::start(options).await.expect("start");
    let want = data(3_000_000);
    let mut w = fs.create("/rs/mid", false).await.expect("create");
    let mut pos = 0usize;
    let mut stopped = None;
    let mut i = 0usize;
    while pos < want.len() {
        let n = [1_000usize, 50_000, 7_777, 120_000][i % 4].min(want.len() - pos);
        let flag = if i.is_multiple_of(2) {
            AppendFlag::Flush
        } else {
            AppendFlag::Sync
        };
        w.append(&want[pos..pos + n], flag)
            .await
            .unwrap_or_else(|e| panic!("append at {pos}: {e}"));
        pos += n;
        i += 1;
        if stopped.is_none() && pos > 500_000 {
            // A parity server of the block being written.
            let stat = fs.stat("/rs/mid").await.expect("stat");
            let b = stat.blocks.last().expect("a block");
            let victim = b.chunks[7].servers[0].clone();
            let k = dfs
                .chunks
                .iter()
                .position(|c| c.local_addr().to_string() == victim)
                .expect("ours");
            dfs.chunks.remove(k).shutdown().await;
            stopped = Some(victim);
        }
    }
    w.close().await.expect("close");
    let victim = stopped.expect("a server was stopped");
    // 3 MB in blocks of 1.5 MB: a third block means one was cut at the failure.
    let blocks = fs.stat("/rs/mid").await.expect("stat").blocks.len();
    assert!(
        blocks >= 3,
        "the writer never cut a block ({blocks} blocks)"
    );
    let r = fs.open("/rs/mid").await.expect("open");
    assert_eq!(r.length().await.expect("length"), want.len() as u64);
    assert_eq!(r.pread(0, want.len()).await.expect("read all"), want);
    // Every chunk on a live server again.
    let start = Instant::now();
    loop {
        let stat = fs.stat("/rs/mid").await.expect("stat");
        let missing = stat
            .blocks
            .iter()
            .filter(|b| b.length > 0)
            .flat_map(|b| &b.chunks)
            .filter(|c| c.servers.is_empty() || c.servers.contains(&victim))
            .count();
        if missing == 0 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(25),
            "{missing} chunks not rebuilt"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Parity is right: with two data chunks of every block unreadable the file still reads.
    let stat = fs.stat("/rs/mid").await.expect("stat");
    for b in stat.blocks.iter().filter(|b| b.length > 0) {
        for k in [0usize, 3] {
            let c = &b.chunks[k];
            let srv = &c.servers[0];
            let idx = dfs
                .chunks
                .iter()
                .position(|x| x.local_addr().to_string() == *srv)
                .expect("ours");
            let path = dfs.chunks[idx].chunk_file(c.chunk_id);
            if let Ok(mut bytes) = std::fs::read(&path)
                && !bytes.is_empty()
            {
                // Every piece bad: every stripe of the block is rebuilt from parity, the
                // cut block's last partial stripe included.
                for x in bytes.iter_mut() {
                    *x ^= 0xA5;
                }
                std::fs::write(&path, &bytes).expect("corrupt");
            }
        }
    }
    let r = fs.open("/rs/mid").await.expect("open");
    assert_eq!(
        r.pread(0, want.len())
            .await
            .expect("read with two chunks bad per block"),
        want
    );
}

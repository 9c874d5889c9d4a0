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

//! Footprint: what the chunk servers keep is what the files need. Removed and replaced files'
//! chunks leave every server, and a chunk whose delete was lost (the server restarted before
//! running it, or it never arrived) is found by the server's next block report and deleted;
//! chunks that files own are never touched.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use chunkfs::chunk::store::ChunkStore;
use chunkfs::chunk::{ChunkServer, ChunkServerOptions};
use chunkfs::launch::{InProcessDfs, LocalDfsOptions};
use chunkfs::messages::{WriteReply, WriteRequest, method};
use chunkfs::{CHUNK_SERVER_NAME, ChunkFs};
use dfs_broker::{AppendFlag, Fs};
use rpc::ClusterCredentials;

fn data(len: usize, seed: u64) -> Vec<u8> {
    (0..len as u64)
        .map(|i| ((i ^ seed).wrapping_mul(0x9E37_79B9) >> 7) as u8)
        .collect()
}

fn options(block_report_ms: u64) -> LocalDfsOptions {
    LocalDfsOptions {
        block_bytes: 64 << 10,
        heartbeat_ms: 100,
        // Nobody is declared dead here: a restarted server comes back before the metadata
        // server notices it was gone.
        dead_after_ms: 30_000,
        block_report_ms,
        ..LocalDfsOptions::hdfs_like()
    }
}

async fn write(fs: &ChunkFs, path: &str, bytes: &[u8]) {
    let mut w = fs.create(path, true).await.expect("create");
    for piece in bytes.chunks(50_000) {
        w.append(piece, AppendFlag::Flush).await.expect("append");
    }
    w.close().await.expect("close");
}

fn chunk_ids(s: &ChunkServer) -> BTreeSet<u64> {
    s.chunks().into_iter().map(|(id, _)| id).collect()
}

/// Chunk files (data and checksums) in a server's directory.
fn files_on_disk(s: &ChunkServer) -> usize {
    let dir = s.chunk_file(0).parent().expect("a directory").to_path_buf();
    std::fs::read_dir(dir).expect("list").count()
}

/// Waits until every server holds exactly `want` (by id) and only their files on disk (a
/// delete takes the id out of the index before it removes the files), or fails naming what is
/// left.
async fn wait_for_chunks(dfs: &InProcessDfs, want: &BTreeSet<u64>, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let held: Vec<BTreeSet<u64>> = dfs.chunks.iter().map(chunk_ids).collect();
        let files: Vec<usize> = dfs.chunks.iter().map(files_on_disk).collect();
        if held.iter().all(|h| h == want) && files.iter().all(|&f| f == 2 * want.len()) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the servers hold {held:?} in {files:?} files, the files own {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The ids of the chunks of the files that remain, per the chunk servers right after writing.
fn all_ids(dfs: &InProcessDfs) -> BTreeSet<u64> {
    dfs.chunks.iter().flat_map(chunk_ids).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn removed_and_replaced_files_leave_no_chunks_behind() {
    let (dfs, fs) = InProcessDfs::start(options(0)).await.expect("start");
    write(&fs, "/keep", &data(150_000, 1)).await;
    let keep = all_ids(&dfs);
    assert_eq!(keep.len(), 3, "150 KB in 64 KiB blocks");
    // Rounds of what the engine does: logs written and removed, stores replaced.
    for round in 0..5u64 {
        write(&fs, &format!("/log/{round}"), &data(200_000, round)).await;
        write(&fs, "/store", &data(100_000 + round as usize, round)).await;
        write(&fs, "/store", &data(90_000, round + 7)).await;
        fs.remove(&format!("/log/{round}")).await.expect("remove");
    }
    fs.rmdir("/log", true).await.expect("rmdir");
    fs.remove("/store").await.expect("remove");
    wait_for_chunks(&dfs, &keep, "after removing").await;
    let r = fs.open("/keep").await.expect("open");
    assert_eq!(r.pread(0, 150_000).await.expect("read"), data(150_000, 1));
}

/// Stops server `i` and starts it again on the same address and directory, with `plant`
/// called on its store in between.
async fn restart(
    dfs: &mut InProcessDfs,
    i: usize,
    block_report_ms: u64,
    plant: impl FnOnce(&ChunkStore),
) {
    let server = dfs.chunks.remove(i);
    let addr = server.local_addr();
    let chunks_dir = server.chunk_file(0).parent().expect("dir").to_path_buf();
    let data_dir = chunks_dir.parent().expect("data dir").to_path_buf();
    let root = data_dir.parent().expect("cluster dir").to_path_buf();
    server.shutdown().await;
    plant(&ChunkStore::open(&chunks_dir, 1 << 30).expect("open the store"));
    let mut o = ChunkServerOptions::new(data_dir, dfs.meta.local_addr());
    o.heartbeat_ms = 100;
    o.block_report_ms = block_report_ms;
    let creds = ClusterCredentials::load(&root, CHUNK_SERVER_NAME).expect("credentials");
    let server = ChunkServer::start(addr, &creds, o).await.expect("restart");
    dfs.chunks.insert(i, server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_server_reports_its_chunks_and_loses_the_unowned_ones() {
    let (mut dfs, fs) = InProcessDfs::start(options(0)).await.expect("start");
    write(&fs, "/keep", &data(100_000, 3)).await;
    let keep = all_ids(&dfs);
    // What a server killed after taking its deletes from a heartbeat, before running them,
    // keeps: chunks no file owns. The metadata server saw no gap in its heartbeats.
    let lost = 1_000_000;
    restart(&mut dfs, 0, 0, |store| {
        store
            .write(lost, 0, &data(70_000, 9), true, true)
            .expect("plant a chunk");
    })
    .await;
    assert!(dfs.chunks[0].chunks().iter().any(|(id, _)| *id == lost));
    wait_for_chunks(&dfs, &keep, "after the restart").await;
    let r = fs.open("/keep").await.expect("open");
    assert_eq!(r.pread(0, 100_000).await.expect("read"), data(100_000, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_running_server_sweeps_chunks_no_file_owns() {
    let (dfs, fs) = InProcessDfs::start(options(300)).await.expect("start");
    write(&fs, "/keep", &data(100_000, 4)).await;
    let keep = all_ids(&dfs);
    // A chunk no file owns appears on a running server (as a delete that never arrived
    // leaves one): written by hand, outside any block.
    let config = dfs
        .credentials
        .client_config(Duration::from_secs(3))
        .expect("client config");
    let client = rpc::Client::connect_with(
        dfs.chunks[1].local_addr(),
        CHUNK_SERVER_NAME,
        config,
        rpc::ClientOptions::default(),
    )
    .await
    .expect("connect");
    let lost = 2_000_000;
    let reply: WriteReply = client
        .call_message(
            method::CHUNK_WRITE,
            &WriteRequest {
                chunk_id: lost,
                offset: 0,
                data: data(10_000, 5).into(),
                forward: Vec::new(),
                sync: true,
                create: true,
            },
            Duration::from_secs(5),
        )
        .await
        .expect("write");
    assert!(reply.error.is_none(), "{:?}", reply.error);
    assert!(dfs.chunks[1].chunks().iter().any(|(id, _)| *id == lost));
    wait_for_chunks(&dfs, &keep, "after a sweep").await;
    let r = fs.open("/keep").await.expect("open");
    assert_eq!(r.pread(0, 100_000).await.expect("read"), data(100_000, 4));
}

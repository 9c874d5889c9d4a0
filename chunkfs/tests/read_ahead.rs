//! Read-ahead of a chunkfs reader (`FsReader::prefetch`, `dfs_broker::read_ahead`): the
//! hinted range is read in the background and later preads inside it are answered from it,
//! byte for byte what the file holds, across block boundaries, while the file grows, from a
//! striped file missing a server, and with hints given from a thread outside the runtime (as
//! the engine gives them).

use chunkfs::launch::{InProcessDfs, LocalDfsOptions};
use chunkfs::{Flavour, Layout};
use dfs_broker::{AppendFlag, Fs, FsReader};

fn data(len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| (i.wrapping_mul(0x9E37_79B9) >> 7) as u8)
        .collect()
}

fn options(
    flavour: Flavour,
    layout: Layout,
    chunk_servers: usize,
    block_bytes: u64,
) -> LocalDfsOptions {
    LocalDfsOptions {
        flavour,
        layout,
        chunk_servers,
        block_bytes,
        heartbeat_ms: 100,
        dead_after_ms: 60_000,
        scan_interval_ms: 0,
        block_report_ms: 60_000,
        lease_timeout_ms: 60_000,
    }
}

/// Reads `[from, to)` in `piece`-byte preads, as a scanner reads blocks.
async fn read_in_pieces(r: &dyn FsReader, from: u64, to: u64, piece: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = from;
    while at < to {
        let n = piece.min(to - at) as usize;
        out.extend(r.pread(at, n).await.expect("pread"));
        at += n as u64;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hinted_reads_are_answered_from_windows_across_blocks() {
    let opts = options(
        Flavour::HdfsLike,
        Layout::Replicated { replicas: 3 },
        3,
        100_000,
    );
    let (_dfs, fs) = InProcessDfs::start(opts).await.expect("start");
    let want = data(1_000_000);
    let mut w = fs.create("/t/f", false).await.expect("create");
    w.append(&want, AppendFlag::Sync).await.expect("append");
    w.close().await.expect("close");

    let r = fs.open("/t/f").await.expect("open");
    // Hinted from a blocking thread, as the engine does: the reader reads on its runtime.
    let hinted = r.clone();
    tokio::task::spawn_blocking(move || {
        hinted.prefetch(50_000, 300_000);
        hinted.prefetch(350_000, 300_000);
    })
    .await
    .unwrap();
    let before = fs.read_ahead_stats();
    assert_eq!(before.windows_started, 2, "{before:?}");
    // Pieces of 25,000 bytes: 24 of them fall inside the two windows, spanning 6 blocks.
    assert_eq!(
        read_in_pieces(&*r, 50_000, 650_000, 25_000).await,
        want[50_000..650_000]
    );
    let after = fs.read_ahead_stats();
    assert_eq!(after.hits, 24, "{after:?}");
    assert_eq!(
        after.bytes_held, 0,
        "windows read to their end are kept: {after:?}"
    );
    // Unhinted reads and reads across a window's edge are plain reads.
    assert_eq!(r.pread(0, 100_000).await.unwrap(), want[..100_000]);
    r.prefetch(700_000, 100_000);
    assert_eq!(
        r.pread(650_000, 100_000).await.unwrap(),
        want[650_000..750_000]
    );
    assert_eq!(
        r.pread(750_000, 50_000).await.unwrap(),
        want[750_000..800_000]
    );
    assert_eq!(fs.read_ahead_stats().hits, 25);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_stops_at_the_length_the_reader_knows_and_the_rest_is_read_fresh() {
    let opts = options(
        Flavour::KfsLike,
        Layout::Replicated { replicas: 2 },
        3,
        64 << 10,
    );
    let (_dfs, fs) = InProcessDfs::start(opts).await.expect("start");
    let want = data(400_000);
    let mut w = fs.create("/t/growing", false).await.expect("create");
    w.append(&want[..150_000], AppendFlag::Flush)
        .await
        .expect("append");
    let r = fs.open("/t/growing").await.expect("open");
    // The reader knows 150,000 bytes: the window is [100_000, 150_000).
    r.prefetch(100_000, 200_000);
    w.append(&want[150_000..], AppendFlag::Flush)
        .await
        .expect("append");
    assert_eq!(
        r.pread(100_000, 50_000).await.unwrap(),
        want[100_000..150_000]
    );
    assert_eq!(fs.read_ahead_stats().hits, 1);
    // Past the window: read fresh, with the new length.
    assert_eq!(
        r.pread(120_000, 200_000).await.unwrap(),
        want[120_000..320_000]
    );
    assert!(r.pread(390_000, 20_000).await.is_err(), "read past the end");
    w.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_window_of_a_striped_file_missing_a_server_is_rebuilt() {
    let layout = Layout::Striped {
        data: 3,
        parity: 2,
        cell_bytes: 16 << 10,
    };
    let opts = options(Flavour::KfsLike, layout, 5, 3 * (64 << 10));
    let (mut dfs, fs) = InProcessDfs::start(opts).await.expect("start");
    let want = data(700_000);
    let mut w = fs.create("/rs/f", false).await.expect("create");
    w.append(&want, AppendFlag::Sync).await.expect("append");
    w.close().await.expect("close");
    let stat = fs.stat("/rs/f").await.expect("stat");
    let victim = stat.blocks[0].chunks[1].servers[0].clone();
    let i = dfs
        .chunks
        .iter()
        .position(|c| c.local_addr().to_string() == victim)
        .expect("victim is ours");
    dfs.chunks.remove(i).shutdown().await;

    let r = fs.open("/rs/f").await.expect("open");
    r.prefetch(10_000, 500_000);
    assert_eq!(
        read_in_pieces(&*r, 10_000, 510_000, 50_000).await,
        want[10_000..510_000]
    );
    assert_eq!(fs.read_ahead_stats().hits, 10);
}

//! The range server over real QUIC on 127.0.0.1: updates and scans through
//! `RangeServerClient` checked against an in-process engine, `NotHere` for rows held
//! elsewhere, streamed scans in bounded blocks, and the certificate check on range loading.

use std::net::SocketAddr;
use std::ops::Bound;
use std::sync::Arc;

use common::key::CellFlag;
use common::{ErrorKind, Mutation, TableSchema};
use dfs_broker::LocalFs;
use proptest::prelude::*;
use proto::rs::client::{RangeServerClient, RsError};
use rangeserver::engine::{Engine, EngineOptions};
use rangeserver::scan::spec::{RowInterval, ScanSpec};
use rangeserver::server::{RangeServerOptions, RangeServerService};
use rpc::ClusterCredentials;

/// A range server on a fresh engine, and the credentials of its cluster.
struct Fixture {
    dir: tempfile::TempDir,
    engine: Engine,
    server: Option<rpc::Server>,
    addr: SocketAddr,
}

impl Fixture {
    async fn start(options: RangeServerOptions) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        ClusterCredentials::create(dir.path()).expect("create CA");
        for name in ["rangeserver", "master", "client"] {
            ClusterCredentials::issue(dir.path(), name).expect("issue");
        }
        let fs = Arc::new(LocalFs::new(dir.path().join("fs")).expect("fs"));
        let handle = tokio::runtime::Handle::current();
        // Opening reads files through `block_on`: not on a runtime worker.
        let engine = tokio::task::spawn_blocking(move || {
            Engine::open(fs, "/ht", EngineOptions::default(), handle)
        })
        .await
        .expect("join")
        .expect("open engine");
        let creds = ClusterCredentials::load(dir.path(), "rangeserver").expect("load");
        let server = RangeServerService::new(engine.clone(), options)
            .bind("127.0.0.1:0".parse().expect("addr"), &creds)
            .expect("bind");
        let addr = server.local_addr();
        Self {
            dir,
            engine,
            server: Some(server),
            addr,
        }
    }

    /// Makes table 1 (`schema(1)`) with one range holding every row, as the master would;
    /// returns the master's connection and a client's.
    async fn with_table_one(&self) -> (RangeServerClient, RangeServerClient) {
        let admin = self.client("master").await;
        admin.create_table(&schema(1)).await.expect("create_table");
        admin.load_range(1, None, None).await.expect("load_range");
        (admin, self.client("client").await)
    }

    async fn client(&self, name: &str) -> RangeServerClient {
        let creds = ClusterCredentials::load(self.dir.path(), name).expect("load");
        RangeServerClient::connect(self.addr, &creds)
            .await
            .expect("connect")
    }

    async fn stop(mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown(std::time::Duration::from_secs(1)).await;
        }
        let e = self.engine.clone();
        tokio::task::spawn_blocking(move || e.close())
            .await
            .expect("join")
            .expect("close");
    }
}

fn schema(id: u32) -> TableSchema {
    let mut s = TableSchema::new(id, format!("/t{id}"));
    s.add_family("a");
    s.add_family("b");
    s
}

/// A cell as the model compares it: row, family, qualifier, value.
type Shape = (Vec<u8>, u8, Vec<u8>, Vec<u8>);

/// What the model compares: timestamps and revisions differ between two engines.
fn shape(cells: Vec<common::Cell>) -> Vec<Shape> {
    cells
        .into_iter()
        .map(|c| (c.key.row, c.key.family, c.key.qualifier, c.value))
        .collect()
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u8, u8, u8, u8),
    DeleteRow(u8),
    DeleteFamily(u8, u8),
    DeleteCell(u8, u8, u8),
}

fn op() -> impl Strategy<Value = Op> {
    let row = 0u8..4;
    let fam = 1u8..=2;
    let qual = 0u8..2;
    prop_oneof![
        6 => (row.clone(), fam.clone(), qual.clone(), any::<u8>())
            .prop_map(|(r, f, q, v)| Op::Insert(r, f, q, v)),
        1 => row.clone().prop_map(Op::DeleteRow),
        1 => (row.clone(), fam.clone()).prop_map(|(r, f)| Op::DeleteFamily(r, f)),
        2 => (row, fam, qual).prop_map(|(r, f, q)| Op::DeleteCell(r, f, q)),
    ]
}

fn mutation(op: &Op) -> Mutation {
    let row = |r: u8| format!("row{r}");
    let qual = |q: u8| format!("q{q}");
    match *op {
        Op::Insert(r, f, q, v) => Mutation::insert(row(r), f, qual(q), vec![v]),
        Op::DeleteRow(r) => Mutation::delete(CellFlag::DeleteRow, row(r), 0, "", None),
        Op::DeleteFamily(r, f) => {
            Mutation::delete(CellFlag::DeleteColumnFamily, row(r), f, "", None)
        }
        Op::DeleteCell(r, f, q) => Mutation::delete(CellFlag::DeleteCell, row(r), f, qual(q), None),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Batches sent through the client and scanned back through it equal the same batches
    /// applied to an in-process engine and scanned there.
    #[test]
    fn updates_and_scans_match_an_in_process_engine(
        batches in prop::collection::vec(prop::collection::vec(op(), 1..8), 1..6),
        row in 0u8..4,
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        // Every scan big enough to split runs in pieces (`Engine::scan_pieces`), so the
        // pieces' concatenation is held to the model too.
        let fx = rt.block_on(Fixture::start(RangeServerOptions {
            scan_pieces: 4,
            scan_piece_bytes: 1,
            ..RangeServerOptions::default()
        }));
        let model_dir = tempfile::tempdir().expect("tempdir");
        let model = Engine::open(
            Arc::new(LocalFs::new(model_dir.path()).expect("fs")),
            "/ht",
            EngineOptions::default(),
            rt.handle().clone(),
        )
        .expect("open model");
        model.create_table(schema(1)).expect("model table");
        let (admin, data) = rt.block_on(fx.with_table_one());
        for batch in &batches {
            let muts: Vec<Mutation> = batch.iter().map(mutation).collect();
            rt.block_on(data.update(1, &muts)).expect("update");
            model.apply(1, &muts).expect("model apply");
        }
        let specs = [
            ScanSpec::default(),
            ScanSpec {
                row_intervals: vec![RowInterval::row(format!("row{row}"))],
                ..ScanSpec::default()
            },
            ScanSpec {
                row_intervals: vec![RowInterval {
                    start: Bound::Excluded(format!("row{row}").into_bytes()),
                    end: Bound::Unbounded,
                }],
                max_versions: 1,
                ..ScanSpec::default()
            },
            // A key set: pieces split between its rows.
            ScanSpec {
                row_intervals: (0..4u8)
                    .filter(|r| *r != row)
                    .map(|r| RowInterval::row(format!("row{r}")))
                    .collect(),
                ..ScanSpec::default()
            },
        ];
        for spec in &specs {
            let got = rt
                .block_on(async { data.scan(1, spec).await?.collect().await })
                .expect("scan");
            let want = model.scan(1, spec).expect("model scan").collect_all().expect("model cells");
            prop_assert_eq!(shape(got), shape(want), "spec {:?}", spec);
        }
        let ranges = rt.block_on(data.ranges(1)).expect("ranges");
        prop_assert_eq!(ranges.len(), 1);
        prop_assert_eq!(&ranges[0].start_row, &None);
        prop_assert_eq!(&ranges[0].end_row, &None);
        model.close().expect("close model");
        rt.block_on(async {
            admin.close().await;
            data.close().await;
            fx.stop().await;
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_touching_a_range_held_elsewhere_is_refused_whole() {
    let fx = Fixture::start(RangeServerOptions::default()).await;
    let admin = fx.client("master").await;
    admin.create_table(&schema(1)).await.expect("create_table");
    // Held: [.., "g") and ["g", "p"); ["p", ..) is another server's.
    admin.load_range(1, None, Some(b"g")).await.expect("load 1");
    admin
        .load_range(1, Some(b"g"), Some(b"p"))
        .await
        .expect("load 2");
    let data = fx.client("client").await;
    let batch = vec![
        Mutation::insert("a", 1, "", "1"),
        Mutation::insert("h", 2, "x", "2"),
        Mutation::insert("q", 1, "", "3"),
    ];
    match data.update(1, &batch).await {
        Err(RsError::NotHere { table_id, row }) => {
            assert_eq!(table_id, 1);
            assert_eq!(row, b"q");
        }
        other => panic!("expected NotHere, got {other:?}"),
    }
    let held = ScanSpec {
        row_intervals: vec![RowInterval {
            start: Bound::Unbounded,
            end: Bound::Excluded(b"p".to_vec()),
        }],
        ..ScanSpec::default()
    };
    let cells = data.scan(1, &held).await.expect("scan").collect().await;
    assert!(
        cells.expect("cells").is_empty(),
        "nothing of the batch applied"
    );
    // A scan reaching into the third range is refused too, naming its first row.
    let everything = data.scan(1, &ScanSpec::default()).await.expect("scan");
    match everything.collect().await {
        Err(RsError::NotHere { row, .. }) => assert_eq!(row, b"p"),
        other => panic!("expected NotHere, got {other:?}"),
    }
    // The held part of the batch goes through.
    data.update(1, &batch[..2]).await.expect("update");
    let cells = data.scan(1, &held).await.expect("scan").collect().await;
    assert_eq!(cells.expect("cells").len(), 2);
    let ranges = data.ranges(1).await.expect("ranges");
    let bounds: Vec<_> = ranges
        .iter()
        .map(|r| (r.start_row.clone(), r.end_row.clone()))
        .collect();
    assert_eq!(
        bounds,
        vec![
            (None, Some(b"g".to_vec())),
            (Some(b"g".to_vec()), Some(b"p".to_vec()))
        ]
    );
    assert!(ranges.iter().all(|r| r.size_bytes > 0));
    let status = data.status().await.expect("status");
    assert_eq!(status.ranges, 2);
    fx.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_of_100k_cells_streams_in_bounded_blocks_and_can_be_abandoned() {
    let options = RangeServerOptions {
        scan_block_cells: 1000,
        scan_block_bytes: 16 << 10,
        scan_queue_blocks: 2,
        // One scan at a time: an abandoned scan that kept its slot would hang the next one.
        max_concurrent_scans: 1,
        ..RangeServerOptions::default()
    };
    let fx = Fixture::start(options).await;
    let (_admin, data) = fx.with_table_one().await;
    const N: usize = 100_000;
    for chunk in (0..N).collect::<Vec<_>>().chunks(10_000) {
        let batch: Vec<Mutation> = chunk
            .iter()
            .map(|i| Mutation::insert(format!("row{i:06}"), 1, "q", format!("value{i}")))
            .collect();
        data.update(1, &batch).await.expect("update");
    }
    let mut stream = data.scan(1, &ScanSpec::default()).await.expect("scan");
    let mut n = 0usize;
    while let Some(c) = stream.next().await.expect("next") {
        assert_eq!(c.key.row, format!("row{n:06}").into_bytes());
        n += 1;
    }
    assert_eq!(n, N);
    // About 30 bytes a cell plus overhead: each message holds at most ~16 KiB, so well over
    // N * 20 / 16 KiB messages arrived, never one huge one.
    let blocks = stream.blocks_received();
    assert!(blocks >= (N * 20 / (16 << 10)) as u64, "{blocks} blocks");
    assert!(blocks <= N as u64 / 100, "{blocks} blocks");

    // A second scan waits while the first holds the only slot.
    let mut first = data.scan(1, &ScanSpec::default()).await.expect("scan");
    assert!(first.next().await.expect("first").is_some());
    let mut second = data.scan(1, &ScanSpec::default()).await.expect("scan");
    let waited = tokio::time::timeout(std::time::Duration::from_millis(300), second.next()).await;
    assert!(waited.is_err(), "the second scan ran beside the first");
    drop(first);
    let cell = tokio::time::timeout(std::time::Duration::from_secs(10), second.next())
        .await
        .expect("the dropped scan released its slot")
        .expect("next");
    assert!(cell.is_some());
    drop(second);
    // Abandon scans after a few cells: the server stops each (freeing the one slot) and keeps
    // serving.
    for _ in 0..8 {
        let mut s = data.scan(1, &ScanSpec::default()).await.expect("scan");
        let next = tokio::time::timeout(std::time::Duration::from_secs(10), s.next()).await;
        assert!(next.expect("slot freed").expect("first").is_some());
        drop(s);
    }
    let one = ScanSpec {
        row_intervals: vec![RowInterval::row("row000042")],
        ..ScanSpec::default()
    };
    let cells = data.scan(1, &one).await.expect("scan").collect().await;
    assert_eq!(cells.expect("cells").len(), 1);
    fx.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_whose_client_stops_reading_is_abandoned_and_frees_its_slot() {
    let options = RangeServerOptions {
        scan_block_cells: 100,
        scan_block_bytes: 4 << 10,
        scan_queue_blocks: 1,
        max_concurrent_scans: 1,
        scan_idle_timeout: std::time::Duration::from_millis(500),
        ..RangeServerOptions::default()
    };
    let fx = Fixture::start(options).await;
    let (_admin, data) = fx.with_table_one().await;
    let batch: Vec<Mutation> = (0..50_000)
        .map(|i| Mutation::insert(format!("row{i:06}"), 1, "q", "x".repeat(100)))
        .collect();
    for chunk in batch.chunks(10_000) {
        data.update(1, chunk).await.expect("update");
    }
    // Read one cell, then nothing: once the stream window is full the server waits, then
    // gives up on the scan.
    let mut idle = data.scan(1, &ScanSpec::default()).await.expect("scan");
    assert!(idle.next().await.expect("first").is_some());
    let started = std::time::Instant::now();
    let mut other = data.scan(1, &ScanSpec::default()).await.expect("scan");
    let cell = tokio::time::timeout(std::time::Duration::from_secs(20), other.next())
        .await
        .expect("the idle scan released its slot")
        .expect("next");
    assert!(cell.is_some());
    assert!(started.elapsed() >= std::time::Duration::from_millis(400));
    drop(other);
    // The idle scan's client learns it was abandoned once it reads past what had arrived.
    let mut read = 1;
    let err = loop {
        match idle.next().await {
            Ok(Some(_)) => read += 1,
            Ok(None) => panic!("the abandoned scan ended cleanly after {read} cells"),
            Err(e) => break e,
        }
    };
    assert!(read < 50_000, "{read}");
    assert!(err.to_string().contains("reset"), "{err}");
    fx.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_cluster_nodes_may_change_tables_and_ranges() {
    let fx = Fixture::start(RangeServerOptions::default()).await;
    let data = fx.client("client").await;
    let refused = |r: Result<_, RsError>| match r {
        Err(RsError::Rpc(e)) => {
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
            assert!(e.to_string().contains("only the master"), "{e}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    };
    refused(data.create_table(&schema(1)).await.map(|_| 0));
    let admin = fx.client("rangeserver").await;
    admin.create_table(&schema(1)).await.expect("create_table");
    refused(data.load_range(1, None, None).await);
    refused(data.drop_table(1).await.map(|_| 0));
    refused(data.alter_table(&schema(1)).await.map(|_| 0));
    assert!(data.ranges(1).await.expect("ranges").is_empty());
    // With no range loaded, an update is NotHere; an unknown table is NotFound.
    assert!(matches!(
        data.update(1, &[Mutation::insert("a", 1, "", "v")]).await,
        Err(RsError::NotHere { .. })
    ));
    let err = data
        .update(9, &[Mutation::insert("a", 1, "", "v")])
        .await
        .expect_err("no table 9");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(!matches!(err, RsError::NotHere { .. }));
    admin.load_range(1, None, None).await.expect("load_range");
    data.update(1, &[Mutation::insert("a", 1, "", "v")])
        .await
        .expect("update");
    admin.drop_table(1).await.expect("drop_table");
    assert_eq!(data.status().await.expect("status").ranges, 0);
    fx.stop().await;
}

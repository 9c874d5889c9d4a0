//! The range-moving calls over real QUIC on 127.0.0.1: two range servers on one shared file
//! system split, unload and adopt a range, list all their ranges, and one recovers the other's
//! ranges after it stopped; a `client` certificate may call none of these.

use std::net::SocketAddr;
use std::sync::Arc;

use common::{ErrorKind, Mutation, TableSchema};
use dfs_broker::{BlockingFs, LocalFs};
use proto::rs::client::{RangeServerClient, RsError};
use rangeserver::engine::{Engine, EngineOptions};
use rangeserver::meta::read_state;
use rangeserver::scan::spec::{RowInterval, ScanSpec};
use rangeserver::server::{RangeServerOptions, RangeServerService};
use rpc::ClusterCredentials;

/// One range server with its own root on the shared file system.
struct Node {
    engine: Engine,
    server: rpc::Server,
    addr: SocketAddr,
}

struct Cluster {
    dir: tempfile::TempDir,
    fs: Arc<LocalFs>,
}

impl Cluster {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        ClusterCredentials::create(dir.path()).expect("create CA");
        for name in ["rangeserver", "master", "client"] {
            ClusterCredentials::issue(dir.path(), name).expect("issue");
        }
        let fs = Arc::new(LocalFs::new(dir.path().join("fs")).expect("fs"));
        Self { dir, fs }
    }

    async fn start(&self, root: &str) -> Node {
        let fs = self.fs.clone();
        let handle = tokio::runtime::Handle::current();
        let root = root.to_string();
        let engine = tokio::task::spawn_blocking(move || {
            Engine::open(fs, &root, EngineOptions::default(), handle)
        })
        .await
        .expect("join")
        .expect("open engine");
        let creds = ClusterCredentials::load(self.dir.path(), "rangeserver").expect("load");
        let server = RangeServerService::new(engine.clone(), RangeServerOptions::default())
            .bind("127.0.0.1:0".parse().expect("addr"), &creds)
            .expect("bind");
        let addr = server.local_addr();
        Node {
            engine,
            server,
            addr,
        }
    }

    async fn client(&self, node: &Node, name: &str) -> RangeServerClient {
        let creds = ClusterCredentials::load(self.dir.path(), name).expect("load");
        RangeServerClient::connect(node.addr, &creds)
            .await
            .expect("connect")
    }
}

impl Node {
    async fn stop(self) {
        self.server
            .shutdown(std::time::Duration::from_secs(1))
            .await;
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
    s
}

fn rows(from: usize, to: usize) -> Vec<Mutation> {
    (from..to)
        .map(|i| Mutation::insert(format!("row{i:04}"), 1, "", format!("v{i}")))
        .collect()
}

fn interval(start: Option<&str>, end: Option<&str>) -> ScanSpec {
    use std::ops::Bound;
    ScanSpec {
        row_intervals: vec![RowInterval {
            start: start.map_or(Bound::Unbounded, |s| Bound::Included(s.as_bytes().to_vec())),
            end: end.map_or(Bound::Unbounded, |e| Bound::Excluded(e.as_bytes().to_vec())),
        }],
        ..ScanSpec::default()
    }
}

async fn count(c: &RangeServerClient, spec: &ScanSpec) -> usize {
    c.scan(1, spec)
        .await
        .expect("scan")
        .collect()
        .await
        .expect("cells")
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranges_split_move_and_are_recovered_between_two_servers() {
    let cluster = Cluster::new();
    let a = cluster.start("/servers/a").await;
    let b = cluster.start("/servers/b").await;
    let ma = cluster.client(&a, "master").await;
    let mb = cluster.client(&b, "rangeserver").await;
    ma.create_table(&schema(1)).await.expect("create_table");
    ma.load_range(1, None, None).await.expect("load_range");
    let data_a = cluster.client(&a, "client").await;
    data_a.update(1, &rows(0, 300)).await.expect("update");
    ma.split(1, b"row0100").await.expect("split");
    ma.split(1, b"row0200").await.expect("split");
    // A split row that no range holds strictly inside is refused.
    let err = ma
        .split(1, b"row0100")
        .await
        .expect_err("split at a range start");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let all = ma.all_ranges().await.expect("all_ranges");
    assert_eq!(all.len(), 3);
    assert!(all.iter().all(|r| r.table_id == 1));
    // Move [row0100, row0200) to B.
    let rec = ma.unload_range(1, Some(b"row0200")).await.expect("unload");
    assert_eq!(rec.start_row.as_deref(), Some(&b"row0100"[..]));
    let id = mb.adopt_range(&schema(1), &rec).await.expect("adopt");
    let data_b = cluster.client(&b, "client").await;
    assert_eq!(
        count(&data_b, &interval(Some("row0100"), Some("row0200"))).await,
        100
    );
    let on_b = mb.all_ranges().await.expect("all_ranges on b");
    assert_eq!(on_b.len(), 1);
    assert_eq!(on_b[0].id, id);
    // A answers NotHere for the moved rows; B takes writes for them.
    assert!(matches!(
        data_a.update(1, &rows(150, 151)).await,
        Err(RsError::NotHere { .. })
    ));
    data_b
        .update(1, &rows(150, 151))
        .await
        .expect("update on b");
    // Unknown range: NotFound naming table and end row.
    let err = ma
        .unload_range(1, Some(b"nowhere"))
        .await
        .expect_err("unknown range");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("nowhere"), "{err}");
    // Adopting the same record again overlaps.
    let err = mb.adopt_range(&schema(1), &rec).await.expect_err("overlap");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    // A writes more (only in its log), then stops; B recovers A's two ranges.
    data_a.update(1, &rows(300, 400)).await.expect("update");
    let root_fs = cluster.fs.clone();
    data_a.close().await;
    ma.close().await;
    a.stop().await;
    let bfs = BlockingFs::new(root_fs, tokio::runtime::Handle::current());
    let state = tokio::task::spawn_blocking(move || read_state(&bfs, "/servers/a/meta"))
        .await
        .expect("join")
        .expect("read_state");
    let items: Vec<(TableSchema, proto::rs::messages::RangeRecord)> = state
        .ranges
        .values()
        .map(|r| (state.tables[&r.table_id].clone(), r.into()))
        .collect();
    assert_eq!(items.len(), 2);
    let ids = mb
        .recover_ranges("/servers/a", &items)
        .await
        .expect("recover");
    assert_eq!(ids.len(), 2);
    let again = mb
        .recover_ranges("/servers/a", &items)
        .await
        .expect("recover again");
    assert_eq!(again, ids);
    // Everything: 400 rows, row0150 twice (two versions).
    assert_eq!(count(&data_b, &ScanSpec::default()).await, 401);
    assert_eq!(mb.all_ranges().await.expect("all").len(), 3);
    data_b.close().await;
    mb.close().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_cluster_nodes_may_move_split_or_recover_ranges() {
    let cluster = Cluster::new();
    let a = cluster.start("/servers/a").await;
    let admin = cluster.client(&a, "master").await;
    admin.create_table(&schema(1)).await.expect("create_table");
    admin.load_range(1, None, None).await.expect("load_range");
    let data = cluster.client(&a, "client").await;
    let refused = |r: Result<(), RsError>| match r {
        Err(RsError::Rpc(e)) => {
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
            assert!(e.to_string().contains("only the master"), "{e}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    };
    refused(data.unload_range(1, None).await.map(|_| ()));
    refused(data.split(1, b"m").await);
    let rec = proto::rs::messages::RangeRecord {
        id: 1,
        table_id: 1,
        start_row: None,
        end_row: None,
        groups: Vec::new(),
    };
    refused(data.adopt_range(&schema(1), &rec).await.map(|_| ()));
    refused(
        data.recover_ranges("/servers/x", &[(schema(1), rec)])
            .await
            .map(|_| ()),
    );
    // Listing every range is open to clients; the range is still held.
    assert_eq!(data.all_ranges().await.expect("all_ranges").len(), 1);
    data.close().await;
    admin.close().await;
    a.stop().await;
}

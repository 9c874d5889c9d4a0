//! Fault injection through the engine: failed log writes are never acknowledged, failed
//! compactions lose nothing, corrupted cell stores are reported, never returned as data.

use std::sync::Arc;

use common::TableSchema;
use dfs_broker::{FaultAction, FaultFs, FaultOp, FaultRule, Fs, LocalFs};
use rangeserver::Error;
use rangeserver::engine::{CompactionKind, Engine, EngineOptions, Mutation};
use rangeserver::scan::spec::ScanSpec;

fn schema() -> TableSchema {
    let mut s = TableSchema::new(7, "/faults");
    s.add_family("f");
    s
}

fn batch(from: usize, n: usize) -> Vec<Mutation> {
    (from..from + n)
        .map(|i| Mutation::insert(format!("r{i:06}"), 1, "q", format!("value-{i}")))
        .collect()
}

fn count(e: &Engine) -> usize {
    e.scan(7, &ScanSpec::default())
        .unwrap()
        .collect_all()
        .unwrap()
        .len()
}

#[test]
fn failed_log_append_is_not_acknowledged_and_later_reopen_has_acked_data() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let local: Arc<dyn Fs> = Arc::new(LocalFs::new(dir.path()).unwrap());
    let fault = FaultFs::new(local.clone());
    let e = Engine::open(
        fault.clone(),
        "/ht",
        EngineOptions::default(),
        rt.handle().clone(),
    )
    .unwrap();
    e.create_table(schema()).unwrap();
    e.apply(7, &batch(0, 100)).unwrap();
    fault.add_rule(
        FaultRule::new(FaultOp::Append, FaultAction::Fail)
            .path("/ht/log/")
            .nth(0),
    );
    let err = e.apply(7, &batch(100, 100)).unwrap_err();
    assert!(err.to_string().contains("injected fault"), "{err}");
    // The log refuses further writes after a failure: nothing unsure is acknowledged.
    assert!(e.apply(7, &batch(200, 1)).is_err());
    // Close reports the log's failure, writes nothing more, and frees the store for a new writer.
    assert!(e.close().is_err());
    drop(e);
    let e = Engine::open(local, "/ht", EngineOptions::default(), rt.handle().clone()).unwrap();
    let n = count(&e);
    assert!(
        n == 100,
        "the 100 acknowledged cells and none of the failed batch: {n}"
    );
}

#[test]
fn failed_minor_compaction_loses_nothing_and_retries() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let local: Arc<dyn Fs> = Arc::new(LocalFs::new(dir.path()).unwrap());
    let fault = FaultFs::new(local.clone());
    let e = Engine::open(
        fault.clone(),
        "/ht",
        EngineOptions::default(),
        rt.handle().clone(),
    )
    .unwrap();
    e.create_table(schema()).unwrap();
    e.apply(7, &batch(0, 500)).unwrap();
    fault.add_rule(
        FaultRule::new(FaultOp::Append, FaultAction::Fail)
            .path("/ht/tables/")
            .nth(0),
    );
    assert!(e.compact(Some(7), CompactionKind::Minor).is_err());
    assert_eq!(count(&e), 500);
    e.apply(7, &batch(500, 10)).unwrap();
    e.compact(Some(7), CompactionKind::Minor).unwrap();
    assert_eq!(count(&e), 510);
    e.close().unwrap();
    drop(e);
    let e = Engine::open(local, "/ht", EngineOptions::default(), rt.handle().clone()).unwrap();
    assert_eq!(count(&e), 510);
}

#[test]
fn corrupted_cell_store_is_a_checksum_error_naming_the_file() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let local: Arc<dyn Fs> = Arc::new(LocalFs::new(dir.path()).unwrap());
    let e = Engine::open(
        local.clone(),
        "/ht",
        EngineOptions::default(),
        rt.handle().clone(),
    )
    .unwrap();
    e.create_table(schema()).unwrap();
    e.apply(7, &batch(0, 2000)).unwrap();
    e.compact(Some(7), CompactionKind::Minor).unwrap();
    e.close().unwrap();
    drop(e);
    // Flip a byte in the first data block of the only cell store.
    let mut stores = Vec::new();
    for entry in walk(dir.path()) {
        if entry
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("cs"))
        {
            stores.push(entry);
        }
    }
    assert_eq!(stores.len(), 1, "{stores:?}");
    let mut bytes = std::fs::read(&stores[0]).unwrap();
    bytes[100] ^= 0x55;
    std::fs::write(&stores[0], &bytes).unwrap();
    let e = Engine::open(local, "/ht", EngineOptions::default(), rt.handle().clone()).unwrap();
    let err = e
        .scan(7, &ScanSpec::default())
        .and_then(|mut s| s.collect_all())
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Checksum { .. }), "{msg}");
    assert!(msg.contains("/cs0") && msg.contains("offset"), "{msg}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn oversized_cells_and_batches_are_refused_whole() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let local: Arc<dyn Fs> = Arc::new(LocalFs::new(dir.path()).unwrap());
    let e = Engine::open(local, "/ht", EngineOptions::default(), rt.handle().clone()).unwrap();
    e.create_table(schema()).unwrap();
    let big_row = Mutation::insert(vec![b'r'; 70_000], 1, "q", "v");
    let err = e
        .apply(7, &[Mutation::insert("ok", 1, "q", "v"), big_row])
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    let big_value = Mutation::insert("r", 1, "q", vec![0u8; 17 << 20]);
    assert!(matches!(
        e.apply(7, &[big_value]),
        Err(Error::InvalidInput(_))
    ));
    let many: Vec<Mutation> = (0..3)
        .map(|i| Mutation::insert(format!("r{i}"), 1, "q", vec![1u8; 15 << 20]))
        .collect();
    let err = e.apply(7, &many).unwrap_err();
    assert!(err.to_string().contains("smaller batches"), "{err}");
    assert_eq!(count(&e), 0, "nothing of a refused batch is applied");
    e.apply(7, &many[..1]).unwrap();
    e.compact(Some(7), CompactionKind::Minor).unwrap();
    assert_eq!(count(&e), 1);
}

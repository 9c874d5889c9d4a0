//! The embedded database on chunkfs as real processes (`chunkfs::launch::LocalDfs`), with cell
//! caches so small that minor and merging compactions run all through a load: cell stores and
//! commit-log fragments are written to and read back from chunkfs while a chunk server is
//! killed -9 (replicated and Reed-Solomon layouts) or one replica of a cell store is corrupted
//! on disk. Every write the engine acknowledged must come back from a full scan (compared with
//! a model of the acknowledged cells), compactions must be seen to run after the fault (the
//! engine's counters), and chunkfs must re-replicate or repair what the fault damaged.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chunkfs::launch::{LocalDfs, LocalDfsOptions};
use chunkfs::{ChunkFs, Layout};
use client::{Client, Mutation, ScanSpec, TableSchema};
use common::scan_spec::{ColumnSelector, QualifierMatch};
use common::{AccessGroupSpec, Durability, FamilySpec};
use dfs_broker::Fs;
use embedded::{EmbeddedClient, EmbeddedOptions, FsFactory};
use rangeserver::commitlog::CommitLogOptions;
use rangeserver::engine::EngineOptions;

fn ht() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_ht"))
}

const TABLE: &str = "/load";
/// The family the load writes (access group `hot`, one version kept: overwrites replace).
const HOT: u8 = 1;
/// The family written once before the load (access group `cold`: one store, never merged).
const COLD: u8 = 2;
/// Cells per acknowledged batch (one mutator flush).
const BATCH: u64 = 200;
const VALUE_BYTES: usize = 100;
const WRITERS: u64 = 2;

/// Cells per `(row, family)`: what a full scan returns and the model holds.
type Cells = BTreeMap<(Vec<u8>, u8), Vec<u8>>;

fn small(mut o: LocalDfsOptions) -> LocalDfsOptions {
    o.block_bytes = 256 << 10;
    o.heartbeat_ms = 100;
    o.dead_after_ms = 1_500;
    o
}

/// Caches of a few hundred KiB (a store every few hundred cells), a merge once a group holds more
/// than 3 overlapping stores, small commit-log fragments (rolled and purged during the load),
/// no block cache (every read of a store goes to chunkfs) and no splits.
fn engine_options() -> EngineOptions {
    let defaults = EngineOptions::default();
    EngineOptions {
        cell_cache_limit_bytes: 1 << 20,
        cell_cache_flush_bytes: 256 << 10,
        block_cache_bytes: 0,
        split_size_bytes: 0,
        max_stores_per_group: 3,
        commit_log: CommitLogOptions {
            fragment_size_bytes: 1 << 20,
            ..defaults.commit_log.clone()
        },
        ..defaults
    }
}

/// Opens the embedded database in `dir` (its Hyperspace) with its engine on `dfs`.
fn open_db(dir: &Path, dfs: &LocalDfs) -> EmbeddedClient {
    let (meta, creds) = (dfs.meta_addr(), dfs.credentials().clone());
    let logs = dfs.dir().join("logs");
    let fs: FsFactory = Arc::new(move |h: &tokio::runtime::Handle| {
        let fs = h
            .block_on(chunkfs::launch::connect_ready(
                meta,
                &creds,
                1,
                Duration::from_secs(30),
            ))
            .map_err(|e| client::ClientError::storage(e.kind(), e.to_string()))?;
        Ok(Arc::new(fs) as Arc<dyn Fs>)
    });
    EmbeddedClient::open(
        dir,
        EmbeddedOptions {
            engine: engine_options(),
            fs: Some(fs),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| {
        panic!(
            "open the database on chunkfs: {e} (server logs in {})",
            logs.display()
        )
    })
}

/// Two access groups: `hot` (family `h`, one version) takes the load, `cold` (family `c`) is
/// written once.
fn schema() -> TableSchema {
    let mut s = TableSchema::new(0, "");
    s.access_groups = vec![AccessGroupSpec::new("hot"), AccessGroupSpec::new("cold")];
    let mut h = FamilySpec::new(HOT, "h", "hot");
    h.max_versions = 1;
    s.families = vec![h, FamilySpec::new(COLD, "c", "cold")];
    s.durability = Durability::Flush;
    s
}

fn mix(x: u64) -> u64 {
    let x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Row `n` of writer `t`: scattered over the key space, so every store overlaps every other.
fn row(t: u64, n: u64) -> Vec<u8> {
    format!("{:016x}-{t}", mix((t << 40) ^ n)).into_bytes()
}

/// The value of write `i` of writer `t`: distinct for every write, ~100 bytes.
fn value(t: u64, i: u64) -> Vec<u8> {
    let mut v = format!("{t}:{i}:").into_bytes();
    let mut x = mix(i ^ (t << 48) ^ 0x5555);
    while v.len() < VALUE_BYTES {
        x = mix(x);
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(VALUE_BYTES);
    v
}

/// A running load: writer threads and what they have had acknowledged.
struct Load {
    stop: AtomicBool,
    acked: AtomicU64,
}

impl Load {
    fn new() -> Self {
        Self {
            stop: AtomicBool::new(false),
            acked: AtomicU64::new(0),
        }
    }

    /// Writes batches of [`BATCH`] cells of family `h` until stopped: three in four a new row,
    /// one in four a new value of a row an earlier batch wrote. Every flush must succeed;
    /// returns the model of what was acknowledged.
    fn writer(&self, db: &EmbeddedClient, t: u64) -> Cells {
        let mut m = db.mutator(TABLE).expect("a mutator on the table");
        let mut model = Cells::new();
        // Rows of earlier (acknowledged) batches: what an overwrite may pick.
        let mut fresh = 0u64;
        let mut i = 0u64;
        let mut batch = 0u64;
        while !self.stop.load(Ordering::SeqCst) {
            let committed = fresh;
            let mut pending = Vec::new();
            let mut touched = HashSet::new();
            for _ in 0..BATCH {
                let target = if i % 4 == 3 && committed > 0 {
                    Some(mix(i ^ (t << 56)) % committed).filter(|n| touched.insert(*n))
                } else {
                    None
                };
                let n = target.unwrap_or_else(|| {
                    fresh += 1;
                    fresh - 1
                });
                let (r, v) = (row(t, n), value(t, i));
                m.set(Mutation::insert(r.clone(), HOT, "", v.clone()))
                    .unwrap_or_else(|e| panic!("writer {t}: set of write {i}: {e}"));
                pending.push((r, v));
                i += 1;
            }
            m.flush().unwrap_or_else(|e| {
                panic!(
                    "writer {t}: batch {batch} was not acknowledged after {} acknowledged \
                     cells: {e}",
                    model.len()
                )
            });
            for (r, v) in pending {
                model.insert((r, HOT), v);
            }
            self.acked.fetch_add(BATCH, Ordering::SeqCst);
            batch += 1;
        }
        model
    }
}

/// Stops the load when dropped: a failure in the test's thread must not leave the writers
/// running (the scope would wait for them forever).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The engine's compaction counters.
#[derive(Debug, Clone, Copy)]
struct Compactions {
    minor: u64,
    merging: u64,
}

fn compactions(db: &EmbeddedClient) -> Compactions {
    let s = db.engine().stats();
    Compactions {
        minor: s.minor_compactions,
        merging: s.merging_compactions,
    }
}

const STARTED: &str = "5 minor and 2 merging compactions and 10,000 acknowledged cells";

/// The load is well under way, writing and merging stores, as [`STARTED`] says.
fn started(db: &EmbeddedClient, load: &Load) -> bool {
    let c = compactions(db);
    c.minor >= 5 && c.merging >= 2 && load.acked.load(Ordering::SeqCst) >= 10_000
}

const AFTER_FAULT: &str =
    "4 minor and 2 merging compactions and 30,000 acknowledged cells after the fault";

/// The load went on past the fault at `at` (the counters and the cells acknowledged then) as
/// [`AFTER_FAULT`] says.
fn progressed(db: &EmbeddedClient, load: &Load, at: (Compactions, u64)) -> bool {
    let c = compactions(db);
    c.minor >= at.0.minor + 4
        && c.merging >= at.0.merging + 2
        && load.acked.load(Ordering::SeqCst) >= at.1 + 30_000
}

/// Polls `done` every 50 ms until it holds, failing after `timeout` or as soon as a writer
/// stopped on its own (its panic is raised).
fn poll_during_load<T>(
    what: &str,
    timeout: Duration,
    writers: &[std::thread::ScopedJoinHandle<'_, T>],
    mut done: impl FnMut() -> bool,
) {
    let start = Instant::now();
    while !done() {
        assert!(
            !writers.iter().any(|w| w.is_finished()),
            "a writer stopped (its panic is above) while waiting for {what}"
        );
        assert!(start.elapsed() < timeout, "not within {timeout:?}: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Joins the writers (raising a writer's panic) and merges their models.
fn join_writers(writers: Vec<std::thread::ScopedJoinHandle<'_, Cells>>) -> Cells {
    let mut model = Cells::new();
    for w in writers {
        match w.join() {
            Ok(m) => model.extend(m),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    model
}

/// Every cell a scan of `spec` returns; two cells of one row and family fail (family `h` keeps
/// one version, family `c` is written once).
fn scan(db: &EmbeddedClient, spec: ScanSpec) -> Cells {
    let mut s = db.scanner(TABLE, spec).expect("scanner");
    let mut out = Cells::new();
    while let Some(c) = s.next_cell().expect("scan") {
        let key = (c.key.row, c.key.family);
        assert!(
            out.insert(key.clone(), c.value).is_none(),
            "the scan returned row {} family {} twice",
            String::from_utf8_lossy(&key.0),
            key.1
        );
    }
    out
}

/// Fails unless `got` holds exactly the cells of `want`, naming a few that differ.
fn assert_same(what: &str, got: &Cells, want: &Cells) {
    if got == want {
        return;
    }
    let name = |k: &(Vec<u8>, u8)| format!("{}/{}", String::from_utf8_lossy(&k.0), k.1);
    let missing: Vec<String> = want
        .keys()
        .filter(|k| !got.contains_key(*k))
        .map(name)
        .collect();
    let extra: Vec<String> = got
        .keys()
        .filter(|k| !want.contains_key(*k))
        .map(name)
        .collect();
    let wrong: Vec<String> = want
        .iter()
        .filter(|(k, v)| got.get(*k).is_some_and(|g| g != *v))
        .map(|(k, _)| name(k))
        .collect();
    panic!(
        "{what}: {} cells scanned, {} acknowledged; {} missing (first {:?}), {} not written \
         (first {:?}), {} with another value (first {:?})",
        got.len(),
        want.len(),
        missing.len(),
        &missing[..missing.len().min(5)],
        extra.len(),
        &extra[..extra.len().min(5)],
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}

/// Every file below `dir`.
async fn files_under(fs: &ChunkFs, dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_string()];
    while let Some(d) = todo.pop() {
        for e in fs.readdir(&d).await.expect("readdir") {
            let p = dfs_broker::join(&d, &e.name);
            if e.is_dir {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The engine's closed cell stores of access group `group` of table `table_id` (the store a
/// compaction is writing now is left out), by path.
async fn closed_stores(fs: &ChunkFs, table_id: u32, group: &str) -> Vec<String> {
    let dir = format!("/ht/tables/{table_id}/{group}");
    let mut out = Vec::new();
    for p in files_under(fs, &dir).await {
        let is_store = p
            .rsplit('/')
            .next()
            .and_then(|n| n.strip_prefix("cs"))
            .is_some_and(|n| n.parse::<u64>().is_ok());
        // A store merged away meanwhile is no longer there: skipped.
        if let Ok(st) = fs.stat(&p).await
            && is_store
            && !st.open
            && st.length > 0
        {
            out.push(p);
        }
    }
    out
}

/// Waits until every chunk of every complete block of every file below `/ht` has `replicas`
/// servers, none of them `dead`, and the metadata server counts nothing under-replicated.
async fn wait_replicated(fs: &ChunkFs, replicas: usize, dead: &str, timeout: Duration) {
    let start = Instant::now();
    loop {
        let status = fs.status().await.expect("status");
        let mut short = Vec::new();
        for p in files_under(fs, "/ht").await {
            let stat = fs.stat(&p).await.expect("stat");
            for b in stat.blocks.iter().filter(|b| b.complete && b.length > 0) {
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
            "not re-replicated within {timeout:?} (dead server {dead}): {short:?}, status \
             {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Writes 3,000 cells of the cold family and flushes them into the one store of their group
/// (nothing merges it: no more cells come). Returns them and the store's path.
fn write_cold(db: &EmbeddedClient, rt: &tokio::runtime::Runtime, fs: &ChunkFs) -> (Cells, String) {
    let mut cold = Cells::new();
    let mut m = db.mutator(TABLE).expect("mutator");
    for n in 0..3_000u64 {
        let (r, v) = (row(9, n), value(9, n));
        m.set(Mutation::insert(r.clone(), COLD, "", v.clone()))
            .expect("set a cold cell");
        cold.insert((r, COLD), v);
    }
    m.flush().expect("flush the cold cells");
    db.compact(Some(TABLE), client::CompactionKind::Minor)
        .expect("flush the cold group");
    let table_id = db.table_schema(TABLE).expect("schema").id;
    let stores = rt.block_on(closed_stores(fs, table_id, "cold"));
    assert_eq!(
        stores.len(),
        1,
        "the cold group should have one store: {stores:?}"
    );
    (cold, stores[0].clone())
}

/// The index of the chunk server at `addr`.
fn server_index(dfs: &LocalDfs, n: usize, addr: &str) -> usize {
    (0..n)
        .find(|&i| dfs.chunk_addr(i).to_string() == addr)
        .unwrap_or_else(|| panic!("{addr} is none of our {n} chunk servers"))
}

/// Writes the cold store, then loads with [`WRITERS`] writers; once minor and merging
/// compactions have run, kills -9 a chunk server of the commit log's current block that also
/// holds the cold store while the load goes on (the commit log, the meta log and the stores
/// being written move their blocks off it). Then: compactions ran after the kill, a full scan
/// gives exactly the acknowledged cells, the dead server's chunks are re-created elsewhere,
/// and the database reopened on the same chunkfs gives the same cells.
fn kill_a_chunk_server_during_compactions(options: LocalDfsOptions) {
    let dir = tempfile::tempdir().expect("tempdir");
    let servers = options.chunk_servers;
    let replicas = match options.layout {
        Layout::Replicated { replicas } => replicas as usize,
        // One server per chunk: data and parity chunks are rebuilt, not copied.
        Layout::Striped { .. } => 1,
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut dfs = LocalDfs::start(ht(), &dir.path().join("dfs"), options).expect("start chunkfs");
    let fs = rt
        .block_on(dfs.connect(Duration::from_secs(30)))
        .expect("connect");
    let db_dir = dir.path().join("db");
    let db = open_db(&db_dir, &dfs);
    db.create_table(TABLE, schema()).expect("create table");
    // A store that outlives the load (the load's own files are all rewritten by merges and
    // purges soon after the kill): what chunkfs must re-replicate.
    let (mut model, cold_store) = write_cold(&db, &rt, &fs);
    let cold_servers: HashSet<String> = rt
        .block_on(fs.stat(&cold_store))
        .expect("stat the cold store")
        .blocks
        .iter()
        .flat_map(|b| b.chunks.iter().flat_map(|c| c.servers.iter().cloned()))
        .collect();

    let load = Load::new();
    let (hot_model, killed, at_kill) = std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|t| {
                let (load, db) = (&load, &db);
                s.spawn(move || load.writer(db, t))
            })
            .collect();
        let _stop = StopOnDrop(&load.stop);
        poll_during_load(STARTED, Duration::from_secs(40), &writers, || {
            started(&db, &load)
        });
        // A server of the commit log's current block (the write in flight meets the dead
        // server), the pipeline's head if it can be, that also holds a chunk of the cold store
        // (two sets of 3 of 4 servers, or of 9 of 10, always share one).
        let mut log_servers = Vec::new();
        poll_during_load(
            "a block of the current commit-log fragment",
            Duration::from_secs(10),
            &writers,
            || {
                log_servers = rt.block_on(async {
                    let logs = files_under(&fs, "/ht/log").await;
                    let Some(last) = logs
                        .iter()
                        .max_by_key(|p| p.rsplit('/').next().and_then(|n| n.parse::<u64>().ok()))
                    else {
                        return Vec::new();
                    };
                    // A fragment just rolled may have no block yet: asked again.
                    let Ok(stat) = fs.stat(last).await else {
                        return Vec::new();
                    };
                    stat.blocks
                        .last()
                        .map(|b| b.chunks.iter().flat_map(|c| c.servers.clone()).collect())
                        .unwrap_or_default()
                });
                !log_servers.is_empty()
            },
        );
        let victim = log_servers
            .iter()
            .find(|s| cold_servers.contains(*s))
            .cloned()
            .unwrap_or_else(|| {
                panic!(
                    "no server holds both the commit log's block ({log_servers:?}) and the cold \
                     store ({cold_servers:?})"
                )
            });
        let i = server_index(&dfs, servers, &victim);
        let at_kill = (compactions(&db), load.acked.load(Ordering::SeqCst));
        dfs.kill_chunk_server(i);
        poll_during_load(AFTER_FAULT, Duration::from_secs(40), &writers, || {
            progressed(&db, &load, at_kill)
        });
        load.stop.store(true, Ordering::SeqCst);
        (join_writers(writers), victim, at_kill)
    });
    model.extend(hot_model);
    let after = compactions(&db);
    eprintln!(
        "{} cells acknowledged ({} before the kill of {killed}); compactions at the kill \
         {:?}, at the end {after:?}",
        model.len(),
        at_kill.1,
        at_kill.0
    );
    assert!(
        after.minor > at_kill.0.minor && after.merging > at_kill.0.merging,
        "no compaction ran after the kill: {:?} then {after:?}",
        at_kill.0
    );
    assert_same(
        "full scan after the kill",
        &scan(&db, ScanSpec::default()),
        &model,
    );
    // Closed, every file's last block is complete and must be re-replicated too.
    db.wait_for_maintenance().expect("wait for maintenance");
    db.close().expect("close the database");
    drop(db);
    rt.block_on(async {
        wait_replicated(&fs, replicas, &killed, Duration::from_secs(30)).await;
        let status = fs.status().await.expect("status");
        assert!(
            status.repairs_done > 0,
            "the cold store's chunk on {killed} was not re-created: {status:?}"
        );
    });

    let db = open_db(&db_dir, &dfs);
    assert_same(
        "full scan after reopening",
        &scan(&db, ScanSpec::default()),
        &model,
    );
}

#[test]
fn kill_9_a_chunk_server_during_compactions_loses_no_acknowledged_cell() {
    // Four servers: after one dies, three are left to hold three replicas.
    kill_a_chunk_server_during_compactions(LocalDfsOptions {
        chunk_servers: 4,
        ..small(LocalDfsOptions::hdfs_like())
    });
}

#[test]
fn kill_9_a_chunk_server_during_compactions_on_reed_solomon_loses_no_acknowledged_cell() {
    // A 6+3 stripe needs 9 live servers for every new block: ten, so that one may die.
    let mut options = small(LocalDfsOptions::kfs_like_rs());
    options.chunk_servers = 10;
    options.block_bytes = 6 * (64 << 10);
    kill_a_chunk_server_during_compactions(options);
}

/// One replica of a file made bad on disk: the chunk, its server and what it held.
struct Corrupted {
    path: String,
    chunk_id: u64,
    server: String,
    /// The block's bytes (the chunk's, as the block is replicated), read before.
    data: Vec<u8>,
    /// The whole file's bytes, read before.
    file: Vec<u8>,
}

/// Flips bytes in the middle of the first replica (the one reads try first) of block 0 of
/// `path`, on disk. `None` if the file went away (merged) meanwhile.
async fn corrupt_first_replica(
    dfs: &LocalDfs,
    servers: usize,
    fs: &ChunkFs,
    path: &str,
) -> Option<Corrupted> {
    let stat = fs.stat(path).await.ok()?;
    let block = stat.blocks.first()?;
    let chunk = block.chunks.first()?;
    let server = chunk.servers.first()?.clone();
    let file_data = fs
        .open(path)
        .await
        .ok()?
        .pread(0, stat.length as usize)
        .await
        .ok()?;
    let data = file_data[..block.length as usize].to_vec();
    let file = dfs.chunk_file(server_index(dfs, servers, &server), chunk.chunk_id);
    let mut bytes = std::fs::read(&file).ok()?;
    let mid = bytes.len() / 2;
    let end = (mid + 10).min(bytes.len());
    for b in &mut bytes[mid..end] {
        *b ^= 0x5A;
    }
    // Written in place (not replaced): the server's open handle sees it.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes))
        .ok()?;
    Some(Corrupted {
        path: path.to_string(),
        chunk_id: chunk.chunk_id,
        server,
        data,
        file: file_data,
    })
}

/// Fails if the corrupt replica is still served: it must fail its checksums (or be gone
/// already, dropped after a reader or the server's scan reported it).
async fn assert_replica_refused(fs: &ChunkFs, c: &Corrupted) {
    assert!(
        fs.read_replica(&c.server, c.chunk_id, 0, c.data.len())
            .await
            .is_err(),
        "{}: the corrupt replica of chunk {} on {} passed its checksums",
        c.path,
        c.chunk_id,
        c.server
    );
}

/// A store of the cold group (written before the load, never merged) and one of the hot group
/// (merged during the load) each get a corrupt replica while the load runs. Reads of both go
/// around it: a scan of the cold family during the load, the compactions that read the hot
/// store, and a major compaction at the end that reads every store. The cold store's replica
/// is repaired (three replicas again, each passing its checksums and holding what was
/// written), and every acknowledged cell is scanned back.
#[test]
fn a_corrupt_cell_store_replica_is_read_around_and_repaired_during_compactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let servers = 4;
    let mut options = small(LocalDfsOptions::hdfs_like());
    options.chunk_servers = servers;
    options.scan_interval_ms = 500;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dfs = LocalDfs::start(ht(), &dir.path().join("dfs"), options).expect("start chunkfs");
    let fs = rt
        .block_on(dfs.connect(Duration::from_secs(30)))
        .expect("connect");
    let db = open_db(&dir.path().join("db"), &dfs);
    let table_id = db.create_table(TABLE, schema()).expect("create table").id;

    // The cold family: written once and flushed into one store of its own group.
    let (mut model, cold_store) = write_cold(&db, &rt, &fs);
    let cold_model = model.clone();
    let cold_spec = || ScanSpec {
        columns: vec![ColumnSelector {
            family: COLD,
            qualifier: QualifierMatch::All,
        }],
        ..ScanSpec::default()
    };

    let load = Load::new();
    let (hot_model, hot_victim, cold_victim, at_corruption) = std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|t| {
                let (load, db) = (&load, &db);
                s.spawn(move || load.writer(db, t))
            })
            .collect();
        let _stop = StopOnDrop(&load.stop);
        poll_during_load(STARTED, Duration::from_secs(40), &writers, || {
            started(&db, &load)
        });
        // A closed store of the hot group (compactions may merge one away meanwhile: another
        // is taken).
        let mut hot_victim = None;
        poll_during_load(
            "a store of the hot group to corrupt",
            Duration::from_secs(30),
            &writers,
            || {
                hot_victim = rt.block_on(async {
                    for p in closed_stores(&fs, table_id, "hot").await {
                        if let Some(c) = corrupt_first_replica(&dfs, servers, &fs, &p).await {
                            return Some(c);
                        }
                    }
                    None
                });
                hot_victim.is_some()
            },
        );
        let hot_victim = hot_victim.expect("polled until found");
        let cold_victim = rt
            .block_on(corrupt_first_replica(&dfs, servers, &fs, &cold_store))
            .expect("the cold store is there and has a replica to corrupt");
        let at_corruption = (compactions(&db), load.acked.load(Ordering::SeqCst));
        // Read around while the load goes on: the engine opened the store before, so its
        // reader tries the corrupt replica first, and meets the bad checksum itself unless
        // the server's scan (every 500 ms) got there first.
        assert_same(
            "scan of the cold family during the load",
            &scan(&db, cold_spec()),
            &cold_model,
        );
        rt.block_on(async {
            assert_replica_refused(&fs, &cold_victim).await;
            assert_replica_refused(&fs, &hot_victim).await;
        });
        poll_during_load(AFTER_FAULT, Duration::from_secs(40), &writers, || {
            progressed(&db, &load, at_corruption)
        });
        load.stop.store(true, Ordering::SeqCst);
        (
            join_writers(writers),
            hot_victim,
            cold_victim,
            at_corruption,
        )
    });
    model.extend(hot_model);
    let after = compactions(&db);
    eprintln!(
        "{} cells acknowledged ({} before the corruption); corrupted {} (chunk {} on {}) and \
         {} (chunk {} on {}); compactions at the corruption {:?}, at the end {after:?}",
        model.len(),
        at_corruption.1,
        hot_victim.path,
        hot_victim.chunk_id,
        hot_victim.server,
        cold_victim.path,
        cold_victim.chunk_id,
        cold_victim.server,
        at_corruption.0
    );
    assert!(
        after.minor > at_corruption.0.minor && after.merging > at_corruption.0.merging,
        "no compaction ran after the corruption: {:?} then {after:?}",
        at_corruption.0
    );
    assert_same(
        "full scan after the load",
        &scan(&db, ScanSpec::default()),
        &model,
    );

    // The cold store's corrupt replica is replaced: three good replicas, each the bytes
    // written, and the file reads back whole.
    rt.block_on(async {
        let start = Instant::now();
        loop {
            let stat = fs
                .stat(&cold_victim.path)
                .await
                .expect("stat the cold store");
            let c = &stat.blocks[0].chunks[0];
            let mut good = 0;
            for s in &c.servers {
                if let Ok(d) = fs
                    .read_replica(s, c.chunk_id, 0, cold_victim.data.len())
                    .await
                {
                    assert!(
                        d == cold_victim.data,
                        "{}: the replica on {s} passed its checksums but holds other bytes",
                        cold_victim.path
                    );
                    good += 1;
                }
            }
            if good == 3 && c.servers.len() == 3 {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{} not repaired: servers {:?}, {good} good",
                cold_victim.path,
                c.servers
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let status = fs.status().await.expect("status");
        assert!(status.repairs_done >= 1, "nothing repaired: {status:?}");
        let r = fs
            .open(&cold_victim.path)
            .await
            .expect("open the cold store");
        assert!(
            r.pread(0, cold_victim.file.len())
                .await
                .expect("read the cold store")
                == cold_victim.file,
            "{}: the file reads back other bytes after the repair",
            cold_victim.path
        );
        assert_eq!(
            r.length().await.expect("length"),
            cold_victim.file.len() as u64,
            "{}: the length changed",
            cold_victim.path
        );
    });

    // A major compaction reads every store, the hot one with its corrupt replica included if
    // no merge took it yet; afterwards the hot store is gone and nothing was lost.
    db.compact(Some(TABLE), client::CompactionKind::Major)
        .expect("major compaction over the corrupt replica");
    assert!(
        !rt.block_on(fs.exists(&hot_victim.path)).expect("exists"),
        "{} is still there after a major compaction",
        hot_victim.path
    );
    assert_same(
        "full scan after the major compaction",
        &scan(&db, ScanSpec::default()),
        &model,
    );
}

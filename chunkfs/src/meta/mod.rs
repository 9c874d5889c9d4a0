//! The metadata server: the namespace ([`namespace::Namespace`], persisted by [`oplog::OpLog`]),
//! block placement, writer leases (a file's id), chunk server liveness from heartbeats, the
//! chunk locations learnt from block reports, and the repair loop that re-replicates chunks
//! whose servers died or whose replica failed its checksum.
//!
//! Locations are not persisted: after a restart they come back with the chunk servers' block
//! reports (repairs wait `startup_grace_ms` for them).

pub mod namespace;
pub mod oplog;
mod placement;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use common::ErrorKind;
use common::time::{Clock, entropy_seed, system_clock};
use dfs_broker::{FsError, FsResult};
use parking_lot::Mutex;
use prost::Message;
use rand::SeedableRng as _;
use rand::rngs::StdRng;
use rpc::{ClusterCredentials, PeerInfo, RpcError, Service};
use tracing::{info, warn};

use crate::chunk::{AbortOnDrop, Peers};
use crate::messages::*;
use crate::{CHUNK_SERVER_NAME, Flavour, Layout, rs};
use namespace::{BlockMeta, Entry, Namespace, Op};
use oplog::{Checkpoint, OpLog};

/// Settings of a metadata server. `flavour`, `layout` and `block_bytes` take effect when the
/// directory is formatted (first start); later starts keep what was formatted.
#[derive(Debug, Clone)]
pub struct MetaOptions {
    /// The metadata goes in `<data_dir>/meta`.
    pub data_dir: PathBuf,
    pub flavour: Flavour,
    pub layout: Layout,
    /// Logical file bytes per block.
    pub block_bytes: u64,
    /// How often liveness and repairs are checked.
    pub tick_ms: u64,
    /// A chunk server silent this long is dead: its replicas are re-created elsewhere.
    pub dead_after_ms: u64,
    /// No repairs this long after start, while block reports come in.
    pub startup_grace_ms: u64,
    /// A checkpoint is written after this many log records.
    pub checkpoint_ops: u64,
    /// fsync the log for namespace changes (create, remove, rename, ...).
    pub sync_namespace: bool,
    pub max_concurrent_repairs: usize,
    /// Deletes queued per chunk server before older ones are dropped (a block report finds
    /// them again).
    pub max_pending_deletes: usize,
    pub call_timeout: Duration,
    /// A writer that neither wrote nor renewed its lease for this long is presumed dead: its
    /// file is closed at the length it last committed (lease recovery).
    pub lease_timeout_ms: u64,
    /// What leases, liveness and the startup grace are measured with.
    pub clock: Arc<dyn Clock>,
    /// Seeds the random tie-break of block placement (a fixed seed replays a placement).
    pub seed: u64,
}

impl MetaOptions {
    pub fn new(data_dir: PathBuf, flavour: Flavour, layout: Layout) -> Self {
        Self {
            data_dir,
            flavour,
            layout,
            block_bytes: 64 << 20,
            tick_ms: 500,
            dead_after_ms: 5_000,
            startup_grace_ms: 3_000,
            checkpoint_ops: 100_000,
            sync_namespace: true,
            max_concurrent_repairs: 8,
            max_pending_deletes: 100_000,
            call_timeout: Duration::from_secs(60),
            lease_timeout_ms: 60_000,
            clock: system_clock(),
            seed: entropy_seed(),
        }
    }
}

#[derive(Debug)]
struct ServerState {
    last_seen: Instant,
    chunks: u64,
    reported: bool,
    pending_delete: Vec<u64>,
}

struct State {
    cp: Checkpoint,
    log: OpLog,
    /// A log write failed: no more changes are accepted (fail-stop).
    poisoned: Option<String>,
    locs: HashMap<u64, Vec<String>>,
    servers: HashMap<String, ServerState>,
    repairs: HashSet<u64>,
    repairs_done: u64,
    /// Open files' writers and when they were last heard of.
    leases: HashMap<u64, Instant>,
    /// Files whose lease is being recovered.
    recovering: HashSet<u64>,
    /// Placement's random source, from `MetaOptions::seed`.
    rng: StdRng,
}

struct Shared {
    state: Mutex<State>,
    options: MetaOptions,
    flavour: Flavour,
    started: Instant,
    peers: Peers,
}

/// A running metadata server.
pub struct MetaServer {
    server: rpc::Server,
    shared: Arc<Shared>,
    _tick: AbortOnDrop,
}

fn wire_err(e: &FsError) -> Option<WireFsError> {
    Some(error_to_wire(e))
}

impl MetaServer {
    /// Recovers (or formats) the metadata directory and serves on `listen`.
    pub async fn start(
        listen: SocketAddr,
        credentials: &ClusterCredentials,
        options: MetaOptions,
    ) -> Result<Self, String> {
        let dir = options.data_dir.join("meta");
        let fresh = Checkpoint {
            flavour: options.flavour.name().to_string(),
            layout: options.layout,
            block_bytes: options.block_bytes.max(1),
            namespace: Namespace::new(),
        };
        let (log, cp) = tokio::task::spawn_blocking(move || OpLog::open(&dir, move || fresh))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        let flavour = Flavour::parse(&cp.flavour)
            .ok_or_else(|| format!("metadata formatted with unknown flavour {:?}", cp.flavour))?;
        if flavour != options.flavour {
            return Err(format!(
                "the metadata in {} is formatted {}, not {}",
                options.data_dir.display(),
                flavour.name(),
                options.flavour.name()
            ));
        }
        info!(
            files = cp.namespace.files().count(),
            flavour = flavour.name(),
            layout = ?cp.layout,
            "chunkfs metadata recovered"
        );
        // Writers of files open at the crash get a full lease to come back.
        let now = options.clock.now();
        let leases: HashMap<u64, Instant> = cp
            .namespace
            .files()
            .filter(|(_, f)| f.open)
            .map(|(_, f)| (f.id, now))
            .collect();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                cp,
                log,
                poisoned: None,
                locs: HashMap::new(),
                servers: HashMap::new(),
                repairs: HashSet::new(),
                repairs_done: 0,
                leases,
                recovering: HashSet::new(),
                rng: StdRng::seed_from_u64(options.seed),
            }),
            flavour,
            started: options.clock.now(),
            peers: Peers::new(
                credentials.clone(),
                1024,
                Duration::from_secs(3),
                options.clock.clone(),
            ),
            options,
        });
        let server = rpc::Server::bind(
            listen,
            credentials,
            MetaService {
                shared: shared.clone(),
            },
        )
        .map_err(|e| e.to_string())?;
        let tick = tokio::spawn(tick_loop(shared.clone()));
        Ok(Self {
            server,
            shared,
            _tick: AbortOnDrop(vec![tick]),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    pub async fn shutdown(self) {
        drop(self._tick);
        self.server.shutdown(Duration::from_secs(2)).await;
    }

    /// Chunks of complete blocks with fewer live replicas than wanted.
    pub fn under_replicated(&self) -> u64 {
        under_replicated(&self.shared.state.lock())
    }
}

fn under_replicated(st: &State) -> u64 {
    let mut n = 0;
    for (_, f) in st.cp.namespace.files() {
        // An empty block (abandoned before its first byte) has nothing to keep.
        for b in f.blocks.iter().filter(|b| b.complete && b.len > 0) {
            for c in &b.chunks {
                if st.locs.get(c).map_or(0, Vec::len) < b.layout.replicas() {
                    n += 1;
                }
            }
        }
    }
    n
}

impl Shared {
    fn is_live(&self, s: &ServerState, now: Instant) -> bool {
        now.duration_since(s.last_seen) < Duration::from_millis(self.options.dead_after_ms)
    }

    /// Applies and logs a change.
    fn mutate(&self, st: &mut State, op: &Op, sync: bool) -> FsResult<()> {
        if let Some(why) = &st.poisoned {
            return Err(FsError::Backend {
                op: "metadata",
                path: String::new(),
                msg: format!("the metadata server accepts no more changes: {why}"),
            });
        }
        let applied = st.cp.namespace.apply(op)?;
        if let Err(e) = st.log.append(op, sync) {
            st.poisoned = Some(e.to_string());
            return Err(FsError::Backend {
                op: "metadata",
                path: String::new(),
                msg: format!("cannot log the change: {e}"),
            });
        }
        for c in applied.freed_chunks {
            if let Some(servers) = st.locs.remove(&c) {
                for s in servers {
                    self.queue_delete(st, &s, c);
                }
            }
        }
        if st.log.records_since_checkpoint() >= self.options.checkpoint_ops.max(1) {
            let State { log, cp, .. } = &mut *st;
            if let Err(e) = log.checkpoint(cp) {
                warn!(error = %e, "chunkfs metadata: checkpoint failed");
                st.poisoned = Some(e.to_string());
            }
        }
        Ok(())
    }

    fn queue_delete(&self, st: &mut State, server: &str, chunk: u64) {
        if let Some(s) = st.servers.get_mut(server) {
            if s.pending_delete.len() >= self.options.max_pending_deletes {
                s.pending_delete.remove(0);
            }
            s.pending_delete.push(chunk);
        }
    }

    fn block_to_wire(&self, st: &State, b: &BlockMeta) -> WireBlock {
        WireBlock {
            block_id: b.id,
            length: b.len,
            chunks: b
                .chunks
                .iter()
                .map(|c| WireChunk {
                    chunk_id: *c,
                    servers: st.locs.get(c).cloned().unwrap_or_default(),
                })
                .collect(),
            layout: Some(b.layout.to_wire(self.flavour == Flavour::KfsLike)),
            complete: b.complete,
        }
    }

    fn create(&self, req: CreateRequest) -> CreateReply {
        let mut st = self.state.lock();
        let file_id = st.cp.namespace.alloc_ids(1);
        let op = Op::Create {
            path: req.path,
            file_id,
            overwrite: req.overwrite,
        };
        match self.mutate(&mut st, &op, self.options.sync_namespace) {
            Ok(()) => {
                st.leases.insert(file_id, self.options.clock.now());
                CreateReply {
                    error: None,
                    file_id,
                    layout: Some(st.cp.layout.to_wire(self.flavour == Flavour::KfsLike)),
                    block_bytes: st.cp.block_bytes,
                }
            }
            Err(e) => CreateReply {
                error: wire_err(&e),
                ..Default::default()
            },
        }
    }

    fn add_block(&self, req: AddBlockRequest) -> FsResult<WireBlock> {
        let mut st = self.state.lock();
        let layout = st.cp.layout;
        match st.cp.namespace.file_by_id(req.file_id) {
            Some((_, f)) if f.open => {}
            _ => {
                return Err(FsError::Closed {
                    op: "append",
                    path: req.path,
                });
            }
        }
        let now = self.options.clock.now();
        let State { servers, rng, .. } = &mut *st;
        let live = placement::candidates(servers, &req.exclude, |s| self.is_live(s, now), rng);
        let want = match layout {
            Layout::Replicated { replicas } => (replicas as usize).min(live.len()),
            Layout::Striped { .. } => layout.servers_needed(),
        };
        if want == 0 || live.len() < want {
            return Err(FsError::Backend {
                op: "append",
                path: req.path,
                msg: format!(
                    "a new block needs {} live chunk servers, {} are available",
                    layout.servers_needed(),
                    live.len()
                ),
            });
        }
        let chosen: Vec<String> = live.into_iter().take(want).map(|(_, a)| a).collect();
        let n = layout.chunks() as u64;
        let block_id = st.cp.namespace.alloc_ids(1 + n);
        let chunks: Vec<u64> = (1..=n).map(|i| block_id + i).collect();
        let block = BlockMeta {
            id: block_id,
            len: 0,
            layout,
            chunks: chunks.clone(),
            complete: false,
        };
        let op = Op::AddBlock {
            file_id: req.file_id,
            block: block.clone(),
        };
        self.mutate(&mut st, &op, self.options.sync_namespace)?;
        st.leases.insert(req.file_id, now);
        for (k, c) in chunks.iter().enumerate() {
            let servers = match layout {
                Layout::Replicated { .. } => chosen.clone(),
                Layout::Striped { .. } => vec![chosen[k].clone()],
            };
            for s in &servers {
                if let Some(ss) = st.servers.get_mut(s) {
                    ss.chunks += 1;
                }
            }
            st.locs.insert(*c, servers);
        }
        Ok(self.block_to_wire(&st, &block))
    }

    fn commit(&self, req: CommitRequest) -> FsResult<()> {
        let mut st = self.state.lock();
        if req.block_id != 0 {
            let op = Op::SetLength {
                file_id: req.file_id,
                block_id: req.block_id,
                len: req.block_length,
                complete: req.complete_block || req.close,
            };
            let sync =
                req.sync || ((req.complete_block || req.close) && self.options.sync_namespace);
            self.mutate(&mut st, &op, sync)
                .map_err(|e| name_path(e, &req.path))?;
            for c in &req.survivors {
                if st.cp.namespace.chunk_owner(c.chunk_id).is_some() {
                    st.locs.insert(c.chunk_id, c.servers.clone());
                }
            }
        }
        if req.close {
            self.mutate(
                &mut st,
                &Op::Close {
                    file_id: req.file_id,
                },
                self.options.sync_namespace,
            )
            .map_err(|e| name_path(e, &req.path))?;
            st.leases.remove(&req.file_id);
        } else if req.block_id != 0 {
            st.leases.insert(req.file_id, self.options.clock.now());
        }
        Ok(())
    }

    fn renew(&self, req: RenewRequest) -> FsResult<()> {
        let mut st = self.state.lock();
        match st.cp.namespace.file_by_id(req.file_id) {
            Some((_, f)) if f.open => {
                st.leases.insert(req.file_id, self.options.clock.now());
                Ok(())
            }
            Some(_) => Err(FsError::Closed {
                op: "append",
                path: req.path,
            }),
            None => Err(FsError::NotFound {
                op: "append",
                path: format!("{} (replaced or removed while open)", req.path),
            }),
        }
    }

    fn stat(&self, path: &str) -> StatReply {
        let st = self.state.lock();
        if let Err(e) = dfs_broker::check_path("open", path) {
            return StatReply {
                error: wire_err(&e),
                ..Default::default()
            };
        }
        match st.cp.namespace.get(path) {
            None => StatReply {
                error: wire_err(&FsError::NotFound {
                    op: "open",
                    path: path.to_string(),
                }),
                ..Default::default()
            },
            Some(Entry::Dir) => StatReply {
                error: wire_err(&FsError::IsADirectory {
                    op: "open",
                    path: path.to_string(),
                }),
                ..Default::default()
            },
            Some(Entry::File(f)) => StatReply {
                error: None,
                length: f.length(),
                blocks: f
                    .blocks
                    .iter()
                    .map(|b| self.block_to_wire(&st, b))
                    .collect(),
                open: f.open,
                file_id: f.id,
            },
        }
    }

    fn heartbeat(&self, req: HeartbeatRequest) -> HeartbeatReply {
        let mut st = self.state.lock();
        let s = st.servers.entry(req.server.clone()).or_insert_with(|| {
            info!(server = %req.server, "chunk server joined");
            ServerState {
                last_seen: self.options.clock.now(),
                chunks: 0,
                reported: false,
                pending_delete: Vec::new(),
            }
        });
        s.last_seen = self.options.clock.now();
        s.chunks = req.chunks;
        HeartbeatReply {
            need_report: !s.reported,
            delete: std::mem::take(&mut s.pending_delete),
        }
    }

    fn block_report(&self, req: BlockReportRequest) -> BlockReportReply {
        let mut st = self.state.lock();
        let mut delete = Vec::new();
        let mut bad = Vec::new();
        for c in &req.chunks {
            let Some((file_id, block_id)) = st.cp.namespace.chunk_owner(c.chunk_id) else {
                delete.push(c.chunk_id);
                continue;
            };
            let Some(b) = st.cp.namespace.block(file_id, block_id) else {
                delete.push(c.chunk_id);
                continue;
            };
            let k = b.chunks.iter().position(|x| *x == c.chunk_id).unwrap_or(0);
            // A replica shorter than its complete block is useless; a striped chunk of another
            // length is a stale one (its last parity cell may predate a cut of the block).
            let want = rs::chunk_len(b.layout, b.len, k);
            let striped = matches!(b.layout, Layout::Striped { .. });
            if b.complete && (c.length < want || (striped && c.length != want)) {
                bad.push(c.chunk_id);
                continue;
            }
            let servers = st.locs.entry(c.chunk_id).or_default();
            if !servers.contains(&req.server) {
                servers.push(req.server.clone());
            }
        }
        for c in bad {
            warn!(server = %req.server, chunk = c, "chunk server reported a short replica");
            delete.push(c);
        }
        if let Some(s) = st.servers.get_mut(&req.server) {
            s.reported = true;
        }
        BlockReportReply { delete }
    }

    fn bad_chunk(&self, req: BadChunkRequest) {
        let mut st = self.state.lock();
        warn!(server = %req.server, chunk = req.chunk_id, detail = %req.detail, "corrupt replica reported");
        let Some(servers) = st.locs.get_mut(&req.chunk_id) else {
            return;
        };
        let Some(i) = servers.iter().position(|s| *s == req.server) else {
            return;
        };
        // The last replica stays: its other pieces may still be readable.
        let striped = st
            .cp
            .namespace
            .chunk_owner(req.chunk_id)
            .and_then(|(f, b)| st.cp.namespace.block(f, b))
            .is_some_and(|b| matches!(b.layout, Layout::Striped { .. }));
        let servers = st.locs.get_mut(&req.chunk_id).expect("looked up above");
        if servers.len() > 1 || striped {
            servers.remove(i);
            self.queue_delete(&mut st, &req.server, req.chunk_id);
        }
    }

    fn status(&self) -> MetaStatusReply {
        let st = self.state.lock();
        let now = self.options.clock.now();
        let mut servers: Vec<ServerStatus> = st
            .servers
            .iter()
            .map(|(a, s)| ServerStatus {
                server: a.clone(),
                live: self.is_live(s, now),
                chunks: s.chunks,
            })
            .collect();
        servers.sort_by(|a, b| a.server.cmp(&b.server));
        MetaStatusReply {
            flavour: self.flavour.name().to_string(),
            servers,
            under_replicated: under_replicated(&st),
            files: st.cp.namespace.files().count() as u64,
            repairs_done: st.repairs_done,
            layout: Some(st.cp.layout.to_wire(self.flavour == Flavour::KfsLike)),
        }
    }
}

fn name_path(e: FsError, path: &str) -> FsError {
    match e {
        FsError::NotFound { op, path: p } if p.starts_with('<') => FsError::NotFound {
            op,
            path: format!("{path} (replaced or removed while open)"),
        },
        FsError::Closed { op, .. } => FsError::Closed {
            op,
            path: path.to_string(),
        },
        other => other,
    }
}

async fn tick_loop(shared: Arc<Shared>) {
    let period = Duration::from_millis(shared.options.tick_ms.max(10));
    loop {
        tokio::time::sleep(period).await;
        for file_id in expired_leases(&shared) {
            let shared = shared.clone();
            tokio::spawn(async move { recover_lease(&shared, file_id).await });
        }
        let jobs = tick(&shared);
        for (chunk, target, job) in jobs {
            let shared = shared.clone();
            tokio::spawn(async move {
                let result = repair(&shared, chunk, &target, job).await;
                let mut st = shared.state.lock();
                st.repairs.remove(&chunk);
                match result {
                    Ok(()) => {
                        if st.cp.namespace.chunk_owner(chunk).is_some() {
                            let servers = st.locs.entry(chunk).or_default();
                            if !servers.contains(&target) {
                                servers.push(target.clone());
                            }
                            st.repairs_done += 1;
                            info!(chunk, %target, "chunk re-replicated");
                        }
                    }
                    Err(e) => warn!(chunk, %target, error = %e, "chunk repair failed"),
                }
            });
        }
    }
}

async fn repair(shared: &Shared, chunk: u64, target: &str, job: Repair) -> Result<(), String> {
    let (server, method, payload) = match job {
        Repair::Copy { source, length } => {
            let req = ReplicateRequest {
                chunk_id: chunk,
                length,
                target: target.to_string(),
            };
            (source, method::CHUNK_REPLICATE, req.encode_to_vec())
        }
        Repair::Rebuild(req) => (
            target.to_string(),
            method::CHUNK_RECONSTRUCT,
            req.encode_to_vec(),
        ),
    };
    let client = shared.peers.get(&server, CHUNK_SERVER_NAME).await?;
    let reply = match client
        .call(method, payload.into(), shared.options.call_timeout)
        .await
    {
        Ok(r) => r,
        Err(e) => {
            shared.peers.forget(&server).await;
            return Err(e.to_string());
        }
    };
    let reply =
        WriteReply::decode(reply).map_err(|e| format!("undecodable {method} reply: {e}"))?;
    match reply.error {
        Some(e) => Err(e.message),
        None => Ok(()),
    }
}

/// Open files whose writer has been silent past the lease timeout (marked as recovering).
fn expired_leases(shared: &Shared) -> Vec<u64> {
    let mut st = shared.state.lock();
    let timeout = Duration::from_millis(shared.options.lease_timeout_ms);
    let now = shared.options.clock.now();
    let expired: Vec<u64> = st
        .leases
        .iter()
        .filter(|(id, at)| {
            now.saturating_duration_since(**at) > timeout && !st.recovering.contains(id)
        })
        .map(|(id, _)| *id)
        .collect();
    for id in &expired {
        st.recovering.insert(*id);
    }
    expired
}

/// Lease recovery: the chunks of the file's last block are cut to the length the writer last
/// committed on every server that answers, then the file is closed at that length.
async fn recover_lease(shared: &Shared, file_id: u64) {
    let last = {
        let st = shared.state.lock();
        st.cp.namespace.file_by_id(file_id).and_then(|(path, f)| {
            let b = f.blocks.last()?;
            Some((
                path.to_string(),
                b.clone(),
                b.chunks
                    .iter()
                    .map(|c| st.locs.get(c).cloned().unwrap_or_default())
                    .collect::<Vec<_>>(),
            ))
        })
    };
    if let Some((path, block, servers)) = &last {
        warn!(%path, file_id, "writer lease expired; closing the file at its committed length");
        for (k, (chunk, holders)) in block.chunks.iter().zip(servers).enumerate() {
            let req = FinalizeRequest {
                chunk_id: *chunk,
                length: rs::chunk_len(block.layout, block.len, k),
            };
            let mut kept = Vec::new();
            for server in holders {
                let ok = match shared.peers.get(server, CHUNK_SERVER_NAME).await {
                    Ok(c) => matches!(
                        c.call_message::<_, WriteReply>(
                            method::CHUNK_FINALIZE,
                            &req,
                            shared.options.call_timeout
                        )
                        .await,
                        Ok(WriteReply { error: None, .. })
                    ),
                    Err(_) => false,
                };
                if ok {
                    kept.push(server.clone());
                }
            }
            let mut st = shared.state.lock();
            if st.cp.namespace.chunk_owner(*chunk).is_some() {
                st.locs.insert(*chunk, kept);
            }
        }
    }
    let mut st = shared.state.lock();
    st.recovering.remove(&file_id);
    let timeout = Duration::from_millis(shared.options.lease_timeout_ms);
    // The writer may have come back meanwhile.
    if st
        .leases
        .get(&file_id)
        .is_some_and(|at| shared.options.clock.now().saturating_duration_since(*at) <= timeout)
    {
        return;
    }
    st.leases.remove(&file_id);
    let still_open = st
        .cp
        .namespace
        .file_by_id(file_id)
        .is_some_and(|(_, f)| f.open);
    if still_open
        && let Err(e) = shared.mutate(
            &mut st,
            &Op::Close { file_id },
            shared.options.sync_namespace,
        )
    {
        warn!(file_id, error = %e, "lease recovery: cannot close the file");
    }
}

/// How a chunk is repaired.
enum Repair {
    /// Copied from a replica.
    Copy { source: String, length: u64 },
    /// Rebuilt from the other chunks of its striped block.
    Rebuild(ReconstructRequest),
}

/// Marks silent servers dead and picks repairs: (chunk, target, how).
fn tick(shared: &Shared) -> Vec<(u64, String, Repair)> {
    let mut st = shared.state.lock();
    let now = shared.options.clock.now();
    let dead: Vec<String> = st
        .servers
        .iter()
        .filter(|(_, s)| !shared.is_live(s, now))
        .map(|(a, _)| a.clone())
        .collect();
    for d in &dead {
        warn!(server = %d, "chunk server is dead; its replicas will be re-created");
        st.servers.remove(d);
        for servers in st.locs.values_mut() {
            servers.retain(|s| s != d);
        }
    }
    if now.duration_since(shared.started) < Duration::from_millis(shared.options.startup_grace_ms) {
        return Vec::new();
    }
    let mut jobs = Vec::new();
    let max = shared.options.max_concurrent_repairs;
    let mut load: HashMap<String, u64> = st
        .servers
        .iter()
        .map(|(a, s)| (a.clone(), s.chunks))
        .collect();
    let mut picked = Vec::new();
    for (_, f) in st.cp.namespace.files() {
        for b in f.blocks.iter().filter(|b| b.complete && b.len > 0) {
            for (k, c) in b.chunks.iter().enumerate() {
                if st.repairs.len() + picked.len() >= max {
                    break;
                }
                let servers = st.locs.get(c).map(Vec::as_slice).unwrap_or(&[]);
                let striped = matches!(b.layout, Layout::Striped { .. });
                if (servers.is_empty() && !striped)
                    || servers.len() >= b.layout.replicas()
                    || st.repairs.contains(c)
                {
                    continue;
                }
                // Striped chunks have one server each: a striped block's siblings must stay
                // on other servers.
                let target = load
                    .iter()
                    .filter(|(a, _)| {
                        !servers.contains(a)
                            && !st.servers[a.as_str()].pending_delete.contains(c)
                            && !b
                                .chunks
                                .iter()
                                .any(|s| st.locs.get(s).is_some_and(|v| v.contains(a)))
                    })
                    .min_by_key(|(_, n)| **n)
                    .map(|(a, _)| a.clone());
                let Some(target) = target else { continue };
                *load.entry(target.clone()).or_default() += 1;
                let job = if servers.is_empty() {
                    // A lost chunk of a striped block: rebuilt on the target from its siblings.
                    Repair::Rebuild(ReconstructRequest {
                        index: k as u32,
                        block_length: b.len,
                        layout: Some(b.layout.to_wire(true)),
                        chunks: b
                            .chunks
                            .iter()
                            .map(|x| WireChunk {
                                chunk_id: *x,
                                servers: st.locs.get(x).cloned().unwrap_or_default(),
                            })
                            .collect(),
                    })
                } else {
                    Repair::Copy {
                        source: servers[0].clone(),
                        length: rs::chunk_len(b.layout, b.len, k),
                    }
                };
                picked.push((*c, target, job));
            }
        }
    }
    for (c, ..) in &picked {
        st.repairs.insert(*c);
    }
    jobs.extend(picked);
    jobs
}

struct MetaService {
    shared: Arc<Shared>,
}

fn decode<M: Message + Default>(method: &str, payload: Bytes) -> Result<M, RpcError> {
    M::decode(payload).map_err(|e| {
        RpcError::service(
            ErrorKind::InvalidInput,
            format!("undecodable {method} request: {e}"),
        )
    })
}

fn unit(r: FsResult<()>) -> Vec<u8> {
    UnitReply {
        error: r.err().as_ref().and_then(wire_err),
    }
    .encode_to_vec()
}

#[async_trait]
impl Service for MetaService {
    async fn call(
        &self,
        _peer: &PeerInfo,
        method: &str,
        payload: Bytes,
    ) -> Result<Bytes, RpcError> {
        let s = &self.shared;
        let reply = match method {
            method::META_MKDIRS => {
                let r: PathRequest = decode(method, payload)?;
                let mut st = s.state.lock();
                unit(s.mutate(
                    &mut st,
                    &Op::Mkdirs { path: r.path },
                    s.options.sync_namespace,
                ))
            }
            method::META_CREATE => s.create(decode(method, payload)?).encode_to_vec(),
            method::META_ADD_BLOCK => match s.add_block(decode(method, payload)?) {
                Ok(b) => AddBlockReply {
                    error: None,
                    block: Some(b),
                },
                Err(e) => AddBlockReply {
                    error: wire_err(&e),
                    block: None,
                },
            }
            .encode_to_vec(),
            method::META_COMMIT => unit(s.commit(decode(method, payload)?)),
            method::META_STAT => {
                let r: PathRequest = decode(method, payload)?;
                s.stat(&r.path).encode_to_vec()
            }
            method::META_REMOVE => {
                let r: PathRequest = decode(method, payload)?;
                let mut st = s.state.lock();
                unit(s.mutate(
                    &mut st,
                    &Op::Remove { path: r.path },
                    s.options.sync_namespace,
                ))
            }
            method::META_RMDIR => {
                let r: RmdirRequest = decode(method, payload)?;
                let mut st = s.state.lock();
                let op = Op::Rmdir {
                    path: r.path,
                    recursive: r.recursive,
                };
                unit(s.mutate(&mut st, &op, s.options.sync_namespace))
            }
            method::META_RENAME => {
                let r: RenameRequest = decode(method, payload)?;
                let mut st = s.state.lock();
                let op = Op::Rename {
                    from: r.from,
                    to: r.to,
                };
                unit(s.mutate(&mut st, &op, s.options.sync_namespace))
            }
            method::META_READDIR => {
                let r: PathRequest = decode(method, payload)?;
                let st = s.state.lock();
                match st.cp.namespace.readdir(&r.path) {
                    Ok(entries) => ReaddirReply {
                        error: None,
                        entries: entries.into_iter().map(entry_to_wire).collect(),
                    },
                    Err(e) => ReaddirReply {
                        error: wire_err(&e),
                        entries: Vec::new(),
                    },
                }
                .encode_to_vec()
            }
            method::META_EXISTS => {
                let r: PathRequest = decode(method, payload)?;
                match dfs_broker::check_path("exists", &r.path) {
                    Err(e) => ExistsReply {
                        error: wire_err(&e),
                        exists: false,
                    },
                    Ok(()) => ExistsReply {
                        error: None,
                        exists: s.state.lock().cp.namespace.get(&r.path).is_some(),
                    },
                }
                .encode_to_vec()
            }
            method::META_HEARTBEAT => s.heartbeat(decode(method, payload)?).encode_to_vec(),
            method::META_BLOCK_REPORT => s.block_report(decode(method, payload)?).encode_to_vec(),
            method::META_BAD_CHUNK => {
                s.bad_chunk(decode(method, payload)?);
                UnitReply { error: None }.encode_to_vec()
            }
            method::META_STATUS => s.status().encode_to_vec(),
            method::META_RENEW => unit(s.renew(decode(method, payload)?)),
            other => {
                return Err(RpcError::service(
                    ErrorKind::NotFound,
                    format!("chunkfs metadata server: no method {other:?}"),
                ));
            }
        };
        Ok(reply.into())
    }
}

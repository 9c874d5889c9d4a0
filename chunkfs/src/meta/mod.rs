//! The metadata server: the namespace ([`namespace::Namespace`], persisted by [`oplog::OpLog`]),
//! block placement, writer leases (a file's id), chunk server liveness from heartbeats, the
//! chunk locations learnt from block reports, and the repair loop that re-replicates chunks
//! whose servers died or whose replica failed its checksum.
//!
//! Locations are not persisted: after a restart they come back with the chunk servers' block
//! reports (repairs wait `startup_grace_ms` for them).

mod lease;
pub mod namespace;
pub mod oplog;
mod placement;
mod repair;
mod service;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::time::{Clock, entropy_seed, system_clock};
use dfs_broker::{FsError, FsResult};
use parking_lot::Mutex;
use rand::SeedableRng as _;
use rand::rngs::StdRng;
use rpc::ClusterCredentials;
use tracing::{info, warn};

use crate::chunk::{AbortOnDrop, Peers};
use crate::messages::*;
use crate::{Flavour, Layout, rs};
use namespace::{BlockMeta, Entry, Namespace, Op};
use oplog::{Checkpoint, OpLog};
use repair::tick_loop;
use service::MetaService;

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
        // Chunks are deleted only once the change that freed them is durable: a crash must
        // not bring back a file whose chunks are gone.
        let sync = sync || !applied.freed_chunks.is_empty();
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

    /// A chunk server's list of its chunks. Chunks no file owns are answered for deletion: a
    /// chunk exists on a server only after the block naming it was logged, so an unowned one
    /// was freed by a change already durable here (its delete was lost: queued for a server
    /// that restarted, taken by a heartbeat whose server died before deleting, or dropped
    /// past `max_pending_deletes`). A full report (a server that joined) also records the
    /// server's replicas and refuses short ones; a sweep (`req.sweep`, sent periodically)
    /// does nothing else.
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
            if req.sweep {
                continue;
            }
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
        if !req.sweep
            && let Some(s) = st.servers.get_mut(&req.server)
        {
            s.reported = true;
        }
        if !delete.is_empty() {
            info!(server = %req.server, chunks = delete.len(), sweep = req.sweep, "block report: deleting chunks no file owns");
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

//! The master: namespaces, table ids and schemas (in Hyperspace), range assignment (the
//! METADATA table), splits learnt from the range servers, balancing, recovery of dead range
//! servers, and failover (standby masters wait on the master lock).
//!
//! One control loop does everything that changes the cluster, one thing at a time: DDL asked
//! over rpc ([`service`]), the periodic scan of the range servers (registration, liveness by
//! their Hyperspace locks, ranges they split on their own), recoveries, moves, and the pending
//! operations of the [`ops`] log. Running them in one task means the master never races
//! itself; every multi-step change is logged first, so a new master finishes what a dead one
//! left.

pub mod balance;
pub mod ops;
mod ranges;
pub mod service;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::key::CellFlag;
use common::scan_spec::RowInterval;
use common::{ErrorKind, Mutation, ScanSpec, TableSchema};
use dfs_broker::Fs;
use hyperspace::client::{ClientOptions as HsOptions, Hyperspace, SessionState};
use hyperspace::command::{ErrorCode, LockMode, flags};
use proto::error::{ClientError, normalize_path, split_path};
use proto::layout::*;
use proto::master::MasterStatus;
use proto::rs::client::engine_message;
use proto::rs::client::{RangeServerClient, RangeServerClientOptions, RsError};
use rpc::ClusterCredentials;
use tokio::sync::{mpsc, oneshot, watch};

use ops::{Operation, op_node};

pub type Result<T> = std::result::Result<T, ClientError>;

/// Counters of finished range moves and recoveries (attributes of `/ht/ops`).
pub(crate) const MOVES: &str = "moves";
pub(crate) const RECOVERIES: &str = "recoveries";

/// Settings of a master process.
pub struct MasterConfig {
    pub hyperspace: Vec<SocketAddr>,
    /// The `master` certificate.
    pub credentials: ClusterCredentials,
    pub listen: SocketAddr,
    /// The file system the range servers share (recovery reads dead servers' logs from it).
    pub fs: Arc<dyn Fs>,
    /// How often the master looks at the range servers.
    pub poll_interval: Duration,
    /// Balance after each look (one move at a time: even range counts, then even load; see
    /// `balance`). BALANCE requests balance counts and load either way.
    pub auto_balance: bool,
    /// The balancer's load rule (`balance`).
    pub load_balance: balance::LoadPolicy,
    pub hyperspace_options: HsOptions,
    /// DDL requests waiting for the control loop.
    pub request_queue: usize,
}

impl MasterConfig {
    pub fn new(
        hyperspace: Vec<SocketAddr>,
        credentials: ClusterCredentials,
        listen: SocketAddr,
        fs: Arc<dyn Fs>,
    ) -> Self {
        Self {
            hyperspace,
            credentials,
            listen,
            fs,
            poll_interval: Duration::from_millis(500),
            auto_balance: true,
            load_balance: balance::LoadPolicy::default(),
            // A short lease: a standby takes over about this long after the active master
            // dies. Jeopardy only pauses the master; the grace bounds how long.
            hyperspace_options: HsOptions {
                lease: Duration::from_secs(4),
                grace: Duration::from_secs(10),
                ..HsOptions::default()
            },
            request_queue: 256,
        }
    }
}

pub(crate) fn hs_err(e: hyperspace::client::ClientError) -> ClientError {
    ClientError::storage(ErrorKind::Unavailable, format!("hyperspace: {e}"))
}

pub(crate) fn unavailable(message: String) -> ClientError {
    ClientError::storage(ErrorKind::Unavailable, message)
}

fn rs_err(location: &str, e: RsError) -> ClientError {
    proto::rs::client::server_error(location, e)
}

/// What the rpc service asks of the control loop.
pub(crate) enum Request {
    CreateNamespace(String),
    DropNamespace(String),
    CreateTable(String, TableSchema),
    AlterTable(String, TableSchema),
    RenameTable(String, String),
    DropTable(String),
    Balance,
    Status,
    /// A range server reported a change: look now.
    Look,
}

pub(crate) enum Answer {
    Done,
    Schema(TableSchema),
    Status(MasterStatus),
}

pub(crate) type Responder = oneshot::Sender<Result<Answer>>;

/// Longest a DDL request waits for its logged operation to get past a passing unavailability
/// (a range server paused while its Hyperspace session is in doubt, a server being recovered)
/// before it is answered with the last error; the operation itself stays logged and finishes
/// at a later look either way.
const DDL_WAIT: Duration = Duration::from_secs(60);
/// How often such an operation is tried again while its request waits.
const DDL_RETRY: Duration = Duration::from_millis(200);
/// Requests that may wait so at once; more are answered with their error at once.
const MAX_WAITING_DDL: usize = 256;

/// A DDL request whose operation is logged but not finished: answered when it finishes.
struct WaitingDdl {
    seq: u64,
    answer: Answer,
    respond: Responder,
    since: std::time::Instant,
    last_error: ClientError,
}

/// A range a server holds: (table id, start row, end row).
pub(crate) type HeldRange = (u32, Option<Vec<u8>>, Option<Vec<u8>>);

/// A range server as the master knows it.
struct ServerEntry {
    addr: SocketAddr,
    /// Our handle on its lock file: when we can lock it, the server is gone.
    handle: u64,
    live: bool,
    /// Ranges (table id, start, end) it reported at the last look.
    ranges: Vec<HeldRange>,
}

/// Runs a master: waits for the master lock (a standby waits here), then serves until `stop`
/// turns true or the Hyperspace session is lost (then it returns an error at once: another
/// master may already hold the lock).
pub async fn run(config: MasterConfig, mut stop: watch::Receiver<bool>) -> Result<()> {
    let (hs, _events) = Hyperspace::connect(
        config.hyperspace.clone(),
        config.credentials.clone(),
        config.hyperspace_options.clone(),
    )
    .await
    .map_err(hs_err)?;
    for dir in [NAMESPACES, TABLES, SERVERS, OPS] {
        hs.mkdirs(dir).await.map_err(hs_err)?;
    }
    // The ROOT location's file, so that setting its attribute never fails.
    let root = hs
        .open(ROOT, flags::READ | flags::WRITE | flags::CREATE, 0)
        .await
        .map_err(hs_err)?;
    hs.close(root).await.map_err(hs_err)?;
    let lock = hs
        .open(
            MASTER,
            flags::READ | flags::WRITE | flags::LOCK | flags::CREATE,
            0,
        )
        .await
        .map_err(hs_err)?;
    let mut state = hs.state_watch();
    tracing::info!("waiting for the master lock");
    tokio::select! {
        r = hs.lock(lock, LockMode::Exclusive) => { r.map_err(hs_err)?; }
        _ = stop.changed() => return Ok(()),
        _ = lost(&mut state) => return Err(unavailable("hyperspace session lost while waiting for the master lock".into())),
    }
    tracing::info!("holding the master lock");
    let (tx, rx) = mpsc::channel(config.request_queue.max(1));
    let server = service::MasterService::new(tx)
        .bind(config.listen, &config.credentials)
        .map_err(|e| unavailable(format!("cannot serve on {}: {e}", config.listen)))?;
    let addr = server.local_addr();
    hs.attr_set(MASTER, ADDR_ATTR, addr.to_string())
        .await
        .map_err(hs_err)?;
    println!("master serving on {addr}");
    let mut master = Master {
        hs: hs.clone(),
        credentials: config.credentials.clone(),
        fs: config.fs.clone(),
        servers: BTreeMap::new(),
        clients: HashMap::new(),
        auto_balance: config.auto_balance,
        load_policy: config.load_balance.clone(),
        load: balance::LoadMeter::default(),
        last_load_move: None,
        deferred: None,
        waiting: Vec::new(),
    };
    let result = master
        .control_loop(rx, config.poll_interval, &mut stop, &mut state)
        .await;
    server.shutdown(Duration::from_secs(2)).await;
    if result.is_ok() {
        let _ = hs.close_session().await;
    }
    result
}

/// What the request that started `op` is answered once `op` finishes.
fn answer_of(op: &Operation) -> Answer {
    match op {
        Operation::CreateTable { schema, .. } | Operation::AlterTable { schema } => {
            Answer::Schema(schema.clone())
        }
        _ => Answer::Done,
    }
}

/// Resolves when the session is in jeopardy or gone.
async fn lost(state: &mut watch::Receiver<SessionState>) {
    loop {
        if matches!(
            *state.borrow_and_update(),
            SessionState::Jeopardy | SessionState::Expired
        ) {
            return;
        }
        if state.changed().await.is_err() {
            return;
        }
    }
}

struct Master {
    hs: Hyperspace,
    credentials: ClusterCredentials,
    fs: Arc<dyn Fs>,
    servers: BTreeMap<String, ServerEntry>,
    clients: HashMap<String, Arc<RangeServerClient>>,
    auto_balance: bool,
    load_policy: balance::LoadPolicy,
    /// Rates of the ranges, from the counters the servers report.
    load: balance::LoadMeter,
    last_load_move: Option<std::time::Instant>,
    /// Set by `start_op` when the operation it logged stopped at a retryable error: its
    /// sequence number and the answer its request gets once it finishes.
    deferred: Option<(u64, Answer)>,
    waiting: Vec<WaitingDdl>,
}

impl Master {
    async fn control_loop(
        &mut self,
        mut rx: mpsc::Receiver<(Request, Responder)>,
        poll: Duration,
        stop: &mut watch::Receiver<bool>,
        state: &mut watch::Receiver<SessionState>,
    ) -> Result<()> {
        let mut tick = tokio::time::interval(poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut retry = tokio::time::interval(DDL_RETRY);
        retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.changed() => return Ok(()),
                changed = state.changed() => {
                    if changed.is_err() {
                        return Err(unavailable("hyperspace session gone: this master stops".into()));
                    }
                    // In jeopardy another master may get the lock any moment: do nothing until
                    // the session is safe again; expired: stop.
                    loop {
                        let s = *state.borrow_and_update();
                        match s {
                            SessionState::Safe => break,
                            SessionState::Expired => {
                                return Err(unavailable(
                                    "hyperspace session expired: this master stops".into(),
                                ));
                            }
                            SessionState::Jeopardy => {
                                tracing::warn!("hyperspace session in jeopardy: master paused");
                                if state.changed().await.is_err() {
                                    return Err(unavailable(
                                        "hyperspace session gone: this master stops".into(),
                                    ));
                                }
                            }
                        }
                    }
                }
                req = rx.recv() => {
                    let Some((req, respond)) = req else { return Ok(()) };
                    let ddl = matches!(
                        req,
                        Request::CreateTable(..)
                            | Request::AlterTable(..)
                            | Request::RenameTable(..)
                            | Request::DropTable(..)
                    );
                    self.deferred = None;
                    let answer = self.handle(req).await;
                    match (answer, self.deferred.take()) {
                        (Err(e), Some((seq, answer)))
                            if ddl
                                && e.kind() == ErrorKind::Unavailable
                                && self.waiting.len() < MAX_WAITING_DDL =>
                        {
                            tracing::info!(seq, error = %e, "operation logged, not finished yet: its request waits");
                            self.waiting.push(WaitingDdl {
                                seq,
                                answer,
                                respond,
                                since: std::time::Instant::now(),
                                last_error: e,
                            });
                        }
                        (answer, _) => {
                            let _ = respond.send(answer);
                        }
                    }
                }
                _ = retry.tick(), if !self.waiting.is_empty() => {
                    self.retry_waiting().await;
                }
                _ = tick.tick() => {
                    if let Err(e) = self.look().await {
                        tracing::warn!(error = %e, "master: periodic work failed; will retry");
                    }
                }
            }
        }
    }

    /// The periodic work: servers, recoveries, pending operations, METADATA, balance.
    async fn look(&mut self) -> Result<()> {
        self.refresh_servers().await?;
        self.run_pending_ops().await?;
        if !self.root_assigned().await? {
            let pending = self
                .pending_ops()
                .await?
                .iter()
                .any(|(_, op)| matches!(op, Operation::Bootstrap { .. }));
            if !pending && let Some(loc) = self.least_loaded(None) {
                self.start_op(Operation::Bootstrap { location: loc })
                    .await?;
            }
            return Ok(());
        }
        self.poll_ranges().await?;
        if self.auto_balance {
            self.balance_step().await?;
        }
        Ok(())
    }

    async fn handle(&mut self, req: Request) -> Result<Answer> {
        match req {
            Request::CreateNamespace(p) => self.create_namespace(&p).await.map(|_| Answer::Done),
            Request::DropNamespace(p) => self.drop_namespace(&p).await.map(|_| Answer::Done),
            Request::CreateTable(p, s) => self.create_table(&p, s).await.map(Answer::Schema),
            Request::AlterTable(p, s) => self.alter_table(&p, s).await.map(Answer::Schema),
            Request::RenameTable(f, t) => self.rename_table(&f, &t).await.map(|_| Answer::Done),
            Request::DropTable(p) => self.drop_table(&p).await.map(|_| Answer::Done),
            Request::Balance => {
                self.refresh_servers().await?;
                self.poll_ranges().await?;
                while self.balance_step().await? {}
                Ok(Answer::Done)
            }
            Request::Status => Ok(Answer::Status(self.status().await?)),
            Request::Look => self.look().await.map(|_| Answer::Done),
        }
    }

    // ---- Hyperspace helpers ----

    /// A cluster-wide counter (attribute of `/ht/ops`), kept across master failovers.
    async fn counter(&self, name: &str) -> Result<u64> {
        Ok(self
            .attr(OPS, name)
            .await?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0))
    }

    pub(crate) async fn count(&self, name: &str) {
        if let Err(e) = self.hs.attr_incr(OPS, name, 1).await {
            tracing::warn!(counter = name, error = %e, "cannot count");
        }
    }

    async fn attr(&self, node: &str, name: &str) -> Result<Option<String>> {
        match self.hs.attr_get(node, name).await {
            Ok(v) => Ok(v.map(|v| String::from_utf8_lossy(&v).into_owned())),
            Err(e) if e.code() == Some(ErrorCode::NotFound) => Ok(None),
            Err(e) => Err(hs_err(e)),
        }
    }

    /// Creates a file if it does not exist.
    async fn touch(&self, path: &str) -> Result<()> {
        let h = self
            .hs
            .open(path, flags::READ | flags::WRITE | flags::CREATE, 0)
            .await
            .map_err(hs_err)?;
        self.hs.close(h).await.map_err(hs_err)
    }

    async fn delete_if_exists(&self, path: &str) -> Result<()> {
        match self.hs.delete(path).await {
            Ok(()) => Ok(()),
            Err(e) if e.code() == Some(ErrorCode::NotFound) => Ok(()),
            Err(e) => Err(hs_err(e)),
        }
    }

    async fn ns_exists(&self, path: &str) -> Result<bool> {
        if path == "/" {
            return Ok(true);
        }
        let (parent, name) = split_path(path)?;
        match self.hs.readdir(&ns_node(&parent)).await {
            Ok(entries) => Ok(entries.iter().any(|e| e.is_dir && e.name == name)),
            Err(e) if e.code() == Some(ErrorCode::NotFound) => Ok(false),
            Err(e) => Err(hs_err(e)),
        }
    }

    async fn table_id(&self, path: &str) -> Result<Option<u32>> {
        let p = normalize_path(path)?;
        let (parent, name) = split_path(&p)?;
        let is_table = match self.hs.readdir(&ns_node(&parent)).await {
            Ok(entries) => entries.iter().any(|e| !e.is_dir && e.name == name),
            Err(e) if e.code() == Some(ErrorCode::NotFound) => false,
            Err(e) => return Err(hs_err(e)),
        };
        if !is_table {
            return Ok(None);
        }
        match self.attr(&ns_node(&p), TABLE_ID_ATTR).await? {
            Some(id) => id.parse().map(Some).map_err(|_| {
                ClientError::storage(
                    ErrorKind::Corruption,
                    format!("table {p} has a bad id '{id}' in hyperspace"),
                )
            }),
            None => Ok(None),
        }
    }

    async fn schema(&self, id: u32) -> Result<Option<TableSchema>> {
        if id == METADATA_ID {
            return Ok(Some(metadata_schema()));
        }
        match self.attr(&table_node(id), SCHEMA_ATTR).await? {
            Some(json) => TableSchema::from_json(&json).map(Some).map_err(|e| {
                ClientError::storage(
                    ErrorKind::Corruption,
                    format!("table {id}: bad schema in hyperspace: {e}"),
                )
            }),
            None => Ok(None),
        }
    }

    /// Checks a new namespace or table name: valid, parent exists, nothing by that name.
    async fn new_name(&self, path: &str) -> Result<String> {
        let (parent, name) = split_path(path)?;
        if name.is_empty() || name.contains(['/', '\0']) {
            return Err(ClientError::InvalidInput(format!("bad name '{name}'")));
        }
        if !self.ns_exists(&parent).await? {
            return Err(ClientError::NamespaceNotFound(parent));
        }
        let path = normalize_path(path)?;
        if self.table_id(&path).await?.is_some() {
            return Err(ClientError::TableExists(path));
        }
        if self.ns_exists(&path).await? {
            return Err(ClientError::NamespaceExists(path));
        }
        // A logged, unfinished operation that will give the name to a table has it already
        // (its request may still be waiting): a second one would race it to the name.
        let claimed = self.pending_ops().await?.iter().any(|(_, op)| match op {
            Operation::CreateTable { path: p, .. } | Operation::RenameTable { to: p, .. } => {
                *p == path
            }
            _ => false,
        });
        if claimed {
            return Err(ClientError::TableExists(path));
        }
        Ok(path)
    }

    // ---- range servers ----

    async fn client(&mut self, location: &str) -> Result<Arc<RangeServerClient>> {
        if let Some(c) = self.clients.get(location) {
            return Ok(c.clone());
        }
        let addr = match self.servers.get(location) {
            Some(s) if s.live => s.addr,
            _ => return Err(unavailable(format!("range server {location} is not live"))),
        };
        let options = RangeServerClientOptions {
            connect_timeout: Duration::from_secs(2),
            call_timeout: Duration::from_secs(20),
            ..Default::default()
        };
        let c = RangeServerClient::connect_with(addr, &self.credentials, options)
            .await
            .map_err(|e| unavailable(format!("range server {location} at {addr}: {e}")))?;
        let c = Arc::new(c);
        self.clients.insert(location.to_string(), c.clone());
        Ok(c)
    }

    /// Runs a call on a range server, forgetting its connection if the call did not get
    /// through.
    async fn on_server<T, F, Fut>(
        &mut self,
        location: &str,
        f: F,
    ) -> Result<std::result::Result<T, RsError>>
    where
        F: FnOnce(Arc<RangeServerClient>) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, RsError>>,
    {
        let c = self.client(location).await?;
        let r = f(c).await;
        if let Err(e) = &r
            && e.kind() == ErrorKind::Unavailable
        {
            self.clients.remove(location);
        }
        Ok(r)
    }

    fn live(&self) -> Vec<String> {
        self.servers
            .iter()
            .filter(|(_, s)| s.live)
            .map(|(l, _)| l.clone())
            .collect()
    }

    /// The live server with the fewest ranges (not `except`).
    fn least_loaded(&self, except: Option<&str>) -> Option<String> {
        self.servers
            .iter()
            .filter(|(l, s)| s.live && Some(l.as_str()) != except)
            .min_by_key(|(l, s)| (s.ranges.len(), (*l).clone()))
            .map(|(l, _)| l.clone())
    }

    /// Learns new servers and notices dead ones (their lock files become lockable), starting
    /// their recovery.
    async fn refresh_servers(&mut self) -> Result<()> {
        let entries = self.hs.readdir(SERVERS).await.map_err(hs_err)?;
        for e in &entries {
            if self.servers.contains_key(&e.name) {
                continue;
            }
            let node = server_node(&e.name);
            // The address is set after the server took its lock: no address, not ready.
            let Some(addr) = self.attr(&node, ADDR_ATTR).await? else {
                continue;
            };
            let Ok(addr) = addr.parse::<SocketAddr>() else {
                tracing::warn!(server = e.name, addr, "range server with a bad address");
                continue;
            };
            let handle = self
                .hs
                .open(&node, flags::READ | flags::LOCK, 0)
                .await
                .map_err(hs_err)?;
            tracing::info!(server = e.name, %addr, "range server registered");
            self.servers.insert(
                e.name.clone(),
                ServerEntry {
                    addr,
                    handle,
                    live: true,
                    ranges: Vec::new(),
                },
            );
        }
        let names: Vec<String> = self.live();
        for name in names {
            let handle = self.servers[&name].handle;
            if self
                .hs
                .try_lock(handle, LockMode::Exclusive)
                .await
                .map_err(hs_err)?
                .is_some()
            {
                tracing::warn!(
                    server = name,
                    "range server lost its lock: recovering its ranges"
                );
                if let Some(s) = self.servers.get_mut(&name) {
                    s.live = false;
                }
                self.clients.remove(&name);
                self.load.forget(&name);
                self.start_recovery(&name).await?;
            }
        }
        Ok(())
    }

    async fn root_assigned(&self) -> Result<bool> {
        Ok(self.attr(ROOT, LOCATION_ATTR).await?.is_some())
    }

    async fn root(&self) -> Result<String> {
        self.attr(ROOT, LOCATION_ATTR)
            .await?
            .ok_or_else(|| unavailable("METADATA is not assigned yet".into()))
    }

    // ---- METADATA ----

    /// Writes the METADATA row of a range.
    async fn metadata_put(
        &mut self,
        table_id: u32,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        location: &str,
    ) -> Result<()> {
        if table_id == METADATA_ID {
            return self
                .hs
                .attr_set(ROOT, LOCATION_ATTR, location.to_string())
                .await
                .map_err(hs_err);
        }
        let row = metadata_row(table_id, end);
        let cells = vec![
            Mutation::insert(
                row.clone(),
                LOCATION_FAMILY,
                "",
                location.as_bytes().to_vec(),
            ),
            Mutation::insert(
                row,
                START_ROW_FAMILY,
                "",
                start.unwrap_or_default().to_vec(),
            ),
        ];
        let root = self.root().await?;
        self.on_server(
            &root,
            |c| async move { c.update(METADATA_ID, &cells).await },
        )
        .await?
        .map_err(|e| rs_err(&root, e))
    }

    /// Every METADATA row: row -> (start row, location).
    async fn metadata_rows(
        &mut self,
        table: Option<u32>,
    ) -> Result<BTreeMap<Vec<u8>, (Vec<u8>, String)>> {
        let spec = match table {
            Some(t) => {
                let (lo, hi) = metadata_table_bounds(t);
                ScanSpec {
                    row_intervals: vec![RowInterval {
                        start: std::ops::Bound::Included(lo),
                        end: std::ops::Bound::Excluded(hi),
                    }],
                    ..Default::default()
                }
            }
            None => ScanSpec::default(),
        };
        let root = self.root().await?;
        let cells = self
            .on_server(&root, |c| async move {
                c.scan(METADATA_ID, &spec).await?.collect().await
            })
            .await?
            .map_err(|e| rs_err(&root, e))?;
        let mut rows: BTreeMap<Vec<u8>, (Vec<u8>, String)> = BTreeMap::new();
        for c in cells {
            let e = rows.entry(c.key.row.clone()).or_default();
            match c.key.family {
                LOCATION_FAMILY => e.1 = String::from_utf8_lossy(&c.value).into_owned(),
                START_ROW_FAMILY => e.0 = c.value,
                _ => {}
            }
        }
        Ok(rows)
    }

    /// Asks every live server for its ranges; records them and brings METADATA in line with
    /// what the servers hold (ranges they split on their own appear here).
    async fn poll_ranges(&mut self) -> Result<()> {
        // All servers at once, each briefly: a dead one must not hold up the look.
        let mut calls = tokio::task::JoinSet::new();
        for loc in self.live() {
            let Ok(c) = self.client(&loc).await else {
                continue;
            };
            calls.spawn(async move {
                let r = tokio::time::timeout(Duration::from_secs(3), c.all_ranges()).await;
                (loc, r)
            });
        }
        while let Some(joined) = calls.join_next().await {
            let Ok((loc, r)) = joined else { continue };
            match r {
                Ok(Ok(ranges)) => {
                    self.load.record(
                        &loc,
                        ranges.iter().map(|r| {
                            (
                                (r.table_id, r.start_row.clone(), r.end_row.clone()),
                                r.cells_written + r.cells_read,
                            )
                        }),
                        std::time::Instant::now(),
                        self.load_policy.smoothing,
                    );
                    if let Some(s) = self.servers.get_mut(&loc) {
                        s.ranges = ranges
                            .into_iter()
                            .map(|r| (r.table_id, r.start_row, r.end_row))
                            .collect();
                    }
                }
                Ok(Err(e)) => {
                    tracing::debug!(server = loc, error = %e, "cannot list ranges");
                    self.clients.remove(&loc);
                }
                Err(_) => tracing::debug!(server = loc, "listing ranges timed out"),
            }
        }
        let rows = self.metadata_rows(None).await?;
        let mut puts = Vec::new();
        for (loc, s) in &self.servers {
            if !s.live {
                continue;
            }
            for (t, start, end) in &s.ranges {
                if *t == METADATA_ID {
                    continue;
                }
                let row = metadata_row(*t, end.as_deref());
                let want = (start.clone().unwrap_or_default(), loc.clone());
                if rows.get(&row) != Some(&want) {
                    puts.push((*t, start.clone(), end.clone(), loc.clone()));
                }
            }
        }
        for (t, start, end, loc) in puts {
            tracing::info!(table = t, server = loc, "METADATA: recording a range");
            self.metadata_put(t, start.as_deref(), end.as_deref(), &loc)
                .await?;
        }
        Ok(())
    }

    // ---- operations ----

    /// Logs an operation and runs it; if a step fails for want of a server, it stays logged
    /// and the next look runs it again.
    async fn start_op(&mut self, op: Operation) -> Result<()> {
        let seq = self.hs.attr_incr(OPS, "next_op", 1).await.map_err(hs_err)? as u64;
        let node = op_node(seq);
        self.touch(&node).await?;
        self.hs
            .attr_set(node.as_str(), OP_ATTR, op.to_json())
            .await
            .map_err(hs_err)?;
        tracing::info!(op = op.describe(), seq, "operation logged");
        let answer = answer_of(&op);
        let result = self.run_op(seq, op).await;
        if result.is_err() {
            // Logged: it finishes later; its request may wait for that (`control_loop`).
            self.deferred = Some((seq, answer));
        }
        result
    }

    /// Tries the operations of waiting DDL requests again; answers those that finished (also
    /// at a look: their node is gone), failed for good, or waited `DDL_WAIT`.
    async fn retry_waiting(&mut self) {
        let waiting = std::mem::take(&mut self.waiting);
        for mut w in waiting {
            let outcome = match self.attr(&op_node(w.seq), OP_ATTR).await {
                Ok(None) => Ok(()),
                Ok(Some(json)) => match Operation::from_json(&json) {
                    Ok(op) => self.run_op(w.seq, op).await,
                    Err(e) => Err(ClientError::storage(
                        ErrorKind::Corruption,
                        format!("operation {} is unreadable: {e}", w.seq),
                    )),
                },
                Err(e) => Err(e),
            };
            match outcome {
                Ok(()) => {
                    let _ = w.respond.send(Ok(w.answer));
                }
                Err(e) if e.kind() == ErrorKind::Unavailable && w.since.elapsed() < DDL_WAIT => {
                    w.last_error = e;
                    self.waiting.push(w);
                }
                Err(e) => {
                    let e = if e.kind() == ErrorKind::Unavailable {
                        w.last_error
                    } else {
                        e
                    };
                    let _ = w.respond.send(Err(e));
                }
            }
        }
    }

    async fn save_op(&self, seq: u64, op: &Operation) -> Result<()> {
        self.hs
            .attr_set(op_node(seq).as_str(), OP_ATTR, op.to_json())
            .await
            .map_err(hs_err)
    }

    async fn pending_ops(&self) -> Result<Vec<(u64, Operation)>> {
        let mut out = Vec::new();
        for e in self.hs.readdir(OPS).await.map_err(hs_err)? {
            let Ok(seq) = e.name.parse::<u64>() else {
                continue;
            };
            let Some(json) = self.attr(&op_node(seq), OP_ATTR).await? else {
                continue;
            };
            match Operation::from_json(&json) {
                Ok(op) => out.push((seq, op)),
                Err(err) => tracing::error!(seq, error = %err, "unreadable operation left alone"),
            }
        }
        Ok(out)
    }

    async fn run_pending_ops(&mut self) -> Result<()> {
        for (seq, op) in self.pending_ops().await? {
            if let Err(e) = self.run_op(seq, op.clone()).await {
                tracing::info!(op = op.describe(), error = %e, "operation not finished yet");
                return Ok(());
            }
        }
        Ok(())
    }

    async fn run_op(&mut self, seq: u64, mut op: Operation) -> Result<()> {
        match &mut op {
            Operation::Bootstrap { location } => {
                let location = location.clone();
                self.bootstrap(&location).await?;
            }
            Operation::CreateTable {
                path,
                schema,
                location,
            } => {
                let (path, schema) = (path.clone(), schema.clone());
                let loc = match location.clone() {
                    Some(l) if self.servers.get(&l).is_none_or(|s| s.live) => l,
                    _ => {
                        let l = self
                            .least_loaded(None)
                            .ok_or_else(|| unavailable("no live range server".into()))?;
                        *location = Some(l.clone());
                        self.save_op(seq, &op).await?;
                        l
                    }
                };
                self.create_table_steps(&path, &schema, &loc).await?;
            }
            Operation::AlterTable { schema } => {
                let schema = schema.clone();
                self.push_schema(&schema).await?;
            }
            Operation::RenameTable { from, to, id } => {
                let (from, to, id) = (from.clone(), to.clone(), *id);
                self.rename_steps(&from, &to, id).await?;
            }
            Operation::DropTable { path, id } => {
                let (path, id) = (path.clone(), *id);
                self.drop_steps(&path, id).await?;
            }
            Operation::Recover { .. } | Operation::Move { .. } => {
                self.run_range_op(seq, &mut op).await?;
            }
        }
        self.delete_if_exists(&op_node(seq)).await?;
        tracing::info!(op = op.describe(), seq, "operation done");
        Ok(())
    }

    async fn bootstrap(&mut self, location: &str) -> Result<()> {
        if self.root_assigned().await? {
            return Ok(());
        }
        // User tables get ids above METADATA's.
        if self.attr(HT, NEXT_TABLE_ID).await?.is_none() {
            self.hs
                .attr_set(HT, NEXT_TABLE_ID, METADATA_ID.to_string())
                .await
                .map_err(hs_err)?;
        }
        let schema = metadata_schema();
        self.ensure_range(location, &schema, None, None).await?;
        self.hs
            .attr_set(ROOT, LOCATION_ATTR, location.to_string())
            .await
            .map_err(hs_err)?;
        tracing::info!(server = location, "METADATA bootstrapped");
        Ok(())
    }

    /// Makes `location` know the table and hold its range `[start, end)` (if it holds no range
    /// of the table yet). An empty range record is adopted, which registers the table too
    /// (unlike `rs.create_table`, whatever table ids the server has seen before).
    async fn ensure_range(
        &mut self,
        location: &str,
        schema: &TableSchema,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        let id = schema.id;
        let held = self
            .on_server(location, |c| async move { c.ranges(id).await })
            .await?;
        match held {
            Ok(r) if !r.is_empty() => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(rs_err(location, e)),
        }
        let record = rangeserver::meta::RangeRecord {
            id: 0,
            table_id: id,
            start_row: start.map(<[u8]>::to_vec),
            end_row: end.map(<[u8]>::to_vec),
            groups: Vec::new(),
        };
        let s = schema.clone();
        let record = (&record).into();
        self.on_server(
            location,
            |c| async move { c.adopt_range(&s, &record).await },
        )
        .await?
        .map_err(|e| rs_err(location, e))?;
        Ok(())
    }

    async fn create_table_steps(
        &mut self,
        path: &str,
        schema: &TableSchema,
        location: &str,
    ) -> Result<()> {
        let node = table_node(schema.id);
        self.touch(&node).await?;
        self.hs
            .attr_set(node.as_str(), SCHEMA_ATTR, schema.to_json())
            .await
            .map_err(hs_err)?;
        self.ensure_range(location, schema, None, None).await?;
        self.metadata_put(schema.id, None, None, location).await?;
        let name = ns_node(path);
        self.touch(&name).await?;
        self.hs
            .attr_set(name.as_str(), TABLE_ID_ATTR, schema.id.to_string())
            .await
            .map_err(hs_err)?;
        if let Some(s) = self.servers.get_mut(location) {
            s.ranges.push((schema.id, None, None));
        }
        Ok(())
    }

    /// Sends a schema to every live server that knows the table, then records it.
    async fn push_schema(&mut self, schema: &TableSchema) -> Result<()> {
        for loc in self.live() {
            let s = schema.clone();
            match self
                .on_server(&loc, |c| async move { c.alter_table(&s).await })
                .await?
            {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(rs_err(&loc, e)),
            }
        }
        self.hs
            .attr_set(
                table_node(schema.id).as_str(),
                SCHEMA_ATTR,
                schema.to_json(),
            )
            .await
            .map_err(hs_err)
    }

    async fn rename_steps(&mut self, from: &str, to: &str, id: u32) -> Result<()> {
        let name = ns_node(to);
        self.touch(&name).await?;
        self.hs
            .attr_set(name.as_str(), TABLE_ID_ATTR, id.to_string())
            .await
            .map_err(hs_err)?;
        self.delete_if_exists(&ns_node(from)).await?;
        if let Some(mut schema) = self.schema(id).await? {
            schema.name = to.to_string();
            self.push_schema(&schema).await?;
        }
        Ok(())
    }

    async fn drop_steps(&mut self, path: &str, id: u32) -> Result<()> {
        self.delete_if_exists(&ns_node(path)).await?;
        for loc in self.live() {
            match self
                .on_server(&loc, |c| async move { c.drop_table(id).await })
                .await?
            {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(rs_err(&loc, e)),
            }
            if let Some(s) = self.servers.get_mut(&loc) {
                s.ranges.retain(|r| r.0 != id);
            }
        }
        let rows = self.metadata_rows(Some(id)).await?;
        if !rows.is_empty() {
            let cells: Vec<Mutation> = rows
                .into_keys()
                .map(|row| Mutation::delete(CellFlag::DeleteRow, row, 0, "", None))
                .collect();
            let root = self.root().await?;
            self.on_server(
                &root,
                |c| async move { c.update(METADATA_ID, &cells).await },
            )
            .await?
            .map_err(|e| rs_err(&root, e))?;
        }
        self.delete_if_exists(&table_node(id)).await
    }

    // ---- DDL ----

    async fn create_namespace(&mut self, path: &str) -> Result<()> {
        let path = self.new_name(path).await?;
        self.hs.mkdir(&ns_node(&path)).await.map_err(hs_err)
    }

    async fn drop_namespace(&mut self, path: &str) -> Result<()> {
        let path = normalize_path(path)?;
        if path == "/" {
            return Err(ClientError::InvalidInput(
                "the root namespace cannot be dropped".into(),
            ));
        }
        if !self.ns_exists(&path).await? {
            return Err(ClientError::NamespaceNotFound(path));
        }
        if !self
            .hs
            .readdir(&ns_node(&path))
            .await
            .map_err(hs_err)?
            .is_empty()
        {
            return Err(ClientError::NamespaceNotEmpty(path));
        }
        self.hs.delete(&ns_node(&path)).await.map_err(hs_err)
    }

    async fn create_table(&mut self, path: &str, mut schema: TableSchema) -> Result<TableSchema> {
        let path = self.new_name(path).await?;
        schema
            .validate()
            .map_err(|e| ClientError::InvalidInput(e.to_string()))?;
        if self.live().is_empty() {
            return Err(unavailable("no live range server to hold the table".into()));
        }
        let id = self
            .hs
            .attr_incr(HT, NEXT_TABLE_ID, 1)
            .await
            .map_err(hs_err)?;
        schema.id = u32::try_from(id).map_err(|_| {
            ClientError::storage(
                ErrorKind::Internal,
                format!("table id counter out of range: {id}"),
            )
        })?;
        schema.name = path.clone();
        self.start_op(Operation::CreateTable {
            path,
            schema: schema.clone(),
            location: None,
        })
        .await?;
        Ok(schema)
    }

    async fn existing(&self, path: &str) -> Result<(u32, TableSchema)> {
        let p = normalize_path(path)?;
        let id = self
            .table_id(&p)
            .await?
            .ok_or_else(|| ClientError::TableNotFound(p.clone()))?;
        let schema = self
            .schema(id)
            .await?
            .ok_or(ClientError::TableNotFound(p))?;
        Ok((id, schema))
    }

    async fn alter_table(&mut self, path: &str, mut schema: TableSchema) -> Result<TableSchema> {
        let (id, old) = self.existing(path).await?;
        schema.id = id;
        schema.name = old.name;
        schema.generation = old.generation + 1;
        schema
            .validate()
            .map_err(|e| ClientError::InvalidInput(e.to_string()))?;
        // The first server that holds the table checks the change as the embedded engine
        // would; a refusal there changes nothing.
        if let Some(first) = self.holder_of(id) {
            let s = schema.clone();
            match self
                .on_server(&first, |c| async move { c.alter_table(&s).await })
                .await?
            {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::InvalidInput => {
                    return Err(ClientError::InvalidInput(engine_message(&e)));
                }
                Err(e) => return Err(rs_err(&first, e)),
            }
        }
        self.start_op(Operation::AlterTable {
            schema: schema.clone(),
        })
        .await?;
        Ok(schema)
    }

    fn holder_of(&self, id: u32) -> Option<String> {
        self.servers
            .iter()
            .find(|(_, s)| s.live && s.ranges.iter().any(|r| r.0 == id))
            .map(|(l, _)| l.clone())
    }

    async fn rename_table(&mut self, from: &str, to: &str) -> Result<()> {
        let (id, old) = self.existing(from).await?;
        let to = self.new_name(to).await?;
        self.start_op(Operation::RenameTable {
            from: old.name,
            to,
            id,
        })
        .await
    }

    async fn drop_table(&mut self, path: &str) -> Result<()> {
        let (id, old) = self.existing(path).await?;
        self.start_op(Operation::DropTable { path: old.name, id })
            .await
    }

    async fn status(&mut self) -> Result<MasterStatus> {
        let ops = self
            .pending_ops()
            .await?
            .into_iter()
            .map(|(_, op)| op.describe())
            .collect();
        Ok(MasterStatus {
            servers: self
                .servers
                .iter()
                .map(|(l, s)| proto::master::ServerStatus {
                    location: l.clone(),
                    addr: s.addr.to_string(),
                    ranges: s.ranges.len() as u32,
                    live: s.live,
                    load: s.ranges.iter().map(|r| self.load.rate(r)).sum(),
                })
                .collect(),
            root_location: self.attr(ROOT, LOCATION_ATTR).await?.unwrap_or_default(),
            operations: ops,
            moves: self.counter(MOVES).await?,
            recoveries: self.counter(RECOVERIES).await?,
            pid: std::process::id(),
        })
    }
}

//! How a range server is a member of a cluster: a new incarnation `rs<N>` per start (counted by
//! attribute `next_server_id` of `/ht`), its engine at `/servers/rs<N>` on the shared file system,
//! registered under `/ht/servers/rs<N>` with an exclusive Hyperspace lock it holds while it
//! lives (the master finds dead servers by trying that lock), serving paused while its session is
//! in jeopardy, ending at once when the session expires (another server may already hold its
//! ranges), and reporting to the master after it registers and after every split it makes.
//! `ht serve rangeserver --hyperspace` parses flags and calls [`Incarnation`]; layout names are
//! in `proto::layout` (docs/formats/cluster.md).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hyperspace::client::{ClientOptions as HsOptions, Hyperspace, SessionState};
use hyperspace::command::{LockMode, flags};
use proto::layout::{
    ADDR_ATTR, HT, MASTER, NEXT_SERVER_ID, ROOT_ATTR, SERVERS, server_node, server_root,
};
use proto::master::MasterClient;
use rpc::ClusterCredentials;

use super::RangeServerService;
use crate::engine::Engine;

/// A failure to join or to register; the message says which step.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MembershipError(pub String);

fn step(
    what: impl std::fmt::Display,
) -> impl FnOnce(hyperspace::client::ClientError) -> MembershipError {
    move |e| MembershipError(format!("{what}: {e}"))
}

/// Settings of membership.
#[derive(Debug, Clone)]
pub struct MembershipOptions {
    /// The Hyperspace replicas.
    pub hyperspace: Vec<SocketAddr>,
    /// The server's session: a short lease, so a dead server is noticed in seconds.
    pub session: HsOptions,
    /// How often the server checks whether it split a range since its last report.
    pub report_every: Duration,
}

impl MembershipOptions {
    pub fn new(hyperspace: Vec<SocketAddr>) -> Self {
        Self {
            hyperspace,
            session: HsOptions {
                lease: Duration::from_secs(6),
                grace: Duration::from_secs(10),
                ..HsOptions::default()
            },
            report_every: Duration::from_millis(200),
        }
    }
}

/// How serving ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The caller's stop signal: shut down, close the engine, then [`Incarnation::leave`].
    Stopped,
    /// The Hyperspace session expired: the server is paused and must stop at once without
    /// touching its files (the master replays its log into the live servers).
    Expired,
}

/// One incarnation of a range server in a cluster, with its Hyperspace session.
pub struct Incarnation {
    hs: Hyperspace,
    location: String,
    credentials: ClusterCredentials,
    report_every: Duration,
}

impl std::fmt::Debug for Incarnation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Incarnation")
            .field("location", &self.location)
            .finish()
    }
}

impl Incarnation {
    /// Opens a session and takes the next incarnation number: `rs<N>`.
    pub async fn begin(
        options: &MembershipOptions,
        credentials: &ClusterCredentials,
    ) -> Result<Self, MembershipError> {
        let (hs, _events) = Hyperspace::connect(
            options.hyperspace.clone(),
            credentials.clone(),
            options.session.clone(),
        )
        .await
        .map_err(step("cannot open a hyperspace session"))?;
        hs.mkdirs(SERVERS)
            .await
            .map_err(step(format!("cannot create {SERVERS}")))?;
        let n = hs
            .attr_incr(HT, NEXT_SERVER_ID, 1)
            .await
            .map_err(step("cannot take an incarnation number"))?;
        Ok(Self {
            hs,
            location: format!("rs{n}"),
            credentials: credentials.clone(),
            report_every: options.report_every,
        })
    }

    /// The incarnation's name, `rs<N>`.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Where its engine lives on the shared file system, `/servers/rs<N>`.
    pub fn root(&self) -> String {
        server_root(&self.location)
    }

    /// Serves `engine` through `service` on `listen` as this incarnation: registers (node,
    /// exclusive lock, root, then the address, which tells the master it is ready), reports to
    /// the master, pauses in jeopardy, and returns at `stop` (after shutting the rpc server
    /// down) or as soon as the session expires (leaving the service paused and the server
    /// running: the caller exits at once).
    pub async fn serve(
        &self,
        engine: Engine,
        service: RangeServerService,
        listen: SocketAddr,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<Ended, MembershipError> {
        let paused = service.pause_switch();
        let server = service
            .bind(listen, &self.credentials)
            .map_err(|e| MembershipError(format!("cannot serve on {listen}: {e}")))?;
        let addr = server.local_addr();
        self.register(addr).await?;
        println!("range server {} serving on {addr}", self.location);
        let reporter = tokio::spawn(report_to_master(
            self.hs.clone(),
            self.credentials.clone(),
            engine,
            self.report_every,
        ));
        let ended = tokio::select! {
            _ = stop => Ended::Stopped,
            _ = watch_session(&self.hs, &self.location, paused.clone()) => Ended::Expired,
        };
        reporter.abort();
        match ended {
            Ended::Expired => {
                paused.store(true, Ordering::Release);
                eprintln!(
                    "range server {}: hyperspace session expired; stopping at once",
                    self.location
                );
            }
            Ended::Stopped => server.shutdown(Duration::from_secs(5)).await,
        }
        Ok(ended)
    }

    async fn register(&self, addr: SocketAddr) -> Result<(), MembershipError> {
        let node = server_node(&self.location);
        let handle = self
            .hs
            .open(
                &node,
                flags::READ | flags::WRITE | flags::LOCK | flags::CREATE | flags::EXCL,
                0,
            )
            .await
            .map_err(step(format!("cannot create {node}")))?;
        self.hs
            .lock(handle, LockMode::Exclusive)
            .await
            .map_err(step(format!("cannot lock {node}")))?;
        self.hs
            .attr_set(node.as_str(), ROOT_ATTR, self.root())
            .await
            .map_err(step(format!("cannot set {node}:{ROOT_ATTR}")))?;
        // Last: the address tells the master the server is ready.
        self.hs
            .attr_set(node.as_str(), ADDR_ATTR, addr.to_string())
            .await
            .map_err(step(format!("cannot set {node}:{ADDR_ATTR}")))?;
        Ok(())
    }

    /// Closes the session, which releases the lock: the master recovers this incarnation's
    /// ranges into the live servers (a restarted server is a new incarnation). Call after the
    /// engine is closed.
    pub async fn leave(self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.hs.close_session()).await;
    }
}

/// Follows the session's state: in jeopardy the lock may be gone any moment, so updates and
/// scans are refused (`paused`) until the session is safe again. Returns when it expired.
async fn watch_session(hs: &Hyperspace, location: &str, paused: Arc<AtomicBool>) {
    let mut state = hs.state_watch();
    loop {
        let s = *state.borrow_and_update();
        match s {
            SessionState::Expired => return,
            SessionState::Jeopardy => {
                if !paused.swap(true, Ordering::AcqRel) {
                    eprintln!("range server {location}: hyperspace session in jeopardy; paused");
                }
            }
            SessionState::Safe => {
                if paused.swap(false, Ordering::AcqRel) {
                    eprintln!("range server {location}: hyperspace session safe again; serving");
                }
            }
        }
        if state.changed().await.is_err() {
            return;
        }
    }
}

/// Reports to the active master that this range server's ranges changed: once when it has
/// registered, then after every split it makes (checked every `every`), so the master records
/// new ranges in METADATA at once instead of at its next poll. A report that fails is made
/// again at the next check; the master's polling stays the safety net.
async fn report_to_master(
    hs: Hyperspace,
    credentials: ClusterCredentials,
    engine: Engine,
    every: Duration,
) {
    let mut reported = None;
    let mut master: Option<MasterClient> = None;
    loop {
        let splits = engine.split_count();
        if reported != Some(splits) {
            let sent = async {
                if master.is_none() {
                    master = Some(connect_master(&hs, &credentials).await?);
                }
                let c = master.as_ref().expect("connected above");
                c.nudge(Duration::from_secs(10))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?;
                Ok::<(), String>(())
            }
            .await;
            match sent {
                Ok(()) => reported = Some(splits),
                Err(e) => {
                    tracing::debug!(error = %e, "cannot report to the master; will retry");
                    master = None;
                }
            }
        }
        tokio::time::sleep(every).await;
    }
}

/// The active master, found through its Hyperspace node.
async fn connect_master(
    hs: &Hyperspace,
    credentials: &ClusterCredentials,
) -> Result<MasterClient, String> {
    let addr = hs
        .attr_get(MASTER, ADDR_ATTR)
        .await
        .map_err(|e| format!("hyperspace: {e}"))?
        .ok_or("no master is active")?;
    let addr = String::from_utf8_lossy(&addr);
    let addr: SocketAddr = addr
        .parse()
        .map_err(|e| format!("bad master address '{addr}': {e}"))?;
    MasterClient::connect(addr, credentials, Duration::from_secs(4))
        .await
        .map_err(|e| e.to_string())
}

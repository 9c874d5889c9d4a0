//! `MasterConfig`: the settings of a master process.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::time::{Clock, system_clock};
use dfs_broker::Fs;
use hyperspace::client::ClientOptions as HsOptions;
use rpc::ClusterCredentials;

use crate::balance;

/// The kinds of server-side iterators and combiners (the range server's registry).
pub use rangeserver::iterators::Registry;

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
    /// The control loop's clock: the balancer's cooldown, load rates, how long a DDL request
    /// has waited, recovery times.
    pub clock: Arc<dyn Clock>,
    /// The iterator and combiner kinds the master checks schemas with (kinds and options) at
    /// CREATE and ALTER TABLE, before it checks that every live range server knows them. The
    /// master runs in the same `ht` binary as the range servers, so it is given the same
    /// registry; default: the built-ins.
    pub registry: Arc<Registry>,
    /// How often the garbage collection of cell stores shared across servers runs (`None`:
    /// never); a round waits while operations are pending or a server awaits recovery.
    /// Default 5 minutes, Hypertable's `Hypertable.Master.Gc.Interval`.
    pub gc_interval: Option<Duration>,
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
            clock: system_clock(),
            registry: Arc::new(Registry::builtins()),
            gc_interval: Some(Duration::from_secs(300)),
        }
    }
}

//! The master: namespaces, table ids and schemas (in Hyperspace), range assignment (the
//! METADATA table), splits learnt from the range servers, balancing, recovery of dead range
//! servers, and failover (standby masters wait on the master lock).
//!
//! One control loop does everything that changes the cluster, one thing at a time: DDL asked
//! over rpc ([`service`]), the periodic scan of the range servers (registration, liveness by
//! their Hyperspace locks, ranges they split on their own), recoveries, moves, the pending
//! operations of the [`ops`] log, and the garbage collection of cell stores shared across
//! servers (`gc`). Running them in one task means the master never races
//! itself; every multi-step change is logged first, so a new master finishes what a dead one
//! left.

pub mod balance;
mod config;
mod control;
mod ddl;
mod gc;
mod hs;
mod kinds;
mod metadata;
pub mod ops;
mod ranges;
mod run;
mod servers;
pub mod service;
mod status;

use common::{ErrorKind, TableSchema};
use proto::ClientError;
use proto::master::MasterStatus;
use proto::rs::client::RsError;
use tokio::sync::oneshot;

pub use config::{MasterConfig, Registry};
pub(crate) use control::Master;
pub use run::run;

pub type Result<T> = std::result::Result<T, ClientError>;

/// Counters of finished range moves and recoveries (attributes of `/ht/ops`).
pub(crate) const MOVES: &str = "moves";
pub(crate) const RECOVERIES: &str = "recoveries";
/// Counters of the garbage collection of shared cell stores (attributes of `/ht/ops`).
pub(crate) const GC_ROUNDS: &str = "gc_rounds";
pub(crate) const GC_REMOVED_STORES: &str = "gc_removed_stores";
pub(crate) const GC_REMOVED_ROOTS: &str = "gc_removed_roots";

pub(crate) use proto::hs_err;

pub(crate) fn unavailable(message: String) -> ClientError {
    ClientError::storage(ErrorKind::Unavailable, message)
}

pub(crate) fn rs_err(location: &str, e: RsError) -> ClientError {
    proto::rs::client::server_error(location, e)
}

/// What the rpc service asks of the control loop.
pub(crate) enum Request {
    CreateNamespace(String),
    DropNamespace(String),
    /// Path, schema, split rows.
    CreateTable(String, TableSchema, Vec<Vec<u8>>),
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

/// A range a server holds: (table id, start row, end row).
pub(crate) type HeldRange = (u32, Option<Vec<u8>>, Option<Vec<u8>>);

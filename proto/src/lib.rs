//! ht's wire: every message of the range server's (`rs.*`) and the master's (`master.*`)
//! protocols, their typed rpc clients ([`rs::client::RangeServerClient`],
//! [`master::MasterClient`]), the error a client sees ([`error::ClientError`]) and where a
//! cluster keeps its state ([`layout`]: Hyperspace nodes, the METADATA table).
//!
//! API boundary: the range server, the master and the clients depend on this crate and on
//! nothing of each other's; it depends only on `common` and `rpc`. Messages are hand-written
//! prost (no protoc); layouts are in docs/formats/rangeserver-rpc.md and docs/formats/cluster.md.

pub mod error;
pub mod layout;
pub mod master;
pub mod rs;

pub use error::{ClientError, hs_err};

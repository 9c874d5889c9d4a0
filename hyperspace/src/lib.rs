//! Hyperspace: ht's lock and namespace service, replicated with Raft (tikv raft-rs).
//!
//! - [`command`]: the requests, answers and events (prost messages).
//! - [`state`]: the deterministic state machine every replica applies the log to.
//! - [`storage`]: the durable Raft log, hard state and snapshots (`raft::Storage` on disk).
//! - [`sim`]: test harness only: a replica's driver stepped by hand, for the simulation test.

pub mod client;
pub mod command;
pub mod launch;
pub mod node;
pub mod service;
pub mod sim;
pub mod state;
pub mod storage;

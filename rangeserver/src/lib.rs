//! ht's storage engine and the range server around it.
//!
//! The engine ([`engine::Engine`]) owns ranges of tables; each range has access groups, each
//! access group a cell cache and a set of cell stores. Writes go through the commit log. All file
//! I/O goes through `dfs_broker::Fs`; the engine itself does no network I/O. [`server`] serves
//! an engine's ranges over `rpc` and holds the client that calls it.

pub mod block_cache;
pub mod cellcache;
pub mod cellstore;
pub mod commitlog;
pub mod engine;
pub mod error;
pub mod iter;
pub mod iterators;
pub(crate) mod maintenance;
pub mod merge;
pub mod meta;
mod moves;
pub mod range;
pub mod scan;
pub mod server;
pub mod store_use;

pub use error::{Error, Result};

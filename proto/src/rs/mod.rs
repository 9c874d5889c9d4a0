//! The range server's protocol: [`messages`] (every `rs.*` request and reply, packed cells) and
//! [`client::RangeServerClient`].

pub mod aggregate;
pub mod cells;
pub mod client;
pub mod iterators;
pub mod messages;
pub mod store_gc;

/// The certificate name a range server presents (`ht init` issues it).
pub const SERVER_NAME: &str = "rangeserver";
/// The certificate of the master, which assigns ranges.
pub const MASTER_NAME: &str = "master";

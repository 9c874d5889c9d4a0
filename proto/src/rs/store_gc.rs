//! The messages of the master's garbage collection of cell stores shared across range servers
//! (`rs.store_use`, `rs.release_stores`; docs/formats/rangeserver-rpc.md and cluster.md,
//! "Garbage collection of shared stores"). Re-exported by `messages`.

/// The answer to `rs.store_use` (request: `UnitReply`): the server's root, the cell stores it
/// must keep (referenced by its ranges, damaged ranges, or still open) and the ones under its
/// root it exported with unloaded ranges.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StoreUseReply {
    #[prost(string, tag = "1")]
    pub root: String,
    #[prost(string, repeated, tag = "2")]
    pub in_use: Vec<String>,
    #[prost(string, repeated, tag = "3")]
    pub exported: Vec<String>,
}

/// `rs.release_stores`: exported stores no server uses, to remove and forget.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReleaseStoresRequest {
    #[prost(string, repeated, tag = "1")]
    pub paths: Vec<String>,
}

/// The answer to `rs.release_stores`: stores removed, and paths passed over (not exported
/// there, or in use there).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReleaseStoresReply {
    #[prost(uint64, tag = "1")]
    pub removed: u64,
    #[prost(uint64, tag = "2")]
    pub skipped: u64,
}

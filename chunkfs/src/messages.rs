//! The wire messages of the metadata server and the chunk servers (prost, written by hand, no
//! protoc). Method names and fields: `docs/formats/chunkfs.md`. File-system errors cross the
//! wire as the broker's [`WireFsError`], so a remote error matches the same patterns as a local
//! one.

pub use dfs_broker::broker::messages::{
    WireDirEntry, WireFsError, entry_from_wire, entry_to_wire, error_from_wire, error_to_wire,
};

/// Method names; a change of meaning gets a new name.
pub mod method {
    pub const META_MKDIRS: &str = "meta.mkdirs";
    pub const META_CREATE: &str = "meta.create";
    pub const META_ADD_BLOCK: &str = "meta.add_block";
    pub const META_COMMIT: &str = "meta.commit";
    pub const META_STAT: &str = "meta.stat";
    pub const META_REMOVE: &str = "meta.remove";
    pub const META_RMDIR: &str = "meta.rmdir";
    pub const META_RENAME: &str = "meta.rename";
    pub const META_READDIR: &str = "meta.readdir";
    pub const META_EXISTS: &str = "meta.exists";
    pub const META_HEARTBEAT: &str = "meta.heartbeat";
    pub const META_BLOCK_REPORT: &str = "meta.block_report";
    pub const META_BAD_CHUNK: &str = "meta.bad_chunk";
    pub const META_STATUS: &str = "meta.status";
    /// Renews a writer's lease (`RenewRequest`).
    pub const META_RENEW: &str = "meta.renew";

    pub const CHUNK_WRITE: &str = "chunk.write";
    pub const CHUNK_READ: &str = "chunk.read";
    pub const CHUNK_FINALIZE: &str = "chunk.finalize";
    pub const CHUNK_REPLICATE: &str = "chunk.replicate";
    pub const CHUNK_STATUS: &str = "chunk.status";
    /// Rebuild a lost chunk of a striped block on this server from its siblings.
    pub const CHUNK_RECONSTRUCT: &str = "chunk.reconstruct";
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PathRequest {
    #[prost(string, tag = "1")]
    pub path: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct UnitReply {
    #[prost(message, optional, tag = "1")]
    pub error: Option<WireFsError>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateRequest {
    #[prost(string, tag = "1")]
    pub path: String,
    #[prost(bool, tag = "2")]
    pub overwrite: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateReply {
    #[prost(message, optional, tag = "1")]
    pub error: Option<WireFsError>,
    /// The file's id: the writer's lease. Only the holder of the current id of a path appends.
    #[prost(uint64, tag = "2")]
    pub file_id: u64,
    #[prost(message, optional, tag = "3")]
    pub layout: Option<WireLayout>,
    /// Logical bytes of file data per block.
    #[prost(uint64, tag = "4")]
    pub block_bytes: u64,
}

/// How a block is stored: `data_units` > 0 is Reed-Solomon striping in cells of `cell_bytes`
/// over `data_units + parity_units` chunks; otherwise one chunk on `replicas` servers.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireLayout {
    #[prost(uint32, tag = "1")]
    pub replicas: u32,
    #[prost(uint32, tag = "2")]
    pub data_units: u32,
    #[prost(uint32, tag = "3")]
    pub parity_units: u32,
    #[prost(uint32, tag = "4")]
    pub cell_bytes: u32,
    /// True: the writer sends to every replica at once (kfs-like); false: through a pipeline.
    #[prost(bool, tag = "5")]
    pub parallel: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AddBlockRequest {
    #[prost(string, tag = "1")]
    pub path: String,
    #[prost(uint64, tag = "2")]
    pub file_id: u64,
    /// Servers the writer could not reach: not chosen again.
    #[prost(string, repeated, tag = "3")]
    pub exclude: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct WireChunk {
    #[prost(uint64, tag = "1")]
    pub chunk_id: u64,
    /// Servers holding it (`host:port`).
    #[prost(string, repeated, tag = "2")]
    pub servers: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct WireBlock {
    #[prost(uint64, tag = "1")]
    pub block_id: u64,
    /// Logical file bytes in this block (acknowledged by the writer so far).
    #[prost(uint64, tag = "2")]
    pub length: u64,
    #[prost(message, repeated, tag = "3")]
    pub chunks: Vec<WireChunk>,
    #[prost(message, optional, tag = "4")]
    pub layout: Option<WireLayout>,
    /// False while a writer may still append to it.
    #[prost(bool, tag = "5")]
    pub complete: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AddBlockReply {
    #[prost(message, optional, tag = "1")]
    pub error: Option<WireFsError>,
    #[prost(message, optional, tag = "2")]
    pub block: Option<WireBlock>,
}

/// The writer's progress: block `block_index` (the last one) holds `block_length` bytes on every
/// server of `survivors` (all chunks' servers when empty).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CommitRequest {
    #[prost(string, tag = "1")]
    pub path: String,
    #[prost(uint64, tag = "2")]
    pub file_id: u64,
    #[prost(uint64, tag = "3")]
    pub block_id: u64,
    #[prost(uint64, tag = "4")]
    pub block_length: u64,
    /// The block is complete (full, or abandoned after a failure).
    #[prost(bool, tag = "5")]
    pub complete_block: bool,
    /// The file is closed.
    #[prost(bool, tag = "6")]
    pub close: bool,
    /// The metadata server syncs its log before answering.
    #[prost(bool, tag = "7")]
    pub sync: bool,
    /// When set: the chunks' servers after a pipeline failure, one entry per chunk.
    #[prost(message, repeated, tag = "8")]
    pub survivors: Vec<WireChunk>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct StatReply {
    #[prost(message, optional, tag = "1")]
    pub error: Option<WireFsError>,
    #[prost(uint64, tag = "2")]
    pub length: u64,
    #[prost(message, repeated, tag = "3")]
    pub blocks: Vec<WireBlock>,
    #[prost(bool, tag = "4")]
    pub open: bool,
    #[prost(uint64, tag = "5")]
    pub file_id: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RmdirRequest {
    #[prost(string, tag = "1")]
    pub path: String,
    #[prost(bool, tag = "2")]
    pub recursive: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RenameRequest {
    #[prost(string, tag = "1")]
    pub from: String,
    #[prost(string, tag = "2")]
    pub to: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ReaddirReply {
    #[prost(message, optional, tag = "1")]
    pub error: Option<WireFsError>,
    #[prost(message, repeated, tag = "2")]
    pub entries: Vec<WireDirEntry>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExistsReply {
    #[prost(message, optional, tag = "1")]
    pub error: Option<WireFsError>,
    #[prost(bool, tag = "2")]
    pub exists: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct HeartbeatRequest {
    /// The chunk server's address, its identity.
    #[prost(string, tag = "1")]
    pub server: String,
    #[prost(uint64, tag = "2")]
    pub chunks: u64,
    #[prost(uint64, tag = "3")]
    pub used_bytes: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct HeartbeatReply {
    /// The metadata server does not know this server's chunks: send a full block report.
    #[prost(bool, tag = "1")]
    pub need_report: bool,
    /// Chunks to delete (their files were removed, or the replica is corrupt).
    #[prost(uint64, repeated, tag = "2")]
    pub delete: Vec<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ChunkInfo {
    #[prost(uint64, tag = "1")]
    pub chunk_id: u64,
    #[prost(uint64, tag = "2")]
    pub length: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct BlockReportRequest {
    #[prost(string, tag = "1")]
    pub server: String,
    #[prost(message, repeated, tag = "2")]
    pub chunks: Vec<ChunkInfo>,
    /// A periodic sweep rather than the full report of a server that (re)joined: only chunks
    /// no file owns are answered (to delete), nothing else is learnt or judged from it.
    #[prost(bool, tag = "3")]
    pub sweep: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct BlockReportReply {
    /// Chunks no file owns: delete them.
    #[prost(uint64, repeated, tag = "1")]
    pub delete: Vec<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct BadChunkRequest {
    /// The server whose replica failed its checksum.
    #[prost(string, tag = "1")]
    pub server: String,
    #[prost(uint64, tag = "2")]
    pub chunk_id: u64,
    #[prost(string, tag = "3")]
    pub detail: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ServerStatus {
    #[prost(string, tag = "1")]
    pub server: String,
    #[prost(bool, tag = "2")]
    pub live: bool,
    #[prost(uint64, tag = "3")]
    pub chunks: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct MetaStatusReply {
    #[prost(string, tag = "1")]
    pub flavour: String,
    #[prost(message, repeated, tag = "2")]
    pub servers: Vec<ServerStatus>,
    /// Chunks of complete blocks with fewer live replicas than their target.
    #[prost(uint64, tag = "3")]
    pub under_replicated: u64,
    #[prost(uint64, tag = "4")]
    pub files: u64,
    #[prost(uint64, tag = "5")]
    pub repairs_done: u64,
    #[prost(message, optional, tag = "6")]
    pub layout: Option<WireLayout>,
}

/// Chunk server errors: a code and a message that names the server and the chunk.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ChunkError {
    /// See [`chunk_code`].
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
}

/// [`ChunkError::code`] values.
pub mod chunk_code {
    pub const NOT_FOUND: i32 = 1;
    /// A piece failed its checksum.
    pub const CORRUPT: i32 = 2;
    pub const IO: i32 = 3;
    /// A server further down the pipeline failed.
    pub const PIPELINE: i32 = 4;
    pub const INVALID: i32 = 5;
}

/// Writes `data` at `offset` of chunk `chunk_id` (creating it at offset 0 when `create`), then
/// forwards the same request to `forward[0]` with the rest of the list (the hdfs-like pipeline).
#[derive(Clone, PartialEq, prost::Message)]
pub struct WriteRequest {
    #[prost(uint64, tag = "1")]
    pub chunk_id: u64,
    #[prost(uint64, tag = "2")]
    pub offset: u64,
    #[prost(bytes = "bytes", tag = "3")]
    pub data: bytes::Bytes,
    #[prost(string, repeated, tag = "4")]
    pub forward: Vec<String>,
    /// fsync before answering.
    #[prost(bool, tag = "5")]
    pub sync: bool,
    /// Start the chunk afresh (an existing replica of the same id is replaced).
    #[prost(bool, tag = "6")]
    pub create: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct WriteReply {
    #[prost(message, optional, tag = "1")]
    pub error: Option<ChunkError>,
    #[prost(uint64, tag = "2")]
    pub length: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ReadRequest {
    #[prost(uint64, tag = "1")]
    pub chunk_id: u64,
    #[prost(uint64, tag = "2")]
    pub offset: u64,
    #[prost(uint64, tag = "3")]
    pub len: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ReadReply {
    #[prost(message, optional, tag = "1")]
    pub error: Option<ChunkError>,
    #[prost(bytes = "bytes", tag = "2")]
    pub data: bytes::Bytes,
    /// The replica's length.
    #[prost(uint64, tag = "3")]
    pub length: u64,
}

/// Truncates the chunk to `length`, syncs it and marks it complete.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FinalizeRequest {
    #[prost(uint64, tag = "1")]
    pub chunk_id: u64,
    #[prost(uint64, tag = "2")]
    pub length: u64,
}

/// Copies the first `length` bytes of chunk `chunk_id` to `target`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReplicateRequest {
    #[prost(uint64, tag = "1")]
    pub chunk_id: u64,
    #[prost(uint64, tag = "2")]
    pub length: u64,
    #[prost(string, tag = "3")]
    pub target: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ChunkStatusReply {
    #[prost(message, repeated, tag = "1")]
    pub chunks: Vec<ChunkInfo>,
}

/// Rebuilds chunk `index` of a striped block of `block_length` logical bytes on the receiving
/// server, reading the cells of the other chunks (`chunks`, all of the block's, in order).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReconstructRequest {
    #[prost(uint32, tag = "1")]
    pub index: u32,
    #[prost(uint64, tag = "2")]
    pub block_length: u64,
    #[prost(message, optional, tag = "3")]
    pub layout: Option<WireLayout>,
    #[prost(message, repeated, tag = "4")]
    pub chunks: Vec<WireChunk>,
}

/// Renews the lease of the writer holding `file_id`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RenewRequest {
    #[prost(string, tag = "1")]
    pub path: String,
    #[prost(uint64, tag = "2")]
    pub file_id: u64,
}

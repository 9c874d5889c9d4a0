//! chunkfs: ht's own distributed file system (DESIGN.md section 6), a metadata server
//! ([`meta::MetaServer`]) and chunk servers ([`chunk::ChunkServer`]) over `rpc`, and
//! [`client::ChunkFs`], the [`dfs_broker::Fs`] that range servers write through.
//!
//! Two flavours, chosen per file system when the metadata server formats its directory:
//! - `hdfs-like`: a file is appended by its one writer until closed; each block is one chunk on
//!   N servers, written through a pipeline (client -> 1 -> 2 -> 3, acks back).
//! - `kfs-like`: each block is one chunk written to N servers in parallel, or Reed-Solomon
//!   striped over `data + parity` chunks (6 + 3 by default) as QFS does.
//!
//! `append(Flush)` returns once every replica has the bytes in its memory (written to the
//! chunk files, not synced); `append(Sync)` once every replica has fsynced them. Formats and
//! messages: `docs/formats/chunkfs.md`.

pub mod chunk;
pub mod client;
pub mod launch;
pub mod messages;
pub mod meta;
pub mod rs;

use std::sync::Arc;

use dfs_broker::{Fs, FsError, FsResult};

pub use client::{ChunkFs, ChunkFsOptions};

/// The certificate name the metadata server presents (`ht init` issues it).
pub const META_SERVER_NAME: &str = "chunkfs-meta";
/// The certificate name chunk servers present.
pub const CHUNK_SERVER_NAME: &str = "chunkserver";

/// Bytes covered by one checksum in a chunk file.
pub const PIECE_BYTES: usize = 64 << 10;

/// A file system's flavour, fixed when it is formatted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    HdfsLike,
    KfsLike,
}

impl Flavour {
    /// The URL scheme and `--flavour` name.
    pub fn name(self) -> &'static str {
        match self {
            Self::HdfsLike => "hdfs-like",
            Self::KfsLike => "kfs-like",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "hdfs-like" => Some(Self::HdfsLike),
            "kfs-like" => Some(Self::KfsLike),
            _ => None,
        }
    }
}

/// How the blocks of a file system are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Layout {
    /// One chunk per block on `replicas` servers.
    Replicated { replicas: u32 },
    /// Reed-Solomon: `data` + `parity` chunks per block, striped in cells of `cell_bytes`.
    Striped {
        data: u32,
        parity: u32,
        cell_bytes: u32,
    },
}

impl Layout {
    /// Chunks per block.
    pub fn chunks(self) -> usize {
        match self {
            Self::Replicated { .. } => 1,
            Self::Striped { data, parity, .. } => (data + parity) as usize,
        }
    }

    /// Servers per chunk wanted.
    pub fn replicas(self) -> usize {
        match self {
            Self::Replicated { replicas } => replicas as usize,
            Self::Striped { .. } => 1,
        }
    }

    /// Servers a new block needs at least.
    pub fn servers_needed(self) -> usize {
        match self {
            Self::Replicated { .. } => 1,
            Self::Striped { data, parity, .. } => (data + parity) as usize,
        }
    }

    pub fn to_wire(self, parallel: bool) -> messages::WireLayout {
        match self {
            Self::Replicated { replicas } => messages::WireLayout {
                replicas,
                parallel,
                ..Default::default()
            },
            Self::Striped {
                data,
                parity,
                cell_bytes,
            } => messages::WireLayout {
                replicas: 1,
                data_units: data,
                parity_units: parity,
                cell_bytes,
                parallel: true,
            },
        }
    }

    /// Parses a wire layout; `None` if it makes no sense.
    pub fn from_wire(w: &messages::WireLayout) -> Option<Self> {
        if w.data_units > 0 {
            if w.parity_units == 0 || w.cell_bytes == 0 || w.data_units + w.parity_units > 255 {
                return None;
            }
            Some(Self::Striped {
                data: w.data_units,
                parity: w.parity_units,
                cell_bytes: w.cell_bytes,
            })
        } else if w.replicas > 0 {
            Some(Self::Replicated {
                replicas: w.replicas,
            })
        } else {
            None
        }
    }
}

/// True if `url` names a chunkfs file system (`hdfs-like://` or `kfs-like://`).
pub fn is_chunkfs_url(url: &str) -> bool {
    url.starts_with("hdfs-like://") || url.starts_with("kfs-like://")
}

/// Opens `hdfs-like://meta-host:port` or `kfs-like://meta-host:port` with `credentials` (a node
/// certificate of the cluster: `client`, `rangeserver`, `master`). The metadata server's
/// flavour must match the scheme.
pub async fn open_url(
    url: &str,
    credentials: Option<&rpc::ClusterCredentials>,
) -> FsResult<Arc<dyn Fs>> {
    let bad = |why: String| FsError::Backend {
        op: "open_url",
        path: url.to_string(),
        msg: why,
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(bad("not a URL (expected scheme://host:port)".into()));
    };
    let flavour =
        Flavour::parse(scheme).ok_or_else(|| bad(format!("not a chunkfs scheme: {scheme:?}")))?;
    let addr = rest.trim_end_matches('/');
    let addr = tokio::net::lookup_host(addr)
        .await
        .map_err(|e| bad(format!("bad metadata server address {addr:?}: {e}")))?
        .next()
        .ok_or_else(|| {
            bad(format!(
                "metadata server address {addr:?} resolves to nothing"
            ))
        })?;
    let credentials =
        credentials.ok_or_else(|| bad(format!("a {scheme}:// URL needs cluster credentials")))?;
    let fs = ChunkFs::connect(addr, credentials, ChunkFsOptions::default()).await?;
    if fs.flavour() != flavour {
        return Err(bad(format!(
            "the metadata server at {addr} serves a {} file system, not {scheme}",
            fs.flavour().name()
        )));
    }
    Ok(Arc::new(fs))
}

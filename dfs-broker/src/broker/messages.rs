//! The broker's prost messages (written by hand, no protoc) and the codec that carries every
//! [`FsError`] variant across the wire with its fields, so a remote error matches the same
//! patterns as a local one. Layout: `docs/formats/dfs-broker.md`.

use crate::{AppendFlag, DirEntry, FsError};

/// Method names; a change of meaning gets a new name.
pub mod method {
    pub const CREATE: &str = "fs.create";
    pub const APPEND: &str = "fs.append";
    pub const CLOSE: &str = "fs.close";
    pub const OPEN: &str = "fs.open";
    /// Streaming: the data comes back in chunks of at most the broker's chunk size.
    pub const PREAD: &str = "fs.pread";
    pub const READER_LENGTH: &str = "fs.reader_length";
    pub const LENGTH: &str = "fs.length";
    pub const REMOVE: &str = "fs.remove";
    pub const RMDIR: &str = "fs.rmdir";
    pub const RENAME: &str = "fs.rename";
    pub const MKDIRS: &str = "fs.mkdirs";
    pub const READDIR: &str = "fs.readdir";
    pub const EXISTS: &str = "fs.exists";
    pub const KEEPALIVE: &str = "fs.keepalive";
    pub const STATUS: &str = "fs.status";
}

/// `fs.length`, `fs.remove`, `fs.mkdirs`, `fs.readdir`, `fs.exists`, `fs.open`,
/// `fs.reader_length`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PathRequest {
    #[prost(string, tag = "1")]
    pub path: String,
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
    /// The writer's handle on the broker; only the connection that created it may use it.
    #[prost(uint64, tag = "2")]
    pub handle: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AppendRequest {
    #[prost(uint64, tag = "1")]
    pub handle: u64,
    #[prost(bytes = "bytes", tag = "2")]
    pub data: bytes::Bytes,
    /// 0 None, 1 Flush, 2 Sync (see [`flag_to_wire`]).
    #[prost(int32, tag = "3")]
    pub flag: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AppendReply {
    #[prost(message, optional, tag = "1")]
    pub error: Option<WireFsError>,
    /// The backend writer's position after the append.
    #[prost(uint64, tag = "2")]
    pub position: u64,
}

/// `fs.close`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HandleRequest {
    #[prost(uint64, tag = "1")]
    pub handle: u64,
}

/// The answer of calls that return nothing but success or an error.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UnitReply {
    #[prost(message, optional, tag = "1")]
    pub error: Option<WireFsError>,
}

/// `fs.length`, `fs.open`, `fs.reader_length`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LengthReply {
    #[prost(message, optional, tag = "1")]
    pub error: Option<WireFsError>,
    #[prost(uint64, tag = "2")]
    pub length: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PreadRequest {
    #[prost(string, tag = "1")]
    pub path: String,
    #[prost(uint64, tag = "2")]
    pub offset: u64,
    #[prost(uint64, tag = "3")]
    pub len: u64,
}

/// One pushed message of `fs.pread`: the next piece of the range, in order, or an error (last).
#[derive(Clone, PartialEq, prost::Message)]
pub struct PreadReply {
    #[prost(message, optional, tag = "1")]
    pub error: Option<WireFsError>,
    #[prost(bytes = "bytes", tag = "2")]
    pub data: bytes::Bytes,
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
pub struct WireDirEntry {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(bool, tag = "2")]
    pub is_dir: bool,
    #[prost(uint64, tag = "3")]
    pub length: u64,
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

/// `fs.keepalive` (empty request): the caller is alive, so its writer handles are not idle.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeepAliveReply {
    /// Writer handles of the calling connection still open on the broker.
    #[prost(uint64, tag = "1")]
    pub handles: u64,
}

/// `fs.status` (empty request).
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusReply {
    #[prost(string, tag = "1")]
    pub backend_url: String,
    #[prost(uint64, tag = "2")]
    pub open_writers: u64,
    #[prost(uint64, tag = "3")]
    pub cached_readers: u64,
    /// Largest piece of data in one `fs.append` or pushed `fs.pread` message.
    #[prost(uint64, tag = "4")]
    pub chunk_bytes: u64,
}

/// An [`FsError`] as it travels. `code` names the variant (see [`error_to_wire`]); the other
/// fields are those of the variant, unused ones left empty.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireFsError {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub op: String,
    #[prost(string, tag = "3")]
    pub path: String,
    /// `Io`, `Backend`: the message; `InvalidPath`: why.
    #[prost(string, tag = "4")]
    pub message: String,
    /// `ReadPastEnd` fields.
    #[prost(uint64, tag = "5")]
    pub offset: u64,
    #[prost(uint64, tag = "6")]
    pub len: u64,
    #[prost(uint64, tag = "7")]
    pub file_len: u64,
    /// `Io`: the OS error number, when there was one (it carries the `io::ErrorKind`).
    #[prost(int32, optional, tag = "8")]
    pub os_error: Option<i32>,
}

// Wire codes of the FsError variants: part of the format, never renumbered.
const NOT_FOUND: i32 = 1;
const ALREADY_EXISTS: i32 = 2;
const DIRECTORY_NOT_EMPTY: i32 = 3;
const IS_A_DIRECTORY: i32 = 4;
const NOT_A_DIRECTORY: i32 = 5;
const READ_PAST_END: i32 = 6;
const INVALID_PATH: i32 = 7;
const CLOSED: i32 = 8;
const INJECTED: i32 = 9;
const IO: i32 = 10;
const BACKEND: i32 = 11;

/// Wire code of an [`AppendFlag`].
pub fn flag_to_wire(flag: AppendFlag) -> i32 {
    match flag {
        AppendFlag::None => 0,
        AppendFlag::Flush => 1,
        AppendFlag::Sync => 2,
    }
}

/// Inverse of [`flag_to_wire`]; an unknown code is refused rather than guessed, since
/// guessing low would break a durability promise.
pub fn flag_from_wire(code: i32) -> Option<AppendFlag> {
    match code {
        0 => Some(AppendFlag::None),
        1 => Some(AppendFlag::Flush),
        2 => Some(AppendFlag::Sync),
        _ => None,
    }
}

pub fn entry_to_wire(e: DirEntry) -> WireDirEntry {
    WireDirEntry {
        name: e.name,
        is_dir: e.is_dir,
        length: e.length,
    }
}

pub fn entry_from_wire(e: WireDirEntry) -> DirEntry {
    DirEntry {
        name: e.name,
        is_dir: e.is_dir,
        length: e.length,
    }
}

pub fn error_to_wire(e: &FsError) -> WireFsError {
    let mut w = WireFsError::default();
    let (code, op, path) = match e {
        FsError::NotFound { op, path } => (NOT_FOUND, *op, path),
        FsError::AlreadyExists { op, path } => (ALREADY_EXISTS, *op, path),
        FsError::DirectoryNotEmpty { op, path } => (DIRECTORY_NOT_EMPTY, *op, path),
        FsError::IsADirectory { op, path } => (IS_A_DIRECTORY, *op, path),
        FsError::NotADirectory { op, path } => (NOT_A_DIRECTORY, *op, path),
        FsError::ReadPastEnd {
            path,
            offset,
            len,
            file_len,
        } => {
            w.offset = *offset;
            w.len = *len as u64;
            w.file_len = *file_len;
            (READ_PAST_END, "pread", path)
        }
        FsError::InvalidPath { op, path, why } => {
            w.message = (*why).to_string();
            (INVALID_PATH, *op, path)
        }
        FsError::Closed { op, path } => (CLOSED, *op, path),
        FsError::Injected { op, path } => (INJECTED, *op, path),
        FsError::Io { op, path, source } => {
            w.message = source.to_string();
            w.os_error = source.raw_os_error();
            (IO, *op, path)
        }
        FsError::Backend { op, path, msg } => {
            w.message = msg.clone();
            (BACKEND, *op, path)
        }
    };
    w.code = code;
    w.op = op.to_string();
    w.path = path.clone();
    w
}

/// Operation names the backends use; a received name is mapped back to one of these so that
/// `FsError` keeps its `&'static str` (an unknown one becomes the caller's own operation).
const OPS: &[&str] = &[
    "create", "open", "length", "remove", "rmdir", "rename", "mkdirs", "readdir", "exists",
    "append", "close", "pread", "flush", "sync", "write", "read",
];

/// `InvalidPath` reasons `check_path` gives, mapped back the same way.
const WHYS: &[&str] = &["not absolute", "empty, '.' or '..' component"];

fn intern(table: &[&'static str], s: &str, fallback: &'static str) -> &'static str {
    table.iter().copied().find(|t| *t == s).unwrap_or(fallback)
}

/// Rebuilds the error; `op` is the client-side operation, used when the remote one is unknown.
pub fn error_from_wire(w: WireFsError, op: &'static str) -> FsError {
    let op = intern(OPS, &w.op, op);
    let path = w.path;
    match w.code {
        NOT_FOUND => FsError::NotFound { op, path },
        ALREADY_EXISTS => FsError::AlreadyExists { op, path },
        DIRECTORY_NOT_EMPTY => FsError::DirectoryNotEmpty { op, path },
        IS_A_DIRECTORY => FsError::IsADirectory { op, path },
        NOT_A_DIRECTORY => FsError::NotADirectory { op, path },
        READ_PAST_END => FsError::ReadPastEnd {
            path,
            offset: w.offset,
            len: usize::try_from(w.len).unwrap_or(usize::MAX),
            file_len: w.file_len,
        },
        INVALID_PATH => FsError::InvalidPath {
            op,
            path,
            why: intern(WHYS, &w.message, "refused by the broker's backend"),
        },
        CLOSED => FsError::Closed { op, path },
        INJECTED => FsError::Injected { op, path },
        IO => {
            let source = match w.os_error {
                // The OS error carries the io::ErrorKind; the text is rebuilt from it.
                Some(errno) => std::io::Error::from_raw_os_error(errno),
                None => std::io::Error::other(w.message),
            };
            FsError::Io { op, path, source }
        }
        BACKEND => FsError::Backend {
            op,
            path,
            msg: w.message,
        },
        other => FsError::Backend {
            op,
            path,
            msg: format!("unknown error code {other} from the broker: {}", w.message),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_round_trips() {
        let errors = vec![
            FsError::NotFound {
                op: "open",
                path: "/a".into(),
            },
            FsError::AlreadyExists {
                op: "rename",
                path: "/b".into(),
            },
            FsError::DirectoryNotEmpty {
                op: "rmdir",
                path: "/c".into(),
            },
            FsError::IsADirectory {
                op: "create",
                path: "/d".into(),
            },
            FsError::NotADirectory {
                op: "readdir",
                path: "/e".into(),
            },
            FsError::ReadPastEnd {
                path: "/f".into(),
                offset: 990,
                len: 20,
                file_len: 1000,
            },
            FsError::InvalidPath {
                op: "mkdirs",
                path: "x".into(),
                why: "not absolute",
            },
            FsError::Closed {
                op: "append",
                path: "/g".into(),
            },
            FsError::Injected {
                op: "sync",
                path: "/h".into(),
            },
            FsError::Io {
                op: "append",
                path: "/i".into(),
                source: std::io::Error::from_raw_os_error(28),
            },
            FsError::Backend {
                op: "close",
                path: "/j".into(),
                msg: "went wrong".into(),
            },
        ];
        for e in errors {
            let back = error_from_wire(error_to_wire(&e), "exists");
            assert_eq!(back.to_string(), e.to_string());
            assert_eq!(
                std::mem::discriminant(&back),
                std::mem::discriminant(&e),
                "{e}"
            );
            assert_eq!(back.kind(), e.kind());
        }
    }

    #[test]
    fn flags_round_trip_and_unknown_is_refused() {
        for f in [AppendFlag::None, AppendFlag::Flush, AppendFlag::Sync] {
            assert_eq!(flag_from_wire(flag_to_wire(f)), Some(f));
        }
        assert_eq!(flag_from_wire(7), None);
    }
}

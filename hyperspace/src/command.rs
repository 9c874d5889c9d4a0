//! What clients ask of Hyperspace and what it answers: the commands that go through the Raft log
//! (and the read-only ones served after a read index), their responses, and events.
//!
//! These are prost messages written by hand (no protoc). The same `Command` is the payload of a
//! client RPC and of a Raft log entry, so a replica applies exactly what the client sent plus the
//! header the leader checked. Byte layout: `docs/formats/hyperspace.md`.

use prost::Message;

/// Open flags (bits of [`Open::flags`]), as in Hypertable's `OPEN_FLAG_*`.
pub mod flags {
    pub const READ: u32 = 0x01;
    pub const WRITE: u32 = 0x02;
    /// Lock operations are allowed on the handle.
    pub const LOCK: u32 = 0x04;
    /// Create the file if it does not exist.
    pub const CREATE: u32 = 0x08;
    /// With `CREATE`: fail if the node exists.
    pub const EXCL: u32 = 0x10;
    /// With `CREATE`: the file is ephemeral. It is deleted when its last handle closes, including
    /// when the session holding it ends.
    pub const TEMP: u32 = 0x20;
    pub const ALL: u32 = READ | WRITE | LOCK | CREATE | EXCL | TEMP;
}

/// Event mask bits (bits of [`Open::event_mask`]), as in Hypertable's `EVENT_MASK_*`.
pub mod event_mask {
    pub const ATTR_SET: u32 = 0x01;
    pub const ATTR_DEL: u32 = 0x02;
    pub const CHILD_NODE_ADDED: u32 = 0x04;
    pub const CHILD_NODE_REMOVED: u32 = 0x08;
    pub const LOCK_ACQUIRED: u32 = 0x10;
    pub const LOCK_RELEASED: u32 = 0x20;
    /// Not maskable: a blocked `Lock` always gets its grant as this event.
    pub const LOCK_GRANTED: u32 = 0x40;
    pub const ALL: u32 = 0x3f;
}

/// Lock modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum LockMode {
    None = 0,
    Shared = 1,
    Exclusive = 2,
}

/// What became of a `Lock` request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, prost::Enumeration)]
#[repr(i32)]
pub enum LockStatus {
    Granted = 0,
    /// A try-lock that could not be granted at once.
    Busy = 1,
    /// A blocking lock queued behind others; a `LOCK_GRANTED` event follows.
    Pending = 2,
}

/// Error codes of [`HsError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, prost::Enumeration)]
#[repr(i32)]
pub enum ErrorCode {
    Internal = 0,
    NotFound = 1,
    AlreadyExists = 2,
    NotEmpty = 3,
    InvalidArgument = 4,
    /// The handle does not exist, or belongs to another session, or its node was deleted.
    BadHandle = 5,
    /// The session does not exist (never did, closed or expired).
    SessionExpired = 6,
    NotDirectory = 7,
    IsDirectory = 8,
    /// The handle was not opened with the flag the operation needs (LOCK, WRITE, ...).
    PermissionDenied = 9,
    /// Lock requested while the handle already holds or waits for one; release without a lock.
    LockState = 10,
    /// The request's sequence number is below the session's `first_incomplete`: an old retry
    /// whose answer is gone. The first attempt was applied.
    StaleRequest = 11,
    /// A bound (handles per session, attribute size, in-flight requests) would be exceeded.
    LimitExceeded = 12,
    /// Not served by this replica: it is not the leader (see `leader_hint`), or has no quorum.
    NotLeader = 13,
}

/// An error answer.
#[derive(Clone, PartialEq, Message)]
pub struct HsError {
    #[prost(enumeration = "ErrorCode", tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
}

/// One request. `session`, `seq` and `first_incomplete` make retries safe: a replica applies a
/// given `(session, seq)` at most once and answers a retry with the first answer, as long as
/// `seq >= first_incomplete` (the client's lowest unanswered seq). Commands the leader makes
/// itself (`ExpireSession`, `AckEvents`) and `CreateSession` carry `session = 0`.
#[derive(Clone, PartialEq, Message)]
pub struct Command {
    #[prost(uint64, tag = "1")]
    pub session: u64,
    #[prost(uint64, tag = "2")]
    pub seq: u64,
    #[prost(uint64, tag = "3")]
    pub first_incomplete: u64,
    #[prost(
        oneof = "Op",
        tags = "10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 30, 31, 32, 33, 34, 35, 36"
    )]
    pub op: Option<Op>,
}

/// The operations. 10..=23 change state and go through the log; 30.. are reads.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Op {
    #[prost(message, tag = "10")]
    CreateSession(CreateSession),
    #[prost(message, tag = "11")]
    CloseSession(CloseSession),
    #[prost(message, tag = "12")]
    ExpireSession(ExpireSession),
    #[prost(message, tag = "13")]
    AckEvents(AckEvents),
    #[prost(message, tag = "14")]
    Mkdir(Mkdir),
    #[prost(message, tag = "15")]
    Delete(Delete),
    #[prost(message, tag = "16")]
    Open(Open),
    #[prost(message, tag = "17")]
    Close(Close),
    #[prost(message, tag = "18")]
    AttrSet(AttrSet),
    #[prost(message, tag = "19")]
    AttrDel(AttrDel),
    #[prost(message, tag = "20")]
    AttrIncr(AttrIncr),
    #[prost(message, tag = "21")]
    Lock(Lock),
    #[prost(message, tag = "22")]
    Release(Release),
    /// A no-op used by tests and benchmarks to measure the log.
    #[prost(message, tag = "23")]
    Noop(Noop),
    #[prost(message, tag = "30")]
    Exists(Exists),
    #[prost(message, tag = "31")]
    Readdir(Readdir),
    #[prost(message, tag = "32")]
    AttrGet(AttrGet),
    #[prost(message, tag = "33")]
    AttrList(AttrList),
    #[prost(message, tag = "34")]
    GetSequencer(GetSequencer),
    #[prost(message, tag = "35")]
    CheckSequencer(CheckSequencer),
    #[prost(message, tag = "36")]
    ListSessions(ListSessions),
}

impl Op {
    /// True for operations that change state (and so go through the Raft log).
    pub fn is_write(&self) -> bool {
        !matches!(
            self,
            Op::Exists(_)
                | Op::Readdir(_)
                | Op::AttrGet(_)
                | Op::AttrList(_)
                | Op::GetSequencer(_)
                | Op::CheckSequencer(_)
                | Op::ListSessions(_)
        )
    }

    /// The operation's name, for errors and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Op::CreateSession(_) => "create_session",
            Op::CloseSession(_) => "close_session",
            Op::ExpireSession(_) => "expire_session",
            Op::AckEvents(_) => "ack_events",
            Op::Mkdir(_) => "mkdir",
            Op::Delete(_) => "delete",
            Op::Open(_) => "open",
            Op::Close(_) => "close",
            Op::AttrSet(_) => "attr_set",
            Op::AttrDel(_) => "attr_del",
            Op::AttrIncr(_) => "attr_incr",
            Op::Lock(_) => "lock",
            Op::Release(_) => "release",
            Op::Noop(_) => "noop",
            Op::Exists(_) => "exists",
            Op::Readdir(_) => "readdir",
            Op::AttrGet(_) => "attr_get",
            Op::AttrList(_) => "attr_list",
            Op::GetSequencer(_) => "get_sequencer",
            Op::CheckSequencer(_) => "check_sequencer",
            Op::ListSessions(_) => "list_sessions",
        }
    }
}

/// Opens a session. `nonce` is random per attempt of the client: a retried `CreateSession` with
/// the same nonce returns the same session id instead of making a second session.
#[derive(Clone, PartialEq, Message)]
pub struct CreateSession {
    #[prost(uint64, tag = "1")]
    pub nonce: u64,
    #[prost(uint64, tag = "2")]
    pub lease_ms: u64,
}

/// Ends the header's session: its handles close (locks released, ephemeral files deleted).
#[derive(Clone, PartialEq, Message)]
pub struct CloseSession {}

/// Proposed by the leader when a session's lease ran out: as `CloseSession` for `session`.
#[derive(Clone, PartialEq, Message)]
pub struct ExpireSession {
    #[prost(uint64, tag = "1")]
    pub session: u64,
}

/// Proposed by the leader: the client of `session` has seen its events up to `upto` (inclusive);
/// they may be dropped from its queue.
#[derive(Clone, PartialEq, Message)]
pub struct AckEvents {
    #[prost(uint64, tag = "1")]
    pub session: u64,
    #[prost(uint64, tag = "2")]
    pub upto: u64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Mkdir {
    #[prost(string, tag = "1")]
    pub path: String,
    /// Create missing parents too (and succeed if the directory exists).
    #[prost(bool, tag = "2")]
    pub parents: bool,
}

/// Deletes a file or an empty directory.
#[derive(Clone, PartialEq, Message)]
pub struct Delete {
    #[prost(string, tag = "1")]
    pub path: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct Attr {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// Opens a handle on a node (file or directory).
#[derive(Clone, PartialEq, Message)]
pub struct Open {
    #[prost(string, tag = "1")]
    pub path: String,
    /// [`flags`] bits.
    #[prost(uint32, tag = "2")]
    pub flags: u32,
    /// [`event_mask`] bits: which events this handle is sent.
    #[prost(uint32, tag = "3")]
    pub event_mask: u32,
    /// Set on the file when this open creates it.
    #[prost(message, repeated, tag = "4")]
    pub initial_attrs: Vec<Attr>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Close {
    #[prost(uint64, tag = "1")]
    pub handle: u64,
}

/// Names the node an attribute operation is on: an open handle, or (handle 0) a path.
#[derive(Clone, PartialEq, Message)]
pub struct Target {
    #[prost(uint64, tag = "1")]
    pub handle: u64,
    #[prost(string, tag = "2")]
    pub path: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct AttrSet {
    #[prost(message, optional, tag = "1")]
    pub target: Option<Target>,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(bytes = "vec", tag = "3")]
    pub value: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub struct AttrDel {
    #[prost(message, optional, tag = "1")]
    pub target: Option<Target>,
    #[prost(string, tag = "2")]
    pub name: String,
}

/// Adds `delta` to the attribute read as a decimal `i64` (missing = 0), stores the sum as
/// decimal ASCII and returns it. A value that is not a decimal integer is `InvalidArgument`.
#[derive(Clone, PartialEq, Message)]
pub struct AttrIncr {
    #[prost(message, optional, tag = "1")]
    pub target: Option<Target>,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(int64, tag = "3")]
    pub delta: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Lock {
    #[prost(uint64, tag = "1")]
    pub handle: u64,
    #[prost(enumeration = "LockMode", tag = "2")]
    pub mode: i32,
    /// Answer `Busy` instead of queueing.
    #[prost(bool, tag = "3")]
    pub try_lock: bool,
}

/// Releases the handle's lock, or withdraws its queued request.
#[derive(Clone, PartialEq, Message)]
pub struct Release {
    #[prost(uint64, tag = "1")]
    pub handle: u64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Noop {}

#[derive(Clone, PartialEq, Message)]
pub struct Exists {
    #[prost(string, tag = "1")]
    pub path: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct Readdir {
    #[prost(string, tag = "1")]
    pub path: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct AttrGet {
    #[prost(message, optional, tag = "1")]
    pub target: Option<Target>,
    #[prost(string, tag = "2")]
    pub name: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct AttrList {
    #[prost(message, optional, tag = "1")]
    pub target: Option<Target>,
}

#[derive(Clone, PartialEq, Message)]
pub struct GetSequencer {
    #[prost(uint64, tag = "1")]
    pub handle: u64,
}

#[derive(Clone, PartialEq, Message)]
pub struct CheckSequencer {
    #[prost(message, optional, tag = "1")]
    pub sequencer: Option<Sequencer>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ListSessions {}

/// Proof of holding a lock, to hand to a third party (Chubby's sequencer): valid while the lock on
/// `path` is held in `mode` with this `generation`.
#[derive(Clone, PartialEq, Eq, Hash, Message)]
pub struct Sequencer {
    #[prost(string, tag = "1")]
    pub path: String,
    #[prost(enumeration = "LockMode", tag = "2")]
    pub mode: i32,
    #[prost(uint64, tag = "3")]
    pub generation: u64,
}

#[derive(Clone, PartialEq, Eq, Message)]
pub struct DirEntry {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(bool, tag = "2")]
    pub is_dir: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct SessionInfo {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub lease_ms: u64,
    #[prost(uint64, tag = "3")]
    pub handles: u64,
}

/// The answer to one [`Command`]: an error, or the result of its operation.
#[derive(Clone, PartialEq, Message)]
pub struct Response {
    #[prost(message, optional, tag = "1")]
    pub error: Option<HsError>,
    #[prost(oneof = "Reply", tags = "10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20")]
    pub reply: Option<Reply>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Reply {
    /// Nothing to return (mkdir, delete, close, attr_set, release, ...).
    #[prost(message, tag = "10")]
    Done(Noop),
    #[prost(uint64, tag = "11")]
    Session(u64),
    #[prost(message, tag = "12")]
    Handle(HandleReply),
    #[prost(int64, tag = "13")]
    Int(i64),
    #[prost(message, tag = "14")]
    Lock(LockReply),
    #[prost(bool, tag = "15")]
    Bool(bool),
    #[prost(message, tag = "16")]
    Dir(DirReply),
    #[prost(message, tag = "17")]
    Value(ValueReply),
    #[prost(message, tag = "18")]
    Names(NamesReply),
    #[prost(message, tag = "19")]
    Sequencer(Sequencer),
    #[prost(message, tag = "20")]
    Sessions(SessionsReply),
}

#[derive(Clone, PartialEq, Message)]
pub struct HandleReply {
    #[prost(uint64, tag = "1")]
    pub handle: u64,
    /// This open created the node.
    #[prost(bool, tag = "2")]
    pub created: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct LockReply {
    #[prost(enumeration = "LockStatus", tag = "1")]
    pub status: i32,
    /// The lock generation when granted, else 0.
    #[prost(uint64, tag = "2")]
    pub generation: u64,
}

#[derive(Clone, PartialEq, Message)]
pub struct DirReply {
    /// Sorted by name.
    #[prost(message, repeated, tag = "1")]
    pub entries: Vec<DirEntry>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ValueReply {
    /// `None` when the attribute does not exist.
    #[prost(bytes = "vec", optional, tag = "1")]
    pub value: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, Message)]
pub struct NamesReply {
    /// Sorted.
    #[prost(string, repeated, tag = "1")]
    pub names: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct SessionsReply {
    #[prost(message, repeated, tag = "1")]
    pub sessions: Vec<SessionInfo>,
}

impl Response {
    pub fn ok(reply: Reply) -> Self {
        Self {
            error: None,
            reply: Some(reply),
        }
    }

    pub fn done() -> Self {
        Self::ok(Reply::Done(Noop {}))
    }

    pub fn err(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            error: Some(HsError {
                code: code as i32,
                message: message.into(),
            }),
            reply: None,
        }
    }

    /// The error code, if this is an error.
    pub fn error_code(&self) -> Option<ErrorCode> {
        self.error
            .as_ref()
            .map(|e| ErrorCode::try_from(e.code).unwrap_or(ErrorCode::Internal))
    }
}

/// Event kinds: the [`event_mask`] bit of the event.
pub type EventKind = u32;

/// Something that happened to a node, queued for the session holding `handle`.
#[derive(Clone, PartialEq, Eq, Message)]
pub struct Event {
    /// Per-session, starting at 1, without gaps.
    #[prost(uint64, tag = "1")]
    pub seq: u64,
    #[prost(uint64, tag = "2")]
    pub handle: u64,
    /// One [`event_mask`] bit.
    #[prost(uint32, tag = "3")]
    pub kind: u32,
    /// The attribute name (ATTR_*) or the child's name (CHILD_NODE_*).
    #[prost(string, tag = "4")]
    pub name: String,
    /// The lock mode (LOCK_ACQUIRED, LOCK_GRANTED).
    #[prost(enumeration = "LockMode", tag = "5")]
    pub mode: i32,
    /// The lock generation (LOCK_ACQUIRED, LOCK_GRANTED).
    #[prost(uint64, tag = "6")]
    pub generation: u64,
}

/// Events of one session after some seq.
#[derive(Clone, PartialEq, Message)]
pub struct EventBatch {
    #[prost(message, repeated, tag = "1")]
    pub events: Vec<Event>,
    /// Events after the asked-for seq were dropped because the session's queue was full: the
    /// client must re-read what it watches.
    #[prost(bool, tag = "2")]
    pub lost: bool,
}

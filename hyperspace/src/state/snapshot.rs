//! The snapshot encoding of the state machine: a magic header, a CRC-32C of the body, and the
//! body, one prost message holding every node, session and handle in key order (so equal states
//! give equal bytes); and the checked decoding that rebuilds the derived indexes and rejects
//! inconsistent input.

use std::collections::{BTreeMap, VecDeque};

use prost::Message;
use thiserror::Error;

use super::locks::NodeLock;
use super::sessions::Session;
use super::tree::{Node, check_path, split_parent};
use super::{Handle, Limits, StateMachine};
use crate::command::{Attr, Event, LockMode, Response};

/// "HSSTATE" and a format version.
const MAGIC: &[u8; 8] = b"HSSTATE\x01";

/// Why snapshot bytes could not be restored.
#[derive(Debug, Error)]
pub enum StateError {
    #[error("snapshot does not start with the Hyperspace state magic (or has another version)")]
    BadMagic,
    /// Truncated or corrupted: a protobuf prefix can decode, so the checksum is what catches it.
    #[error("snapshot checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum { stored: u32, computed: u32 },
    #[error("snapshot body does not decode: {0}")]
    Decode(#[from] prost::DecodeError),
    #[error("inconsistent snapshot: {0}")]
    Inconsistent(String),
}

fn bad<T>(msg: impl Into<String>) -> Result<T, StateError> {
    Err(StateError::Inconsistent(msg.into()))
}

#[derive(Clone, PartialEq, Message)]
struct SnapshotMsg {
    #[prost(uint64, tag = "1")]
    last_session: u64,
    #[prost(uint64, tag = "2")]
    last_handle: u64,
    #[prost(uint64, tag = "3")]
    last_generation: u64,
    /// Sorted by path, root first.
    #[prost(message, repeated, tag = "4")]
    nodes: Vec<NodeMsg>,
    /// Sorted by id.
    #[prost(message, repeated, tag = "5")]
    sessions: Vec<SessionMsg>,
    /// Sorted by id.
    #[prost(message, repeated, tag = "6")]
    handles: Vec<HandleMsg>,
}

#[derive(Clone, PartialEq, Message)]
struct NodeMsg {
    #[prost(string, tag = "1")]
    path: String,
    #[prost(bool, tag = "2")]
    is_dir: bool,
    #[prost(bool, tag = "3")]
    ephemeral: bool,
    /// Sorted by name.
    #[prost(message, repeated, tag = "4")]
    attrs: Vec<Attr>,
    /// `LockMode`, `None` when unlocked.
    #[prost(enumeration = "LockMode", tag = "5")]
    lock_mode: i32,
    #[prost(uint64, tag = "6")]
    generation: u64,
    #[prost(uint64, repeated, tag = "7")]
    holders: Vec<u64>,
    /// In queue order.
    #[prost(message, repeated, tag = "8")]
    waiters: Vec<WaiterMsg>,
}

#[derive(Clone, PartialEq, Message)]
struct WaiterMsg {
    #[prost(uint64, tag = "1")]
    handle: u64,
    #[prost(enumeration = "LockMode", tag = "2")]
    mode: i32,
}

#[derive(Clone, PartialEq, Message)]
struct SessionMsg {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(uint64, tag = "2")]
    lease_ms: u64,
    #[prost(uint64, tag = "3")]
    nonce: u64,
    #[prost(uint64, tag = "4")]
    first_incomplete: u64,
    /// Sorted by seq.
    #[prost(message, repeated, tag = "5")]
    replies: Vec<ReplyMsg>,
    #[prost(message, repeated, tag = "6")]
    events: Vec<Event>,
    #[prost(uint64, tag = "7")]
    last_event_seq: u64,
    #[prost(uint64, tag = "8")]
    lost_upto: u64,
}

#[derive(Clone, PartialEq, Message)]
struct ReplyMsg {
    #[prost(uint64, tag = "1")]
    seq: u64,
    #[prost(message, optional, tag = "2")]
    response: Option<Response>,
}

#[derive(Clone, PartialEq, Message)]
struct HandleMsg {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(uint64, tag = "2")]
    session: u64,
    /// Absent for a dead handle.
    #[prost(string, optional, tag = "3")]
    path: Option<String>,
    #[prost(uint32, tag = "4")]
    flags: u32,
    #[prost(uint32, tag = "5")]
    event_mask: u32,
}

/// Magic, checksum and body: the snapshot bytes for a body.
pub(crate) fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
    out.extend_from_slice(body);
    out
}

fn lock_mode(m: i32) -> Option<LockMode> {
    match LockMode::try_from(m) {
        Ok(LockMode::None) | Err(_) => None,
        Ok(m) => Some(m),
    }
}

impl StateMachine {
    /// A self-contained, deterministic encoding of the whole replicated state.
    pub fn snapshot(&self) -> Vec<u8> {
        let msg = SnapshotMsg {
            last_session: self.last_session,
            last_handle: self.last_handle,
            last_generation: self.last_generation,
            nodes: self
                .tree
                .nodes
                .iter()
                .map(|(path, n)| NodeMsg {
                    path: path.clone(),
                    is_dir: n.is_dir,
                    ephemeral: n.ephemeral,
                    attrs: n
                        .attrs
                        .iter()
                        .map(|(name, value)| Attr {
                            name: name.clone(),
                            value: value.clone(),
                        })
                        .collect(),
                    lock_mode: n.lock.mode.unwrap_or(LockMode::None) as i32,
                    generation: n.lock.generation,
                    holders: n.lock.holders.iter().copied().collect(),
                    waiters: n
                        .lock
                        .waiters
                        .iter()
                        .map(|&(handle, mode)| WaiterMsg {
                            handle,
                            mode: mode as i32,
                        })
                        .collect(),
                })
                .collect(),
            sessions: self
                .sessions
                .iter()
                .map(|(&id, s)| SessionMsg {
                    id,
                    lease_ms: s.lease_ms,
                    nonce: s.nonce,
                    first_incomplete: s.first_incomplete,
                    replies: s
                        .replies
                        .iter()
                        .map(|(&seq, r)| ReplyMsg {
                            seq,
                            response: Some(r.clone()),
                        })
                        .collect(),
                    events: s.events.iter().cloned().collect(),
                    last_event_seq: s.last_event_seq,
                    lost_upto: s.lost_upto,
                })
                .collect(),
            handles: self
                .handles
                .iter()
                .map(|(&id, h)| HandleMsg {
                    id,
                    session: h.session,
                    path: h.path.clone(),
                    flags: h.flags,
                    event_mask: h.event_mask,
                })
                .collect(),
        };
        frame(&msg.encode_to_vec())
    }

    /// Rebuilds a state from [`StateMachine::snapshot`] bytes, checking that they describe a
    /// consistent state. Never panics on garbage.
    pub fn restore(bytes: &[u8], limits: Limits) -> Result<Self, StateError> {
        let rest = bytes.strip_prefix(MAGIC).ok_or(StateError::BadMagic)?;
        let (crc, body) = rest.split_at_checked(4).ok_or(StateError::Checksum {
            stored: 0,
            computed: 0,
        })?;
        let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        let computed = crc32c::crc32c(body);
        if stored != computed {
            return Err(StateError::Checksum { stored, computed });
        }
        let msg = SnapshotMsg::decode(body)?;
        let mut sm = StateMachine::new(limits);
        sm.last_session = msg.last_session;
        sm.last_handle = msg.last_handle;
        sm.last_generation = msg.last_generation;
        sm.tree.nodes.clear();

        // Nodes come sorted, so a parent ("/a") precedes its children ("/a/b", "/a/b.c" ...).
        let mut prev: Option<String> = None;
        for n in msg.nodes {
            // Syntax only: the limits may have changed since the state was written.
            check_path(&n.path, usize::MAX).map_err(StateError::Inconsistent)?;
            if prev.as_ref().is_some_and(|p| *p >= n.path) {
                return bad(format!("node {:?} out of order or repeated", n.path));
            }
            prev = Some(n.path.clone());
            if let Some((parent, _)) = split_parent(&n.path) {
                if !sm.tree.get(parent).is_some_and(|p| p.is_dir) {
                    return bad(format!("parent of {:?} is not a directory", n.path));
                }
            } else if !n.is_dir {
                return bad("the root is not a directory");
            }
            if n.ephemeral && n.is_dir {
                return bad(format!("ephemeral directory {:?}", n.path));
            }
            let mut attrs = BTreeMap::new();
            for a in n.attrs {
                if a.name.is_empty() || attrs.insert(a.name, a.value).is_some() {
                    return bad(format!("bad or repeated attribute name on {:?}", n.path));
                }
            }
            let mode = lock_mode(n.lock_mode);
            if n.generation > msg.last_generation || (mode.is_some() && n.generation == 0) {
                return bad(format!("bad lock generation on {:?}", n.path));
            }
            let mut waiters = VecDeque::new();
            for w in n.waiters {
                let Some(m) = lock_mode(w.mode) else {
                    return bad(format!("bad waiter mode on {:?}", n.path));
                };
                waiters.push_back((w.handle, m));
            }
            let lock = NodeLock {
                mode,
                holders: n.holders.iter().copied().collect(),
                waiters,
                generation: n.generation,
            };
            if lock.holders.len() != n.holders.len()
                || mode.is_none() != lock.holders.is_empty()
                || (mode == Some(LockMode::Exclusive) && lock.holders.len() != 1)
            {
                return bad(format!("bad lock holders on {:?}", n.path));
            }
            let node = Node {
                is_dir: n.is_dir,
                ephemeral: n.ephemeral,
                attrs,
                lock,
                ..Node::default()
            };
            sm.tree.insert(&n.path, node);
        }
        if !sm.tree.get("/").is_some_and(|r| r.is_dir) {
            return bad("no root directory");
        }

        for s in msg.sessions {
            if s.id == 0 || s.id > msg.last_session || sm.sessions.contains_key(&s.id) {
                return bad(format!("bad or repeated session id {}", s.id));
            }
            if sm.nonces.insert(s.nonce, s.id).is_some() {
                return bad(format!("repeated session nonce {}", s.nonce));
            }
            let mut replies = BTreeMap::new();
            for r in s.replies {
                let Some(resp) = r.response else {
                    return bad(format!("session {}: cached reply without a response", s.id));
                };
                if r.seq < s.first_incomplete || replies.insert(r.seq, resp).is_some() {
                    return bad(format!("session {}: bad cached reply {}", s.id, r.seq));
                }
            }
            let events: VecDeque<Event> = s.events.into_iter().collect();
            let consecutive = events
                .iter()
                .zip(events.iter().skip(1))
                .all(|(a, b)| a.seq.checked_add(1) == Some(b.seq));
            if !consecutive
                || events.back().is_some_and(|e| e.seq != s.last_event_seq)
                || s.lost_upto > s.last_event_seq
            {
                return bad(format!("session {}: bad event queue", s.id));
            }
            sm.sessions.insert(
                s.id,
                Session {
                    lease_ms: s.lease_ms,
                    nonce: s.nonce,
                    first_incomplete: s.first_incomplete,
                    replies,
                    events,
                    last_event_seq: s.last_event_seq,
                    lost_upto: s.lost_upto,
                    ..Session::default()
                },
            );
        }

        for h in msg.handles {
            if h.id == 0 || h.id > msg.last_handle || sm.handles.contains_key(&h.id) {
                return bad(format!("bad or repeated handle id {}", h.id));
            }
            let Some(s) = sm.sessions.get_mut(&h.session) else {
                return bad(format!("handle {} of unknown session {}", h.id, h.session));
            };
            s.handles.insert(h.id);
            if let Some(path) = &h.path {
                let Some(n) = sm.tree.get_mut(path) else {
                    return bad(format!("handle {} on missing node {path:?}", h.id));
                };
                n.handles.insert(h.id);
            }
            sm.handles.insert(
                h.id,
                Handle {
                    session: h.session,
                    path: h.path,
                    flags: h.flags,
                    event_mask: h.event_mask,
                },
            );
        }

        // Every lock participant must be a live handle on its node, listed once; ephemeral
        // files exist only while someone has them open.
        for (path, n) in &sm.tree.nodes {
            let mut seen = std::collections::BTreeSet::new();
            let all = n
                .lock
                .holders
                .iter()
                .copied()
                .chain(n.lock.waiters.iter().map(|w| w.0));
            for h in all {
                if !n.handles.contains(&h) || !seen.insert(h) {
                    return bad(format!("lock of {path:?}: bad handle {h}"));
                }
            }
            if n.ephemeral && n.handles.is_empty() {
                return bad(format!("ephemeral {path:?} without handles"));
            }
        }
        Ok(sm)
    }
}

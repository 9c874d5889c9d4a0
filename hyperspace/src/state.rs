//! The Hyperspace state machine: what every replica applies the committed Raft log to.
//!
//! `apply` is a pure function of (state, command): no clock, no randomness, and only ordered
//! containers, so replicas that apply the same log hold equal states and produce equal
//! snapshots. Leases live outside: the leader proposes `ExpireSession` when one runs out.
//!
//! Layout: [`tree`] (paths, nodes, attributes), [`locks`] (holders, queue, generations),
//! [`sessions`] (dedupe cache, event queues), [`snapshot`] (the encoding); this file holds the
//! dispatch, dedupe, handles and the operations that span those parts.

mod attrs;
mod locks;
mod sessions;
mod snapshot;
mod tree;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use crate::command::{
    Command, DirEntry, DirReply, ErrorCode, Event, EventBatch, HandleReply, LockMode, NamesReply,
    Op, Reply, Response, Sequencer, SessionInfo, SessionsReply, ValueReply, event_mask, flags,
};

use sessions::Session;
use tree::{Node, Tree, ancestors, check_path, shorten, split_parent};

pub use snapshot::StateError;

/// Bounds on what one session can make the replicated state hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Events queued per session; beyond it the oldest are dropped (and reported lost).
    pub max_events_per_session: usize,
    /// Open handles (live or dead, until closed) per session.
    pub max_handles_per_session: usize,
    /// Bytes of one attribute value.
    pub max_attr_value_bytes: usize,
    /// Bytes of a path (and of an attribute name).
    pub max_path_bytes: usize,
    /// Bound on `seq - first_incomplete`, which bounds each session's answer cache.
    pub max_inflight_per_session: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_events_per_session: 4096,
            max_handles_per_session: 65536,
            max_attr_value_bytes: 1 << 20,
            max_path_bytes: 4096,
            max_inflight_per_session: 1024,
        }
    }
}

/// An open handle.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Handle {
    pub session: u64,
    /// The node's path; `None` once the node was deleted (the handle is dead: only `Close`
    /// works on it). A live handle always names the node it was opened on, because deleting a
    /// node kills its handles before the path can be reused.
    pub path: Option<String>,
    pub flags: u32,
    pub event_mask: u32,
}

/// The replicated state. `PartialEq` compares the state, not the `Limits` it runs with.
#[derive(Debug, Clone)]
pub struct StateMachine {
    limits: Limits,
    tree: Tree,
    handles: BTreeMap<u64, Handle>,
    sessions: BTreeMap<u64, Session>,
    /// `CreateSession` nonce -> id, for live sessions.
    nonces: BTreeMap<u64, u64>,
    /// Last ids handed out; ids are never reused.
    last_session: u64,
    last_handle: u64,
    /// Last lock generation handed out, over all nodes (see `NodeLock::grant`).
    last_generation: u64,
}

impl PartialEq for StateMachine {
    fn eq(&self, other: &Self) -> bool {
        self.tree == other.tree
            && self.handles == other.handles
            && self.sessions == other.sessions
            && self.nonces == other.nonces
            && self.last_session == other.last_session
            && self.last_handle == other.last_handle
            && self.last_generation == other.last_generation
    }
}

/// An operation's failure, turned into an error `Response`.
struct Fail(ErrorCode, String);

type OpResult = Result<Reply, Fail>;

fn fail<T>(code: ErrorCode, msg: impl Into<String>) -> Result<T, Fail> {
    Err(Fail(code, msg.into()))
}

fn respond(r: OpResult) -> Response {
    match r {
        Ok(reply) => Response::ok(reply),
        Err(Fail(code, msg)) => Response::err(code, msg),
    }
}

fn lock_mode(mode: i32) -> Option<LockMode> {
    match LockMode::try_from(mode) {
        Ok(m @ (LockMode::Shared | LockMode::Exclusive)) => Some(m),
        _ => None,
    }
}

fn event(handle: u64, kind: u32, name: &str, mode: LockMode, generation: u64) -> Event {
    Event {
        seq: 0,
        handle,
        kind,
        name: name.to_string(),
        mode: mode as i32,
        generation,
    }
}

impl StateMachine {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            tree: Tree::default(),
            handles: BTreeMap::new(),
            sessions: BTreeMap::new(),
            nonces: BTreeMap::new(),
            last_session: 0,
            last_handle: 0,
            last_generation: 0,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Applies one committed write command. Never panics on any input.
    pub fn apply(&mut self, cmd: &Command) -> Response {
        let Some(op) = &cmd.op else {
            return Response::err(ErrorCode::InvalidArgument, "command without an operation");
        };
        if !op.is_write() {
            return Response::err(
                ErrorCode::InvalidArgument,
                format!("{} is a read, not a log command", op.name()),
            );
        }
        // CreateSession has no session yet: its nonce, not the header, dedupes it.
        if let Op::CreateSession(c) = op {
            return respond(Ok(self.create_session(c.nonce, c.lease_ms)));
        }
        if cmd.session == 0 {
            return match op {
                Op::ExpireSession(_) | Op::AckEvents(_) | Op::Noop(_) => {
                    respond(self.apply_op(0, op))
                }
                _ => Response::err(
                    ErrorCode::SessionExpired,
                    format!("{} needs a session", op.name()),
                ),
            };
        }
        let max_inflight = self.limits.max_inflight_per_session;
        let Some(session) = self.sessions.get_mut(&cmd.session) else {
            return Response::err(
                ErrorCode::SessionExpired,
                format!("session {} does not exist", cmd.session),
            );
        };
        if let Some(cached) = session.replies.get(&cmd.seq) {
            return cached.clone();
        }
        if cmd.seq < session.first_incomplete {
            return Response::err(
                ErrorCode::StaleRequest,
                format!(
                    "seq {} is below first_incomplete {}: its answer is gone",
                    cmd.seq, session.first_incomplete
                ),
            );
        }
        // Rejections below change nothing and are not cached: they depend only on the header.
        if cmd.first_incomplete > cmd.seq {
            return Response::err(
                ErrorCode::InvalidArgument,
                format!(
                    "first_incomplete {} is above the request's seq {}",
                    cmd.first_incomplete, cmd.seq
                ),
            );
        }
        if cmd.seq - cmd.first_incomplete >= max_inflight {
            return Response::err(
                ErrorCode::LimitExceeded,
                format!(
                    "seq {} is {} ahead of first_incomplete {} (limit {max_inflight})",
                    cmd.seq,
                    cmd.seq - cmd.first_incomplete,
                    cmd.first_incomplete
                ),
            );
        }
        session.advance(cmd.first_incomplete);
        let response = respond(self.apply_op(cmd.session, op));
        // The session is gone after CloseSession (or expiring itself): nothing to cache.
        if let Some(session) = self.sessions.get_mut(&cmd.session) {
            session.replies.insert(cmd.seq, response.clone());
        }
        response
    }

    fn apply_op(&mut self, sid: u64, op: &Op) -> OpResult {
        match op {
            Op::CreateSession(c) => Ok(self.create_session(c.nonce, c.lease_ms)),
            Op::CloseSession(_) => self.end_session(sid),
            Op::ExpireSession(e) => self.end_session(e.session),
            Op::AckEvents(a) => match self.sessions.get_mut(&a.session) {
                Some(s) => {
                    s.ack(a.upto);
                    Ok(Reply::Done(Default::default()))
                }
                None => fail(
                    ErrorCode::SessionExpired,
                    format!("session {} does not exist", a.session),
                ),
            },
            Op::Mkdir(m) => self.mkdir(&m.path, m.parents),
            Op::Delete(d) => self.delete(&d.path),
            Op::Open(o) => self.open(sid, o),
            Op::Close(c) => self.close(sid, c.handle),
            Op::AttrSet(a) => self.attr_set(sid, a.target.as_ref(), &a.name, &a.value),
            Op::AttrDel(a) => self.attr_del(sid, a.target.as_ref(), &a.name),
            Op::AttrIncr(a) => self.attr_incr(sid, a.target.as_ref(), &a.name, a.delta),
            Op::Lock(l) => self.lock(sid, l.handle, l.mode, l.try_lock),
            Op::Release(r) => self.release(sid, r.handle),
            Op::Noop(_) => Ok(Reply::Done(Default::default())),
            _ => fail(
                ErrorCode::InvalidArgument,
                format!("{} is a read, not a log command", op.name()),
            ),
        }
    }

    /// Answers a read-only command from the current state.
    pub fn query(&self, cmd: &Command) -> Response {
        let Some(op) = &cmd.op else {
            return Response::err(ErrorCode::InvalidArgument, "command without an operation");
        };
        if op.is_write() {
            return Response::err(
                ErrorCode::InvalidArgument,
                format!("{} changes state: it must go through the log", op.name()),
            );
        }
        let sid = cmd.session;
        if sid != 0 && !self.sessions.contains_key(&sid) {
            return Response::err(
                ErrorCode::SessionExpired,
                format!("session {sid} does not exist"),
            );
        }
        respond(self.query_op(sid, op))
    }

    fn query_op(&self, sid: u64, op: &Op) -> OpResult {
        match op {
            Op::Exists(e) => {
                self.check_path(&e.path)?;
                Ok(Reply::Bool(self.tree.get(&e.path).is_some()))
            }
            Op::Readdir(r) => {
                let node = self.existing(&r.path)?;
                if !node.is_dir {
                    return fail(
                        ErrorCode::NotDirectory,
                        format!("{:?} is not a directory", shorten(&r.path)),
                    );
                }
                let base = if r.path == "/" { "" } else { r.path.as_str() };
                let entries = node
                    .children
                    .iter()
                    .map(|name| DirEntry {
                        name: name.clone(),
                        is_dir: self
                            .tree
                            .get(&format!("{base}/{name}"))
                            .is_some_and(|n| n.is_dir),
                    })
                    .collect();
                Ok(Reply::Dir(DirReply { entries }))
            }
            Op::AttrGet(a) => {
                let path = self.target(sid, a.target.as_ref())?;
                let node = self.existing(&path)?;
                Ok(Reply::Value(ValueReply {
                    value: node.attrs.get(&a.name).cloned(),
                }))
            }
            Op::AttrList(a) => {
                let path = self.target(sid, a.target.as_ref())?;
                let node = self.existing(&path)?;
                Ok(Reply::Names(NamesReply {
                    names: node.attrs.keys().cloned().collect(),
                }))
            }
            Op::GetSequencer(g) => {
                let (path, _) = self.live_handle(sid, g.handle)?;
                let node = self.existing(&path)?;
                match node.lock.mode {
                    Some(mode) if node.lock.holders.contains(&g.handle) => {
                        Ok(Reply::Sequencer(Sequencer {
                            path,
                            mode: mode as i32,
                            generation: node.lock.generation,
                        }))
                    }
                    _ => fail(
                        ErrorCode::LockState,
                        format!("handle {} holds no lock", g.handle),
                    ),
                }
            }
            Op::CheckSequencer(c) => {
                let Some(seq) = &c.sequencer else {
                    return fail(
                        ErrorCode::InvalidArgument,
                        "check_sequencer without a sequencer",
                    );
                };
                let valid = self.tree.get(&seq.path).is_some_and(|n| {
                    n.lock.mode.is_some_and(|m| m as i32 == seq.mode)
                        && n.lock.generation == seq.generation
                });
                Ok(Reply::Bool(valid))
            }
            Op::ListSessions(_) => Ok(Reply::Sessions(SessionsReply {
                sessions: self
                    .sessions
                    .iter()
                    .map(|(&id, s)| SessionInfo {
                        id,
                        lease_ms: s.lease_ms,
                        handles: s.handles.len() as u64,
                    })
                    .collect(),
            })),
            _ => fail(
                ErrorCode::InvalidArgument,
                format!("{} changes state: it must go through the log", op.name()),
            ),
        }
    }

    /// Events of `session` with seq > `after`, at most `max`.
    pub fn events_after(&self, session: u64, after: u64, max: usize) -> EventBatch {
        match self.sessions.get(&session) {
            Some(s) => s.events_after(after, max),
            None => EventBatch::default(),
        }
    }

    /// Highest event seq queued so far for the session (0 if none / no session).
    pub fn last_event_seq(&self, session: u64) -> u64 {
        self.sessions.get(&session).map_or(0, |s| s.last_event_seq)
    }

    pub fn has_session(&self, session: u64) -> bool {
        self.sessions.contains_key(&session)
    }

    /// The lease a live session asked for.
    pub fn session_lease_ms(&self, session: u64) -> Option<u64> {
        self.sessions.get(&session).map(|s| s.lease_ms)
    }

    /// How many sessions are live.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// `(id, lease_ms)` of every live session, sorted by id.
    pub fn sessions(&self) -> Vec<(u64, u64)> {
        self.sessions
            .iter()
            .map(|(&id, s)| (id, s.lease_ms))
            .collect()
    }

    // ---- sessions ----

    fn create_session(&mut self, nonce: u64, lease_ms: u64) -> Reply {
        if let Some(&id) = self.nonces.get(&nonce) {
            return Reply::Session(id);
        }
        self.last_session += 1;
        let id = self.last_session;
        self.sessions.insert(
            id,
            Session {
                lease_ms,
                nonce,
                ..Session::default()
            },
        );
        self.nonces.insert(nonce, id);
        Reply::Session(id)
    }

    /// Closes every handle of the session as `Close` does, then forgets the session.
    fn end_session(&mut self, sid: u64) -> OpResult {
        let Some(session) = self.sessions.get(&sid) else {
            return fail(
                ErrorCode::SessionExpired,
                format!("session {sid} does not exist"),
            );
        };
        let handles: Vec<u64> = session.handles.iter().copied().collect();
        for h in handles {
            self.close_handle(h);
        }
        if let Some(session) = self.sessions.remove(&sid)
            && self.nonces.get(&session.nonce) == Some(&sid)
        {
            self.nonces.remove(&session.nonce);
        }
        Ok(Reply::Done(Default::default()))
    }

    /// Queues `ev` for the session of `handle` (if both still exist).
    fn send(&mut self, handle: u64, ev: Event) {
        let max = self.limits.max_events_per_session;
        if let Some(h) = self.handles.get(&handle)
            && let Some(s) = self.sessions.get_mut(&h.session)
        {
            s.push_event(ev, max);
        }
    }

    /// Sends an event of `kind` to every handle open on `path` whose mask has it, except
    /// `except`. Handles are visited in id order, so every replica queues the same events.
    fn notify(
        &mut self,
        path: &str,
        kind: u32,
        name: &str,
        mode: LockMode,
        generation: u64,
        except: u64,
    ) {
        let Some(node) = self.tree.get(path) else {
            return;
        };
        let targets: Vec<u64> = node
            .handles
            .iter()
            .copied()
            .filter(|&h| h != except)
            .filter(|h| {
                self.handles
                    .get(h)
                    .is_some_and(|h| h.event_mask & kind != 0)
            })
            .collect();
        for h in targets {
            self.send(h, event(h, kind, name, mode, generation));
        }
    }

    /// Sends CHILD_NODE_ADDED / _REMOVED about `path` to its parent's handles.
    fn notify_parent(&mut self, path: &str, kind: u32) {
        if let Some((parent, name)) = split_parent(path) {
            let (parent, name) = (parent.to_string(), name.to_string());
            self.notify(&parent, kind, &name, LockMode::None, 0, 0);
        }
    }

    // ---- tree ----

    fn check_path(&self, path: &str) -> Result<(), Fail> {
        check_path(path, self.limits.max_path_bytes)
            .map_err(|m| Fail(ErrorCode::InvalidArgument, m))
    }

    /// The node at a path that must be valid and exist.
    fn existing(&self, path: &str) -> Result<&Node, Fail> {
        self.check_path(path)?;
        match self.tree.get(path) {
            Some(n) => Ok(n),
            None => fail(
                ErrorCode::NotFound,
                format!("{:?} does not exist", shorten(path)),
            ),
        }
    }

    /// Checks that the parent of a missing `path` is an existing directory.
    fn check_parent_dir(&self, path: &str) -> Result<(), Fail> {
        let Some((parent, _)) = split_parent(path) else {
            return Ok(());
        };
        match self.tree.get(parent) {
            None => fail(
                ErrorCode::NotFound,
                format!("parent of {:?} does not exist", shorten(path)),
            ),
            Some(p) if !p.is_dir => fail(
                ErrorCode::NotDirectory,
                format!("parent of {:?} is not a directory", shorten(path)),
            ),
            Some(_) => Ok(()),
        }
    }

    fn mkdir(&mut self, path: &str, parents: bool) -> OpResult {
        self.check_path(path)?;
        if let Some(node) = self.tree.get(path) {
            if parents && node.is_dir {
                return Ok(Reply::Done(Default::default()));
            }
            return fail(
                ErrorCode::AlreadyExists,
                format!("{:?} already exists", shorten(path)),
            );
        }
        let mut create: Vec<String> = Vec::new();
        if parents {
            // Existing ancestors come before missing ones, so checking them all first keeps the
            // operation all-or-nothing.
            for a in ancestors(path) {
                match self.tree.get(a) {
                    Some(n) if !n.is_dir => {
                        return fail(
                            ErrorCode::NotDirectory,
                            format!("{:?} (in {:?}) is not a directory", a, shorten(path)),
                        );
                    }
                    Some(_) => {}
                    None => create.push(a.to_string()),
                }
            }
        } else {
            self.check_parent_dir(path)?;
        }
        create.push(path.to_string());
        for p in create {
            self.tree.insert(&p, Node::dir());
            self.notify_parent(&p, event_mask::CHILD_NODE_ADDED);
        }
        Ok(Reply::Done(Default::default()))
    }

    fn delete(&mut self, path: &str) -> OpResult {
        self.check_path(path)?;
        if path == "/" {
            return fail(ErrorCode::InvalidArgument, "the root cannot be deleted");
        }
        let node = self.existing(path)?;
        if !node.children.is_empty() {
            return fail(
                ErrorCode::NotEmpty,
                format!("{:?} has children", shorten(path)),
            );
        }
        self.remove_node(path);
        Ok(Reply::Done(Default::default()))
    }

    /// Removes a childless node: its open handles die, its lock holders and waiters vanish
    /// with it, and the parent's watchers hear of it.
    fn remove_node(&mut self, path: &str) {
        if let Some(node) = self.tree.remove(path) {
            for h in node.handles {
                if let Some(handle) = self.handles.get_mut(&h) {
                    handle.path = None;
                }
            }
            self.notify_parent(path, event_mask::CHILD_NODE_REMOVED);
        }
    }

    // ---- handles ----

    fn open(&mut self, sid: u64, o: &crate::command::Open) -> OpResult {
        if o.flags & !flags::ALL != 0 {
            return fail(
                ErrorCode::InvalidArgument,
                format!("unknown open flags {:#x}", o.flags & !flags::ALL),
            );
        }
        if o.flags & flags::TEMP != 0 && o.flags & flags::CREATE == 0 {
            return fail(ErrorCode::InvalidArgument, "TEMP needs CREATE");
        }
        self.check_path(&o.path)?;
        let max_handles = self.limits.max_handles_per_session;
        let held = self.sessions.get(&sid).map_or(0, |s| s.handles.len());
        if held >= max_handles {
            return fail(
                ErrorCode::LimitExceeded,
                format!("session {sid} has {held} handles open (limit {max_handles})"),
            );
        }
        let created = match self.tree.get(&o.path) {
            Some(_) if o.flags & flags::CREATE != 0 && o.flags & flags::EXCL != 0 => {
                return fail(
                    ErrorCode::AlreadyExists,
                    format!("{:?} already exists", shorten(&o.path)),
                );
            }
            Some(_) => false,
            None if o.flags & flags::CREATE == 0 => {
                return fail(
                    ErrorCode::NotFound,
                    format!("{:?} does not exist", shorten(&o.path)),
                );
            }
            None => {
                self.check_parent_dir(&o.path)?;
                let mut attrs = BTreeMap::new();
                for a in &o.initial_attrs {
                    self.check_attr(&a.name, Some(&a.value))?;
                    attrs.insert(a.name.clone(), a.value.clone());
                }
                let ephemeral = o.flags & flags::TEMP != 0;
                self.tree.insert(&o.path, Node::file(ephemeral, attrs));
                self.notify_parent(&o.path, event_mask::CHILD_NODE_ADDED);
                true
            }
        };
        self.last_handle += 1;
        let id = self.last_handle;
        self.handles.insert(
            id,
            Handle {
                session: sid,
                path: Some(o.path.clone()),
                flags: o.flags,
                event_mask: o.event_mask & event_mask::ALL,
            },
        );
        if let Some(s) = self.sessions.get_mut(&sid) {
            s.handles.insert(id);
        }
        if let Some(n) = self.tree.get_mut(&o.path) {
            n.handles.insert(id);
        }
        Ok(Reply::Handle(HandleReply {
            handle: id,
            created,
        }))
    }

    /// A handle of session `sid` (BadHandle if unknown or another session's).
    fn own_handle(&self, sid: u64, handle: u64) -> Result<&Handle, Fail> {
        match self.handles.get(&handle) {
            Some(h) if h.session == sid => Ok(h),
            _ => fail(
                ErrorCode::BadHandle,
                format!("no handle {handle} in session {sid}"),
            ),
        }
    }

    /// The path and flags of a live handle of session `sid`.
    fn live_handle(&self, sid: u64, handle: u64) -> Result<(String, u32), Fail> {
        let h = self.own_handle(sid, handle)?;
        match &h.path {
            Some(p) => Ok((p.clone(), h.flags)),
            None => fail(
                ErrorCode::BadHandle,
                format!("handle {handle} is dead: its node was deleted"),
            ),
        }
    }

    fn close(&mut self, sid: u64, handle: u64) -> OpResult {
        self.own_handle(sid, handle)?;
        self.close_handle(handle);
        Ok(Reply::Done(Default::default()))
    }

    /// Frees a handle: its lock is released (or its request withdrawn), and an ephemeral node
    /// left without handles is deleted.
    fn close_handle(&mut self, handle: u64) {
        let Some(h) = self.handles.remove(&handle) else {
            return;
        };
        if let Some(s) = self.sessions.get_mut(&h.session) {
            s.handles.remove(&handle);
        }
        let Some(path) = h.path else {
            return;
        };
        // Off the node first, so the closing handle gets no event about its own release.
        if let Some(n) = self.tree.get_mut(&path) {
            n.handles.remove(&handle);
        }
        self.release_lock(&path, handle);
        if self
            .tree
            .get(&path)
            .is_some_and(|n| n.ephemeral && n.handles.is_empty())
        {
            self.remove_node(&path);
        }
    }
}

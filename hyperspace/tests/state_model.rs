//! Model test of the Hyperspace state machine: random command sequences are applied both to the
//! real `StateMachine` and to a small, obviously-correct model written here from the rules
//! (plain maps and vectors, no code shared with `state.rs`). After every command the answers,
//! every session's events, the session list and each handle's lock must agree, and the state
//! must survive a snapshot round trip; retries must be answered from the cache without change.

use std::collections::BTreeMap;

use hyperspace::command::{
    self as c, Command, ErrorCode, Event, LockMode, Op, Reply, Response, Sequencer, Target,
    event_mask as em, flags as fl,
};
use hyperspace::state::{Limits, StateMachine};
use proptest::prelude::*;

const BOGUS_SESSION: u64 = 999;
const BOGUS_HANDLE: u64 = 777;
const PATHS: &[&str] = &[
    "/a", "/b", "/a/x", "/a/y", "/b/x", "/a/x/z", "/c", "/", "a/x", "/a/",
];
const NAMES: &[&str] = &["n", "m", ""];
const VALUES: &[&[u8]] = &[b"1", b"-5", b"abc", b"", b"9223372036854775807"];

// ---------------------------------------------------------------- the model

type Resp = (Option<ErrorCode>, Option<Reply>);

fn ok(r: Reply) -> Resp {
    (None, Some(r))
}

fn done() -> Resp {
    ok(Reply::Done(c::Noop {}))
}

fn err(code: ErrorCode) -> Resp {
    (Some(code), None)
}

#[derive(Clone, Debug)]
struct MHandle {
    sid: u64,
    /// None once the node was deleted.
    path: Option<String>,
    flags: u32,
    mask: u32,
}

#[derive(Clone, Debug, Default)]
struct MNode {
    dir: bool,
    temp: bool,
    attrs: BTreeMap<String, Vec<u8>>,
    holders: Vec<u64>,
    exclusive: bool,
    queue: Vec<(u64, LockMode)>,
    generation: u64,
}

#[derive(Clone, Debug, Default)]
struct MSession {
    nonce: u64,
    lease: u64,
    events: Vec<Event>,
    last_event: u64,
    fi: u64,
    cache: BTreeMap<u64, Resp>,
}

#[derive(Clone, Debug, Default)]
struct Model {
    sessions: BTreeMap<u64, MSession>,
    last_sid: u64,
    last_handle: u64,
    last_gen: u64,
    handles: BTreeMap<u64, MHandle>,
    nodes: BTreeMap<String, MNode>,
}

fn valid(p: &str) -> bool {
    if p == "/" {
        return true;
    }
    p.starts_with('/')
        && !p.contains('\0')
        && p[1..]
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
}

/// (parent, name) of a valid non-root path.
fn parent(p: &str) -> Option<(String, String)> {
    if p == "/" {
        return None;
    }
    let (a, b) = p.rsplit_once('/')?;
    Some((if a.is_empty() { "/".into() } else { a.into() }, b.into()))
}

impl Model {
    fn new() -> Self {
        let mut m = Model::default();
        m.nodes.insert(
            "/".into(),
            MNode {
                dir: true,
                ..Default::default()
            },
        );
        m
    }

    fn emit(&mut self, h: u64, kind: u32, name: &str, mode: LockMode, generation: u64) {
        let Some(sid) = self.handles.get(&h).map(|h| h.sid) else {
            return;
        };
        if let Some(s) = self.sessions.get_mut(&sid) {
            s.last_event += 1;
            s.events.push(Event {
                seq: s.last_event,
                handle: h,
                kind,
                name: name.into(),
                mode: mode as i32,
                generation,
            });
        }
    }

    /// Live handles on `path` whose mask has `kind`, in id order, without `except`.
    fn watchers(&self, path: &str, kind: u32, except: u64) -> Vec<u64> {
        self.handles
            .iter()
            .filter(|(id, h)| {
                **id != except && h.path.as_deref() == Some(path) && h.mask & kind != 0
            })
            .map(|(id, _)| *id)
            .collect()
    }

    fn tell(&mut self, path: &str, kind: u32, name: &str, mode: LockMode, g: u64, except: u64) {
        for h in self.watchers(path, kind, except) {
            self.emit(h, kind, name, mode, g);
        }
    }

    fn tell_parent(&mut self, path: &str, kind: u32) {
        if let Some((p, n)) = parent(path) {
            self.tell(&p, kind, &n, LockMode::None, 0, 0);
        }
    }

    fn remove_node(&mut self, path: &str) {
        self.nodes.remove(path);
        for h in self.handles.values_mut() {
            if h.path.as_deref() == Some(path) {
                h.path = None;
            }
        }
        self.tell_parent(path, em::CHILD_NODE_REMOVED);
    }

    fn grant(&mut self, path: &str, h: u64, mode: LockMode) -> u64 {
        let mut last_gen = self.last_gen;
        let n = self.nodes.get_mut(path).expect("node");
        if n.holders.is_empty() {
            last_gen += 1;
            n.generation = last_gen;
            n.exclusive = mode == LockMode::Exclusive;
        }
        n.holders.push(h);
        self.last_gen = last_gen;
        n.generation
    }

    /// Drops h's hold or request on `path`'s lock and serves the queue; false if it had none.
    fn unlock(&mut self, path: &str, h: u64) -> bool {
        let Some(n) = self.nodes.get_mut(path) else {
            return false;
        };
        let mut released = false;
        if let Some(i) = n.holders.iter().position(|x| *x == h) {
            n.holders.remove(i);
            released = n.holders.is_empty();
            if released {
                n.exclusive = false;
            }
        } else if let Some(i) = n.queue.iter().position(|(x, _)| *x == h) {
            n.queue.remove(i);
        } else {
            return false;
        }
        if released {
            self.tell(path, em::LOCK_RELEASED, "", LockMode::None, 0, 0);
        }
        loop {
            let n = &self.nodes[path];
            let Some(&(w, mode)) = n.queue.first() else {
                break;
            };
            let can = match mode {
                LockMode::Exclusive => n.holders.is_empty(),
                _ => !n.exclusive,
            };
            if !can {
                break;
            }
            self.nodes.get_mut(path).expect("node").queue.remove(0);
            let g = self.grant(path, w, mode);
            self.emit(w, em::LOCK_GRANTED, "", mode, g);
            self.tell(path, em::LOCK_ACQUIRED, "", mode, g, w);
            if mode == LockMode::Exclusive {
                break;
            }
        }
        true
    }

    fn close_handle(&mut self, h: u64) {
        let Some(handle) = self.handles.remove(&h) else {
            return;
        };
        let Some(path) = handle.path else {
            return;
        };
        // The closing handle is gone before its lock is released: it hears nothing of it.
        self.unlock(&path, h);
        let open = self
            .handles
            .values()
            .any(|x| x.path.as_deref() == Some(&path));
        if self.nodes.get(&path).is_some_and(|n| n.temp) && !open {
            self.remove_node(&path);
        }
    }

    fn end_session(&mut self, sid: u64) -> Resp {
        if !self.sessions.contains_key(&sid) {
            return err(ErrorCode::SessionExpired);
        }
        let mine: Vec<u64> = self
            .handles
            .iter()
            .filter(|(_, h)| h.sid == sid)
            .map(|(id, _)| *id)
            .collect();
        for h in mine {
            self.close_handle(h);
        }
        self.sessions.remove(&sid);
        done()
    }

    fn create_session(&mut self, nonce: u64, lease: u64) -> Resp {
        if let Some((id, _)) = self.sessions.iter().find(|(_, s)| s.nonce == nonce) {
            return ok(Reply::Session(*id));
        }
        self.last_sid += 1;
        self.sessions.insert(
            self.last_sid,
            MSession {
                nonce,
                lease,
                ..Default::default()
            },
        );
        ok(Reply::Session(self.last_sid))
    }

    /// The live own handle `h` of `sid`, as its path.
    fn own_live(&self, sid: u64, h: u64) -> Result<String, Resp> {
        match self.handles.get(&h) {
            Some(x) if x.sid == sid => x.path.clone().ok_or(err(ErrorCode::BadHandle)),
            _ => Err(err(ErrorCode::BadHandle)),
        }
    }

    fn target(&self, sid: u64, t: &Target) -> Result<String, Resp> {
        if t.handle != 0 {
            return self.own_live(sid, t.handle);
        }
        if !valid(&t.path) {
            return Err(err(ErrorCode::InvalidArgument));
        }
        Ok(t.path.clone())
    }

    /// Target, attribute name and existence checks shared by the attribute operations.
    fn attr_node(&self, sid: u64, t: &Option<Target>, name: &str) -> Result<String, Resp> {
        let path = self.target(sid, t.as_ref().expect("generated with a target"))?;
        if name.is_empty() {
            return Err(err(ErrorCode::InvalidArgument));
        }
        if !self.nodes.contains_key(&path) {
            return Err(err(ErrorCode::NotFound));
        }
        Ok(path)
    }

    /// The write operation itself, after the session checks.
    fn op(&mut self, sid: u64, op: &Op) -> Resp {
        match op {
            Op::CloseSession(_) => self.end_session(sid),
            Op::Mkdir(m) => {
                let p = m.path.as_str();
                if !valid(p) {
                    return err(ErrorCode::InvalidArgument);
                }
                if let Some(n) = self.nodes.get(p) {
                    return if m.parents && n.dir {
                        done()
                    } else {
                        err(ErrorCode::AlreadyExists)
                    };
                }
                let mut to_make = vec![];
                if m.parents {
                    let mut chain = vec![p.to_string()];
                    while let Some((up, _)) = parent(chain.last().expect("non-empty")) {
                        chain.push(up);
                    }
                    chain.reverse(); // root first, p last
                    for q in chain {
                        match self.nodes.get(&q) {
                            Some(n) if !n.dir => return err(ErrorCode::NotDirectory),
                            Some(_) => {}
                            None => to_make.push(q),
                        }
                    }
                } else {
                    let (up, _) = parent(p).expect("the root exists");
                    match self.nodes.get(&up) {
                        None => return err(ErrorCode::NotFound),
                        Some(n) if !n.dir => return err(ErrorCode::NotDirectory),
                        Some(_) => to_make.push(p.to_string()),
                    }
                }
                for q in to_make {
                    self.nodes.insert(
                        q.clone(),
                        MNode {
                            dir: true,
                            ..Default::default()
                        },
                    );
                    self.tell_parent(&q, em::CHILD_NODE_ADDED);
                }
                done()
            }
            Op::Delete(d) => {
                let p = d.path.as_str();
                if !valid(p) || p == "/" {
                    return err(ErrorCode::InvalidArgument);
                }
                if !self.nodes.contains_key(p) {
                    return err(ErrorCode::NotFound);
                }
                let prefix = format!("{p}/");
                if self.nodes.keys().any(|k| k.starts_with(&prefix)) {
                    return err(ErrorCode::NotEmpty);
                }
                self.remove_node(p);
                done()
            }
            Op::Open(o) => {
                if o.flags & !fl::ALL != 0
                    || (o.flags & fl::TEMP != 0 && o.flags & fl::CREATE == 0)
                    || !valid(&o.path)
                {
                    return err(ErrorCode::InvalidArgument);
                }
                let create = o.flags & fl::CREATE != 0;
                let mut created = false;
                if self.nodes.contains_key(&o.path) {
                    if create && o.flags & fl::EXCL != 0 {
                        return err(ErrorCode::AlreadyExists);
                    }
                } else {
                    if !create {
                        return err(ErrorCode::NotFound);
                    }
                    let (up, _) = parent(&o.path).expect("root exists");
                    match self.nodes.get(&up) {
                        None => return err(ErrorCode::NotFound),
                        Some(n) if !n.dir => return err(ErrorCode::NotDirectory),
                        Some(_) => {}
                    }
                    self.nodes.insert(
                        o.path.clone(),
                        MNode {
                            temp: o.flags & fl::TEMP != 0,
                            ..Default::default()
                        },
                    );
                    self.tell_parent(&o.path, em::CHILD_NODE_ADDED);
                    created = true;
                }
                self.last_handle += 1;
                self.handles.insert(
                    self.last_handle,
                    MHandle {
                        sid,
                        path: Some(o.path.clone()),
                        flags: o.flags,
                        mask: o.event_mask & em::ALL,
                    },
                );
                ok(Reply::Handle(c::HandleReply {
                    handle: self.last_handle,
                    created,
                }))
            }
            Op::Close(x) => match self.handles.get(&x.handle) {
                Some(h) if h.sid == sid => {
                    self.close_handle(x.handle);
                    done()
                }
                _ => err(ErrorCode::BadHandle),
            },
            Op::AttrSet(a) => match self.attr_node(sid, &a.target, &a.name) {
                Err(e) => e,
                Ok(p) => {
                    let n = self.nodes.get_mut(&p).expect("checked");
                    n.attrs.insert(a.name.clone(), a.value.clone());
                    self.tell(&p, em::ATTR_SET, &a.name, LockMode::None, 0, 0);
                    done()
                }
            },
            Op::AttrDel(a) => match self.attr_node(sid, &a.target, &a.name) {
                Err(e) => e,
                Ok(p) => {
                    let n = self.nodes.get_mut(&p).expect("checked");
                    if n.attrs.remove(&a.name).is_none() {
                        return err(ErrorCode::NotFound);
                    }
                    self.tell(&p, em::ATTR_DEL, &a.name, LockMode::None, 0, 0);
                    done()
                }
            },
            Op::AttrIncr(a) => match self.attr_node(sid, &a.target, &a.name) {
                Err(e) => e,
                Ok(p) => {
                    let n = self.nodes.get_mut(&p).expect("checked");
                    let old = match n.attrs.get(&a.name) {
                        None => 0i64,
                        Some(v) => match String::from_utf8(v.clone())
                            .ok()
                            .and_then(|s| s.parse().ok())
                        {
                            Some(x) => x,
                            None => return err(ErrorCode::InvalidArgument),
                        },
                    };
                    let Some(new) = old.checked_add(a.delta) else {
                        return err(ErrorCode::InvalidArgument);
                    };
                    n.attrs.insert(a.name.clone(), new.to_string().into_bytes());
                    self.tell(&p, em::ATTR_SET, &a.name, LockMode::None, 0, 0);
                    ok(Reply::Int(new))
                }
            },
            Op::Lock(l) => {
                let path = match self.own_live(sid, l.handle) {
                    Ok(p) => p,
                    Err(e) => return e,
                };
                if self.handles[&l.handle].flags & fl::LOCK == 0 {
                    return err(ErrorCode::PermissionDenied);
                }
                let mode = match l.mode {
                    1 => LockMode::Shared,
                    2 => LockMode::Exclusive,
                    _ => return err(ErrorCode::InvalidArgument),
                };
                let n = &self.nodes[&path];
                if n.holders.contains(&l.handle) || n.queue.iter().any(|(h, _)| *h == l.handle) {
                    return err(ErrorCode::LockState);
                }
                let now = n.queue.is_empty()
                    && match mode {
                        LockMode::Exclusive => n.holders.is_empty(),
                        _ => !n.exclusive,
                    };
                let lock_reply = |status: c::LockStatus, generation| {
                    ok(Reply::Lock(c::LockReply {
                        status: status as i32,
                        generation,
                    }))
                };
                if now {
                    let g = self.grant(&path, l.handle, mode);
                    self.tell(&path, em::LOCK_ACQUIRED, "", mode, g, l.handle);
                    lock_reply(c::LockStatus::Granted, g)
                } else if l.try_lock {
                    lock_reply(c::LockStatus::Busy, 0)
                } else {
                    let n = self.nodes.get_mut(&path).expect("exists");
                    n.queue.push((l.handle, mode));
                    lock_reply(c::LockStatus::Pending, 0)
                }
            }
            Op::Release(r) => match self.own_live(sid, r.handle) {
                Err(e) => e,
                Ok(p) => {
                    if self.unlock(&p, r.handle) {
                        done()
                    } else {
                        err(ErrorCode::LockState)
                    }
                }
            },
            Op::Noop(_) => done(),
            other => panic!("model: unexpected op {}", other.name()),
        }
    }

    /// A client write command through the dedupe rules (fresh or retried).
    fn apply_client(&mut self, cmd: &Command) -> Resp {
        let Some(s) = self.sessions.get_mut(&cmd.session) else {
            return err(ErrorCode::SessionExpired);
        };
        if let Some(r) = s.cache.get(&cmd.seq) {
            return r.clone();
        }
        if cmd.seq < s.fi {
            return err(ErrorCode::StaleRequest);
        }
        if cmd.first_incomplete > s.fi {
            s.fi = cmd.first_incomplete;
            let fi = s.fi;
            s.cache.retain(|seq, _| *seq >= fi);
        }
        let r = self.op(cmd.session, cmd.op.as_ref().expect("op"));
        if let Some(s) = self.sessions.get_mut(&cmd.session) {
            s.cache.insert(cmd.seq, r.clone());
        }
        r
    }

    fn query(&self, sid: u64, op: &Op) -> Resp {
        if sid != 0 && !self.sessions.contains_key(&sid) {
            return err(ErrorCode::SessionExpired);
        }
        match op {
            Op::GetSequencer(g) => match self.own_live(sid, g.handle) {
                Err(e) => e,
                Ok(p) => {
                    let n = &self.nodes[&p];
                    if !n.holders.contains(&g.handle) {
                        return err(ErrorCode::LockState);
                    }
                    let mode = if n.exclusive {
                        LockMode::Exclusive
                    } else {
                        LockMode::Shared
                    };
                    ok(Reply::Sequencer(Sequencer {
                        path: p,
                        mode: mode as i32,
                        generation: n.generation,
                    }))
                }
            },
            Op::CheckSequencer(cs) => {
                let s = cs.sequencer.as_ref().expect("generated");
                let valid = self.nodes.get(&s.path).is_some_and(|n| {
                    let mode = if n.exclusive { 2 } else { 1 };
                    !n.holders.is_empty() && mode == s.mode && n.generation == s.generation
                });
                ok(Reply::Bool(valid))
            }
            Op::AttrGet(a) => match self.attr_get_node(sid, &a.target) {
                Err(e) => e,
                Ok(p) => ok(Reply::Value(c::ValueReply {
                    value: self.nodes[&p].attrs.get(&a.name).cloned(),
                })),
            },
            Op::Readdir(r) => {
                if !valid(&r.path) {
                    return err(ErrorCode::InvalidArgument);
                }
                match self.nodes.get(&r.path) {
                    None => err(ErrorCode::NotFound),
                    Some(n) if !n.dir => err(ErrorCode::NotDirectory),
                    Some(_) => {
                        let entries = self
                            .nodes
                            .iter()
                            .filter_map(|(k, n)| {
                                let (up, name) = parent(k)?;
                                (up == r.path).then_some(c::DirEntry {
                                    name,
                                    is_dir: n.dir,
                                })
                            })
                            .collect();
                        ok(Reply::Dir(c::DirReply { entries }))
                    }
                }
            }
            other => panic!("model: unexpected query {}", other.name()),
        }
    }

    fn attr_get_node(&self, sid: u64, t: &Option<Target>) -> Result<String, Resp> {
        let path = self.target(sid, t.as_ref().expect("generated with a target"))?;
        if !self.nodes.contains_key(&path) {
            return Err(err(ErrorCode::NotFound));
        }
        Ok(path)
    }

    /// The model's own invariants (they hold by construction, checked anyway).
    fn check(&self) {
        for (p, n) in &self.nodes {
            assert!(
                !n.exclusive || n.holders.len() == 1,
                "{p}: exclusive and shared"
            );
            for h in n.holders.iter().chain(n.queue.iter().map(|(h, _)| h)) {
                let live = self.handles.get(h).and_then(|x| x.path.as_deref());
                assert_eq!(live, Some(p.as_str()), "{p}: lock of a dead handle {h}");
            }
            if n.temp {
                let open = self.handles.values().any(|h| h.path.as_deref() == Some(p));
                assert!(open, "{p}: ephemeral without handles");
            }
        }
    }
}

// ---------------------------------------------------------------- generated commands and the harness: state_model/harness.rs

#[path = "state_model/harness.rs"]
mod harness;
use harness::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn machine_matches_model(ops in prop::collection::vec((aop(), any::<u8>()), 1..200)) {
        let h = run(&ops);
        let bytes = h.sm.snapshot();
        let back = StateMachine::restore(&bytes, Limits::default()).expect("restore");
        prop_assert_eq!(&back, &h.sm);
        prop_assert_eq!(back.snapshot(), bytes);
    }

    #[test]
    fn same_log_same_state(ops in prop::collection::vec((aop(), any::<u8>()), 1..200)) {
        let h = run(&ops);
        let mut other = StateMachine::new(Limits::default());
        for cmd in &h.log {
            other.apply(cmd);
        }
        prop_assert_eq!(other.snapshot(), h.sm.snapshot());
        prop_assert_eq!(&other, &h.sm);
    }

    #[test]
    fn every_retry_is_answered_from_the_cache(
        ops in prop::collection::vec((aop(), any::<u8>()), 1..120),
    ) {
        let mut h = run(&ops);
        let history = h.history.clone();
        for i in 0..history.len() {
            h.retry(i);
        }
    }
}

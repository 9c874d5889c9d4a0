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

// ---------------------------------------------------------------- generated commands

#[derive(Clone, Debug)]
enum Tgt {
    Handle(usize),
    Path(usize),
}

#[derive(Clone, Debug)]
enum AOp {
    Create(u64),
    CloseSession(usize),
    Expire(usize),
    Ack(usize, u64),
    Mkdir(usize, usize, bool),
    Delete(usize, usize),
    Open(usize, usize, u32, u32),
    Close(usize, usize),
    AttrSet(usize, Tgt, usize, usize),
    AttrDel(usize, Tgt, usize),
    AttrIncr(usize, Tgt, usize, i64),
    Lock(usize, usize, i32, bool),
    Release(usize, usize),
    GetSeq(usize, usize),
    CheckSeq(usize),
    AttrGet(usize, Tgt, usize),
    Readdir(usize, usize),
    Retry(usize),
}

fn tgt() -> impl Strategy<Value = Tgt> {
    prop_oneof![
        3 => any::<usize>().prop_map(Tgt::Handle),
        2 => any::<usize>().prop_map(Tgt::Path)
    ]
}

fn open_flags() -> impl Strategy<Value = u32> {
    prop_oneof![
        4 => prop::sample::select(vec![
            fl::LOCK,
            fl::LOCK,
            fl::READ,
            fl::CREATE | fl::LOCK,
            fl::CREATE | fl::TEMP | fl::LOCK,
            fl::CREATE | fl::TEMP,
            fl::CREATE | fl::EXCL | fl::LOCK,
            fl::READ | fl::WRITE | fl::LOCK,
        ]),
        1 => 0u32..0x80,
    ]
}

fn aop() -> impl Strategy<Value = AOp> {
    let u = any::<usize>;
    prop_oneof![
        3 => prop_oneof![0u64..3, 3u64..1000].prop_map(AOp::Create),
        1 => u().prop_map(AOp::CloseSession),
        1 => u().prop_map(AOp::Expire),
        1 => (u(), 0u64..4).prop_map(|(s, k)| AOp::Ack(s, k)),
        2 => (u(), u(), any::<bool>()).prop_map(|(s, p, b)| AOp::Mkdir(s, p, b)),
        1 => (u(), u()).prop_map(|(s, p)| AOp::Delete(s, p)),
        8 => (u(), u(), open_flags(), 0u32..0x80).prop_map(|(s, p, f, m)| AOp::Open(s, p, f, m)),
        2 => (u(), u()).prop_map(|(s, h)| AOp::Close(s, h)),
        2 => (u(), tgt(), u(), u()).prop_map(|(s, t, n, v)| AOp::AttrSet(s, t, n, v)),
        1 => (u(), tgt(), u()).prop_map(|(s, t, n)| AOp::AttrDel(s, t, n)),
        2 => (u(), tgt(), u(), -3i64..4).prop_map(|(s, t, n, d)| AOp::AttrIncr(s, t, n, d)),
        8 => (u(), u(), prop_oneof![1 => Just(0), 6 => 1i32..3, 1 => Just(7)], prop::bool::weighted(0.3))
            .prop_map(|(s, h, m, t)| AOp::Lock(s, h, m, t)),
        3 => (u(), u()).prop_map(|(s, h)| AOp::Release(s, h)),
        2 => (u(), u()).prop_map(|(s, h)| AOp::GetSeq(s, h)),
        1 => u().prop_map(AOp::CheckSeq),
        1 => (u(), tgt(), u()).prop_map(|(s, t, n)| AOp::AttrGet(s, t, n)),
        1 => (u(), u()).prop_map(|(s, p)| AOp::Readdir(s, p)),
        2 => u().prop_map(AOp::Retry),
    ]
}

/// Applies generated commands to the real machine and the model, comparing as it goes.
struct Harness {
    sm: StateMachine,
    model: Model,
    /// Per session: (last seq used, first_incomplete sent).
    clients: BTreeMap<u64, (u64, u64)>,
    /// Client write commands applied, with their answers (for retries).
    history: Vec<(Command, Response)>,
    /// Every write command applied, in order (for the determinism replay).
    log: Vec<Command>,
    sequencers: Vec<Sequencer>,
}

/// Mostly the few files where handles meet (so locks contend), sometimes any path.
fn pick_path(i: usize) -> String {
    if i.is_multiple_of(3) {
        PATHS[(i / 3) % PATHS.len()].to_string()
    } else {
        PATHS[2 + (i / 3) % 3].to_string()
    }
}

fn resp(r: &Response) -> Resp {
    (r.error_code(), r.reply.clone())
}

impl Harness {
    fn new() -> Self {
        Self {
            sm: StateMachine::new(Limits::default()),
            model: Model::new(),
            clients: BTreeMap::new(),
            history: vec![],
            log: vec![],
            sequencers: vec![],
        }
    }

    /// Mostly a live session; sometimes any id ever handed out, or one that never existed.
    fn session(&self, i: usize) -> u64 {
        let live: Vec<u64> = self.model.sessions.keys().copied().collect();
        if !i.is_multiple_of(8) && !live.is_empty() {
            return live[(i / 8) % live.len()];
        }
        let n = self.model.last_sid as usize + 1;
        match (i / 8) % n {
            0 => BOGUS_SESSION,
            k => k as u64,
        }
    }

    /// For handle operations: mostly a session that has live handles.
    fn hsession(&self, i: usize) -> u64 {
        let with: Vec<u64> = self
            .model
            .sessions
            .keys()
            .copied()
            .filter(|s| {
                self.model
                    .handles
                    .values()
                    .any(|h| h.sid == *s && h.path.is_some())
            })
            .collect();
        if !i.is_multiple_of(8) && !with.is_empty() {
            return with[(i / 8) % with.len()];
        }
        self.session(i / 8)
    }

    /// Mostly one of the session's own live handles, sometimes a dead one, any id, or a
    /// bogus one.
    fn handle(&self, sid: u64, i: usize) -> u64 {
        let own = |live: bool| -> Vec<u64> {
            self.model
                .handles
                .iter()
                .filter(|(_, h)| h.sid == sid && (!live || h.path.is_some()))
                .map(|(id, _)| *id)
                .collect()
        };
        let own = own(!i.is_multiple_of(7));
        if !i.is_multiple_of(5) && !own.is_empty() {
            return own[(i / 5) % own.len()];
        }
        let all = self.model.last_handle as usize + 2;
        match (i / 5) % all {
            0 => 0,
            1 => BOGUS_HANDLE,
            k => (k - 1) as u64,
        }
    }

    fn target(&self, sid: u64, t: &Tgt) -> Option<Target> {
        Some(match t {
            Tgt::Handle(i) => Target {
                handle: self.handle(sid, *i),
                path: String::new(),
            },
            Tgt::Path(i) => Target {
                handle: 0,
                path: pick_path(*i),
            },
        })
    }

    fn system(&mut self, op: Op) {
        let cmd = Command {
            op: Some(op),
            ..Default::default()
        };
        let got = self.sm.apply(&cmd);
        let want = match cmd.op.as_ref().expect("op") {
            Op::CreateSession(cs) => self.model.create_session(cs.nonce, cs.lease_ms),
            Op::ExpireSession(e) => self.model.end_session(e.session),
            Op::AckEvents(a) => match self.model.sessions.get_mut(&a.session) {
                None => err(ErrorCode::SessionExpired),
                Some(s) => {
                    s.events.retain(|e| e.seq > a.upto);
                    done()
                }
            },
            _ => unreachable!("only session-less commands here"),
        };
        assert_eq!(resp(&got), want, "{cmd:?}");
        self.log.push(cmd);
    }

    fn client(&mut self, sid: u64, op: Op, lag: u64) {
        let (seq, fi) = self.clients.get(&sid).copied().unwrap_or((0, 0));
        let seq = seq + 1;
        let fi = fi.max(seq.saturating_sub(lag));
        self.clients.insert(sid, (seq, fi));
        let cmd = Command {
            session: sid,
            seq,
            first_incomplete: fi,
            op: Some(op),
        };
        if cmd.op.as_ref().is_some_and(|o| o.is_write()) {
            let got = self.sm.apply(&cmd);
            let want = self.model.apply_client(&cmd);
            assert_eq!(resp(&got), want, "{cmd:?}");
            self.history.push((cmd.clone(), got));
            self.log.push(cmd);
        } else {
            let got = self.sm.query(&cmd);
            let want = self.model.query(sid, cmd.op.as_ref().expect("op"));
            assert_eq!(resp(&got), want, "{cmd:?}");
            if let Some(Reply::Sequencer(s)) = got.reply {
                self.sequencers.push(s);
            }
        }
    }

    fn retry(&mut self, i: usize) {
        if self.history.is_empty() {
            return;
        }
        let (cmd, first) = self.history[i % self.history.len()].clone();
        let before = self.sm.snapshot();
        let got = self.sm.apply(&cmd);
        let want = self.model.apply_client(&cmd);
        assert_eq!(resp(&got), want, "retry {cmd:?}");
        let live = self
            .model
            .sessions
            .get(&cmd.session)
            .is_some_and(|s| cmd.seq >= s.fi);
        if live {
            assert_eq!(got, first, "a retry gets the first answer: {cmd:?}");
        }
        assert_eq!(
            self.sm.snapshot(),
            before,
            "a retry changes nothing: {cmd:?}"
        );
    }

    fn step(&mut self, a: &AOp, lag: u64) {
        let path = pick_path;
        match a {
            AOp::Create(nonce) => self.system(Op::CreateSession(c::CreateSession {
                nonce: *nonce,
                lease_ms: 1000 + nonce,
            })),
            AOp::Expire(s) => {
                let session = self.session(*s);
                self.system(Op::ExpireSession(c::ExpireSession { session }))
            }
            AOp::Ack(s, k) => {
                let session = self.session(*s);
                let upto = self.sm.last_event_seq(session).saturating_sub(*k);
                self.system(Op::AckEvents(c::AckEvents { session, upto }))
            }
            AOp::CheckSeq(i) => {
                let Some(s) = self
                    .sequencers
                    .get(i % self.sequencers.len().max(1))
                    .cloned()
                else {
                    return;
                };
                let op = Op::CheckSequencer(c::CheckSequencer { sequencer: Some(s) });
                let got = self.sm.query(&Command {
                    op: Some(op.clone()),
                    ..Default::default()
                });
                assert_eq!(resp(&got), self.model.query(0, &op));
            }
            AOp::Retry(i) => self.retry(*i),
            AOp::CloseSession(s) => {
                let sid = self.session(*s);
                self.client(sid, Op::CloseSession(c::CloseSession {}), lag)
            }
            AOp::Mkdir(s, p, parents) => {
                let sid = self.session(*s);
                let op = Op::Mkdir(c::Mkdir {
                    path: path(*p),
                    parents: *parents,
                });
                self.client(sid, op, lag)
            }
            AOp::Delete(s, p) => {
                let sid = self.session(*s);
                self.client(sid, Op::Delete(c::Delete { path: path(*p) }), lag)
            }
            AOp::Open(s, p, flags, mask) => {
                let sid = self.session(*s);
                let op = Op::Open(c::Open {
                    path: path(*p),
                    flags: *flags,
                    event_mask: *mask,
                    initial_attrs: vec![],
                });
                self.client(sid, op, lag)
            }
            AOp::Close(s, h) => {
                let sid = self.hsession(*s);
                let handle = self.handle(sid, *h);
                self.client(sid, Op::Close(c::Close { handle }), lag)
            }
            AOp::AttrSet(s, t, n, v) => {
                let sid = self.hsession(*s);
                let op = Op::AttrSet(c::AttrSet {
                    target: self.target(sid, t),
                    name: NAMES[n % NAMES.len()].into(),
                    value: VALUES[v % VALUES.len()].to_vec(),
                });
                self.client(sid, op, lag)
            }
            AOp::AttrDel(s, t, n) => {
                let sid = self.session(*s);
                let op = Op::AttrDel(c::AttrDel {
                    target: self.target(sid, t),
                    name: NAMES[n % NAMES.len()].into(),
                });
                self.client(sid, op, lag)
            }
            AOp::AttrIncr(s, t, n, d) => {
                let sid = self.hsession(*s);
                let op = Op::AttrIncr(c::AttrIncr {
                    target: self.target(sid, t),
                    name: NAMES[n % NAMES.len()].into(),
                    delta: *d,
                });
                self.client(sid, op, lag)
            }
            AOp::Lock(s, h, mode, try_lock) => {
                let sid = self.hsession(*s);
                let op = Op::Lock(c::Lock {
                    handle: self.handle(sid, *h),
                    mode: *mode,
                    try_lock: *try_lock,
                });
                self.client(sid, op, lag)
            }
            AOp::Release(s, h) => {
                let sid = self.hsession(*s);
                let handle = self.handle(sid, *h);
                self.client(sid, Op::Release(c::Release { handle }), lag)
            }
            AOp::GetSeq(s, h) => {
                let sid = self.hsession(*s);
                let handle = self.handle(sid, *h);
                self.client(sid, Op::GetSequencer(c::GetSequencer { handle }), lag)
            }
            AOp::AttrGet(s, t, n) => {
                let sid = self.session(*s);
                let op = Op::AttrGet(c::AttrGet {
                    target: self.target(sid, t),
                    name: NAMES[n % NAMES.len()].into(),
                });
                self.client(sid, op, lag)
            }
            AOp::Readdir(s, p) => {
                let sid = self.session(*s);
                self.client(sid, Op::Readdir(c::Readdir { path: path(*p) }), lag)
            }
        }
    }

    /// What must hold after every command.
    fn check(&self) {
        self.model.check();
        let want: Vec<(u64, u64)> = self
            .model
            .sessions
            .iter()
            .map(|(id, s)| (*id, s.lease))
            .collect();
        assert_eq!(self.sm.sessions(), want);
        for sid in 1..=self.model.last_sid {
            let (events, last) = match self.model.sessions.get(&sid) {
                Some(s) => (s.events.clone(), s.last_event),
                None => (vec![], 0),
            };
            let got = self.sm.events_after(sid, 0, usize::MAX);
            assert_eq!(got.events, events, "events of session {sid}");
            assert!(!got.lost);
            assert_eq!(self.sm.last_event_seq(sid), last);
            assert_eq!(
                self.sm.has_session(sid),
                self.model.sessions.contains_key(&sid)
            );
        }
        // Each live handle's lock as the machine sees it (the sequencer) matches the model.
        for (&h, mh) in &self.model.handles {
            let op = Op::GetSequencer(c::GetSequencer { handle: h });
            let got = self.sm.query(&Command {
                session: mh.sid,
                op: Some(op.clone()),
                ..Default::default()
            });
            assert_eq!(
                resp(&got),
                self.model.query(mh.sid, &op),
                "lock of handle {h}"
            );
        }
        // Ephemeral files exist exactly while the model says so (the model keeps them iff open).
        for p in PATHS {
            let got = self.sm.query(&Command {
                op: Some(Op::Exists(c::Exists {
                    path: p.to_string(),
                })),
                ..Default::default()
            });
            if valid(p) {
                let want = ok(Reply::Bool(self.model.nodes.contains_key(*p)));
                assert_eq!(resp(&got), want, "exists {p}");
            }
        }
        // The restore checks (holders and waiters are live handles on their node, an exclusive
        // holder is alone, ephemeral files are open) hold, and nothing is lost on the way.
        let back = StateMachine::restore(&self.sm.snapshot(), Limits::default()).expect("restore");
        assert_eq!(back, self.sm);
    }
}

fn run(ops: &[(AOp, u8)]) -> Harness {
    let mut h = Harness::new();
    let setup = [
        AOp::Create(10),
        AOp::Create(11),
        AOp::Mkdir(1, 0, false),
        AOp::Mkdir(1, 1, false),
    ];
    for a in &setup {
        h.step(a, 0);
    }
    for (a, lag) in ops {
        h.step(a, u64::from(*lag % 4));
        h.check();
    }
    h
}

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

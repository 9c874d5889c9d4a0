//! The generated commands (targets, ops) and the harness that applies each to the real
//! `StateMachine` and to the model, comparing answers, events, sessions and locks.

use super::*;

#[derive(Clone, Debug)]
pub(super) enum Tgt {
    Handle(usize),
    Path(usize),
}

#[derive(Clone, Debug)]
pub(super) enum AOp {
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

pub(super) fn tgt() -> impl Strategy<Value = Tgt> {
    prop_oneof![
        3 => any::<usize>().prop_map(Tgt::Handle),
        2 => any::<usize>().prop_map(Tgt::Path)
    ]
}

pub(super) fn open_flags() -> impl Strategy<Value = u32> {
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

pub(super) fn aop() -> impl Strategy<Value = AOp> {
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
pub(super) struct Harness {
    pub(super) sm: StateMachine,
    pub(super) model: Model,
    /// Per session: (last seq used, first_incomplete sent).
    pub(super) clients: BTreeMap<u64, (u64, u64)>,
    /// Client write commands applied, with their answers (for retries).
    pub(super) history: Vec<(Command, Response)>,
    /// Every write command applied, in order (for the determinism replay).
    pub(super) log: Vec<Command>,
    pub(super) sequencers: Vec<Sequencer>,
}

/// Mostly the few files where handles meet (so locks contend), sometimes any path.
pub(super) fn pick_path(i: usize) -> String {
    if i.is_multiple_of(3) {
        PATHS[(i / 3) % PATHS.len()].to_string()
    } else {
        PATHS[2 + (i / 3) % 3].to_string()
    }
}

pub(super) fn resp(r: &Response) -> Resp {
    (r.error_code(), r.reply.clone())
}

impl Harness {
    pub(super) fn new() -> Self {
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
    pub(super) fn session(&self, i: usize) -> u64 {
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
    pub(super) fn hsession(&self, i: usize) -> u64 {
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
    pub(super) fn handle(&self, sid: u64, i: usize) -> u64 {
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

    pub(super) fn target(&self, sid: u64, t: &Tgt) -> Option<Target> {
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

    pub(super) fn system(&mut self, op: Op) {
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

    pub(super) fn client(&mut self, sid: u64, op: Op, lag: u64) {
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

    pub(super) fn retry(&mut self, i: usize) {
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

    pub(super) fn step(&mut self, a: &AOp, lag: u64) {
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
    pub(super) fn check(&self) {
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

pub(super) fn run(ops: &[(AOp, u8)]) -> Harness {
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

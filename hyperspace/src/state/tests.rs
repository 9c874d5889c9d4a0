//! Unit tests of the state machine rules a random model test covers poorly: path checks,
//! dedupe, ephemeral files, deletion under open handles, counters, sequencers, event overflow
//! and snapshots.

use super::*;
use crate::command::{
    self as c, AckEvents, Attr, CloseSession, CreateSession, ExpireSession, LockStatus, Target,
};

/// A client of one session: numbers its requests like the real client does.
struct Client {
    sid: u64,
    seq: u64,
}

impl Client {
    fn new(sm: &mut StateMachine, nonce: u64) -> Self {
        let r = sm.apply(&Command {
            op: Some(Op::CreateSession(CreateSession {
                nonce,
                lease_ms: 1000,
            })),
            ..Default::default()
        });
        let Some(Reply::Session(sid)) = r.reply else {
            panic!("create_session: {r:?}");
        };
        Self { sid, seq: 0 }
    }

    fn cmd(&mut self, op: Op) -> Command {
        self.seq += 1;
        Command {
            session: self.sid,
            seq: self.seq,
            first_incomplete: self.seq,
            op: Some(op),
        }
    }

    fn run(&mut self, sm: &mut StateMachine, op: Op) -> Response {
        let cmd = self.cmd(op);
        if cmd.op.as_ref().is_some_and(|o| o.is_write()) {
            sm.apply(&cmd)
        } else {
            sm.query(&cmd)
        }
    }

    fn open(&mut self, sm: &mut StateMachine, path: &str, flags: u32, mask: u32) -> u64 {
        match self.run(sm, open_op(path, flags, mask)).reply {
            Some(Reply::Handle(h)) => h.handle,
            other => panic!("open {path}: {other:?}"),
        }
    }
}

fn open_op(path: &str, flags: u32, mask: u32) -> Op {
    Op::Open(c::Open {
        path: path.into(),
        flags,
        event_mask: mask,
        initial_attrs: vec![],
    })
}

fn mkdir(path: &str, parents: bool) -> Op {
    Op::Mkdir(c::Mkdir {
        path: path.into(),
        parents,
    })
}

fn del(path: &str) -> Op {
    Op::Delete(c::Delete { path: path.into() })
}

fn exists(sm: &StateMachine, path: &str) -> bool {
    let r = sm.query(&Command {
        op: Some(Op::Exists(c::Exists { path: path.into() })),
        ..Default::default()
    });
    r.reply == Some(Reply::Bool(true))
}

fn by_path(path: &str) -> Option<Target> {
    Some(Target {
        handle: 0,
        path: path.into(),
    })
}

fn by_handle(handle: u64) -> Option<Target> {
    Some(Target {
        handle,
        path: String::new(),
    })
}

fn lock_op(handle: u64, mode: LockMode, try_lock: bool) -> Op {
    Op::Lock(c::Lock {
        handle,
        mode: mode as i32,
        try_lock,
    })
}

fn code(r: &Response) -> Option<ErrorCode> {
    r.error_code()
}

fn kinds(sm: &StateMachine, sid: u64) -> Vec<(u64, u32, String)> {
    sm.events_after(sid, 0, usize::MAX)
        .events
        .into_iter()
        .map(|e| (e.handle, e.kind, e.name))
        .collect()
}

fn expire(sm: &mut StateMachine, sid: u64) -> Response {
    sm.apply(&Command {
        op: Some(Op::ExpireSession(ExpireSession { session: sid })),
        ..Default::default()
    })
}

#[test]
fn bad_paths_are_invalid_arguments_naming_the_path() {
    let mut sm = StateMachine::new(Limits {
        max_path_bytes: 16,
        ..Limits::default()
    });
    let mut a = Client::new(&mut sm, 1);
    for bad in [
        "",
        "x",
        "/a/",
        "//",
        "/a//b",
        "/a/./b",
        "/..",
        "/a\0",
        "/0123456789abcdef",
    ] {
        for op in [mkdir(bad, false), del(bad), open_op(bad, flags::CREATE, 0)] {
            let r = a.run(&mut sm, op);
            assert_eq!(code(&r), Some(ErrorCode::InvalidArgument), "{bad:?}");
            let msg = r.error.map(|e| e.message).unwrap_or_default();
            assert!(msg.contains(&format!("{:?}", bad)), "{bad:?}: {msg}");
        }
    }
    assert_eq!(
        code(&a.run(&mut sm, del("/"))),
        Some(ErrorCode::InvalidArgument)
    );
    assert_eq!(sm.tree.nodes.len(), 1);
}

#[test]
fn mkdir_and_delete_rules() {
    let mut sm = StateMachine::new(Limits::default());
    let mut a = Client::new(&mut sm, 1);
    assert_eq!(
        code(&a.run(&mut sm, mkdir("/a/b", false))),
        Some(ErrorCode::NotFound)
    );
    assert_eq!(a.run(&mut sm, mkdir("/a/b", true)), Response::done());
    assert_eq!(a.run(&mut sm, mkdir("/a/b", true)), Response::done());
    assert_eq!(
        code(&a.run(&mut sm, mkdir("/a/b", false))),
        Some(ErrorCode::AlreadyExists)
    );
    assert_eq!(
        code(&a.run(&mut sm, mkdir("/", false))),
        Some(ErrorCode::AlreadyExists)
    );
    a.open(&mut sm, "/a/f", flags::CREATE, 0);
    assert_eq!(
        code(&a.run(&mut sm, mkdir("/a/f/x", false))),
        Some(ErrorCode::NotDirectory)
    );
    assert_eq!(
        code(&a.run(&mut sm, mkdir("/a/f/x/y", true))),
        Some(ErrorCode::NotDirectory)
    );
    assert_eq!(
        code(&a.run(&mut sm, mkdir("/a/f", true))),
        Some(ErrorCode::AlreadyExists)
    );
    assert_eq!(code(&a.run(&mut sm, del("/a"))), Some(ErrorCode::NotEmpty));
    assert_eq!(code(&a.run(&mut sm, del("/zz"))), Some(ErrorCode::NotFound));
    let r = a.run(&mut sm, Op::Readdir(c::Readdir { path: "/a".into() }));
    let Some(Reply::Dir(d)) = r.reply else {
        panic!("{r:?}")
    };
    let names: Vec<_> = d
        .entries
        .iter()
        .map(|e| (e.name.as_str(), e.is_dir))
        .collect();
    assert_eq!(names, vec![("b", true), ("f", false)]);
    let r = a.run(
        &mut sm,
        Op::Readdir(c::Readdir {
            path: "/a/f".into(),
        }),
    );
    assert_eq!(code(&r), Some(ErrorCode::NotDirectory));
}

#[test]
fn retry_gets_the_cached_answer_and_changes_nothing() {
    let mut sm = StateMachine::new(Limits::default());
    let mut a = Client::new(&mut sm, 1);
    let first = a.cmd(open_op("/f", flags::CREATE | flags::EXCL, 0));
    let r1 = sm.apply(&first);
    assert!(r1.error.is_none());
    let snap = sm.snapshot();
    // Even an error is cached: the second attempt would otherwise say AlreadyExists.
    assert_eq!(sm.apply(&first), r1);
    assert_eq!(sm.snapshot(), snap);
    let failing = a.cmd(mkdir("/f", false));
    let e1 = sm.apply(&failing);
    assert_eq!(code(&e1), Some(ErrorCode::AlreadyExists));
    let mut d = a.cmd(del("/f"));
    d.first_incomplete = failing.seq;
    assert_eq!(sm.apply(&d), Response::done());
    // The retry must not be applied again even though it would now succeed.
    assert_eq!(sm.apply(&failing), e1);
    assert!(!exists(&sm, "/f"));
}

#[test]
fn stale_inflight_and_header_rules() {
    let mut sm = StateMachine::new(Limits {
        max_inflight_per_session: 4,
        ..Limits::default()
    });
    let a = Client::new(&mut sm, 1);
    let cmd = |seq, fi, op| Command {
        session: a.sid,
        seq,
        first_incomplete: fi,
        op: Some(op),
    };
    let noop = || Op::Noop(c::Noop {});
    assert_eq!(sm.apply(&cmd(5, 2, noop())), Response::done());
    assert_eq!(sm.apply(&cmd(3, 2, noop())), Response::done());
    let snap = sm.snapshot();
    // seq 1 < first_incomplete 2 and not cached.
    assert_eq!(
        code(&sm.apply(&cmd(1, 1, noop()))),
        Some(ErrorCode::StaleRequest)
    );
    // 6 - 2 >= 4.
    assert_eq!(
        code(&sm.apply(&cmd(6, 2, noop()))),
        Some(ErrorCode::LimitExceeded)
    );
    assert_eq!(
        code(&sm.apply(&cmd(6, 7, noop()))),
        Some(ErrorCode::InvalidArgument)
    );
    assert_eq!(sm.snapshot(), snap);
    // Advancing first_incomplete prunes the cache: 3 becomes stale, 5 stays cached.
    assert_eq!(sm.apply(&cmd(6, 4, noop())), Response::done());
    assert_eq!(
        code(&sm.apply(&cmd(3, 3, noop()))),
        Some(ErrorCode::StaleRequest)
    );
    assert_eq!(sm.apply(&cmd(5, 4, mkdir("/x", false))), Response::done());
    assert!(!exists(&sm, "/x"));
    // A session that does not exist, and session-less commands that need one.
    let r = sm.apply(&Command {
        session: 99,
        seq: 1,
        first_incomplete: 1,
        op: Some(noop()),
    });
    assert_eq!(code(&r), Some(ErrorCode::SessionExpired));
    let r = sm.apply(&Command {
        op: Some(mkdir("/y", false)),
        ..Default::default()
    });
    assert_eq!(code(&r), Some(ErrorCode::SessionExpired));
    let r = sm.apply(&Command {
        op: Some(noop()),
        ..Default::default()
    });
    assert_eq!(r, Response::done());
    // Reads and writes in the wrong entry point, and a command without an op.
    let r = sm.apply(&Command {
        op: Some(Op::Exists(c::Exists { path: "/".into() })),
        ..Default::default()
    });
    assert_eq!(code(&r), Some(ErrorCode::InvalidArgument));
    assert_eq!(
        code(&sm.query(&cmd(9, 9, noop()))),
        Some(ErrorCode::InvalidArgument)
    );
    assert_eq!(
        code(&sm.apply(&Command::default())),
        Some(ErrorCode::InvalidArgument)
    );
}

#[test]
fn sessions_ids_nonces_and_listing() {
    let mut sm = StateMachine::new(Limits::default());
    let mut a = Client::new(&mut sm, 7);
    assert_eq!(a.sid, 1);
    assert_eq!(Client::new(&mut sm, 7).sid, 1, "same nonce, same session");
    let mut b = Client::new(&mut sm, 8);
    assert_eq!(b.sid, 2);
    a.open(&mut sm, "/", 0, 0);
    a.open(&mut sm, "/", 0, 0);
    let r = b.run(&mut sm, Op::ListSessions(c::ListSessions {}));
    let Some(Reply::Sessions(s)) = r.reply else {
        panic!("{r:?}")
    };
    let got: Vec<_> = s.sessions.iter().map(|s| (s.id, s.handles)).collect();
    assert_eq!(got, vec![(1, 2), (2, 0)]);
    assert_eq!(
        a.run(&mut sm, Op::CloseSession(CloseSession {})),
        Response::done()
    );
    assert_eq!(code(&expire(&mut sm, 1)), Some(ErrorCode::SessionExpired));
    assert!(sm.handles.is_empty());
    assert_eq!(sm.sessions(), vec![(2, 1000)]);
    // The nonce of a dead session may be used again, for a new id.
    assert_eq!(Client::new(&mut sm, 7).sid, 3);
    let ack = |s| Command {
        op: Some(Op::AckEvents(AckEvents {
            session: s,
            upto: 1,
        })),
        ..Default::default()
    };
    assert_eq!(code(&sm.apply(&ack(1))), Some(ErrorCode::SessionExpired));
    assert_eq!(sm.apply(&ack(2)), Response::done());
}

#[test]
fn ephemeral_file_goes_with_its_last_handle() {
    let mut sm = StateMachine::new(Limits::default());
    let mut a = Client::new(&mut sm, 1);
    let mut b = Client::new(&mut sm, 2);
    let watch = b.open(&mut sm, "/", 0, event_mask::ALL);
    let h1 = a.open(&mut sm, "/t", flags::CREATE | flags::TEMP, 0);
    let h2 = b.open(&mut sm, "/t", 0, 0);
    assert_eq!(
        a.run(&mut sm, Op::Close(c::Close { handle: h1 })),
        Response::done()
    );
    assert!(exists(&sm, "/t"), "b still has it open");
    assert_eq!(
        b.run(&mut sm, Op::Close(c::Close { handle: h2 })),
        Response::done()
    );
    assert!(!exists(&sm, "/t"));
    let ev = kinds(&sm, b.sid);
    assert_eq!(
        ev,
        vec![
            (watch, event_mask::CHILD_NODE_ADDED, "t".to_string()),
            (watch, event_mask::CHILD_NODE_REMOVED, "t".to_string())
        ]
    );
    // On expiry of the session holding the last handle.
    a.open(&mut sm, "/t2", flags::CREATE | flags::TEMP, 0);
    a.open(&mut sm, "/t2", 0, 0);
    assert_eq!(expire(&mut sm, a.sid), Response::done());
    assert!(!exists(&sm, "/t2"));
    assert_eq!(kinds(&sm, b.sid).len(), 4);
    // TEMP without CREATE is refused; TEMP on an existing file does not make it ephemeral.
    let r = b.run(&mut sm, open_op("/p", flags::TEMP, 0));
    assert_eq!(code(&r), Some(ErrorCode::InvalidArgument));
    let p = b.open(&mut sm, "/p", flags::CREATE, 0);
    let q = b.open(&mut sm, "/p", flags::CREATE | flags::TEMP, 0);
    b.run(&mut sm, Op::Close(c::Close { handle: p }));
    b.run(&mut sm, Op::Close(c::Close { handle: q }));
    assert!(exists(&sm, "/p"));
}

#[test]
fn delete_kills_open_handles_and_their_locks() {
    let mut sm = StateMachine::new(Limits::default());
    let mut a = Client::new(&mut sm, 1);
    let mut b = Client::new(&mut sm, 2);
    let ha = a.open(&mut sm, "/f", flags::CREATE | flags::LOCK, 0);
    let hb = b.open(&mut sm, "/f", flags::LOCK, event_mask::ALL);
    let r = a.run(&mut sm, lock_op(ha, LockMode::Exclusive, false));
    assert!(r.error.is_none());
    let r = b.run(&mut sm, lock_op(hb, LockMode::Shared, false));
    assert!(matches!(r.reply, Some(Reply::Lock(l)) if l.status == LockStatus::Pending as i32));
    let watch = b.open(&mut sm, "/", 0, event_mask::CHILD_NODE_REMOVED);
    assert_eq!(a.run(&mut sm, del("/f")), Response::done());
    for op in [
        Op::Release(c::Release { handle: ha }),
        Op::AttrSet(c::AttrSet {
            target: by_handle(ha),
            name: "x".into(),
            value: vec![],
        }),
        lock_op(ha, LockMode::Shared, true),
    ] {
        assert_eq!(code(&a.run(&mut sm, op)), Some(ErrorCode::BadHandle));
    }
    let r = a.run(&mut sm, Op::GetSequencer(c::GetSequencer { handle: ha }));
    assert_eq!(code(&r), Some(ErrorCode::BadHandle));
    // A re-created file is a new node: the dead handles stay dead, the old waiter gets nothing.
    a.open(&mut sm, "/f", flags::CREATE | flags::LOCK, 0);
    assert_eq!(
        a.run(&mut sm, Op::Close(c::Close { handle: ha })),
        Response::done()
    );
    assert_eq!(
        code(&a.run(&mut sm, Op::Close(c::Close { handle: ha }))),
        Some(ErrorCode::BadHandle)
    );
    assert_eq!(
        b.run(&mut sm, Op::Close(c::Close { handle: hb })),
        Response::done()
    );
    let ev = kinds(&sm, b.sid);
    assert_eq!(
        ev,
        vec![
            (hb, event_mask::LOCK_ACQUIRED, String::new()),
            (watch, event_mask::CHILD_NODE_REMOVED, "f".to_string())
        ]
    );
    // Another session's handle is a bad handle.
    let hb2 = b.open(&mut sm, "/f", 0, 0);
    let r = a.run(&mut sm, Op::Close(c::Close { handle: hb2 }));
    assert_eq!(code(&r), Some(ErrorCode::BadHandle));
}

#[test]
fn attributes_and_incr_parsing() {
    let mut sm = StateMachine::new(Limits {
        max_attr_value_bytes: 8,
        ..Limits::default()
    });
    let mut a = Client::new(&mut sm, 1);
    let h = a.open(
        &mut sm,
        "/f",
        flags::CREATE,
        event_mask::ATTR_SET | event_mask::ATTR_DEL,
    );
    let incr = |t: Option<Target>, name: &str, delta| {
        Op::AttrIncr(c::AttrIncr {
            target: t,
            name: name.into(),
            delta,
        })
    };
    let set = |name: &str, v: &[u8]| {
        Op::AttrSet(c::AttrSet {
            target: by_path("/f"),
            name: name.into(),
            value: v.to_vec(),
        })
    };
    assert_eq!(
        a.run(&mut sm, incr(by_handle(h), "n", 5)).reply,
        Some(Reply::Int(5))
    );
    assert_eq!(
        a.run(&mut sm, incr(by_path("/f"), "n", -7)).reply,
        Some(Reply::Int(-2))
    );
    for (v, ok) in [
        (&b"12"[..], Some(13)),
        (b"+4", Some(5)),
        (b"-0", Some(1)),
        (b"", None),
        (b" 1", None),
        (b"1.5", None),
        (b"0x10", None),
        (b"\xff", None),
    ] {
        a.run(&mut sm, set("m", v));
        let r = a.run(&mut sm, incr(by_path("/f"), "m", 1));
        match ok {
            Some(n) => assert_eq!(r.reply, Some(Reply::Int(n)), "{v:?}"),
            None => assert_eq!(code(&r), Some(ErrorCode::InvalidArgument), "{v:?}"),
        }
    }
    a.run(&mut sm, set("m", i64::MAX.to_string().as_bytes()));
    assert_eq!(
        code(&a.run(&mut sm, set("m", b"123456789"))),
        Some(ErrorCode::LimitExceeded)
    );
    let r = a.run(&mut sm, incr(by_path("/f"), "m", 1));
    assert_eq!(code(&r), Some(ErrorCode::InvalidArgument));
    let get = |name: &str| {
        Op::AttrGet(c::AttrGet {
            target: by_path("/f"),
            name: name.into(),
        })
    };
    let r = a.run(&mut sm, get("n"));
    assert_eq!(
        r.reply,
        Some(Reply::Value(ValueReply {
            value: Some(b"-2".to_vec())
        }))
    );
    let r = a.run(&mut sm, get("nope"));
    assert_eq!(r.reply, Some(Reply::Value(ValueReply { value: None })));
    let delete = |name: &str| {
        Op::AttrDel(c::AttrDel {
            target: by_path("/f"),
            name: name.into(),
        })
    };
    assert_eq!(a.run(&mut sm, delete("n")), Response::done());
    assert_eq!(
        code(&a.run(&mut sm, delete("n"))),
        Some(ErrorCode::NotFound)
    );
    assert_eq!(
        code(&a.run(&mut sm, set("", b""))),
        Some(ErrorCode::InvalidArgument)
    );
    let r = a.run(
        &mut sm,
        Op::AttrList(c::AttrList {
            target: by_path("/f"),
        }),
    );
    assert_eq!(
        r.reply,
        Some(Reply::Names(NamesReply {
            names: vec!["m".into()]
        }))
    );
    // The writer's own handle hears of its writes.
    let ev = kinds(&sm, a.sid);
    assert!(ev.iter().all(|e| e.0 == h));
    assert_eq!(ev.last().map(|e| e.1), Some(event_mask::ATTR_DEL));
    // Initial attributes and their checks.
    let mut op = open_op("/g", flags::CREATE, 0);
    if let Op::Open(o) = &mut op {
        o.initial_attrs = vec![Attr {
            name: "a".into(),
            value: b"1".to_vec(),
        }];
    }
    a.run(&mut sm, op);
    let r = a.run(
        &mut sm,
        Op::AttrList(c::AttrList {
            target: by_path("/g"),
        }),
    );
    assert_eq!(
        r.reply,
        Some(Reply::Names(NamesReply {
            names: vec!["a".into()]
        }))
    );
}

#[test]
fn locks_queue_events_and_sequencers() {
    let mut sm = StateMachine::new(Limits::default());
    let mut a = Client::new(&mut sm, 1);
    let mut b = Client::new(&mut sm, 2);
    let lk = flags::CREATE | flags::LOCK;
    let ha = a.open(
        &mut sm,
        "/l",
        lk,
        event_mask::LOCK_ACQUIRED | event_mask::LOCK_RELEASED,
    );
    let hb = b.open(
        &mut sm,
        "/l",
        lk,
        event_mask::LOCK_ACQUIRED | event_mask::LOCK_RELEASED,
    );
    let nolock = b.open(&mut sm, "/l", 0, 0);
    assert_eq!(
        code(&b.run(&mut sm, lock_op(nolock, LockMode::Shared, false))),
        Some(ErrorCode::PermissionDenied)
    );
    assert_eq!(
        code(&b.run(&mut sm, lock_op(hb, LockMode::None, false))),
        Some(ErrorCode::InvalidArgument)
    );
    let granted = |r: Response| match r.reply {
        Some(Reply::Lock(l)) => (l.status, l.generation),
        _ => panic!("{r:?}"),
    };
    assert_eq!(
        granted(a.run(&mut sm, lock_op(ha, LockMode::Exclusive, false))),
        (0, 1)
    );
    assert_eq!(
        code(&a.run(&mut sm, lock_op(ha, LockMode::Shared, true))),
        Some(ErrorCode::LockState)
    );
    let seq_op = |h| Op::GetSequencer(c::GetSequencer { handle: h });
    let Some(Reply::Sequencer(s1)) = a.run(&mut sm, seq_op(ha)).reply else {
        panic!()
    };
    assert_eq!(
        s1,
        Sequencer {
            path: "/l".into(),
            mode: LockMode::Exclusive as i32,
            generation: 1
        }
    );
    assert_eq!(
        code(&b.run(&mut sm, seq_op(hb))),
        Some(ErrorCode::LockState)
    );
    let check = |sm: &StateMachine, s: &Sequencer| {
        sm.query(&Command {
            op: Some(Op::CheckSequencer(c::CheckSequencer {
                sequencer: Some(s.clone()),
            })),
            ..Default::default()
        })
        .reply
            == Some(Reply::Bool(true))
    };
    assert!(check(&sm, &s1));
    assert_eq!(
        granted(b.run(&mut sm, lock_op(hb, LockMode::Shared, true))),
        (1, 0)
    );
    assert_eq!(
        granted(b.run(&mut sm, lock_op(hb, LockMode::Shared, false))),
        (2, 0)
    );
    assert_eq!(
        a.run(&mut sm, Op::Release(c::Release { handle: ha })),
        Response::done()
    );
    assert!(!check(&sm, &s1), "released");
    let Some(Reply::Sequencer(s2)) = b.run(&mut sm, seq_op(hb)).reply else {
        panic!()
    };
    assert_eq!((s2.mode, s2.generation), (LockMode::Shared as i32, 2));
    assert!(check(&sm, &s2));
    // b got LOCK_GRANTED though its mask lacks it; a saw the release and b's acquisition.
    let ev = sm.events_after(b.sid, 0, 10).events;
    assert_eq!(ev.len(), 3);
    assert_eq!(
        (ev[0].kind, ev[0].generation),
        (event_mask::LOCK_ACQUIRED, 1)
    );
    assert_eq!((ev[1].kind, ev[1].handle), (event_mask::LOCK_RELEASED, hb));
    assert_eq!(
        (ev[2].kind, ev[2].generation),
        (event_mask::LOCK_GRANTED, 2)
    );
    let ev = kinds(&sm, a.sid);
    assert_eq!(
        ev.iter().map(|e| e.1).collect::<Vec<_>>(),
        vec![event_mask::LOCK_RELEASED, event_mask::LOCK_ACQUIRED]
    );
    // Release by expiry, regrant to a: a new generation, the old sequencers fail.
    assert_eq!(
        granted(a.run(&mut sm, lock_op(ha, LockMode::Exclusive, false))),
        (2, 0)
    );
    expire(&mut sm, b.sid);
    let Some(Reply::Sequencer(s3)) = a.run(&mut sm, seq_op(ha)).reply else {
        panic!()
    };
    assert_eq!(s3.generation, 3);
    assert!(check(&sm, &s3) && !check(&sm, &s2) && !check(&sm, &s1));
    assert_eq!(
        code(&a.run(&mut sm, Op::Release(c::Release { handle: 12345 }))),
        Some(ErrorCode::BadHandle)
    );
    a.run(&mut sm, Op::Release(c::Release { handle: ha }));
    assert_eq!(
        code(&a.run(&mut sm, Op::Release(c::Release { handle: ha }))),
        Some(ErrorCode::LockState)
    );
}

#[test]
fn event_overflow_reports_lost_events() {
    let mut sm = StateMachine::new(Limits {
        max_events_per_session: 3,
        ..Limits::default()
    });
    let mut a = Client::new(&mut sm, 1);
    a.open(&mut sm, "/f", flags::CREATE, event_mask::ATTR_SET);
    for i in 0..5 {
        a.run(
            &mut sm,
            Op::AttrSet(c::AttrSet {
                target: by_path("/f"),
                name: format!("a{i}"),
                value: vec![],
            }),
        );
    }
    assert_eq!(sm.last_event_seq(a.sid), 5);
    let b = sm.events_after(a.sid, 0, 10);
    assert!(b.lost);
    assert_eq!(
        b.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![3, 4, 5]
    );
    assert!(sm.events_after(a.sid, 1, 10).lost);
    let b = sm.events_after(a.sid, 2, 1);
    assert!(!b.lost);
    assert_eq!(b.events.len(), 1);
    let ack = Command {
        op: Some(Op::AckEvents(AckEvents {
            session: a.sid,
            upto: 4,
        })),
        ..Default::default()
    };
    sm.apply(&ack);
    assert_eq!(sm.events_after(a.sid, 0, 10).events.len(), 1);
    assert_eq!(sm.last_event_seq(a.sid), 5);
    assert_eq!(sm.last_event_seq(99), 0);
    assert_eq!(sm.events_after(99, 0, 10), EventBatch::default());
}

#[test]
fn handle_limit() {
    let mut sm = StateMachine::new(Limits {
        max_handles_per_session: 2,
        ..Limits::default()
    });
    let mut a = Client::new(&mut sm, 1);
    a.open(&mut sm, "/", 0, 0);
    a.open(&mut sm, "/", 0, 0);
    let r = a.run(&mut sm, open_op("/new", flags::CREATE, 0));
    assert_eq!(code(&r), Some(ErrorCode::LimitExceeded));
    assert!(!exists(&sm, "/new"));
    let r = a.run(&mut sm, open_op("/", 0x100, 0));
    assert_eq!(code(&r), Some(ErrorCode::InvalidArgument));
}

/// A small deterministic generator (no dependency on the proptest runner here).
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Applies `n` random commands of a few sessions to a fresh state machine.
fn random_state(seed: u64, n: usize) -> StateMachine {
    let mut rng = Rng(seed | 1);
    let mut sm = StateMachine::new(Limits {
        max_events_per_session: 5,
        ..Limits::default()
    });
    let mut clients: Vec<Client> = (1..=3).map(|i| Client::new(&mut sm, i)).collect();
    let paths = ["/d", "/d/a", "/d/b", "/e", "/e/x"];
    for _ in 0..n {
        let path = paths[rng.next(paths.len() as u64) as usize].to_string();
        let h = rng.next(sm.last_handle + 2);
        let op = match rng.next(10) {
            0 => mkdir(&path, rng.next(2) == 0),
            1 => del(&path),
            2 | 3 => open_op(
                &path,
                (rng.next(64) as u32) & !flags::EXCL,
                rng.next(128) as u32,
            ),
            4 => Op::Close(c::Close { handle: h }),
            5 => lock_op(
                h,
                LockMode::try_from(rng.next(3) as i32).unwrap_or(LockMode::None),
                rng.next(2) == 0,
            ),
            6 => Op::Release(c::Release { handle: h }),
            7 => Op::AttrIncr(c::AttrIncr {
                target: by_handle(h),
                name: "n".into(),
                delta: 1,
            }),
            8 => Op::AttrSet(c::AttrSet {
                target: by_path(&path),
                name: format!("k{}", rng.next(3)),
                value: vec![1; rng.next(4) as usize],
            }),
            _ => {
                let i = rng.next(clients.len() as u64) as usize;
                let sid = clients[i].sid;
                expire(&mut sm, sid);
                clients[i] = Client::new(&mut sm, 100 + rng.next(1000));
                continue;
            }
        };
        let i = rng.next(clients.len() as u64) as usize;
        // Keep a few answers cached: first_incomplete lags.
        let mut cmd = clients[i].cmd(op);
        cmd.first_incomplete = cmd.seq.saturating_sub(rng.next(3));
        sm.apply(&cmd);
    }
    sm
}

#[test]
fn snapshot_restore_round_trip() {
    let fresh = StateMachine::new(Limits::default());
    let back = StateMachine::restore(&fresh.snapshot(), Limits::default()).expect("restore");
    assert_eq!(back, fresh);
    for seed in 1..40 {
        let sm = random_state(seed, 300);
        let bytes = sm.snapshot();
        let back = StateMachine::restore(&bytes, sm.limits().clone()).expect("restore");
        assert_eq!(back, sm, "seed {seed}");
        assert_eq!(back.snapshot(), bytes);
        assert_eq!(random_state(seed, 300).snapshot(), bytes, "deterministic");
    }
}

#[test]
fn restore_rejects_garbage_without_panicking() {
    let sm = random_state(7, 300);
    let bytes = sm.snapshot();
    assert!(!sm.handles.is_empty() && !sm.sessions.is_empty());
    assert!(matches!(
        StateMachine::restore(b"", Limits::default()),
        Err(StateError::BadMagic)
    ));
    assert!(StateMachine::restore(b"HSSTATE\x02", Limits::default()).is_err());
    // Every proper truncation is refused.
    for len in 0..bytes.len() {
        assert!(
            StateMachine::restore(&bytes[..len], Limits::default()).is_err(),
            "truncated at {len} of {}",
            bytes.len()
        );
    }
    let mut b = bytes.clone();
    let last = b.len() - 1;
    b[last] ^= 1;
    assert!(matches!(
        StateMachine::restore(&b, Limits::default()),
        Err(StateError::Checksum { .. })
    ));
    // Corrupted bodies with a valid checksum get past the frame: they may decode into
    // something, but never panic, and what is accepted must be a usable state.
    let body = &bytes[12..];
    let mut rng = Rng(99);
    let mut accepted = 0;
    for _ in 0..3000 {
        let mut b = body.to_vec();
        for _ in 0..=rng.next(3) {
            let i = rng.next(b.len() as u64) as usize;
            b[i] = rng.next(256) as u8;
        }
        if let Ok(mut s) = StateMachine::restore(&snapshot::frame(&b), Limits::default()) {
            accepted += 1;
            let _ = s.snapshot();
            for sid in 1..=s.last_session {
                expire(&mut s, sid);
            }
        }
    }
    assert!(
        accepted < 3000,
        "some corruptions must be caught by the checks"
    );
    let mut junk = Rng(5);
    for len in 0..300 {
        let b: Vec<u8> = (0..len).map(|_| junk.next(256) as u8).collect();
        let _ = StateMachine::restore(&snapshot::frame(&b), Limits::default());
        let _ = StateMachine::restore(&b, Limits::default());
    }
}

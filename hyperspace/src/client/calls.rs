//! The calls on a session: namespace, attributes, locks, sequencers, status.

use tokio::sync::oneshot;

use crate::command::{self, ErrorCode, LockMode, LockStatus, Op, Reply};

use super::ClientError;
use super::channel::AttemptError;
use super::session::Hyperspace;
use crate::service::StatusReply;

/// Names a node: by path or by open handle.
#[derive(Debug, Clone)]
pub enum At {
    Path(String),
    Handle(u64),
}

impl From<&str> for At {
    fn from(p: &str) -> Self {
        At::Path(p.to_string())
    }
}

impl From<String> for At {
    fn from(p: String) -> Self {
        At::Path(p)
    }
}

impl From<u64> for At {
    fn from(h: u64) -> Self {
        At::Handle(h)
    }
}

impl At {
    fn target(self) -> Option<command::Target> {
        Some(match self {
            At::Path(path) => command::Target { handle: 0, path },
            At::Handle(handle) => command::Target {
                handle,
                path: String::new(),
            },
        })
    }
}

impl Hyperspace {
    pub async fn mkdir(&self, path: &str) -> Result<(), ClientError> {
        self.done(Op::Mkdir(command::Mkdir {
            path: path.into(),
            parents: false,
        }))
        .await
    }

    /// Creates the directory and any missing parents; succeeds if it exists.
    pub async fn mkdirs(&self, path: &str) -> Result<(), ClientError> {
        self.done(Op::Mkdir(command::Mkdir {
            path: path.into(),
            parents: true,
        }))
        .await
    }

    pub async fn delete(&self, path: &str) -> Result<(), ClientError> {
        self.done(Op::Delete(command::Delete { path: path.into() }))
            .await
    }

    pub async fn exists(&self, path: &str) -> Result<bool, ClientError> {
        match self
            .request(Op::Exists(command::Exists { path: path.into() }))
            .await?
        {
            Reply::Bool(b) => Ok(b),
            _ => Err(ClientError::Protocol("exists")),
        }
    }

    pub async fn readdir(&self, path: &str) -> Result<Vec<command::DirEntry>, ClientError> {
        match self
            .request(Op::Readdir(command::Readdir { path: path.into() }))
            .await?
        {
            Reply::Dir(d) => Ok(d.entries),
            _ => Err(ClientError::Protocol("readdir")),
        }
    }

    /// Opens a handle; returns it and whether this open created the file.
    pub async fn open_with(
        &self,
        path: &str,
        flags: u32,
        event_mask: u32,
        initial_attrs: Vec<command::Attr>,
    ) -> Result<(u64, bool), ClientError> {
        match self
            .request(Op::Open(command::Open {
                path: path.into(),
                flags,
                event_mask,
                initial_attrs,
            }))
            .await?
        {
            Reply::Handle(h) => Ok((h.handle, h.created)),
            _ => Err(ClientError::Protocol("open")),
        }
    }

    pub async fn open(&self, path: &str, flags: u32, event_mask: u32) -> Result<u64, ClientError> {
        Ok(self.open_with(path, flags, event_mask, Vec::new()).await?.0)
    }

    pub async fn close(&self, handle: u64) -> Result<(), ClientError> {
        self.done(Op::Close(command::Close { handle })).await
    }

    pub async fn attr_set(
        &self,
        at: impl Into<At>,
        name: &str,
        value: impl Into<Vec<u8>>,
    ) -> Result<(), ClientError> {
        self.done(Op::AttrSet(command::AttrSet {
            target: at.into().target(),
            name: name.into(),
            value: value.into(),
        }))
        .await
    }

    pub async fn attr_get(
        &self,
        at: impl Into<At>,
        name: &str,
    ) -> Result<Option<Vec<u8>>, ClientError> {
        match self
            .request(Op::AttrGet(command::AttrGet {
                target: at.into().target(),
                name: name.into(),
            }))
            .await?
        {
            Reply::Value(v) => Ok(v.value),
            _ => Err(ClientError::Protocol("attr_get")),
        }
    }

    pub async fn attr_del(&self, at: impl Into<At>, name: &str) -> Result<(), ClientError> {
        self.done(Op::AttrDel(command::AttrDel {
            target: at.into().target(),
            name: name.into(),
        }))
        .await
    }

    pub async fn attr_list(&self, at: impl Into<At>) -> Result<Vec<String>, ClientError> {
        match self
            .request(Op::AttrList(command::AttrList {
                target: at.into().target(),
            }))
            .await?
        {
            Reply::Names(n) => Ok(n.names),
            _ => Err(ClientError::Protocol("attr_list")),
        }
    }

    /// Adds `delta` to a decimal attribute atomically and returns the new value.
    pub async fn attr_incr(
        &self,
        at: impl Into<At>,
        name: &str,
        delta: i64,
    ) -> Result<i64, ClientError> {
        match self
            .request(Op::AttrIncr(command::AttrIncr {
                target: at.into().target(),
                name: name.into(),
                delta,
            }))
            .await?
        {
            Reply::Int(v) => Ok(v),
            _ => Err(ClientError::Protocol("attr_incr")),
        }
    }

    /// Takes a lock, waiting as long as it takes (or until the session ends); returns the lock
    /// generation.
    pub async fn lock(&self, handle: u64, mode: LockMode) -> Result<u64, ClientError> {
        let (tx, mut rx) = oneshot::channel();
        {
            let mut waiters = self.inner.lock_waiters.lock();
            if waiters.contains_key(&handle) {
                return Err(ClientError::Hyperspace {
                    op: "lock",
                    code: ErrorCode::LockState,
                    message: format!("handle {handle} already waits for a lock"),
                });
            }
            waiters.insert(handle, tx);
        }
        let reply = self
            .request(Op::Lock(command::Lock {
                handle,
                mode: mode as i32,
                try_lock: false,
            }))
            .await;
        let reply = match reply {
            Ok(Reply::Lock(l)) => l,
            Ok(_) => {
                self.inner.lock_waiters.lock().remove(&handle);
                return Err(ClientError::Protocol("lock"));
            }
            Err(e) => {
                self.inner.lock_waiters.lock().remove(&handle);
                // The request may have been applied (queued or granted) without our hearing:
                // withdraw it, so the session does not hold a lock it does not know of. If this
                // fails too, the next lock on the handle answers LockState.
                if matches!(e, ClientError::Unavailable { .. }) {
                    let _ = self.release(handle).await;
                }
                return Err(e);
            }
        };
        match LockStatus::try_from(reply.status) {
            Ok(LockStatus::Granted) => {
                self.inner.lock_waiters.lock().remove(&handle);
                Ok(reply.generation)
            }
            Ok(LockStatus::Pending) => loop {
                // The grant comes as an event; poll too, because an event can be lost (queue
                // overflow) and a request can vanish without one (its node deleted). Either
                // way the answer is confirmed by a linearizable read of the handle's lock: a
                // LOCK_GRANTED event can be a late one from an earlier request on this handle.
                let woke = tokio::time::timeout(self.inner.options.lock_poll, &mut rx).await;
                if let Ok(Err(_)) = woke {
                    return Err(ClientError::SessionExpired(self.inner.session));
                }
                match self.sequencer(handle).await {
                    Ok(seq) => {
                        self.inner.lock_waiters.lock().remove(&handle);
                        return Ok(seq.generation);
                    }
                    Err(e) if e.code() == Some(ErrorCode::LockState) => {
                        if woke.is_ok() {
                            // A stale grant consumed the waiter: wait for the real one.
                            let (tx, new_rx) = oneshot::channel();
                            self.inner.lock_waiters.lock().insert(handle, tx);
                            rx = new_rx;
                        }
                    }
                    Err(e) => {
                        self.inner.lock_waiters.lock().remove(&handle);
                        return Err(e);
                    }
                }
            },
            _ => {
                self.inner.lock_waiters.lock().remove(&handle);
                Err(ClientError::Protocol("lock"))
            }
        }
    }

    /// Takes a lock if it is free now: `Some(generation)`, or `None` when it is busy.
    pub async fn try_lock(&self, handle: u64, mode: LockMode) -> Result<Option<u64>, ClientError> {
        match self
            .request(Op::Lock(command::Lock {
                handle,
                mode: mode as i32,
                try_lock: true,
            }))
            .await?
        {
            Reply::Lock(l) if l.status == LockStatus::Granted as i32 => Ok(Some(l.generation)),
            Reply::Lock(l) if l.status == LockStatus::Busy as i32 => Ok(None),
            _ => Err(ClientError::Protocol("try_lock")),
        }
    }

    pub async fn release(&self, handle: u64) -> Result<(), ClientError> {
        self.done(Op::Release(command::Release { handle })).await
    }

    pub async fn sequencer(&self, handle: u64) -> Result<command::Sequencer, ClientError> {
        match self
            .request(Op::GetSequencer(command::GetSequencer { handle }))
            .await?
        {
            Reply::Sequencer(s) => Ok(s),
            _ => Err(ClientError::Protocol("get_sequencer")),
        }
    }

    pub async fn check_sequencer(
        &self,
        sequencer: command::Sequencer,
    ) -> Result<bool, ClientError> {
        match self
            .request(Op::CheckSequencer(command::CheckSequencer {
                sequencer: Some(sequencer),
            }))
            .await?
        {
            Reply::Bool(b) => Ok(b),
            _ => Err(ClientError::Protocol("check_sequencer")),
        }
    }

    pub async fn list_sessions(&self) -> Result<Vec<command::SessionInfo>, ClientError> {
        match self
            .request(Op::ListSessions(command::ListSessions {}))
            .await?
        {
            Reply::Sessions(s) => Ok(s.sessions),
            _ => Err(ClientError::Protocol("list_sessions")),
        }
    }

    /// A no-op through the log (benchmarks, tests).
    pub async fn noop(&self) -> Result<(), ClientError> {
        self.done(Op::Noop(command::Noop {})).await
    }

    /// The status of the replica the client talks to (the leader when known).
    pub async fn status(&self) -> Result<StatusReply, ClientError> {
        self.inner
            .channel
            .status(self.inner.options.attempt_timeout)
            .await
            .map_err(|e| match e {
                AttemptError::Refused(detail) => ClientError::Refused {
                    op: "status",
                    detail,
                },
                e => ClientError::Unavailable {
                    op: "status",
                    detail: format!("{e:?}"),
                },
            })
    }
}

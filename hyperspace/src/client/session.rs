//! The session: opening it, the keep-alive loop (lease, jeopardy, expiry, events), and the
//! attempts of one request with their backoff.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::time::entropy_seed;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rpc::ClusterCredentials;
use rpc::retry::Backoff;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::debug;

use crate::command::{self, Command, ErrorCode, Event, Op, Reply, Response};

use super::channel::{AttemptError, Channel};
use super::remote::RemoteChannel;
use super::{ClientError, ClientOptions, check};
use crate::service::KeepAliveRequest;

/// The session's standing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    Safe,
    Jeopardy,
    Expired,
}

/// What the client tells the application.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// An event on one of the session's handles.
    Node(Event),
    /// Events were dropped (the service's or this client's queue was full): re-read what you
    /// watch.
    EventsLost,
    /// The lease ran out without contact: locks may be lost.
    Jeopardy,
    /// Contact is back after jeopardy; the session and its locks survived.
    Safe,
    /// The session is gone, with its locks and ephemeral files.
    Expired,
}

pub(super) struct Inner {
    /// Seeds each request's backoff and the keep-alive loop's (from `ClientOptions::seed`).
    pub(super) seeds: Mutex<StdRng>,
    pub(super) channel: Arc<dyn Channel>,
    pub(super) options: ClientOptions,
    pub(super) session: u64,
    pub(super) next_seq: AtomicU64,
    pub(super) inflight: Mutex<BTreeSet<u64>>,
    /// Blocked lock requests waiting for their LOCK_GRANTED event, by handle.
    pub(super) lock_waiters: Mutex<HashMap<u64, oneshot::Sender<Event>>>,
    pub(super) events: mpsc::Sender<ClientEvent>,
    pub(super) state: watch::Sender<SessionState>,
}

/// A Hyperspace session. Cloning shares the session.
#[derive(Clone)]
pub struct Hyperspace {
    pub(super) inner: Arc<Inner>,
    pub(super) stop: Arc<watch::Sender<bool>>,
}

impl Hyperspace {
    /// Connects to the replicas at `replicas` and opens a session.
    pub async fn connect(
        replicas: Vec<SocketAddr>,
        credentials: ClusterCredentials,
        options: ClientOptions,
    ) -> Result<(Hyperspace, mpsc::Receiver<ClientEvent>), ClientError> {
        if replicas.is_empty() {
            return Err(ClientError::Unavailable {
                op: "connect",
                detail: "no replica addresses".into(),
            });
        }
        let channel = RemoteChannel::new(replicas, credentials, options.clone());
        Self::open_session(Arc::new(channel), options).await
    }

    /// Opens a session over `channel`.
    pub async fn open_session(
        channel: Arc<dyn Channel>,
        options: ClientOptions,
    ) -> Result<(Hyperspace, mpsc::Receiver<ClientEvent>), ClientError> {
        let mut seeds = StdRng::seed_from_u64(options.seed.unwrap_or_else(entropy_seed));
        let nonce = seeds.random::<u64>() | 1;
        let cmd = Command {
            session: 0,
            seq: 0,
            first_incomplete: 0,
            op: Some(Op::CreateSession(command::CreateSession {
                nonce,
                lease_ms: options.lease.as_millis() as u64,
            })),
        };
        let mut backoff = request_backoff(seeds.random());
        let response = run_attempts(
            channel.as_ref(),
            &options,
            &mut backoff,
            "create_session",
            || cmd.clone(),
        )
        .await?;
        let session = match check(response, "create_session")? {
            Reply::Session(id) => id,
            _ => return Err(ClientError::Protocol("create_session")),
        };
        let (events_tx, events_rx) = mpsc::channel(options.event_queue.max(1));
        let (state_tx, _) = watch::channel(SessionState::Safe);
        let inner = Arc::new(Inner {
            channel,
            options,
            session,
            next_seq: AtomicU64::new(1),
            inflight: Mutex::new(BTreeSet::new()),
            lock_waiters: Mutex::new(HashMap::new()),
            events: events_tx,
            state: state_tx,
            seeds: Mutex::new(seeds),
        });
        let (stop_tx, stop_rx) = watch::channel(false);
        tokio::spawn(keep_alive_loop(inner.clone(), stop_rx));
        Ok((
            Hyperspace {
                inner,
                stop: Arc::new(stop_tx),
            },
            events_rx,
        ))
    }

    pub fn session(&self) -> u64 {
        self.inner.session
    }

    pub fn state(&self) -> SessionState {
        *self.inner.state.borrow()
    }

    /// Watches the session state.
    pub fn state_watch(&self) -> watch::Receiver<SessionState> {
        self.inner.state.subscribe()
    }

    pub(super) async fn request(&self, op: Op) -> Result<Reply, ClientError> {
        let name = op.name();
        if self.state() == SessionState::Expired {
            return Err(ClientError::SessionExpired(self.inner.session));
        }
        let seq = self.inner.next_seq.fetch_add(1, Ordering::Relaxed);
        self.inner.inflight.lock().insert(seq);
        let inner = &self.inner;
        let mut backoff = request_backoff(inner.seeds.lock().random());
        let result = run_attempts(
            inner.channel.as_ref(),
            &inner.options,
            &mut backoff,
            name,
            || Command {
                session: inner.session,
                seq,
                first_incomplete: inner.inflight.lock().first().copied().unwrap_or(seq),
                op: Some(op.clone()),
            },
        )
        .await;
        self.inner.inflight.lock().remove(&seq);
        let reply = check(result?, name);
        if let Err(ClientError::Hyperspace {
            code: ErrorCode::SessionExpired,
            ..
        }) = &reply
        {
            expire(&self.inner);
            return Err(ClientError::SessionExpired(self.inner.session));
        }
        reply
    }

    pub(super) async fn done(&self, op: Op) -> Result<(), ClientError> {
        self.request(op).await.map(|_| ())
    }

    /// Stops keeping the session alive without closing it, as a crashed client would: the
    /// service expires it when its lease runs out.
    pub fn abandon(&self) {
        let _ = self.stop.send(true);
    }

    /// Ends the session: its locks are released and its ephemeral files deleted.
    pub async fn close_session(&self) -> Result<(), ClientError> {
        let r = self.done(Op::CloseSession(command::CloseSession {})).await;
        let _ = self.stop.send(true);
        r
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        debug!(session = self.session, "hyperspace client dropped");
    }
}

/// Sends attempts of one request until one gets an answer or the request timeout passes.
pub(super) async fn run_attempts(
    channel: &dyn Channel,
    options: &ClientOptions,
    backoff: &mut Backoff,
    op: &'static str,
    make: impl Fn() -> Command,
) -> Result<Response, ClientError> {
    let clock = &options.clock;
    let deadline = clock.now() + options.request_timeout;
    let mut attempt = 0u32;
    loop {
        let cmd = make();
        let left = deadline.saturating_duration_since(clock.now());
        match channel
            .call(
                &cmd,
                options
                    .attempt_timeout
                    .min(left.max(Duration::from_millis(1))),
            )
            .await
        {
            Ok(response) => return Ok(response),
            Err(AttemptError::Fatal(detail)) => {
                return Err(ClientError::Unavailable { op, detail });
            }
            Err(AttemptError::Refused(detail)) => {
                return Err(ClientError::Refused { op, detail });
            }
            Err(AttemptError::Retry { leader, detail }) => {
                if clock.now() >= deadline {
                    return Err(ClientError::Unavailable { op, detail });
                }
                // Straight to a named leader; otherwise back off (with jitter) before the next.
                if leader.is_none() || attempt > 3 {
                    tokio::time::sleep(backoff.delay_for(attempt)).await;
                }
                attempt += 1;
            }
        }
    }
}

/// Exponential backoff from 20 ms to 1 s, with up to 50% random jitter, drawn from `seed`.
pub(super) fn request_backoff(seed: u64) -> Backoff {
    Backoff::new(Duration::from_millis(20), Duration::from_secs(1), seed)
}

pub(super) fn expire(inner: &Inner) {
    if *inner.state.borrow() != SessionState::Expired {
        inner.state.send_replace(SessionState::Expired);
        let _ = inner.events.try_send(ClientEvent::Expired);
        // Blocked lock requests end with SessionExpired.
        inner.lock_waiters.lock().clear();
    }
}

/// The lease ran out without contact: locks may be lost.
pub(super) fn jeopardy(inner: &Inner) {
    if *inner.state.borrow() == SessionState::Safe {
        inner.state.send_replace(SessionState::Jeopardy);
        let _ = inner.events.try_send(ClientEvent::Jeopardy);
    }
}

pub(super) async fn keep_alive_loop(inner: Arc<Inner>, mut stop: watch::Receiver<bool>) {
    let lease = inner.options.lease;
    let hold = lease / 3;
    let mut seen = 0u64;
    let clock = inner.options.clock.clone();
    let mut backoff = request_backoff(inner.seeds.lock().random());
    let mut lease_end = clock.now() + lease;
    let mut failures = 0u32;
    let mut lost_pending = false;
    loop {
        if *stop.borrow() {
            return;
        }
        let sent = clock.now();
        let req = KeepAliveRequest {
            session: inner.session,
            seen,
            hold_ms: hold.as_millis() as u64,
            max_events: 1024,
        };
        let attempt = inner
            .channel
            .keep_alive(&req, hold + inner.options.attempt_timeout);
        tokio::pin!(attempt);
        let result = loop {
            let safe = *inner.state.borrow() == SessionState::Safe;
            tokio::select! {
                r = &mut attempt => break r,
                _ = stop.changed() => return,
                // The lease ends while the attempt is in flight: the service may give the locks
                // away from now on, whenever the attempt ends.
                _ = tokio::time::sleep(lease_end.saturating_duration_since(clock.now())), if safe => {
                    jeopardy(&inner)
                }
            }
        };
        match result {
            Ok(reply) => {
                if let Some(e) = &reply.error
                    && e.code == ErrorCode::SessionExpired as i32
                {
                    expire(&inner);
                    return;
                }
                failures = 0;
                // The service's word on the lease wins if it is shorter than what was asked.
                let granted = Duration::from_millis(reply.lease_ms);
                lease_end = sent
                    + if granted.is_zero() {
                        lease
                    } else {
                        lease.min(granted)
                    };
                if *inner.state.borrow() == SessionState::Jeopardy {
                    inner.state.send_replace(SessionState::Safe);
                    let _ = inner.events.try_send(ClientEvent::Safe);
                }
                if reply.lost || lost_pending {
                    lost_pending = inner.events.try_send(ClientEvent::EventsLost).is_err();
                }
                for event in reply.events {
                    if event.seq <= seen {
                        continue;
                    }
                    seen = event.seq;
                    if event.kind == command::event_mask::LOCK_GRANTED {
                        if let Some(w) = inner.lock_waiters.lock().remove(&event.handle) {
                            let _ = w.send(event);
                        }
                        continue;
                    }
                    if inner.events.try_send(ClientEvent::Node(event)).is_err() {
                        lost_pending = true;
                    }
                }
            }
            Err(e) => {
                debug!(session = inner.session, error = ?e, "keep-alive failed");
                let now = clock.now();
                if now >= lease_end {
                    jeopardy(&inner);
                }
                if now >= lease_end + inner.options.grace {
                    expire(&inner);
                    return;
                }
                let wait = backoff.delay_for(failures.min(4));
                failures += 1;
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.changed() => return,
                }
            }
        }
    }
}

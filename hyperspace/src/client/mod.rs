//! The Hyperspace client: a session with a lease kept alive in the background, the operations on
//! the namespace, attributes and locks, and the events pushed to its handles.
//!
//! Every request carries the session, a sequence number and the lowest unanswered sequence
//! number, so a request retried after a lost answer, a timeout or a leader change is applied at
//! most once (the state machine answers a retry with the first answer). Requests find the leader
//! by following `NotLeader` hints, trying every replica in turn when there is none.
//!
//! Session states, as in Chubby: `Safe` while keep-alives succeed; `Jeopardy` once the lease as
//! the client counts it (from when the last successful keep-alive was sent) has run out: locks
//! held may already be lost; `Expired` when the service says the session is gone, or after the
//! grace period passes without contact. Each change is sent as a [`ClientEvent`].

use std::sync::Arc;
use std::time::Duration;

use common::time::{Clock, system_clock};

use crate::command::{ErrorCode, Reply, Response};

mod calls;
mod channel;
mod remote;
mod session;
#[cfg(test)]
mod tests;

pub use calls::At;
pub use channel::{AttemptError, Channel, LocalChannel};
pub use remote::RemoteChannel;
pub use session::{ClientEvent, Hyperspace, SessionState};

/// Client settings.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The session lease the client asks for.
    pub lease: Duration,
    /// After the lease runs out without contact, how long to keep trying before the session is
    /// given up as expired.
    pub grace: Duration,
    /// How long one request may take in all, retries included.
    pub request_timeout: Duration,
    /// Deadline of one attempt.
    pub attempt_timeout: Duration,
    /// Events queued for the application; past it, events are dropped and `EventsLost` sent.
    pub event_queue: usize,
    /// Bound on setting up a connection to one replica.
    pub connect_timeout: Duration,
    /// A connection whose peer is silent this long is dropped (QUIC pings it meanwhile), so a
    /// dead replica is noticed in about this time.
    pub idle_timeout: Duration,
    /// A replica that failed at the transport level is skipped this long.
    pub suspect_for: Duration,
    /// A blocked `lock` also asks whether it was granted this often (events can be lost).
    pub lock_poll: Duration,
    /// What lease, jeopardy and request deadlines are measured with (pauses themselves are
    /// tokio sleeps, which a test can pause).
    pub clock: Arc<dyn Clock>,
    /// Seeds the session nonce and the backoff jitter; `None` draws a seed from entropy.
    pub seed: Option<u64>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(12),
            grace: Duration::from_secs(12),
            request_timeout: Duration::from_secs(30),
            attempt_timeout: Duration::from_secs(5),
            event_queue: 1024,
            connect_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(3),
            suspect_for: Duration::from_secs(1),
            lock_poll: Duration::from_secs(1),
            clock: system_clock(),
            seed: None,
        }
    }
}

/// What went wrong with a Hyperspace request.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The service answered with an error.
    #[error("hyperspace {op}: {code:?}: {message}")]
    Hyperspace {
        op: &'static str,
        code: ErrorCode,
        message: String,
    },
    /// No replica answered within the request timeout.
    #[error("hyperspace {op}: unavailable: {detail}")]
    Unavailable { op: &'static str, detail: String },
    /// Every replica refused the TLS handshake for good (credentials of another cluster, a
    /// wrong name): fix the credentials or the addresses; retrying cannot help.
    #[error("hyperspace {op}: refused: {detail}")]
    Refused { op: &'static str, detail: String },
    /// The session is gone; make a new client.
    #[error("hyperspace session {0} expired")]
    SessionExpired(u64),
    #[error("hyperspace: unexpected reply to {0}")]
    Protocol(&'static str),
}

/// A refusal (TLS: another cluster's replicas, a wrong name) is not worth retrying; everything
/// else may pass with time (no leader, no quorum, an expired session a new client replaces).
impl common::HasErrorKind for ClientError {
    fn error_kind(&self) -> common::ErrorKind {
        match self {
            ClientError::Refused { .. } => common::ErrorKind::Internal,
            _ => common::ErrorKind::Unavailable,
        }
    }
}

impl ClientError {
    /// The service's error code, if the service answered with one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Hyperspace { code, .. } => Some(*code),
            ClientError::SessionExpired(_) => Some(ErrorCode::SessionExpired),
            _ => None,
        }
    }
}

fn check(response: Response, op: &'static str) -> Result<Reply, ClientError> {
    if let Some(code) = response.error_code() {
        let message = response.error.map(|e| e.message).unwrap_or_default();
        return Err(ClientError::Hyperspace { op, code, message });
    }
    response.reply.ok_or(ClientError::Protocol(op))
}

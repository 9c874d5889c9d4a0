//! Client tests over a scripted channel.

use super::session::{Hyperspace, SessionState};
use super::*;
use crate::command::{Command, Op, Reply, Response};
use crate::service::{KeepAliveReply, KeepAliveRequest, StatusReply};
use async_trait::async_trait;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Answers CreateSession, the first keep-alive, then no keep-alive ever again (each attempt
/// runs out its deadline): a client whose keep-alives stopped reaching the leader.
#[derive(Default)]
struct SilentAfterFirst {
    keep_alives: AtomicUsize,
}

#[async_trait]
impl Channel for SilentAfterFirst {
    async fn call(&self, cmd: &Command, _deadline: Duration) -> Result<Response, AttemptError> {
        match cmd.op {
            Some(Op::CreateSession(_)) => Ok(Response::ok(Reply::Session(1))),
            _ => Err(AttemptError::Fatal("not in this test".into())),
        }
    }

    async fn keep_alive(
        &self,
        _req: &KeepAliveRequest,
        deadline: Duration,
    ) -> Result<KeepAliveReply, AttemptError> {
        if self.keep_alives.fetch_add(1, Ordering::SeqCst) == 0 {
            return Ok(KeepAliveReply {
                lease_ms: 600,
                ..Default::default()
            });
        }
        tokio::time::sleep(deadline).await;
        Err(AttemptError::Retry {
            leader: None,
            detail: "timeout".into(),
        })
    }

    async fn status(&self, _deadline: Duration) -> Result<StatusReply, AttemptError> {
        Err(AttemptError::Fatal("not in this test".into()))
    }
}

#[tokio::test]
async fn jeopardy_begins_when_the_lease_ends_even_with_a_keep_alive_in_flight() {
    let options = ClientOptions {
        lease: Duration::from_millis(600),
        grace: Duration::from_secs(10),
        attempt_timeout: Duration::from_secs(5),
        ..Default::default()
    };
    let (hs, _events) = Hyperspace::open_session(Arc::new(SilentAfterFirst::default()), options)
        .await
        .unwrap();
    // The lease (counted from the first keep-alive, sent at about now) has run out; the
    // second keep-alive is still waiting for its 5 s deadline. The service may expire the
    // session any moment now, so the client must no longer call itself safe.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(hs.state(), SessionState::Jeopardy);
    hs.abandon();
}

#[test]
fn a_refusal_is_internal_and_everything_else_unavailable() {
    use common::{ErrorKind, HasErrorKind};
    let refused = ClientError::Refused {
        op: "open",
        detail: "bad certificate".into(),
    };
    assert_eq!(refused.error_kind(), ErrorKind::Internal);
    for e in [
        ClientError::Unavailable {
            op: "open",
            detail: "no leader".into(),
        },
        ClientError::SessionExpired(3),
        ClientError::Protocol("open"),
        ClientError::Hyperspace {
            op: "open",
            code: ErrorCode::NotFound,
            message: "/x".into(),
        },
    ] {
        assert_eq!(e.error_kind(), ErrorKind::Unavailable, "{e}");
    }
}

#[test]
fn request_backoff_pauses_20ms_doubling_to_1s_with_half_jitter_from_the_seed() {
    let pauses = |seed| {
        let mut b = super::session::request_backoff(seed);
        (0..10).map(|a| b.delay_for(a)).collect::<Vec<_>>()
    };
    let p = pauses(7);
    assert_eq!(p, pauses(7), "the same seed, the same pauses");
    assert_ne!(p, pauses(8));
    for (a, d) in p.iter().enumerate() {
        let base = Duration::from_millis((20u64 << a).min(1000));
        assert!(*d >= base && *d <= base + base / 2, "attempt {a}: {d:?}");
    }
}

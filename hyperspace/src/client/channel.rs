//! How a client reaches the replicas ([`Channel`]), and the channel to a replica in the same
//! process ([`LocalChannel`]).

use std::time::Duration;

use async_trait::async_trait;

use crate::command::{Command, ErrorCode, Response};
use crate::node::{Node, NodeError};

use crate::service::{KeepAliveReply, KeepAliveRequest, StatusReply};

/// Why one attempt failed.
#[derive(Debug)]
pub enum AttemptError {
    /// Try again (elsewhere, later): not the leader, unreachable, timed out, busy.
    Retry {
        leader: Option<String>,
        detail: String,
    },
    /// Do not retry.
    Fatal(String),
    /// The replica refused the TLS handshake for good ([`RpcError::Refused`]); another replica
    /// may still be tried.
    Refused(String),
}

/// How a client reaches the replicas: over `rpc`, or to a replica in the same process.
#[async_trait]
pub trait Channel: Send + Sync + 'static {
    async fn call(&self, cmd: &Command, deadline: Duration) -> Result<Response, AttemptError>;
    async fn keep_alive(
        &self,
        req: &KeepAliveRequest,
        deadline: Duration,
    ) -> Result<KeepAliveReply, AttemptError>;
    async fn status(&self, deadline: Duration) -> Result<StatusReply, AttemptError>;
}

/// A replica in the same process (the embedded database's single replica).
pub struct LocalChannel {
    node: Node,
}

impl LocalChannel {
    pub fn new(node: Node) -> Self {
        Self { node }
    }
}

pub(super) fn node_attempt_error(e: NodeError) -> AttemptError {
    match e {
        NodeError::NotLeader { leader } => AttemptError::Retry {
            leader: leader.map(|(_, a)| a),
            detail: "not the leader".into(),
        },
        NodeError::Invalid(m) => AttemptError::Fatal(m),
        other => AttemptError::Retry {
            leader: None,
            detail: other.to_string(),
        },
    }
}

#[async_trait]
impl Channel for LocalChannel {
    async fn call(&self, cmd: &Command, deadline: Duration) -> Result<Response, AttemptError> {
        let is_write = cmd.op.as_ref().is_some_and(|op| op.is_write());
        let fut = async {
            if is_write {
                self.node.propose(cmd.clone()).await
            } else {
                self.node.read(cmd.clone()).await
            }
        };
        match tokio::time::timeout(deadline, fut).await {
            Ok(r) => r.map_err(node_attempt_error),
            Err(_) => Err(AttemptError::Retry {
                leader: None,
                detail: "timeout".into(),
            }),
        }
    }

    async fn keep_alive(
        &self,
        req: &KeepAliveRequest,
        deadline: Duration,
    ) -> Result<KeepAliveReply, AttemptError> {
        let fut = self
            .node
            .keep_alive(req.session, req.seen, req.max_events.max(1) as usize);
        let ka = match tokio::time::timeout(deadline, fut).await {
            Ok(r) => r.map_err(node_attempt_error)?,
            Err(_) => {
                return Err(AttemptError::Retry {
                    leader: None,
                    detail: "timeout".into(),
                });
            }
        };
        if ka.lease_ms == 0 {
            return Ok(KeepAliveReply {
                error: Response::err(ErrorCode::SessionExpired, "session expired").error,
                ..Default::default()
            });
        }
        if ka.events.is_empty() && !ka.lost {
            // Hold as the server does, so that the keep-alive loop does not spin.
            let applied = self.node.applied();
            self.node
                .wait_applied(applied, Duration::from_millis(req.hold_ms).min(deadline))
                .await;
        }
        Ok(KeepAliveReply {
            events: ka.events,
            lost: ka.lost,
            lease_ms: ka.lease_ms,
            ..Default::default()
        })
    }

    async fn status(&self, _deadline: Duration) -> Result<StatusReply, AttemptError> {
        self.node
            .status()
            .await
            .map(StatusReply::from)
            .map_err(node_attempt_error)
    }
}

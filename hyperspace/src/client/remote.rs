//! [`RemoteChannel`]: the replicas over `rpc`, following the leader, skipping suspects.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use parking_lot::Mutex;
use prost::Message as _;
use rpc::{ClusterCredentials, RpcError};

use crate::command::{Command, ErrorCode, Response};

use super::ClientOptions;
use super::channel::{AttemptError, Channel};
use crate::service::{CallReply, KeepAliveReply, KeepAliveRequest, SERVER_NAME, StatusReply};

/// Replicas over `rpc`, following the leader. A replica that fails at the transport level
/// loses its cached connection (a restarted replica is a new QUIC peer) and is skipped for a
/// while; a leader hint naming such a replica is not followed.
pub struct RemoteChannel {
    replicas: Vec<SocketAddr>,
    credentials: ClusterCredentials,
    options: ClientOptions,
    clients: tokio::sync::Mutex<HashMap<SocketAddr, Arc<rpc::Client>>>,
    leader: Mutex<Option<SocketAddr>>,
    suspects: Mutex<HashMap<SocketAddr, Instant>>,
    /// Replicas that refused the TLS handshake, and until when that is believed.
    refusals: Mutex<HashMap<SocketAddr, Instant>>,
    next: AtomicU64,
}

impl RemoteChannel {
    pub fn new(
        replicas: Vec<SocketAddr>,
        credentials: ClusterCredentials,
        options: ClientOptions,
    ) -> Self {
        Self {
            replicas,
            credentials,
            options,
            clients: tokio::sync::Mutex::new(HashMap::new()),
            leader: Mutex::new(None),
            suspects: Mutex::new(HashMap::new()),
            refusals: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
        }
    }

    fn is_suspect(&self, addr: &SocketAddr) -> bool {
        let now = self.options.clock.now();
        self.suspects
            .lock()
            .get(addr)
            .is_some_and(|until| *until > now)
            || self
                .refusals
                .lock()
                .get(addr)
                .is_some_and(|until| *until > now)
    }

    /// Records that `tried` refused the TLS handshake (believed for a request timeout); the
    /// refusal is the request's answer once every replica has refused, else another is tried.
    fn refused(&self, tried: SocketAddr, detail: String) -> AttemptError {
        let now = self.options.clock.now();
        let mut refusals = self.refusals.lock();
        refusals.insert(tried, now + self.options.request_timeout);
        let everywhere = self
            .replicas
            .iter()
            .all(|a| refusals.get(a).is_some_and(|until| *until > now));
        if everywhere {
            AttemptError::Refused(detail)
        } else {
            AttemptError::Retry {
                leader: None,
                detail,
            }
        }
    }

    /// Settles one attempt on `addr`: remembers the leader or what failed.
    async fn settle<T>(
        &self,
        addr: SocketAddr,
        result: Result<T, AttemptError>,
    ) -> Result<T, AttemptError> {
        let result = match result {
            Err(AttemptError::Refused(detail)) => Err(self.refused(addr, detail)),
            other => other,
        };
        match &result {
            Ok(_) => *self.leader.lock() = Some(addr),
            Err(e) => self.note(addr, e).await,
        }
        result
    }

    /// The replica to try: the known leader, else the next in turn that is not suspect.
    fn target(&self) -> SocketAddr {
        if let Some(l) = *self.leader.lock()
            && !self.is_suspect(&l)
        {
            return l;
        }
        let n = self.replicas.len();
        for _ in 0..n {
            let i = self.next.fetch_add(1, Ordering::Relaxed) as usize;
            let a = self.replicas[i % n];
            if !self.is_suspect(&a) {
                return a;
            }
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) as usize;
        self.replicas[i % n]
    }

    async fn note(&self, tried: SocketAddr, err: &AttemptError) {
        let next_leader = match err {
            AttemptError::Retry {
                leader: Some(hint), ..
            } => match hint.parse::<SocketAddr>() {
                Ok(a) if a != tried && !self.is_suspect(&a) => Some(a),
                _ => None,
            },
            AttemptError::Retry { leader: None, .. } | AttemptError::Refused(_) => {
                // Unreachable, timed out or busy: start afresh with this replica later.
                self.suspects
                    .lock()
                    .insert(tried, self.options.clock.now() + self.options.suspect_for);
                if let Some(c) = self.clients.lock().await.remove(&tried) {
                    c.close().await;
                }
                None
            }
            AttemptError::Fatal(_) => None,
        };
        *self.leader.lock() = next_leader;
    }

    async fn client(
        &self,
        addr: SocketAddr,
        deadline: Duration,
    ) -> Result<Arc<rpc::Client>, AttemptError> {
        if let Some(c) = self.clients.lock().await.get(&addr) {
            return Ok(c.clone());
        }
        let options = rpc::ClientOptions {
            idle_timeout: self.options.idle_timeout,
            connect_timeout: self.options.connect_timeout,
            ..Default::default()
        };
        let config = self
            .credentials
            .client_config(options.idle_timeout)
            .map_err(|e| AttemptError::Fatal(e.to_string()))?;
        let c = tokio::time::timeout(
            self.options.connect_timeout.min(deadline),
            rpc::Client::connect_with(addr, SERVER_NAME, config, options),
        )
        .await
        .map_err(|_| AttemptError::Retry {
            leader: None,
            detail: format!("connect to {addr} timed out"),
        })?
        .map_err(|e| rpc_attempt_error(&e))?;
        let c = Arc::new(c);
        self.clients.lock().await.insert(addr, c.clone());
        Ok(c)
    }

    async fn rpc_call(
        &self,
        addr: SocketAddr,
        method: &str,
        payload: Vec<u8>,
        deadline: Duration,
    ) -> Result<bytes::Bytes, AttemptError> {
        let client = self.client(addr, deadline).await?;
        client
            .call(method, payload.into(), deadline)
            .await
            .map_err(|e| rpc_attempt_error(&e))
    }
}

pub(super) fn rpc_attempt_error(e: &RpcError) -> AttemptError {
    if e.is_refused() {
        AttemptError::Refused(e.to_string())
    } else if e.is_retryable() || e.is_timeout() {
        AttemptError::Retry {
            leader: None,
            detail: e.to_string(),
        }
    } else {
        AttemptError::Fatal(e.to_string())
    }
}

pub(super) fn decode_reply<M: prost::Message + Default>(
    bytes: bytes::Bytes,
) -> Result<M, AttemptError> {
    M::decode(bytes).map_err(|e| AttemptError::Fatal(format!("undecodable reply: {e}")))
}

#[async_trait]
impl Channel for RemoteChannel {
    async fn call(&self, cmd: &Command, deadline: Duration) -> Result<Response, AttemptError> {
        let addr = self.target();
        let result = async {
            let bytes = self
                .rpc_call(addr, "hs.call", cmd.encode_to_vec(), deadline)
                .await?;
            let reply: CallReply = decode_reply(bytes)?;
            let response = reply
                .response
                .ok_or_else(|| AttemptError::Fatal("reply without a response".into()))?;
            if response.error_code() == Some(ErrorCode::NotLeader) {
                return Err(AttemptError::Retry {
                    leader: (!reply.leader_addr.is_empty()).then_some(reply.leader_addr),
                    detail: format!("{addr} is not the leader"),
                });
            }
            Ok(response)
        }
        .await;
        self.settle(addr, result).await
    }

    async fn keep_alive(
        &self,
        req: &KeepAliveRequest,
        deadline: Duration,
    ) -> Result<KeepAliveReply, AttemptError> {
        let addr = self.target();
        let result = async {
            let bytes = self
                .rpc_call(addr, "hs.keepalive", req.encode_to_vec(), deadline)
                .await?;
            let reply: KeepAliveReply = decode_reply(bytes)?;
            if let Some(e) = &reply.error
                && e.code == ErrorCode::NotLeader as i32
            {
                return Err(AttemptError::Retry {
                    leader: (!reply.leader_addr.is_empty()).then_some(reply.leader_addr),
                    detail: format!("{addr} is not the leader"),
                });
            }
            Ok(reply)
        }
        .await;
        self.settle(addr, result).await
    }

    async fn status(&self, deadline: Duration) -> Result<StatusReply, AttemptError> {
        let addr = self.target();
        let bytes = self
            .rpc_call(addr, "hs.status", Vec::new(), deadline)
            .await?;
        decode_reply(bytes)
    }
}

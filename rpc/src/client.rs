//! The client side: one QUIC connection to one server, calls with deadlines, server-push streams.
//!
//! The connection is set up by [`Client::connect`] and set up again on the next call if it was
//! lost. Calls in flight are bounded by the server's stream limit: past it, a call waits for a
//! free stream (within its deadline).
//!
//! Each client has its own UDP endpoint; which local address it binds is [`bind_addr`]'s rule:
//! a process that serves binds its clients to the IP it listens on ([`set_local_ip`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::RwLock;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::error::{RpcError, tls_refusal};
use crate::frame::{self, FrameError, RequestEnvelope, ResponseEnvelope};
use crate::retry::{RetryPolicy, retry};
use crate::tls::ClusterCredentials;

/// Limits of a client.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Largest request or response message, in bytes.
    pub max_message_bytes: usize,
    /// A connection with no traffic for this long is closed (keep-alives are sent meanwhile).
    pub idle_timeout: Duration,
    /// Bound on setting up a connection (including the TLS handshake).
    pub connect_timeout: Duration,
    /// Kernel buffer of the endpoint's UDP socket, each direction (`socket.rs`); 0 keeps
    /// the system's default.
    pub socket_buffer_bytes: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            max_message_bytes: frame::DEFAULT_MAX_MESSAGE_BYTES,
            idle_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            socket_buffer_bytes: crate::socket::DEFAULT_SOCKET_BUFFER_BYTES,
        }
    }
}

/// The IP this process serves on, which its outgoing endpoints bind ([`set_local_ip`]).
static LOCAL_IP: RwLock<Option<IpAddr>> = RwLock::new(None);

/// Makes this process's outgoing endpoints bind `ip` (port 0) from now on: a server process
/// calls it with the IP it listens on, so that its peers see its connections come from the
/// address they know it by, and it opens no socket on other interfaces. An unspecified IP
/// (`0.0.0.0`, `::`) sets nothing better than the default.
pub fn set_local_ip(ip: IpAddr) {
    let mut slot = LOCAL_IP
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    *slot = (!ip.is_unspecified()).then_some(ip);
}

/// The IP set by [`set_local_ip`], if any.
pub fn local_ip() -> Option<IpAddr> {
    *LOCAL_IP
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The local address of an outgoing endpoint to `dest` (always port 0), given the IP this
/// process serves on (`local`):
/// - `local`, if it is of `dest`'s family and can reach it (a loopback IP reaches only
///   loopback destinations);
/// - otherwise, for a loopback `dest`, the loopback IP of its family (the socket is then not
///   reachable from other hosts, and the kernel would pick that source anyway);
/// - otherwise the unspecified IP of `dest`'s family (the kernel picks the source by route).
pub fn bind_addr(dest: SocketAddr, local: Option<IpAddr>) -> SocketAddr {
    let dest_ip = dest.ip();
    match local {
        Some(ip)
            if !ip.is_unspecified()
                && ip.is_ipv4() == dest_ip.is_ipv4()
                && (!ip.is_loopback() || dest_ip.is_loopback()) =>
        {
            (ip, 0).into()
        }
        _ => match (dest_ip.is_ipv6(), dest_ip.is_loopback()) {
            (false, true) => (Ipv4Addr::LOCALHOST, 0).into(),
            (true, true) => (Ipv6Addr::LOCALHOST, 0).into(),
            (false, false) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            (true, false) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        },
    }
}

/// A connection to one server.
pub struct Client {
    endpoint: quinn::Endpoint,
    peer: SocketAddr,
    server_name: String,
    config: quinn::ClientConfig,
    options: ClientOptions,
    conn: Mutex<Option<quinn::Connection>>,
}

impl Client {
    /// Connects to the server `server_name` (the name its certificate was issued to) at `addr`,
    /// presenting `credentials`.
    pub async fn connect(
        addr: SocketAddr,
        server_name: &str,
        credentials: &ClusterCredentials,
    ) -> Result<Self, RpcError> {
        let options = ClientOptions::default();
        let config = credentials.client_config(options.idle_timeout)?;
        Self::connect_with(addr, server_name, config, options).await
    }

    /// Connects with an explicit quinn client config (see [`crate::tls::quic_client_config`]).
    pub async fn connect_with(
        addr: SocketAddr,
        server_name: &str,
        config: quinn::ClientConfig,
        options: ClientOptions,
    ) -> Result<Self, RpcError> {
        let bind = bind_addr(addr, local_ip());
        let endpoint = crate::socket::endpoint(bind, None, options.socket_buffer_bytes)
            .map_err(|source| RpcError::Endpoint { addr: bind, source })?;
        let client = Self {
            endpoint,
            peer: addr,
            server_name: server_name.to_string(),
            config,
            options,
            conn: Mutex::new(None),
        };
        client.connection().await?;
        Ok(client)
    }

    /// The server's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Calls `method` and waits for its one response, at most `deadline`.
    pub async fn call(
        &self,
        method: &str,
        payload: Bytes,
        deadline: Duration,
    ) -> Result<Bytes, RpcError> {
        let attempt = async {
            let (mut send, mut recv) = self.send_request(method, payload, false).await?;
            drop(send.finish());
            match frame::read_frame::<ResponseEnvelope>(&mut recv, self.options.max_message_bytes)
                .await
            {
                Ok(Some(response)) => self.response_result(method, response),
                Ok(None) => Err(self.transport(method, "stream ended without a response")),
                Err(source) => Err(self.frame_error(method, source)),
            }
        };
        match tokio::time::timeout(deadline, attempt).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => Err(self.refusal_or(e).await),
            Err(_) => Err(self.timeout(method, deadline)),
        }
    }

    /// Calls `method`, an idempotent one, retrying retryable failures per `policy`.
    pub async fn call_idempotent(
        &self,
        method: &str,
        payload: Bytes,
        deadline: Duration,
        policy: &RetryPolicy,
    ) -> Result<Bytes, RpcError> {
        retry(policy, || self.call(method, payload.clone(), deadline)).await
    }

    /// Calls a prost-typed method.
    pub async fn call_message<Req, Resp>(
        &self,
        method: &str,
        request: &Req,
        deadline: Duration,
    ) -> Result<Resp, RpcError>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        let payload = self
            .call(method, request.encode_to_vec().into(), deadline)
            .await?;
        Resp::decode(payload).map_err(|e| self.frame_error(method, FrameError::Decode(e)))
    }

    /// Calls a streaming `method`; the whole stream must arrive within `deadline`.
    pub async fn call_stream(
        &self,
        method: &str,
        payload: Bytes,
        deadline: Duration,
    ) -> Result<ResponseStream, RpcError> {
        let deadline_at = Instant::now() + deadline;
        let opened = tokio::time::timeout_at(deadline_at, async {
            let (mut send, recv) = self.send_request(method, payload, true).await?;
            drop(send.finish());
            Ok::<_, RpcError>(recv)
        })
        .await;
        let recv = match opened {
            Ok(Ok(recv)) => recv,
            Ok(Err(e)) => return Err(self.refusal_or(e).await),
            Err(_) => return Err(self.timeout(method, deadline)),
        };
        Ok(ResponseStream {
            recv,
            peer: self.peer,
            method: method.to_string(),
            deadline,
            deadline_at,
            max_message_bytes: self.options.max_message_bytes,
            done: false,
        })
    }

    /// Closes the connection; calls in flight fail.
    pub async fn close(&self) {
        if let Some(conn) = self.conn.lock().await.take() {
            conn.close(0u32.into(), b"client closed");
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), self.endpoint.wait_idle()).await;
    }

    /// The live connection, set up again if it was lost.
    async fn connection(&self) -> Result<quinn::Connection, RpcError> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = slot.as_ref()
            && conn.close_reason().is_none()
        {
            return Ok(conn.clone());
        }
        let connect_err = |detail: String| RpcError::Connect {
            peer: self.peer,
            server_name: self.server_name.clone(),
            detail,
        };
        let connecting = self
            .endpoint
            .connect_with(self.config.clone(), self.peer, &self.server_name)
            .map_err(|e| match e {
                // No certificate can ever match a name that is not a valid TLS server name.
                quinn::ConnectError::InvalidServerName(_) => self.refused(e.to_string()),
                e => connect_err(e.to_string()),
            })?;
        let conn = tokio::time::timeout(self.options.connect_timeout, connecting)
            .await
            .map_err(|_| {
                connect_err(format!(
                    "no connection within {}ms",
                    self.options.connect_timeout.as_millis()
                ))
            })?
            .map_err(|e| match tls_refusal(&e) {
                Some(detail) => self.refused(detail),
                None => connect_err(e.to_string()),
            })?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// `e`, or the refusal that caused it: a server that does not accept this node's
    /// certificate closes the connection only after this side finished its handshake, so the
    /// refusal shows as a failed first call.
    async fn refusal_or(&self, e: RpcError) -> RpcError {
        if !e.is_retryable() {
            return e;
        }
        let closed = self
            .conn
            .lock()
            .await
            .as_ref()
            .and_then(|c| c.close_reason());
        match closed.as_ref().and_then(tls_refusal) {
            Some(detail) => self.refused(detail),
            None => e,
        }
    }

    fn refused(&self, detail: String) -> RpcError {
        RpcError::Refused {
            peer: self.peer,
            server_name: self.server_name.clone(),
            detail,
        }
    }

    /// Opens a stream and writes the request; the send side is left open for the caller to finish.
    async fn send_request(
        &self,
        method: &str,
        payload: Bytes,
        stream: bool,
    ) -> Result<(quinn::SendStream, quinn::RecvStream), RpcError> {
        let request = RequestEnvelope {
            method: method.to_string(),
            payload,
            stream,
        };
        // Refuse an oversize request before using the network.
        let encoded = frame::encode(&request, self.options.max_message_bytes)
            .map_err(|source| self.frame_error(method, source))?;
        let conn = self.connection().await?;
        let (mut send, mut recv) = conn
            .open_bi()
            .await
            .map_err(|e| self.transport(method, &e.to_string()))?;
        if let Err(e) = send.write_all(&encoded).await {
            // The server may have refused the request early (e.g. too large) and said why.
            if let Ok(Some(response)) =
                frame::read_frame::<ResponseEnvelope>(&mut recv, self.options.max_message_bytes)
                    .await
            {
                self.response_result(method, response)?;
            }
            return Err(self.transport(method, &e.to_string()));
        }
        Ok((send, recv))
    }

    fn response_result(&self, method: &str, response: ResponseEnvelope) -> Result<Bytes, RpcError> {
        remote_result(self.peer, method, response)
    }

    fn transport(&self, method: &str, detail: &str) -> RpcError {
        RpcError::Transport {
            peer: self.peer,
            method: method.to_string(),
            detail: detail.to_string(),
        }
    }

    fn frame_error(&self, method: &str, source: FrameError) -> RpcError {
        RpcError::Frame {
            peer: self.peer,
            method: method.to_string(),
            source,
        }
    }

    fn timeout(&self, method: &str, deadline: Duration) -> RpcError {
        RpcError::Timeout {
            peer: self.peer,
            method: method.to_string(),
            deadline,
        }
    }
}

fn remote_result(
    peer: SocketAddr,
    method: &str,
    response: ResponseEnvelope,
) -> Result<Bytes, RpcError> {
    match response.error {
        None => Ok(response.payload),
        Some(error) => Err(RpcError::Remote {
            peer,
            method: method.to_string(),
            kind: frame::kind_from_wire(error.kind),
            message: error.message,
        }),
    }
}

/// Messages pushed by the server for one streaming call.
pub struct ResponseStream {
    recv: quinn::RecvStream,
    peer: SocketAddr,
    method: String,
    deadline: Duration,
    deadline_at: Instant,
    max_message_bytes: usize,
    done: bool,
}

impl ResponseStream {
    /// The next message; `Ok(None)` once the server has ended the stream. An error ends it too.
    pub async fn next(&mut self) -> Result<Option<Bytes>, RpcError> {
        if self.done {
            return Ok(None);
        }
        let read = frame::read_frame::<ResponseEnvelope>(&mut self.recv, self.max_message_bytes);
        let result = match tokio::time::timeout_at(self.deadline_at, read).await {
            Err(_) => Err(RpcError::Timeout {
                peer: self.peer,
                method: self.method.clone(),
                deadline: self.deadline,
            }),
            Ok(Ok(None)) => Ok(None),
            Ok(Ok(Some(response))) => remote_result(self.peer, &self.method, response).map(Some),
            Ok(Err(source)) => Err(RpcError::Frame {
                peer: self.peer,
                method: self.method.clone(),
                source,
            }),
        };
        if !matches!(result, Ok(Some(_))) {
            self.done = true;
        }
        result
    }

    /// Reads the rest of the stream into a vector (bounded by the deadline, not by memory: use
    /// [`ResponseStream::next`] for long streams).
    pub async fn collect(mut self) -> Result<Vec<Bytes>, RpcError> {
        let mut out = Vec::new();
        while let Some(message) = self.next().await? {
            out.push(message);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("socket address")
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn bind_addr_prefers_the_listen_ip_it_can_use() {
        // A server listening on an IP binds its clients to it, for loopback and other peers.
        assert_eq!(
            bind_addr(addr("127.0.0.1:7000"), Some(ip("127.0.0.2"))),
            addr("127.0.0.2:0")
        );
        assert_eq!(
            bind_addr(addr("10.1.2.3:7000"), Some(ip("10.1.2.4"))),
            addr("10.1.2.4:0")
        );
        assert_eq!(
            bind_addr(addr("127.0.0.1:7000"), Some(ip("10.1.2.4"))),
            addr("10.1.2.4:0")
        );
        assert_eq!(
            bind_addr(addr("[fd00::1]:7000"), Some(ip("fd00::2"))),
            addr("[fd00::2]:0")
        );
        // A loopback IP cannot reach another host; another family cannot be bound at all.
        assert_eq!(
            bind_addr(addr("10.1.2.3:7000"), Some(ip("127.0.0.1"))),
            addr("0.0.0.0:0")
        );
        assert_eq!(
            bind_addr(addr("[fd00::1]:7000"), Some(ip("10.1.2.4"))),
            addr("[::]:0")
        );
        // Nothing better known: loopback for loopback, else the family's unspecified IP.
        assert_eq!(bind_addr(addr("127.0.0.1:7000"), None), addr("127.0.0.1:0"));
        assert_eq!(bind_addr(addr("[::1]:7000"), None), addr("[::1]:0"));
        assert_eq!(bind_addr(addr("10.1.2.3:7000"), None), addr("0.0.0.0:0"));
        assert_eq!(
            bind_addr(addr("10.1.2.3:7000"), Some(ip("0.0.0.0"))),
            addr("0.0.0.0:0")
        );
        assert_eq!(bind_addr(addr("[fd00::1]:7000"), None), addr("[::]:0"));
    }
}

//! The server side: a quinn endpoint that serves one [`Service`] over mutual TLS (and, with
//! [`ServerOptions::tcp`], the same service's unary calls over TCP + TLS: `tcp.rs`).
//!
//! Each call is one bidirectional stream. The connection's bound on concurrent streams
//! (`max_concurrent_bidi_streams`) bounds the calls in flight from one peer; a peer past it waits
//! in `open_bi` until a call ends.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use common::ErrorKind;
use tokio::sync::{mpsc, watch};
use tracing::{debug, warn};

use crate::error::RpcError;
use crate::frame::{self, FrameError, RequestEnvelope, ResponseEnvelope};
use crate::tls::ClusterCredentials;

/// How long a finished response may wait for the peer's acknowledgement before its task ends.
const ACK_WAIT: Duration = Duration::from_secs(5);

/// Who is calling.
#[derive(Debug, Clone)]
pub struct PeerInfo {
    /// The peer's UDP address.
    pub addr: SocketAddr,
    /// The certificate the peer presented (its chain to the cluster CA was verified in the
    /// handshake).
    pub certificate: Option<rustls::pki_types::CertificateDer<'static>>,
}

impl PeerInfo {
    /// True if the peer's certificate was issued to node `name` (`ht init --nodes`): how a
    /// service tells its fellow servers from clients.
    pub fn is_node(&self, name: &str) -> bool {
        let Some(cert) = &self.certificate else {
            return false;
        };
        let Ok(server_name) = rustls::pki_types::ServerName::try_from(name) else {
            return false;
        };
        webpki::EndEntityCert::try_from(cert)
            .is_ok_and(|ee| ee.verify_is_valid_for_subject_name(&server_name).is_ok())
    }
}

/// What a server serves. Methods are named by strings; payloads are prost-encoded messages.
#[async_trait]
pub trait Service: Send + Sync + 'static {
    /// Answers one request with one response.
    async fn call(&self, peer: &PeerInfo, method: &str, payload: Bytes) -> Result<Bytes, RpcError>;

    /// Answers one request with a stream of messages pushed through `sink`; returning ends the
    /// stream (an error is delivered to the client as the stream's last item).
    async fn call_stream(
        &self,
        peer: &PeerInfo,
        method: &str,
        payload: Bytes,
        sink: &mut StreamSink,
    ) -> Result<(), RpcError> {
        let _ = (peer, payload, sink);
        Err(RpcError::service(
            ErrorKind::NotFound,
            format!("no streaming method {method:?}"),
        ))
    }
}

/// Where a streaming handler pushes its messages; flow control makes `send` wait for a slow
/// client rather than buffer without bound.
pub struct StreamSink {
    send: quinn::SendStream,
    peer: SocketAddr,
    method: String,
    max_message_bytes: usize,
    /// The stream was reset (a send gave up): nothing more may be written.
    reset: bool,
}

/// The QUIC error code of a stream reset because its reader took nothing for too long.
pub const STALLED_READER: u32 = 1;

impl StreamSink {
    /// [`StreamSink::send`], giving up after `limit`: a client that takes nothing for that long
    /// has its stream reset (code [`STALLED_READER`]; a message may be half written, so nothing
    /// can follow it) and the handler gets an error to return.
    pub async fn send_within(&mut self, payload: Bytes, limit: Duration) -> Result<(), RpcError> {
        match tokio::time::timeout(limit, self.send(payload)).await {
            Ok(sent) => sent,
            Err(_) => {
                self.reset = true;
                let _ = self.send.reset(STALLED_READER.into());
                Err(RpcError::service(
                    ErrorKind::Unavailable,
                    format!(
                        "{}: the client at {} read nothing for {limit:?}; stream reset",
                        self.method, self.peer
                    ),
                ))
            }
        }
    }

    /// Pushes one message to the client.
    pub async fn send(&mut self, payload: Bytes) -> Result<(), RpcError> {
        frame::write_frame(
            &mut self.send,
            &ResponseEnvelope::ok(payload),
            self.max_message_bytes,
        )
        .await
        .map_err(|source| RpcError::Frame {
            peer: self.peer,
            method: self.method.clone(),
            source,
        })
    }
}

/// Limits of a server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Largest request or response message, in bytes.
    pub max_message_bytes: usize,
    /// Calls in flight per connection.
    pub max_concurrent_streams_per_connection: u32,
    /// A connection with no traffic for this long is closed.
    pub idle_timeout: Duration,
    /// Kernel buffer of the endpoint's UDP socket, each direction (`socket.rs`); 0 keeps
    /// the system's default.
    pub socket_buffer_bytes: usize,
    /// Also serve unary calls over TCP + TLS on the same port (`tcp.rs`): for servers that
    /// move bulk data (chunk servers).
    pub tcp: bool,
    /// TCP connections served at once; more wait in the listen backlog.
    pub max_tcp_connections: usize,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            max_message_bytes: frame::DEFAULT_MAX_MESSAGE_BYTES,
            max_concurrent_streams_per_connection: 256,
            idle_timeout: Duration::from_secs(30),
            socket_buffer_bytes: crate::socket::DEFAULT_SOCKET_BUFFER_BYTES,
            tcp: false,
            max_tcp_connections: 1024,
        }
    }
}

/// A running server. Dropping it without [`Server::shutdown`] closes the endpoint abruptly.
pub struct Server {
    endpoint: quinn::Endpoint,
    local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    /// Every task holds a clone of the matching sender; `recv` yields `None` once all are done.
    tasks_done: mpsc::Receiver<()>,
}

impl Server {
    /// Binds `addr` (port 0 picks one) and serves `service` with default limits.
    pub fn bind<S: Service>(
        addr: SocketAddr,
        credentials: &ClusterCredentials,
        service: S,
    ) -> Result<Self, RpcError> {
        Self::bind_with(addr, credentials, service, ServerOptions::default())
    }

    /// Binds `addr` and serves `service` with the given limits.
    pub fn bind_with<S: Service>(
        addr: SocketAddr,
        credentials: &ClusterCredentials,
        service: S,
        options: ServerOptions,
    ) -> Result<Self, RpcError> {
        let config = credentials.server_config(
            options.max_concurrent_streams_per_connection,
            options.idle_timeout,
        )?;
        let (endpoint, local_addr, listener) = bind_endpoints(addr, config, &options)?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (task_token, tasks_done) = mpsc::channel(1);
        let service = Arc::new(service);
        if let Some(listener) = listener {
            let limits = crate::tcp::TcpServerLimits {
                addr: local_addr,
                max_message_bytes: options.max_message_bytes,
                idle_timeout: options.idle_timeout,
                max_connections: options.max_tcp_connections,
            };
            crate::tcp::serve(
                listener,
                credentials,
                service.clone(),
                limits,
                shutdown_rx.clone(),
                task_token.clone(),
            )?;
        }
        tokio::spawn(accept_loop(
            endpoint.clone(),
            service,
            Arc::new(options),
            shutdown_rx,
            task_token,
        ));
        Ok(Self {
            endpoint,
            local_addr,
            shutdown,
            tasks_done,
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops taking connections and calls, lets calls in flight finish for up to `grace`, then
    /// closes every connection.
    pub async fn shutdown(mut self, grace: Duration) {
        let _ = self.shutdown.send(true);
        if tokio::time::timeout(grace, self.tasks_done.recv())
            .await
            .is_err()
        {
            warn!(addr = %self.local_addr, "rpc server: calls still running after grace period");
        }
        self.endpoint.close(0u32.into(), b"shutdown");
        let _ = tokio::time::timeout(grace, self.endpoint.wait_idle()).await;
    }
}

/// Binds the QUIC endpoint and, with `options.tcp`, the TCP listener on the same port. When
/// `addr` asks for any port, a port whose TCP side is taken is given back and another tried.
fn bind_endpoints(
    addr: SocketAddr,
    config: quinn::ServerConfig,
    options: &ServerOptions,
) -> Result<(quinn::Endpoint, SocketAddr, Option<std::net::TcpListener>), RpcError> {
    let tries = if options.tcp && addr.port() == 0 {
        32
    } else {
        1
    };
    let mut last = None;
    for _ in 0..tries {
        let endpoint =
            crate::socket::endpoint(addr, Some(config.clone()), options.socket_buffer_bytes)
                .map_err(|source| RpcError::Endpoint { addr, source })?;
        let local_addr = endpoint
            .local_addr()
            .map_err(|source| RpcError::Endpoint { addr, source })?;
        if !options.tcp {
            return Ok((endpoint, local_addr, None));
        }
        match crate::tcp::listen(local_addr, 1024) {
            Ok(listener) => return Ok((endpoint, local_addr, Some(listener))),
            Err(source) => {
                endpoint.close(0u32.into(), b"port taken");
                last = Some(RpcError::Endpoint {
                    addr: local_addr,
                    source,
                });
            }
        }
    }
    Err(last.expect("at least one try"))
}

async fn accept_loop<S: Service>(
    endpoint: quinn::Endpoint,
    service: Arc<S>,
    options: Arc<ServerOptions>,
    mut shutdown: watch::Receiver<bool>,
    task_token: mpsc::Sender<()>,
) {
    loop {
        let incoming = tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => break,
            incoming = endpoint.accept() => match incoming {
                Some(incoming) => incoming,
                None => break,
            },
        };
        let service = service.clone();
        let options = options.clone();
        let shutdown = shutdown.clone();
        let token = task_token.clone();
        tokio::spawn(async move {
            let remote = incoming.remote_address();
            match incoming.await {
                Ok(conn) => serve_connection(conn, service, options, shutdown, token).await,
                // A refused handshake (no or foreign certificate) ends here.
                Err(e) => debug!(peer = %remote, error = %e, "rpc server: handshake failed"),
            }
        });
    }
}

async fn serve_connection<S: Service>(
    conn: quinn::Connection,
    service: Arc<S>,
    options: Arc<ServerOptions>,
    mut shutdown: watch::Receiver<bool>,
    task_token: mpsc::Sender<()>,
) {
    let certificate = conn
        .peer_identity()
        .and_then(|id| {
            id.downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
                .ok()
        })
        .and_then(|chain| chain.into_iter().next());
    let peer = PeerInfo {
        addr: conn.remote_address(),
        certificate,
    };
    loop {
        let (send, recv) = tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => break,
            stream = conn.accept_bi() => match stream {
                Ok(stream) => stream,
                Err(e) => {
                    debug!(peer = %peer.addr, error = %e, "rpc server: connection ended");
                    break;
                }
            },
        };
        let service = service.clone();
        let options = options.clone();
        let peer = peer.clone();
        let token = task_token.clone();
        tokio::spawn(async move {
            serve_stream(&*service, &peer, send, recv, options.max_message_bytes).await;
            drop(token);
        });
    }
}

async fn serve_stream<S: Service>(
    service: &S,
    peer: &PeerInfo,
    send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    limit: usize,
) {
    let request = match frame::read_frame::<RequestEnvelope>(&mut recv, limit).await {
        Ok(Some(request)) => request,
        Ok(None) => return,
        Err(FrameError::TooLarge { len, limit }) => {
            let response = ResponseEnvelope::err(
                ErrorKind::InvalidInput,
                format!("request of {len} bytes exceeds the limit of {limit} bytes"),
            );
            let _ = recv.stop(0u32.into());
            finish(send, &response, limit, peer, "?").await;
            return;
        }
        Err(e) => {
            debug!(peer = %peer.addr, error = %e, "rpc server: bad request frame");
            return;
        }
    };
    let method = request.method;
    if request.stream {
        let mut sink = StreamSink {
            send,
            peer: peer.addr,
            method: method.clone(),
            max_message_bytes: limit,
            reset: false,
        };
        let result = service
            .call_stream(peer, &method, request.payload, &mut sink)
            .await;
        match result {
            Ok(()) => {
                let _ = sink.send.finish();
                let _ = tokio::time::timeout(ACK_WAIT, sink.send.stopped()).await;
            }
            // A reset stream takes no error message.
            Err(e) if sink.reset => {
                debug!(peer = %peer.addr, method, error = %e, "rpc server: stream reset")
            }
            Err(e) => finish(sink.send, &error_response(&e), limit, peer, &method).await,
        }
    } else {
        let response = match service.call(peer, &method, request.payload).await {
            Ok(payload) => ResponseEnvelope::ok(payload),
            Err(e) => error_response(&e),
        };
        finish(send, &response, limit, peer, &method).await;
    }
}

fn error_response(e: &RpcError) -> ResponseEnvelope {
    ResponseEnvelope::err(e.kind(), e.to_string())
}

/// Writes the last response of a call, finishes the stream and waits for the acknowledgement.
async fn finish(
    mut send: quinn::SendStream,
    response: &ResponseEnvelope,
    limit: usize,
    peer: &PeerInfo,
    method: &str,
) {
    let written = match frame::write_frame(&mut send, response, limit).await {
        Err(FrameError::TooLarge { len, limit }) => {
            let response = ResponseEnvelope::err(
                ErrorKind::Internal,
                format!("response of {len} bytes exceeds the limit of {limit} bytes"),
            );
            frame::write_frame(&mut send, &response, limit).await
        }
        other => other,
    };
    if let Err(e) = written {
        debug!(peer = %peer.addr, method, error = %e, "rpc server: cannot send response");
        return;
    }
    let _ = send.finish();
    let _ = tokio::time::timeout(ACK_WAIT, send.stopped()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_node_matches_only_the_certificate_name() {
        let dir = tempfile::tempdir().unwrap();
        ClusterCredentials::create(dir.path()).unwrap();
        ClusterCredentials::issue(dir.path(), "client").unwrap();
        ClusterCredentials::issue(dir.path(), "hyperspace").unwrap();
        for (name, other) in [("client", "hyperspace"), ("hyperspace", "client")] {
            let creds = ClusterCredentials::load(dir.path(), name).unwrap();
            let peer = PeerInfo {
                addr: "127.0.0.1:1".parse().unwrap(),
                certificate: Some(creds.certificate().clone()),
            };
            assert!(peer.is_node(name), "{name}");
            assert!(!peer.is_node(other), "{name} passed as {other}");
        }
        let anonymous = PeerInfo {
            addr: "127.0.0.1:1".parse().unwrap(),
            certificate: None,
        };
        assert!(!anonymous.is_node("client"));
    }
}

//! Calls over TCP with mutual TLS: the transport for bulk data.
//!
//! QUIC does its per-datagram work (encryption, acknowledgements, loss and congestion
//! bookkeeping) in user space, 1,452 bytes at a time: moving 1 GiB over loopback costs ~2.4-3
//! CPU-seconds at both ends together, against ~0.8 for TLS over the kernel's TCP (measured on
//! a 2-core machine, 1 MiB calls). A DFS moves every byte three times (the replicas), so chunk
//! servers serve their reads and writes here as well (`ServerOptions::tcp`).
//!
//! The wire: TLS 1.3 over TCP with the cluster's credentials (the server requires a client
//! certificate signed by the cluster CA), ALPN [`TCP_ALPN`], on the same port number as the
//! server's QUIC endpoint. On one connection calls run one after another: the client writes a
//! [`RequestEnvelope`] frame, the server answers with one [`ResponseEnvelope`] frame (the
//! framing of `frame.rs`). Server-push streams are refused with an error. Byte layout:
//! `docs/formats/rpc.md`.
//!
//! A [`TcpClient`] keeps up to `max_connections` connections to its server: a call takes an
//! idle one (one the server closed meanwhile is noticed before use and dropped) or opens one,
//! and puts it back when the answer is read. A call that fails or passes its deadline drops
//! its connection, so no connection is ever reused in the middle of a frame.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::ErrorKind;
use rustls::pki_types::ServerName;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::time::Instant;
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tracing::debug;

use crate::client::{bind_addr, local_ip};
use crate::error::{RpcError, tcp_tls_refusal};
use crate::frame::{self, FrameError, RequestEnvelope, ResponseEnvelope};
use crate::server::{PeerInfo, Service};
use crate::tls::ClusterCredentials;

/// The ALPN protocol id of ht's TCP calls.
pub const TCP_ALPN: &[u8] = b"ht-tcp/1";

/// Bound on a server's TLS handshake with a new connection.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Limits of a [`TcpClient`].
#[derive(Debug, Clone)]
pub struct TcpClientOptions {
    /// Largest request or response message, in bytes.
    pub max_message_bytes: usize,
    /// Bound on setting up a connection (including the TLS handshake).
    pub connect_timeout: Duration,
    /// An idle connection older than this is closed rather than reused (keep it under the
    /// server's `idle_timeout`, after which the server closes it).
    pub idle_timeout: Duration,
    /// Connections to the server at once; a call past it waits for one (within its deadline).
    pub max_connections: usize,
}

impl Default for TcpClientOptions {
    fn default() -> Self {
        Self {
            max_message_bytes: frame::DEFAULT_MAX_MESSAGE_BYTES,
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(10),
            max_connections: 32,
        }
    }
}

type ClientStream = tokio_rustls::client::TlsStream<TcpStream>;

/// An idle connection and when it was last used.
struct Idle {
    stream: ClientStream,
    since: Instant,
}

/// Calls to one server over pooled TCP + TLS connections.
pub struct TcpClient {
    peer: SocketAddr,
    server_name: String,
    tls_name: ServerName<'static>,
    connector: TlsConnector,
    options: TcpClientOptions,
    idle: Mutex<Vec<Idle>>,
    permits: Semaphore,
}

impl TcpClient {
    /// Connects to the server `server_name` (the name its certificate was issued to) at
    /// `addr`, presenting `credentials`; the first connection is set up now, so that an
    /// unreachable or refusing server shows here.
    pub async fn connect(
        addr: SocketAddr,
        server_name: &str,
        credentials: &ClusterCredentials,
        options: TcpClientOptions,
    ) -> Result<Self, RpcError> {
        let mut config = credentials.rustls_client_config()?;
        config.alpn_protocols = vec![TCP_ALPN.to_vec()];
        let tls_name =
            ServerName::try_from(server_name.to_string()).map_err(|e| RpcError::Refused {
                peer: addr,
                server_name: server_name.to_string(),
                detail: format!("not a valid TLS server name: {e}"),
            })?;
        let client = Self {
            peer: addr,
            server_name: server_name.to_string(),
            tls_name,
            connector: TlsConnector::from(Arc::new(config)),
            permits: Semaphore::new(options.max_connections.max(1)),
            options,
            idle: Mutex::new(Vec::new()),
        };
        let stream = client.open().await?;
        client.put_idle(stream);
        Ok(client)
    }

    /// The server's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Calls `method` and waits for its response, at most `deadline`.
    pub async fn call(
        &self,
        method: &str,
        payload: Bytes,
        deadline: Duration,
    ) -> Result<Bytes, RpcError> {
        let request = RequestEnvelope {
            method: method.to_string(),
            payload,
            stream: false,
        };
        let limit = self.options.max_message_bytes;
        let request = frame::encode(&request, limit).map_err(|e| self.frame_error(method, e))?;
        let attempt = async {
            let _permit = self
                .permits
                .acquire()
                .await
                .map_err(|_| self.transport(method, "client closed".into()))?;
            let mut stream = match self.take_idle() {
                Some(stream) => stream,
                None => self.open().await?,
            };
            let io = |e: std::io::Error| match tcp_tls_refusal(&e) {
                Some(detail) => self.refused(detail),
                None => self.transport(method, e.to_string()),
            };
            stream.write_all(&request).await.map_err(io)?;
            stream.flush().await.map_err(io)?;
            let response =
                match frame::read_frame_from::<ResponseEnvelope, _>(&mut stream, limit).await {
                    Ok(Some(response)) => response,
                    Ok(None) => {
                        return Err(
                            self.transport(method, "connection closed without a response".into())
                        );
                    }
                    Err(FrameError::Io(e)) => return Err(io(e)),
                    Err(e) => return Err(self.frame_error(method, e)),
                };
            self.put_idle(stream);
            match response.error {
                None => Ok(response.payload),
                Some(e) => Err(RpcError::Remote {
                    peer: self.peer,
                    method: method.to_string(),
                    kind: frame::kind_from_wire(e.kind),
                    message: e.message,
                }),
            }
        };
        match tokio::time::timeout(deadline, attempt).await {
            Ok(result) => result,
            Err(_) => Err(RpcError::Timeout {
                peer: self.peer,
                method: method.to_string(),
                deadline,
            }),
        }
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

    /// Closes the idle connections; calls in flight close theirs when they end.
    pub fn close(&self) {
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
    }

    /// Idle connections held now.
    pub fn idle_connections(&self) -> usize {
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .len()
    }

    /// The most recently used idle connection that is still open.
    fn take_idle(&self) -> Option<ClientStream> {
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        while let Some(conn) = idle.pop() {
            if conn.since.elapsed() < self.options.idle_timeout && quiet(conn.stream.get_ref().0) {
                return Some(conn.stream);
            }
        }
        None
    }

    fn put_idle(&self, stream: ClientStream) {
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if idle.len() < self.options.max_connections.max(1) {
            idle.push(Idle {
                stream,
                since: Instant::now(),
            });
        }
    }

    /// A new connection: TCP from this process's serving IP ([`bind_addr`]), then TLS.
    async fn open(&self) -> Result<ClientStream, RpcError> {
        let connect_err = |detail: String| RpcError::Connect {
            peer: self.peer,
            server_name: self.server_name.clone(),
            detail,
        };
        let setup = async {
            let socket = if self.peer.is_ipv4() {
                TcpSocket::new_v4()
            } else {
                TcpSocket::new_v6()
            }
            .map_err(|e| connect_err(format!("socket: {e}")))?;
            let bind = bind_addr(self.peer, local_ip());
            socket
                .bind(bind)
                .map_err(|e| connect_err(format!("bind {bind}: {e}")))?;
            let tcp = socket
                .connect(self.peer)
                .await
                .map_err(|e| connect_err(e.to_string()))?;
            tcp.set_nodelay(true)
                .map_err(|e| connect_err(format!("TCP_NODELAY: {e}")))?;
            self.connector
                .connect(self.tls_name.clone(), tcp)
                .await
                .map_err(|e| match tcp_tls_refusal(&e) {
                    Some(detail) => self.refused(detail),
                    None => connect_err(format!("TLS: {e}")),
                })
        };
        tokio::time::timeout(self.options.connect_timeout, setup)
            .await
            .map_err(|_| {
                connect_err(format!(
                    "no connection within {}ms",
                    self.options.connect_timeout.as_millis()
                ))
            })?
    }

    fn refused(&self, detail: String) -> RpcError {
        RpcError::Refused {
            peer: self.peer,
            server_name: self.server_name.clone(),
            detail,
        }
    }

    fn transport(&self, method: &str, detail: String) -> RpcError {
        RpcError::Transport {
            peer: self.peer,
            method: method.to_string(),
            detail,
        }
    }

    fn frame_error(&self, method: &str, source: FrameError) -> RpcError {
        RpcError::Frame {
            peer: self.peer,
            method: method.to_string(),
            source,
        }
    }
}

/// True if nothing waits to be read on an idle connection: a server that closed it (idle
/// timeout, restart) left an end of stream or a TLS alert there.
fn quiet(tcp: &TcpStream) -> bool {
    let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    // The socket is non-blocking: nothing to read is `WouldBlock`.
    matches!(
        socket2::SockRef::from(tcp).peek(&mut byte),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
    )
}

/// Binds the TCP listener of a server whose QUIC endpoint is at `addr` (same IP and port).
pub(crate) fn listen(addr: SocketAddr, backlog: i32) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        let _ = socket.set_only_v6(false);
    }
    // A restarted server takes its port back while its old connections sit in TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Serves `service` on `listener` until `shutdown`; each connection task holds a clone of
/// `task_token`, as the QUIC server's tasks do.
pub(crate) fn serve<S: Service>(
    listener: std::net::TcpListener,
    credentials: &ClusterCredentials,
    service: Arc<S>,
    limits: TcpServerLimits,
    shutdown: watch::Receiver<bool>,
    task_token: mpsc::Sender<()>,
) -> Result<(), RpcError> {
    let mut config = credentials.rustls_server_config()?;
    config.alpn_protocols = vec![TCP_ALPN.to_vec()];
    // No resumption: tickets would only be bytes a pooled client must read past.
    config.send_tls13_tickets = 0;
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::from_std(listener).map_err(|source| RpcError::Endpoint {
        addr: limits.addr,
        source,
    })?;
    tokio::spawn(accept_loop(
        listener, acceptor, service, limits, shutdown, task_token,
    ));
    Ok(())
}

/// What a server's TCP side needs from its options.
#[derive(Debug, Clone)]
pub(crate) struct TcpServerLimits {
    pub(crate) addr: SocketAddr,
    pub(crate) max_message_bytes: usize,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_connections: usize,
}

async fn accept_loop<S: Service>(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    service: Arc<S>,
    limits: TcpServerLimits,
    mut shutdown: watch::Receiver<bool>,
    task_token: mpsc::Sender<()>,
) {
    let connections = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let limits = Arc::new(limits);
    loop {
        let permit = tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => break,
            permit = connections.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, remote) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                debug!(addr = %limits.addr, error = %e, "rpc tcp server: accept failed");
                // Out of file descriptors and the like: do not spin.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let service = service.clone();
        let limits = limits.clone();
        let shutdown = shutdown.clone();
        let token = task_token.clone();
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => stream,
                // A refused handshake (no or foreign certificate) ends here.
                Ok(Err(e)) => {
                    debug!(peer = %remote, error = %e, "rpc tcp server: handshake failed");
                    return;
                }
                Err(_) => {
                    debug!(peer = %remote, "rpc tcp server: handshake timed out");
                    return;
                }
            };
            let certificate = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .map(|c| c.clone().into_owned());
            let peer = PeerInfo {
                addr: remote,
                certificate,
            };
            serve_connection(stream, &*service, &peer, &limits, shutdown).await;
            drop(permit);
            drop(token);
        });
    }
    // The port is free for a restarted server once shutdown returns.
    drop(listener);
    drop(task_token);
}

/// Answers the calls of one connection, one after another, until the client closes it, it
/// stays idle for `idle_timeout`, a frame is bad, or the server shuts down.
async fn serve_connection<S: Service>(
    mut stream: tokio_rustls::server::TlsStream<TcpStream>,
    service: &S,
    peer: &PeerInfo,
    limits: &TcpServerLimits,
    mut shutdown: watch::Receiver<bool>,
) {
    let limit = limits.max_message_bytes;
    loop {
        let read = tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => break,
            read = tokio::time::timeout(
                limits.idle_timeout,
                frame::read_frame_from::<RequestEnvelope, _>(&mut stream, limit),
            ) => read,
        };
        let request = match read {
            Err(_) => break,
            Ok(Ok(Some(request))) => request,
            Ok(Ok(None)) => break,
            Ok(Err(FrameError::TooLarge { len, limit })) => {
                // The rest of the frame is not read: the connection cannot go on.
                let response = ResponseEnvelope::err(
                    ErrorKind::InvalidInput,
                    format!("request of {len} bytes exceeds the limit of {limit} bytes"),
                );
                let _ = respond(&mut stream, &response, limit).await;
                break;
            }
            Ok(Err(e)) => {
                debug!(peer = %peer.addr, error = %e, "rpc tcp server: bad request frame");
                break;
            }
        };
        let response = if request.stream {
            ResponseEnvelope::err(
                ErrorKind::InvalidInput,
                format!(
                    "{}: streaming calls are not served over TCP; call over QUIC",
                    request.method
                ),
            )
        } else {
            match service.call(peer, &request.method, request.payload).await {
                Ok(payload) => ResponseEnvelope::ok(payload),
                Err(e) => ResponseEnvelope::err(e.kind(), e.to_string()),
            }
        };
        if let Err(e) = respond(&mut stream, &response, limit).await {
            debug!(peer = %peer.addr, method = request.method, error = %e, "rpc tcp server: cannot send response");
            break;
        }
    }
    let _ = stream.shutdown().await;
}

/// Writes one response frame (an error in its place if it is too large) and flushes it.
async fn respond(
    stream: &mut tokio_rustls::server::TlsStream<TcpStream>,
    response: &ResponseEnvelope,
    limit: usize,
) -> Result<(), FrameError> {
    let frame = match frame::encode(response, limit) {
        Err(FrameError::TooLarge { len, limit }) => frame::encode(
            &ResponseEnvelope::err(
                ErrorKind::Internal,
                format!("response of {len} bytes exceeds the limit of {limit} bytes"),
            ),
            limit,
        )?,
        other => other?,
    };
    stream.write_all(&frame).await?;
    stream.flush().await?;
    Ok(())
}

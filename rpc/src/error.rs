//! `RpcError`: what a call or connection attempt reports, naming the peer and the method.

use std::net::SocketAddr;
use std::time::Duration;

use common::ErrorKind;

use crate::frame::FrameError;
use crate::tls::TlsError;

/// An error from the network layer. Client-side variants name the peer address and the method;
/// [`RpcError::Service`] is what a server handler returns, before it has a peer to name.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// A handler's own error; sent to the client as its kind and message.
    #[error("{message}")]
    Service { kind: ErrorKind, message: String },
    /// The server answered the call with an error.
    #[error("rpc {method} to {peer}: server error ({kind:?}): {message}")]
    Remote {
        peer: SocketAddr,
        method: String,
        kind: ErrorKind,
        message: String,
    },
    /// The call's deadline passed before its answer arrived.
    #[error("rpc {method} to {peer}: deadline of {}ms exceeded", deadline.as_millis())]
    Timeout {
        peer: SocketAddr,
        method: String,
        deadline: Duration,
    },
    /// No connection could be set up (unreachable, handshake refused, bad certificate).
    #[error("rpc connect to {peer} ({server_name}): {detail}")]
    Connect {
        peer: SocketAddr,
        server_name: String,
        detail: String,
    },
    /// The connection or stream failed during the call.
    #[error("rpc {method} to {peer}: transport: {detail}")]
    Transport {
        peer: SocketAddr,
        method: String,
        detail: String,
    },
    /// A message could not be framed or unframed (too large, truncated, undecodable).
    #[error("rpc {method} to {peer}: {source}")]
    Frame {
        peer: SocketAddr,
        method: String,
        source: FrameError,
    },
    /// Local TLS setup failed.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// Binding or running a local endpoint failed.
    #[error("rpc endpoint {addr}: {source}")]
    Endpoint {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

impl RpcError {
    /// A handler error with a kind and a message.
    pub fn service(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self::Service {
            kind,
            message: message.into(),
        }
    }

    /// What the caller should do about it, as a coarse kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Service { kind, .. } | Self::Remote { kind, .. } => *kind,
            Self::Timeout { .. } | Self::Connect { .. } | Self::Transport { .. } => {
                ErrorKind::Unavailable
            }
            Self::Frame { source, .. } => match source {
                FrameError::TooLarge { .. } => ErrorKind::InvalidInput,
                FrameError::Decode(_) | FrameError::Truncated { .. } => ErrorKind::Corruption,
                FrameError::Read(_) | FrameError::Write(_) | FrameError::Closed(_) => {
                    ErrorKind::Unavailable
                }
            },
            Self::Tls(_) | Self::Endpoint { .. } => ErrorKind::Internal,
        }
    }

    /// True if the deadline passed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout { .. })
    }

    /// True if repeating an idempotent call may succeed.
    pub fn is_retryable(&self) -> bool {
        self.kind() == ErrorKind::Unavailable
    }
}

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
    /// The TLS handshake was refused, by this node or by the peer, for a reason that trying
    /// again will not change: a certificate not signed by the other side's cluster CA, a
    /// certificate not issued to the name asked for, no common application protocol. Retry
    /// loops stop at once on it; `detail` says which side refused and why.
    #[error("rpc connect to {peer} ({server_name}): refused: {detail}")]
    Refused {
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
                FrameError::Read(_)
                | FrameError::Write(_)
                | FrameError::Closed(_)
                | FrameError::Io(_) => ErrorKind::Unavailable,
            },
            // Not Unavailable: the credentials or the address must be fixed first.
            Self::Refused { .. } | Self::Tls(_) | Self::Endpoint { .. } => ErrorKind::Internal,
        }
    }

    /// True if the deadline passed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout { .. })
    }

    /// True if the connection was refused for good ([`RpcError::Refused`]).
    pub fn is_refused(&self) -> bool {
        matches!(self, Self::Refused { .. })
    }

    /// True if repeating an idempotent call may succeed.
    pub fn is_retryable(&self) -> bool {
        self.kind() == ErrorKind::Unavailable
    }
}

/// The name of a TLS alert (RFC 8446, section 6.2) that ends a handshake for good: the
/// credentials, the name asked for or the protocol list must change before another try can
/// succeed. Other alerts (internal_error, decode_error, ...) may pass.
fn permanent_alert(alert: u8) -> Option<&'static str> {
    Some(match alert {
        40 => "handshake_failure",
        42 => "bad_certificate",
        43 => "unsupported_certificate",
        44 => "certificate_revoked",
        45 => "certificate_expired",
        46 => "certificate_unknown",
        48 => "unknown_ca",
        49 => "access_denied",
        51 => "decrypt_error",
        70 => "protocol_version",
        71 => "insufficient_security",
        112 => "unrecognized_name",
        116 => "certificate_required",
        120 => "no_application_protocol",
        _ => return None,
    })
}

/// Why a connection was refused for good, if `e` is such a refusal: a TLS alert this node
/// raised against the server's handshake (quinn reports it as a local transport error) or one
/// the server closed the connection with (QUIC carries an alert as error code 0x100 + alert).
pub fn tls_refusal(e: &quinn::ConnectionError) -> Option<String> {
    let (code, reason, ours) = match e {
        quinn::ConnectionError::TransportError(t) => (t.code, t.reason.clone(), true),
        quinn::ConnectionError::ConnectionClosed(c) => (
            c.error_code,
            String::from_utf8_lossy(&c.reason).into_owned(),
            false,
        ),
        _ => return None,
    };
    let code = u64::from(code);
    if !(0x100..0x200).contains(&code) {
        return None;
    }
    let alert = (code & 0xff) as u8;
    refusal(ours, alert, &reason)
}

/// The refusal a permanent TLS alert means, raised by this node (`ours`) or by the server.
fn refusal(ours: bool, alert: u8, reason: &str) -> Option<String> {
    let name = permanent_alert(alert)?;
    // Every ht CA has the same name, so a certificate of another cluster's CA fails on its
    // signature (decrypt_error) rather than as an unknown issuer (unknown_ca).
    let cause = match (ours, alert) {
        (true, 48 | 51) => {
            "the server's certificate is not signed by this node's cluster CA (a server of \
             another cluster, or credentials of another cluster here)"
        }
        (true, 42) => {
            "this node refused the server's certificate (not issued to the name asked for, or \
             malformed)"
        }
        (_, 120) => "no application protocol in common (ht speaks ht/1)",
        (true, _) => "this node refused the server's TLS handshake",
        (false, 42 | 46 | 48 | 51 | 116) => {
            "the server refused this node's certificate (not signed by the server's cluster \
             CA, or none presented)"
        }
        (false, _) => "the server refused the TLS handshake",
    };
    Some(if reason.is_empty() {
        format!("{cause}: TLS alert {alert} ({name})")
    } else {
        format!("{cause}: TLS alert {alert} ({name}): {reason}")
    })
}

/// Why a TCP connection (`tcp.rs`) was refused for good, if `e` is such a refusal: the
/// server's certificate failed this node's checks, or the server sent a permanent alert (in
/// TLS 1.3 a client learns that its own certificate was refused only on its first read).
pub fn tcp_tls_refusal(e: &std::io::Error) -> Option<String> {
    use rustls::CertificateError;
    let tls = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    match tls {
        rustls::Error::AlertReceived(alert) => refusal(false, u8::from(*alert), ""),
        rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer | CertificateError::BadSignature,
        ) => refusal(true, 48, &tls.to_string()),
        rustls::Error::InvalidCertificate(_) => refusal(true, 42, &tls.to_string()),
        rustls::Error::NoApplicationProtocol => refusal(true, 120, ""),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed_by_peer(code: u64) -> quinn::ConnectionError {
        quinn::ConnectionError::ConnectionClosed(quinn::ConnectionClose {
            error_code: quinn::TransportErrorCode::crypto((code & 0xff) as u8),
            frame_type: None,
            reason: bytes::Bytes::new(),
        })
    }

    #[test]
    fn certificate_and_protocol_alerts_are_refusals() {
        // unknown_ca, decrypt_error, bad_certificate, certificate_required,
        // no_application_protocol.
        for alert in [48u64, 51, 42, 116, 120] {
            let detail = tls_refusal(&closed_by_peer(alert)).expect("a refusal");
            assert!(detail.contains(&format!("TLS alert {alert}")), "{detail}");
        }
        assert!(
            tls_refusal(&closed_by_peer(48))
                .expect("unknown_ca")
                .contains("certificate")
        );
    }

    #[test]
    fn passing_failures_are_not_refusals() {
        // internal_error may pass; timeouts and resets are not TLS verdicts at all.
        assert!(tls_refusal(&closed_by_peer(80)).is_none());
        assert!(tls_refusal(&quinn::ConnectionError::TimedOut).is_none());
        assert!(tls_refusal(&quinn::ConnectionError::Reset).is_none());
        assert!(tls_refusal(&quinn::ConnectionError::LocallyClosed).is_none());
    }
}

//! The cluster client's error mapping: Hyperspace, connection and range-server failures as
//! [`ClientError`]s (unavailable ones are retried), and back.

use common::ErrorKind;
use rangeserver::server::client::RsError;

use crate::ClientError;

pub(super) fn hs_err(e: hyperspace::client::ClientError) -> ClientError {
    // A refusal (TLS: another cluster's replicas, a wrong name) is not worth retrying.
    let kind = match e {
        hyperspace::client::ClientError::Refused { .. } => ErrorKind::Internal,
        _ => ErrorKind::Unavailable,
    };
    ClientError::Storage {
        kind,
        message: format!("hyperspace: {e}"),
    }
}

/// A server that could not be connected to: unavailable (retried) unless the connection was
/// refused for good or could not be configured (`kind`, from the rpc error), which ends the
/// retries at once with the cause.
pub(super) fn connect_failure(kind: ErrorKind, message: String) -> ClientError {
    match kind {
        ErrorKind::Unavailable => unavailable(message),
        kind => ClientError::Storage { kind, message },
    }
}

pub(super) fn unavailable(message: String) -> ClientError {
    ClientError::Storage {
        kind: ErrorKind::Unavailable,
        message,
    }
}

/// A range server's refusal as the embedded database would report it: invalid input in the
/// engine's own words, other failures naming the server.
pub fn server_error(location: &str, e: RsError) -> ClientError {
    match e.kind() {
        ErrorKind::InvalidInput => ClientError::InvalidInput(engine_message(&e)),
        kind => ClientError::Storage {
            kind,
            message: format!("range server {location}: {e}"),
        },
    }
}

/// The engine's message inside a range server error, without the rpc decoration
/// (`rpc <method> to <peer>: server error (<kind>): <method>: invalid input: <message>`).
pub fn engine_message(e: &RsError) -> String {
    let m = match e {
        RsError::Rpc(rpc::RpcError::Service { message, .. })
        | RsError::Rpc(rpc::RpcError::Remote { message, .. }) => message.as_str(),
        RsError::InvalidInput(m) => return m.clone(),
        other => return other.to_string(),
    };
    let m = match m.split_once(": ") {
        Some((method, rest)) if method.starts_with("rs.") => rest,
        _ => m,
    };
    m.strip_prefix("invalid input: ").unwrap_or(m).to_string()
}

/// A range server that cannot be reached, as the error its call would have given: unavailable
/// (retried), unless it refused the connection for good ([`connect_failure`]).
pub(super) fn unreachable_server(e: ClientError) -> RsError {
    let kind = match e.kind() {
        ErrorKind::Internal => ErrorKind::Internal,
        _ => ErrorKind::Unavailable,
    };
    RsError::Rpc(rpc::RpcError::service(kind, e.to_string()))
}

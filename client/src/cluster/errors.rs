//! The cluster client's error mapping: Hyperspace, connection and range-server failures as
//! [`ClientError`]s (unavailable ones are retried), and back.

use ::proto::rs::client::RsError;
use common::ErrorKind;

use crate::ClientError;

pub(super) use crate::hs_err;

/// A server that could not be connected to: unavailable (retried) unless the connection was
/// refused for good or could not be configured (`kind`, from the rpc error), which ends the
/// retries at once with the cause.
pub(super) fn connect_failure(kind: ErrorKind, message: String) -> ClientError {
    match kind {
        ErrorKind::Unavailable => unavailable(message),
        kind => ClientError::storage(kind, message),
    }
}

pub(super) fn unavailable(message: String) -> ClientError {
    ClientError::storage(ErrorKind::Unavailable, message)
}

pub use ::proto::rs::client::{engine_message, server_error};

/// A range server that cannot be reached, as the error its call would have given: unavailable
/// (retried), unless it refused the connection for good ([`connect_failure`]).
pub(super) fn unreachable_server(e: ClientError) -> RsError {
    let kind = match e.kind() {
        ErrorKind::Internal => ErrorKind::Internal,
        _ => ErrorKind::Unavailable,
    };
    RsError::Rpc(rpc::RpcError::service(kind, e.to_string()))
}

//! The master's rpc messages (hand-written prost, no protoc), shared by the master and its
//! clients. Layout: docs/formats/cluster.md.

use std::net::SocketAddr;
use std::time::Duration;

use common::ErrorKind;
use rpc::ClusterCredentials;

use crate::error::ClientError;

/// Method names; a change of meaning gets a new name.
pub mod method {
    pub const CREATE_NAMESPACE: &str = "master.create_namespace";
    pub const DROP_NAMESPACE: &str = "master.drop_namespace";
    pub const CREATE_TABLE: &str = "master.create_table";
    pub const ALTER_TABLE: &str = "master.alter_table";
    pub const RENAME_TABLE: &str = "master.rename_table";
    pub const DROP_TABLE: &str = "master.drop_table";
    pub const BALANCE: &str = "master.balance";
    pub const STATUS: &str = "master.status";
    /// A range server's report that its ranges changed (it split one) or that it just
    /// registered: the master looks at the servers now instead of at its next poll.
    pub const NUDGE: &str = "master.nudge";
}

/// The certificate name the master presents.
pub const MASTER_NAME: &str = "master";

/// A DDL request: `path` (and `to` for a rename), `schema_json` for create and alter.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DdlRequest {
    #[prost(string, tag = "1")]
    pub path: String,
    #[prost(string, tag = "2")]
    pub to: String,
    #[prost(string, tag = "3")]
    pub schema_json: String,
    /// CREATE TABLE's split rows (strictly increasing): one range per gap between them.
    #[prost(bytes = "vec", repeated, tag = "4")]
    pub splits: Vec<Vec<u8>>,
}

/// Outcome codes of a DDL call, one per [`ClientError`] variant, so the client reports exactly
/// what the embedded database would.
pub mod code {
    pub const OK: u32 = 0;
    pub const NAMESPACE_NOT_FOUND: u32 = 1;
    pub const NAMESPACE_EXISTS: u32 = 2;
    pub const NAMESPACE_NOT_EMPTY: u32 = 3;
    pub const TABLE_NOT_FOUND: u32 = 4;
    pub const TABLE_EXISTS: u32 = 5;
    pub const INVALID_INPUT: u32 = 6;
    pub const STORAGE: u32 = 7;
}

/// The answer to a DDL call: `code` (see [`code`]), `message` (the name concerned, or the
/// error text), `kind` (the `common::ErrorKind` of a storage error, as its Debug name) and the
/// stored schema for create and alter.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DdlReply {
    #[prost(uint32, tag = "1")]
    pub code: u32,
    #[prost(string, tag = "2")]
    pub message: String,
    #[prost(string, tag = "3")]
    pub kind: String,
    #[prost(string, tag = "4")]
    pub schema_json: String,
}

impl DdlReply {
    pub fn ok(schema_json: String) -> Self {
        Self {
            code: code::OK,
            schema_json,
            ..Default::default()
        }
    }

    pub fn from_error(e: &ClientError) -> Self {
        let (code, message, kind) = match e {
            ClientError::NamespaceNotFound(m) => (code::NAMESPACE_NOT_FOUND, m.clone(), None),
            ClientError::NamespaceExists(m) => (code::NAMESPACE_EXISTS, m.clone(), None),
            ClientError::NamespaceNotEmpty(m) => (code::NAMESPACE_NOT_EMPTY, m.clone(), None),
            ClientError::TableNotFound(m) => (code::TABLE_NOT_FOUND, m.clone(), None),
            ClientError::TableExists(m) => (code::TABLE_EXISTS, m.clone(), None),
            ClientError::InvalidInput(m) => (code::INVALID_INPUT, m.clone(), None),
            ClientError::Storage { kind, message, .. } => {
                (code::STORAGE, message.clone(), Some(*kind))
            }
        };
        Self {
            code,
            message,
            kind: kind.map(|k| format!("{k:?}")).unwrap_or_default(),
            schema_json: String::new(),
        }
    }

    /// The error this reply carries, if any.
    pub fn into_result(self) -> Result<String, ClientError> {
        let m = self.message;
        Err(match self.code {
            code::OK => return Ok(self.schema_json),
            code::NAMESPACE_NOT_FOUND => ClientError::NamespaceNotFound(m),
            code::NAMESPACE_EXISTS => ClientError::NamespaceExists(m),
            code::NAMESPACE_NOT_EMPTY => ClientError::NamespaceNotEmpty(m),
            code::TABLE_NOT_FOUND => ClientError::TableNotFound(m),
            code::TABLE_EXISTS => ClientError::TableExists(m),
            code::INVALID_INPUT => ClientError::InvalidInput(m),
            _ => ClientError::storage(parse_kind(&self.kind), m),
        })
    }
}

fn parse_kind(s: &str) -> common::ErrorKind {
    use common::ErrorKind as K;
    [
        K::NotFound,
        K::AlreadyExists,
        K::InvalidInput,
        K::Corruption,
        K::Unavailable,
        K::Internal,
    ]
    .into_iter()
    .find(|k| format!("{k:?}") == s)
    .unwrap_or(K::Internal)
}

/// `master.status` and `master.balance` take nothing.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Empty {}

/// One range server as the master sees it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ServerStatus {
    #[prost(string, tag = "1")]
    pub location: String,
    #[prost(string, tag = "2")]
    pub addr: String,
    #[prost(uint32, tag = "3")]
    pub ranges: u32,
    #[prost(bool, tag = "4")]
    pub live: bool,
    /// The server's load as the balancer sees it: cells written and read per second, summed
    /// over its ranges (smoothed).
    #[prost(double, tag = "5")]
    pub load: f64,
}

/// `master.status`: the servers, the METADATA location, unfinished operations.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MasterStatus {
    #[prost(message, repeated, tag = "1")]
    pub servers: Vec<ServerStatus>,
    #[prost(string, tag = "2")]
    pub root_location: String,
    #[prost(string, repeated, tag = "3")]
    pub operations: Vec<String>,
    #[prost(uint64, tag = "4")]
    pub moves: u64,
    #[prost(uint64, tag = "5")]
    pub recoveries: u64,
    /// The active master's process id.
    #[prost(uint32, tag = "6")]
    pub pid: u32,
    /// Rounds of the garbage collection of shared cell stores that ran to the end.
    #[prost(uint64, tag = "7")]
    pub gc_rounds: u64,
    /// Cell stores that garbage collection removed (exported ones and those under retired
    /// servers' roots).
    #[prost(uint64, tag = "8")]
    pub gc_removed_stores: u64,
    /// Roots of retired servers it removed whole.
    #[prost(uint64, tag = "9")]
    pub gc_removed_roots: u64,
}

/// A connection to the active master (its address is the `addr` attribute of
/// [`crate::layout::MASTER`]; callers read it from Hyperspace), with a typed method per call.
pub struct MasterClient {
    rpc: rpc::Client,
}

impl std::fmt::Debug for MasterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterClient")
    }
}

impl MasterClient {
    /// Connects to the master at `addr`. A connection refused for good (TLS: another
    /// cluster's CA, a wrong name) or that cannot be configured is an error of that kind,
    /// which ends callers' retries at once; anything else is `Unavailable`.
    pub async fn connect(
        addr: SocketAddr,
        credentials: &ClusterCredentials,
        idle_timeout: Duration,
    ) -> Result<Self, ClientError> {
        let options = rpc::ClientOptions {
            idle_timeout,
            connect_timeout: Duration::from_secs(2),
            ..Default::default()
        };
        let failure = |kind: ErrorKind, message: String| match kind {
            ErrorKind::Unavailable => ClientError::unavailable(message),
            kind => ClientError::storage(kind, message),
        };
        let config = credentials
            .client_config(options.idle_timeout)
            .map_err(|e| failure(ErrorKind::Internal, format!("master at {addr}: {e}")))?;
        let rpc = rpc::Client::connect_with(addr, MASTER_NAME, config, options)
            .await
            .map_err(|e| failure(e.kind(), format!("master at {addr}: {e}")))?;
        Ok(Self { rpc })
    }

    /// The connection itself, for calls not named here.
    pub fn into_rpc(self) -> rpc::Client {
        self.rpc
    }

    /// A DDL call ([`method`]): the stored schema's JSON (create, alter) or the exact
    /// [`ClientError`] the master answered; an rpc failure is the `RpcError`.
    pub async fn ddl(
        &self,
        method: &str,
        req: &DdlRequest,
        timeout: Duration,
    ) -> Result<Result<String, ClientError>, rpc::RpcError> {
        let reply: DdlReply = self.rpc.call_message(method, req, timeout).await?;
        Ok(reply.into_result())
    }

    /// `master.nudge`: this range server's ranges changed (or it just registered).
    pub async fn nudge(
        &self,
        timeout: Duration,
    ) -> Result<Result<String, ClientError>, rpc::RpcError> {
        self.ddl(method::NUDGE, &DdlRequest::default(), timeout)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_survives_the_wire() {
        let errors = [
            ClientError::NamespaceNotFound("/a".into()),
            ClientError::NamespaceExists("/a".into()),
            ClientError::NamespaceNotEmpty("/a".into()),
            ClientError::TableNotFound("/t".into()),
            ClientError::TableExists("/t".into()),
            ClientError::InvalidInput("bad".into()),
            ClientError::storage(common::ErrorKind::Unavailable, "down"),
        ];
        for e in errors {
            let back = DdlReply::from_error(&e).into_result().unwrap_err();
            assert_eq!(back.to_string(), e.to_string());
            assert_eq!(back.kind(), e.kind());
        }
        assert_eq!(DdlReply::ok("{}".into()).into_result().unwrap(), "{}");
    }
}

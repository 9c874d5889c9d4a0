//! The master's rpc service: DDL, BALANCE and status, handed to the control loop one at a time
//! (messages in `proto::master`, docs/formats/cluster.md).

use std::net::SocketAddr;

use async_trait::async_trait;
use bytes::Bytes;
use common::{ErrorKind, TableSchema};
use prost::Message as _;
use proto::ClientError;
use proto::master::{DdlReply, DdlRequest, method};
use rpc::{ClusterCredentials, PeerInfo, RpcError, Server};
use tokio::sync::{mpsc, oneshot};

use crate::{Answer, Request, Responder};

/// Serves the master's methods by queueing them for the control loop (a bounded queue: when
/// it is full, callers are told to come back later).
pub struct MasterService {
    tx: mpsc::Sender<(Request, Responder)>,
}

impl MasterService {
    pub(crate) fn new(tx: mpsc::Sender<(Request, Responder)>) -> Self {
        Self { tx }
    }

    /// Binds `addr` and serves, presenting `credentials` (issued to `master`).
    pub fn bind(
        self,
        addr: SocketAddr,
        credentials: &ClusterCredentials,
    ) -> Result<Server, RpcError> {
        Server::bind(addr, credentials, self)
    }

    async fn ask(&self, req: Request) -> Result<crate::Result<Answer>, RpcError> {
        let (tx, rx) = oneshot::channel();
        self.tx.try_send((req, tx)).map_err(|_| {
            RpcError::service(ErrorKind::Unavailable, "the master is busy or stopping")
        })?;
        rx.await
            .map_err(|_| RpcError::service(ErrorKind::Unavailable, "the master is stopping"))
    }
}

fn schema_of(req: &DdlRequest) -> Result<TableSchema, ClientError> {
    TableSchema::from_json(&req.schema_json)
        .map_err(|e| ClientError::InvalidInput(format!("bad schema: {e}")))
}

#[async_trait]
impl rpc::Service for MasterService {
    async fn call(&self, _peer: &PeerInfo, m: &str, payload: Bytes) -> Result<Bytes, RpcError> {
        if m == method::STATUS {
            return match self.ask(Request::Status).await? {
                Ok(Answer::Status(s)) => Ok(s.encode_to_vec().into()),
                Ok(_) => Err(RpcError::service(ErrorKind::Internal, "unexpected answer")),
                Err(e) => Err(RpcError::service(e.kind(), e.to_string())),
            };
        }
        let req = DdlRequest::decode(payload)
            .map_err(|e| RpcError::service(ErrorKind::InvalidInput, format!("{m}: {e}")))?;
        let request = match m {
            method::CREATE_NAMESPACE => Ok(Request::CreateNamespace(req.path)),
            method::DROP_NAMESPACE => Ok(Request::DropNamespace(req.path)),
            method::CREATE_TABLE => {
                schema_of(&req).map(|s| Request::CreateTable(req.path, s, req.splits))
            }
            method::ALTER_TABLE => schema_of(&req).map(|s| Request::AlterTable(req.path, s)),
            method::RENAME_TABLE => Ok(Request::RenameTable(req.path, req.to)),
            method::DROP_TABLE => Ok(Request::DropTable(req.path)),
            method::BALANCE => Ok(Request::Balance),
            method::NUDGE => Ok(Request::Look),
            other => {
                return Err(RpcError::service(
                    ErrorKind::NotFound,
                    format!("the master has no method {other:?}"),
                ));
            }
        };
        let answer = match request {
            Ok(r) => self.ask(r).await?,
            Err(e) => Err(e),
        };
        let reply = match answer {
            Ok(Answer::Schema(s)) => DdlReply::ok(s.to_json()),
            Ok(_) => DdlReply::ok(String::new()),
            Err(e) => DdlReply::from_error(&e),
        };
        Ok(reply.encode_to_vec().into())
    }
}

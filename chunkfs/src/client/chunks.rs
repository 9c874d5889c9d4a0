//! Calls to one chunk server: write (down a pipeline), finalize, read; a failed connection is
//! forgotten so the next call dials again.

use std::sync::Arc;

use rpc::RpcError;

use super::Inner;
use crate::messages::*;

impl Inner {
    async fn chunk_client(&self, server: &str) -> Result<Arc<rpc::TcpClient>, String> {
        self.peers.chunk_server(server).await
    }

    /// One write to one server (with the rest of the pipeline in `req.forward`).
    pub(super) async fn chunk_write(
        &self,
        server: &str,
        req: &WriteRequest,
    ) -> Result<u64, String> {
        let client = self.chunk_client(server).await?;
        let reply: Result<WriteReply, RpcError> = client
            .call_message(method::CHUNK_WRITE, req, self.options.chunk_call_timeout)
            .await;
        match reply {
            Ok(WriteReply {
                error: None,
                length,
            }) => Ok(length),
            Ok(WriteReply { error: Some(e), .. }) => Err(e.message),
            Err(e) => {
                self.peers.forget(server).await;
                Err(e.to_string())
            }
        }
    }

    pub(super) async fn chunk_finalize(
        &self,
        server: &str,
        chunk_id: u64,
        length: u64,
    ) -> Result<(), String> {
        let client = self.chunk_client(server).await?;
        let req = FinalizeRequest { chunk_id, length };
        let reply: Result<WriteReply, RpcError> = client
            .call_message(
                method::CHUNK_FINALIZE,
                &req,
                self.options.chunk_call_timeout,
            )
            .await;
        match reply {
            Ok(WriteReply { error: None, .. }) => Ok(()),
            Ok(WriteReply { error: Some(e), .. }) => Err(e.message),
            Err(e) => {
                self.peers.forget(server).await;
                Err(e.to_string())
            }
        }
    }

    /// Reads from one server.
    pub(super) async fn chunk_read(
        &self,
        server: &str,
        chunk_id: u64,
        offset: u64,
        len: usize,
    ) -> Result<Vec<u8>, String> {
        let client = self.chunk_client(server).await?;
        let req = ReadRequest {
            chunk_id,
            offset,
            len: len as u64,
        };
        let reply: Result<ReadReply, RpcError> = client
            .call_message(method::CHUNK_READ, &req, self.options.chunk_call_timeout)
            .await;
        match reply {
            Ok(ReadReply {
                error: None, data, ..
            }) if data.len() == len => Ok(data.to_vec()),
            Ok(ReadReply {
                error: None, data, ..
            }) => Err(format!(
                "chunk server {server}: {} bytes instead of {len}",
                data.len()
            )),
            Ok(ReadReply { error: Some(e), .. }) => Err(e.message),
            Err(e) => {
                self.peers.forget(server).await;
                Err(e.to_string())
            }
        }
    }
}

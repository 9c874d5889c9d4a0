//! `MetaService`: the metadata server's rpc methods, decoded and handed to `Shared`.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use common::ErrorKind;
use dfs_broker::FsResult;
use prost::Message;
use rpc::{PeerInfo, RpcError, Service};

use super::namespace::Op;
use super::{Shared, wire_err};
use crate::messages::*;

pub(super) struct MetaService {
    pub(super) shared: Arc<Shared>,
}

fn decode<M: Message + Default>(method: &str, payload: Bytes) -> Result<M, RpcError> {
    M::decode(payload).map_err(|e| {
        RpcError::service(
            ErrorKind::InvalidInput,
            format!("undecodable {method} request: {e}"),
        )
    })
}

fn unit(r: FsResult<()>) -> Vec<u8> {
    UnitReply {
        error: r.err().as_ref().and_then(wire_err),
    }
    .encode_to_vec()
}

#[async_trait]
impl Service for MetaService {
    async fn call(
        &self,
        _peer: &PeerInfo,
        method: &str,
        payload: Bytes,
    ) -> Result<Bytes, RpcError> {
        let s = &self.shared;
        let reply = match method {
            method::META_MKDIRS => {
                let r: PathRequest = decode(method, payload)?;
                let mut st = s.state.lock();
                unit(s.mutate(
                    &mut st,
                    &Op::Mkdirs { path: r.path },
                    s.options.sync_namespace,
                ))
            }
            method::META_CREATE => s.create(decode(method, payload)?).encode_to_vec(),
            method::META_ADD_BLOCK => match s.add_block(decode(method, payload)?) {
                Ok(b) => AddBlockReply {
                    error: None,
                    block: Some(b),
                },
                Err(e) => AddBlockReply {
                    error: wire_err(&e),
                    block: None,
                },
            }
            .encode_to_vec(),
            method::META_COMMIT => unit(s.commit(decode(method, payload)?)),
            method::META_STAT => {
                let r: PathRequest = decode(method, payload)?;
                s.stat(&r.path).encode_to_vec()
            }
            method::META_REMOVE => {
                let r: PathRequest = decode(method, payload)?;
                let mut st = s.state.lock();
                unit(s.mutate(
                    &mut st,
                    &Op::Remove { path: r.path },
                    s.options.sync_namespace,
                ))
            }
            method::META_RMDIR => {
                let r: RmdirRequest = decode(method, payload)?;
                let mut st = s.state.lock();
                let op = Op::Rmdir {
                    path: r.path,
                    recursive: r.recursive,
                };
                unit(s.mutate(&mut st, &op, s.options.sync_namespace))
            }
            method::META_RENAME => {
                let r: RenameRequest = decode(method, payload)?;
                let mut st = s.state.lock();
                let op = Op::Rename {
                    from: r.from,
                    to: r.to,
                };
                unit(s.mutate(&mut st, &op, s.options.sync_namespace))
            }
            method::META_READDIR => {
                let r: PathRequest = decode(method, payload)?;
                let st = s.state.lock();
                match st.cp.namespace.readdir(&r.path) {
                    Ok(entries) => ReaddirReply {
                        error: None,
                        entries: entries.into_iter().map(entry_to_wire).collect(),
                    },
                    Err(e) => ReaddirReply {
                        error: wire_err(&e),
                        entries: Vec::new(),
                    },
                }
                .encode_to_vec()
            }
            method::META_EXISTS => {
                let r: PathRequest = decode(method, payload)?;
                match dfs_broker::check_path("exists", &r.path) {
                    Err(e) => ExistsReply {
                        error: wire_err(&e),
                        exists: false,
                    },
                    Ok(()) => ExistsReply {
                        error: None,
                        exists: s.state.lock().cp.namespace.get(&r.path).is_some(),
                    },
                }
                .encode_to_vec()
            }
            method::META_HEARTBEAT => s.heartbeat(decode(method, payload)?).encode_to_vec(),
            method::META_BLOCK_REPORT => s.block_report(decode(method, payload)?).encode_to_vec(),
            method::META_BAD_CHUNK => {
                s.bad_chunk(decode(method, payload)?);
                UnitReply { error: None }.encode_to_vec()
            }
            method::META_STATUS => s.status().encode_to_vec(),
            method::META_RENEW => unit(s.renew(decode(method, payload)?)),
            other => {
                return Err(RpcError::service(
                    ErrorKind::NotFound,
                    format!("chunkfs metadata server: no method {other:?}"),
                ));
            }
        };
        Ok(reply.into())
    }
}

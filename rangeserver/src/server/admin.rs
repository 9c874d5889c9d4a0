//! Maintenance calls of the range server: `rs.compact` and `rs.wait_for_maintenance` (HQL
//! `COMPACT` and `WAIT FOR MAINTENANCE` on a cluster), and the master's garbage collection of
//! shared cell stores, `rs.store_use` and `rs.release_stores` (from cluster nodes only).
//! Layout: docs/formats/rangeserver-rpc.md.

use bytes::Bytes;
use common::ErrorKind;
use rpc::RpcError;

use common::CompactionKind;
use prost::Message as _;
use proto::rs::messages::method::{COMPACT, RELEASE_STORES, STORE_USE, WAIT_FOR_MAINTENANCE};
use proto::rs::messages::{
    CompactRequest, ReleaseStoresReply, ReleaseStoresRequest, StoreUseReply,
};

use super::{RangeServerService, decode, engine_error, unit};

impl RangeServerService {
    /// Handles the maintenance methods; `None` for any other method.
    pub(super) async fn admin_call(
        &self,
        method: &str,
        payload: Bytes,
    ) -> Option<Result<Bytes, RpcError>> {
        Some(match method {
            COMPACT => self.compact(payload).await,
            WAIT_FOR_MAINTENANCE => self
                .blocking(|e| {
                    e.wait_for_maintenance();
                    Ok(())
                })
                .await
                .map(|_| unit()),
            STORE_USE => self.store_use().await,
            RELEASE_STORES => self.release_stores(payload).await,
            _ => return None,
        })
    }

    async fn compact(&self, payload: Bytes) -> Result<Bytes, RpcError> {
        let req: CompactRequest = decode(COMPACT, payload)?;
        let table = (req.table_id != 0).then_some(req.table_id);
        let Some(kind) = CompactionKind::from_code(req.kind) else {
            return Err(RpcError::service(
                ErrorKind::InvalidInput,
                format!("{COMPACT}: unknown compaction kind {}", req.kind),
            ));
        };
        let r = self
            .blocking(move |e| match kind {
                CompactionKind::Gc => e.collect_garbage(),
                CompactionKind::Minor => e.compact(table, crate::engine::CompactionKind::Minor),
                CompactionKind::Merging => e.compact(table, crate::engine::CompactionKind::Merging),
                CompactionKind::Major => e.compact(table, crate::engine::CompactionKind::Major),
            })
            .await?;
        r.map(|()| unit()).map_err(|e| engine_error(COMPACT, e))
    }

    async fn store_use(&self) -> Result<Bytes, RpcError> {
        let used = self
            .blocking(|e| e.store_use())
            .await?
            .map_err(|e| engine_error(STORE_USE, e))?;
        let reply = StoreUseReply {
            root: used.root,
            in_use: used.in_use.into_iter().collect(),
            exported: used.exported.into_iter().collect(),
        };
        Ok(reply.encode_to_vec().into())
    }

    async fn release_stores(&self, payload: Bytes) -> Result<Bytes, RpcError> {
        let req: ReleaseStoresRequest = decode(RELEASE_STORES, payload)?;
        let done = self
            .blocking(move |e| e.release_exported(&req.paths))
            .await?
            .map_err(|e| engine_error(RELEASE_STORES, e))?;
        let reply = ReleaseStoresReply {
            removed: done.removed,
            skipped: done.skipped,
        };
        Ok(reply.encode_to_vec().into())
    }
}

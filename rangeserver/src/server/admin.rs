//! Maintenance calls of the range server: `rs.compact` and `rs.wait_for_maintenance` (HQL
//! `COMPACT` and `WAIT FOR MAINTENANCE` on a cluster). Layout: docs/formats/rangeserver-rpc.md.

use bytes::Bytes;
use common::ErrorKind;
use rpc::RpcError;

use common::CompactionKind;
use proto::rs::messages::CompactRequest;
use proto::rs::messages::method::{COMPACT, WAIT_FOR_MAINTENANCE};

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
}

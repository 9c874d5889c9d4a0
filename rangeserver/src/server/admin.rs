//! Maintenance calls of the range server: `rs.compact` and `rs.wait_for_maintenance` (HQL
//! `COMPACT` and `WAIT FOR MAINTENANCE` on a cluster). Layout: docs/formats/rangeserver-rpc.md.

use bytes::Bytes;
use common::ErrorKind;
use rpc::RpcError;

use super::client::{RangeServerClient, RsError};
use super::messages::UnitReply;
use super::{RangeServerService, decode, engine_error, unit};
use crate::engine::CompactionKind;

pub const COMPACT: &str = "rs.compact";
pub const WAIT_FOR_MAINTENANCE: &str = "rs.wait_for_maintenance";

/// Which compaction `rs.compact` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactKind {
    Minor = 1,
    Merging = 2,
    Major = 3,
    /// Remove replaced cell stores nothing references any more.
    Gc = 4,
}

/// `rs.compact`: every range of `table_id` (0: of every table).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CompactRequest {
    #[prost(uint32, tag = "1")]
    pub table_id: u32,
    #[prost(uint32, tag = "2")]
    pub kind: u32,
}

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
        let kind = match req.kind {
            1 => Some(CompactionKind::Minor),
            2 => Some(CompactionKind::Merging),
            3 => Some(CompactionKind::Major),
            4 => None,
            k => {
                return Err(RpcError::service(
                    ErrorKind::InvalidInput,
                    format!("{COMPACT}: unknown compaction kind {k}"),
                ));
            }
        };
        let r = self
            .blocking(move |e| match kind {
                Some(k) => e.compact(table, k),
                None => e.collect_garbage(),
            })
            .await?;
        r.map(|()| unit()).map_err(|e| engine_error(COMPACT, e))
    }
}

impl RangeServerClient {
    /// Compacts every range of a table (`None`: of every table) and waits for it.
    pub async fn compact(&self, table_id: Option<u32>, kind: CompactKind) -> Result<(), RsError> {
        let req = CompactRequest {
            table_id: table_id.unwrap_or(0),
            kind: kind as u32,
        };
        let _: UnitReply = self.call(COMPACT, &req).await?;
        Ok(())
    }

    /// Waits until the server's background maintenance is idle.
    pub async fn wait_for_maintenance(&self) -> Result<(), RsError> {
        let _: UnitReply = self.call(WAIT_FOR_MAINTENANCE, &UnitReply {}).await?;
        Ok(())
    }
}

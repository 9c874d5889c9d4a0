//! The master's status report (`ht status`): servers, ranges, load, pending operations.

use proto::layout::*;
use proto::master::MasterStatus;

use crate::control::Master;
use crate::{GC_REMOVED_ROOTS, GC_REMOVED_STORES, GC_ROUNDS, MOVES, RECOVERIES, Result};

impl Master {
    pub(crate) async fn status(&mut self) -> Result<MasterStatus> {
        let ops = self
            .pending_ops()
            .await?
            .into_iter()
            .map(|(_, op)| op.describe())
            .collect();
        Ok(MasterStatus {
            servers: self
                .servers
                .iter()
                .map(|(l, s)| proto::master::ServerStatus {
                    location: l.clone(),
                    addr: s.addr.to_string(),
                    ranges: s.ranges.len() as u32,
                    live: s.live,
                    load: s.ranges.iter().map(|r| self.load.rate(r)).sum(),
                })
                .collect(),
            root_location: self.attr(ROOT, LOCATION_ATTR).await?.unwrap_or_default(),
            operations: ops,
            moves: self.counter(MOVES).await?,
            recoveries: self.counter(RECOVERIES).await?,
            pid: std::process::id(),
            gc_rounds: self.counter(GC_ROUNDS).await?,
            gc_removed_stores: self.counter(GC_REMOVED_STORES).await?,
            gc_removed_roots: self.counter(GC_REMOVED_ROOTS).await?,
        })
    }
}

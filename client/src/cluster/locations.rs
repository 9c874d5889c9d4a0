//! Where a table's ranges are: the location cache (ROOT -> METADATA -> the range, per table),
//! [`RangeLocation`], [`parse_locations`], and routing rows to the servers holding them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::ops::Bound;
use std::sync::Arc;

use ::proto::rs::client::{RangeServerClient, RsError};
use common::key::Cell;
use common::scan_spec::RowInterval;
use common::{ErrorKind, Mutation, ScanSpec};

use super::Inner;
use super::errors::{connect_failure, server_error, unavailable};
use super::layout::*;
use super::retry::Attempt;
use crate::{ClientError, Result};

/// One range of a table as METADATA records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeLocation {
    pub start_row: Option<Vec<u8>>,
    pub end_row: Option<Vec<u8>>,
    /// The range server (its location name, `rs<N>`).
    pub location: String,
}

impl Inner {
    /// A connection to the range server at `location`.
    pub(super) async fn server(&self, location: &str) -> Result<Arc<RangeServerClient>> {
        if let Some(c) = self.servers.lock().get(location) {
            return Ok(c.clone());
        }
        let addr = self
            .attr_string(&server_node(location), ADDR_ATTR)
            .await?
            .ok_or_else(|| unavailable(format!("range server {location} is not registered")))?;
        let addr: SocketAddr = addr.parse().map_err(|e| {
            ClientError::storage(
                ErrorKind::Corruption,
                format!("range server {location} has a bad address '{addr}': {e}"),
            )
        })?;
        let c = RangeServerClient::connect_with(
            addr,
            &self.credentials,
            self.opts.range_server.clone(),
        )
        .await
        .map_err(|e| {
            connect_failure(e.kind(), format!("range server {location} at {addr}: {e}"))
        })?;
        let c = Arc::new(c);
        self.servers.lock().insert(location.to_string(), c.clone());
        Ok(c)
    }

    pub(super) fn forget_server(&self, location: &str) {
        self.servers.lock().remove(location);
    }

    pub(super) fn invalidate(&self, table_id: u32) {
        let mut l = self.locations.lock();
        l.remove(&table_id);
        // A stale METADATA location is as likely as a stale user range.
        l.remove(&METADATA_ID);
    }

    /// The ranges of a table in row order, covering every row.
    pub(super) async fn ranges(
        &self,
        table_id: u32,
    ) -> std::result::Result<Arc<Vec<RangeLocation>>, Attempt> {
        if let Some(r) = self.locations.lock().get(&table_id) {
            return Ok(r.clone());
        }
        let root = self
            .attr_string(ROOT, LOCATION_ATTR)
            .await?
            .ok_or_else(|| Attempt::Retry("the METADATA table is not assigned yet".into()))?;
        let ranges = if table_id == METADATA_ID {
            vec![RangeLocation {
                start_row: None,
                end_row: None,
                location: root,
            }]
        } else {
            let (lo, hi) = metadata_table_bounds(table_id);
            let spec = ScanSpec {
                row_intervals: vec![RowInterval {
                    start: Bound::Included(lo),
                    end: Bound::Excluded(hi),
                }],
                ..Default::default()
            };
            let server = self.server(&root).await?;
            let cells = match server.scan(METADATA_ID, &spec).await {
                Ok(s) => s.collect().await,
                Err(e) => Err(e),
            };
            let cells = cells.map_err(|e| self.rs_failure(&root, METADATA_ID, e))?;
            parse_locations(table_id, &cells).map_err(Attempt::Retry)?
        };
        let ranges = Arc::new(ranges);
        self.locations.lock().insert(table_id, ranges.clone());
        Ok(ranges)
    }

    /// Classifies a range server failure, dropping what it makes stale.
    pub(super) fn rs_failure(&self, location: &str, table_id: u32, e: RsError) -> Attempt {
        match e {
            RsError::NotHere { .. } => {
                self.invalidate(table_id);
                Attempt::Retry(format!("range server {location}: {e}"))
            }
            // An earlier batch of the stream failed, and says why itself.
            RsError::StreamRefused(_) => Attempt::Retry(format!("range server {location}: {e}")),
            e if e.kind() == ErrorKind::Unavailable => {
                self.forget_server(location);
                self.invalidate(table_id);
                Attempt::Retry(format!("range server {location}: {e}"))
            }
            e => Attempt::Fatal(server_error(location, e)),
        }
    }
}

/// Routes every cell to the server holding its row, keeping the order of each server's cells.
pub(super) fn route(
    ranges: &[RangeLocation],
    cells: Vec<Mutation>,
) -> Vec<(String, Vec<Mutation>)> {
    let first = &ranges[0].location;
    if ranges.iter().all(|r| r.location == *first) {
        return vec![(first.clone(), cells)];
    }
    // Servers by index, so that no name is copied per cell.
    let mut names: Vec<&str> = ranges.iter().map(|r| r.location.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let mut groups: Vec<Vec<Mutation>> = vec![Vec::new(); names.len()];
    for m in cells {
        let loc = locate(ranges, &m.row).location.as_str();
        let i = names.binary_search(&loc).unwrap_or(0);
        groups[i].push(m);
    }
    names
        .into_iter()
        .zip(groups)
        .filter(|(_, cells)| !cells.is_empty())
        .map(|(name, cells)| (name.to_string(), cells))
        .collect()
}

/// The range holding `row` (ranges cover every row: checked by [`parse_locations`]).
pub(super) fn locate<'a>(ranges: &'a [RangeLocation], row: &[u8]) -> &'a RangeLocation {
    &ranges[locate_index(ranges, row)]
}

/// The index of the range holding `row` in `ranges`.
pub(super) fn locate_index(ranges: &[RangeLocation], row: &[u8]) -> usize {
    let i = ranges.partition_point(|r| r.end_row.as_deref().is_some_and(|e| e <= row));
    i.min(ranges.len() - 1)
}

/// Turns a table's METADATA cells into its ranges, checking that they cover every row.
pub fn parse_locations(
    table_id: u32,
    cells: &[Cell],
) -> std::result::Result<Vec<RangeLocation>, String> {
    // METADATA row -> (start row, location) as far as read.
    type Row = (Option<Vec<u8>>, Option<String>);
    let mut rows: BTreeMap<Vec<u8>, Row> = BTreeMap::new();
    for c in cells {
        let e = rows.entry(c.key.row.clone()).or_default();
        match c.key.family {
            LOCATION_FAMILY => e.1 = Some(String::from_utf8_lossy(&c.value).into_owned()),
            START_ROW_FAMILY => e.0 = Some(c.value.clone()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut expect_start: Option<Vec<u8>> = None;
    for (row, (start, loc)) in rows {
        let Some((tid, end)) = parse_metadata_row(&row) else {
            return Err(format!(
                "bad METADATA row {:?}",
                String::from_utf8_lossy(&row)
            ));
        };
        if tid != table_id {
            continue;
        }
        let start = start.filter(|s| !s.is_empty());
        if start != expect_start {
            return Err(format!(
                "METADATA of table {table_id} has a gap or overlap before row {:?} (being updated)",
                String::from_utf8_lossy(&row)
            ));
        }
        let Some(location) = loc else {
            return Err(format!(
                "METADATA row {:?} has no location",
                String::from_utf8_lossy(&row)
            ));
        };
        expect_start = end.clone();
        let last = end.is_none();
        out.push(RangeLocation {
            start_row: start,
            end_row: end,
            location,
        });
        if last {
            return Ok(out);
        }
    }
    Err(format!(
        "METADATA of table {table_id} does not reach the end of the table (being created or updated)"
    ))
}

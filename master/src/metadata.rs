//! METADATA: bootstrapping its first range, reading and writing its rows, and `poll_ranges`,
//! which records the ranges the servers report (splits they made on their own).

use std::collections::BTreeMap;
use std::time::Duration;

use common::scan_spec::RowInterval;
use common::{ErrorKind, Mutation, ScanSpec, TableSchema};
use proto::layout::*;

use crate::control::Master;
use crate::{Result, hs_err, rs_err, unavailable};

impl Master {
    pub(crate) async fn root_assigned(&self) -> Result<bool> {
        Ok(self.attr(ROOT, LOCATION_ATTR).await?.is_some())
    }

    pub(crate) async fn root(&self) -> Result<String> {
        self.attr(ROOT, LOCATION_ATTR)
            .await?
            .ok_or_else(|| unavailable("METADATA is not assigned yet".into()))
    }

    /// Writes the METADATA row of a range.
    pub(crate) async fn metadata_put(
        &mut self,
        table_id: u32,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        location: &str,
    ) -> Result<()> {
        if table_id == METADATA_ID {
            return self
                .hs
                .attr_set(ROOT, LOCATION_ATTR, location.to_string())
                .await
                .map_err(hs_err);
        }
        let row = metadata_row(table_id, end);
        let cells = vec![
            Mutation::insert(
                row.clone(),
                LOCATION_FAMILY,
                "",
                location.as_bytes().to_vec(),
            ),
            Mutation::insert(
                row,
                START_ROW_FAMILY,
                "",
                start.unwrap_or_default().to_vec(),
            ),
        ];
        let root = self.root().await?;
        self.on_server(
            &root,
            |c| async move { c.update(METADATA_ID, &cells).await },
        )
        .await?
        .map_err(|e| rs_err(&root, e))
    }

    /// Every METADATA row: row -> (start row, location).
    pub(crate) async fn metadata_rows(
        &mut self,
        table: Option<u32>,
    ) -> Result<BTreeMap<Vec<u8>, (Vec<u8>, String)>> {
        let spec = match table {
            Some(t) => {
                let (lo, hi) = metadata_table_bounds(t);
                ScanSpec {
                    row_intervals: vec![RowInterval {
                        start: std::ops::Bound::Included(lo),
                        end: std::ops::Bound::Excluded(hi),
                    }],
                    ..Default::default()
                }
            }
            None => ScanSpec::default(),
        };
        let root = self.root().await?;
        let cells = self
            .on_server(&root, |c| async move {
                c.scan(METADATA_ID, &spec).await?.collect().await
            })
            .await?
            .map_err(|e| rs_err(&root, e))?;
        let mut rows: BTreeMap<Vec<u8>, (Vec<u8>, String)> = BTreeMap::new();
        for c in cells {
            let e = rows.entry(c.key.row.clone()).or_default();
            match c.key.family {
                LOCATION_FAMILY => e.1 = String::from_utf8_lossy(&c.value).into_owned(),
                START_ROW_FAMILY => e.0 = c.value,
                _ => {}
            }
        }
        Ok(rows)
    }

    /// Asks every live server for its ranges; records them and brings METADATA in line with
    /// what the servers hold (ranges they split on their own appear here).
    pub(crate) async fn poll_ranges(&mut self) -> Result<()> {
        // All servers at once, each briefly: a dead one must not hold up the look.
        let mut calls = tokio::task::JoinSet::new();
        for loc in self.live() {
            let Ok(c) = self.client(&loc).await else {
                continue;
            };
            calls.spawn(async move {
                let r = tokio::time::timeout(Duration::from_secs(3), c.all_ranges()).await;
                (loc, r)
            });
        }
        while let Some(joined) = calls.join_next().await {
            let Ok((loc, r)) = joined else { continue };
            match r {
                Ok(Ok(ranges)) => {
                    self.load.record(
                        &loc,
                        ranges.iter().map(|r| {
                            (
                                (r.table_id, r.start_row.clone(), r.end_row.clone()),
                                r.cells_written + r.cells_read,
                            )
                        }),
                        self.clock.now(),
                        self.load_policy.smoothing,
                    );
                    if let Some(s) = self.servers.get_mut(&loc) {
                        s.ranges = ranges
                            .into_iter()
                            .map(|r| (r.table_id, r.start_row, r.end_row))
                            .collect();
                    }
                }
                Ok(Err(e)) => {
                    tracing::debug!(server = loc, error = %e, "cannot list ranges");
                    self.clients.remove(&loc);
                }
                Err(_) => tracing::debug!(server = loc, "listing ranges timed out"),
            }
        }
        let rows = self.metadata_rows(None).await?;
        let mut puts = Vec::new();
        for (loc, s) in &self.servers {
            if !s.live {
                continue;
            }
            for (t, start, end) in &s.ranges {
                if *t == METADATA_ID {
                    continue;
                }
                let row = metadata_row(*t, end.as_deref());
                let want = (start.clone().unwrap_or_default(), loc.clone());
                if rows.get(&row) != Some(&want) {
                    puts.push((*t, start.clone(), end.clone(), loc.clone()));
                }
            }
        }
        for (t, start, end, loc) in puts {
            tracing::info!(table = t, server = loc, "METADATA: recording a range");
            self.metadata_put(t, start.as_deref(), end.as_deref(), &loc)
                .await?;
        }
        Ok(())
    }

    pub(crate) async fn bootstrap(&mut self, location: &str) -> Result<()> {
        if self.root_assigned().await? {
            return Ok(());
        }
        // User tables get ids above METADATA's.
        if self.attr(HT, NEXT_TABLE_ID).await?.is_none() {
            self.hs
                .attr_set(HT, NEXT_TABLE_ID, METADATA_ID.to_string())
                .await
                .map_err(hs_err)?;
        }
        let schema = metadata_schema();
        self.ensure_range(location, &schema, None, None).await?;
        self.hs
            .attr_set(ROOT, LOCATION_ATTR, location.to_string())
            .await
            .map_err(hs_err)?;
        tracing::info!(server = location, "METADATA bootstrapped");
        Ok(())
    }

    /// Makes `location` know the table and hold its range `[start, end)` (unless it holds a
    /// range of the table overlapping it: an earlier attempt created it). An empty range
    /// record is adopted, which registers the table too (unlike `rs.create_table`, whatever
    /// table ids the server has seen before).
    pub(crate) async fn ensure_range(
        &mut self,
        location: &str,
        schema: &TableSchema,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        let id = schema.id;
        let held = self
            .on_server(location, |c| async move { c.ranges(id).await })
            .await?;
        let wanted = common::RowRange::new(start.map(<[u8]>::to_vec), end.map(<[u8]>::to_vec));
        match held {
            Ok(r)
                if r.iter().any(|x| {
                    wanted.overlaps(&common::RowRange::new(
                        x.start_row.clone(),
                        x.end_row.clone(),
                    ))
                }) =>
            {
                return Ok(());
            }
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(rs_err(location, e)),
        }
        let record = rangeserver::meta::RangeRecord {
            id: 0,
            table_id: id,
            start_row: start.map(<[u8]>::to_vec),
            end_row: end.map(<[u8]>::to_vec),
            groups: Vec::new(),
        };
        let s = schema.clone();
        let record = (&record).into();
        self.on_server(
            location,
            |c| async move { c.adopt_range(&s, &record).await },
        )
        .await?
        .map_err(|e| rs_err(location, e))?;
        Ok(())
    }
}

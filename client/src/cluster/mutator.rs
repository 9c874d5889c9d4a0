//! [`ClusterMutator`]: buffers cells and sends them to the range servers holding their rows,
//! several buffers in flight in one ordered update stream per server, resending what a failure
//! left unapplied.

use std::collections::HashMap;
use std::sync::Arc;

use ::proto::rs::client::{RsError, StreamPlace};
use common::{ErrorKind, Mutation};
use futures_util::future::join_all;
use rand::Rng;

use super::Inner;
use super::errors::unreachable_server;
use super::locations::{RangeLocation, route};
use super::retry::Attempt;
use crate::{ClientError, Result, TableMutator};

impl Inner {
    /// Sends `cells` to the servers holding their rows; every cell is applied once this returns
    /// `Ok` (see the `cluster` module comment about lost answers).
    pub(super) async fn apply(&self, table_id: u32, cells: Vec<Mutation>) -> Result<()> {
        let mut backoff = self.backoff();
        let mut pending = cells;
        loop {
            match self.apply_once(table_id, pending).await {
                Ok(()) => return Ok(()),
                Err((_, Attempt::Fatal(e))) => return Err(e),
                Err((left, Attempt::Retry(why))) => {
                    backoff.wait("update", why).await?;
                    pending = left;
                }
            }
        }
    }

    /// One round of [`Inner::apply`]; on failure, the cells not applied and why.
    async fn apply_once(
        &self,
        table_id: u32,
        batch: Vec<Mutation>,
    ) -> std::result::Result<(), (Vec<Mutation>, Attempt)> {
        let ranges = match self.ranges(table_id).await {
            Ok(r) => r,
            Err(e) => return Err((batch, e)),
        };
        let sends = route(&ranges, batch)
            .into_iter()
            .map(|(loc, cells)| async move {
                let res = self.send_to(&loc, table_id, &cells).await;
                (loc, cells, res)
            });
        let mut why = None;
        let mut fatal = None;
        let mut failed = Vec::new();
        for (loc, cells, res) in join_all(sends).await {
            if let Err((done, e)) = res {
                failed.extend(cells.into_iter().skip(done));
                match self.rs_failure(&loc, table_id, e) {
                    Attempt::Fatal(e) => fatal = Some(e),
                    Attempt::Retry(w) => why = Some(w),
                }
            }
        }
        if let Some(e) = fatal {
            return Err((failed, Attempt::Fatal(e)));
        }
        match why {
            None => Ok(()),
            Some(w) => Err((failed, Attempt::Retry(w))),
        }
    }

    /// Sends one server's cells in batches of at most `batch_bytes`; returns how many were
    /// applied, or how many were applied before the failure.
    async fn send_to(
        &self,
        location: &str,
        table_id: u32,
        cells: &[Mutation],
    ) -> std::result::Result<usize, (usize, RsError)> {
        let server = self
            .server(location)
            .await
            .map_err(|e| (0, unreachable_server(e)))?;
        let mut done = 0;
        while done < cells.len() {
            let end = done + first_batch_len(&cells[done..], self.opts.batch_bytes);
            server
                .update(table_id, &cells[done..end])
                .await
                .map_err(|e| (done, e))?;
            done = end;
        }
        Ok(done)
    }
}

/// How many of `cells` go into one update batch of about `batch_bytes` (at least one cell).
fn first_batch_len(cells: &[Mutation], batch_bytes: usize) -> usize {
    let mut end = 0;
    let mut bytes = 0;
    while end < cells.len() && (end == 0 || bytes < batch_bytes) {
        let m = &cells[end];
        bytes += m.row.len() + m.qualifier.len() + m.value.len() + 24;
        end += 1;
    }
    end
}

/// Cuts one server's cells into batches of about `batch_bytes` ([`first_batch_len`]).
fn cut_batches(mut cells: Vec<Mutation>, batch_bytes: usize) -> Vec<Vec<Mutation>> {
    let mut out = Vec::new();
    loop {
        let end = first_batch_len(&cells, batch_bytes);
        if end == cells.len() {
            out.push(cells);
            return out;
        }
        let rest = cells.split_off(end);
        out.push(std::mem::replace(&mut cells, rest));
    }
}

/// Buffers cells and sends full buffers while the next ones fill: up to
/// [`super::ClusterOptions::mutator_in_flight`] buffers are on their way at once, each cut
/// into one batch per range server. The batches to one server travel as an ordered update stream
/// (the range server's `server::streams`), so the server applies them in the order the cells were
/// set even though they are in flight together, and refuses every later batch once one fails.
/// All buffers in flight were routed with the same range locations, so a row's cells go to one
/// server. When a batch fails, every buffer in flight is waited for and the cells not applied
/// are sent again in order, one batch at a time, with retries (`Inner::apply`). Memory: the
/// buffer filling plus the buffers in flight. `flush` waits for them all.
pub(super) struct ClusterMutator {
    inner: Arc<Inner>,
    rt: tokio::runtime::Handle,
    table_id: u32,
    buf: Vec<Mutation>,
    buf_bytes: usize,
    limit_cells: usize,
    limit_bytes: usize,
    flushed: u64,
    depth: usize,
    in_flight: std::collections::VecDeque<Flight>,
    /// The locations the buffers in flight were routed with.
    routed_with: Option<Arc<Vec<RangeLocation>>>,
    /// The update stream to each server.
    streams: HashMap<String, UpdateStream>,
}

/// This mutator's ordered update stream to one server.
struct UpdateStream {
    id: u64,
    /// The next batch's number.
    next: u64,
    /// Leading batches seen applied.
    acked: u64,
}

/// One buffer in flight: a batch per server (or several, for a large buffer).
struct Flight {
    parts: Vec<(String, BatchTask)>,
}

type BatchTask = tokio::task::JoinHandle<(Vec<Mutation>, std::result::Result<(), RsError>)>;

impl ClusterMutator {
    pub(super) fn new(inner: Arc<Inner>, rt: tokio::runtime::Handle, table_id: u32) -> Self {
        Self {
            limit_cells: inner.opts.mutator_buffer_cells.max(1),
            limit_bytes: inner.opts.mutator_buffer_bytes.max(1),
            depth: inner.opts.mutator_in_flight.max(1),
            inner,
            rt,
            table_id,
            buf: Vec::new(),
            buf_bytes: 0,
            flushed: 0,
            in_flight: Default::default(),
            routed_with: None,
            streams: HashMap::new(),
        }
    }

    /// Starts sending the buffer, after waiting for room in flight.
    fn send(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        while self.in_flight.len() >= self.depth {
            self.settle_front()?;
        }
        let cells = std::mem::take(&mut self.buf);
        self.buf_bytes = 0;
        let n = cells.len() as u64;
        let ranges = match self.rt.block_on(self.inner.ranges(self.table_id)) {
            Ok(r) => r,
            Err(Attempt::Fatal(e)) => return Err(e),
            Err(Attempt::Retry(_)) => {
                // No locations now: finish what is in flight, then send with retries.
                self.settle_all()?;
                self.rt.block_on(self.inner.apply(self.table_id, cells))?;
                self.flushed += n;
                return Ok(());
            }
        };
        if self
            .routed_with
            .as_ref()
            .is_some_and(|r| !Arc::ptr_eq(r, &ranges))
        {
            // New locations: a row might now go to another server than in a buffer still in
            // flight, and overtake it there.
            self.settle_all()?;
        }
        self.routed_with = Some(ranges.clone());
        let mut parts = Vec::new();
        for (location, cells) in route(&ranges, cells) {
            for batch in cut_batches(cells, self.inner.opts.batch_bytes) {
                let st = self
                    .streams
                    .entry(location.clone())
                    .or_insert_with(|| UpdateStream {
                        id: new_stream_id(&mut *self.inner.rng.lock()),
                        next: 0,
                        acked: 0,
                    });
                let place = StreamPlace {
                    stream: st.id,
                    seq: st.next,
                    acked: st.acked,
                };
                st.next += 1;
                let (inner, loc, table_id) = (self.inner.clone(), location.clone(), self.table_id);
                let task = self.rt.spawn(async move {
                    let res = match inner.server(&loc).await {
                        Ok(server) => server.update_in_stream(table_id, &batch, place).await,
                        Err(e) => Err(unreachable_server(e)),
                    };
                    (batch, res)
                });
                parts.push((location.clone(), task));
            }
        }
        self.in_flight.push_back(Flight { parts });
        Ok(())
    }

    /// Waits for the oldest buffer in flight; its cells are durable once this returns `Ok`.
    fn settle_front(&mut self) -> Result<()> {
        let Some(flight) = self.in_flight.pop_front() else {
            return Ok(());
        };
        let mut failed = Vec::new();
        self.collect(flight, &mut failed)?;
        if failed.is_empty() {
            return Ok(());
        }
        // Every later batch to a server that failed was refused: wait for all buffers in
        // flight, then send what was not applied, in order.
        while let Some(flight) = self.in_flight.pop_front() {
            self.collect(flight, &mut failed)?;
        }
        self.routed_with = None;
        let mut pending = Vec::new();
        let mut fatal = None;
        let mut counted = 0u64;
        for (location, cells, e) in failed {
            self.streams.remove(&location);
            if let Attempt::Fatal(e) = self.inner.rs_failure(&location, self.table_id, e) {
                fatal.get_or_insert(e);
            }
            counted += cells.len() as u64;
            pending.extend(cells);
        }
        if let Some(e) = fatal {
            return Err(e);
        }
        self.rt.block_on(self.inner.apply(self.table_id, pending))?;
        self.flushed += counted;
        Ok(())
    }

    /// Waits for every batch of `flight`: counts the applied ones, gathers the others.
    fn collect(
        &mut self,
        flight: Flight,
        failed: &mut Vec<(String, Vec<Mutation>, RsError)>,
    ) -> Result<()> {
        let tasks = flight
            .parts
            .into_iter()
            .map(|(loc, task)| async move { (loc, task.await) });
        for (location, joined) in self.rt.block_on(join_all(tasks)) {
            let (cells, res) = joined.map_err(|e| {
                ClientError::storage(ErrorKind::Internal, format!("update task failed: {e}"))
            })?;
            match res {
                Ok(()) => {
                    self.flushed += cells.len() as u64;
                    if let Some(st) = self.streams.get_mut(&location) {
                        st.acked += 1;
                    }
                }
                Err(e) => failed.push((location, cells, e)),
            }
        }
        Ok(())
    }

    fn settle_all(&mut self) -> Result<()> {
        while !self.in_flight.is_empty() {
            self.settle_front()?;
        }
        Ok(())
    }
}

/// A random update stream id (never 0, which means no stream).
fn new_stream_id(rng: &mut impl Rng) -> u64 {
    loop {
        let id: u64 = rng.random();
        if id != 0 {
            return id;
        }
    }
}

impl TableMutator for ClusterMutator {
    fn set(&mut self, m: Mutation) -> Result<()> {
        self.buf_bytes += m.row.len() + m.qualifier.len() + m.value.len() + 32;
        self.buf.push(m);
        if self.buf.len() >= self.limit_cells || self.buf_bytes >= self.limit_bytes {
            self.send()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.send()?;
        self.settle_all()
    }

    fn cells_flushed(&self) -> u64 {
        self.flushed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn stream_ids_come_from_the_seeded_source_and_are_never_zero() {
        let ids = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..8).map(|_| new_stream_id(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(ids(5), ids(5), "the same seed gives the same ids");
        assert_ne!(ids(5), ids(6));
        assert!(ids(5).iter().all(|&id| id != 0));
    }
}

//! Ordered update streams: a client keeps several `rs.update` batches in flight and the server
//! applies them in the order the client numbered them.
//!
//! A batch names a stream (a random id its client chose, not 0) and its sequence number in it
//! (0, 1, 2, ...). The server applies batch `seq` only after batch `seq - 1` of the same stream
//! was applied, so the batches of one stream take revisions in order, exactly as if they had
//! been sent one at a time. A stream is a strict prefix: once one of its batches is not applied
//! (not here, an error, a paused server, a batch that never came), every later batch of it is
//! refused without being applied, so the client can resend the failed batch and everything
//! after it, in order, on a new stream.
//!
//! Batches of one stream may arrive in any order (each call is its own QUIC stream), so a
//! stream the server does not know yet starts where its client says it stands: each batch
//! carries `acked`, the number of leading batches of the stream whose success the client has
//! seen. An unknown stream starts at that batch; a stream the server forgot (evicted while
//! idle) thus resumes where it was, since nothing before `acked` can still be in flight.
//!
//! Bounds: at most `max_streams` streams are remembered; when full, the least recently used idle
//! one is forgotten (its client, if it comes back, is refused and starts a new stream). A batch
//! waits for its predecessor at most `missing_wait` while nothing of the stream is being applied
//! (the predecessor was lost with a broken connection); then the stream fails.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::watch;

/// Where a stream stands.
#[derive(Debug, Clone, Default)]
struct Progress {
    /// The next batch to apply.
    next: u64,
    /// A batch is being applied.
    busy: bool,
    /// Why the stream stopped accepting batches.
    failed: Option<String>,
}

struct Entry {
    progress: Arc<watch::Sender<Progress>>,
    last_used: Instant,
}

/// The update streams of one range server.
pub struct UpdateStreams {
    streams: Mutex<HashMap<u64, Entry>>,
    max_streams: usize,
    missing_wait: Duration,
}

/// The right to apply one batch of a stream; finishing it (or dropping it, which counts as a
/// failure) lets the next batch go.
#[derive(Debug)]
pub struct Turn {
    progress: Arc<watch::Sender<Progress>>,
    seq: u64,
    done: bool,
}

impl Turn {
    /// Records the batch as applied (`Ok`) or not (`Err(why)`: later batches are refused).
    pub fn finish(mut self, outcome: Result<(), String>) {
        self.done = true;
        let seq = self.seq;
        self.progress.send_modify(|p| {
            p.next = seq + 1;
            p.busy = false;
            if let Err(why) = outcome {
                p.failed.get_or_insert(why);
            }
        });
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if !self.done {
            let seq = self.seq;
            self.progress.send_modify(|p| {
                p.next = seq + 1;
                p.busy = false;
                p.failed
                    .get_or_insert_with(|| format!("batch {seq} was abandoned"));
            });
        }
    }
}

fn refused(stream: u64, why: String) -> String {
    format!("update stream {stream:#x}: {why}; nothing of this batch was applied")
}

impl UpdateStreams {
    pub fn new(max_streams: usize, missing_wait: Duration) -> Self {
        Self {
            streams: Mutex::new(HashMap::new()),
            max_streams: max_streams.max(1),
            missing_wait,
        }
    }

    /// Streams remembered now.
    pub fn len(&self) -> usize {
        self.streams.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until batch `seq` of `stream` may be applied (`acked <= seq`: the caller checks).
    /// An error says why the batch must not be applied (the stream failed); the client resends
    /// on a new stream.
    pub async fn turn(&self, stream: u64, seq: u64, acked: u64) -> Result<Turn, String> {
        let progress = self.entry(stream, acked)?;
        let mut rx = progress.subscribe();
        loop {
            {
                let p = rx.borrow_and_update();
                if let Some(why) = &p.failed {
                    return Err(refused(
                        stream,
                        format!("an earlier batch was not applied ({why})"),
                    ));
                }
                if p.next > seq {
                    return Err(refused(
                        stream,
                        format!("batch {seq} comes after batch {} already", p.next - 1),
                    ));
                }
            }
            // Take the turn if it is ours, atomically (a repeated batch must not take it too).
            let mut taken = false;
            progress.send_if_modified(|p| {
                taken = p.failed.is_none() && p.next == seq && !p.busy;
                if taken {
                    p.busy = true;
                }
                taken
            });
            if taken {
                rx.borrow_and_update();
                return Ok(Turn {
                    progress,
                    seq,
                    done: false,
                });
            }
            // Wait for progress; a predecessor that is not being applied and does not come
            // within `missing_wait` was lost.
            match tokio::time::timeout(self.missing_wait, rx.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => unreachable!("the sender is held by `progress`"),
                Err(_) => {
                    let mut failed = false;
                    progress.send_if_modified(|p| {
                        if p.busy || p.failed.is_some() || p.next == seq {
                            return false;
                        }
                        p.failed = Some(format!(
                            "batch {} did not arrive within {:?}",
                            p.next, self.missing_wait
                        ));
                        failed = true;
                        true
                    });
                    if failed {
                        rx.borrow_and_update();
                        return Err(refused(
                            stream,
                            format!(
                                "an earlier batch did not arrive within {:?}",
                                self.missing_wait
                            ),
                        ));
                    }
                }
            }
        }
    }

    /// The stream's progress; an unknown stream starts at batch `acked`.
    fn entry(&self, stream: u64, acked: u64) -> Result<Arc<watch::Sender<Progress>>, String> {
        let mut streams = self.streams.lock();
        let now = Instant::now();
        if let Some(e) = streams.get_mut(&stream) {
            e.last_used = now;
            return Ok(e.progress.clone());
        }
        if streams.len() >= self.max_streams {
            // Forget the least recently used idle stream: nobody waits on it, nothing of it
            // is being applied.
            let victim = streams
                .iter()
                .filter(|(_, e)| Arc::strong_count(&e.progress) == 1 && !e.progress.borrow().busy)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(id, _)| *id);
            match victim {
                Some(id) => {
                    streams.remove(&id);
                }
                None => {
                    return Err(refused(
                        stream,
                        format!("all {} update streams are busy", self.max_streams),
                    ));
                }
            }
        }
        let progress = Arc::new(watch::Sender::new(Progress {
            next: acked,
            ..Progress::default()
        }));
        streams.insert(
            stream,
            Entry {
                progress: progress.clone(),
                last_used: now,
            },
        );
        Ok(progress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn streams() -> Arc<UpdateStreams> {
        Arc::new(UpdateStreams::new(4, Duration::from_millis(200)))
    }

    #[tokio::test]
    async fn batches_go_in_sequence_order() {
        let s = streams();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // Started in reverse: each must still wait for its predecessor.
        for seq in (0..5u64).rev() {
            let (s, order) = (s.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let turn = s.turn(7, seq, 0).await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
                order.lock().push(seq);
                turn.finish(Ok(()));
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock(), vec![0, 1, 2, 3, 4]);
    }

    #[tokio::test]
    async fn a_failed_batch_refuses_the_rest_of_its_stream() {
        let s = streams();
        let t0 = s.turn(1, 0, 0).await.unwrap();
        let later = {
            let s = s.clone();
            tokio::spawn(async move { s.turn(1, 1, 0).await.map(|_| ()) })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        t0.finish(Err("not here".into()));
        let e = later.await.unwrap().unwrap_err();
        assert!(e.contains("not here"), "{e}");
        assert!(s.turn(1, 2, 0).await.is_err());
        // An abandoned turn fails its stream too.
        let t = s.turn(2, 0, 0).await.unwrap();
        drop(t);
        assert!(s.turn(2, 1, 0).await.is_err());
        // Other streams are not affected.
        s.turn(3, 0, 0).await.unwrap().finish(Ok(()));
        s.turn(3, 1, 0).await.unwrap().finish(Ok(()));
    }

    #[tokio::test]
    async fn a_repeated_batch_never_takes_a_second_turn() {
        let s = streams();
        let first = s.turn(20, 0, 0).await.unwrap();
        let again = {
            let s = s.clone();
            tokio::spawn(async move { s.turn(20, 0, 0).await.map(|_| ()) })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            !again.is_finished(),
            "the repeat took the turn beside the first"
        );
        first.finish(Ok(()));
        let e = again.await.unwrap().unwrap_err();
        assert!(e.contains("comes after"), "{e}");
    }

    #[tokio::test]
    async fn unknown_streams_start_where_the_client_stands_and_repeats_are_refused() {
        let s = streams();
        // Batch 3 with 3 acknowledged: the server forgot the stream; it resumes at 3.
        s.turn(9, 3, 3).await.unwrap().finish(Ok(()));
        s.turn(9, 4, 3).await.unwrap().finish(Ok(()));
        assert!(s.turn(9, 4, 4).await.is_err());
        assert!(s.turn(9, 1, 2).await.is_err());
    }

    #[tokio::test]
    async fn a_missing_batch_fails_the_stream_after_the_wait() {
        let s = streams();
        s.turn(5, 0, 0).await.unwrap().finish(Ok(()));
        let started = Instant::now();
        let e = s.turn(5, 2, 0).await.unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(200));
        assert!(e.contains("did not arrive"), "{e}");
        // The late batch 1 is refused as well: the stream failed.
        assert!(s.turn(5, 1, 0).await.is_err());
    }

    #[tokio::test]
    async fn a_slow_predecessor_is_waited_for_past_the_missing_wait() {
        let s = streams();
        let t0 = s.turn(6, 0, 0).await.unwrap();
        let next = {
            let s = s.clone();
            tokio::spawn(async move { s.turn(6, 1, 0).await.map(|t| t.finish(Ok(()))) })
        };
        tokio::time::sleep(Duration::from_millis(500)).await;
        t0.finish(Ok(()));
        next.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn the_table_of_streams_is_bounded() {
        let s = streams();
        for id in 1..=4u64 {
            s.turn(id, 0, 0).await.unwrap().finish(Ok(()));
        }
        // Full: a new stream evicts the least recently used idle one (1).
        s.turn(10, 0, 0).await.unwrap().finish(Ok(()));
        assert_eq!(s.len(), 4);
        // With every stream busy, a new one is refused.
        let mut busy = Vec::new();
        for id in [2, 3, 4, 10] {
            busy.push(s.turn(id, 1, 1).await.unwrap());
        }
        let e = s.turn(11, 0, 0).await.unwrap_err();
        assert!(e.contains("busy"), "{e}");
        drop(busy);
        // Stream 1 was forgotten: it comes back with batch 2 while batch 1 is unacknowledged,
        // so batch 1 may still be in flight; it waits for it, which never comes.
        let e = s.turn(1, 2, 1).await.unwrap_err();
        assert!(e.contains("did not arrive"), "{e}");
        assert_eq!(s.len(), 4);
    }
}

//! Retrying over range moves, splits and recoveries: [`Attempt`] (retry or give up) and the
//! [`Backoff`] that paces the retries until [`super::ClusterOptions::retry_for`] passes on the
//! client's clock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::ErrorKind;
use common::time::Clock;
use rand::Rng;

use super::Inner;
use super::errors::unavailable;
use crate::{ClientError, Result};

/// Why one attempt failed.
pub(super) enum Attempt {
    /// Locations may be stale or a server is down: refresh and try again.
    Retry(String),
    Fatal(ClientError),
}

impl From<ClientError> for Attempt {
    fn from(e: ClientError) -> Self {
        if e.kind() == ErrorKind::Unavailable {
            Attempt::Retry(e.to_string())
        } else {
            Attempt::Fatal(e)
        }
    }
}

impl Inner {
    /// Runs `f` until it succeeds, fails for good, or [`ClusterOptions::retry_for`](super::ClusterOptions::retry_for) passes.
    pub(super) async fn retrying<T, F, Fut>(&self, what: &str, mut f: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, Attempt>>,
    {
        let mut backoff = self.backoff();
        loop {
            match f().await {
                Ok(v) => return Ok(v),
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Retry(why)) => backoff.wait(what, why).await?,
            }
        }
    }
}

/// The first pause between attempts...
const FIRST_PAUSE: Duration = Duration::from_millis(20);
/// ... doubled after each one up to this.
const MAX_PAUSE: Duration = Duration::from_millis(500);

impl Inner {
    /// A fresh [`Backoff`] over [`super::ClusterOptions::retry_for`], its jitter seeded from
    /// the client's random source.
    pub(super) fn backoff(&self) -> Backoff {
        let seed = self.rng.lock().random();
        Backoff::new(self.opts.clock.clone(), self.opts.retry_for, seed)
    }
}

/// Pauses between attempts, doubling from 20 ms up to half a second, each stretched by a
/// seeded random 0-50% (`rpc::retry::Backoff`), until `limit` has passed on `clock` since the
/// backoff was made.
pub(super) struct Backoff {
    clock: Arc<dyn Clock>,
    start: Instant,
    limit: Duration,
    pauses: rpc::retry::Backoff,
}

impl Backoff {
    pub(super) fn new(clock: Arc<dyn Clock>, limit: Duration, seed: u64) -> Self {
        Self {
            start: clock.now(),
            clock,
            limit,
            pauses: rpc::retry::Backoff::new(FIRST_PAUSE, MAX_PAUSE, seed),
        }
    }

    /// The pause before the next attempt, or the error that ends the retries once `limit` has
    /// passed.
    fn next_pause(&mut self, what: &str, why: &str) -> Result<Duration> {
        let waited = self.clock.now().saturating_duration_since(self.start);
        if waited >= self.limit {
            return Err(unavailable(format!(
                "{what}: gave up after {:.1} s: {why}",
                waited.as_secs_f64()
            )));
        }
        Ok(self.pauses.next_delay())
    }

    pub(super) async fn wait(&mut self, what: &str, why: String) -> Result<()> {
        let pause = self.next_pause(what, &why)?;
        tracing::debug!(what, why, "retrying");
        tokio::time::sleep(pause).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::time::ManualClock;

    /// The un-jittered pauses: 20 ms doubling to half a second.
    fn base_pause(attempt: usize) -> Duration {
        (FIRST_PAUSE * (1 << attempt.min(10))).min(MAX_PAUSE)
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_gives_up_exactly_when_retry_for_passes_on_its_clock() {
        let clock = Arc::new(ManualClock::new());
        let mut backoff = Backoff::new(clock.clone(), Duration::from_secs(3), 7);
        let (real, paused) = (std::time::Instant::now(), tokio::time::Instant::now());
        // 2.999 s on the client's clock: still retrying.
        for _ in 0..10 {
            clock.advance(Duration::from_millis(299));
            backoff
                .wait("scan", "moving".into())
                .await
                .expect("before retry_for");
        }
        clock.advance(Duration::from_millis(9));
        backoff
            .wait("scan", "moving".into())
            .await
            .expect("just before retry_for");
        // Exactly 3 s: gives up, saying what and why.
        clock.advance(Duration::from_millis(1));
        let e = backoff.wait("scan", "moving".into()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        assert!(
            e.to_string().contains("scan: gave up after 3.0 s: moving"),
            "{e}"
        );
        // The 11 pauses ran on tokio's paused clock, at least their un-jittered sum, and not in
        // real time.
        let least: Duration = (0..11).map(base_pause).sum();
        assert!(
            paused.elapsed() >= least,
            "{:?} < {least:?}",
            paused.elapsed()
        );
        assert!(
            real.elapsed() < least,
            "slept {:?} in real time",
            real.elapsed()
        );
    }

    #[test]
    fn backoff_pauses_double_to_half_a_second_jittered_from_the_seed() {
        let pauses = |seed| {
            let mut b = Backoff::new(Arc::new(ManualClock::new()), Duration::from_secs(1), seed);
            (0..12)
                .map(|_| b.next_pause("update", "why").expect("clock stands still"))
                .collect::<Vec<_>>()
        };
        let first = pauses(42);
        assert_eq!(first, pauses(42), "the same seed gives the same pauses");
        assert_ne!(first, pauses(43), "another seed jitters differently");
        for (attempt, pause) in first.iter().enumerate() {
            let base = base_pause(attempt);
            assert!(
                *pause >= base && *pause <= base + base / 2,
                "pause {attempt}: {pause:?} outside {base:?} + 0-50%"
            );
        }
    }
}

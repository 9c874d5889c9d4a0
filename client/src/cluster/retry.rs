//! Retrying over range moves, splits and recoveries: [`Attempt`] (retry or give up) and the
//! [`Backoff`] that paces the retries until [`ClusterOptions::retry_for`](super::ClusterOptions::retry_for) passes.

use std::time::{Duration, Instant};

use common::ErrorKind;

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
        let mut backoff = Backoff::new(self.opts.retry_for);
        loop {
            match f().await {
                Ok(v) => return Ok(v),
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Retry(why)) => backoff.wait(what, why).await?,
            }
        }
    }
}

/// Pauses between attempts, doubling up to half a second, until a deadline.
pub(super) struct Backoff {
    start: Instant,
    pause: Duration,
    limit: Duration,
}

impl Backoff {
    pub(super) fn new(limit: Duration) -> Self {
        Self {
            start: Instant::now(),
            pause: Duration::from_millis(20),
            limit,
        }
    }

    pub(super) async fn wait(&mut self, what: &str, why: String) -> Result<()> {
        if self.start.elapsed() >= self.limit {
            return Err(unavailable(format!(
                "{what}: gave up after {:.1} s: {why}",
                self.start.elapsed().as_secs_f64()
            )));
        }
        tracing::debug!(what, why, "retrying");
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(Duration::from_millis(500));
        Ok(())
    }
}

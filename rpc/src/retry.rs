//! Retries with exponential backoff, for calls the caller knows to be idempotent, and the one
//! [`Backoff`] (exponential, capped, jittered from a seeded random source) that every client
//! in ht waits with: rpc calls, the Hyperspace client, the cluster client.

use std::future::Future;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::RpcError;

/// How often and how patiently to retry.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; at least one is always made.
    pub max_attempts: u32,
    /// Wait after the first failure; doubled after each further one.
    pub initial_backoff: Duration,
    /// Upper bound on one wait.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt number `attempt` (0-based).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

/// `wait` stretched by a random 0-50%, so that clients failed by one event do not retry in step.
pub fn jittered(wait: Duration) -> Duration {
    jittered_with(&mut rand::rng(), wait)
}

/// [`jittered`] drawing from a given random source.
pub fn jittered_with(rng: &mut impl Rng, wait: Duration) -> Duration {
    wait + wait.mul_f64(rng.random::<f64>() * 0.5)
}

/// Exponentially growing pauses between attempts: `initial`, doubled after each pause up to
/// `max`, each stretched by a random 0-50% drawn from the backoff's own seeded source (so a
/// test that fixes the seed sees the same pauses every run).
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    attempt: u32,
    rng: StdRng,
}

impl Backoff {
    /// A backoff from `initial` to `max`, jittered from `seed`.
    pub fn new(initial: Duration, max: Duration, seed: u64) -> Self {
        Self {
            initial,
            max,
            attempt: 0,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// A backoff following `policy`'s pauses, jittered from `seed`.
    pub fn from_policy(policy: &RetryPolicy, seed: u64) -> Self {
        Self::new(policy.initial_backoff, policy.max_backoff, seed)
    }

    /// The un-jittered pause after failed attempt number `attempt` (0-based).
    pub fn base(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// The next pause (jittered), counting one more failed attempt.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.base(self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        jittered_with(&mut self.rng, base)
    }

    /// The pause after failed attempt number `attempt`, jittered, without changing the count
    /// (for callers that keep their own attempt counter).
    pub fn delay_for(&mut self, attempt: u32) -> Duration {
        let base = self.base(attempt);
        jittered_with(&mut self.rng, base)
    }

    /// Failed attempts counted so far.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    /// Starts over from `initial` (after a success).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// Runs `op` until it succeeds, fails with a non-retryable error, or runs out of attempts.
/// Only for idempotent operations: a timed-out attempt may have taken effect.
pub async fn retry<T, F, Fut>(policy: &RetryPolicy, op: F) -> Result<T, RpcError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, RpcError>>,
{
    retry_seeded(policy, common::time::entropy_seed(), op).await
}

/// [`retry`] with the jitter drawn from `seed` (repeatable pauses in tests). Pauses run on
/// tokio's clock, which a test can pause and advance.
pub async fn retry_seeded<T, F, Fut>(
    policy: &RetryPolicy,
    seed: u64,
    mut op: F,
) -> Result<T, RpcError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, RpcError>>,
{
    let mut backoff = Backoff::from_policy(policy, seed);
    loop {
        match op().await {
            Ok(value) => return Ok(value),
            Err(e) if e.is_retryable() && backoff.attempts() + 1 < policy.max_attempts => {
                tracing::debug!(error = %e, attempt = backoff.attempts(), "rpc: retrying");
                tokio::time::sleep(backoff.next_delay()).await;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::ErrorKind;
    use std::cell::Cell;

    #[test]
    fn backoff_doubles_and_caps() {
        let policy = RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(50),
        };
        assert_eq!(policy.backoff(0), Duration::from_millis(10));
        assert_eq!(policy.backoff(1), Duration::from_millis(20));
        assert_eq!(policy.backoff(2), Duration::from_millis(40));
        assert_eq!(policy.backoff(3), Duration::from_millis(50));
        assert_eq!(policy.backoff(100), Duration::from_millis(50));
    }

    #[test]
    fn jitter_stays_within_half_again() {
        let base = Duration::from_millis(100);
        let waits: Vec<Duration> = (0..200).map(|_| jittered(base)).collect();
        assert!(waits.iter().all(|w| *w >= base && *w <= base.mul_f64(1.5)));
        assert!(waits.iter().any(|w| *w != waits[0]), "no jitter at all");
    }

    #[test]
    fn backoff_is_repeatable_from_its_seed_and_stays_in_bounds() {
        let pauses = |seed| {
            let mut b = Backoff::new(Duration::from_millis(10), Duration::from_millis(80), seed);
            (0..8).map(|_| b.next_delay()).collect::<Vec<_>>()
        };
        assert_eq!(pauses(7), pauses(7));
        assert_ne!(pauses(7), pauses(8));
        let b = Backoff::new(Duration::from_millis(10), Duration::from_millis(80), 0);
        for (i, p) in pauses(7).into_iter().enumerate() {
            let base = b.base(i as u32);
            assert!(
                p >= base && p <= base.mul_f64(1.5),
                "pause {i}: {p:?} vs {base:?}"
            );
        }
        assert_eq!(b.base(10), Duration::from_millis(80));
        let mut b = Backoff::new(Duration::from_millis(10), Duration::from_millis(80), 1);
        b.next_delay();
        b.next_delay();
        b.reset();
        assert_eq!(b.attempts(), 0);
        assert!(b.next_delay() < Duration::from_millis(16));
    }

    #[tokio::test(start_paused = true)]
    async fn retries_only_retryable_errors() {
        let policy = RetryPolicy::default();
        let calls = Cell::new(0);
        let result: Result<(), _> = retry(&policy, || {
            calls.set(calls.get() + 1);
            async { Err(RpcError::service(ErrorKind::Unavailable, "busy")) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls.get(), 4);

        calls.set(0);
        let result: Result<(), _> = retry(&policy, || {
            calls.set(calls.get() + 1);
            async { Err(RpcError::service(ErrorKind::NotFound, "gone")) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls.get(), 1);

        calls.set(0);
        let result = retry(&policy, || {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move {
                if n < 3 {
                    Err(RpcError::service(ErrorKind::Unavailable, "busy"))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert!(matches!(result, Ok(3)));
    }
}

//! Retries with exponential backoff, for calls the caller knows to be idempotent.

use std::future::Future;
use std::time::Duration;

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
    wait + wait.mul_f64(rand::random::<f64>() * 0.5)
}

/// Runs `op` until it succeeds, fails with a non-retryable error, or runs out of attempts.
/// Only for idempotent operations: a timed-out attempt may have taken effect.
pub async fn retry<T, F, Fut>(policy: &RetryPolicy, mut op: F) -> Result<T, RpcError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, RpcError>>,
{
    let mut attempt = 0;
    loop {
        match op().await {
            Ok(value) => return Ok(value),
            Err(e) if e.is_retryable() && attempt + 1 < policy.max_attempts => {
                tracing::debug!(error = %e, attempt, "rpc: retrying");
                tokio::time::sleep(jittered(policy.backoff(attempt))).await;
                attempt += 1;
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

//! Injected time: a [`Clock`] that components read instead of `Instant::now`, so that leases,
//! backoff, jeopardy and retry deadlines can run on a [`ManualClock`] in deterministic tests.
//!
//! Production code takes an `Arc<dyn Clock>` defaulting to [`SystemClock`]; a simulation
//! advances a [`ManualClock`] by hand. Randomness is injected the same way, as a seed: every
//! component that draws (backoff jitter, placement, election timeouts) takes a `u64` seed and
//! builds its own `rand::rngs::StdRng` from it, so a failing run replays from its seed.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A monotonic clock with a blocking sleep.
pub trait Clock: Send + Sync + Debug {
    /// The current instant; never goes backwards.
    fn now(&self) -> Instant;
    /// Blocks the calling thread for `d` of this clock's time (a [`ManualClock`] advances
    /// itself instead of waiting).
    fn sleep(&self, d: Duration);
}

/// The real clock: `Instant::now` and `std::thread::sleep`.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn sleep(&self, d: Duration) {
        std::thread::sleep(d)
    }
}

/// The shared real clock.
pub fn system_clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

/// A clock that moves only when told: `now()` is a fixed base instant plus the time advanced
/// so far. `sleep(d)` advances it by `d` at once, so code that backs off runs instantly and
/// repeatably under test.
#[derive(Debug)]
pub struct ManualClock {
    base: Instant,
    offset_nanos: AtomicU64,
}

impl ManualClock {
    pub fn new() -> Self {
        Self {
            base: Instant::now(),
            offset_nanos: AtomicU64::new(0),
        }
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.offset_nanos.fetch_add(nanos, Ordering::SeqCst);
    }

    /// Time advanced since the clock was made.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.offset_nanos.load(Ordering::SeqCst))
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.base + self.elapsed()
    }
    fn sleep(&self, d: Duration) {
        self.advance(d)
    }
}

/// A seed for a component's random source when none is configured: from the system clock and
/// the process id, different per process and per call. Tests pass a fixed seed instead.
pub fn entropy_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new();
        let t0 = c.now();
        assert_eq!(c.now(), t0);
        c.advance(Duration::from_millis(5));
        assert_eq!(c.now() - t0, Duration::from_millis(5));
        c.sleep(Duration::from_secs(1));
        assert_eq!(c.now() - t0, Duration::from_millis(1005));
        assert_eq!(c.elapsed(), Duration::from_millis(1005));
    }

    #[test]
    fn entropy_seeds_differ() {
        assert_ne!(entropy_seed(), entropy_seed());
    }
}

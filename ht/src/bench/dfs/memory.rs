//! Where the bench process's memory goes: a thread samples, every [`EVERY`], the resident set
//! and what the engine holds (cell caches, block cache, the block indexes and bloom filters of
//! open cell stores) and, when the heap is counted (`HT_COUNT_HEAP=1`, `crate::heap`), the live
//! heap; it keeps the sample of the highest resident set.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use rangeserver::engine::Engine;

const EVERY: Duration = Duration::from_millis(200);

/// One sample, bytes.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct MemorySample {
    pub(super) rss: u64,
    /// Live heap bytes, when counted.
    pub(super) heap: Option<u64>,
    pub(super) cell_caches: u64,
    pub(super) block_cache: u64,
    pub(super) store_indexes: u64,
}

/// The sampling thread; [`Sampler::finish`] stops it and returns the sample of the highest
/// resident set.
pub(super) struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<MemorySample>,
}

/// The resident set of this process, bytes (0 where /proc does not tell).
fn rss_bytes() -> u64 {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    statm
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse::<u64>().ok())
        .map_or(0, |pages| pages * page)
}

fn sample(engine: &Engine) -> MemorySample {
    let s = engine.stats();
    MemorySample {
        rss: rss_bytes(),
        heap: crate::heap::live_bytes(),
        cell_caches: s.cache_bytes,
        block_cache: s.block_cache_bytes,
        store_indexes: s.store_memory_bytes,
    }
}

impl Sampler {
    pub(super) fn start(engine: Engine) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut peak = sample(&engine);
                while !stop.load(Ordering::Acquire) {
                    std::thread::sleep(EVERY);
                    let s = sample(&engine);
                    if s.rss > peak.rss {
                        peak = s;
                    }
                }
                peak
            })
        };
        Sampler { stop, thread }
    }

    pub(super) fn finish(self) -> MemorySample {
        self.stop.store(true, Ordering::Release);
        self.thread.join().unwrap_or_default()
    }
}

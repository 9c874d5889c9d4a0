//! The process that `tests/crash.rs` kills: writes numbered cells to an engine as fast as it can
//! and prints `ACK <first_seq> <last_seq>` once each batch is acknowledged.
//!
//! Usage: `crash_child <data dir> <writer id> <seed>`. Row keys are `w{writer}-{seq:08}`; cell
//! `seq` goes to family `1 + seq % 2` with qualifier `q` and the value [`value_of`] gives. A second
//! thread splits and compacts now and then, and the limits are small, so minor and merging
//! compactions, log rolls and splits all happen within a second of writing.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dfs_broker::LocalFs;
use rangeserver::engine::{CompactionKind, Engine, Mutation};

#[path = "../tests/support/crash_setup.rs"]
mod crash_setup;
use crash_setup::{TABLE, options, row_of, schema, value_of};

/// xorshift64*: deterministic from the seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: crash_child <data dir> <writer id> <seed>");
        std::process::exit(2);
    }
    let dir = &args[1];
    let writer: u32 = args[2].parse().expect("writer id is a number");
    let seed: u64 = args[3].parse().expect("seed is a number");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let fs = Arc::new(LocalFs::new(dir).expect("local fs"));
    let e = Engine::open(fs, "/ht", options(), rt.handle().clone()).expect("open engine");
    if e.schema(TABLE).is_err() {
        e.create_table(schema()).expect("create table");
    }
    let next_seq = Arc::new(AtomicU64::new(0));

    // Splits and compactions from a second thread, racing the writes.
    {
        let e = e.clone();
        let next_seq = next_seq.clone();
        let mut rng = Rng((seed ^ 0x9E37_79B9_7F4A_7C15) | 1);
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(20 + rng.below(150)));
                let n = next_seq.load(Ordering::Relaxed);
                let _ = match rng.below(4) {
                    0 if n > 0 => e.split(TABLE, row_of(writer, rng.below(n)).as_bytes()),
                    1 => e.compact(Some(TABLE), CompactionKind::Minor),
                    2 => e.compact(Some(TABLE), CompactionKind::Merging),
                    _ => e.compact(Some(TABLE), CompactionKind::Major),
                };
            }
        });
    }

    let mut rng = Rng(seed | 1);
    let stdout = std::io::stdout();
    loop {
        let first = next_seq.load(Ordering::Relaxed);
        let n = 1 + rng.below(50);
        let muts: Vec<Mutation> = (first..first + n)
            .map(|seq| {
                Mutation::insert(
                    row_of(writer, seq),
                    1 + (seq % 2) as u8,
                    "q",
                    value_of(writer, seq),
                )
            })
            .collect();
        next_seq.store(first + n, Ordering::Relaxed);
        e.apply(TABLE, &muts).expect("apply");
        let mut out = stdout.lock();
        writeln!(out, "ACK {first} {}", first + n - 1).expect("stdout");
        out.flush().expect("flush stdout");
    }
}

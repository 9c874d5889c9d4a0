//! Kill -9 test: a child process (`examples/crash_child.rs`) writes numbered cells while it
//! compacts and splits; the test kills it at a random moment, reopens the engine and checks that
//! every acknowledged cell survived exactly once and nothing it did not write appeared.
//!
//! `HT_CRASH_ITERATIONS` sets the number of kills (default 8); `HT_CRASH_SEED` replays a run.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::key::CellFlag;
use dfs_broker::LocalFs;
use rangeserver::engine::{Engine, EngineOptions};

#[path = "support/crash_setup.rs"]
mod crash_setup;
use crash_setup::{TABLE, options, row_of, value_of};
use rangeserver::scan::spec::ScanSpec;

/// Parses `w{writer}-{seq:08}`.
fn parse_row(row: &str) -> Option<(u32, u64)> {
    let (w, s) = row.strip_prefix('w')?.split_once('-')?;
    Some((w.parse().ok()?, s.parse().ok()?))
}

/// xorshift64*.
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

/// Builds the child (a no-op when it is up to date) and returns its path, next to this test's
/// own binary: `<target>/<profile dir>/deps/crash-*` -> `<target>/<profile dir>/examples/`.
fn child_binary() -> PathBuf {
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--profile",
            "test",
            "--example",
            "crash_child",
            "-p",
            "rangeserver",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo build for crash_child");
    assert!(status.success(), "building crash_child failed: {status}");
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("test binary in <target>/<profile>/deps");
    let path = dir
        .join("examples")
        .join(format!("crash_child{}", std::env::consts::EXE_SUFFIX));
    assert!(path.exists(), "crash_child not found at {}", path.display());
    path
}

/// Runs the child for `run_for`, kills it with SIGKILL and returns the acknowledged seqs.
fn run_child(
    bin: &PathBuf,
    dir: &std::path::Path,
    writer: u32,
    seed: u64,
    run_for: Duration,
) -> Vec<(u64, u64)> {
    let mut child = Command::new(bin)
        .arg(dir)
        .arg(writer.to_string())
        .arg(seed.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn crash_child");
    // Read concurrently so that a full pipe never stalls the child.
    let stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let mut it = line.split_whitespace();
            if it.next() != Some("ACK") {
                continue;
            }
            let first: u64 = it.next().and_then(|s| s.parse().ok()).expect("ACK first");
            let last: u64 = it.next().and_then(|s| s.parse().ok()).expect("ACK last");
            acks.push((first, last));
        }
        acks
    });
    let deadline = Instant::now() + run_for;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("crash_child exited by itself with {status} (writer {writer}, seed {seed})");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().expect("kill crash_child"); // SIGKILL on Unix
    child.wait().expect("wait for crash_child");
    reader.join().expect("ACK reader")
}

#[test]
fn acknowledged_writes_survive_kill_9() {
    let iterations: u32 = std::env::var("HT_CRASH_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let seed: u64 = std::env::var("HT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("crash test: HT_CRASH_SEED={seed} HT_CRASH_ITERATIONS={iterations}");
    let mut rng = Rng(seed | 1);
    let bin = child_binary();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    // Per writer (= iteration): acknowledged seqs, and the highest seq it can have tried.
    let mut acked: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
    let mut tried_max: BTreeMap<u32, u64> = BTreeMap::new();
    // Cells seen after a crash must stay (they were recovered once, so they are durable).
    let mut seen: BTreeSet<(u32, u64)> = BTreeSet::new();
    for writer in 0..iterations {
        let run_for = Duration::from_millis(100 + rng.below(1400));
        let child_seed = rng.next();
        let acks = run_child(&bin, dir.path(), writer, child_seed, run_for);
        let set = acked.entry(writer).or_default();
        let mut last_acked = None;
        for &(first, last) in &acks {
            set.extend(first..=last);
            last_acked = Some(last);
        }
        // After the last ACK at most one more batch (of up to 50) was in flight.
        tried_max.insert(writer, last_acked.map_or(49, |l| l + 50));

        let fs = Arc::new(LocalFs::new(dir.path()).expect("local fs"));
        let e = Engine::open(fs, "/ht", options(), rt.handle().clone()).expect("reopen after kill");
        let ctx = format!(
            "iteration {writer} (ran {run_for:?}, {} batches acknowledged, seed {seed})",
            acks.len()
        );
        if e.schema(TABLE).is_err() {
            assert!(
                acked.values().all(|s| s.is_empty()),
                "{ctx}: table missing but writes were acknowledged"
            );
            e.close().expect("close");
            continue;
        }
        let cells = e
            .scan(TABLE, &ScanSpec::default())
            .expect("scan")
            .collect_all()
            .expect("scan cells");
        let mut present: BTreeMap<(u32, u64), usize> = BTreeMap::new();
        for c in &cells {
            let row = String::from_utf8(c.key.row.clone()).expect("ascii row");
            let (w, s) = parse_row(&row).unwrap_or_else(|| panic!("{ctx}: unexpected row {row:?}"));
            assert!(
                tried_max.get(&w).is_some_and(|&m| s <= m),
                "{ctx}: row {row:?} was never written (writer {w} tried at most seq {:?})",
                tried_max.get(&w)
            );
            assert_eq!(
                c.key.family,
                1 + (s % 2) as u8,
                "{ctx}: row {row:?} in the wrong family"
            );
            assert_eq!(
                c.key.qualifier, b"q",
                "{ctx}: row {row:?} with the wrong qualifier"
            );
            assert_eq!(c.key.flag, CellFlag::Insert, "{ctx}: row {row:?}");
            assert_eq!(
                String::from_utf8_lossy(&c.value),
                value_of(w, s),
                "{ctx}: row {row:?} has the wrong value"
            );
            *present.entry((w, s)).or_default() += 1;
        }
        let dups: Vec<_> = present.iter().filter(|(_, n)| **n > 1).take(5).collect();
        assert!(
            dups.is_empty(),
            "{ctx}: cells returned more than once: {dups:?}"
        );
        let mut lost = Vec::new();
        for (&w, seqs) in &acked {
            lost.extend(
                seqs.iter()
                    .filter(|&&s| !present.contains_key(&(w, s)))
                    .take(5)
                    .map(|&s| row_of(w, s)),
            );
        }
        assert!(
            lost.is_empty(),
            "{ctx}: acknowledged cells lost (first few): {lost:?}"
        );
        let vanished: Vec<_> = seen
            .iter()
            .filter(|k| !present.contains_key(k))
            .take(5)
            .collect();
        assert!(
            vanished.is_empty(),
            "{ctx}: cells present after an earlier crash are gone: {vanished:?}"
        );
        seen.extend(present.keys().copied());
        eprintln!(
            "iteration {writer}: ran {run_for:?}, {} cells acknowledged this run, {} present in total, {} ranges",
            acked[&writer].len(),
            present.len(),
            e.ranges(TABLE).len()
        );
        e.close().expect("close");
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("readdir") {
        let e = e.expect("dir entry");
        let dst = to.join(e.file_name());
        if e.file_type().expect("file type").is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).expect("copy");
        }
    }
}

/// Cuts the last commit-log fragment of an engine that did not close (a copy taken while it
/// ran, as a kill -9 leaves it) at many offsets (and appends garbage to it): the engine must
/// open, and what it recovers must be the first k batches, each whole, for some k. The same cuts
/// of a cleanly closed engine's fragment (whose end the meta log recorded) must be refused,
/// naming the fragment: that is damage, not a torn tail.
#[test]
fn torn_log_tail_loses_only_a_suffix_of_batches() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let src = tempfile::tempdir().expect("tempdir");
    let fs = Arc::new(LocalFs::new(src.path()).expect("local fs"));
    let e = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone()).expect("open");
    let mut schema = common::TableSchema::new(TABLE, "/torn");
    schema.access_groups = vec![
        common::schema::AccessGroupSpec::new("g1"),
        common::schema::AccessGroupSpec::new("g2"),
    ];
    schema.families = vec![
        common::schema::FamilySpec::new(1, "a", "g1"),
        common::schema::FamilySpec::new(2, "b", "g2"),
    ];
    e.create_table(schema).expect("create table");
    let mut rng = Rng(0x5EED);
    // batches[i] = (first seq, last seq)
    let mut batches = Vec::new();
    let mut seq = 0u64;
    for _ in 0..300 {
        let n = 1 + rng.below(10);
        let muts: Vec<_> = (seq..seq + n)
            .map(|s| {
                rangeserver::engine::Mutation::insert(
                    row_of(0, s),
                    1 + (s % 2) as u8,
                    "q",
                    value_of(0, s),
                )
            })
            .collect();
        e.apply(TABLE, &muts).expect("apply");
        batches.push((seq, seq + n - 1));
        seq += n;
    }
    // Durability flush: every batch is in the kernel, so a copy now is what kill -9 leaves.
    let crashed = tempfile::tempdir().expect("tempdir");
    copy_dir(src.path(), crashed.path());
    e.close().expect("close");
    drop(e);
    let (src, closed) = (crashed, src);

    let log_dir = src.path().join("ht").join("log");
    let last = std::fs::read_dir(&log_dir)
        .expect("log dir")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .expect("a log fragment");
    let len = std::fs::metadata(log_dir.join(last.to_string()))
        .expect("fragment")
        .len();
    let mut cuts: Vec<Option<u64>> = vec![
        Some(0),
        Some(1),
        Some(len / 2),
        Some(len - 1),
        Some(len),
        None,
    ];
    cuts.extend((0..12).map(|_| Some(rng.below(len))));
    for cut in cuts {
        let dst = tempfile::tempdir().expect("tempdir");
        copy_dir(src.path(), dst.path());
        let frag = dst.path().join("ht").join("log").join(last.to_string());
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&frag)
            .expect("open fragment");
        match cut {
            Some(c) => f.set_len(c).expect("truncate"),
            None => {
                use std::io::Write;
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&frag)
                    .expect("open fragment");
                f.write_all(&[0xA5; 37]).expect("append garbage");
            }
        }
        let fs = Arc::new(LocalFs::new(dst.path()).expect("local fs"));
        let e = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone())
            .unwrap_or_else(|err| {
                panic!("open after cutting fragment {last} ({len} bytes) at {cut:?}: {err}")
            });
        let present: BTreeSet<u64> = e
            .scan(TABLE, &ScanSpec::default())
            .expect("scan")
            .collect_all()
            .expect("scan cells")
            .into_iter()
            .map(|c| {
                let (_, s) =
                    parse_row(std::str::from_utf8(&c.key.row).expect("ascii")).expect("known row");
                assert_eq!(
                    String::from_utf8_lossy(&c.value),
                    value_of(0, s),
                    "cut {cut:?}: value of seq {s}"
                );
                s
            })
            .collect();
        let n = present.len() as u64;
        assert!(
            present.iter().copied().eq(0..n),
            "cut {cut:?} of {len}: recovered cells are not a prefix: {} cells, first gap near {:?}",
            n,
            (0..n).find(|s| !present.contains(s))
        );
        assert!(
            n == 0 || batches.iter().any(|&(_, l)| l + 1 == n),
            "cut {cut:?} of {len}: recovered {n} cells, which splits a batch"
        );
        if cut == Some(0) {
            // Everything was in the log (nothing was flushed): the cut must have cost something.
            assert_eq!(n, 0, "an empty fragment cannot hold {n} cells");
        }
        if cut.is_none_or(|c| c == len) {
            assert_eq!(n, seq, "nothing may be lost when the fragment is whole");
        }
        e.close().expect("close");
        if cut.is_some_and(|c| c < len) {
            let dst = tempfile::tempdir().expect("tempdir");
            copy_dir(closed.path(), dst.path());
            let frag = dst.path().join("ht").join("log").join(last.to_string());
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&frag)
                .expect("open fragment");
            f.set_len(cut.expect("a cut")).expect("truncate");
            let fs = Arc::new(LocalFs::new(dst.path()).expect("local fs"));
            let err = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone())
                .err()
                .unwrap_or_else(|| panic!("a closed fragment cut at {cut:?} of {len} opened"));
            assert!(
                err.to_string().contains(&format!("/ht/log/{last}")),
                "cut {cut:?}: the error names the fragment: {err}"
            );
        }
    }
}

//! `ht bench`: benchmarks that run ht next to a reference and report medians and ratios.

pub mod dfs;
pub mod engine;
pub mod hyperspace;
pub mod index;
pub mod iterators;
pub mod load;
pub mod querylog;
pub mod skipscan;
pub mod wikisearch;

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use clap::Subcommand;

/// The benchmarks.
#[derive(Subcommand)]
pub enum BenchCommand {
    /// The storage engine against RocksDB's db_bench (BENCH.md section 1).
    Engine(engine::EngineArgs),
    /// Writes a deterministic query log fitted to the AOL files (or, with --fit, measures them).
    GenQueryLog(querylog::GenArgs),
    /// Concurrent loaders into one table on each DFS backend, commit-log flush off and on
    /// (BENCH.md section 3).
    Dfs(dfs::DfsBenchArgs),
    /// Hyperspace on a local group of replica processes: lock pairs and attribute sets per
    /// second, 1 and 16 clients, p50/p99 latency.
    Hyperspace(hyperspace::HyperspaceBenchArgs),
    /// LOAD DATA INFILE of a query log against the engine's own write rate (BENCH.md section 2).
    Load(load::LoadArgs),
    /// A `sum` combiner family against RocksDB's uint64add merges (ingest and point reads), and
    /// a cluster scan with value predicates in the range servers against filtering in the client.
    Iterators(iterators::IteratorsArgs),
    /// A value predicate through a secondary index against a full scan (issue 17).
    Index(index::IndexArgs),
    /// Key-set queries (Phoenix's skip-scan test, issue 15): ht's skip scan against batched
    /// gets, a range scan, the previous key-set path and SQLite, warm and cold.
    Skipscan(Box<skipscan::SkipscanArgs>),
    /// Accumulo's Wikipedia search: ingest, the seed's queries against the client-side
    /// method, random load (issue 16).
    Wikisearch(Box<wikisearch::WikisearchArgs>),
}

/// Runs one benchmark.
pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Engine(args) => engine::run(args),
        BenchCommand::GenQueryLog(args) => querylog::run(args),
        BenchCommand::Load(args) => load::run(args),
        BenchCommand::Hyperspace(args) => hyperspace::run(args),
        BenchCommand::Dfs(args) => dfs::run(args),
        BenchCommand::Iterators(args) => iterators::run(args),
        BenchCommand::Index(args) => index::run(args),
        BenchCommand::Skipscan(args) => skipscan::run(*args),
        BenchCommand::Wikisearch(args) => wikisearch::run(*args),
    }
}

/// The median of `v` (the mean of the middle two for an even count); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Peak resident set size of this process in kB (VmHWM), if /proc tells.
pub fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    field_kb(&status, "VmHWM:")
}

fn field_kb(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    line[name.len()..].split_whitespace().next()?.parse().ok()
}

/// "2 cpus, 23.4 GiB": what the figures were measured on.
pub fn machine() -> String {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| field_kb(&m, "MemTotal:"))
        .map(|kb| format!("{:.1} GiB", kb as f64 / (1024.0 * 1024.0)))
        .unwrap_or_else(|| "? GiB".into());
    format!("{cpus} cpus, {mem}")
}

/// The short commit hash of the working tree, or "unknown".
pub fn git_commit() -> String {
    git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into())
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The repository root (the working tree `git` reports), or the current directory.
pub fn repo_root() -> PathBuf {
    git(&["rev-parse", "--show-toplevel"])
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `path` as given if absolute or if it exists from the current directory; else under the
/// repository root.
pub fn repo_path(path: &std::path::Path) -> PathBuf {
    if path.is_absolute() || path.exists() {
        path.to_path_buf()
    } else {
        repo_root().join(path)
    }
}

/// The command line as typed (arguments joined by spaces).
pub fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// The directory a benchmark works in: `dir` if given, else a new temporary directory under
/// /tmp (removed when the returned guard drops).
pub fn work_dir(
    dir: &Option<PathBuf>,
    prefix: &str,
) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
    Ok(match dir {
        Some(d) => (d.clone(), None),
        None => {
            let t = tempfile::Builder::new().prefix(prefix).tempdir_in("/tmp")?;
            (t.path().to_path_buf(), Some(t))
        }
    })
}

/// The header of a new `bench/RESULTS.md`, explaining every benchmark's figures.
const RESULTS_HEADER: &str = "# Benchmark results\n\n\
One line per invocation of a benchmark. Columns: date (UTC); git commit of the binary's tree; \
machine (CPUs, total memory); the command; the figures.\n\n\
For `ht bench engine` the figures are, per workload, `ht ops/s / RocksDB ops/s (ratio)`: medians \
over the runs of ht and of RocksDB's db_bench, and the median of the per-pair ratios ht/RocksDB \
(>1 means ht is faster). Ops/s = cells (or reads) / elapsed seconds, one thread. For `ht bench \
load` they are Hypertable's load report (medians) with the peak RSS and the ratio to the \
engine's own write rate for the same cells. For `ht bench hyperspace`: operations per second \
over all clients (each client its own session, one operation at a time), and the p50/p99 \
latency of one operation, per workload and client count. For `ht bench iterators`: a `sum` \
(fixed64) family's increments and point reads against db_bench's `mergerandom`/`readrandom` \
(uint64add), `ht ops/s / RocksDB ops/s (ratio)` as for the engine, and a cluster scan with a \
value predicate keeping 1% of the cells, filtered in the range servers versus in the client: \
elapsed seconds and key+value bytes that reached the client. For `ht bench skipscan`: per mode \
(embedded, cluster), cache state (warm: block cache hot; cold: files dropped from the page \
cache, fresh processes) and fraction of the object ids, the skip scan's median ms and the \
medians of the per-run ratios other method / skip (>1 means the skip scan is faster); gets is \
the faster of 1 and 4 threads of single-row lookups. For `ht bench wikisearch`: per corpus \
and mode, ingest articles/s, the median over the seed's six queries (warm) of the per-run \
ratio client-side postings-and-intersection ms / boolean-iterator ms (>1 means the iterator is faster), and the random \
load's queries/s; the full tables are in the bench's output. For `ht bench index`: per mode, \
the medians of a value-predicate query through a secondary index and of the same query over a \
full scan of an unindexed twin table, and the median of the per-run ratios scan / index.\n\n\
| date (UTC) | commit | machine | command | figures |\n|---|---|---|---|---|\n";

/// Appends `line` to `bench/RESULTS.md` at the repository root (or the current directory),
/// creating the file with [`RESULTS_HEADER`] first. Returns the path written.
pub fn append_result(line: &str) -> anyhow::Result<PathBuf> {
    let dir = repo_root().join("bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("RESULTS.md");
    let fresh = !path.exists();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    if fresh {
        f.write_all(RESULTS_HEADER.as_bytes())?;
    }
    writeln!(f, "{line}")?;
    Ok(path)
}

/// Current time in UTC as `YYYY-MM-DD HH:MM:SS`.
pub fn utc_now() -> String {
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0);
    let mut s = hql::format_nanos(ns);
    s.truncate("YYYY-MM-DD HH:MM:SS".len());
    s
}

/// Asks the master to balance until `table`'s ranges lie on `servers` range servers (or a
/// minute passed); returns its ranges and the servers holding them.
pub fn spread(
    client: &dyn client::Client,
    table: &str,
    servers: usize,
) -> anyhow::Result<(usize, usize)> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let ranges = client.table_ranges(table)?;
        let mut on: Vec<&str> = ranges.iter().map(|r| r.location.as_str()).collect();
        on.sort_unstable();
        on.dedup();
        if on.len() >= servers || std::time::Instant::now() >= deadline {
            return Ok((ranges.len(), on.len()));
        }
        client.balance()?;
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn kb_field_is_parsed() {
        assert_eq!(
            field_kb("VmPeak:\t 10 kB\nVmHWM:\t  1234 kB\n", "VmHWM:"),
            Some(1234)
        );
    }
}

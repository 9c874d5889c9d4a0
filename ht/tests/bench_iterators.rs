//! `ht bench iterators --quick` end to end: the sum family's increments read back exactly
//! (the benchmark fails otherwise) and the summary line; with db_bench and a local cluster in
//! the ignored test.

use std::process::Command;

/// Runs `ht bench iterators --quick --no-record` with `extra`; (succeeded, stdout, stderr).
fn bench(extra: &[&str]) -> (bool, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_ht"))
        .args(["bench", "iterators", "--quick", "--no-record", "--dir"])
        .arg(dir.path())
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run ht bench iterators");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn summary(out: &str) -> &str {
    out.lines()
        .last()
        .filter(|l| l.starts_with("iterators: "))
        .unwrap_or_else(|| panic!("no summary line at the end:\n{out}"))
}

#[test]
fn the_quick_sum_bench_checks_its_sums_and_prints_the_summary() {
    let (ok, out, err) = bench(&["--no-rocksdb", "--no-cluster"]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("(sums checked)"), "{out}");
    assert_eq!(
        summary(&out),
        "iterators: sum_ingest_vs_rocksdb=- sum_read_vs_rocksdb=- filter_scan_speedup=-"
    );
}

#[test]
#[ignore = "needs db_bench (apt rocksdb-tools) and starts a local cluster: about a minute"]
fn the_quick_bench_runs_beside_rocksdb_and_on_a_cluster() {
    let (ok, out, err) = bench(&[]);
    assert!(ok, "{out}\n{err}");
    let line = summary(&out);
    for part in [
        "sum_ingest_vs_rocksdb=",
        "sum_read_vs_rocksdb=",
        "filter_scan_speedup=",
    ] {
        let value = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix(part))
            .unwrap_or_else(|| panic!("{part} missing: {line}"));
        let x: f64 = value
            .strip_suffix('x')
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{part}{value} is not a ratio: {line}"));
        assert!(x > 0.0, "{line}");
    }
    assert!(out.contains("server-side filter"), "{out}");
}

//! `ht bench index` at a small size, embedded and on a local cluster: the bench fails unless
//! the index query and the full scan return the same cells, and ends with a summary per mode;
//! `--breakdown` times the index path's steps apart.

use std::process::Command;

#[test]
fn the_small_index_bench_agrees_with_the_scan_and_prints_its_summary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_ht"))
        .args([
            "bench",
            "index",
            "--rows",
            "4000",
            "--values",
            "100",
            "--runs",
            "2",
            "--rangeservers",
            "1",
            "--extra-index-runs",
            "3",
            "--breakdown",
            "--no-record",
            "--dir",
        ])
        .arg(dir.path())
        .output()
        .expect("run ht");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    for mode in ["embedded", "cluster"] {
        assert!(
            stdout.contains(&format!("index: mode={mode} rows=4000 fraction=1%")),
            "no {mode} summary in\n{stdout}"
        );
        // 40 rows of two cells each per value.
        assert!(
            stdout.contains(&format!("{mode} run 2: index ")) && stdout.contains("(80 cells)"),
            "{stdout}"
        );
        // The breakdown's two steps find the same rows and cells as the query.
        assert!(
            stderr.contains(&format!("{mode}: breakdown: ^t prefix scan "))
                && stderr.contains("(80 cells a query)"),
            "no {mode} breakdown in\n{stderr}"
        );
    }
}

//! `ht bench wikisearch` at its smallest (the two XML samples, embedded, one run of each cache
//! state): the bench fails unless the boolean iterator and the client-side method return the
//! same documents for every query, and ends with its summary line.

use std::process::Command;

#[test]
fn the_tiny_wikisearch_bench_agrees_across_methods_and_prints_its_summary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_ht"))
        .args([
            "bench",
            "wikisearch",
            "--corpora",
            "xml",
            "--runs",
            "1",
            "--clients",
            "2",
            "--queries-per-client",
            "5",
            "--no-record",
            "--during-ingest",
            "--data",
        ])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/data/wikipedia"
        ))
        .arg("--dir")
        .arg(dir.path())
        .output()
        .expect("run ht");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    for want in [
        "ingest: 126 articles",
        "warm (median of 1 runs)",
        "uncached (median of 1 runs)",
        "cold (median of 1 runs)",
        "old and man and sea",
        "random load: 2 clients x 5 queries",
        "during a re-ingest at a fixed 132 (",
        "during a re-ingest at full speed (",
    ] {
        assert!(stdout.contains(want), "no {want:?} in:\n{stdout}");
    }
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("wikisearch: corpus=xml mode=embedded articles_per_s="))
        .unwrap_or_else(|| panic!("no summary line in:\n{stdout}"));
    assert!(
        summary.contains("seed_queries_vs_client_side="),
        "{summary}"
    );
    assert!(summary.contains("random_qps="), "{summary}");
}

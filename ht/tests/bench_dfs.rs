//! `ht bench dfs` at a small size on the local file system and on kfs-like chunkfs: every
//! run ends with a full scan whose cell count must agree across backends and modes (the bench
//! fails otherwise), then the per-kind I/O table, the footprint table, one summary line per
//! backend and mode, and a chart.

use std::process::Command;

#[test]
fn the_small_dfs_bench_scans_every_table_and_prints_its_summary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let chart = dir.path().join("dfs.svg");
    let out = Command::new(env!("CARGO_BIN_EXE_ht"))
        .args([
            "bench",
            "dfs",
            "--lines",
            "3000",
            "--loaders",
            "2",
            "--backends",
            "local,kfs-like",
            "--no-record",
            "--chart",
        ])
        .arg(&chart)
        .arg("--dir")
        .arg(dir.path().join("work"))
        .env("HT_COUNT_HEAP", "1")
        .output()
        .expect("run ht");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let summaries: Vec<&str> = stdout.lines().filter(|l| l.starts_with("dfs: ")).collect();
    assert_eq!(summaries.len(), 4, "{stdout}");
    let cells: Vec<&str> = summaries
        .iter()
        .map(|l| l.rsplit_once("cells=").expect("cells").1)
        .collect();
    assert!(
        cells.iter().all(|c| *c == cells[0] && *c != "0"),
        "{stdout}"
    );
    for (backend, flush) in [
        ("local", "off"),
        ("local", "on"),
        ("kfs-like", "off"),
        ("kfs-like", "on"),
    ] {
        assert!(
            summaries.iter().any(|l| l.starts_with(&format!(
                "dfs: backend={backend} flush={flush} inserts_per_s="
            ))),
            "no {backend} {flush} summary in\n{stdout}"
        );
    }
    assert!(
        stdout.contains("| kfs-like | on | commit log |"),
        "{stdout}"
    );
    assert!(stderr.contains(" Total inserts:  "), "{stderr}");
    // The memory table: with the heap counted, every run's load and scan have a resident set
    // and a live heap (MiB, whole numbers; the heap may pass the resident set by pages never
    // touched).
    for (backend, flush, phase) in [("local", "off", "load"), ("kfs-like", "on", "scan")] {
        let prefix = format!("| {backend} | {flush} | {phase} | ");
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no memory row {prefix:?} in\n{stdout}"));
        let fields: Vec<&str> = line.split('|').map(str::trim).collect();
        let rss: u64 = fields[4]
            .parse()
            .unwrap_or_else(|_| panic!("RSS in {line}"));
        let heap: u64 = fields[5]
            .parse()
            .unwrap_or_else(|_| panic!("live heap in {line}"));
        assert!(rss > 0 && heap > 0, "{line}");
    }
    let svg = std::fs::read_to_string(&chart).expect("chart written");
    assert!(svg.starts_with("<svg") && svg.contains("kfs-like"), "{svg}");
}

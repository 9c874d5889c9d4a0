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
    let svg = std::fs::read_to_string(&chart).expect("chart written");
    assert!(svg.starts_with("<svg") && svg.contains("kfs-like"), "{svg}");
}

//! `ht bench engine` end to end at a small size on the ht side: every workload (overwrite and
//! readwhilewriting included) reports a rate and the fillrandom database its write
//! amplification; beside db_bench in the ignored test.

use std::process::Command;

/// Runs `ht bench engine --num 20000 --runs 1 --no-record` with `extra`; (ok, stdout, stderr).
fn bench(extra: &[&str]) -> (bool, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_ht"))
        .args([
            "bench",
            "engine",
            "--num",
            "20000",
            "--runs",
            "1",
            "--no-record",
            "--dir",
        ])
        .arg(dir.path())
        .args(extra)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("run ht bench engine");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The figure `name=<value>` of the `run 1 <side>` line.
fn figure(out: &str, side: &str, name: &str) -> f64 {
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("run 1 {side}")))
        .unwrap_or_else(|| panic!("no run line of {side}:\n{out}"));
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} missing or not a number: {line}"))
}

#[test]
fn every_workload_and_the_write_amplification_are_reported() {
    let (ok, out, err) = bench(&["--no-rocksdb"]);
    assert!(ok, "{out}\n{err}");
    for w in [
        "fillrandom",
        "fillseq",
        "fillrandom_sync",
        "overwrite",
        "readseq",
        "readrandom",
        "readwhilewriting",
    ] {
        assert!(figure(&out, "ht:", w) > 0.0, "{w}: {out}");
    }
    // The commit log alone writes every cell once, compressed; the stores again.
    let wa = figure(&out, "ht:", "write_amplification");
    assert!(wa > 0.5 && wa < 20.0, "write amplification {wa}: {out}");
    assert!(err.contains("ht readwhilewriting "), "{err}");
    assert!(
        out.contains("| write amplification (lower is better) |"),
        "{out}"
    );
}

#[test]
#[ignore = "needs db_bench (apt rocksdb-tools): about a minute"]
fn the_bench_runs_beside_db_bench() {
    let (ok, out, err) = bench(&[]);
    assert!(ok, "{out}\n{err}");
    for w in ["overwrite", "readwhilewriting", "write_amplification"] {
        assert!(figure(&out, "RocksDB:", w) > 0.0, "{w}: {out}");
    }
}

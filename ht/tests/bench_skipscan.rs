//! `ht bench skipscan` at a tiny size, embedded, warm and cold (and SQLite when python3 is
//! there): the bench fails unless every method returns the same COUNT and AVG, and ends with
//! its summary lines.

use std::process::Command;

#[test]
fn the_tiny_skipscan_bench_agrees_across_methods_and_prints_its_summary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let python = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let methods = if python {
        "skip,gets1,gets4,scan,today,sqlite"
    } else {
        "skip,gets1,gets4,scan,today"
    };
    let out = Command::new(env!("CARGO_BIN_EXE_ht"))
        .args([
            "bench",
            "skipscan",
            "--rows",
            "2000",
            "--fractions",
            "1,10",
            "--runs",
            "1",
            "--modes",
            "embedded",
            "--no-record",
            "--methods",
            methods,
            "--dir",
        ])
        .arg(dir.path().join("data"))
        .arg("--chart")
        .arg(dir.path().join("skipscan.svg"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run ht bench skipscan");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let summaries: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("skipscan: "))
        .collect();
    assert_eq!(summaries.len(), 4, "2 fractions x warm, cold:\n{stdout}");
    assert!(
        summaries[0].starts_with("skipscan: fraction=1% cache=warm mode=embedded skip_vs_gets="),
        "{stdout}"
    );
    for s in &summaries {
        assert!(
            s.contains("skip_vs_scan=") && s.contains("skip_vs_sqlite="),
            "{s}"
        );
        if python {
            assert!(!s.ends_with("skip_vs_sqlite=-"), "{s}");
        }
    }
    let svg = std::fs::read_to_string(dir.path().join("skipscan.svg")).expect("the chart");
    assert!(svg.contains("<svg") && svg.contains("skip"), "{svg}");
}

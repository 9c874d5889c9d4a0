//! `ht cingest run` on a local cluster with the agitator on: ingest, walkers and kills for a
//! minute, then verify must find every referenced row. Then one referenced row is deleted and
//! `ht cingest verify` must report it UNDEFINED and exit non-zero.

use std::path::Path;
use std::process::Command;

use client::Client;
use client::cluster::{ClusterClient, ClusterOptions};

fn ht() -> &'static str {
    env!("CARGO_BIN_EXE_ht")
}

/// Seconds `ht cingest run` runs for (`HT_CINGEST_SECONDS` overrides).
fn seconds() -> u64 {
    std::env::var("HT_CINGEST_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60)
}

/// The cluster `ht cingest run --keep-cluster` left running; stopped when dropped.
struct Cluster {
    dir: tempfile::TempDir,
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

fn cluster_file(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("cluster.json")).unwrap_or_default();
    serde_json::from_str(&text).unwrap_or(serde_json::Value::Null)
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let keep = std::env::temp_dir().join(format!("ht-cingest-logs-{}", std::process::id()));
            let _ = std::fs::create_dir_all(&keep);
            if let Ok(entries) = std::fs::read_dir(self.dir.path().join("logs")) {
                for e in entries.flatten() {
                    let _ = std::fs::copy(e.path(), keep.join(e.file_name()));
                }
            }
            eprintln!("logs kept in {}", keep.display());
        }
        let _ = Command::new(ht())
            .args(["stop", "--data-dir"])
            .arg(self.dir.path())
            .output();
        let file = cluster_file(self.dir.path());
        for p in file["processes"].as_array().into_iter().flatten() {
            let pid = p["pid"].as_u64().unwrap_or(0) as u32;
            if pid != 0 && alive(pid) {
                eprintln!("{} still running after ht stop; killing", p["name"]);
                // SAFETY: kills a process this test started.
                unsafe {
                    libc::kill(pid as i32, libc::SIGKILL);
                }
            }
        }
    }
}

impl Cluster {
    fn client(&self) -> ClusterClient {
        let creds = rpc::ClusterCredentials::load(self.dir.path(), "client").expect("client creds");
        let addrs = cluster_file(self.dir.path())["hyperspace"]
            .as_array()
            .expect("hyperspace list")
            .iter()
            .map(|p| {
                let s = p.as_str().expect("string");
                s.split_once('@').expect("id@addr").1.parse().expect("addr")
            })
            .collect();
        ClusterClient::connect(creds, ClusterOptions::new(addrs)).expect("connect")
    }
}

/// `name=N` from the last line.
fn count(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= in {line:?}"))
        .parse()
        .unwrap_or_else(|e| panic!("{name} in {line:?}: {e}"))
}

/// The CI version: the agitator kills the active master and the Hyperspace leader. Range
/// servers are not killed here: that finds two master bugs not fixed yet (bench/RESULTS.md
/// "Continuous ingest"), which would make CI fail now and then; `cingest_with_range_server_kills`
/// (ignored) runs them.
#[test]
fn cingest_run_with_the_agitator_then_verify_finds_a_deleted_row() {
    run_then_delete_a_row(&["--kill", "master,hyperspace"]);
}

/// With range-server kills too. Ignored until the master bugs it finds are fixed: a range
/// server holding METADATA killed while a move is logged stalls the master for good, and a kill
/// during a recovery can make two servers serve one range.
#[test]
#[ignore = "finds open master bugs (bench/RESULTS.md \"Continuous ingest\")"]
fn cingest_with_range_server_kills() {
    run_then_delete_a_row(&["--kill", "rangeserver,master,hyperspace"]);
}

fn run_then_delete_a_row(kill: &[&str]) {
    let cluster = Cluster {
        dir: tempfile::tempdir().expect("tempdir"),
    };
    let secs = seconds().to_string();
    let out = Command::new(ht())
        .args(["cingest", "run", "--data-dir"])
        .arg(cluster.dir.path())
        .args([
            "--seconds",
            &secs,
            "--agitate-every",
            "20",
            "--keep-cluster",
        ])
        .args(kill)
        .output()
        .expect("run ht cingest run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    println!("{stdout}");
    assert!(
        out.status.success(),
        "ht cingest run failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let last = stdout.lines().last().expect("a last line");
    assert!(last.starts_with("cingest: written="), "{last}");
    assert_eq!(count(last, "undefined"), 0, "{last}");
    let written = count(last, "written");
    assert!(written > 100_000, "only {written} cells written: {last}");
    assert!(count(last, "referenced") > written / 2, "{last}");
    assert!(count(last, "kills") >= 1, "{last}");

    // Delete one referenced row: verify must say UNDEFINED=1, name it, and exit non-zero.
    let client = cluster.client();
    let spec = common::ScanSpec {
        cell_limit: 1_000,
        ..Default::default()
    };
    let mut sc = client.scanner("/cingest", spec).expect("scanner");
    let mut prev = None;
    while let Some(c) = sc.next_cell().expect("scan") {
        let v = String::from_utf8(c.value).expect("utf-8 value");
        let p = v.split(':').nth(2).expect("client:count:prev:crc");
        if !p.is_empty() {
            prev = Some(p.to_string());
            break;
        }
    }
    drop(sc);
    let prev = prev.expect("a node pointing at another");
    let mut m = client.mutator("/cingest").expect("mutator");
    m.set(common::Mutation::delete(
        common::key::CellFlag::DeleteRow,
        prev.as_bytes(),
        0,
        Vec::new(),
        None,
    ))
    .expect("delete");
    m.flush().expect("flush");
    drop(m);
    let out = Command::new(ht())
        .args(["cingest", "verify", "--data-dir"])
        .arg(cluster.dir.path())
        .output()
        .expect("run ht cingest verify");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "verify after a lost row: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("UNDEFINED=1\n"), "{stdout}");
    assert!(
        stdout.contains(&format!("UNDEFINED row {prev}, pointed at by")),
        "{stdout}"
    );
}

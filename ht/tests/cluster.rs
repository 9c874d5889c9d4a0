//! The cluster as separate processes (`ht start`): Hyperspace replicas, masters and range
//! servers on loopback. The HQL golden scripts run against it as they do on the embedded
//! database; range servers and masters are killed with SIGKILL under load and every
//! acknowledged cell must stay readable exactly once.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::Client;
use client::cluster::{ClusterClient, ClusterOptions};

/// A cluster started by `ht start`; stopped (and anything left killed) when dropped.
struct LocalCluster {
    dir: tempfile::TempDir,
}

fn ht() -> &'static str {
    env!("CARGO_BIN_EXE_ht")
}

/// `text` without the terminal colour sequences (`ESC [ ... m`) the servers' logs carry.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[derive(serde::Deserialize)]
struct Proc {
    role: String,
    name: String,
    pid: u32,
}

#[derive(serde::Deserialize)]
struct ClusterFile {
    processes: Vec<Proc>,
}

impl LocalCluster {
    fn start(hyperspace: u64, masters: usize, rangeservers: usize) -> LocalCluster {
        Self::start_with(hyperspace, masters, rangeservers, &[])
    }

    /// With more `ht start` flags (`--dfs hdfs-like`, `--split-bytes N`).
    fn start_with(
        hyperspace: u64,
        masters: usize,
        rangeservers: usize,
        extra: &[&str],
    ) -> LocalCluster {
        // A port chosen free (bound and released) can be taken by a server of a test running
        // beside this one before its own server binds it: then a node answers with another
        // node's certificate. That start is stopped (on drop) and made again, at most twice.
        for attempt in 1.. {
            let dir = tempfile::tempdir().expect("tempdir");
            let out = Command::new(ht())
                .args(["start", "--data-dir"])
                .arg(dir.path())
                .args([
                    "--hyperspace",
                    &hyperspace.to_string(),
                    "--masters",
                    &masters.to_string(),
                    "--rangeservers",
                    &rangeservers.to_string(),
                    "--wait-secs",
                    "90",
                ])
                .args(extra)
                .output()
                .expect("run ht start");
            let cluster = LocalCluster { dir };
            if out.status.success() {
                return cluster;
            }
            let stderr = String::from_utf8_lossy(&out.stderr);
            if attempt < 3 && stderr.contains("certificate not valid for name") {
                eprintln!("ht start met a port taken by another test's server; again: {stderr}");
                continue;
            }
            panic!(
                "ht start failed: {}{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                stderr,
                cluster.logs()
            );
        }
        unreachable!("the loop returns or panics")
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn processes(&self) -> Vec<Proc> {
        let text = std::fs::read_to_string(self.path().join("cluster.json")).expect("cluster file");
        serde_json::from_str::<ClusterFile>(&text)
            .expect("cluster file parses")
            .processes
    }

    /// Kills a process with SIGKILL; returns its name.
    fn kill(&self, pred: impl Fn(&Proc) -> bool) -> String {
        let p = self
            .processes()
            .into_iter()
            .find(|p| pred(p) && alive(p.pid))
            .expect("a process to kill");
        // SAFETY: kills a process this test started.
        unsafe {
            libc::kill(p.pid as i32, libc::SIGKILL);
        }
        p.name
    }

    /// The name of the range-server process that registered as `location` (from its log).
    fn process_of_location(&self, location: &str) -> String {
        let said = format!("range server {location} serving on");
        self.processes()
            .into_iter()
            .filter(|p| p.role == "rangeserver")
            .find(|p| {
                std::fs::read_to_string(self.path().join("logs").join(format!("{}.log", p.name)))
                    .is_ok_and(|log| log.contains(&said))
            })
            .unwrap_or_else(|| panic!("no range server logged '{said}'\n{}", self.logs()))
            .name
    }

    /// Splits of METADATA that the range servers logged: none may happen, since clients and
    /// the master read METADATA as one range on the server `/ht/root` names.
    fn metadata_splits(&self) -> usize {
        let Ok(entries) = std::fs::read_dir(self.path().join("logs")) else {
            return 0;
        };
        entries
            .map(|e| std::fs::read_to_string(e.expect("entry").path()).unwrap_or_default())
            .map(|log| strip_ansi(&log).matches("range split table=1 ").count())
            .sum()
    }

    /// The Hyperspace replicas' addresses, from the cluster file.
    fn hyperspace_addrs(&self) -> Vec<std::net::SocketAddr> {
        let text = std::fs::read_to_string(self.path().join("cluster.json")).expect("cluster file");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        v["hyperspace"]
            .as_array()
            .expect("hyperspace list")
            .iter()
            .map(|p| {
                let s = p.as_str().expect("string");
                s.split_once('@').expect("id@addr").1.parse().expect("addr")
            })
            .collect()
    }

    fn client(&self) -> ClusterClient {
        self.client_with(|_| {})
    }

    /// A client with its options changed by `f`.
    fn client_with(&self, f: impl FnOnce(&mut ClusterOptions)) -> ClusterClient {
        let creds = rpc::ClusterCredentials::load(self.path(), "client").expect("client creds");
        let mut opts = ClusterOptions::new(self.hyperspace_addrs());
        f(&mut opts);
        ClusterClient::connect(creds, opts).expect("connect")
    }

    /// The tail of every process log, for failure messages.
    fn logs(&self) -> String {
        let mut out = String::new();
        let logs = self.path().join("logs");
        let Ok(entries) = std::fs::read_dir(&logs) else {
            return out;
        };
        let mut paths: Vec<PathBuf> = entries.map(|e| e.expect("entry").path()).collect();
        paths.sort();
        for p in paths {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out.push_str(&format!("== {}\n", p.display()));
            for l in &lines[lines.len().saturating_sub(15)..] {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Keep the logs of a failed run for whoever looks into it.
            let keep = std::env::temp_dir().join(format!("ht-cluster-logs-{}", std::process::id()));
            let _ = std::fs::create_dir_all(&keep);
            if let Ok(entries) = std::fs::read_dir(self.path().join("logs")) {
                for e in entries.flatten() {
                    let _ = std::fs::copy(e.path(), keep.join(e.file_name()));
                }
            }
            eprintln!("logs kept in {}", keep.display());
        }
        let _ = Command::new(ht())
            .args(["stop", "--data-dir"])
            .arg(self.path())
            .output();
        for p in self.processes() {
            if alive(p.pid) {
                eprintln!(
                    "{} ({}) still running after ht stop; killing",
                    p.name, p.role
                );
                // SAFETY: kills a process this test started.
                unsafe {
                    libc::kill(p.pid as i32, libc::SIGKILL);
                }
            }
        }
    }
}

/// Drops every table and namespace, so the next script starts from an empty database.
fn wipe(client: &dyn Client, ns: &str) {
    for e in client.listing(ns).expect("listing") {
        let path = if ns == "/" {
            format!("/{}", e.name)
        } else {
            format!("{ns}/{}", e.name)
        };
        if e.is_namespace {
            wipe(client, &path);
            client.drop_namespace(&path).expect("drop namespace");
        } else {
            client.drop_table(&path).expect("drop table");
        }
    }
}

#[test]
fn golden_scripts_on_a_cluster() {
    golden_on(&[]);
}

/// The range servers write through ht's own DFS, HDFS-like (pipelined replication).
#[test]
fn golden_scripts_on_a_cluster_over_hdfs_like() {
    golden_on(&["--dfs", "hdfs-like"]);
}

/// The range servers write through ht's own DFS, KFS-like (parallel replication).
#[test]
fn golden_scripts_on_a_cluster_over_kfs_like() {
    golden_on(&["--dfs", "kfs-like"]);
}

fn golden_on(extra: &[&str]) {
    let cluster = LocalCluster::start_with(1, 1, 2, extra);
    let client: Arc<dyn Client> = Arc::new(cluster.client());
    let mut failed = Vec::new();
    for (name, script) in hql::golden::scripts() {
        let text = std::fs::read_to_string(&script).expect("read script");
        let tmp = tempfile::tempdir().expect("tempdir");
        let actual = hql::golden::run_script(client.clone(), &text, tmp.path());
        if let Some(diff) = hql::golden::check(&name, &script, Some("cluster"), &actual) {
            eprintln!("{diff}");
            failed.push(name);
        }
        wipe(client.as_ref(), "/");
    }
    assert!(
        failed.is_empty(),
        "golden files differ on the cluster: {failed:?}\n{}",
        cluster.logs()
    );
}

#[test]
fn start_status_stop() {
    let cluster = LocalCluster::start(1, 1, 1);
    let out = Command::new(ht())
        .args(["status", "--data-dir"])
        .arg(cluster.path())
        .output()
        .expect("ht status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "ht status failed: {text}");
    assert!(text.contains("METADATA on rs1"), "{text}");
    assert!(text.contains("cells/s"), "{text}");
    assert!(text.contains("rs1"), "{text}");
    assert!(text.contains("live"), "{text}");
    let shell = Command::new(ht())
        .args(["shell", "--test-mode", "--cluster"])
        .arg(cluster.path())
        .args([
            "-e",
            "CREATE TABLE t (a); INSERT INTO t VALUES ('r', 'a', 'v'); COMPACT TABLE t; \
             WAIT FOR MAINTENANCE; BALANCE; STATUS; SELECT * FROM t;",
        ])
        .output()
        .expect("ht shell");
    let text = String::from_utf8_lossy(&shell.stdout);
    assert!(
        !text.contains("Error") && !text.contains("CRITICAL"),
        "{text}"
    );
    assert!(text.contains("mode\tcluster\n"), "{text}");
    assert!(text.contains("range_servers\t1\n"), "{text}");
    assert!(text.contains("root_location\trs1\n"), "{text}");
    assert!(text.ends_with("r\ta\tv\n"), "{text}");
    let pids: Vec<u32> = cluster.processes().iter().map(|p| p.pid).collect();
    assert_eq!(pids.len(), 3);
    let stopped = Command::new(ht())
        .args(["stop", "--data-dir"])
        .arg(cluster.path())
        .output()
        .expect("ht stop");
    assert!(stopped.status.success());
    // `ht stop` returns once they are gone (children of `ht start`, reaped by init).
    let start = Instant::now();
    while pids.iter().any(|p| alive(*p)) && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        pids.iter().all(|p| !alive(*p)),
        "processes left after ht stop"
    );
}

/// Cells the kill test loads (`HT_KILL_TEST_CELLS` overrides).
fn kill_test_cells() -> u64 {
    std::env::var("HT_KILL_TEST_CELLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

fn row(loader: u64, i: u64) -> Vec<u8> {
    format!("{i:08}-{loader}").into_bytes()
}

fn value(loader: u64, i: u64) -> Vec<u8> {
    format!("v{loader}:{i}:{}", i.wrapping_mul(2654435761) % 1000).into_bytes()
}

/// The issue's crash test: 3 Hyperspace replicas, a master and a standby, 3 range servers with
/// a small split size; 4 loaders write; a range server, then the active master, then the
/// Hyperspace leader are killed with SIGKILL during the load. Every acknowledged cell must be
/// readable exactly once afterwards, and DDL must work. The loaders' mutators send 16 KiB
/// buffers, up to 4 in flight, and flush every 8,000 cells (about 300 KB), so the kills land on
/// pipelined, ordered update streams.
#[test]
fn kill_rangeserver_master_and_hyperspace_leader_under_load() {
    kill_test(&[], kill_test_cells(), 4 << 20);
}

/// The kill test with the range servers writing through HDFS-like chunkfs (fewer cells: every
/// commit-log flush crosses a replication pipeline of processes).
#[test]
fn kill_test_over_hdfs_like() {
    kill_test(&["--dfs", "hdfs-like"], kill_test_cells() / 4, 1 << 20);
}

/// The kill test over KFS-like chunkfs (parallel replication).
#[test]
fn kill_test_over_kfs_like() {
    kill_test(&["--dfs", "kfs-like"], kill_test_cells() / 4, 1 << 20);
}

fn kill_test(extra: &[&str], total: u64, split_bytes: u64) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let loaders = 4u64;
    let per_loader = total / loaders;
    let split = split_bytes.to_string();
    let mut args = vec!["--split-bytes", split.as_str()];
    args.extend_from_slice(extra);
    let cluster = LocalCluster::start_with(3, 2, 3, &args);
    let admin = cluster.client();
    let mut schema = common::TableSchema::new(0, "");
    let fam = schema.add_family("v");
    schema.families[0].max_versions = 1;
    admin.create_table("/load", schema).expect("create table");

    let acked_total = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    let started = Instant::now();
    for t in 0..loaders {
        let client = cluster.client_with(|o| {
            o.mutator_buffer_bytes = 16 << 10;
            o.mutator_in_flight = 4;
        });
        let acked_total = acked_total.clone();
        let failures = failures.clone();
        handles.push(std::thread::spawn(move || {
            let mut m = client.mutator("/load").expect("mutator");
            // Rows below `acked` were acknowledged; rows in `unknown` may or may not be there.
            let mut acked = 0u64;
            let mut unknown = Vec::new();
            let mut pending_from = 0u64;
            for i in 0..per_loader {
                let cell = common::Mutation {
                    row: row(t, i),
                    family: fam,
                    qualifier: Vec::new(),
                    timestamp: Some(1_000 + i as i64),
                    flag: common::key::CellFlag::Insert,
                    value: value(t, i),
                };
                let flush = (i + 1) % 8_000 == 0 || i + 1 == per_loader;
                let r = m
                    .set(cell)
                    .and_then(|()| if flush { m.flush() } else { Ok(()) });
                match r {
                    Ok(()) if flush => {
                        acked_total.fetch_add(i + 1 - pending_from, Ordering::Relaxed);
                        acked = i + 1;
                        pending_from = i + 1;
                    }
                    Ok(()) => {}
                    Err(e) => {
                        eprintln!("loader {t}: write failed at {i}: {e}");
                        failures.fetch_add(1, Ordering::Relaxed);
                        unknown.push((pending_from, i + 1));
                        pending_from = i + 1;
                        m = client.mutator("/load").expect("mutator");
                    }
                }
            }
            (acked, unknown, client)
        }));
    }
    // The killer: a range server at 20%, the active master at 45%, the Hyperspace leader at 70%.
    let wait_for = |fraction: f64| {
        while (acked_total.load(Ordering::Relaxed) as f64) < fraction * total as f64 {
            if handles.iter().all(|h| h.is_finished()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_for(0.2);
    let killed_rs = cluster.kill(|p| p.role == "rangeserver");
    let rs_killed_at = Instant::now();
    eprintln!(
        "killed {killed_rs} at {} cells",
        acked_total.load(Ordering::Relaxed)
    );
    let recovered_in = loop {
        let st = admin.master_status().expect("master status");
        if st.recoveries >= 1 {
            break rs_killed_at.elapsed();
        }
        assert!(
            rs_killed_at.elapsed() < Duration::from_secs(60),
            "no recovery after 60 s\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("ranges of {killed_rs} served again after {recovered_in:?}");
    wait_for(0.45);
    let active = admin.master_status().expect("master status").pid;
    let killed_master = cluster.kill(|p| p.role == "master" && p.pid == active);
    let master_killed_at = Instant::now();
    let takeover_in = loop {
        match admin.master_status() {
            Ok(st) if st.pid != active => break master_killed_at.elapsed(),
            _ => {}
        }
        assert!(
            master_killed_at.elapsed() < Duration::from_secs(60),
            "no standby took over\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!("{killed_master} killed; standby active after {takeover_in:?}");
    wait_for(0.7);
    let leader = admin
        .hyperspace_status()
        .expect("hyperspace status")
        .leader_id;
    let killed_hs = cluster.kill(|p| p.name == format!("hyperspace-{leader}"));
    eprintln!("killed the hyperspace leader {killed_hs}");
    let mut results = Vec::new();
    for h in handles {
        results.push(h.join().expect("loader"));
    }
    done.store(true, Ordering::Relaxed);
    let elapsed = started.elapsed();
    eprintln!(
        "loaded {} cells in {elapsed:?} ({:.0} cells/s) with {} failed writes",
        acked_total.load(Ordering::Relaxed),
        acked_total.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64(),
        failures.load(Ordering::Relaxed)
    );
    assert_eq!(cluster.metadata_splits(), 0, "METADATA split");
    assert_eq!(
        failures.load(Ordering::Relaxed),
        0,
        "writes failed for good"
    );

    // Every acknowledged cell exactly once, with its value; nothing else but unknown ones.
    let mut scanner = admin
        .scanner("/load", common::ScanSpec::default())
        .expect("scanner");
    let mut seen = vec![vec![false; per_loader as usize]; loaders as usize];
    let mut count = 0u64;
    while let Some(c) = scanner.next_cell().expect("scan") {
        count += 1;
        let r = String::from_utf8(c.key.row.clone()).expect("utf-8 row");
        let (i, t) = r.split_once('-').expect("row shape");
        let (i, t): (u64, u64) = (i.parse().expect("i"), t.parse().expect("t"));
        assert_eq!(c.value, value(t, i), "wrong value in row {r}");
        assert!(!seen[t as usize][i as usize], "row {r} returned twice");
        seen[t as usize][i as usize] = true;
    }
    for (t, (acked, unknown, _)) in results.iter().enumerate() {
        for i in 0..*acked {
            let in_unknown = unknown.iter().any(|(a, b)| (*a..*b).contains(&i));
            assert!(
                seen[t][i as usize] || in_unknown,
                "acknowledged row {} is missing",
                String::from_utf8_lossy(&row(t as u64, i))
            );
        }
    }
    assert_eq!(count, total - total % loaders, "cells counted");
    let st = admin.master_status().expect("status");
    let locations = admin.table_locations("/load").expect("locations");
    eprintln!(
        "{} ranges, moves {}, recoveries {}, servers {:?}",
        locations.len(),
        st.moves,
        st.recoveries,
        st.servers
    );
    assert!(
        locations.len() >= 2,
        "the table did not split: {locations:?}"
    );
    let servers: std::collections::BTreeSet<_> =
        locations.iter().map(|l| l.location.clone()).collect();
    assert!(servers.len() >= 2, "ranges on one server only: {servers:?}");
    assert!(st.moves > 0, "no range moved");
    // DDL still works.
    let mut s = common::TableSchema::new(0, "");
    s.add_family("a");
    admin
        .create_table("/after", s)
        .expect("create after the kills");
    one_cell_round_trip(&admin, "/after");
    admin.drop_table("/after").expect("drop");
    assert!(
        recovered_in < Duration::from_secs(30),
        "recovery took {recovered_in:?}"
    );
    assert!(
        takeover_in < Duration::from_secs(10),
        "takeover took {takeover_in:?}"
    );
}

/// One mutator with several buffers in flight keeps the order of its cells while the table
/// splits and its ranges move between servers: every key's versions (server-assigned
/// timestamps) come back newest first in the order they were set, and a row deleted mid-way
/// holds only what was set after the delete.
#[test]
fn a_mutator_keeps_its_order_through_splits_and_moves() {
    let cluster = LocalCluster::start_with(1, 1, 3, &["--split-bytes", "262144"]);
    // Small buffers, many in flight: the servers get several batches of one key at once.
    let client = cluster.client_with(|o| {
        o.mutator_buffer_bytes = 16 << 10;
        o.mutator_in_flight = 8;
    });
    let mut schema = common::TableSchema::new(0, "");
    let fam = schema.add_family("v");
    client.create_table("/order", schema).expect("create table");
    const KEYS: u64 = 200;
    const MIN_ROUNDS: u64 = 12;
    const DELETE_ROUND: u64 = 5;
    let key = |k: u64| format!("key{:06}", k.wrapping_mul(7919) % KEYS).into_bytes();
    let value = |round: u64, k: u64| format!("{round:03}:{k}:{}", "x".repeat(200)).into_bytes();
    let mut m = client.mutator("/order").expect("mutator");
    // Rounds over every key, never flushed in between, until the table has split and ranges
    // have moved while buffers were in flight.
    let started = Instant::now();
    let mut rounds = 0;
    loop {
        for k in 0..KEYS {
            if rounds == DELETE_ROUND && k % 10 == 0 {
                m.set(common::Mutation::delete(
                    common::key::CellFlag::DeleteRow,
                    key(k),
                    0,
                    Vec::new(),
                    None,
                ))
                .expect("delete");
            }
            m.set(common::Mutation::insert(key(k), fam, "", value(rounds, k)))
                .expect("set");
        }
        rounds += 1;
        let ranges = client.table_locations("/order").expect("locations").len();
        let moves = client.master_status().expect("status").moves;
        if rounds >= MIN_ROUNDS && ranges >= 4 && moves >= 2 {
            eprintln!("{rounds} rounds, {ranges} ranges, {moves} moves");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "after {rounds} rounds: {ranges} ranges, {moves} moves\n{}",
            cluster.logs()
        );
    }
    m.flush().expect("flush");

    let mut versions: std::collections::BTreeMap<Vec<u8>, Vec<u64>> = Default::default();
    let mut scanner = client
        .scanner("/order", common::ScanSpec::default())
        .expect("scanner");
    while let Some(c) = scanner.next_cell().expect("scan") {
        let v = String::from_utf8(c.value).expect("utf-8");
        let (round, rest) = v.split_once(':').expect("value shape");
        let k: u64 = rest
            .split_once(':')
            .expect("value shape")
            .0
            .parse()
            .expect("k");
        assert_eq!(c.key.row, key(k), "value of another key");
        versions
            .entry(c.key.row)
            .or_default()
            .push(round.parse().expect("round"));
    }
    assert_eq!(versions.len() as u64, KEYS, "keys");
    for k in 0..KEYS {
        let first = if k % 10 == 0 { DELETE_ROUND } else { 0 };
        let want: Vec<u64> = (first..rounds).rev().collect();
        let got = &versions[&key(k)];
        if *got != want {
            let at = got.iter().zip(&want).take_while(|(a, b)| a == b).count();
            panic!(
                "versions of {} newest first: {} of them, then {:?}; want {} of them, then {:?}",
                String::from_utf8_lossy(&key(k)),
                got.len(),
                &got[at..got.len().min(at + 5)],
                want.len(),
                &want[at..want.len().min(at + 5)]
            );
        }
    }
}

/// The balancer evens load, not only counts: two busy tables that share a range server end
/// on different servers (the busy one's hot range moves, a cold one comes back), counts even.
#[test]
fn the_balancer_spreads_load() {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, Ordering};
    let cluster = LocalCluster::start_with(1, 1, 2, &[]);
    let client = cluster.client();
    let tables: Vec<String> = (0..4).map(|t| format!("/t{t}")).collect();
    for t in &tables {
        let mut schema = common::TableSchema::new(0, "");
        schema.add_family("v");
        client.create_table(t, schema).expect("create table");
    }
    let placement = |client: &ClusterClient| -> BTreeMap<String, String> {
        tables
            .iter()
            .map(|t| {
                let l = client.table_locations(t).expect("locations");
                assert_eq!(l.len(), 1, "{t} split");
                (t.clone(), l[0].location.clone())
            })
            .collect()
    };
    let per_server = |p: &BTreeMap<String, String>| -> BTreeMap<String, Vec<String>> {
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (t, s) in p {
            m.entry(s.clone()).or_default().push(t.clone());
        }
        m
    };
    // Counts first: two tables on each server.
    let started = Instant::now();
    let before = loop {
        let p = placement(&client);
        let m = per_server(&p);
        if m.len() == 2 && m.values().all(|v| v.len() == 2) {
            break m;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "counts never even: {m:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let hot: Vec<String> = before.values().next().expect("a server").clone();
    eprintln!("before: {before:?}; writing to {hot:?}");
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = hot
        .iter()
        .map(|t| {
            let (client, t, stop) = (cluster.client(), t.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut m = client.mutator(&t).expect("mutator");
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..2_000 {
                        m.set(common::Mutation::insert(
                            format!("{:08}", i % 50_000),
                            1,
                            "",
                            "v",
                        ))
                        .expect("set");
                        i += 1;
                    }
                    m.flush().expect("flush");
                }
                i
            })
        })
        .collect();
    let started = Instant::now();
    let after = loop {
        let m = per_server(&placement(&client));
        let split = hot.iter().map(|t| {
            m.iter()
                .find(|(_, v)| v.contains(t))
                .map(|(s, _)| s.clone())
        });
        let servers: std::collections::BTreeSet<_> = split.collect();
        if servers.len() == 2 && m.values().all(|v| v.len() == 2) {
            break m;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "load never spread: {m:?}\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    stop.store(true, Ordering::Relaxed);
    let written: Vec<u64> = writers
        .into_iter()
        .map(|w| w.join().expect("writer"))
        .collect();
    eprintln!(
        "after {:?}: {after:?}; cells written {written:?}",
        started.elapsed()
    );
    let st = client.master_status().expect("status");
    assert!(
        st.moves >= 2,
        "a load move and a count move: {} moves",
        st.moves
    );
}

/// Range servers report their splits (and their registration) to the master at once: with the
/// master's own poll set to a minute, the cluster still starts in seconds and a split reaches
/// METADATA, and so the clients, within seconds.
#[test]
fn splits_reach_metadata_without_waiting_for_the_masters_poll() {
    let started = Instant::now();
    let cluster = LocalCluster::start_with(
        1,
        1,
        1,
        &["--split-bytes", "262144", "--master-poll-ms", "60000"],
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "start took {:?}",
        started.elapsed()
    );
    let client = cluster.client();
    let mut schema = common::TableSchema::new(0, "");
    let fam = schema.add_family("v");
    client.create_table("/grow", schema).expect("create table");
    let mut m = client.mutator("/grow").expect("mutator");
    for i in 0..20_000u64 {
        m.set(common::Mutation::insert(
            format!("row{i:08}"),
            fam,
            "",
            "x".repeat(100),
        ))
        .expect("set");
    }
    m.flush().expect("flush");
    let loaded = Instant::now();
    loop {
        let ranges = client.table_locations("/grow").expect("locations").len();
        if ranges >= 2 {
            eprintln!(
                "{ranges} ranges in METADATA {:?} after the load",
                loaded.elapsed()
            );
            break;
        }
        assert!(
            loaded.elapsed() < Duration::from_secs(20),
            "no split in METADATA 20 s after the load\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A master killed after logging an operation: the standby takes over and finishes it.
/// A scan whose range server dies under it carries on: the client resumes the broken-off part
/// at the row of the last cell it judged once the range is recovered elsewhere, passing over
/// the cells it already had, versions included; every cell comes exactly once, in order.
#[test]
fn a_scan_carries_on_when_its_range_server_dies() {
    let cluster = LocalCluster::start(1, 1, 2);
    let client = cluster.client();
    let mut schema = common::TableSchema::new(0, "");
    let fam = schema.add_family("v");
    client.create_table("/scan", schema).expect("create table");
    // 40,000 rows of 2 qualifiers x 2 versions, 100-byte values: about 19 MB, far more than a
    // scan holds between the server and its reader.
    let (rows, qualifiers, versions) = (40_000u64, 2u64, 2i64);
    let value = |r: u64, q: u64, v: i64| format!("{r:08}.{q}.{v}:{}", "x".repeat(84)).into_bytes();
    let mut m = client.mutator("/scan").expect("mutator");
    for r in 0..rows {
        for q in 0..qualifiers {
            for v in 0..versions {
                m.set(common::Mutation {
                    row: format!("{r:08}").into_bytes(),
                    family: fam,
                    qualifier: format!("q{q}").into_bytes(),
                    timestamp: Some(1_000 + v),
                    flag: common::key::CellFlag::Insert,
                    value: value(r, q, v),
                })
                .expect("set");
            }
        }
    }
    m.flush().expect("flush");
    drop(m);
    // The cells in scan order: rows, qualifiers, newest version first.
    let mut expected = (0..rows).flat_map(|r| {
        (0..qualifiers).flat_map(move |q| (0..versions).rev().map(move |v| (r, q, v)))
    });
    let mut scanner = client
        .scanner("/scan", common::ScanSpec::default())
        .expect("scanner");
    let mut read = 0u64;
    let mut check = |c: common::Cell, read: u64| {
        let (r, q, v) = expected.next().expect("no more cells than written");
        assert_eq!(
            (
                c.key.row.as_slice(),
                c.key.qualifier.as_slice(),
                c.key.timestamp
            ),
            (
                format!("{r:08}").as_bytes(),
                format!("q{q}").as_bytes(),
                1_000 + v
            ),
            "cell {read}"
        );
        assert_eq!(c.value, value(r, q, v), "cell {read}");
    };
    for _ in 0..5_003 {
        check(scanner.next_cell().expect("scan").expect("a cell"), read);
        read += 1;
    }
    let location = client.table_locations("/scan").expect("locations")[0]
        .location
        .clone();
    let name = cluster.process_of_location(&location);
    let killed = cluster.kill(|p| p.name == name);
    let killed_at = Instant::now();
    eprintln!("killed {killed} ({location}) after {read} cells");
    while let Some(c) = scanner.next_cell().expect("the scan carries on") {
        check(c, read);
        read += 1;
    }
    assert!(expected.next().is_none(), "cells missing after {read}");
    let st = client.master_status().expect("master status");
    assert!(
        st.recoveries >= 1,
        "the scan did not outlive a recovery: {st:?}"
    );
    eprintln!(
        "read all {read} cells; the scan finished {:?} after the kill",
        killed_at.elapsed()
    );
}

/// DDL that meets a range server which stopped answering for a while (SIGSTOP, then SIGCONT
/// 6 s later: its connections time out, so the master's steps fail as unavailable) is not
/// refused: the operation is logged, and the request is answered once it finishes. Meanwhile
/// the name counts as taken.
#[test]
fn ddl_waits_out_a_stalled_range_server() {
    let cluster = LocalCluster::start(1, 1, 2);
    let client = cluster.client();
    let st = client.master_status().expect("master status");
    let name = cluster.process_of_location(&st.root_location);
    let pid = cluster
        .processes()
        .into_iter()
        .find(|p| p.name == name)
        .expect("the process")
        .pid as i32;
    // SAFETY: signals a process this test started.
    unsafe {
        libc::kill(pid, libc::SIGSTOP);
    }
    let resume = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(6));
        // SAFETY: as above.
        unsafe {
            libc::kill(pid, libc::SIGCONT);
        }
    });
    // A second client asks for the same name while the first one's operation is logged but
    // not finished: the name is taken.
    let second = {
        let client = cluster.client();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(1));
            let mut schema = common::TableSchema::new(0, "");
            schema.add_family("w");
            client.create_table("/after_stall", schema)
        })
    };
    let started = Instant::now();
    let mut schema = common::TableSchema::new(0, "");
    schema.add_family("v");
    let created = client.create_table("/after_stall", schema);
    let took = started.elapsed();
    resume.join().expect("resume");
    match second.join().expect("second client") {
        Err(client::ClientError::TableExists(p)) => assert_eq!(p, "/after_stall"),
        other => panic!("a second create of a name being created: {other:?}"),
    }
    let created = created.unwrap_or_else(|e| {
        panic!(
            "create table while METADATA's server ({name}) stalled: {e}\n{}",
            cluster.logs()
        )
    });
    eprintln!("create table answered after {took:?} (METADATA's server {name} stopped for 6 s)");
    assert_eq!(created.name, "/after_stall");
    one_cell_round_trip(&client, "/after_stall");
}

/// Writes one cell into `table` (its first family) and reads it back.
fn one_cell_round_trip(client: &ClusterClient, table: &str) {
    let mut m = client.mutator(table).expect("mutator");
    m.set(common::Mutation::insert("r", 1, "", "v"))
        .expect("set");
    m.flush().expect("flush");
    let mut sc = client
        .scanner(table, common::ScanSpec::default())
        .expect("scanner");
    let cell = sc.next_cell().expect("scan").expect("a cell");
    assert_eq!(
        (cell.key.row.as_slice(), cell.value.as_slice()),
        (&b"r"[..], &b"v"[..])
    );
}

/// A master runs logged recoveries even behind an operation that cannot finish yet. Here the
/// operation is a move whose range record names a cell store that does not exist (the live
/// server refuses to adopt it, so the move never finishes), logged before the recovery of a
/// range server killed with SIGKILL. Before, the master stopped at the first unfinished
/// operation, so the dead server's ranges stayed offline for good (a restarted cluster whose
/// move waited for the METADATA range of the server that died with it never became ready).
///
/// The recovery is logged while the killed server still holds its Hyperspace lock, so the
/// master first sees it as live: it must wait for the lock to go rather than plan the ranges
/// onto the dead server (and then count them as "recovered with it": /kept stayed on the dead
/// server, 3 runs in 4). The move's range ends where /kept's only range ends but starts at
/// "zz": retried after the recovery, it must not take /kept's range for its own adopted one
/// (that wrote start row "zz" over /kept's METADATA row).
#[test]
fn logged_recovery_runs_behind_an_operation_that_cannot_finish() {
    use hyperspace::command::flags;
    use master::ops::{Operation, op_node};
    use proto::layout::{OP_ATTR, OPS};
    use rangeserver::meta::{GroupRecord, RangeRecord};
    let cluster = LocalCluster::start(1, 1, 2);
    let admin = cluster.client();
    let mut schema = common::TableSchema::new(0, "");
    schema.add_family("a");
    let table_id = admin.create_table("/kept", schema).expect("create").id;
    one_cell_round_trip(&admin, "/kept");
    let dead = admin.table_locations("/kept").expect("locations")[0]
        .location
        .clone();
    let st = admin.master_status().expect("status");
    let live = st
        .servers
        .iter()
        .find(|s| s.location != dead)
        .expect("a second server")
        .location
        .clone();
    let name = cluster.process_of_location(&dead);
    let killed = cluster.kill(|p| p.name == name);
    let bogus = RangeRecord {
        id: 1 << 40,
        table_id,
        start_row: Some(b"zz".to_vec()),
        end_row: None,
        groups: vec![GroupRecord {
            name: "default".into(),
            stores: vec!["no/such/dir/cs0".into()],
            flushed_revision: 0,
            next_store: 1,
        }],
    };
    let ops = [
        Operation::Move {
            table_id,
            start_row: Some(b"zz".to_vec()),
            end_row: None,
            from: dead.clone(),
            to: live.clone(),
            record_json: Some(serde_json::to_string(&bogus).expect("record json")),
        },
        Operation::Recover {
            location: dead.clone(),
            plan: Vec::new(),
        },
    ];
    // Logged right after the kill, well before the server's Hyperspace session expires and
    // the master would log a recovery of its own.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let creds = rpc::ClusterCredentials::load(cluster.path(), "client").expect("creds");
    rt.block_on(async {
        let (hs, _events) = hyperspace::client::Hyperspace::connect(
            cluster.hyperspace_addrs(),
            creds,
            hyperspace::client::ClientOptions::default(),
        )
        .await
        .expect("session");
        for op in &ops {
            let seq = hs.attr_incr(OPS, "next_op", 1).await.expect("seq") as u64;
            let node = op_node(seq);
            let h = hs
                .open(&node, flags::READ | flags::WRITE | flags::CREATE, 0)
                .await
                .expect("create op");
            hs.close(h).await.expect("close");
            hs.attr_set(node.as_str(), OP_ATTR, op.to_json())
                .await
                .expect("log op");
        }
        hs.close_session().await.expect("close session");
    });
    let killed_at = Instant::now();
    eprintln!("{killed} ({dead}) killed; a blocked move and its recovery logged");
    loop {
        let st = admin.master_status().expect("status");
        if st.recoveries >= 1 {
            eprintln!(
                "recovered after {:?}: {:?}",
                killed_at.elapsed(),
                st.operations
            );
            // The move is still there, retried, and blocks nothing.
            assert_eq!(st.operations.len(), 1, "{:?}", st.operations);
            assert!(st.operations[0].starts_with("move"), "{:?}", st.operations);
            break;
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(60),
            "the recovery logged behind a blocked move never ran: {st:?}\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut sc = admin
        .scanner("/kept", common::ScanSpec::default())
        .expect("scanner");
    let cell = sc
        .next_cell()
        .expect("scan after recovery")
        .expect("a cell");
    assert_eq!(
        (cell.key.row.as_slice(), cell.value.as_slice()),
        (&b"r"[..], &b"v"[..])
    );
    // The move is retried every half second: after several retries it is still pending and
    // /kept's METADATA row is still the recovered range, whole, on the live server.
    std::thread::sleep(Duration::from_secs(3));
    let st = admin.master_status().expect("status");
    assert_eq!(st.operations.len(), 1, "{:?}", st.operations);
    let locations = admin.table_locations("/kept").expect("locations");
    assert_eq!(locations.len(), 1, "{locations:?}");
    assert_eq!(
        (&locations[0].start_row, &locations[0].end_row),
        (&None, &None),
        "{locations:?}"
    );
    assert_eq!(locations[0].location, live, "{locations:?}");
    one_cell_round_trip(&admin, "/kept");
}

#[test]
fn standby_master_finishes_what_the_dead_one_logged() {
    use hyperspace::command::flags;
    use master::ops::{Operation, op_node};
    use proto::layout::{HT, NEXT_TABLE_ID, OP_ATTR, OPS};
    let cluster = LocalCluster::start(1, 2, 1);
    let admin = cluster.client();
    let active = admin.master_status().expect("status").pid;
    let killed = cluster.kill(|p| p.role == "master" && p.pid == active);
    let killed_at = Instant::now();
    // What the dead master would have left: logged table creations, no step of them done.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let creds = rpc::ClusterCredentials::load(cluster.path(), "client").expect("creds");
    let addrs = cluster.hyperspace_addrs();
    rt.block_on(async {
        let (hs, _events) = hyperspace::client::Hyperspace::connect(
            addrs,
            creds,
            hyperspace::client::ClientOptions::default(),
        )
        .await
        .expect("session");
        // One plain, one pre-split.
        for (path, splits) in [("/left", Vec::new()), ("/left_split", vec![b"m".to_vec()])] {
            let id = hs.attr_incr(HT, NEXT_TABLE_ID, 1).await.expect("id") as u32;
            let mut schema = common::TableSchema::new(id, path);
            schema.add_family("a");
            let seq = hs.attr_incr(OPS, "next_op", 1).await.expect("seq") as u64;
            let node = op_node(seq);
            let h = hs
                .open(&node, flags::READ | flags::WRITE | flags::CREATE, 0)
                .await
                .expect("create op");
            hs.close(h).await.expect("close");
            let op = Operation::CreateTable {
                path: path.into(),
                schema,
                location: None,
                splits,
                locations: Vec::new(),
            };
            hs.attr_set(node.as_str(), OP_ATTR, op.to_json())
                .await
                .expect("log op");
        }
        hs.close_session().await.expect("close session");
    });
    let takeover = loop {
        if let Ok(st) = admin.master_status()
            && st.pid != active
        {
            break killed_at.elapsed();
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(30),
            "no takeover\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!("{killed} killed; the standby took over in {takeover:?}");
    assert!(
        takeover < Duration::from_secs(10),
        "takeover took {takeover:?}"
    );
    while !admin.table_exists("/left").expect("exists") {
        assert!(
            killed_at.elapsed() < Duration::from_secs(30),
            "the logged creation was not finished\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut m = admin.mutator("/left").expect("mutator");
    m.set(common::Mutation::insert("r", 1, "", "v"))
        .expect("set");
    m.flush().expect("flush");
    let mut sc = admin
        .scanner("/left", common::ScanSpec::default())
        .expect("scanner");
    let c = sc.next_cell().expect("next").expect("a cell");
    assert_eq!(c.value, b"v");
    while !admin.table_exists("/left_split").expect("exists") {
        assert!(
            killed_at.elapsed() < Duration::from_secs(30),
            "the logged pre-split creation was not finished\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let ranges = admin.table_ranges("/left_split").expect("ranges");
    let ends: Vec<Option<&[u8]>> = ranges.iter().map(|r| r.end_row.as_deref()).collect();
    assert_eq!(ends, vec![Some(&b"m"[..]), None]);
    assert_eq!(ranges[1].start_row.as_deref(), Some(&b"m"[..]));
    let mut m = admin.mutator("/left_split").expect("mutator");
    for row in ["a", "z"] {
        m.set(common::Mutation::insert(row, 1, "", row))
            .expect("set");
    }
    m.flush().expect("flush");
    let mut sc = admin
        .scanner("/left_split", common::ScanSpec::default())
        .expect("scanner");
    let mut rows = Vec::new();
    while let Some(c) = sc.next_cell().expect("next") {
        rows.push(c.key.row);
    }
    assert_eq!(rows, vec![b"a".to_vec(), b"z".to_vec()]);
    assert!(admin.master_status().expect("status").operations.is_empty());
}

/// Index maintenance survives a range-server kill like any write (issue 17): a loader writes an
/// indexed table through the indexing mutator (HQL INSERT's and LOAD DATA's) while a range
/// server is killed with SIGKILL. Entries are made durable before their primary cells, so every
/// primary cell that made it, acknowledged or not, has its value and qualifier entries, every
/// acknowledged row is there, and index queries return exactly what scans return.
#[test]
fn index_entries_survive_a_rangeserver_kill() {
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicU64, Ordering};
    const ROWS: u64 = 30_000;
    const VALUES: u64 = 40;
    let cluster = LocalCluster::start_with(1, 1, 3, &["--split-bytes", "150000"]);
    let client: Arc<dyn Client> = Arc::new(cluster.client());
    let hql = |stmt: &str| -> String {
        let mut ex = hql::exec::Executor::new(client.clone());
        let s = hql::parse_statement(stmt).expect("statement parses");
        let mut out = Vec::new();
        ex.execute(&s, &mut out)
            .unwrap_or_else(|e| panic!("{stmt}: {e}\n{}", cluster.logs()));
        String::from_utf8(out).expect("utf-8 output")
    };
    hql("CREATE TABLE t (a, b, INDEX a, QUALIFIER INDEX b)");
    let schema = client.table_schema("/t").expect("schema");
    let fam = |n: &str| schema.family(n).expect("family").id;
    let (fa, fb) = (fam("a"), fam("b"));
    let row = |i: u64| format!("row{:08}", (i * 7_919) % ROWS).into_bytes();
    let value = |i: u64| format!("v{:03}", i % VALUES).into_bytes();
    let qualifier = |i: u64| format!("q{:02}", i % 13).into_bytes();

    let acked = Arc::new(AtomicU64::new(0));
    let loader = {
        let client = client.clone();
        let acked = acked.clone();
        std::thread::spawn(move || {
            let mut m = client::index::mutator(client.as_ref(), None, "/t").expect("mutator");
            let (mut flushed_to, mut failures) = (0u64, 0u64);
            let mut lost = Vec::new();
            for i in 0..ROWS {
                let r = m
                    .set(common::Mutation::insert(row(i), fa, "", value(i)))
                    .and_then(|()| m.set(common::Mutation::insert(row(i), fb, qualifier(i), "x")))
                    .and_then(|()| {
                        if (i + 1) % 500 == 0 || i + 1 == ROWS {
                            m.flush()
                        } else {
                            Ok(())
                        }
                    });
                match r {
                    Ok(()) if (i + 1) % 500 == 0 || i + 1 == ROWS => {
                        flushed_to = i + 1;
                        acked.store(flushed_to, Ordering::Relaxed);
                    }
                    Ok(()) => {}
                    Err(e) => {
                        eprintln!("write failed at {i}: {e}");
                        failures += 1;
                        lost.push(flushed_to..i + 1);
                        flushed_to = i + 1;
                        if failures == 3 {
                            // Each failure is a 90 s retry budget spent: the test fails anyway.
                            break;
                        }
                        m = client::index::mutator(client.as_ref(), None, "/t").expect("mutator");
                    }
                }
            }
            (failures, lost)
        })
    };
    while acked.load(Ordering::Relaxed) < ROWS * 2 / 5 && !loader.is_finished() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let killed = cluster.kill(|p| p.role == "rangeserver");
    eprintln!("killed {killed} at {} rows", acked.load(Ordering::Relaxed));
    let (failures, lost) = loader.join().expect("loader");
    assert_eq!(cluster.metadata_splits(), 0, "METADATA split");
    assert_eq!(failures, 0, "writes failed for good");
    assert!(lost.is_empty());

    // Every row is there with both cells, and each has its entries.
    let mut cells = client
        .scanner("/t", common::ScanSpec::default())
        .expect("scanner");
    let (mut values, mut qualifiers) = (BTreeSet::new(), BTreeSet::new());
    let mut rows = BTreeSet::new();
    while let Some(c) = cells.next_cell().expect("scan t") {
        let k = &c.key;
        rows.insert(k.row.clone());
        if k.family == fa {
            values.insert(client::index::value_entry(
                fa,
                &c.value,
                &k.qualifier,
                &k.row,
            ));
        } else {
            qualifiers.insert(client::index::qualifier_entry(fb, &k.qualifier, &k.row));
        }
    }
    assert_eq!(rows.len() as u64, ROWS, "rows in t");
    assert_eq!((values.len() as u64, qualifiers.len() as u64), (ROWS, ROWS));
    for (index, want) in [("/^t", &values), ("/^^t", &qualifiers)] {
        let mut sc = client
            .scanner(index, common::ScanSpec::default())
            .expect("index scanner");
        let mut have = BTreeSet::new();
        while let Some(c) = sc.next_cell().expect("scan index") {
            have.insert(c.key.row);
        }
        let missing: Vec<_> = want.difference(&have).take(3).collect();
        assert!(
            missing.is_empty(),
            "{index} lacks entries, e.g. {missing:?}"
        );
    }
    // Index queries answer as scans do (REGEXP is never answered by an index).
    for v in [0, 17, VALUES - 1] {
        let by_index = hql(&format!("SELECT * FROM t WHERE a = 'v{v:03}'"));
        let by_scan = hql(&format!("SELECT * FROM t WHERE a =~ /^v{v:03}$/"));
        // Two cells (a and b) a row.
        assert_eq!(by_index.lines().count() as u64, 2 * ROWS / VALUES);
        assert_eq!(by_index, by_scan, "value v{v:03}");
    }
    let by_index = hql("SELECT b FROM t WHERE EXISTS(b:q05)");
    let want = (0..ROWS).filter(|i| i % 13 == 5).count();
    assert_eq!(by_index.lines().count(), want, "rows with b:q05");
}

/// Cell-store files under `dir` (recursively), by path relative to the shared file system's
/// root (`/servers/rs1/tables/...`).
fn store_files(fs_root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            store_files(fs_root, &p, out);
        } else {
            let rel = p.strip_prefix(fs_root).expect("under the root");
            out.push(format!("/{}", rel.display()));
        }
    }
}

/// Every cell-store file on the shared file system: `<fs>/servers/<location>/tables/...`.
fn all_store_files(fs_root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(servers) = std::fs::read_dir(fs_root.join("servers")) {
        for s in servers.flatten() {
            store_files(fs_root, &s.path().join("tables"), &mut out);
        }
    }
    out.sort();
    out
}

/// The master's garbage collection of stores shared across servers: ranges split and move
/// (their stores exported by the server they left), a range server dies and its ranges are
/// recovered (its root retired), everything is major-compacted, and then every cell-store file
/// left on the shared file system is one a range uses: the exported stores are removed by
/// their exporters, the retired root is removed whole, and every cell is still read.
#[test]
fn garbage_collection_removes_shared_stores_no_server_uses() {
    let cluster = LocalCluster::start_with(
        1,
        1,
        3,
        &["--split-bytes", "262144", "--master-gc-ms", "300"],
    );
    let fs_root = cluster.path().join("fs");
    let client = cluster.client_with(|o| o.mutator_buffer_bytes = 64 << 10);
    let mut schema = common::TableSchema::new(0, "");
    let fam = schema.add_family("v");
    client.create_table("/gc", schema).expect("create table");
    let rows = 4_000u64;
    let row = |i: u64| format!("row{:08}", i.wrapping_mul(7919) % rows).into_bytes();
    let mut m = client.mutator("/gc").expect("mutator");
    let started = Instant::now();
    let mut written = 0;
    // Write until the table split and the balancer moved ranges (stores exported).
    loop {
        for _ in 0..500 {
            m.set(common::Mutation::insert(
                row(written),
                fam,
                "",
                format!("{written}:{}", "v".repeat(400)).into_bytes(),
            ))
            .expect("set");
            written += 1;
        }
        m.flush().expect("flush");
        let moves = client.master_status().expect("status").moves;
        if written >= rows && moves >= 2 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{written} cells written, {moves} moves\n{}",
            cluster.logs()
        );
    }
    // Stores on disk under every server's root now; the range server with the most of them
    // dies (its recovered ranges read them: its root must stay until they are compacted).
    client
        .compact(None, common::CompactionKind::Minor)
        .expect("minor compaction");
    let mut per_root: std::collections::BTreeMap<String, usize> = Default::default();
    for f in all_store_files(&fs_root) {
        let owner = f
            .split('/')
            .nth(2)
            .expect("/servers/<location>/...")
            .to_string();
        *per_root.entry(owner).or_default() += 1;
    }
    let (victim, _) = per_root
        .iter()
        .max_by_key(|(l, n)| (**n, (*l).clone()))
        .expect("stores under some root");
    let process = cluster.process_of_location(victim);
    // Read before the kill: the recovery may be over by the time a status call after it returns.
    let before = client.master_status().expect("status");
    let killed = cluster.kill(|p| p.name == process);
    let recovered = loop {
        let st = client.master_status().expect("status");
        if st.recoveries > before.recoveries && st.operations.is_empty() {
            break st;
        }
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "{killed} not recovered: {st:?}\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let live: Vec<String> = recovered
        .servers
        .iter()
        .filter(|s| s.live)
        .map(|s| s.location.clone())
        .collect();
    let roots_before: Vec<String> = std::fs::read_dir(fs_root.join("servers"))
        .expect("servers dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let retired: Vec<&String> = roots_before.iter().filter(|r| !live.contains(r)).collect();
    assert!(
        retired.contains(&victim),
        "the root of {victim} ({killed}), whose stores its recovered ranges read, is gone \
         before anything was compacted: roots {roots_before:?}, live {live:?}"
    );
    // Every range rewrites its stores under its own server's root: nothing else is used.
    client
        .compact(None, common::CompactionKind::Major)
        .expect("major compaction");
    client.wait_for_maintenance().expect("wait for maintenance");
    let stat = |name: &str| -> u64 {
        client
            .status()
            .expect("status")
            .into_iter()
            .find(|(k, _)| k == name)
            .unwrap_or_else(|| panic!("no {name} in the status"))
            .1
            .parse()
            .expect("a number")
    };
    let settled = Instant::now();
    loop {
        let files = all_store_files(&fs_root);
        let stores = stat("cell_stores");
        let roots: Vec<String> = std::fs::read_dir(fs_root.join("servers"))
            .expect("servers dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        let st = client.master_status().expect("status");
        if files.len() as u64 == stores
            && roots.iter().all(|r| live.contains(r))
            && st.gc_removed_roots >= retired.len() as u64
        {
            assert!(
                st.gc_removed_stores > 0,
                "nothing was removed, yet stores were exported and a root retired: {st:?}"
            );
            for f in &files {
                let owner = f.split('/').nth(2).expect("/servers/<location>/...");
                assert!(
                    live.iter().any(|l| l == owner),
                    "{f} is under a root no live server has"
                );
            }
            break;
        }
        assert!(
            settled.elapsed() < Duration::from_secs(60),
            "garbage left: {} store files on disk for {stores} stores the ranges use, roots {roots:?} (live {live:?}), {st:?}\nfiles {files:#?}\n{}",
            files.len(),
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    // Every cell is still there, its last value read from the stores that were kept.
    let mut seen = std::collections::BTreeSet::new();
    let mut scanner = client
        .scanner("/gc", common::ScanSpec::default())
        .expect("scanner");
    while let Some(c) = scanner.next_cell().expect("scan after garbage collection") {
        seen.insert(c.key.row);
    }
    assert_eq!(
        seen.len() as u64,
        rows,
        "rows read after garbage collection"
    );
}

//! `ht serve rangeserver` as a real process: create a table and load a range with the `master`
//! certificate, update and scan with the `client` certificate, stop it with SIGTERM, then serve
//! the same data directory again and find the data.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::{Mutation, ScanSpec, TableSchema};
use proto::rs::client::{RangeServerClient, RsError};

/// Kills the server if the test fails before it stops.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `ht serve rangeserver` and reads the address from its first line.
async fn serve(ht: &str, data_dir: &Path) -> (Killed, SocketAddr) {
    let mut child = Command::new(ht)
        .args([
            "serve",
            "rangeserver",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start ht serve rangeserver");
    let stdout = child.stdout.take().expect("stdout");
    let server = Killed(child);
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    })
    .await
    .expect("join")
    .expect("read the server's first line");
    assert!(line.starts_with("range server serving on "), "{line:?}");
    let addr = line
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    (server, addr)
}

/// SIGTERM, and the server must exit cleanly (engine closed).
fn terminate(mut server: Killed) {
    let pid = server.0.id().to_string();
    let sent = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("run kill");
    assert!(sent.success());
    let status = server.0.wait().expect("wait");
    assert!(
        status.success(),
        "ht serve rangeserver exited with {status}"
    );
}

fn rows(cells: &[common::Cell]) -> Vec<(String, String)> {
    cells
        .iter()
        .map(|c| {
            (
                String::from_utf8_lossy(&c.key.row).into_owned(),
                String::from_utf8_lossy(&c.value).into_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_rangeserver_create_load_update_scan_restart() {
    let ht = env!("CARGO_BIN_EXE_ht");
    let dir = tempfile::tempdir().expect("tempdir");
    let data_dir = dir.path().join("data");
    let init = Command::new(ht)
        .args(["init", "--data-dir"])
        .arg(&data_dir)
        .output()
        .expect("run ht init");
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let master = rpc::ClusterCredentials::load(&data_dir, "master").expect("master credentials");
    let client = rpc::ClusterCredentials::load(&data_dir, "client").expect("client credentials");

    let (server, addr) = serve(ht, &data_dir).await;
    let admin = RangeServerClient::connect(addr, &master)
        .await
        .expect("connect as master");
    let mut schema = TableSchema::new(7, "/t");
    schema.add_family("a");
    admin.create_table(&schema).await.expect("create_table");
    admin
        .load_range(7, None, Some(b"s"))
        .await
        .expect("load_range");
    let data = RangeServerClient::connect(addr, &client)
        .await
        .expect("connect as client");
    data.update(
        7,
        &[
            Mutation::insert("r1", 1, "", "v1"),
            Mutation::insert("r2", 1, "", "v2"),
        ],
    )
    .await
    .expect("update");
    assert!(matches!(
        data.update(7, &[Mutation::insert("x", 1, "", "no")]).await,
        Err(RsError::NotHere { .. })
    ));
    let held = ScanSpec {
        row_intervals: vec![common::scan_spec::RowInterval {
            start: std::ops::Bound::Unbounded,
            end: std::ops::Bound::Excluded(b"s".to_vec()),
        }],
        ..ScanSpec::default()
    };
    let cells = data
        .scan(7, &held)
        .await
        .expect("scan")
        .collect()
        .await
        .expect("cells");
    let want = vec![
        ("r1".to_string(), "v1".to_string()),
        ("r2".into(), "v2".into()),
    ];
    assert_eq!(rows(&cells), want);
    admin.close().await;
    data.close().await;
    terminate(server);
    assert!(data_dir.join("rangeserver").join("ht").is_dir());

    // The table, its range and its cells survive a restart on the same data directory.
    let (server, addr) = serve(ht, &data_dir).await;
    let data = RangeServerClient::connect(addr, &client)
        .await
        .expect("connect again");
    assert_eq!(data.ranges(7).await.expect("ranges").len(), 1);
    let cells = data
        .scan(7, &held)
        .await
        .expect("scan")
        .collect()
        .await
        .expect("cells");
    assert_eq!(rows(&cells), want);
    data.close().await;
    terminate(server);
}

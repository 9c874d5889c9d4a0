//! `ht serve dfs-broker` as a real process: a create / append(Sync) / pread round trip through
//! `BrokerFs`, then SIGKILL the broker and find the synced data in the backend directory.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use dfs_broker::broker::{BrokerFs, BrokerFsOptions};
use dfs_broker::{AppendFlag, Fs};

/// Kills the broker if the test fails before it does.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_dfs_broker_round_trip_and_kill_9() {
    let ht = env!("CARGO_BIN_EXE_ht");
    let dir = tempfile::tempdir().expect("tempdir");
    let data_dir = dir.path().join("data");
    let backend_dir = dir.path().join("fs");
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

    let mut child = Command::new(ht)
        .args(["serve", "dfs-broker", "--backend"])
        .arg(format!("file://{}", backend_dir.display()))
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start ht serve dfs-broker");
    let stdout = child.stdout.take().expect("stdout");
    let mut broker = Killed(child);
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    })
    .await
    .expect("join")
    .expect("read the broker's first line");
    // "dfs broker serving file:///... on 127.0.0.1:PORT"
    assert!(line.starts_with("dfs broker serving file://"), "{line:?}");
    let addr: SocketAddr = line
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));

    // The HQL shell's database on the broker (`--dfs broker://...`): its engine files land in
    // the broker's backend directory.
    let shell = Command::new(ht)
        .args(["shell", "--batch", "--data-dir"])
        .arg(&data_dir)
        .args(["--dfs", &format!("broker://{addr}"), "-e"])
        .arg("CREATE TABLE t (a); INSERT INTO t VALUES ('r1', 'a', 'v1'); SELECT * FROM t;")
        .output()
        .expect("run ht shell");
    let out = String::from_utf8_lossy(&shell.stdout);
    assert!(
        shell.status.success(),
        "{out} {}",
        String::from_utf8_lossy(&shell.stderr)
    );
    assert!(out.contains("r1\ta\tv1"), "{out}");
    assert!(
        backend_dir.join("ht").is_dir(),
        "the engine did not write through the broker"
    );

    let creds = rpc::ClusterCredentials::load(&data_dir, "client").expect("client credentials");
    // A short deadline, so that the call to the dead broker at the end fails fast.
    let options = BrokerFsOptions {
        call_timeout: Duration::from_secs(5),
        ..Default::default()
    };
    let fs = BrokerFs::connect(addr, &creds, options)
        .await
        .expect("connect to the broker");
    assert_eq!(fs.url(), format!("broker://{addr}"));
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let mut w = fs.create("/wal/0", false).await.expect("create");
    w.append(&data[..1000], AppendFlag::None)
        .await
        .expect("append");
    w.append(&data[1000..], AppendFlag::Sync)
        .await
        .expect("append(Sync)");
    let r = fs.open("/wal/0").await.expect("open");
    assert_eq!(r.length().await.expect("length"), data.len() as u64);
    assert!(r.pread(0, data.len()).await.expect("pread") == data);
    assert!(r.pread(5, 10).await.expect("pread")[..] == data[5..15]);

    // SIGKILL: no chance to close the writer; what was synced must be in the backend.
    broker.0.kill().expect("kill -9");
    broker.0.wait().expect("wait");
    let on_disk = std::fs::read(backend_dir.join("wal/0")).expect("read the backend file");
    assert!(on_disk == data, "synced data missing after kill -9");

    // The client reports the dead broker as an error, not a hang or a panic.
    let err = w
        .append(b"after death", AppendFlag::Sync)
        .await
        .expect_err("the broker is dead");
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
}

//! `ht init` creates loadable cluster credentials and refuses to overwrite them.

use std::process::Command;

#[test]
fn init_creates_credentials_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_ht"))
            .args(["init", "--data-dir"])
            .arg(dir.path())
            .args(["--nodes", "master,rangeserver"])
            .env_remove("RUST_BACKTRACE")
            .output()
            .expect("run ht init")
    };
    let first = run();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    for name in ["master", "rangeserver"] {
        rpc::tls::ClusterCredentials::load(dir.path(), name).expect("issued certificate loads");
    }
    assert!(rpc::tls::ClusterCredentials::load(dir.path(), "client").is_err());
    let second = run();
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("refusing to overwrite"), "{err}");
}

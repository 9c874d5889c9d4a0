//! The stock `ht` binary runs only the built-in kinds: DDL and scans naming a kind it was not
//! built with are refused with an error naming the kind (a user's own binary, built with
//! `ht::main_with`, runs it: `examples/custom-iterator/`).

use std::process::Command;

#[test]
fn the_stock_ht_refuses_an_unknown_iterator_kind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |hql: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_ht"))
            .args(["shell", "--batch", "--data-dir"])
            .arg(dir.path())
            .args(["-e", hql])
            .output()
            .expect("run ht shell");
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (ok, text) = run(
        "CREATE TABLE t (v, ITERATOR long = value_len_at_least(MIN = 3) \
                          SCOPES (SCAN, MINOR, MAJOR) PRIORITY 10);",
    );
    assert!(!ok, "the stock ht accepted a kind it does not have: {text}");
    assert!(
        text.contains("unknown") && text.contains("value_len_at_least"),
        "{text}"
    );
    let (ok, text) = run(
        "CREATE TABLE u (v); INSERT INTO u VALUES ('r', 'v', 'abc'); \
                          SELECT * FROM u WITH ITERATOR value_len_at_least(MIN = 3);",
    );
    assert!(!ok, "{text}");
    assert!(
        text.contains("unknown") && text.contains("value_len_at_least"),
        "{text}"
    );
}

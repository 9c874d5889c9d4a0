//! The user's own binary (`my-ht`) runs `value_len_at_least` through HQL on an embedded
//! database: as a table iterator in every scope (a major compaction drops the short cells for
//! good) and as a scan iterator (`WITH ITERATOR`); and the stock registry (what the stock `ht`
//! runs, `ht/tests/user_iterators.rs` checks the binary itself) refuses the kind.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

const MY_HT: &str = env!("CARGO_BIN_EXE_my-ht");

/// Runs `my-ht shell --batch` on `dir` with `hql`; (succeeded, stdout, stderr).
fn shell(dir: &Path, hql: &str) -> (bool, String, String) {
    let out = Command::new(MY_HT)
        .args(["shell", "--batch", "--data-dir"])
        .arg(dir)
        .args(["-e", hql])
        .output()
        .expect("run my-ht shell");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The rows of `row\tfamily\tvalue` lines in `out`.
fn rows(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| l.matches('\t').count() == 2)
        .filter_map(|l| l.split('\t').next())
        .collect()
}

const INSERT: &str =
    "INSERT INTO t VALUES ('r1', 'v', 'ab'), ('r2', 'v', 'abc'), ('r3', 'v', 'abcdef');";

#[test]
fn a_table_iterator_of_the_user_kind_filters_scans_and_compactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ok, out, err) = shell(
        dir.path(),
        &format!(
            "CREATE TABLE t (v, ITERATOR long = value_len_at_least(MIN = 3) \
             SCOPES (SCAN, MINOR, MAJOR) PRIORITY 10); {INSERT} SELECT * FROM t;"
        ),
    );
    assert!(ok, "{out}\n{err}");
    assert_eq!(
        rows(&out),
        ["r2", "r3"],
        "r1's 2-byte value is dropped:\n{out}"
    );
    assert!(out.contains("r3\tv\tabcdef"), "{out}");

    // A major compaction runs the kind too: once the iterator is dropped, r1 stays gone.
    let (ok, out, err) = shell(
        dir.path(),
        "COMPACT TYPE MAJOR TABLE t; ALTER TABLE t DROP ITERATOR long; SELECT * FROM t;",
    );
    assert!(ok, "{out}\n{err}");
    assert_eq!(rows(&out), ["r2", "r3"], "{out}");
    let (ok, out, err) = shell(
        dir.path(),
        "INSERT INTO t VALUES ('r4', 'v', 'x'); SELECT * FROM t;",
    );
    assert!(ok, "{out}\n{err}");
    assert_eq!(
        rows(&out),
        ["r2", "r3", "r4"],
        "no iterator any more:\n{out}"
    );
}

#[test]
fn a_scan_iterator_of_the_user_kind_filters_one_select() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ok, out, err) = shell(
        dir.path(),
        &format!(
            "CREATE TABLE t (v); {INSERT} \
             SELECT * FROM t WITH ITERATOR value_len_at_least(MIN = 4); SELECT * FROM t;"
        ),
    );
    assert!(ok, "{out}\n{err}");
    assert_eq!(
        rows(&out),
        ["r3", "r1", "r2", "r3"],
        "the first SELECT keeps only r3, the second everything:\n{out}"
    );
    let (ok, out, err) = shell(
        dir.path(),
        "SELECT * FROM t WITH ITERATOR value_len_at_least(MIN = 'many');",
    );
    let text = format!("{out}{err}");
    assert!(!ok, "a bad MIN was accepted: {text}");
    assert!(text.contains("MIN") && text.contains("many"), "{text}");
}

/// The stock registry, as the stock `ht shell` opens the embedded database: the same DDL and
/// scan are refused, naming the kind.
#[test]
fn the_stock_registry_refuses_the_user_kind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = embedded::EmbeddedClient::open(dir.path(), embedded::EmbeddedOptions::default())
        .expect("open the embedded database");
    let mut exec = hql::exec::Executor::new(Arc::new(db) as Arc<dyn client::Client>);
    let mut run = |text: &str| {
        let stmt = hql::parse_statement(text).expect("parses");
        let mut out = Vec::new();
        exec.execute(&stmt, &mut out).map_err(|e| e.to_string())
    };
    let err = run(
        "CREATE TABLE t (v, ITERATOR long = value_len_at_least(MIN = 3) \
                   SCOPES (SCAN, MINOR, MAJOR) PRIORITY 10)",
    )
    .expect_err("the stock registry has no value_len_at_least");
    assert!(
        err.contains("unknown") && err.contains("value_len_at_least"),
        "{err}"
    );
    run("CREATE TABLE u (v)").expect("a plain table");
    let err = run("SELECT * FROM u WITH ITERATOR value_len_at_least(MIN = 3)")
        .expect_err("refused in a scan too");
    assert!(
        err.contains("unknown") && err.contains("value_len_at_least"),
        "{err}"
    );
}

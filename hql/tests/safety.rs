//! Input-handling defects of issue 12 ("Safety"), each pinned by a test named after it: DUMP
//! and LOAD round trips, reserved timestamps, bounded input, limits that add up, schema names,
//! TTLs, long value-predicate lists, parse errors and script files, gzip and FS checks.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::{Client, ScanSpec};
use common::Mutation;
use common::mutation::{MAX_TIMESTAMP, MAX_VALUE_BYTES, MIN_TIMESTAMP};
use embedded::{EmbeddedClient, EmbeddedOptions};
use hql::Statement;
use hql::exec::Executor;
use hql::load::{LoadContext, LoadError, LoadLimits, LoadReport, load_data_with};
use hql::shell::{Shell, ShellOptions};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// (row, family, qualifier, value, timestamp) of every cell, in scan order.
type Cells = Vec<(Vec<u8>, String, Vec<u8>, Vec<u8>, i64)>;

struct Db {
    dir: tempfile::TempDir,
    client: Arc<EmbeddedClient>,
    ex: Executor,
}

fn db() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let client =
        Arc::new(EmbeddedClient::open(dir.path().join("db"), EmbeddedOptions::default()).unwrap());
    let ex = Executor::new(client.clone() as Arc<dyn Client>);
    Db { dir, client, ex }
}

impl Db {
    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }

    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.path(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// Runs one statement; its output, or its error message.
    fn run(&mut self, stmt: &str) -> Result<String, String> {
        let s = hql::parse_statement(stmt).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        self.ex
            .execute(&s, &mut out)
            .map_err(|e| e.to_string())
            .map(|()| String::from_utf8_lossy(&out).into_owned())
    }

    fn ok(&mut self, stmt: &str) -> String {
        self.run(stmt).unwrap_or_else(|e| panic!("{stmt}: {e}"))
    }

    fn err(&mut self, stmt: &str) -> String {
        match self.run(stmt) {
            Ok(out) => panic!("{stmt}: succeeded with {out:?}"),
            Err(e) => e,
        }
    }

    /// LOAD DATA INFILE with limits and a standard input.
    fn load<'a>(
        &'a self,
        stmt: &str,
        skip: bool,
        max_line_bytes: usize,
        stdin: Option<&'a mut dyn Read>,
    ) -> Result<LoadReport, LoadError> {
        let Statement::LoadData(ld) = hql::parse_statement(stmt).unwrap() else {
            panic!("not a LOAD DATA statement: {stmt}");
        };
        let ctx = LoadContext {
            client: self.client.as_ref(),
            namespace: "/",
            progress: false,
            skip_bad_lines: skip,
            stdin,
        };
        load_data_with(
            ctx,
            &ld,
            LoadLimits {
                max_line_bytes,
                ..LoadLimits::default()
            },
        )
    }

    fn cells(&self, table: &str) -> Cells {
        let schema = self.client.table_schema(table).unwrap();
        let mut sc = self.client.scanner(table, ScanSpec::default()).unwrap();
        let mut out = Vec::new();
        while let Some(c) = sc.next_cell().unwrap() {
            let fam = schema.family_by_id(c.key.family).unwrap().name.clone();
            out.push((c.key.row, fam, c.key.qualifier, c.value, c.key.timestamp));
        }
        out
    }

    fn put(&self, table: &str, cells: &[Mutation]) {
        let mut m = self.client.mutator(table).unwrap();
        for c in cells {
            m.set(c.clone()).unwrap();
        }
        m.flush().unwrap();
    }
}

fn cell(row: &[u8], family: u8, qualifier: &[u8], value: &[u8], ts: i64) -> Mutation {
    let mut m = Mutation::insert(row, family, qualifier, value);
    m.timestamp = Some(ts);
    m
}

/// DUMP TABLE `from` into a file, LOAD it into a new table `to` with the same families.
fn dump_and_load(d: &mut Db, from: &str, to: &str) {
    let file = d.path(&format!("{from}.tsv"));
    d.ok(&format!("DUMP TABLE {from} INTO FILE \"{file}\""));
    d.ok(&format!("CREATE TABLE {to} (a, b)"));
    d.ok(&format!("LOAD DATA INFILE \"{file}\" INTO TABLE {to}"));
}

// ---- 3. `\r` at the end of a value or row ----

#[test]
fn dump_and_load_round_trip_a_value_ending_in_cr() {
    let mut d = db();
    d.ok("CREATE TABLE t (a, b)");
    d.put(
        "/t",
        &[
            cell(b"row\r", 1, b"q\r", b"value\r", 5),
            cell(b"r2", 2, b"", b"\r", 6),
            cell(b"\r", 1, b"\r\n", b"mid\rdle\r\r", 7),
        ],
    );
    dump_and_load(&mut d, "t", "u");
    assert_eq!(d.cells("/u"), d.cells("/t"));
    assert_eq!(d.cells("/u").len(), 3);
}

#[test]
fn dump_and_load_round_trip_any_bytes() {
    let d = std::cell::RefCell::new(db());
    // Any byte, and often one that the dump format escapes or splits on.
    let byte =
        || prop_oneof![3 => any::<u8>(), 1 => prop::sample::select(b"\r\n\t\\\0:#".to_vec())];
    let bytes = move |max| prop::collection::vec(byte(), 0..max);
    let cells = prop::collection::btree_map(
        (
            prop::collection::vec(byte(), 1..12),
            1u8..=2,
            bytes(12),
            MIN_TIMESTAMP..=MAX_TIMESTAMP,
        ),
        bytes(24),
        1..24,
    );
    let mut runner = TestRunner::new(Config {
        cases: 24,
        ..Config::default()
    });
    let n = std::cell::Cell::new(0);
    runner
        .run(&cells, |cells| {
            n.set(n.get() + 1);
            let n = n.get();
            let mut d = d.borrow_mut();
            let (t, u) = (format!("t{n}"), format!("u{n}"));
            d.ok(&format!("CREATE TABLE {t} (a, b)"));
            let muts: Vec<Mutation> = cells
                .iter()
                .map(|((row, fam, q, ts), v)| cell(row, *fam, q, v, *ts))
                .collect();
            d.put(&format!("/{t}"), &muts);
            dump_and_load(&mut d, &t, &u);
            let want = d.cells(&format!("/{t}"));
            prop_assert_eq!(want.len(), cells.len());
            prop_assert_eq!(d.cells(&format!("/{u}")), want);
            Ok(())
        })
        .unwrap();
}

// ---- 4. Reserved timestamps ----

#[test]
fn insert_with_timestamp_i64_max_or_min_is_refused_not_counted() {
    let mut d = db();
    d.ok("CREATE TABLE t (a)");
    let e = d.err(r#"INSERT INTO t VALUES ("2262-04-11 23:47:16.854775807", "r", "a", "v")"#);
    assert!(
        e.contains("timestamp 9223372036854775807 is reserved")
            && e.contains("2262-04-11 23:47:16.854775807"),
        "{e}"
    );
    let e = d.err(r#"INSERT INTO t VALUES ("-9223372036854775808", "r", "a", "v")"#);
    assert!(
        e.contains("timestamp -9223372036854775808 is reserved"),
        "{e}"
    );
    // A statement is refused whole: the good cell before the bad one is not written either.
    let e =
        d.err(r#"INSERT INTO t VALUES ("r0", "a", "ok"), ("9223372036854775807", "r", "a", "v")"#);
    assert!(e.contains("nothing was written"), "{e}");
    let e = d.err(r#"DELETE * FROM t WHERE ROW = "r" TIMESTAMP "9223372036854775807""#);
    assert!(e.contains("is reserved"), "{e}");
    assert!(d.cells("/t").is_empty());
    // One nanosecond inside is stored and returned.
    d.ok(&format!(
        r#"INSERT INTO t VALUES ("{MAX_TIMESTAMP}", "r", "a", "v"), ("{MIN_TIMESTAMP}", "s", "a", "w")"#
    ));
    let ts: Vec<i64> = d.cells("/t").into_iter().map(|c| c.4).collect();
    assert_eq!(ts, [MAX_TIMESTAMP, MIN_TIMESTAMP]);
}

#[test]
fn load_with_timestamp_i64_max_names_file_and_line_and_skips_it() {
    let d = db();
    d.client
        .create_table("/t", {
            let mut s = common::TableSchema::new(0, "");
            s.add_family("a");
            s
        })
        .unwrap();
    let text = "#timestamp\trow\tcolumn\tvalue\n\
                2020-01-01 00:00:00\tr1\ta\tv\n\
                2262-04-11 23:47:16.854775807\tr2\ta\tv\n\
                -9223372036854775808\tr3\ta\tv\n\
                2020-01-01 00:00:00\tr4\ta\tv\n";
    let f = d.file("in.tsv", text.as_bytes());
    let stmt = format!("LOAD DATA INFILE \"{f}\" INTO TABLE t");
    let e = d.load(&stmt, false, 1 << 20, None).unwrap_err().message;
    assert!(
        e.contains("in.tsv: line 3: timestamp 9223372036854775807 is reserved"),
        "{e}"
    );
    let r = d.load(&stmt, true, 1 << 20, None).unwrap();
    assert_eq!((r.cells, r.skipped_lines), (2, 2), "{r}");
    assert!(r.skipped_samples[1].contains("line 4: timestamp -9223372036854775808"));
    let rows: Vec<Vec<u8>> = d.cells("/t").into_iter().map(|c| c.0).collect();
    assert_eq!(rows, [b"r1".to_vec(), b"r4".to_vec()]);
}

#[test]
fn engine_apply_refuses_a_reserved_timestamp() {
    // The embedded client writes through Engine::apply, as a range server does.
    let mut d = db();
    d.ok("CREATE TABLE t (a)");
    for ts in [i64::MIN, i64::MAX] {
        let mut m = d.client.mutator("/t").unwrap();
        let r = m.set(cell(b"r", 1, b"", b"v", ts)).and_then(|()| m.flush());
        let e = r.unwrap_err().to_string();
        assert!(e.contains(&format!("timestamp {ts} is reserved")), "{e}");
        assert_eq!(m.cells_flushed(), 0);
    }
    assert!(d.cells("/t").is_empty());
}

// ---- 5. Newline-less input ----

/// An endless input of one byte, counting what was read.
struct Endless {
    byte: u8,
    read: u64,
}

impl Read for Endless {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        buf.fill(self.byte);
        self.read += buf.len() as u64;
        Ok(buf.len())
    }
}

fn table_a(d: &Db) {
    let mut s = common::TableSchema::new(0, "");
    s.add_family("a");
    d.client.create_table("/t", s).unwrap();
}

#[test]
fn load_of_newline_less_endless_input_stops_at_the_line_limit() {
    let d = db();
    table_a(&d);
    let limit = 64 << 10;
    // The first line.
    let mut zeros = Endless { byte: 0, read: 0 };
    let e = d
        .load(
            "LOAD DATA INFILE \"-\" INTO TABLE t",
            false,
            limit,
            Some(&mut zeros),
        )
        .unwrap_err()
        .message;
    assert!(
        e.contains("(stdin): line 1 is longer than 65536 bytes"),
        "{e}"
    );
    assert!(zeros.read < 4 << 20, "read {} bytes", zeros.read);
    // A later line: the load stops there, having read a bounded prefix.
    let head = b"#row\tcolumn\tvalue\nr1\ta\tv\n".to_vec();
    let mut endless = Endless {
        byte: b'x',
        read: 0,
    };
    let mut input = head.as_slice().chain(&mut endless);
    let e = d
        .load(
            "LOAD DATA INFILE \"-\" INTO TABLE t",
            false,
            limit,
            Some(&mut input),
        )
        .unwrap_err()
        .message;
    assert!(
        e.contains("(stdin): line 3: line is longer than 65536 bytes")
            && e.contains("loaded lines 1..=2"),
        "{e}"
    );
    assert!(endless.read < 16 << 20, "read {} bytes", endless.read);
    // Skipping bad lines, a long line (a bounded prefix of the endless input) is passed over
    // without being kept, and the lines after it load.
    let mut long = Endless {
        byte: b'x',
        read: 0,
    }
    .take(40 << 20);
    let mut input = head.as_slice().chain(&mut long).chain(&b"\nr3\ta\tv\n"[..]);
    let r = d
        .load(
            "LOAD DATA INFILE \"-\" INTO TABLE t",
            true,
            limit,
            Some(&mut input),
        )
        .unwrap();
    assert_eq!((r.lines, r.cells, r.skipped_lines), (3, 2, 1), "{r}");
    assert!(
        r.skipped_samples[0].ends_with("line 3: line of 41943040 bytes is longer than 65536 bytes"),
        "{:?}",
        r.skipped_samples
    );
}

#[test]
fn load_data_infile_dev_zero_fails_with_file_and_line() {
    let d = db();
    table_a(&d);
    let started = Instant::now();
    let e = d
        .load(
            "LOAD DATA INFILE \"/dev/zero\" INTO TABLE t",
            true,
            1 << 20,
            None,
        )
        .unwrap_err()
        .message;
    assert!(
        e.contains("/dev/zero: line 1 is longer than 1048576 bytes"),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn skip_bad_lines_passes_over_an_overlong_line_and_counts_it() {
    let d = db();
    table_a(&d);
    let mut text = b"#row\tcolumn\tvalue\nr1\ta\tv\nr2\ta\t".to_vec();
    text.extend(std::iter::repeat_n(b'x', 300_000));
    text.extend_from_slice(b"\nr3\ta\tv\nr4\ta\t");
    text.extend(std::iter::repeat_n(b'y', 2_000));
    text.extend_from_slice(b"\nr5\ta\tv\n");
    let f = d.file("in.tsv", &text);
    let stmt = format!("LOAD DATA INFILE \"{f}\" INTO TABLE t");
    let r = d.load(&stmt, true, 1_000, None).unwrap();
    assert_eq!((r.lines, r.cells, r.skipped_lines), (5, 3, 2), "{r}");
    assert!(
        r.skipped_samples[0].ends_with("line 3: line of 300005 bytes is longer than 1000 bytes"),
        "{:?}",
        r.skipped_samples
    );
    assert!(
        r.skipped_samples[1].ends_with("line 5: line of 2005 bytes is longer than 1000 bytes"),
        "{:?}",
        r.skipped_samples
    );
    let rows: Vec<Vec<u8>> = d.cells("/t").into_iter().map(|c| c.0).collect();
    assert_eq!(rows, [b"r1".to_vec(), b"r3".to_vec(), b"r5".to_vec()]);
    // Without skipping, the load stops at the line and names it.
    let e = d.load(&stmt, false, 1_000, None).unwrap_err().message;
    assert!(e.contains("in.tsv: line 3: line "), "{e}");
}

#[test]
fn row_key_column_padding_width_is_bounded() {
    let d = db();
    table_a(&d);
    let f = d.file("in.tsv", b"#row\ta\nr\tv\n");
    let e = d
        .load(
            &format!("LOAD DATA INFILE ROW_KEY_COLUMN=\"%0100000000row\" \"{f}\" INTO TABLE t"),
            false,
            1 << 20,
            None,
        )
        .unwrap_err()
        .message;
    assert!(
        e.contains("ROW_KEY_COLUMN 'row': width 100000000 is more than the longest row key"),
        "{e}"
    );
}

#[test]
fn source_dev_zero_stops_at_the_line_limit() {
    let d = db();
    let opts = ShellOptions {
        batch: true,
        max_line_bytes: 1 << 20,
        ..ShellOptions::default()
    };
    let mut shell = Shell::new(d.client.clone() as Arc<dyn Client>, opts).unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    shell.run_script("source /dev/zero", &mut out, &mut err);
    let err = String::from_utf8_lossy(&err);
    assert!(
        err.contains("/dev/zero: line 1 is longer than 1048576 bytes"),
        "{err}"
    );
}

#[test]
fn a_statement_without_end_is_bounded() {
    let d = db();
    let opts = ShellOptions {
        batch: true,
        max_statement_bytes: 1_000,
        ..ShellOptions::default()
    };
    let mut shell = Shell::new(d.client.clone() as Arc<dyn Client>, opts).unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let script = "SELECT *\n".repeat(200) + "FROM t;\n";
    shell.run_script(&script, &mut out, &mut err);
    let err = String::from_utf8_lossy(&err);
    assert!(
        err.contains("is longer than 1000 bytes; it was not run"),
        "{err}"
    );
}

// ---- 7. OFFSET + LIMIT ----

#[test]
fn select_offset_1_limit_u64_max_returns_the_rest() {
    let mut d = db();
    d.ok("CREATE TABLE t (a)");
    d.ok(r#"INSERT INTO t VALUES ("r1", "a", "x"), ("r2", "a", "y"), ("r3", "a", "x")"#);
    let out = d.ok("SELECT * FROM t OFFSET 1 LIMIT 18446744073709551615");
    assert_eq!(out, "r2\ta\ty\nr3\ta\tx\n");
    // With value predicates too (filtered, then limited, in the server).
    let out = d.ok(r#"SELECT * FROM t WHERE a = "x" OFFSET 1 LIMIT 18446744073709551615"#);
    assert_eq!(out, "r3\ta\tx\n");
    let out = d.ok("SELECT * FROM t CELL_OFFSET 1 CELL_LIMIT 18446744073709551615");
    assert_eq!(out, "r2\ta\ty\nr3\ta\tx\n");
}

// ---- 8. A field over the value limit with --skip-bad-lines ----

#[test]
fn skip_bad_lines_skips_a_value_over_the_limit_and_counts_it() {
    let d = db();
    table_a(&d);
    let mut text = b"#row\tcolumn\tvalue\nr1\ta\tv\nr2\ta\t".to_vec();
    text.extend(std::iter::repeat_n(b'x', MAX_VALUE_BYTES + 1));
    text.extend_from_slice(b"\nr3\ta\tv\n");
    let f = d.file("in.tsv", &text);
    let stmt = format!("LOAD DATA INFILE \"{f}\" INTO TABLE t");
    let r = d
        .load(&stmt, true, hql::load::DEFAULT_MAX_LINE_BYTES, None)
        .unwrap();
    assert_eq!((r.lines, r.cells, r.skipped_lines), (3, 2, 1), "{r}");
    assert!(
        r.skipped_samples[0].contains("line 3: value of 16777217 bytes is larger than"),
        "{:?}",
        r.skipped_samples
    );
    let e = d
        .load(&stmt, false, hql::load::DEFAULT_MAX_LINE_BYTES, None)
        .unwrap_err()
        .message;
    assert!(
        e.contains("in.tsv: line 3: value of 16777217 bytes") && e.contains("error is at line 3"),
        "{e}"
    );
}

// ---- 10. Family names ----

#[test]
fn family_names_that_cannot_be_written_and_tables_without_families_are_refused() {
    let mut d = db();
    let e = d.err(r#"CREATE TABLE t ("c:d")"#);
    assert!(e.contains("\"c:d\" cannot be written"), "{e}");
    let e = d.err(r#"CREATE TABLE t ("")"#);
    assert!(e.contains("cannot be empty"), "{e}");
    let e = d.err("CREATE TABLE t ()");
    assert!(e.contains("at least one column family"), "{e}");
    assert!(!d.client.table_exists("/t").unwrap());
    d.ok("CREATE TABLE t (a)");
    let e = d.err(r#"ALTER TABLE t ADD ("x:y")"#);
    assert!(e.contains("\"x:y\" cannot be written"), "{e}");
    let e = d.err(r#"ALTER TABLE t RENAME COLUMN FAMILY (a, "a:b")"#);
    assert!(e.contains("\"a:b\" cannot be written"), "{e}");
    let e = d.err("ALTER TABLE t DROP (a)");
    assert!(e.contains("at least one column family"), "{e}");
    assert!(d.client.table_schema("/t").unwrap().family("a").is_some());
}

// ---- 11. TTLs ----

#[test]
fn ttl_of_2_pow_53_plus_1_seconds_is_kept_exactly() {
    let mut d = db();
    d.ok("CREATE TABLE t (a TTL 9007199254740993, b TTL 1.5 DAYS, c TTL 0.5)");
    let s = d.client.table_schema("/t").unwrap();
    let ttl = |f: &str| s.family(f).unwrap().ttl_secs;
    assert_eq!(
        (ttl("a"), ttl("b"), ttl("c")),
        (9_007_199_254_740_993, 129_600, 0)
    );
    let out = d.ok("SHOW CREATE TABLE t");
    assert!(out.contains("  a TTL 9007199254740993,\n"), "{out}");
    let e = d.err("CREATE TABLE u (a TTL 18446744073709551616)");
    assert!(e.contains("too large"), "{e}");
}

// ---- 13. Many OR-ed value predicates ----

#[test]
fn a_where_list_of_100000_value_tests_is_fast() {
    let mut d = db();
    d.ok("CREATE TABLE t (a, b)");
    let rows = 50_000;
    let muts: Vec<Mutation> = (0..rows)
        .map(|i| {
            cell(
                format!("r{i:06}").as_bytes(),
                1,
                b"",
                format!("v{i}").as_bytes(),
                1,
            )
        })
        .collect();
    d.put("/t", &muts);
    // Every third row's value, plus values no row has; a prefix and a qualified test too.
    let mut tests: Vec<String> = (0..100_000)
        .map(|i| {
            if i % 3 == 0 && i < rows {
                format!("a = \"v{i}\"")
            } else {
                format!("a = \"none{i}\"")
            }
        })
        .collect();
    tests.push("a =^ \"v1999\"".into());
    tests.push("b:q = \"v1\"".into());
    let stmt = format!("SELECT * FROM t WHERE {} KEYS_ONLY", tests.join(" OR "));
    let started = Instant::now();
    let out = d.ok(&stmt);
    let took = started.elapsed();
    let got = out.lines().count();
    let want = (0..rows)
        .filter(|i| i % 3 == 0 || format!("v{i}").starts_with("v1999"))
        .count();
    assert_eq!(got, want);
    eprintln!("100,000 OR-ed value tests over {rows} rows: {took:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

// ---- 14. Parse errors and script files ----

#[test]
fn a_parse_error_shows_a_window_around_the_caret() {
    let long = "x".repeat(1_700_000);
    let stmt = format!("INSERT INTO t VALUES (\"r\", \"a\", \"{long}\") junk");
    let e = hql::parse_statement(&stmt).unwrap_err().to_string();
    assert!(
        e.len() < 400,
        "{} bytes: {}",
        e.len(),
        &e[..400.min(e.len())]
    );
    assert!(
        e.contains("\n  …xxxx") && e.contains("xxxx\") junk\n"),
        "{e}"
    );
    let lines: Vec<&str> = e.lines().collect();
    // The caret is under the 'j' of junk.
    let at = lines[1].find(") junk").unwrap() + 2;
    let col = lines[1][..at].chars().count();
    assert_eq!(lines[2].chars().count(), col + 1, "{e}");
    assert!(lines[2].ends_with('^'));
    // Short statements show as before.
    let e = hql::parse_statement("SELEC * FROM t")
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("\n  SELEC * FROM t\n  ^"), "{e}");
}

#[test]
fn a_command_file_with_invalid_utf8_names_the_line_and_runs_nothing() {
    let d = db();
    let f = d.file(
        "script.hql",
        b"CREATE TABLE t (a);\nINSERT INTO t VALUES (\"r\", \"a\", \"v\");\nSELECT * FROM t WHERE ROW = \"\xff\";\n",
    );
    let e =
        hql::shell::read_script(std::path::Path::new(&f), &ShellOptions::default()).unwrap_err();
    assert!(
        e.contains("script.hql: line 3, column 30: invalid UTF-8") && e.contains("nothing of"),
        "{e}"
    );
    let opts = ShellOptions {
        batch: true,
        ..ShellOptions::default()
    };
    let mut shell = Shell::new(d.client.clone() as Arc<dyn Client>, opts).unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    shell.run_script(&format!("source {f}"), &mut out, &mut err);
    let err = String::from_utf8_lossy(&err);
    assert!(err.contains("line 3, column 30: invalid UTF-8"), "{err}");
    assert!(!d.client.table_exists("/t").unwrap());
}

// ---- 16. Gzip and FS ----

#[test]
fn a_gz_file_that_is_not_gzip_says_so() {
    let d = db();
    table_a(&d);
    let f = d.file("notgz.tsv.gz", b"r\ta\tv\n");
    let stmt = format!("LOAD DATA INFILE \"{f}\" INTO TABLE t");
    let e = d.load(&stmt, false, 1 << 20, None).unwrap_err().message;
    assert!(
        e.contains("is not a gzip file (it starts with 72 09, not the gzip magic bytes 1f 8b)"),
        "{e}"
    );
    // A gzip file cut short says that it is.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    for i in 0..10_000 {
        gz.write_all(format!("r{i}\ta\tv{i}\n").as_bytes()).unwrap();
    }
    let bytes = gz.finish().unwrap();
    let f = d.file("cut.tsv.gz", &bytes[..bytes.len() / 2]);
    let stmt = format!("LOAD DATA INFILE \"{f}\" INTO TABLE t");
    let e = d.load(&stmt, false, 1 << 20, None).unwrap_err().message;
    assert!(e.contains("the gzip data is truncated"), "{e}");
}

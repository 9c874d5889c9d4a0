//! LOAD DATA INFILE against an embedded database: every option, the sources and targets, bad
//! lines, the committed-up-to-line guarantee, and round trips.

use std::io::Write;
use std::path::Path;

use client::{Client, ScanSpec, TableSchema};
use common::key::CellFlag;
use embedded::{EmbeddedClient, EmbeddedOptions};
use hql::Statement;
use hql::load::{LoadContext, LoadError, LoadReport, load_data};
use proptest::prelude::*;

/// (row, column, value, timestamp) as text, in scan order.
type Cells = Vec<(String, String, String, i64)>;

struct Db {
    dir: tempfile::TempDir,
    client: EmbeddedClient,
}

fn db(families: &[&str]) -> Db {
    let dir = tempfile::tempdir().unwrap();
    let client = EmbeddedClient::open(dir.path().join("db"), EmbeddedOptions::default()).unwrap();
    let mut s = TableSchema::new(0, "");
    for f in families {
        s.add_family(f);
    }
    client.create_table("/t", s).unwrap();
    Db { dir, client }
}

impl Db {
    fn file(&self, name: &str, text: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    }

    fn run(&self, stmt: &str, skip: bool, stdin: Option<&[u8]>) -> Result<LoadReport, LoadError> {
        let Statement::LoadData(ld) = hql::parse_statement(stmt).unwrap() else {
            panic!("not a LOAD DATA statement: {stmt}");
        };
        let mut input = stdin.unwrap_or_default();
        let ctx = LoadContext {
            client: &self.client,
            namespace: "/",
            progress: false,
            skip_bad_lines: skip,
            stdin: stdin
                .is_some()
                .then_some(&mut input as &mut dyn std::io::Read),
        };
        load_data(ctx, &ld)
    }

    /// Loads `text` from a file with the given options; panics on error.
    fn load(&self, options: &str, text: &str) -> LoadReport {
        let f = self.file("in.tsv", text);
        self.run(
            &format!("LOAD DATA INFILE {options} \"{f}\" INTO TABLE t"),
            false,
            None,
        )
        .unwrap()
    }

    fn load_err(&self, options: &str, text: &str) -> String {
        let f = self.file("in.tsv", text);
        self.run(
            &format!("LOAD DATA INFILE {options} \"{f}\" INTO TABLE t"),
            false,
            None,
        )
        .unwrap_err()
        .message
    }

    fn scan(&self) -> Cells {
        let schema = self.client.table_schema("/t").unwrap();
        let mut sc = self.client.scanner("/t", ScanSpec::default()).unwrap();
        let mut out = Vec::new();
        while let Some(c) = sc.next_cell().unwrap() {
            let fam = schema.family_by_id(c.key.family).unwrap().name.clone();
            let q = String::from_utf8_lossy(&c.key.qualifier);
            let col = if q.is_empty() {
                fam
            } else {
                format!("{fam}:{q}")
            };
            out.push((
                String::from_utf8_lossy(&c.key.row).into_owned(),
                col,
                String::from_utf8_lossy(&c.value).into_owned(),
                c.key.timestamp,
            ));
        }
        out
    }

    /// Scanned cells without timestamps.
    fn rcv(&self) -> Vec<(String, String, String)> {
        self.scan()
            .into_iter()
            .map(|(r, c, v, _)| (r, c, v))
            .collect()
    }
}

fn rcv(cells: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    cells
        .iter()
        .map(|(r, c, v)| (r.to_string(), c.to_string(), v.to_string()))
        .collect()
}

fn ns(text: &str) -> i64 {
    hql::parse_nanos(text).unwrap()
}

#[test]
fn single_cell_with_header_and_escapes() {
    let d = db(&["a", "b"]);
    let r = d.load(
        "",
        "#row\tcolumn\tvalue\nr1\ta\tv1\nr1\tb:q\tx\\ty\\nz\\\\\\0\nr\\t2\ta:q\\n\tv2\n",
    );
    assert_eq!((r.lines, r.cells, r.skipped_lines), (3, 3, 0));
    assert_eq!(
        d.rcv(),
        rcv(&[
            ("r\t2", "a:q\n", "v2"),
            ("r1", "a", "v1"),
            ("r1", "b:q", "x\ty\nz\\\0"),
        ])
    );
    assert_eq!(r.key_bytes, 2 + 2 + 3);
}

#[test]
fn single_cell_with_timestamps_and_deletes() {
    let d = db(&["a", "b"]);
    d.load(
        "",
        "#timestamp\trow\tcolumn\tvalue\n\
         2020-01-01 00:00:01\tr1\ta\tv1\n\
         2020-01-01 00:00:02\tr1\ta\tv2\n\
         2020-01-01 00:00:01\tr1\tb:x\tbx\n\
         2020-01-01 00:00:01\tr2\ta\tgone\n\
         2020-01-01 00:00:01\tr3\tb:y\tgone\n\
         2020-01-01 00:00:01\tr3\tb:z\tkept\n\
         2020-01-01 00:00:01\tr4\tb\tgone\n",
    );
    assert_eq!(d.scan()[0].3, ns("2020-01-01 00:00:02"));
    assert_eq!(d.scan().len(), 7);
    d.load(
        "",
        "#timestamp\trow\tcolumn\tvalue\n\
         2020-01-01 00:00:01\tr1\ta\t\tDELETE_CELL_VERSION\n\
         2021-01-01 00:00:00\tr2\t\t\tDELETE_ROW\n\
         2021-01-01 00:00:00\tr3\tb:y\t\tDELETE_CELL\n\
         2021-01-01 00:00:00\tr4\tb\t\tDELETE_COLUMN_FAMILY\n",
    );
    assert_eq!(
        d.rcv(),
        rcv(&[
            ("r1", "a", "v2"),
            ("r1", "b:x", "bx"),
            ("r3", "b:z", "kept")
        ])
    );
}

#[test]
fn formats_detected_without_header() {
    let d = db(&["a"]);
    d.load("", "r1\ta\tv1\nr2\ta\tv2\n");
    assert_eq!(d.rcv(), rcv(&[("r1", "a", "v1"), ("r2", "a", "v2")]));
    let d = db(&["a"]);
    d.load("", "2020-01-01 00:00:00\tr1\ta\tv1\n");
    assert_eq!(d.scan()[0].3, ns("2020-01-01"));
    // SINGLE_CELL_FORMAT: a '#' first line is skipped, the format is told by the first line.
    let d = db(&["a"]);
    d.load("SINGLE_CELL_FORMAT", "#r\tc\tv\nr1\ta\tv1\n");
    assert_eq!(d.rcv(), rcv(&[("r1", "a", "v1")]));
    let d = db(&["a"]);
    let e = d.load_err("", "r1\ta\n");
    assert!(e.contains("line 1") && e.contains("detect"), "{e}");
}

const QUERY_LOG: &str = "#anon_id\tquery\titem:rank\tclick_url\n\
    142\twestchester.gov\t1\thttp://w.gov\n\
    217\tlottery\t\t\n\
    217\tvera.org\t3\t\n";

#[test]
fn multi_cell_empty_fields_make_no_cell() {
    let d = db(&["query", "item", "click_url"]);
    let r = d.load("", QUERY_LOG);
    assert_eq!((r.lines, r.cells), (3, 6));
    assert_eq!(
        d.rcv(),
        rcv(&[
            ("142", "query", "westchester.gov"),
            ("142", "item:rank", "1"),
            ("142", "click_url", "http://w.gov"),
            ("217", "query", "vera.org"),
            ("217", "query", "lottery"),
            ("217", "item:rank", "3"),
        ])
    );
}

#[test]
fn row_key_column_joins_and_pads() {
    let d = db(&["query", "item", "click_url"]);
    d.load("ROW_KEY_COLUMN=\"%09anon_id\"+query", QUERY_LOG);
    let rows: Vec<String> = d.rcv().into_iter().map(|c| c.0).collect();
    assert_eq!(
        rows,
        [
            "000000142 westchester.gov",
            "000000142 westchester.gov",
            "000000217 vera.org",
        ]
    );
    // The `lottery` line has no cell left once its query is in the key.
    // Without DUPLICATE_KEY_COLUMNS, query is not stored.
    assert!(d.rcv().iter().all(|c| c.1 != "query"));
    let d = db(&["query", "item", "click_url"]);
    d.load("ROW_KEY_COLUMN=\"%-5anon_id\" + \"%12query\"", QUERY_LOG);
    let rows: Vec<String> = d.rcv().into_iter().map(|c| c.0).collect();
    assert_eq!(rows[0], "  142 westchester.gov");
    assert_eq!(rows.last().unwrap(), "  217 vera.org    ");
    // A line whose key field is empty is bad.
    let e = d.load_err("ROW_KEY_COLUMN=click_url IGNORE_UNKNOWN_COLUMNS", QUERY_LOG);
    assert!(e.contains("line 3: empty row key field 'click_url'"), "{e}");
}

#[test]
fn timestamp_column_and_duplicate_key_columns() {
    let d = db(&["query", "t"]);
    let text = "#anon_id\tquery\tt\n5\tq1\t2006-03-01 07:33:28\n";
    d.load("TIMESTAMP_COLUMN=t", text);
    assert_eq!(
        d.scan(),
        vec![(
            "5".into(),
            "query".into(),
            "q1".into(),
            ns("2006-03-01 07:33:28")
        )]
    );
    let d = db(&["query", "t", "anon_id"]);
    d.load("TIMESTAMP_COLUMN=t DUP_KEY_COLS", text);
    let cols: Vec<String> = d.rcv().into_iter().map(|c| c.1).collect();
    assert_eq!(cols, ["query", "t", "anon_id"]);
    let d = db(&["query", "t"]);
    let e = d.load_err(
        "TIMESTAMP_COLUMN=t",
        "#anon_id\tquery\tt\n5\tq1\tyesterday\n",
    );
    assert!(e.contains("line 2: bad timestamp 'yesterday'"), "{e}");
}

#[test]
fn row_uniquify_chars() {
    let d = db(&["a"]);
    d.load("ROW_UNIQUIFY_CHARS=5", "r\ta\tv1\nr\ta\tv2\n");
    let rows: Vec<String> = d.rcv().into_iter().map(|c| c.0).collect();
    assert_eq!(rows.len(), 2);
    assert_ne!(rows[0], rows[1]);
    for r in rows {
        assert!(r.starts_with("r ") && r.len() == 7, "{r}");
    }
}

#[test]
fn unknown_families() {
    let d = db(&["query"]);
    let e = d.load_err("", QUERY_LOG);
    assert!(e.contains("line 1: unknown family 'item'"), "{e}");
    assert!(e.contains("nothing was loaded"), "{e}");
    let r = d.load("IGNORE_UNKNOWN_CFS", QUERY_LOG);
    assert_eq!(r.cells, 3);
    let d = db(&["a"]);
    let e = d.load_err("", "r1\ta\tv\nr2\tzz:q\tv\n");
    assert!(e.contains("in.tsv: line 2: unknown family 'zz'"), "{e}");
    let r = d.load("IGNORE_UNKNOWN_COLUMNS", "r1\ta\tv\nr2\tzz:q\tv\n");
    assert_eq!((r.cells, r.skipped_lines), (1, 0));
}

#[test]
fn no_escape_and_field_separator() {
    let d = db(&["a"]);
    d.load("NO_ESCAPE", "r\\n\ta\tv\\t\n");
    assert_eq!(d.rcv(), rcv(&[("r\\n", "a", "v\\t")]));
    let d = db(&["a", "b"]);
    d.load("FS=','", "#k,a,b\nr1,x,y\n");
    assert_eq!(d.rcv(), rcv(&[("r1", "a", "x"), ("r1", "b", "y")]));
    let d = db(&["a"]);
    d.load("FS='§'", "r1§a§v\\t1\n");
    assert_eq!(d.rcv(), rcv(&[("r1", "a", "v\t1")]));
}

/// Issue 12: `FS='ab'` was accepted (as a two-byte separator); Hypertable's FS is one character.
#[test]
fn a_field_separator_of_two_characters_is_refused() {
    let d = db(&["a"]);
    let e = d.load_err("FS='::'", "r1::a::v\n");
    assert!(e.contains("FS must be one character, not '::'"), "{e}");
    let e = d.load_err("FS='ab'", "r1aba\n");
    assert!(e.contains("FS must be one character, not 'ab'"), "{e}");
    assert!(d.rcv().is_empty());
}

#[test]
fn no_log_and_header_file() {
    let d = db(&["query", "item", "click_url"]);
    let h = d.file("header.tsv", "anon_id\tquery\titem:rank\tclick_url\n");
    let body = QUERY_LOG.split_once('\n').unwrap().1;
    let r = d.load(&format!("NO_LOG HEADER_FILE=\"{h}\""), body);
    assert_eq!((r.lines, r.cells), (3, 6));
    // With a header file, a bad line's number counts from the first input line.
    let e = d.load_err(&format!("HEADER_FILE=\"{h}\""), "1\ta\tb\tc\n2\tx\n");
    assert!(e.contains("line 2: too few fields"), "{e}");
}

#[test]
fn gzip_and_stdin_sources() {
    let d = db(&["query", "item", "click_url"]);
    let p = d.dir.path().join("in.tsv.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&p).unwrap(),
        flate2::Compression::default(),
    );
    gz.write_all(QUERY_LOG.as_bytes()).unwrap();
    gz.finish().unwrap();
    let r = d
        .run(
            &format!("LOAD DATA INFILE \"{}\" INTO TABLE t", p.display()),
            false,
            None,
        )
        .unwrap();
    assert_eq!(r.cells, 6);
    let d2 = db(&["query", "item", "click_url"]);
    let r = d2
        .run(
            "LOAD DATA INFILE \"-\" INTO TABLE t",
            false,
            Some(QUERY_LOG.as_bytes()),
        )
        .unwrap();
    assert_eq!(r.cells, 6);
    assert_eq!(d.rcv(), d2.rcv());
    let e = d2
        .run(
            "LOAD DATA INFILE \"-\" INTO TABLE t",
            false,
            Some(b"#a\tquery\nk\n"),
        )
        .unwrap_err();
    assert!(
        e.message.starts_with("(stdin): line 2: too few fields"),
        "{}",
        e.message
    );
}

#[test]
fn into_file_writes_the_dump_format() {
    let d = db(&["query", "item", "click_url"]);
    let out = d.dir.path().join("out.tsv");
    let input = d.file("in.tsv", QUERY_LOG);
    // No table is needed for INTO FILE.
    let r = d
        .run(
            &format!(
                "LOAD DATA INFILE \"{input}\" INTO FILE \"{}\"",
                out.display()
            ),
            false,
            None,
        )
        .unwrap();
    assert_eq!(r.cells, 6);
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "#timestamp\trow\tcolumn\tvalue");
    assert_eq!(lines.len(), 7);
    assert!(lines[2].ends_with("\t142\titem:rank\t1"), "{}", lines[2]);
    // Loading the file gives what loading the input gives.
    d.run(
        &format!("LOAD DATA INFILE \"{}\" INTO TABLE t", out.display()),
        false,
        None,
    )
    .unwrap();
    let d2 = db(&["query", "item", "click_url"]);
    d2.load("", QUERY_LOG);
    assert_eq!(d.rcv(), d2.rcv());
}

#[test]
fn bad_lines_stop_or_are_skipped() {
    let text = "#row\tcolumn\tvalue\nr1\ta\tv\nr2\ta\nr3\ta\tv\n\tzz\tv\nr5\ta\tv\n";
    let d = db(&["a"]);
    let e = d.load_err("", text);
    assert!(e.contains("in.tsv: line 3: too few fields"), "{e}");
    assert!(e.contains("loaded lines 1..=2 of"), "{e}");
    assert!(e.contains("the error is at line 3"), "{e}");
    assert_eq!(d.rcv(), rcv(&[("r1", "a", "v")]));
    let d = db(&["a"]);
    let f = d.file("in.tsv", text);
    let r = d
        .run(
            &format!("LOAD DATA INFILE \"{f}\" INTO TABLE t"),
            true,
            None,
        )
        .unwrap();
    assert_eq!((r.lines, r.cells, r.skipped_lines), (5, 3, 2));
    assert!(r.skipped_samples[0].ends_with("line 3: too few fields (2; expected 3)"));
    assert!(
        r.skipped_samples[1].ends_with("line 5: empty row key"),
        "{:?}",
        r.skipped_samples
    );
    let shown = r.to_string();
    assert!(
        shown.contains("Lines skipped:  2") && shown.contains("Total inserts:  3"),
        "{shown}"
    );
}

#[test]
fn a_fatal_error_leaves_exactly_the_lines_before_it() {
    // Several chunks and parser threads: the bad line is far into the file.
    let d = db(&["a", "b"]);
    let bad_at = 150_001u64;
    let mut text = String::from("#row\tcolumn\tvalue\n");
    for i in 2..=200_000u64 {
        if i == bad_at {
            text.push_str("no-tabs-here\n");
        } else {
            text.push_str(&format!(
                "row{i:08}\ta:q\tvalue-of-line-{i}-{}\n",
                "x".repeat(20)
            ));
        }
    }
    let e = d.load_err("", &text);
    assert!(
        e.contains(&format!("line {bad_at}: too few fields"))
            && e.contains(&format!("loaded lines 1..={} of", bad_at - 1)),
        "{e}"
    );
    let cells = d.rcv();
    assert_eq!(cells.len() as u64, bad_at - 2);
    assert_eq!(cells.last().unwrap().0, format!("row{:08}", bad_at - 1));
}

/// An independent reading of the committed sample: split lines by hand.
#[test]
fn testdata_sample_round_trip() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/query-log-1000.tsv");
    let text = std::fs::read_to_string(&path).unwrap();
    let d = db(&["query", "item", "click_url"]);
    let r = d.load("", &text);
    let mut want = Vec::new();
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap()
        .trim_start_matches('#')
        .split('\t')
        .collect();
    for line in lines {
        let f: Vec<&str> = line.split('\t').collect();
        for (i, v) in f.iter().enumerate().skip(1) {
            if !v.is_empty() {
                want.push((f[0].to_string(), header[i].to_string(), v.to_string()));
            }
        }
    }
    assert_eq!(r.cells, want.len() as u64);
    assert_eq!(r.lines, 1000);
    let mut got = d.rcv();
    got.sort();
    want.sort();
    assert_eq!(got, want);
}

fn cell_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            8 => prop::char::range('a', 'z'),
            1 => Just('\t'),
            1 => Just('\n'),
            1 => Just('\\'),
            1 => Just('\0'),
            1 => Just('é'),
        ],
        0..8,
    )
    .prop_map(|v| v.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Random cells written in the 4-field format (escaped) load back identically.
    #[test]
    fn four_field_format_loads_back(
        cells in prop::collection::btree_map(
            (cell_text().prop_filter("rows are not empty", |r| !r.is_empty()),
             prop::sample::select(vec!["a", "b"]), cell_text()),
            (cell_text(), 1i64..4_000_000_000_000_000_000),
            1..40,
        )
    ) {
        let d = db(&["a", "b"]);
        let mut text = String::from("#timestamp\trow\tcolumn\tvalue\n");
        let esc = |s: &str| {
            let mut v = Vec::new();
            hql::load::escape_into(s.as_bytes(), &mut v);
            String::from_utf8(v).unwrap()
        };
        let mut want = Vec::new();
        for ((row, fam, q), (value, ts)) in &cells {
            let col = if q.is_empty() { fam.to_string() } else { format!("{fam}:{}", esc(q)) };
            text.push_str(&format!("{}\t{}\t{col}\t{}\n", hql::load::format_nanos(*ts), esc(row), esc(value)));
            let col = if q.is_empty() { fam.to_string() } else { format!("{fam}:{q}") };
            want.push((row.clone(), col, value.clone(), *ts));
        }
        let r = d.load("", &text);
        prop_assert_eq!(r.cells, cells.len() as u64);
        let mut got = d.scan();
        got.sort();
        want.sort();
        prop_assert_eq!(got, want);
    }
}

#[test]
fn delete_flag_names_are_the_engine_flags() {
    // The dump format's keywords map onto the engine's flags one to one.
    assert_eq!(CellFlag::from_u8(0), Some(CellFlag::DeleteRow));
}

#[test]
fn testdata_gz_sample_loads_like_its_decompressed_text() {
    use std::io::Read;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/query-log-10000.tsv.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let cells: u64 = text
        .lines()
        .skip(1)
        .map(|l| l.split('\t').skip(1).filter(|f| !f.is_empty()).count() as u64)
        .sum();
    let d = db(&["query", "item", "click_url"]);
    let r = d
        .run(
            &format!("LOAD DATA INFILE \"{}\" INTO TABLE t", path.display()),
            false,
            None,
        )
        .unwrap();
    assert_eq!((r.lines, r.cells), (10_000, cells));
    let d2 = db(&["query", "item", "click_url"]);
    d2.load("", &text);
    assert_eq!(d.rcv(), d2.rcv());
}

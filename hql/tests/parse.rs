//! Concrete HQL statements (from HQL.md and Hypertable-style scripts) and the AST they give,
//! parse errors with their positions, and printing back.

use std::time::Duration;

use hql::ast::*;
use hql::{parse_script, parse_statement};

fn parse(s: &str) -> Statement {
    match parse_statement(s) {
        Ok(st) => {
            // Every statement that parses also prints to text that parses back to it.
            let printed = st.to_string();
            assert_eq!(
                parse_statement(&printed).as_ref(),
                Ok(&st),
                "reprint of {s:?} as {printed:?}"
            );
            st
        }
        Err(e) => panic!("{s:?} failed:\n{e}"),
    }
}

fn err(s: &str) -> hql::ParseError {
    match parse_statement(s) {
        Ok(st) => panic!("{s:?} parsed as {st:?}"),
        Err(e) => e,
    }
}

fn fam(name: &str) -> Definition {
    Definition::Family(FamilyDef {
        name: name.into(),
        options: ColumnOptions::default(),
    })
}

fn select(s: &str) -> Select {
    match parse(s) {
        Statement::Select(sel) => sel,
        other => panic!("not a select: {other:?}"),
    }
}

fn create(s: &str) -> (Vec<Definition>, TableOptions) {
    match parse(s) {
        Statement::CreateTable(CreateTable {
            body:
                CreateTableBody::Definitions {
                    definitions,
                    options,
                },
            ..
        }) => (definitions, options),
        other => panic!("not a create table: {other:?}"),
    }
}

fn row(op: RelOp, key: &str) -> RowInterval {
    RowInterval {
        before: None,
        op,
        key: key.into(),
    }
}

// ---- namespaces and simple statements ----

#[test]
fn namespaces() {
    assert_eq!(
        parse("CREATE NAMESPACE /a/b IF NOT EXISTS;"),
        Statement::CreateNamespace {
            name: "/a/b".into(),
            if_not_exists: true
        }
    );
    assert_eq!(
        parse("create database test"),
        Statement::CreateNamespace {
            name: "test".into(),
            if_not_exists: false
        }
    );
    assert_eq!(
        parse("DROP NAMESPACE IF EXISTS 'a/b'"),
        Statement::DropNamespace {
            name: "a/b".into(),
            if_exists: true
        }
    );
    assert_eq!(parse("use \"/\";"), Statement::Use("/".into()));
    assert_eq!(parse("USE test"), Statement::Use("test".into()));
    assert_eq!(parse("get listing"), Statement::GetListing);
    assert_eq!(parse("SHOW TABLES;"), Statement::ShowTables);
}

#[test]
fn table_admin() {
    assert_eq!(
        parse("SHOW CREATE TABLE foo"),
        Statement::ShowCreateTable("foo".into())
    );
    assert_eq!(
        parse("DESCRIBE TABLE WITH IDS foo"),
        Statement::DescribeTable {
            table: "foo".into(),
            with_ids: true
        }
    );
    assert_eq!(
        parse("describe table 'foo'"),
        Statement::DescribeTable {
            table: "foo".into(),
            with_ids: false
        }
    );
    assert_eq!(
        parse("RENAME TABLE a TO b"),
        Statement::RenameTable {
            from: "a".into(),
            to: "b".into()
        }
    );
    assert_eq!(
        parse("DROP TABLE IF EXISTS Pages;"),
        Statement::DropTable {
            table: "Pages".into(),
            if_exists: true
        }
    );
    assert_eq!(
        parse("drop table x"),
        Statement::DropTable {
            table: "x".into(),
            if_exists: false
        }
    );
    assert_eq!(
        parse("EXISTS TABLE foo"),
        Statement::ExistsTable("foo".into())
    );
}

// ---- CREATE TABLE ----

#[test]
fn create_table_query_log() {
    let (defs, opts) = create(r#"CREATE TABLE "query-log" (Query, ItemRank, ClickURL);"#);
    assert_eq!(defs, vec![fam("Query"), fam("ItemRank"), fam("ClickURL")]);
    assert!(opts.is_empty());
    match parse(r#"CREATE TABLE "query-log" (Query)"#) {
        Statement::CreateTable(c) => assert_eq!(c.name, "query-log"),
        _ => unreachable!(),
    }
}

#[test]
fn create_table_options() {
    let (defs, opts) = create(
        "CREATE TABLE IF NOT EXISTS t (
           a MAX_VERSIONS=3 TTL = 2 weeks,
           b REVS 1 TIME_ORDER desc,
           c COUNTER,
           d counter false TTL 30,
           e TTL 1.5 DAY,
           INDEX a,
           QUALIFIER INDEX b,
           ACCESS GROUP g1 (a, b) IN_MEMORY BLOCKSIZE 65536 REPLICATION=3
             COMPRESSOR=\"zlib --best\" BLOOMFILTER='rows+cols --false-positive 0.02 --num-hashes 4'
             MAX_VERSIONS 2,
           ACCESS GROUP g2 IN_MEMORY false (c),
           ACCESS GROUP empty ()
         ) COMPRESSOR = \"none\" GROUP_COMMIT_INTERVAL = 100 DURABILITY sync TTL 1 hour;",
    );
    assert_eq!(defs.len(), 10);
    let Definition::Family(a) = &defs[0] else {
        panic!()
    };
    assert_eq!(a.options.max_versions, Some(3));
    let ttl = a.options.ttl.clone().unwrap();
    assert_eq!(ttl.unit, Some(TimeUnit::Weeks));
    assert_eq!(ttl.seconds(), Some(2 * 604_800));
    let Definition::Family(b) = &defs[1] else {
        panic!()
    };
    assert_eq!(b.options.time_order, Some(TimeOrder::Desc));
    assert_eq!(b.options.max_versions, Some(1));
    let Definition::Family(c) = &defs[2] else {
        panic!()
    };
    assert_eq!(c.options.counter, Some(true));
    let Definition::Family(d) = &defs[3] else {
        panic!()
    };
    assert_eq!(d.options.counter, Some(false));
    assert_eq!(d.options.ttl.as_ref().unwrap().seconds(), Some(30));
    assert_eq!(d.options.ttl.as_ref().unwrap().unit, None);
    let Definition::Family(e) = &defs[4] else {
        panic!()
    };
    assert_eq!(e.options.ttl.as_ref().unwrap().seconds(), Some(129_600));
    assert_eq!(defs[5], Definition::Index("a".into()));
    assert_eq!(defs[6], Definition::QualifierIndex("b".into()));
    let Definition::AccessGroup(g1) = &defs[7] else {
        panic!()
    };
    assert_eq!(g1.name, "g1");
    assert_eq!(g1.families, vec!["a", "b"]);
    assert_eq!(g1.options.in_memory, Some(true));
    assert_eq!(g1.options.blocksize, Some(65536));
    assert_eq!(g1.options.replication, Some(3));
    let comp = g1.options.compressor.clone().unwrap();
    assert_eq!(comp.codec, Codec::Zlib);
    assert_eq!(comp.text, "zlib --best");
    let bloom = g1.options.bloom_filter.clone().unwrap();
    assert_eq!(bloom.mode, BloomFilterMode::RowsCols);
    assert_eq!(bloom.false_positive, Some(0.02));
    assert_eq!(bloom.num_hashes, Some(4));
    assert_eq!(g1.options.column_defaults.max_versions, Some(2));
    let Definition::AccessGroup(g2) = &defs[8] else {
        panic!()
    };
    assert_eq!(g2.options.in_memory, Some(false));
    assert_eq!(g2.families, vec!["c"]);
    let Definition::AccessGroup(empty) = &defs[9] else {
        panic!()
    };
    assert!(empty.families.is_empty());
    assert_eq!(
        opts.group_defaults.compressor.as_ref().map(|c| c.codec),
        Some(Codec::None)
    );
    assert_eq!(opts.group_commit_interval_ms, Some(100));
    assert_eq!(opts.durability, Some(Durability::Sync));
    assert_eq!(
        opts.group_defaults
            .column_defaults
            .ttl
            .as_ref()
            .unwrap()
            .seconds(),
        Some(3600)
    );
}

#[test]
fn create_table_forms() {
    assert_eq!(
        parse("CREATE TABLE t2 LIKE t1"),
        Statement::CreateTable(CreateTable {
            name: "t2".into(),
            if_not_exists: false,
            body: CreateTableBody::Like("t1".into()),
            splits: Vec::new(),
        })
    );
    // Pre-split (ht's extension, Phoenix's spelling), after the options.
    let Statement::CreateTable(c) =
        parse("CREATE TABLE t (a) MAX_VERSIONS=2 SPLIT ON ('g', \"p q\")")
    else {
        panic!()
    };
    assert_eq!(c.splits, vec!["g".to_string(), "p q".to_string()]);
    assert!(matches!(
        parse("CREATE TABLE t2 LIKE t1 SPLIT ON ('m')"),
        Statement::CreateTable(CreateTable { splits, .. }) if splits == ["m"]
    ));
    // Hypertable's older form: options before the name.
    let (defs, opts) = create("CREATE TABLE COMPRESSOR=\"lzo\" foo (a, b)");
    assert_eq!(defs, vec![fam("a"), fam("b")]);
    assert_eq!(
        opts.group_defaults.compressor.map(|c| c.codec),
        Some(Codec::Lzo)
    );
    // Keywords may name families where the grammar is not ambiguous; the printer quotes them.
    let (defs, _) = create("CREATE TABLE t (index, \"access\", counter COUNTER)");
    assert_eq!(defs[0], fam("index"));
    assert_eq!(defs[1], fam("access"));
    // Options of access groups before and after the family list.
    let (defs, _) = create("CREATE TABLE t (a, ACCESS GROUP g BLOCKSIZE 10 (a) IN_MEMORY)");
    let Definition::AccessGroup(g) = &defs[1] else {
        panic!()
    };
    assert_eq!(g.options.blocksize, Some(10));
    assert_eq!(g.options.in_memory, Some(true));
    let (defs, _) = create("create table t ()");
    assert!(defs.is_empty());
    // Every codec Hypertable named.
    for codec in [
        "bmz --fp-len 20",
        "lzo",
        "quicklz",
        "snappy",
        "zlib -9",
        "none",
        "lz4",
    ] {
        let (_, opts) = create(&format!("CREATE TABLE t (a) COMPRESSOR \"{codec}\""));
        assert!(opts.group_defaults.compressor.is_some(), "{codec}");
    }
    let (_, opts) = create("CREATE TABLE t (a) BLOOMFILTER none");
    assert_eq!(
        opts.group_defaults.bloom_filter.map(|b| b.mode),
        Some(BloomFilterMode::None)
    );
}

#[test]
fn create_table_semantic_errors() {
    let e = err("CREATE TABLE t (cf1 TIME_ORDER DESC TIME_ORDER ASC)");
    assert_eq!(
        e.message.as_deref(),
        Some("Multiple specifications of TIME_ORDER option for column 'cf1'")
    );
    assert_eq!((e.line, e.column), (1, 37));
    let e = err("CREATE TABLE t (a MAX_VERSIONS 1 REVS 2)");
    assert!(
        e.to_string()
            .contains("Multiple specifications of MAX_VERSIONS option for column 'a'")
    );
    let e = err("CREATE TABLE t (a, ACCESS GROUP g (a) IN_MEMORY IN_MEMORY)");
    assert!(
        e.to_string()
            .contains("IN_MEMORY option for access group 'g'")
    );
    let e = err("CREATE TABLE t (a) DURABILITY log DURABILITY sync");
    assert!(e.to_string().contains("DURABILITY option for table"));
    let e = err("CREATE TABLE t (c COUNTER MAX_VERSIONS 2)");
    assert!(e.message.unwrap().contains("COUNTER cannot be combined"));
    let e = err("CREATE TABLE t (c TIME_ORDER DESC COUNTER true)");
    assert!(e.message.unwrap().contains("COUNTER cannot be combined"));
    // COUNTER false is fine with anything.
    create("CREATE TABLE t (c COUNTER false MAX_VERSIONS 2)");
    let e = err("CREATE TABLE t (a) COMPRESSOR \"gzip\"");
    assert!(e.message.unwrap().contains("unknown compressor 'gzip'"));
    let e = err("CREATE TABLE t (a) BLOOMFILTER \"cols\"");
    assert!(e.message.unwrap().contains("unknown bloom filter mode"));
    let e = err("CREATE TABLE t (a) DURABILITY always");
    assert!(e.message.unwrap().contains("unknown durability 'always'"));
    let e = err("CREATE TABLE t (a MAX_VERSIONS 99999999999)");
    assert!(e.message.unwrap().contains("out of range"));
}

// ---- ALTER TABLE ----

#[test]
fn alter_table() {
    let s = parse(
        "ALTER TABLE t ADD (d MAX_VERSIONS 2, ACCESS GROUP g (d)) MODIFY (a TTL 3 days) \
         DROP (b, c) DROP INDEX (a) DROP QUALIFIER INDEX (a) RENAME COLUMN FAMILY (e, f);",
    );
    let Statement::AlterTable(a) = s else {
        panic!()
    };
    assert_eq!(a.table, "t");
    assert_eq!(a.actions.len(), 6);
    assert!(matches!(&a.actions[0], AlterAction::Add(d) if d.len() == 2));
    assert!(matches!(&a.actions[1], AlterAction::Modify(d) if d.len() == 1));
    assert_eq!(
        a.actions[2],
        AlterAction::Drop(vec!["b".into(), "c".into()])
    );
    assert_eq!(a.actions[3], AlterAction::DropIndex(vec!["a".into()]));
    assert_eq!(
        a.actions[4],
        AlterAction::DropQualifierIndex(vec!["a".into()])
    );
    assert_eq!(
        a.actions[5],
        AlterAction::RenameColumnFamily {
            from: "e".into(),
            to: "f".into()
        }
    );
    let e = err("ALTER TABLE t");
    assert!(e.expected.contains("'ADD'"), "{e}");
    let e = err("ALTER TABLE t MODIFY (a TTL 1 TTL 2)");
    assert!(
        e.message
            .unwrap()
            .contains("Multiple specifications of TTL")
    );
}

// ---- INSERT and DELETE ----

#[test]
fn insert() {
    let s = parse(
        "INSERT INTO t VALUES ('r1', 'cf:q', 'v1'), (\"2008-01-01 00:00:01\", 'r2', 'cf', 'v\\t2'), \
         (GUID(), 'c:', GUID()), (123456789, 'r3', cf:x, 'v');",
    );
    let Statement::Insert(ins) = s else { panic!() };
    assert_eq!(ins.table, "t");
    assert_eq!(
        ins.values[0],
        InsertValue {
            timestamp: None,
            row: CellValue::Literal("r1".into()),
            column: ColumnRef {
                family: "cf".into(),
                qualifier: Some("q".into())
            },
            value: CellValue::Literal("v1".into()),
        }
    );
    let v1 = &ins.values[1];
    assert_eq!(
        v1.timestamp.as_ref().unwrap().nanos,
        Some(1_199_145_601_000_000_000)
    );
    assert_eq!(v1.column.qualifier, None);
    assert_eq!(v1.value, CellValue::Literal("v\t2".into()));
    assert_eq!(ins.values[2].row, CellValue::Guid);
    assert_eq!(ins.values[2].column.qualifier, Some(String::new()));
    assert_eq!(ins.values[2].value, CellValue::Guid);
    assert_eq!(
        ins.values[3].timestamp.as_ref().unwrap().nanos,
        Some(123_456_789)
    );
    assert_eq!(ins.values[3].column.qualifier.as_deref(), Some("x"));
    // A bad timestamp is kept for the executor to report.
    let Statement::Insert(ins) = parse("INSERT INTO t VALUES ('yesterday', 'r', 'c', 'v')") else {
        panic!()
    };
    assert_eq!(ins.values[0].timestamp.as_ref().unwrap().nanos, None);
    assert_eq!(ins.values[0].timestamp.as_ref().unwrap().text, "yesterday");
    let e = err("INSERT INTO t VALUES ('r', 'c')");
    assert!(e.message.unwrap().contains("3 or 4 values"));
}

#[test]
fn delete() {
    assert_eq!(
        parse("DELETE * FROM t WHERE ROW = 'r' TIMESTAMP '2020-01-01 00:00:00';"),
        Statement::Delete(Delete {
            columns: DeleteColumns::All,
            table: "t".into(),
            row: "r".into(),
            time: Some(DeleteTime::Timestamp(Timestamp {
                text: "2020-01-01 00:00:00".into(),
                nanos: Some(1_577_836_800_000_000_000)
            })),
        })
    );
    let Statement::Delete(d) = parse(
        "delete a, b:q, \"c:r s\" from t where row = \"x\" VERSION '2020-01-01 00:00:00.000000001'",
    ) else {
        panic!()
    };
    assert_eq!(
        d.columns,
        DeleteColumns::List(vec![
            ColumnRef {
                family: "a".into(),
                qualifier: None
            },
            ColumnRef {
                family: "b".into(),
                qualifier: Some("q".into())
            },
            ColumnRef {
                family: "c".into(),
                qualifier: Some("r s".into())
            },
        ])
    );
    assert!(matches!(
        d.time,
        Some(DeleteTime::Version(Timestamp {
            nanos: Some(1_577_836_800_000_000_001),
            ..
        }))
    ));
    let e = err("DELETE * FROM t WHERE ROW > 'r'");
    assert_eq!(e.expected, "'='");
}

// ---- SELECT ----

#[test]
fn select_all_options() {
    let s = select(
        "SELECT * FROM t WHERE ROW =^ 'a' AND TIMESTAMP < '2008-01-01 00:00:00' LIMIT 3 REVS 2 DISPLAY_TIMESTAMPS;",
    );
    assert_eq!(
        s.predicates[0],
        Predicate::Row(vec![row(RelOp::StartsWith, "a")])
    );
    let Predicate::Timestamp(tp) = &s.predicates[1] else {
        panic!()
    };
    assert_eq!(tp.op, RelOp::Lt);
    assert_eq!(tp.ts.nanos, Some(1_199_145_600_000_000_000));
    assert_eq!(s.options.limit, Some(3));
    assert_eq!(s.options.max_versions, Some(2));
    assert!(s.options.display_timestamps);

    let s = select(
        "select a from t MAX_VERSIONS = 1 LIMIT=5 CELL_LIMIT 6 CELL_LIMIT_PER_FAMILY 7 OFFSET 8 \
         INTO FILE \"fs:///tmp/out.gz\" DISPLAY_REVISIONS KEYS_ONLY NOESCAPE RETURN_DELETES NO_CACHE \
         SCAN_AND_FILTER_ROWS FS=','",
    );
    let o = &s.options;
    assert_eq!(
        (
            o.max_versions,
            o.limit,
            o.cell_limit,
            o.cell_limit_per_family,
            o.offset
        ),
        (Some(1), Some(5), Some(6), Some(7), Some(8))
    );
    assert_eq!(o.into_file.as_deref(), Some("fs:///tmp/out.gz"));
    assert_eq!(
        FileScheme::split(o.into_file.as_deref().unwrap()),
        (FileScheme::Fs, "/tmp/out.gz")
    );
    assert!(o.display_revisions && o.keys_only && o.no_escape && o.return_deletes);
    assert!(o.no_cache && o.scan_and_filter_rows);
    assert_eq!(o.field_separator.as_deref(), Some(","));
    let s = select("SELECT * FROM t CELL_OFFSET 2");
    assert_eq!(s.options.cell_offset, Some(2));
}

#[test]
fn select_columns() {
    let s = select("SELECT CELLS a, b:q, c:^pre, d:/^x[0-9]+\\/y/, 'e':\"q r\", \"f:g\" FROM t");
    assert!(s.cells);
    assert_eq!(
        s.columns,
        Columns::List(vec![
            ColumnSelector::Family("a".into()),
            ColumnSelector::Qualifier {
                family: "b".into(),
                qualifier: "q".into()
            },
            ColumnSelector::QualifierPrefix {
                family: "c".into(),
                prefix: "pre".into()
            },
            ColumnSelector::QualifierRegex {
                family: "d".into(),
                regex: "^x[0-9]+/y".into()
            },
            ColumnSelector::Qualifier {
                family: "e".into(),
                qualifier: "q r".into()
            },
            ColumnSelector::Qualifier {
                family: "f".into(),
                qualifier: "g".into()
            },
        ])
    );
    // `cells` alone is a column.
    let s = select("SELECT cells FROM t");
    assert!(!s.cells);
    assert_eq!(
        s.columns,
        Columns::List(vec![ColumnSelector::Family("cells".into())])
    );
}

#[test]
fn select_row_predicates() {
    let s = select("SELECT CELLS * FROM t WHERE ('a' < ROW < 'c' OR ROW = 'x');");
    assert_eq!(
        s.predicates,
        vec![Predicate::Row(vec![
            RowInterval {
                before: Some(("a".into(), RelOp::Lt)),
                op: RelOp::Lt,
                key: "c".into()
            },
            row(RelOp::Eq, "x"),
        ])]
    );
    let s = select("SELECT * FROM t WHERE ROW >= 'a' AND ROW <= \"b\" AND ROW REGEXP \"^a.*\\d\"");
    assert_eq!(s.predicates.len(), 3);
    assert_eq!(s.predicates[0], Predicate::Row(vec![row(RelOp::Ge, "a")]));
    assert_eq!(s.predicates[1], Predicate::Row(vec![row(RelOp::Le, "b")]));
    assert_eq!(s.predicates[2], Predicate::RowRegexp("^a.*\\d".into()));
    let s = select("SELECT * FROM t WHERE ROW > 'c' AND ROW < 'd'");
    assert_eq!(s.predicates[0], Predicate::Row(vec![row(RelOp::Gt, "c")]));
    assert_eq!(s.predicates[1], Predicate::Row(vec![row(RelOp::Lt, "d")]));
    assert_eq!(
        select("SELECT * FROM t WHERE ROW == 'e'").predicates[0],
        Predicate::Row(vec![row(RelOp::Eq, "e")])
    );
    // Hypertable's rule: ANDed ROW predicates bound each side of the interval once.
    for bad in [
        "SELECT * FROM t WHERE ROW > 'a' AND ROW >= 'b'",
        "SELECT * FROM t WHERE ROW <= 'a' AND ROW < 'b'",
        "SELECT * FROM t WHERE ROW = 'a' AND ROW < 'b'",
        "SELECT * FROM t WHERE ROW =^ 'a' AND ROW > 'b'",
        "SELECT * FROM t WHERE 'a' < ROW < 'c' AND ROW > 'b'",
    ] {
        assert_eq!(
            err(bad).message.as_deref(),
            Some("Bad row expressions."),
            "{bad}"
        );
    }
    assert_eq!(
        err("SELECT * FROM t WHERE 'x' =^ ROW").message.as_deref(),
        Some("Bad use of operator (=^)")
    );
}

#[test]
fn select_cell_timestamp_value_predicates() {
    let s = select(
        "SELECT * FROM t WHERE 'r1','a:x' <= CELL < 'r2','b' AND ('2008-01-01' <= TIMESTAMP < '2009-01-01')",
    );
    let s2 = select(
        "SELECT * FROM t WHERE ('r1','a' < CELL <= 'r2','b' OR CELL = 'r3','c') AND VALUE REGEXP 'v.*'",
    );
    assert_eq!(
        s.predicates[0],
        Predicate::Cell(vec![CellInterval {
            before: Some((
                CellKey {
                    row: "r1".into(),
                    column: "a:x".into()
                },
                RelOp::Le
            )),
            op: RelOp::Lt,
            cell: CellKey {
                row: "r2".into(),
                column: "b".into()
            },
        }])
    );
    let Predicate::Cell(cells) = &s2.predicates[0] else {
        panic!()
    };
    assert_eq!(cells.len(), 2);
    assert_eq!(s2.predicates[1], Predicate::ValueRegexp("v.*".into()));
    // Each side of the time range is set once (Hypertable's rule).
    let s3 = select("SELECT * FROM t WHERE TIMESTAMP > '2008' AND TIMESTAMP < '2009'");
    assert_eq!(s3.predicates.len(), 2);
    for bad in [
        "SELECT * FROM t WHERE TIMESTAMP > '2008' AND TIMESTAMP >= '2009'",
        "SELECT * FROM t WHERE TIMESTAMP = '2008' AND TIMESTAMP < '2009'",
        "SELECT * FROM t WHERE '2007' < TIMESTAMP < '2010' AND TIMESTAMP < '2009'",
    ] {
        assert_eq!(
            err(bad).message.as_deref(),
            Some("Bad timestamp expression"),
            "{bad}"
        );
    }
}

#[test]
fn select_column_predicates() {
    let s = select(
        "SELECT CELLS * FROM t WHERE a = \"v\" OR b:q =^ 'p' OR c =~ /^x\\// OR REGEXP(d:e, \"re\") OR EXISTS(f:g) \
         AND (h = 'x' OR EXISTS(i))",
    );
    let cref = |f: &str, q: Option<&str>| ColumnRef {
        family: f.into(),
        qualifier: q.map(Into::into),
    };
    assert_eq!(
        s.predicates,
        vec![
            Predicate::Columns(vec![
                ColumnPredicate::ValueEquals {
                    column: cref("a", None),
                    value: "v".into()
                },
                ColumnPredicate::ValuePrefix {
                    column: cref("b", Some("q")),
                    prefix: "p".into()
                },
                ColumnPredicate::ValueRegexp {
                    column: cref("c", None),
                    regex: "^x/".into()
                },
                ColumnPredicate::ValueRegexp {
                    column: cref("d", Some("e")),
                    regex: "re".into()
                },
                ColumnPredicate::Exists(cref("f", Some("g"))),
            ]),
            Predicate::Columns(vec![
                ColumnPredicate::ValueEquals {
                    column: cref("h", None),
                    value: "x".into()
                },
                ColumnPredicate::Exists(cref("i", None)),
            ]),
        ]
    );
}

#[test]
fn select_option_errors() {
    let e = err("SELECT * FROM t OFFSET 1 CELL_OFFSET 2");
    assert_eq!(
        e.message.as_deref(),
        Some("SELECT CELL_OFFSET predicate not allowed in combination with OFFSET.")
    );
    assert_eq!(e.column, 26);
    let e = err("SELECT * FROM t LIMIT 1 LIMIT 2");
    assert_eq!(
        e.message.as_deref(),
        Some("SELECT LIMIT predicate multiply defined.")
    );
    let e = err("SELECT * FROM t LIMIT x");
    assert_eq!(e.expected, "'=' or number");
    assert_eq!(e.found, "'x'");
}

// ---- LOAD DATA and DUMP TABLE ----

#[test]
fn load_data() {
    let Statement::LoadData(l) =
        parse("LOAD DATA INFILE ROW_KEY_COLUMN=\"%09anon_id\"+query \"data.tsv.gz\" INTO TABLE t;")
    else {
        panic!()
    };
    assert_eq!(
        l.options.row_key_columns,
        vec![
            RowKeyColumn {
                name: "anon_id".into(),
                format: Some(KeyFormat {
                    width: 9,
                    justify: Justify::RightZero
                })
            },
            RowKeyColumn {
                name: "query".into(),
                format: None
            },
        ]
    );
    assert_eq!(l.source, DataSource::File("data.tsv.gz".into()));
    assert_eq!(l.target, LoadTarget::Table("t".into()));

    let Statement::LoadData(l) = parse(
        "load data infile ROW_KEY_COLUMN = %-5a + '%7b' TIMESTAMP_COLUMN=ts HEADER_FILE='h.txt' \
         ROW_UNIQUIFY_CHARS=21 DUP_KEY_COLS IGNORE_UNKNOWN_CFS SINGLE_CELL_FORMAT NO_ESCAPE FS='|' NO_LOG \
         \"-\" INTO FILE 'file:///tmp/x'",
    ) else {
        panic!()
    };
    let o = &l.options;
    assert_eq!(
        o.row_key_columns[0].format.map(|f| (f.width, f.justify)),
        Some((5, Justify::RightSpace))
    );
    assert_eq!(
        o.row_key_columns[1].format.map(|f| (f.width, f.justify)),
        Some((7, Justify::LeftSpace))
    );
    assert_eq!(o.timestamp_column.as_deref(), Some("ts"));
    assert_eq!(o.header_file.as_deref(), Some("h.txt"));
    assert_eq!(o.row_uniquify_chars, Some(21));
    assert!(o.duplicate_key_columns && o.ignore_unknown_columns && o.single_cell_format);
    assert!(o.no_escape && o.no_log);
    assert_eq!(o.field_separator.as_deref(), Some("|"));
    assert_eq!(l.source, DataSource::Stdin);
    assert_eq!(l.target, LoadTarget::File("file:///tmp/x".into()));
    let e = err("LOAD DATA INFILE ROW_UNIQUIFY_CHARS=22 'f' INTO TABLE t");
    assert!(e.message.unwrap().contains("at most 21"));
    let e = err("LOAD DATA INFILE 'f' INTO t");
    assert_eq!(e.expected, "'TABLE' or 'FILE'");
}

#[test]
fn dump_table() {
    let Statement::DumpTable(d) = parse(
        "DUMP TABLE t COLUMNS a, b:q WHERE ROW > 'x' MAX_VERSIONS 1 BUCKETS 4 INTO FILE 'd.gz' NO_TIMESTAMPS FS=';'",
    ) else {
        panic!()
    };
    assert_eq!(d.table, "t");
    assert!(matches!(&d.columns, Columns::List(l) if l.len() == 2));
    assert_eq!(d.predicates.len(), 1);
    assert_eq!(d.max_versions, Some(1));
    assert_eq!(d.buckets, Some(4));
    assert_eq!(d.into_file.as_deref(), Some("d.gz"));
    assert!(d.no_timestamps);
    assert_eq!(d.field_separator.as_deref(), Some(";"));
    assert_eq!(
        parse("dump table t"),
        Statement::DumpTable(DumpTable {
            table: "t".into(),
            ..DumpTable::default()
        })
    );
}

// ---- administration and shell ----

#[test]
fn administration() {
    assert_eq!(
        parse("COMPACT TYPE=MAJOR TABLE t \"row5\""),
        Statement::Compact(Compact {
            kind: Some(CompactionType::Major),
            target: CompactTarget::Table {
                table: "t".into(),
                row: Some("row5".into())
            }
        })
    );
    assert_eq!(
        parse("compact ranges metadata|user"),
        Statement::Compact(Compact {
            kind: None,
            target: CompactTarget::Ranges(vec![RangeType::Metadata, RangeType::User])
        })
    );
    assert_eq!(
        parse("WAIT FOR MAINTENANCE;"),
        Statement::WaitForMaintenance
    );
    assert_eq!(parse("BALANCE"), Statement::Balance { algorithm: None });
    assert_eq!(
        parse("BALANCE ALGORITHM = even_ranges"),
        Statement::Balance {
            algorithm: Some("even_ranges".into())
        }
    );
    assert_eq!(parse("status"), Statement::Status);
    assert_eq!(parse("SHUTDOWN;"), Statement::Shutdown);
    assert_eq!(
        parse("SET a = 1, b = 'x y', c = on"),
        Statement::Set(vec![
            SetVariable {
                name: "a".into(),
                value: "1".into()
            },
            SetVariable {
                name: "b".into(),
                value: "x y".into()
            },
            SetVariable {
                name: "c".into(),
                value: "on".into()
            },
        ])
    );
}

#[test]
fn shell_commands() {
    assert_eq!(parse("help"), Statement::Help(None));
    assert_eq!(
        parse("help  CREATE   table;"),
        Statement::Help(Some("create table".into()))
    );
    assert_eq!(parse("\\h select"), Statement::Help(Some("select".into())));
    assert_eq!(parse("quit"), Statement::Quit);
    assert_eq!(parse("exit;"), Statement::Quit);
    assert_eq!(
        parse("source /tmp/x.hql"),
        Statement::Source("/tmp/x.hql".into())
    );
    assert_eq!(
        parse("source 'my file.hql'"),
        Statement::Source("my file.hql".into())
    );
    assert_eq!(parse("clear"), Statement::Clear);
    assert_eq!(parse("print"), Statement::Print(None));
    assert_eq!(parse("print 'hi'"), Statement::Print(Some("hi".into())));
    assert_eq!(parse("pause 3;"), Statement::Pause(Duration::from_secs(3)));
    assert_eq!(
        parse("PAUSE 0.25"),
        Statement::Pause(Duration::from_millis(250))
    );
}

// ---- lexical matters ----

#[test]
fn case_comments_and_escapes() {
    let s = select("sElEcT * fRoM t # comment\n  # another\n wHeRe row = 'a\\'b\\\\c\\n'");
    assert_eq!(
        s.predicates,
        vec![Predicate::Row(vec![row(RelOp::Eq, "a'b\\c\n")])]
    );
    let s = select("SELECT * FROM t WHERE ROW = \"say \\\"hi\\\"\"");
    assert_eq!(
        s.predicates,
        vec![Predicate::Row(vec![row(RelOp::Eq, "say \"hi\"")])]
    );
}

// ---- errors ----

#[test]
fn error_positions_and_display() {
    let e = err("CREATE TABEL foo (a);");
    assert_eq!((e.line, e.column), (1, 8));
    assert_eq!(e.expected, "'NAMESPACE', 'DATABASE' or 'TABLE'");
    assert_eq!(e.found, "'TABEL'");
    assert_eq!(e.statement, "CREATE TABEL foo (a);");
    assert_eq!(
        e.to_string(),
        "parse error at line 1, column 8: expected 'NAMESPACE', 'DATABASE' or 'TABLE', found 'TABEL'\n  CREATE TABEL foo (a);\n         ^"
    );

    let e = err("SELEKT * FROM t");
    assert_eq!((e.line, e.column), (1, 1));
    assert_eq!(e.expected, "statement");

    let e = err("SELECT *\nFROM t\nWHERE ROW = ");
    assert_eq!((e.line, e.column), (3, 13));
    assert_eq!(e.expected, "string");
    assert_eq!(e.found, "end of input");

    let e = err("SELECT * FROM t WHERE ROW = 'a");
    assert_eq!(e.message.as_deref(), Some("unterminated string"));
    assert_eq!(e.column, 29);

    let e = err("SHOW TABLES extra");
    assert_eq!(e.expected, "';'");
    assert_eq!(e.found, "'extra'");

    let e = err("SHOW TABLES; SHOW TABLES");
    assert_eq!(e.expected, "end of input");

    let e = err("SELECT * FROM t LIMT 3");
    assert_eq!(e.column, 17);
    assert!(e.expected.starts_with("'WHERE', 'LIMIT'"), "{}", e.expected);

    let e = err("");
    assert_eq!(e.expected, "statement");
    assert_eq!(e.found, "end of input");
}

#[test]
fn scripts() {
    let script = "# a test script\nUSE '/';\n\nCREATE TABLE t (a, b);\n  INSERT INTO t VALUES ('r', 'a', 'v');\n# trailing comment\nSELECT * FROM t;\nquit";
    let stmts = parse_script(script).unwrap();
    assert_eq!(stmts.len(), 5);
    let texts: Vec<&str> = stmts.iter().map(|(_, r)| &script[r.clone()]).collect();
    assert_eq!(
        texts,
        vec![
            "USE '/';",
            "CREATE TABLE t (a, b);",
            "INSERT INTO t VALUES ('r', 'a', 'v');",
            "SELECT * FROM t;",
            "quit"
        ]
    );
    assert_eq!(stmts[4].0, Statement::Quit);

    let e = parse_script("USE a;\nSELECT * FROM t\n  WHERE ROW = 'x' LIMIT -1;\nSHOW TABLES;")
        .unwrap_err();
    assert_eq!((e.line, e.column), (3, 25));
    assert_eq!(e.statement, "SELECT * FROM t\n  WHERE ROW = 'x' LIMIT -1;");
    assert!(
        e.to_string()
            .ends_with("  WHERE ROW = 'x' LIMIT -1;\n                          ^"),
        "{e}"
    );

    // Statements may share a line and strings may hold semicolons.
    let stmts = parse_script("SHOW TABLES; SELECT * FROM t WHERE ROW = ';'; ;").unwrap();
    assert_eq!(stmts.len(), 2);
    assert_eq!(parse_script("  \n# only comments\n").unwrap(), vec![]);
}

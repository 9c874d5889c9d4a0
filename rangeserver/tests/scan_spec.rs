//! Scan predicates and limits through the engine: intervals, columns, regexes, limits, offsets,
//! KEYS_ONLY and RETURN_DELETES, across a range boundary.

use std::ops::Bound;
use std::sync::Arc;

use common::TableSchema;
use common::key::CellFlag;
use dfs_broker::LocalFs;
use rangeserver::engine::{CompactionKind, Engine, EngineOptions, Mutation};
use rangeserver::scan::spec::{
    CellInterval, CellPos, ColumnSelector, QualifierMatch, RowInterval, ScanSpec,
};

struct Fixture {
    _rt: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
    e: Engine,
}

/// Rows r00..r19, families a (1) and b (2), qualifiers q0..q2 in a, x in b; split at r10 and half
/// the data flushed, so scans cross a range boundary and merge caches with stores.
fn fixture() -> Fixture {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let e = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone()).unwrap();
    let mut s = TableSchema::new(3, "/scan");
    s.add_family("a");
    s.add_family("b");
    e.create_table(s).unwrap();
    let mut muts = Vec::new();
    for r in 0..20 {
        for q in 0..3 {
            muts.push(Mutation::insert(
                format!("r{r:02}"),
                1,
                format!("q{q}"),
                format!("v{r}-{q}"),
            ));
        }
        muts.push(Mutation::insert(
            format!("r{r:02}"),
            2,
            "x",
            format!("b{r}"),
        ));
    }
    let (first, second) = muts.split_at(40);
    e.apply(3, first).unwrap();
    e.compact(Some(3), CompactionKind::Minor).unwrap();
    e.apply(3, second).unwrap();
    e.split(3, b"r10").unwrap();
    Fixture {
        _rt: rt,
        _dir: dir,
        e,
    }
}

fn scan(f: &Fixture, spec: ScanSpec) -> Vec<String> {
    f.e.scan(3, &spec)
        .unwrap()
        .collect_all()
        .unwrap()
        .into_iter()
        .map(|c| {
            format!(
                "{}/{}:{}={}",
                String::from_utf8_lossy(&c.key.row),
                c.key.family,
                String::from_utf8_lossy(&c.key.qualifier),
                String::from_utf8_lossy(&c.value)
            )
        })
        .collect()
}

#[test]
fn row_intervals_and_limits_apply_per_interval() {
    let f = fixture();
    let all = scan(&f, ScanSpec::default());
    assert_eq!(all.len(), 80);
    let spec = ScanSpec {
        row_intervals: vec![
            RowInterval {
                start: Bound::Included(b"r08".to_vec()),
                end: Bound::Excluded(b"r12".to_vec()),
            },
            RowInterval::row(b"r15".to_vec()),
        ],
        ..Default::default()
    };
    assert_eq!(scan(&f, spec.clone()).len(), 5 * 4);
    let limited = scan(
        &f,
        ScanSpec {
            row_limit: 1,
            ..spec.clone()
        },
    );
    assert_eq!(limited.len(), 8, "one row per interval: {limited:?}");
    assert!(
        limited[0].starts_with("r08/") && limited[4].starts_with("r15/"),
        "{limited:?}"
    );
    let offset = scan(
        &f,
        ScanSpec {
            row_offset: 3,
            ..spec.clone()
        },
    );
    assert_eq!(
        offset.len(),
        4,
        "r11 only, r15's interval has one row: {offset:?}"
    );
    let cells = scan(
        &f,
        ScanSpec {
            cell_limit: 3,
            cell_offset: 2,
            ..spec
        },
    );
    assert_eq!(
        cells,
        [
            "r08/1:q2=v8-2",
            "r08/2:x=b8",
            "r09/1:q0=v9-0",
            "r15/1:q2=v15-2",
            "r15/2:x=b15"
        ]
    );
}

#[test]
fn prefix_regex_and_exclusive_bounds() {
    let f = fixture();
    let got = scan(
        &f,
        ScanSpec {
            row_intervals: vec![RowInterval::prefix(b"r1".to_vec())],
            ..Default::default()
        },
    );
    assert_eq!(got.len(), 40);
    let got = scan(
        &f,
        ScanSpec {
            row_intervals: vec![RowInterval {
                start: Bound::Excluded(b"r18".to_vec()),
                end: Bound::Unbounded,
            }],
            ..Default::default()
        },
    );
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|c| c.starts_with("r19/")));
    let got = scan(
        &f,
        ScanSpec {
            row_regex: Some(regex::bytes::Regex::new("^r0[35]$").unwrap()),
            ..Default::default()
        },
    );
    assert_eq!(got.len(), 8);
    let got = scan(
        &f,
        ScanSpec {
            value_regex: Some(regex::bytes::Regex::new("^b1[0-9]$").unwrap()),
            ..Default::default()
        },
    );
    assert_eq!(got.len(), 10);
}

#[test]
fn column_selectors() {
    let f = fixture();
    let sel = |family, qualifier| ColumnSelector { family, qualifier };
    let got = scan(
        &f,
        ScanSpec {
            columns: vec![sel(2, QualifierMatch::All)],
            ..Default::default()
        },
    );
    assert_eq!(got.len(), 20);
    let got = scan(
        &f,
        ScanSpec {
            columns: vec![sel(1, QualifierMatch::Exact(b"q1".to_vec()))],
            ..Default::default()
        },
    );
    assert_eq!(got.len(), 20);
    assert!(got.iter().all(|c| c.contains(":q1=")));
    let got = scan(
        &f,
        ScanSpec {
            columns: vec![
                sel(
                    1,
                    QualifierMatch::Regex(regex::bytes::Regex::new("^q[02]$").unwrap()),
                ),
                sel(2, QualifierMatch::Prefix(b"x".to_vec())),
            ],
            ..Default::default()
        },
    );
    assert_eq!(got.len(), 60);
    let got = scan(
        &f,
        ScanSpec {
            cell_limit_per_family: 1,
            ..Default::default()
        },
    );
    assert_eq!(got.len(), 40);
}

#[test]
fn cell_intervals() {
    let f = fixture();
    let pos = |r: &str, fam, q: &str| CellPos {
        row: r.as_bytes().to_vec(),
        family: fam,
        qualifier: q.as_bytes().to_vec(),
    };
    let got = scan(
        &f,
        ScanSpec {
            cell_intervals: vec![CellInterval {
                start: Bound::Included(pos("r09", 1, "q1")),
                end: Bound::Included(pos("r10", 1, "q0")),
            }],
            ..Default::default()
        },
    );
    assert_eq!(
        got,
        [
            "r09/1:q1=v9-1",
            "r09/1:q2=v9-2",
            "r09/2:x=b9",
            "r10/1:q0=v10-0"
        ]
    );
}

#[test]
fn keys_only_return_deletes_and_versions() {
    let f = fixture();
    let e = &f.e;
    e.apply(
        3,
        &[Mutation::delete(CellFlag::DeleteCell, "r02", 1, "q0", None)],
    )
    .unwrap();
    let one_row = ScanSpec {
        row_intervals: vec![RowInterval::row(b"r02".to_vec())],
        ..Default::default()
    };
    assert_eq!(scan(&f, one_row.clone()).len(), 3);
    let with_deletes = e
        .scan(
            3,
            &ScanSpec {
                return_deletes: true,
                ..one_row.clone()
            },
        )
        .unwrap()
        .collect_all()
        .unwrap();
    assert_eq!(with_deletes.len(), 4);
    assert_eq!(with_deletes[0].key.flag, CellFlag::DeleteCell);
    let keys = e
        .scan(
            3,
            &ScanSpec {
                keys_only: true,
                ..one_row.clone()
            },
        )
        .unwrap()
        .collect_all()
        .unwrap();
    assert!(keys.iter().all(|c| c.value.is_empty()) && keys.len() == 3);
    // Versions: three more writes to one cell; MAX_VERSIONS in the scan limits them.
    for v in 0..3 {
        e.apply(3, &[Mutation::insert("r03", 2, "x", format!("new{v}"))])
            .unwrap();
    }
    let spec = ScanSpec {
        row_intervals: vec![RowInterval::row(b"r03".to_vec())],
        columns: vec![ColumnSelector {
            family: 2,
            qualifier: QualifierMatch::All,
        }],
        ..Default::default()
    };
    assert_eq!(
        scan(&f, spec.clone()),
        ["r03/2:x=new2", "r03/2:x=new1", "r03/2:x=new0", "r03/2:x=b3"]
    );
    assert_eq!(
        scan(
            &f,
            ScanSpec {
                max_versions: 2,
                ..spec.clone()
            }
        ),
        ["r03/2:x=new2", "r03/2:x=new1"]
    );
    e.compact(Some(3), CompactionKind::Major).unwrap();
    assert_eq!(
        scan(
            &f,
            ScanSpec {
                max_versions: 1,
                ..spec
            }
        ),
        ["r03/2:x=new2"]
    );
    assert_eq!(scan(&f, one_row).len(), 3);
}

#[test]
fn timestamp_interval() {
    let f = fixture();
    let e = &f.e;
    for (ts, v) in [(100, "old"), (200, "mid"), (300, "new")] {
        let mut m = Mutation::insert("t1", 2, "x", v);
        m.timestamp = Some(ts);
        e.apply(3, &[m]).unwrap();
    }
    let spec = |start, end| ScanSpec {
        row_intervals: vec![RowInterval::row(b"t1".to_vec())],
        time_start: start,
        time_end: end,
        ..Default::default()
    };
    assert_eq!(scan(&f, spec(150, 301)), ["t1/2:x=new", "t1/2:x=mid"]);
    assert_eq!(scan(&f, spec(i64::MIN, 200)), ["t1/2:x=old"]);
    assert_eq!(
        scan(
            &f,
            ScanSpec {
                max_versions: 1,
                ..spec(i64::MIN, 250)
            }
        ),
        ["t1/2:x=mid"]
    );
}

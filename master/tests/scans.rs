//! Scans with value predicates, scan iterators and key sets over a table whose ranges sit on two
//! range servers: the predicates travel in the scan request, run in the servers, and the cluster
//! client's limits and offsets count what they let through, so every scan returns exactly what
//! the embedded database returns for the same cells (and what the predicates' rule says).

mod support;

use client::cluster::ClusterClient;
use client::{Client, Mutation, ScanSpec};
use common::iterators::{ScanIterator, ValuePredicate, ValuePredicates, ValueTest};
use common::scan_spec::{ColumnSelector, QualifierMatch, RowInterval};
use embedded::{EmbeddedClient, EmbeddedOptions};
use rangeserver::iterators::Registry;
use rangeserver::server::RangeServerOptions;
use support::{TestCluster, wait_for};

const ROWS: usize = 200;

/// Row, family, qualifier, value (all ASCII here, as text for readable failures).
type C = (String, u8, String, String);

fn schema() -> common::TableSchema {
    let mut s = common::TableSchema::new(0, "");
    s.add_family("a");
    s.add_family("b");
    s
}

/// `a:` = `x{i % 7}` on every row, `a:z` = `zz{i % 4}` on every 4th, `b:q{i % 2}` =
/// `tag{i % 5}` on every 3rd.
fn cells() -> Vec<Mutation> {
    let mut out = Vec::new();
    for i in 0..ROWS {
        let row = format!("row{i:04}");
        out.push(Mutation::insert(row.clone(), 1, "", format!("x{}", i % 7)));
        if i % 4 == 0 {
            out.push(Mutation::insert(
                row.clone(),
                1,
                "z",
                format!("zz{}", i % 3),
            ));
        }
        if i % 3 == 0 {
            out.push(Mutation::insert(
                row.clone(),
                2,
                format!("q{}", i % 2),
                format!("tag{}", i % 5),
            ));
        }
    }
    out
}

fn load(c: &dyn Client, table: &str) {
    let mut m = c.mutator(table).expect("mutator");
    for cell in cells() {
        m.set(cell).expect("set");
    }
    m.flush().expect("flush");
}

fn scan(c: &dyn Client, table: &str, spec: &ScanSpec) -> client::Result<Vec<C>> {
    let mut sc = c.scanner(table, spec.clone())?;
    let mut out = Vec::new();
    while let Some(cell) = sc.next_cell()? {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        out.push((
            text(&cell.key.row),
            cell.key.family,
            text(&cell.key.qualifier),
            text(&cell.value),
        ));
    }
    Ok(out)
}

fn passes(t: &ValuePredicate, c: &C) -> bool {
    t.family == c.1
        && t.qualifier.as_ref().is_none_or(|q| q == c.2.as_bytes())
        && match &t.test {
            ValueTest::Equals(v) => c.3.as_bytes() == v.as_slice(),
            ValueTest::Prefix(p) => c.3.as_bytes().starts_with(p),
            ValueTest::Regex(r) => r.is_match(c.3.as_bytes()),
            ValueTest::Exists => true,
        }
}

/// The rule: the rows with a cell passing any test, with the cells `output` selects (every
/// family-wide selector here), then row offset and limit, then cell offset and limit.
fn expected(all: &[C], spec: &ScanSpec) -> Vec<C> {
    let p = spec.value_predicates.as_ref().expect("predicates");
    let mut rows: Vec<Vec<C>> = Vec::new();
    for c in all {
        match rows.last_mut() {
            Some(r) if r[0].0 == c.0 => r.push(c.clone()),
            _ => rows.push(vec![c.clone()]),
        }
    }
    let no_limit = |n: u64| if n == 0 { usize::MAX } else { n as usize };
    rows.into_iter()
        .filter(|r| r.iter().any(|c| p.tests.iter().any(|t| passes(t, c))))
        .map(|r| {
            r.into_iter()
                .filter(|c| p.output.is_empty() || p.output.iter().any(|o| o.family == c.1))
                .collect::<Vec<C>>()
        })
        .skip(spec.row_offset as usize)
        .take(no_limit(spec.row_limit))
        .flatten()
        .skip(spec.cell_offset as usize)
        .take(no_limit(spec.cell_limit))
        .collect()
}

fn with(tests: Vec<ValuePredicate>, output: Vec<u8>) -> ScanSpec {
    ScanSpec {
        value_predicates: Some(ValuePredicates {
            tests,
            output: output
                .into_iter()
                .map(|family| ColumnSelector {
                    family,
                    qualifier: QualifierMatch::All,
                })
                .collect(),
        }),
        ..ScanSpec::default()
    }
}

fn test(family: u8, qualifier: Option<&str>, test: ValueTest) -> ValuePredicate {
    ValuePredicate {
        family,
        qualifier: qualifier.map(|q| q.as_bytes().to_vec()),
        test,
    }
}

/// The table `/s` in four ranges over two range servers, the same cells in an embedded
/// database, and all of them as the embedded database scans them.
struct TwoServers {
    cluster: TestCluster,
    client: ClusterClient,
    _dir: tempfile::TempDir,
    embedded: EmbeddedClient,
    all: Vec<C>,
}

fn two_servers() -> TwoServers {
    let mut cluster = TestCluster::start(Registry::builtins());
    let client = cluster.client();
    cluster.add_server(Registry::builtins(), &client);
    cluster.add_server(Registry::builtins(), &client);
    let t = client.create_table("/s", schema()).expect("create");
    load(&client, "/s");
    // Four ranges, spread over both servers.
    let holder = client.table_locations("/s").expect("locations")[0]
        .location
        .clone();
    for row in ["row0050", "row0100", "row0150"] {
        cluster
            .engine(&holder)
            .split(t.id, row.as_bytes())
            .expect("split");
    }
    wait_for("the splits and a balance to spread the table", || {
        let _ = client.balance();
        let locs = client.table_locations("/s").expect("locations");
        let mut servers: Vec<&str> = locs.iter().map(|l| l.location.as_str()).collect();
        servers.sort();
        servers.dedup();
        locs.len() == 4 && servers.len() == 2
    });

    let dir = tempfile::tempdir().expect("tempdir");
    let embedded = EmbeddedClient::open(dir.path(), EmbeddedOptions::default()).expect("open");
    embedded.create_table("/s", schema()).expect("create");
    load(&embedded, "/s");
    let all = scan(&embedded, "/s", &ScanSpec::default()).expect("scan");
    assert_eq!(
        scan(&client, "/s", &ScanSpec::default()).expect("scan"),
        all
    );
    TwoServers {
        cluster,
        client,
        _dir: dir,
        embedded,
        all,
    }
}

/// A key set (rows present and absent, over four ranges on two servers) goes to the servers a
/// batch of intervals per request, not a request per key, and returns what the embedded
/// database returns; an overlapping or limited set goes interval by interval, as before.
#[test]
fn a_key_set_goes_to_the_servers_in_batches_and_matches_the_embedded_database() {
    let TwoServers {
        cluster,
        client,
        embedded,
        all,
        ..
    } = two_servers();
    // Every 3rd row of 0..400: half of them past the table's 200 rows.
    let keys: Vec<String> = (0..2 * ROWS)
        .step_by(3)
        .map(|i| format!("row{i:04}"))
        .collect();
    let spec = ScanSpec {
        row_intervals: keys
            .iter()
            .map(|k| RowInterval::row(k.as_bytes()))
            .collect(),
        ..ScanSpec::default()
    };
    let want: Vec<C> = all
        .iter()
        .filter(|c| keys.contains(&c.0))
        .cloned()
        .collect();
    assert!(want.len() > 60, "{}", want.len());
    assert_eq!(scan(&embedded, "/s", &spec).expect("embedded scan"), want);
    let before = client.scan_requests();
    assert_eq!(scan(&client, "/s", &spec).expect("cluster scan"), want);
    let requests = client.scan_requests() - before;
    // 134 keys over 4 ranges: a request per run of ranges on one server (and one for the keys
    // past the last range start), not 134.
    assert!(
        requests <= 5,
        "{requests} scan requests for {} keys",
        keys.len()
    );
    // With at most 10 intervals a request: one per batch.
    let small = cluster.client_with(|o| o.scan_intervals_per_request = 10);
    let before = small.scan_requests();
    assert_eq!(scan(&small, "/s", &spec).expect("cluster scan"), want);
    let requests = small.scan_requests() - before;
    assert!(
        (14..=18).contains(&requests),
        "{requests} scan requests for {} keys in batches of 10",
        keys.len()
    );
    // A limit counts per interval: those still go one by one, and agree too.
    let limited = ScanSpec {
        cell_limit: 1,
        ..spec.clone()
    };
    let before = client.scan_requests();
    let got = scan(&client, "/s", &limited).expect("cluster scan");
    assert_eq!(got, scan(&embedded, "/s", &limited).expect("embedded scan"));
    assert!(client.scan_requests() - before >= keys.len() as u64);

    // A batch scanner: one request per server, all its ranges' intervals in it; the same
    // cells in some order. So for the whole table (four ranges, two servers).
    let mut sorted_want = want.clone();
    sorted_want.sort();
    for c in [&client as &dyn Client, &embedded] {
        assert_eq!(batch_scan(c, "/s", &spec, 0), sorted_want);
    }
    let before = client.scan_requests();
    assert_eq!(batch_scan(&client, "/s", &spec, 0), sorted_want);
    assert_eq!(client.scan_requests() - before, 2, "one request per server");
    let mut all_sorted = all.clone();
    all_sorted.sort();
    let before = client.scan_requests();
    assert_eq!(
        batch_scan(&client, "/s", &ScanSpec::default(), 0),
        all_sorted
    );
    assert_eq!(client.scan_requests() - before, 2, "one request per server");
    // With at most 10 intervals a request, a server's intervals take several.
    let before = small.scan_requests();
    assert_eq!(batch_scan(&small, "/s", &spec, 0), sorted_want);
    assert!((14..=16).contains(&(small.scan_requests() - before)));
    // Limits need an order.
    for c in [&client as &dyn Client, &embedded] {
        let err = c
            .batch_scanner("/s", limited.clone(), 4)
            .err()
            .map(|e| e.to_string());
        let err = match err {
            Some(e) => e,
            None => c
                .batch_scanner("/s", limited.clone(), 4)
                .unwrap()
                .next_cell()
                .unwrap_err()
                .to_string(),
        };
        assert!(
            err.contains("limits and offsets need the ordered scanner"),
            "{err}"
        );
    }
}

#[test]
fn value_predicates_and_limits_on_two_servers_match_the_embedded_database() {
    let TwoServers {
        cluster: _cluster,
        client,
        embedded,
        all,
        ..
    } = two_servers();

    let re = |p: &str| ValueTest::Regex(regex::bytes::Regex::new(p).expect("regex"));
    let mut specs = vec![
        // Rows whose `a:` is x3, past the first two, five of them.
        ScanSpec {
            row_offset: 2,
            row_limit: 5,
            ..with(
                vec![test(1, None, ValueTest::Equals(b"x3".to_vec()))],
                vec![],
            )
        },
        // Either test; cells 3.. of what they keep, nine of them.
        ScanSpec {
            cell_offset: 3,
            cell_limit: 9,
            ..with(
                vec![
                    test(2, Some("q1"), ValueTest::Prefix(b"tag1".to_vec())),
                    test(1, Some("z"), re("^zz[02]$")),
                ],
                vec![],
            )
        },
        // Rows that have a `b` cell, showing only their `a` cells.
        with(vec![test(2, None, ValueTest::Exists)], vec![1]),
        // A row limit that ends in the second server's ranges.
        ScanSpec {
            row_offset: 20,
            row_limit: 60,
            ..with(vec![test(1, None, re("^x[0-3]$"))], vec![])
        },
    ];
    // And one that matches nothing.
    specs.push(with(
        vec![test(1, None, ValueTest::Equals(b"nothing".to_vec()))],
        vec![],
    ));
    for (i, spec) in specs.iter().enumerate() {
        let want = expected(&all, spec);
        assert_eq!(
            want.is_empty(),
            i == 4,
            "spec {i} keeps {} cells",
            want.len()
        );
        let got_embedded = scan(&embedded, "/s", spec).expect("embedded scan");
        let got_cluster = scan(&client, "/s", spec).expect("cluster scan");
        assert_eq!(
            got_cluster, got_embedded,
            "spec {i}: cluster and embedded differ"
        );
        assert_eq!(got_cluster, want, "spec {i}: not what the predicates keep");
    }
    // The row-limited one reads on past the first server's ranges.
    let last = expected(&all, &specs[3]).last().expect("cells").0.clone();
    assert!(last.as_str() > "row0100", "{last}");

    // A scan iterator the servers do not know fails the scan, naming it, as it does embedded.
    let unknown = ScanSpec {
        iterators: vec![ScanIterator {
            kind: "nosuch_filter".into(),
            options: Default::default(),
        }],
        ..ScanSpec::default()
    };
    let e = scan(&client, "/s", &unknown).expect_err("an unknown scan iterator");
    assert!(e.to_string().contains("nosuch_filter"), "{e}");
    let e = scan(&embedded, "/s", &unknown).expect_err("an unknown scan iterator");
    assert!(e.to_string().contains("nosuch_filter"), "{e}");
}

/// Asserts `got == want`, naming the first difference briefly (values here are kilobytes).
#[track_caller]
fn same(got: &[C], want: &[C], what: &str) {
    if got == want {
        return;
    }
    let short = |c: Option<&C>| {
        c.map(|c| format!("{} {}:{} {:.12}", c.0, c.1, c.2, c.3))
            .unwrap_or_else(|| "nothing".into())
    };
    let i = got.iter().zip(want).take_while(|(g, w)| g == w).count();
    panic!(
        "{what}: {} cells where {} were wanted; first difference at cell {i}: got {}, wanted {}",
        got.len(),
        want.len(),
        short(got.get(i)),
        short(want.get(i))
    );
}

/// Cells the engines' ranges have stepped over, over every server.
fn cells_read(cluster: &TestCluster) -> u64 {
    cluster
        .servers
        .iter()
        .flat_map(|s| s.engine.all_ranges())
        .map(|r| r.cells_read)
        .sum()
}

/// Scans, stalling for 2 s after the first `before` cells.
fn stalled_scan(c: &dyn Client, table: &str, spec: &ScanSpec, before: usize) -> Vec<C> {
    stalled(c.scanner(table, spec.clone()).expect("scanner"), before)
}

/// A batch scanner's cells, sorted (they come in no order), stalling for 2 s after the first
/// `before` cells.
fn batch_scan(c: &dyn Client, table: &str, spec: &ScanSpec, before: usize) -> Vec<C> {
    let mut got = stalled(
        c.batch_scanner(table, spec.clone(), 4)
            .expect("batch scanner"),
        before,
    );
    got.sort();
    got
}

fn stalled(mut sc: Box<dyn client::TableScanner>, before: usize) -> Vec<C> {
    let mut out = Vec::new();
    while let Some(cell) = sc.next_cell().expect("next cell") {
        out.push((
            String::from_utf8_lossy(&cell.key.row).into_owned(),
            cell.key.family,
            String::from_utf8_lossy(&cell.key.qualifier).into_owned(),
            String::from_utf8_lossy(&cell.value).into_owned(),
        ));
        if out.len() == before {
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
    }
    out
}

/// A scan whose reader stalls past the servers' idle limit has its stream reset; the cluster
/// client resumes it at the row it got to, and with value predicates, offsets and limits it
/// still returns exactly what the embedded database returns; so does a key set, whose batch of
/// intervals resumes in the interval it got to.
#[test]
fn a_filtered_limited_scan_that_breaks_off_and_resumes_matches_the_embedded_database() {
    const BIG_ROWS: usize = 4000;
    let mut cluster = TestCluster::start(Registry::builtins());
    let client = cluster.client_with(|o| o.scan_queue_blocks = 1);
    let rs = RangeServerOptions {
        scan_block_cells: 8,
        scan_queue_blocks: 1,
        scan_idle_timeout: std::time::Duration::from_millis(200),
        ..RangeServerOptions::default()
    };
    cluster.add_server_with(Registry::builtins(), rs.clone(), &client);
    cluster.add_server_with(Registry::builtins(), rs, &client);
    let t = client.create_table("/big", schema()).expect("create");
    let dir = tempfile::tempdir().expect("tempdir");
    let embedded = EmbeddedClient::open(dir.path(), EmbeddedOptions::default()).expect("open");
    embedded.create_table("/big", schema()).expect("create");
    // 4 KiB values: a server's output outgrows the stream's flow-control window, so a stalled
    // reader makes the server wait and then reset the stream.
    let pad = "v".repeat(4096);
    for c in [&client as &dyn Client, &embedded] {
        let mut m = c.mutator("/big").expect("mutator");
        for i in 0..BIG_ROWS {
            let row = format!("row{i:05}");
            m.set(Mutation::insert(
                row.clone(),
                1,
                "",
                format!("{}{pad}", i % 2),
            ))
            .expect("set");
            m.set(Mutation::insert(row, 2, "n", format!("{i}")))
                .expect("set");
        }
        m.flush().expect("flush");
    }
    let holder = client.table_locations("/big").expect("locations")[0]
        .location
        .clone();
    for row in ["row01000", "row02000", "row03000"] {
        cluster
            .engine(&holder)
            .split(t.id, row.as_bytes())
            .expect("split");
    }
    wait_for("the splits and a balance to spread the table", || {
        let _ = client.balance();
        let locs = client.table_locations("/big").expect("locations");
        let mut servers: Vec<&str> = locs.iter().map(|l| l.location.as_str()).collect();
        servers.sort();
        servers.dedup();
        locs.len() == 4 && servers.len() == 2
    });

    // Rows whose `a` starts with 1.
    let full = with(
        vec![test(1, None, ValueTest::Prefix(b"1".to_vec()))],
        vec![],
    );
    let limited = ScanSpec {
        row_offset: 10,
        row_limit: 1400,
        ..full.clone()
    };
    let want_full = scan(&embedded, "/big", &full).expect("embedded scan");
    let want_limited = scan(&embedded, "/big", &limited).expect("embedded scan");
    let at = cells_read(&cluster);
    same(
        &scan(&client, "/big", &full).expect("scan"),
        &want_full,
        "a filtered scan",
    );
    let once = cells_read(&cluster) - at;
    let at = cells_read(&cluster);
    same(
        &stalled_scan(&client, "/big", &full, 50),
        &want_full,
        "a stalled filtered scan",
    );
    let stalled = cells_read(&cluster) - at;
    assert!(
        stalled > once,
        "the stalled scan read {stalled} cells, the plain one {once}: it was not resumed"
    );
    for before in [50, 700] {
        let got = stalled_scan(&client, "/big", &limited, before);
        same(
            &got,
            &want_limited,
            &format!("a limited scan stalled after {before} cells"),
        );
    }

    // A key set, stalled: its batch of intervals breaks off and resumes in the interval and
    // at the row it got to.
    let keys = ScanSpec {
        row_intervals: (0..BIG_ROWS)
            .step_by(2)
            .map(|i| RowInterval::row(format!("row{i:05}").into_bytes()))
            .collect(),
        ..ScanSpec::default()
    };
    let want_keys = scan(&embedded, "/big", &keys).expect("embedded scan");
    assert_eq!(want_keys.len(), BIG_ROWS);
    let at = client.scan_requests();
    same(
        &scan(&client, "/big", &keys).expect("scan"),
        &want_keys,
        "a key set",
    );
    let plain = client.scan_requests() - at;
    assert!(plain <= 5, "{plain} requests for a key set");
    for before in [50, 700] {
        let at = client.scan_requests();
        same(
            &stalled_scan(&client, "/big", &keys, before),
            &want_keys,
            &format!("a key set stalled after {before} cells"),
        );
        let n = client.scan_requests() - at;
        assert!(
            n > plain,
            "{n} requests, {plain} unstalled: it was not resumed"
        );
        // A batch scanner's request to a server that breaks off resumes too: nothing lost,
        // nothing twice.
        let mut sorted = want_keys.clone();
        sorted.sort();
        let at = client.scan_requests();
        same(
            &batch_scan(&client, "/big", &keys, before),
            &sorted,
            &format!("a batch scan of a key set stalled after {before} cells"),
        );
        assert!(
            client.scan_requests() - at > 2,
            "the batch scan was not resumed"
        );
    }

    // What the predicate keeps (once the servers run it): odd rows, both families.
    let all = scan(&embedded, "/big", &ScanSpec::default()).expect("scan");
    same(
        &want_full,
        &expected(&all, &full),
        "the embedded filtered scan",
    );
    assert_eq!(want_full.len(), BIG_ROWS);
    same(
        &want_limited,
        &expected(&all, &limited),
        "the embedded limited scan",
    );
}

/// Aggregates over four ranges on two servers: without limits each server folds its ranges and
/// sends partials (no cell crosses the network; a key set still goes a batch per server), and
/// the answer equals the embedded database's and the fold of the plain scan's cells; with
/// limits the client folds the cells it keeps, with the same answer as the embedded database.
#[test]
fn aggregates_are_folded_on_the_servers_and_match_the_fold_of_the_plain_scan() {
    use common::aggregate::{Aggregate, AggregateColumn, AggregatePartial};
    let TwoServers {
        cluster: _cluster,
        client,
        embedded,
        ..
    } = two_servers();
    // Decimals in `b:n` (negative, with fraction digits) and a few that are not numbers.
    for c in [&client as &dyn Client, &embedded] {
        let mut m = c.mutator("/s").expect("mutator");
        for i in 0..ROWS {
            let v = match i % 10 {
                9 => "n/a".to_string(),
                k if k % 2 == 0 => format!("{i}.{k}"),
                _ => format!("-{}", i / 2),
            };
            m.set(Mutation::insert(format!("row{i:04}"), 2, "n", v))
                .expect("set");
        }
        m.flush().expect("flush");
    }
    let agg = Aggregate {
        columns: vec![
            AggregateColumn {
                family: 2,
                qualifier: Some(b"n".to_vec()),
            },
            AggregateColumn {
                family: 2,
                qualifier: None,
            },
            AggregateColumn {
                family: 1,
                qualifier: None,
            },
        ],
    };
    let fold = |c: &dyn Client, spec: &ScanSpec| -> AggregatePartial {
        let mut sc = c.scanner("/s", spec.clone()).expect("scanner");
        client::aggregate::fold_scanner(sc.as_mut(), &agg).expect("fold")
    };
    let keys: Vec<String> = (0..2 * ROWS)
        .step_by(3)
        .map(|i| format!("row{i:04}"))
        .collect();
    let key_set = ScanSpec {
        row_intervals: keys
            .iter()
            .map(|k| RowInterval::row(k.as_bytes()))
            .collect(),
        ..ScanSpec::default()
    };
    let filtered = with(
        vec![test(
            1,
            None,
            ValueTest::Regex(regex::bytes::Regex::new("^x[0-3]$").expect("regex")),
        )],
        vec![],
    );
    let specs = [
        ("every row", ScanSpec::default()),
        ("a key set", key_set.clone()),
        ("a value predicate", filtered.clone()),
        (
            "a row interval",
            ScanSpec {
                row_intervals: vec![RowInterval {
                    start: std::ops::Bound::Included(b"row0042".to_vec()),
                    end: std::ops::Bound::Excluded(b"row0177".to_vec()),
                }],
                ..ScanSpec::default()
            },
        ),
    ];
    for (what, spec) in &specs {
        let plain = fold(&client, spec);
        assert!(plain.columns[0].count > 0, "{what}: {plain:?}");
        let (cells, partials, requests) = (
            client.scan_cells(),
            client.scan_partials(),
            client.scan_requests(),
        );
        let on_servers = client
            .aggregate(
                "/s",
                ScanSpec {
                    aggregate: Some(agg.clone()),
                    ..spec.clone()
                },
            )
            .expect("cluster aggregate");
        assert_eq!(
            on_servers, plain,
            "{what}: servers' partials vs client fold"
        );
        assert_eq!(
            client.scan_cells(),
            cells,
            "{what}: no cell crossed the network"
        );
        let partials = client.scan_partials() - partials;
        assert!(partials >= 2, "{what}: {partials} partials");
        assert!(
            client.scan_requests() - requests <= 5,
            "{what}: {} requests",
            client.scan_requests() - requests
        );
        let embedded_answer = embedded
            .aggregate(
                "/s",
                ScanSpec {
                    aggregate: Some(agg.clone()),
                    ..spec.clone()
                },
            )
            .expect("embedded aggregate");
        assert_eq!(on_servers, embedded_answer, "{what}: cluster vs embedded");
        eprintln!(
            "{what}: {} rows, {} cells folded on the servers into {partials} partials; the \
             plain scan sends {} cells",
            on_servers.rows, on_servers.cells, plain.cells
        );
    }
    // Limits count per interval across servers: the client folds what it keeps.
    for spec in [
        ScanSpec {
            row_limit: 7,
            ..filtered.clone()
        },
        ScanSpec {
            cell_limit: 1,
            ..key_set.clone()
        },
        ScanSpec {
            cell_offset: 30,
            cell_limit: 100,
            ..ScanSpec::default()
        },
    ] {
        let cells = client.scan_cells();
        let with_agg = ScanSpec {
            aggregate: Some(agg.clone()),
            ..spec.clone()
        };
        let got = client.aggregate("/s", with_agg.clone()).expect("cluster");
        assert!(client.scan_cells() > cells, "limited scans send cells");
        assert_eq!(got, fold(&client, &spec));
        assert_eq!(got, embedded.aggregate("/s", with_agg).expect("embedded"));
    }
}

//! Wikipedia search on a cluster of three range servers, against the brute-force oracle
//! (`wikisearch::oracle`): the shard table split into ranges that the balancer moves between
//! the servers while queries run, through the batch scanner (one request per server) and the
//! ordered scanner; every global-index count equal to the oracle's document frequency.

mod support;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use client::Client;
use common::CompactionKind;
use rangeserver::iterators::Registry;
use support::{TestCluster, wait_for};
use wikisearch::Tables;
use wikisearch::layout::partition_row;
use wikisearch::oracle::{Oracle, check_counts, check_queries, ingest};

fn articles() -> Vec<wikitext::Article> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/wikipedia");
    let mut out = Vec::new();
    for (name, take) in [
        ("dewiki-20170701-sample.xml.gz", usize::MAX),
        ("enwiki-articles-4540.jsonl.gz", 250),
    ] {
        let arts = wikitext::open(&dir.join(name)).expect("sample");
        out.extend(arts.take(take).map(|a| a.expect("clean sample")));
    }
    out
}

#[test]
fn queries_on_three_servers_match_the_oracle_during_splits_and_moves() {
    const N: u32 = 16;
    let mut cluster = TestCluster::start(Registry::builtins());
    let client = cluster.client();
    for _ in 0..3 {
        cluster.add_server(Registry::builtins(), &client);
    }
    let articles = articles();
    let o = Oracle::new(&articles);
    let tables = Tables::new("/wiki");
    ingest(&client, &tables, &articles, N, 2).expect("ingest");

    // The shard was created pre-split, one range per partition, spread over the servers.
    let ranges = client.table_ranges(&tables.shard()).expect("ranges");
    let starts: Vec<Option<Vec<u8>>> = ranges.iter().map(|r| r.start_row.clone()).collect();
    let mut want: Vec<Option<Vec<u8>>> = vec![None];
    want.extend((1..N).map(|p| Some(partition_row(p).into_bytes())));
    assert_eq!(starts, want, "one range per partition");
    let mut per_server = std::collections::BTreeMap::new();
    for r in &ranges {
        *per_server.entry(r.location.clone()).or_insert(0) += 1;
    }
    assert_eq!(per_server.len(), 3, "spread: {per_server:?}");
    assert!(
        per_server.values().all(|&n| n == 5 || n == 6),
        "even: {per_server:?}"
    );
    check_counts(&client, &tables, &o, N, 2).expect("counts");
    check_queries(&client, &tables, &o, 1, 20, false).expect("queries, pre-split");

    // A major compaction of the shard asks each server once, though its ranges alternate
    // between them: each range's two access groups are written once.
    let majors = || -> u64 {
        let st = client.status().expect("status");
        let (_, v) = st
            .iter()
            .find(|(k, _)| k == "major_compactions")
            .expect("a major compaction count");
        v.parse().expect("a number")
    };
    let before = majors();
    client
        .compact(Some(&tables.shard()), CompactionKind::Major)
        .expect("major compaction");
    assert_eq!(
        majors() - before,
        2 * u64::from(N),
        "each group compacted once"
    );
    check_queries(&client, &tables, &o, 1, 20, false).expect("queries, compacted");

    // Split the global index (the planner's lookups) at a few terms, and add a fourth server
    // that the balancer fills with shard ranges, while queries run.
    let index = client.table_schema(&tables.index()).expect("schema");
    let holder = client.table_ranges(&tables.index()).expect("ranges")[0]
        .location
        .clone();
    for t in ["f", "m", "s"] {
        cluster
            .engine(&holder)
            .split(index.id, t.as_bytes())
            .expect("split");
    }
    let fourth = cluster.add_server(Registry::builtins(), &client);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let _ = client.balance();
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        });
        let result = (2..6).try_for_each(|seed| {
            check_queries(&client, &tables, &o, seed, 15, seed % 2 == 0).map(|_| ())
        });
        stop.store(true, Ordering::Relaxed);
        result.expect("queries while ranges split and move");
    });
    wait_for("shard ranges on the fourth server", || {
        let _ = client.balance();
        let ranges = client.table_ranges(&tables.shard()).expect("ranges");
        ranges.len() == N as usize && ranges.iter().filter(|r| r.location == fourth).count() >= 3
    });
    assert_eq!(
        client.table_ranges(&tables.index()).expect("ranges").len(),
        4,
        "the index's splits"
    );
    // Spread: the same answers through both scanners.
    let hits = check_queries(&client, &tables, &o, 9, 30, false).expect("queries, spread");
    assert!(hits > 5, "{hits} of 30 queries match anything");
    check_queries(&client, &tables, &o, 10, 30, true).expect("ordered, spread");
    check_counts(&client, &tables, &o, N, 2).expect("counts after the moves");
}

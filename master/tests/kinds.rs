//! Iterator settings on a cluster: schemas naming combiners and iterators go through the master
//! to the range servers and into Hyperspace intact (create and alter), and the master refuses
//! DDL naming a kind that its own registry or a live range server does not know.

mod support;

use client::{Client, ClientError};
use common::TableSchema;
use common::iterators::{CombinerSpec, IterOptions, IterScope, IteratorSpec};
use proto::rs::client::RangeServerClient;
use rangeserver::iterators::combine::{CounterKind, Fold, NumericKind};
use rangeserver::iterators::{IterEnv, IteratorKind, KvIter, Registry};
use support::TestCluster;

/// A user kind (`pass(X = n)`): hands its source on unchanged, in every scope.
struct PassKind;

impl IteratorKind for PassKind {
    fn name(&self) -> &str {
        "pass"
    }
    fn scopes(&self) -> &[IterScope] {
        &IterScope::ALL
    }
    fn validate(&self, options: &IterOptions, _: &TableSchema) -> Result<(), String> {
        match options.keys().find(|k| *k != "X") {
            Some(k) => Err(format!("unknown option {k}")),
            None => Ok(()),
        }
    }
    fn build(
        &self,
        source: Box<dyn KvIter>,
        _: &IterOptions,
        _: &IterEnv,
    ) -> rangeserver::Result<Box<dyn KvIter>> {
        Ok(source)
    }
}

/// The built-ins and `pass`.
fn full() -> Registry {
    let mut r = Registry::builtins();
    r.register_iterator(PassKind).expect("register pass");
    r
}

/// Only `counter`, `sum` and `min`: no `max`, no `pass`.
fn partial() -> Registry {
    let mut r = Registry::empty();
    r.register_combiner(CounterKind).expect("counter");
    r.register_combiner(NumericKind(Fold::Sum)).expect("sum");
    r.register_combiner(NumericKind(Fold::Min)).expect("min");
    r
}

fn pass_iterator(x: &str) -> IteratorSpec {
    IteratorSpec {
        name: "p".into(),
        kind: "pass".into(),
        options: [("X".to_string(), x.to_string())].into(),
        scopes: vec![IterScope::Scan, IterScope::Major],
        priority: 5,
    }
}

/// `a`, `total COMBINER sum APPEND_ONLY`, `hits COUNTER`.
fn stats_schema() -> TableSchema {
    let mut s = TableSchema::new(0, "");
    s.add_family("a");
    let total = s.add_family("total");
    let f = &mut s.families[total as usize - 1];
    f.combiner = Some(CombinerSpec::new("sum"));
    f.append_only = true;
    let hits = s.add_family("hits");
    s.families[hits as usize - 1].counter = true;
    s
}

fn add_combiner_family(s: &mut TableSchema, name: &str, kind: &str) {
    let id = s.add_family(name);
    s.families[id as usize - 1].combiner = Some(CombinerSpec::new(kind));
}

fn refused(r: client::Result<TableSchema>) -> String {
    match r {
        Err(ClientError::InvalidInput(m)) => m,
        other => panic!("expected a refusal as invalid input, got {other:?}"),
    }
}

/// The iterator settings of a schema, for comparison.
fn settings(s: &TableSchema) -> String {
    let families: Vec<String> = s
        .families
        .iter()
        .map(|f| {
            format!(
                "{}:{:?}:{}:{}",
                f.name, f.combiner, f.append_only, f.counter
            )
        })
        .collect();
    format!("{families:?} {:?}", s.iterators)
}

/// The schema of table `id` on the server at `location`.
fn on_server(cluster: &TestCluster, location: &str, id: u32) -> TableSchema {
    cluster
        .engine(location)
        .schema(id)
        .expect("the server knows the table")
}

#[test]
fn iterator_settings_survive_the_master_and_unknown_kinds_are_refused() {
    let mut cluster = TestCluster::start(full());
    let client = cluster.client();
    let a = cluster.add_server(full(), &client);

    // Create: the settings reach the range server and Hyperspace as they were written.
    let mut schema = stats_schema();
    schema.iterators.push(pass_iterator("1"));
    let created = client.create_table("/t", schema.clone()).expect("create");
    let stored = client.table_schema("/t").expect("schema");
    assert_eq!(settings(&stored), settings(&schema));
    assert_eq!(
        settings(&on_server(&cluster, &a, created.id)),
        settings(&schema)
    );
    assert_eq!(stored.iterators[0].options["X"], "1");

    // Alter: a new combiner family and changed iterator options, everywhere.
    let mut altered = stored.clone();
    add_combiner_family(&mut altered, "peak", "max");
    altered.iterators[0] = pass_iterator("2");
    client.alter_table("/t", altered.clone()).expect("alter");
    let stored = client.table_schema("/t").expect("schema");
    assert_eq!(settings(&stored), settings(&altered));
    assert_eq!(
        settings(&on_server(&cluster, &a, created.id)),
        settings(&altered)
    );

    // Kinds or options the master's registry refuses, before any server is asked.
    let mut unknown = stats_schema();
    add_combiner_family(&mut unknown, "odd", "nosuch");
    let m = refused(client.create_table("/u", unknown));
    assert!(m.contains("'odd'") && m.contains("nosuch"), "{m}");
    let mut bad_option = stats_schema();
    let mut it = pass_iterator("1");
    it.options.insert("Y".into(), "2".into());
    bad_option.iterators.push(it);
    let m = refused(client.create_table("/u", bad_option));
    assert!(m.contains("'p'") && m.contains("unknown option Y"), "{m}");

    // A second server that lacks `max` and `pass`.
    let b = cluster.add_server(partial(), &client);
    let mut with_pass = stats_schema();
    with_pass.iterators.push(pass_iterator("1"));
    let m = refused(client.create_table("/u", with_pass));
    assert!(
        m.contains("iterator kind 'pass' of iterator 'p'") && m.contains(&b) && !m.contains(&a),
        "{m}"
    );
    let mut with_max = stats_schema();
    add_combiner_family(&mut with_max, "peak", "max");
    let m = refused(client.create_table("/u", with_max));
    assert!(
        m.contains("combiner 'max' of column family 'peak'") && m.contains(&b),
        "{m}"
    );
    assert!(!client.table_exists("/u").expect("exists"));
    // What every server knows is fine: counter, sum, min.
    let mut known = stats_schema();
    add_combiner_family(&mut known, "low", "min");
    let u = client.create_table("/u", known.clone()).expect("create /u");
    assert_eq!(
        settings(&client.table_schema("/u").expect("schema")),
        settings(&known)
    );
    // An alter that names a kind `b` lacks changes nothing, though `/u`'s servers know it.
    let mut altered_u = client.table_schema("/u").expect("schema");
    altered_u.iterators.push(pass_iterator("3"));
    let m = refused(client.alter_table("/u", altered_u));
    assert!(m.contains("'pass'") && m.contains(&b), "{m}");
    let now = client.table_schema("/u").expect("schema");
    assert_eq!(settings(&now), settings(&known));
    assert_eq!(now.generation, u.generation);
    // Nor may `/t`, made before `b` came, keep its `peak` (max) family and `pass` iterator
    // and gain a family: `b` could not hold it. The first kind lacking is named.
    let mut altered_t = client.table_schema("/t").expect("schema");
    add_combiner_family(&mut altered_t, "low", "min");
    let m = refused(client.alter_table("/t", altered_t));
    assert!(
        m.contains("combiner 'max' of column family 'peak'") && m.contains(&b),
        "{m}"
    );

    // The kinds each server reports in rs.status.
    let creds = rpc::ClusterCredentials::load(cluster.dir.path(), "client").expect("creds");
    let status = client.master_status().expect("master status");
    let kinds = |loc: &str| {
        let addr = status
            .servers
            .iter()
            .find(|s| s.location == loc)
            .expect("listed")
            .addr
            .parse()
            .expect("addr");
        cluster.rt.block_on(async {
            let c = RangeServerClient::connect(addr, &creds)
                .await
                .expect("connect");
            c.status_and_kinds().await.expect("rs.status").1
        })
    };
    assert_eq!(kinds(&a), full().kind_names());
    assert!(kinds(&a).contains(&"iterator:pass".to_string()));
    assert_eq!(
        kinds(&b),
        ["combiner:counter", "combiner:min", "combiner:sum"]
    );
}

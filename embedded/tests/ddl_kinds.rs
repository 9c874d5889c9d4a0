//! CREATE and ALTER TABLE on the embedded database check the iterator and combiner kinds a
//! schema names against the engine's registry: an unknown kind or a bad option is refused,
//! naming it, and nothing changes.

use std::sync::Arc;

use client::{Client, ClientError};
use common::TableSchema;
use common::iterators::{CombinerSpec, IterOptions, IterScope, IteratorSpec};
use embedded::{EmbeddedClient, EmbeddedOptions};
use rangeserver::iterators::Registry;
use rangeserver::iterators::combine::{Fold, NumericKind};

fn schema(families: &[(&str, Option<CombinerSpec>)]) -> TableSchema {
    let mut s = TableSchema::new(0, "");
    for (name, combiner) in families {
        let id = s.add_family(name);
        s.families[id as usize - 1].combiner = combiner.clone();
    }
    s
}

fn refused(r: client::Result<TableSchema>) -> String {
    match r {
        Err(ClientError::InvalidInput(m)) => m,
        other => panic!("expected a refusal as invalid input, got {other:?}"),
    }
}

fn open(dir: &std::path::Path, registry: Registry) -> EmbeddedClient {
    let mut opts = EmbeddedOptions::default();
    opts.engine.registry = Arc::new(registry);
    EmbeddedClient::open(dir, opts).expect("open")
}

#[test]
fn unknown_kinds_and_bad_options_are_refused_at_create_and_alter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = open(dir.path(), Registry::builtins());
    let m = refused(c.create_table(
        "/t",
        schema(&[("a", None), ("total", Some(CombinerSpec::new("nosuch")))]),
    ));
    assert!(m.contains("'total'") && m.contains("nosuch"), "{m}");
    assert!(!c.table_exists("/t").expect("exists"));
    let mut bad_max = CombinerSpec::new("string_set");
    bad_max.options.insert("MAX".into(), "lots".into());
    let m = refused(c.create_table("/t", schema(&[("tags", Some(bad_max))])));
    assert!(m.contains("'tags'") && m.contains("MAX"), "{m}");

    // A refused create takes no table id.
    let t = c
        .create_table("/t", schema(&[("total", Some(CombinerSpec::new("sum")))]))
        .expect("create");
    assert_eq!(t.id, 1);

    let mut altered = t.clone();
    altered.iterators.push(IteratorSpec {
        name: "f".into(),
        kind: "nosuch_filter".into(),
        options: IterOptions::new(),
        scopes: vec![IterScope::Scan],
        priority: 10,
    });
    let m = refused(c.alter_table("/t", altered));
    assert!(m.contains("'f'") && m.contains("nosuch_filter"), "{m}");
    let mut altered = t.clone();
    let id = altered.add_family("peak");
    altered.families[id as usize - 1].combiner = Some(CombinerSpec::new("nosuch_max"));
    let m = refused(c.alter_table("/t", altered));
    assert!(m.contains("'peak'") && m.contains("nosuch_max"), "{m}");
    // Nothing changed.
    let now = c.table_schema("/t").expect("schema");
    assert_eq!(now.generation, t.generation);
    assert!(now.iterators.is_empty());
    assert_eq!(now.families.len(), 1);
}

#[test]
fn a_registry_without_a_kind_refuses_the_tables_that_name_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut registry = Registry::empty();
    registry
        .register_combiner(NumericKind(Fold::Sum))
        .expect("register sum");
    let c = open(dir.path(), registry);
    let t = c
        .create_table("/t", schema(&[("total", Some(CombinerSpec::new("sum")))]))
        .expect("sum is registered");
    let m = refused(c.create_table("/u", schema(&[("peak", Some(CombinerSpec::new("max")))])));
    assert!(m.contains("'peak'") && m.contains("max"), "{m}");
    // COUNTER is the `counter` combiner, which this registry lacks too.
    let mut counter = schema(&[("hits", None)]);
    counter.families[0].counter = true;
    let m = refused(c.create_table("/u", counter));
    assert!(m.contains("'hits'") && m.contains("counter"), "{m}");
    let mut altered = t.clone();
    let id = altered.add_family("low");
    altered.families[id as usize - 1].combiner = Some(CombinerSpec::new("min"));
    let m = refused(c.alter_table("/t", altered));
    assert!(m.contains("'low'") && m.contains("min"), "{m}");
    assert_eq!(c.table_schema("/t").expect("schema").families.len(), 1);
}

//! Queries against a brute-force oracle built from the same tokenizer over the same articles
//! (issue 16's "must hold"), on the embedded database: random AND/OR/NOT queries of 1-5 terms
//! (absent, very frequent and rare terms, titles, both wildcards) for N in {1, 7, 64}
//! partitions and MAX in {0, 1, 20, unlimited}; every global-index count against the
//! oracle's document frequency after ingest and after a major compaction; re-ingest without
//! inflation; an edited article replaced.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use client::{Client, CompactionKind};
use embedded::{EmbeddedClient, EmbeddedOptions};
use wikisearch::oracle::{self, Oracle, check_counts, check_queries};
use wikisearch::{Outcome, Searcher, Tables, create_or_open, parse};
use wikitext::{Article, open, term_set};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data/wikipedia")
        .join(name)
}

/// Both XML samples and the first `jsonl` articles of the JSON lines sample.
fn corpus(jsonl: usize) -> Vec<Article> {
    let mut out = Vec::new();
    for (name, take) in [
        ("enwiki-pages-articles-sample.xml.bz2", usize::MAX),
        ("dewiki-20170701-sample.xml.gz", usize::MAX),
        ("enwiki-articles-4540.jsonl.gz", jsonl),
    ] {
        let arts = open(&data(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        out.extend(arts.take(take).map(|a| a.expect("clean sample")));
    }
    out
}

type Doc = (String, u64);

fn ingest(client: &dyn Client, tables: &Tables, articles: &[Article], n: u32, max: usize) {
    oracle::ingest(client, tables, articles, n, max).unwrap();
}

fn db() -> (tempfile::TempDir, EmbeddedClient) {
    let dir = tempfile::tempdir().unwrap();
    let client = EmbeddedClient::open(dir.path(), EmbeddedOptions::default()).unwrap();
    (dir, client)
}

fn matches(s: &Searcher, q: &str) -> BTreeSet<Doc> {
    s.search(&parse(q).unwrap())
        .unwrap()
        .matches
        .into_iter()
        .map(|(l, id, _)| (l, id))
        .collect()
}

#[test]
fn queries_and_counts_match_the_oracle_for_every_partitioning_and_max() {
    let articles = corpus(300);
    let o = Oracle::new(&articles);
    for (i, (n, max)) in [(1, 20), (7, 0), (64, 1), (7, 100_000)]
        .into_iter()
        .enumerate()
    {
        let (_dir, client) = db();
        let tables = Tables::new(&format!("/w{i}"));
        ingest(&client, &tables, &articles, n, max);
        check_counts(&client, &tables, &o, n, max).unwrap();
        let hits = check_queries(&client, &tables, &o, 7 + i as u64, 60, i % 2 == 0).unwrap();
        assert!(hits > 15, "only {hits} of 60 queries match anything");
        client.compact(None, CompactionKind::Major).unwrap();
        check_counts(&client, &tables, &o, n, max).unwrap();
        check_queries(&client, &tables, &o, 70 + i as u64, 30, i % 2 == 1).unwrap();
    }
}

#[test]
fn the_seed_queries_and_wildcards_match_the_oracle() {
    let articles = corpus(1000);
    let o = Oracle::new(&articles);
    let (_dir, client) = db();
    let tables = Tables::new("/wiki");
    ingest(&client, &tables, &articles, 7, 20);
    let s = Searcher::open(&client, &tables).unwrap();
    for q in [
        "old and man and sea",
        "paris and in and the and spring",
        "rubber and ducky and ernie",
        "fast and (furious or furriest)",
        "slashdot and grok",
        "three and little and pigs",
        "the",
        "title:köln",
        "Köln",
        "anarch*",
        "*ism and not the",
        "not (the or a)",
        "B-52",
    ] {
        assert_eq!(matches(&s, q), o.eval(&parse(q).unwrap()), "{q}");
    }
    // The broad ones really are broad, the absent ones empty.
    assert!(o.eval(&parse("the").unwrap()).len() > 500);
    assert!(o.eval(&parse("anarch*").unwrap()).len() > 1);
    assert!(o.eval(&parse("xylophonist").unwrap()).is_empty());
    // A wildcard past the cap is an error that says so.
    let mut capped = Searcher::open(&client, &tables).unwrap();
    capped.max_expansion = 3;
    let err = capped.search(&parse("a*").unwrap()).unwrap_err();
    assert!(format!("{err:#}").contains("more than 3 terms"), "{err:#}");
}

#[test]
fn re_ingest_does_not_inflate_counts_and_an_edit_replaces_the_article() {
    let articles = corpus(150);
    let (_dir, client) = db();
    let tables = Tables::new("/wiki");
    ingest(&client, &tables, &articles, 7, 20);
    let o = Oracle::new(&articles);
    // Once more, in a new ingest (lookups), and twice within one (pending articles).
    let (config, fresh) = create_or_open(&client, &tables, None, None).unwrap();
    assert!(!fresh);
    assert_eq!((config.partitions, config.max_uids), (7, 20));
    let latest: BTreeMap<Doc, &Article> = articles
        .iter()
        .map(|a| ((a.lang.clone(), a.id), a))
        .collect();
    let mut ing = wikisearch::Ingester::new(&client, &tables, config, fresh).unwrap();
    for a in latest.values().chain(latest.values().take(5)) {
        assert_eq!(ing.add(a).unwrap(), Outcome::Unchanged, "{}", a.title);
    }
    ing.finish().unwrap();
    check_counts(&client, &tables, &o, 7, 20).unwrap();

    // An edit: the article loses its words and gains new ones; queries follow the new text.
    let mut edited = (*latest.values().next().unwrap()).clone();
    let old_terms = term_set(&edited.text);
    edited.text = "Completely rewritten: xylophonist quartets.".into();
    let mut ing = wikisearch::Ingester::new(&client, &tables, config, false).unwrap();
    assert_eq!(ing.add(&edited).unwrap(), Outcome::Replaced);
    assert_eq!(ing.add(&edited).unwrap(), Outcome::Unchanged);
    ing.finish().unwrap();
    let mut now = articles.clone();
    now.push(edited.clone());
    let o = Oracle::new(&now);
    let s = Searcher::open(&client, &tables).unwrap();
    let new_terms = term_set(&edited.text);
    let lost = old_terms.iter().find(|t| !new_terms.contains(*t)).unwrap();
    for q in [
        "xylophonist",
        "xylophonist and quartets",
        lost.as_str(),
        "rewritten or the",
    ] {
        assert_eq!(matches(&s, q), o.eval(&parse(q).unwrap()), "{q}");
    }
    assert_eq!(o.eval(&parse("xylophonist").unwrap()).len(), 1);
}

#[test]
fn a_namespace_keeps_its_configuration() {
    let (_dir, client) = db();
    let tables = Tables::new("/wiki");
    let (c, fresh) = create_or_open(&client, &tables, Some(5), Some(3)).unwrap();
    assert!(fresh);
    assert_eq!((c.partitions, c.max_uids), (5, 3));
    let err = create_or_open(&client, &tables, Some(6), None).unwrap_err();
    assert!(err.to_string().contains("5 partitions"), "{err}");
    assert!(Searcher::open(&client, &Tables::new("/nothing")).is_err());
}

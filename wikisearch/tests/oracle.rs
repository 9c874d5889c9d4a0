//! Queries against a brute-force oracle built from the same tokenizer over the same articles
//! (issue 16's "must hold"), on the embedded database: random AND/OR/NOT queries of 1-5 terms
//! (absent, very frequent and rare terms, titles, both wildcards) for N in {1, 7, 64}
//! partitions and MAX in {0, 1, 20, unlimited}; every global-index count against the
//! oracle's document frequency after ingest and after a major compaction; re-ingest without
//! inflation; an edited article replaced.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use client::{Client, CompactionKind};
use common::ScanSpec;
use embedded::{EmbeddedClient, EmbeddedOptions};
use wikisearch::{Expr, Outcome, Searcher, Tables, create_or_open, parse};
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

/// What the articles hold, by the same tokenizer.
struct Oracle {
    /// (field, term) -> documents.
    postings: BTreeMap<(&'static str, String), BTreeSet<Doc>>,
    all: BTreeSet<Doc>,
    titles: BTreeMap<Doc, String>,
}

impl Oracle {
    /// The last article of each (language, id) wins, as in the tables.
    fn new(articles: &[Article]) -> Self {
        let mut latest: BTreeMap<Doc, &Article> = BTreeMap::new();
        for a in articles {
            latest.insert((a.lang.clone(), a.id), a);
        }
        let mut o = Oracle {
            postings: BTreeMap::new(),
            all: BTreeSet::new(),
            titles: BTreeMap::new(),
        };
        for (doc, a) in latest {
            for (field, text) in [("TEXT", &a.text), ("TITLE", &a.title)] {
                for t in term_set(text) {
                    o.postings
                        .entry((field, t))
                        .or_default()
                        .insert(doc.clone());
                }
            }
            o.titles.insert(doc.clone(), a.title.clone());
            o.all.insert(doc);
        }
        o
    }

    /// How many index terms a query names once its wildcards are expanded.
    fn terms(&self, e: &Expr) -> usize {
        let count = |f: &str, keep: &dyn Fn(&str) -> bool| {
            self.postings
                .keys()
                .filter(|(field, t)| *field == f && keep(t))
                .count()
        };
        match e {
            Expr::Term(..) => 1,
            Expr::Prefix(f, t) => count(f, &|x| x.starts_with(t.as_str())).max(1),
            Expr::Suffix(f, t) => count(f, &|x| x.ends_with(t.as_str())).max(1),
            Expr::And(v) | Expr::Or(v) => v.iter().map(|x| self.terms(x)).sum(),
            Expr::Not(x) => self.terms(x),
        }
    }

    fn eval(&self, e: &Expr) -> BTreeSet<Doc> {
        let matching = |f: &str, keep: &dyn Fn(&str) -> bool| -> BTreeSet<Doc> {
            self.postings
                .iter()
                .filter(|((field, t), _)| *field == f && keep(t))
                .flat_map(|(_, d)| d.iter().cloned())
                .collect()
        };
        match e {
            Expr::Term(f, t) => matching(f, &|x| x == t),
            Expr::Prefix(f, t) => matching(f, &|x| x.starts_with(t.as_str())),
            Expr::Suffix(f, t) => matching(f, &|x| x.ends_with(t.as_str())),
            Expr::And(v) => {
                let mut it = v.iter().map(|x| self.eval(x));
                let first = it.next().unwrap_or_default();
                it.fold(first, |a, b| a.intersection(&b).cloned().collect())
            }
            Expr::Or(v) => v.iter().flat_map(|x| self.eval(x)).collect(),
            Expr::Not(x) => self.all.difference(&self.eval(x)).cloned().collect(),
        }
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// Words to build queries from: very frequent, middling and rare text terms, title terms,
/// absent terms, and wildcards of three or more characters.
struct Vocabulary {
    frequent: Vec<String>,
    middling: Vec<String>,
    rare: Vec<String>,
    titles: Vec<String>,
}

impl Vocabulary {
    fn new(o: &Oracle) -> Self {
        let mut text: Vec<(usize, &String)> = o
            .postings
            .iter()
            .filter(|((f, _), _)| *f == "TEXT")
            .map(|((_, t), d)| (d.len(), t))
            .collect();
        text.sort();
        let n = text.len();
        let words = |r: std::ops::Range<usize>| text[r].iter().map(|(_, t)| (*t).clone()).collect();
        Vocabulary {
            frequent: words(n - 40..n),
            middling: words(n / 2..n / 2 + 400),
            rare: words(0..400),
            titles: o
                .postings
                .keys()
                .filter(|(f, _)| *f == "TITLE")
                .map(|(_, t)| t.clone())
                .collect(),
        }
    }

    fn word(&self, r: &mut Rng) -> String {
        let w = self.unquoted(r);
        match w.as_str() {
            "and" | "or" | "not" => format!("\"{w}\""),
            _ => w,
        }
    }

    fn unquoted(&self, r: &mut Rng) -> String {
        match r.below(10) {
            0..=2 => r.pick(&self.frequent).clone(),
            3..=4 => r.pick(&self.middling).clone(),
            5 => r.pick(&self.rare).clone(),
            6 => format!("title:{}", r.pick(&self.titles)),
            7 => ["zzqxv", "xylophonist", "qqq"][r.below(3)].to_string(),
            8 => {
                let w = r.pick(&self.middling);
                let cut = w.char_indices().nth(3).map_or(w.len(), |(i, _)| i);
                format!("{}*", &w[..cut])
            }
            _ => {
                let w = r.pick(&self.middling);
                let from = w.char_indices().rev().nth(2).map_or(0, |(i, _)| i);
                format!("*{}", &w[from..])
            }
        }
    }

    /// A query of 1-5 words with random operators, `not` and parentheses.
    fn query(&self, r: &mut Rng, words: usize) -> String {
        if words == 1 {
            let w = self.word(r);
            return if r.below(6) == 0 {
                format!("not {w}")
            } else {
                w
            };
        }
        let left = 1 + r.below(words - 1);
        let (a, b) = (self.query(r, left), self.query(r, words - left));
        let op = ["and", "or", "", "and not"][r.below(4)];
        format!("({a}) {op} ({b})")
    }
}

fn ingest(client: &dyn Client, tables: &Tables, articles: &[Article], n: u32, max: usize) {
    let (config, fresh) = create_or_open(client, tables, Some(n), Some(max)).unwrap();
    let mut ing = wikisearch::Ingester::new(client, tables, config, fresh).unwrap();
    for a in articles {
        ing.add(a).unwrap();
    }
    ing.finish().unwrap();
}

/// Every global-index and reverse-index cell against the oracle: count = document frequency
/// in the partition, members (when kept) = the documents.
fn check_counts(client: &dyn Client, tables: &Tables, o: &Oracle, n: u32, max: usize) {
    use wikisearch::layout::{doc_key, index_family, partition_of, partition_row, reversed};
    let mut want: BTreeMap<(String, String, String), BTreeSet<String>> = BTreeMap::new();
    for ((field, term), docs) in &o.postings {
        let fam = index_family(field).unwrap();
        for (lang, id) in docs {
            let row = partition_row(partition_of(*id, n));
            want.entry((term.clone(), fam.to_string(), row))
                .or_default()
                .insert(doc_key(lang, *id));
        }
    }
    type Got = BTreeMap<(String, String, String), (u64, Option<BTreeSet<String>>)>;
    for (table, reverse) in [(tables.index(), false), (tables.reverse(), true)] {
        let schema = client.table_schema(&table).unwrap();
        let mut got = Got::new();
        let mut sc = client.scanner(&table, ScanSpec::default()).unwrap();
        while let Some(c) = sc.next_cell().unwrap() {
            let fam = schema.family_by_id(c.key.family).unwrap().name.clone();
            let mut term = String::from_utf8(c.key.row.clone()).unwrap();
            if reverse {
                term = reversed(&term);
            }
            let v = String::from_utf8(c.value.clone()).unwrap();
            let (count, rest) = v.split_once(' ').unwrap();
            let members = (rest != "*").then(|| serde_json::from_str(rest).unwrap());
            let part = String::from_utf8(c.key.qualifier.clone()).unwrap();
            got.insert((term, fam, part), (count.parse().unwrap(), members));
        }
        assert_eq!(got.len(), want.len(), "{table}: cells");
        for (k, docs) in &want {
            let (count, members) = got.get(k).unwrap_or_else(|| panic!("{table}: no {k:?}"));
            assert_eq!(*count, docs.len() as u64, "{table} {k:?}");
            match members {
                Some(m) => {
                    assert!(docs.len() <= max, "{table} {k:?}: members kept above MAX");
                    assert_eq!(m, docs, "{table} {k:?}");
                }
                None => assert!(
                    docs.len() > max,
                    "{table} {k:?}: members dropped at or below MAX"
                ),
            }
        }
    }
}

fn check_queries(client: &dyn Client, tables: &Tables, o: &Oracle, seed: u64, queries: usize) {
    let v = Vocabulary::new(o);
    let mut s = Searcher::open(client, tables).unwrap();
    s.max_expansion = 100_000;
    let mut r = Rng(seed | 1);
    let (mut nonempty, mut too_wide) = (0, 0);
    for i in 0..queries {
        let words = 1 + r.below(5);
        let q = v.query(&mut r, words);
        let e = parse(&q).unwrap_or_else(|err| panic!("{q}: {err}"));
        let want = o.eval(&e);
        let got = match s.search(&e) {
            Ok(got) => got,
            Err(err) if format!("{err}").contains("more than 1024") => {
                assert!(o.terms(&e) > 1024, "{q}: {err}");
                too_wide += 1;
                continue;
            }
            Err(err) => panic!("{q}: {err:#}"),
        };
        let ids: BTreeSet<Doc> = got
            .matches
            .iter()
            .map(|(l, id, _)| (l.clone(), *id))
            .collect();
        assert_eq!(got.matches.len(), ids.len(), "query {i} {q}: duplicates");
        assert_eq!(ids, want, "query {i}: {q}");
        for (l, id, title) in &got.matches {
            assert_eq!(Some(title), o.titles.get(&(l.clone(), *id)), "query {q}");
        }
        nonempty += usize::from(!want.is_empty());
    }
    assert!(too_wide * 10 < queries, "{too_wide} queries too wide");
    assert!(
        nonempty * 4 > queries,
        "only {nonempty} of {queries} queries match anything"
    );
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
        check_counts(&client, &tables, &o, n, max);
        check_queries(&client, &tables, &o, 7 + i as u64, 60);
        client.compact(None, CompactionKind::Major).unwrap();
        check_counts(&client, &tables, &o, n, max);
        check_queries(&client, &tables, &o, 70 + i as u64, 30);
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
    check_counts(&client, &tables, &o, 7, 20);

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

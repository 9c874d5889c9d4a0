//! The brute-force reference of the search (issue 16's oracle): what every query must answer
//! and what every global-index cell must hold, computed from the articles by the same
//! tokenizer, plus random queries in the shapes the tests and `ht bench wikisearch` use.
//! [`check_counts`] and [`check_queries`] compare a namespace's tables and answers with it.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, bail, ensure};
use client::Client;
use common::ScanSpec;
use wikitext::{Article, term_set};

use crate::layout::{Tables, doc_key, index_family, partition_of, partition_row, reversed};
use crate::query::MAX_QUERY_TERMS;
use crate::{Expr, IngestStats, Ingester, Searcher, create_or_open, parse};

/// A document: (language, id).
pub type Doc = (String, u64);

/// What the articles hold, by the same tokenizer.
pub struct Oracle {
    /// (field, term) -> documents.
    pub postings: BTreeMap<(&'static str, String), BTreeSet<Doc>>,
    pub all: BTreeSet<Doc>,
    pub titles: BTreeMap<Doc, String>,
}

impl Oracle {
    /// The last article of each (language, id) wins, as in the tables.
    pub fn new(articles: &[Article]) -> Self {
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
    pub fn terms(&self, e: &Expr) -> usize {
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

    /// The documents a query matches.
    pub fn eval(&self, e: &Expr) -> BTreeSet<Doc> {
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
pub struct Vocabulary {
    frequent: Vec<String>,
    middling: Vec<String>,
    rare: Vec<String>,
    titles: Vec<String>,
}

impl Vocabulary {
    pub fn new(o: &Oracle) -> Self {
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

/// Random queries of 1-5 words over a [`Vocabulary`], the same for the same seed.
pub struct QueryGen {
    vocabulary: Vocabulary,
    rng: Rng,
}

impl QueryGen {
    pub fn new(o: &Oracle, seed: u64) -> Self {
        QueryGen {
            vocabulary: Vocabulary::new(o),
            rng: Rng(seed | 1),
        }
    }

    pub fn next_query(&mut self) -> String {
        let words = 1 + self.rng.below(5);
        self.vocabulary.query(&mut self.rng, words)
    }
}

/// Ingests `articles` into new (or matching) tables of `n` partitions and MAX `max`.
pub fn ingest(
    client: &dyn Client,
    tables: &Tables,
    articles: &[Article],
    n: u32,
    max: usize,
) -> anyhow::Result<IngestStats> {
    let (config, fresh) = create_or_open(client, tables, Some(n), Some(max))?;
    let mut ing = Ingester::new(client, tables, config, fresh)?;
    for a in articles {
        ing.add(a)?;
    }
    ing.finish()
}

/// Every global-index and reverse-index cell against the oracle: count = the document
/// frequency in the partition, members (when kept, i.e. up to `max`) = the documents.
pub fn check_counts(
    client: &dyn Client,
    tables: &Tables,
    o: &Oracle,
    n: u32,
    max: usize,
) -> anyhow::Result<()> {
    let mut want: BTreeMap<(String, String, String), BTreeSet<String>> = BTreeMap::new();
    for ((field, term), docs) in &o.postings {
        let fam = index_family(field).context("a known field")?;
        for (lang, id) in docs {
            let row = partition_row(partition_of(*id, n));
            want.entry((term.clone(), fam.to_string(), row))
                .or_default()
                .insert(doc_key(lang, *id));
        }
    }
    type Got = BTreeMap<(String, String, String), (u64, Option<BTreeSet<String>>)>;
    for (table, reverse) in [(tables.index(), false), (tables.reverse(), true)] {
        let schema = client.table_schema(&table)?;
        let mut got = Got::new();
        let mut sc = client.scanner(&table, ScanSpec::default())?;
        while let Some(c) = sc.next_cell()? {
            let fam = schema
                .family_by_id(c.key.family)
                .context("a family of the schema")?
                .name
                .clone();
            let mut term = String::from_utf8(c.key.row.clone())?;
            if reverse {
                term = reversed(&term);
            }
            let v = String::from_utf8(c.value.clone())?;
            let (count, rest) = v.split_once(' ').context("a uid_set value")?;
            let members = match rest {
                "*" => None,
                json => Some(serde_json::from_str(json)?),
            };
            let part = String::from_utf8(c.key.qualifier.clone())?;
            got.insert((term, fam, part), (count.parse()?, members));
        }
        ensure!(
            got.len() == want.len(),
            "{table}: {} cells, the oracle has {}",
            got.len(),
            want.len()
        );
        for (k, docs) in &want {
            let (count, members) = got.get(k).with_context(|| format!("{table}: no {k:?}"))?;
            ensure!(
                *count == docs.len() as u64,
                "{table} {k:?}: count {count}, the oracle's {}",
                docs.len()
            );
            match members {
                Some(m) => {
                    ensure!(docs.len() <= max, "{table} {k:?}: members kept above MAX");
                    ensure!(
                        m == docs,
                        "{table} {k:?}: members {m:?}, the oracle's {docs:?}"
                    );
                }
                None => ensure!(
                    docs.len() > max,
                    "{table} {k:?}: members dropped at or below MAX"
                ),
            }
        }
    }
    Ok(())
}

/// Runs `queries` random queries and compares each answer (documents and titles) with the
/// oracle's; `ordered` scans the shard with the ordered scanner. Returns how many matched
/// something. A query wider than the iterator's term bound must fail, and only then.
pub fn check_queries(
    client: &dyn Client,
    tables: &Tables,
    o: &Oracle,
    seed: u64,
    queries: usize,
    ordered: bool,
) -> anyhow::Result<usize> {
    let mut s = Searcher::open(client, tables)?;
    s.max_expansion = 100_000;
    s.ordered = ordered;
    let mut g = QueryGen::new(o, seed);
    let (mut nonempty, mut too_wide) = (0, 0);
    for i in 0..queries {
        let q = g.next_query();
        let e = parse(&q).map_err(|err| anyhow::anyhow!("{q}: {err}"))?;
        let want = o.eval(&e);
        let got = match s.search(&e) {
            Ok(got) => got,
            Err(err) if o.terms(&e) > MAX_QUERY_TERMS => {
                ensure!(
                    format!("{err}").contains("terms once its wildcards are expanded"),
                    "{q}: {err:#}"
                );
                too_wide += 1;
                continue;
            }
            Err(err) => return Err(err.context(format!("query {i}: {q}"))),
        };
        let ids: BTreeSet<Doc> = got
            .matches
            .iter()
            .map(|(l, id, _)| (l.clone(), *id))
            .collect();
        ensure!(got.matches.len() == ids.len(), "query {i} {q}: duplicates");
        if ids != want {
            let extra: Vec<&Doc> = ids.difference(&want).take(5).collect();
            let missing: Vec<&Doc> = want.difference(&ids).take(5).collect();
            bail!(
                "query {i} {q}: {} matches, the oracle's {}; extra {extra:?}, missing {missing:?}",
                ids.len(),
                want.len()
            );
        }
        for (l, id, title) in &got.matches {
            ensure!(
                Some(title) == o.titles.get(&(l.clone(), *id)),
                "query {q}: the title of {l} {id}"
            );
        }
        nonempty += usize::from(!want.is_empty());
    }
    ensure!(
        too_wide * 10 < queries.max(1),
        "{too_wide} queries too wide"
    );
    Ok(nonempty)
}

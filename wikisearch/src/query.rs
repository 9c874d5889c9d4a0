//! Queries: parsing, planning on the global index, and one scan of the chosen partitions with
//! the `boolean_index` iterator.
//!
//! Syntax: words joined by `and` / `or` (juxtaposed words mean AND; AND binds tighter than
//! OR), `not`, parentheses, `title:word` (the title field; the default is the text),
//! `word*` (every indexed term with that prefix, at most [`Searcher::max_expansion`]) and
//! `*word` (every term with that suffix, through the reverse index). A word is folded as
//! articles are (`wikitext::tokens`): "Köln" finds "koln"; a word that folds to several terms
//! ("B-52") means all of them. A word in double quotes is a word even when spelled like an
//! operator (`"and"`).
//!
//! Planning (Accumulo wikisearch's `RangeCalculator`): each term's global-index row gives the
//! partitions holding it. AND intersects them, OR unites them, NOT never narrows (it is
//! checked in the shard, by probe); a plan with no partition answers at once. Then one batch
//! scan ([`Client::batch_scanner`]: one request per server, servers in parallel) of the shard
//! over those partitions' rows runs the query inside the range servers and returns each
//! matching document's fields.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::time::Instant;

use anyhow::{Context, bail};
use client::Client;
use common::ScanSpec;
use common::iterators::ScanIterator;
use common::scan_spec::{ColumnSelector, QualifierMatch, RowInterval};

use crate::ingest::{Config, read_config};
use crate::layout::{self, Tables};

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// A term of a field (`TEXT` or `TITLE`).
    Term(&'static str, String),
    /// Every term of a field starting with this.
    Prefix(&'static str, String),
    /// Every term of a field ending with this.
    Suffix(&'static str, String),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Open,
    Close,
    And,
    Or,
    Not,
    /// A word and the column (1-based) it starts at.
    Word(String, usize),
}

fn lex(q: &str) -> Result<Vec<(Tok, usize)>, String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut start = 0;
    let flush = |word: &mut String, start: usize, out: &mut Vec<(Tok, usize)>| {
        if word.is_empty() {
            return;
        }
        let t = match word.to_ascii_lowercase().as_str() {
            "and" => Tok::And,
            "or" => Tok::Or,
            "not" => Tok::Not,
            _ => Tok::Word(word.clone(), start),
        };
        out.push((t, start));
        word.clear();
    };
    let mut chars = q.chars().enumerate().map(|(i, c)| (i + 1, c));
    while let Some((col, ch)) = chars.next() {
        match ch {
            '(' | ')' => {
                flush(&mut word, start, &mut out);
                out.push((if ch == '(' { Tok::Open } else { Tok::Close }, col));
            }
            // A quoted word is a word even if it is spelled like an operator: "and".
            '"' => {
                flush(&mut word, start, &mut out);
                let mut quoted = String::new();
                loop {
                    match chars.next() {
                        Some((_, '"')) => break,
                        Some((_, c)) => quoted.push(c),
                        None => return Err(format!("column {col}: the quote is not closed")),
                    }
                }
                out.push((Tok::Word(quoted, col), col));
            }
            c if c.is_whitespace() => flush(&mut word, start, &mut out),
            c => {
                if word.is_empty() {
                    start = col;
                }
                word.push(c);
            }
        }
    }
    flush(&mut word, start, &mut out);
    Ok(out)
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }

    fn col(&self) -> usize {
        self.toks.get(self.pos).map_or(0, |t| t.1)
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut v = vec![self.and()?];
        while self.peek() == Some(&Tok::Or) {
            self.pos += 1;
            v.push(self.and()?);
        }
        Ok(if v.len() == 1 {
            v.remove(0)
        } else {
            Expr::Or(v)
        })
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut v = vec![self.unary()?];
        loop {
            match self.peek() {
                Some(Tok::And) => {
                    self.pos += 1;
                    v.push(self.unary()?);
                }
                Some(Tok::Word(..) | Tok::Open | Tok::Not) => v.push(self.unary()?),
                _ => break,
            }
        }
        Ok(if v.len() == 1 {
            v.remove(0)
        } else {
            Expr::And(v)
        })
    }

    fn unary(&mut self) -> Result<Expr, String> {
        let col = self.col();
        match self.toks.get(self.pos).map(|t| t.0.clone()) {
            Some(Tok::Not) => {
                self.pos += 1;
                Ok(Expr::Not(Box::new(self.unary()?)))
            }
            Some(Tok::Open) => {
                self.pos += 1;
                let e = self.or()?;
                match self.toks.get(self.pos) {
                    Some((Tok::Close, _)) => {}
                    Some((t, c)) => return Err(format!("column {c}: ')' expected, not {t:?}")),
                    None => {
                        return Err(format!(
                            "column {col}: '(' is not closed by the end of the query"
                        ));
                    }
                }
                self.pos += 1;
                Ok(e)
            }
            Some(Tok::Word(w, c)) => {
                self.pos += 1;
                word(&w, c)
            }
            Some(t) => Err(format!("column {col}: a word expected, not {t:?}")),
            None => Err("a word expected at the end of the query".into()),
        }
    }
}

/// One word of a query: `[title:]word`, `word*`, `*word`.
fn word(w: &str, col: usize) -> Result<Expr, String> {
    let (field, w) = match w.split_once(':') {
        Some((f, rest)) if f.eq_ignore_ascii_case("title") => ("TITLE", rest),
        Some((f, rest)) if f.eq_ignore_ascii_case("text") => ("TEXT", rest),
        Some((f, _)) => {
            return Err(format!(
                "column {col}: unknown field '{f}' (fields: title, text)"
            ));
        }
        None => ("TEXT", w),
    };
    let (prefix, suffix) = (w.ends_with('*'), w.starts_with('*'));
    let core = w.trim_matches('*');
    let terms = wikitext::tokens(core);
    if terms.is_empty() {
        return Err(format!("column {col}: '{w}' has no letters or digits"));
    }
    if prefix && suffix {
        return Err(format!(
            "column {col}: '{w}': a word may have '*' at one end only"
        ));
    }
    if (prefix || suffix) && terms.len() > 1 {
        return Err(format!(
            "column {col}: '{w}': a wildcard word must be a single term"
        ));
    }
    let t = terms[0].clone();
    Ok(if prefix {
        Expr::Prefix(field, t)
    } else if suffix {
        Expr::Suffix(field, t)
    } else if terms.len() == 1 {
        Expr::Term(field, t)
    } else {
        Expr::And(terms.into_iter().map(|t| Expr::Term(field, t)).collect())
    })
}

/// Parses a query; the message names the column.
pub fn parse(q: &str) -> Result<Expr, String> {
    let mut p = Parser {
        toks: lex(q)?,
        pos: 0,
    };
    if p.toks.is_empty() {
        return Err("the query is empty".into());
    }
    let e = p.or()?;
    if p.pos < p.toks.len() {
        return Err(format!(
            "column {}: unexpected {:?}",
            p.col(),
            p.toks[p.pos].0
        ));
    }
    Ok(e)
}

/// Most terms a query may have after wildcard expansion: the `boolean_index` iterator's
/// bound (`MAX_QUERY_TERMS` in `rangeserver/src/iterators/boolean.rs`).
pub const MAX_QUERY_TERMS: usize = 1024;

/// A term that no article has (it holds a space, which no term does): what a wildcard that
/// matches nothing becomes.
const NO_TERM: &str = "\u{2205} none";

/// One global-index entry: per partition row, the documents holding the term (`None`: more
/// than MAX, only counted).
type Postings = BTreeMap<String, Option<BTreeSet<String>>>;

/// Which partitions a (sub)query may match in and, where the global index kept them, which
/// documents (a superset: the shard decides).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Parts {
    All,
    Some(Postings),
}

impl Parts {
    fn and(self, o: Parts) -> Parts {
        match (self, o) {
            (Parts::All, x) | (x, Parts::All) => x,
            (Parts::Some(a), Parts::Some(mut b)) => Parts::Some(
                a.into_iter()
                    .filter_map(|(p, da)| {
                        let docs = match (da, b.remove(&p)?) {
                            (Some(x), Some(y)) => {
                                let both: BTreeSet<String> = x.intersection(&y).cloned().collect();
                                if both.is_empty() {
                                    return None;
                                }
                                Some(both)
                            }
                            (Some(x), None) | (None, Some(x)) => Some(x),
                            (None, None) => None,
                        };
                        Some((p, docs))
                    })
                    .collect(),
            ),
        }
    }
    fn or(self, o: Parts) -> Parts {
        match (self, o) {
            (Parts::All, _) | (_, Parts::All) => Parts::All,
            (Parts::Some(mut a), Parts::Some(b)) => {
                for (p, db) in b {
                    match a.get_mut(&p) {
                        None => {
                            a.insert(p, db);
                        }
                        Some(da) => {
                            *da = match (da.take(), db) {
                                (Some(mut x), Some(y)) => {
                                    x.extend(y);
                                    Some(x)
                                }
                                _ => None,
                            }
                        }
                    }
                }
                Parts::Some(a)
            }
        }
    }
}

/// The answer to a query.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// (language, id, title) of every match, in (language, id) order.
    pub matches: Vec<(String, u64, String)>,
    pub index_ms: f64,
    pub shard_ms: f64,
    /// Partitions the shard scan read.
    pub partitions: usize,
    /// Terms looked up in the indexes (after wildcard expansion).
    pub terms: usize,
    /// Bytes of the cells the shard scan returned.
    pub result_bytes: u64,
}

/// Answers queries on one namespace.
pub struct Searcher<'a> {
    client: &'a dyn Client,
    tables: Tables,
    config: Config,
    /// Most terms one wildcard expands to.
    pub max_expansion: usize,
    /// Servers the shard scan asks at once ([`Client::batch_scanner`]).
    pub parallelism: usize,
    /// Scan the shard with the ordered scanner instead of the batch scanner (the answers are
    /// the same; tests compare them).
    pub ordered: bool,
}

impl<'a> Searcher<'a> {
    pub fn open(client: &'a dyn Client, tables: &Tables) -> anyhow::Result<Self> {
        let config = read_config(client, tables)?
            .with_context(|| format!("{} holds no wikisearch tables", tables.namespace))?;
        Ok(Self {
            client,
            tables: tables.clone(),
            config,
            max_expansion: 1000,
            parallelism: 16,
            ordered: false,
        })
    }

    pub fn config(&self) -> Config {
        self.config
    }

    /// The global-index entries of the terms, all in one scan of their rows (a key set: one
    /// request per server on a cluster).
    fn lookup_all(
        &self,
        terms: &BTreeSet<(&'static str, String)>,
    ) -> anyhow::Result<BTreeMap<(&'static str, String), Postings>> {
        let mut out: BTreeMap<(&'static str, String), Postings> =
            terms.iter().map(|t| (t.clone(), Postings::new())).collect();
        let rows: BTreeSet<&str> = terms
            .iter()
            .map(|(_, t)| t.as_str())
            .filter(|t| *t != NO_TERM)
            .collect();
        if rows.is_empty() {
            return Ok(out);
        }
        let table = self.tables.index();
        let spec = ScanSpec {
            row_intervals: rows
                .iter()
                .map(|r| RowInterval::row(r.as_bytes()))
                .collect(),
            ..ScanSpec::default()
        };
        let mut sc = self.client.batch_scanner(&table, spec, self.parallelism)?;
        while let Some(c) = sc.next_cell()? {
            let row = String::from_utf8_lossy(&c.key.row).into_owned();
            let Some(field) = FIELD_FAMILY.get(usize::from(c.key.family).wrapping_sub(1)) else {
                continue;
            };
            let Some(postings) = out.get_mut(&(*field, row)) else {
                continue;
            };
            let (count, members) = set_value(&c.value).with_context(|| {
                format!(
                    "{table}: bad uid_set value in row {:?}",
                    String::from_utf8_lossy(&c.key.row)
                )
            })?;
            if count > 0 {
                postings.insert(
                    String::from_utf8_lossy(&c.key.qualifier).into_owned(),
                    members,
                );
            }
        }
        Ok(out)
    }

    /// The terms of a field's index rows starting with `prefix` (at most `max_expansion`).
    fn expand(&self, table: &str, field: &str, prefix: &str) -> anyhow::Result<Vec<String>> {
        let fam = FIELD_FAMILY
            .iter()
            .position(|f| *f == field)
            .expect("known") as u8
            + 1;
        let mut end = prefix.as_bytes().to_vec();
        end.push(0xFF);
        let spec = ScanSpec {
            row_intervals: vec![RowInterval {
                start: Bound::Included(prefix.as_bytes().to_vec()),
                end: Bound::Excluded(end),
            }],
            columns: vec![ColumnSelector {
                family: fam,
                qualifier: QualifierMatch::All,
            }],
            ..ScanSpec::default()
        };
        let mut terms: Vec<String> = Vec::new();
        let mut sc = self.client.scanner(table, spec)?;
        while let Some(c) = sc.next_cell()? {
            let t = String::from_utf8_lossy(&c.key.row).into_owned();
            if terms.last() != Some(&t) {
                if terms.len() == self.max_expansion {
                    bail!(
                        "'{prefix}*' matches more than {} terms; be more specific",
                        self.max_expansion
                    );
                }
                terms.push(t);
            }
        }
        Ok(terms)
    }

    /// Replaces wildcards by the terms they match (a wildcard that matches nothing becomes a
    /// term no document has).
    fn expand_wildcards(&self, e: &Expr) -> anyhow::Result<Expr> {
        Ok(match e {
            Expr::Term(..) => e.clone(),
            Expr::Prefix(f, t) | Expr::Suffix(f, t) => {
                let expanded: Vec<String> = if matches!(e, Expr::Suffix(..)) {
                    self.expand(&self.tables.reverse(), f, &layout::reversed(t))?
                        .iter()
                        .map(|r| layout::reversed(r))
                        .collect()
                } else {
                    self.expand(&self.tables.index(), f, t)?
                };
                if expanded.is_empty() {
                    Expr::Term(f, NO_TERM.to_string())
                } else {
                    Expr::Or(expanded.into_iter().map(|t| Expr::Term(f, t)).collect())
                }
            }
            Expr::And(v) => Expr::And(
                v.iter()
                    .map(|x| self.expand_wildcards(x))
                    .collect::<anyhow::Result<_>>()?,
            ),
            Expr::Or(v) => Expr::Or(
                v.iter()
                    .map(|x| self.expand_wildcards(x))
                    .collect::<anyhow::Result<_>>()?,
            ),
            Expr::Not(x) => Expr::Not(Box::new(self.expand_wildcards(x)?)),
        })
    }

    /// Plans the partitions of a query without wildcards from its terms' global-index
    /// entries; returns the query for the iterator and the partitions to scan.
    fn plan(
        e: &Expr,
        index: &BTreeMap<(&'static str, String), Postings>,
    ) -> (serde_json::Value, Parts) {
        use serde_json::json;
        match e {
            Expr::Term(f, t) => {
                let parts = Parts::Some(index.get(&(*f, t.clone())).cloned().unwrap_or_default());
                (json!({"t": [f, t]}), parts)
            }
            Expr::Prefix(..) | Expr::Suffix(..) => {
                unreachable!("wildcards are expanded before planning")
            }
            Expr::And(v) => {
                let mut qs = Vec::new();
                let mut parts = Parts::All;
                for c in v {
                    let (q, p) = Self::plan(c, index);
                    qs.push(q);
                    parts = parts.and(p);
                }
                (json!({"and": qs}), parts)
            }
            Expr::Or(v) => {
                let mut qs = Vec::new();
                let mut parts = Parts::Some(Postings::new());
                for c in v {
                    let (q, p) = Self::plan(c, index);
                    qs.push(q);
                    parts = parts.or(p);
                }
                (json!({"or": qs}), parts)
            }
            Expr::Not(x) => {
                let (q, _) = Self::plan(x, index);
                (json!({"not": q}), Parts::All)
            }
        }
    }

    /// Answers a query.
    pub fn search(&self, e: &Expr) -> anyhow::Result<Answer> {
        let mut answer = Answer::default();
        let t0 = Instant::now();
        let e = self.expand_wildcards(e)?;
        answer.terms = count_terms(&e);
        if answer.terms > MAX_QUERY_TERMS {
            bail!(
                "the query has {} terms once its wildcards are expanded, more than {MAX_QUERY_TERMS}; \
                 be more specific",
                answer.terms
            );
        }
        let mut terms = BTreeSet::new();
        collect_terms(&e, &mut terms);
        let index = self.lookup_all(&terms)?;
        let (query, parts) = Self::plan(&e, &index);
        answer.index_ms = t0.elapsed().as_secs_f64() * 1e3;
        let rows: Vec<String> = match parts {
            Parts::All => (0..self.config.partitions)
                .map(layout::partition_row)
                .collect(),
            Parts::Some(s) => s.into_keys().collect(),
        };
        answer.partitions = rows.len();
        if rows.is_empty() {
            return Ok(answer);
        }
        let t1 = Instant::now();
        let spec = ScanSpec {
            row_intervals: rows
                .iter()
                .map(|r| RowInterval {
                    start: Bound::Included(r.as_bytes().to_vec()),
                    end: Bound::Included(r.as_bytes().to_vec()),
                })
                .collect(),
            columns: [1u8, 2]
                .into_iter()
                .map(|family| ColumnSelector {
                    family,
                    qualifier: QualifierMatch::All,
                })
                .collect(),
            max_versions: 1,
            iterators: vec![ScanIterator {
                kind: "boolean_index".into(),
                options: [("QUERY".to_string(), query.to_string())]
                    .into_iter()
                    .collect(),
            }],
            ..ScanSpec::default()
        };
        let mut sc = if self.ordered {
            self.client.scanner(&self.tables.shard(), spec)?
        } else {
            self.client
                .batch_scanner(&self.tables.shard(), spec, self.parallelism)?
        };
        let mut docs: BTreeMap<(String, u64), String> = BTreeMap::new();
        while let Some(c) = sc.next_cell()? {
            answer.result_bytes += (c.key.qualifier.len() + c.value.len()) as u64;
            let q = &c.key.qualifier;
            let Some(cut) = q.iter().rposition(|&b| b == 0) else {
                continue;
            };
            let Some(doc) = layout::parse_doc_key(&q[..cut]) else {
                bail!(
                    "{}: bad document key {:?}",
                    self.tables.shard(),
                    String::from_utf8_lossy(q)
                );
            };
            let title = docs.entry(doc).or_default();
            if &q[cut + 1..] == b"TITLE" {
                *title = String::from_utf8_lossy(&c.value).into_owned();
            }
        }
        answer.shard_ms = t1.elapsed().as_secs_f64() * 1e3;
        answer.matches = docs
            .into_iter()
            .map(|((lang, id), title)| (lang, id, title))
            .collect();
        Ok(answer)
    }
}

/// The term leaves of a query (with repeats).
fn count_terms(e: &Expr) -> usize {
    match e {
        Expr::Term(..) | Expr::Prefix(..) | Expr::Suffix(..) => 1,
        Expr::And(v) | Expr::Or(v) => v.iter().map(count_terms).sum(),
        Expr::Not(x) => count_terms(x),
    }
}

/// The distinct (field, term) pairs of a query without wildcards.
fn collect_terms(e: &Expr, out: &mut BTreeSet<(&'static str, String)>) {
    match e {
        Expr::Term(f, t) => {
            out.insert((*f, t.clone()));
        }
        Expr::Prefix(..) | Expr::Suffix(..) => {}
        Expr::And(v) | Expr::Or(v) => v.iter().for_each(|x| collect_terms(x, out)),
        Expr::Not(x) => collect_terms(x, out),
    }
}

/// Fields in index-family order (family id = position + 1).
const FIELD_FAMILY: [&str; 2] = [layout::FIELDS[0].0, layout::FIELDS[1].0];

/// A `uid_set` cell as a scan shows it: `count ["member",...]`, or `count *` when the members
/// were dropped.
fn set_value(v: &[u8]) -> anyhow::Result<(u64, Option<BTreeSet<String>>)> {
    let s = std::str::from_utf8(v)?;
    let (n, rest) = s.split_once(' ').context("no space after the count")?;
    let members = match rest {
        "*" => None,
        json => Some(serde_json::from_str::<BTreeSet<String>>(json)?),
    };
    Ok((n.parse()?, members))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(w: &str) -> Expr {
        Expr::Term("TEXT", w.into())
    }

    #[test]
    fn queries_parse_as_the_seed_writes_them() {
        assert_eq!(
            parse("old and man and sea").unwrap(),
            Expr::And(vec![t("old"), t("man"), t("sea")])
        );
        assert_eq!(
            parse("old man sea").unwrap(),
            parse("old AND man AND sea").unwrap()
        );
        assert_eq!(
            parse("fast and (furious or furriest)").unwrap(),
            Expr::And(vec![t("fast"), Expr::Or(vec![t("furious"), t("furriest")])])
        );
        assert_eq!(
            parse("a or b c").unwrap(),
            Expr::Or(vec![t("a"), Expr::And(vec![t("b"), t("c")])])
        );
        assert_eq!(
            parse("not Köln title:Paris spr* *ing").unwrap(),
            Expr::And(vec![
                Expr::Not(Box::new(t("koln"))),
                Expr::Term("TITLE", "paris".into()),
                Expr::Prefix("TEXT", "spr".into()),
                Expr::Suffix("TEXT", "ing".into()),
            ])
        );
        assert_eq!(parse("B-52").unwrap(), Expr::And(vec![t("b"), t("52")]));
        assert_eq!(
            parse(r#""and" or "not""#).unwrap(),
            Expr::Or(vec![t("and"), t("not")])
        );
    }

    #[test]
    fn bad_queries_say_where() {
        for (q, says) in [
            ("", "empty"),
            ("(old", "column 1: '(' is not closed"),
            ("(old (a b) c", "column 1: '(' is not closed"),
            ("old \"and", "column 5: the quote is not closed"),
            ("old and", "end of the query"),
            ("old )", "column 5"),
            ("x:old", "unknown field 'x'"),
            ("--", "no letters"),
            ("*a*", "one end"),
            ("b-5*", "single term"),
        ] {
            let e = parse(q).unwrap_err();
            assert!(e.contains(says), "{q:?}: {e}");
        }
    }

    #[test]
    fn uid_set_values_are_read_from_both_forms() {
        let abc: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
        assert_eq!(set_value(br#"3 ["a","b","c"]"#).unwrap(), (3, Some(abc)));
        assert_eq!(set_value(b"70 *").unwrap(), (70, None));
        assert!(set_value(b"x").is_err());
        assert!(set_value(b"1 [").is_err());
    }

    fn parts(v: &[(&str, Option<&[&str]>)]) -> Parts {
        Parts::Some(
            v.iter()
                .map(|(p, d)| {
                    (
                        p.to_string(),
                        d.map(|d| d.iter().map(|x| x.to_string()).collect()),
                    )
                })
                .collect(),
        )
    }

    #[test]
    fn plans_intersect_partitions_and_kept_document_sets() {
        let a = parts(&[
            ("p0", Some(&["x", "y"])),
            ("p1", None),
            ("p2", Some(&["z"])),
        ]);
        let b = parts(&[
            ("p0", Some(&["y"])),
            ("p1", Some(&["w"])),
            ("p2", Some(&["q"])),
            ("p3", None),
        ]);
        assert_eq!(
            a.clone().and(b.clone()),
            parts(&[("p0", Some(&["y"])), ("p1", Some(&["w"]))])
        );
        assert_eq!(
            a.clone().or(b),
            parts(&[
                ("p0", Some(&["x", "y"])),
                ("p1", None),
                ("p2", Some(&["q", "z"])),
                ("p3", None)
            ])
        );
        assert_eq!(a.clone().and(Parts::All), a);
        assert_eq!(a.or(Parts::All), Parts::All);
    }
}

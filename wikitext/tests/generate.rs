//! The generator against its source: the 4,540 shared articles remixed into twice as many
//! keep each common term's document frequency and the seed queries' co-occurrence, and the
//! output reads back through `open`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use wikitext::generate::{GenerateOptions, SentencePool, generate, write_jsonl};
use wikitext::{Article, open, term_set};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data/wikipedia")
        .join(name)
}

/// Document frequency of every term, as a fraction of the articles.
fn df(articles: &[Article]) -> BTreeMap<String, f64> {
    let mut n: BTreeMap<String, u64> = BTreeMap::new();
    for a in articles {
        for t in term_set(&a.text) {
            *n.entry(t).or_default() += 1;
        }
    }
    let total = articles.len() as f64;
    n.into_iter().map(|(t, c)| (t, c as f64 / total)).collect()
}

fn all_of(set: &BTreeSet<String>, words: &[&str]) -> bool {
    words.iter().all(|w| set.contains(*w))
}

#[test]
fn a_remix_keeps_document_frequencies_and_co_occurrence() {
    let source: Vec<Article> = open(&data("enwiki-articles-4540.jsonl.gz"))
        .expect("sample")
        .map(|a| a.expect("clean sample"))
        .collect();
    let pool = SentencePool::from_articles(source.clone());
    let options = GenerateOptions {
        articles: 2 * source.len() as u64,
        seed: 16,
        ..GenerateOptions::default()
    };
    let generated: Vec<Article> = generate(&pool, options.clone()).collect();
    assert_eq!(generated.len(), 2 * source.len());
    // Deterministic: the same options give the same articles.
    let again: Vec<Article> = generate(&pool, options).take(50).collect();
    assert_eq!(again, generated[..50]);

    let (src, made) = (df(&source), df(&generated));
    // Terms in 2%..60% of the source articles: within a factor 2 in the remix. (Topical
    // terms, dense in a few source articles, spread: an article mixes several sources.)
    let mut checked = 0;
    let mut off = Vec::new();
    for (t, &f) in &src {
        if !(0.02..0.6).contains(&f) {
            continue;
        }
        checked += 1;
        let g = made.get(t).copied().unwrap_or(0.0);
        if !(f / 2.0..f * 2.0).contains(&g) {
            off.push(format!("{t}: {f:.3} -> {g:.3}"));
        }
    }
    assert!(checked > 500, "{checked} terms checked");
    assert!(
        off.len() * 50 <= checked,
        "{} of {checked} terms off by more than 2x: {:?}",
        off.len(),
        &off[..off.len().min(20)]
    );
    // No new vocabulary in the texts.
    assert!(made.keys().all(|t| src.contains_key(t)));

    // The seed's multi-word queries keep matching (co-occurrence survives the remix): the
    // fraction of articles with all the words stays within 4x of the source's (it rises:
    // common words co-occur more in articles mixed from several sources).
    let frac = |arts: &[Article], words: &[&str]| {
        arts.iter()
            .filter(|a| all_of(&term_set(&a.text), words))
            .count() as f64
            / arts.len() as f64
    };
    for words in [
        &["old", "man", "sea"][..],
        &["paris", "in", "the", "spring"],
        &["fast", "furious"],
        &["world", "war"],
    ] {
        let (s, g) = (frac(&source, words), frac(&generated, words));
        assert!(s > 0.0, "{words:?} in the source");
        assert!(
            (s / 4.0..s * 4.0).contains(&g),
            "{words:?}: {s:.4} of the source, {g:.4} of the remix"
        );
    }
}

#[test]
fn written_corpora_read_back() {
    let source: Vec<Article> = open(&data("enwiki-articles-4540.jsonl.gz"))
        .expect("sample")
        .take(200)
        .map(|a| a.expect("clean sample"))
        .collect();
    let pool = SentencePool::from_articles(source);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("enwiki-remix.jsonl.gz");
    let options = GenerateOptions {
        articles: 300,
        seed: 1,
        first_id: 1_000_000,
        ..GenerateOptions::default()
    };
    let (n, bytes) = write_jsonl(&path, generate(&pool, options.clone())).unwrap();
    assert_eq!(n, 300);
    let back: Vec<Article> = open(&path).unwrap().map(|a| a.unwrap()).collect();
    let want: Vec<Article> = generate(&pool, options).collect();
    assert_eq!(bytes, want.iter().map(|a| a.text.len() as u64).sum::<u64>());
    assert_eq!(back.len(), want.len());
    for (b, w) in back.iter().zip(&want) {
        assert_eq!((b.id, &b.title, &b.lang), (w.id, &w.title, &w.lang));
        assert_eq!(b.text.trim_end(), w.text.trim_end());
    }
}

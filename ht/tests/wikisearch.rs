//! `ht wikisearch ingest | query | generate` as a user runs them: the XML samples into an
//! embedded database, queries in both output forms checked against the tokenizer, re-ingest
//! without change, a truncated dump ending the ingest with what was committed, a generated
//! corpus read back.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data/wikipedia")
        .join(name)
}

fn ht(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ht"))
        .arg("wikisearch")
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run ht")
}

fn ok(o: Output) -> (String, String) {
    let (out, err) = (
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    );
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{err}");
    (out, err)
}

#[test]
fn ingest_then_query_the_xml_samples() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let en = data("enwiki-pages-articles-sample.xml.bz2");
    let de = data("dewiki-20170701-sample.xml.gz");
    let (out, err) = ok(ht(
        &db,
        &[
            "ingest",
            "--quiet",
            en.to_str().unwrap(),
            de.to_str().unwrap(),
        ],
    ));
    assert!(
        err.contains("/wiki: 4 partitions, MAX 20 (created)"),
        "{err}"
    );
    assert!(
        out.contains("126 articles (126 new, 0 replaced, 0 unchanged)"),
        "{out}"
    );
    assert!(out.contains("skipped 115 redirects, 44 pages of other namespaces, 0 bad"));

    // The oracle: the same reader and tokenizer.
    let articles: Vec<wikitext::Article> = [&en, &de]
        .iter()
        .flat_map(|f| wikitext::open(f).unwrap().map(|a| a.unwrap()))
        .collect();
    let with = |w: &str| -> BTreeSet<(String, u64)> {
        articles
            .iter()
            .filter(|a| wikitext::term_set(&a.text).contains(w))
            .map(|a| (a.lang.clone(), a.id))
            .collect()
    };
    let want: BTreeSet<(String, u64)> = with("philosophy")
        .intersection(&with("the"))
        .cloned()
        .collect();
    assert!(want.len() > 3);

    let (out, err) = ok(ht(&db, &["query", "--ids", "philosophy the"]));
    let lines: Vec<&str> = out.lines().collect();
    let got: Vec<(String, u64)> = lines
        .iter()
        .map(|l| {
            let (lang, id) = l.split_once('\t').expect("language<TAB>id");
            (lang.to_string(), id.parse().expect("id"))
        })
        .collect();
    assert!(got.windows(2).all(|w| w[0] < w[1]), "in id order: {out}");
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), want);
    assert!(
        err.contains("global index") && err.contains("shard scan"),
        "{err}"
    );

    let (out, _) = ok(ht(&db, &["query", "--limit", "2", "philosophy the"]));
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some(format!("{} matches", want.len()).as_str())
    );
    let listed: Vec<&str> = lines.collect();
    assert_eq!(listed.len(), 2, "{out}");
    assert!(listed[0].split('\t').count() == 3, "{out}");

    // "Köln" folds to "koln"; a term no article has answers at once with nothing.
    let (out, _) = ok(ht(&db, &["query", "--ids", "Köln"]));
    assert_eq!(out.lines().count(), with("koln").len());
    assert!(!with("koln").is_empty());
    let (out, err) = ok(ht(&db, &["query", "xylophonist and the"]));
    assert_eq!(out, "0 matches\n");
    assert!(err.contains("0 partitions"), "{err}");

    // A bad query says where.
    let o = ht(&db, &["query", "old and (man"]);
    assert!(!o.status.success());
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("column 9: '(' is not closed"), "{err}");

    // Again: nothing changes, nothing is counted twice; the partition count is kept.
    let (out, _) = ok(ht(&db, &["ingest", "--quiet", en.to_str().unwrap()]));
    assert!(
        out.contains("106 articles (0 new, 0 replaced, 106 unchanged)"),
        "{out}"
    );
    let o = ht(&db, &["ingest", "--partitions", "9", en.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8(o.stderr)
            .unwrap()
            .contains("4 partitions")
    );
}

#[test]
fn a_truncated_dump_ends_the_ingest_with_what_was_committed() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    // The first 1,000,000 bytes of the English sample, uncompressed: cut inside a page.
    let mut xml = Vec::new();
    std::io::Read::read_to_end(
        &mut bunzip(&data("enwiki-pages-articles-sample.xml.bz2")),
        &mut xml,
    )
    .unwrap();
    let cut = tmp.path().join("enwiki-cut.xml");
    std::fs::write(&cut, &xml[..1_000_000]).unwrap();
    let o = ht(&db, &["ingest", "--quiet", cut.to_str().unwrap()]);
    assert!(!o.status.success());
    let (out, err) = (
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    );
    assert!(err.contains("truncated"), "{err}");
    assert!(err.contains("enwiki-cut.xml"), "{err}");
    assert!(err.contains("are committed"), "{err}");
    let committed: u64 = out
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(committed > 0, "{out}");
    // What was committed answers queries.
    let (out, _) = ok(ht(&db, &["query", "--ids", "the"]));
    assert_eq!(out.lines().count() as u64, committed);
}

fn bunzip(path: &Path) -> bzip2::read::MultiBzDecoder<std::fs::File> {
    bzip2::read::MultiBzDecoder::new(std::fs::File::open(path).unwrap())
}

#[test]
fn a_generated_corpus_reads_back_and_ingests() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("enwiki-remix.jsonl.gz");
    let src = data("enwiki-pages-articles-sample.xml.bz2");
    let o = Command::new(env!("CARGO_BIN_EXE_ht"))
        .args(["wikisearch", "generate", "--articles", "500", "--seed", "3"])
        .arg("--out")
        .arg(&out)
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let a: Vec<wikitext::Article> = wikitext::open(&out).unwrap().map(|a| a.unwrap()).collect();
    assert_eq!(a.len(), 500);
    assert_eq!((a[0].id, a[499].id), (1, 500));
    assert!(a.iter().all(|x| x.lang == "en" && !x.text.is_empty()));
    let db = tmp.path().join("db");
    let (o, _) = ok(ht(&db, &["ingest", "--quiet", out.to_str().unwrap()]));
    assert!(o.contains("500 articles (500 new"), "{o}");
}

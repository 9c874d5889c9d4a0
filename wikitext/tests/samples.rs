//! The readers, the stripper and the tokenizer on the real samples in
//! `shared/data/wikipedia/`, and the readers on broken input.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use wikitext::{
    Article, Articles, Format, ReadError, ReadOptions, Skipped, open, open_with, term_set,
};

fn data(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data/wikipedia")
        .join(name);
    assert!(path.exists(), "sample {} is missing", path.display());
    path
}

const EN_XML: &str = "enwiki-pages-articles-sample.xml.bz2";
const DE_XML: &str = "dewiki-20170701-sample.xml.gz";
const EN_JSONL: &str = "enwiki-articles-4540.jsonl.gz";

/// Reads everything, panicking on any error (the samples are clean).
fn read_all(name: &str) -> (Vec<Article>, Skipped, u64) {
    let mut articles = open(&data(name)).unwrap_or_else(|e| panic!("{e}"));
    let all: Vec<Article> = articles
        .by_ref()
        .map(|r| r.unwrap_or_else(|e| panic!("{e}")))
        .collect();
    (all, articles.skipped(), articles.bytes_read())
}

fn by_title<'a>(all: &'a [Article], title: &str) -> &'a Article {
    all.iter()
        .find(|a| a.title == title)
        .unwrap_or_else(|| panic!("no article {title:?}"))
}

/// Asserts terms present and absent in an article's term set.
fn assert_terms(article: &Article, present: &[&str], absent: &[&str]) {
    let terms = term_set(&article.text);
    for t in present {
        assert!(terms.contains(*t), "{}: expected term {t:?}", article.title);
    }
    for t in absent {
        assert!(
            !terms.contains(*t),
            "{}: markup term {t:?} leaked into the text",
            article.title
        );
    }
}

/// No markup left over in any article of a sample.
fn assert_no_markup(all: &[Article]) {
    for a in all {
        for artefact in [
            "{{", "}}", "[[", "]]", "<ref", "</ref", "&nbsp;", "&amp;", "'''", "<!--", "__TOC__",
        ] {
            assert!(
                !a.text.contains(artefact),
                "{}: {artefact:?} left in the text",
                a.title
            );
        }
        for line in a.text.lines() {
            assert!(
                !line.starts_with("=="),
                "{}: heading marker left: {line:?}",
                a.title
            );
            assert!(
                !line.starts_with("{|") && !line.starts_with("|-"),
                "{}: table left: {line:?}",
                a.title
            );
        }
    }
}

#[test]
fn english_xml_sample() {
    let (all, skipped, bytes) = read_all(EN_XML);
    // 206 pages: 205 in namespace 0 of which 99 are redirects, and one
    // redirect in namespace 4 (counted as another namespace: the namespace is
    // checked first).
    assert_eq!(all.len(), 106);
    assert_eq!(
        skipped,
        Skipped {
            redirects: 99,
            other_namespaces: 1,
            bad: 0
        }
    );
    assert!(all.iter().all(|a| a.lang == "en"));
    let ids: BTreeSet<u64> = all.iter().map(|a| a.id).collect();
    assert_eq!(ids.len(), all.len(), "page ids are unique");
    // The first page, AccessibleComputing (id 10), is a redirect.
    assert!(!ids.contains(&10));
    let first = &all[0];
    assert_eq!((first.id, first.title.as_str()), (12, "Anarchism"));
    assert_eq!(first.timestamp.as_deref(), Some("2016-04-22T10:19:33Z"));
    let last = &all[all.len() - 1];
    assert_eq!((last.id, last.title.as_str()), (775, "Algorithm"));
    // Page ids, not revision ids (those are nine digits in this dump).
    assert!(all.iter().all(|a| a.id < 1000));
    assert_eq!(
        bytes,
        std::fs::metadata(data(EN_XML))
            .map(|m| m.len())
            .unwrap_or(0),
        "all of the file was read"
    );
    assert_no_markup(&all);
}

#[test]
fn english_page_with_infobox_refs_and_table() {
    let (all, _, _) = read_all(EN_XML);
    let aruba = by_title(&all, "Aruba");
    assert!(aruba.text.starts_with("Aruba ("), "{:?}", &aruba.text[..80]);
    assert_terms(
        aruba,
        // Body words, link labels ([[Oranjestad, Aruba|Oranjestad]]), accented words.
        &[
            "aruba",
            "oranjestad",
            "caribbean",
            "netherlands",
            "vespucci",
            "caquetio",
            "curacao",
            "1499",
        ],
        // Infobox parameter names and values only found there, ref authors and
        // URLs, categories, template names, markup words.
        &[
            "infobox",
            "conventional",
            "vunblist",
            "refunjol",
            "migge",
            "bettina",
            "cbaruba",
            "disestablishments",
            "ref",
            "cite",
            "thumb",
            "wikitable",
            "px",
            "nbsp",
            "http",
            "url",
        ],
    );
    assert!(!aruba.text.contains('|'));

    let einstein = by_title(&all, "Albert Einstein");
    assert_terms(
        einstein,
        &[
            "relativity",
            "princeton",
            "photoelectric",
            "ligo",
            "gravitational",
        ],
        // A mistyped `</ref name="natgeo">` in the source must not end the ref.
        &["ref", "cite", "infobox", "natgeo", "website", "doi"],
    );
}

#[test]
fn german_xml_sample() {
    let (all, skipped, _) = read_all(DE_XML);
    // 79 pages: 36 in namespace 0 (16 of them redirects), 43 in others
    // (talk, user, project, template, category; one of them a redirect).
    assert_eq!(all.len(), 20);
    assert_eq!(
        skipped,
        Skipped {
            redirects: 16,
            other_namespaces: 43,
            bad: 0
        }
    );
    assert!(
        all.iter().all(|a| a.lang == "de"),
        "lang from <dbname>dewiki</dbname>"
    );
    let nilsen = by_title(&all, "Kurt Nilsen");
    assert_eq!(nilsen.id, 286836);
    assert_eq!(nilsen.timestamp.as_deref(), Some("2017-04-01T07:21:53Z"));
    assert!(nilsen.text.starts_with(
        "Kurt Erik Nilsen (* 29. September 1978 in Bergen) ist ein norwegischer Musiker."
    ));
    assert_terms(
        nilsen,
        // Body, link labels ([[Norwegen|norwegischer]]), umlauts folded
        // (Debütalbum), external link label ("Offizielle Website").
        &[
            "kurt",
            "nilsen",
            "norwegischer",
            "musiker",
            "bergen",
            "klempner",
            "bono",
            "debutalbum",
            "offizielle",
        ],
        // Categories (Popsänger), Personendaten and Normdaten templates, the
        // sales table, refs (laut.de), the image caption word "mini".
        &[
            "popsanger",
            "rocksanger",
            "personendaten",
            "kurzbeschreibung",
            "normdaten",
            "viaf",
            "ifpi",
            "laut",
            "mini",
            "wikitable",
            "align",
            "ref",
            "kategorie",
            "datei",
            "sortierung",
        ],
    );
    let year = by_title(&all, "1802");
    assert_eq!(year.id, 6873);
    assert_terms(year, &["koln", "hanneschen"], &["ref", "kategorie"]);
    let starkenberg = by_title(&all, "Herren von Starkenberg");
    // File captions ("Coa House of Starkenberg.svg|thumb|100px") are dropped,
    // link labels kept.
    assert_terms(
        starkenberg,
        &["staufer", "tirol", "aufenstein", "habsburg"],
        &["coa", "svg", "thumb", "100px", "upright"],
    );
    assert_no_markup(&all);
}

#[test]
fn json_lines_sample_and_its_terms() {
    let (all, skipped, _) = read_all(EN_JSONL);
    assert_eq!(all.len(), 4540);
    assert_eq!(skipped, Skipped::default());
    assert!(all.iter().all(|a| a.lang == "en" && a.timestamp.is_none()));
    let ids: BTreeSet<u64> = all.iter().map(|a| a.id).collect();
    assert_eq!(ids.len(), 4540);

    // The upstream bug indexed one bogus token per article: every article
    // here must have many terms, and common words must be found.
    let mut per_article: Vec<usize> = Vec::with_capacity(all.len());
    let mut df: BTreeMap<String, usize> = BTreeMap::new();
    for a in &all {
        let terms = term_set(&a.text);
        per_article.push(terms.len());
        for t in terms {
            *df.entry(t).or_default() += 1;
        }
    }
    per_article.sort_unstable();
    let median = per_article[per_article.len() / 2];
    assert!(median > 50, "median distinct terms per article: {median}");
    assert!(
        (20_000..2_000_000).contains(&df.len()),
        "distinct terms overall: {}",
        df.len()
    );
    for common in ["the", "and", "of", "in"] {
        let n = df.get(common).copied().unwrap_or(0);
        assert!(
            n * 10 > all.len() * 8,
            "{common:?} is in only {n} of {} articles",
            all.len()
        );
    }
    assert!(
        df.keys()
            .all(|t| !t.is_empty() && t.chars().all(char::is_alphanumeric))
    );
}

#[test]
fn json_lines_first_article() {
    let mut articles = open(&data(EN_JSONL)).unwrap_or_else(|e| panic!("{e}"));
    let first = articles.next().and_then(Result::ok);
    let first = first.unwrap_or_else(|| panic!("no first article"));
    // As in the file's first line.
    let expected = first_json_line();
    assert_eq!(first.id, expected.0);
    assert_eq!(first.title, expected.1);
    assert_eq!(first.text, expected.2, "JSON text is returned as is");
}

/// (id, title, text) of the first line, read independently with flate2 and serde_json.
fn first_json_line() -> (u64, String, String) {
    use std::io::BufRead;
    let file = std::fs::File::open(data(EN_JSONL)).unwrap_or_else(|e| panic!("{e}"));
    let mut line = String::new();
    std::io::BufReader::new(flate2::read::MultiGzDecoder::new(file))
        .read_line(&mut line)
        .unwrap_or_else(|e| panic!("{e}"));
    let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}"));
    let id = v["id"].as_str().and_then(|s| s.parse().ok()).unwrap_or(0);
    (
        id,
        v["title"].as_str().unwrap_or("").to_owned(),
        v["text"].as_str().unwrap_or("").to_owned(),
    )
}

// ---- broken input ---------------------------------------------------------

fn temp_file(name: &str, bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join(name);
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(bytes))
        .unwrap_or_else(|e| panic!("{e}"));
    (dir, path)
}

fn page(id: Option<u64>, title: &str, ns: u32, body: &str) -> String {
    let id = id.map(|i| format!("<id>{i}</id>")).unwrap_or_default();
    format!(
        "  <page>\n    <title>{title}</title>\n    <ns>{ns}</ns>\n    {id}\n    <revision>\n      <id>999{}</id>\n      \
         <timestamp>2020-01-01T00:00:00Z</timestamp>\n      <text xml:space=\"preserve\">{body}</text>\n    </revision>\n  </page>\n",
        title.len()
    )
}

fn dump(pages: &[String]) -> String {
    format!(
        "<mediawiki xmlns=\"http://www.mediawiki.org/xml/export-0.10/\">\n  <siteinfo>\n    <dbname>frwiki</dbname>\n  </siteinfo>\n{}</mediawiki>\n",
        pages.concat()
    )
}

fn results(articles: Articles) -> Vec<Result<Article, ReadError>> {
    // A bound on the number of items, so a reader that never ends fails the
    // test instead of hanging it.
    articles.take(10_000).collect()
}

#[test]
fn xml_entities_redirects_namespaces_and_lang() {
    let xml = dump(&[
        page(Some(1), "Caf&#233; &amp; Bar", 0, "'''x''' &lt;ref&gt;hidden&lt;/ref&gt; y &amp;amp; z"),
        page(Some(2), "Redirect", 0, "#REDIRECT [[Cafe]]"),
        page(Some(3), "Talk:Cafe", 1, "talk"),
        page(Some(4), "Umleitung", 0, "#weiterleitung [[Cafe]]"),
        "<page><title>R</title><ns>0</ns><id>5</id><redirect title=\"Cafe\" /><revision><text>[[Cafe]]</text></revision></page>"
            .to_owned(),
    ]);
    let (_dir, path) = temp_file("whatever.xml", xml.as_bytes());
    let mut articles = open(&path).unwrap_or_else(|e| panic!("{e}"));
    let all: Vec<Article> = articles
        .by_ref()
        .map(|r| r.unwrap_or_else(|e| panic!("{e}")))
        .collect();
    assert_eq!(
        all,
        [Article {
            lang: "fr".into(),
            id: 1,
            title: "Café & Bar".into(),
            timestamp: Some("2020-01-01T00:00:00Z".into()),
            // XML entities are decoded first, then the wikitext is stripped,
            // then wikitext entities ("&amp;" written as "&amp;amp;") decoded.
            text: "x y & z".into(),
        }]
    );
    assert_eq!(
        articles.skipped(),
        Skipped {
            redirects: 3,
            other_namespaces: 1,
            bad: 0
        }
    );
}

#[test]
fn xml_bad_pages_are_reported_and_skipped() {
    let xml = dump(&[
        page(Some(1), "One", 0, "first"),
        page(None, "Two", 0, "second"),
        page(Some(3), "Three", 0, "third"),
        // Escaped tags are wikitext, not XML: fine.
        page(Some(4), "Four", 0, "&lt;b&gt;bold&lt;/i&gt;"),
        // An element that does not close is malformed XML.
        "  <page><title>Five</title><ns>0</ns><id>5</id><revision><text>bad <b>xml</text></revision></page>\n"
            .to_owned(),
        page(Some(6), "Six", 0, "sixth"),
        page(Some(7), "Seven", 0, "x").replace("<id>7</id>", "<id>seven</id>"),
    ]);
    let two_at = xml.find("<page>\n    <title>Two").unwrap_or(0);
    let five_at = xml.find("<page><title>Five").unwrap_or(0);
    let seven_at = xml.find("<page>\n    <title>Seven").unwrap_or(0);
    let (_dir, path) = temp_file("x.xml", xml.as_bytes());
    let mut articles = open(&path).unwrap_or_else(|e| panic!("{e}"));
    let all: Vec<_> = articles.by_ref().take(100).collect();
    let titles: Vec<String> = all
        .iter()
        .map(|r| match r {
            Ok(a) => a.title.clone(),
            Err(_) => "ERR".to_owned(),
        })
        .collect();
    assert_eq!(titles, ["One", "ERR", "Three", "Four", "ERR", "Six", "ERR"]);
    match &all[1] {
        Err(e @ ReadError::BadPage { file, at, msg }) => {
            assert!(file.ends_with("x.xml"));
            assert_eq!(at, &format!("byte {two_at}"));
            assert!(msg.contains("<id>") && msg.contains("Two"), "{msg}");
            assert!(
                e.to_string()
                    .contains(&format!("x.xml: byte {two_at}: bad page: ")),
                "{e}"
            );
        }
        other => panic!("expected BadPage, got {other:?}"),
    }
    match &all[3] {
        Ok(a) => assert_eq!(a.text, "bold"),
        Err(e) => panic!("{e}"),
    }
    match &all[4] {
        Err(ReadError::BadPage { at, msg, .. }) => {
            let at: usize = at.trim_start_matches("byte ").parse().unwrap_or(0);
            assert!(
                at >= five_at && at < five_at + 120,
                "{at} vs the page at {five_at}"
            );
            assert!(msg.contains("malformed XML"), "{msg}");
        }
        other => panic!("expected BadPage, got {other:?}"),
    }
    match &all[6] {
        Err(ReadError::BadPage { at, msg, .. }) => {
            assert_eq!(at, &format!("byte {seven_at}"));
            assert!(msg.contains("not a number"), "{msg}");
        }
        other => panic!("expected BadPage, got {other:?}"),
    }
    assert_eq!(
        articles.skipped(),
        Skipped {
            redirects: 0,
            other_namespaces: 0,
            bad: 3
        }
    );
}

/// The last item is a Truncated error and everything before it is fine.
fn assert_ends_truncated(all: &[Result<Article, ReadError>]) -> usize {
    let Some((last, before)) = all.split_last() else {
        panic!("nothing read")
    };
    assert!(
        matches!(last, Err(ReadError::Truncated { .. })),
        "last item: {last:?}"
    );
    for r in before {
        assert!(r.is_ok(), "{r:?}");
    }
    before.len()
}

#[test]
fn truncated_xml_returns_the_articles_before_the_cut() {
    let xml = dump(&[
        page(Some(1), "One", 0, "first"),
        page(Some(2), "Two", 0, "second"),
        page(Some(3), "Three", 0, "third"),
    ]);
    let three_at = xml.find("<page>\n    <title>Three").unwrap_or(0);
    let (_dir, path) = temp_file("cut.xml", &xml.as_bytes()[..three_at + 60]);
    let all = results(open(&path).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(assert_ends_truncated(&all), 2);
    match all.last() {
        Some(Err(ReadError::Truncated { at, msg, .. })) => {
            assert_eq!(at, &format!("byte {three_at}"), "points at the cut page");
            assert!(msg.contains("inside the page"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    // Cut between pages: the XML does not close.
    let two_end = xml.find("  <page>\n    <title>Three").unwrap_or(0);
    let (_dir, path) = temp_file("cut.xml", &xml.as_bytes()[..two_end]);
    let all = results(open(&path).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(assert_ends_truncated(&all), 2);
    // An empty file.
    let (_dir, path) = temp_file("empty.xml", b"");
    let all = results(open(&path).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(assert_ends_truncated(&all), 0);
}

#[test]
fn truncated_compressed_dumps_end_with_an_error() {
    for (name, cut_name) in [
        (EN_XML, "cut.xml.bz2"),
        (DE_XML, "cut.xml.gz"),
        (EN_JSONL, "cut.jsonl.gz"),
    ] {
        let bytes = std::fs::read(data(name)).unwrap_or_else(|e| panic!("{e}"));
        let (_dir, path) = temp_file(cut_name, &bytes[..bytes.len() / 2]);
        let all = results(open(&path).unwrap_or_else(|e| panic!("{e}")));
        let good = assert_ends_truncated(&all);
        assert!(good > 5, "{name}: only {good} articles before the cut");
        // Corrupt instead of cut: flip bytes in the middle.
        let mut corrupt = bytes.clone();
        let mid = corrupt.len() / 2;
        for b in &mut corrupt[mid..mid + 64] {
            *b ^= 0x5a;
        }
        let (_dir, path) = temp_file(cut_name, &corrupt);
        let all = results(open(&path).unwrap_or_else(|e| panic!("{e}")));
        assert!(
            all.iter().any(Result::is_err),
            "{name}: corruption went unnoticed"
        );
    }
}

#[test]
fn json_lines_bad_line_is_reported_and_reading_goes_on() {
    let text = concat!(
        r#"{"id": "1", "title": "One", "text": "first"}"#,
        "\n\n",
        "this is not json\n",
        r#"{"id": "x3", "title": "Three", "text": "third"}"#,
        "\n",
        r#"{"id": 4, "title": "Four", "text": "fourth"}"#,
        "\n",
        r#"{"title": "Five", "text": "no id"}"#,
        "\n",
        r#"{"id": "6", "title": "Six", "text": "sixth"}"#,
    );
    let (_dir, path) = temp_file("dewiki-lines.jsonl", text.as_bytes());
    let mut articles = open(&path).unwrap_or_else(|e| panic!("{e}"));
    let all: Vec<_> = articles.by_ref().take(100).collect();
    let summary: Vec<String> = all
        .iter()
        .map(|r| match r {
            Ok(a) => format!("{} {} {}", a.id, a.title, a.lang),
            Err(ReadError::BadPage { at, .. }) => format!("bad {at}"),
            Err(e) => format!("{e}"),
        })
        .collect();
    assert_eq!(
        summary,
        [
            "1 One de",
            "bad line 3",
            "bad line 4",
            "4 Four de",
            "bad line 6",
            "6 Six de"
        ]
    );
    assert_eq!(articles.skipped().bad, 3);
    // A last line cut short is a truncation.
    let (_dir, path) = temp_file(
        "lines.jsonl",
        br#"{"id": "1", "title": "One", "text": "first"}
{"id": "2", "title": "Tw"#,
    );
    let all = results(open(&path).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(assert_ends_truncated(&all), 1);
    match all.last() {
        Some(Err(e @ ReadError::Truncated { at, .. })) => {
            assert_eq!(at, "line 2");
            assert!(
                e.to_string()
                    .starts_with(&format!("{}: line 2: truncated: ", path.display())),
                "{e}"
            );
        }
        other => panic!("{other:?}"),
    }
    // No language in the name: "en".
    match results(open(&path).unwrap_or_else(|e| panic!("{e}"))).first() {
        Some(Ok(a)) => assert_eq!(a.lang, "en"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn oversized_pages_and_lines_are_refused() {
    let big = "word ".repeat(2000);
    let xml = dump(&[
        page(Some(1), "One", 0, "first"),
        page(Some(2), "Big", 0, &big),
        page(Some(3), "Three", 0, "third"),
    ]);
    let big_at = xml.find("<page>\n    <title>Big").unwrap_or(0);
    let (_dir, path) = temp_file("big.xml", xml.as_bytes());
    let options = ReadOptions {
        max_page_bytes: 1000,
        ..ReadOptions::default()
    };
    let mut articles = open_with(&path, options.clone()).unwrap_or_else(|e| panic!("{e}"));
    let all: Vec<_> = articles.by_ref().take(100).collect();
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(matches!(&all[0], Ok(a) if a.id == 1));
    match &all[1] {
        Err(ReadError::BadPage { at, msg, .. }) => {
            assert_eq!(at, &format!("byte {big_at}"));
            assert!(msg.contains("larger than 1000 bytes"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(&all[2], Ok(a) if a.id == 3));
    assert_eq!(articles.skipped().bad, 1);
    // The default bound takes it.
    assert!(
        open(&path)
            .map(results)
            .unwrap_or_default()
            .iter()
            .all(Result::is_ok)
    );

    let lines = format!(
        "{{\"id\": \"1\", \"title\": \"One\", \"text\": \"a\"}}\n{{\"id\": \"2\", \"title\": \"Big\", \"text\": \"{big}\"}}\n{{\"id\": \"3\", \"title\": \"Three\", \"text\": \"c\"}}\n"
    );
    let (_dir, path) = temp_file("big.jsonl", lines.as_bytes());
    let all = results(open_with(&path, options).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(
        matches!(&all[1], Err(ReadError::BadPage { at, msg, .. }) if at == "line 2" && msg.contains("longer than 1000"))
    );
    assert!(matches!(&all[2], Ok(a) if a.id == 3));

    // An oversized page that is also cut: truncated, not a hang.
    let (_dir, path) = temp_file("bigcut.xml", &xml.as_bytes()[..big_at + 5000]);
    let all = results(
        open_with(
            &path,
            ReadOptions {
                max_page_bytes: 1000,
                lang: None,
            },
        )
        .unwrap_or_else(|e| panic!("{e}")),
    );
    assert_eq!(assert_ends_truncated(&all), 1);
}

#[test]
fn unknown_extension_and_missing_file() {
    let (_dir, path) = temp_file("dump.txt", b"hello");
    match open(&path) {
        Err(e @ ReadError::Io { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains("dump.txt") && msg.contains(".xml.bz2") && msg.contains(".jsonl"),
                "{msg}"
            );
        }
        other => panic!("expected Io, got {other:?}"),
    }
    match open(Path::new("/nonexistent/enwiki.xml")) {
        Err(e @ ReadError::Io { .. }) => {
            assert!(e.to_string().contains("/nonexistent/enwiki.xml"), "{e}")
        }
        other => panic!("expected Io, got {other:?}"),
    }
}

#[test]
fn from_reader_reads_a_stream() {
    let xml = dump(&[page(Some(9), "Nine", 0, "[[a|b]] c")]);
    let articles = Articles::from_reader(
        "stream",
        Format::Xml,
        std::io::Cursor::new(xml.clone().into_bytes()),
        ReadOptions {
            lang: Some("xx".into()),
            ..ReadOptions::default()
        },
    );
    let all = results(articles);
    // <dbname>frwiki</dbname> wins over the fallback.
    assert!(
        matches!(all.as_slice(), [Ok(a)] if a.text == "b c" && a.lang == "fr" && a.id == 9),
        "{all:?}"
    );
    let no_db = xml.replace("<dbname>frwiki</dbname>", "");
    let all = results(Articles::from_reader(
        "stream",
        Format::Xml,
        std::io::Cursor::new(no_db.into_bytes()),
        ReadOptions {
            lang: Some("xx".into()),
            ..ReadOptions::default()
        },
    ));
    assert!(
        matches!(all.as_slice(), [Ok(a)] if a.lang == "xx"),
        "{all:?}"
    );
}

#[test]
fn articles_can_move_to_another_thread() {
    fn assert_send<T: Send + 'static>(_: &T) {}
    let articles = open(&data(DE_XML)).unwrap_or_else(|e| panic!("{e}"));
    assert_send(&articles);
    let n = std::thread::spawn(move || articles.filter(Result::is_ok).count())
        .join()
        .unwrap_or(0);
    assert_eq!(n, 20);
}

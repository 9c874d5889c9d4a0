//! A deterministic generator of a larger corpus from real text (issue 16,
//! deliverable 5): it remixes the sentences of a source corpus (the shared
//! 4,540 Wikipedia articles) into as many articles as asked (50K, 200K, 1M),
//! so that the seed's query shapes meet realistic cardinalities at scale.
//!
//! # How an article is made
//!
//! [`SentencePool::from_articles`] cuts every source article into sentences
//! and remembers, per source article, its title and its number of sentences.
//! [`generate`] then makes article `i` from a random stream that depends only
//! on the seed and `i`:
//!
//! 1. Its **length** in sentences is the sentence count of a source article
//!    drawn uniformly, so lengths follow the real distribution (stubs and long
//!    articles alike).
//! 2. Its **sentences** come in *runs*: a run length `L` in `1..=8`, a source
//!    article drawn with weight `n + L - 1` (`n` its sentence count), and a
//!    window of `L` consecutive sentences at a uniform start in `-(L-1)..n`,
//!    clipped to the article. Each source sentence is thus equally likely to
//!    be taken (exactly `L` of the starts cover it, whether it is first, in
//!    the middle or last), which keeps every term's overall frequency close
//!    to the source's; and consecutive sentences keep their topical
//!    co-occurrence ("world" with "war", "old" with "man" with "sea"). Runs
//!    follow one another until the length is reached (a run is never longer
//!    than what is still wanted, so none is cut at its end).
//! 3. Its **title** is the title of the source article of its first run, with
//!    `" (id)"` appended so that titles are unique; its **text** starts with
//!    that title *without* the suffix on a line of its own, as the source
//!    texts do (wikiextractor puts the title first), then the runs, one
//!    paragraph each (a paragraph break inside a run is kept).
//!
//! # What it keeps and what it does not
//!
//! Kept, approximately: each term's document frequency and overall frequency,
//! the distribution of article lengths (in sentences, hence in tokens), and
//! the co-occurrence of terms within a few sentences of each other. The
//! statistics are checked against the source in `tests/generate.rs` (bounds
//! there: document frequency within 2x for 98% of the terms in 2-60% of the
//! articles; multi-word co-occurrence within 4x).
//!
//! Not kept:
//! - **No new vocabulary** in the text: every token of a generated text is a
//!   token of the source, so a query for a term absent from the source finds
//!   nothing at any scale. (The only new tokens are the numbers of the title
//!   suffixes, in the titles only.)
//! - Co-occurrence over a *whole* article is diluted: an article mixes runs
//!   from several sources, so two terms that only meet at opposite ends of one
//!   long source article meet less often; two unrelated terms meet more often
//!   than in the source. Topical terms, dense in a few source articles, spread
//!   to more articles (document frequency up to ~2x), and common words meet in
//!   more articles (the seed's "old man sea" in 3x as many).
//! - Term frequencies within the heading-like lines: sentences of fewer than
//!   three tokens (section headings such as "History", lone list items) are
//!   dropped, so terms living mostly in headings are rarer than in the source.
//! - Sentence order within an article beyond a run, links, categories,
//!   timestamps (always `None`): the text is for indexing, not for reading.
//!
//! # Determinism
//!
//! The random stream is a small xoshiro256** seeded by splitmix64, written
//! here (not the `rand` crate, whose streams may change across versions), and
//! all arithmetic is on fixed-width integers: the same pool and options give
//! byte-identical articles on any machine. Article `i` depends only on the
//! seed and `i` (not on `first_id`), so `first_id` shifts the ids (and the
//! title suffixes) without changing the texts.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::read::Article;
use crate::tokenize::tokens;

/// The fewest tokens a sentence must have to be kept.
const MIN_SENTENCE_TOKENS: usize = 3;

/// The longest run of consecutive sentences taken from one source article.
const MAX_RUN: u64 = 8;

/// One sentence of the pool: a slice of [`SentencePool::text`].
#[derive(Debug, Clone, Copy)]
struct Sentence {
    start: usize,
    end: usize,
    /// The source article it comes from (index into [`SentencePool::sources`]).
    source: u32,
    /// The sentence ended a line in its source (a paragraph break follows).
    line_end: bool,
}

/// One source article: its title and its sentences.
#[derive(Debug, Clone)]
struct Source {
    title: String,
    /// Index of its first sentence in [`SentencePool::sentences`].
    first: usize,
    /// How many sentences it has (may be 0).
    count: usize,
}

/// Sentences of a source corpus, the material the generator remixes.
#[derive(Debug, Clone, Default)]
pub struct SentencePool {
    /// The text of all sentences, one after the other.
    text: String,
    /// All sentences, grouped by source article, in source order.
    sentences: Vec<Sentence>,
    /// The source articles, in input order.
    sources: Vec<Source>,
    /// The source articles with at least one sentence (the only ones a run
    /// can come from).
    nonempty: Vec<u32>,
}

impl SentencePool {
    /// Splits the articles' texts into sentences and keeps them, with each
    /// source article's title and number of sentences, so that generated
    /// article lengths follow the real distribution.
    ///
    /// The rules:
    /// - a first line equal to the title is the title, not a sentence
    ///   (wikiextractor starts every text with it);
    /// - lines are cut apart (a newline always ends a sentence), and within a
    ///   line a sentence ends after '.', '!' or '?' followed by whitespace;
    /// - surrounding whitespace is trimmed, the rest of a sentence's text is
    ///   kept as is;
    /// - a piece of fewer than 3 tokens ([`tokens`]) inside a line ("Dr.",
    ///   "U.S.", "St.") is joined to the piece after it rather than cut off
    ///   (judged by the piece alone, so "Was it? Dr." joins "John ...")
    ///   (the joined text is the contiguous source text); a piece of fewer than
    ///   3 tokens at the end of a line (a heading, a list item) is dropped.
    pub fn from_articles(articles: impl IntoIterator<Item = Article>) -> SentencePool {
        let mut pool = SentencePool::default();
        for article in articles {
            let source =
                u32::try_from(pool.sources.len()).expect("fewer than 2^32 source articles");
            let first = pool.sentences.len();
            let mut lines = article.text.lines().peekable();
            // Skip blank lines before the first line, then the title line.
            while lines.next_if(|l| l.trim().is_empty()).is_some() {}
            lines.next_if(|l| l.trim() == article.title.trim());
            for line in lines {
                pool.add_line(line, source);
            }
            pool.sources.push(Source {
                title: article.title,
                first,
                count: pool.sentences.len() - first,
            });
            if pool.sentences.len() > first {
                pool.nonempty.push(source);
            }
        }
        pool
    }

    /// Cuts one line into sentences and adds those long enough.
    fn add_line(&mut self, line: &str, source: u32) {
        let mut pieces = split_line(line).peekable();
        // The start (in `line`) of a short piece waiting to be joined to the
        // next one.
        let mut pending: Option<usize> = None;
        while let Some((own_start, end)) = pieces.next() {
            let start = pending.take().unwrap_or(own_start);
            let sentence = &line[start..end];
            let last = pieces.peek().is_none();
            if tokens(&line[own_start..end]).len() < MIN_SENTENCE_TOKENS {
                if !last {
                    pending = Some(start);
                }
                continue;
            }
            let at = self.text.len();
            self.text.push_str(sentence);
            self.sentences.push(Sentence {
                start: at,
                end: self.text.len(),
                source,
                line_end: last,
            });
        }
    }

    /// The number of sentences kept.
    pub fn sentences(&self) -> usize {
        self.sentences.len()
    }

    /// The number of source articles read (with or without sentences).
    pub fn source_articles(&self) -> usize {
        self.sources.len()
    }

    fn sentence(&self, i: usize) -> &str {
        let s = &self.sentences[i];
        &self.text[s.start..s.end]
    }
}

/// The pieces of one line, as `(start, end)` byte ranges, trimmed and
/// non-empty: cut after '.', '!' or '?' followed by whitespace.
fn split_line(line: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut cuts = Vec::new();
    let mut chars = line.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if matches!(c, '.' | '!' | '?')
            && chars.peek().is_some_and(|&(_, next)| next.is_whitespace())
        {
            cuts.push(i + c.len_utf8());
        }
    }
    cuts.push(line.len());
    let mut from = 0;
    cuts.into_iter().filter_map(move |to| {
        let piece = &line[from..to];
        let start = from + (piece.len() - piece.trim_start().len());
        let end = from + piece.trim_end().len();
        from = to;
        (start < end).then_some((start, end))
    })
}

/// Options for [`generate`].
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// How many articles to generate.
    pub articles: u64,
    /// The seed: the same seed (and pool) gives the same articles.
    pub seed: u64,
    /// The id of the first article; article `i` gets `first_id + i`.
    pub first_id: u64,
    /// The language of the generated articles ([`Article::lang`]).
    pub lang: String,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            articles: 0,
            seed: 0,
            first_id: 1,
            lang: "en".to_owned(),
        }
    }
}

/// `options.articles` articles remixed from the pool's sentences, one at a
/// time (nothing is accumulated: a million articles stream in constant
/// memory). See the [module documentation](self) for how an article is made
/// and what is kept. Deterministic: the same pool and options give
/// byte-identical articles on any machine.
///
/// An empty pool (no source articles) gives no articles; a pool without
/// sentences gives articles holding only their title line.
pub fn generate(
    pool: &SentencePool,
    options: GenerateOptions,
) -> impl Iterator<Item = Article> + '_ {
    let count = if pool.sources.is_empty() {
        0
    } else {
        options.articles
    };
    let key = SplitMix64(options.seed).next_u64();
    (0..count).map(move |i| make_article(pool, &options, key, i))
}

fn make_article(pool: &SentencePool, options: &GenerateOptions, key: u64, i: u64) -> Article {
    let mut rng = Xoshiro256::for_article(key, i);
    let id = options.first_id.wrapping_add(i);
    let length_source = &pool.sources[rng.below_usize(pool.sources.len())];
    let mut want = if pool.nonempty.is_empty() {
        0
    } else {
        length_source.count
    };
    let mut title_source = length_source;
    let mut body = String::new();
    let total = pool.sentences.len() as u64;
    let nonempty = pool.nonempty.len() as u64;
    let mut first_run = true;
    while want > 0 {
        // Never longer than what is still wanted: a run cut at its end would favour the
        // first sentences of its window.
        let run = (1 + rng.below(MAX_RUN)).min(want as u64);
        // Source article with weight n + run - 1: a sentence drawn uniformly
        // (weight n), or else an article drawn uniformly (weight run - 1 each).
        let u = rng.below(total + nonempty * (run - 1));
        let source = if u < total {
            pool.sentences[u as usize].source
        } else {
            pool.nonempty[((u - total) / (run - 1)) as usize]
        };
        let src = &pool.sources[source as usize];
        // A uniform start in -(run-1)..n, the window clipped to 0..n.
        let start = rng.below(src.count as u64 + run - 1) as i64 - (run as i64 - 1);
        let from = start.max(0) as usize;
        let to = ((start + run as i64) as usize).min(src.count);
        if from >= to {
            continue;
        }
        let take = (to - from).min(want);
        if first_run {
            title_source = src;
            first_run = false;
        } else {
            body.push_str("\n\n");
        }
        for k in 0..take {
            let at = src.first + from + k;
            if k > 0 {
                let paragraph = pool.sentences[at - 1].line_end;
                body.push_str(if paragraph { "\n\n" } else { " " });
            }
            body.push_str(pool.sentence(at));
        }
        want -= take;
    }
    let base = title_source.title.trim();
    let mut text = String::with_capacity(base.len() + body.len() + 3);
    text.push_str(base);
    text.push_str("\n\n");
    if !body.is_empty() {
        text.push_str(&body);
        text.push('\n');
    }
    Article {
        lang: options.lang.clone(),
        id,
        title: format!("{base} ({id})"),
        timestamp: None,
        text,
    }
}

/// One line of the output: the fields [`crate::open`] reads from `.jsonl`.
#[derive(serde::Serialize)]
struct JsonLine<'a> {
    id: String,
    title: &'a str,
    text: &'a str,
    url: &'a str,
}

/// Writes articles as JSON lines, `{"id": "...", "title": "...", "text":
/// "...", "url": ""}` (the fields [`crate::open`] reads for `.jsonl`, so it
/// reads the output back), gzip-compressed (at a fast level: writing 1M
/// articles is dominated by compression) when the path ends in `.gz`.
///
/// The language is not written: [`crate::open`] takes it from the file name
/// ("enwiki-remix-1m.jsonl.gz" → "en"), else "en". Name the file so.
///
/// Returns the number of articles and the bytes of article text written (the
/// UTF-8 length of the `text` fields, before JSON escaping and compression).
pub fn write_jsonl(path: &Path, articles: impl Iterator<Item = Article>) -> io::Result<(u64, u64)> {
    let file = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let gz = path
        .file_name()
        .is_some_and(|n| n.to_string_lossy().to_ascii_lowercase().ends_with(".gz"));
    if gz {
        let mut out = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
        let counts = write_lines(&mut out, articles)?;
        out.finish()?.flush()?;
        Ok(counts)
    } else {
        let mut out = file;
        let counts = write_lines(&mut out, articles)?;
        out.flush()?;
        Ok(counts)
    }
}

fn write_lines(
    out: &mut impl Write,
    articles: impl Iterator<Item = Article>,
) -> io::Result<(u64, u64)> {
    let (mut n, mut bytes) = (0u64, 0u64);
    for article in articles {
        let line = JsonLine {
            id: article.id.to_string(),
            title: &article.title,
            text: &article.text,
            url: "",
        };
        serde_json::to_writer(&mut *out, &line).map_err(io::Error::other)?;
        out.write_all(b"\n")?;
        n += 1;
        bytes += article.text.len() as u64;
    }
    Ok((n, bytes))
}

/// splitmix64 (Steele, Lea and Flood; Vigna's reference `splitmix64.c`):
/// seeds [`Xoshiro256`] and mixes keys.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// xoshiro256** 1.0 (Blackman and Vigna; reference `xoshiro256starstar.c`).
#[derive(Debug, Clone)]
struct Xoshiro256([u64; 4]);

impl Xoshiro256 {
    fn from_seed(seed: u64) -> Xoshiro256 {
        let mut sm = SplitMix64(seed);
        Xoshiro256([sm.next_u64(), sm.next_u64(), sm.next_u64(), sm.next_u64()])
    }

    /// The stream of article `i` under a key derived from the seed.
    fn for_article(key: u64, i: u64) -> Xoshiro256 {
        Xoshiro256::from_seed(key ^ SplitMix64(i).next_u64())
    }

    fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (`n > 0`), without bias (Lemire's multiply-shift
    /// with rejection).
    fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    fn below_usize(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn article(id: u64, title: &str, text: &str) -> Article {
        Article {
            lang: "en".to_owned(),
            id,
            title: title.to_owned(),
            timestamp: None,
            text: text.to_owned(),
        }
    }

    fn pool_sentences(pool: &SentencePool) -> Vec<&str> {
        (0..pool.sentences()).map(|i| pool.sentence(i)).collect()
    }

    #[test]
    fn splitmix64_reference_values() {
        // From Vigna's splitmix64.c with the seed 1234567.
        let mut sm = SplitMix64(1_234_567);
        let got: Vec<u64> = (0..5).map(|_| sm.next_u64()).collect();
        assert_eq!(
            got,
            [
                6_457_827_717_110_365_317,
                3_203_168_211_198_807_973,
                9_817_491_932_198_370_423,
                4_593_380_528_125_082_431,
                16_408_922_859_458_223_821,
            ]
        );
    }

    #[test]
    fn xoshiro_is_pinned() {
        // xoshiro256** from the state [1, 2, 3, 4] (the values of the
        // reference C code), then our seeding: any change to either changes
        // every generated corpus, so it must be deliberate.
        let mut x = Xoshiro256([1, 2, 3, 4]);
        let got: Vec<u64> = (0..4).map(|_| x.next_u64()).collect();
        assert_eq!(got, [11_520, 0, 1_509_978_240, 1_215_971_899_390_074_240]);
        let mut x = Xoshiro256::from_seed(42);
        let got: Vec<u64> = (0..2).map(|_| x.next_u64()).collect();
        assert_eq!(got, PINNED_SEED_42);
    }

    const PINNED_SEED_42: [u64; 2] = [1_546_998_764_402_558_742, 6_990_951_692_964_543_102];

    #[test]
    fn below_is_in_range_and_covers_it() {
        let mut x = Xoshiro256::from_seed(7);
        let mut seen = [0u32; 5];
        for _ in 0..10_000 {
            seen[x.below(5) as usize] += 1;
        }
        for (v, &n) in seen.iter().enumerate() {
            assert!((1_800..2_200).contains(&n), "{v}: {n} of 10000");
        }
        assert_eq!(x.below(1), 0);
        assert!(x.below(u64::MAX) < u64::MAX);
    }

    #[test]
    fn sentences_are_split_joined_and_filtered() {
        let text = "Anarchism\n\nAnarchism is a political philosophy. It was named by Proudhon! \
                    Was it? Dr. John Smith wrote about it in the U.S. in 1900.\n\
                    History\n\
                    Early modern times and after\n\
                    Ends without a stop  \n\n  \n\
                    3.14 is pi... ok sure";
        let pool = SentencePool::from_articles([article(1, "Anarchism", text)]);
        assert_eq!(
            pool_sentences(&pool),
            [
                "Anarchism is a political philosophy.",
                "It was named by Proudhon!",
                // "Was it?" has two tokens: joined to what follows.
                "Was it? Dr. John Smith wrote about it in the U.S.",
                // "in 1900." has two tokens and ends the line: dropped.
                "Early modern times and after",
                "Ends without a stop",
                // "3.14" is not cut (no whitespace after the dot).
                "3.14 is pi...",
            ]
        );
        // "ok sure" (two tokens, end of line) is dropped; "History" too.
        assert_eq!(pool.sources[0].count, 6);
        assert_eq!(pool.sources[0].title, "Anarchism");
        let ends: Vec<bool> = pool.sentences.iter().map(|s| s.line_end).collect();
        assert_eq!(ends, [false, false, false, true, true, false]);
    }

    #[test]
    fn title_line_is_skipped_only_when_it_is_the_title() {
        let pool = SentencePool::from_articles([
            article(
                1,
                "Some Long Title Here",
                "Some Long Title Here\n\nOne two three.",
            ),
            article(2, "Other", "Not the title line at all\nOne two three four."),
            article(3, "Empty", "Empty\n"),
        ]);
        assert_eq!(
            pool_sentences(&pool),
            [
                "One two three.",
                "Not the title line at all",
                "One two three four."
            ]
        );
        let counts: Vec<usize> = pool.sources.iter().map(|s| s.count).collect();
        assert_eq!(counts, [1, 2, 0]);
        assert_eq!(pool.nonempty, [0, 1]);
        assert_eq!(pool.source_articles(), 3);
    }

    fn small_pool() -> SentencePool {
        let mut articles = Vec::new();
        for a in 0..20u64 {
            let sentences: Vec<String> = (0..=(a % 7))
                .map(|s| format!("Article a{a} sentence s{s} here."))
                .collect();
            articles.push(article(
                a,
                &format!("T{a}"),
                &format!("T{a}\n\n{}", sentences.join(" ")),
            ));
        }
        SentencePool::from_articles(articles)
    }

    #[test]
    fn runs_are_consecutive_and_lengths_real() {
        let pool = small_pool();
        let options = GenerateOptions {
            articles: 500,
            seed: 3,
            ..GenerateOptions::default()
        };
        let lengths: Vec<usize> = pool.sources.iter().map(|s| s.count).collect();
        for g in generate(&pool, options) {
            let (head, body) = g.text.split_once("\n\n").expect("title line");
            assert_eq!(g.title, format!("{head} ({})", g.id));
            let parts: Vec<&str> = body.trim_end().split("\n\n").collect();
            let n: usize = parts.iter().map(|p| p.matches('.').count()).sum();
            assert!(lengths.contains(&n), "{n} sentences");
            // The title is the first run's source.
            assert!(parts[0].starts_with(&format!("Article a{} ", &head[1..])));
            for run in parts {
                let words: Vec<&str> = run.split(' ').collect();
                // "Article aA sentence sS here." repeated: same A, S + 1 each.
                let mut prev: Option<(u64, u64)> = None;
                for chunk in words.chunks(5) {
                    let a: u64 = chunk[1][1..].parse().expect("a");
                    let s: u64 = chunk[3][1..].parse().expect("s");
                    if let Some((pa, ps)) = prev {
                        assert_eq!((a, s), (pa, ps + 1), "{run}");
                    }
                    prev = Some((a, s));
                }
            }
        }
    }

    #[test]
    fn every_sentence_is_drawn_about_equally() {
        // The edge correction: first and last sentences are as likely as the
        // middle ones, and short articles as likely (per sentence) as long.
        let pool = small_pool();
        let options = GenerateOptions {
            articles: 4_000,
            seed: 11,
            ..GenerateOptions::default()
        };
        let mut seen = std::collections::HashMap::<String, u32>::new();
        for g in generate(&pool, options) {
            let body = g.text.split_once("\n\n").expect("title").1;
            for s in body.split_terminator(". ").flat_map(|s| s.split("\n\n")) {
                let s = s.trim().trim_end_matches('.');
                if !s.is_empty() {
                    *seen.entry(s.to_owned()).or_default() += 1;
                }
            }
        }
        assert_eq!(seen.len(), pool.sentences());
        let total: u32 = seen.values().sum();
        let mean = f64::from(total) / seen.len() as f64;
        for (s, &n) in &seen {
            let ratio = f64::from(n) / mean;
            assert!((0.8..1.25).contains(&ratio), "{s}: {n} vs mean {mean:.0}");
        }
    }

    #[test]
    fn empty_pools() {
        let empty = SentencePool::from_articles([]);
        let options = GenerateOptions {
            articles: 3,
            ..GenerateOptions::default()
        };
        assert_eq!(generate(&empty, options.clone()).count(), 0);
        let titles_only = SentencePool::from_articles([article(1, "A b", "A b\n\nx y\n")]);
        let got: Vec<Article> = generate(&titles_only, options).collect();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].text, "A b\n\n");
        assert_eq!(got[2].title, "A b (3)");
    }
}

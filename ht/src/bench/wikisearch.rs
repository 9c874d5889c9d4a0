//! `ht bench wikisearch`: Accumulo's Wikipedia search (issue 16) on ht, per corpus and mode.
//!
//! Corpora: `4540` (the shared 4,540 articles plus both XML samples; `xml`: the XML samples
//! alone, for a quick run), and `50k`, `200k`, `1m`
//! remixed from the 4,540 by `wikitext::generate` (seed 16, written once to `--dir` and
//! reused). Modes: `embedded` (one process) and `cluster` (`ht start`: processes on loopback,
//! `--rangeservers` range servers; the shard is created pre-split, one range per partition,
//! spread over them; the split size is scaled to the corpus, 4x the gzip input over the
//! servers, so that a large global index splits too).
//!
//! Per corpus and mode:
//! - **ingest**: articles/s, MB/s of text, cells/s, the major compaction after it, and the
//!   tables' bytes on disk against the text (the seed: 6:1);
//! - **queries**: the six seed queries and single terms, each `--runs` times, median ms with
//!   the time split (global index / shard scan), matches, partitions, result bytes; warm (block
//!   cache hot), `uncached` (database reopened: block cache empty, page cache warm) and `cold`
//!   (files dropped from the page cache with posix_fadvise, database reopened). Beside each,
//!   the **client-side** method: each term's posting run read from every partition (a cell
//!   interval per partition, seeked to), the sets intersected (or united) here, then the first
//!   100 matches' titles read (a cell interval per document): what the boolean iterator saves. Both
//!   must return the same documents, or the bench fails. The ratio is conservative: the
//!   client side's postings and intersection alone against the iterator's whole answer;
//! - **random load**: `--clients` threads x `--queries-per-client` queries of 3-5 words from
//!   the corpus's 10,000 most frequent alphabetic terms: queries/s, p50/p99, matches;
//! - with `--during-ingest`, the seed queries in a loop while the corpus is ingested again
//!   under new ids, first at a fixed rate (`--during-ingest-rate`, default the seed's 132
//!   articles/s), then at full speed (each for at most `--during-ingest-secs`), against their
//!   idle (warm) times (the seed: 2-4x slower).
//!
//! It ends with one summary line per corpus and mode, e.g. `wikisearch: corpus=4540
//! mode=embedded articles_per_s=1234 seed_queries_vs_client_side=6.3x random_qps=250`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail, ensure};
use clap::Args;
use client::Client;
use common::ScanSpec;
use common::scan_spec::{CellInterval, CellPos, ColumnSelector, QualifierMatch};
use std::ops::Bound;
use wikisearch::layout::{self, Tables};
use wikisearch::{Expr, Searcher};

use super::skipscan::methods::drop_page_cache;

#[derive(Args, Debug)]
pub struct WikisearchArgs {
    /// Corpora: `4540`, `50k`, `200k`, `1m` (comma-separated); `xml` (the two XML samples,
    /// 126 articles) for a quick run.
    #[arg(long, default_value = "4540")]
    pub corpora: String,
    /// `embedded`, `cluster` (comma-separated).
    #[arg(long, default_value = "embedded")]
    pub modes: String,
    /// `warm`, `uncached`, `cold` (comma-separated).
    #[arg(long, default_value = "warm,uncached,cold")]
    pub caches: String,
    /// Runs of each query per cache state (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Threads of the random load.
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    #[arg(long, default_value_t = 100)]
    pub queries_per_client: usize,
    /// Range servers of the cluster mode.
    #[arg(long, default_value_t = 3)]
    pub rangeservers: usize,
    /// Where the generated corpora and the databases go (default: a temporary directory;
    /// give one to keep the generated corpora between runs).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The shared Wikipedia samples.
    #[arg(long, default_value = "../shared/data/wikipedia")]
    pub data: PathBuf,
    /// Also time the seed queries while the corpus is ingested again under new ids.
    #[arg(long)]
    pub during_ingest: bool,
    /// How long each ingest under `--during-ingest` runs at most.
    #[arg(long, default_value_t = 60)]
    pub during_ingest_secs: u64,
    /// The fixed rate (articles/s) of the first ingest under `--during-ingest` (the seed
    /// re-ingested at 132 articles/s); the second runs at full speed.
    #[arg(long, default_value_t = 132.0)]
    pub during_ingest_rate: f64,
    /// Do not append to bench/RESULTS.md.
    #[arg(long)]
    pub no_record: bool,
}

/// The seed's six queries, then single terms.
const SEED_QUERIES: [&str; 6] = [
    "old and man and sea",
    "paris and in and the and spring",
    "rubber and ducky and ernie",
    "fast and (furious or furriest)",
    "slashdot and grok",
    "three and little and pigs",
];
const SINGLE_TERMS: [&str; 4] = ["old", "the", "paris", "slashdot"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Cache {
    Warm,
    Uncached,
    Cold,
}

impl Cache {
    fn name(self) -> &'static str {
        match self {
            Cache::Warm => "warm",
            Cache::Uncached => "uncached",
            Cache::Cold => "cold",
        }
    }
}

fn list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect()
}

/// The articles of a corpus name: the files to ingest (generated into `dir` if needed).
fn corpus_files(args: &WikisearchArgs, name: &str, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let data = super::repo_path(&args.data);
    let jsonl = data.join("enwiki-articles-4540.jsonl.gz");
    let samples = vec![
        jsonl.clone(),
        data.join("enwiki-pages-articles-sample.xml.bz2"),
        data.join("dewiki-20170701-sample.xml.gz"),
    ];
    for f in &samples {
        ensure!(f.exists(), "{} is missing (see --data)", f.display());
    }
    let n: u64 = match name {
        "4540" => return Ok(samples),
        "xml" => return Ok(samples[1..].to_vec()),
        "50k" => 50_000,
        "200k" => 200_000,
        "1m" => 1_000_000,
        other => bail!("unknown corpus {other:?} (4540, xml, 50k, 200k, 1m)"),
    };
    let out = dir.join(format!("enwiki-remix-{name}.jsonl.gz"));
    if !out.exists() {
        eprintln!("{name}: generating {}", out.display());
        let t0 = Instant::now();
        let source = crate::wikisearch_cmd::read_articles(&[jsonl])?;
        let pool = wikitext::generate::SentencePool::from_articles(source);
        // `.gz` last: `write_jsonl` compresses by the name.
        let tmp = dir.join(format!("enwiki-remix-{name}.part.jsonl.gz"));
        let options = wikitext::generate::GenerateOptions {
            articles: n,
            seed: 16,
            ..Default::default()
        };
        wikitext::generate::write_jsonl(&tmp, wikitext::generate::generate(&pool, options))?;
        std::fs::rename(&tmp, &out)?;
        eprintln!("{name}: generated in {:.1} s", t0.elapsed().as_secs_f64());
    }
    Ok(vec![out])
}

/// Bytes of the files under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => total += e.metadata().map_or(0, |m| m.len()),
                _ => {}
            }
        }
    }
    total
}

#[derive(Debug, Default, Clone)]
struct IngestFigures {
    articles: u64,
    text_bytes: u64,
    cells: u64,
    secs: f64,
    compact_secs: f64,
    disk_bytes: u64,
}

fn ingest(
    client: &dyn Client,
    tables: &Tables,
    files: &[PathBuf],
    servers: usize,
) -> anyhow::Result<IngestFigures> {
    let text: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()) * 4)
        .sum();
    let partitions = layout::partitions_for(servers, text);
    let (config, fresh) = wikisearch::create_or_open(client, tables, Some(partitions), None)?;
    let mut ing = wikisearch::Ingester::new(client, tables, config, fresh)?;
    let t0 = Instant::now();
    let mut last = Instant::now();
    for f in files {
        for a in wikitext::open(f)? {
            match a {
                Ok(a) => {
                    ing.add(&a)?;
                }
                Err(e @ wikitext::ReadError::BadPage { .. }) => eprintln!("skipped: {e}"),
                Err(e) => return Err(e.into()),
            }
            if last.elapsed().as_secs() >= 30 {
                let s = ing.stats();
                eprintln!(
                    "  ingest: {} articles, {:.0}/s",
                    s.new + s.replaced + s.unchanged,
                    (s.new + s.replaced + s.unchanged) as f64 / t0.elapsed().as_secs_f64()
                );
                last = Instant::now();
            }
        }
    }
    let s = ing.finish()?;
    client.wait_for_maintenance()?;
    let secs = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    for t in [tables.shard(), tables.index(), tables.reverse()] {
        client.compact(Some(&t), client::CompactionKind::Major)?;
    }
    client.wait_for_maintenance()?;
    Ok(IngestFigures {
        articles: s.new + s.replaced + s.unchanged,
        text_bytes: s.text_bytes,
        cells: s.cells,
        secs,
        compact_secs: t1.elapsed().as_secs_f64(),
        disk_bytes: 0,
    })
}

/// One timed answer.
#[derive(Debug, Clone, Default)]
struct Timed {
    total_ms: f64,
    index_ms: f64,
    shard_ms: f64,
    matches: usize,
    partitions: usize,
    result_bytes: u64,
    /// Seeks the query made into the ranges (the engines' counters before and after it).
    seeks: u64,
}

/// Seeks scans have made into the database's ranges so far (`Client::status`'s `seeks`,
/// summed over the range servers on a cluster).
fn seeks(client: &dyn Client) -> anyhow::Result<u64> {
    let st = client.status()?;
    let v = st
        .iter()
        .find(|(k, _)| k == "seeks")
        .context("the status has no seek count")?;
    Ok(v.1.parse()?)
}

/// Runs `f`, setting its answer's seek count from the counters around it.
fn counting_seeks(
    client: &dyn Client,
    f: impl FnOnce() -> anyhow::Result<(Timed, Docs)>,
) -> anyhow::Result<(Timed, Docs)> {
    let before = seeks(client)?;
    let (mut t, d) = f()?;
    t.seeks = seeks(client)?.saturating_sub(before);
    Ok((t, d))
}

/// One query by the boolean iterator. The searcher is opened once per phase, as an
/// application holds it (its configuration is one read of the metadata table, which the
/// client-side method is given too).
fn run_iterator(s: &Searcher, q: &str) -> anyhow::Result<(Timed, Docs)> {
    let e = wikisearch::parse(q).map_err(|m| anyhow::anyhow!("{q}: {m}"))?;
    let t0 = Instant::now();
    let a = s.search(&e)?;
    let t = Timed {
        total_ms: t0.elapsed().as_secs_f64() * 1e3,
        index_ms: a.index_ms,
        shard_ms: a.shard_ms,
        matches: a.matches.len(),
        partitions: a.partitions,
        result_bytes: a.result_bytes,
        seeks: 0,
    };
    Ok((t, a.matches.into_iter().map(|(l, id, _)| (l, id)).collect()))
}

type Docs = BTreeSet<(String, u64)>;

/// Titles the client-side method reads (a page of results: on a cluster each is a request).
const TITLES_SHOWN: usize = 100;

/// The client-side method, as a client without server-side code answers: every term's
/// posting run read from every partition (one cell interval per partition, seeked to), the
/// sets combined here, then the first [`TITLES_SHOWN`] matches' titles read (one cell
/// interval per document).
fn run_client_side(
    client: &dyn Client,
    tables: &Tables,
    partitions: u32,
    q: &str,
) -> anyhow::Result<(Timed, Docs)> {
    let e = wikisearch::parse(q).map_err(|m| anyhow::anyhow!("{q}: {m}"))?;
    let t0 = Instant::now();
    let mut bytes = 0u64;
    let docs = eval_client_side(client, tables, partitions, &e, &mut bytes)?;
    let postings_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut titles = 0usize;
    let shown = docs.len().min(TITLES_SHOWN);
    if !docs.is_empty() {
        let spec = ScanSpec {
            cell_intervals: docs
                .iter()
                .take(TITLES_SHOWN)
                .map(|(lang, id)| {
                    let pos = CellPos {
                        row: layout::partition_row(layout::partition_of(*id, partitions))
                            .into_bytes(),
                        family: 1,
                        qualifier: format!("{}\0TITLE", layout::doc_key(lang, *id)).into_bytes(),
                    };
                    CellInterval {
                        start: Bound::Included(pos.clone()),
                        end: Bound::Included(pos),
                    }
                })
                .collect(),
            max_versions: 1,
            ..ScanSpec::default()
        };
        let mut sc = client.scanner(&tables.shard(), spec)?;
        while let Some(c) = sc.next_cell()? {
            bytes += (c.key.row.len() + c.key.qualifier.len() + c.value.len()) as u64;
            titles += 1;
        }
    }
    ensure!(
        titles == shown,
        "{q}: {titles} titles for {shown} documents"
    );
    let total_ms = t0.elapsed().as_secs_f64() * 1e3;
    let t = Timed {
        total_ms,
        index_ms: postings_ms,
        shard_ms: total_ms - postings_ms,
        matches: docs.len(),
        partitions: partitions as usize,
        result_bytes: bytes,
        seeks: 0,
    };
    Ok((t, docs))
}

fn eval_client_side(
    client: &dyn Client,
    tables: &Tables,
    partitions: u32,
    e: &Expr,
    bytes: &mut u64,
) -> anyhow::Result<Docs> {
    Ok(match e {
        Expr::Term(field, term) => {
            let prefix = format!("{field}\0{term}\0").into_bytes();
            // The qualifiers starting with `prefix` end before `prefix` with its last byte
            // (a NUL) raised to 1.
            let mut end = prefix.clone();
            *end.last_mut().expect("a NUL") = 1;
            let spec = ScanSpec {
                cell_intervals: (0..partitions)
                    .map(|p| {
                        let row = layout::partition_row(p).into_bytes();
                        CellInterval {
                            start: Bound::Included(CellPos {
                                row: row.clone(),
                                family: 2,
                                qualifier: prefix.clone(),
                            }),
                            end: Bound::Excluded(CellPos {
                                row,
                                family: 2,
                                qualifier: end.clone(),
                            }),
                        }
                    })
                    .collect(),
                max_versions: 1,
                ..ScanSpec::default()
            };
            let mut out = Docs::new();
            let mut sc = client.scanner(&tables.shard(), spec)?;
            while let Some(c) = sc.next_cell()? {
                *bytes += (c.key.row.len() + c.key.qualifier.len() + c.value.len()) as u64;
                let d = layout::parse_doc_key(&c.key.qualifier[prefix.len()..])
                    .context("a posting's document key")?;
                out.insert(d);
            }
            out
        }
        Expr::And(v) => {
            let mut acc: Option<Docs> = None;
            for x in v {
                let d = eval_client_side(client, tables, partitions, x, bytes)?;
                acc = Some(match acc {
                    None => d,
                    Some(a) => a.intersection(&d).cloned().collect(),
                });
            }
            acc.unwrap_or_default()
        }
        Expr::Or(v) => {
            let mut acc = Docs::new();
            for x in v {
                acc.extend(eval_client_side(client, tables, partitions, x, bytes)?);
            }
            acc
        }
        other => bail!("the client-side method takes terms, and, or: not {other:?}"),
    })
}

/// The 10,000 most frequent alphabetic terms of the text field, by the global index.
fn frequent_terms(client: &dyn Client, tables: &Tables) -> anyhow::Result<Vec<String>> {
    let spec = ScanSpec {
        columns: vec![ColumnSelector {
            family: 1,
            qualifier: QualifierMatch::All,
        }],
        ..ScanSpec::default()
    };
    let mut df: BTreeMap<String, u64> = BTreeMap::new();
    let mut sc = client.scanner(&tables.index(), spec)?;
    while let Some(c) = sc.next_cell()? {
        let term = String::from_utf8_lossy(&c.key.row).into_owned();
        if !term.chars().all(char::is_alphabetic) {
            continue;
        }
        let v = String::from_utf8_lossy(&c.value);
        let n: u64 = v
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .context("a uid_set count")?;
        *df.entry(term).or_default() += n;
    }
    let mut v: Vec<(u64, String)> = df.into_iter().map(|(t, n)| (n, t)).collect();
    v.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    Ok(v.into_iter().take(10_000).map(|(_, t)| t).collect())
}

#[derive(Debug, Default, Clone)]
struct LoadFigures {
    queries: usize,
    secs: f64,
    p50_ms: f64,
    p99_ms: f64,
    matches: usize,
}

fn random_load(
    client: &Arc<dyn Client>,
    tables: &Tables,
    terms: &[String],
    clients: usize,
    per_client: usize,
) -> anyhow::Result<LoadFigures> {
    ensure!(terms.len() >= 5, "too few terms for random queries");
    let t0 = Instant::now();
    let results: Vec<anyhow::Result<(Vec<f64>, usize)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients.max(1))
            .map(|c| {
                let client = client.clone();
                s.spawn(move || -> anyhow::Result<(Vec<f64>, usize)> {
                    let searcher = Searcher::open(client.as_ref(), tables)?;
                    // xorshift, seeded per client: the same queries every run.
                    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ (c as u64 + 1);
                    let mut next = move || {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x
                    };
                    let (mut times, mut matches) = (Vec::new(), 0);
                    for _ in 0..per_client {
                        let words = 3 + (next() % 3) as usize;
                        // Quoted: "and", "or" and "not" are frequent terms too.
                        let q: Vec<String> = (0..words)
                            .map(|_| {
                                format!("\"{}\"", terms[(next() % terms.len() as u64) as usize])
                            })
                            .collect();
                        let e = wikisearch::parse(&q.join(" and "))
                            .map_err(|m| anyhow::anyhow!("{m}"))?;
                        let t = Instant::now();
                        matches += searcher.search(&e)?.matches.len();
                        times.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                    Ok((times, matches))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a client panicked")))
            })
            .collect()
    });
    let secs = t0.elapsed().as_secs_f64();
    let mut all = Vec::new();
    let mut matches = 0;
    for r in results {
        let (t, m) = r?;
        all.extend(t);
        matches += m;
    }
    all.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
    Ok(LoadFigures {
        queries: all.len(),
        secs,
        p50_ms: pct(0.5),
        p99_ms: pct(0.99),
        matches,
    })
}

/// The six seed queries in a loop while the corpus is ingested again under new ids (each
/// article's id plus `id_offset`, so every article is written anew) at `rate` articles/s (0:
/// full speed), for at most `secs` seconds: each query's median ms during the ingest, and the
/// ingest's articles/s.
fn during_ingest(
    client: &Arc<dyn Client>,
    tables: &Tables,
    files: &[PathBuf],
    (secs, rate, id_offset): (u64, f64, u64),
) -> anyhow::Result<(Vec<f64>, f64)> {
    let done = std::sync::atomic::AtomicBool::new(false);
    let (ingested, times) = std::thread::scope(|s| {
        let writer = s.spawn(|| -> anyhow::Result<f64> {
            let r = (|| {
                let config = wikisearch::read_config(client.as_ref(), tables)?.context("config")?;
                let mut ing = wikisearch::Ingester::new(client.as_ref(), tables, config, false)?;
                let t0 = Instant::now();
                let mut n = 0u64;
                'files: for f in files {
                    for a in wikitext::open(f)? {
                        if t0.elapsed().as_secs() >= secs {
                            break 'files;
                        }
                        if rate > 0.0 {
                            let due = std::time::Duration::from_secs_f64(n as f64 / rate);
                            if let Some(wait) = due.checked_sub(t0.elapsed()) {
                                std::thread::sleep(wait);
                            }
                        }
                        let Ok(mut a) = a else { continue };
                        a.id += id_offset;
                        ing.add(&a)?;
                        n += 1;
                    }
                }
                ing.finish()?;
                Ok(n as f64 / t0.elapsed().as_secs_f64().max(1e-9))
            })();
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            r
        });
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); SEED_QUERIES.len()];
        let mut failure = None;
        let searcher = Searcher::open(client.as_ref(), tables)
            .map_err(|e| failure = Some(e))
            .ok();
        while let Some(searcher) = &searcher
            && !done.load(std::sync::atomic::Ordering::Relaxed)
        {
            for (i, q) in SEED_QUERIES.iter().enumerate() {
                match run_iterator(searcher, q) {
                    Ok((t, _)) => times[i].push(t.total_ms),
                    Err(e) => failure = Some(e),
                }
            }
            if failure.is_some() {
                break;
            }
        }
        let ingested = writer
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the ingest thread panicked")));
        (ingested.and_then(|r| failure.map_or(Ok(r), Err)), times)
    });
    let rate = ingested?;
    Ok((times.iter().map(|t| super::median(t)).collect(), rate))
}

/// Per query and cache: (iterator runs, client-side runs).
type QueryTimes = BTreeMap<(Cache, String), (Vec<Timed>, Vec<Timed>)>;

struct Run<'a> {
    args: &'a WikisearchArgs,
    tables: Tables,
    partitions: u32,
    times: QueryTimes,
}

impl Run<'_> {
    /// Every query once by both methods; the answers must agree.
    fn queries(&mut self, client: &dyn Client, cache: Cache) -> anyhow::Result<()> {
        let searcher = Searcher::open(client, &self.tables)?;
        for q in SEED_QUERIES.iter().chain(&SINGLE_TERMS) {
            let (ti, di) = counting_seeks(client, || run_iterator(&searcher, q))?;
            let (tc, dc) = counting_seeks(client, || {
                run_client_side(client, &self.tables, self.partitions, q)
            })?;
            ensure!(
                di == dc,
                "{q}: the boolean iterator found {} documents, the client side {}",
                di.len(),
                dc.len()
            );
            let e = self.times.entry((cache, q.to_string())).or_default();
            e.0.push(ti);
            e.1.push(tc);
        }
        Ok(())
    }

    fn report(&self, caches: &[Cache]) -> (Vec<String>, f64) {
        let mut lines = Vec::new();
        let mut seed_ratios = Vec::new();
        for &cache in caches {
            lines.push(format!(
                "  {} (median of {} runs): query | matches | iterator ms (index + shard) | client-side ms (postings + titles) | ratio (client-side postings / iterator) | partitions | result bytes iterator / client-side | seeks iterator / client-side",
                cache.name(),
                self.args.runs
            ));
            for q in SEED_QUERIES.iter().chain(&SINGLE_TERMS) {
                let Some((it, cs)) = self.times.get(&(cache, q.to_string())) else {
                    continue;
                };
                let med = |v: &[Timed], f: fn(&Timed) -> f64| {
                    super::median(&v.iter().map(f).collect::<Vec<_>>())
                };
                // Conservative: the client side's postings and intersection only, against the
                // iterator's whole answer (titles included); the client side's title fetch
                // (one cell interval per document, a request each on a cluster) is shown apart.
                let ratios: Vec<f64> = it
                    .iter()
                    .zip(cs)
                    .map(|(a, b)| b.index_ms / a.total_ms.max(1e-6))
                    .collect();
                let ratio = super::median(&ratios);
                if cache == Cache::Warm && SEED_QUERIES.contains(q) {
                    seed_ratios.push(ratio);
                }
                lines.push(format!(
                    "    {q:32} | {:6} | {:8.1} ({:.1} + {:.1}) | {:8.1} ({:.1} + {:.1}) | {:5.1}x | {} | {} / {} | {} / {}",
                    it[0].matches,
                    med(it, |t| t.total_ms),
                    med(it, |t| t.index_ms),
                    med(it, |t| t.shard_ms),
                    med(cs, |t| t.total_ms),
                    med(cs, |t| t.index_ms),
                    med(cs, |t| t.shard_ms),
                    ratio,
                    it[0].partitions,
                    it[0].result_bytes,
                    cs[0].result_bytes,
                    it[0].seeks,
                    cs[0].seeks
                ));
            }
        }
        (lines, super::median(&seed_ratios))
    }
}

fn open_embedded(dir: &Path) -> anyhow::Result<Arc<dyn Client>> {
    Ok(Arc::new(embedded::EmbeddedClient::open(
        dir,
        embedded::EmbeddedOptions::default(),
    )?))
}

fn start_args(dir: &Path, servers: usize, split_bytes: u64) -> crate::cluster_cmd::StartArgs {
    crate::cluster_cmd::StartArgs {
        data_dir: dir.to_path_buf(),
        hyperspace: 1,
        rangeservers: servers,
        masters: 1,
        dfs: None,
        chunkservers: None,
        split_bytes: Some(split_bytes),
        master_poll_ms: None,
        master_gc_ms: None,
        block_cache_mb: None,
        wait_secs: 60,
    }
}

/// One corpus in one mode: ingest, queries in each cache state, random load. Returns the
/// report's lines and the summary line.
fn corpus_mode(
    args: &WikisearchArgs,
    corpus: &str,
    mode: &str,
    files: &[PathBuf],
    base: &Path,
    caches: &[Cache],
) -> anyhow::Result<(Vec<String>, String)> {
    let dir = base.join(format!("{corpus}-{mode}"));
    let _ = std::fs::remove_dir_all(&dir);
    let tables = Tables::new(layout::DEFAULT_NAMESPACE);
    let servers = if mode == "cluster" {
        args.rangeservers
    } else {
        1
    };
    let input_bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    let cluster = mode == "cluster";
    let client: Arc<dyn Client> = if cluster {
        // The shard is ~2x the text, ~4x the gzip input: its partitions (each well below
        // this, `layout::partitions_for`) never split; a large global index does.
        let split = (input_bytes * 8 / (2 * servers as u64)).max(1 << 20);
        crate::cluster_cmd::start(start_args(&dir, servers, split))?;
        Arc::new(crate::cluster_cmd::connect(&dir)?)
    } else {
        open_embedded(&dir)?
    };
    let mut slot = Some(client);
    let result = (|| -> anyhow::Result<(Vec<String>, String)> {
        let client = slot.clone().context("a client")?;
        eprintln!("{corpus} {mode}: ingest");
        let mut fig = ingest(client.as_ref(), &tables, files, servers)?;
        let mut lines = Vec::new();
        if cluster {
            let (ranges, on) = super::spread(client.as_ref(), &tables.shard(), servers)?;
            client.wait_for_maintenance()?;
            lines.push(format!(
                "  shard table: {ranges} ranges on {on} of {servers} range servers"
            ));
        }
        fig.disk_bytes = dir_bytes(&dir);
        eprintln!(
            "  ingested {} articles in {:.1} s, compacted in {:.1} s",
            fig.articles, fig.secs, fig.compact_secs
        );
        let config = wikisearch::read_config(client.as_ref(), &tables)?.context("config")?;
        // The warm-up below takes its own handle: this one must not keep the database open
        // when it is reopened.
        drop(client);
        let mut run = Run {
            args,
            tables: tables.clone(),
            partitions: config.partitions,
            times: QueryTimes::new(),
        };
        for &cache in caches {
            eprintln!("{corpus} {mode}: queries, {}", cache.name());
            if cache == Cache::Warm {
                let client = slot.clone().context("a client")?;
                run.queries(client.as_ref(), cache)?; // warms, not recorded below
                run.times.retain(|(c, _), _| *c != Cache::Warm);
            }
            for _ in 0..args.runs {
                let mut client = slot.clone().context("a client")?;
                if cache != Cache::Warm {
                    drop(client);
                    slot = None;
                    if cluster {
                        crate::cluster_cmd::stop(crate::cluster_cmd::DirArgs {
                            data_dir: dir.clone(),
                        })?;
                    }
                    if cache == Cache::Cold {
                        drop_page_cache(&dir)?;
                    }
                    let reopened = if cluster {
                        let split = (input_bytes * 8 / (2 * servers as u64)).max(1 << 20);
                        crate::cluster_cmd::start(start_args(&dir, servers, split))?;
                        let c: Arc<dyn Client> = Arc::new(crate::cluster_cmd::connect(&dir)?);
                        // Not timed: the ranges are served again (no data is read).
                        c.table_ranges(&tables.shard())?;
                        c
                    } else {
                        open_embedded(&dir)?
                    };
                    slot = Some(reopened.clone());
                    client = reopened;
                }
                run.queries(client.as_ref(), cache)?;
            }
        }
        eprintln!("{corpus} {mode}: random load");
        let client = slot.clone().context("a client")?;
        let terms = frequent_terms(client.as_ref(), &tables)?;
        let load = random_load(
            &client,
            &tables,
            &terms,
            args.clients,
            args.queries_per_client,
        )?;
        let (query_lines, seed_ratio) = run.report(caches);
        let mut during = Vec::new();
        if args.during_ingest {
            for (rate, offset) in [
                (args.during_ingest_rate.max(0.0), 1_000_000_000),
                (0.0, 2_000_000_000),
            ] {
                eprintln!("{corpus} {mode}: queries during a re-ingest");
                let d = during_ingest(
                    &client,
                    &tables,
                    files,
                    (args.during_ingest_secs, rate, offset),
                )?;
                during.push((rate, d));
            }
        }
        let per_s = fig.articles as f64 / fig.secs.max(1e-9);
        lines.insert(
            0,
            format!(
                "  ingest: {} articles, {:.1} MB of text, {} cells in {:.1} s: {:.0} articles/s, {:.2} MB/s, {:.0} cells/s; \
                 major compaction {:.1} s; on disk {:.1} MB = {:.2}x the text; input files {:.1} MB",
                fig.articles,
                fig.text_bytes as f64 / 1e6,
                fig.cells,
                fig.secs,
                per_s,
                fig.text_bytes as f64 / 1e6 / fig.secs.max(1e-9),
                fig.cells as f64 / fig.secs.max(1e-9),
                fig.compact_secs,
                fig.disk_bytes as f64 / 1e6,
                fig.disk_bytes as f64 / fig.text_bytes.max(1) as f64,
                input_bytes as f64 / 1e6
            ),
        );
        lines.extend(query_lines);
        let qps = load.queries as f64 / load.secs.max(1e-9);
        lines.push(format!(
            "  random load: {} clients x {} queries of 3-5 of the 10,000 most frequent terms: {:.1} s, {:.1} queries/s, p50 {:.1} ms, p99 {:.1} ms, {} matches",
            args.clients, args.queries_per_client, load.secs, qps, load.p50_ms, load.p99_ms, load.matches
        ));
        for (target, (ms, rate)) in &during {
            let idle: Vec<f64> = SEED_QUERIES
                .iter()
                .map(|q| {
                    run.times
                        .get(&(Cache::Warm, q.to_string()))
                        .map_or(f64::NAN, |(it, _)| {
                            super::median(&it.iter().map(|t| t.total_ms).collect::<Vec<_>>())
                        })
                })
                .collect();
            let slow: Vec<String> = SEED_QUERIES
                .iter()
                .zip(ms.iter().zip(&idle))
                .map(|(q, (d, i))| format!("{q}: {d:.1} ms ({:.1}x idle)", d / i))
                .collect();
            let how = if *target > 0.0 {
                format!("a fixed {target:.0}")
            } else {
                "full speed".to_string()
            };
            lines.push(format!(
                "  during a re-ingest at {how} ({rate:.0} articles/s, new ids): {}",
                slow.join("; ")
            ));
        }
        let summary = format!(
            "wikisearch: corpus={corpus} mode={mode} articles_per_s={per_s:.0} seed_queries_vs_client_side={seed_ratio:.1}x random_qps={qps:.1}"
        );
        Ok((lines, summary))
    })();
    drop(slot);
    if cluster {
        let stopped = crate::cluster_cmd::stop(crate::cluster_cmd::DirArgs {
            data_dir: dir.clone(),
        });
        if result.is_ok() {
            stopped?;
        }
    }
    result
}

pub fn run(args: WikisearchArgs) -> anyhow::Result<()> {
    let (base, _tmp) = super::work_dir(&args.dir, "ht-bench-wikisearch-")?;
    std::fs::create_dir_all(&base)?;
    let mut caches = Vec::new();
    for c in list(&args.caches) {
        caches.push(match c.as_str() {
            "warm" => Cache::Warm,
            "uncached" => Cache::Uncached,
            "cold" => Cache::Cold,
            other => bail!("unknown cache state {other:?} (warm, uncached, cold)"),
        });
    }
    caches.sort();
    let modes = list(&args.modes);
    for m in &modes {
        ensure!(
            m == "embedded" || m == "cluster",
            "unknown mode {m:?} (embedded, cluster)"
        );
    }
    ensure!(args.runs >= 1, "--runs must be at least 1");
    let mut summaries = Vec::new();
    let mut figures = Vec::new();
    for corpus in list(&args.corpora) {
        let files = corpus_files(&args, &corpus, &base)?;
        for mode in &modes {
            let (lines, summary) = corpus_mode(&args, &corpus, mode, &files, &base, &caches)?;
            println!("corpus {corpus}, {mode}:");
            for l in &lines {
                println!("{l}");
            }
            figures.push(summary.trim_start_matches("wikisearch: ").to_string());
            summaries.push(summary);
        }
    }
    println!();
    for s in &summaries {
        println!("{s}");
    }
    if !args.no_record {
        let line = format!(
            "| {} | {} | {} | `{}` | {} |",
            super::utc_now(),
            super::git_commit(),
            super::machine(),
            super::command_line(),
            figures.join("; ")
        );
        let path = super::append_result(&line)?;
        eprintln!("recorded in {}", path.display());
    }
    Ok(())
}

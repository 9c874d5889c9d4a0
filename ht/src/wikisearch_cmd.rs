//! `ht wikisearch`: Accumulo's Wikipedia search on ht (crate `wikisearch`): `ingest` dumps
//! into a namespace's tables, `query` them, `generate` a larger corpus from real sentences.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use client::Client;
use indicatif::{ProgressBar, ProgressStyle};
use rangeserver::iterators::Registry;
use wikisearch::{Searcher, Tables};
use wikitext::ReadError;

#[derive(Subcommand, Debug)]
pub enum WikisearchCommand {
    /// Reads Wikipedia dumps (`.xml`, `.xml.bz2`, `.xml.gz`, `.jsonl[.gz]`) into the tables.
    Ingest(IngestArgs),
    /// Answers a query: words, `and`, `or`, `not`, parentheses, `title:word`, `word*`, `*word`.
    Query(QueryArgs),
    /// Writes a corpus remixed from the sentences of real articles (JSON lines).
    Generate(GenerateArgs),
}

/// Where the tables live.
#[derive(Args, Debug, Clone)]
pub struct Target {
    /// The embedded database's directory (credentials for `--cluster host:port,...`).
    #[arg(long, env = "HT_DATA_DIR", default_value = "ht-data")]
    pub data_dir: PathBuf,
    /// Run against a cluster: its directory (`ht start --data-dir`), or its Hyperspace
    /// replicas as host:port,...
    #[arg(long = "cluster", value_name = "DIR|ADDRS")]
    pub cluster: Option<String>,
    /// The file system the embedded engine writes through (see `ht shell --dfs`).
    #[arg(long = "dfs", value_name = "URL")]
    pub dfs: Option<String>,
    /// The namespace of the tables.
    #[arg(long, default_value = wikisearch::layout::DEFAULT_NAMESPACE)]
    pub namespace: String,
}

impl Target {
    pub fn connect(&self, registry: &Arc<Registry>) -> anyhow::Result<Arc<dyn Client>> {
        Ok(match &self.cluster {
            Some(arg) => Arc::new(crate::cluster_cmd::connect_arg(arg, &self.data_dir)?),
            None => Arc::new(
                embedded::EmbeddedClient::open(
                    &self.data_dir,
                    crate::fs_url::embedded_options(self.dfs.as_deref(), &self.data_dir, registry),
                )
                .with_context(|| format!("opening the database in {}", self.data_dir.display()))?,
            ),
        })
    }
}

#[derive(Args, Debug)]
pub struct IngestArgs {
    #[command(flatten)]
    pub target: Target,
    /// Partitions of the shard table (fixed when the tables are created; default: the rule
    /// of `wikisearch::layout::partitions_for`).
    #[arg(long)]
    pub partitions: Option<u32>,
    /// Documents a global-index cell keeps per partition before keeping only the count.
    #[arg(long)]
    pub max_uids: Option<usize>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// The dumps.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

#[derive(Args, Debug)]
pub struct QueryArgs {
    #[command(flatten)]
    pub target: Target,
    /// Documents listed after the count.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Every matching document as `language<TAB>id`, one per line in id order, and nothing
    /// else on standard output.
    #[arg(long)]
    pub ids: bool,
    /// Most terms one wildcard expands to.
    #[arg(long, default_value_t = 1000)]
    pub max_expansion: usize,
    /// Answer the query this many times (the answer is printed once; each run's time split
    /// goes to standard error, then the median).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub repeat: u32,
    pub query: String,
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// How many articles.
    #[arg(long)]
    pub articles: u64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The id of the first article.
    #[arg(long, default_value_t = 1)]
    pub first_id: u64,
    /// The output (`.jsonl` or `.jsonl.gz`; name it `<lang>wiki-...` to give its language).
    #[arg(long)]
    pub out: PathBuf,
    /// The articles whose sentences are remixed (any dump `ingest` reads).
    #[arg(required = true)]
    pub sources: Vec<PathBuf>,
}

pub fn run(cmd: WikisearchCommand, registry: &Arc<Registry>) -> anyhow::Result<()> {
    match cmd {
        WikisearchCommand::Ingest(a) => {
            let client = a.target.connect(registry)?;
            let r = ingest(client.as_ref(), &a);
            client.close()?;
            r
        }
        WikisearchCommand::Query(a) => {
            let client = a.target.connect(registry)?;
            let r = query(client.as_ref(), &a);
            client.close()?;
            r
        }
        WikisearchCommand::Generate(a) => generate(&a),
    }
}

/// The range servers of a database (1 for the embedded one).
pub fn range_servers(client: &dyn Client) -> usize {
    client
        .status()
        .ok()
        .and_then(|s| {
            s.into_iter()
                .find(|(k, _)| k == "range_servers")
                .and_then(|(_, v)| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(1)
        .max(1)
}

/// Bytes of article text the files probably hold (compressed dumps count 4x their size).
fn expected_text_bytes(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .map(|f| {
            let size = std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
            let name = f.to_string_lossy();
            if name.ends_with(".gz") || name.ends_with(".bz2") {
                size * 4
            } else {
                size
            }
        })
        .sum()
}

fn ingest(client: &dyn Client, a: &IngestArgs) -> anyhow::Result<()> {
    let tables = Tables::new(&a.target.namespace);
    let partitions = a.partitions.or_else(|| {
        Some(wikisearch::layout::partitions_for(
            range_servers(client),
            expected_text_bytes(&a.files),
        ))
    });
    let existing = wikisearch::read_config(client, &tables)?;
    let (config, fresh) = wikisearch::create_or_open(
        client,
        &tables,
        if existing.is_some() {
            a.partitions
        } else {
            partitions
        },
        a.max_uids,
    )?;
    eprintln!(
        "{}: {} partitions, MAX {}{}",
        tables.namespace,
        config.partitions,
        config.max_uids,
        if fresh { " (created)" } else { "" }
    );
    let bar = (!a.quiet && std::io::stderr().is_terminal()).then(|| {
        ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template(
                "{spinner} {msg} {pos} articles ({per_sec}) {elapsed_precise}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        )
    });
    let mut ing = wikisearch::Ingester::new(client, &tables, config, fresh)?;
    let t0 = Instant::now();
    let mut skipped = wikitext::Skipped::default();
    let mut failure = None;
    'files: for f in &a.files {
        if let Some(b) = &bar {
            b.set_message(f.display().to_string());
        }
        let mut articles = wikitext::open(f)?;
        for r in articles.by_ref() {
            match r {
                Ok(article) => {
                    if let Err(e) = ing.add(&article) {
                        failure = Some(e.context(format!(
                            "{}: article {} ({})",
                            f.display(),
                            article.id,
                            article.title
                        )));
                        break 'files;
                    }
                    if let Some(b) = &bar {
                        b.inc(1);
                    }
                }
                Err(e @ ReadError::BadPage { .. }) => match &bar {
                    Some(b) => b.println(format!("skipped: {e}")),
                    None => eprintln!("skipped: {e}"),
                },
                Err(e) => {
                    failure = Some(anyhow::Error::new(e));
                    break 'files;
                }
            }
        }
        let s = articles.skipped();
        skipped.redirects += s.redirects;
        skipped.other_namespaces += s.other_namespaces;
        skipped.bad += s.bad;
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    // What was read before a failure is committed and said so.
    let flushed = ing.finish();
    let stats = match (&failure, flushed) {
        (_, Ok(s)) => s,
        (None, Err(e)) => return Err(e),
        (Some(_), Err(e)) => bail!("{e:#} (while committing after: {failure:?})"),
    };
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{} articles ({} new, {} replaced, {} unchanged), {} cells, {:.1} MB of text in {:.1} s: \
         {:.0} articles/s, {:.2} MB/s; skipped {} redirects, {} pages of other namespaces, {} bad",
        stats.new + stats.replaced + stats.unchanged,
        stats.new,
        stats.replaced,
        stats.unchanged,
        stats.cells,
        stats.text_bytes as f64 / 1e6,
        secs,
        (stats.new + stats.replaced + stats.unchanged) as f64 / secs.max(1e-9),
        stats.text_bytes as f64 / 1e6 / secs.max(1e-9),
        skipped.redirects,
        skipped.other_namespaces,
        skipped.bad
    );
    match failure {
        Some(e) => Err(e.context("the ingest stopped; the articles counted above are committed")),
        None => Ok(()),
    }
}

fn query(client: &dyn Client, a: &QueryArgs) -> anyhow::Result<()> {
    let e = wikisearch::parse(&a.query).map_err(|m| anyhow::anyhow!("query: {m}"))?;
    let mut s = Searcher::open(client, &Tables::new(&a.target.namespace))?;
    s.max_expansion = a.max_expansion;
    let mut answer = s.search(&e)?;
    if a.repeat > 1 {
        let mut times = vec![answer.index_ms + answer.shard_ms];
        eprintln!("run 1: {}", split(&answer));
        for i in 1..a.repeat {
            answer = s.search(&e)?;
            eprintln!("run {}: {}", i + 1, split(&answer));
            times.push(answer.index_ms + answer.shard_ms);
        }
        times.sort_by(f64::total_cmp);
        eprintln!(
            "median of {} runs: {:.1} ms",
            times.len(),
            times[times.len() / 2]
        );
    }
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    if a.ids {
        for (lang, id, _) in &answer.matches {
            writeln!(out, "{lang}\t{id}")?;
        }
    } else {
        writeln!(out, "{} matches", answer.matches.len())?;
        for (lang, id, title) in answer.matches.iter().take(a.limit) {
            writeln!(out, "{lang}\t{id}\t{title}")?;
        }
    }
    out.flush()?;
    eprintln!("{}", split(&answer));
    Ok(())
}

/// One answer's time split, as `ht wikisearch query` prints it on standard error.
fn split(a: &wikisearch::Answer) -> String {
    format!(
        "global index {:.1} ms, shard scan {:.1} ms; {} terms, {} partitions, {} bytes returned",
        a.index_ms, a.shard_ms, a.terms, a.partitions, a.result_bytes
    )
}

/// The articles of the source dumps, errors naming the file.
pub fn read_articles(files: &[PathBuf]) -> anyhow::Result<Vec<wikitext::Article>> {
    let mut out = Vec::new();
    for f in files {
        for r in wikitext::open(f)? {
            match r {
                Ok(a) => out.push(a),
                Err(e @ ReadError::BadPage { .. }) => eprintln!("skipped: {e}"),
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(out)
}

fn generate(a: &GenerateArgs) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let pool = wikitext::generate::SentencePool::from_articles(read_articles(&a.sources)?);
    if pool.sentences() == 0 {
        bail!("the sources hold no sentences to remix");
    }
    let lang = wikitext::language_from_file_name(Path::new(&a.out)).unwrap_or("en".into());
    let options = wikitext::generate::GenerateOptions {
        articles: a.articles,
        seed: a.seed,
        first_id: a.first_id,
        lang,
    };
    let (n, bytes) =
        wikitext::generate::write_jsonl(&a.out, wikitext::generate::generate(&pool, options))
            .with_context(|| format!("writing {}", a.out.display()))?;
    println!(
        "{}: {n} articles, {:.1} MB of text from {} sentences of {} articles, in {:.1} s",
        a.out.display(),
        bytes as f64 / 1e6,
        pool.sentences(),
        pool.source_articles(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

//! Ingest: articles into the shard, global-index and reverse-index tables.
//!
//! Per article: its fields, text and postings go to its partition of the shard table together;
//! each distinct (field, term) adds the article to the term's `uid_set` cell of that partition
//! in the global index, and in the reverse index under the reversed term.
//!
//! Re-ingesting an article must not inflate counts. An article is recognised by its key and the
//! hash of its title and text (`doc` cell `HASH`): the same article again is skipped. A changed
//! article replaces the old one in the shard (postings of terms it lost are deleted) and adds
//! itself to the global index only for terms it did not have; the terms it lost keep it in
//! their `uid_set` counts (a combined set cannot take a member out), so after edits the global
//! counts are upper bounds, which the planner can live with (it only chooses partitions; the
//! shard's postings decide).

use std::collections::{BTreeSet, HashSet};

use anyhow::{Context, bail};
use client::{Client, TableMutator};
use common::key::CellFlag;
use std::ops::Bound;

use common::scan_spec::{CellInterval, CellPos};
use common::{Mutation, ScanSpec};
use wikitext::Article;

use crate::layout::{self, FIELDS, Tables};

/// Fixed at creation: how many partitions and how many document ids a global-index cell keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub partitions: u32,
    pub max_uids: usize,
}

/// Reads the configuration of an existing namespace (`None`: not created yet).
pub fn read_config(client: &dyn Client, tables: &Tables) -> anyhow::Result<Option<Config>> {
    if !client.table_exists(&tables.meta())? {
        return Ok(None);
    }
    let mut sc = client.scanner(&tables.meta(), ScanSpec::default())?;
    let (mut partitions, mut max_uids) = (None, None);
    while let Some(c) = sc.next_cell()? {
        let v = String::from_utf8_lossy(&c.value).to_string();
        match c.key.qualifier.as_slice() {
            b"partitions" => partitions = v.parse().ok(),
            b"max_uids" => max_uids = v.parse().ok(),
            _ => {}
        }
    }
    match (partitions, max_uids) {
        (Some(partitions), Some(max_uids)) if partitions > 0 => Ok(Some(Config {
            partitions,
            max_uids,
        })),
        _ => bail!(
            "{}: no valid partitions/max_uids configuration",
            tables.meta()
        ),
    }
}

/// Creates the namespace's tables with `want` (the defaults where `None`), or checks that an
/// existing namespace has the configuration asked for. Returns the configuration in force
/// and whether the tables were created now.
pub fn create_or_open(
    client: &dyn Client,
    tables: &Tables,
    partitions: Option<u32>,
    max_uids: Option<usize>,
) -> anyhow::Result<(Config, bool)> {
    if let Some(c) = read_config(client, tables)? {
        if partitions.is_some_and(|p| p != c.partitions)
            || max_uids.is_some_and(|m| m != c.max_uids)
        {
            bail!(
                "{} was created with {} partitions and MAX {}; it cannot change",
                tables.namespace,
                c.partitions,
                c.max_uids
            );
        }
        return Ok((c, false));
    }
    let config = Config {
        partitions: partitions.unwrap_or(4).max(1),
        max_uids: max_uids.unwrap_or(layout::DEFAULT_MAX_UIDS),
    };
    if !client.namespace_exists(&tables.namespace)? {
        client
            .create_namespace(&tables.namespace)
            .with_context(|| format!("creating namespace {}", tables.namespace))?;
    }
    // The shard starts as one range per partition, spread over the range servers (Accumulo's
    // wikisearch pre-splits it the same way); partitions are sized to stay below the split
    // size (`layout::partitions_for`), so these ranges are the ones it keeps.
    let shard_splits: Vec<Vec<u8>> = (1..config.partitions)
        .map(|p| layout::partition_row(p).into_bytes())
        .collect();
    for (path, schema, splits) in [
        (
            tables.shard(),
            layout::shard_schema(),
            shard_splits.as_slice(),
        ),
        (tables.index(), layout::index_schema(config.max_uids), &[]),
        (tables.reverse(), layout::index_schema(config.max_uids), &[]),
    ] {
        if !client.table_exists(&path)? {
            client
                .create_table_split(&path, schema, splits)
                .with_context(|| format!("creating {path}"))?;
        }
    }
    // The configuration last: a namespace without it is recreated (the tables above are kept).
    client.create_table(&tables.meta(), layout::meta_schema())?;
    let mut m = client.mutator(&tables.meta())?;
    m.set(Mutation::insert(
        "config",
        1,
        "partitions",
        config.partitions.to_string(),
    ))?;
    m.set(Mutation::insert(
        "config",
        1,
        "max_uids",
        config.max_uids.to_string(),
    ))?;
    m.flush()?;
    Ok((config, true))
}

/// What became of one article.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    New,
    /// The same title and text as stored: nothing written.
    Unchanged,
    /// Stored before with another title or text: replaced.
    Replaced,
}

/// Counts of an ingest.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IngestStats {
    pub new: u64,
    pub unchanged: u64,
    pub replaced: u64,
    /// Cells written to the three tables.
    pub cells: u64,
    /// Bytes of article text (title and text) taken in.
    pub text_bytes: u64,
}

/// Family ids of the shard table.
const DOC: u8 = 1;
const FI: u8 = 2;
const TEXT: u8 = 3;

/// Writes articles; [`Ingester::finish`] flushes.
pub struct Ingester<'a> {
    client: &'a dyn Client,
    tables: Tables,
    config: Config,
    shard: Box<dyn TableMutator>,
    index: Box<dyn TableMutator>,
    reverse: Box<dyn TableMutator>,
    /// Articles written by this ingest that may still be in the mutators' buffers (a lookup
    /// would not see them), bounded by `max_pending`: past it, everything is flushed.
    pending: HashSet<String>,
    max_pending: usize,
    /// Tables created by this ingest and nothing flushed-and-forgotten yet: no lookups needed.
    fresh: bool,
    stats: IngestStats,
}

/// FNV-1a of title and text: what tells an unchanged article from an edited one.
fn content_hash(a: &Article) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in a.title.bytes().chain([0]).chain(a.text.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The (field, term) pairs an article is indexed under.
fn field_terms(title: &str, text: &str) -> BTreeSet<(&'static str, String)> {
    let mut out = BTreeSet::new();
    for t in wikitext::term_set(text) {
        out.insert(("TEXT", t));
    }
    for t in wikitext::term_set(title) {
        out.insert(("TITLE", t));
    }
    out
}

impl<'a> Ingester<'a> {
    /// `fresh`: the tables were created by this ingest (nothing to look up).
    pub fn new(
        client: &'a dyn Client,
        tables: &Tables,
        config: Config,
        fresh: bool,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            client,
            tables: tables.clone(),
            config,
            shard: client.mutator(&tables.shard())?,
            index: client.mutator(&tables.index())?,
            reverse: client.mutator(&tables.reverse())?,
            pending: HashSet::new(),
            max_pending: 1 << 20,
            fresh,
            stats: IngestStats::default(),
        })
    }

    /// Bounds the articles remembered between flushes (default 1,048,576).
    pub fn set_max_pending(&mut self, n: usize) {
        self.max_pending = n.max(1);
    }

    pub fn stats(&self) -> IngestStats {
        self.stats
    }

    /// The stored hash, title and text of an article, if it is stored.
    fn stored(&self, row: &str, key: &str) -> anyhow::Result<Option<(String, String, String)>> {
        // Cell intervals, not column selectors: a partition's row holds millions of cells,
        // and an interval is seeked to where a selector would filter the whole row.
        let cell = |family: u8, qualifier: Vec<u8>| {
            let pos = CellPos {
                row: row.as_bytes().to_vec(),
                family,
                qualifier,
            };
            CellInterval {
                start: Bound::Included(pos.clone()),
                end: Bound::Included(pos),
            }
        };
        let spec = ScanSpec {
            cell_intervals: vec![
                cell(DOC, format!("{key}\0HASH").into_bytes()),
                cell(DOC, format!("{key}\0TITLE").into_bytes()),
                cell(TEXT, key.as_bytes().to_vec()),
            ],
            max_versions: 1,
            ..ScanSpec::default()
        };
        let mut sc = self.client.scanner(&self.tables.shard(), spec)?;
        let (mut hash, mut title, mut text) = (None, String::new(), String::new());
        while let Some(c) = sc.next_cell()? {
            let v = String::from_utf8_lossy(&c.value).into_owned();
            match (c.key.family, c.key.qualifier.ends_with(b"\0HASH")) {
                (DOC, true) => hash = Some(v),
                (DOC, false) => title = v,
                _ => text = v,
            }
        }
        Ok(hash.map(|h| (h, title, text)))
    }

    /// Writes one article (or finds it unchanged).
    pub fn add(&mut self, a: &Article) -> anyhow::Result<Outcome> {
        let key = layout::doc_key(&a.lang, a.id);
        let p = layout::partition_of(a.id, self.config.partitions);
        let row = layout::partition_row(p);
        let hash = content_hash(a);
        self.stats.text_bytes += (a.title.len() + a.text.len()) as u64;
        if self.pending.len() >= self.max_pending {
            self.flush()?;
            self.pending.clear();
            self.fresh = false;
        }
        let mut old_terms = BTreeSet::new();
        let mut outcome = Outcome::New;
        // Written earlier in this ingest: flushed, so that the lookup sees it.
        let was_pending = self.pending.remove(&key);
        if was_pending {
            self.flush()?;
        }
        if (!self.fresh || was_pending)
            && let Some((old_hash, old_title, old_text)) = self.stored(&row, &key)?
        {
            if old_hash == hash {
                self.stats.unchanged += 1;
                self.pending.insert(key);
                return Ok(Outcome::Unchanged);
            }
            old_terms = field_terms(&old_title, &old_text);
            outcome = Outcome::Replaced;
        }
        let terms = field_terms(&a.title, &a.text);
        let mut cells = 0u64;
        let doc = |q: &str, v: &str| Mutation::insert(row.clone(), DOC, format!("{key}\0{q}"), v);
        self.shard.set(doc("TITLE", &a.title))?;
        self.shard
            .set(doc("TIMESTAMP", a.timestamp.as_deref().unwrap_or("")))?;
        self.shard.set(doc("HASH", &hash))?;
        self.shard.set(Mutation::insert(
            row.clone(),
            TEXT,
            key.clone(),
            a.text.clone(),
        ))?;
        cells += 4;
        for (field, term) in old_terms.difference(&terms) {
            self.shard.set(Mutation::delete(
                CellFlag::DeleteCell,
                row.clone(),
                FI,
                format!("{field}\0{term}\0{key}"),
                None,
            ))?;
            cells += 1;
        }
        for (field, term) in &terms {
            let fam = FIELDS
                .iter()
                .position(|(f, _)| f == field)
                .expect("a known field") as u8
                + 1;
            self.shard.set(Mutation::insert(
                row.clone(),
                FI,
                format!("{field}\0{term}\0{key}"),
                "",
            ))?;
            cells += 1;
            if old_terms.contains(&(field, term.clone())) {
                continue;
            }
            self.index.set(Mutation::insert(
                term.clone(),
                fam,
                row.clone(),
                key.clone(),
            ))?;
            self.reverse.set(Mutation::insert(
                layout::reversed(term),
                fam,
                row.clone(),
                key.clone(),
            ))?;
            cells += 2;
        }
        self.stats.cells += cells;
        self.pending.insert(key);
        match outcome {
            Outcome::New => self.stats.new += 1,
            Outcome::Replaced => self.stats.replaced += 1,
            Outcome::Unchanged => {}
        }
        Ok(outcome)
    }

    /// Sends everything buffered.
    pub fn flush(&mut self) -> anyhow::Result<()> {
        self.shard.flush()?;
        self.index.flush()?;
        self.reverse.flush()?;
        Ok(())
    }

    /// Flushes and returns the counts.
    pub fn finish(mut self) -> anyhow::Result<IngestStats> {
        self.flush()?;
        Ok(self.stats)
    }
}

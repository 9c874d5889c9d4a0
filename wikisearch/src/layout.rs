//! The tables of a wikisearch namespace and how their keys are spelled.
//!
//! - `shard`: row = partition `p%05d` (article id mod N). Access group `idx` holds the
//!   documents' fields (family `doc`, qualifier `lang \0 id \0 FIELD`: `TITLE`, `TIMESTAMP`,
//!   `HASH`) and the partition's word index (family `fi`, qualifier `FIELD \0 term \0 lang \0
//!   id`, empty value), so a term's postings in a partition are one contiguous run the
//!   `boolean_index` iterator seeks through. Group `text` holds the article text (family `d`,
//!   qualifier `lang \0 id`), read only to show or re-index an article.
//! - `index`: row = term; families `text` and `title` (the fields); qualifier = partition; value
//!   a `uid_set(MAX = m)` cell: how many documents of the partition hold the term and, up to
//!   m, which.
//! - `reverse`: the same with the term's characters reversed, for `*word` queries.
//! - `meta`: row `config`, family `c`: the partition count and MAX, fixed at creation.
//!
//! Document keys are `lang \0 id` with the id as ten digits (zero-padded), so byte order is
//! (language, id) order and every posting list shares it.
//!
//! **Partitions** ([`partitions_for`]): a partition is one row, and a row is never split, so
//! N is chosen so that each stays far below the split size: N = max(4 x range servers,
//! ceil(expected shard bytes / (split size / 4))), at most [`MAX_PARTITIONS`]. The shard
//! table is about 2x the plain text (the text itself, plus one posting cell per distinct term
//! per article), so with the default 512 MiB split size a partition holds up to ~64 MB of
//! article text; the 4,540 articles (11 MB of text) need 1 partition by size, and 4 x
//! servers spreads the work (several partitions per server, so that a move of one range moves
//! a fraction of a server's share). English Wikipedia (~20 GB of text) gets ~300. The shard is
//! created pre-split, one range per partition (`Client::create_table_split`), spread over the
//! range servers; as a partition stays below the split size, these are the ranges it keeps.

use common::iterators::CombinerSpec;
use common::{AccessGroupSpec, FamilySpec, TableSchema};

/// The namespace used when none is given.
pub const DEFAULT_NAMESPACE: &str = "/wiki";
/// Document-list bound of the global index when none is given (Accumulo wikisearch's 20).
pub const DEFAULT_MAX_UIDS: usize = 20;
/// The fields an article is indexed under (posting prefixes) and their index families.
pub const FIELDS: [(&str, &str); 2] = [("TEXT", "text"), ("TITLE", "title")];

/// The tables of one namespace.
#[derive(Debug, Clone)]
pub struct Tables {
    pub namespace: String,
}

impl Tables {
    pub fn new(namespace: &str) -> Self {
        Self {
            namespace: namespace.trim_end_matches('/').to_string(),
        }
    }
    fn path(&self, t: &str) -> String {
        format!("{}/{t}", self.namespace)
    }
    pub fn shard(&self) -> String {
        self.path("shard")
    }
    pub fn index(&self) -> String {
        self.path("index")
    }
    pub fn reverse(&self) -> String {
        self.path("reverse")
    }
    pub fn meta(&self) -> String {
        self.path("meta")
    }
}

/// The split size the partition rule assumes (the engine's default, 512 MiB).
pub const SPLIT_SIZE: u64 = 512 << 20;
/// Most partitions [`partitions_for`] chooses.
pub const MAX_PARTITIONS: u32 = 10_000;

/// The partition count for `servers` range servers and about `text_bytes` of article text:
/// enough that each partition's shard rows (~2x their text) stay under a quarter of the split
/// size, and at least four per server.
pub fn partitions_for(servers: usize, text_bytes: u64) -> u32 {
    let by_size = (text_bytes * 2).div_ceil(SPLIT_SIZE / 4);
    let by_servers = 4 * servers.max(1) as u64;
    by_size.max(by_servers).min(u64::from(MAX_PARTITIONS)) as u32
}

/// The row of partition `p`.
pub fn partition_row(p: u32) -> String {
    format!("p{p:05}")
}

/// The partition of an article.
pub fn partition_of(id: u64, partitions: u32) -> u32 {
    (id % u64::from(partitions.max(1))) as u32
}

/// The document key of an article.
pub fn doc_key(lang: &str, id: u64) -> String {
    format!("{lang}\0{id:010}")
}

/// (language, id) of a document key.
pub fn parse_doc_key(k: &[u8]) -> Option<(String, u64)> {
    let s = std::str::from_utf8(k).ok()?;
    let (lang, id) = s.split_once('\0')?;
    Some((lang.to_string(), id.parse().ok()?))
}

/// The index family of a field name (`TEXT` -> `text`).
pub fn index_family(field: &str) -> Option<&'static str> {
    FIELDS
        .iter()
        .find(|(f, _)| *f == field)
        .map(|(_, fam)| *fam)
}

/// A term reversed by characters (the reverse index's row).
pub fn reversed(term: &str) -> String {
    term.chars().rev().collect()
}

fn family(id: u8, name: &str, group: &str) -> FamilySpec {
    let mut f = FamilySpec::new(id, name, group);
    f.max_versions = 1;
    f
}

pub fn shard_schema() -> TableSchema {
    let mut s = TableSchema::new(0, "");
    s.access_groups = vec![AccessGroupSpec::new("idx"), AccessGroupSpec::new("text")];
    s.families = vec![
        family(1, "doc", "idx"),
        family(2, "fi", "idx"),
        family(3, "d", "text"),
    ];
    s
}

/// The global (or reverse) index: one `uid_set` family per field.
pub fn index_schema(max_uids: usize) -> TableSchema {
    let mut s = TableSchema::new(0, "");
    s.access_groups = vec![AccessGroupSpec::new("default")];
    s.families = FIELDS
        .iter()
        .enumerate()
        .map(|(i, (_, name))| {
            let mut f = FamilySpec::new(i as u8 + 1, *name, "default");
            let mut c = CombinerSpec::new("uid_set");
            c.options.insert("MAX".into(), max_uids.to_string());
            f.combiner = Some(c);
            f.append_only = true;
            f
        })
        .collect();
    s
}

pub fn meta_schema() -> TableSchema {
    let mut s = TableSchema::new(0, "");
    s.access_groups = vec![AccessGroupSpec::new("default")];
    s.families = vec![family(1, "c", "default")];
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_by_language_then_id_and_parse_back() {
        let mut ks = [doc_key("en", 10), doc_key("en", 9), doc_key("de", 99)];
        ks.sort();
        assert_eq!(ks, [doc_key("de", 99), doc_key("en", 9), doc_key("en", 10)]);
        assert_eq!(
            parse_doc_key(doc_key("en", 42).as_bytes()),
            Some(("en".into(), 42))
        );
        assert_eq!(parse_doc_key(b"en"), None);
        assert_eq!(partition_row(7), "p00007");
        assert_eq!(partition_of(15, 7), 1);
        assert_eq!(reversed("köln"), "nlök");
        assert_eq!(partitions_for(1, 11 << 20), 4);
        assert_eq!(partitions_for(3, 0), 12);
        assert_eq!(partitions_for(1, 20_000_000_000), 299);
        assert_eq!(partitions_for(10, u64::MAX / 4), MAX_PARTITIONS);
        for s in [shard_schema(), index_schema(20), meta_schema()] {
            s.validate().expect("valid schema");
        }
    }
}

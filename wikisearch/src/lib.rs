//! Accumulo's Wikipedia search (issue 16) on ht: a shard table partitioned by document with a
//! word index next to each partition's documents, a global index whose `uid_set` combiner
//! keeps each term's count (and, up to a bound, its documents) per partition, a reverse index
//! for leading wildcards, and queries answered by the `boolean_index` iterator inside the
//! range servers (`rangeserver/src/iterators/boolean.rs`). Works on any [`client::Client`]:
//! the embedded database or a cluster.
//!
//! - [`layout`]: the tables, their keys and the partition rule.
//! - [`ingest`]: articles (from `wikitext`) into the tables.
//! - [`query`]: parsing, planning on the global index, the shard scan.
//! - [`oracle`]: the brute-force reference answers and counts that tests and the bench check.

pub mod ingest;
pub mod layout;
pub mod oracle;
pub mod query;

pub use ingest::{Config, IngestStats, Ingester, Outcome, create_or_open, read_config};
pub use layout::Tables;
pub use query::{Answer, Expr, Searcher, parse};

//! Wikipedia text for `wikisearch` (issue 16): reading dumps, stripping wikitext markup and
//! cutting text into index terms. Knows nothing of tables.
//!
//! - [`open`] reads a dump (`.xml`, `.xml.bz2`, `.xml.gz`, `.jsonl`, `.jsonl.gz`) as a stream of
//!   [`Article`]s, with errors that say which file and where.
//! - [`strip_wikitext`] turns wikitext into the plain text a reader sees.
//! - [`tokens`], [`term_set`] and [`normalize_word`] cut text into index terms and fold query
//!   words the same way.

pub mod generate;
#[cfg(test)]
mod proptests;
mod read;
mod strip;
mod tokenize;

pub use read::{
    Article, Articles, DEFAULT_MAX_PAGE_BYTES, Format, ReadError, ReadOptions, Skipped,
    language_from_file_name, open, open_with,
};
pub use strip::strip_wikitext;
pub use tokenize::{normalize_word, term_set, tokens};

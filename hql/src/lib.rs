//! HQL, the Hypertable query language: AST, parser and printer.
//!
//! [`parse_statement`] and [`parse_script`] turn text into [`ast::Statement`]s; `Display` on a
//! statement prints canonical HQL that parses back to the same statement. The crate does no I/O
//! and knows no schema: the executor resolves names and applies the statements.

pub mod ast;
mod error;
pub mod exec;
pub mod load;
mod parser;
mod print;
pub mod shell;
mod timestamp;

pub use ast::Statement;
pub use error::ParseError;
pub use parser::{
    is_qualifier_char, parse_bloom_text, parse_key_spec, parse_script, parse_statement,
};
pub use timestamp::{format_nanos, parse_nanos};

//! HQL, the Hypertable query language: parser, AST and printer, the executor over the
//! `client::Client` interface, the shell, LOAD DATA INFILE and DUMP TABLE.
//!
//! [`parse_statement`] and [`parse_script`] turn text into [`ast::Statement`]s; `Display` on a
//! statement prints canonical HQL that parses back to the same statement. The parser and AST do
//! no I/O and know no schema: [`exec::Executor`] resolves names and applies the statements.

pub mod ast;
mod error;
pub mod exec;
pub mod golden;
pub mod load;
mod parser;
mod print;
pub mod shell;
mod timestamp;

pub use ast::Statement;
pub use error::{Code, ParseError};
pub use parser::token::is_keyword;
pub use parser::{
    is_qualifier_char, parse_bloom_text, parse_key_spec, parse_script, parse_statement,
};
pub use timestamp::{format_nanos, parse_nanos};

//! `ht load`: LOAD DATA INFILE from the command line, on the embedded database.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use embedded::EmbeddedClient;
use hql::ast::{DataSource, LoadData, LoadOptions, LoadTarget};
use hql::load::{DEFAULT_MAX_LINE_BYTES, LoadContext, LoadLimits, load_data_with};
use rangeserver::iterators::Registry;

/// Options of `ht load` (the LOAD DATA INFILE options as flags).
#[derive(Args, Debug)]
pub struct LoadArgs {
    /// The input file (`.gz` is decompressed; `-` reads standard input).
    file: String,
    /// The table to load into (relative to --namespace).
    #[arg(long)]
    table: String,
    #[arg(long, default_value = "/")]
    namespace: String,
    /// The embedded database's directory.
    #[arg(long, env = "HT_DATA_DIR", default_value = "ht-data")]
    data_dir: PathBuf,
    /// Count, report and skip bad lines instead of stopping at the first.
    #[arg(long)]
    skip_bad_lines: bool,
    /// The file system the engine writes through (see `ht shell --dfs`).
    #[arg(long = "dfs", value_name = "URL")]
    dfs: Option<String>,
    /// ROW_KEY_COLUMN: fields joined by `+`, each with an optional `%0N`, `%-N` or `%N` width.
    #[arg(long, value_name = "SPEC")]
    row_key_column: Option<String>,
    #[arg(long, value_name = "COLUMN")]
    timestamp_column: Option<String>,
    #[arg(long, value_name = "FILE")]
    header_file: Option<String>,
    #[arg(long)]
    no_escape: bool,
    /// The field separator (default: tab).
    #[arg(long, value_name = "C")]
    fs: Option<String>,
    #[arg(long)]
    ignore_unknown_columns: bool,
    #[arg(long)]
    single_cell_format: bool,
    /// DUPLICATE_KEY_COLUMNS: store key fields as cells too.
    #[arg(long)]
    dup_key_cols: bool,
    #[arg(long, value_name = "N")]
    row_uniquify_chars: Option<u32>,
    #[arg(long)]
    no_log: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// The longest input line accepted, in bytes; a longer one is a bad line.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_LINE_BYTES)]
    max_line_bytes: usize,
    /// Bytes of input per chunk a parser thread turns into cells (a parsed chunk of short
    /// cells takes about 8x its text).
    #[arg(long, value_name = "BYTES", default_value_t = hql::load::CHUNK_BYTES)]
    chunk_bytes: usize,
    /// Chunks in flight beyond one per parser thread (read ahead, parsed, waiting).
    #[arg(long, value_name = "N", default_value_t = hql::load::EXTRA_CHUNKS_IN_FLIGHT)]
    extra_chunks_in_flight: usize,
}

/// Runs `ht load`.
pub fn run(args: LoadArgs, registry: &Arc<Registry>) -> anyhow::Result<()> {
    let options = LoadOptions {
        row_key_columns: args
            .row_key_column
            .as_deref()
            .map(|s| {
                s.split('+')
                    .map(|k| hql::parse_key_spec(k.trim()))
                    .collect()
            })
            .unwrap_or_default(),
        timestamp_column: args.timestamp_column,
        header_file: args.header_file,
        row_uniquify_chars: args.row_uniquify_chars,
        duplicate_key_columns: args.dup_key_cols,
        ignore_unknown_columns: args.ignore_unknown_columns,
        single_cell_format: args.single_cell_format,
        no_escape: args.no_escape,
        field_separator: args.fs,
        no_log: args.no_log,
    };
    let source = if args.file == "-" {
        DataSource::Stdin
    } else {
        DataSource::File(args.file)
    };
    let stmt = LoadData {
        options,
        source,
        target: LoadTarget::Table(args.table),
    };
    let client = EmbeddedClient::open(
        &args.data_dir,
        crate::fs_url::embedded_options(args.dfs.as_deref(), &args.data_dir, registry),
    )
    .with_context(|| format!("opening the database in {}", args.data_dir.display()))?;
    let mut stdin = std::io::stdin().lock();
    let ctx = LoadContext {
        client: &client,
        namespace: &args.namespace,
        progress: !args.quiet,
        skip_bad_lines: args.skip_bad_lines,
        stdin: Some(&mut stdin),
    };
    let limits = LoadLimits {
        max_line_bytes: args.max_line_bytes,
        chunk_bytes: args.chunk_bytes,
        extra_chunks_in_flight: args.extra_chunks_in_flight,
    };
    let report = load_data_with(ctx, &stmt, limits)?;
    println!("{report}");
    Ok(())
}

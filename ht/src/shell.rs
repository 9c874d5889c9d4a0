//! `ht shell`: the command line of the HQL shell (the shell itself is `hql::shell`).

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use hql::shell::{Connect, Database};
use rangeserver::iterators::Registry;

/// Flags of `ht shell`, as Hypertable's shell took them.
#[derive(Args, Debug)]
pub struct ShellArgs {
    /// Statements to run (separated by `;`), then exit.
    #[arg(short = 'e', long = "execute")]
    execute: Option<String>,
    /// A file of statements to run, then exit.
    #[arg(short = 'f', long = "command-file")]
    command_file: Option<PathBuf>,
    /// No prompt; stop at the first error with a non-zero exit code.
    #[arg(long)]
    batch: bool,
    /// The namespace to start in.
    #[arg(long)]
    namespace: Option<String>,
    /// Echo statements, errors on standard output, no timings (for comparing outputs).
    #[arg(long = "test-mode")]
    test_mode: bool,
    /// The embedded database's directory.
    #[arg(long = "data-dir", default_value = "./ht-data")]
    data_dir: PathBuf,
    /// LOAD DATA INFILE counts, reports and skips bad lines instead of stopping at the first.
    #[arg(long = "skip-bad-lines")]
    skip_bad_lines: bool,
    /// How SELECT prints timestamps: `default` (dates, local time) or integer nanoseconds
    /// (`nanos`, `nanoseconds`, or Hypertable's `usecs`, which also prints nanoseconds).
    #[arg(long = "timestamp-format", value_name = "FORMAT", default_value = "default",
          value_parser = ["default", "nanos", "nanoseconds", "usecs"])]
    timestamp_format: String,
    /// The file system the engine writes through (default: the data directory): `file:///p`,
    /// `broker://host:port`, `memory://`, `s3://bucket/prefix`, ...
    #[arg(long = "dfs", value_name = "URL")]
    dfs: Option<String>,
    /// Run against a cluster instead: its directory (`ht start --data-dir`), or its Hyperspace
    /// replicas as host:port,... (credentials from --data-dir).
    #[arg(long = "cluster", value_name = "DIR|ADDRS")]
    cluster: Option<String>,
    /// The embedded database's block cache of decompressed cell-store blocks, in MiB
    /// (default: the engine's, 128).
    #[arg(long = "block-cache-mb", env = "HT_BLOCK_CACHE_MB")]
    block_cache_mb: Option<u64>,
    /// The longest line read (statements, and LOAD DATA INFILE input), in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = hql::load::DEFAULT_MAX_LINE_BYTES)]
    max_line_bytes: usize,
    /// The longest statement, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = hql::load::DEFAULT_MAX_LINE_BYTES)]
    max_statement_bytes: usize,
    /// The largest -f or source file, in bytes (it is read whole before it runs).
    #[arg(long, value_name = "BYTES", default_value_t = hql::shell::DEFAULT_MAX_SCRIPT_BYTES)]
    max_script_bytes: u64,
}

/// Runs the shell (an embedded database runs the kinds of `registry`); returns the process
/// exit code.
pub fn run(args: ShellArgs, registry: &Arc<Registry>) -> i32 {
    hql::shell::run(&hql::shell::ShellConfig {
        options: hql::shell::ShellOptions {
            batch: args.batch,
            test_mode: args.test_mode,
            namespace: args.namespace,
            skip_bad_lines: args.skip_bad_lines,
            raw_timestamps: args.timestamp_format != "default",
            max_line_bytes: args.max_line_bytes,
            max_statement_bytes: args.max_statement_bytes,
            max_script_bytes: args.max_script_bytes,
        },
        execute: args.execute,
        command_file: args.command_file,
        database: Some(database(
            args.cluster,
            args.dfs,
            args.data_dir,
            args.block_cache_mb,
            registry.clone(),
        )),
    })
}

/// The database `ht shell` runs against: a cluster (`--cluster`), else the embedded database
/// on `--data-dir` (through `--dfs`), running the kinds of `registry`.
fn database(
    cluster: Option<String>,
    dfs: Option<String>,
    data_dir: PathBuf,
    block_cache_mb: Option<u64>,
    registry: Arc<Registry>,
) -> Database {
    match cluster {
        Some(arg) => Database {
            what: "cannot connect to the cluster".into(),
            connect: Connect(Arc::new(move || {
                crate::cluster_cmd::connect_arg(&arg, &data_dir)
                    .map(|c| Arc::new(c) as Arc<dyn client::Client>)
                    .map_err(|e| format!("{e:#}"))
            })),
        },
        None => Database {
            what: format!("cannot open the database in '{}'", data_dir.display()),
            connect: Connect(Arc::new(move || {
                let mut options =
                    crate::fs_url::embedded_options(dfs.as_deref(), &data_dir, &registry);
                if let Some(mb) = block_cache_mb {
                    options.engine.block_cache_bytes = mb << 20;
                }
                embedded::EmbeddedClient::open(&data_dir, options)
                    .map(|c| Arc::new(c) as Arc<dyn client::Client>)
                    .map_err(|e| e.to_string())
            })),
        },
    }
}

//! `ht`: the one binary (shell, servers, loader, benchmarks) as a library, so that a user crate
//! can build its own `ht` with its own iterator kinds: [`main_with`] runs the command line with
//! a registry (the stock binary, `main.rs`, passes `Registry::builtins()`).

mod bench;
mod cingest;
mod cluster_cmd;
#[cfg(test)]
mod codemap;
mod fs_url;
pub mod heap;
mod hyperspace_cmd;
mod init_cmd;
mod load_cmd;
mod serve_cluster;
mod serve_cmd;
mod shell;
mod signal;
mod wikisearch_cmd;

use std::sync::Arc;

use clap::{Parser, Subcommand};
pub use rangeserver::iterators::Registry;

#[derive(Parser)]
#[command(name = "ht", version, about = "ht: a Hypertable-style Bigtable")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Prints the version.
    Version,
    /// The HQL shell on an embedded database.
    Shell(shell::ShellArgs),
    /// Runs a benchmark against its reference (see BENCH.md).
    Bench {
        #[command(subcommand)]
        bench: bench::BenchCommand,
    },
    /// Creates a cluster's CA and node certificates in its data directory.
    Init(init_cmd::InitArgs),
    /// Runs one server role in the foreground.
    Serve {
        #[command(subcommand)]
        role: serve_cmd::ServeCommand,
    },
    /// A shell on Hyperspace (ls, mkdir, attr, lock, status).
    Hyperspace(hyperspace_cmd::HyperspaceShellArgs),
    /// Loads a TSV file into a table of the embedded database (LOAD DATA INFILE).
    Load(load_cmd::LoadArgs),
    /// Starts a local cluster of processes (Hyperspace, masters, range servers) and returns
    /// when it is ready.
    Start(cluster_cmd::StartArgs),
    /// Stops the local cluster `ht start` started.
    Stop(cluster_cmd::DirArgs),
    /// Servers, ranges per server, Hyperspace leader and health of a local cluster.
    Status(cluster_cmd::DirArgs),
    /// Continuous ingest with an agitator: linked lists written, walked and verified on a
    /// cluster while servers are killed (Accumulo's cingest).
    Cingest {
        #[command(subcommand)]
        cmd: cingest::CingestCommand,
    },
    /// Accumulo's Wikipedia search: ingest dumps, query them, generate a larger corpus.
    Wikisearch {
        #[command(subcommand)]
        cmd: wikisearch_cmd::WikisearchCommand,
    },
}

/// Runs the `ht` command line (the arguments of this process) with the iterator and combiner
/// kinds of `registry`: every engine the command opens (the embedded database of `ht shell`
/// and `ht load`, the engine of `ht serve rangeserver`) runs them, and a cluster `ht start`
/// starts is made of processes of this same binary. A user crate registers its kinds on
/// [`Registry::builtins`] and calls this from its `main` (see `examples/custom-iterator/`).
pub fn main_with(registry: Registry) -> anyhow::Result<()> {
    let registry = Arc::new(registry);
    let cli = Cli::parse();
    match cli.command {
        Command::Version => println!("ht {}", env!("CARGO_PKG_VERSION")),
        Command::Shell(args) => std::process::exit(shell::run(args, &registry)),
        Command::Bench { bench } => bench::run(bench)?,
        Command::Load(args) => load_cmd::run(args, &registry)?,
        Command::Init(args) => init_cmd::run(args)?,
        Command::Serve { role } => serve_cmd::run(role, &registry)?,
        Command::Hyperspace(args) => hyperspace_cmd::run(args)?,
        Command::Start(args) => cluster_cmd::start(args)?,
        Command::Stop(args) => cluster_cmd::stop(args)?,
        Command::Status(args) => cluster_cmd::status(args)?,
        Command::Cingest { cmd } => std::process::exit(cingest::main(cmd)?),
        Command::Wikisearch { cmd } => wikisearch_cmd::run(cmd, &registry)?,
    }
    Ok(())
}

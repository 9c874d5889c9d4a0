//! `ht`: the one binary (shell, servers, loader, benchmarks).

mod bench;
mod cingest;
mod cluster_cmd;
#[cfg(test)]
mod codemap;
mod fs_url;
mod hyperspace_cmd;
mod init_cmd;
mod load_cmd;
mod serve_cluster;
mod serve_cmd;
mod shell;
mod signal;

use clap::{Parser, Subcommand};

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
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Version => println!("ht {}", env!("CARGO_PKG_VERSION")),
        Command::Shell(args) => std::process::exit(shell::run(args)),
        Command::Bench { bench } => bench::run(bench)?,
        Command::Load(args) => load_cmd::run(args)?,
        Command::Init(args) => init_cmd::run(args)?,
        Command::Serve { role } => serve_cmd::run(role)?,
        Command::Hyperspace(args) => hyperspace_cmd::run(args)?,
        Command::Start(args) => cluster_cmd::start(args)?,
        Command::Stop(args) => cluster_cmd::stop(args)?,
        Command::Status(args) => cluster_cmd::status(args)?,
        Command::Cingest { cmd } => std::process::exit(cingest::main(cmd)?),
    }
    Ok(())
}

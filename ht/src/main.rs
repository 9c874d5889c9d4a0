//! `ht`: the one binary (shell, servers, loader, benchmarks).

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
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Version => println!("ht {}", env!("CARGO_PKG_VERSION")),
    }
    Ok(())
}

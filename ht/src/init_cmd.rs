//! `ht init`: creates a cluster's credentials in its data directory: a certificate authority
//! and a certificate for each named node, so that servers and clients verify each other
//! (mutual TLS; `rpc::tls`).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use rpc::tls::ClusterCredentials;

#[derive(Args)]
pub struct InitArgs {
    /// The cluster's data directory; credentials go to `<dir>/tls/`.
    #[arg(long = "data-dir", default_value = "./ht-data")]
    data_dir: PathBuf,
    /// Names of the nodes to issue certificates for (servers and clients).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "hyperspace,master,rangeserver,dfs-broker,chunkfs-meta,chunkserver,client"
    )]
    nodes: Vec<String>,
}

pub fn run(args: InitArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("cannot create {}", args.data_dir.display()))?;
    ClusterCredentials::create(&args.data_dir).with_context(|| {
        format!(
            "cannot create the cluster CA in {}",
            args.data_dir.display()
        )
    })?;
    for name in &args.nodes {
        ClusterCredentials::issue(&args.data_dir, name)
            .with_context(|| format!("cannot issue a certificate for '{name}'"))?;
        // Check at once that what was written loads back.
        ClusterCredentials::load(&args.data_dir, name)
            .with_context(|| format!("the certificate for '{name}' does not load"))?;
    }
    println!(
        "cluster credentials in {}: CA and {} node certificates ({})",
        args.data_dir.join("tls").display(),
        args.nodes.len(),
        args.nodes.join(", ")
    );
    Ok(())
}

//! `--dfs URL`: the file system the embedded database's engine writes through (`file://`,
//! `broker://host:port`, `memory://`, `s3://bucket/prefix`, ...; see `dfs_broker::open_url`).

use std::path::Path;
use std::sync::Arc;

use client::embedded::{EmbeddedOptions, FsFactory};

/// Embedded-database options whose engine uses the file system `url` names (`None`: the data
/// directory). A `broker://` URL is reached with the `client` certificate of `data_dir`.
pub fn embedded_options(url: Option<&str>, data_dir: &Path) -> EmbeddedOptions {
    let Some(url) = url else {
        return EmbeddedOptions::default();
    };
    let url = url.to_string();
    let data_dir = data_dir.to_path_buf();
    let factory: FsFactory = Arc::new(move |handle: &tokio::runtime::Handle| {
        let storage = |message: String| client::ClientError::Storage {
            kind: common::ErrorKind::Unavailable,
            message,
        };
        let credentials = if url.starts_with("broker://") {
            Some(
                rpc::ClusterCredentials::load(&data_dir, "client").map_err(|e| {
                    storage(format!(
                        "{url} needs the cluster's client certificate in {} (ht init): {e}",
                        data_dir.display()
                    ))
                })?,
            )
        } else {
            None
        };
        handle
            .block_on(dfs_broker::open_url(&url, credentials.as_ref()))
            .map_err(|e| storage(format!("cannot open file system {url}: {e}")))
    });
    EmbeddedOptions {
        fs: Some(factory),
        ..Default::default()
    }
}

//! `--dfs URL`: the file system the engine writes through (`file://`, `broker://host:port`,
//! `hdfs-like://meta:port`, `kfs-like://meta:port`, `memory://`, `s3://bucket/prefix`, ...).
//! chunkfs URLs are resolved here ([`open_any_url`]), because dfs-broker cannot depend on the
//! chunkfs crate; everything else goes to `dfs_broker::open_url`.

use std::path::Path;
use std::sync::Arc;

use embedded::{EmbeddedOptions, FsFactory};
use rangeserver::iterators::Registry;

/// Opens the file system any `--dfs` URL names: chunkfs (`hdfs-like://`, `kfs-like://`) or
/// what `dfs_broker::open_url` knows. `credentials` is a node certificate of the cluster (needed
/// by `broker://` and the chunkfs schemes).
pub async fn open_any_url(
    url: &str,
    credentials: Option<&rpc::ClusterCredentials>,
) -> dfs_broker::FsResult<Arc<dyn dfs_broker::Fs>> {
    if chunkfs::is_chunkfs_url(url) {
        chunkfs::open_url(url, credentials).await
    } else {
        dfs_broker::open_url(url, credentials).await
    }
}

/// True if the URL needs cluster credentials to be opened.
fn needs_credentials(url: &str) -> bool {
    url.starts_with("broker://") || chunkfs::is_chunkfs_url(url)
}

/// Embedded-database options whose engine runs the kinds of `registry` and uses the file
/// system `url` names (`None`: the data directory). A `broker://` or chunkfs URL is reached
/// with the `client` certificate of `data_dir`.
pub fn embedded_options(
    url: Option<&str>,
    data_dir: &Path,
    registry: &Arc<Registry>,
) -> EmbeddedOptions {
    let mut options = EmbeddedOptions::default();
    options.engine.registry = registry.clone();
    let Some(url) = url else {
        return options;
    };
    let url = url.to_string();
    let data_dir = data_dir.to_path_buf();
    let factory: FsFactory = Arc::new(move |handle: &tokio::runtime::Handle| {
        let storage =
            |message: String| client::ClientError::storage(common::ErrorKind::Unavailable, message);
        let credentials = if needs_credentials(&url) {
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
            .block_on(open_any_url(&url, credentials.as_ref()))
            .map_err(|e| storage(format!("cannot open file system {url}: {e}")))
    });
    options.fs = Some(factory);
    options
}

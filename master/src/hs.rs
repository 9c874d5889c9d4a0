//! Hyperspace helpers of the master: attributes, counters, files created if missing.

use hyperspace::command::{ErrorCode, flags};
use proto::layout::*;

use crate::control::Master;
use crate::{Result, hs_err};

impl Master {
    /// A cluster-wide counter (attribute of `/ht/ops`), kept across master failovers.
    pub(crate) async fn counter(&self, name: &str) -> Result<u64> {
        Ok(self
            .attr(OPS, name)
            .await?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0))
    }

    pub(crate) async fn count(&self, name: &str) {
        self.count_by(name, 1).await
    }

    pub(crate) async fn count_by(&self, name: &str, n: u64) {
        if n == 0 {
            return;
        }
        if let Err(e) = self.hs.attr_incr(OPS, name, n as i64).await {
            tracing::warn!(counter = name, error = %e, "cannot count");
        }
    }

    pub(crate) async fn attr(&self, node: &str, name: &str) -> Result<Option<String>> {
        match self.hs.attr_get(node, name).await {
            Ok(v) => Ok(v.map(|v| String::from_utf8_lossy(&v).into_owned())),
            Err(e) if e.code() == Some(ErrorCode::NotFound) => Ok(None),
            Err(e) => Err(hs_err(e)),
        }
    }

    /// Creates a file if it does not exist.
    pub(crate) async fn touch(&self, path: &str) -> Result<()> {
        let h = self
            .hs
            .open(path, flags::READ | flags::WRITE | flags::CREATE, 0)
            .await
            .map_err(hs_err)?;
        self.hs.close(h).await.map_err(hs_err)
    }

    pub(crate) async fn delete_if_exists(&self, path: &str) -> Result<()> {
        match self.hs.delete(path).await {
            Ok(()) => Ok(()),
            Err(e) if e.code() == Some(ErrorCode::NotFound) => Ok(()),
            Err(e) => Err(hs_err(e)),
        }
    }
}

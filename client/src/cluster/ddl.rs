//! Namespaces and tables: names and schemas read from Hyperspace, DDL sent to the active
//! master ([`connect_master`]) and retried while the master changes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{ErrorKind, TableSchema};
use hyperspace::client::Hyperspace;
use hyperspace::command::ErrorCode;
use rpc::ClusterCredentials;

use super::Inner;
use super::errors::{hs_err, unavailable};
use super::layout::*;
use super::proto::{DdlReply, DdlRequest, MasterStatus, method};
use super::retry::Attempt;
use crate::{ClientError, ListingEntry, Result, normalize_path, split_path};

impl Inner {
    pub(super) async fn attr_string(&self, node: &str, attr: &str) -> Result<Option<String>> {
        attr_string(&self.hs, node, attr).await
    }

    /// A connection to the active master (its address is in Hyperspace).
    pub(super) async fn master(&self) -> Result<Arc<rpc::Client>> {
        let mut m = self.master.lock().await;
        if let Some(c) = m.as_ref() {
            return Ok(c.clone());
        }
        let c = connect_master(
            &self.hs,
            &self.credentials,
            self.opts.range_server.idle_timeout,
        )
        .await?;
        let c = Arc::new(c);
        *m = Some(c.clone());
        Ok(c)
    }

    /// A DDL call to the master, retried while the master changes. The name cache is emptied
    /// when it returns, whatever the outcome, so this client sees its own changes.
    pub(super) async fn ddl(&self, m: &'static str, req: DdlRequest) -> Result<String> {
        let result = self.ddl_call(m, req).await;
        self.names.clear();
        result
    }

    async fn ddl_call(&self, m: &'static str, req: DdlRequest) -> Result<String> {
        self.retrying(m, || async {
            let master = self.master().await?;
            match master
                .call_message::<_, DdlReply>(m, &req, Duration::from_secs(120))
                .await
            {
                Ok(reply) => reply.into_result().map_err(Attempt::Fatal),
                Err(e) if e.is_retryable() => {
                    *self.master.lock().await = None;
                    Err(Attempt::Retry(format!("master: {e}")))
                }
                Err(e) => Err(Attempt::Fatal(ClientError::storage(
                    e.kind(),
                    format!("master: {e}"),
                ))),
            }
        })
        .await
    }

    /// The id of the table at `path`, from the name cache or Hyperspace.
    pub(super) async fn table_id(&self, path: &str) -> Result<u32> {
        let p = normalize_path(path)?;
        if let Some(id) = self.names.id(&p) {
            return Ok(id);
        }
        let ticket = self.names.ticket(&self.hs).await;
        let (parent, _) = split_path(&p)?;
        if parent != "/" && !self.hs.exists(&ns_node(&parent)).await.map_err(hs_err)? {
            return Err(ClientError::TableNotFound(p));
        }
        match self.attr_string(&ns_node(&p), TABLE_ID_ATTR).await? {
            Some(id) => {
                let id = id.parse().map_err(|_| {
                    ClientError::storage(
                        ErrorKind::Corruption,
                        format!("table {p} has a bad id '{id}' in hyperspace"),
                    )
                })?;
                self.names.put_id(ticket, &p, id);
                Ok(id)
            }
            None => Err(ClientError::TableNotFound(p)),
        }
    }

    /// The schema of table `id`, from the name cache or Hyperspace.
    pub(super) async fn schema(&self, id: u32) -> Result<TableSchema> {
        if let Some(s) = self.names.schema(id) {
            return Ok(s.as_ref().clone());
        }
        let ticket = self.names.ticket(&self.hs).await;
        let json = self
            .attr_string(&table_node(id), SCHEMA_ATTR)
            .await?
            .ok_or_else(|| ClientError::TableNotFound(format!("id {id}")))?;
        let schema = TableSchema::from_json(&json).map_err(|e| {
            ClientError::storage(
                ErrorKind::Corruption,
                format!("table {id}: bad schema in hyperspace: {e}"),
            )
        })?;
        self.names.put_schema(ticket, &Arc::new(schema.clone()));
        Ok(schema)
    }

    /// The live range servers, by location.
    pub(super) async fn live_servers(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for e in self.hs.readdir(SERVERS).await.map_err(hs_err)? {
            if self
                .attr_string(&server_node(&e.name), ADDR_ATTR)
                .await?
                .is_some()
            {
                out.push(e.name);
            }
        }
        Ok(out)
    }

    /// The master's view of the cluster (`ht status`).
    pub(super) async fn master_status(&self) -> Result<MasterStatus> {
        self.retrying("master status", || async {
            let m = self.master().await?;
            match m
                .call_message::<_, MasterStatus>(
                    method::STATUS,
                    &super::proto::Empty {},
                    Duration::from_secs(5),
                )
                .await
            {
                Ok(s) => Ok(s),
                Err(e) => {
                    // The next attempt looks the active master up again.
                    *self.master.lock().await = None;
                    Err(Attempt::Retry(format!("master: {e}")))
                }
            }
        })
        .await
    }

    pub(super) async fn namespace_exists(&self, path: &str) -> Result<bool> {
        let path = normalize_path(path)?;
        if path == "/" {
            return Ok(true);
        }
        match self.hs.readdir(&ns_node(&split_path(&path)?.0)).await {
            Ok(entries) => {
                let name = split_path(&path)?.1;
                Ok(entries.iter().any(|e| e.is_dir && e.name == name))
            }
            Err(e) if e.code() == Some(ErrorCode::NotFound) => Ok(false),
            Err(e) => Err(hs_err(e)),
        }
    }

    pub(super) async fn listing(&self, path: &str) -> Result<Vec<ListingEntry>> {
        let path = normalize_path(path)?;
        if !self.namespace_exists(&path).await? {
            return Err(ClientError::NamespaceNotFound(path));
        }
        let mut out: Vec<ListingEntry> = self
            .hs
            .readdir(&ns_node(&path))
            .await
            .map_err(hs_err)?
            .into_iter()
            .map(|e| ListingEntry {
                name: e.name,
                is_namespace: e.is_dir,
            })
            .collect();
        out.sort();
        Ok(out)
    }
}

/// An attribute as text; `None` if the node or the attribute does not exist.
pub(super) async fn attr_string(hs: &Hyperspace, node: &str, attr: &str) -> Result<Option<String>> {
    match hs.attr_get(node, attr).await {
        Ok(v) => Ok(v.map(|v| String::from_utf8_lossy(&v).into_owned())),
        Err(e) if e.code() == Some(ErrorCode::NotFound) => Ok(None),
        Err(e) => Err(hs_err(e)),
    }
}

/// Connects to the active master (its address is the `addr` attribute of `/ht/master`), with
/// a short idle timeout so that a dead master is noticed in seconds and its standby found.
pub async fn connect_master(
    hs: &Hyperspace,
    credentials: &ClusterCredentials,
    idle_timeout: Duration,
) -> Result<rpc::Client> {
    let addr = attr_string(hs, MASTER, ADDR_ATTR)
        .await?
        .ok_or_else(|| unavailable("no master is active".into()))?;
    let addr: SocketAddr = addr
        .parse()
        .map_err(|e| unavailable(format!("bad master address '{addr}': {e}")))?;
    Ok(
        ::proto::master::MasterClient::connect(addr, credentials, idle_timeout)
            .await?
            .into_rpc(),
    )
}

pub(super) fn parse_schema(json: &str) -> Result<TableSchema> {
    TableSchema::from_json(json).map_err(|e| {
        ClientError::storage(
            ErrorKind::Corruption,
            format!("the master sent a bad schema: {e}"),
        )
    })
}

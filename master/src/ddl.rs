//! DDL: namespaces and tables (names, ids, schemas in Hyperspace), the steps of their logged
//! operations, and the requests that wait for an operation to get past an unavailability.

use std::time::Duration;

use common::key::CellFlag;
use common::{ErrorKind, Mutation, TableSchema};
use hyperspace::command::ErrorCode;
use proto::error::{ClientError, normalize_path, split_path};
use proto::layout::*;
use proto::rs::client::engine_message;

use crate::control::Master;
use crate::ops::{Operation, op_node};
use crate::{Answer, Responder, Result, hs_err, rs_err, unavailable};

/// Longest a DDL request waits for its logged operation to get past a passing unavailability
/// (a range server paused while its Hyperspace session is in doubt, a server being recovered)
/// before it is answered with the last error; the operation itself stays logged and finishes
/// at a later look either way.
pub(crate) const DDL_WAIT: Duration = Duration::from_secs(60);
/// How often such an operation is tried again while its request waits.
pub(crate) const DDL_RETRY: Duration = Duration::from_millis(200);
/// Requests that may wait so at once; more are answered with their error at once.
pub(crate) const MAX_WAITING_DDL: usize = 256;

/// A DDL request whose operation is logged but not finished: answered when it finishes.
pub(crate) struct WaitingDdl {
    pub(crate) seq: u64,
    pub(crate) answer: Answer,
    pub(crate) respond: Responder,
    pub(crate) since: std::time::Instant,
    pub(crate) last_error: ClientError,
}

impl Master {
    async fn ns_exists(&self, path: &str) -> Result<bool> {
        if path == "/" {
            return Ok(true);
        }
        let (parent, name) = split_path(path)?;
        match self.hs.readdir(&ns_node(&parent)).await {
            Ok(entries) => Ok(entries.iter().any(|e| e.is_dir && e.name == name)),
            Err(e) if e.code() == Some(ErrorCode::NotFound) => Ok(false),
            Err(e) => Err(hs_err(e)),
        }
    }

    async fn table_id(&self, path: &str) -> Result<Option<u32>> {
        let p = normalize_path(path)?;
        let (parent, name) = split_path(&p)?;
        let is_table = match self.hs.readdir(&ns_node(&parent)).await {
            Ok(entries) => entries.iter().any(|e| !e.is_dir && e.name == name),
            Err(e) if e.code() == Some(ErrorCode::NotFound) => false,
            Err(e) => return Err(hs_err(e)),
        };
        if !is_table {
            return Ok(None);
        }
        match self.attr(&ns_node(&p), TABLE_ID_ATTR).await? {
            Some(id) => id.parse().map(Some).map_err(|_| {
                ClientError::storage(
                    ErrorKind::Corruption,
                    format!("table {p} has a bad id '{id}' in hyperspace"),
                )
            }),
            None => Ok(None),
        }
    }

    pub(crate) async fn schema(&self, id: u32) -> Result<Option<TableSchema>> {
        if id == METADATA_ID {
            return Ok(Some(metadata_schema()));
        }
        match self.attr(&table_node(id), SCHEMA_ATTR).await? {
            Some(json) => TableSchema::from_json(&json).map(Some).map_err(|e| {
                ClientError::storage(
                    ErrorKind::Corruption,
                    format!("table {id}: bad schema in hyperspace: {e}"),
                )
            }),
            None => Ok(None),
        }
    }

    /// Checks a new namespace or table name: valid, parent exists, nothing by that name.
    async fn new_name(&self, path: &str) -> Result<String> {
        let (parent, name) = split_path(path)?;
        if name.is_empty() || name.contains(['/', '\0']) {
            return Err(ClientError::InvalidInput(format!("bad name '{name}'")));
        }
        if !self.ns_exists(&parent).await? {
            return Err(ClientError::NamespaceNotFound(parent));
        }
        let path = normalize_path(path)?;
        if self.table_id(&path).await?.is_some() {
            return Err(ClientError::TableExists(path));
        }
        if self.ns_exists(&path).await? {
            return Err(ClientError::NamespaceExists(path));
        }
        // A logged, unfinished operation that will give the name to a table has it already
        // (its request may still be waiting): a second one would race it to the name.
        let claimed = self.pending_ops().await?.iter().any(|(_, op)| match op {
            Operation::CreateTable { path: p, .. } | Operation::RenameTable { to: p, .. } => {
                *p == path
            }
            _ => false,
        });
        if claimed {
            return Err(ClientError::TableExists(path));
        }
        Ok(path)
    }

    /// Creates the table's ranges (one per gap between `splits`, the i-th on `locations[i]`)
    /// and their METADATA rows, then its name. Every step can be repeated.
    pub(crate) async fn create_table_steps(
        &mut self,
        path: &str,
        schema: &TableSchema,
        splits: &[Vec<u8>],
        locations: &[String],
    ) -> Result<()> {
        let node = table_node(schema.id);
        self.touch(&node).await?;
        self.hs
            .attr_set(node.as_str(), SCHEMA_ATTR, schema.to_json())
            .await
            .map_err(hs_err)?;
        let ranges = common::row_range::split_bounds(splits);
        for (r, loc) in ranges.iter().zip(locations) {
            let (start, end) = (r.start.as_deref(), r.end.as_deref());
            self.ensure_range(loc, schema, start, end).await?;
            self.metadata_put(schema.id, start, end, loc).await?;
        }
        let name = ns_node(path);
        self.touch(&name).await?;
        self.hs
            .attr_set(name.as_str(), TABLE_ID_ATTR, schema.id.to_string())
            .await
            .map_err(hs_err)?;
        for (r, loc) in ranges.into_iter().zip(locations) {
            if let Some(s) = self.servers.get_mut(loc) {
                let held = (schema.id, r.start, r.end);
                if !s.ranges.contains(&held) {
                    s.ranges.push(held);
                }
            }
        }
        Ok(())
    }

    /// Sends a schema to every live server that knows the table, then records it.
    pub(crate) async fn push_schema(&mut self, schema: &TableSchema) -> Result<()> {
        for loc in self.live() {
            let s = schema.clone();
            match self
                .on_server(&loc, |c| async move { c.alter_table(&s).await })
                .await?
            {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(rs_err(&loc, e)),
            }
        }
        self.hs
            .attr_set(
                table_node(schema.id).as_str(),
                SCHEMA_ATTR,
                schema.to_json(),
            )
            .await
            .map_err(hs_err)
    }

    pub(crate) async fn rename_steps(&mut self, from: &str, to: &str, id: u32) -> Result<()> {
        let name = ns_node(to);
        self.touch(&name).await?;
        self.hs
            .attr_set(name.as_str(), TABLE_ID_ATTR, id.to_string())
            .await
            .map_err(hs_err)?;
        self.delete_if_exists(&ns_node(from)).await?;
        if let Some(mut schema) = self.schema(id).await? {
            schema.name = to.to_string();
            self.push_schema(&schema).await?;
        }
        Ok(())
    }

    pub(crate) async fn drop_steps(&mut self, path: &str, id: u32) -> Result<()> {
        self.delete_if_exists(&ns_node(path)).await?;
        for loc in self.live() {
            match self
                .on_server(&loc, |c| async move { c.drop_table(id).await })
                .await?
            {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(rs_err(&loc, e)),
            }
            if let Some(s) = self.servers.get_mut(&loc) {
                s.ranges.retain(|r| r.0 != id);
            }
        }
        let rows = self.metadata_rows(Some(id)).await?;
        if !rows.is_empty() {
            let cells: Vec<Mutation> = rows
                .into_keys()
                .map(|row| Mutation::delete(CellFlag::DeleteRow, row, 0, "", None))
                .collect();
            let root = self.root().await?;
            self.on_server(
                &root,
                |c| async move { c.update(METADATA_ID, &cells).await },
            )
            .await?
            .map_err(|e| rs_err(&root, e))?;
        }
        self.delete_if_exists(&table_node(id)).await
    }

    pub(crate) async fn create_namespace(&mut self, path: &str) -> Result<()> {
        let path = self.new_name(path).await?;
        self.hs.mkdir(&ns_node(&path)).await.map_err(hs_err)
    }

    pub(crate) async fn drop_namespace(&mut self, path: &str) -> Result<()> {
        let path = normalize_path(path)?;
        if path == "/" {
            return Err(ClientError::InvalidInput(
                "the root namespace cannot be dropped".into(),
            ));
        }
        if !self.ns_exists(&path).await? {
            return Err(ClientError::NamespaceNotFound(path));
        }
        if !self
            .hs
            .readdir(&ns_node(&path))
            .await
            .map_err(hs_err)?
            .is_empty()
        {
            return Err(ClientError::NamespaceNotEmpty(path));
        }
        self.hs.delete(&ns_node(&path)).await.map_err(hs_err)
    }

    pub(crate) async fn create_table(
        &mut self,
        path: &str,
        mut schema: TableSchema,
        splits: Vec<Vec<u8>>,
    ) -> Result<TableSchema> {
        common::row_range::check_split_rows(&splits).map_err(ClientError::InvalidInput)?;
        let path = self.new_name(path).await?;
        schema
            .validate()
            .map_err(|e| ClientError::InvalidInput(e.to_string()))?;
        if self.live().is_empty() {
            return Err(unavailable("no live range server to hold the table".into()));
        }
        schema.name = path.clone();
        self.check_kinds(&schema).await?;
        let id = self
            .hs
            .attr_incr(HT, NEXT_TABLE_ID, 1)
            .await
            .map_err(hs_err)?;
        schema.id = u32::try_from(id).map_err(|_| {
            ClientError::storage(
                ErrorKind::Internal,
                format!("table id counter out of range: {id}"),
            )
        })?;
        schema.name = path.clone();
        self.start_op(Operation::CreateTable {
            path,
            schema: schema.clone(),
            location: None,
            splits,
            locations: Vec::new(),
        })
        .await?;
        Ok(schema)
    }

    async fn existing(&self, path: &str) -> Result<(u32, TableSchema)> {
        let p = normalize_path(path)?;
        let id = self
            .table_id(&p)
            .await?
            .ok_or_else(|| ClientError::TableNotFound(p.clone()))?;
        let schema = self
            .schema(id)
            .await?
            .ok_or(ClientError::TableNotFound(p))?;
        Ok((id, schema))
    }

    pub(crate) async fn alter_table(
        &mut self,
        path: &str,
        mut schema: TableSchema,
    ) -> Result<TableSchema> {
        let (id, old) = self.existing(path).await?;
        schema.id = id;
        schema.name = old.name;
        schema.generation = old.generation + 1;
        schema
            .validate()
            .map_err(|e| ClientError::InvalidInput(e.to_string()))?;
        self.check_kinds(&schema).await?;
        // The first server that holds the table checks the change as the embedded engine
        // would; a refusal there changes nothing.
        if let Some(first) = self.holder_of(id) {
            let s = schema.clone();
            match self
                .on_server(&first, |c| async move { c.alter_table(&s).await })
                .await?
            {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::InvalidInput => {
                    return Err(ClientError::InvalidInput(engine_message(&e)));
                }
                Err(e) => return Err(rs_err(&first, e)),
            }
        }
        self.start_op(Operation::AlterTable {
            schema: schema.clone(),
        })
        .await?;
        Ok(schema)
    }

    fn holder_of(&self, id: u32) -> Option<String> {
        self.servers
            .iter()
            .find(|(_, s)| s.live && s.ranges.iter().any(|r| r.0 == id))
            .map(|(l, _)| l.clone())
    }

    pub(crate) async fn rename_table(&mut self, from: &str, to: &str) -> Result<()> {
        let (id, old) = self.existing(from).await?;
        let to = self.new_name(to).await?;
        self.start_op(Operation::RenameTable {
            from: old.name,
            to,
            id,
        })
        .await
    }

    pub(crate) async fn drop_table(&mut self, path: &str) -> Result<()> {
        let (id, old) = self.existing(path).await?;
        self.start_op(Operation::DropTable { path: old.name, id })
            .await
    }

    /// Tries the operations of waiting DDL requests again; answers those that finished (also
    /// at a look: their node is gone), failed for good, or waited `DDL_WAIT`.
    pub(crate) async fn retry_waiting(&mut self) {
        let waiting = std::mem::take(&mut self.waiting);
        for mut w in waiting {
            let outcome = match self.attr(&op_node(w.seq), OP_ATTR).await {
                Ok(None) => Ok(()),
                Ok(Some(json)) => match Operation::from_json(&json) {
                    Ok(op) => self.run_op(w.seq, op).await,
                    Err(e) => Err(ClientError::storage(
                        ErrorKind::Corruption,
                        format!("operation {} is unreadable: {e}", w.seq),
                    )),
                },
                Err(e) => Err(e),
            };
            match outcome {
                Ok(()) => {
                    let _ = w.respond.send(Ok(w.answer));
                }
                Err(e)
                    if e.kind() == ErrorKind::Unavailable
                        && self.clock.now().saturating_duration_since(w.since) < DDL_WAIT =>
                {
                    w.last_error = e;
                    self.waiting.push(w);
                }
                Err(e) => {
                    let e = if e.kind() == ErrorKind::Unavailable {
                        w.last_error
                    } else {
                        e
                    };
                    let _ = w.respond.send(Err(e));
                }
            }
        }
    }
}

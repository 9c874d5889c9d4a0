//! The iterator and combiner kinds a schema names, checked at CREATE and ALTER TABLE: against
//! the master's own registry (kinds and their options), then against the kinds every live range
//! server reports in `rs.status`, so that no table names a kind some server cannot run (its
//! ranges may move to any of them).

use common::TableSchema;
use proto::ClientError;

use crate::control::Master;
use crate::{Result, rs_err};

/// The kinds a schema names, each as `rs.status` spells it (`combiner:NAME`, `iterator:NAME`)
/// with the family or iterator that names it, in schema order.
pub(crate) fn kinds_named(schema: &TableSchema) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for f in schema.families.iter().filter(|f| !f.deleted) {
        if let Some(c) = f.effective_combiner() {
            out.push((
                format!("combiner:{}", c.kind),
                format!("combiner '{}' of column family '{}'", c.kind, f.name),
            ));
        }
    }
    for it in &schema.iterators {
        out.push((
            format!("iterator:{}", it.kind),
            format!("iterator kind '{}' of iterator '{}'", it.kind, it.name),
        ));
    }
    out
}

impl Master {
    /// Refuses a schema naming a kind that the master's registry does not know (or options it
    /// refuses), or that some live range server lacks; the error names the kind, what names it
    /// and the servers lacking it. A server that cannot be asked fails the check (unavailable):
    /// a kind it might lack must not slip by.
    pub(crate) async fn check_kinds(&mut self, schema: &TableSchema) -> Result<()> {
        self.registry
            .check_schema(schema)
            .map_err(ClientError::from)?;
        let named = kinds_named(schema);
        if named.is_empty() {
            return Ok(());
        }
        let mut lacking: Vec<Vec<String>> = vec![Vec::new(); named.len()];
        for loc in self.live() {
            let (_, kinds) = self
                .on_server(&loc, |c| async move { c.status_and_kinds().await })
                .await?
                .map_err(|e| rs_err(&loc, e))?;
            for (i, (kind, _)) in named.iter().enumerate() {
                if !kinds.iter().any(|k| k == kind) {
                    lacking[i].push(loc.clone());
                }
            }
        }
        match named.iter().zip(&lacking).find(|(_, l)| !l.is_empty()) {
            None => Ok(()),
            Some(((_, what), servers)) => Err(ClientError::InvalidInput(format!(
                "table {}: {what} is unknown to range server{} {}: every live range server \
                 must know every kind a table names",
                schema.name,
                if servers.len() == 1 { "" } else { "s" },
                servers.join(", ")
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::iterators::{CombinerSpec, IterScope, IteratorSpec};

    #[test]
    fn the_kinds_a_schema_names_include_counters_and_skip_dropped_families() {
        let mut s = TableSchema::new(1, "/t");
        s.add_family("plain");
        let hits = s.add_family("hits");
        s.families[hits as usize - 1].counter = true;
        let total = s.add_family("total");
        s.families[total as usize - 1].combiner = Some(CombinerSpec::new("sum"));
        let gone = s.add_family("gone");
        s.families[gone as usize - 1].combiner = Some(CombinerSpec::new("max"));
        s.families[gone as usize - 1].deleted = true;
        s.iterators.push(IteratorSpec {
            name: "old".into(),
            kind: "age_off".into(),
            options: Default::default(),
            scopes: vec![IterScope::Scan, IterScope::Major],
            priority: 10,
        });
        let kinds: Vec<String> = kinds_named(&s).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            kinds,
            ["combiner:counter", "combiner:sum", "iterator:age_off"]
        );
        assert_eq!(
            kinds_named(&s)[1].1,
            "combiner 'sum' of column family 'total'"
        );
    }
}

//! The master's operation log: every operation that takes more than one step (creating,
//! altering, renaming and dropping tables, bootstrapping METADATA, recovering a dead range
//! server, moving a range) is written to Hyperspace (`/ht/ops/<seq>`, attribute `op`, JSON)
//! before its first step and deleted after its last. Every step is idempotent, so the next
//! master (or the next attempt after a failure) runs a pending operation again from the top
//! and finishes it.

use common::TableSchema;
use serde::{Deserialize, Serialize};

/// One operation, with what its steps need to be repeated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Operation {
    /// Creates the METADATA table on `location` and records it as ROOT.
    Bootstrap { location: String },
    /// Creates a table: its schema node, its ranges (one, or one per gap between `splits`)
    /// on the servers chosen at the first attempt and kept (`location` for an unsplit table,
    /// `locations`, one per range, for a split one), their METADATA rows, and last its name
    /// (which makes it visible).
    CreateTable {
        path: String,
        schema: TableSchema,
        location: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        splits: Vec<Vec<u8>>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        locations: Vec<String>,
    },
    /// Pushes a new schema to the servers, then to Hyperspace.
    AlterTable { schema: TableSchema },
    /// Moves a table's name and pushes the renamed schema.
    RenameTable { from: String, to: String, id: u32 },
    /// Removes a table's name, its ranges on every server, its METADATA rows and its schema.
    DropTable { path: String, id: u32 },
    /// Replays a dead range server's ranges into live ones. `plan` says which server takes
    /// which range (table id, end row), fixed before the first range is recovered so that no
    /// range is ever recovered on two servers.
    Recover {
        location: String,
        plan: Vec<(u32, Option<Vec<u8>>, String)>,
    },
    /// Moves one range: unload on `from` (the record it answers is kept here), adopt on `to`,
    /// update METADATA.
    Move {
        table_id: u32,
        start_row: Option<Vec<u8>>,
        end_row: Option<Vec<u8>>,
        from: String,
        to: String,
        record_json: Option<String>,
    },
}

impl Operation {
    /// A short description for logs and `ht status`.
    pub fn describe(&self) -> String {
        match self {
            Operation::Bootstrap { location } => format!("bootstrap METADATA on {location}"),
            Operation::CreateTable { path, schema, .. } => {
                format!("create table {path} (id {})", schema.id)
            }
            Operation::AlterTable { schema } => format!("alter table {}", schema.name),
            Operation::RenameTable { from, to, .. } => format!("rename table {from} to {to}"),
            Operation::DropTable { path, .. } => format!("drop table {path}"),
            Operation::Recover { location, plan } => {
                format!("recover {location} ({} ranges)", plan.len())
            }
            Operation::Move {
                table_id, from, to, ..
            } => format!("move a range of table {table_id} from {from} to {to}"),
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("operations serialize")
    }

    pub fn from_json(s: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(s)
    }
}

/// The Hyperspace file of operation `seq` (zero-padded so listings sort by age).
pub fn op_node(seq: u64) -> String {
    format!("{}/{seq:020}", proto::layout::OPS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_round_trip() {
        let mut s = TableSchema::new(7, "/t");
        s.add_family("a");
        for op in [
            Operation::Bootstrap {
                location: "rs1".into(),
            },
            Operation::CreateTable {
                path: "/t".into(),
                schema: s.clone(),
                location: Some("rs2".into()),
                splits: Vec::new(),
                locations: Vec::new(),
            },
            Operation::CreateTable {
                path: "/t".into(),
                schema: s.clone(),
                location: Some("rs2".into()),
                splits: vec![b"g".to_vec(), b"\x00\xffm".to_vec()],
                locations: vec!["rs2".into(), "rs1".into(), "rs3".into()],
            },
            Operation::Recover {
                location: "rs1".into(),
                plan: vec![
                    (7, Some(b"\xffm".to_vec()), "rs2".into()),
                    (7, None, "rs3".into()),
                ],
            },
            Operation::Move {
                table_id: 7,
                start_row: None,
                end_row: Some(b"m".to_vec()),
                from: "rs1".into(),
                to: "rs2".into(),
                record_json: None,
            },
        ] {
            assert_eq!(Operation::from_json(&op.to_json()).unwrap(), op);
            assert!(!op.describe().is_empty());
        }
        assert!(op_node(12) < op_node(100));
    }
}

//! What the kill -9 test (`tests/crash.rs`) and its child (`examples/crash_child.rs`) must
//! agree on: the table, the engine's small limits and the cells written. Both include this
//! file with `#[path]`.

use common::TableSchema;
use common::schema::{AccessGroupSpec, FamilySpec};
use rangeserver::commitlog::CommitLogOptions;
use rangeserver::engine::EngineOptions;

pub const TABLE: u32 = 1;

/// Small limits so that every kind of maintenance runs often.
pub fn options() -> EngineOptions {
    EngineOptions {
        cell_cache_flush_bytes: 64 << 10,
        cell_cache_limit_bytes: 1 << 20,
        commit_log: CommitLogOptions {
            fragment_size_bytes: 256 << 10,
            ..CommitLogOptions::default()
        },
        split_size_bytes: 512 << 10,
        max_stores_per_group: 3,
        ..EngineOptions::default()
    }
}

/// Two families in two access groups.
#[allow(dead_code, reason = "only the child creates the table")]
pub fn schema() -> TableSchema {
    let mut s = TableSchema::new(TABLE, "/crash");
    s.access_groups = vec![AccessGroupSpec::new("g1"), AccessGroupSpec::new("g2")];
    s.families = vec![FamilySpec::new(1, "a", "g1"), FamilySpec::new(2, "b", "g2")];
    s
}

pub fn row_of(writer: u32, seq: u64) -> String {
    format!("w{writer}-{seq:08}")
}

/// The value of cell `seq`: its row and some filler whose length depends on it.
pub fn value_of(writer: u32, seq: u64) -> String {
    format!(
        "{}:{}",
        row_of(writer, seq),
        "x".repeat((seq % 97) as usize)
    )
}

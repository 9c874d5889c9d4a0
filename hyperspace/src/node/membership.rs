//! Membership: Raft configuration changes and the member list file (`id addr` per line).

use std::collections::BTreeMap;

use bytes::Bytes;
use protobuf::Message as _;
use raft::StateRole;
use raft::prelude::{ConfChange, ConfChangeType, Entry};
use tracing::{info, warn};

use crate::storage::StorageError;

use super::driver::{Driver, Pending, ctx_bytes, parse_ctx};
use super::{NodeError, Reply};

pub(super) const MEMBERS_FILE: &str = "members";

/// Reads the member list file (`id addr` per line), written when membership changes.
pub(super) fn load_members(dir: &std::path::Path) -> Option<BTreeMap<u64, String>> {
    let text = std::fs::read_to_string(dir.join(MEMBERS_FILE)).ok()?;
    let mut members = BTreeMap::new();
    for line in text.lines() {
        let (id, addr) = line.split_once(' ')?;
        members.insert(id.parse().ok()?, addr.to_string());
    }
    Some(members)
}

pub(super) fn save_members(
    dir: &std::path::Path,
    members: &BTreeMap<u64, String>,
) -> std::io::Result<()> {
    let text: String = members
        .iter()
        .map(|(id, addr)| format!("{id} {addr}\n"))
        .collect();
    let tmp = dir.join(format!("{MEMBERS_FILE}.tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, dir.join(MEMBERS_FILE))?;
    std::fs::File::open(dir)?.sync_all()
}

impl Driver {
    pub(super) fn change_member(&mut self, add: bool, id: u64, addr: String, reply: Reply<()>) {
        if self.role != StateRole::Leader {
            let _ = reply.send(Err(self.not_leader()));
            return;
        }
        if id == 0 {
            let _ = reply.send(Err(NodeError::Invalid(
                "replica id must be non-zero".into(),
            )));
            return;
        }
        let mut cc = ConfChange {
            node_id: id,
            ..Default::default()
        };
        cc.set_change_type(if add {
            ConfChangeType::AddNode
        } else {
            ConfChangeType::RemoveNode
        });
        cc.context = Bytes::from(addr.into_bytes());
        let n = self.next_ctx;
        self.next_ctx += 1;
        let term = self.raw.raft.term;
        match self.raw.propose_conf_change(ctx_bytes(self.id, n), cc) {
            Ok(()) => {
                self.member_changes.insert(
                    n,
                    Pending {
                        reply,
                        deadline: self.now() + self.config.request_timeout * 4,
                        term,
                    },
                );
            }
            Err(e) => {
                let _ = reply.send(Err(NodeError::Raft(e)));
            }
        }
    }

    pub(super) fn apply_conf_change(&mut self, entry: &Entry) -> Result<(), NodeError> {
        let mut cc = ConfChange::default();
        cc.merge_from_bytes(&entry.data)
            .map_err(|e| NodeError::Snapshot(format!("undecodable conf change: {e}")))?;
        let cs = match self.raw.apply_conf_change(&cc) {
            Ok(cs) => cs,
            Err(e) => {
                // Committed but refused by raft-rs (e.g. removing the last voter): every replica
                // refuses it alike, so it changes nothing; stopping would stop them all, and
                // again at every restart.
                warn!(replica = self.id, index = entry.index, error = %e, "conf change refused");
                if let Some((node, n)) = parse_ctx(&entry.context)
                    && node == self.id
                    && self
                        .member_changes
                        .get(&n)
                        .is_some_and(|p| p.term == entry.term)
                    && let Some(p) = self.member_changes.remove(&n)
                {
                    let _ = p.reply.send(Err(NodeError::Raft(e)));
                }
                return Ok(());
            }
        };
        match cc.get_change_type() {
            ConfChangeType::AddNode | ConfChangeType::AddLearnerNode => {
                let addr = String::from_utf8_lossy(&cc.context).into_owned();
                self.members.insert(cc.node_id, addr);
                // The founders' configuration is not in the log (it was set at first boot), so a
                // new replica must start from a snapshot: compact now, and the leader can only
                // send it one.
                self.compact_now = true;
            }
            ConfChangeType::RemoveNode => {
                self.members.remove(&cc.node_id);
            }
        }
        self.storage.set_conf_state(cs)?;
        save_members(&self.config.dir, &self.members).map_err(|source| StorageError::Io {
            path: self.config.dir.join(MEMBERS_FILE),
            source,
        })?;
        info!(replica = self.id, change = ?cc.get_change_type(), node = cc.node_id, "membership changed");
        if let Some((node, n)) = parse_ctx(&entry.context)
            && node == self.id
            && self
                .member_changes
                .get(&n)
                .is_some_and(|p| p.term == entry.term)
            && let Some(p) = self.member_changes.remove(&n)
        {
            let _ = p.reply.send(Ok(()));
        }
        if cc.node_id == self.id && cc.get_change_type() == ConfChangeType::RemoveNode {
            info!(replica = self.id, "this replica was removed from the group");
        }
        Ok(())
    }
}

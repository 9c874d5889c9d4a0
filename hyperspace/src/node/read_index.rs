//! Read index: linearizable reads and keep-alives, answered once a quorum confirmed this
//! leader and its state has applied the read's index.

use std::collections::VecDeque;

use raft::StateRole;

use crate::command::{Command, Response};

use super::driver::{Driver, ctx_bytes, parse_ctx};
use super::{KeepAlive, NodeError, Reply};

pub(super) enum ReadKind {
    Query(Command, Reply<Response>),
    KeepAlive {
        session: u64,
        seen: u64,
        max_events: usize,
        reply: Reply<KeepAlive>,
    },
}

impl Driver {
    pub(super) fn start_read(&mut self, kind: ReadKind) {
        if self.local_reads
            && let ReadKind::Query(cmd, reply) = kind
        {
            let _ = reply.send(Ok(self.state.query(&cmd)));
            return;
        }
        if self.role != StateRole::Leader {
            let err = self.not_leader();
            fail_read(kind, err);
            return;
        }
        if let ReadKind::Query(cmd, _) = &kind
            && cmd.op.as_ref().is_none_or(|op| op.is_write())
        {
            fail_read(
                kind,
                NodeError::Invalid("only read-only operations are served as reads".into()),
            );
            return;
        }
        if self.reads.len() + self.ready_reads.len() >= self.config.max_pending {
            fail_read(kind, NodeError::Busy);
            return;
        }
        let n = self.next_ctx;
        self.next_ctx += 1;
        if !self.raw.raft.commit_to_current_term() {
            self.deferred_reads.push(n);
        }
        self.raw.read_index(ctx_bytes(self.id, n));
        self.reads
            .insert(n, (kind, self.now() + self.config.request_timeout));
    }

    pub(super) fn on_read_state(&mut self, index: u64, ctx: &[u8]) {
        let Some((node, n)) = parse_ctx(ctx) else {
            return;
        };
        if node != self.id {
            return;
        }
        if let Some((kind, _)) = self.reads.remove(&n) {
            self.ready_reads.push_back((index, kind));
        }
    }

    /// Answers the reads whose read index has been applied.
    pub(super) fn serve_reads(&mut self) {
        let mut waiting = VecDeque::new();
        while let Some((index, kind)) = self.ready_reads.pop_front() {
            if index > self.applied {
                waiting.push_back((index, kind));
                continue;
            }
            match kind {
                ReadKind::Query(cmd, reply) => {
                    let _ = reply.send(Ok(self.state.query(&cmd)));
                }
                ReadKind::KeepAlive {
                    session,
                    seen,
                    max_events,
                    reply,
                } => {
                    let outcome = self.keep_alive(session, seen, max_events);
                    let _ = reply.send(outcome);
                }
            }
        }
        self.ready_reads = waiting;
    }

    /// Asks again for the read indexes raft-rs dropped because they came before this leader
    /// had committed in its term.
    pub(super) fn reissue_deferred_reads(&mut self) {
        if self.deferred_reads.is_empty()
            || self.role != StateRole::Leader
            || !self.raw.raft.commit_to_current_term()
        {
            return;
        }
        for n in std::mem::take(&mut self.deferred_reads) {
            if self.reads.contains_key(&n) {
                self.raw.read_index(ctx_bytes(self.id, n));
            }
        }
    }
}

pub(super) fn fail_read(kind: ReadKind, err: NodeError) {
    match kind {
        ReadKind::Query(_, reply) => {
            let _ = reply.send(Err(err));
        }
        ReadKind::KeepAlive { reply, .. } => {
            let _ = reply.send(Err(err));
        }
    }
}

//! Session leases, leader-local as in Chubby: renewed by keep-alives, expired by the leader.

use std::time::{Duration, Instant};

use raft::StateRole;
use tracing::info;

use crate::command::{AckEvents, Command, ExpireSession, Op, Response};

use super::driver::Driver;
use super::{KeepAlive, NodeError};

impl Driver {
    pub(super) fn keep_alive(
        &mut self,
        session: u64,
        seen: u64,
        max_events: usize,
    ) -> Result<KeepAlive, NodeError> {
        let Some(lease_ms) = self.state.session_lease_ms(session) else {
            return Ok(KeepAlive {
                events: Vec::new(),
                lost: false,
                lease_ms: 0,
            });
        };
        if self.role != StateRole::Leader {
            return Err(self.not_leader());
        }
        // Its expiry is proposed: the session is over as far as this leader is concerned, and
        // a lease granted now would outlive the locks the expiry gives away.
        if self.expiring.contains_key(&session) {
            return Ok(KeepAlive {
                events: Vec::new(),
                lost: false,
                lease_ms: 0,
            });
        }
        self.leases
            .insert(session, self.now() + Duration::from_millis(lease_ms));
        // Acknowledge what the client has seen, once it is more than what is queued before it.
        let first_queued = self
            .state
            .events_after(session, 0, 1)
            .events
            .first()
            .map(|e| e.seq);
        let proposed = self.acks_proposed.get(&session).copied().unwrap_or(0);
        if first_queued.is_some_and(|first| first <= seen) && seen > proposed {
            self.acks_proposed.insert(session, seen);
            self.propose_internal(Op::AckEvents(AckEvents {
                session,
                upto: seen,
            }));
        }
        let batch = self.state.events_after(session, seen, max_events);
        Ok(KeepAlive {
            events: batch.events,
            lost: batch.lost,
            lease_ms,
        })
    }

    /// Keeps the leader's lease table in step with sessions created and ended by the log.
    pub(super) fn track_leases(&mut self, cmd: &Command, response: &Response) {
        match &cmd.op {
            Some(Op::CreateSession(cs)) => {
                if let Some(crate::command::Reply::Session(id)) = &response.reply {
                    let end = self.now() + Duration::from_millis(cs.lease_ms);
                    self.leases.entry(*id).or_insert(end);
                }
            }
            Some(Op::CloseSession(_)) => {
                self.leases.remove(&cmd.session);
                self.expiring.remove(&cmd.session);
                self.acks_proposed.remove(&cmd.session);
            }
            Some(Op::ExpireSession(e)) => {
                self.leases.remove(&e.session);
                self.expiring.remove(&e.session);
                self.acks_proposed.remove(&e.session);
            }
            _ => {}
        }
    }

    /// Chubby's grace: every session gets a full lease from a new leader.
    pub(super) fn grant_fresh_leases(&mut self) {
        let now = self.now();
        self.leases = self
            .state
            .sessions()
            .into_iter()
            .map(|(id, lease_ms)| (id, now + Duration::from_millis(lease_ms)))
            .collect();
        self.expiring.clear();
        self.acks_proposed.clear();
    }

    /// A deposed leader forgets the lease table (the next leader grants fresh leases).
    pub(super) fn drop_leases(&mut self) {
        self.leases.clear();
        self.expiring.clear();
        self.acks_proposed.clear();
    }

    /// Leader only: proposes `ExpireSession` for every session whose lease ran out (again, a
    /// request timeout later, if the first proposal did not commit).
    pub(super) fn expire_leases(&mut self, now: Instant) {
        let timeout = self.config.request_timeout;
        let mut due: Vec<u64> = self
            .leases
            .iter()
            .filter(|(s, d)| **d <= now && self.expiring.get(*s).is_none_or(|retry| *retry <= now))
            .map(|(s, _)| *s)
            .collect();
        // In session order, not the map's: a seeded simulation replays the same log.
        due.sort_unstable();
        for session in due {
            info!(replica = self.id, session, "session lease expired");
            self.expiring.insert(session, now + timeout);
            self.propose_internal(Op::ExpireSession(ExpireSession { session }));
        }
    }
}

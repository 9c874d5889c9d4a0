//! Per-session state: the lease length, the cache of answers used to dedupe retries, the handles
//! it holds and its bounded event queue.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::command::{Event, EventBatch, Response};

#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Session {
    pub lease_ms: u64,
    /// The `CreateSession` nonce, so a retried create finds this session.
    pub nonce: u64,
    /// Highest `first_incomplete` the client sent: answers below it are forgotten.
    pub first_incomplete: u64,
    /// Answers to requests with seq >= `first_incomplete`, returned again to retries.
    pub replies: BTreeMap<u64, Response>,
    /// Handles of this session, live or dead. Derived from the handles; rebuilt on restore.
    pub handles: BTreeSet<u64>,
    /// Queued events, oldest first, seqs consecutive.
    pub events: VecDeque<Event>,
    /// Seq of the last event queued (0 before the first).
    pub last_event_seq: u64,
    /// Highest seq dropped because the queue was full (0 if none).
    pub lost_upto: u64,
}

impl Session {
    /// Appends an event (its `seq` is assigned here), dropping the oldest beyond `max`.
    pub fn push_event(&mut self, mut event: Event, max: usize) {
        self.last_event_seq += 1;
        event.seq = self.last_event_seq;
        self.events.push_back(event);
        while self.events.len() > max {
            if let Some(dropped) = self.events.pop_front() {
                self.lost_upto = dropped.seq;
            }
        }
    }

    pub fn events_after(&self, after: u64, max: usize) -> EventBatch {
        EventBatch {
            events: self
                .events
                .iter()
                .filter(|e| e.seq > after)
                .take(max)
                .cloned()
                .collect(),
            lost: self.lost_upto > after,
        }
    }

    pub fn ack(&mut self, upto: u64) {
        while self.events.front().is_some_and(|e| e.seq <= upto) {
            self.events.pop_front();
        }
    }

    /// Records the client's `first_incomplete` and forgets the answers below it.
    pub fn advance(&mut self, first_incomplete: u64) {
        if first_incomplete > self.first_incomplete {
            self.first_incomplete = first_incomplete;
            self.replies = self.replies.split_off(&first_incomplete);
        }
    }
}

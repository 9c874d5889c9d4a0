//! Per-node lock state: the holders, the FIFO queue of blocked requests, and the rules that
//! decide who gets the lock. Pure bookkeeping; the caller turns the outcomes into events.

use std::collections::{BTreeSet, VecDeque};

use crate::command::LockMode;

/// The lock of one node.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct NodeLock {
    /// `None` when unlocked, else the mode every holder has.
    pub mode: Option<LockMode>,
    /// Handles holding the lock (one when exclusive).
    pub holders: BTreeSet<u64>,
    /// Blocked requests in arrival order.
    pub waiters: VecDeque<(u64, LockMode)>,
    /// The generation of the current (or last) locked period; see [`NodeLock::grant`].
    pub generation: u64,
}

/// What `release` did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Released {
    /// The handle held the lock; `unlocked` = the node has no holder left.
    Held { unlocked: bool },
    /// The handle was waiting and is no longer.
    Withdrawn,
    /// The handle neither held nor waited.
    Nothing,
}

impl NodeLock {
    pub fn involves(&self, handle: u64) -> bool {
        self.holders.contains(&handle) || self.waiters.iter().any(|(h, _)| *h == handle)
    }

    /// Whether a new request in `mode` can be granted at once. Waiters block new requests even
    /// when compatible, so a stream of shared lockers cannot starve a queued exclusive one.
    pub fn grantable(&self, mode: LockMode) -> bool {
        if !self.waiters.is_empty() {
            return false;
        }
        match mode {
            LockMode::Exclusive => self.holders.is_empty(),
            LockMode::Shared => self.mode != Some(LockMode::Exclusive),
            LockMode::None => false,
        }
    }

    /// Makes `handle` a holder in `mode` and returns the generation. A grant that takes the
    /// node from unlocked to locked starts a new generation, drawn from `next_generation` (a
    /// counter over all nodes, so a node deleted and re-created never repeats a generation and
    /// an old sequencer cannot validate against the new node).
    pub fn grant(&mut self, handle: u64, mode: LockMode, next_generation: &mut u64) -> u64 {
        if self.holders.is_empty() {
            *next_generation += 1;
            self.generation = *next_generation;
            self.mode = Some(mode);
        }
        self.holders.insert(handle);
        self.generation
    }

    /// Drops `handle` from the holders or the queue (without granting to anyone).
    pub fn release(&mut self, handle: u64) -> Released {
        if self.holders.remove(&handle) {
            let unlocked = self.holders.is_empty();
            if unlocked {
                self.mode = None;
            }
            Released::Held { unlocked }
        } else if let Some(i) = self.waiters.iter().position(|(h, _)| *h == handle) {
            self.waiters.remove(i);
            Released::Withdrawn
        } else {
            Released::Nothing
        }
    }

    /// Grants from the head of the queue what can be granted now: an exclusive waiter when there
    /// is no holder, or the run of shared waiters at the head when there is no exclusive holder.
    /// Returns the granted `(handle, mode, generation)` in grant order.
    pub fn grant_waiters(&mut self, next_generation: &mut u64) -> Vec<(u64, LockMode, u64)> {
        let mut granted = Vec::new();
        while let Some(&(handle, mode)) = self.waiters.front() {
            let ok = match mode {
                LockMode::Exclusive => self.holders.is_empty(),
                _ => self.mode != Some(LockMode::Exclusive),
            };
            if !ok {
                break;
            }
            self.waiters.pop_front();
            let generation = self.grant(handle, mode, next_generation);
            granted.push((handle, mode, generation));
            if mode == LockMode::Exclusive {
                break;
            }
        }
        granted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_grants_runs_of_shared_and_single_exclusive() {
        let mut g = 0;
        let mut l = NodeLock::default();
        assert!(l.grantable(LockMode::Exclusive));
        assert_eq!(l.grant(1, LockMode::Exclusive, &mut g), 1);
        assert!(!l.grantable(LockMode::Shared));
        l.waiters.push_back((2, LockMode::Shared));
        l.waiters.push_back((3, LockMode::Shared));
        l.waiters.push_back((4, LockMode::Exclusive));
        l.waiters.push_back((5, LockMode::Shared));
        assert_eq!(l.grant_waiters(&mut g), vec![]);
        assert_eq!(l.release(1), Released::Held { unlocked: true });
        assert_eq!(
            l.grant_waiters(&mut g),
            vec![(2, LockMode::Shared, 2), (3, LockMode::Shared, 2)]
        );
        assert_eq!(l.release(2), Released::Held { unlocked: false });
        assert_eq!(l.grant_waiters(&mut g), vec![]);
        assert_eq!(l.release(3), Released::Held { unlocked: true });
        assert_eq!(l.grant_waiters(&mut g), vec![(4, LockMode::Exclusive, 3)]);
        assert_eq!(l.release(5), Released::Withdrawn);
        assert_eq!(l.release(5), Released::Nothing);
    }
}

//! Locks: per-node state (holders, FIFO queue of blocked requests, generation), the rules that
//! decide who gets the lock, and the Lock / Release operations with their events.

use std::collections::{BTreeSet, VecDeque};

use super::{OpResult, StateMachine, event, fail, lock_mode};
use crate::command::{ErrorCode, LockMode, LockReply, LockStatus, Reply, event_mask, flags};

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

/// The lock operations of the state machine, on top of the `NodeLock` rules above.
impl StateMachine {
    pub(super) fn lock(&mut self, sid: u64, handle: u64, mode: i32, try_lock: bool) -> OpResult {
        let (path, hflags) = self.live_handle(sid, handle)?;
        if hflags & flags::LOCK == 0 {
            return fail(
                ErrorCode::PermissionDenied,
                format!("handle {handle} was not opened with LOCK"),
            );
        }
        let Some(mode) = lock_mode(mode) else {
            return fail(
                ErrorCode::InvalidArgument,
                format!("lock mode {mode} is not shared or exclusive"),
            );
        };
        let mut next_gen = self.last_generation;
        let Some(node) = self.tree.get_mut(&path) else {
            return fail(ErrorCode::BadHandle, format!("handle {handle} is dead"));
        };
        if node.lock.involves(handle) {
            return fail(
                ErrorCode::LockState,
                format!("handle {handle} already holds or waits for a lock"),
            );
        }
        if node.lock.grantable(mode) {
            let generation = node.lock.grant(handle, mode, &mut next_gen);
            self.last_generation = next_gen;
            self.notify(
                &path,
                event_mask::LOCK_ACQUIRED,
                "",
                mode,
                generation,
                handle,
            );
            return Ok(Reply::Lock(LockReply {
                status: LockStatus::Granted as i32,
                generation,
            }));
        }
        let status = if try_lock {
            LockStatus::Busy
        } else {
            node.lock.waiters.push_back((handle, mode));
            LockStatus::Pending
        };
        Ok(Reply::Lock(LockReply {
            status: status as i32,
            generation: 0,
        }))
    }

    pub(super) fn release(&mut self, sid: u64, handle: u64) -> OpResult {
        let (path, _) = self.live_handle(sid, handle)?;
        if self.release_lock(&path, handle) == Released::Nothing {
            return fail(
                ErrorCode::LockState,
                format!("handle {handle} neither holds nor waits for a lock"),
            );
        }
        Ok(Reply::Done(Default::default()))
    }

    /// Drops `handle`'s hold or request on the lock of `path`, then grants what the queue
    /// allows, with the events that go with it.
    pub(super) fn release_lock(&mut self, path: &str, handle: u64) -> Released {
        let mut next_gen = self.last_generation;
        let Some(node) = self.tree.get_mut(path) else {
            return Released::Nothing;
        };
        let released = node.lock.release(handle);
        let granted = node.lock.grant_waiters(&mut next_gen);
        self.last_generation = next_gen;
        if released == (Released::Held { unlocked: true }) {
            self.notify(path, event_mask::LOCK_RELEASED, "", LockMode::None, 0, 0);
        }
        for (h, mode, generation) in granted {
            self.send(h, event(h, event_mask::LOCK_GRANTED, "", mode, generation));
            self.notify(path, event_mask::LOCK_ACQUIRED, "", mode, generation, h);
        }
        released
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

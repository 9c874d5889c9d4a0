//! The lock-history checker shared by `ht/tests/hyperspace.rs` (real processes, wall clock) and
//! `hyperspace/tests/sim.rs` (simulated replicas, manual clock): what clients saw while taking an
//! exclusive lock, writing an attribute under it and incrementing a counter must be a history a
//! correct lock service can produce.
//!
//! Included with `#[path = "../../testsupport/lock_history.rs"] mod lock_history;` (no library
//! crate depends on test code). The rules:
//! - mutual exclusion: exclusive holds ordered by grant do not overlap in time, and their lock
//!   generations rise with them;
//! - progress: enough holds, and every worker got the lock at least once (the queue is FIFO);
//! - sessions survive: no worker's session expired (leader changes keep sessions alive);
//! - acknowledged writes: each worker's final attribute value is at least the last acknowledged
//!   one and at most the last attempted one; the counter is at least the acknowledged
//!   increments and at most those plus the ones whose answer was lost;
//! - linearizable reads: a counter read sent after an increment was acknowledged sees it.

#![allow(dead_code)]

use std::time::Instant;

/// One exclusive hold as a client saw it: from learning of the grant to sending the release.
#[derive(Debug, Clone)]
pub struct Hold {
    pub worker: usize,
    pub generation: u64,
    pub granted: Instant,
    pub released: Instant,
}

/// A read of the counter: when it was sent and what it returned.
#[derive(Debug, Clone)]
pub struct CounterRead {
    pub worker: usize,
    pub sent: Instant,
    pub value: u64,
}

/// What one worker saw.
#[derive(Debug, Default, Clone)]
pub struct WorkerLog {
    pub holds: Vec<Hold>,
    /// Last value whose attr_set was acknowledged, and the last one attempted.
    pub acked_value: Option<u64>,
    pub attempted_value: Option<u64>,
    pub increments_acked: u64,
    pub increments_unknown: u64,
    /// When each acknowledged increment's answer arrived.
    pub increment_acks: Vec<Instant>,
    pub counter_reads: Vec<CounterRead>,
    pub expired: bool,
}

/// What is there at the end, read linearizably: each worker's attribute and the counter.
#[derive(Debug, Clone)]
pub struct FinalState {
    pub values: Vec<Option<u64>>,
    pub total: u64,
}

/// Numbers of a history that passed.
#[derive(Debug, Clone)]
pub struct Summary {
    pub holds: usize,
    pub total: u64,
    pub counter_reads: usize,
}

/// Checks a finished history against its final state; the error names the first rule broken
/// and the events that break it.
pub fn check(logs: &[WorkerLog], end: &FinalState, min_holds: usize) -> Result<Summary, String> {
    let holds = sorted_holds(logs);
    if holds.len() < min_holds {
        return Err(format!("too little progress: {} holds", holds.len()));
    }
    for i in 0..logs.len() {
        if !holds.iter().any(|h| h.worker == i) {
            return Err(format!("worker {i} never got the lock (FIFO queue)"));
        }
    }
    check_exclusion(&holds)?;
    let mut acked_incr = 0;
    let mut unknown_incr = 0;
    for (i, log) in logs.iter().enumerate() {
        check_survival(i, log)?;
        acked_incr += log.increments_acked;
        unknown_incr += log.increments_unknown;
        let got = end.values.get(i).copied().flatten();
        if let Some(acked) = log.acked_value {
            let Some(got) = got else {
                return Err(format!("worker {i}: acknowledged attribute missing"));
            };
            if got < acked || Some(got) > log.attempted_value {
                return Err(format!(
                    "worker {i}: value {got}, acknowledged {acked}, attempted {:?}",
                    log.attempted_value
                ));
            }
        }
    }
    let total = end.total;
    if total < acked_incr || total > acked_incr + unknown_incr {
        return Err(format!(
            "counter {total}, acknowledged increments {acked_incr}, unknown {unknown_incr}"
        ));
    }
    let counter_reads = check_reads(logs)?;
    Ok(Summary {
        holds: holds.len(),
        total,
        counter_reads,
    })
}

/// The rules a history must keep at every moment, not only at its end (a simulation checks
/// them after every answer, to name the step that broke one): exclusion, survival, reads.
pub fn check_safety(logs: &[WorkerLog]) -> Result<(), String> {
    check_exclusion(&sorted_holds(logs))?;
    for (i, log) in logs.iter().enumerate() {
        check_survival(i, log)?;
    }
    check_reads(logs).map(|_| ())
}

fn sorted_holds(logs: &[WorkerLog]) -> Vec<Hold> {
    let mut holds: Vec<Hold> = logs.iter().flat_map(|l| l.holds.clone()).collect();
    holds.sort_by_key(|h| h.granted);
    holds
}

/// Holds ordered by grant do not overlap, and generations rise with them.
fn check_exclusion(holds: &[Hold]) -> Result<(), String> {
    for pair in holds.windows(2) {
        if pair[1].granted <= pair[0].released {
            return Err(format!(
                "overlapping exclusive holds: {:?} and {:?}",
                pair[0], pair[1]
            ));
        }
        if pair[1].generation <= pair[0].generation {
            return Err(format!(
                "lock generations not increasing: {:?} then {:?}",
                pair[0], pair[1]
            ));
        }
    }
    Ok(())
}

fn check_survival(i: usize, log: &WorkerLog) -> Result<(), String> {
    if log.expired {
        return Err(format!(
            "worker {i}'s session expired across leader changes"
        ));
    }
    Ok(())
}

/// A counter read sees every increment acknowledged before it was sent; returns the reads.
fn check_reads(logs: &[WorkerLog]) -> Result<usize, String> {
    let mut acks: Vec<Instant> = logs
        .iter()
        .flat_map(|l| l.increment_acks.iter().copied())
        .collect();
    acks.sort();
    let mut reads = 0;
    for read in logs.iter().flat_map(|l| l.counter_reads.iter()) {
        reads += 1;
        let before = acks.partition_point(|t| *t < read.sent) as u64;
        if read.value < before {
            return Err(format!(
                "stale read: worker {} read counter {} after {before} increments were acknowledged",
                read.worker, read.value
            ));
        }
    }
    Ok(reads)
}

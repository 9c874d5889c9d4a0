//! Which fragments a commit log must have and where each may end: the rules that tell a torn
//! tail (a crash while writing) from damage or a lost file (docs/formats/commitlog.md "Replay
//! rules").

use std::collections::BTreeMap;
use std::sync::Arc;

use super::fragment::{FRAGMENT_HEADER_BYTES, Tail};
use crate::{Error, Result};

/// What the owner of a log recorded about its fragments (the engine keeps it in its meta log,
/// as RocksDB's `track_and_verify_wals_in_manifest` keeps WALs in its MANIFEST). With it, a
/// missing, truncated or damaged fragment is an error wherever it is; only the tail of the
/// newest fragment, written by a process that did not close it, may be torn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogTrack {
    /// Fragments below this were purged; from here to `created` every fragment must exist.
    pub start: u64,
    /// The highest fragment number ever created, if any.
    pub created: Option<u64>,
    /// Where fragments end: recorded when the writer closed them, or by the first append of a
    /// later process, which accepted the torn tail of the fragment it found newest.
    pub ends: BTreeMap<u64, u64>,
}

impl LogTrack {
    /// Applies a record (fields only grow; ends below the start are forgotten).
    pub fn apply(&mut self, r: &LogRecord) {
        if let Some(s) = r.start {
            self.start = self.start.max(s);
        }
        if let Some(c) = r.created {
            self.created = Some(self.created.map_or(c, |old| old.max(c)));
        }
        self.ends.extend(r.ends.iter().copied());
        let start = self.start;
        self.ends.retain(|&n, _| n >= start);
    }
}

/// A change to a [`LogTrack`], recorded (durably) before the log acts on it: before a fragment
/// is appended to, after one is closed, before fragments are purged.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LogRecord {
    pub start: Option<u64>,
    pub ends: Vec<(u64, u64)>,
    pub created: Option<u64>,
}

/// Makes a [`LogRecord`] durable (the engine writes it to its meta log). Called by the writer
/// thread and by purge; must not append to the same log.
pub type Recorder = Arc<dyn Fn(&LogRecord) -> Result<()> + Send + Sync>;

/// The fragments to read, in order, each with its [`Tail`] rule; and the leftovers of an
/// interrupted purge (below the recorded start: every cell in them is flushed).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub read: Vec<(u64, Tail)>,
    pub leftovers: Vec<u64>,
}

fn corrupt(dir: &str, n: u64, msg: String) -> Error {
    Error::Corrupt {
        file: dfs_broker::join(dir, &n.to_string()),
        offset: 0,
        msg,
    }
}

/// Checks the fragments found in `dir` (`(number, length)`, sorted) against what was recorded.
/// Without a record (a log written before fragments were tracked, or one read on its own), the
/// fragments must still be numbered without gaps and only the highest may end torn.
pub fn plan(dir: &str, listed: &[(u64, u64)], track: Option<&LogTrack>) -> Result<Plan> {
    let mut p = Plan::default();
    let Some(t) = track else {
        for w in listed.windows(2) {
            if w[1].0 != w[0].0 + 1 {
                return Err(corrupt(
                    dir,
                    w[0].0 + 1,
                    format!(
                        "commit-log fragment is missing: fragments {} and {} exist, so it held entries that were acknowledged",
                        w[0].0, w[1].0
                    ),
                ));
            }
        }
        let last = listed.len().saturating_sub(1);
        for (i, &(n, len)) in listed.iter().enumerate() {
            let tail = if i == last {
                Tail::MayTear
            } else {
                Tail::End(len)
            };
            p.read.push((n, tail));
        }
        return Ok(p);
    };
    // A fragment is created before it is recorded, and nothing is appended to it until it is:
    // a crash in between leaves the next number holding at most its header.
    let unrecorded = t.created.map_or(t.start, |c| c + 1);
    for &(n, len) in listed {
        if n < t.start {
            p.leftovers.push(n);
        } else if n == unrecorded && len <= FRAGMENT_HEADER_BYTES as u64 {
            p.read.push((n, Tail::MayTear));
        } else if t.created.is_none_or(|c| n > c) {
            return Err(corrupt(
                dir,
                n,
                format!(
                    "commit-log fragment was never recorded (the meta log records fragments {}..={})",
                    t.start,
                    t.created.map_or("none".to_string(), |c| c.to_string())
                ),
            ));
        }
    }
    let Some(created) = t.created else {
        return Ok(p);
    };
    let tail_unrecorded = p.read.pop();
    let mut present = listed
        .iter()
        .map(|&(n, _)| n)
        .filter(|&n| n >= t.start && n <= created);
    let mut next = present.next();
    for n in t.start..=created {
        if next != Some(n) {
            return Err(corrupt(
                dir,
                n,
                format!(
                    "commit-log fragment is missing (the meta log records fragments {}..={created})",
                    t.start
                ),
            ));
        }
        next = present.next();
        let tail = match t.ends.get(&n) {
            Some(&end) => Tail::End(end),
            None if n == created => Tail::MayTear,
            None => {
                return Err(corrupt(
                    dir,
                    n,
                    "commit-log fragment has no recorded end, yet a later fragment was created"
                        .into(),
                ));
            }
        };
        p.read.push((n, tail));
    }
    p.read.extend(tail_unrecorded);
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn track(start: u64, created: u64, ends: &[(u64, u64)]) -> LogTrack {
        LogTrack {
            start,
            created: Some(created),
            ends: ends.iter().copied().collect(),
        }
    }

    #[test]
    fn untracked_logs_may_tear_only_their_highest_fragment_and_have_no_gaps() {
        let p = plan("/l", &[(3, 100), (4, 50)], None).expect("plan");
        assert_eq!(p.read, vec![(3, Tail::End(100)), (4, Tail::MayTear)]);
        let e = plan("/l", &[(3, 100), (5, 50)], None).expect_err("gap");
        assert!(e.to_string().contains("/l/4"), "{e}");
    }

    #[test]
    fn tracked_logs_need_every_recorded_fragment() {
        let t = track(2, 4, &[(2, 10), (3, 20)]);
        let p = plan("/l", &[(1, 5), (2, 10), (3, 20), (4, 7)], Some(&t)).expect("plan");
        assert_eq!(p.leftovers, vec![1]);
        assert_eq!(
            p.read,
            vec![(2, Tail::End(10)), (3, Tail::End(20)), (4, Tail::MayTear)]
        );
        for missing in [2u64, 3, 4] {
            let listed: Vec<(u64, u64)> = [(2, 10), (3, 20), (4, 7)]
                .into_iter()
                .filter(|&(n, _)| n != missing)
                .collect();
            let e = plan("/l", &listed, Some(&t)).expect_err("missing fragment");
            assert!(e.to_string().contains(&format!("/l/{missing}")), "{e}");
        }
        let e = plan("/l", &[(2, 10), (3, 20), (4, 7), (6, 0)], Some(&t)).expect_err("stray");
        assert!(e.to_string().contains("/l/6"), "{e}");
        let e = plan("/l", &[(2, 10), (3, 20), (4, 7), (5, 100)], Some(&t)).expect_err("data");
        assert!(e.to_string().contains("/l/5"), "{e}");
        // Created but not yet recorded when the process died: at most a header.
        let p = plan("/l", &[(2, 10), (3, 20), (4, 7), (5, 24)], Some(&t)).expect("plan");
        assert_eq!(p.read.last(), Some(&(5, Tail::MayTear)));
        let t = track(2, 4, &[(2, 10)]);
        plan("/l", &[(2, 10), (3, 20), (4, 7)], Some(&t)).expect_err("no end for 3");
    }

    #[test]
    fn records_only_grow_and_purges_forget_ends() {
        let mut t = LogTrack::default();
        t.apply(&LogRecord {
            start: None,
            ends: vec![(0, 10), (1, 20)],
            created: Some(2),
        });
        t.apply(&LogRecord {
            start: Some(1),
            ends: vec![],
            created: Some(1),
        });
        assert_eq!(t, track(1, 2, &[(1, 20)]));
    }
}

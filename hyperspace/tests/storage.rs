//! Tests of `hyperspace::storage::DiskStorage` on real files.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hyperspace::storage::{DiskStorage, StorageError, StorageOptions};
use proptest::prelude::*;
use raft::prelude::{ConfState, Entry, HardState, Snapshot};
use raft::storage::MemStorage;
use raft::{Error as RaftError, GetEntriesContext, Storage, StorageError as RaftStorageError};

fn opts() -> StorageOptions {
    StorageOptions {
        segment_bytes: 64 << 20,
        sync: false,
    }
}

fn small_segments(bytes: u64) -> StorageOptions {
    StorageOptions {
        segment_bytes: bytes,
        sync: false,
    }
}

fn ent(index: u64, term: u64) -> Entry {
    Entry {
        index,
        term,
        ..Default::default()
    }
}

fn ent_data(index: u64, term: u64, len: usize) -> Entry {
    let mut e = ent(index, term);
    e.data = (0..len)
        .map(|i| (index as usize + i) as u8)
        .collect::<Vec<u8>>()
        .into();
    e
}

fn ents(lo: u64, hi: u64, term: u64) -> Vec<Entry> {
    (lo..=hi).map(|i| ent_data(i, term, 10)).collect()
}

fn hs(term: u64, vote: u64, commit: u64) -> HardState {
    HardState {
        term,
        vote,
        commit,
        ..Default::default()
    }
}

fn cs(voters: &[u64]) -> ConfState {
    ConfState {
        voters: voters.to_vec(),
        ..Default::default()
    }
}

fn snap(index: u64, term: u64, voters: &[u64], data: &[u8]) -> Snapshot {
    let mut s = Snapshot::default();
    s.mut_metadata().index = index;
    s.mut_metadata().term = term;
    s.mut_metadata().set_conf_state(cs(voters));
    s.data = data.to_vec().into();
    s
}

fn ctx() -> GetEntriesContext {
    GetEntriesContext::empty(false)
}

fn all(s: &DiskStorage) -> Vec<Entry> {
    let (lo, hi) = (s.first_index().unwrap(), s.last_index().unwrap());
    s.entries(lo, hi + 1, None, ctx()).unwrap()
}

fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().unwrap().ends_with(suffix))
        .collect();
    v.sort();
    v
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    files(dir, ".hlog")
}

/// Everything a reopen must reproduce.
fn state(s: &DiskStorage) -> (u64, u64, Vec<Entry>, HardState, ConfState, Snapshot) {
    (
        s.first_index().unwrap(),
        s.last_index().unwrap(),
        all(s),
        s.hard_state(),
        s.conf_state(),
        s.snapshot_now(),
    )
}

fn reopen(s: DiskStorage, o: StorageOptions) -> DiskStorage {
    let dir = s.dir();
    drop(s);
    DiskStorage::open(&dir, o).unwrap()
}

#[test]
fn new_storage_is_empty_and_initializes_once() {
    let d = tempfile::tempdir().unwrap();
    let s = DiskStorage::open(d.path(), opts()).unwrap();
    assert!(s.is_empty());
    assert_eq!(s.first_index(), Ok(1));
    assert_eq!(s.last_index(), Ok(0));
    assert_eq!(s.term(0), Ok(0));
    s.initialize(cs(&[1, 2, 3])).unwrap();
    assert!(!s.is_empty());
    assert!(matches!(
        s.initialize(cs(&[1])),
        Err(StorageError::NotEmpty)
    ));
    let s = reopen(s, opts());
    assert!(!s.is_empty());
    assert_eq!(s.initial_state().unwrap().conf_state, cs(&[1, 2, 3]));
    assert!(s.initial_state().unwrap().initialized());
}

#[test]
fn append_and_reopen() {
    let d = tempfile::tempdir().unwrap();
    let s = DiskStorage::open(d.path(), opts()).unwrap();
    s.initialize(cs(&[1, 2])).unwrap();
    s.persist(&ents(1, 5, 1), Some(&hs(1, 1, 3))).unwrap();
    s.persist(&ents(6, 10, 2), None).unwrap();
    s.persist(&[], Some(&hs(2, 2, 9))).unwrap();
    s.persist(&[], None).unwrap();
    let before = state(&s);
    assert_eq!(before.2.len(), 10);
    assert_eq!(s.entries_len(), 10);
    let s = reopen(s, opts());
    assert_eq!(state(&s), before);
    assert_eq!(s.hard_state(), hs(2, 2, 9));
    assert_eq!(s.term(7), Ok(2));
    assert_eq!(
        s.log_bytes(),
        segments(d.path())
            .iter()
            .map(|p| fs::metadata(p).unwrap().len())
            .sum::<u64>()
    );
}

#[test]
fn conflicting_append_replaces_suffix_and_survives_reopen() {
    let d = tempfile::tempdir().unwrap();
    let s = DiskStorage::open(d.path(), opts()).unwrap();
    s.persist(&ents(1, 10, 1), None).unwrap();
    s.persist(&ents(6, 7, 2), Some(&hs(2, 0, 5))).unwrap();
    assert_eq!(s.last_index(), Ok(7));
    assert_eq!(s.term(5), Ok(1));
    assert_eq!(s.term(6), Ok(2));
    assert_eq!(
        s.term(8),
        Err(RaftError::Store(RaftStorageError::Unavailable))
    );
    // Replace from the very first entry too.
    s.persist(&ents(8, 12, 3), None).unwrap();
    let before = state(&s);
    let s = reopen(s, opts());
    assert_eq!(state(&s), before);
    assert_eq!(s.last_index(), Ok(12));
    s.persist(&ents(1, 2, 4), None).unwrap();
    let s = reopen(s, opts());
    assert_eq!(s.last_index(), Ok(2));
    assert_eq!(all(&s), ents(1, 2, 4));
}

#[test]
fn invalid_appends_are_errors() {
    let d = tempfile::tempdir().unwrap();
    let s = DiskStorage::open(d.path(), opts()).unwrap();
    s.persist(&ents(1, 10, 1), Some(&hs(1, 0, 10))).unwrap();
    // gap
    assert!(matches!(
        s.persist(&ents(12, 13, 1), None),
        Err(StorageError::InvalidAppend(_))
    ));
    // not contiguous
    assert!(matches!(
        s.persist(&[ent(11, 1), ent(13, 1)], None),
        Err(StorageError::InvalidAppend(_))
    ));
    s.compact(5, cs(&[1]), vec![]).unwrap();
    // overwrite compacted
    assert!(matches!(
        s.persist(&ents(5, 6, 2), None),
        Err(StorageError::InvalidAppend(_))
    ));
    // compaction bounds
    assert!(matches!(
        s.compact(5, cs(&[1]), vec![]),
        Err(StorageError::InvalidCompact { .. })
    ));
    assert!(matches!(
        s.compact(11, cs(&[1]), vec![]),
        Err(StorageError::InvalidCompact { .. })
    ));
    // old snapshot
    assert!(matches!(
        s.apply_snapshot(snap(5, 1, &[1], b"")),
        Err(StorageError::SnapshotOutOfDate { .. })
    ));
    assert_eq!(all(&s), ents(6, 10, 1));
    let e: RaftError = StorageError::NotEmpty.into();
    assert!(matches!(e, RaftError::Store(RaftStorageError::Other(_))));
}

#[test]
fn compact_then_reopen() {
    let d = tempfile::tempdir().unwrap();
    let s = DiskStorage::open(d.path(), small_segments(300)).unwrap();
    s.initialize(cs(&[1, 2, 3])).unwrap();
    for i in 1..=50 {
        let term = if i > 25 { 2 } else { 1 };
        s.persist(&[ent_data(i, term, 20)], Some(&hs(term, 1, i - 1)))
            .unwrap();
    }
    let segs_before = segments(d.path());
    assert!(segs_before.len() > 5, "{} segments", segs_before.len());
    let bytes_before = s.log_bytes();
    s.compact(30, cs(&[1, 2]), b"state at 30".to_vec()).unwrap();
    assert_eq!(s.first_index(), Ok(31));
    assert_eq!(s.term(30), Ok(2));
    assert_eq!(
        s.term(29),
        Err(RaftError::Store(RaftStorageError::Compacted))
    );
    assert_eq!(
        s.entries(30, 31, None, ctx()),
        Err(RaftError::Store(RaftStorageError::Compacted))
    );
    assert_eq!(s.entries_len(), 20);
    // The conf state of the storage stays the latest one; the snapshot holds the given one.
    assert_eq!(s.conf_state(), cs(&[1, 2, 3]));
    let sn = s.snapshot(0, 2).unwrap();
    assert_eq!(sn.get_metadata().index, 30);
    assert_eq!(sn.get_metadata().term, 2);
    assert_eq!(sn.get_metadata().get_conf_state(), &cs(&[1, 2]));
    assert_eq!(&sn.data[..], b"state at 30");
    let segs_after = segments(d.path());
    assert!(segs_after.len() < segs_before.len());
    assert!(!segs_after.contains(&segs_before[0]));
    assert!(s.log_bytes() < bytes_before);
    assert_eq!(files(d.path(), ".hsnap").len(), 1);

    let before = state(&s);
    let s = reopen(s, small_segments(300));
    assert_eq!(state(&s), before);
    assert_eq!(s.first_index(), Ok(31));
    assert_eq!(s.term(30), Ok(2));
    assert_eq!(&s.snapshot_now().data[..], b"state at 30");
    assert_eq!(segments(d.path()), segs_after);

    // Compact again: the older snapshot file goes away; compact everything.
    s.compact(50, cs(&[1, 2, 3]), b"state at 50".to_vec())
        .unwrap();
    assert_eq!(s.first_index(), Ok(51));
    assert_eq!(s.last_index(), Ok(50));
    assert_eq!(
        s.hard_state().commit,
        50,
        "commit raised to the compaction index"
    );
    assert_eq!(files(d.path(), ".hsnap").len(), 1);
    assert_eq!(segments(d.path()).len(), 1);
    s.persist(&ents(51, 52, 3), None).unwrap();
    let before = state(&s);
    let s = reopen(s, small_segments(300));
    assert_eq!(state(&s), before);
    assert_eq!(s.hard_state().commit, 50);
}

#[test]
fn compaction_keeps_truncations_visible() {
    // Segment A holds 1..=40; a later segment truncates back to 10 and rewrites 10..=20.
    // Compacting at 30 keeps A (its max index 40 > 30) and replay must not resurrect 21..=40.
    let d = tempfile::tempdir().unwrap();
    let s = DiskStorage::open(d.path(), small_segments(500)).unwrap();
    s.persist(&ents(1, 40, 1), None).unwrap();
    s.persist(&ents(41, 41, 1), None).unwrap(); // rolls: segment A is full
    s.persist(&ents(10, 30, 2), Some(&hs(2, 0, 30))).unwrap();
    assert!(segments(d.path()).len() >= 2);
    s.compact(30, cs(&[1]), vec![]).unwrap();
    assert_eq!(s.last_index(), Ok(30));
    let s = reopen(s, small_segments(500));
    assert_eq!(s.first_index(), Ok(31));
    assert_eq!(s.last_index(), Ok(30));
    assert_eq!(s.term(30), Ok(2));
}

#[test]
fn apply_snapshot_then_reopen() {
    let d = tempfile::tempdir().unwrap();
    let s = DiskStorage::open(d.path(), small_segments(500)).unwrap();
    s.initialize(cs(&[1])).unwrap();
    s.persist(&ents(1, 30, 1), Some(&hs(3, 2, 8))).unwrap();
    s.persist(&ents(31, 32, 1), None).unwrap();
    // A snapshot inside the log: all entries dropped, like MemStorage.
    s.apply_snapshot(snap(20, 2, &[1, 2, 3], b"twenty"))
        .unwrap();
    assert_eq!(s.first_index(), Ok(21));
    assert_eq!(s.last_index(), Ok(20));
    assert_eq!(s.term(20), Ok(2));
    assert_eq!(s.hard_state(), hs(3, 2, 20));
    assert_eq!(s.conf_state(), cs(&[1, 2, 3]));
    assert_eq!(segments(d.path()).len(), 1);
    let before = state(&s);
    let s = reopen(s, small_segments(500));
    assert_eq!(state(&s), before);
    // Beyond the log, then more entries.
    s.apply_snapshot(snap(100, 7, &[1, 2], b"hundred")).unwrap();
    assert_eq!(s.hard_state(), hs(7, 2, 100));
    s.persist(&ents(101, 105, 7), Some(&hs(7, 2, 103))).unwrap();
    let before = state(&s);
    let s = reopen(s, small_segments(500));
    assert_eq!(state(&s), before);
    assert_eq!(&s.snapshot_now().data[..], b"hundred");
    assert_eq!(files(d.path(), ".hsnap").len(), 1);
}

#[test]
fn crash_after_snapshot_file_before_new_segment() {
    // apply_snapshot's commit point is the snapshot file: simulate a crash right after it by
    // removing the segment it created; reopen must rebuild the log start from the snapshot.
    let d = tempfile::tempdir().unwrap();
    let s = DiskStorage::open(d.path(), opts()).unwrap();
    s.persist(&ents(1, 5, 1), Some(&hs(4, 3, 5))).unwrap();
    // HEAD names a new segment only after creating it: the crash leaves it as it was.
    let head = fs::read(d.path().join("HEAD")).unwrap();
    s.apply_snapshot(snap(9, 2, &[1, 2, 3], b"nine")).unwrap();
    drop(s);
    for p in segments(d.path()) {
        fs::remove_file(p).unwrap();
    }
    fs::write(d.path().join("HEAD"), head).unwrap();
    let s = DiskStorage::open(d.path(), opts()).unwrap();
    assert_eq!(s.first_index(), Ok(10));
    assert_eq!(s.last_index(), Ok(9));
    assert_eq!(s.hard_state(), hs(4, 3, 9));
    assert_eq!(s.conf_state(), cs(&[1, 2, 3]));
    s.persist(&ents(10, 10, 4), None).unwrap();
    let s = reopen(s, opts());
    assert_eq!(s.last_index(), Ok(10));
}

#[test]
fn rolling_segments_and_reopen() {
    let d = tempfile::tempdir().unwrap();
    let s = DiskStorage::open(d.path(), small_segments(256)).unwrap();
    s.initialize(cs(&[1, 2, 3])).unwrap();
    for i in 1..=200u64 {
        s.persist(&[ent_data(i, 1 + i / 50, 30)], Some(&hs(1 + i / 50, 1, i)))
            .unwrap();
        if i % 37 == 0 {
            s.set_conf_state(cs(&[1, 2, 3, i])).unwrap();
        }
    }
    let segs = segments(d.path());
    assert!(segs.len() > 20, "{} segments", segs.len());
    assert_eq!(s.segment_count(), segs.len());
    let on_disk: u64 = segs.iter().map(|p| fs::metadata(p).unwrap().len()).sum();
    assert_eq!(s.log_bytes(), on_disk);
    let before = state(&s);
    let s = reopen(s, small_segments(256));
    assert_eq!(state(&s), before);
    assert_eq!(s.conf_state(), cs(&[1, 2, 3, 185]));
    assert_eq!(s.log_bytes(), on_disk);
    // Reopen with a larger limit: appends continue in the last segment.
    let s = reopen(s, opts());
    s.persist(&ents(201, 210, 9), None).unwrap();
    assert_eq!(segments(d.path()).len(), segs.len());
    let s = reopen(s, opts());
    assert_eq!(s.last_index(), Ok(210));
}

/// Storage with snapshot (2, 2) and entries 3..=6 of terms 3..=6, like MemStorage's tests
/// (whose entry 3 is the dummy at the snapshot position).
fn trait_fixture(d: &Path) -> DiskStorage {
    let s = DiskStorage::open(d, opts()).unwrap();
    s.apply_snapshot(snap(2, 2, &[1, 2, 3], b"x")).unwrap();
    s.persist(&[ent(3, 3), ent(4, 4), ent(5, 5), ent(6, 6)], None)
        .unwrap();
    s
}

#[test]
fn storage_trait_term() {
    let d = tempfile::tempdir().unwrap();
    let s = trait_fixture(d.path());
    assert_eq!(
        s.term(1),
        Err(RaftError::Store(RaftStorageError::Compacted))
    );
    assert_eq!(s.term(2), Ok(2));
    for i in 3..=6 {
        assert_eq!(s.term(i), Ok(i));
    }
    assert_eq!(
        s.term(7),
        Err(RaftError::Store(RaftStorageError::Unavailable))
    );
    assert_eq!(s.first_index(), Ok(3));
    assert_eq!(s.last_index(), Ok(6));
}

#[test]
fn storage_trait_entries() {
    let d = tempfile::tempdir().unwrap();
    let s = trait_fixture(d.path());
    let size = |i: u64| u64::from(protobuf::Message::compute_size(&ent(i, i)));
    let max = u64::MAX;
    let cases: Vec<(u64, u64, u64, raft::Result<Vec<Entry>>)> = vec![
        (
            2,
            6,
            max,
            Err(RaftError::Store(RaftStorageError::Compacted)),
        ),
        (3, 4, max, Ok(vec![ent(3, 3)])),
        (4, 5, max, Ok(vec![ent(4, 4)])),
        (4, 6, max, Ok(vec![ent(4, 4), ent(5, 5)])),
        (4, 7, max, Ok(vec![ent(4, 4), ent(5, 5), ent(6, 6)])),
        (4, 7, 0, Ok(vec![ent(4, 4)])),
        (4, 7, size(4) + size(5), Ok(vec![ent(4, 4), ent(5, 5)])),
        (
            4,
            7,
            size(4) + size(5) + size(6) / 2,
            Ok(vec![ent(4, 4), ent(5, 5)]),
        ),
        (
            4,
            7,
            size(4) + size(5) + size(6) - 1,
            Ok(vec![ent(4, 4), ent(5, 5)]),
        ),
        (
            4,
            7,
            size(4) + size(5) + size(6),
            Ok(vec![ent(4, 4), ent(5, 5), ent(6, 6)]),
        ),
        (7, 7, max, Ok(vec![])),
        // MemStorage panics on these; DiskStorage reports Unavailable.
        (
            4,
            8,
            max,
            Err(RaftError::Store(RaftStorageError::Unavailable)),
        ),
        (
            6,
            5,
            max,
            Err(RaftError::Store(RaftStorageError::Unavailable)),
        ),
    ];
    for (i, (lo, hi, max_size, want)) in cases.into_iter().enumerate() {
        assert_eq!(
            s.entries(lo, hi, max_size, ctx()),
            want,
            "case {i}: [{lo}, {hi}) max {max_size}"
        );
    }
    assert_eq!(s.entries(3, 7, None, ctx()).unwrap().len(), 4);
}

#[test]
fn storage_trait_snapshot() {
    let d = tempfile::tempdir().unwrap();
    let empty = DiskStorage::open(&d.path().join("empty"), opts()).unwrap();
    assert_eq!(
        empty.snapshot(0, 2),
        Err(RaftError::Store(
            RaftStorageError::SnapshotTemporarilyUnavailable
        ))
    );
    let s = trait_fixture(&d.path().join("s"));
    s.persist(&[], Some(&hs(6, 1, 5))).unwrap();
    s.compact(5, cs(&[1, 2, 3]), b"five".to_vec()).unwrap();
    let want = snap(5, 5, &[1, 2, 3], b"five");
    assert_eq!(s.snapshot(0, 2), Ok(want.clone()));
    assert_eq!(s.snapshot(5, 2), Ok(want.clone()));
    assert_eq!(s.snapshot_now(), want);
    assert_eq!(
        s.snapshot(6, 2),
        Err(RaftError::Store(
            RaftStorageError::SnapshotTemporarilyUnavailable
        ))
    );
    let st = s.initial_state().unwrap();
    assert_eq!(st.hard_state, hs(6, 1, 5));
    assert_eq!(st.conf_state, cs(&[1, 2, 3]));
}

// ---------------------------------------------------------------------------------------------
// Damage: in storage/damage.rs

#[path = "storage/damage.rs"]
mod damage;

// ---------------------------------------------------------------------------------------------
// Model test against raft's MemStorage

#[derive(Debug, Clone)]
enum Op {
    Persist {
        start: u64,
        n: u64,
        term_step: u64,
        hard_state: Option<(u64, u64, u64)>,
    },
    HardStateOnly {
        term: u64,
        vote: u64,
        commit: u64,
    },
    Compact {
        pick: u64,
        voters: Vec<u64>,
        data: Vec<u8>,
    },
    ApplySnapshot {
        ahead: u64,
        term: u64,
        voters: Vec<u64>,
        data: Vec<u8>,
    },
    SetConfState {
        voters: Vec<u64>,
    },
    Reopen,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let voters = prop::collection::vec(1u64..6, 0..4);
    prop_oneof![
        6 => (any::<u64>(), 0u64..6, 0u64..3, prop::option::of((0u64..20, 0u64..4, any::<u64>())))
            .prop_map(|(start, n, term_step, hard_state)| Op::Persist { start, n, term_step, hard_state }),
        1 => (0u64..20, 0u64..4, any::<u64>())
            .prop_map(|(term, vote, commit)| Op::HardStateOnly { term, vote, commit }),
        2 => (any::<u64>(), voters.clone(), prop::collection::vec(any::<u8>(), 0..40))
            .prop_map(|(pick, voters, data)| Op::Compact { pick, voters, data }),
        1 => (any::<u64>(), 1u64..20, voters.clone(), prop::collection::vec(any::<u8>(), 0..40))
            .prop_map(|(ahead, term, voters, data)| Op::ApplySnapshot { ahead, term, voters, data }),
        1 => voters.prop_map(|voters| Op::SetConfState { voters }),
        2 => Just(Op::Reopen),
    ]
}

fn pick(lo: u64, hi: u64, r: u64) -> u64 {
    lo + r % (hi - lo + 1)
}

struct Model {
    mem: MemStorage,
    snapshot: Snapshot,
}

impl Model {
    fn snap_index(&self) -> u64 {
        self.snapshot.get_metadata().index
    }
    fn last(&self) -> u64 {
        self.mem.last_index().unwrap()
    }
    fn hs(&self) -> HardState {
        self.mem.initial_state().unwrap().hard_state
    }
    fn cs(&self) -> ConfState {
        self.mem.initial_state().unwrap().conf_state
    }
}

fn compare(s: &DiskStorage, m: &Model, step: usize) {
    let first = m.mem.first_index().unwrap();
    let last = m.last();
    assert_eq!(s.first_index(), Ok(first), "step {step}: first_index");
    assert_eq!(s.last_index(), Ok(last), "step {step}: last_index");
    let lo_t = first.saturating_sub(2);
    for i in lo_t..=last + 1 {
        assert_eq!(s.term(i), m.mem.term(i), "step {step}: term({i})");
    }
    let ms = m.mem.initial_state().unwrap();
    let ds = s.initial_state().unwrap();
    assert_eq!(ds.hard_state, ms.hard_state, "step {step}: hard state");
    assert_eq!(ds.conf_state, ms.conf_state, "step {step}: conf state");
    assert_eq!(s.snapshot_now(), m.snapshot, "step {step}: snapshot");
    assert_eq!(s.entries_len(), last - m.snap_index());
    if first >= 1 {
        assert_eq!(
            s.entries(first - 1, last + 1, None, ctx()),
            Err(RaftError::Store(RaftStorageError::Compacted))
        );
    }
    if last < first {
        assert_eq!(s.entries(first, first, None, ctx()), Ok(vec![]));
        return;
    }
    for lo in first..=last + 1 {
        assert_eq!(
            s.entries(lo, last + 1, None, ctx()),
            m.mem.entries(lo, last + 1, None, ctx()),
            "step {step}: entries({lo}, {})",
            last + 1
        );
    }
    for hi in first..=last + 1 {
        for max in [0u64, 30, 100] {
            assert_eq!(
                s.entries(first, hi, max, ctx()),
                m.mem.entries(first, hi, max, ctx()),
                "step {step}: entries({first}, {hi}, {max})"
            );
        }
    }
}

fn run_model(ops: Vec<Op>, seg_bytes: u64) {
    let d = tempfile::tempdir().unwrap();
    let o = small_segments(seg_bytes);
    let mut s = DiskStorage::open(d.path(), o.clone()).unwrap();
    let mut m = Model {
        mem: MemStorage::new(),
        snapshot: Snapshot::default(),
    };
    for (step, op) in ops.into_iter().enumerate() {
        let first = m.mem.first_index().unwrap();
        let last = m.last();
        let snap_index = m.snap_index();
        match op {
            Op::Persist {
                start,
                n,
                term_step,
                hard_state,
            } => {
                let commit = m.hs().commit;
                let lo = first.max(commit + 1);
                let start = pick(lo, last + 1, start);
                let mut term = m.mem.term(start - 1).unwrap();
                let entries: Vec<Entry> = (start..start + n)
                    .map(|i| {
                        term += term_step;
                        ent_data(i, term, (i % 7) as usize)
                    })
                    .collect();
                let new_last = if n > 0 { start + n - 1 } else { last };
                let h = hard_state.map(|(t, v, c)| hs(t, v, pick(snap_index, new_last, c)));
                s.persist(&entries, h.as_ref()).unwrap();
                m.mem.wl().append(&entries).unwrap();
                if let Some(h) = h {
                    m.mem.wl().set_hardstate(h);
                }
            }
            Op::HardStateOnly { term, vote, commit } => {
                let h = hs(term, vote, pick(snap_index, last, commit));
                s.persist(&[], Some(&h)).unwrap();
                m.mem.wl().set_hardstate(h);
            }
            Op::Compact {
                pick: p,
                voters,
                data,
            } => {
                if last <= snap_index {
                    assert!(s.compact(last.max(1), cs(&voters), data).is_err());
                    continue;
                }
                let index = pick(snap_index + 1, last, p);
                s.compact(index, cs(&voters), data.clone()).unwrap();
                // MemStorage's own compact forgets the term of the compacted index: rebuild it
                // from a snapshot plus the remaining entries instead.
                let rest = m.mem.entries(index + 1, last + 1, None, ctx()).unwrap();
                let (mut h, c) = (m.hs(), m.cs());
                let sn = snap(index, m.mem.term(index).unwrap(), &voters, &data);
                m.mem.wl().apply_snapshot(sn.clone()).unwrap();
                m.mem.wl().append(&rest).unwrap();
                h.commit = h.commit.max(index);
                m.mem.wl().set_hardstate(h);
                m.mem.wl().set_conf_state(c);
                m.snapshot = sn;
            }
            Op::ApplySnapshot {
                ahead,
                term,
                voters,
                data,
            } => {
                let index = pick(snap_index + 1, last + 5, ahead);
                let sn = snap(index, term, &voters, &data);
                s.apply_snapshot(sn.clone()).unwrap();
                m.mem.wl().apply_snapshot(sn.clone()).unwrap();
                m.snapshot = sn;
                // Out of date now.
                assert!(s.apply_snapshot(snap(index, term, &voters, &data)).is_err());
            }
            Op::SetConfState { voters } => {
                s.set_conf_state(cs(&voters)).unwrap();
                m.mem.wl().set_conf_state(cs(&voters));
            }
            Op::Reopen => {
                drop(s);
                s = DiskStorage::open(d.path(), o.clone()).unwrap();
            }
        }
        compare(&s, &m, step);
    }
    drop(s);
    let s = DiskStorage::open(d.path(), o).unwrap();
    compare(&s, &m, usize::MAX);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn model_against_memstorage(
        ops in prop::collection::vec(op_strategy(), 1..60),
        seg_bytes in prop_oneof![Just(150u64), Just(600), Just(1 << 20)],
    ) {
        run_model(ops, seg_bytes);
    }
}

// ---------------------------------------------------------------------------------------------
// Measurements (`cargo test -p hyperspace --test storage -- --ignored --nocapture`)

#[test]
#[ignore = "measurement: run with --ignored --nocapture"]
fn measure_persist_latency_and_throughput() {
    // On the disk of the target directory, not a tmpfs.
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let o = StorageOptions {
        segment_bytes: 64 << 20,
        sync: true,
    };
    let s = DiskStorage::open(d.path(), o).unwrap();
    let n = 1000u64;
    let mut times: Vec<Duration> = Vec::with_capacity(n as usize);
    for i in 1..=n {
        let h = hs(1, 1, i - 1);
        let t = Instant::now();
        s.persist(&[ent_data(i, 1, 20)], Some(&h)).unwrap();
        times.push(t.elapsed());
    }
    times.sort();
    println!(
        "persist 1 small entry + hard state, sync: median {:?}, p10 {:?}, p90 {:?}, p99 {:?}",
        times[times.len() / 2],
        times[times.len() / 10],
        times[times.len() * 9 / 10],
        times[times.len() * 99 / 100],
    );

    let batches = 300u64;
    let mut next = n + 1;
    let t = Instant::now();
    for _ in 0..batches {
        let batch: Vec<Entry> = (next..next + 64).map(|i| ent_data(i, 1, 100)).collect();
        next += 64;
        s.persist(&batch, Some(&hs(1, 1, next - 1))).unwrap();
    }
    let el = t.elapsed();
    let entries = batches * 64;
    println!(
        "persist batches of 64 x 100-byte entries, sync: {} batches in {:?}: {:.0} entries/s, {:.2} MB/s of entry data, {:?} per batch",
        batches,
        el,
        entries as f64 / el.as_secs_f64(),
        (entries * 100) as f64 / el.as_secs_f64() / 1e6,
        el / batches as u32,
    );

    let s2 = DiskStorage::open(
        &d.path().join("nosync"),
        StorageOptions {
            segment_bytes: 64 << 20,
            sync: false,
        },
    )
    .unwrap();
    let t = Instant::now();
    let mut next = 1;
    for _ in 0..batches {
        let batch: Vec<Entry> = (next..next + 64).map(|i| ent_data(i, 1, 100)).collect();
        next += 64;
        s2.persist(&batch, None).unwrap();
    }
    let el = t.elapsed();
    println!(
        "same without sync: {:.0} entries/s",
        (batches * 64) as f64 / el.as_secs_f64()
    );
    drop(s);
    let t = Instant::now();
    let s = DiskStorage::open(d.path(), StorageOptions::default()).unwrap();
    println!(
        "reopen of {} entries ({} bytes of log): {:?}",
        s.entries_len(),
        s.log_bytes(),
        t.elapsed()
    );
}

//! Corruption tests of a Hyperspace replica's Raft storage (issue 12,
//! docs/formats/hyperspace-log.md): every byte of every log segment, the snapshot file and
//! `HEAD` flipped, each truncated at every record boundary and elsewhere, each deleted. Reopening
//! must give exactly the original state (log, hard state, conf state, snapshot and the state
//! machine they rebuild) or an error naming the file. The one exception is the crash shape the
//! format repairs: a truncation of the newest segment, which must give exactly the state after
//! the last write that the truncation left whole, as a crash in the next write would have.

#[path = "../../testsupport/corrupt.rs"]
mod corrupt;

use std::path::{Path, PathBuf};

use corrupt::{Damage, Plan};
use hyperspace::command::{AttrSet, Command, Mkdir, Op, Target};
use hyperspace::state::{Limits, StateMachine};
use hyperspace::storage::{DiskStorage, StorageOptions};
use prost::Message;
use raft::Storage;
use raft::prelude::{ConfState, Entry, HardState};

fn opts() -> StorageOptions {
    StorageOptions {
        segment_bytes: 400,
        sync: false,
    }
}

/// Everything a replica's storage holds, and the state machine it rebuilds: the snapshot's
/// state with the committed entries after it applied.
#[derive(Debug, Clone, PartialEq)]
struct HsState {
    hard_state: HardState,
    conf_state: ConfState,
    snapshot_index: u64,
    snapshot_term: u64,
    snapshot_conf_state: ConfState,
    snapshot_data: Vec<u8>,
    entries: Vec<Entry>,
    machine: StateMachine,
}

fn state_of(s: &DiskStorage) -> Result<HsState, String> {
    let snap = s.snapshot_now();
    let meta = snap.get_metadata();
    let (lo, hi) = (
        s.first_index().map_err(|e| e.to_string())?,
        s.last_index().map_err(|e| e.to_string())?,
    );
    let entries = s
        .entries(lo, hi + 1, None, raft::GetEntriesContext::empty(false))
        .map_err(|e| e.to_string())?;
    let mut machine = if meta.index > 0 {
        StateMachine::restore(&snap.data, Limits::default()).map_err(|e| e.to_string())?
    } else {
        StateMachine::new(Limits::default())
    };
    let hard_state = s.hard_state();
    for e in entries.iter().filter(|e| e.index <= hard_state.commit) {
        if !e.data.is_empty() {
            let cmd = Command::decode(&e.data[..]).map_err(|e| e.to_string())?;
            machine.apply(&cmd);
        }
    }
    Ok(HsState {
        hard_state,
        conf_state: s.conf_state(),
        snapshot_index: meta.index,
        snapshot_term: meta.term,
        snapshot_conf_state: meta.get_conf_state().clone(),
        snapshot_data: snap.data.to_vec(),
        entries,
        machine,
    })
}

fn open_state(dir: &Path) -> Result<HsState, String> {
    let s = DiskStorage::open(dir, opts()).map_err(|e| e.to_string())?;
    state_of(&s)
}

fn command(i: u64) -> Command {
    let op = if i.is_multiple_of(3) {
        Op::AttrSet(AttrSet {
            target: Some(Target {
                handle: 0,
                path: format!("/d{}", i - 1),
            }),
            name: format!("a{i}"),
            value: vec![i as u8; 5],
        })
    } else {
        Op::Mkdir(Mkdir {
            path: format!("/d{i}"),
            parents: false,
        })
    };
    Command {
        session: 0,
        seq: 0,
        first_incomplete: 0,
        op: Some(op),
    }
}

fn entry(index: u64, term: u64, cmd: &Command) -> Entry {
    Entry {
        index,
        term,
        data: cmd.encode_to_vec().into(),
        ..Default::default()
    }
}

fn hs(term: u64, commit: u64) -> HardState {
    HardState {
        term,
        vote: 1,
        commit,
        ..Default::default()
    }
}

fn voters(v: &[u64]) -> ConfState {
    ConfState {
        voters: v.to_vec(),
        ..Default::default()
    }
}

/// The state after one write, and where the log ended then.
#[derive(Debug, Clone)]
struct Capture {
    state: HsState,
    segment: PathBuf,
    segment_len: u64,
}

fn newest_segment(dir: &Path) -> PathBuf {
    let mut segs: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "hlog"))
        .collect();
    segs.sort();
    segs.pop().expect("a segment")
}

fn capture(s: &DiskStorage, dir: &Path, out: &mut Vec<Capture>) {
    let segment = newest_segment(dir);
    let segment_len = std::fs::metadata(&segment).expect("stat").len();
    out.push(Capture {
        state: state_of(s).expect("state"),
        segment,
        segment_len,
    });
}

/// A replica's storage over several segments, with a compaction (a snapshot holding the state
/// machine), a conf state change and a conflicting suffix replaced; the state after every write.
fn build(dir: &Path) -> Vec<Capture> {
    let s = DiskStorage::open(dir, opts()).expect("open");
    let mut caps = Vec::new();
    s.initialize(voters(&[1])).expect("initialize");
    capture(&s, dir, &mut caps);
    let mut machine = StateMachine::new(Limits::default());
    for i in 1..=14u64 {
        let cmd = command(i);
        let commit = i.saturating_sub(2);
        s.persist(&[entry(i, 1, &cmd)], Some(&hs(1, commit)))
            .expect("persist");
        capture(&s, dir, &mut caps);
        if i == 8 {
            for j in 1..=6 {
                machine.apply(&command(j));
            }
            s.compact(6, voters(&[1]), machine.snapshot())
                .expect("compact");
            capture(&s, dir, &mut caps);
        }
        if i == 10 {
            s.set_conf_state(voters(&[1, 2])).expect("conf state");
            capture(&s, dir, &mut caps);
        }
    }
    // A new leader replaces the uncommitted 13..=14.
    s.persist(
        &[entry(13, 2, &command(113)), entry(14, 2, &command(114))],
        Some(&hs(2, 13)),
    )
    .expect("persist");
    capture(&s, dir, &mut caps);
    // A hard state alone.
    s.persist(&[], Some(&hs(2, 14))).expect("persist");
    capture(&s, dir, &mut caps);
    caps
}

/// Record boundaries of a segment: after the 24-byte header, each record is
/// `len u32, crc u32, type u8, payload`.
fn record_boundaries(bytes: &[u8]) -> Vec<u64> {
    let mut out = vec![24u64];
    let mut off = 24usize;
    while off + 9 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[off..off + 4].try_into().expect("4 bytes")) as usize;
        off += 9 + len;
        out.push(off as u64);
    }
    out
}

#[test]
fn every_damage_of_hyperspace_storage_is_the_original_state_or_an_error_naming_the_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pristine = tmp.path().join("pristine");
    let caps = build(&pristine);
    let last = caps.last().expect("captures").clone();
    assert_eq!(last.state.snapshot_index, 6, "the fixture holds a snapshot");
    assert_eq!(open_state(&pristine).as_ref(), Ok(&last.state));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&pristine)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let segments = files
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "hlog"))
        .count();
    assert!(segments >= 3, "{files:?}: want several live segments");
    assert!(
        files
            .iter()
            .any(|p| p.extension().is_some_and(|x| x == "hsnap"))
    );
    let mut total = 0usize;
    for path in &files {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a name")
            .to_string();
        let bytes = std::fs::read(path).expect("read");
        let len = bytes.len() as u64;
        let is_newest = *path == last.segment;
        let boundaries = if name.ends_with(".hlog") {
            record_boundaries(&bytes)
        } else {
            Vec::new()
        };
        let plan = Plan::new()
            .flip_every_byte(len)
            .truncate_at(len, &boundaries, 6)
            .delete();
        let expected = |damage: Damage| match damage {
            // The crash shape: the state after the last write the cut left whole.
            Damage::Truncate { len } if is_newest => caps
                .iter()
                .rev()
                .find(|c| c.segment != last.segment || c.segment_len <= len)
                .map(|c| &c.state)
                .expect("a capture before the newest segment"),
            _ => &last.state,
        };
        let report = corrupt::run_expecting(
            &format!("hyperspace {name}"),
            &pristine,
            Path::new(&name),
            &expected,
            &plan,
            open_state,
            |_, msg| {
                if msg.contains(&name) || msg.contains("missing") && msg.contains(".h") {
                    Ok(())
                } else {
                    Err(format!("the error does not name {name}"))
                }
            },
        );
        total += report.identical + report.errors;
    }
    assert!(total > 1000, "{total} damages");
}

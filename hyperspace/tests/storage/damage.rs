//! Damaged storage files: torn tails cut at every offset, flipped bytes, deleted or truncated
//! segments and snapshots, each an error naming the file (and offset) or an exact recovery.

use super::*;

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// 20 single-entry records; returns the segment path and the offsets where records 19 and 20 start.
fn twenty_records(dir: &Path) -> (PathBuf, u64, u64) {
    let s = DiskStorage::open(dir, opts()).unwrap();
    let mut starts = Vec::new();
    for i in 1..=20 {
        starts.push(s.log_bytes());
        s.persist(&[ent_data(i, 1, 17)], Some(&hs(1, 1, i)))
            .unwrap();
    }
    drop(s);
    let segs = segments(dir);
    assert_eq!(segs.len(), 1);
    (segs[0].clone(), starts[18], starts[19])
}

#[test]
fn torn_tail_is_cut_at_every_offset() {
    let d = tempfile::tempdir().unwrap();
    let orig = d.path().join("orig");
    let (seg, _, last_start) = twenty_records(&orig);
    let full = fs::metadata(&seg).unwrap().len();
    let name = seg.file_name().unwrap();
    for cut in last_start..full {
        let dir = d.path().join(format!("cut{cut}"));
        copy_dir(&orig, &dir);
        let f = fs::OpenOptions::new()
            .write(true)
            .open(dir.join(name))
            .unwrap();
        f.set_len(cut).unwrap();
        drop(f);
        let s = DiskStorage::open(&dir, opts()).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_eq!(s.last_index(), Ok(19), "cut at {cut}");
        assert_eq!(s.hard_state(), hs(1, 1, 19));
        assert_eq!(
            fs::metadata(dir.join(name)).unwrap().len(),
            last_start,
            "truncated on disk"
        );
        // Appending after the cut works and survives.
        s.persist(&[ent(20, 2)], None).unwrap();
        let s = reopen(s, opts());
        assert_eq!(s.term(20), Ok(2));
        fs::remove_dir_all(&dir).unwrap();
    }
}

/// Regression (issue 12): a whole last record failing its checksum was cut off as "torn",
/// silently dropping an acknowledged (synced) write. Only a cut-short record or a zero-filled
/// tail is a crash shape; a flip anywhere in the last record is corruption naming file and
/// offset.
#[test]
fn a_flipped_byte_in_the_last_record_is_corrupt_not_a_torn_tail() {
    let d = tempfile::tempdir().unwrap();
    let orig = d.path().join("orig");
    let (seg, _, last_start) = twenty_records(&orig);
    let full = fs::metadata(&seg).unwrap().len();
    let name = seg.file_name().unwrap();
    for at in last_start..full {
        let dir = d.path().join(format!("flip{at}"));
        copy_dir(&orig, &dir);
        let mut bytes = fs::read(dir.join(name)).unwrap();
        bytes[at as usize] ^= 0x40;
        fs::write(dir.join(name), &bytes).unwrap();
        match DiskStorage::open(&dir, opts()) {
            Err(StorageError::Corrupt { path, offset, .. }) => {
                assert_eq!(path, dir.join(name), "flip at {at}");
                assert_eq!(offset, last_start, "flip at {at}");
            }
            other => panic!("flip at {at}: expected Corrupt, got {other:?}"),
        }
        assert_eq!(fs::metadata(dir.join(name)).unwrap().len(), full, "not cut");
        fs::remove_dir_all(&dir).unwrap();
    }
    // A file length that reached the disk before its data: zeroes after the last record, or
    // in place of it.
    let dir = d.path().join("zeroes");
    copy_dir(&orig, &dir);
    let mut bytes = fs::read(dir.join(name)).unwrap();
    bytes.extend_from_slice(&[0u8; 4096]);
    fs::write(dir.join(name), &bytes).unwrap();
    let s = DiskStorage::open(&dir, opts()).unwrap();
    assert_eq!(s.last_index(), Ok(20));
    assert_eq!(fs::metadata(dir.join(name)).unwrap().len(), full);
    drop(s);
    let dir = d.path().join("zeroed");
    copy_dir(&orig, &dir);
    let mut bytes = fs::read(dir.join(name)).unwrap();
    bytes[last_start as usize..].fill(0);
    fs::write(dir.join(name), &bytes).unwrap();
    let s = DiskStorage::open(&dir, opts()).unwrap();
    assert_eq!(s.last_index(), Ok(19));
    assert_eq!(fs::metadata(dir.join(name)).unwrap().len(), last_start);
}

/// Regression (issue 12): deleting the newest segment (or the only one) opened a shorter log
/// (or an empty replica) with success; deleting the snapshot could too. `HEAD` names both.
#[test]
fn a_deleted_newest_segment_or_snapshot_is_an_error_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let orig = d.path().join("orig");
    let s = DiskStorage::open(&orig, small_segments(200)).unwrap();
    for i in 1..=30 {
        s.persist(&[ent_data(i, 1, 20)], Some(&hs(1, 1, i)))
            .unwrap();
    }
    s.compact(12, cs(&[1]), b"twelve".to_vec()).unwrap();
    drop(s);
    let segs = segments(&orig);
    assert!(segs.len() >= 3);
    let snaps = files(&orig, ".hsnap");
    assert_eq!(snaps.len(), 1);
    for victim in [segs.last().unwrap(), &snaps[0]] {
        let name = victim.file_name().unwrap();
        let dir = d.path().join(format!("del-{}", name.to_str().unwrap()));
        copy_dir(&orig, &dir);
        fs::remove_file(dir.join(name)).unwrap();
        match DiskStorage::open(&dir, opts()) {
            Err(StorageError::Corrupt { path, .. }) => assert_eq!(path, dir.join(name)),
            other => panic!("{name:?} deleted: expected Corrupt, got {other:?}"),
        }
    }
    // The only segment of a new replica.
    let dir = d.path().join("only");
    let s = DiskStorage::open(&dir, opts()).unwrap();
    s.initialize(cs(&[1])).unwrap();
    s.persist(&ents(1, 3, 1), Some(&hs(1, 1, 3))).unwrap();
    drop(s);
    let only = segments(&dir);
    assert_eq!(only.len(), 1);
    fs::remove_file(&only[0]).unwrap();
    match DiskStorage::open(&dir, opts()) {
        Err(StorageError::Corrupt { path, .. }) => assert_eq!(path, only[0]),
        other => panic!("only segment deleted: expected Corrupt, got {other:?}"),
    }
    // HEAD alone lost: nothing is missing, and it is written again.
    let dir = d.path().join("head");
    copy_dir(&orig, &dir);
    fs::remove_file(dir.join("HEAD")).unwrap();
    let s = DiskStorage::open(&dir, opts()).unwrap();
    assert_eq!(s.last_index(), Ok(30));
    assert!(dir.join("HEAD").exists());
}

/// Regression (issue 12): an earlier segment cut at a record boundary lost its last entries
/// silently when the next segment held no entries to show the gap (or replaced them with a
/// conflicting suffix). Every `State` record now says where the log ended when it was written.
#[test]
fn an_earlier_segment_cut_at_a_record_boundary_is_an_error_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let orig = d.path().join("orig");
    // One segment per write.
    let s = DiskStorage::open(&orig, small_segments(1)).unwrap();
    for i in 1..=8 {
        s.persist(&[ent_data(i, 1, 20)], Some(&hs(1, 1, i - 1)))
            .unwrap();
    }
    // Entries 7..=8 replaced, then a segment with only a hard state.
    s.persist(
        &[ent_data(7, 2, 20), ent_data(8, 2, 20)],
        Some(&hs(2, 1, 6)),
    )
    .unwrap();
    s.persist(&[], Some(&hs(2, 1, 6))).unwrap();
    drop(s);
    let segs = segments(&orig);
    let victim = &segs[segs.len() - 2];
    let cut_at = fs::metadata(victim).unwrap().len();
    let name = victim.file_name().unwrap();
    // Cut the replacing record off: entries 7..=8 would come back with term 1.
    let bytes = fs::read(victim).unwrap();
    let mut off = 24usize;
    let mut last_start = off;
    while off < bytes.len() {
        last_start = off;
        off += 9 + u32::from_le_bytes(bytes[off..off + 4].try_into().unwrap()) as usize;
    }
    assert_eq!(off as u64, cut_at);
    let dir = d.path().join("cut");
    copy_dir(&orig, &dir);
    let f = fs::OpenOptions::new()
        .write(true)
        .open(dir.join(name))
        .unwrap();
    f.set_len(last_start as u64).unwrap();
    drop(f);
    match DiskStorage::open(&dir, opts()) {
        Err(StorageError::Corrupt { path, what, .. }) => {
            assert_eq!(path, dir.join(name), "{what}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn damage_before_the_tail_is_an_error_naming_file_and_offset() {
    let d = tempfile::tempdir().unwrap();
    let orig = d.path().join("orig");
    let (seg, rec19, rec20) = twenty_records(&orig);
    let name = seg.file_name().unwrap();
    for at in [rec19, rec19 + 3, rec19 + 8, rec19 + 12, rec20 - 1] {
        let dir = d.path().join(format!("flip{at}"));
        copy_dir(&orig, &dir);
        let mut bytes = fs::read(dir.join(name)).unwrap();
        bytes[at as usize] ^= 0x01;
        fs::write(dir.join(name), &bytes).unwrap();
        match DiskStorage::open(&dir, opts()) {
            Err(StorageError::Corrupt { path, offset, .. }) => {
                assert_eq!(path, dir.join(name));
                assert_eq!(offset, rec19, "flip at {at}");
            }
            other => panic!("flip at {at}: expected Corrupt, got {other:?}"),
        }
        let msg = DiskStorage::open(&dir, opts()).unwrap_err().to_string();
        assert!(
            msg.contains(&format!("offset {rec19}")) && msg.contains(".hlog"),
            "{msg}"
        );
    }
    // The segment header.
    let dir = d.path().join("header");
    copy_dir(&orig, &dir);
    let mut bytes = fs::read(dir.join(name)).unwrap();
    bytes[9] ^= 0x01;
    fs::write(dir.join(name), &bytes).unwrap();
    assert!(matches!(
        DiskStorage::open(&dir, opts()),
        Err(StorageError::Corrupt { offset: 0, .. })
    ));
}

#[test]
fn damaged_tail_of_an_earlier_segment_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let s = DiskStorage::open(d.path(), small_segments(200)).unwrap();
    for i in 1..=30 {
        s.persist(&[ent_data(i, 1, 20)], None).unwrap();
    }
    drop(s);
    let segs = segments(d.path());
    assert!(segs.len() > 2);
    let first = &segs[0];
    let len = fs::metadata(first).unwrap().len();
    let f = fs::OpenOptions::new().write(true).open(first).unwrap();
    f.set_len(len - 3).unwrap();
    drop(f);
    match DiskStorage::open(d.path(), small_segments(200)) {
        Err(StorageError::Corrupt { path, .. }) => assert_eq!(&path, first),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // A missing segment in the middle is an error too.
    let d2 = tempfile::tempdir().unwrap();
    let s = DiskStorage::open(d2.path(), small_segments(200)).unwrap();
    for i in 1..=30 {
        s.persist(&[ent_data(i, 1, 20)], None).unwrap();
    }
    drop(s);
    fs::remove_file(&segments(d2.path())[1]).unwrap();
    assert!(matches!(
        DiskStorage::open(d2.path(), small_segments(200)),
        Err(StorageError::Corrupt { .. })
    ));
}

#[test]
fn corrupt_snapshot_file_is_an_error() {
    // No fallback to an older snapshot: the log before the latest one may already be gone.
    let d = tempfile::tempdir().unwrap();
    let s = DiskStorage::open(d.path(), opts()).unwrap();
    s.persist(&ents(1, 10, 1), Some(&hs(1, 0, 10))).unwrap();
    s.compact(8, cs(&[1]), vec![7; 100]).unwrap();
    drop(s);
    let snaps = files(d.path(), ".hsnap");
    assert_eq!(snaps.len(), 1);
    let orig = fs::read(&snaps[0]).unwrap();
    for at in [0usize, 10, 53, 60, orig.len() - 50, orig.len() - 1] {
        let mut bytes = orig.clone();
        bytes[at] ^= 0x10;
        fs::write(&snaps[0], &bytes).unwrap();
        match DiskStorage::open(d.path(), opts()) {
            Err(StorageError::Corrupt { path, .. }) => assert_eq!(path, snaps[0]),
            other => panic!("flip at {at}: expected Corrupt, got {other:?}"),
        }
    }
    fs::write(&snaps[0], &orig[..orig.len() - 1]).unwrap();
    assert!(DiskStorage::open(d.path(), opts()).is_err());
    fs::write(&snaps[0], &orig).unwrap();
    let s = DiskStorage::open(d.path(), opts()).unwrap();
    assert_eq!(s.first_index(), Ok(9));
    assert_eq!(&s.snapshot_now().data[..], &[7; 100][..]);
}

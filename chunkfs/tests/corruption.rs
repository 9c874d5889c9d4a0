//! Corruption tests of chunkfs's files (issue 12, docs/formats/chunkfs.md): the metadata
//! server's checkpoint and op log, and a chunk server's chunk files. Each byte is flipped (chunk
//! data: a seeded sample), each file truncated at every record or piece boundary and elsewhere,
//! and deleted; reopening must give exactly the original namespace or chunk bytes, or an error
//! naming the file (a damaged chunk piece: a checksum error naming the chunk). The one crash
//! shape repaired is a cut at the end of the op log, which must give exactly the namespace of
//! the ops the cut left whole.

#[path = "../../testsupport/corrupt.rs"]
mod corrupt;

use std::path::Path;

use chunkfs::Layout;
use chunkfs::chunk::store::ChunkStore;
use chunkfs::meta::namespace::{BlockMeta, Namespace, Op};
use chunkfs::meta::oplog::{Checkpoint, OpLog, encode_record};
use corrupt::{Damage, Plan};

fn fresh() -> Checkpoint {
    Checkpoint {
        flavour: "hdfs-like".into(),
        layout: Layout::Replicated { replicas: 3 },
        block_bytes: 1 << 20,
        namespace: Namespace::new(),
    }
}

/// The whole persisted state of a metadata server, as JSON (the namespace has no `PartialEq`).
fn state(cp: &Checkpoint) -> serde_json::Value {
    serde_json::to_value(cp).expect("a checkpoint serializes")
}

fn open_meta(dir: &Path) -> Result<serde_json::Value, String> {
    let (_log, cp) = OpLog::open(dir, fresh).map_err(|e| e.to_string())?;
    Ok(state(&cp))
}

fn block(id: u64, chunk: u64) -> BlockMeta {
    BlockMeta {
        id,
        len: 0,
        layout: Layout::Replicated { replicas: 3 },
        chunks: vec![chunk],
        complete: false,
    }
}

/// Ops of a small working namespace: directories, files with blocks and lengths, a rename, a
/// remove.
fn ops(base: u64) -> Vec<Op> {
    let f = base + 10;
    vec![
        Op::Mkdirs {
            path: format!("/d{base}/e"),
        },
        Op::Create {
            path: format!("/d{base}/e/f"),
            file_id: f,
            overwrite: false,
        },
        Op::AddBlock {
            file_id: f,
            block: block(f + 1, f + 2),
        },
        Op::SetLength {
            file_id: f,
            block_id: f + 1,
            len: 4096,
            complete: true,
        },
        Op::Close { file_id: f },
        Op::Create {
            path: format!("/d{base}/g"),
            file_id: f + 3,
            overwrite: false,
        },
        Op::Close { file_id: f + 3 },
        Op::Rename {
            from: format!("/d{base}/g"),
            to: format!("/d{base}/h"),
        },
        Op::Remove {
            path: format!("/d{base}/h"),
        },
    ]
}

#[test]
fn every_damage_of_the_checkpoint_and_op_log_is_the_namespace_or_an_error_naming_the_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pristine = tmp.path().join("pristine");
    let (mut log, mut cp) = OpLog::open(&pristine, fresh).expect("format");
    for op in ops(1) {
        cp.namespace.apply(&op).expect("op");
        log.append(&op, true).expect("append");
    }
    log.checkpoint(&cp).expect("checkpoint");
    // The namespace after each op of the live log, with the log's length then.
    let log_path = pristine.join("oplog.1");
    let mut after = vec![(0u64, state(&cp))];
    for op in ops(100) {
        cp.namespace.apply(&op).expect("op");
        log.append(&op, true).expect("append");
        let len = std::fs::metadata(&log_path).expect("stat").len();
        after.push((len, state(&cp)));
    }
    drop(log);
    let last = after.last().expect("states").1.clone();
    let mut names: Vec<String> = std::fs::read_dir(&pristine)
        .expect("list")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    names.sort();
    assert_eq!(names, ["checkpoint.1", "oplog.1"]);
    let mut total = 0;
    for name in &names {
        let bytes = std::fs::read(pristine.join(name)).expect("read");
        let len = bytes.len() as u64;
        let boundaries: Vec<u64> = if name.starts_with("oplog") {
            after.iter().map(|(l, _)| *l).collect()
        } else {
            vec![28]
        };
        let plan = Plan::new()
            .flip_every_byte(len)
            .truncate_at(len, &boundaries, 6)
            .delete();
        let is_log = name.starts_with("oplog");
        let expected = |d: Damage| match d {
            Damage::Truncate { len } if is_log => {
                &after
                    .iter()
                    .rev()
                    .find(|(l, _)| *l <= len)
                    .expect("the state at the checkpoint")
                    .1
            }
            _ => &last,
        };
        let r = corrupt::run_expecting(
            &format!("chunkfs meta {name}"),
            &pristine,
            Path::new(name),
            &expected,
            &plan,
            open_meta,
            |_, msg| {
                if msg.contains(name.as_str()) {
                    Ok(())
                } else {
                    Err(format!("the error does not name {name}"))
                }
            },
        );
        total += r.errors;
    }
    assert!(total > 500, "{total} errors");
}

/// Regression (issue 12): a damaged record in the middle of the op log ended replay there and
/// the log was cut, dropping every later namespace change with success.
#[test]
fn a_damaged_op_log_record_before_the_end_is_an_error_not_a_cut() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let (mut log, mut cp) = OpLog::open(dir, fresh).expect("format");
    let mut first_len = 0;
    for (i, op) in ops(1).into_iter().enumerate() {
        cp.namespace.apply(&op).expect("op");
        log.append(&op, true).expect("append");
        if i == 0 {
            first_len = encode_record(&op).len();
        }
    }
    drop(log);
    let path = dir.join("oplog.0");
    let mut bytes = std::fs::read(&path).expect("read");
    let len = bytes.len();
    bytes[first_len + 12] ^= 0x20;
    std::fs::write(&path, &bytes).expect("write");
    let e = OpLog::open(dir, fresh).expect_err("a damaged record must fail the open");
    let msg = e.to_string();
    assert!(
        msg.contains("oplog.0") && msg.contains(&format!("offset {first_len}")),
        "{msg}"
    );
    assert_eq!(
        std::fs::metadata(&path).expect("stat").len() as usize,
        len,
        "not cut"
    );
}

/// Regression (issue 12): a damaged newest checkpoint was skipped for an older one, and a
/// deleted op log opened as an empty one; both lose namespace changes.
#[test]
fn a_damaged_checkpoint_or_a_missing_op_log_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("m");
    let (mut log, mut cp) = OpLog::open(&dir, fresh).expect("format");
    for op in ops(1) {
        cp.namespace.apply(&op).expect("op");
        log.append(&op, true).expect("append");
    }
    log.checkpoint(&cp).expect("checkpoint");
    for op in ops(2) {
        cp.namespace.apply(&op).expect("op");
        log.append(&op, true).expect("append");
    }
    drop(log);
    // The moment inside a checkpoint when the old pair still exists, with the new one damaged.
    let d2 = tmp.path().join("d2");
    corrupt::copy_dir(&dir, &d2).expect("copy");
    std::fs::write(d2.join("oplog.0"), b"").expect("old log");
    std::fs::write(
        d2.join("checkpoint.0"),
        std::fs::read(dir.join("checkpoint.1")).expect("read"),
    )
    .expect("old checkpoint");
    let mut bytes = std::fs::read(d2.join("checkpoint.1")).expect("read");
    let n = bytes.len();
    bytes[n - 3] ^= 1;
    std::fs::write(d2.join("checkpoint.1"), bytes).expect("write");
    let msg = OpLog::open(&d2, fresh).expect_err("damaged").to_string();
    assert!(msg.contains("checkpoint.1"), "{msg}");
    // The log deleted.
    let d3 = tmp.path().join("d3");
    corrupt::copy_dir(&dir, &d3).expect("copy");
    std::fs::remove_file(d3.join("oplog.1")).expect("rm");
    let msg = OpLog::open(&d3, fresh)
        .expect_err("missing log")
        .to_string();
    assert!(msg.contains("oplog.1"), "{msg}");
    // The checkpoint deleted.
    let d4 = tmp.path().join("d4");
    corrupt::copy_dir(&dir, &d4).expect("copy");
    std::fs::remove_file(d4.join("checkpoint.1")).expect("rm");
    let msg = OpLog::open(&d4, fresh)
        .expect_err("missing checkpoint")
        .to_string();
    assert!(msg.contains("checkpoint.1"), "{msg}");
}

// ---------------------------------------------------------------------------------------------
// Chunk files

const CHUNK: u64 = 77;

fn chunk_bytes() -> Vec<u8> {
    (0..200_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect()
}

fn read_chunk(dir: &Path, len: usize) -> Result<Vec<u8>, String> {
    let store = ChunkStore::open(dir, 16 << 20).map_err(|e| e.message)?;
    store.read(CHUNK, 0, len).map_err(|e| e.message)
}

#[test]
fn every_damage_of_a_chunk_file_is_its_bytes_or_an_error_naming_the_chunk() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pristine = tmp.path().join("pristine");
    let data = chunk_bytes();
    {
        let store = ChunkStore::open(&pristine, 16 << 20).expect("open");
        store
            .write(CHUNK, 0, &data[..1000], true, false)
            .expect("w");
        store
            .write(CHUNK, 1000, &data[1000..150_000], false, false)
            .expect("w");
        store
            .write(CHUNK, 150_000, &data[150_000..], false, true)
            .expect("w");
        assert_eq!(
            store.finalize(CHUNK, data.len() as u64).expect("fin"),
            200_000
        );
    }
    let piece = chunkfs::PIECE_BYTES as u64;
    let pieces: Vec<u64> = (1..4).map(|i| i * piece).collect();
    let also: Vec<u64> = pieces
        .iter()
        .flat_map(|&p| [p - 1, p])
        .chain([0, data.len() as u64 - 1])
        .collect();
    let mut total = 0;
    for name in [format!("{CHUNK}.data"), format!("{CHUNK}.sum")] {
        let len = std::fs::metadata(pristine.join(&name)).expect("stat").len();
        let is_data = name.ends_with(".data");
        let plan = if is_data {
            Plan::new().flip_sample(len, 300, &also)
        } else {
            Plan::new().flip_every_byte(len)
        };
        let sum_bounds: Vec<u64> = (0..=4).map(|i| 32 + 4 * i).collect();
        let plan = plan
            .truncate_at(len, if is_data { &pieces } else { &sum_bounds }, 6)
            .delete();
        let r = corrupt::run_with(
            &format!("chunk file {name}"),
            &pristine,
            Path::new(&name),
            &data,
            &plan,
            |dir| read_chunk(dir, data.len()),
            |damage, msg| {
                if !msg.contains(&format!("chunk {CHUNK}")) && !msg.contains(&name) {
                    return Err(format!("the error names neither chunk {CHUNK} nor {name}"));
                }
                // A flipped data byte is found by its piece's checksum, not by losing the piece.
                if is_data
                    && matches!(damage, Damage::Flip { .. })
                    && !msg.contains("checksum mismatch")
                {
                    return Err("a flipped data byte is not a checksum error".into());
                }
                Ok(())
            },
        );
        total += r.errors;
    }
    assert!(total > 300, "{total} errors");
}

/// Regression (issue 12): at load, a last piece failing its checksum with no prefix matching it
/// (a flipped byte, not a torn append) was cut off the data file, destroying up to 64 KiB of a
/// possibly only replica; now it is kept and reads of it fail with a checksum error.
#[test]
fn a_flipped_byte_in_the_last_piece_is_not_cut_off_at_load() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let data = chunk_bytes();
    {
        let store = ChunkStore::open(dir, 16 << 20).expect("open");
        store.write(CHUNK, 0, &data, true, true).expect("w");
        store.finalize(CHUNK, data.len() as u64).expect("fin");
    }
    let path = ChunkStore::chunk_data_path(dir, CHUNK);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[199_000] ^= 0x04;
    std::fs::write(&path, &bytes).expect("write");
    let store = ChunkStore::open(dir, 16 << 20).expect("open");
    assert_eq!(std::fs::metadata(&path).expect("stat").len(), 200_000);
    assert_eq!(store.length(CHUNK).expect("len"), 200_000);
    let e = store.read(CHUNK, 198_000, 2000).expect_err("damaged piece");
    assert!(
        e.message.contains("checksum mismatch in piece 3"),
        "{}",
        e.message
    );
    assert_eq!(store.read(CHUNK, 0, 1000).expect("piece 0"), &data[..1000]);
}

/// Regression (issue 12): a chunk whose checksum header failed to verify was dropped and its
/// files deleted; they are now kept (the chunk is not served).
#[test]
fn an_unreadable_checksum_header_keeps_the_chunk_files() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    {
        let store = ChunkStore::open(dir, 16 << 20).expect("open");
        store.write(CHUNK, 0, b"precious", true, true).expect("w");
        store.finalize(CHUNK, 8).expect("fin");
    }
    let sum = dir.join(format!("{CHUNK}.sum"));
    let mut bytes = std::fs::read(&sum).expect("read");
    bytes[17] ^= 0x01;
    std::fs::write(&sum, &bytes).expect("write");
    let store = ChunkStore::open(dir, 16 << 20).expect("open");
    let e = store.read(CHUNK, 0, 8).expect_err("not served");
    assert!(
        e.message.contains(&format!("chunk {CHUNK}")),
        "{}",
        e.message
    );
    assert!(
        ChunkStore::chunk_data_path(dir, CHUNK).exists(),
        "data kept"
    );
    assert!(sum.exists(), "checksums kept");
}

/// Through the client: a flipped byte in one replica's chunk file is found by the piece
/// checksum and the read fails over to the other replica (exact bytes); with one replica the
/// read fails, naming the chunk and the damaged piece, and never returns other bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_chunk_byte_fails_over_to_a_replica_or_fails_the_read_naming_the_chunk() {
    use chunkfs::launch::{InProcessDfs, LocalDfsOptions};
    use dfs_broker::{AppendFlag, Fs};
    let data = chunk_bytes();
    for replicas in [2u32, 1] {
        let mut o = LocalDfsOptions::hdfs_like();
        o.layout = Layout::Replicated { replicas };
        o.chunk_servers = replicas as usize;
        let (dfs, fs) = InProcessDfs::start(o).await.expect("start");
        let mut w = fs.create("/t/f", false).await.expect("create");
        w.append(&data, AppendFlag::Sync).await.expect("append");
        w.close().await.expect("close");
        let r = fs.open("/t/f").await.expect("open");
        assert_eq!(r.pread(0, data.len()).await.expect("read"), data);
        let (id, _) = dfs.chunks[0].chunks()[0];
        let path = dfs.chunks[0].chunk_file(id);
        let mut bytes = std::fs::read(&path).expect("read chunk");
        bytes[100_000] ^= 0x10;
        std::fs::write(&path, &bytes).expect("write chunk");
        let got = r.pread(0, data.len()).await;
        if replicas > 1 {
            assert_eq!(got.expect("failed over"), data, "{replicas} replicas");
        } else {
            let msg = got.expect_err("one damaged replica").to_string();
            assert!(
                msg.contains(&format!("chunk {id}")) && msg.contains("checksum mismatch"),
                "{msg}"
            );
            // Other pieces still read.
            assert_eq!(r.pread(0, 1000).await.expect("piece 0"), &data[..1000]);
        }
    }
}

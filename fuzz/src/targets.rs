//! The fuzz targets' logic: one plain function per target over `&[u8]` that must never panic,
//! hang or allocate without bound, whatever the input (decoders must return errors).
//!
//! This file is compiled twice: into the instrumented fuzz binaries (`fuzz/fuzz_targets/*.rs`
//! through `fuzz/src/lib.rs`) and, uninstrumented, into the workspace test
//! `ht/tests/fuzz_corpus.rs`, which runs every seed and every kept crash reproducer through the
//! same functions, so a bug a fuzzer found stays fixed even where nobody fuzzes.
//!
//! Checksums stop a mutating fuzzer at the first byte it changes, so each target that reads a
//! checksummed format runs twice: on the input as it is (the checks themselves), then, when it
//! differs, on the input with every checksum the framing reaches recomputed (`fix_*`), which
//! lets mutations reach the code behind the checks.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use dfs_broker::{BlockingFs, LocalFs};

/// A target: its name (the corpus directory, the fuzz binary) and its function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target.
pub const TARGETS: &[Target] = &[
    ("cellstore_block", cellstore_block),
    ("cellstore_file", cellstore_file),
    ("commitlog_replay", commitlog_replay),
    ("metalog_read", metalog_read),
    ("hyperspace_log", hyperspace_log),
    ("hyperspace_state", hyperspace_state),
    ("rpc_frame", rpc_frame),
    ("packed_update_cells", packed_update_cells),
    ("packed_scan_cells", packed_scan_cells),
    ("chunkfs_oplog", chunkfs_oplog),
    ("objstore_manifest", objstore_manifest),
    ("tsv_lines", tsv_lines),
    ("hql_roundtrip", hql_roundtrip),
    ("set_value", set_value),
    ("scan_spec_wire", scan_spec_wire),
    ("row_skip_navigate", row_skip_navigate),
];

/// Inputs are cut to this many bytes, so no target's work grows with an unbounded input.
pub const MAX_INPUT_BYTES: usize = 1 << 20;

/// Cells a scan reads before it stops (inputs are bounded, so this only guards against loops).
const MAX_SCAN_CELLS: usize = 1 << 20;

fn bounded(data: &[u8]) -> &[u8] {
    &data[..data.len().min(MAX_INPUT_BYTES)]
}

/// A runtime for `BlockingFs` and a private scratch directory, made once per process.
struct Env {
    _rt: tokio::runtime::Runtime,
    root: PathBuf,
    fs: BlockingFs,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime for the fuzz targets");
        let root = std::env::temp_dir().join(format!("ht-fuzz-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let local = LocalFs::new(&root).expect("the fuzz scratch directory");
        let fs = BlockingFs::new(Arc::new(local), rt.handle().clone());
        Env { _rt: rt, root, fs }
    })
}

/// Empties (creating) the scratch directory `name` and returns its real path.
fn scratch(name: &str) -> PathBuf {
    let dir = env().root.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a fuzz scratch directory");
    dir
}

fn write(dir: &Path, name: &str, data: &[u8]) {
    std::fs::write(dir.join(name), data).expect("a fuzz scratch file");
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Runs `f` on `data`, then on `fix(data)` if that differs.
fn with_fixed(data: &[u8], fix: fn(&mut Vec<u8>), f: impl Fn(&[u8])) {
    let data = bounded(data);
    f(data);
    let mut fixed = data.to_vec();
    fix(&mut fixed);
    if fixed != data {
        f(&fixed);
    }
}

/// Splits `data` where `magic` starts a part (the first part starts at 0 whatever it holds).
fn split_on<'a>(data: &'a [u8], magic: &[u8]) -> Vec<&'a [u8]> {
    let mut starts = vec![0];
    let mut i = 1;
    while i + magic.len() <= data.len() {
        if &data[i..i + magic.len()] == magic {
            starts.push(i);
            i += magic.len();
        } else {
            i += 1;
        }
    }
    starts.push(data.len());
    starts.windows(2).map(|w| &data[w[0]..w[1]]).collect()
}

// ---------------------------------------------------------------------------------------------
// Cell stores (docs/formats/cellstore.md)

mod cellstore {
    use super::*;
    use rangeserver::block_cache::BlockCache;
    use rangeserver::cellstore::{CellStore, TRAILER_LEN, TRAILER_MAGIC};
    use rangeserver::iter::CellIter;

    pub const BLOCK_HEADER_LEN: usize = 28;

    /// Recomputes the header and payload checksums of the block at `buf[off..off + size]`.
    pub fn fix_block(buf: &mut [u8], off: usize, size: usize) {
        let Some(end) = off.checked_add(size) else {
            return;
        };
        if size < BLOCK_HEADER_LEN || end > buf.len() {
            return;
        }
        let crc = crc32c::crc32c(&buf[off + BLOCK_HEADER_LEN..end]);
        put_u32(buf, off + 20, crc);
        let crc = crc32c::crc32c(&buf[off..off + 24]);
        put_u32(buf, off + 24, crc);
    }

    fn trailer_crc(t: &[u8]) -> u32 {
        crc32c::crc32c_append(crc32c::crc32c(&t[..112]), &t[116..])
    }

    /// Fixes the trailer, the index block, every data block the index names and the bloom block.
    pub fn fix_file(buf: &mut [u8]) {
        if buf.len() < TRAILER_LEN {
            return;
        }
        let t = buf.len() - TRAILER_LEN;
        let crc = trailer_crc(&buf[t..]);
        put_u32(buf, t + 112, crc);
        let field = |i: usize| le_u64(buf, t + 8 * i).and_then(|v| usize::try_from(v).ok());
        let (Some(index_off), Some(index_len)) = (field(0), field(1)) else {
            return;
        };
        let (bloom_off, bloom_len) = (field(2), field(3));
        if let (Some(o), Some(l)) = (bloom_off, bloom_len) {
            fix_block(buf, o, l);
        }
        fix_block(buf, index_off, index_len);
        // Data blocks, from an uncompressed index payload.
        let Some(end) = index_off.checked_add(index_len) else {
            return;
        };
        if index_len < BLOCK_HEADER_LEN || end > buf.len() || buf[index_off + 4] != 0 {
            return;
        }
        let p = buf[index_off + BLOCK_HEADER_LEN..end].to_vec();
        let mut pos = 0usize;
        while pos < p.len() {
            let Some(key_len) = get_varint(&p, &mut pos) else {
                return;
            };
            let Some(at) = usize::try_from(key_len)
                .ok()
                .and_then(|k| pos.checked_add(k))
            else {
                return;
            };
            let (Some(off), Some(size)) = (le_u64(&p, at), le_u32(&p, at + 8)) else {
                return;
            };
            if let Ok(off) = usize::try_from(off) {
                fix_block(buf, off, size as usize);
            }
            pos = at + 12;
        }
    }

    pub fn get_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *b.get(*pos)?;
            *pos += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(v);
            }
        }
        None
    }

    fn put_varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn frame_block(magic: &[u8; 4], entries: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; BLOCK_HEADER_LEN];
        out[0..4].copy_from_slice(magic);
        put_u32(&mut out, 8, payload.len() as u32);
        put_u32(&mut out, 12, payload.len() as u32);
        put_u32(&mut out, 16, entries);
        out.extend_from_slice(payload);
        let len = out.len();
        fix_block(&mut out, 0, len);
        out
    }

    /// A cell-store file whose only data block is `block`, with an uncompressed index and no
    /// bloom filter.
    pub fn file_around_block(block: &[u8]) -> Vec<u8> {
        let mut file = block.to_vec();
        let mut index = Vec::new();
        let last_key = [0xffu8; 16];
        put_varint(&mut index, last_key.len() as u64);
        index.extend_from_slice(&last_key);
        index.extend_from_slice(&0u64.to_le_bytes());
        index.extend_from_slice(&(block.len() as u32).to_le_bytes());
        let index = frame_block(b"CSIX", 1, &index);
        let index_offset = file.len() as u64;
        file.extend_from_slice(&index);
        let mut t = [0u8; TRAILER_LEN];
        let fields = [index_offset, index.len() as u64, 0, 0, 1];
        for (i, f) in fields.iter().enumerate() {
            t[i * 8..i * 8 + 8].copy_from_slice(&f.to_le_bytes());
        }
        // Both entry layouts: v1 (keys whole) for odd lengths, v2 (tails as deltas) for even.
        let version: u32 = if block.len().is_multiple_of(2) { 2 } else { 1 };
        t[116..120].copy_from_slice(&version.to_le_bytes());
        t[120..128].copy_from_slice(&TRAILER_MAGIC);
        let crc = trailer_crc(&t);
        t[112..116].copy_from_slice(&crc.to_le_bytes());
        file.extend_from_slice(&t);
        file
    }

    /// Opens `file` as a cell store and reads it: a full scan, then seeks to keys it saw.
    pub fn open_and_scan(file: &[u8]) {
        let dir = scratch("cellstore");
        write(&dir, "cs", file);
        let cache = BlockCache::new(1 << 20);
        let Ok(store) = CellStore::open(&env().fs, "/cellstore/cs", cache) else {
            return;
        };
        let _ = store.middle_key();
        let _ = store.may_contain_row(b"row");
        let _ = store.may_contain_cell(b"row", 1, b"q");
        let mut s = store.scanner(false);
        let mut keys = Vec::new();
        if s.seek(&[]).is_err() {
            return;
        }
        while s.valid() && keys.len() < MAX_SCAN_CELLS {
            let key = s.key().to_vec();
            let _ = s.value().len();
            // The engine decodes every key it reads; that decoder must hold up too.
            if let Ok(k) = common::key::KeyRef::new(&key) {
                let _ = (
                    k.row(),
                    k.qualifier(),
                    k.family(),
                    k.timestamp(),
                    k.revision(),
                );
            }
            keys.push(key);
            if s.next().is_err() {
                break;
            }
        }
        for key in keys.iter().step_by(keys.len() / 8 + 1) {
            let _ = s.seek(key);
            let _ = store.may_contain_row_prefix(key);
        }
    }
}

/// One data block (`CSDB` header and payload) inside a minimal file: decode, restart array,
/// prefix-compressed entries, scanner seeks.
pub fn cellstore_block(data: &[u8]) {
    with_fixed(
        data,
        |b| {
            let len = b.len();
            cellstore::fix_block(b, 0, len)
        },
        |block| cellstore::open_and_scan(&cellstore::file_around_block(block)),
    );
}

/// A whole cell-store file: open (trailer, index, bloom filter) and scan.
pub fn cellstore_file(data: &[u8]) {
    with_fixed(data, |b| cellstore::fix_file(b), cellstore::open_and_scan);
}

// ---------------------------------------------------------------------------------------------
// Commit log (docs/formats/commitlog.md)

/// Fixes the fragment headers and block checksums of a commit-log fragment.
fn fix_fragment(b: &mut [u8]) {
    if b.len() < 24 {
        return;
    }
    let crc = crc32c::crc32c(&b[0..20]);
    put_u32(b, 20, crc);
    let mut off = 24usize;
    while b.len() - off >= 40 {
        let stored = le_u32(b, off + 8).unwrap_or(0) as usize;
        let end = off + 40 + stored;
        if end <= b.len() {
            let crc = crc32c::crc32c(&b[off + 40..end]);
            put_u32(b, off + 32, crc);
        }
        let crc = crc32c::crc32c(&b[off..off + 36]);
        put_u32(b, off + 36, crc);
        if end > b.len() {
            break;
        }
        off = end;
    }
}

fn fix_fragments(b: &mut Vec<u8>) {
    let mut out = Vec::with_capacity(b.len());
    for part in split_on(b, b"HTLF") {
        let mut part = part.to_vec();
        fix_fragment(&mut part);
        out.extend_from_slice(&part);
    }
    *b = out;
}

/// Commit-log replay over the fragments in the input (split where `HTLF` starts one; the
/// `i`-th part is fragment `i`), decoding every entry as the engine's replay does.
pub fn commitlog_replay(data: &[u8]) {
    with_fixed(data, fix_fragments, |data| {
        let dir = scratch("log");
        for (i, part) in split_on(data, b"HTLF").iter().enumerate() {
            write(&dir, &i.to_string(), part);
        }
        let _ = rangeserver::commitlog::replay(&env().fs, "/log", |entry, layout| {
            if let Some(d) = rangeserver::engine::decode_log_entry(entry, layout) {
                for (k, _v) in d.cells() {
                    if let Ok(k) = common::key::KeyRef::new(k) {
                        let _ = (k.row(), k.revision(), k.flag());
                    }
                }
            }
            Ok(())
        });
    });
}

// ---------------------------------------------------------------------------------------------
// Meta log (docs/formats/metalog.md)

const META_MAGIC: &[u8] = b"HTMETA\x00\x01";

fn fix_meta_file(b: &mut [u8]) {
    if b.len() < 16 {
        return;
    }
    let crc = crc32c::crc32c(&b[0..12]);
    put_u32(b, 12, crc);
    let mut off = 16usize;
    while b.len() - off >= 8 {
        let n = le_u32(b, off).unwrap_or(0) as usize;
        let end = off + 8 + n;
        if end > b.len() {
            break;
        }
        let crc = crc32c::crc32c(&b[off + 8..end]);
        put_u32(b, off + 4, crc);
        off = end;
    }
}

fn fix_meta(b: &mut Vec<u8>) {
    let mut out = Vec::with_capacity(b.len());
    for part in split_on(b, META_MAGIC) {
        let mut part = part.to_vec();
        fix_meta_file(&mut part);
        out.extend_from_slice(&part);
    }
    *b = out;
}

/// Reading a meta log as recovery does (`meta::read_state`): the input's parts (split where the
/// file magic starts one) are `meta.0`, `meta.1`, ...
pub fn metalog_read(data: &[u8]) {
    with_fixed(data, fix_meta, |data| {
        let dir = scratch("meta");
        for (i, part) in split_on(data, META_MAGIC).iter().enumerate() {
            write(&dir, &format!("meta.{i}"), part);
        }
        if let Ok(state) = rangeserver::meta::read_state(&env().fs, "/meta") {
            let _ = format!("{state:?}");
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Hyperspace (docs/formats/hyperspace-log.md, docs/formats/hyperspace.md)

fn fix_segment(b: &mut [u8]) {
    if b.len() < 24 {
        return;
    }
    let crc = crc32c::crc32c(&b[0..20]);
    put_u32(b, 20, crc);
    let mut off = 24usize;
    while b.len() - off >= 9 {
        let n = le_u32(b, off).unwrap_or(0) as usize;
        let end = off + 9 + n;
        if end > b.len() {
            break;
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(&b[off + 8..off + 9]), &b[off + 9..end]);
        put_u32(b, off + 4, crc);
        off = end;
    }
}

fn fix_snapshot_file(b: &mut [u8]) {
    if b.len() < 60 {
        return;
    }
    let crc = crc32c::crc32c(&b[0..52]);
    put_u32(b, 52, crc);
    let hs = le_u32(b, 32).unwrap_or(0) as u64;
    let cs = le_u32(b, 36).unwrap_or(0) as u64;
    let data = le_u64(b, 40).unwrap_or(0);
    let body_end = 56u64
        .saturating_add(hs)
        .saturating_add(cs)
        .saturating_add(data);
    if body_end.saturating_add(4) == b.len() as u64 {
        let end = body_end as usize;
        let crc = crc32c::crc32c(&b[56..end]);
        put_u32(b, end, crc);
    }
}

/// The parts of a Hyperspace input: log segments (`HSLG`) and snapshot files (`HSSN`).
fn hyperspace_parts(data: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    for p in split_on(data, b"HSLG") {
        parts.extend(split_on(p, b"HSSN"));
    }
    parts
}

fn fix_hyperspace(b: &mut Vec<u8>) {
    let mut out = Vec::with_capacity(b.len());
    for part in hyperspace_parts(b) {
        let mut part = part.to_vec();
        if part.starts_with(b"HSSN") {
            fix_snapshot_file(&mut part);
        } else {
            fix_segment(&mut part);
        }
        out.extend_from_slice(&part);
    }
    *b = out;
}

/// Opening a Hyperspace replica's storage (`DiskStorage::open`): the input's parts are its log
/// segments (numbered from 1 in input order) and snapshot files (named by the index they hold).
pub fn hyperspace_log(data: &[u8]) {
    with_fixed(data, fix_hyperspace, |data| {
        let dir = scratch("hyperspace");
        let mut seq = 0u64;
        for part in hyperspace_parts(data) {
            if part.starts_with(b"HSSN") {
                let index = le_u64(part, 8).unwrap_or(0);
                write(&dir, &format!("snapshot-{index:020}.hsnap"), part);
            } else {
                seq += 1;
                write(&dir, &format!("log-{seq:020}.hlog"), part);
            }
        }
        let opts = hyperspace::storage::StorageOptions {
            segment_bytes: 1 << 20,
            sync: false,
        };
        if let Ok(s) = hyperspace::storage::DiskStorage::open(&dir, opts) {
            let _ = (s.hard_state(), s.conf_state(), s.entries_len());
            let _ = s.snapshot_now();
        }
    });
}

/// Restoring the Hyperspace state machine from snapshot bytes; a state that restores must
/// snapshot to bytes that restore to the same state.
pub fn hyperspace_state(data: &[u8]) {
    use hyperspace::state::{Limits, StateMachine};
    with_fixed(
        data,
        |b| {
            if b.len() >= 12 {
                let crc = crc32c::crc32c(&b[12..]);
                put_u32(b, 8, crc);
            }
        },
        |data| {
            let Ok(sm) = StateMachine::restore(data, Limits::default()) else {
                return;
            };
            let snap = sm.snapshot();
            let again = StateMachine::restore(&snap, Limits::default())
                .unwrap_or_else(|e| panic!("a restored state's snapshot does not restore: {e}"));
            assert!(
                again.snapshot() == snap,
                "a restored state's snapshot restores to a different state"
            );
        },
    );
}

// ---------------------------------------------------------------------------------------------
// RPC frames (docs/formats/rpc.md)

/// A call's byte stream as a server reads it: one request frame, then (as a client reads a
/// stream's answers) response frames to the end. Every message that decodes re-encodes to a
/// frame that decodes to the same message.
pub fn rpc_frame(data: &[u8]) {
    use rpc::frame::{RequestEnvelope, ResponseEnvelope, decode_frame, encode};
    let data = bounded(data);
    let limit = 1 << 20;
    let mut rest = data;
    match decode_frame::<RequestEnvelope>(rest, limit) {
        Ok(Some((req, used))) => {
            let frame = encode(&req, limit).expect("a decoded request re-encodes");
            let back = decode_frame::<RequestEnvelope>(&frame, limit)
                .expect("a re-encoded request decodes");
            assert!(back == Some((req, frame.len())), "request frame round trip");
            rest = &rest[used..];
        }
        Ok(None) | Err(_) => return,
    }
    while let Ok(Some((resp, used))) = decode_frame::<ResponseEnvelope>(rest, limit) {
        let _ = resp
            .error
            .as_ref()
            .map(|e| rpc::frame::kind_from_wire(e.kind));
        let frame = encode(&resp, limit).expect("a decoded response re-encodes");
        let back =
            decode_frame::<ResponseEnvelope>(&frame, limit).expect("a re-encoded response decodes");
        assert!(
            back == Some((resp, frame.len())),
            "response frame round trip"
        );
        rest = &rest[used..];
    }
}

// ---------------------------------------------------------------------------------------------
// Packed cells (docs/formats/rangeserver-rpc.md)

/// `count` (u32 LE) then the packed cells of an `rs.update`: cells that decode re-encode to a
/// packing that decodes to the same cells.
pub fn packed_update_cells(data: &[u8]) {
    use proto::rs::messages::{decode_cells, encode_cells};
    let data = bounded(data);
    let Some(count) = le_u32(data, 0) else {
        return;
    };
    let Ok(cells) = decode_cells(&data[4..], count) else {
        return;
    };
    let mut again = Vec::new();
    encode_cells(&cells, &mut again);
    let back = decode_cells(&again, count).expect("re-encoded cells decode");
    assert!(back == cells, "packed update cells round trip");
}

/// `count` (u32 LE) then the packed cells of a `ScanBlock`, read one at a time.
pub fn packed_scan_cells(data: &[u8]) {
    use proto::rs::messages::PackedCells;
    let data = bounded(data);
    let Some(count) = le_u32(data, 0) else {
        return;
    };
    let mut cells = PackedCells::new(bytes::Bytes::copy_from_slice(&data[4..]), count);
    let mut n = 0u64;
    while let Ok(Some(c)) = cells.next_ref() {
        let _ = (c.row.len(), c.qualifier.len(), c.value.len(), c.flag);
        n += 1;
        assert!(
            n <= u64::from(count),
            "more packed scan cells than the count"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// chunkfs op log (docs/formats/chunkfs.md)

fn fix_oplog(b: &mut [u8]) {
    let mut off = 0usize;
    while b.len() - off >= 8 {
        let n = le_u32(b, off).unwrap_or(0) as usize;
        let end = off + 8 + n;
        if end > b.len() {
            break;
        }
        let crc = crc32c::crc32c(&b[off + 8..end]);
        put_u32(b, off + 4, crc);
        off = end;
    }
}

/// The metadata server's op-log replay: records decoded up to the first bad one, applied to a
/// namespace; the good records re-encode to exactly the good prefix's length.
pub fn chunkfs_oplog(data: &[u8]) {
    use chunkfs::meta::namespace::Namespace;
    use chunkfs::meta::oplog::{decode_records, encode_record};
    with_fixed(
        data,
        |b| fix_oplog(b),
        |data| {
            let (ops, good, _) = decode_records(data);
            assert!(good <= data.len(), "good prefix past the end");
            let mut ns = Namespace::new();
            for op in &ops {
                let _ = ns.apply(op);
            }
            let again: Vec<u8> = ops.iter().flat_map(encode_record).collect();
            let (back, back_good, _) = decode_records(&again);
            assert!(
                back.len() == ops.len() && back_good == again.len(),
                "re-encoded op-log records decode"
            );
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Object-store manifests (docs/formats/objstore.md)

/// A manifest object, then reads mapped onto its segments: the pieces of a read lie end to end
/// and add up to the part of the read inside the file.
pub fn objstore_manifest(data: &[u8]) {
    with_fixed(
        data,
        |b| {
            if b.len() >= 4 {
                let end = b.len() - 4;
                let crc = crc32c::crc32c(&b[..end]);
                put_u32(b, end, crc);
            }
        },
        |data| {
            let Ok(len) = dfs_broker::objstore::manifest_file_length(data) else {
                return;
            };
            for (offset, read) in [(0, len), (len / 3, len / 2 + 1), (len, 1), (1, u64::MAX)] {
                let pieces = dfs_broker::objstore::manifest_map_range(data, offset, read)
                    .expect("a manifest that decoded once decodes again");
                let want = read.min(len.saturating_sub(offset));
                let got: u64 = pieces.iter().map(|p| p.2).sum();
                assert!(got == want, "a read of {want} bytes maps to {got} bytes");
                assert!(pieces.iter().all(|p| p.2 > 0), "an empty piece");
            }
        },
    );
}

// ---------------------------------------------------------------------------------------------
// LOAD DATA INFILE lines

/// Options byte, then the first line (header or data), then more lines, parsed as LOAD DATA
/// INFILE does; escaping and unescaping any field is the identity.
pub fn tsv_lines(data: &[u8]) {
    use hql::ast::{Justify, KeyFormat, LoadOptions, RowKeyColumn};
    use hql::load::format::{
        Families, FamilyInfo, LineParser, detect_layout, escape_into, unescape_cow,
    };
    let data = bounded(data);
    let Some((&opt, rest)) = data.split_first() else {
        return;
    };
    let mut opts = LoadOptions {
        single_cell_format: opt & 1 != 0,
        no_escape: opt & 2 != 0,
        ignore_unknown_columns: opt & 4 != 0,
        duplicate_key_columns: opt & 8 != 0,
        ..LoadOptions::default()
    };
    if opt & 16 != 0 {
        opts.row_key_columns = vec![
            RowKeyColumn {
                name: "a".into(),
                format: Some(KeyFormat {
                    width: u32::from(opt >> 5) * 3,
                    justify: [Justify::RightZero, Justify::RightSpace, Justify::LeftSpace]
                        [usize::from(opt >> 5) % 3],
                }),
            },
            RowKeyColumn {
                name: "k".into(),
                format: None,
            },
        ];
        opts.timestamp_column = Some("t".into());
    }
    if opt & 128 != 0 {
        opts.row_uniquify_chars = Some(u32::from(opt & 31));
    }
    let families = if opt & 64 != 0 {
        Families::Any
    } else {
        let fam = |id, counter| FamilyInfo { id, counter };
        Families::Schema(
            [
                (b"a".to_vec(), fam(1, false)),
                (b"b".to_vec(), fam(2, false)),
                (b"c".to_vec(), fam(3, true)),
            ]
            .into_iter()
            .collect(),
        )
    };
    let (first, _) = rest.split_at(
        rest.iter()
            .position(|&b| b == b'\n')
            .map_or(rest.len(), |p| p + 1),
    );
    let Ok((layout, first_line)) = detect_layout(first, None, &opts, b"\t", &families, None) else {
        return;
    };
    let chunk = if first_line == hql::load::format::FirstLine::Header {
        &rest[first.len()..]
    } else {
        rest
    };
    let mut parser = LineParser::new(layout, b"\t".to_vec(), &opts, families, 7, 1 << 20, None);
    let parsed = parser.parse_chunk(chunk, opt & 4 != 0);
    assert!(
        parsed
            .cells_per_line
            .iter()
            .map(|&n| n as usize)
            .sum::<usize>()
            == parsed.cells.len(),
        "cells per line do not add up to the cells"
    );
    for field in chunk.split(|&b| b == b'\t' || b == b'\n').take(64) {
        let mut escaped = Vec::new();
        escape_into(field, &mut escaped);
        assert!(
            unescape_cow(&escaped, true).as_ref() == field,
            "escape then unescape changed {field:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// HQL

/// HQL parse -> print -> parse: for every text that parses, `parse(print(parse(s))) == parse(s)`.
pub fn hql_roundtrip(data: &[u8]) {
    let data = bounded(data);
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(stmt) = hql::parse_statement(text) {
        let printed = stmt.to_string();
        let again = hql::parse_statement(&printed)
            .unwrap_or_else(|e| panic!("printed statement {printed:?} does not parse: {e}"));
        assert!(
            again == stmt,
            "{text:?} printed as {printed:?} parses to a different statement:\n{stmt:?}\n{again:?}"
        );
    }
    if let Ok(stmts) = hql::parse_script(text) {
        for (stmt, span) in stmts {
            assert!(
                text.get(span.clone()).is_some(),
                "statement span {span:?} off the text"
            );
            let printed = stmt.to_string();
            let again = hql::parse_statement(&printed)
                .unwrap_or_else(|e| panic!("printed statement {printed:?} does not parse: {e}"));
            assert!(again == stmt, "script statement {printed:?} round trip");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Combined set values (docs/formats/combiners.md) and scan specs on the wire
// (docs/formats/rangeserver-rpc.md)

/// A stored set value (`SetValue`, the bytes of Accumulo wikisearch's `Uid.List`): a value that
/// decodes re-encodes to bytes that decode to the same set, and shows; the `uid_set` and
/// `string_set` combiners take the input twice and finish it in every output form, or refuse it,
/// without panicking.
pub fn set_value(data: &[u8]) {
    use rangeserver::iterators::Registry;
    use rangeserver::iterators::combine::{Output, SetValue};
    let data = bounded(data);
    if let Ok(v) = SetValue::decode(data) {
        let mut again = Vec::new();
        v.encode(&mut again);
        assert!(
            SetValue::decode(&again).as_ref() == Ok(&v),
            "a set value re-encodes to itself"
        );
        let mut shown = Vec::new();
        v.display(&mut shown);
    }
    let registry = Registry::builtins();
    for kind in ["uid_set", "string_set"] {
        let combiner = registry
            .combiner(kind)
            .expect("a built-in kind")
            .build(&[("MAX".to_string(), "3".to_string())].into())
            .expect("MAX = 3 is valid");
        for output in [Output::Display, Output::Full, Output::Partial] {
            let mut st = combiner.state();
            if st.add(data).is_ok() {
                let _ = st.add(data);
            }
            let mut out = Vec::new();
            st.finish(&mut out, output);
        }
    }
}

/// A scan request's spec as a range server receives it (`WireScanSpec`, the iterators of tag 17
/// and the value predicates of tag 18 included): decoded and checked without panicking; a spec
/// that passes goes back to the wire as bytes that pass again and re-encode to themselves.
pub fn scan_spec_wire(data: &[u8]) {
    use prost::Message;
    use proto::rs::messages::WireScanSpec;
    let data = bounded(data);
    let Ok(wire) = WireScanSpec::decode(data) else {
        return;
    };
    let Ok(spec) = common::ScanSpec::try_from(wire) else {
        return;
    };
    let first = WireScanSpec::from(&spec).encode_to_vec();
    let again = WireScanSpec::decode(first.as_slice()).expect("an encoded spec decodes");
    let again = common::ScanSpec::try_from(again).expect("a checked spec passes again");
    assert!(
        WireScanSpec::from(&again).encode_to_vec() == first,
        "a checked spec re-encodes to itself"
    );
}

/// Rows a `row_skip_navigate` input is checked over (the check is quadratic in them).
const MAX_SKIP_ROWS: usize = 512;

/// A key-part skip as a range server receives it (`WireRowSkip`, field 22 of a scan spec) and
/// rows to navigate: the skip's length (u32 LE), the encoded skip, then rows joined by `\n`.
/// A skip that passes its checks navigates every row without panicking, takes exactly the rows
/// it matches, and never seeks or stops past a matching row: for each row, no other row between
/// it and its hint (or after it, when it says done) matches.
pub fn row_skip_navigate(data: &[u8]) {
    use common::row_key::{Navigate, RowSkip};
    use prost::Message;
    use proto::rs::messages::WireRowSkip;
    let data = bounded(data);
    let Some(n) = le_u32(data, 0) else {
        return;
    };
    let Some(wire) = data.get(4..4 + n as usize) else {
        return;
    };
    let Ok(wire) = WireRowSkip::decode(wire) else {
        return;
    };
    let Ok(skip) = RowSkip::try_from(wire) else {
        return;
    };
    let mut rows: Vec<&[u8]> = data[4 + n as usize..]
        .split(|&b| b == b'\n')
        .take(MAX_SKIP_ROWS)
        .collect();
    rows.sort_unstable();
    rows.dedup();
    for (i, row) in rows.iter().enumerate() {
        let later = || rows[i + 1..].iter();
        match skip.navigate(row) {
            Navigate::Include => {
                assert!(skip.matches(row), "navigate took a row that does not match")
            }
            Navigate::SeekRow(hint) => {
                assert!(!skip.matches(row), "navigate passed over a matching row");
                assert!(
                    hint.as_slice() > *row,
                    "a seek hint that does not move forward"
                );
                if let Some(x) = later()
                    .take_while(|x| **x < hint.as_slice())
                    .find(|x| skip.matches(x))
                {
                    panic!("a seek hint past a matching row: {x:?}");
                }
            }
            Navigate::Done => {
                assert!(!skip.matches(row), "navigate stopped at a matching row");
                assert!(
                    later().all(|x| !skip.matches(x)),
                    "navigate stopped before a matching row"
                );
            }
        }
    }
}

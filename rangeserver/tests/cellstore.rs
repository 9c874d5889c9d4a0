//! Cell store format: model-based round trips, seeks, bloom filters, corruption handling,
//! the block cache, and frozen v1 and v2 fixtures.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use common::{BloomFilterMode, BloomFilterSpec, CellFlag, Compressor, Key, KeyRef};
use dfs_broker::{BlockingFs, LocalFs};
use proptest::prelude::*;
use rangeserver::Error;
use rangeserver::block_cache::BlockCache;
use rangeserver::cellstore::{
    CellStore, CellStoreOptions, CellStoreWriter, FORMAT_VERSION, TRAILER_LEN, Trailer,
};
use rangeserver::iter::CellIter;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Runtime::new().expect("runtime"))
}

/// A temporary local file system.
struct Env {
    dir: tempfile::TempDir,
    fs: BlockingFs,
}

impl Env {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = LocalFs::new(dir.path()).expect("local fs");
        let fs = BlockingFs::new(Arc::new(fs), runtime().handle().clone());
        Self { dir, fs }
    }

    fn real(&self, path: &str) -> PathBuf {
        self.dir.path().join(path.trim_start_matches('/'))
    }
}

fn opts(blocksize_bytes: u32, compressor: Compressor, mode: BloomFilterMode) -> CellStoreOptions {
    CellStoreOptions {
        blocksize_bytes,
        compressor,
        bloom: BloomFilterSpec {
            mode,
            ..BloomFilterSpec::default()
        },
    }
}

fn write(env: &Env, path: &str, o: CellStoreOptions, cells: &Model) -> Trailer {
    let mut w = CellStoreWriter::create(&env.fs, path, o).expect("create");
    for (k, v) in cells {
        w.add(k, v).expect("add");
    }
    assert_eq!(w.cells(), cells.len() as u64);
    w.finish().expect("finish")
}

fn open(env: &Env, path: &str) -> Arc<CellStore> {
    CellStore::open(&env.fs, path, BlockCache::new(1 << 20)).expect("open")
}

fn scan_all(cs: &Arc<CellStore>, fill_cache: bool) -> rangeserver::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut s = cs.scanner(fill_cache);
    s.seek(b"")?;
    let mut out = Vec::new();
    while s.valid() {
        out.push((s.key().to_vec(), s.value().to_vec()));
        s.next()?;
    }
    Ok(out)
}

fn key(row: &[u8], family: u8, qualifier: &[u8], ts: i64, rev: i64, flag: CellFlag) -> Vec<u8> {
    Key {
        row: row.to_vec(),
        family,
        qualifier: qualifier.to_vec(),
        timestamp: ts,
        revision: rev,
        flag,
    }
    .encode()
}

/// `n` simple cells: rows `row-00000`..., one family, two qualifiers.
fn simple_cells(n: usize, value_len: usize) -> Model {
    (0..n)
        .map(|i| {
            let row = format!("row-{:05}", i / 2);
            let k = key(
                row.as_bytes(),
                1,
                if i % 2 == 0 { b"a" } else { b"b" },
                1000,
                i as i64,
                CellFlag::Insert,
            );
            (
                k,
                format!("value-{i:05}-")
                    .repeat(value_len / 12 + 1)
                    .into_bytes()[..value_len]
                    .to_vec(),
            )
        })
        .collect()
}

/// Start offsets of the data blocks, found by walking the block headers (docs/formats/cellstore.md).
fn data_block_offsets(bytes: &[u8], index_offset: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut off = 0u64;
    while off < index_offset {
        out.push(off);
        let h = &bytes[off as usize..off as usize + 28];
        assert_eq!(&h[0..4], b"CSDB");
        let stored = u32::from_le_bytes(h[12..16].try_into().unwrap()) as u64;
        off += 28 + stored;
    }
    assert_eq!(off, index_offset);
    out
}

// ---------------------------------------------------------------------------------------------
// Model tests

fn flag_strategy() -> impl Strategy<Value = CellFlag> {
    prop_oneof![
        1 => Just(CellFlag::DeleteRow),
        1 => Just(CellFlag::DeleteColumnFamily),
        1 => Just(CellFlag::DeleteCell),
        1 => Just(CellFlag::DeleteCellVersion),
        4 => Just(CellFlag::Insert),
    ]
}

fn key_strategy() -> impl Strategy<Value = Key> {
    (
        proptest::collection::vec(
            prop_oneof![Just(0u8), Just(b'a'), Just(b'b'), any::<u8>()],
            0..8,
        ),
        0u8..4,
        proptest::collection::vec(prop_oneof![Just(0u8), Just(b'q'), any::<u8>()], 0..4),
        prop_oneof![Just(0i64), Just(1i64), Just(-1i64), any::<i64>()],
        prop_oneof![3 => 0i64..1000, 1 => any::<i64>()],
        flag_strategy(),
    )
        .prop_map(|(row, family, qualifier, timestamp, revision, flag)| Key {
            row,
            family,
            qualifier,
            timestamp,
            revision,
            flag,
        })
}

fn value_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => proptest::collection::vec(prop_oneof![Just(b'x'), any::<u8>()], 0..40),
        1 => Just(Vec::new()),
        1 => proptest::collection::vec(any::<u8>(), 0..3000),
    ]
}

fn cells_strategy() -> impl Strategy<Value = Vec<(Key, Vec<u8>)>> {
    proptest::collection::vec((key_strategy(), value_strategy()), 0..400)
}

fn options_strategy() -> impl Strategy<Value = CellStoreOptions> {
    (
        prop_oneof![Just(1u32), Just(64), Just(512), Just(4096), Just(65536)],
        prop_oneof![Just(Compressor::None), Just(Compressor::Lz4)],
        prop_oneof![
            Just(BloomFilterMode::None),
            Just(BloomFilterMode::Rows),
            Just(BloomFilterMode::RowsCols)
        ],
        prop_oneof![Just(None), (1.0f64..20.0).prop_map(Some)],
        prop_oneof![Just(None), (1u32..10).prop_map(Some)],
        prop_oneof![Just(0.01f64), Just(0.2), Just(0.0001)],
    )
        .prop_map(
            |(blocksize_bytes, compressor, mode, bits_per_item, num_hashes, false_positive)| {
                CellStoreOptions {
                    blocksize_bytes,
                    compressor,
                    bloom: BloomFilterSpec {
                        mode,
                        false_positive,
                        bits_per_item,
                        num_hashes,
                    },
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn model_roundtrip_seek_and_bloom(
        cells in cells_strategy(),
        o in options_strategy(),
        probes in proptest::collection::vec(key_strategy(), 0..30),
    ) {
        let env = Env::new();
        let model: Model = cells.iter().map(|(k, v)| (k.encode(), v.clone())).collect();
        let trailer = write(&env, "/t/cs0", o, &model);
        let cs = open(&env, "/t/cs0");
        prop_assert_eq!(cs.trailer(), &trailer);
        prop_assert_eq!(trailer.cell_count, model.len() as u64);
        let deletes = model.keys().filter(|k| KeyRef::new(k).unwrap().flag().is_delete()).count();
        prop_assert_eq!(trailer.delete_count, deletes as u64);
        let all: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        prop_assert_eq!(scan_all(&cs, true).unwrap(), all.clone());
        prop_assert_eq!(scan_all(&cs, false).unwrap(), all);

        // Seeks to present keys, to probe keys, and to row/cell boundaries.
        let mut targets: Vec<Vec<u8>> = model.keys().step_by(7).cloned().collect();
        for p in &probes {
            targets.push(p.encode());
            targets.push(common::key::row_start(&p.row));
            targets.push(common::key::row_end(&p.row));
            targets.push(common::key::cell_start(&p.row, p.family, &p.qualifier));
        }
        targets.push(Vec::new());
        targets.push(vec![0xFF; 4]);
        // Then in order, as a key set's seeks come: forward, mostly within the held block.
        let mut sorted = targets.clone();
        sorted.sort();
        targets.extend(sorted);
        let mut s = cs.scanner(true);
        for t in &targets {
            s.seek(t).unwrap();
            let mut expect = model.range(t.clone()..);
            for _ in 0..4 {
                match expect.next() {
                    Some((k, v)) => {
                        prop_assert!(s.valid());
                        prop_assert_eq!(s.key(), k.as_slice());
                        prop_assert_eq!(s.value(), v.as_slice());
                    }
                    None => prop_assert!(!s.valid()),
                }
                s.next().unwrap();
            }
        }

        // No false negatives.
        for k in model.keys() {
            let r = KeyRef::new(k).unwrap();
            prop_assert!(cs.may_contain_row(&r.row()));
            prop_assert!(cs.may_contain_cell(&r.row(), r.family(), &r.qualifier()));
        }
        if model.is_empty() {
            prop_assert_eq!(cs.middle_key(), None);
        } else {
            let m = cs.middle_key().unwrap();
            prop_assert!(model.contains_key(&m));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Targeted tests

/// The block search compares 8-byte tags after the bytes all index keys share, then whole keys
/// among equal tags: rows with long common prefixes (many equal tags) and big-endian binary
/// rows (escaped zero bytes, as db_bench's keys) must land where a plain search would.
#[test]
fn seeks_find_the_block_with_shared_prefixes_and_binary_rows() {
    let env = Env::new();
    let rows: Vec<Vec<u8>> = (0..3000u64)
        .map(|i| format!("a-long-shared-prefix/{:06}", i / 3).into_bytes())
        .chain((0..3000u64).map(|i| (i * 7919).to_be_bytes().to_vec()))
        .collect();
    let model: Model = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let k = Key {
                row: r.clone(),
                family: 1,
                qualifier: format!("q{}", i % 3).into_bytes(),
                timestamp: i as i64,
                revision: i as i64,
                flag: CellFlag::Insert,
            };
            (k.encode(), vec![b'v'; 30])
        })
        .collect();
    let t = write(
        &env,
        "/cs",
        opts(256, Compressor::None, BloomFilterMode::None),
        &model,
    );
    assert!(t.block_count > 300, "{} blocks", t.block_count);
    let cs = open(&env, "/cs");
    let mut targets: Vec<Vec<u8>> = model.keys().cloned().collect();
    for r in &rows {
        targets.push(common::key::row_start(r));
        targets.push(common::key::row_end(r));
    }
    targets.extend([Vec::new(), vec![0], vec![0xFF; 40], b"a-long".to_vec()]);
    for t in &targets {
        let mut s = cs.scanner(true);
        s.seek(t).unwrap();
        match model.range(t.clone()..).next() {
            Some((k, _)) => assert_eq!(s.key(), k.as_slice(), "seek to {t:?}"),
            None => assert!(!s.valid(), "seek to {t:?}"),
        }
    }
}

#[test]
fn seek_reads_only_the_block_holding_the_key() {
    let env = Env::new();
    let model = simple_cells(10_000, 20);
    let t = write(
        &env,
        "/cs",
        opts(1024, Compressor::Lz4, BloomFilterMode::Rows),
        &model,
    );
    assert!(t.block_count > 100, "{} blocks", t.block_count);
    let cs = open(&env, "/cs");
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    let mut s = cs.scanner(true);
    s.seek(keys[9_990]).unwrap();
    assert_eq!(s.key(), keys[9_990].as_slice());
    assert!(s.blocks_read() <= 2, "read {} blocks", s.blocks_read());
    // A seek between keys lands on the next key.
    let mut between = keys[5_000].clone();
    between.push(0);
    let mut s = cs.scanner(true);
    s.seek(&between).unwrap();
    assert_eq!(s.key(), keys[5_001].as_slice());
    assert!(s.blocks_read() <= 2, "read {} blocks", s.blocks_read());
    // Scanning on reads the following blocks, one at a time.
    for _ in 0..100 {
        s.next().unwrap();
    }
    assert!(s.blocks_read() < 10);
}

#[test]
fn bloom_filter_rejects_most_absent_rows() {
    let env = Env::new();
    let model = simple_cells(4_000, 8);
    write(
        &env,
        "/rows",
        opts(4096, Compressor::Lz4, BloomFilterMode::Rows),
        &model,
    );
    write(
        &env,
        "/cells",
        opts(4096, Compressor::Lz4, BloomFilterMode::RowsCols),
        &model,
    );
    write(
        &env,
        "/none",
        opts(4096, Compressor::Lz4, BloomFilterMode::None),
        &model,
    );
    let rows = open(&env, "/rows");
    let cells = open(&env, "/cells");
    let none = open(&env, "/none");
    let absent = (0..10_000)
        .filter(|i| rows.may_contain_row(format!("absent-{i}").as_bytes()))
        .count();
    assert!(absent < 300, "{absent} false positives in 10000");
    assert!(rows.may_contain_row(b"row-00000"));
    // Without a filter, a row past the last key is ruled out by the index alone.
    assert!(!none.may_contain_row(b"zzz"));
    assert!(none.may_contain_row(b"absent-1"));
    // Rows filter: cell lookups fall back to the row.
    assert!(rows.may_contain_cell(b"row-00000", 9, b"zzz"));
    assert!(cells.may_contain_cell(b"row-00000", 1, b"a"));
    let absent = (0..10_000)
        .filter(|i| cells.may_contain_cell(b"row-00001", 1, format!("q{i}").as_bytes()))
        .count();
    assert!(absent < 300, "{absent} false positives in 10000");
    assert!(none.may_contain_row(b"nothing"));
    assert!(none.may_contain_cell(b"nothing", 1, b"x"));
}

#[test]
fn a_bounded_seek_of_a_row_the_bloom_rules_out_reads_nothing_and_parks() {
    use common::key::{row_end, row_start};
    let env = Env::new();
    // Even rows only: row-00000, row-00002, ...
    let model: Model = simple_cells(4_000, 8)
        .into_iter()
        .filter(|(k, _)| {
            let row = KeyRef::new(k).unwrap().row().into_owned();
            row.last().is_some_and(|b| (b - b'0').is_multiple_of(2))
        })
        .collect();
    write(
        &env,
        "/even",
        opts(1024, Compressor::Lz4, BloomFilterMode::Rows),
        &model,
    );
    let cs = open(&env, "/even");
    let mut s = cs.scanner(true);
    let mut parked = 0;
    for i in (1..2_000).step_by(2) {
        let row = format!("row-{i:05}");
        let (start, end) = (row_start(row.as_bytes()), row_end(row.as_bytes()));
        s.seek_until(&start, Some(&end)).unwrap();
        if s.parked() {
            parked += 1;
            assert!(!s.valid());
        } else {
            // A false positive: a real seek, standing on the next (even) row.
            assert!(s.valid() && s.key() >= end.as_slice());
        }
    }
    assert!(parked > 800, "{parked} of 1000 absent rows parked");
    assert!(s.blocks_read() < 100, "read {} blocks", s.blocks_read());
    // A present row is sought as usual, and so is a seek whose end reaches past the row.
    let present = row_start(b"row-00010");
    s.seek_until(&present, Some(&row_end(b"row-00010")))
        .unwrap();
    assert!(!s.parked() && s.valid() && s.key().starts_with(&present));
    s.seek_until(&row_start(b"row-00011"), Some(&row_end(b"row-00012")))
        .unwrap();
    assert!(!s.parked() && s.key().starts_with(&row_start(b"row-00012")));
    // An unbounded seek never parks.
    s.seek_until(&row_start(b"row-00013"), None).unwrap();
    assert!(!s.parked() && s.key().starts_with(&row_start(b"row-00014")));
}

/// v2 stores a cell's timestamp and revision as deltas from the previous cell's: a load whose
/// timestamps are its revisions, counting up, takes ~2 bytes for them instead of 16.
#[test]
fn timestamps_and_revisions_are_stored_as_deltas() {
    let env = Env::new();
    let n = 10_000u64;
    let base = 1_765_000_000_000_000_000i64;
    let model: Model = (0..n)
        .map(|i| {
            let rev = base + i as i64 * 3;
            let k = key(
                format!("row{i:08}").as_bytes(),
                1,
                b"q",
                rev,
                rev,
                CellFlag::Insert,
            );
            (k, b"value-08".to_vec())
        })
        .collect();
    let o = opts(4096, Compressor::None, BloomFilterMode::None);
    let t = write(&env, "/cs", o, &model);
    let cs = open(&env, "/cs");
    assert_eq!(
        scan_all(&cs, true).unwrap(),
        model.into_iter().collect::<Vec<_>>()
    );
    // Per cell: 3 length varints, ~9 unshared key bytes, 2 delta bytes, 8 value bytes, and a
    // 16th of a restart entry's whole key; v1 took 36.
    let per_cell = t.file_size as f64 / n as f64;
    assert!(per_cell < 26.0, "{per_cell:.1} bytes per cell");
}

#[test]
fn trailer_statistics() {
    let env = Env::new();
    let mut model = Model::new();
    model.insert(key(b"a", 1, b"x", -5, 3, CellFlag::Insert), b"v1".to_vec());
    model.insert(key(b"a", 1, b"y", 50, 9, CellFlag::DeleteCell), Vec::new());
    model.insert(key(b"b", 0, b"", 7, 4, CellFlag::DeleteRow), Vec::new());
    model.insert(
        key(b"c", 2, b"z", 12, 1, CellFlag::Insert),
        b"value".to_vec(),
    );
    let t = write(&env, "/cs", CellStoreOptions::default(), &model);
    assert_eq!(t.version, 2);
    assert_eq!(t.cell_count, 4);
    assert_eq!(t.delete_count, 2);
    assert_eq!(t.block_count, 1);
    assert_eq!(
        (t.min_timestamp, t.max_timestamp, t.max_revision),
        (-5, 50, 9)
    );
    assert_eq!(
        t.key_bytes,
        model.keys().map(|k| k.len() as u64).sum::<u64>()
    );
    assert_eq!(t.value_bytes, 7);
    assert_eq!(t.file_size, env.fs.length("/cs").unwrap());
    assert_eq!(open(&env, "/cs").trailer(), &t);
    // A store with deletes may hide cells behind a seek into a row; one without may not.
    assert!(open(&env, "/cs").scanner(true).may_hold_wide_deletes());
    let mut plain = Model::new();
    plain.insert(key(b"a", 1, b"x", 1, 1, CellFlag::Insert), b"v".to_vec());
    write(&env, "/plain", CellStoreOptions::default(), &plain);
    assert!(!open(&env, "/plain").scanner(true).may_hold_wide_deletes());
}

#[test]
fn empty_store() {
    let env = Env::new();
    let t = write(&env, "/empty", CellStoreOptions::default(), &Model::new());
    assert_eq!((t.cell_count, t.block_count), (0, 0));
    let cs = open(&env, "/empty");
    let mut s = cs.scanner(true);
    s.seek(b"").unwrap();
    assert!(!s.valid());
    assert_eq!(cs.middle_key(), None);
    assert!(!cs.may_contain_row(b"x"));
}

#[test]
fn create_fails_if_file_exists() {
    let env = Env::new();
    write(
        &env,
        "/cs",
        CellStoreOptions::default(),
        &simple_cells(3, 3),
    );
    assert!(matches!(
        CellStoreWriter::create(&env.fs, "/cs", CellStoreOptions::default()),
        Err(Error::Fs(_))
    ));
}

#[test]
fn keys_out_of_order_are_rejected() {
    let env = Env::new();
    let mut w = CellStoreWriter::create(&env.fs, "/cs", CellStoreOptions::default()).unwrap();
    let k1 = key(b"a", 1, b"", 1, 1, CellFlag::Insert);
    let k2 = key(b"b", 1, b"", 1, 1, CellFlag::Insert);
    w.add(&k2, b"").unwrap();
    assert!(matches!(w.add(&k1, b""), Err(Error::InvalidInput(_))));
    assert!(
        matches!(w.add(&k2, b""), Err(Error::InvalidInput(_))),
        "duplicate key"
    );
    assert!(matches!(
        w.add(b"not a key", b""),
        Err(Error::InvalidInput(_))
    ));
    assert_eq!(w.cells(), 1);
}

#[test]
fn bad_bloom_options_are_rejected() {
    let env = Env::new();
    let mut o = CellStoreOptions::default();
    o.bloom.false_positive = 0.0;
    assert!(matches!(
        CellStoreWriter::create(&env.fs, "/a", o),
        Err(Error::InvalidInput(_))
    ));
    let mut o = CellStoreOptions::default();
    o.bloom.num_hashes = Some(0);
    assert!(matches!(
        CellStoreWriter::create(&env.fs, "/b", o),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn flipped_data_block_byte_is_a_checksum_error_naming_file_and_offset() {
    let env = Env::new();
    let model = simple_cells(2_000, 30);
    let t = write(
        &env,
        "/dir/cs",
        opts(2048, Compressor::Lz4, BloomFilterMode::Rows),
        &model,
    );
    let real = env.real("/dir/cs");
    let good = std::fs::read(&real).unwrap();
    let offsets = data_block_offsets(&good, t.index_offset);
    let target = offsets[offsets.len() / 2];
    for (flip_at, what) in [(target + 40, "payload"), (target + 9, "header")] {
        let mut bad = good.clone();
        bad[flip_at as usize] ^= 0x10;
        std::fs::write(&real, &bad).unwrap();
        let cs = open(&env, "/dir/cs");
        let err = scan_all(&cs, true).unwrap_err();
        match &err {
            Error::Checksum { file, offset, .. } => {
                assert_eq!(file, "/dir/cs");
                assert_eq!(*offset, target);
            }
            other => panic!("expected a checksum error for the {what}, got {other:?}"),
        }
        let msg = err.to_string();
        assert!(
            msg.contains("/dir/cs") && msg.contains(&target.to_string()),
            "{msg}"
        );
        // Blocks before the bad one are still readable.
        let mut s = cs.scanner(true);
        s.seek(model.keys().next().unwrap()).unwrap();
        assert!(s.valid());
    }
}

#[test]
fn flipped_trailer_bytes_fail_open() {
    let env = Env::new();
    write(
        &env,
        "/cs",
        CellStoreOptions::default(),
        &simple_cells(100, 10),
    );
    let real = env.real("/cs");
    let good = std::fs::read(&real).unwrap();
    for i in good.len() - TRAILER_LEN..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0x01;
        std::fs::write(&real, &bad).unwrap();
        let err = CellStore::open(&env.fs, "/cs", BlockCache::new(1 << 20)).unwrap_err();
        assert!(err.to_string().contains("/cs"), "{err}");
        assert!(
            matches!(
                err,
                Error::Checksum { .. } | Error::Corrupt { .. } | Error::UnsupportedVersion { .. }
            ),
            "{err:?}"
        );
    }
}

#[test]
fn other_format_version_is_unsupported() {
    let env = Env::new();
    write(
        &env,
        "/cs",
        CellStoreOptions::default(),
        &simple_cells(10, 10),
    );
    let real = env.real("/cs");
    let mut bytes = std::fs::read(&real).unwrap();
    let n = bytes.len();
    bytes[n - 12..n - 8].copy_from_slice(&3u32.to_le_bytes());
    std::fs::write(&real, &bytes).unwrap();
    let err = CellStore::open(&env.fs, "/cs", BlockCache::new(1 << 20)).unwrap_err();
    assert!(
        matches!(err, Error::UnsupportedVersion { version: 3, .. }),
        "{err:?}"
    );
}

#[test]
fn truncated_files_fail_open() {
    let env = Env::new();
    write(
        &env,
        "/cs",
        CellStoreOptions::default(),
        &simple_cells(500, 10),
    );
    let real = env.real("/cs");
    let good = std::fs::read(&real).unwrap();
    for len in [
        0,
        1,
        27,
        127,
        128,
        good.len() / 2,
        good.len() - 129,
        good.len() - 1,
    ] {
        std::fs::write(&real, &good[..len]).unwrap();
        assert!(
            CellStore::open(&env.fs, "/cs", BlockCache::new(1 << 20)).is_err(),
            "length {len}"
        );
    }
    // Garbage appended after a valid store is rejected too.
    let mut longer = good.clone();
    longer.extend_from_slice(&[0; 10]);
    std::fs::write(&real, &longer).unwrap();
    assert!(CellStore::open(&env.fs, "/cs", BlockCache::new(1 << 20)).is_err());
}

/// Flips random bytes anywhere in the file: open or scan must fail, or return exactly the data.
#[test]
fn random_byte_flips_never_yield_wrong_data() {
    let env = Env::new();
    let model = simple_cells(600, 25);
    let expected: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    for (i, (compressor, mode)) in [
        (Compressor::Lz4, BloomFilterMode::RowsCols),
        (Compressor::None, BloomFilterMode::Rows),
        (Compressor::Lz4, BloomFilterMode::None),
    ]
    .into_iter()
    .enumerate()
    {
        let path = format!("/cs{i}");
        write(&env, &path, opts(700, compressor, mode), &model);
        let real = env.real(&path);
        let good = std::fs::read(&real).unwrap();
        let mut rng = 0x9E37_79B9_7F4A_7C15u64 + i as u64;
        let mut errors = 0;
        for _ in 0..300 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let pos = (rng % good.len() as u64) as usize;
            let bit = 1u8 << ((rng >> 40) % 8);
            let mut bad = good.clone();
            bad[pos] ^= bit;
            std::fs::write(&real, &bad).unwrap();
            match CellStore::open(&env.fs, &path, BlockCache::new(1 << 20)) {
                Err(_) => errors += 1,
                Ok(cs) => match scan_all(&cs, true) {
                    Err(_) => errors += 1,
                    Ok(got) => assert!(got == expected, "wrong data after flipping byte {pos}"),
                },
            }
        }
        assert!(errors > 250, "{errors} of 300 flips detected");
    }
}

/// Rewrites a stored block's payload in place and fixes up both checksums, as a malicious or
/// buggy writer would: the reader must report corruption (or return some data), never panic.
fn forge_block(bytes: &mut [u8], off: usize, mutate: impl FnOnce(&mut [u8])) {
    let stored = u32::from_le_bytes(bytes[off + 12..off + 16].try_into().unwrap()) as usize;
    mutate(&mut bytes[off + 28..off + 28 + stored]);
    let crc = crc32c::crc32c(&bytes[off + 28..off + 28 + stored]);
    bytes[off + 20..off + 24].copy_from_slice(&crc.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[off..off + 24]);
    bytes[off + 24..off + 28].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn garbage_with_valid_checksums_never_panics() {
    let env = Env::new();
    let model = simple_cells(400, 20);
    let t = write(
        &env,
        "/cs",
        opts(600, Compressor::None, BloomFilterMode::Rows),
        &model,
    );
    let real = env.real("/cs");
    let good = std::fs::read(&real).unwrap();
    let offsets = data_block_offsets(&good, t.index_offset);
    let mut rng = 0xDEAD_BEEF_u64;
    let mut rand = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut detected = 0;
    for round in 0..400 {
        let mut bad = good.clone();
        let off = offsets[round % offsets.len()] as usize;
        let (a, b) = (rand(), rand());
        forge_block(&mut bad, off, |p| match round % 4 {
            // One random byte, anywhere (varints, keys, restart array).
            0 => p[(a % p.len() as u64) as usize] = b as u8,
            // Restart count or a restart offset.
            1 => {
                let n = p.len();
                p[n - 1 - (a % 12) as usize] = b as u8;
            }
            // A run of garbage.
            2 => {
                let start = (a % p.len() as u64) as usize;
                for (i, x) in p[start..].iter_mut().take(16).enumerate() {
                    *x = (b >> (i % 8 * 8)) as u8;
                }
            }
            // All garbage.
            _ => p.iter_mut().for_each(|x| *x = rand() as u8),
        });
        // Also forge the index and bloom blocks now and then.
        if round % 10 == 9 {
            forge_block(&mut bad, t.index_offset as usize, |p| {
                p[(a % p.len() as u64) as usize] ^= 0x55
            });
        }
        if round % 10 == 8 {
            forge_block(&mut bad, t.bloom_offset as usize, |p| {
                p[(a % 24) as usize] ^= 0x55
            });
        }
        std::fs::write(&real, &bad).unwrap();
        let Ok(cs) = CellStore::open(&env.fs, "/cs", BlockCache::new(1 << 20)) else {
            detected += 1;
            continue;
        };
        let mut s = cs.scanner(true);
        let mut r = s.seek(b"");
        while r.is_ok() && s.valid() {
            r = s.next();
        }
        if r.is_err() {
            detected += 1;
        }
        for k in model.keys().step_by(37) {
            let _ = s.seek(k);
        }
    }
    assert!(detected > 100, "{detected}");
}

#[test]
fn block_cache_is_bounded_and_counts_hits() {
    let env = Env::new();
    let model = simple_cells(5_000, 50);
    write(
        &env,
        "/big",
        opts(4096, Compressor::Lz4, BloomFilterMode::None),
        &model,
    );
    let cache = BlockCache::new(128 * 1024);
    assert_eq!(cache.capacity_bytes(), 128 * 1024);
    let cs = CellStore::open(&env.fs, "/big", cache.clone()).unwrap();
    assert_eq!(scan_all(&cs, true).unwrap().len(), 5_000);
    assert!(
        cache.used_bytes() <= cache.capacity_bytes(),
        "{} used",
        cache.used_bytes()
    );
    assert!(cache.used_bytes() > 0);
    let misses = cache.misses();
    assert!(misses >= cs.trailer().block_count);

    // A small store fits: the second scan is all hits.
    write(
        &env,
        "/small",
        opts(4096, Compressor::Lz4, BloomFilterMode::None),
        &simple_cells(300, 50),
    );
    let cache = BlockCache::new(1 << 20);
    let small = CellStore::open(&env.fs, "/small", cache.clone()).unwrap();
    scan_all(&small, true).unwrap();
    let hits = cache.hits();
    let mut s = small.scanner(true);
    s.seek(b"").unwrap();
    while s.valid() {
        s.next().unwrap();
    }
    assert_eq!(cache.hits() - hits, small.trailer().block_count);
    assert_eq!(s.blocks_read(), small.trailer().block_count);

    // Without fill_cache nothing new is cached, but cached blocks are used.
    let fresh = BlockCache::new(1 << 20);
    let cs = CellStore::open(&env.fs, "/small", fresh.clone()).unwrap();
    scan_all(&cs, false).unwrap();
    assert_eq!(fresh.used_bytes(), 0);
    scan_all(&cs, true).unwrap();
    let used = fresh.used_bytes();
    assert!(used > 0);
    let hits = fresh.hits();
    scan_all(&cs, false).unwrap();
    assert_eq!(fresh.hits() - hits, cs.trailer().block_count);
}

#[test]
fn scanners_share_a_store_across_threads() {
    let env = Env::new();
    let model = simple_cells(3_000, 16);
    write(
        &env,
        "/cs",
        opts(1024, Compressor::Lz4, BloomFilterMode::Rows),
        &model,
    );
    let cs = open(&env, "/cs");
    let expected: Vec<_> = model.into_iter().collect();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| assert_eq!(scan_all(&cs, true).unwrap(), expected));
        }
    });
}

#[test]
fn middle_key_is_near_the_middle() {
    let env = Env::new();
    let model = simple_cells(10_000, 20);
    write(
        &env,
        "/cs",
        opts(1024, Compressor::None, BloomFilterMode::None),
        &model,
    );
    let cs = open(&env, "/cs");
    let m = cs.middle_key().unwrap();
    let pos = model.keys().position(|k| *k == m).unwrap();
    assert!((4_500..5_500).contains(&pos), "middle key is cell {pos}");
    assert!(KeyRef::new(&m).is_ok());
}

// ---------------------------------------------------------------------------------------------
// Frozen fixtures: v1 (every key whole) and v2 (timestamps and revisions as deltas)

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
const FIXTURE_FILE: &str = "/cells-200.cs";

/// The fixtures' cells: a deterministic generator; never change it (the fixtures are frozen).
fn fixture_cells() -> Vec<(Vec<u8>, Vec<u8>)> {
    let flags = [
        CellFlag::DeleteRow,
        CellFlag::DeleteColumnFamily,
        CellFlag::DeleteCell,
        CellFlag::DeleteCellVersion,
        CellFlag::Insert,
        CellFlag::Insert,
        CellFlag::Insert,
        CellFlag::Insert,
        CellFlag::Insert,
        CellFlag::Insert,
        CellFlag::Insert,
        CellFlag::Insert,
    ];
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut model = Model::new();
    for i in 0..200u64 {
        let r = next();
        let row: Vec<u8> = match i % 10 {
            0 => format!("row\0{:03}", r % 40).into_bytes(),
            1 => Vec::new(),
            _ => format!("row-{:03}", r % 40).into_bytes(),
        };
        let flag = flags[(r >> 8) as usize % flags.len()];
        let family = if flag == CellFlag::DeleteRow {
            0
        } else {
            1 + (r >> 16) as u8 % 3
        };
        let qualifier = match flag {
            CellFlag::DeleteRow | CellFlag::DeleteColumnFamily => Vec::new(),
            _ => format!("q{}", (r >> 24) % 5).into_bytes(),
        };
        let ts = 1_700_000_000_000_000_000 + ((r >> 32) % 1000) as i64 * 1_000_000;
        let k = key(&row, family, &qualifier, ts, i as i64 + 1, flag);
        let value = match (flag, i % 4) {
            (f, _) if f.is_delete() => Vec::new(),
            (_, 0) => Vec::new(),
            (_, 1) => (0..(r % 300)).map(|j| (next() >> (j % 56)) as u8).collect(),
            _ => format!("value {i} of row {}", String::from_utf8_lossy(&row))
                .repeat(1 + (r % 4) as usize)
                .into_bytes(),
        };
        model.insert(k, value);
    }
    model.into_iter().collect()
}

fn fixture_options() -> CellStoreOptions {
    CellStoreOptions {
        blocksize_bytes: 1024,
        compressor: Compressor::Lz4,
        bloom: BloomFilterSpec {
            mode: BloomFilterMode::RowsCols,
            false_positive: 0.01,
            bits_per_item: None,
            num_hashes: None,
        },
    }
}

fn fixture_fs(version: u32) -> BlockingFs {
    BlockingFs::new(
        Arc::new(LocalFs::new(format!("{FIXTURES}/cellstore-v{version}")).unwrap()),
        runtime().handle().clone(),
    )
}

/// Writes the fixture of today's format if it is missing. Run once per format version:
/// `cargo test --test cellstore -- --ignored generate_fixture`.
#[test]
#[ignore = "generates the frozen fixture; run by hand only when creating it"]
fn generate_fixture() {
    let dir = Path::new(FIXTURES).join(format!("cellstore-v{FORMAT_VERSION}"));
    if dir.join(FIXTURE_FILE.trim_start_matches('/')).exists() {
        return;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let fs = fixture_fs(FORMAT_VERSION);
    let mut w = CellStoreWriter::create(&fs, FIXTURE_FILE, fixture_options()).unwrap();
    for (k, v) in fixture_cells() {
        w.add(&k, &v).unwrap();
    }
    println!("{:?}", w.finish().unwrap());
}

/// Reads the frozen fixture of format `version` and checks every cell, seek and bloom answer.
fn fixture_reads_exactly(version: u32) {
    let cells = fixture_cells();
    assert!(cells.len() > 150);
    let fs = fixture_fs(version);
    let cs = CellStore::open(&fs, FIXTURE_FILE, BlockCache::new(1 << 20)).expect("fixture opens");
    let t = cs.trailer();
    assert_eq!(t.version, version);
    assert_eq!(t.cell_count, cells.len() as u64);
    assert_eq!(t.compressor, Compressor::Lz4);
    assert_eq!(t.bloom_mode, BloomFilterMode::RowsCols);
    let deletes = cells
        .iter()
        .filter(|(k, _)| KeyRef::new(k).unwrap().flag().is_delete())
        .count();
    assert_eq!(t.delete_count, deletes as u64);
    assert!(t.block_count > 5);
    assert_eq!(scan_all(&cs, true).unwrap(), cells);
    for (k, _) in &cells {
        let r = KeyRef::new(k).unwrap();
        assert!(cs.may_contain_cell(&r.row(), r.family(), &r.qualifier()));
        let mut s = cs.scanner(false);
        s.seek(k).unwrap();
        assert_eq!(s.key(), k.as_slice());
    }
}

#[test]
fn frozen_fixture_v1_reads_exactly() {
    fixture_reads_exactly(1);
}

#[test]
fn frozen_fixture_v2_reads_exactly_and_is_what_the_writer_writes() {
    assert_eq!(
        FORMAT_VERSION, 2,
        "a new format needs its own frozen fixture"
    );
    fixture_reads_exactly(2);
    // Writing the same cells today gives the same bytes: the format has not drifted.
    let env = Env::new();
    let model: Model = fixture_cells().into_iter().collect();
    write(&env, "/again", fixture_options(), &model);
    let now = std::fs::read(env.real("/again")).unwrap();
    let frozen =
        std::fs::read(Path::new(FIXTURES).join(format!("cellstore-v2{FIXTURE_FILE}"))).unwrap();
    assert!(
        now == frozen,
        "the writer's output differs from the frozen v2 fixture: if the v2 layout is unchanged \
         (e.g. a new block-split policy), this byte check may be relaxed, but never the read check above"
    );
}

/// Rough throughput figures: `cargo test --release --test cellstore -- --ignored perf --nocapture`.
#[test]
#[ignore = "timing only"]
fn perf_write_scan_seek() {
    let env = Env::new();
    let n = 1_000_000usize;
    // Values: half random bytes, half text, so lz4 has realistic work.
    let mut x = 0x1234_5678_9ABC_DEF1u64;
    let values: Vec<Vec<u8>> = (0..1024)
        .map(|_| {
            let mut v: Vec<u8> = (0..50)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            v.extend_from_slice(b"some text value, repeated words, value text..........");
            v.truncate(100);
            v
        })
        .collect();
    let mut keys = Vec::with_capacity(n);
    for i in 0..n {
        keys.push(key(
            format!("row-{:010}", i / 4).as_bytes(),
            1,
            format!("q{}", i % 4).as_bytes(),
            1,
            1,
            CellFlag::Insert,
        ));
    }
    for compressor in [Compressor::Lz4, Compressor::None] {
        let path = format!("/perf-{compressor:?}");
        let start = std::time::Instant::now();
        let mut w = CellStoreWriter::create(
            &env.fs,
            &path,
            opts(64 * 1024, compressor, BloomFilterMode::Rows),
        )
        .unwrap();
        for (i, k) in keys.iter().enumerate() {
            w.add(k, &values[i % values.len()]).unwrap();
        }
        let t = w.finish().unwrap();
        let secs = start.elapsed().as_secs_f64();
        let raw = (t.key_bytes + t.value_bytes) as f64 / 1e6;
        println!(
            "{compressor:?}: write {n} cells, {raw:.0} MB raw, {:.1} MB file in {secs:.2}s: {:.0} MB/s raw, {:.2} M cells/s",
            t.file_size as f64 / 1e6,
            raw / secs,
            n as f64 / secs / 1e6
        );
        let cs = CellStore::open(&env.fs, &path, BlockCache::new(1 << 30)).unwrap();
        for pass in ["cold", "cached"] {
            let start = std::time::Instant::now();
            let mut s = cs.scanner(true);
            s.seek(b"").unwrap();
            let mut count = 0u64;
            let mut bytes = 0usize;
            while s.valid() {
                count += 1;
                bytes += s.key().len() + s.value().len();
                s.next().unwrap();
            }
            assert_eq!(count, n as u64);
            let secs = start.elapsed().as_secs_f64();
            println!(
                "  scan ({pass}): {:.2} M cells/s ({bytes} bytes)",
                count as f64 / secs / 1e6
            );
        }
        let start = std::time::Instant::now();
        let mut s = cs.scanner(true);
        let mut x = 12345u64;
        let seeks = 200_000;
        for _ in 0..seeks {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = &keys[(x % n as u64) as usize];
            s.seek(k).unwrap();
            assert_eq!(s.key(), k.as_slice());
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "  random seeks (cached): {:.0} K/s",
            seeks as f64 / secs / 1e3
        );
    }
}

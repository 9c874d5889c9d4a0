//! Corruption tests of the cell store format (issue 12, docs/formats/cellstore.md): every byte
//! of small real stores flipped, truncations at every block boundary and elsewhere, the file
//! deleted; opening and scanning the damaged copy must give exactly the original cells (and
//! trailer and bloom answers) or an error naming the file, and the offset for damaged bytes.

#[path = "../../testsupport/corrupt.rs"]
mod corrupt;

use std::path::Path;
use std::sync::{Arc, OnceLock};

use common::{BloomFilterMode, BloomFilterSpec, CellFlag, Compressor, Key};
use corrupt::{Damage, Plan};
use dfs_broker::{BlockingFs, LocalFs};
use rangeserver::block_cache::BlockCache;
use rangeserver::cellstore::{CellStore, CellStoreOptions, CellStoreWriter, TRAILER_LEN, Trailer};
use rangeserver::iter::CellIter;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Runtime::new().expect("runtime"))
}

fn fs_at(dir: &Path) -> BlockingFs {
    let fs = LocalFs::new(dir).expect("local fs");
    BlockingFs::new(Arc::new(fs), runtime().handle().clone())
}

type Cells = Vec<(Vec<u8>, Vec<u8>)>;

/// What a reader gets out of a store: every cell in order, the trailer (the engine recovers
/// revisions and statistics from it) and the bloom filter's answer for every row written.
#[derive(Debug, PartialEq)]
struct Read {
    cells: Cells,
    trailer: Trailer,
    rows_present: Vec<bool>,
}

/// Cells of `rows` rows, two qualifiers each, a delete among them; values of varied length.
fn cells(rows: usize) -> Cells {
    let mut out = Vec::new();
    for r in 0..rows {
        let row = format!("row-{r:04}").into_bytes();
        for (q, flag) in [(&b"a"[..], CellFlag::Insert), (&b"b"[..], CellFlag::Insert)] {
            let k = Key {
                row: row.clone(),
                family: 1,
                qualifier: q.to_vec(),
                timestamp: 1_000 + r as i64,
                revision: 10 + r as i64,
                flag,
            };
            let v = format!("v{r}-{}", String::from_utf8_lossy(q)).repeat(1 + r % 4);
            out.push((k.encode(), v.into_bytes()));
        }
        if r % 7 == 3 {
            let k = Key {
                row: row.clone(),
                family: 2,
                qualifier: Vec::new(),
                timestamp: 500,
                revision: 5,
                flag: CellFlag::DeleteRow,
            };
            out.push((k.encode(), Vec::new()));
        }
    }
    out.sort();
    out
}

fn rows(cells: &Cells) -> Vec<Vec<u8>> {
    let mut rows: Vec<Vec<u8>> = cells
        .iter()
        .map(|(k, _)| Key::decode(k).expect("a valid key").row)
        .collect();
    rows.dedup();
    rows
}

/// Opens `path` under `dir` and reads everything a caller can read from it.
fn read_store(dir: &Path, path: &str, rows: &[Vec<u8>]) -> rangeserver::Result<Read> {
    let fs = fs_at(dir);
    let cs = CellStore::open(&fs, path, BlockCache::new(1 << 20))?;
    let mut s = cs.scanner(false);
    s.seek(b"")?;
    let mut cells = Vec::new();
    while s.valid() {
        cells.push((s.key().to_vec(), s.value().to_vec()));
        s.next()?;
    }
    Ok(Read {
        cells,
        trailer: cs.trailer().clone(),
        rows_present: rows.iter().map(|r| cs.may_contain_row(r)).collect(),
    })
}

/// Block starts of a store: data blocks (walked through their headers), index, bloom, trailer.
fn boundaries(bytes: &[u8], t: &Trailer) -> Vec<u64> {
    let mut out = Vec::new();
    let mut off = 0u64;
    while off < t.index_offset {
        out.push(off);
        let h = &bytes[off as usize..off as usize + 28];
        assert_eq!(&h[0..4], b"CSDB");
        off += 28 + u64::from(u32::from_le_bytes(h[12..16].try_into().expect("4 bytes")));
    }
    out.extend([
        t.index_offset,
        t.bloom_offset,
        t.file_size - TRAILER_LEN as u64,
    ]);
    out.retain(|&b| b > 0);
    out
}

/// Writes one store into `pristine/cs/<name>`, runs every damage on it (every byte flipped, or
/// `sample` seeded bytes plus the first bytes of every block), and returns the report.
fn corrupt_store(
    name: &str,
    o: CellStoreOptions,
    rows_n: usize,
    sample: Option<usize>,
) -> corrupt::Report {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pristine = tmp.path().join("pristine");
    std::fs::create_dir_all(&pristine).expect("mkdir");
    let path = format!("/cs/{name}");
    let cells = cells(rows_n);
    let trailer = {
        let fs = fs_at(&pristine);
        let mut w = CellStoreWriter::create(&fs, &path, o).expect("create");
        for (k, v) in &cells {
            w.add(k, v).expect("add");
        }
        w.finish().expect("finish")
    };
    assert!(trailer.block_count >= 4, "{name}: want several blocks");
    let rows = rows(&cells);
    let expected = Read {
        cells: cells.clone(),
        trailer: trailer.clone(),
        rows_present: vec![true; rows.len()],
    };
    let file = Path::new("cs").join(name);
    let bytes = std::fs::read(pristine.join(&file)).expect("read store");
    let len = bytes.len() as u64;
    assert!(len < 16 << 10, "{name}: {len} bytes is not a small file");
    let bounds = boundaries(&bytes, &trailer);
    let plan = match sample {
        None => Plan::new().flip_every_byte(len),
        Some(n) => {
            let heads: Vec<u64> = std::iter::once(0)
                .chain(bounds.iter().copied())
                .flat_map(|b| b..b + 28)
                .chain(len - TRAILER_LEN as u64..len)
                .collect();
            Plan::new().flip_sample(len, n, &heads)
        }
    };
    let plan = plan.truncate_at(len, &bounds, 8).delete();
    let report = corrupt::run_with(
        &format!("cell store {name}"),
        &pristine,
        &file,
        &expected,
        &plan,
        |dir| read_store(dir, &path, &rows),
        |damage, msg| {
            if !msg.contains(name) {
                return Err(format!("the error does not name {name}"));
            }
            // A damaged byte or a cut is found at a place the reader knows.
            if damage != Damage::Delete && !msg.contains("offset") && !msg.contains("version") {
                return Err("the error does not give the offset".into());
            }
            Ok(())
        },
    );
    // Every byte of a cell store is covered by a checksum: no flip goes unnoticed.
    assert!(
        report.identical_damages.is_empty(),
        "{name}: flips that changed nothing: {:?}",
        report.identical_damages
    );
    report
}

fn options(compressor: Compressor, mode: BloomFilterMode) -> CellStoreOptions {
    CellStoreOptions {
        blocksize_bytes: 256,
        compressor,
        bloom: BloomFilterSpec {
            mode,
            ..BloomFilterSpec::default()
        },
    }
}

#[test]
fn every_damage_of_an_lz4_store_with_a_rows_filter_is_an_error_naming_file_and_offset() {
    let r = corrupt_store(
        "lz4-rows.cs",
        options(Compressor::Lz4, BloomFilterMode::Rows),
        24,
        None,
    );
    assert!(r.errors > 1000, "{r:?}");
}

#[test]
fn sampled_damage_of_a_raw_store_with_a_rows_cols_filter_is_an_error_naming_file_and_offset() {
    let r = corrupt_store(
        "raw-rowscols.cs",
        options(Compressor::None, BloomFilterMode::RowsCols),
        24,
        Some(250),
    );
    assert!(r.errors > 400, "{r:?}");
}

#[test]
fn sampled_damage_of_a_store_without_a_filter_is_an_error_naming_file_and_offset() {
    let r = corrupt_store(
        "nofilter.cs",
        options(Compressor::Lz4, BloomFilterMode::None),
        20,
        Some(250),
    );
    assert!(r.errors > 400, "{r:?}");
}

/// A store opened before its data block was damaged: the scan that reaches the block fails
/// with the file and the block's offset, after returning only the cells of earlier blocks.
#[test]
fn a_scan_reaching_a_damaged_block_errors_naming_file_and_block_offset() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let path = "/cs/scan.cs";
    let cells = cells(60);
    let trailer = {
        let fs = fs_at(dir);
        let mut w =
            CellStoreWriter::create(&fs, path, options(Compressor::Lz4, BloomFilterMode::Rows))
                .expect("create");
        for (k, v) in &cells {
            w.add(k, v).expect("add");
        }
        w.finish().expect("finish")
    };
    let real = dir.join("cs/scan.cs");
    let bytes = std::fs::read(&real).expect("read");
    let blocks = boundaries(&bytes, &trailer);
    let third = blocks[1];
    let fs = fs_at(dir);
    let cs = CellStore::open(&fs, path, BlockCache::new(1 << 20)).expect("open");
    let mut bad = bytes.clone();
    bad[third as usize + 30] ^= 0x08;
    std::fs::write(&real, &bad).expect("write");
    let mut s = cs.scanner(false);
    let mut got = 0usize;
    let err = (|| {
        s.seek(b"")?;
        while s.valid() {
            assert_eq!(s.key(), cells[got].0.as_slice(), "cell {got}");
            got += 1;
            s.next()?;
        }
        Ok::<(), rangeserver::Error>(())
    })()
    .expect_err("the damaged block must fail the scan");
    let msg = err.to_string();
    assert!(
        msg.contains("/cs/scan.cs") && msg.contains(&format!("offset {third}")),
        "{msg}"
    );
    assert!(got > 0 && got < cells.len(), "{got} cells before the error");
}

/// A stored value its family's combiner cannot read, in a block whose checksum is right (what
/// a bug or a foreign store would leave), fails a scan and a major compaction's read alike,
/// naming the store and the offset of the block that holds the cell.
#[test]
fn an_unreadable_combined_value_names_its_store_and_block() {
    use rangeserver::iterators::Registry;
    use rangeserver::scan::visible::{FamilyRule, Mode, VisibleCells, VisibleOptions};

    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let path = "/cs/sums.cs";
    let bad_row = b"row-0041".to_vec();
    let cells: Cells = (0..80)
        .map(|r| {
            let row = format!("row-{r:04}").into_bytes();
            let k = Key {
                row: row.clone(),
                family: 1,
                qualifier: Vec::new(),
                timestamp: 1_000 + r,
                revision: 10 + r,
                flag: CellFlag::Insert,
            };
            // fixed64 values are 8 bytes; this one is 3.
            let v = if row == bad_row {
                b"abc".to_vec()
            } else {
                r.to_be_bytes().to_vec()
            };
            (k.encode(), v)
        })
        .collect();
    let trailer = {
        let fs = fs_at(dir);
        let mut w =
            CellStoreWriter::create(&fs, path, options(Compressor::None, BloomFilterMode::None))
                .expect("create");
        for (k, v) in &cells {
            w.add(k, v).expect("add");
        }
        w.finish().expect("finish")
    };
    let bytes = std::fs::read(dir.join("cs/sums.cs")).expect("read");
    let blocks = boundaries(&bytes, &trailer);
    // Raw blocks: the bad value is in the file as written (keys are prefix-compressed).
    let at = bytes
        .windows(3)
        .position(|w| w == b"abc")
        .expect("the value is stored uncompressed") as u64;
    let block = std::iter::once(0)
        .chain(blocks)
        .filter(|&b| b <= at)
        .max()
        .expect("a block holds it");
    assert!(block > 0, "the bad cell should not be in the first block");

    let sum = Registry::builtins()
        .combiner("sum")
        .expect("sum is built in")
        .build(&[("ENCODING".to_string(), "fixed64".to_string())].into())
        .expect("fixed64 sum");
    let mut rules = vec![FamilyRule::unselected(); 256];
    rules[1] = FamilyRule {
        selected: true,
        combiner: Some(sum),
        ..FamilyRule::unselected()
    };
    let fs = fs_at(dir);
    let cs = CellStore::open(&fs, path, BlockCache::new(1 << 20)).expect("open");
    for mode in [Mode::Scan, Mode::MajorCompaction] {
        let mut v = VisibleCells::new(
            cs.scanner(false),
            VisibleOptions {
                families: Arc::new(rules.clone()),
                time_start: i64::MIN,
                time_end: i64::MAX,
                now_ns: 0,
                return_deletes: false,
                mode,
                snapshot_rev: i64::MAX,
            },
        );
        let mut got = 0usize;
        let err = (|| {
            v.seek(b"")?;
            while v.valid() {
                got += 1;
                v.next()?;
            }
            Ok::<(), rangeserver::Error>(())
        })()
        .expect_err("the unreadable value must fail the read");
        match err {
            rangeserver::Error::Corrupt { file, offset, msg } => {
                assert_eq!(file, path, "{mode:?}: {msg}");
                assert_eq!(offset, block, "{mode:?}: {msg}");
                assert!(msg.contains("row-0041"), "{mode:?}: {msg}");
            }
            e => panic!("{mode:?}: not a Corrupt error: {e}"),
        }
        assert_eq!(
            got, 41,
            "{mode:?}: the cells before the bad one are returned"
        );
    }
}

//! The fuzz targets (fuzz/) without a fuzzer: every seed in `fuzz/corpus/<target>/` and every
//! crash reproducer kept in `fuzz/regressions/<target>/` runs through its target's function,
//! uninstrumented, so a bug a fuzzer found stays fixed. The seeds themselves are real files made
//! by the code (`seeds_are_real_files`; `fuzz/seed.sh` rewrites them).

#[path = "../../fuzz/src/targets.rs"]
#[allow(dead_code)]
mod targets;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.expect("corpus directory entry").path())
            .filter(|p| p.is_file())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("{}: {e}", dir.display()),
    };
    out.sort();
    out
}

/// Runs `f` on `data`; the panic message if it panicked.
fn run(f: fn(&[u8]), data: &[u8]) -> Option<String> {
    std::panic::catch_unwind(|| f(data)).err().map(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a non-string panic".into())
    })
}

#[test]
fn every_seed_and_kept_reproducer_runs_clean() {
    let dir = fuzz_dir();
    let mut failures = Vec::new();
    for &(name, f) in targets::TARGETS {
        let seeds = files(&dir.join("corpus").join(name));
        assert!(!seeds.is_empty(), "fuzz target {name} has no seed corpus");
        let kept = files(&dir.join("regressions").join(name));
        for path in seeds.iter().chain(&kept) {
            let data = std::fs::read(path).expect("corpus file");
            if let Some(msg) = run(f, &data) {
                failures.push(format!("{}: {msg}", path.display()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "failing inputs:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_target_has_a_fuzz_binary() {
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("fuzz/Cargo.toml");
    for &(name, _) in targets::TARGETS {
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "fuzz/Cargo.toml has no [[bin]] {name}"
        );
        let src = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&src).unwrap_or_default();
        assert!(
            text.contains(&format!("ht_fuzz::{name}(data)")),
            "{} does not call ht_fuzz::{name}",
            src.display()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Seeds: small real files made by the code itself.

/// Every file under `dir`, by path relative to it.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).expect("under dir");
                out.insert(
                    rel.to_string_lossy().into_owned(),
                    std::fs::read(&p).expect("read"),
                );
            }
        }
    }
    out
}

/// Files of `t` whose relative path matches `pred`, concatenated in name order (numbered names
/// sorted by number).
fn concat(t: &BTreeMap<String, Vec<u8>>, pred: impl Fn(&str) -> bool) -> Vec<u8> {
    let mut names: Vec<&String> = t.keys().filter(|k| pred(k)).collect();
    names.sort_by_key(|k| {
        let digits: String = k.chars().filter(|c| c.is_ascii_digit()).collect();
        (digits.parse::<u128>().unwrap_or(0), (*k).clone())
    });
    names.iter().flat_map(|k| t[*k].clone()).collect()
}

/// An embedded database after a short HQL session: the files of every format it writes.
fn embedded_files(tmp: &Path) -> BTreeMap<String, Vec<u8>> {
    let data = tmp.join("db");
    let client =
        embedded::EmbeddedClient::open(&data, Default::default()).expect("embedded database");
    let client: Arc<dyn client::Client> = Arc::new(client);
    let script = r#"
CREATE TABLE t (a MAX_VERSIONS 2, b, c COUNTER,
  ACCESS GROUP raw (b) COMPRESSOR "none" BLOOMFILTER "rows+cols");
INSERT INTO t VALUES ("r1", "a:x", "one"), ("r1", "a:y", "two"), ("r2", "b", "three"),
  ("2024-01-02 03:04:05", "r3", "a:z", "four"), ("r4", "c", "+5");
DELETE "a:x" FROM t WHERE ROW = "r1";
COMPACT TYPE=MAJOR TABLE t;
INSERT INTO t VALUES ("r5", "a", "five"), ("r6", "b:q", "six");
"#;
    let out = hql::golden::run_script(client.clone(), script, &tmp.join("script"));
    assert!(!out.contains("rror"), "seed script failed: {out}");
    client.close().expect("close");
    drop(client);
    tree(&data)
}

fn hyperspace_state_seed() -> Vec<u8> {
    use hyperspace::command::{Command, CreateSession, Lock, Mkdir, Op, Open, flags};
    use hyperspace::state::{Limits, StateMachine};
    let mut sm = StateMachine::new(Limits::default());
    let ops = [
        (
            0,
            Op::CreateSession(CreateSession {
                nonce: 7,
                lease_ms: 1000,
            }),
        ),
        (
            1,
            Op::Mkdir(Mkdir {
                path: "/ht".into(),
                parents: true,
            }),
        ),
        (
            1,
            Op::Open(Open {
                path: "/ht/master".into(),
                flags: flags::READ | flags::WRITE | flags::CREATE | flags::LOCK,
                event_mask: 0,
                initial_attrs: Vec::new(),
            }),
        ),
        (
            1,
            Op::Lock(Lock {
                handle: 1,
                mode: 2,
                try_lock: true,
            }),
        ),
    ];
    for (seq, (session, op)) in ops.into_iter().enumerate() {
        let seq = seq as u64 + 1;
        sm.apply(&Command {
            session,
            seq,
            first_incomplete: seq,
            op: Some(op),
        });
    }
    sm.snapshot()
}

fn rpc_seed() -> Vec<u8> {
    use rpc::frame::{RequestEnvelope, ResponseEnvelope, encode};
    let mut out = Vec::new();
    let req = RequestEnvelope {
        method: "rs.scan".into(),
        payload: bytes::Bytes::from_static(b"\x08\x01\x12\x03abc"),
        stream: true,
    };
    out.extend_from_slice(&encode(&req, 1 << 20).expect("request frame"));
    let ok = ResponseEnvelope::ok(bytes::Bytes::from_static(b"\x0a\x02hi"));
    out.extend_from_slice(&encode(&ok, 1 << 20).expect("response frame"));
    let err = ResponseEnvelope::err(common::ErrorKind::NotFound, "table 7 is not here".into());
    out.extend_from_slice(&encode(&err, 1 << 20).expect("response frame"));
    out
}

fn mutations() -> Vec<common::Mutation> {
    use common::key::CellFlag;
    let m =
        |row: &[u8], family, qualifier: &[u8], timestamp, flag, value: &[u8]| common::Mutation {
            row: row.to_vec(),
            family,
            qualifier: qualifier.to_vec(),
            timestamp,
            flag,
            value: value.to_vec(),
        };
    vec![
        m(b"row1", 1, b"q", None, CellFlag::Insert, b"value"),
        m(b"row1", 2, b"", Some(1_700_000_000), CellFlag::Insert, b""),
        m(b"r\x00w", 3, b"qq", Some(-5), CellFlag::DeleteCell, b""),
        m(b"row2", 0, b"", None, CellFlag::DeleteRow, b""),
    ]
}

fn packed_update_seed() -> Vec<u8> {
    let cells = mutations();
    let mut out = (cells.len() as u32).to_le_bytes().to_vec();
    proto::rs::messages::encode_cells(&cells, &mut out);
    out
}

fn packed_scan_seed() -> Vec<u8> {
    let cells = mutations();
    let mut out = (cells.len() as u32).to_le_bytes().to_vec();
    for (i, m) in cells.iter().enumerate() {
        let key = common::key::Key {
            row: m.row.clone(),
            family: m.family,
            qualifier: m.qualifier.clone(),
            timestamp: m.timestamp.unwrap_or(42),
            revision: 100 + i as i64,
            flag: m.flag,
        }
        .encode();
        let k = common::key::KeyRef::new(&key).expect("an encoded key decodes");
        proto::rs::messages::encode_scan_cell(&k, &m.value, &mut out);
    }
    out
}

fn set_value_seeds() -> Vec<Vec<u8>> {
    use rangeserver::iterators::combine::SetValue;
    let sets = [
        SetValue {
            ignore: false,
            count: 3,
            members: vec![b"d1".to_vec(), b"d5".to_vec(), b"d9".to_vec()],
        },
        SetValue {
            ignore: true,
            count: 7,
            members: Vec::new(),
        },
    ];
    sets.iter()
        .map(|s| {
            let mut out = Vec::new();
            s.encode(&mut out);
            out
        })
        .chain([b"doc-1".to_vec()])
        .collect()
}

/// Scan specs as `rs.scan` carries them: intervals, columns, limits, a scan iterator (tag 17)
/// and value predicates (tag 18).
fn scan_spec_seeds() -> Vec<Vec<u8>> {
    use common::iterators::{ScanIterator, ValuePredicate, ValuePredicates, ValueTest};
    use common::scan_spec::{ColumnSelector, QualifierMatch, RowInterval, ScanSpec};
    use prost::Message;
    let mut with_all = ScanSpec {
        row_intervals: vec![RowInterval::row(b"r1".to_vec())],
        columns: vec![ColumnSelector {
            family: 1,
            qualifier: QualifierMatch::All,
        }],
        row_limit: 10,
        ..ScanSpec::default()
    };
    with_all.iterators = vec![ScanIterator {
        kind: "value_regex".into(),
        options: [("REGEX".to_string(), "^k".to_string())].into(),
    }];
    with_all.value_predicates = Some(ValuePredicates {
        tests: vec![
            ValuePredicate {
                family: 1,
                qualifier: None,
                test: ValueTest::Equals(b"keep".to_vec()),
            },
            ValuePredicate {
                family: 1,
                qualifier: Some(b"q".to_vec()),
                test: ValueTest::Prefix(b"pre".to_vec()),
            },
        ],
        output: Vec::new(),
    });
    [ScanSpec::default(), with_all]
        .iter()
        .map(|s| proto::rs::messages::WireScanSpec::from(s).encode_to_vec())
        .collect()
}

/// Skips of `ROW KEY (objectid UINT(3), fieldtype CHAR(2))` (objectid in two ranges,
/// fieldtype F1 or any) with rows that fit the layout and some that do not.
fn row_skip_seeds() -> Vec<Vec<u8>> {
    use std::ops::Bound::{Excluded, Included, Unbounded};

    use common::row_key::{PartLayout, RowSkip};
    use prost::Message;
    let v = |s: &str| s.as_bytes().to_vec();
    let layout = vec![
        PartLayout {
            width: Some(3),
            digits: true,
        },
        PartLayout {
            width: Some(2),
            digits: false,
        },
    ];
    let rows =
        "000 F1\n001 F2\n004 F1\n005 F1\n009 F2\n010 F1\n012 F1\n01 F1\n013F1\n020 F1\n999 F1";
    [
        vec![
            vec![
                (Included(v("001")), Excluded(v("005"))),
                (Included(v("010")), Unbounded),
            ],
            vec![(Included(v("F1")), Included(v("F1")))],
        ],
        vec![vec![(Excluded(v("004")), Included(v("012")))], Vec::new()],
    ]
    .into_iter()
    .map(|slots| {
        let skip = RowSkip {
            layout: layout.clone(),
            slots,
        };
        let wire = proto::rs::messages::WireRowSkip::from(&skip).encode_to_vec();
        let mut out = (wire.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&wire);
        out.extend_from_slice(rows.as_bytes());
        out
    })
    .collect()
}

fn oplog_seed() -> Vec<u8> {
    use chunkfs::Layout;
    use chunkfs::meta::namespace::{BlockMeta, Op};
    use chunkfs::meta::oplog::encode_record;
    let ops = [
        Op::Mkdirs {
            path: "/ht/log".into(),
        },
        Op::Create {
            path: "/ht/log/0".into(),
            file_id: 1,
            overwrite: false,
        },
        Op::AddBlock {
            file_id: 1,
            block: BlockMeta {
                id: 2,
                len: 0,
                layout: Layout::Replicated { replicas: 3 },
                chunks: vec![3],
                complete: false,
            },
        },
        Op::SetLength {
            file_id: 1,
            block_id: 2,
            len: 4096,
            complete: true,
        },
        Op::Close { file_id: 1 },
        Op::Rename {
            from: "/ht/log/0".into(),
            to: "/ht/log/1".into(),
        },
        Op::Remove {
            path: "/ht/log/1".into(),
        },
        Op::Rmdir {
            path: "/ht".into(),
            recursive: true,
        },
    ];
    ops.iter().flat_map(encode_record).collect()
}

/// Manifest objects of a file written in three flushes to an object store on disk.
fn manifest_seeds(tmp: &Path) -> Vec<Vec<u8>> {
    use dfs_broker::{AppendFlag, BlockingFs};
    let root = tmp.join("objstore");
    std::fs::create_dir_all(&root).expect("objstore dir");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let url = format!("file://{}", root.display());
    let fs = dfs_broker::objstore::ObjectStoreFs::from_url(&url, Default::default())
        .expect("object store");
    let fs = BlockingFs::new(Arc::new(fs), rt.handle().clone());
    let mut w = fs.create("/dir/file", false).expect("create");
    for chunk in [&b"first"[..], b"second part", b"3"] {
        w.append(chunk, AppendFlag::Flush).expect("append");
    }
    w.close().expect("close");
    fs.create("/empty", false)
        .expect("create")
        .close()
        .expect("close");
    let t = tree(&root);
    t.iter()
        .filter(|(k, _)| k.starts_with("files/") && !k.ends_with(".dir"))
        .map(|(_, v)| v.clone())
        .collect()
}

fn tsv_seeds() -> Vec<Vec<u8>> {
    let golden = hql::golden::dir().join("data");
    let mut out = Vec::new();
    for path in files(&golden) {
        let data = std::fs::read(&path).expect("golden data file");
        // Options byte 0: defaults, the table's families a, b, c (counter).
        out.push([&[0u8][..], &data].concat());
    }
    out.push(b"\x10#a\tk\tt\tb\n01\tkey\t2024-01-01 00:00:00\tv\n7\tx\t5\tw\n".to_vec());
    out.push(b"\x41r\tc:q\tv\tDELETE_CELL\nr\\n2\tb\tx\\ty\n".to_vec());
    out
}

/// Each statement of the golden HQL scripts, as its text.
fn hql_seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (_, path) in hql::golden::scripts() {
        let text = std::fs::read_to_string(&path).expect("golden script");
        if let Ok(stmts) = hql::parse_script(&text) {
            for (_, span) in stmts {
                out.push(text[span].trim().as_bytes().to_vec());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The seeds of every target, made now by the code.
fn make_seeds(tmp: &Path) -> BTreeMap<&'static str, Vec<Vec<u8>>> {
    let db = embedded_files(tmp);
    let stores: Vec<Vec<u8>> = db
        .iter()
        .filter(|(k, _)| k.contains("/cs"))
        .map(|(_, v)| v.clone())
        .collect();
    assert!(!stores.is_empty(), "no cell store in {:?}", db.keys());
    // The first data block of each store: its header says how long it is.
    let blocks: Vec<Vec<u8>> = stores
        .iter()
        .map(|s| {
            let stored = u32::from_le_bytes(s[12..16].try_into().expect("4 bytes")) as usize;
            s[..28 + stored].to_vec()
        })
        .collect();
    let log = concat(&db, |k| k.starts_with("ht/log/"));
    let meta = concat(&db, |k| k.starts_with("ht/meta/"));
    let hs = concat(&db, |k| k.starts_with("hyperspace/") && k.ends_with("log"));
    let mut seeds = BTreeMap::new();
    seeds.insert("cellstore_block", blocks);
    seeds.insert("cellstore_file", stores);
    seeds.insert("commitlog_replay", vec![log]);
    seeds.insert("metalog_read", vec![meta]);
    seeds.insert("hyperspace_log", vec![hs]);
    seeds.insert("hyperspace_state", vec![hyperspace_state_seed()]);
    seeds.insert("rpc_frame", vec![rpc_seed()]);
    seeds.insert("packed_update_cells", vec![packed_update_seed()]);
    seeds.insert("packed_scan_cells", vec![packed_scan_seed()]);
    seeds.insert("chunkfs_oplog", vec![oplog_seed()]);
    seeds.insert("objstore_manifest", manifest_seeds(tmp));
    seeds.insert("tsv_lines", tsv_seeds());
    seeds.insert("hql_roundtrip", hql_seeds());
    seeds.insert("set_value", set_value_seeds());
    seeds.insert("scan_spec_wire", scan_spec_seeds());
    seeds.insert("row_skip_navigate", row_skip_seeds());
    seeds
}

/// The seeds are real: each decodes without error where the format is checked, every target
/// runs clean on them, and every target has some. With `HT_FUZZ_WRITE_SEEDS=1` (fuzz/seed.sh)
/// they replace the committed `seed-*` files of fuzz/corpus/.
#[test]
fn seeds_are_real_files() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let seeds = make_seeds(tmp.path());
    for &(name, f) in targets::TARGETS {
        let list = seeds
            .get(name)
            .unwrap_or_else(|| panic!("no seeds for {name}"));
        assert!(!list.is_empty(), "no seeds for {name}");
        for s in list {
            assert!(run(f, s).is_none(), "{name} panics on its own seed");
        }
    }
    // The formats with checks accept their seeds.
    let cs = &seeds["cellstore_file"][0];
    let dir = tmp.path().join("check");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("s.cs"), cs).expect("write");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let fs = dfs_broker::BlockingFs::new(
        Arc::new(dfs_broker::LocalFs::new(&dir).expect("local fs")),
        rt.handle().clone(),
    );
    rangeserver::cellstore::CellStore::open(
        &fs,
        "/s.cs",
        rangeserver::block_cache::BlockCache::new(1 << 20),
    )
    .expect("the cell-store seed opens");
    let st = hyperspace::state::StateMachine::restore(
        &seeds["hyperspace_state"][0],
        hyperspace::state::Limits::default(),
    )
    .expect("the state seed restores");
    assert!(st.session_count() == 1, "the state seed holds its session");
    let (ops, good, bad) = chunkfs::meta::oplog::decode_records(&seeds["chunkfs_oplog"][0]);
    assert_eq!(
        (ops.len(), good, bad),
        (8, seeds["chunkfs_oplog"][0].len(), None)
    );
    for m in &seeds["objstore_manifest"] {
        dfs_broker::objstore::manifest_file_length(m).expect("the manifest seed decodes");
    }
    assert!(seeds["hql_roundtrip"].len() > 20, "too few HQL statements");
    let total: usize = seeds.values().flatten().map(Vec::len).sum();
    assert!(
        total < 2 << 20,
        "seed corpus of {total} bytes is over 2 MiB"
    );

    if std::env::var_os("HT_FUZZ_WRITE_SEEDS").is_some() {
        for (name, list) in &seeds {
            let dir = fuzz_dir().join("corpus").join(name);
            std::fs::create_dir_all(&dir).expect("corpus dir");
            for old in files(&dir) {
                if old
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("seed-"))
                {
                    std::fs::remove_file(old).expect("remove old seed");
                }
            }
            for (i, s) in list.iter().enumerate() {
                std::fs::write(dir.join(format!("seed-{i:03}")), s).expect("write seed");
            }
        }
    }
}

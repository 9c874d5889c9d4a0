//! `value_len_at_least` on a cursor over a sorted list of cells: what it keeps, its options,
//! delete markers, seeks and the work budget.

use std::sync::Arc;

use common::TableSchema;
use common::key::{CellFlag, Key};
use custom_iterator::{ValueLenAtLeast, min_bytes};
use rangeserver::iterators::{
    Budget, Families, IterEnv, IterOptions, IterScope, IteratorKind, KvIter, Registry, SeekRange,
};

/// A cursor over cells held in a sorted vector (the source below the kind).
struct VecIter {
    cells: Arc<Vec<(Vec<u8>, Vec<u8>)>>,
    pos: usize,
    end: Option<Vec<u8>>,
}

impl KvIter for VecIter {
    fn seek(&mut self, range: &SeekRange, _families: &Families) -> rangeserver::Result<()> {
        self.pos = self.cells.partition_point(|(k, _)| k < &range.start);
        self.end = range.end.clone();
        Ok(())
    }
    fn valid(&self) -> bool {
        self.pos < self.cells.len()
            && self
                .end
                .as_ref()
                .is_none_or(|e| &self.cells[self.pos].0 < e)
    }
    fn key(&self) -> &[u8] {
        &self.cells[self.pos].0
    }
    fn value(&self) -> &[u8] {
        &self.cells[self.pos].1
    }
    fn next(&mut self) -> rangeserver::Result<()> {
        self.pos += 1;
        Ok(())
    }
    fn deep_copy(&self) -> rangeserver::Result<Box<dyn KvIter>> {
        Ok(Box::new(VecIter {
            cells: self.cells.clone(),
            pos: 0,
            end: None,
        }))
    }
}

fn key(row: &str, flag: CellFlag) -> Vec<u8> {
    let mut k = Key::insert(row.as_bytes(), 1, b"q".as_slice(), 10);
    k.flag = flag;
    k.encode()
}

/// Rows a..f with values of 0..5 bytes; row "d" is also deleted (a cell delete, empty value).
fn cells() -> Arc<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut v: Vec<(Vec<u8>, Vec<u8>)> = ["a", "b", "c", "d", "e", "f"]
        .iter()
        .enumerate()
        .map(|(i, r)| (key(r, CellFlag::Insert), vec![b'x'; i]))
        .collect();
    v.push((key("d", CellFlag::DeleteCell), Vec::new()));
    v.sort();
    Arc::new(v)
}

fn options(min: &str) -> IterOptions {
    IterOptions::from([("MIN".to_string(), min.to_string())])
}

fn env(budget: Budget) -> IterEnv {
    IterEnv {
        scope: IterScope::Scan,
        now_ns: 0,
        schema: Arc::new(TableSchema::new(1, "/t")),
        budget,
        combined: Families::none(),
    }
}

fn stack(min: &str, budget: Budget) -> Box<dyn KvIter> {
    let source = Box::new(VecIter {
        cells: cells(),
        pos: 0,
        end: None,
    });
    ValueLenAtLeast
        .build(source, &options(min), &env(budget))
        .expect("build")
}

/// (row, value length, is a delete) of every cell the cursor gives from `range`.
fn drain(it: &mut dyn KvIter, range: &SeekRange) -> Vec<(String, usize, bool)> {
    it.seek(range, &Families::all()).expect("seek");
    let mut out = Vec::new();
    while it.valid() {
        let k = common::key::KeyRef::new(it.key()).expect("a key");
        out.push((
            String::from_utf8_lossy(&k.row()).into_owned(),
            it.value().len(),
            k.flag().is_delete(),
        ));
        it.next().expect("next");
    }
    out
}

#[test]
fn drops_values_shorter_than_min_and_keeps_deletes() {
    let mut it = stack("3", Budget::unlimited());
    let got = drain(&mut *it, &SeekRange::all());
    assert_eq!(
        got,
        [
            ("d".to_string(), 0, true),
            ("d".to_string(), 3, false),
            ("e".to_string(), 4, false),
            ("f".to_string(), 5, false),
        ]
    );
    let mut all = stack("0", Budget::unlimited());
    assert_eq!(
        drain(&mut *all, &SeekRange::all()).len(),
        7,
        "MIN = 0 keeps all"
    );
}

#[test]
fn a_seek_range_bounds_the_output() {
    let mut it = stack("2", Budget::unlimited());
    let range = SeekRange::new(key("b", CellFlag::Insert), Some(key("e", CellFlag::Insert)));
    let rows: Vec<String> = drain(&mut *it, &range).into_iter().map(|c| c.0).collect();
    assert_eq!(rows, ["c", "d", "d"], "a and b short, e and f past the end");
}

#[test]
fn a_spent_budget_yields_at_the_cell_to_resume_from() {
    // Rows a, b, c are dropped: with a budget of 2 the cursor stops on c, which a fresh stack
    // seeked from c (inclusive) skips and goes on from.
    let mut it = stack("3", Budget::new(2));
    it.seek(&SeekRange::all(), &Families::all()).expect("seek");
    assert!(!it.valid());
    let resume = it.yielded().expect("yielded").to_vec();
    assert_eq!(resume, key("c", CellFlag::Insert));
    let mut fresh = stack("3", Budget::unlimited());
    let rows: Vec<String> = drain(&mut *fresh, &SeekRange::new(resume, None))
        .into_iter()
        .map(|c| c.0)
        .collect();
    assert_eq!(rows, ["d", "d", "e", "f"]);
    let mut done = stack("3", Budget::unlimited());
    drain(&mut *done, &SeekRange::all());
    assert!(done.yielded().is_none(), "the real end is not a yield");
}

#[test]
fn a_deep_copy_is_unpositioned_and_independent() {
    let mut it = stack("4", Budget::unlimited());
    it.seek(&SeekRange::all(), &Families::all()).expect("seek");
    let mut copy = it.deep_copy().expect("deep copy");
    assert_eq!(
        drain(&mut *copy, &SeekRange::all()).len(),
        3,
        "d (delete), e, f"
    );
    assert!(it.valid(), "the original stays where it was");
    assert_eq!(it.value().len(), 0, "on d's delete marker");
}

#[test]
fn options_are_checked_naming_the_option() {
    assert_eq!(min_bytes(&options("12")), Ok(12));
    let schema = TableSchema::new(1, "/t");
    let err = |o: IterOptions| ValueLenAtLeast.validate(&o, &schema).expect_err("refused");
    assert!(err(IterOptions::new()).contains("MIN"), "missing MIN");
    assert!(err(options("three")).contains("'three'"));
    assert!(err(options("-1")).contains("MIN"));
    let mut extra = options("1");
    extra.insert("MAX".into(), "2".into());
    assert!(err(extra).contains("unknown option MAX"));
}

#[test]
fn the_kind_registers_beside_the_builtins_once() {
    let mut r = Registry::builtins();
    r.register_iterator(ValueLenAtLeast).expect("register");
    assert!(r.iterator("value_len_at_least").is_some());
    assert!(
        r.kind_names()
            .contains(&"iterator:value_len_at_least".to_string())
    );
    assert!(r.register_iterator(ValueLenAtLeast).is_err(), "twice");
    assert!(
        Registry::builtins()
            .iterator("value_len_at_least")
            .is_none()
    );
}

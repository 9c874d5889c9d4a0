//! `WireScanSpec` both ways: any `ScanSpec` (scan iterators and value predicates included) comes
//! back from its encoded message as it went in, and malformed messages are refused with an error
//! naming what is wrong.

use std::ops::Bound;

use common::aggregate::{Aggregate, AggregateColumn};
use common::iterators::{IterOptions, ScanIterator, ValuePredicate, ValuePredicates, ValueTest};
use common::row_key::{PartLayout, PartRange, RowSkip};
use common::scan_spec::{
    CellInterval, CellPos, ColumnSelector, QualifierMatch, RowInterval, ScanSpec,
};
use proptest::prelude::*;
use prost::Message as _;
use proto::rs::messages::{WireColumn, WireScanSpec, WireValuePredicates, WireValueTest};

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

fn regex() -> impl Strategy<Value = regex::bytes::Regex> {
    prop::sample::select(vec!["^a", "b+$", "(?i)x.y", "[0-9]{2,3}", ""])
        .prop_map(|p| regex::bytes::Regex::new(p).expect("valid pattern"))
}

fn bound<T: std::fmt::Debug + Clone>(
    t: impl Strategy<Value = T>,
) -> impl Strategy<Value = Bound<T>> {
    (0u8..3, t).prop_map(|(kind, t)| match kind {
        0 => Bound::Unbounded,
        1 => Bound::Included(t),
        _ => Bound::Excluded(t),
    })
}

fn cell_pos() -> impl Strategy<Value = CellPos> {
    (bytes(8), any::<u8>(), bytes(8)).prop_map(|(row, family, qualifier)| CellPos {
        row,
        family,
        qualifier,
    })
}

fn column() -> impl Strategy<Value = ColumnSelector> {
    (
        any::<u8>(),
        prop_oneof![
            Just(QualifierMatch::All),
            bytes(6).prop_map(QualifierMatch::Exact),
            bytes(6).prop_map(QualifierMatch::Prefix),
            regex().prop_map(QualifierMatch::Regex),
        ],
    )
        .prop_map(|(family, qualifier)| ColumnSelector { family, qualifier })
}

fn options() -> impl Strategy<Value = IterOptions> {
    prop::collection::btree_map("[A-Z_]{1,8}", ".{0,12}", 0..4)
}

fn scan_iterator() -> impl Strategy<Value = ScanIterator> {
    ("[a-z_]{1,12}", options()).prop_map(|(kind, options)| ScanIterator { kind, options })
}

fn value_predicates() -> impl Strategy<Value = ValuePredicates> {
    let test = prop_oneof![
        bytes(8).prop_map(ValueTest::Equals),
        bytes(8).prop_map(ValueTest::Prefix),
        regex().prop_map(ValueTest::Regex),
        Just(ValueTest::Exists),
    ];
    let predicate =
        (any::<u8>(), prop::option::of(bytes(6)), test).prop_map(|(family, qualifier, test)| {
            ValuePredicate {
                family,
                qualifier,
                test,
            }
        });
    (
        prop::collection::vec(predicate, 0..4),
        prop::collection::vec(column(), 0..3),
    )
        .prop_map(|(tests, output)| ValuePredicates { tests, output })
}

fn aggregate() -> impl Strategy<Value = Aggregate> {
    prop::collection::vec(
        (any::<u8>(), prop::option::of(bytes(6)))
            .prop_map(|(family, qualifier)| AggregateColumn { family, qualifier }),
        0..4,
    )
    .prop_map(|columns| Aggregate { columns })
}

prop_compose! {
    fn scan_spec()(
        rows in prop::collection::vec((bound(bytes(8)), bound(bytes(8))), 0..3),
        cells in prop::collection::vec((bound(cell_pos()), bound(cell_pos())), 0..3),
        columns in prop::collection::vec(column(), 0..4),
        times in (prop::option::of(any::<i64>()), prop::option::of(any::<i64>())),
        regexes in (prop::option::of(regex()), prop::option::of(regex())),
        limits in (any::<u32>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()),
        flags in (any::<bool>(), any::<bool>(), any::<bool>()),
        iterators in prop::collection::vec(scan_iterator(), 0..4),
        value_predicates in prop::option::of(value_predicates()),
        interval_flags in (any::<bool>(), any::<bool>()),
        row_skip in prop::option::of(row_skip()),
        aggregate in prop::option::of(aggregate()),
    ) -> ScanSpec {
        ScanSpec {
            row_intervals: rows.into_iter().map(|(start, end)| RowInterval { start, end }).collect(),
            cell_intervals: cells.into_iter().map(|(start, end)| CellInterval { start, end }).collect(),
            columns,
            time_start: times.0.unwrap_or(i64::MIN),
            time_end: times.1.unwrap_or(i64::MAX),
            row_regex: regexes.0,
            value_regex: regexes.1,
            max_versions: limits.0,
            row_limit: limits.1,
            row_offset: limits.2,
            cell_limit: limits.3,
            cell_offset: limits.4,
            cell_limit_per_family: limits.5,
            keys_only: flags.0,
            return_deletes: flags.1,
            no_cache: flags.2,
            iterators,
            value_predicates,
            one_interval: interval_flags.0,
            scan_and_filter: interval_flags.1,
            row_skip,
            aggregate,
        }
    }
}

/// A slot's ranges in order, each ending before the next begins: bounds from sorted distinct
/// values taken two by two, the first start and the last end perhaps unbounded.
fn slot() -> impl Strategy<Value = Vec<PartRange>> {
    (
        prop::collection::btree_set(bytes(4), 0..7),
        prop::collection::vec(any::<bool>(), 8),
        (any::<bool>(), any::<bool>()),
    )
        .prop_map(|(values, inclusive, (open_start, open_end))| {
            let values: Vec<Vec<u8>> = values.into_iter().collect();
            let n = values.len() / 2;
            let b = |i: usize, v: &Vec<u8>| {
                if inclusive[i % 8] {
                    Bound::Included(v.clone())
                } else {
                    Bound::Excluded(v.clone())
                }
            };
            (0..n)
                .map(|k| {
                    let start = if k == 0 && open_start {
                        Bound::Unbounded
                    } else {
                        b(2 * k, &values[2 * k])
                    };
                    let end = if k + 1 == n && open_end {
                        Bound::Unbounded
                    } else {
                        b(2 * k + 1, &values[2 * k + 1])
                    };
                    (start, end)
                })
                .collect()
        })
}

/// Key-part slots: every part but the last has a width.
fn row_skip() -> impl Strategy<Value = RowSkip> {
    prop::collection::vec((0u16..300, any::<bool>(), slot()), 1..4).prop_flat_map(|parts| {
        let n = parts.len();
        (Just(parts), any::<bool>()).prop_map(move |(parts, last_open)| {
            let (mut layout, mut slots) = (Vec::new(), Vec::new());
            for (i, (w, digits, ranges)) in parts.clone().into_iter().enumerate() {
                layout.push(PartLayout {
                    width: (!(last_open && i + 1 == n)).then_some(w),
                    digits,
                });
                slots.push(ranges);
            }
            RowSkip { layout, slots }
        })
    })
}

/// What a decoded spec says, field by field, for comparison (regexes by pattern).
fn describe(s: &ScanSpec) -> String {
    format!("{s:?}")
}

proptest! {
    /// A spec sent and received is the spec (every field, iterators and their options, value
    /// predicates with their tests and output columns), and its message encodes the same.
    #[test]
    fn scan_specs_round_trip(spec in scan_spec()) {
        let wire = WireScanSpec::from(&spec);
        let bytes = wire.encode_to_vec();
        let decoded = WireScanSpec::decode(bytes.as_slice()).expect("decode");
        prop_assert_eq!(&decoded, &wire);
        let back = ScanSpec::try_from(decoded).expect("a spec made from a spec is valid");
        prop_assert_eq!(&back.iterators, &spec.iterators);
        prop_assert_eq!(
            format!("{:?}", back.value_predicates),
            format!("{:?}", spec.value_predicates)
        );
        prop_assert_eq!(describe(&back), describe(&spec));
        prop_assert_eq!(WireScanSpec::from(&back), wire);
    }
}

#[test]
fn a_spec_without_iterators_or_predicates_sends_neither() {
    let wire = WireScanSpec::from(&ScanSpec::default());
    assert!(wire.iterators.is_empty());
    assert_eq!(wire.value_predicates, None);
    let back = ScanSpec::try_from(wire).expect("valid");
    assert!(back.iterators.is_empty());
    assert!(back.value_predicates.is_none());
    // Predicates with no test are kept as such (not dropped as "no predicates").
    let spec = ScanSpec {
        value_predicates: Some(ValuePredicates::default()),
        ..ScanSpec::default()
    };
    let back = ScanSpec::try_from(WireScanSpec::from(&spec)).expect("valid");
    assert!(back.value_predicates.is_some_and(|p| p.tests.is_empty()));
}

fn with_tests(tests: Vec<WireValueTest>, output: Vec<WireColumn>) -> WireScanSpec {
    WireScanSpec {
        value_predicates: Some(WireValuePredicates { tests, output }),
        ..WireScanSpec::default()
    }
}

fn test(family: u32, test: u32, operand: &[u8]) -> WireValueTest {
    WireValueTest {
        family,
        qualifier: None,
        test,
        operand: operand.to_vec(),
    }
}

#[test]
fn malformed_value_predicates_are_refused_naming_the_test() {
    let err = |w: WireScanSpec| ScanSpec::try_from(w).expect_err("refused");
    let ok = test(1, 1, b"v");
    let e = err(with_tests(
        vec![ok.clone(), test(1, 3, b"(unclosed")],
        vec![],
    ));
    assert!(
        e.starts_with("value predicate 1: bad regex \"(unclosed\""),
        "{e}"
    );
    let e = err(with_tests(vec![test(1, 9, b"v")], vec![]));
    assert_eq!(e, "value predicate 0: unknown test kind 9");
    let e = err(with_tests(vec![test(1, 0, b"v")], vec![]));
    assert_eq!(e, "value predicate 0: unknown test kind 0");
    let e = err(with_tests(
        vec![ok.clone(), ok.clone(), test(256, 1, b"v")],
        vec![],
    ));
    assert_eq!(e, "value predicate 2: family id 256 is above 255");
    let e = err(with_tests(vec![test(1, 3, &[0xff, 0xfe])], vec![]));
    assert_eq!(e, "value predicate 0: the regex is not UTF-8");
    let e = err(with_tests(vec![test(1, 4, b"x")], vec![]));
    assert_eq!(
        e,
        "value predicate 0: an exists test carries 1 bytes of operand"
    );
    let bad_column = WireColumn {
        family: 1,
        match_kind: 7,
        qualifier: Vec::new(),
    };
    let e = err(with_tests(vec![ok], vec![bad_column]));
    assert_eq!(
        e,
        "value predicates' output 0: unknown qualifier match kind 7"
    );
    // A regex too large to compile within the bound is refused, not built.
    let huge = format!("(?:{}){{1000}}", "[a-z]".repeat(200));
    let e = err(with_tests(vec![test(1, 3, huge.as_bytes())], vec![]));
    assert!(e.starts_with("value predicate 0: bad regex"), "{e}");
}

#[test]
fn a_row_skip_with_an_open_part_before_the_last_is_refused() {
    use proto::rs::messages::{WireKeyPartSlot, WireRowBound, WireRowInterval, WireRowSkip};
    let part = |width: Option<u32>| WireKeyPartSlot {
        width,
        digits: false,
        ranges: Vec::new(),
    };
    let spec = |parts| WireScanSpec {
        row_skip: Some(WireRowSkip { parts }),
        ..WireScanSpec::default()
    };
    let e = ScanSpec::try_from(spec(vec![part(None), part(Some(2))])).expect_err("refused");
    assert_eq!(e, "only the last key part may have no width");
    let e = ScanSpec::try_from(spec(vec![part(Some(70_000))])).expect_err("refused");
    assert_eq!(e, "key part width 70000");
    let ok = ScanSpec::try_from(spec(vec![part(Some(2)), part(None)])).expect("valid");
    assert_eq!(ok.row_skip.expect("skip").layout[1].width, None);
    // Ranges out of order, or overlapping, would make the server skip matching rows.
    let range = |a: &str, b: &str| WireRowInterval {
        start: Some(WireRowBound {
            kind: 1,
            row: a.as_bytes().to_vec(),
        }),
        end: Some(WireRowBound {
            kind: 1,
            row: b.as_bytes().to_vec(),
        }),
    };
    for ranges in [
        vec![range("05", "07"), range("01", "02")],
        vec![range("01", "05"), range("05", "07")],
    ] {
        let bad = WireKeyPartSlot {
            width: Some(2),
            digits: true,
            ranges,
        };
        let e = ScanSpec::try_from(spec(vec![bad])).expect_err("refused");
        assert_eq!(e, "key part 0: range 0 does not end before range 1 begins");
    }
    // A range that starts after its end would hide a later range from the seeks (found by
    // the fuzz target row_skip_navigate).
    let bad = WireKeyPartSlot {
        width: Some(2),
        digits: true,
        ranges: vec![range("09", "03"), range("05", "07")],
    };
    let e = ScanSpec::try_from(spec(vec![bad])).expect_err("refused");
    assert_eq!(e, "key part 0: range 0 starts after its end");
}

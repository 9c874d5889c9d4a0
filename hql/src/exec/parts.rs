//! Predicates on the parts of a declared composite row key (`ROW KEY (objectid UINT(10),
//! fieldtype CHAR(2))`, an ht extension): per part the encoded values or ranges it may take
//! ([`slots`]), then how the scan reaches them ([`plan`]): the leading parts that are lists of
//! values are expanded into the rows (or row prefixes) they name, so the range servers seek
//! straight to each; the other parts become a [`RowSkip`], the seek-hint row filter that jumps
//! from a row that does not match to the next one that can.

use std::ops::Bound;

use common::row_key::{PartValue, RowKeySpec, RowSkip, SEPARATOR};
use common::scan_spec::RowInterval;

use super::keyset::{self, KeySetLimits};
use super::select::{Intervals, and_intervals};
use super::{ExecError, Result};
use crate::ast::{KeyValue, PartPredicate, PartTest, RelOp};

/// Per part of the key, the ranges of its encoded bytes that the predicates allow (`None`:
/// no predicate names the part).
pub(super) type Slots = Vec<Option<Intervals<Vec<u8>>>>;

fn value(v: &KeyValue) -> PartValue {
    match v {
        KeyValue::Number(n) => PartValue::Int(*n),
        KeyValue::Text(t) => PartValue::Text(t.as_bytes().to_vec()),
    }
}

fn encode(key: &RowKeySpec, path: &str, part: usize, v: &KeyValue) -> Result<Vec<u8>> {
    key.encode(part, &value(v))
        .map_err(|e| ExecError::invalid(format!("table '{path}': {e}")))
}

/// The table's key and the position of `name` in it, or an error saying why there is none.
fn part_index(key: Option<&RowKeySpec>, path: &str, name: &str) -> Result<usize> {
    let Some(key) = key else {
        return Err(ExecError::invalid(format!(
            "'{name}' is not a column family or key part of table '{path}' (it declares no \
             ROW KEY)"
        )));
    };
    key.part(name).map(|(i, _)| i).ok_or_else(|| {
        ExecError::invalid(format!(
            "'{name}' is not a part of the ROW KEY of table '{path}' ({})",
            key.hql()
        ))
    })
}

/// ANDs each group of ORed predicates into its part's slot.
pub(super) fn slots(
    key: Option<&RowKeySpec>,
    path: &str,
    preds: &[Vec<PartPredicate>],
    limits: &KeySetLimits,
) -> Result<Slots> {
    let mut out: Slots = vec![None; key.map_or(0, |k| k.parts.len())];
    for group in preds {
        let Some(first) = group.first() else {
            continue;
        };
        let i = part_index(key, path, &first.part)?;
        if let Some(other) = group.iter().find(|p| p.part != first.part) {
            return Err(ExecError::invalid(format!(
                "ORed key part predicates must name one part, not '{}' and '{}'",
                first.part, other.part
            )));
        }
        let key = key.expect("part_index found a key");
        let mut union = Vec::new();
        for p in group {
            union.extend(intervals(key, path, i, p, limits)?);
        }
        let new = or_intervals(union);
        out[i] = Some(and_intervals(out[i].take(), new));
    }
    Ok(out)
}

/// Sorted, disjoint intervals covering the union of `v`.
fn or_intervals(mut v: Intervals<Vec<u8>>) -> Intervals<Vec<u8>> {
    use Bound::*;
    // Starts in order; at equal bytes an included start comes first.
    v.sort_by(|a, b| match (&a.0, &b.0) {
        (Unbounded, Unbounded) => std::cmp::Ordering::Equal,
        (Unbounded, _) => std::cmp::Ordering::Less,
        (_, Unbounded) => std::cmp::Ordering::Greater,
        (Included(x) | Excluded(x), Included(y) | Excluded(y)) => x
            .cmp(y)
            .then_with(|| matches!(a.0, Excluded(_)).cmp(&matches!(b.0, Excluded(_)))),
    });
    let mut out: Intervals<Vec<u8>> = Vec::with_capacity(v.len());
    for (start, end) in v {
        if let Some(last) = out.last_mut() {
            // Whether `start` lies at or before the last end (they overlap or touch).
            let joins = match (&last.1, &start) {
                (Unbounded, _) | (_, Unbounded) => true,
                (Included(e), Included(s)) | (Excluded(e), Included(s)) => s <= e,
                (Included(e), Excluded(s)) => s <= e,
                (Excluded(e), Excluded(s)) => s < e,
            };
            if joins {
                let later = match (&last.1, &end) {
                    (Unbounded, _) => false,
                    (_, Unbounded) => true,
                    (Included(a) | Excluded(a), Included(b)) => b >= a,
                    (Included(a) | Excluded(a), Excluded(b)) => b > a,
                };
                if later {
                    last.1 = end;
                }
                continue;
            }
        }
        out.push((start, end));
    }
    out
}

/// The ranges of part `i`'s encoded bytes that one predicate allows, sorted and disjoint.
fn intervals(
    key: &RowKeySpec,
    path: &str,
    i: usize,
    p: &PartPredicate,
    limits: &KeySetLimits,
) -> Result<Intervals<Vec<u8>>> {
    let enc = |v: &KeyValue| encode(key, path, i, v);
    Ok(match &p.test {
        PartTest::Compare(op, v) => {
            let e = enc(v)?;
            vec![match op {
                RelOp::Eq => (Bound::Included(e.clone()), Bound::Included(e)),
                RelOp::Lt => (Bound::Unbounded, Bound::Excluded(e)),
                RelOp::Le => (Bound::Unbounded, Bound::Included(e)),
                RelOp::Gt => (Bound::Excluded(e), Bound::Unbounded),
                RelOp::Ge => (Bound::Included(e), Bound::Unbounded),
                RelOp::StartsWith => {
                    return Err(ExecError::invalid(format!(
                        "key part '{}' cannot be compared with =^",
                        p.part
                    )));
                }
            }]
        }
        PartTest::Between(a, b) => {
            let (a, b) = (enc(a)?, enc(b)?);
            if a <= b {
                vec![(Bound::Included(a), Bound::Included(b))]
            } else {
                Vec::new()
            }
        }
        PartTest::In(values) => {
            let mut v = values.iter().map(enc).collect::<Result<Vec<_>>>()?;
            v.sort();
            v.dedup();
            points(v)
        }
        PartTest::InFile(name) => {
            let what = format!("{} IN FILE", p.part);
            let v = keyset::lines(name, &what, limits, |line, at| {
                key.encode_text(i, line)
                    .map_err(|e| ExecError::invalid(format!("{}: {e}", at())))
            })?;
            points(v)
        }
    })
}

fn points(v: Vec<Vec<u8>>) -> Intervals<Vec<u8>> {
    v.into_iter()
        .map(|k| (Bound::Included(k.clone()), Bound::Included(k)))
        .collect()
}

fn is_point(r: &(Bound<Vec<u8>>, Bound<Vec<u8>>)) -> bool {
    matches!(r, (Bound::Included(a), Bound::Included(b)) if a == b)
}

/// For EXPLAIN: each part and what it may take (`objectid: 3 values`, `fieldtype: any`).
pub(super) fn describe(key: &RowKeySpec, slots: &Slots) -> Vec<String> {
    let n = |k: usize, one: &str, many: &str| format!("{k} {}", if k == 1 { one } else { many });
    key.parts
        .iter()
        .zip(slots)
        .map(|(p, s)| {
            let what = match s {
                None => "any".to_string(),
                Some(s) if s.iter().all(is_point) => n(s.len(), "value", "values"),
                Some(s) => n(s.len(), "range", "ranges"),
            };
            format!("{} {}: {what}", p.name, p.kind.hql())
        })
        .collect()
}

/// How a scan reaches the rows of the slots.
pub(super) struct Plan {
    /// The rows, or row prefixes, of the leading parts that are lists of values (`None`:
    /// the first part is not one).
    pub rows: Option<Intervals<Vec<u8>>>,
    /// The filter for the other parts (`None` when the rows are exact).
    pub skip: Option<RowSkip>,
    /// How many leading parts were expanded into rows or row prefixes.
    pub expanded_parts: usize,
}

/// The plan for `slots`; `None` when some slot is empty (nothing can match). At most
/// `max_keys` rows are expanded: fewer leading parts are expanded when the product is larger.
pub(super) fn plan(key: &RowKeySpec, slots: &Slots, max_keys: usize) -> Option<Plan> {
    if slots.iter().any(|s| s.as_ref().is_some_and(Vec::is_empty)) {
        return None;
    }
    let mut lead = 0;
    let mut product = 1usize;
    for s in slots {
        match s {
            Some(s) if s.iter().all(is_point) => match product.checked_mul(s.len()) {
                Some(p) if p <= max_keys => {
                    product = p;
                    lead += 1;
                }
                _ => break,
            },
            _ => break,
        }
    }
    let n = key.parts.len();
    let rows = (lead > 0).then(|| {
        let mut prefixes: Vec<Vec<u8>> = vec![Vec::new()];
        for (i, s) in slots[..lead].iter().enumerate() {
            let s = s.as_ref().expect("leading slots are given");
            if let [(Bound::Included(v), _)] = s.as_slice() {
                // One value: every prefix grows by it, in place.
                for p in &mut prefixes {
                    if i > 0 {
                        p.push(SEPARATOR);
                    }
                    p.extend_from_slice(v);
                }
                continue;
            }
            let mut next = Vec::with_capacity(prefixes.len() * s.len());
            for p in &prefixes {
                for (v, _) in s {
                    let Bound::Included(v) = v else {
                        unreachable!("points")
                    };
                    // Room for a few more parts, so growing by them does not reallocate.
                    let mut r = Vec::with_capacity(p.len() + v.len() + 16);
                    r.extend_from_slice(p);
                    if i > 0 {
                        r.push(SEPARATOR);
                    }
                    r.extend_from_slice(v);
                    next.push(r);
                }
            }
            prefixes = next;
        }
        if lead == n {
            points(prefixes)
        } else {
            prefixes
                .into_iter()
                .map(|mut p| {
                    p.push(SEPARATOR);
                    let r = RowInterval::prefix(p);
                    (r.start, r.end)
                })
                .collect()
        }
    });
    let skip = (lead < n).then(|| RowSkip {
        layout: key.layout(),
        slots: slots
            .iter()
            .enumerate()
            .map(|(i, s)| match s {
                Some(s) if i >= lead => s.clone(),
                _ => Vec::new(),
            })
            .collect(),
    });
    Some(Plan {
        rows,
        skip,
        expanded_parts: lead,
    })
}

#[cfg(test)]
mod tests {
    use common::row_key::{KeyPart, PartKind};

    use super::*;

    fn key() -> RowKeySpec {
        RowKeySpec {
            parts: vec![
                KeyPart {
                    name: "id".into(),
                    kind: PartKind::Uint { width: 3 },
                },
                KeyPart {
                    name: "ft".into(),
                    kind: PartKind::Char { width: 2 },
                },
            ],
        }
    }

    fn pred(part: &str, test: PartTest) -> PartPredicate {
        PartPredicate {
            part: part.into(),
            test,
        }
    }

    fn b(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn leading_value_lists_become_rows_and_the_rest_a_skip() {
        let k = key();
        let l = KeySetLimits::default();
        let ids = pred(
            "id",
            PartTest::In(vec![KeyValue::Number(7), KeyValue::Number(2)]),
        );
        let f1 = pred(
            "ft",
            PartTest::In(vec![
                KeyValue::Text("F1".into()),
                KeyValue::Text("F".into()),
            ]),
        );
        let s = slots(Some(&k), "/t", &[vec![ids.clone()], vec![f1.clone()]], &l).unwrap();
        let p = plan(&k, &s, 100).unwrap();
        let rows: Vec<_> = p.rows.unwrap().into_iter().map(|r| r.0).collect();
        assert_eq!(
            rows,
            ["002 F ", "002 F1", "007 F ", "007 F1"]
                .map(|r| Bound::Included(b(r)))
                .to_vec()
        );
        assert!(p.skip.is_none());
        // A product above the limit expands fewer parts.
        let p = plan(&k, &s, 3).unwrap();
        assert_eq!(p.expanded_parts, 1);
        assert_eq!(p.rows.unwrap()[0].0, Bound::Included(b("002 ")));
        let skip = p.skip.unwrap();
        assert!(skip.slots[0].is_empty() && skip.slots[1].len() == 2);
        // A range on the first part: no rows, all in the skip.
        let r = pred(
            "id",
            PartTest::Between(KeyValue::Number(3), KeyValue::Number(5)),
        );
        let s = slots(Some(&k), "/t", &[vec![r], vec![f1]], &l).unwrap();
        let p = plan(&k, &s, 100).unwrap();
        assert!(p.rows.is_none());
        assert!(p.skip.unwrap().matches(b"004 F1"));
        // Contradictions select nothing.
        let s = slots(
            Some(&k),
            "/t",
            &[
                vec![ids],
                vec![pred(
                    "id",
                    PartTest::Compare(RelOp::Gt, KeyValue::Number(7)),
                )],
            ],
            &l,
        )
        .unwrap();
        assert!(plan(&k, &s, 100).is_none());
    }

    #[test]
    fn bad_values_and_unknown_parts_are_errors() {
        let k = key();
        let l = KeySetLimits::default();
        let e = slots(
            Some(&k),
            "/t",
            &[vec![pred("id", PartTest::In(vec![KeyValue::Number(1000)]))]],
            &l,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("'id'") && e.contains("more than 3 digits"),
            "{e}"
        );
        let e = slots(
            Some(&k),
            "/t",
            &[vec![pred("zz", PartTest::In(vec![]))]],
            &l,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("not a part of the ROW KEY"), "{e}");
        let e = slots(None, "/t", &[vec![pred("zz", PartTest::In(vec![]))]], &l)
            .unwrap_err()
            .to_string();
        assert!(e.contains("declares no ROW KEY"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("ids.txt");
        std::fs::write(&f, "1\n2\nx3\n").unwrap();
        let name = f.to_str().unwrap().to_string();
        let e = slots(
            Some(&k),
            "/t",
            &[vec![pred("id", PartTest::InFile(name.clone()))]],
            &l,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(&name) && e.contains("line 3") && e.contains("x3"),
            "{e}"
        );
    }
}

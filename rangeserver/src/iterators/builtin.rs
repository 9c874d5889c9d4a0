//! The built-in kinds: combiners (`counter`, `sum`, `min`, `max`, `string_set`, `uid_set`) and
//! stack iterators (filters, row iterators and `boolean_index`).

use super::Registry;
use super::boolean::BooleanIndexKind;
use super::combine::{CounterKind, Fold, NumericKind, SetKind};
use super::filters::{AgeOffKind, FamilyFilterKind, RegexFilterKind, RegexTarget};
use super::rows::{CountCellsKind, FirstInRowKind, WholeRowKind};

/// Registers every built-in kind.
pub fn register_all(r: &mut Registry) {
    let ok = [
        r.register_combiner(CounterKind),
        r.register_combiner(NumericKind(Fold::Sum)),
        r.register_combiner(NumericKind(Fold::Min)),
        r.register_combiner(NumericKind(Fold::Max)),
        r.register_combiner(SetKind { uids: false }),
        r.register_combiner(SetKind { uids: true }),
        r.register_iterator(RegexFilterKind(RegexTarget::Row)),
        r.register_iterator(RegexFilterKind(RegexTarget::Qualifier)),
        r.register_iterator(RegexFilterKind(RegexTarget::Value)),
        r.register_iterator(AgeOffKind { column: false }),
        r.register_iterator(AgeOffKind { column: true }),
        r.register_iterator(FamilyFilterKind),
        r.register_iterator(WholeRowKind),
        r.register_iterator(FirstInRowKind),
        r.register_iterator(CountCellsKind),
        r.register_iterator(BooleanIndexKind),
    ];
    debug_assert!(ok.iter().all(|r| r.is_ok()), "built-in names are distinct");
}

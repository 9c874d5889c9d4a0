//! Server-side iterators: code that runs inside the range server, on the data, during scans and
//! compactions (Accumulo's `SortedKeyValueIterator` stacks, HBase's filters).
//!
//! - [`KvIter`] is the seekable cursor every stack entry implements: seek to a key range and a
//!   set of families, then `valid`/`key`/`value`/`next`, and `deep_copy` for a second,
//!   independent cursor over the same snapshot.
//! - [`IteratorKind`] builds one stack entry from its options; [`CombinerKind`] builds the
//!   combiner of a column family. Both are found by name in a [`Registry`]: the built-ins of
//!   [`Registry::builtins`] plus whatever a user's own `ht` binary registers (`ht::main_with`).
//! - Scopes ([`IterScope`]): **scan** stacks run per range above the visible cells (deletes,
//!   versions and TTL already applied); **minor** (partial: minor and merging compactions)
//!   stacks see delete markers and must keep them; **major** (full) stacks see live cells only.
//!   Splits, moves and recovery copy cells without running any iterator.
//!
//! The contract every kind keeps (checked by the harness in `tests/iterator_contract.rs`):
//! nothing outside the seek range is returned; a seek may start in the middle of a row; a fresh
//! stack seeked from just past the last key returned gives the same cells that followed it (the
//! re-seek rule, which also lets scans resume after yielding); `key()`/`value()` are stable
//! until the next call that moves the cursor; deep copies do not see writes made after the
//! scan began (the scan's pinned revision).

pub mod boolean;
pub mod builtin;
pub mod combine;
pub mod filters;
pub mod rows;
pub mod stack;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use common::TableSchema;
pub use common::iterators::{IterOptions, IterScope};

use crate::error::{Error, Result};

/// An encoded-key interval `[start, end)`: `start` empty means from the beginning, `end`
/// `None` means to the end.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SeekRange {
    pub start: Vec<u8>,
    pub end: Option<Vec<u8>>,
}

impl Clone for SeekRange {
    fn clone(&self) -> Self {
        Self {
            start: self.start.clone(),
            end: self.end.clone(),
        }
    }

    /// Reuses `self`'s buffers: a key set seeks once per key, through several layers that
    /// each keep the range they were given.
    fn clone_from(&mut self, source: &Self) {
        self.start.clone_from(&source.start);
        self.end.clone_from(&source.end);
    }
}

impl SeekRange {
    /// Everything.
    pub fn all() -> Self {
        Self::default()
    }

    /// `[start, end)`.
    pub fn new(start: Vec<u8>, end: Option<Vec<u8>>) -> Self {
        Self { start, end }
    }

    /// True if `key` lies past the end.
    pub fn is_past_end(&self, key: &[u8]) -> bool {
        self.end.as_deref().is_some_and(|e| key >= e)
    }

    /// True if `key` lies in the interval.
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && !self.is_past_end(key)
    }
}

/// A set of column family ids (0..=255; 0 is the row-delete family).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Families {
    bits: [u64; 4],
}

impl Families {
    /// Every family.
    pub fn all() -> Self {
        Self { bits: [!0; 4] }
    }

    /// No family.
    pub fn none() -> Self {
        Self { bits: [0; 4] }
    }

    /// These families.
    pub fn of(ids: impl IntoIterator<Item = u8>) -> Self {
        let mut f = Self::none();
        for id in ids {
            f.insert(id);
        }
        f
    }

    pub fn insert(&mut self, id: u8) {
        self.bits[id as usize / 64] |= 1 << (id % 64);
    }

    pub fn remove(&mut self, id: u8) {
        self.bits[id as usize / 64] &= !(1 << (id % 64));
    }

    pub fn contains(&self, id: u8) -> bool {
        self.bits[id as usize / 64] & (1 << (id % 64)) != 0
    }

    pub fn is_all(&self) -> bool {
        self.bits == [!0; 4]
    }

    /// The families in both sets.
    pub fn intersection(&self, other: &Families) -> Families {
        let mut bits = self.bits;
        for (b, o) in bits.iter_mut().zip(other.bits.iter()) {
            *b &= o;
        }
        Families { bits }
    }

    /// Every family not in this set.
    pub fn complement(&self) -> Families {
        Families {
            bits: self.bits.map(|b| !b),
        }
    }

    /// True if some family is in both sets.
    pub fn intersects(&self, other: &Families) -> bool {
        self.bits
            .iter()
            .zip(other.bits.iter())
            .any(|(a, b)| a & b != 0)
    }
}

/// A seekable cursor over cells in ascending encoded-key order (`common::key`).
///
/// After `seek` or `next`, `valid()` says whether the cursor stands on a cell; `key()` and
/// `value()` may only be called while it does, and their bytes stay valid until the cursor
/// moves (the borrow checker holds callers to that).
pub trait KvIter: Send {
    /// Positions the cursor at the first cell in `range` whose family is in `families`. Cells
    /// outside the range are never returned. The start may lie in the middle of a row.
    fn seek(&mut self, range: &SeekRange, families: &Families) -> Result<()>;
    /// True while the cursor stands on a cell (idempotent).
    fn valid(&self) -> bool;
    /// The encoded key of the current cell.
    fn key(&self) -> &[u8];
    /// The value of the current cell.
    fn value(&self) -> &[u8];
    /// Moves to the next cell.
    fn next(&mut self) -> Result<()>;
    /// A new cursor over the same snapshot, not positioned (as though `seek` had not been
    /// called), independent of this one.
    fn deep_copy(&self) -> Result<Box<dyn KvIter>>;
    /// A new cursor over the same snapshot, not positioned, that reads the stored cells of
    /// `families` without the visibility rules, when that shows exactly the cells (row,
    /// family, qualifier) this iterator would show for them: every version of each, each with
    /// its own value, and nothing else. `None` (the default) when it would not, or cannot
    /// tell: the caller then uses [`KvIter::deep_copy`]. For readers that ask only which cells
    /// exist, such as a posting list's documents (`boolean_index`), at a fraction of the cost
    /// per cell. The bottom of a range's stack offers one when its sources hold no delete of
    /// any kind and the families have no TTL, combiner or qualifier selection.
    fn raw_copy(&self, families: &Families) -> Result<Option<Box<dyn KvIter>>> {
        let _ = families;
        Ok(None)
    }
    /// After `valid()` turned false: the key to resume from (by seeking a fresh stack from it,
    /// inclusive) when the cursor stopped because its work budget ran out rather than at the
    /// end of its range. `None` at the real end.
    fn yielded(&self) -> Option<&[u8]> {
        None
    }
}

impl<T: KvIter + ?Sized> KvIter for Box<T> {
    fn seek(&mut self, range: &SeekRange, families: &Families) -> Result<()> {
        (**self).seek(range, families)
    }
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
    fn next(&mut self) -> Result<()> {
        (**self).next()
    }
    fn deep_copy(&self) -> Result<Box<dyn KvIter>> {
        (**self).deep_copy()
    }
    fn raw_copy(&self, families: &Families) -> Result<Option<Box<dyn KvIter>>> {
        (**self).raw_copy(families)
    }
    fn yielded(&self) -> Option<&[u8]> {
        (**self).yielded()
    }
}

/// A bound on the cells a stack may step over before it yields its thread: iterators that skip
/// cells without returning them (filters, intersections) spend from it and, once it is empty,
/// stop with [`KvIter::yielded`] set. The scanner refills it for every block it returns.
///
/// Row iterators [`Budget::hold`] it while they are inside a row, so a scan never yields in the
/// middle of a row they are assembling (a fresh seek there would start the row over).
#[derive(Debug, Clone)]
pub struct Budget {
    left: Arc<AtomicU64>,
    holds: Arc<AtomicU32>,
}

impl Budget {
    /// A budget of `cells`; `u64::MAX` never runs out.
    pub fn new(cells: u64) -> Self {
        Self {
            left: Arc::new(AtomicU64::new(cells)),
            holds: Arc::new(AtomicU32::new(0)),
        }
    }

    /// A budget that never runs out (compactions: they must finish).
    pub fn unlimited() -> Self {
        Self::new(u64::MAX)
    }

    /// Takes `n` cells; false once the budget is spent (the caller should yield).
    pub fn spend(&self, n: u64) -> bool {
        let left = self.left.load(Ordering::Relaxed);
        if left == u64::MAX || self.holds.load(Ordering::Relaxed) > 0 {
            return true;
        }
        if left < n {
            self.left.store(0, Ordering::Relaxed);
            return false;
        }
        self.left.store(left - n, Ordering::Relaxed);
        true
    }

    /// True once the budget is spent.
    pub fn exhausted(&self) -> bool {
        self.left.load(Ordering::Relaxed) == 0
    }

    /// No yielding until the matching [`Budget::release`].
    pub fn hold(&self) {
        self.holds.fetch_add(1, Ordering::Relaxed);
    }

    /// Ends a [`Budget::hold`].
    pub fn release(&self) {
        let _ = self
            .holds
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| h.checked_sub(1));
    }

    /// Sets the budget back to `cells`.
    pub fn refill(&self, cells: u64) {
        self.left.store(cells, Ordering::Relaxed);
    }
}

/// What an iterator may know about where it runs.
#[derive(Clone)]
pub struct IterEnv {
    pub scope: IterScope,
    /// "Now" in nanoseconds since the epoch, fixed for the scan or compaction.
    pub now_ns: i64,
    /// The table's schema.
    pub schema: Arc<TableSchema>,
    /// Shared by every iterator of one stack.
    pub budget: Budget,
    /// Families whose versions are combined (combiner families, COUNTER among them). In the
    /// MINOR scope their cells are partial (not yet combined with versions in other files), so
    /// the built-in filters pass them and judge them once combined, in scans and major
    /// compactions.
    pub combined: Families,
}

/// A kind of stack iterator (filter, row iterator, ...), registered by name.
pub trait IteratorKind: Send + Sync {
    /// Lower-case name, as written in HQL (`age_off`).
    fn name(&self) -> &str;
    /// The scopes it may run in. Kinds that need whole rows (or more than one access group) are
    /// scan-only: compactions run per access group.
    fn scopes(&self) -> &[IterScope];
    /// Checks options (at DDL and when a scan starts); the message names the bad option.
    fn validate(
        &self,
        options: &IterOptions,
        schema: &TableSchema,
    ) -> std::result::Result<(), String>;
    /// The iterator over `source`. Options were validated.
    fn build(
        &self,
        source: Box<dyn KvIter>,
        options: &IterOptions,
        env: &IterEnv,
    ) -> Result<Box<dyn KvIter>>;
}

/// A kind of combiner (a family's `COMBINER`), registered by name.
pub trait CombinerKind: Send + Sync {
    /// Lower-case name, as written in HQL (`sum`).
    fn name(&self) -> &str;
    /// The combiner for these options; the message names the bad option.
    fn build(
        &self,
        options: &IterOptions,
    ) -> std::result::Result<Arc<dyn combine::Combiner>, String>;
}

/// The kinds a range server (or an embedded database) can run.
#[derive(Clone, Default)]
pub struct Registry {
    iterators: BTreeMap<String, Arc<dyn IteratorKind>>,
    combiners: BTreeMap<String, Arc<dyn CombinerKind>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("iterators", &self.iterators.keys().collect::<Vec<_>>())
            .field("combiners", &self.combiners.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Registry {
    /// No kinds at all.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Every built-in kind.
    pub fn builtins() -> Self {
        let mut r = Self::empty();
        builtin::register_all(&mut r);
        r
    }

    /// Adds an iterator kind; refuses a name already taken.
    pub fn register_iterator(&mut self, kind: impl IteratorKind + 'static) -> Result<()> {
        let name = kind.name().to_string();
        if self.iterators.contains_key(&name) {
            return Err(Error::InvalidInput(format!(
                "iterator kind '{name}' is registered twice"
            )));
        }
        self.iterators.insert(name, Arc::new(kind));
        Ok(())
    }

    /// Adds a combiner kind; refuses a name already taken.
    pub fn register_combiner(&mut self, kind: impl CombinerKind + 'static) -> Result<()> {
        let name = kind.name().to_string();
        if self.combiners.contains_key(&name) {
            return Err(Error::InvalidInput(format!(
                "combiner kind '{name}' is registered twice"
            )));
        }
        self.combiners.insert(name, Arc::new(kind));
        Ok(())
    }

    /// The iterator kind of this name.
    pub fn iterator(&self, name: &str) -> Option<&Arc<dyn IteratorKind>> {
        self.iterators.get(name)
    }

    /// The combiner kind of this name.
    pub fn combiner(&self, name: &str) -> Option<&Arc<dyn CombinerKind>> {
        self.combiners.get(name)
    }

    /// Every kind's name, as `iterator:NAME` and `combiner:NAME`, sorted (what `rs.status`
    /// reports, so the master can refuse DDL naming a kind some server lacks).
    pub fn kind_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .iterators
            .keys()
            .map(|k| format!("iterator:{k}"))
            .chain(self.combiners.keys().map(|k| format!("combiner:{k}")))
            .collect();
        v.sort();
        v
    }

    /// Checks a schema's combiners and iterators against the kinds here: every kind known,
    /// options valid, each iterator allowed in its scopes. The error names the family or
    /// iterator and the option.
    pub fn check_schema(&self, schema: &TableSchema) -> Result<()> {
        for f in schema.families.iter().filter(|f| !f.deleted) {
            if let Some(c) = f.effective_combiner() {
                let kind = self.combiner(&c.kind).ok_or_else(|| {
                    Error::InvalidInput(format!(
                        "column family '{}': unknown combiner '{}'",
                        f.name, c.kind
                    ))
                })?;
                kind.build(&c.options).map_err(|e| {
                    Error::InvalidInput(format!(
                        "column family '{}': COMBINER {}: {e}",
                        f.name, c.kind
                    ))
                })?;
            }
        }
        for it in &schema.iterators {
            let kind = self.iterator(&it.kind).ok_or_else(|| {
                Error::InvalidInput(format!(
                    "iterator '{}': unknown iterator kind '{}'",
                    it.name, it.kind
                ))
            })?;
            for s in &it.scopes {
                if !kind.scopes().contains(s) {
                    return Err(Error::InvalidInput(format!(
                        "iterator '{}': kind '{}' cannot run in scope {} (it may run in {})",
                        it.name,
                        it.kind,
                        s.name(),
                        scope_list(kind.scopes())
                    )));
                }
            }
            kind.validate(&it.options, schema).map_err(|e| {
                Error::InvalidInput(format!("iterator '{}' ({}): {e}", it.name, it.kind))
            })?;
        }
        Ok(())
    }

    /// Checks the iterators a scan brings.
    pub fn check_scan(
        &self,
        its: &[common::iterators::ScanIterator],
        schema: &TableSchema,
    ) -> Result<()> {
        for it in its {
            let kind = self.iterator(&it.kind).ok_or_else(|| {
                Error::InvalidInput(format!("unknown iterator kind '{}'", it.kind))
            })?;
            if !kind.scopes().contains(&IterScope::Scan) {
                return Err(Error::InvalidInput(format!(
                    "iterator kind '{}' cannot run in scans",
                    it.kind
                )));
            }
            kind.validate(&it.options, schema)
                .map_err(|e| Error::InvalidInput(format!("iterator {}: {e}", it.kind)))?;
        }
        Ok(())
    }
}

fn scope_list(s: &[IterScope]) -> String {
    s.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
}

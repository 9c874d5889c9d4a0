//! Building iterator stacks: a table's iterators of one scope in priority order, then a scan's
//! own; the adapters between the engine's raw `CellIter` sources and `KvIter`; and the partial
//! combining of APPEND_ONLY combiner families in minor and merging compactions.

use std::sync::Arc;

use common::iterators::{IteratorSpec, ScanIterator};
use common::key::{CellFlag, KeyRef};

use super::combine::{CombineState, Combiner, Output};
use super::{Families, IterEnv, IterScope, KvIter, Registry, SeekRange};
use crate::error::{Error, Result};
use crate::iter::CellIter;

/// Stacks the table iterators that run in `env.scope` on `src`, lowest priority first (nearest
/// the data). A kind the registry lacks is an error naming it.
pub fn table_stack(
    mut src: Box<dyn KvIter>,
    iterators: &[IteratorSpec],
    registry: &Registry,
    env: &IterEnv,
) -> Result<Box<dyn KvIter>> {
    let mut its: Vec<&IteratorSpec> = iterators
        .iter()
        .filter(|i| i.scopes.contains(&env.scope))
        .collect();
    its.sort_by_key(|i| i.priority);
    for it in its {
        let kind = registry.iterator(&it.kind).ok_or_else(|| {
            Error::InvalidInput(format!(
                "iterator '{}': kind '{}' is not known to this server",
                it.name, it.kind
            ))
        })?;
        src = kind.build(src, &it.options, env)?;
    }
    Ok(src)
}

/// Stacks a scan's own iterators on `src`, in the order given.
pub fn scan_stack(
    mut src: Box<dyn KvIter>,
    iterators: &[ScanIterator],
    registry: &Registry,
    env: &IterEnv,
) -> Result<Box<dyn KvIter>> {
    for it in iterators {
        let kind = registry
            .iterator(&it.kind)
            .ok_or_else(|| Error::InvalidInput(format!("unknown iterator kind '{}'", it.kind)))?;
        if !kind.scopes().contains(&IterScope::Scan) {
            return Err(Error::InvalidInput(format!(
                "iterator kind '{}' cannot run in scans",
                it.kind
            )));
        }
        kind.validate(&it.options, &env.schema)
            .map_err(|e| Error::InvalidInput(format!("iterator {}: {e}", it.kind)))?;
        src = kind.build(src, &it.options, env)?;
    }
    Ok(src)
}

/// Opens a new raw source over the same data (a compaction's deep copies).
pub type SourceFactory = Arc<dyn Fn() -> Result<Box<dyn CellIter>> + Send + Sync>;

/// A raw `CellIter` (compaction input) seen as a `KvIter`: it stops at the range's end and
/// steps over families the seek did not ask for.
pub struct CellKv {
    inner: Box<dyn CellIter>,
    factory: Option<SourceFactory>,
    range: SeekRange,
    families: Families,
}

impl CellKv {
    pub fn new(inner: Box<dyn CellIter>, factory: Option<SourceFactory>) -> Self {
        Self {
            inner,
            factory,
            range: SeekRange::all(),
            families: Families::all(),
        }
    }

    fn settle(&mut self) -> Result<()> {
        if self.families.is_all() {
            return Ok(());
        }
        while self.inner.valid() && !self.range.is_past_end(self.inner.key()) {
            let f = KeyRef::from_trusted(self.inner.key())?.family();
            if self.families.contains(f) {
                break;
            }
            self.inner.next()?;
        }
        Ok(())
    }
}

impl KvIter for CellKv {
    fn seek(&mut self, range: &SeekRange, families: &Families) -> Result<()> {
        self.range = range.clone();
        self.families = *families;
        self.inner.seek(&range.start)?;
        self.settle()
    }
    fn valid(&self) -> bool {
        self.inner.valid() && !self.range.is_past_end(self.inner.key())
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn next(&mut self) -> Result<()> {
        self.inner.next()?;
        self.settle()
    }
    fn deep_copy(&self) -> Result<Box<dyn KvIter>> {
        let f = self
            .factory
            .clone()
            .ok_or_else(|| Error::InvalidInput("this source cannot be copied".into()))?;
        let inner = f()?;
        Ok(Box::new(CellKv::new(inner, Some(f))))
    }
}

/// A `KvIter` seen as a `CellIter` (what the cell-store writer reads).
pub struct KvCell {
    inner: Box<dyn KvIter>,
}

impl KvCell {
    pub fn new(inner: Box<dyn KvIter>) -> Self {
        Self { inner }
    }
}

impl CellIter for KvCell {
    fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.inner
            .seek(&SeekRange::new(key.to_vec(), None), &Families::all())
    }
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn next(&mut self) -> Result<()> {
        self.inner.next()
    }
}

/// Combines, in a partial compaction's raw input, the versions of each cell of the families
/// given (APPEND_ONLY combiner families: no delete can lie in a store the compaction does not
/// read) into one cell in the combiner's partial form, keyed as the newest version. Everything
/// else, delete markers included, passes unchanged.
pub struct PartialCombine<I: CellIter> {
    src: I,
    /// Per family id.
    combiners: Vec<Option<Arc<dyn Combiner>>>,
    states: Vec<Option<Box<dyn CombineState>>>,
    out_key: Vec<u8>,
    out_value: Vec<u8>,
    /// The output is a combined cell (else the source's current cell).
    combined: bool,
    valid: bool,
}

impl<I: CellIter> PartialCombine<I> {
    /// `combiners` has one entry per family id (256).
    pub fn new(src: I, combiners: Vec<Option<Arc<dyn Combiner>>>) -> Self {
        assert_eq!(combiners.len(), 256, "one entry per family id");
        Self {
            src,
            states: (0..256).map(|_| None).collect(),
            combiners,
            out_key: Vec::new(),
            out_value: Vec::new(),
            combined: false,
            valid: false,
        }
    }

    fn settle(&mut self) -> Result<()> {
        self.combined = false;
        self.valid = self.src.valid();
        if !self.valid {
            return Ok(());
        }
        let k = KeyRef::from_trusted(self.src.key())?;
        let fam = k.family() as usize;
        let Some(c) = self.combiners[fam].clone() else {
            return Ok(());
        };
        if k.flag() != CellFlag::Insert {
            return Ok(());
        }
        let st = self.states[fam].get_or_insert_with(|| c.state());
        st.reset();
        self.out_key.clear();
        self.out_key.extend_from_slice(self.src.key());
        let prefix_len = k.cell_prefix().len();
        let mut versions = 0u64;
        let mut more = true;
        while self.src.valid() {
            let key = self.src.key();
            let same = key.len() >= prefix_len
                && key[..prefix_len] == self.out_key[..prefix_len]
                && KeyRef::from_trusted(key)?.flag() == CellFlag::Insert
                && KeyRef::from_trusted(key)?.cell_prefix().len() == prefix_len;
            if !same {
                break;
            }
            if more {
                more = st.add(self.src.value()).map_err(|e| {
                    crate::scan::visible::damaged(
                        &self.src,
                        format!("combined cell {:?}: {e}", KeyRef::from_trusted(key)),
                    )
                })?;
            }
            versions += 1;
            self.src.next()?;
        }
        debug_assert!(versions > 0);
        self.out_value.clear();
        st.finish(&mut self.out_value, Output::Partial);
        self.combined = true;
        Ok(())
    }
}

impl<I: CellIter> CellIter for PartialCombine<I> {
    fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.src.seek(key)?;
        self.settle()
    }
    fn valid(&self) -> bool {
        self.valid
    }
    fn key(&self) -> &[u8] {
        if self.combined {
            &self.out_key
        } else {
            self.src.key()
        }
    }
    fn value(&self) -> &[u8] {
        if self.combined {
            &self.out_value
        } else {
            self.src.value()
        }
    }
    fn next(&mut self) -> Result<()> {
        if !self.combined {
            self.src.next()?;
        }
        self.settle()
    }
}

//! `value_len_at_least(MIN = n)`: a user iterator kind that drops cells whose value is shorter
//! than MIN bytes, in any scope (it looks at one cell at a time). An example of what a user
//! crate implements to add a kind: [`IteratorKind`] (name, scopes, option checks, building)
//! and [`KvIter`] (the cursor itself), registered by its own binary (`main.rs`).

use common::key::KeyRef;
use rangeserver::iterators::{
    Budget, Families, IterEnv, IterOptions, IterScope, IteratorKind, KvIter, SeekRange,
};
use rangeserver::{Error, Result};

/// The kind: registered with `Registry::register_iterator(ValueLenAtLeast)`.
#[derive(Debug, Clone, Copy)]
pub struct ValueLenAtLeast;

/// The kind's name, as HQL writes it.
pub const NAME: &str = "value_len_at_least";

impl IteratorKind for ValueLenAtLeast {
    fn name(&self) -> &str {
        NAME
    }

    fn scopes(&self) -> &[IterScope] {
        &IterScope::ALL
    }

    fn validate(
        &self,
        options: &IterOptions,
        _schema: &common::TableSchema,
    ) -> std::result::Result<(), String> {
        min_bytes(options).map(|_| ())
    }

    fn build(
        &self,
        source: Box<dyn KvIter>,
        options: &IterOptions,
        env: &IterEnv,
    ) -> Result<Box<dyn KvIter>> {
        let min = min_bytes(options).map_err(|e| Error::InvalidInput(format!("{NAME}: {e}")))?;
        // In partial compactions a combined family's cells are not yet whole values: pass them,
        // as the built-in filters do, and judge them once combined (scans, major compactions).
        let passed = if env.scope == IterScope::Minor {
            env.combined
        } else {
            Families::none()
        };
        Ok(Box::new(ValueLenIter {
            source,
            min,
            passed,
            budget: env.budget.clone(),
            resume: None,
        }))
    }
}

/// The MIN option: a byte count, required; no other option is known.
pub fn min_bytes(options: &IterOptions) -> std::result::Result<usize, String> {
    if let Some(other) = options.keys().find(|k| k.as_str() != "MIN") {
        return Err(format!("unknown option {other} ({NAME} takes MIN)"));
    }
    let v = options
        .get("MIN")
        .ok_or_else(|| "option MIN (the shortest value kept, in bytes) is required".to_string())?;
    v.trim()
        .parse::<usize>()
        .map_err(|_| format!("option MIN: '{v}' is not a number of bytes"))
}

/// The cursor: the source's cells, less those with a value shorter than `min`. Delete markers
/// always pass (partial compactions must keep them), and so do the cells of combined families in
/// partial compactions.
pub struct ValueLenIter {
    source: Box<dyn KvIter>,
    min: usize,
    /// Families whose cells always pass (combined families in partial compactions).
    passed: Families,
    budget: Budget,
    /// Where to resume, when the budget ran out while skipping.
    resume: Option<Vec<u8>>,
}

impl ValueLenIter {
    fn keeps(&self) -> bool {
        self.source.value().len() >= self.min
            || KeyRef::from_trusted(self.source.key())
                .is_ok_and(|k| k.flag().is_delete() || self.passed.contains(k.family()))
    }

    /// Moves the source to the first cell kept (from where it stands), or stops with a resume
    /// key once the budget is spent.
    fn skip_dropped(&mut self) -> Result<()> {
        self.resume = None;
        while self.source.valid() && !self.keeps() {
            if !self.budget.spend(1) {
                self.resume = Some(self.source.key().to_vec());
                return Ok(());
            }
            self.source.next()?;
        }
        Ok(())
    }
}

impl KvIter for ValueLenIter {
    fn seek(&mut self, range: &SeekRange, families: &Families) -> Result<()> {
        self.source.seek(range, families)?;
        self.skip_dropped()
    }

    fn valid(&self) -> bool {
        self.resume.is_none() && self.source.valid()
    }

    fn key(&self) -> &[u8] {
        self.source.key()
    }

    fn value(&self) -> &[u8] {
        self.source.value()
    }

    fn next(&mut self) -> Result<()> {
        self.source.next()?;
        self.skip_dropped()
    }

    fn deep_copy(&self) -> Result<Box<dyn KvIter>> {
        Ok(Box::new(ValueLenIter {
            source: self.source.deep_copy()?,
            min: self.min,
            passed: self.passed,
            budget: self.budget.clone(),
            resume: None,
        }))
    }

    fn yielded(&self) -> Option<&[u8]> {
        match &self.resume {
            Some(k) => Some(k),
            None => self.source.yielded(),
        }
    }
}

//! Cell-local filters, which may run in every scope: `row_regex`, `qualifier_regex`,
//! `value_regex` (each with `NEGATE`), `age_off(TTL)`, `column_age_off(FAMILY, TTL)` and
//! `family_filter(FAMILIES, NEGATE)`. Delete markers always pass (partial compactions must keep
//! them); a filter that has skipped its budget's worth of cells stops with a resume key.

use std::sync::Arc;

use common::TableSchema;
use common::key::{self, KeyRef};
use regex::bytes::Regex;

use super::{Budget, Families, IterEnv, IterOptions, IterScope, IteratorKind, KvIter, SeekRange};
use crate::error::{Error, Result};

/// What a filter says about one insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    Skip,
    /// Skip this cell and the rest of its row (only where no delete marker must be kept).
    SkipRow,
}

/// The test a filter applies to inserts.
pub type Accept = Arc<dyn Fn(&KeyRef<'_>, &[u8]) -> Verdict + Send + Sync>;

/// A stack entry that drops the inserts `accept` refuses.
pub struct FilterIter {
    src: Box<dyn KvIter>,
    accept: Accept,
    budget: Budget,
    /// Row skips are allowed (no delete marker needs keeping: scans and major compactions).
    row_skips: bool,
    /// Families passed unjudged: partial cells of combined families in the MINOR scope.
    pass: Families,
    /// The only families the filter can keep: seeks ask the source for no others (so access
    /// groups holding none of them are not read). Row deletes (family 0) are always asked for.
    narrow: Families,
    range: SeekRange,
    families: Families,
    /// Stopped with the budget spent, standing on this unjudged cell.
    stopped: Option<Vec<u8>>,
}

impl FilterIter {
    /// Seeks ask the source only for `families` (and row deletes): for filters that can keep
    /// nothing else. Not in the MINOR scope, where every cell must reach the output or be judged.
    pub fn narrowed(mut self, families: Families) -> Self {
        if self.row_skips {
            let mut f = families;
            f.insert(0);
            self.narrow = f;
        }
        self
    }

    pub fn new(src: Box<dyn KvIter>, accept: Accept, env: &IterEnv) -> Self {
        Self {
            src,
            accept,
            budget: env.budget.clone(),
            row_skips: env.scope != IterScope::Minor,
            pass: if env.scope == IterScope::Minor {
                env.combined
            } else {
                Families::none()
            },
            narrow: Families::all(),
            range: SeekRange::all(),
            families: Families::all(),
            stopped: None,
        }
    }

    fn settle(&mut self) -> Result<()> {
        while self.src.valid() {
            let k = KeyRef::from_trusted(self.src.key())?;
            if k.flag().is_delete() || self.pass.contains(k.family()) {
                return Ok(());
            }
            let v = (self.accept)(&k, self.src.value());
            if v == Verdict::Keep {
                return Ok(());
            }
            if !self.budget.spend(1) {
                self.stopped = Some(self.src.key().to_vec());
                return Ok(());
            }
            if v == Verdict::SkipRow && self.row_skips {
                let end = key::row_end(&k.row());
                let r = SeekRange::new(end, self.range.end.clone());
                self.src.seek(&r, &self.families)?;
            } else {
                self.src.next()?;
            }
        }
        Ok(())
    }
}

impl KvIter for FilterIter {
    fn seek(&mut self, range: &SeekRange, families: &Families) -> Result<()> {
        self.stopped = None;
        self.range = range.clone();
        self.families = families.intersection(&self.narrow);
        self.src.seek(range, &self.families)?;
        self.settle()
    }
    fn valid(&self) -> bool {
        self.stopped.is_none() && self.src.valid()
    }
    fn key(&self) -> &[u8] {
        self.src.key()
    }
    fn value(&self) -> &[u8] {
        self.src.value()
    }
    fn next(&mut self) -> Result<()> {
        self.src.next()?;
        self.settle()
    }
    fn deep_copy(&self) -> Result<Box<dyn KvIter>> {
        Ok(Box::new(FilterIter {
            src: self.src.deep_copy()?,
            accept: self.accept.clone(),
            budget: self.budget.clone(),
            row_skips: self.row_skips,
            pass: self.pass,
            narrow: self.narrow,
            range: SeekRange::all(),
            families: Families::all(),
            stopped: None,
        }))
    }
    fn yielded(&self) -> Option<&[u8]> {
        match &self.stopped {
            Some(k) => Some(k),
            None if !self.src.valid() => self.src.yielded(),
            None => None,
        }
    }
}

// ---- option parsing shared by the kinds ----

/// Refuses options not in `allowed`, naming the first unknown one.
pub fn known_options(o: &IterOptions, allowed: &[&str]) -> std::result::Result<(), String> {
    match o.keys().find(|k| !allowed.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) if allowed.is_empty() => Err(format!("unknown option {k} (this kind takes none)")),
        Some(k) => Err(format!(
            "unknown option {k} (options: {})",
            allowed.join(", ")
        )),
    }
}

/// A required option.
pub fn required<'a>(o: &'a IterOptions, name: &str) -> std::result::Result<&'a str, String> {
    o.get(name)
        .map(|s| s.as_str())
        .ok_or_else(|| format!("option {name} is required"))
}

/// `true`/`false` (also `1`/`0`, `yes`/`no`), default false.
pub fn bool_option(o: &IterOptions, name: &str) -> std::result::Result<bool, String> {
    match o.get(name).map(|s| s.trim().to_ascii_lowercase()) {
        None => Ok(false),
        Some(s) => match s.as_str() {
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" => Ok(false),
            _ => Err(format!("option {name}: {s:?} is not true or false")),
        },
    }
}

/// A regular expression option (RE2 syntax, partial match as Hypertable's REGEXP).
pub fn regex_option(o: &IterOptions, name: &str) -> std::result::Result<Regex, String> {
    let re = required(o, name)?;
    Regex::new(re).map_err(|e| format!("option {name}: bad regular expression /{re}/: {e}"))
}

/// A family named by an option, resolved in the schema.
pub fn family_option(
    o: &IterOptions,
    name: &str,
    schema: &TableSchema,
) -> std::result::Result<Option<u8>, String> {
    match o.get(name) {
        None => Ok(None),
        Some(f) => schema
            .family(f)
            .map(|s| Some(s.id))
            .ok_or_else(|| format!("option {name}: no column family '{f}' in {}", schema.name)),
    }
}

/// A time to live: seconds, or a number and a unit (`30 DAYS`, `2 hours`, `90s`).
pub fn ttl_option(o: &IterOptions, name: &str) -> std::result::Result<i64, String> {
    let s = required(o, name)?.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: i64 = num
        .parse()
        .map_err(|_| format!("option {name}: {s:?} is not a number of seconds or 'N UNIT'"))?;
    let secs_per = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hour" | "hours" => 3_600,
        "d" | "day" | "days" => 86_400,
        "w" | "week" | "weeks" => 604_800,
        "month" | "months" => 2_592_000,
        "y" | "year" | "years" => 31_536_000,
        u => return Err(format!("option {name}: unknown unit {u:?}")),
    };
    n.checked_mul(secs_per)
        .and_then(|s| s.checked_mul(1_000_000_000))
        .filter(|&ns| ns > 0)
        .ok_or_else(|| format!("option {name}: {s:?} is not a positive time that fits"))
}

const ALL_SCOPES: [IterScope; 3] = IterScope::ALL;

fn bad(kind: &str, e: String) -> Error {
    Error::InvalidInput(format!("iterator kind {kind}: {e}"))
}

// ---- the kinds ----

/// What a regex filter matches against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegexTarget {
    Row,
    Qualifier,
    Value,
}

/// `row_regex`, `qualifier_regex`, `value_regex`.
pub struct RegexFilterKind(pub RegexTarget);

impl RegexFilterKind {
    fn parse(
        &self,
        o: &IterOptions,
        schema: &TableSchema,
    ) -> std::result::Result<(Regex, bool, Option<u8>), String> {
        let allowed: &[&str] = match self.0 {
            RegexTarget::Row => &["REGEX", "NEGATE"],
            _ => &["REGEX", "NEGATE", "FAMILY"],
        };
        known_options(o, allowed)?;
        Ok((
            regex_option(o, "REGEX")?,
            bool_option(o, "NEGATE")?,
            family_option(o, "FAMILY", schema)?,
        ))
    }
}

impl IteratorKind for RegexFilterKind {
    fn name(&self) -> &str {
        match self.0 {
            RegexTarget::Row => "row_regex",
            RegexTarget::Qualifier => "qualifier_regex",
            RegexTarget::Value => "value_regex",
        }
    }
    fn scopes(&self) -> &[IterScope] {
        &ALL_SCOPES
    }
    fn validate(&self, o: &IterOptions, schema: &TableSchema) -> std::result::Result<(), String> {
        self.parse(o, schema).map(|_| ())
    }
    fn build(
        &self,
        src: Box<dyn KvIter>,
        o: &IterOptions,
        env: &IterEnv,
    ) -> Result<Box<dyn KvIter>> {
        let (re, negate, family) = self
            .parse(o, &env.schema)
            .map_err(|e| bad(self.name(), e))?;
        let target = self.0;
        let accept: Accept = Arc::new(move |k, v| {
            if family.is_some_and(|f| f != k.family()) {
                return Verdict::Keep;
            }
            let hit = match target {
                RegexTarget::Row => re.is_match(&k.row()),
                RegexTarget::Qualifier => re.is_match(&k.qualifier()),
                RegexTarget::Value => re.is_match(v),
            };
            match (hit != negate, target) {
                (true, _) => Verdict::Keep,
                (false, RegexTarget::Row) => Verdict::SkipRow,
                (false, _) => Verdict::Skip,
            }
        });
        Ok(Box::new(FilterIter::new(src, accept, env)))
    }
}

/// `age_off(TTL)` and `column_age_off(FAMILY, TTL)`: cells older than now minus TTL go.
pub struct AgeOffKind {
    /// True for `column_age_off` (one family).
    pub column: bool,
}

impl AgeOffKind {
    fn parse(
        &self,
        o: &IterOptions,
        schema: &TableSchema,
    ) -> std::result::Result<(i64, Option<u8>), String> {
        if self.column {
            known_options(o, &["FAMILY", "TTL"])?;
            required(o, "FAMILY")?;
        } else {
            known_options(o, &["TTL"])?;
        }
        Ok((ttl_option(o, "TTL")?, family_option(o, "FAMILY", schema)?))
    }
}

impl IteratorKind for AgeOffKind {
    fn name(&self) -> &str {
        if self.column {
            "column_age_off"
        } else {
            "age_off"
        }
    }
    fn scopes(&self) -> &[IterScope] {
        &ALL_SCOPES
    }
    fn validate(&self, o: &IterOptions, schema: &TableSchema) -> std::result::Result<(), String> {
        self.parse(o, schema).map(|_| ())
    }
    fn build(
        &self,
        src: Box<dyn KvIter>,
        o: &IterOptions,
        env: &IterEnv,
    ) -> Result<Box<dyn KvIter>> {
        let (ttl, family) = self
            .parse(o, &env.schema)
            .map_err(|e| bad(self.name(), e))?;
        let cutoff = env.now_ns.saturating_sub(ttl);
        let accept: Accept = Arc::new(move |k, _| {
            if family.is_some_and(|f| f != k.family()) || k.timestamp() >= cutoff {
                Verdict::Keep
            } else {
                Verdict::Skip
            }
        });
        Ok(Box::new(FilterIter::new(src, accept, env)))
    }
}

/// `family_filter(FAMILIES = 'a,b', NEGATE)`: only (or, negated, all but) those families.
pub struct FamilyFilterKind;

impl FamilyFilterKind {
    fn parse(
        &self,
        o: &IterOptions,
        schema: &TableSchema,
    ) -> std::result::Result<(Families, bool), String> {
        known_options(o, &["FAMILIES", "NEGATE"])?;
        let mut set = Families::none();
        for name in required(o, "FAMILIES")?
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let f = schema.family(name).ok_or_else(|| {
                format!(
                    "option FAMILIES: no column family '{name}' in {}",
                    schema.name
                )
            })?;
            set.insert(f.id);
        }
        Ok((set, bool_option(o, "NEGATE")?))
    }
}

impl IteratorKind for FamilyFilterKind {
    fn name(&self) -> &str {
        "family_filter"
    }
    fn scopes(&self) -> &[IterScope] {
        &ALL_SCOPES
    }
    fn validate(&self, o: &IterOptions, schema: &TableSchema) -> std::result::Result<(), String> {
        self.parse(o, schema).map(|_| ())
    }
    fn build(
        &self,
        src: Box<dyn KvIter>,
        o: &IterOptions,
        env: &IterEnv,
    ) -> Result<Box<dyn KvIter>> {
        let (set, negate) = self
            .parse(o, &env.schema)
            .map_err(|e| bad(self.name(), e))?;
        let keep = if negate { set.complement() } else { set };
        let accept: Accept = Arc::new(move |k, _| {
            if keep.contains(k.family()) {
                Verdict::Keep
            } else {
                Verdict::Skip
            }
        });
        Ok(Box::new(FilterIter::new(src, accept, env).narrowed(keep)))
    }
}

//! Server-side iterator settings: what a schema or a scan names, not the code that runs
//! (that is the range server's `iterators` module and its registry of kinds).
//!
//! - A **combiner** ([`CombinerSpec`]) belongs to one column family and merges the versions of
//!   each of its cells into one (`counter`, `sum`, `min`, `max`, `string_set`, `uid_set`, or a
//!   user kind). It runs on read and at major compactions, and in partial (minor and merging)
//!   compactions only on families declared `APPEND_ONLY`.
//! - A **table iterator** ([`IteratorSpec`]) is a named stack entry with a kind, options, the
//!   scopes it runs in and a priority (lower runs first, nearer the data).
//! - A **scan iterator** ([`ScanIterator`]) comes with one scan and runs above the table's scan
//!   iterators, in the order given.
//!
//! Option names are upper-case (`MAX`, `ENCODING`, `REGEX`, `NEGATE`, ...); values are text as
//! written in HQL. The range server checks kinds and options against its registry at DDL and
//! when a scan starts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where an iterator runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IterScope {
    /// Scans: sees the live cells (after deletes, versions and TTL).
    Scan,
    /// Partial compactions (minor and merging): sees a subset of a cell's versions and the
    /// delete markers, which it must keep.
    Minor,
    /// Major (full) compactions: sees every live cell of the access group, no deletes.
    Major,
}

impl IterScope {
    /// The HQL spelling (`SCAN`, `MINOR`, `MAJOR`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Scan => "SCAN",
            Self::Minor => "MINOR",
            Self::Major => "MAJOR",
        }
    }

    /// Parses the HQL spelling (case-insensitive).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_uppercase().as_str() {
            "SCAN" => Self::Scan,
            "MINOR" => Self::Minor,
            "MAJOR" => Self::Major,
            _ => return None,
        })
    }

    pub const ALL: [IterScope; 3] = [Self::Scan, Self::Minor, Self::Major];
}

/// Options of an iterator or combiner, by upper-case name.
pub type IterOptions = BTreeMap<String, String>;

/// A family's combiner: HQL `COMBINER kind[(OPT = value, ...)]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CombinerSpec {
    /// Lower-case kind name, e.g. `sum`.
    pub kind: String,
    #[serde(default)]
    pub options: IterOptions,
}

impl CombinerSpec {
    pub fn new(kind: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            options: IterOptions::new(),
        }
    }

    /// The counter combiner that HQL `COUNTER` means.
    pub fn counter() -> Self {
        Self::new("counter")
    }
}

/// A table iterator: HQL `ITERATOR name = kind(OPT = value, ...) SCOPES (...) PRIORITY n`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IteratorSpec {
    /// Unique within the table.
    pub name: String,
    /// Lower-case kind name, e.g. `age_off`.
    pub kind: String,
    #[serde(default)]
    pub options: IterOptions,
    /// Never empty; each scope at most once, in [`IterScope`] order.
    pub scopes: Vec<IterScope>,
    /// Lower runs first (nearer the data); unique per scope within the table.
    pub priority: u16,
}

/// An iterator that comes with one scan: HQL `WITH ITERATOR kind(OPT = value, ...)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanIterator {
    pub kind: String,
    #[serde(default)]
    pub options: IterOptions,
}

/// Column value predicates run in the range server (HQL `cf = "v"`, `cf =^ "p"`,
/// `cf =~ /re/`, `REGEXP(cf, "re")`, `EXISTS(cf:q)`), ORed: a row is returned when any of its
/// cells passes any test, and then with the cells `output` selects (all, when empty).
#[derive(Debug, Clone, Default)]
pub struct ValuePredicates {
    pub tests: Vec<ValuePredicate>,
    /// The columns shown of a matching row; empty means every cell read.
    pub output: Vec<crate::scan_spec::ColumnSelector>,
}

/// One column value predicate.
#[derive(Debug, Clone)]
pub struct ValuePredicate {
    pub family: u8,
    /// `None`: any qualifier.
    pub qualifier: Option<Vec<u8>>,
    pub test: ValueTest,
}

/// What a value predicate tests.
#[derive(Debug, Clone)]
pub enum ValueTest {
    Equals(Vec<u8>),
    Prefix(Vec<u8>),
    Regex(regex::bytes::Regex),
    /// The cell exists (any value).
    Exists,
}

/// Why a schema's combiner or iterator settings are not valid (kinds and options are checked
/// by the range server's registry; these are the rules that need no registry).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IteratorSettingError {
    #[error("duplicate iterator name '{0}'")]
    DuplicateName(String),
    #[error("iterator '{0}' has no scope")]
    NoScope(String),
    #[error("iterator '{name}' lists scope {scope} twice")]
    RepeatedScope { name: String, scope: &'static str },
    #[error("iterators '{a}' and '{b}' both have priority {priority} in scope {scope}")]
    DuplicatePriority {
        a: String,
        b: String,
        priority: u16,
        scope: &'static str,
    },
    #[error("iterator name {0:?} is not a valid name (letters, digits and '_', not first a digit)")]
    BadName(String),
}

/// True for names HQL can write unquoted: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_plain_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

/// Checks names, scopes and priorities of a table's iterators.
pub fn check_iterators(its: &[IteratorSpec]) -> Result<(), IteratorSettingError> {
    for (i, it) in its.iter().enumerate() {
        if !is_plain_name(&it.name) {
            return Err(IteratorSettingError::BadName(it.name.clone()));
        }
        if its[..i].iter().any(|o| o.name == it.name) {
            return Err(IteratorSettingError::DuplicateName(it.name.clone()));
        }
        if it.scopes.is_empty() {
            return Err(IteratorSettingError::NoScope(it.name.clone()));
        }
        for (j, s) in it.scopes.iter().enumerate() {
            if it.scopes[..j].contains(s) {
                return Err(IteratorSettingError::RepeatedScope {
                    name: it.name.clone(),
                    scope: s.name(),
                });
            }
            if let Some(o) = its[..i]
                .iter()
                .find(|o| o.priority == it.priority && o.scopes.contains(s))
            {
                return Err(IteratorSettingError::DuplicatePriority {
                    a: o.name.clone(),
                    b: it.name.clone(),
                    priority: it.priority,
                    scope: s.name(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn it(name: &str, prio: u16, scopes: &[IterScope]) -> IteratorSpec {
        IteratorSpec {
            name: name.into(),
            kind: "age_off".into(),
            options: IterOptions::new(),
            scopes: scopes.to_vec(),
            priority: prio,
        }
    }

    #[test]
    fn names_scopes_and_priorities_are_checked() {
        use IterScope::*;
        assert_eq!(
            check_iterators(&[it("a", 10, &[Scan]), it("b", 10, &[Major])]),
            Ok(())
        );
        assert_eq!(
            check_iterators(&[it("a", 10, &[Scan, Major]), it("b", 10, &[Major])]),
            Err(IteratorSettingError::DuplicatePriority {
                a: "a".into(),
                b: "b".into(),
                priority: 10,
                scope: "MAJOR"
            })
        );
        assert_eq!(
            check_iterators(&[it("a", 1, &[Scan]), it("a", 2, &[Scan])]),
            Err(IteratorSettingError::DuplicateName("a".into()))
        );
        assert_eq!(
            check_iterators(&[it("a", 1, &[])]),
            Err(IteratorSettingError::NoScope("a".into()))
        );
        assert_eq!(
            check_iterators(&[it("a", 1, &[Scan, Scan])]),
            Err(IteratorSettingError::RepeatedScope {
                name: "a".into(),
                scope: "SCAN"
            })
        );
        assert!(matches!(
            check_iterators(&[it("9a", 1, &[Scan])]),
            Err(IteratorSettingError::BadName(_))
        ));
    }
}

//! The wire form of what a scan asks the range server to run on its cells: scan iterators
//! (`ScanSpec.iterators`) and column value predicates (`ScanSpec.value_predicates`), fields 17
//! and 18 of `WireScanSpec` (docs/formats/rangeserver-rpc.md).

use common::iterators::{IterOptions, ScanIterator, ValuePredicate, ValuePredicates, ValueTest};

use super::messages::{WireColumn, column_from_wire, column_to_wire, regex_from_wire};

/// One scan iterator: `kind` and its options by upper-case name, values as text.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireScanIterator {
    #[prost(string, tag = "1")]
    pub kind: String,
    #[prost(btree_map = "string, string", tag = "2")]
    pub options: IterOptions,
}

/// One value predicate: the cells of `family` (and only `qualifier`, when present) whose value
/// passes the test. `test` is 1 equals, 2 prefix, 3 regex (`operand` is its UTF-8 pattern),
/// 4 exists (`operand` empty); anything else is refused.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireValueTest {
    #[prost(uint32, tag = "1")]
    pub family: u32,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub qualifier: Option<Vec<u8>>,
    #[prost(uint32, tag = "3")]
    pub test: u32,
    #[prost(bytes = "vec", tag = "4")]
    pub operand: Vec<u8>,
}

/// `ValuePredicates`: the tests (ORed) and the columns shown of a matching row (empty: every
/// cell read).
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireValuePredicates {
    #[prost(message, repeated, tag = "1")]
    pub tests: Vec<WireValueTest>,
    #[prost(message, repeated, tag = "2")]
    pub output: Vec<WireColumn>,
}

/// Test kinds on the wire.
pub mod test_kind {
    pub const EQUALS: u32 = 1;
    pub const PREFIX: u32 = 2;
    pub const REGEX: u32 = 3;
    pub const EXISTS: u32 = 4;
}

impl From<&ScanIterator> for WireScanIterator {
    fn from(it: &ScanIterator) -> Self {
        Self {
            kind: it.kind.clone(),
            options: it.options.clone(),
        }
    }
}

impl From<WireScanIterator> for ScanIterator {
    fn from(it: WireScanIterator) -> Self {
        Self {
            kind: it.kind,
            options: it.options,
        }
    }
}

impl From<&ValuePredicates> for WireValuePredicates {
    fn from(p: &ValuePredicates) -> Self {
        Self {
            tests: p
                .tests
                .iter()
                .map(|t| {
                    let (test, operand) = match &t.test {
                        ValueTest::Equals(v) => (test_kind::EQUALS, v.clone()),
                        ValueTest::Prefix(v) => (test_kind::PREFIX, v.clone()),
                        ValueTest::Regex(r) => (test_kind::REGEX, r.as_str().as_bytes().to_vec()),
                        ValueTest::Exists => (test_kind::EXISTS, Vec::new()),
                    };
                    WireValueTest {
                        family: t.family.into(),
                        qualifier: t.qualifier.clone(),
                        test,
                        operand,
                    }
                })
                .collect(),
            output: p.output.iter().map(column_to_wire).collect(),
        }
    }
}

impl TryFrom<WireValuePredicates> for ValuePredicates {
    type Error = String;
    fn try_from(p: WireValuePredicates) -> Result<Self, String> {
        let mut tests = Vec::with_capacity(p.tests.len());
        for (i, t) in p.tests.into_iter().enumerate() {
            let at = |why: String| format!("value predicate {i}: {why}");
            let family = u8::try_from(t.family)
                .map_err(|_| at(format!("family id {} is above 255", t.family)))?;
            let test = match t.test {
                test_kind::EQUALS => ValueTest::Equals(t.operand),
                test_kind::PREFIX => ValueTest::Prefix(t.operand),
                test_kind::REGEX => {
                    let pattern = String::from_utf8(t.operand)
                        .map_err(|_| at("the regex is not UTF-8".to_string()))?;
                    ValueTest::Regex(regex_from_wire(&pattern).map_err(at)?)
                }
                test_kind::EXISTS if t.operand.is_empty() => ValueTest::Exists,
                test_kind::EXISTS => {
                    return Err(at(format!(
                        "an exists test carries {} bytes of operand",
                        t.operand.len()
                    )));
                }
                k => return Err(at(format!("unknown test kind {k}"))),
            };
            tests.push(ValuePredicate {
                family,
                qualifier: t.qualifier,
                test,
            });
        }
        let mut output = Vec::with_capacity(p.output.len());
        for (i, c) in p.output.into_iter().enumerate() {
            output.push(
                column_from_wire(c).map_err(|e| format!("value predicates' output {i}: {e}"))?,
            );
        }
        Ok(Self { tests, output })
    }
}

//! Combiners: a family's versions of one cell merged into one value (Accumulo's `Combiner`,
//! Cloud Bigtable's aggregate families). The built-ins: `counter` (HQL `COUNTER`), `sum`,
//! `min`, `max` (decimal text, or `ENCODING = 'fixed64'|'varint'`), `string_set(MAX = n)` and
//! `uid_set(MAX = n)`.
//!
//! Rules every combiner keeps, because compactions combine arbitrary subsets of a cell's
//! versions (a minor compaction sees only the cell cache, a merging one only some stores):
//! combining is associative and commutative over the stored form, so combining
//! `combine(a, b)` with `c` equals combining `a`, `b`, `c` (counter's reset is the one ordered
//! rule: versions come newest first and a reset ends the sum). Every version counts, also two
//! with equal timestamps (they differ in revision).
//!
//! Each kind stores values in a form its own `add` reads back: [`Combiner::prepare_input`]
//! turns what a client writes into it (a set member into a one-member set), so a combined
//! value is never mistaken for an input.

use std::collections::BTreeSet;
use std::sync::Arc;

use common::codec;

use super::{CombinerKind, IterOptions};

/// What the combined value is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Returned by a scan.
    Display,
    /// Written by a major compaction: every version was seen.
    Full,
    /// Written by a partial (minor or merging) compaction: older versions may exist elsewhere
    /// and will be combined with this one later.
    Partial,
}

/// A combiner with its options parsed.
pub trait Combiner: Send + Sync {
    /// Checks a value a client writes and gives the form to store (`None`: as written). The
    /// message says what is wrong with the value.
    fn prepare_input(&self, value: &[u8]) -> Result<Option<Vec<u8>>, String>;
    /// A fresh accumulator.
    fn state(&self) -> Box<dyn CombineState>;
}

/// Combines the versions of one cell.
pub trait CombineState: Send {
    /// Forgets everything added (for the next cell).
    fn reset(&mut self);
    /// Adds one stored version, newest first; `Ok(false)` once older versions cannot change
    /// the result. An error says why the stored value is not one this combiner wrote.
    fn add(&mut self, value: &[u8]) -> Result<bool, String>;
    /// Writes the combined value of what was added.
    fn finish(&mut self, out: &mut Vec<u8>, output: Output);
}

/// Number encodings of `sum`, `min` and `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Decimal text, optionally signed (`-12`, `+3`, `7`).
    Text,
    /// 8 bytes, big-endian two's complement (Accumulo's FIXEDLEN).
    Fixed64,
    /// Zig-zag LEB128 varint.
    Varint,
}

impl Encoding {
    fn from_options(o: &IterOptions) -> Result<Self, String> {
        match o.get("ENCODING").map(|s| s.to_ascii_lowercase()) {
            None => Ok(Self::Text),
            Some(s) => match s.as_str() {
                "string" | "text" | "decimal" => Ok(Self::Text),
                "fixed64" | "fixedlen" => Ok(Self::Fixed64),
                "varint" | "varlen" => Ok(Self::Varint),
                _ => Err(format!(
                    "option ENCODING: '{s}' is not an encoding (text, fixed64 or varint)"
                )),
            },
        }
    }

    /// Decodes a value; the message says why it is not a number in this encoding.
    pub fn decode(self, v: &[u8]) -> Result<i64, String> {
        match self {
            Self::Text => {
                let s = std::str::from_utf8(v)
                    .map_err(|_| "not UTF-8 decimal text".to_string())?
                    .trim();
                let s = s.strip_prefix('+').unwrap_or(s);
                s.parse::<i64>()
                    .map_err(|_| format!("{s:?} is not a decimal integer"))
            }
            Self::Fixed64 => {
                let b: [u8; 8] = v
                    .try_into()
                    .map_err(|_| format!("{} bytes, not the 8 of fixed64", v.len()))?;
                Ok(i64::from_be_bytes(b))
            }
            Self::Varint => {
                let mut pos = 0;
                let z = codec::get_varint(v, &mut pos)
                    .filter(|_| pos == v.len())
                    .ok_or_else(|| "not one varint".to_string())?;
                Ok(((z >> 1) as i64) ^ -((z & 1) as i64))
            }
        }
    }

    /// Encodes a value.
    pub fn encode(self, n: i64, out: &mut Vec<u8>) {
        match self {
            Self::Text => out.extend_from_slice(n.to_string().as_bytes()),
            Self::Fixed64 => out.extend_from_slice(&n.to_be_bytes()),
            Self::Varint => codec::put_varint(out, ((n << 1) ^ (n >> 63)) as u64),
        }
    }
}

/// Parses a counter value: `n` or `+n` add, `-n` subtracts, `=n` resets. `None` if malformed.
pub fn parse_counter(v: &[u8]) -> Option<(bool, i64)> {
    let s = std::str::from_utf8(v).ok()?.trim();
    let (reset, num) = match s.as_bytes().first()? {
        b'=' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let n: i64 = num.trim().parse().ok()?;
    Some((reset, n))
}

fn no_options(kind: &str, o: &IterOptions, allowed: &[&str]) -> Result<(), String> {
    match o.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "{kind} has no option {k}{}",
            if allowed.is_empty() {
                String::new()
            } else {
                format!(" (options: {})", allowed.join(", "))
            }
        )),
        None => Ok(()),
    }
}

// ---- counter ----

/// HQL `COUNTER`: `n`/`+n` add, `-n` subtracts, `=n` resets; wrapping 64-bit arithmetic.
pub struct CounterKind;

impl CombinerKind for CounterKind {
    fn name(&self) -> &str {
        "counter"
    }
    fn build(&self, o: &IterOptions) -> Result<Arc<dyn Combiner>, String> {
        no_options("counter", o, &[])?;
        Ok(Arc::new(Counter))
    }
}

struct Counter;

impl Combiner for Counter {
    fn prepare_input(&self, v: &[u8]) -> Result<Option<Vec<u8>>, String> {
        parse_counter(v).map(|_| None).ok_or_else(|| {
            format!(
                "bad counter value {:?} (expected n, +n, -n or =n)",
                String::from_utf8_lossy(v)
            )
        })
    }
    fn state(&self) -> Box<dyn CombineState> {
        Box::new(CounterState::default())
    }
}

#[derive(Default)]
struct CounterState {
    sum: i64,
    reset: bool,
}

impl CombineState for CounterState {
    fn reset(&mut self) {
        *self = Self::default();
    }
    fn add(&mut self, v: &[u8]) -> Result<bool, String> {
        if self.reset {
            return Ok(false);
        }
        let (reset, n) = parse_counter(v).ok_or("not a counter value")?;
        self.sum = self.sum.wrapping_add(n);
        self.reset = reset;
        Ok(!reset)
    }
    fn finish(&mut self, out: &mut Vec<u8>, output: Output) {
        let reset = match output {
            Output::Display => false,
            Output::Full => true,
            Output::Partial => self.reset,
        };
        if reset {
            out.push(b'=');
        }
        out.extend_from_slice(self.sum.to_string().as_bytes());
    }
}

// ---- sum, min, max ----

/// Which fold a numeric combiner does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    /// Saturating sum (Accumulo's SummingCombiner).
    Sum,
    Min,
    Max,
}

/// `sum`, `min` or `max`, with `ENCODING`.
pub struct NumericKind(pub Fold);

impl CombinerKind for NumericKind {
    fn name(&self) -> &str {
        match self.0 {
            Fold::Sum => "sum",
            Fold::Min => "min",
            Fold::Max => "max",
        }
    }
    fn build(&self, o: &IterOptions) -> Result<Arc<dyn Combiner>, String> {
        no_options(self.name(), o, &["ENCODING"])?;
        Ok(Arc::new(Numeric {
            fold: self.0,
            enc: Encoding::from_options(o)?,
        }))
    }
}

struct Numeric {
    fold: Fold,
    enc: Encoding,
}

impl Combiner for Numeric {
    fn prepare_input(&self, v: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.enc.decode(v).map(|_| None)
    }
    fn state(&self) -> Box<dyn CombineState> {
        Box::new(NumericState {
            fold: self.fold,
            enc: self.enc,
            acc: None,
        })
    }
}

struct NumericState {
    fold: Fold,
    enc: Encoding,
    acc: Option<i64>,
}

impl CombineState for NumericState {
    fn reset(&mut self) {
        self.acc = None;
    }
    fn add(&mut self, v: &[u8]) -> Result<bool, String> {
        let n = self.enc.decode(v)?;
        self.acc = Some(match (self.acc, self.fold) {
            (None, _) => n,
            (Some(a), Fold::Sum) => a.saturating_add(n),
            (Some(a), Fold::Min) => a.min(n),
            (Some(a), Fold::Max) => a.max(n),
        });
        Ok(true)
    }
    fn finish(&mut self, out: &mut Vec<u8>, _output: Output) {
        self.enc.encode(self.acc.unwrap_or(0), out);
    }
}

// ---- string_set, uid_set ----

/// Hard bound on `MAX` of the set combiners (the memory one combined cell may take).
pub const MAX_SET_MEMBERS: usize = 100_000;

/// `string_set(MAX = n)` (count = distinct members) or `uid_set(MAX = n)` (count = members
/// inserted, as Accumulo wikisearch's GlobalIndexUidCombiner counts documents).
pub struct SetKind {
    /// True for `uid_set`.
    pub uids: bool,
}

impl CombinerKind for SetKind {
    fn name(&self) -> &str {
        if self.uids { "uid_set" } else { "string_set" }
    }
    fn build(&self, o: &IterOptions) -> Result<Arc<dyn Combiner>, String> {
        no_options(self.name(), o, &["MAX"])?;
        let max = match o.get("MAX") {
            None if self.uids => 20,
            None => 1000,
            Some(s) => s
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|&n| n <= MAX_SET_MEMBERS)
                .ok_or_else(|| {
                    format!("option MAX: {s:?} is not a number from 0 to {MAX_SET_MEMBERS}")
                })?,
        };
        Ok(Arc::new(SetCombiner {
            uids: self.uids,
            max,
        }))
    }
}

struct SetCombiner {
    uids: bool,
    max: usize,
}

/// A decoded stored set: Accumulo wikisearch's `Uid.List` (protobuf: `bool IGNORE = 1;
/// uint64 COUNT = 2; repeated string UID = 3;`), the same bytes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SetValue {
    /// The members were dropped (more than MAX); only the count is known.
    pub ignore: bool,
    pub count: u64,
    pub members: Vec<Vec<u8>>,
}

impl SetValue {
    pub fn encode(&self, out: &mut Vec<u8>) {
        if self.ignore {
            out.extend_from_slice(&[0x08, 1]);
        }
        out.push(0x10);
        codec::put_varint(out, self.count);
        for m in &self.members {
            out.push(0x1a);
            codec::put_varint(out, m.len() as u64);
            out.extend_from_slice(m);
        }
    }

    /// Decodes the stored form; the message says what is wrong.
    pub fn decode(v: &[u8]) -> Result<SetValue, String> {
        let mut s = SetValue::default();
        let mut pos = 0;
        while pos < v.len() {
            let tag = codec::get_varint(v, &mut pos).ok_or("truncated tag")?;
            match tag {
                0x08 => s.ignore = codec::get_varint(v, &mut pos).ok_or("truncated IGNORE")? != 0,
                0x10 => s.count = codec::get_varint(v, &mut pos).ok_or("truncated COUNT")?,
                0x1a => {
                    let n = codec::get_varint(v, &mut pos).ok_or("truncated UID length")? as usize;
                    let end = pos
                        .checked_add(n)
                        .filter(|&e| e <= v.len())
                        .ok_or("truncated UID")?;
                    s.members.push(v[pos..end].to_vec());
                    pos = end;
                }
                t => return Err(format!("unknown field tag {t} in a set value")),
            }
        }
        Ok(s)
    }

    /// The scan's form: the count, a space, then the members as a JSON array of strings in
    /// byte order, or `*` when they were dropped.
    pub fn display(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.count.to_string().as_bytes());
        out.push(b' ');
        if self.ignore {
            out.push(b'*');
            return;
        }
        let strs: Vec<String> = self
            .members
            .iter()
            .map(|m| String::from_utf8_lossy(m).into_owned())
            .collect();
        out.extend_from_slice(
            serde_json::to_string(&strs)
                .expect("strings serialize")
                .as_bytes(),
        );
    }
}

impl Combiner for SetCombiner {
    fn prepare_input(&self, v: &[u8]) -> Result<Option<Vec<u8>>, String> {
        if std::str::from_utf8(v).is_err() {
            return Err("a set member must be UTF-8 text".into());
        }
        let mut out = Vec::with_capacity(v.len() + 6);
        let mut one = SetValue {
            ignore: false,
            count: 1,
            members: vec![v.to_vec()],
        };
        if self.max == 0 {
            one.ignore = true;
            one.members.clear();
        }
        one.encode(&mut out);
        Ok(Some(out))
    }
    fn state(&self) -> Box<dyn CombineState> {
        Box::new(SetState {
            uids: self.uids,
            max: self.max,
            ignore: false,
            count: 0,
            members: BTreeSet::new(),
        })
    }
}

struct SetState {
    uids: bool,
    max: usize,
    ignore: bool,
    /// Sum of the parts' counts.
    count: u64,
    members: BTreeSet<Vec<u8>>,
}

impl CombineState for SetState {
    fn reset(&mut self) {
        self.ignore = false;
        self.count = 0;
        self.members.clear();
    }
    fn add(&mut self, v: &[u8]) -> Result<bool, String> {
        let part = SetValue::decode(v)?;
        self.count = self.count.saturating_add(part.count);
        if part.ignore {
            self.ignore = true;
        }
        if !self.ignore {
            for m in part.members {
                self.members.insert(m);
                if self.members.len() > self.max {
                    self.ignore = true;
                    break;
                }
            }
        }
        if self.ignore {
            self.members.clear();
        }
        Ok(true)
    }
    fn finish(&mut self, out: &mut Vec<u8>, output: Output) {
        let count = if self.uids || self.ignore {
            self.count
        } else {
            self.members.len() as u64
        };
        let v = SetValue {
            ignore: self.ignore,
            count,
            members: std::mem::take(&mut self.members).into_iter().collect(),
        };
        match output {
            Output::Display => v.display(out),
            Output::Full | Output::Partial => v.encode(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn combine(c: &dyn Combiner, inputs: &[&[u8]], output: Output) -> Vec<u8> {
        let mut st = c.state();
        for v in inputs {
            let stored = c.prepare_input(v).unwrap().unwrap_or_else(|| v.to_vec());
            if !st.add(&stored).unwrap() {
                break;
            }
        }
        let mut out = Vec::new();
        st.finish(&mut out, output);
        out
    }

    fn opts(kv: &[(&str, &str)]) -> IterOptions {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn counter_sums_until_the_newest_reset() {
        let c = CounterKind.build(&opts(&[])).unwrap();
        assert_eq!(
            combine(&*c, &[b"+2", b"3", b"=10", b"100"], Output::Display),
            b"15"
        );
        assert_eq!(combine(&*c, &[b"-2", b"3"], Output::Full), b"=1");
        assert_eq!(combine(&*c, &[b"-2", b"3"], Output::Partial), b"1");
        assert_eq!(combine(&*c, &[b"1", b"=3"], Output::Partial), b"=4");
        assert!(c.prepare_input(b"x").is_err());
    }

    #[test]
    fn numeric_encodings_round_trip() {
        for enc in [Encoding::Text, Encoding::Fixed64, Encoding::Varint] {
            for n in [0, 1, -1, i64::MAX, i64::MIN, 300, -300] {
                let mut b = Vec::new();
                enc.encode(n, &mut b);
                assert_eq!(enc.decode(&b), Ok(n), "{enc:?} {n}");
            }
        }
        let sum = NumericKind(Fold::Sum)
            .build(&opts(&[("ENCODING", "fixed64")]))
            .unwrap();
        let one = 1i64.to_be_bytes();
        let big = i64::MAX.to_be_bytes();
        assert_eq!(
            combine(&*sum, &[&one, &big], Output::Display),
            i64::MAX.to_be_bytes()
        );
        let max = NumericKind(Fold::Max).build(&opts(&[])).unwrap();
        assert_eq!(
            combine(&*max, &[b"3", b"-7", b"12"], Output::Display),
            b"12"
        );
        let min = NumericKind(Fold::Min).build(&opts(&[])).unwrap();
        assert_eq!(
            combine(&*min, &[b"3", b"-7", b"12"], Output::Display),
            b"-7"
        );
        assert!(min.prepare_input(b"1.5").is_err());
        let e = NumericKind(Fold::Sum)
            .build(&opts(&[("ENCODING", "hex")]))
            .err()
            .unwrap();
        assert!(e.contains("ENCODING"), "{e}");
        let e = NumericKind(Fold::Sum)
            .build(&opts(&[("MAX", "3")]))
            .err()
            .unwrap();
        assert!(e.contains("MAX"), "{e}");
    }

    #[test]
    fn sets_drop_members_past_max_and_keep_the_count() {
        let uid = SetKind { uids: true }
            .build(&opts(&[("MAX", "3")]))
            .unwrap();
        assert_eq!(
            combine(&*uid, &[b"d9", b"d1", b"d5", b"d1"], Output::Display),
            br#"4 ["d1","d5","d9"]"#
        );
        assert_eq!(
            combine(&*uid, &[b"a", b"b", b"c", b"d"], Output::Display),
            b"4 *"
        );
        let set = SetKind { uids: false }
            .build(&opts(&[("MAX", "3")]))
            .unwrap();
        assert_eq!(
            combine(&*set, &[b"d9", b"d1", b"d1"], Output::Display),
            br#"2 ["d1","d9"]"#
        );
        // Partial results combine again to the same answer.
        let mut a = Vec::new();
        let mut st = uid.state();
        for m in [&b"x"[..], b"y"] {
            st.add(&uid.prepare_input(m).unwrap().unwrap()).unwrap();
        }
        st.finish(&mut a, Output::Partial);
        assert!(!combine(&*uid, &[b"z"], Output::Partial).is_empty());
        let mut st = uid.state();
        st.add(&a).unwrap();
        st.add(&uid.prepare_input(b"z").unwrap().unwrap()).unwrap();
        let mut out = Vec::new();
        st.finish(&mut out, Output::Display);
        assert_eq!(out, br#"3 ["x","y","z"]"#);
        assert!(
            SetKind { uids: true }
                .build(&opts(&[("MAX", "lots")]))
                .err()
                .unwrap()
                .contains("MAX")
        );
    }
}

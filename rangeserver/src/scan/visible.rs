//! The cells of one access group that a reader may see: deletes applied, versions counted, TTL
//! expired cells and unselected columns skipped, counters combined, TIME_ORDER DESC reversed.
//!
//! The same cursor drives major compactions ([`Mode::MajorCompaction`]): there it drops delete
//! markers and everything they cover, expired cells, versions beyond MAX_VERSIONS and dropped
//! families, and writes each counter as one `=total` cell.

use std::collections::VecDeque;
use std::sync::Arc;

use common::key::{self, CellFlag, KeyRef};

use crate::error::{Error, Result};
use crate::iter::CellIter;
use crate::scan::spec::QualifierMatch;

/// After this many `next()` calls without reaching a target, seek instead.
const NEXT_BEFORE_SEEK: usize = 8;
/// Most versions of one TIME_ORDER DESC cell a scan buffers to return them oldest first.
pub const MAX_DESC_VERSIONS: usize = 100_000;

/// How the scan treats one family id.
#[derive(Debug, Clone)]
pub struct FamilyRule {
    /// Returned at all (false for unknown, dropped or unselected families).
    pub selected: bool,
    /// Qualifier matchers; empty means all qualifiers.
    pub qualifiers: Vec<QualifierMatch>,
    /// Versions per cell; 0 means unlimited.
    pub max_versions: u32,
    /// Time to live in nanoseconds; 0 means forever.
    pub ttl_ns: i64,
    pub counter: bool,
    /// TIME_ORDER DESC: versions come oldest first.
    pub time_desc: bool,
}

impl FamilyRule {
    /// A family that is not returned.
    pub fn unselected() -> Self {
        Self {
            selected: false,
            qualifiers: Vec::new(),
            max_versions: 0,
            ttl_ns: 0,
            counter: false,
            time_desc: false,
        }
    }

    fn wants_qualifier(&self, q: &[u8]) -> bool {
        self.qualifiers.is_empty() || self.qualifiers.iter().any(|m| m.matches(q))
    }
}

/// Reading or compacting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Scan,
    MajorCompaction,
}

/// Settings shared by the access-group cursors of one scan.
#[derive(Debug, Clone)]
pub struct VisibleOptions {
    /// Indexed by family id; must have 256 entries.
    pub families: Arc<Vec<FamilyRule>>,
    pub time_start: i64,
    pub time_end: i64,
    /// "Now" for TTL, in nanoseconds since the epoch.
    pub now_ns: i64,
    pub return_deletes: bool,
    pub mode: Mode,
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

/// See the module documentation.
pub struct VisibleCells<I: CellIter> {
    src: I,
    st: State,
}

/// Everything but the source, so that state can change while a key borrowed from it is read.
struct State {
    opts: VisibleOptions,
    // Where the source stands, as encoded prefixes.
    cur_row: Vec<u8>,
    cur_family: u16,
    cur_cell: Vec<u8>,
    row_delete_ts: i64,
    family_delete_ts: i64,
    cell_delete_ts: i64,
    version_deletes: Vec<i64>,
    versions: u32,
    last_ts: Option<i64>,
    // Counter being combined.
    counter_key: Option<Vec<u8>>,
    counter_sum: i64,
    counter_done: bool,
    // TIME_ORDER DESC versions of the current cell, newest first.
    desc_buf: Vec<(Vec<u8>, Vec<u8>)>,
    pending: VecDeque<(Vec<u8>, Vec<u8>)>,
    out_key: Vec<u8>,
    out_value: Vec<u8>,
    out_valid: bool,
    /// After a seek: nothing below this key is returned, but deletes before it are read.
    seek_target: Option<Vec<u8>>,
}

impl<I: CellIter> VisibleCells<I> {
    pub fn new(src: I, opts: VisibleOptions) -> Self {
        assert_eq!(opts.families.len(), 256, "one rule per family id");
        Self {
            src,
            st: State::new(opts),
        }
    }

    /// Produces the next output cell, or leaves `out_valid` false at the end.
    fn advance(&mut self) -> Result<()> {
        advance(&mut self.src, &mut self.st)
    }
}

impl State {
    fn new(opts: VisibleOptions) -> Self {
        Self {
            opts,
            cur_row: Vec::new(),
            cur_family: u16::MAX,
            cur_cell: Vec::new(),
            row_delete_ts: i64::MIN,
            family_delete_ts: i64::MIN,
            cell_delete_ts: i64::MIN,
            version_deletes: Vec::new(),
            versions: 0,
            last_ts: None,
            counter_key: None,
            counter_sum: 0,
            counter_done: false,
            desc_buf: Vec::new(),
            pending: VecDeque::new(),
            out_key: Vec::new(),
            out_value: Vec::new(),
            out_valid: false,
            seek_target: None,
        }
    }

    fn rule(&self, family: u8) -> &FamilyRule {
        &self.opts.families[family as usize]
    }

    fn reset_row(&mut self) {
        self.cur_row.clear();
        self.row_delete_ts = i64::MIN;
        self.reset_family();
    }

    fn reset_family(&mut self) {
        self.cur_family = u16::MAX;
        self.family_delete_ts = i64::MIN;
        self.reset_cell();
    }

    fn reset_cell(&mut self) {
        self.cur_cell.clear();
        self.cell_delete_ts = i64::MIN;
        self.version_deletes.clear();
        self.versions = 0;
        self.last_ts = None;
        self.counter_key = None;
        self.counter_sum = 0;
        self.counter_done = false;
    }

    /// Moves buffered output of the finished cell (counter total, reversed versions) to `pending`.
    fn finish_cell(&mut self) {
        if let Some(k) = self.counter_key.take() {
            let v = match self.opts.mode {
                Mode::Scan => self.counter_sum.to_string(),
                Mode::MajorCompaction => format!("={}", self.counter_sum),
            };
            self.pending.push_back((k, v.into_bytes()));
        }
        while let Some(c) = self.desc_buf.pop() {
            self.pending.push_back(c);
        }
    }

    fn emit(&mut self, key: &[u8], value: &[u8]) {
        self.out_key.clear();
        self.out_key.extend_from_slice(key);
        self.out_value.clear();
        self.out_value.extend_from_slice(value);
        self.out_valid = true;
    }

    /// The first key of the next selected family after `family` in `row`, or the row's end.
    fn next_family_start(&self, row: &[u8], family: u8) -> Vec<u8> {
        let next = (family as usize + 1..256).find(|&f| self.opts.families[f].selected);
        match next {
            Some(f) => key::cell_start(row, f as u8, b""),
            None => key::row_end(row),
        }
    }
}

/// Moves the source to `target`: a few `next()` calls if it is near, else a seek.
fn skip_to<I: CellIter>(src: &mut I, target: &[u8]) -> Result<()> {
    for _ in 0..NEXT_BEFORE_SEEK {
        if !src.valid() || src.key() >= target {
            return Ok(());
        }
        src.next()?;
    }
    if src.valid() && src.key() < target {
        src.seek(target)?;
    }
    Ok(())
}

/// Produces the next output cell into `st`, or leaves `st.out_valid` false at the end.
fn advance<I: CellIter>(src: &mut I, st: &mut State) -> Result<()> {
    st.out_valid = false;
    loop {
        if let Some((k, v)) = st.pending.pop_front() {
            if st
                .seek_target
                .as_ref()
                .is_some_and(|t| k.as_slice() < t.as_slice())
            {
                continue;
            }
            st.out_key = k;
            st.out_value = v;
            st.out_valid = true;
            return Ok(());
        }
        if !src.valid() {
            st.finish_cell();
            if st.pending.is_empty() {
                return Ok(());
            }
            continue;
        }
        let src_key = src.key();
        let k = KeyRef::from_trusted(src_key).map_err(|e| Error::Corrupt {
            file: "<merged scan>".into(),
            offset: 0,
            msg: format!("bad key {src_key:?}: {e}"),
        })?;
        if !key::bytes_eq(k.row_prefix(), &st.cur_row) {
            st.finish_cell();
            st.reset_row();
            st.cur_row.extend_from_slice(k.row_prefix());
            if !st.pending.is_empty() {
                continue;
            }
        }
        let family = k.family();
        let flag = k.flag();
        if family as u16 != st.cur_family {
            st.finish_cell();
            st.reset_family();
            st.cur_family = family as u16;
            if family != key::DELETE_ROW_FAMILY && !st.rule(family).selected {
                let target = st.next_family_start(&k.row(), family);
                skip_to(src, &target)?;
                continue;
            }
            if !st.pending.is_empty() {
                continue;
            }
        }
        // A seek into the middle of a row still reads the row's and family's deletes.
        if let Some(t) = &st.seek_target {
            if src_key >= t.as_slice() {
                st.seek_target = None;
            } else if family != key::DELETE_ROW_FAMILY
                && !(flag == CellFlag::DeleteColumnFamily && k.qualifier().is_empty())
            {
                let t = t.clone();
                let row = k.row();
                let fam_start = match seek_family(&t) {
                    Some(f) if f > family => Some(key::cell_start(&row, f, b"")),
                    _ => None,
                };
                let to = match fam_start {
                    Some(fs) if fs.as_slice() < t.as_slice() => fs,
                    _ => t,
                };
                skip_to(src, &to)?;
                continue;
            }
        }
        if !key::bytes_eq(k.cell_prefix(), &st.cur_cell) {
            st.finish_cell();
            st.reset_cell();
            st.cur_cell.extend_from_slice(k.cell_prefix());
            if !st.pending.is_empty() {
                continue;
            }
        }
        let ts = k.timestamp();
        match flag {
            CellFlag::DeleteRow => {
                st.row_delete_ts = st.row_delete_ts.max(ts);
            }
            CellFlag::DeleteColumnFamily => {
                st.family_delete_ts = st.family_delete_ts.max(ts);
            }
            CellFlag::DeleteCell | CellFlag::DeleteCellVersion | CellFlag::Insert => {
                let rule = st.rule(family);
                if !rule.wants_qualifier(&k.qualifier()) {
                    let target = key::cell_end(&k.row(), family, &k.qualifier());
                    skip_to(src, &target)?;
                    continue;
                }
                if flag == CellFlag::DeleteCell {
                    st.cell_delete_ts = st.cell_delete_ts.max(ts);
                } else if flag == CellFlag::DeleteCellVersion {
                    st.version_deletes.push(ts);
                }
            }
        }
        if flag.is_delete() {
            // Deletes read before a seek target only set state; they are not returned.
            if st.opts.return_deletes && st.opts.mode == Mode::Scan && st.seek_target.is_none() {
                st.emit(src_key, src.value());
                src.next()?;
                return Ok(());
            }
            src.next()?;
            continue;
        }
        // An insert.
        let covered = ts <= st.row_delete_ts
            || ts <= st.family_delete_ts
            || ts <= st.cell_delete_ts
            || st.version_deletes.contains(&ts);
        let same_ts = st.last_ts == Some(ts);
        st.last_ts = Some(ts);
        let rule = st.rule(family);
        let expired = rule.ttl_ns > 0 && ts < st.opts.now_ns.saturating_sub(rule.ttl_ns);
        let out_of_time = ts < st.opts.time_start || ts >= st.opts.time_end;
        if covered || same_ts || expired || out_of_time {
            src.next()?;
            continue;
        }
        if rule.counter {
            if !st.counter_done {
                let (reset, n) = parse_counter(src.value()).unwrap_or((false, 0));
                if st.counter_key.is_none() {
                    st.counter_key = Some(src_key.to_vec());
                }
                // Newest first: increments add up until the newest reset, which ends the sum.
                st.counter_sum = st.counter_sum.wrapping_add(n);
                st.counter_done = reset;
            }
            src.next()?;
            continue;
        }
        let (max, time_desc) = (rule.max_versions, rule.time_desc);
        st.versions += 1;
        if max > 0 && st.versions > max {
            let target = key::cell_end(&k.row(), family, &k.qualifier());
            skip_to(src, &target)?;
            continue;
        }
        if time_desc && st.opts.mode == Mode::Scan {
            if st.desc_buf.len() >= MAX_DESC_VERSIONS {
                return Err(Error::InvalidInput(format!(
                    "cell {k:?} has more than {MAX_DESC_VERSIONS} versions; a TIME_ORDER DESC \
                     family returns them oldest first only up to that many (set MAX_VERSIONS)"
                )));
            }
            let c = (src_key.to_vec(), src.value().to_vec());
            st.desc_buf.push(c);
            src.next()?;
            continue;
        }
        st.emit(src_key, src.value());
        src.next()?;
        return Ok(());
    }
}

/// The family byte of an encoded (possibly partial) key, if it has one.
fn seek_family(t: &[u8]) -> Option<u8> {
    let mut i = 0;
    while i + 1 < t.len() {
        if t[i] == 0 {
            match t[i + 1] {
                1 => return t.get(i + 2).copied(),
                0xFF => i += 2,
                _ => return None,
            }
        } else {
            i += 1;
        }
    }
    None
}

impl<I: CellIter> CellIter for VisibleCells<I> {
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.st.reset_row();
        self.st.pending.clear();
        self.st.desc_buf.clear();
        // Start at the beginning of the target's row, so its row and family deletes are seen.
        let row_len = row_prefix_len(target);
        self.src.seek(&target[..row_len])?;
        self.st.seek_target = Some(target.to_vec());
        self.advance()
    }

    fn valid(&self) -> bool {
        self.st.out_valid
    }

    fn key(&self) -> &[u8] {
        &self.st.out_key
    }

    fn value(&self) -> &[u8] {
        &self.st.out_value
    }

    fn next(&mut self) -> Result<()> {
        self.advance()
    }
}

/// Length of the encoded row prefix (row plus terminator) of a possibly partial key.
fn row_prefix_len(t: &[u8]) -> usize {
    let mut i = 0;
    while i + 1 < t.len() {
        if t[i] == 0 {
            match t[i + 1] {
                0xFF => i += 2,
                _ => return i + 2,
            }
        } else {
            i += 1;
        }
    }
    t.len()
}

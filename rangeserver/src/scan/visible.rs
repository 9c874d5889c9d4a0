//! The cells of one access group that a reader may see: deletes applied, versions counted, TTL
//! expired cells, cells written after the scan's pinned revision and unselected columns skipped,
//! combiner families (COUNTER among them) combined, TIME_ORDER DESC reversed.
//!
//! The same cursor drives major compactions ([`Mode::MajorCompaction`]): there it drops delete
//! markers and everything they cover, expired cells, versions beyond MAX_VERSIONS and dropped
//! families, and writes each combined cell in its stored form (a counter as one `=total`).

use std::collections::VecDeque;
use std::sync::Arc;

use common::key::{self, CellFlag, KeyRef};

use crate::error::{Error, Result};
use crate::iter::CellIter;
use crate::iterators::Families;
use crate::iterators::combine::{CombineState, Combiner, Output};
use crate::scan::spec::QualifierMatch;

/// After this many `next()` calls without reaching a target, seek instead.
const NEXT_BEFORE_SEEK: usize = 8;
/// Most versions of one TIME_ORDER DESC cell a scan buffers to return them oldest first.
pub const MAX_DESC_VERSIONS: usize = 100_000;

/// How the scan treats one family id.
#[derive(Clone)]
pub struct FamilyRule {
    /// Returned at all (false for unknown, dropped or unselected families).
    pub selected: bool,
    /// Qualifier matchers; empty means all qualifiers.
    pub qualifiers: Vec<QualifierMatch>,
    /// Versions per cell; 0 means unlimited.
    pub max_versions: u32,
    /// Time to live in nanoseconds; 0 means forever.
    pub ttl_ns: i64,
    /// The family's combiner (COUNTER's is `counter`): every version of a cell, equal
    /// timestamps included, is combined into one.
    pub combiner: Option<Arc<dyn Combiner>>,
    /// TIME_ORDER DESC: versions come oldest first.
    pub time_desc: bool,
}

impl std::fmt::Debug for FamilyRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FamilyRule")
            .field("selected", &self.selected)
            .field("qualifiers", &self.qualifiers)
            .field("max_versions", &self.max_versions)
            .field("ttl_ns", &self.ttl_ns)
            .field("combined", &self.combiner.is_some())
            .field("time_desc", &self.time_desc)
            .finish()
    }
}

impl FamilyRule {
    /// A family that is not returned.
    pub fn unselected() -> Self {
        Self {
            selected: false,
            qualifiers: Vec::new(),
            max_versions: 0,
            ttl_ns: 0,
            combiner: None,
            time_desc: false,
        }
    }

    /// True for a family whose versions are combined.
    pub fn combined(&self) -> bool {
        self.combiner.is_some()
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
    /// Delete markers are returned too. In [`Mode::MajorCompaction`]: kept in the output
    /// (with what they cover dropped), for a compaction of stores that a cell cache still
    /// sits on top of, whose cells a marker's timestamp may cover.
    pub return_deletes: bool,
    pub mode: Mode,
    /// Cells with a revision above this were written after the scan began and are not seen
    /// (`i64::MAX`: everything).
    pub snapshot_rev: i64,
}

pub use crate::iterators::combine::parse_counter;

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
    // Cell being combined: its newest version's key, the family's accumulator (reused from
    // cell to cell; one slot per family id, made at the first combined cell so that a scan
    // of no combined family allocates nothing), and whether older versions can still change
    // the result.
    comb_key: Option<Vec<u8>>,
    comb_states: Vec<Option<Box<dyn CombineState>>>,
    comb_done: bool,
    comb_buf: Vec<u8>,
    /// Families the current seek asked for (on top of the rules' selection).
    mask: Families,
    // TIME_ORDER DESC versions of the current cell, newest first.
    desc_buf: Vec<(Vec<u8>, Vec<u8>)>,
    pending: VecDeque<(Vec<u8>, Vec<u8>)>,
    out_key: Vec<u8>,
    out_value: Vec<u8>,
    out_valid: bool,
    /// After a seek: nothing below this key is returned, but deletes before it are read.
    seek_target: Option<Vec<u8>>,
    /// The buffer of the last seek target, kept for the next ([`State::clear_seek_target`]).
    spare_target: Vec<u8>,
    /// The end of the cell being skipped (a buffer kept from skip to skip).
    skip_buf: Vec<u8>,
    /// The end of the last seek ([`CellIter::seek_until`]), passed on to the source's own
    /// seeks until the next one: the caller reads nothing at or past it.
    end: Option<Vec<u8>>,
    /// After a seek into the versions of a combined cell: the cell is combined whole (all its
    /// versions), and returned only if its key is not below this (as Accumulo's `Combiner`
    /// widens a seek to the cell's start), so re-seeking just past a returned combined cell
    /// returns nothing more of it.
    emit_floor: Option<Vec<u8>>,
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
            comb_key: None,
            comb_states: Vec::new(),
            comb_done: false,
            comb_buf: Vec::new(),
            mask: Families::all(),
            desc_buf: Vec::new(),
            pending: VecDeque::new(),
            out_key: Vec::new(),
            out_value: Vec::new(),
            out_valid: false,
            seek_target: None,
            spare_target: Vec::new(),
            skip_buf: Vec::new(),
            end: None,
            emit_floor: None,
        }
    }

    fn rule(&self, family: u8) -> &FamilyRule {
        &self.opts.families[family as usize]
    }

    /// True if the scan returns cells of this family.
    fn wanted(&self, family: u8) -> bool {
        self.opts.families[family as usize].selected && self.mask.contains(family)
    }

    /// Drops the seek target, keeping its buffer for the next seek's.
    fn clear_seek_target(&mut self) {
        if let Some(t) = self.seek_target.take() {
            self.spare_target = t;
        }
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
        self.comb_key = None;
        self.comb_done = false;
    }

    /// Moves buffered output of the finished cell (combined value, reversed versions) to
    /// `pending`.
    fn finish_cell(&mut self) {
        if let Some(k) = self.comb_key.take() {
            let family = KeyRef::from_trusted(&k).map(|r| r.family()).unwrap_or(0);
            let output = match self.opts.mode {
                Mode::Scan => Output::Display,
                Mode::MajorCompaction => Output::Full,
            };
            self.comb_buf.clear();
            if let Some(st) = self
                .comb_states
                .get_mut(family as usize)
                .and_then(|s| s.as_mut())
            {
                st.finish(&mut self.comb_buf, output);
                st.reset();
            }
            self.pending.push_back((k, self.comb_buf.clone()));
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
        let next = (family as usize + 1..256).find(|&f| self.wanted(f as u8));
        match next {
            Some(f) => key::cell_start(row, f as u8, b""),
            None => key::row_end(row),
        }
    }
}

/// The error for a cell of `src`'s that is damaged: it names the cell store and the offset of
/// the block holding it, or the cell cache.
pub(crate) fn damaged<I: CellIter + ?Sized>(src: &I, msg: String) -> Error {
    let (file, offset) = src
        .origin()
        .unwrap_or_else(|| ("<cell cache>".to_string(), 0));
    Error::Corrupt { file, offset, msg }
}

/// Moves the source to `target`: a few `next()` calls if it is near, else a seek.
fn skip_to<I: CellIter>(src: &mut I, target: &[u8], end: Option<&[u8]>) -> Result<()> {
    for _ in 0..NEXT_BEFORE_SEEK {
        if !src.valid() || src.key() >= target {
            return Ok(());
        }
        src.next()?;
    }
    if src.valid() && src.key() < target {
        src.seek_until(target, end)?;
    }
    Ok(())
}

/// Skips the rest of the cell `src` stands on (its other versions), to an end made from the
/// key's encoded cell prefix in `st`'s kept buffer.
fn skip_cell<I: CellIter>(src: &mut I, st: &mut State) -> Result<()> {
    let mut target = std::mem::take(&mut st.skip_buf);
    let k = src.key();
    key::cell_end_into(
        &k[..k.len().saturating_sub(key::KEY_SUFFIX_LEN)],
        &mut target,
    );
    let r = skip_to(src, &target, st.end.as_deref());
    st.skip_buf = target;
    r
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
            if let Some(f) = &st.emit_floor {
                if k.as_slice() < f.as_slice() {
                    continue;
                }
                st.emit_floor = None;
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
        let k = KeyRef::from_trusted(src_key)
            .map_err(|e| damaged(src, format!("bad key {src_key:?}: {e}")))?;
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
            if family != key::DELETE_ROW_FAMILY && !st.wanted(family) {
                let target = st.next_family_start(&k.row(), family);
                skip_to(src, &target, st.end.as_deref())?;
                continue;
            }
            if !st.pending.is_empty() {
                continue;
            }
        }
        // A seek into the middle of a row still reads the row's and family's deletes.
        if let Some(t) = &st.seek_target {
            if src_key >= t.as_slice() {
                st.clear_seek_target();
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
                skip_to(src, &to, st.end.as_deref())?;
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
        if k.revision() > st.opts.snapshot_rev {
            // Written after the scan began: neither its value nor its delete is seen.
            src.next()?;
            continue;
        }
        match flag {
            CellFlag::DeleteRow => {
                st.row_delete_ts = st.row_delete_ts.max(ts);
            }
            CellFlag::DeleteColumnFamily => {
                st.family_delete_ts = st.family_delete_ts.max(ts);
            }
            CellFlag::DeleteCell | CellFlag::DeleteCellVersion | CellFlag::Insert => {
                let rule = st.rule(family);
                if !rule.qualifiers.is_empty() && !rule.wants_qualifier(&k.qualifier()) {
                    skip_cell(src, st)?;
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
            if st.opts.return_deletes && st.seek_target.is_none() {
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
        let rule = st.rule(family);
        let (ttl_ns, combined) = (rule.ttl_ns, rule.combiner.is_some());
        // Versions with equal timestamps: the newest revision wins, except in combined
        // families, where every version counts once.
        let same_ts = st.last_ts == Some(ts) && !combined;
        st.last_ts = Some(ts);
        let expired = ttl_ns > 0 && ts < st.opts.now_ns.saturating_sub(ttl_ns);
        let out_of_time = ts < st.opts.time_start || ts >= st.opts.time_end;
        if covered || same_ts || expired || out_of_time {
            src.next()?;
            continue;
        }
        if combined {
            if !st.comb_done {
                let fi = family as usize;
                if st.comb_states.is_empty() {
                    st.comb_states.resize_with(256, || None);
                }
                if st.comb_states[fi].is_none() {
                    let c = st.opts.families[fi].combiner.as_ref();
                    st.comb_states[fi] = c.map(|c| c.state());
                }
                if st.comb_key.is_none() {
                    st.comb_key = Some(src_key.to_vec());
                }
                let state = st.comb_states[fi].as_mut().expect("just made");
                // Newest first; a combiner may say older versions cannot change the result
                // (a counter's reset).
                let more = state
                    .add(src.value())
                    .map_err(|e| damaged(src, format!("combined cell {k:?}: {e}")))?;
                st.comb_done = !more;
            }
            src.next()?;
            continue;
        }
        let rule = st.rule(family);
        let (max, time_desc) = (rule.max_versions, rule.time_desc);
        st.versions += 1;
        if max > 0 && st.versions > max {
            skip_cell(src, st)?;
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

impl<I: CellIter> VisibleCells<I> {
    /// Restricts the families returned from the next seek on (the rules' selection still
    /// applies).
    pub fn set_mask(&mut self, mask: Families) {
        self.st.mask = mask;
    }

    /// Stops returning cells until the next seek (a group the current seek does not need).
    pub fn park(&mut self) {
        self.st.reset_row();
        self.st.pending.clear();
        self.st.desc_buf.clear();
        self.st.clear_seek_target();
        self.st.out_valid = false;
    }
}

impl<I: CellIter> CellIter for VisibleCells<I> {
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.seek_until(target, None)
    }

    fn seek_until(&mut self, target: &[u8], end: Option<&[u8]>) -> Result<()> {
        self.st.reset_row();
        self.st.pending.clear();
        self.st.desc_buf.clear();
        // Start at the beginning of the target's row, so its row and family deletes are seen.
        let row_len = row_prefix_len(target);
        match (end, &mut self.st.end) {
            (None, e) => *e = None,
            (Some(end), Some(e)) => {
                e.clear();
                e.extend_from_slice(end);
            }
            (Some(end), e) => *e = Some(end.to_vec()),
        }
        // Without row or family deletes in the sources nothing before the target in its row
        // can hide a cell: seek straight to it.
        let direct = target.len() > row_len && !self.src.may_hold_wide_deletes();
        if !direct {
            self.src.seek_until(&target[..row_len], end)?;
        }
        self.st.emit_floor = None;
        self.st.clear_seek_target();
        let mut t = std::mem::take(&mut self.st.spare_target);
        t.clear();
        t.extend_from_slice(target);
        if let Some(cell_len) = cell_prefix_len(target)
            && target.len() > cell_len
            && self.st.rule(target[row_len]).combiner.is_some()
        {
            // Inside a combined cell's versions: combine it whole, return it only if its key
            // is not below the target.
            self.st.emit_floor = Some(t.clone());
            t.truncate(cell_len);
        }
        if direct {
            self.src.seek_until(&t, end)?;
            self.st.spare_target = t;
        } else {
            self.st.seek_target = Some(t);
        }
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

/// Length of the encoded (row, family, qualifier) prefix, qualifier terminator included, of a
/// possibly partial key; `None` if the key ends before its qualifier does.
fn cell_prefix_len(t: &[u8]) -> Option<usize> {
    let row_len = row_prefix_len(t);
    if row_len < 2 || row_len >= t.len() || t[row_len - 2..row_len] != [0, 1] {
        return None;
    }
    let mut i = row_len + 1;
    while i + 1 < t.len() {
        if t[i] == 0 {
            match t[i + 1] {
                0xFF => i += 2,
                1 => return Some(i + 2),
                _ => return None,
            }
        } else {
            i += 1;
        }
    }
    None
}

/// Length of the encoded row prefix (row plus terminator) of a possibly partial key.
pub fn row_prefix_len(t: &[u8]) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::VecIter;
    use crate::iterators::CombinerKind;
    use crate::iterators::combine::CounterKind;

    fn key(row: &str, qual: &str, ts: i64, rev: i64) -> Vec<u8> {
        let mut k = Vec::new();
        key::encode_parts(
            row.as_bytes(),
            1,
            qual.as_bytes(),
            CellFlag::Insert,
            ts,
            rev,
            &mut k,
        );
        k
    }

    /// A [`VecIter`] that claims wide deletes, so [`VisibleCells`] always seeks through the
    /// row's start.
    struct Widened(VecIter);

    impl CellIter for Widened {
        fn seek(&mut self, key: &[u8]) -> Result<()> {
            self.0.seek(key)
        }
        fn valid(&self) -> bool {
            self.0.valid()
        }
        fn key(&self) -> &[u8] {
            self.0.key()
        }
        fn value(&self) -> &[u8] {
            self.0.value()
        }
        fn next(&mut self) -> Result<()> {
            self.0.next()
        }
    }

    fn scan_opts(rules: Vec<FamilyRule>) -> VisibleOptions {
        VisibleOptions {
            families: Arc::new(rules),
            time_start: i64::MIN,
            time_end: i64::MAX,
            now_ns: 0,
            return_deletes: false,
            mode: Mode::Scan,
            snapshot_rev: i64::MAX,
        }
    }

    fn drain(v: &mut impl CellIter, limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        while v.valid() && out.len() < limit {
            out.push((v.key().to_vec(), v.value().to_vec()));
            v.next().unwrap();
        }
        out
    }

    proptest::proptest! {
        /// A seek into the middle of a row goes straight to its target when the source holds
        /// no row or family delete, and returns exactly what the seek through the row's start
        /// returns; with such deletes the source says so and the seek still starts at the row.
        #[test]
        fn a_direct_seek_into_a_row_returns_what_the_seek_from_its_start_returns(
            cells in proptest::collection::vec(
                (0u8..3, 1u8..3, 0usize..4, 1i64..5, 0u8..5), 0..40),
            wide in proptest::bool::ANY,
            targets in proptest::collection::vec(
                (0u8..3, 1u8..3, 0usize..4, 0u8..3, 1i64..5), 1..8),
        ) {
            const QUALS: [&str; 4] = ["", "a", "ab", "b"];
            let mut enc: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            for (rev, (r, f, q, ts, kind)) in cells.iter().enumerate() {
                let row = [b'r', b'0' + r];
                let (fam, qual, flag) = match kind {
                    0 | 1 => (*f, QUALS[*q], CellFlag::Insert),
                    2 => (*f, QUALS[*q], CellFlag::DeleteCell),
                    3 if wide => (0, "", CellFlag::DeleteRow),
                    3 => (*f, QUALS[*q], CellFlag::DeleteCellVersion),
                    _ if wide => (*f, "", CellFlag::DeleteColumnFamily),
                    _ => (*f, QUALS[*q], CellFlag::Insert),
                };
                let mut k = Vec::new();
                key::encode_parts(&row, fam, qual.as_bytes(), flag, *ts, rev as i64 + 1, &mut k);
                enc.push((k, b"1".to_vec()));
            }
            enc.sort();
            enc.dedup_by(|a, b| a.0 == b.0);
            let has_wide = enc.iter().any(|(k, _)| key::is_wide_delete(k));
            let mut rules = vec![FamilyRule::unselected(); 256];
            rules[1] = FamilyRule { selected: true, ..FamilyRule::unselected() };
            rules[2] = FamilyRule {
                selected: true,
                combiner: Some(CounterKind.build(&Default::default()).unwrap()),
                ..FamilyRule::unselected()
            };
            let direct_src = VecIter::new(enc.clone());
            proptest::prop_assert_eq!(direct_src.may_hold_wide_deletes(), has_wide);
            let mut direct = VisibleCells::new(direct_src, scan_opts(rules.clone()));
            let mut through = VisibleCells::new(Widened(VecIter::new(enc)), scan_opts(rules));
            for (r, f, q, cut, ts) in targets {
                let row = [b'r', b'0' + r];
                // A cell's start, a qualifier prefix (no terminator), or a key inside the
                // cell's versions.
                let mut t = key::cell_start(&row, f, QUALS[q].as_bytes());
                match cut {
                    0 => {}
                    1 => t.truncate(t.len() - 2),
                    _ => {
                        t.clear();
                        key::encode_parts(&row, f, QUALS[q].as_bytes(), CellFlag::Insert, ts, 3, &mut t);
                    }
                }
                direct.seek_until(&t, None).unwrap();
                through.seek_until(&t, None).unwrap();
                proptest::prop_assert_eq!(drain(&mut direct, 6), drain(&mut through, 6));
            }
        }
    }

    /// Re-seeking just past a combined cell returns nothing more of it (not a second, partial
    /// combination of its older versions).
    #[test]
    fn a_seek_into_a_combined_cells_versions_does_not_return_it_again() {
        let mut rules = vec![FamilyRule::unselected(); 256];
        rules[1] = FamilyRule {
            selected: true,
            combiner: Some(CounterKind.build(&Default::default()).unwrap()),
            ..FamilyRule::unselected()
        };
        let cells = vec![
            (key("r", "a", 30, 3), b"1".to_vec()),
            (key("r", "a", 20, 2), b"2".to_vec()),
            (key("r", "a", 10, 1), b"4".to_vec()),
            (key("r", "b", 10, 4), b"8".to_vec()),
        ];
        let newest = cells[0].0.clone();
        let mut v = VisibleCells::new(VecIter::new(cells), scan_opts(rules));
        v.seek(b"").unwrap();
        assert_eq!((v.key(), v.value()), (newest.as_slice(), &b"7"[..]));
        let mut past = newest.clone();
        past.push(0);
        v.seek(&past).unwrap();
        assert_eq!(v.value(), b"8");
        // Seeking to the cell's newest key itself (inclusive) returns it whole.
        v.seek(&newest).unwrap();
        assert_eq!(v.value(), b"7");
        // Seeking between its versions: the cell's key is below the target, so it is not
        // returned.
        let second = key("r", "a", 20, 2);
        v.seek(&second).unwrap();
        assert_eq!(v.value(), b"8");
    }
}

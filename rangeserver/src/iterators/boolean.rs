//! `boolean_index`: a boolean query over a partitioned word index, answered inside the range
//! server (Accumulo wikisearch's `BooleanLogicIterator` over its `FieldIndexIterator`s).
//!
//! The table it runs on keeps, in each row (a partition), a posting per (field, term,
//! document) in the index family, qualifier `FIELD \0 term \0 doc`, and the documents' fields
//! in the document family, qualifier `doc \0 FIELD` (or just `doc`: a document's key is its
//! document-family qualifier up to the last NUL byte). Wikisearch's documents are
//! `lang \0 id` (ten digits), so document keys compare as bytes in one order shared by every
//! posting list.
//!
//! For each row in its seek range the iterator opens one cursor per term of the query (a deep
//! copy of its source, seeked to that term's posting run), finds the matching documents in
//! document order (AND leapfrogs: every cursor seeks to the largest candidate; OR merges; NOT
//! probes a candidate; a query with no positive term walks the row's documents) and returns
//! each match's document-family cells, in key order, in the same pass. Only document-family
//! cells come out; the scan must select both families.
//!
//! Options: `QUERY` (the query as JSON: `{"t":["FIELD","term"]}`, `{"and":[...]}`,
//! `{"or":[...]}`, `{"not":...}`), `INDEX_FAMILY` (default `fi`), `DOC_FAMILY` (default
//! `doc`). A seek may start inside a row, at a document (the re-seek rule): the iterator
//! starts its search at that document and returns only cells at or after the start. It yields
//! between documents once the scan's budget is spent: each posting stepped or seeked in a
//! search that ends a row without a further match costs one (a search that finds a document
//! is free, as a filter pays only for what it skips).

use std::collections::VecDeque;

use common::TableSchema;
use common::key::{self, KeyRef};
use serde::Deserialize;

use super::filters::known_options;
use super::{Budget, Families, IterEnv, IterOptions, IterScope, IteratorKind, KvIter, SeekRange};
use crate::error::{Error, Result};

/// Most terms (leaves) one query may have: each is a cursor.
pub const MAX_QUERY_TERMS: usize = 1024;
/// Postings a term's cursor steps over before it seeks instead.
const STEPS_BEFORE_SEEK: usize = 8;
/// Cells the fetch cursor steps over toward the next match before it seeks instead: about
/// one document's fields, so that dense matches (a frequent term) step and sparse ones seek
/// at once.
const FETCH_STEPS_BEFORE_SEEK: usize = 3;

/// A query as the `QUERY` option spells it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub enum Query {
    /// A term of a field: `{"t": ["TEXT", "old"]}`.
    #[serde(rename = "t")]
    Term(String, String),
    #[serde(rename = "and")]
    And(Vec<Query>),
    #[serde(rename = "or")]
    Or(Vec<Query>),
    #[serde(rename = "not")]
    Not(Box<Query>),
}

impl Query {
    /// Parses and checks the `QUERY` option; the message says what is wrong.
    pub fn parse(s: &str) -> std::result::Result<Query, String> {
        let q: Query =
            serde_json::from_str(s).map_err(|e| format!("option QUERY is not a query: {e}"))?;
        let n = q.terms();
        if n == 0 {
            return Err("option QUERY has no term".into());
        }
        if n > MAX_QUERY_TERMS {
            return Err(format!(
                "option QUERY has {n} terms, more than {MAX_QUERY_TERMS}"
            ));
        }
        q.check()?;
        Ok(q)
    }

    fn terms(&self) -> usize {
        match self {
            Query::Term(..) => 1,
            Query::And(v) | Query::Or(v) => v.iter().map(Query::terms).sum(),
            Query::Not(q) => q.terms(),
        }
    }

    fn check(&self) -> std::result::Result<(), String> {
        match self {
            Query::Term(f, t) => {
                if f.contains('\0') || t.contains('\0') || f.is_empty() || t.is_empty() {
                    return Err(format!(
                        "option QUERY: term {f:?}:{t:?} is empty or holds a NUL byte"
                    ));
                }
                Ok(())
            }
            Query::And(v) | Query::Or(v) if v.is_empty() => {
                Err("option QUERY: an empty and/or".into())
            }
            Query::And(v) | Query::Or(v) => v.iter().try_for_each(Query::check),
            Query::Not(q) => q.check(),
        }
    }
}

/// The registered kind.
pub struct BooleanIndexKind;

fn family_id(
    schema: &TableSchema,
    o: &IterOptions,
    opt: &str,
    default: &str,
) -> std::result::Result<u8, String> {
    let name = o.get(opt).map_or(default, String::as_str);
    schema
        .family(name)
        .filter(|f| !f.deleted)
        .map(|f| f.id)
        .ok_or_else(|| format!("option {opt}: the table has no column family '{name}'"))
}

impl IteratorKind for BooleanIndexKind {
    fn name(&self) -> &str {
        "boolean_index"
    }
    fn scopes(&self) -> &[IterScope] {
        &[IterScope::Scan]
    }
    fn validate(&self, o: &IterOptions, schema: &TableSchema) -> std::result::Result<(), String> {
        known_options(o, &["QUERY", "INDEX_FAMILY", "DOC_FAMILY"])?;
        Query::parse(o.get("QUERY").ok_or("option QUERY is required")?)?;
        let (fi, doc) = (
            family_id(schema, o, "INDEX_FAMILY", "fi")?,
            family_id(schema, o, "DOC_FAMILY", "doc")?,
        );
        if fi == doc {
            return Err("INDEX_FAMILY and DOC_FAMILY are the same family".into());
        }
        Ok(())
    }
    fn build(
        &self,
        source: Box<dyn KvIter>,
        o: &IterOptions,
        env: &IterEnv,
    ) -> Result<Box<dyn KvIter>> {
        let bad = |e: String| Error::InvalidInput(format!("boolean_index: {e}"));
        let query = Query::parse(
            o.get("QUERY")
                .ok_or_else(|| bad("option QUERY is required".into()))?,
        )
        .map_err(bad)?;
        let fi = family_id(&env.schema, o, "INDEX_FAMILY", "fi").map_err(bad)?;
        let doc = family_id(&env.schema, o, "DOC_FAMILY", "doc").map_err(bad)?;
        Ok(Box::new(BooleanIndex::new(
            source,
            &query,
            fi,
            doc,
            env.budget.clone(),
        )))
    }
}

/// What one cursor walks: a term's postings, or the row's documents.
#[derive(Debug, Clone)]
enum Walk {
    /// Index-family qualifiers `FIELD \0 term \0 doc`: this prefix (escaped as in a key),
    /// then the document.
    Postings(Vec<u8>),
    /// Document-family qualifiers `doc \0 FIELD`.
    Documents,
}

/// The query as cursors: leaves are indexes into [`BooleanIndex::cursors`].
#[derive(Debug)]
enum Eval {
    Leaf(usize),
    Or(Vec<Eval>),
    /// Documents every `pos` matches and no `neg` does (`pos` is never empty).
    And {
        pos: Vec<Eval>,
        neg: Vec<Eval>,
    },
}

/// One cursor over a sorted run of document keys in the current row.
///
/// Documents are handled as their keys store them, escaped (`common::key::escape_bytes_into`):
/// escaping keeps their order, so no key is unescaped or copied to compare documents.
struct Cursor {
    walk: Walk,
    /// The length of the current row's encoded prefix: a key's qualifier starts one byte
    /// (the family) after it.
    row_len: usize,
    /// The cursor: the source's raw copy where it offers one (a posting exists as soon as one
    /// of its versions does), else its deep copy.
    it: Option<Box<dyn KvIter>>,
    /// The first key past the run, in the current row.
    end: Vec<u8>,
    /// The (escaped) document it stands on, when `on`.
    cur: Vec<u8>,
    on: bool,
    at_end: bool,
    seek: SeekRange,
}

/// Sets `out` to the encoded key prefix of the row (`row`: its encoded prefix, terminator
/// included) and `family`, followed by `parts` (escaped qualifier bytes): it sorts before every
/// key of the family whose qualifier starts with them.
fn prefix_key(out: &mut Vec<u8>, row: &[u8], family: u8, parts: &[&[u8]]) {
    out.clear();
    out.extend_from_slice(row);
    out.push(family);
    for p in parts {
        out.extend_from_slice(p);
    }
}

/// `a >= b` bytewise, compared inline (documents are short: a `memcmp` call per step
/// dominated the leapfrog).
#[inline]
fn ge(a: &[u8], b: &[u8]) -> bool {
    key::bytes_cmp(a, b).is_ge()
}

/// The smallest byte string above every string that starts with `k`.
fn successor_prefix(k: &[u8]) -> Vec<u8> {
    let mut v = k.to_vec();
    while let Some(&last) = v.last() {
        if last == 0xFF {
            v.pop();
        } else {
            *v.last_mut().expect("not empty") += 1;
            return v;
        }
    }
    v
}

/// The least escaped document above `d` (its successor: `d \0`, escaped).
fn push_successor(d: &mut Vec<u8>) {
    d.extend_from_slice(&[0, 0xFF]);
}

/// The (escaped) document of an escaped index or document qualifier, given how the cursor
/// walks. A document's key is its document-family qualifier up to the last NUL byte, which
/// escaped is the last `00` (only escapes hold one).
fn doc_of<'a>(walk: &Walk, qualifier: &'a [u8]) -> &'a [u8] {
    match walk {
        Walk::Postings(p) => qualifier.get(p.len()..).unwrap_or(&[]),
        Walk::Documents => match qualifier.iter().rposition(|&b| b == 0) {
            Some(i) => &qualifier[..i],
            None => qualifier,
        },
    }
}

impl Cursor {
    fn new(walk: Walk) -> Self {
        Self {
            walk,
            row_len: 0,
            it: None,
            end: Vec::new(),
            cur: Vec::new(),
            on: false,
            at_end: false,
            seek: SeekRange::all(),
        }
    }

    /// Places the cursor's run in the row (its encoded prefix; not positioned yet).
    fn reset(&mut self, row: &[u8], fi: u8, doc: u8) {
        self.row_len = row.len();
        match &self.walk {
            Walk::Postings(p) => {
                prefix_key(&mut self.end, row, fi, &[p]);
                self.end = successor_prefix(&self.end);
            }
            Walk::Documents => {
                // The family's end: the row's prefix and the next family id (the row's end
                // after the last one).
                self.end.clear();
                self.end.extend_from_slice(row);
                match doc.checked_add(1) {
                    Some(f) => self.end.push(f),
                    None => {
                        let n = self.end.len();
                        self.end[n - 1] = 2;
                    }
                }
            }
        }
        self.on = false;
        self.at_end = false;
    }

    fn family(&self, fi: u8, doc: u8) -> u8 {
        match self.walk {
            Walk::Postings(_) => fi,
            Walk::Documents => doc,
        }
    }

    fn current(&self) -> Option<&[u8]> {
        self.on.then_some(self.cur.as_slice())
    }

    /// Reads the document the iterator stands on, skipping versions of the one before.
    fn settle(&mut self, steps: &mut u64) -> Result<()> {
        let it = self.it.as_mut().expect("opened");
        loop {
            if !it.valid() {
                self.on = false;
                self.at_end = true;
                return Ok(());
            }
            // Every key the cursor meets is in its row (its seeks end there).
            let k = it.key();
            let q = k
                .get(self.row_len + 1..k.len().saturating_sub(key::KEY_SUFFIX_LEN + 2))
                .ok_or_else(|| Error::InvalidInput(format!("boolean_index: bad key {k:?}")))?;
            let d = doc_of(&self.walk, q);
            if !self.on || !key::bytes_eq(&self.cur, d) {
                self.cur.clear();
                self.cur.extend_from_slice(d);
                self.on = true;
                return Ok(());
            }
            *steps += 1;
            it.next()?;
        }
    }

    /// Moves to the first document `>= target`; returns it (`None`: the run is over).
    fn seek_doc(
        &mut self,
        target: &[u8],
        proto: &dyn KvIter,
        row: &[u8],
        (fi, doc): (u8, u8),
        steps: &mut u64,
    ) -> Result<Option<&[u8]>> {
        if self.at_end {
            return Ok(None);
        }
        if self.current().is_some_and(|c| ge(c, target)) {
            return Ok(self.current());
        }
        if self.it.is_none() {
            let family = Families::of([self.family(fi, doc)]);
            self.it = Some(match proto.raw_copy(&family)? {
                Some(raw) => raw,
                None => proto.deep_copy()?,
            });
        }
        if self.on {
            // Close behind: step rather than seek.
            for _ in 0..STEPS_BEFORE_SEEK {
                *steps += 1;
                self.it.as_mut().expect("opened").next()?;
                self.settle(steps)?;
                match self.current() {
                    None => return Ok(None),
                    Some(c) if ge(c, target) => return Ok(self.current()),
                    Some(_) => {}
                }
            }
        }
        let family = self.family(fi, doc);
        match &self.walk {
            Walk::Postings(p) => prefix_key(&mut self.seek.start, row, family, &[p, target]),
            Walk::Documents => prefix_key(&mut self.seek.start, row, family, &[target]),
        }
        match &mut self.seek.end {
            Some(e) => {
                e.clear();
                e.extend_from_slice(&self.end);
            }
            e => *e = Some(self.end.clone()),
        }
        *steps += 1;
        self.on = false;
        self.it
            .as_mut()
            .expect("opened")
            .seek(&self.seek, &Families::of([family]))?;
        self.settle(steps)?;
        // A document's own field cells sort after the key of `target` = `doc \0` (the
        // successor of the document a search goes past): step over them.
        while self.current().is_some_and(|c| !ge(c, target)) {
            *steps += 1;
            self.it.as_mut().expect("opened").next()?;
            self.settle(steps)?;
        }
        Ok(self.current())
    }
}

/// See the module documentation.
pub struct BooleanIndex {
    src: Box<dyn KvIter>,
    eval: Eval,
    cursors: Vec<Cursor>,
    /// Reads a matching document's cells.
    fetch: Option<Box<dyn KvIter>>,
    fetch_seek: SeekRange,
    /// `fetch` was seeked in the current row (to the end of its document family), so it
    /// stands at or before the cells of the next match: close behind, it steps there.
    fetch_in_row: bool,
    fi: u8,
    doc: u8,
    budget: Budget,
    range: SeekRange,
    active: bool,
    /// The encoded prefix of the row being answered (terminator included), and the least
    /// (escaped) document still to look at in it.
    row: Option<Vec<u8>>,
    target: Vec<u8>,
    out: VecDeque<(Vec<u8>, Vec<u8>)>,
    yielded: Option<Vec<u8>>,
    /// A document or a row was finished since the last seek.
    progressed: bool,
    query: Query,
}

impl BooleanIndex {
    pub fn new(src: Box<dyn KvIter>, query: &Query, fi: u8, doc: u8, budget: Budget) -> Self {
        let mut cursors = Vec::new();
        let eval = Self::plan(query, &mut cursors);
        Self {
            src,
            eval,
            cursors,
            fetch: None,
            fetch_seek: SeekRange::all(),
            fetch_in_row: false,
            fi,
            doc,
            budget,
            range: SeekRange::all(),
            active: false,
            row: None,
            target: Vec::new(),
            out: VecDeque::new(),
            yielded: None,
            progressed: false,
            query: query.clone(),
        }
    }

    fn leaf(walk: Walk, cursors: &mut Vec<Cursor>) -> Eval {
        cursors.push(Cursor::new(walk));
        Eval::Leaf(cursors.len() - 1)
    }

    /// Turns the query into cursors: NOT becomes the negative side of an AND, over the row's
    /// documents when nothing positive stands beside it.
    fn plan(q: &Query, cursors: &mut Vec<Cursor>) -> Eval {
        match q {
            Query::Term(field, term) => {
                let mut p = Vec::with_capacity(field.len() + term.len() + 2);
                p.extend_from_slice(field.as_bytes());
                p.push(0);
                p.extend_from_slice(term.as_bytes());
                p.push(0);
                let mut escaped = Vec::with_capacity(p.len() + 2);
                key::escape_bytes_into(&p, &mut escaped);
                Self::leaf(Walk::Postings(escaped), cursors)
            }
            Query::Or(v) => Eval::Or(v.iter().map(|c| Self::plan(c, cursors)).collect()),
            Query::Not(x) => Eval::And {
                pos: vec![Self::leaf(Walk::Documents, cursors)],
                neg: vec![Self::plan(x, cursors)],
            },
            Query::And(v) => {
                let mut pos = Vec::new();
                let mut neg = Vec::new();
                for c in v {
                    match c {
                        Query::Not(x) => neg.push(Self::plan(x, cursors)),
                        c => pos.push(Self::plan(c, cursors)),
                    }
                }
                if pos.is_empty() {
                    pos.push(Self::leaf(Walk::Documents, cursors));
                }
                Eval::And { pos, neg }
            }
        }
    }

    /// Sets `out` to the least document `>= target` that `e` matches in the current row;
    /// false when there is none.
    fn next_match(
        e: &Eval,
        cursors: &mut [Cursor],
        ctx: (&dyn KvIter, &[u8], (u8, u8)),
        target: &[u8],
        steps: &mut u64,
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        let (proto, row, fams) = ctx;
        match e {
            Eval::Leaf(i) => match cursors[*i].seek_doc(target, proto, row, fams, steps)? {
                Some(d) => {
                    out.clear();
                    out.extend_from_slice(d);
                    Ok(true)
                }
                None => Ok(false),
            },
            Eval::Or(v) => {
                let mut found = false;
                let mut d = Vec::new();
                for c in v {
                    if Self::next_match(c, cursors, ctx, target, steps, &mut d)?
                        && (!found || !ge(&d, out))
                    {
                        std::mem::swap(out, &mut d);
                        found = true;
                    }
                }
                Ok(found)
            }
            Eval::And { pos, neg } => {
                let mut t = target.to_vec();
                let mut d = Vec::new();
                'candidates: loop {
                    if !Self::next_match(&pos[0], cursors, ctx, &t, steps, out)? {
                        return Ok(false);
                    }
                    // Leapfrog: every positive side seeks to the candidate (`out`); a later
                    // document becomes the candidate until all agree.
                    let mut agreed = 1;
                    let mut i = 1;
                    while agreed < pos.len() {
                        let p = &pos[i % pos.len()];
                        if !Self::next_match(p, cursors, ctx, out, steps, &mut d)? {
                            return Ok(false);
                        }
                        if key::bytes_eq(&d, out) {
                            agreed += 1;
                        } else {
                            std::mem::swap(out, &mut d);
                            agreed = 1;
                        }
                        i += 1;
                    }
                    for n in neg {
                        if Self::next_match(n, cursors, ctx, out, steps, &mut d)?
                            && key::bytes_eq(&d, out)
                        {
                            t.clear();
                            t.extend_from_slice(out);
                            push_successor(&mut t);
                            continue 'candidates;
                        }
                    }
                    return Ok(true);
                }
            }
        }
    }

    /// Moves to the next row in range with documents; false at the end.
    fn next_row(&mut self) -> Result<bool> {
        let mut seek = self.range.clone();
        if let Some(mut past) = self.row.take() {
            // The row's end: its prefix with the terminator `00 01` turned into `00 02`.
            let n = past.len();
            past[n - 1] = 2;
            if self.range.is_past_end(&past) {
                return Ok(false);
            }
            seek.start = past;
        }
        self.src.seek(&seek, &Families::of([self.doc]))?;
        if !self.src.valid() {
            return Ok(false);
        }
        let row = KeyRef::from_trusted(self.src.key())?.row_prefix().to_vec();
        for c in &mut self.cursors {
            c.reset(&row, self.fi, self.doc);
        }
        self.target = self.start_doc(&row);
        self.row = Some(row);
        self.fetch_in_row = false;
        Ok(true)
    }

    /// The (escaped) document a seek starting inside the row (its encoded prefix) starts at
    /// (empty: the row's first).
    fn start_doc(&self, row: &[u8]) -> Vec<u8> {
        let Some(rest) = self.range.start.strip_prefix(row) else {
            return Vec::new();
        };
        if rest.first() != Some(&self.doc) {
            // Before the document family: the whole row; after it: nothing of it is left,
            // which the row's fetches find out (every cell is below the start).
            return Vec::new();
        }
        // The escaped qualifier, up to its terminator (or the end of a key that stops in it).
        let q = &rest[1..];
        let mut i = 0;
        while i < q.len() {
            match (q[i], q.get(i + 1)) {
                (0, Some(0xFF)) => i += 2,
                (0, _) => break,
                _ => i += 1,
            }
        }
        doc_of(&Walk::Documents, &q[..i]).to_vec()
    }

    /// Appends the cells of `doc` (escaped) in the current row that lie in the seek range to
    /// `out`.
    fn emit(&mut self, doc: &[u8]) -> Result<()> {
        let row = self.row.as_ref().expect("in a row");
        if self.fetch.is_none() {
            self.fetch = Some(self.src.deep_copy()?);
        }
        let f = self.fetch.as_mut().expect("opened");
        // Qualifiers `doc` and `doc \0 FIELD`, all of them from this prefix on.
        prefix_key(&mut self.fetch_seek.start, row, self.doc, &[doc]);
        // Matches come in document order: a cursor still in the row steps over the few
        // documents between the last match and this one rather than seek.
        let mut there = false;
        if self.fetch_in_row {
            for _ in 0..=FETCH_STEPS_BEFORE_SEEK {
                if !f.valid() || ge(f.key(), &self.fetch_seek.start) {
                    there = true;
                    break;
                }
                f.next()?;
            }
        }
        if !there {
            // To the end of the row's document family, so that the next match can step.
            let mut end = Vec::with_capacity(row.len() + 1);
            end.extend_from_slice(row);
            match self.doc.checked_add(1) {
                Some(next) => end.push(next),
                None => {
                    let n = end.len();
                    end[n - 1] = 2;
                }
            }
            self.fetch_seek.end = Some(end);
            f.seek(&self.fetch_seek, &Families::of([self.doc]))?;
            self.fetch_in_row = true;
        }
        while f.valid() {
            let k = f.key();
            if self.range.is_past_end(k) {
                break;
            }
            let q = KeyRef::from_trusted(k)?.escaped_qualifier();
            match key::bytes_cmp(doc_of(&Walk::Documents, q), doc) {
                std::cmp::Ordering::Greater => break,
                std::cmp::Ordering::Equal if ge(k, &self.range.start) => {
                    self.out.push_back((k.to_vec(), f.value().to_vec()));
                }
                _ => {}
            }
            f.next()?;
        }
        Ok(())
    }

    /// Fills `out` with the next matching document's cells, or ends (or yields). The budget is
    /// held meanwhile: the sources below must not yield in the middle of a search (a cursor
    /// would take it for the end of its postings), and this iterator charges its own steps.
    fn fill(&mut self) -> Result<()> {
        self.budget.hold();
        let r = self.fill_held();
        self.budget.release();
        r
    }

    /// Charges `steps` to the budget (which is held: released for the charge).
    fn charge(&self, steps: u64) {
        self.budget.release();
        let _ = self.budget.spend(steps.max(1));
        self.budget.hold();
    }

    fn fill_held(&mut self) -> Result<()> {
        let mut found = Vec::new();
        while self.out.is_empty() && self.active {
            let mut steps = 0u64;
            if self.row.is_none() && !self.next_row()? {
                self.active = false;
                break;
            }
            // Yield only after a document or a row since the seek: a resumed scan always
            // gets further than the one before.
            if self.progressed && self.budget.exhausted() {
                let row = self.row.as_ref().expect("in a row");
                let mut y = Vec::new();
                prefix_key(&mut y, row, self.doc, &[&self.target]);
                if !self.target.is_empty() {
                    push_successor(&mut y);
                }
                self.yielded = Some(y);
                self.active = false;
                break;
            }
            let row = self.row.take().expect("in a row");
            let r = Self::next_match(
                &self.eval,
                &mut self.cursors,
                (&*self.src, &row, (self.fi, self.doc)),
                &self.target,
                &mut steps,
                &mut found,
            );
            self.row = Some(row);
            let found_one = r?;
            self.progressed = true;
            if found_one {
                // A search that finds a document is not charged, as a filter is charged only
                // for what it skips: charging it would leave nothing for the iterators above,
                // which would yield before taking the document, and a resumed scan would find
                // it again, for ever.
                self.emit(&found)?;
                self.target.clear();
                self.target.extend_from_slice(&found);
                push_successor(&mut self.target);
            } else {
                // The row is done: its search found nothing more.
                self.charge(steps);
                if !self.next_row()? {
                    self.active = false;
                }
            }
        }
        Ok(())
    }
}

impl KvIter for BooleanIndex {
    fn seek(&mut self, range: &SeekRange, families: &Families) -> Result<()> {
        self.range.clone_from(range);
        self.out.clear();
        self.yielded = None;
        self.row = None;
        self.fetch_in_row = false;
        self.progressed = false;
        self.active = families.contains(self.doc);
        self.fill()
    }
    fn valid(&self) -> bool {
        !self.out.is_empty()
    }
    fn key(&self) -> &[u8] {
        &self.out.front().expect("valid").0
    }
    fn value(&self) -> &[u8] {
        &self.out.front().expect("valid").1
    }
    fn next(&mut self) -> Result<()> {
        self.out.pop_front();
        self.fill()
    }
    fn deep_copy(&self) -> Result<Box<dyn KvIter>> {
        Ok(Box::new(BooleanIndex::new(
            self.src.deep_copy()?,
            &self.query,
            self.fi,
            self.doc,
            self.budget.clone(),
        )))
    }
    fn yielded(&self) -> Option<&[u8]> {
        if self.out.is_empty() {
            self.yielded.as_deref()
        } else {
            None
        }
    }
}

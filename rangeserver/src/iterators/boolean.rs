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
    /// Index-family qualifiers `FIELD \0 term \0 doc`: this prefix, then the document.
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
struct Cursor {
    walk: Walk,
    it: Option<Box<dyn KvIter>>,
    /// The run's first key and the first key past it, in the current row.
    start: Vec<u8>,
    end: Vec<u8>,
    /// The document it stands on (`None`: not positioned, or at the end when `at_end`).
    cur: Option<Vec<u8>>,
    at_end: bool,
    seek: SeekRange,
}

/// The encoded key prefix of (`row`, `family`) and a qualifier starting with `q`: it sorts
/// before every key whose qualifier starts with `q`.
fn qualifier_prefix_key(row: &[u8], family: u8, q: &[u8]) -> Vec<u8> {
    let mut k = key::cell_start(row, family, q);
    k.truncate(k.len() - 2); // the qualifier's terminator
    k
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

/// The document of an index or document qualifier, given how the cursor walks.
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
            it: None,
            start: Vec::new(),
            end: Vec::new(),
            cur: None,
            at_end: false,
            seek: SeekRange::all(),
        }
    }

    /// Places the cursor's run in `row` (not positioned yet).
    fn reset(&mut self, row: &[u8], fi: u8, doc: u8) {
        let (family, prefix): (u8, &[u8]) = match &self.walk {
            Walk::Postings(p) => (fi, p),
            Walk::Documents => (doc, b""),
        };
        self.start = qualifier_prefix_key(row, family, prefix);
        self.end = if prefix.is_empty() {
            key::family_end(row, family)
        } else {
            successor_prefix(&self.start)
        };
        self.cur = None;
        self.at_end = false;
    }

    fn family(&self, fi: u8, doc: u8) -> u8 {
        match self.walk {
            Walk::Postings(_) => fi,
            Walk::Documents => doc,
        }
    }

    /// Reads the document the iterator stands on, skipping versions of the one before.
    fn settle(&mut self, steps: &mut u64) -> Result<()> {
        let it = self.it.as_mut().expect("opened");
        loop {
            if !it.valid() {
                self.cur = None;
                self.at_end = true;
                return Ok(());
            }
            let q = KeyRef::from_trusted(it.key())?.qualifier();
            let d = doc_of(&self.walk, &q);
            if self.cur.as_deref() != Some(d) {
                self.cur = Some(d.to_vec());
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
        if self.cur.as_deref().is_some_and(|c| c >= target) {
            return Ok(self.cur.as_deref());
        }
        if self.it.is_none() {
            self.it = Some(proto.deep_copy()?);
        }
        if self.cur.is_some() {
            // Close behind: step rather than seek.
            for _ in 0..STEPS_BEFORE_SEEK {
                *steps += 1;
                self.it.as_mut().expect("opened").next()?;
                self.settle(steps)?;
                match self.cur.as_deref() {
                    None => return Ok(None),
                    Some(c) if c >= target => return Ok(self.cur.as_deref()),
                    Some(_) => {}
                }
            }
        }
        let family = self.family(fi, doc);
        let mut q = match &self.walk {
            Walk::Postings(p) => p.clone(),
            Walk::Documents => Vec::new(),
        };
        q.extend_from_slice(target);
        let start = qualifier_prefix_key(row, family, &q);
        self.seek.start = start;
        self.seek.end = Some(self.end.clone());
        *steps += 1;
        self.cur = None;
        self.it
            .as_mut()
            .expect("opened")
            .seek(&self.seek, &Families::of([family]))?;
        self.settle(steps)?;
        // A document's own field cells sort after the key of `target` = `doc \0` (the
        // successor of the document a search goes past): step over them.
        while self.cur.as_deref().is_some_and(|c| c < target) {
            *steps += 1;
            self.it.as_mut().expect("opened").next()?;
            self.settle(steps)?;
        }
        Ok(self.cur.as_deref())
    }
}

/// See the module documentation.
pub struct BooleanIndex {
    src: Box<dyn KvIter>,
    eval: Eval,
    cursors: Vec<Cursor>,
    /// Reads a matching document's cells.
    fetch: Option<Box<dyn KvIter>>,
    fi: u8,
    doc: u8,
    budget: Budget,
    range: SeekRange,
    active: bool,
    /// The row being answered and the least document still to look at in it.
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
                Self::leaf(Walk::Postings(p), cursors)
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

    /// The least document `>= target` that `e` matches in the current row.
    fn next_match(
        e: &Eval,
        cursors: &mut [Cursor],
        ctx: (&dyn KvIter, &[u8], (u8, u8)),
        target: &[u8],
        steps: &mut u64,
    ) -> Result<Option<Vec<u8>>> {
        let (proto, row, fams) = ctx;
        match e {
            Eval::Leaf(i) => Ok(cursors[*i]
                .seek_doc(target, proto, row, fams, steps)?
                .map(<[u8]>::to_vec)),
            Eval::Or(v) => {
                let mut best: Option<Vec<u8>> = None;
                for c in v {
                    if let Some(d) = Self::next_match(c, cursors, ctx, target, steps)?
                        && best.as_ref().is_none_or(|b| d < *b)
                    {
                        best = Some(d);
                    }
                }
                Ok(best)
            }
            Eval::And { pos, neg } => {
                let mut t = target.to_vec();
                'candidates: loop {
                    let Some(mut cand) = Self::next_match(&pos[0], cursors, ctx, &t, steps)? else {
                        return Ok(None);
                    };
                    // Leapfrog: every positive side seeks to the candidate; a later document
                    // becomes the candidate until all agree.
                    let mut agreed = 1;
                    let mut i = 1;
                    while agreed < pos.len() {
                        let p = &pos[i % pos.len()];
                        match Self::next_match(p, cursors, ctx, &cand, steps)? {
                            None => return Ok(None),
                            Some(d) if d == cand => agreed += 1,
                            Some(d) => {
                                cand = d;
                                agreed = 1;
                            }
                        }
                        i += 1;
                    }
                    for n in neg {
                        if Self::next_match(n, cursors, ctx, &cand, steps)?.as_deref()
                            == Some(cand.as_slice())
                        {
                            cand.push(0);
                            t = cand;
                            continue 'candidates;
                        }
                    }
                    return Ok(Some(cand));
                }
            }
        }
    }

    /// Moves to the next row in range with documents; false at the end.
    fn next_row(&mut self) -> Result<bool> {
        let mut seek = self.range.clone();
        if let Some(r) = self.row.take() {
            let past = key::row_end(&r);
            if self.range.is_past_end(&past) {
                return Ok(false);
            }
            seek.start = past;
        }
        self.src.seek(&seek, &Families::of([self.doc]))?;
        if !self.src.valid() {
            return Ok(false);
        }
        let row = KeyRef::from_trusted(self.src.key())?.row().into_owned();
        for c in &mut self.cursors {
            c.reset(&row, self.fi, self.doc);
        }
        self.target = self.start_doc(&row);
        self.row = Some(row);
        Ok(true)
    }

    /// The document a seek starting inside `row` starts at (empty: the row's first).
    fn start_doc(&self, row: &[u8]) -> Vec<u8> {
        let start = &self.range.start;
        let row_key = key::row_start(row);
        let Some(rest) = start.strip_prefix(row_key.as_slice()) else {
            return Vec::new();
        };
        if rest.first() != Some(&self.doc) {
            // Before the document family: the whole row; after it: nothing of it is left,
            // which the row's fetches find out (every cell is below the start).
            return Vec::new();
        }
        // Unescape the qualifier (up to its terminator), then keep its document part.
        let mut q = Vec::new();
        let mut i = 1;
        while i < rest.len() {
            match (rest[i], rest.get(i + 1)) {
                (0, Some(0xFF)) => {
                    q.push(0);
                    i += 2;
                }
                (0, _) => break,
                (b, _) => {
                    q.push(b);
                    i += 1;
                }
            }
        }
        doc_of(&Walk::Documents, &q).to_vec()
    }

    /// Appends the cells of `doc` in the current row that lie in the seek range to `out`.
    fn emit(&mut self, doc: &[u8]) -> Result<()> {
        let row = self.row.as_ref().expect("in a row");
        if self.fetch.is_none() {
            self.fetch = Some(self.src.deep_copy()?);
        }
        let f = self.fetch.as_mut().expect("opened");
        // Qualifiers `doc` and `doc \0 FIELD`, both below this prefix's successor.
        let start = qualifier_prefix_key(row, self.doc, doc);
        let end = successor_prefix(&start);
        f.seek(&SeekRange::new(start, Some(end)), &Families::of([self.doc]))?;
        while f.valid() {
            let k = f.key();
            if self.range.is_past_end(k) {
                break;
            }
            if k >= self.range.start.as_slice()
                && doc_of(&Walk::Documents, &KeyRef::from_trusted(k)?.qualifier()) == doc
            {
                self.out.push_back((k.to_vec(), f.value().to_vec()));
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
                let mut q = self.target.clone();
                if !q.is_empty() {
                    q.push(0);
                }
                self.yielded = Some(qualifier_prefix_key(row, self.doc, &q));
                self.active = false;
                break;
            }
            let row = self.row.clone().expect("in a row");
            let found = Self::next_match(
                &self.eval,
                &mut self.cursors,
                (&*self.src, &row, (self.fi, self.doc)),
                &self.target,
                &mut steps,
            )?;
            self.progressed = true;
            match found {
                // A search that finds a document is not charged, as a filter is charged only
                // for what it skips: charging it would leave nothing for the iterators above,
                // which would yield before taking the document, and a resumed scan would find
                // it again, for ever.
                Some(d) => {
                    self.emit(&d)?;
                    let mut next = d;
                    next.push(0);
                    self.target = next;
                }
                // The row is done: its search found nothing more.
                None => {
                    self.charge(steps);
                    if !self.next_row()? {
                        self.active = false;
                    }
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

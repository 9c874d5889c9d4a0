//! Kinds with options (`kind(OPT = value, ...)`): a family's `COMBINER`, table `ITERATOR`
//! definitions and SELECT's `WITH ITERATOR`.

use super::token::{PResult, fail, failure, kw, kw_map, kws, list1, number, p, string, ws};
use crate::ast::{IterOptions, IterScope, IteratorDef, KindCall};

/// A plain identifier `[A-Za-z_][A-Za-z0-9_]*` (kinds, option names, iterator names).
pub fn ident<'a>(what: &'static str) -> impl Fn(&'a str) -> PResult<'a, String> {
    move |input| {
        let i = ws(input);
        if !i.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            return fail(i, || what.to_string());
        }
        let end = i
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(i.len());
        Ok((&i[end..], i[..end].to_string()))
    }
}

/// An option value: a quoted string, a number (`-`, digits, an optional fraction) or a bare
/// word, as text.
fn option_value(input: &str) -> PResult<'_, String> {
    let i = ws(input);
    if i.starts_with(['\'', '"']) {
        return string(i);
    }
    let digits = i.strip_prefix('-').unwrap_or(i);
    if digits.starts_with(|c: char| c.is_ascii_digit()) {
        let int = digits
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(digits.len());
        let mut end = i.len() - digits.len() + int;
        if let Some(frac) = i[end..].strip_prefix('.') {
            let n = frac
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(frac.len());
            if n > 0 {
                end += 1 + n;
            }
        }
        if i[end..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            return fail(i, || "option value".to_string());
        }
        return Ok((&i[end..], i[..end].to_string()));
    }
    match ident("option value")(i) {
        Ok(r) => Ok(r),
        Err(_) => fail(i, || "option value".to_string()),
    }
}

/// `kind` or `kind(OPT = value, ...)` (`kind()` too); the kind lower-cased, option names
/// upper-cased, each option at most once.
pub fn kind_call(input: &str) -> PResult<'_, KindCall> {
    let (i, kind) = ident("kind name")(input)?;
    let kind = kind.to_ascii_lowercase();
    let mut options = IterOptions::new();
    let Ok((mut i, ())) = p("(")(i) else {
        return Ok((i, KindCall { kind, options }));
    };
    if let Ok((rest, ())) = p(")")(i) {
        return Ok((rest, KindCall { kind, options }));
    }
    loop {
        let at = ws(i);
        let (rest, name) = ident("option name")(at)?;
        let name = name.to_ascii_uppercase();
        let (rest, ()) = p("=")(rest)?;
        let (rest, value) = option_value(rest)?;
        if options.insert(name.clone(), value).is_some() {
            return failure(at, format!("option {name} of '{kind}' is given twice"));
        }
        i = rest;
        if let Ok((rest, ())) = p(",")(i) {
            i = rest;
            continue;
        }
        let (rest, ()) = p(")")(i)?;
        return Ok((rest, KindCall { kind, options }));
    }
}

fn scope(i: &str) -> PResult<'_, IterScope> {
    kw_map(&[
        ("SCAN", IterScope::Scan),
        ("MINOR", IterScope::Minor),
        ("MAJOR", IterScope::Major),
    ])(i)
}

/// After `ITERATOR`: `name = kind[(...)] [SCOPES (scope, ...)] [PRIORITY n]` (the last two
/// in either order, each at most once).
pub fn iterator_def(i: &str) -> PResult<'_, IteratorDef> {
    let (i, name) = ident("iterator name")(i)?;
    let (i, ()) = p("=")(i)?;
    let (mut i, call) = kind_call(i)?;
    let mut def = IteratorDef {
        name,
        call,
        scopes: None,
        priority: None,
    };
    loop {
        let at = ws(i);
        if let Ok((rest, ())) = kw("SCOPES")(at) {
            let (rest, ()) = p("(")(rest)?;
            let (rest, scopes) = list1(scope)(rest)?;
            let (rest, ()) = p(")")(rest)?;
            if def.scopes.replace(scopes).is_some() {
                return failure(
                    at,
                    format!(
                        "Multiple specifications of SCOPES for iterator '{}'",
                        def.name
                    ),
                );
            }
            i = rest;
        } else if let Ok((rest, ())) = kw("PRIORITY")(at) {
            let (rest, n) = number::<u16>(rest)?;
            if def.priority.replace(n).is_some() {
                return failure(
                    at,
                    format!(
                        "Multiple specifications of PRIORITY for iterator '{}'",
                        def.name
                    ),
                );
            }
            i = rest;
        } else {
            return Ok((i, def));
        }
    }
}

/// After `WITH ITERATOR`: `kind(...) [, kind(...)]*`.
pub fn scan_iterators(i: &str) -> PResult<'_, Vec<KindCall>> {
    list1(kind_call)(i)
}

/// `WITH ITERATOR` itself.
pub fn with_iterator(i: &str) -> PResult<'_, ()> {
    kws(&["WITH", "ITERATOR"])(i)
}

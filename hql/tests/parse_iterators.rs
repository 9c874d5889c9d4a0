//! Parsing of issue 14's HQL: `COMBINER kind(OPT = value)` and `APPEND_ONLY` family options,
//! table `ITERATOR` definitions (CREATE TABLE, ALTER TABLE ADD / DROP ITERATOR) and SELECT's
//! `WITH ITERATOR`; the AST they give, their errors with positions, and printing back.

use hql::ast::*;
use hql::parse_statement;

fn parse(s: &str) -> Statement {
    match parse_statement(s) {
        Ok(st) => {
            let printed = st.to_string();
            assert_eq!(
                parse_statement(&printed).as_ref(),
                Ok(&st),
                "reprint of {s:?} as {printed:?}"
            );
            st
        }
        Err(e) => panic!("{s:?} failed:\n{e}"),
    }
}

fn err(s: &str) -> hql::ParseError {
    match parse_statement(s) {
        Ok(st) => panic!("{s:?} parsed as {st:?}"),
        Err(e) => e,
    }
}

fn definitions(s: &str) -> Vec<Definition> {
    match parse(s) {
        Statement::CreateTable(CreateTable {
            body: CreateTableBody::Definitions { definitions, .. },
            ..
        }) => definitions,
        other => panic!("not a create table: {other:?}"),
    }
}

fn call(kind: &str, opts: &[(&str, &str)]) -> KindCall {
    KindCall {
        kind: kind.into(),
        options: opts
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

fn family(d: &Definition) -> &FamilyDef {
    match d {
        Definition::Family(f) => f,
        other => panic!("not a family: {other:?}"),
    }
}

fn iterator(d: &Definition) -> &IteratorDef {
    match d {
        Definition::Iterator(i) => i,
        other => panic!("not an iterator: {other:?}"),
    }
}

// ---- COMBINER and APPEND_ONLY ----

#[test]
fn the_issue_example_parses_into_combiners() {
    let d = definitions(
        "CREATE TABLE stats (hits COUNTER, total COMBINER sum, peak COMBINER max, low COMBINER \
         min, tags COMBINER string_set(MAX = 100), docs COMBINER uid_set(MAX = 20) APPEND_ONLY)",
    );
    assert_eq!(d.len(), 6);
    assert_eq!(family(&d[0]).options.counter, Some(true));
    assert_eq!(family(&d[0]).options.combiner, None);
    assert_eq!(family(&d[1]).options.combiner, Some(call("sum", &[])));
    assert_eq!(family(&d[2]).options.combiner, Some(call("max", &[])));
    assert_eq!(family(&d[3]).options.combiner, Some(call("min", &[])));
    assert_eq!(
        family(&d[4]).options.combiner,
        Some(call("string_set", &[("MAX", "100")]))
    );
    assert_eq!(family(&d[4]).options.append_only, None);
    assert_eq!(
        family(&d[5]).options.combiner,
        Some(call("uid_set", &[("MAX", "20")]))
    );
    assert_eq!(family(&d[5]).options.append_only, Some(true));
}

#[test]
fn kinds_are_lower_cased_option_names_upper_cased_and_values_kept_as_text() {
    let d = definitions(
        "create table t (a combiner SUM(encoding = 'fixed64', Scale = -2.50, on = TRUE, \
         re = \"^a\\d\") append_only false, b COMBINER Uid_Set())",
    );
    assert_eq!(
        family(&d[0]).options.combiner,
        Some(call(
            "sum",
            &[
                ("ENCODING", "fixed64"),
                ("SCALE", "-2.50"),
                ("ON", "TRUE"),
                ("RE", "^a\\d")
            ]
        ))
    );
    assert_eq!(family(&d[0]).options.append_only, Some(false));
    assert_eq!(family(&d[1]).options.combiner, Some(call("uid_set", &[])));
}

#[test]
fn combiner_options_print_single_quoted_in_name_order() {
    let st = parse(
        "CREATE TABLE t (d COMBINER uid_set(MAX = 20) APPEND_ONLY, e COMBINER x(B = 1, A = 'y'))",
    );
    let text = st.to_string();
    assert!(
        text.contains("d COMBINER uid_set(MAX = '20') APPEND_ONLY"),
        "{text}"
    );
    // A regex keeps its backslashes as written; a quote is escaped.
    let st = parse(r"CREATE TABLE t (a COMBINER k(RE = '^\d+\'x'))");
    assert!(
        st.to_string().contains(r"a COMBINER k(RE = '^\d+\'x')"),
        "{st}"
    );
}

#[test]
fn combiner_errors_say_what_and_where() {
    let e = err("CREATE TABLE t (a COMBINER sum(MAX = 1, max = 2))");
    assert_eq!((e.line, e.column), (1, 41));
    assert_eq!(
        e.message.as_deref(),
        Some("option MAX of 'sum' is given twice")
    );
    let e = err("CREATE TABLE t (a COMBINER)");
    assert_eq!(e.column, 27);
    assert_eq!(e.expected, "kind name");
    let e = err("CREATE TABLE t (a COMBINER sum(MAX 1))");
    assert_eq!(e.column, 36);
    assert_eq!(e.expected, "'='");
    let e = err("CREATE TABLE t (a COMBINER sum(MAX = ))");
    assert_eq!(e.column, 38);
    assert_eq!(e.expected, "option value");
    let e = err("CREATE TABLE t (a COMBINER sum(MAX = 1 2))");
    assert_eq!(e.expected, "',' or ')'");
    let e = err("CREATE TABLE t (a COMBINER 'sum')");
    assert_eq!(e.expected, "kind name");
    let e = err("CREATE TABLE t (a COMBINER sum COMBINER max)");
    assert_eq!(
        e.message.as_deref(),
        Some("Multiple specifications of COMBINER option for column 'a'")
    );
    let e = err("CREATE TABLE t (a APPEND_ONLY APPEND_ONLY)");
    assert_eq!(
        e.message.as_deref(),
        Some("Multiple specifications of APPEND_ONLY option for column 'a'")
    );
}

#[test]
fn combiner_and_append_only_are_family_options_only() {
    // Not as access group or table defaults.
    let e = err("CREATE TABLE t (a) COMBINER sum");
    assert_eq!(e.column, 20);
    assert_eq!(e.found, "'COMBINER'");
    let e = err("CREATE TABLE t (ACCESS GROUP g APPEND_ONLY (a))");
    assert_eq!(e.column, 32);
}

// ---- table iterators ----

#[test]
fn iterator_definitions_in_create_table() {
    let d = definitions(
        "CREATE TABLE logs (a, ITERATOR old = age_off(TTL = '30 DAYS') SCOPES (SCAN, MINOR, \
         MAJOR) PRIORITY 10, iterator tmp = QUALIFIER_REGEX(FAMILY = 'a', REGEX = '^tmp', \
         NEGATE = true) priority 20 scopes (scan, major), ITERATOR w = whole_row)",
    );
    assert_eq!(d.len(), 4);
    assert_eq!(
        iterator(&d[1]),
        &IteratorDef {
            name: "old".into(),
            call: call("age_off", &[("TTL", "30 DAYS")]),
            scopes: Some(vec![IterScope::Scan, IterScope::Minor, IterScope::Major]),
            priority: Some(10),
        }
    );
    assert_eq!(
        iterator(&d[2]),
        &IteratorDef {
            name: "tmp".into(),
            call: call(
                "qualifier_regex",
                &[("FAMILY", "a"), ("REGEX", "^tmp"), ("NEGATE", "true")]
            ),
            scopes: Some(vec![IterScope::Scan, IterScope::Major]),
            priority: Some(20),
        }
    );
    assert_eq!(
        iterator(&d[3]),
        &IteratorDef {
            name: "w".into(),
            call: call("whole_row", &[]),
            scopes: None,
            priority: None,
        }
    );
    // Printed with SCOPES before PRIORITY.
    let st = parse("CREATE TABLE t (a, ITERATOR x = k PRIORITY 5 SCOPES (MAJOR))");
    assert!(
        st.to_string()
            .contains("ITERATOR x = k SCOPES (MAJOR) PRIORITY 5"),
        "{st}"
    );
}

#[test]
fn a_family_named_iterator_is_still_a_family() {
    let d = definitions("CREATE TABLE t (iterator, Iterator MAX_VERSIONS 2, \"iterator\" TTL 5)");
    assert_eq!(family(&d[0]).name, "iterator");
    assert_eq!(family(&d[1]).options.max_versions, Some(2));
    assert_eq!(family(&d[2]).name, "iterator");
    // The printer quotes it, so it cannot be read as an iterator.
    let st = parse("CREATE TABLE t (iterator MAX_VERSIONS 2)");
    assert!(
        st.to_string().contains("\"iterator\" MAX_VERSIONS 2"),
        "{st}"
    );
}

#[test]
fn iterator_definition_errors_say_what_and_where() {
    let e = err("CREATE TABLE t (a, ITERATOR x = k SCOPES (SCAN, MINOR, MAJR))");
    assert_eq!(e.column, 56);
    assert_eq!(e.expected, "'SCAN', 'MINOR' or 'MAJOR'");
    let e = err("CREATE TABLE t (a, ITERATOR x = k SCOPES ())");
    assert_eq!(e.column, 43);
    let e = err("CREATE TABLE t (a, ITERATOR x = k PRIORITY 70000)");
    assert_eq!(e.message.as_deref(), Some("number 70000 is out of range"));
    let e = err("CREATE TABLE t (a, ITERATOR x = k PRIORITY 1 PRIORITY 2)");
    assert_eq!(e.column, 46);
    assert_eq!(
        e.message.as_deref(),
        Some("Multiple specifications of PRIORITY for iterator 'x'")
    );
    let e = err("CREATE TABLE t (a, ITERATOR x = k SCOPES (SCAN) SCOPES (MAJOR))");
    assert_eq!(
        e.message.as_deref(),
        Some("Multiple specifications of SCOPES for iterator 'x'")
    );
    let e = err("CREATE TABLE t (a, ITERATOR x = )");
    assert_eq!(e.column, 33);
    assert!(e.expected.contains("kind name"), "{e}");
    let e = err("CREATE TABLE t (a, ITERATOR 'x' = k)");
    assert_eq!(e.column, 29);
}

#[test]
fn alter_table_add_and_drop_iterator() {
    let st = parse(
        "ALTER TABLE logs ADD (b, ITERATOR tmp = value_regex(REGEX = 'x', NEGATE = true) \
         SCOPES (SCAN)) DROP ITERATOR old DROP (c)",
    );
    let Statement::AlterTable(a) = st else {
        panic!("not an alter table")
    };
    assert_eq!(a.actions.len(), 3);
    let AlterAction::Add(defs) = &a.actions[0] else {
        panic!("not ADD: {:?}", a.actions[0])
    };
    assert_eq!(family(&defs[0]).name, "b");
    assert_eq!(iterator(&defs[1]).name, "tmp");
    assert_eq!(iterator(&defs[1]).scopes, Some(vec![IterScope::Scan]));
    assert_eq!(a.actions[1], AlterAction::DropIterator("old".into()));
    assert_eq!(a.actions[2], AlterAction::Drop(vec!["c".into()]));
    let e = err("ALTER TABLE logs DROP ITERATOR");
    assert_eq!(e.column, 31);
    assert_eq!(e.expected, "iterator name");
    let e = err("ALTER TABLE logs DROP ITERATOR (old)");
    assert_eq!(e.column, 32);
}

// ---- WITH ITERATOR ----

#[test]
fn select_with_iterators_in_order() {
    let Statement::Select(s) = parse(
        "SELECT * FROM t WHERE ROW =^ 'a' LIMIT 3 WITH ITERATOR first_in_row, \
         value_regex(REGEX = '^x', NEGATE = true), count_cells()",
    ) else {
        panic!("not a select")
    };
    assert_eq!(s.options.limit, Some(3));
    assert_eq!(
        s.options.iterators,
        vec![
            call("first_in_row", &[]),
            call("value_regex", &[("NEGATE", "true"), ("REGEX", "^x")]),
            call("count_cells", &[]),
        ]
    );
    // Options may follow, as any SELECT option.
    let Statement::Select(s) = parse("select a from t with iterator WHOLE_ROW keys_only") else {
        panic!("not a select")
    };
    assert_eq!(s.options.iterators, vec![call("whole_row", &[])]);
    assert!(s.options.keys_only);
    let printed = parse("SELECT * FROM t WITH ITERATOR k(A = 1), j").to_string();
    assert_eq!(printed, "SELECT * FROM t WITH ITERATOR k(A = '1'), j");
}

#[test]
fn with_iterator_errors_say_what_and_where() {
    let e = err("SELECT * FROM t WITH ITERATOR");
    assert_eq!(e.column, 30);
    assert_eq!(e.expected, "kind name");
    let e = err("SELECT * FROM t WITH ITERATOR a WITH ITERATOR b");
    assert_eq!(e.column, 33);
    assert_eq!(
        e.message.as_deref(),
        Some("Multiple specifications of WITH ITERATOR option")
    );
    let e = err("SELECT * FROM t WITH ITERATOR a(X = 1");
    assert_eq!(e.expected, "',' or ')'");
    let e = err("SELECT * FROM t WITH a");
    assert_eq!(e.column, 22);
    assert_eq!(e.expected, "'ITERATOR'");
}

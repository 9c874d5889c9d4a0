//! Property tests: random ASTs print to HQL that parses back to the same AST, and random input
//! never panics the parser.

use std::time::Duration;

use hql::ast::*;
use hql::{parse_bloom_text, parse_script, parse_statement};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

/// Names and strings: plain identifiers, keywords, and text with quotes, escapes and unicode.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-zA-Z_][a-zA-Z0-9_]{0,8}",
        1 => Just("select".to_string()),
        1 => Just("ROW".to_string()),
        1 => "[a-z]{1,4}[-./][a-z0-9]{1,4}",
        2 => "[ -~]{0,10}",
        1 => "[a-z\\\\'\"\n\t\r\0;#:/^]{0,8}",
        1 => "\\PC{0,6}",
    ]
}

fn nonempty_text() -> impl Strategy<Value = String> {
    text().prop_filter("non-empty", |s| !s.is_empty())
}

/// A family name: anything without a colon (a colon splits family from qualifier).
fn family() -> impl Strategy<Value = String> {
    nonempty_text().prop_filter("no colon", |s| !s.contains(':'))
}

fn timestamp() -> impl Strategy<Value = Timestamp> {
    prop_oneof![
        (
            1970i32..2100,
            1u32..13,
            1u32..29,
            0u32..24,
            0u32..60,
            0u32..60,
            option::of(0u32..1_000_000_000)
        )
            .prop_map(|(y, mo, d, h, mi, s, ns)| {
                let mut t = format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}");
                if let Some(ns) = ns {
                    t.push_str(&format!(".{ns:09}"));
                }
                t
            }),
        (0i64..i64::MAX).prop_map(|n| n.to_string()),
        text(),
    ]
    .prop_map(Timestamp::new)
}

fn relop() -> impl Strategy<Value = RelOp> {
    prop_oneof![
        Just(RelOp::Eq),
        Just(RelOp::Lt),
        Just(RelOp::Le),
        Just(RelOp::Gt),
        Just(RelOp::Ge),
        Just(RelOp::StartsWith),
    ]
}

fn ttl() -> impl Strategy<Value = Ttl> {
    (
        "[0-9]{1,4}(\\.[0-9]{1,2})?",
        option::of(prop_oneof![
            Just(TimeUnit::Seconds),
            Just(TimeUnit::Minutes),
            Just(TimeUnit::Hours),
            Just(TimeUnit::Days),
            Just(TimeUnit::Weeks),
            Just(TimeUnit::Months),
        ]),
    )
        .prop_map(|(amount, unit)| Ttl { amount, unit })
}

/// `kind(OPT = value, ...)`: kinds lower-case and option names upper-case (as the parser
/// stores them), values any text.
fn kind_call() -> BoxedStrategy<KindCall> {
    (
        "[a-z_][a-z0-9_]{0,8}",
        vec(("[A-Z_][A-Z0-9_]{0,6}", text()), 0..4),
    )
        .prop_map(|(kind, opts)| KindCall {
            kind,
            options: opts.into_iter().collect(),
        })
        .boxed()
}

fn scope() -> impl Strategy<Value = IterScope> {
    prop_oneof![
        Just(IterScope::Scan),
        Just(IterScope::Minor),
        Just(IterScope::Major)
    ]
}

fn iterator_def() -> BoxedStrategy<IteratorDef> {
    (
        "[a-zA-Z_][a-zA-Z0-9_]{0,8}",
        kind_call(),
        option::of(vec(scope(), 1..4)),
        option::of(any::<u16>()),
    )
        .prop_map(|(name, call, scopes, priority)| IteratorDef {
            name,
            call,
            scopes,
            priority,
        })
        .boxed()
}

fn column_options() -> BoxedStrategy<ColumnOptions> {
    (
        option::of(any::<u32>()),
        option::of(ttl()),
        option::of(prop_oneof![Just(TimeOrder::Asc), Just(TimeOrder::Desc)]),
        option::of(any::<bool>()),
        option::of(kind_call()),
        option::of(any::<bool>()),
    )
        .prop_map(
            |(max_versions, ttl, time_order, counter, combiner, append_only)| {
                let mut o = ColumnOptions {
                    max_versions,
                    ttl,
                    time_order,
                    counter,
                    combiner,
                    append_only,
                };
                if o.counter == Some(true) {
                    o.max_versions = None;
                    if o.time_order == Some(TimeOrder::Desc) {
                        o.time_order = None;
                    }
                }
                o
            },
        )
        .boxed()
}

fn compressor() -> impl Strategy<Value = CompressorSpec> {
    prop_oneof![
        Just(("lz4", Codec::Lz4)),
        Just(("none", Codec::None)),
        Just(("zlib --best", Codec::Zlib)),
        Just(("bmz --fp-len 19", Codec::Bmz)),
        Just(("LZO", Codec::Lzo)),
        Just(("quicklz", Codec::Quicklz)),
        Just(("snappy", Codec::Snappy)),
    ]
    .prop_map(|(t, codec)| CompressorSpec {
        text: t.to_string(),
        codec,
    })
}

fn bloom() -> impl Strategy<Value = BloomFilterOption> {
    (
        prop_oneof![Just("rows"), Just("rows+cols"), Just("none")],
        option::of(prop_oneof![Just("0.01"), Just("0.5"), Just("1e-3")]),
        option::of(1u32..20),
        option::of(1u32..10),
    )
        .prop_map(|(mode, fp, bits, hashes)| {
            let mut t = mode.to_string();
            if let Some(fp) = fp {
                t.push_str(&format!(" --false-positive {fp}"));
            }
            if let Some(b) = bits {
                t.push_str(&format!(" --bits-per-item {b}"));
            }
            if let Some(h) = hashes {
                t.push_str(&format!(" --num-hashes {h}"));
            }
            parse_bloom_text(&t).expect("generated bloom filter text is valid")
        })
}

fn group_options() -> impl Strategy<Value = AccessGroupOptions> {
    (
        option::of(any::<bool>()),
        option::of(any::<u32>()),
        option::of(any::<u16>()),
        option::of(compressor()),
        option::of(bloom()),
        // COMBINER and APPEND_ONLY are family options only.
        column_options().prop_map(|o| ColumnOptions {
            combiner: None,
            append_only: None,
            ..o
        }),
    )
        .prop_map(
            |(in_memory, blocksize, replication, compressor, bloom_filter, column_defaults)| {
                AccessGroupOptions {
                    in_memory,
                    blocksize,
                    replication,
                    compressor,
                    bloom_filter,
                    column_defaults,
                }
            },
        )
}

fn table_options() -> impl Strategy<Value = TableOptions> {
    (
        group_options(),
        option::of(any::<u32>()),
        option::of(prop_oneof![
            Just(Durability::None),
            Just(Durability::Log),
            Just(Durability::Flush),
            Just(Durability::Sync),
        ]),
    )
        .prop_map(
            |(group_defaults, group_commit_interval_ms, durability)| TableOptions {
                group_defaults,
                group_commit_interval_ms,
                durability,
            },
        )
}

fn definition() -> BoxedStrategy<Definition> {
    prop_oneof![
        3 => (nonempty_text(), column_options())
            .prop_map(|(name, options)| Definition::Family(FamilyDef { name, options })),
        1 => nonempty_text().prop_map(Definition::Index),
        1 => nonempty_text().prop_map(Definition::QualifierIndex),
        1 => iterator_def().prop_map(Definition::Iterator),
        1 => row_key().prop_map(Definition::RowKey),
        1 => (nonempty_text(), vec(nonempty_text(), 0..3), group_options()).prop_map(
            |(name, families, options)| Definition::AccessGroup(AccessGroupDef {
                name,
                families,
                options
            })
        ),
    ]
    .boxed()
}

fn column_ref() -> impl Strategy<Value = ColumnRef> {
    (family(), option::of(text())).prop_map(|(family, qualifier)| ColumnRef { family, qualifier })
}

fn column_selector() -> impl Strategy<Value = ColumnSelector> {
    prop_oneof![
        family().prop_map(ColumnSelector::Family),
        (family(), text())
            .prop_map(|(family, qualifier)| ColumnSelector::Qualifier { family, qualifier }),
        (family(), text())
            .prop_map(|(family, prefix)| ColumnSelector::QualifierPrefix { family, prefix }),
        (family(), "[a-z0-9.*^$/+|()\\[\\]]{0,8}")
            .prop_map(|(family, regex)| ColumnSelector::QualifierRegex { family, regex }),
    ]
}

fn columns() -> impl Strategy<Value = Columns> {
    prop_oneof![
        Just(Columns::All),
        vec(column_selector(), 1..4).prop_map(Columns::List),
    ]
}

fn aggregate() -> impl Strategy<Value = Aggregate> {
    prop_oneof![
        Just(Aggregate::CountRows),
        (
            prop::sample::select(AggregateFunc::ALL.to_vec()),
            column_ref()
        )
            .prop_map(|((_, func), column)| Aggregate::Column { func, column }),
    ]
}

/// SELECT's list: also aggregates (DUMP TABLE has none).
fn select_columns() -> impl Strategy<Value = Columns> {
    prop_oneof![
        3 => columns(),
        1 => vec(aggregate(), 1..5).prop_map(Columns::Aggregates),
    ]
}

fn cell_key() -> impl Strategy<Value = CellKey> {
    (text(), text()).prop_map(|(row, column)| CellKey { row, column })
}

fn column_predicate() -> impl Strategy<Value = ColumnPredicate> {
    prop_oneof![
        (column_ref(), text())
            .prop_map(|(column, value)| ColumnPredicate::ValueEquals { column, value }),
        (column_ref(), text())
            .prop_map(|(column, prefix)| ColumnPredicate::ValuePrefix { column, prefix }),
        (column_ref(), text())
            .prop_map(|(column, regex)| ColumnPredicate::ValueRegexp { column, regex }),
        column_ref().prop_map(ColumnPredicate::Exists),
    ]
}

/// The operator of `k op ROW` (`=^` is refused there: "Bad use of operator").
fn before_relop() -> impl Strategy<Value = RelOp> {
    relop().prop_filter("=^ cannot lead", |op| *op != RelOp::StartsWith)
}

/// Predicates other than TIMESTAMP (at most one of those is allowed, added separately).
fn predicate() -> impl Strategy<Value = Predicate> {
    prop_oneof![
        vec(
            (option::of((text(), before_relop())), relop(), text())
                .prop_map(|(before, op, key)| RowInterval { before, op, key }),
            1..4
        )
        .prop_map(Predicate::Row),
        text().prop_map(Predicate::RowRegexp),
        vec(text(), 1..4).prop_map(|k| Predicate::RowIn(RowSet::Keys(k))),
        text().prop_map(|f| Predicate::RowIn(RowSet::File(f))),
        vec(
            (
                option::of((cell_key(), before_relop())),
                relop(),
                cell_key()
            )
                .prop_map(|(before, op, cell)| CellInterval { before, op, cell }),
            1..3
        )
        .prop_map(Predicate::Cell),
        text().prop_map(Predicate::ValueRegexp),
        vec(column_predicate(), 1..4).prop_map(Predicate::Columns),
        (part_name(), vec(part_test(), 1..3)).prop_map(|(part, tests)| Predicate::Part(
            tests
                .into_iter()
                .map(|test| PartPredicate {
                    part: part.clone(),
                    test
                })
                .collect()
        )),
    ]
}

/// A key part name: a plain name that is no keyword.
fn part_name() -> impl Strategy<Value = String> {
    "[a-z_][a-z0-9_]{0,8}".prop_filter("not a keyword", |s| !hql::is_keyword(s))
}

fn key_value() -> impl Strategy<Value = KeyValue> {
    prop_oneof![
        any::<u64>().prop_map(KeyValue::Number),
        text().prop_map(KeyValue::Text),
    ]
}

fn part_test() -> impl Strategy<Value = PartTest> {
    prop_oneof![
        (relop(), key_value())
            .prop_filter("= 'text' reads as a value predicate", |(op, v)| {
                *op != RelOp::StartsWith && !(*op == RelOp::Eq && matches!(v, KeyValue::Text(_)))
            })
            .prop_map(|(op, v)| PartTest::Compare(op, v)),
        (key_value(), key_value()).prop_map(|(a, b)| PartTest::Between(a, b)),
        vec(key_value(), 1..4).prop_map(PartTest::In),
        text().prop_map(PartTest::InFile),
    ]
}

fn row_key() -> impl Strategy<Value = common::row_key::RowKeySpec> {
    use common::row_key::{KeyPart, PartKind, RowKeySpec};
    vec(
        (
            part_name(),
            prop_oneof![
                (1u8..20).prop_map(|width| PartKind::Uint { width }),
                any::<u8>().prop_map(|width| PartKind::Char { width }),
                Just(PartKind::Varchar),
            ],
        )
            .prop_map(|(name, kind)| KeyPart { name, kind }),
        1..4,
    )
    .prop_map(|parts| RowKeySpec { parts })
}

fn predicates() -> impl Strategy<Value = Vec<Predicate>> {
    (
        vec(predicate(), 0..4),
        option::of((
            option::of((timestamp(), before_relop())),
            relop(),
            timestamp(),
        )),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(preds, ts, at)| {
            // Hypertable's rules: one REGEXP of each kind; ANDed single ROW predicates may
            // not bound one side twice (here: at most one of them).
            let (mut row_re, mut value_re, mut single_row) = (false, false, false);
            let mut preds: Vec<Predicate> = preds
                .into_iter()
                .filter(|p| {
                    let seen = match p {
                        Predicate::RowRegexp(_) => &mut row_re,
                        Predicate::ValueRegexp(_) => &mut value_re,
                        Predicate::Row(r) if r.len() == 1 => &mut single_row,
                        _ => return true,
                    };
                    !std::mem::replace(seen, true)
                })
                .collect();
            if let Some((before, op, ts)) = ts {
                let pos = at.index(preds.len() + 1);
                preds.insert(
                    pos,
                    Predicate::Timestamp(TimestampPredicate { before, op, ts }),
                );
            }
            preds
        })
}

fn select_options() -> BoxedStrategy<SelectOptions> {
    (
        (
            option::of(any::<u32>()),
            option::of(any::<u64>()),
            option::of(any::<u64>()),
            option::of(any::<u64>()),
            option::of(any::<u64>()),
            option::of(any::<u64>()),
        ),
        option::of(text()),
        vec(any::<bool>(), 7),
        option::of(text()),
        vec(kind_call(), 0..3),
    )
        .prop_map(
            |((mv, limit, offset, cl, co, clpf), into_file, f, fs, iterators)| {
                SelectOptions {
                    max_versions: mv,
                    limit,
                    offset,
                    cell_limit: cl,
                    // OFFSET and CELL_OFFSET exclude each other.
                    cell_offset: if offset.is_some() { None } else { co },
                    cell_limit_per_family: clpf,
                    into_file,
                    display_timestamps: f[0],
                    display_revisions: f[1],
                    keys_only: f[2],
                    no_escape: f[3],
                    return_deletes: f[4],
                    no_cache: f[5],
                    scan_and_filter_rows: f[6],
                    field_separator: fs,
                    iterators,
                }
            },
        )
        .boxed()
}

fn select() -> BoxedStrategy<Statement> {
    (
        any::<bool>(),
        select_columns(),
        nonempty_text(),
        predicates(),
        select_options(),
    )
        .prop_map(|(cells, columns, table, predicates, options)| {
            Statement::Select(Select {
                cells,
                columns,
                table,
                predicates,
                options,
            })
        })
        .boxed()
}

fn cell_value() -> impl Strategy<Value = CellValue> {
    prop_oneof![
        4 => text().prop_map(CellValue::Literal),
        1 => Just(CellValue::Guid),
    ]
}

fn insert() -> impl Strategy<Value = Statement> {
    (
        nonempty_text(),
        vec(
            (
                option::of(timestamp()),
                cell_value(),
                column_ref(),
                cell_value(),
            )
                .prop_map(|(timestamp, row, column, value)| InsertValue {
                    timestamp,
                    row,
                    column,
                    value,
                }),
            1..4,
        ),
    )
        .prop_map(|(table, values)| Statement::Insert(Insert { table, values }))
}

fn delete() -> impl Strategy<Value = Statement> {
    (
        prop_oneof![
            Just(DeleteColumns::All),
            vec(column_ref(), 1..4).prop_map(DeleteColumns::List)
        ],
        nonempty_text(),
        text(),
        option::of(prop_oneof![
            timestamp().prop_map(DeleteTime::Timestamp),
            timestamp().prop_map(DeleteTime::Version),
        ]),
    )
        .prop_map(|(columns, table, row, time)| {
            Statement::Delete(Delete {
                columns,
                table,
                row,
                time,
            })
        })
}

fn row_key_column() -> impl Strategy<Value = RowKeyColumn> {
    prop_oneof![
        nonempty_text()
            .prop_filter("no %", |s| !s.starts_with('%'))
            .prop_map(|name| RowKeyColumn { name, format: None }),
        (
            "[a-z_][a-z0-9_]{0,6}",
            1u32..40,
            prop_oneof![
                Just(Justify::RightZero),
                Just(Justify::RightSpace),
                Just(Justify::LeftSpace)
            ]
        )
            .prop_map(|(name, width, justify)| RowKeyColumn {
                name,
                format: Some(KeyFormat { width, justify }),
            }),
    ]
}

fn load_data() -> impl Strategy<Value = Statement> {
    (
        (
            vec(row_key_column(), 0..3),
            option::of(nonempty_text()),
            option::of(text()),
            option::of(0u32..22),
            vec(any::<bool>(), 5),
            option::of(text()),
        ),
        prop_oneof![
            Just(DataSource::Stdin),
            text()
                .prop_filter("not stdin", |s| s != "-")
                .prop_map(DataSource::File)
        ],
        prop_oneof![
            nonempty_text().prop_map(LoadTarget::Table),
            text().prop_map(LoadTarget::File)
        ],
    )
        .prop_map(|((keys, ts, header, uniq, f, fs), source, target)| {
            Statement::LoadData(LoadData {
                options: LoadOptions {
                    row_key_columns: keys,
                    timestamp_column: ts,
                    header_file: header,
                    row_uniquify_chars: uniq,
                    duplicate_key_columns: f[0],
                    ignore_unknown_columns: f[1],
                    single_cell_format: f[2],
                    no_escape: f[3],
                    field_separator: fs,
                    no_log: f[4],
                },
                source,
                target,
            })
        })
}

fn dump_table() -> impl Strategy<Value = Statement> {
    (
        nonempty_text(),
        columns(),
        predicates(),
        option::of(any::<u32>()),
        option::of(any::<u32>()),
        option::of(text()),
        any::<bool>(),
        option::of(text()),
    )
        .prop_map(
            |(table, columns, predicates, max_versions, buckets, into_file, no_ts, fs)| {
                Statement::DumpTable(DumpTable {
                    table,
                    columns,
                    predicates,
                    max_versions,
                    buckets,
                    into_file,
                    no_timestamps: no_ts,
                    field_separator: fs,
                })
            },
        )
}

fn create_table() -> BoxedStrategy<Statement> {
    (
        nonempty_text(),
        any::<bool>(),
        prop_oneof![
            1 => nonempty_text().prop_map(CreateTableBody::Like),
            4 => (vec(definition(), 0..5), table_options()).prop_map(|(definitions, options)| {
                CreateTableBody::Definitions {
                    definitions,
                    options,
                }
            }),
        ],
        vec(nonempty_text(), 0..3),
    )
        .prop_map(|(name, if_not_exists, body, splits)| {
            Statement::CreateTable(CreateTable {
                name,
                if_not_exists,
                body,
                splits,
            })
        })
        .boxed()
}

fn alter_table() -> BoxedStrategy<Statement> {
    let action = prop_oneof![
        vec(definition(), 0..3).prop_map(AlterAction::Add),
        vec(definition(), 0..3).prop_map(AlterAction::Modify),
        vec(nonempty_text(), 1..3).prop_map(AlterAction::Drop),
        vec(nonempty_text(), 1..3).prop_map(AlterAction::DropIndex),
        vec(nonempty_text(), 1..3).prop_map(AlterAction::DropQualifierIndex),
        (nonempty_text(), nonempty_text())
            .prop_map(|(from, to)| AlterAction::RenameColumnFamily { from, to }),
        "[a-zA-Z_][a-zA-Z0-9_]{0,8}".prop_map(AlterAction::DropIterator),
    ];
    (nonempty_text(), vec(action, 1..4))
        .prop_map(|(table, actions)| Statement::AlterTable(AlterTable { table, actions }))
        .boxed()
}

fn admin() -> impl Strategy<Value = Statement> {
    let range_type = prop_oneof![
        Just(RangeType::All),
        Just(RangeType::Root),
        Just(RangeType::Metadata),
        Just(RangeType::System),
        Just(RangeType::User),
    ];
    let kind = option::of(prop_oneof![
        Just(CompactionType::Minor),
        Just(CompactionType::Major),
        Just(CompactionType::Merging),
        Just(CompactionType::Gc),
    ]);
    prop_oneof![
        (nonempty_text(), any::<bool>()).prop_map(|(name, if_not_exists)| {
            Statement::CreateNamespace {
                name,
                if_not_exists,
            }
        }),
        (nonempty_text(), any::<bool>())
            .prop_map(|(name, if_exists)| Statement::DropNamespace { name, if_exists }),
        nonempty_text().prop_map(Statement::Use),
        Just(Statement::GetListing),
        Just(Statement::ShowTables),
        nonempty_text().prop_map(Statement::ShowCreateTable),
        (nonempty_text(), any::<bool>())
            .prop_map(|(table, with_ids)| Statement::DescribeTable { table, with_ids }),
        (nonempty_text(), nonempty_text())
            .prop_map(|(from, to)| Statement::RenameTable { from, to }),
        (nonempty_text(), any::<bool>())
            .prop_map(|(table, if_exists)| Statement::DropTable { table, if_exists }),
        nonempty_text().prop_map(Statement::ExistsTable),
        (kind.clone(), nonempty_text(), option::of(text())).prop_map(|(kind, table, row)| {
            Statement::Compact(Compact {
                kind,
                target: CompactTarget::Table { table, row },
            })
        }),
        (kind, vec(range_type, 1..4)).prop_map(|(kind, types)| {
            Statement::Compact(Compact {
                kind,
                target: CompactTarget::Ranges(types),
            })
        }),
        Just(Statement::WaitForMaintenance),
        option::of(nonempty_text()).prop_map(|algorithm| Statement::Balance { algorithm }),
        Just(Statement::Status),
        vec(
            (
                nonempty_text(),
                prop_oneof![text(), "[0-9]{1,4}(\\.[0-9]{1,3})?"]
            )
                .prop_map(|(name, value)| SetVariable { name, value }),
            1..3
        )
        .prop_map(Statement::Set),
        Just(Statement::Shutdown),
    ]
}

fn shell() -> impl Strategy<Value = Statement> {
    prop_oneof![
        option::of("[a-z]{1,6}( [a-z]{1,6}){0,2}").prop_map(Statement::Help),
        Just(Statement::Quit),
        text().prop_map(Statement::Source),
        Just(Statement::Clear),
        option::of(text()).prop_map(Statement::Print),
        (0u64..100_000, 0u32..1_000_000_000)
            .prop_map(|(s, n)| Statement::Pause(Duration::new(s, n))),
    ]
}

fn statement() -> impl Strategy<Value = Statement> {
    prop_oneof![
        select(),
        select().prop_map(|s| match s {
            Statement::Select(s) => Statement::Explain(s),
            other => other,
        }),
        insert(),
        delete(),
        load_data(),
        dump_table(),
        create_table(),
        alter_table(),
        admin(),
        shell(),
    ]
}

fn check_roundtrip(stmt: &Statement) -> Result<(), TestCaseError> {
    let printed = stmt.to_string();
    match parse_statement(&printed) {
        Ok(back) => prop_assert_eq!(&back, stmt, "printed as:\n{}", printed),
        Err(e) => prop_assert!(
            false,
            "{:?} printed as\n{}\ndoes not parse:\n{}",
            stmt,
            printed,
            e
        ),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn select_roundtrips(s in select()) { check_roundtrip(&s)?; }

    #[test]
    fn insert_roundtrips(s in insert()) { check_roundtrip(&s)?; }

    #[test]
    fn delete_roundtrips(s in delete()) { check_roundtrip(&s)?; }

    #[test]
    fn load_data_roundtrips(s in load_data()) { check_roundtrip(&s)?; }

    #[test]
    fn dump_table_roundtrips(s in dump_table()) { check_roundtrip(&s)?; }

    #[test]
    fn create_table_roundtrips(s in create_table()) { check_roundtrip(&s)?; }

    #[test]
    fn alter_table_roundtrips(s in alter_table()) { check_roundtrip(&s)?; }

    #[test]
    fn admin_roundtrips(s in admin()) { check_roundtrip(&s)?; }

    #[test]
    fn shell_roundtrips(s in shell()) { check_roundtrip(&s)?; }

    /// A script of printed statements parses back to the same statements, and each span
    /// holds that statement's text.
    #[test]
    fn scripts_roundtrip(stmts in vec(statement(), 0..6)) {
        let mut script = String::from("# generated\n");
        for s in &stmts {
            script.push_str(&s.to_string());
            script.push_str(";\n\n");
        }
        let parsed = parse_script(&script).map_err(|e| TestCaseError::fail(format!("{script}\n{e}")))?;
        prop_assert_eq!(parsed.len(), stmts.len());
        for ((got, span), want) in parsed.iter().zip(&stmts) {
            prop_assert_eq!(got, want);
            prop_assert_eq!(&script[span.clone()], format!("{want};"));
        }
    }
}

/// HQL-like token soup, to reach deep into the grammar.
fn token_soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        prop::sample::select(vec![
            "SELECT",
            "CELLS",
            "*",
            "FROM",
            "WHERE",
            "ROW",
            "CELL",
            "TIMESTAMP",
            "VALUE",
            "REGEXP",
            "AND",
            "OR",
            "(",
            ")",
            ",",
            ";",
            "=",
            "<",
            "<=",
            ">",
            ">=",
            "=^",
            "=~",
            "LIMIT",
            "OFFSET",
            "CELL_OFFSET",
            "REVS",
            "INTO",
            "FILE",
            "FS",
            "CREATE",
            "TABLE",
            "ACCESS",
            "GROUP",
            "INDEX",
            "QUALIFIER",
            "MAX_VERSIONS",
            "TTL",
            "DAYS",
            "TIME_ORDER",
            "DESC",
            "COUNTER",
            "IN_MEMORY",
            "BLOCKSIZE",
            "COMPRESSOR",
            "BLOOMFILTER",
            "INSERT",
            "VALUES",
            "GUID",
            "()",
            "DELETE",
            "VERSION",
            "LOAD",
            "DATA",
            "INFILE",
            "ROW_KEY_COLUMN",
            "+",
            "%09",
            "ALTER",
            "ADD",
            "DROP",
            "MODIFY",
            "RENAME",
            "COLUMN",
            "FAMILY",
            "DUMP",
            "COLUMNS",
            "COMPACT",
            "TYPE",
            "RANGES",
            "|",
            "SET",
            "help",
            "pause",
            "source",
            "#",
            "\n",
            "a",
            "b:q",
            "c:^p",
            "d:/x/",
            "'r'",
            "\"v\"",
            "'2008-01-01 00:00:00'",
            "42",
            "1.5",
            "\"",
            "'",
            "\\",
            "EXISTS",
            "IF",
            "NOT",
            "NAMESPACE",
            "USE",
            "/a/b",
            "COMBINER",
            "APPEND_ONLY",
            "ITERATOR",
            "SCOPES",
            "SCAN",
            "MINOR",
            "MAJOR",
            "PRIORITY",
            "WITH",
            "sum",
            "uid_set(MAX = 20)",
            "age_off(TTL = '30 DAYS')",
            "-5",
        ])
        .prop_map(str::to_string),
        "\\PC{1,3}",
    ];
    vec(token, 0..25).prop_map(|t| t.join(" "))
}

fn check_no_panic(input: &str) -> Result<(), TestCaseError> {
    match parse_statement(input) {
        Ok(s) => check_roundtrip(&s)?,
        Err(e) => {
            prop_assert!(e.line >= 1 && e.column >= 1);
            let _ = e.to_string();
        }
    }
    if let Err(e) = parse_script(input) {
        let _ = e.to_string();
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_strings_never_panic(input in "\\PC{0,60}") {
        check_no_panic(&input)?;
    }

    #[test]
    fn token_soup_never_panics(input in token_soup()) {
        check_no_panic(&input)?;
    }

    /// Every prefix of a valid statement fails (or succeeds) without panicking.
    #[test]
    fn prefixes_never_panic(s in statement(), cut in any::<prop::sample::Index>()) {
        let text = s.to_string();
        let mut n = cut.index(text.len() + 1);
        while !text.is_char_boundary(n) {
            n -= 1;
        }
        check_no_panic(&text[..n])?;
    }
}

// ---- SHOW CREATE TABLE of combiners, APPEND_ONLY and iterators ----

/// Runs one statement on `ex`, returning its output.
fn exec(ex: &mut hql::exec::Executor, stmt: &str) -> String {
    let s = parse_statement(stmt).unwrap_or_else(|e| panic!("{stmt}\n{e}"));
    let mut out = Vec::new();
    ex.execute(&s, &mut out)
        .unwrap_or_else(|e| panic!("{stmt}: {e}"));
    String::from_utf8(out).expect("utf-8 output")
}

/// HQL -> schema -> SHOW CREATE TABLE -> HQL -> the same schema (ids, families, groups,
/// combiners, APPEND_ONLY, iterators with their scopes and priorities), and the priorities
/// HQL picks: explicit ones first, then the lowest multiple of 10 free in all the scopes.
#[test]
fn show_create_table_recreates_combiners_and_iterators() {
    use std::sync::Arc;

    use client::Client;
    use common::iterators::{IterScope, IteratorSpec};
    let dir = tempfile::tempdir().expect("tempdir");
    let client = Arc::new(
        embedded::EmbeddedClient::open(dir.path().join("db"), embedded::EmbeddedOptions::default())
            .expect("open"),
    );
    let mut ex = hql::exec::Executor::new(client.clone() as Arc<dyn client::Client>);
    exec(
        &mut ex,
        "CREATE TABLE t (hits COUNTER, total COMBINER sum(ENCODING = fixed64), peak COMBINER \
         max, tags COMBINER string_set(MAX = 100), docs COMBINER uid_set(MAX = 20) APPEND_ONLY, \
         plain TTL 30 DAYS, ACCESS GROUP g (docs, plain), \
         ITERATOR old = age_off(TTL = '30 DAYS'), \
         ITERATOR tmp = value_regex(REGEX = '^tmp\\d', NEGATE = true) SCOPES (MAJOR) PRIORITY 10, \
         ITERATOR rows = whole_row SCOPES (SCAN))",
    );
    exec(
        &mut ex,
        "ALTER TABLE t ADD (ITERATOR first = first_in_row SCOPES (SCAN), extra COMBINER min)",
    );
    let shown = exec(&mut ex, "SHOW CREATE TABLE t");
    let t = client.table_schema("/t").expect("schema");
    let its: Vec<(&str, u16, &[IterScope])> = t
        .iterators
        .iter()
        .map(|i: &IteratorSpec| (i.name.as_str(), i.priority, i.scopes.as_slice()))
        .collect();
    use IterScope::*;
    assert_eq!(
        its,
        vec![
            ("old", 20, &[Scan, Minor, Major][..]),
            ("tmp", 10, &[Major][..]),
            ("rows", 10, &[Scan][..]),
            ("first", 30, &[Scan][..]),
        ],
        "{shown}"
    );
    for want in [
        "total COMBINER sum(ENCODING = 'fixed64')",
        "docs COMBINER uid_set(MAX = '20') APPEND_ONLY",
        "ITERATOR old = age_off(TTL = '30 DAYS') SCOPES (SCAN, MINOR, MAJOR) PRIORITY 20",
        r"ITERATOR tmp = value_regex(NEGATE = 'true', REGEX = '^tmp\d') SCOPES (MAJOR) PRIORITY 10",
    ] {
        assert!(shown.contains(want), "{want:?} not in\n{shown}");
    }
    let again = shown.replacen("CREATE TABLE t ", "CREATE TABLE u ", 1);
    assert_ne!(again, shown);
    exec(&mut ex, &again);
    let u = client.table_schema("/u").expect("schema");
    // Alike but for the generations: `extra` was added by an ALTER of t, at generation 2.
    let unaged = |s: &common::TableSchema| {
        let mut s = s.clone();
        s.families.iter_mut().for_each(|f| f.generation = 0);
        s.access_groups.iter_mut().for_each(|g| g.generation = 0);
        s
    };
    assert_eq!(unaged(&u).families, unaged(&t).families);
    assert_eq!(unaged(&u).access_groups, unaged(&t).access_groups);
    assert_eq!(u.iterators, t.iterators);
    assert_eq!(exec(&mut ex, "SHOW CREATE TABLE u"), again);
    // DROP ITERATOR removes exactly that one; an absent one is named.
    exec(&mut ex, "ALTER TABLE u DROP ITERATOR tmp");
    let names: Vec<String> = client
        .table_schema("/u")
        .expect("schema")
        .iterators
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(names, ["old", "rows", "first"]);
    let s = parse_statement("ALTER TABLE u DROP ITERATOR tmp").expect("parse");
    let e = ex
        .execute(&s, &mut Vec::new())
        .expect_err("absent iterator");
    assert_eq!(e.to_string(), "iterator 'tmp' does not exist in table '/u'");
    // MODIFY takes APPEND_ONLY away; the engine refuses to set it on an existing family (older
    // deletes may lie in its stores) or to change a combiner (stored values are in its form),
    // and hql passes its messages through.
    exec(&mut ex, "ALTER TABLE u MODIFY (docs APPEND_ONLY false)");
    let docs = client
        .table_schema("/u")
        .expect("schema")
        .family("docs")
        .cloned();
    let docs = docs.expect("family docs");
    assert!(!docs.append_only);
    assert_eq!(docs.combiner.map(|c| c.kind), Some("uid_set".into()));
    for (stmt, family) in [
        ("ALTER TABLE u MODIFY (peak APPEND_ONLY)", "peak"),
        (
            "ALTER TABLE u MODIFY (tags COMBINER string_set(MAX = 5))",
            "tags",
        ),
    ] {
        let s = parse_statement(stmt).expect("parse");
        let e = ex.execute(&s, &mut Vec::new()).expect_err(stmt);
        let want = format!("cannot alter table '/u': column family '{family}': ");
        assert!(e.to_string().starts_with(&want), "{stmt}: {e}");
    }
}

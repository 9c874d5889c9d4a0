//! The shell's help texts: a summary of every statement and command, and a page for each.

/// (topic, one-line summary, page).
const TOPICS: &[(&str, &str, &str)] = &[
    (
        "create namespace",
        "CREATE NAMESPACE name [IF NOT EXISTS]",
        "CREATE NAMESPACE name [IF NOT EXISTS]\n  Creates a namespace (also CREATE DATABASE). Names are paths: /a/b is absolute,\n  a/b is relative to the current namespace. The parent must exist.",
    ),
    (
        "drop namespace",
        "DROP NAMESPACE [IF EXISTS] name",
        "DROP NAMESPACE [IF EXISTS] name\n  Drops an empty namespace.",
    ),
    (
        "use",
        "USE name",
        "USE name\n  Makes name the current namespace; relative names are resolved against it.",
    ),
    (
        "get listing",
        "GET LISTING",
        "GET LISTING\n  Lists the tables and sub-namespaces of the current namespace; namespaces are\n  marked ' (namespace)'.",
    ),
    (
        "show tables",
        "SHOW TABLES",
        "SHOW TABLES\n  Lists the tables of the current namespace.",
    ),
    (
        "create table",
        "CREATE TABLE [IF NOT EXISTS] name ( definitions ) [options] | LIKE other [SPLIT ON (rows)]",
        "CREATE TABLE [IF NOT EXISTS] name ( definition [, definition]* ) [table options]\n  [SPLIT ON ('row', ...)]\nCREATE TABLE name LIKE other [SPLIT ON ('row', ...)]\n  Definitions: family [MAX_VERSIONS n] [TTL n [unit]] [TIME_ORDER ASC|DESC] [COUNTER]\n                 [COMBINER kind[(OPT = value, ...)]] [APPEND_ONLY]\n               INDEX family | QUALIFIER INDEX family\n               ACCESS GROUP ag ( family, ... ) [IN_MEMORY] [BLOCKSIZE n] [REPLICATION n]\n                 [COMPRESSOR \"codec\"] [BLOOMFILTER \"rows|rows+cols|none ...\"] [column options]\n               ITERATOR name = kind[(OPT = value, ...)] [SCOPES (SCAN, MINOR, MAJOR)] [PRIORITY n]\n               ROW KEY (part UINT(w) | CHAR(n) | VARCHAR, ...)   (ht extension)\n  Combiners: counter, sum, min, max ([ENCODING = 'fixed64'|'varint']), string_set(MAX = n),\n  uid_set(MAX = n). APPEND_ONLY families refuse deletes and are combined in every compaction.\n  Iterators run in the scopes given (default all three; row-level kinds only in SCAN), lower\n  PRIORITY first (default: the lowest multiple of 10 free in its scopes).\n  Table options: any access group or column option as a default, GROUP_COMMIT_INTERVAL ms,\n  DURABILITY none|log|flush|sync. Families outside any group go to group 'default'.\n  ROW KEY declares rows as fixed-width parts joined by one space, as LOAD DATA's\n  ROW_KEY_COLUMN=\"%010objectid\"+fieldtype builds them: UINT(w) w digits, zero-padded;\n  CHAR(n) n bytes, space-padded on the right; VARCHAR the rest (last part only). INSERT and\n  LOAD DATA refuse rows that do not fit; LOAD DATA builds rows from the fields named like\n  the parts; WHERE may name the parts (see SELECT).\n  SPLIT ON (ht extension, Phoenix's spelling) creates the table pre-split: one range per gap\n  between the rows (strictly increasing), spread over the range servers; they split further\n  by size as usual.",
    ),
    (
        "show create table",
        "SHOW CREATE TABLE name",
        "SHOW CREATE TABLE name\n  Prints a CREATE TABLE statement that recreates the table, every option written out.",
    ),
    (
        "describe table",
        "DESCRIBE TABLE [WITH IDS] name",
        "DESCRIBE TABLE [WITH IDS] name\n  Prints the schema as XML; WITH IDS adds family ids, the generation and dropped families.",
    ),
    (
        "alter table",
        "ALTER TABLE name ADD|MODIFY ( defs ) | DROP ( families ) | RENAME COLUMN FAMILY (a, b)",
        "ALTER TABLE name clause [clause]*\n  ADD ( definitions )      new families and access groups\n  MODIFY ( definitions )   new options for existing families and groups\n  DROP ( family, ... )     drops families (their data disappears)\n  RENAME COLUMN FAMILY ( old, new )\n  DROP [QUALIFIER] INDEX ( family, ... )\n  ADD ( ITERATOR name = kind(...) ... )   a table iterator, as in CREATE TABLE\n  DROP ITERATOR name",
    ),
    (
        "rename table",
        "RENAME TABLE a TO b",
        "RENAME TABLE a TO b\n  Renames a table; b may be in another existing namespace.",
    ),
    (
        "drop table",
        "DROP TABLE [IF EXISTS] name",
        "DROP TABLE [IF EXISTS] name\n  Drops a table and frees its files.",
    ),
    (
        "rebuild indices",
        "REBUILD [VALUE|QUALIFIER] INDICES name",
        "REBUILD [VALUE|QUALIFIER] INDICES name\n  Drops and re-creates a table's value index (^name) or qualifier index (^^name),\n  both without a keyword, and fills them from every stored cell version.",
    ),
    (
        "exists table",
        "EXISTS TABLE name",
        "EXISTS TABLE name\n  Prints true or false.",
    ),
    (
        "insert",
        "INSERT INTO t VALUES ([timestamp,] row, column, value) [, (...)]*",
        "INSERT INTO table VALUES ([timestamp,] row, family[:qualifier], value) [, (...)]*\n  Timestamps are 'YYYY-MM-DD[ HH:MM[:SS[.fraction|:ns]]]'; GUID() may stand for a row or value.",
    ),
    (
        "delete",
        "DELETE * | column [, column]* FROM t WHERE ROW = 'r' [TIMESTAMP ts | VERSION ts]",
        "DELETE * | column [, column]* FROM table WHERE ROW = 'row' [TIMESTAMP ts | VERSION ts]\n  * deletes the row, family the family, family:qualifier the cell. TIMESTAMP ts limits the\n  delete to versions at or before ts; VERSION ts deletes exactly that version.",
    ),
    (
        "select",
        "SELECT [CELLS] * | column [, column]* FROM t [WHERE ...] [options]",
        "SELECT [CELLS] * | column [, column]* FROM table [WHERE predicate [AND predicate]*] [options]\n  Columns: family, family:qualifier, family:^prefix, family:/regex/\n  Predicates: [k relop] ROW relop k, ROW =^ 'prefix', ROW REGEXP \"re\", OR-lists in ( ),\n    ROW IN ('k1', 'k2', ...), ROW IN FILE \"keys.txt[.gz]\" (one row per line),\n    ['r','c' relop] CELL relop 'r','c', [ts relop] TIMESTAMP relop ts, VALUE REGEXP \"re\",\n    family = \"v\", family =^ \"p\", REGEXP(family, \"re\"), EXISTS(family:q),\n    with a ROW KEY: part = v, part relop v, part BETWEEN a AND b, part IN (v, ...),\n    part IN FILE \"values.txt[.gz]\", (part op v OR part op v ...); parts left out match any\n    value (a skip scan); key-part predicates count as one interval for LIMIT and OFFSET\n  Options: MAX_VERSIONS n, LIMIT n, OFFSET n, CELL_LIMIT n, CELL_OFFSET n,\n    CELL_LIMIT_PER_FAMILY n, INTO FILE \"[file://]name[.gz]\", DISPLAY_TIMESTAMPS,\n    DISPLAY_REVISIONS, KEYS_ONLY, NO_ESCAPE, RETURN_DELETES, NO_CACHE, FS='c',\n    SCAN_AND_FILTER_ROWS (rows named one by one are fetched by one scan stepping through\n    them, counted as one interval; other intervals come first),\n    WITH ITERATOR kind[(OPT = value, ...)] [, kind(...)]* (run in the servers, in order)\n  Value predicates run in the range servers; LIMIT and OFFSET count the matching rows.\nEXPLAIN SELECT ... prints how the query would run (rows, skip, seek or step, bloom filters,\n  ranges and servers) without running it.\n  Aggregates: see 'help aggregates'.",
    ),
    (
        "aggregates",
        "SELECT COUNT(*) | COUNT(f) | SUM(f) | AVG(f) | MIN(f) | MAX(f) [, ...] FROM t [WHERE ...]",
        "SELECT aggregate [, aggregate]* FROM table [WHERE ...] [options]\n  Aggregates: COUNT(*), COUNT(f), SUM(f), AVG(f), MIN(f), MAX(f); f is family or\n  family:qualifier. They cannot be mixed with columns. Prints one tab-separated line of\n  values in the order of the list (FS = 'c' changes the separator), nothing else.\n  They read the newest version of each cell the same SELECT without aggregates returns:\n  every WHERE predicate (value predicates, ROW IN key sets, timestamps) and LIMIT, OFFSET,\n  CELL_LIMIT, CELL_OFFSET, CELL_LIMIT_PER_FAMILY, which apply before aggregating.\n  COUNT(*) counts rows; with COUNT(*) in the list every family is read, without it only the\n  columns named. The others read the cells of f whose value is a decimal number\n  ([+-]digits[.digits], no spaces, no exponent), exactly: COUNT(f) counts them, SUM keeps\n  the largest number of fraction digits seen, MIN and MAX print the number without plus sign\n  or leading zeros, AVG is the exact quotient rounded half to even at max(fraction digits of\n  the sum, 6) digits with trailing zeros left out. Other cells of f are not aggregated and\n  are reported in a note ('f: 3 non-numeric cells not aggregated', on stderr). Without\n  numbers COUNT prints 0 and the others NULL. A value of more than 38 digits or 18 fraction\n  digits, or such a sum, is an error naming the column. Computed where the data is: per range\n  in the range servers (the embedded engine), partials combined by the client; with limits a\n  cluster folds the cells on the client.\n  Refused with aggregates: MAX_VERSIONS/REVS, KEYS_ONLY, RETURN_DELETES, DISPLAY_TIMESTAMPS,\n  DISPLAY_REVISIONS, INTO FILE.",
    ),
    (
        "load data infile",
        "LOAD DATA INFILE [options] \"file\" INTO TABLE t",
        "LOAD DATA INFILE [options] \"[file://]name[.gz]\" | \"-\" INTO TABLE table | INTO FILE f\n  Options: ROW_KEY_COLUMN=spec[+spec]*, TIMESTAMP_COLUMN=name, HEADER_FILE=\"f\",\n    ROW_UNIQUIFY_CHARS=n, DUPLICATE_KEY_COLUMNS, IGNORE_UNKNOWN_COLUMNS, SINGLE_CELL_FORMAT,\n    NO_ESCAPE, FS='c', NO_LOG",
    ),
    (
        "dump table",
        "DUMP TABLE t [COLUMNS ...] [WHERE ...] [MAX_VERSIONS n] [INTO FILE f] [NO_TIMESTAMPS]",
        "DUMP TABLE table [COLUMNS col, ...] [WHERE ...] [MAX_VERSIONS n] [INTO FILE \"f[.gz]\"]\n    [NO_TIMESTAMPS] [FS='c']\n  Writes every version as timestamp, row, column, value lines that LOAD DATA INFILE reads back.",
    ),
    (
        "compact",
        "COMPACT [TYPE=MINOR|MAJOR|MERGING|GC] TABLE t | RANGES kinds",
        "COMPACT [TYPE=MINOR|MAJOR|MERGING|GC] TABLE table [\"row\"]\nCOMPACT [TYPE=...] RANGES ALL|ROOT|METADATA|SYSTEM|USER\n  Compacts and waits for it; the default type is MAJOR.",
    ),
    (
        "wait for maintenance",
        "WAIT FOR MAINTENANCE",
        "WAIT FOR MAINTENANCE\n  Waits until no background maintenance is queued or running.",
    ),
    (
        "status",
        "STATUS",
        "STATUS\n  Prints figures about the database, one 'name<TAB>value' per line.",
    ),
    (
        "balance",
        "BALANCE [ALGORITHM = name]",
        "BALANCE [ALGORITHM = name]\n  Moves ranges between servers (not available in the embedded database).",
    ),
    (
        "set",
        "SET name = value [, name = value]*",
        "SET name = value [, ...]\n  Sets server variables (not available in the embedded database).",
    ),
    (
        "shutdown",
        "SHUTDOWN",
        "SHUTDOWN\n  Flushes and closes the database.",
    ),
    (
        "help",
        "help [statement]",
        "help [statement]\n  Lists the statements, or describes one (e.g. 'help select').",
    ),
    ("quit", "quit | exit", "quit | exit\n  Leaves the shell."),
    (
        "source",
        "source file",
        "source file\n  Runs the statements in file.",
    ),
    ("clear", "clear", "clear\n  Clears the screen."),
    (
        "print",
        "print \"text\"",
        "print \"text\"\n  Prints text (scripts use it to label their output).",
    ),
    (
        "pause",
        "pause N",
        "pause N\n  Sleeps N seconds (fractions allowed), e.g. to wait for cells to expire.",
    ),
];

/// The help text for `topic`, or the list of statements; `None` for an unknown topic.
pub fn text(topic: Option<&str>) -> Option<String> {
    let Some(topic) = topic else {
        let mut out = String::from("Statements and shell commands (help <statement> for more):\n");
        for (_, summary, _) in TOPICS {
            out.push_str("  ");
            out.push_str(summary);
            out.push('\n');
        }
        return Some(out);
    };
    let topic = topic.trim_end_matches(';').trim();
    let topic = match topic {
        "exit" => "quit",
        "create database" => "create namespace",
        "drop database" => "drop namespace",
        "describe" => "describe table",
        "load" | "load data" => "load data infile",
        "dump" => "dump table",
        t => t,
    };
    TOPICS
        .iter()
        .find(|(t, _, _)| *t == topic)
        .or_else(|| TOPICS.iter().find(|(t, _, _)| t.starts_with(topic)))
        .map(|(_, _, page)| format!("{page}\n"))
}

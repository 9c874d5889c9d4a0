# Table iterators (issue 14): filters in scans and compactions, ALTER TABLE ADD and DROP
# ITERATOR, iterators a scan brings (WITH ITERATOR), and the settings DDL refuses.
CREATE TABLE logs (a, b, ITERATOR old = age_off(TTL = '1 HOUR') SCOPES (SCAN, MINOR, MAJOR), ITERATOR hide = value_regex(REGEX = '^tmp', NEGATE = true) SCOPES (SCAN, MAJOR) PRIORITY 20);
SHOW CREATE TABLE logs;
INSERT INTO logs VALUES ("2001-01-01 00:00:00", "r1", "a", "ancient"), ("r1", "b", "fresh"), ("r2", "a", "tmp stuff"), ("r2", "b", "kept"), ("r3", "a", "tmpfile");
SELECT * FROM logs;
# Without the filter the cells it hid are back: scans do not change stored data.
ALTER TABLE logs DROP ITERATOR hide;
SELECT * FROM logs;
# In the major scope only, the filter drops cells when the table is compacted.
ALTER TABLE logs ADD (ITERATOR hide = value_regex(REGEX = '^tmp', NEGATE = true) SCOPES (MAJOR), c);
SHOW CREATE TABLE logs;
SELECT * FROM logs;
COMPACT TABLE logs;
SELECT * FROM logs;
ALTER TABLE logs DROP ITERATOR old;
SELECT * FROM logs;
ALTER TABLE logs DROP ITERATOR old;
ALTER TABLE logs ADD (ITERATOR hide = age_off(TTL = 5));
ALTER TABLE logs MODIFY (ITERATOR hide = age_off(TTL = 5));
# Iterators a scan brings, run above the table's in the order given.
CREATE TABLE t (a, b);
INSERT INTO t VALUES ("r1", "a:x", "1"), ("r1", "a:y", "2"), ("r1", "b", "3"), ("r2", "a", "4"), ("r3", "b:z", "5"), ("r3", "b:zz", "6");
SELECT * FROM t WITH ITERATOR first_in_row;
SELECT * FROM t WITH ITERATOR count_cells;
SELECT * FROM t WITH ITERATOR whole_row;
SELECT b FROM t WITH ITERATOR count_cells;
SELECT * FROM t WHERE ROW >= "r2" WITH ITERATOR first_in_row;
SELECT * FROM t WITH ITERATOR value_regex(REGEX = '^[12]$', NEGATE = true), count_cells;
SELECT * FROM t WITH ITERATOR count_cells, value_regex(REGEX = '^[12]$', NEGATE = true);
SELECT * FROM t WITH ITERATOR row_regex(REGEX = '[13]');
SELECT * FROM t WITH ITERATOR row_regex(REGEX = '[13]', NEGATE = true);
SELECT * FROM t WITH ITERATOR family_filter(FAMILIES = 'b');
SELECT * FROM t WITH ITERATOR family_filter(FAMILIES = 'b', NEGATE = true);
SELECT * FROM t LIMIT 1 WITH ITERATOR count_cells;
SELECT * FROM t WITH ITERATOR no_such_kind;
SELECT * FROM t WITH ITERATOR value_regex(REGEX = 'x', COLOR = 'red');
# Settings DDL refuses: unknown kinds and options, a priority twice in one scope, a row-level
# kind in a compaction scope, a scope twice.
CREATE TABLE bad (a, ITERATOR x = no_such_kind);
CREATE TABLE bad (a, ITERATOR x = age_off(TTL = '1 HOUR', COLOR = 'red'));
CREATE TABLE bad (a, ITERATOR x = age_off(TTL = '1 HOUR') PRIORITY 10, ITERATOR y = value_regex(REGEX = 'a') SCOPES (SCAN) PRIORITY 10);
CREATE TABLE bad (a, ITERATOR w = whole_row SCOPES (SCAN, MAJOR));
CREATE TABLE bad (a, ITERATOR w = first_in_row);
CREATE TABLE bad (a, ITERATOR x = age_off(TTL = 5) SCOPES (SCAN, SCAN));
CREATE TABLE bad (a, ITERATOR x = age_off(TTL = 5), ITERATOR x = age_off(TTL = 6));
ALTER TABLE logs ADD (ITERATOR n = count_cells SCOPES (MINOR));
EXISTS TABLE bad;
SHOW CREATE TABLE logs;

# Versions, time order, limits and offsets (alone and combined), INTO FILE.
CREATE TABLE t (a MAX_VERSIONS 3, d TIME_ORDER DESC, c);
INSERT INTO t VALUES ("2022-01-01 00:00:01", "r1", "a", "v1"), ("2022-01-01 00:00:02", "r1", "a", "v2"), ("2022-01-01 00:00:03", "r1", "a", "v3"), ("2022-01-01 00:00:04", "r1", "a", "v4");
INSERT INTO t VALUES ("2022-01-01 00:00:01", "r1", "d", "d1"), ("2022-01-01 00:00:02", "r1", "d", "d2"), ("2022-01-01 00:00:03", "r1", "d", "d3");
INSERT INTO t VALUES ("r1", "c:1", "c1"), ("r1", "c:2", "c2"), ("r1", "c:3", "c3");
INSERT INTO t VALUES ("r2", "c", "x"), ("r3", "c", "x"), ("r4", "c", "x"), ("r5", "c", "x");
# a keeps 3 versions, newest first; d is TIME_ORDER DESC: oldest first.
SELECT a, d FROM t DISPLAY_TIMESTAMPS;
SELECT a, d FROM t MAX_VERSIONS 1;
SELECT a FROM t REVS 2;
SELECT * FROM t LIMIT 2;
SELECT * FROM t OFFSET 3;
SELECT * FROM t LIMIT 1 OFFSET 2;
SELECT * FROM t CELL_LIMIT 4;
SELECT * FROM t CELL_OFFSET 8;
SELECT * FROM t CELL_LIMIT 2 CELL_OFFSET 5;
SELECT * FROM t WHERE ROW = "r1" CELL_LIMIT_PER_FAMILY 1;
SELECT * FROM t MAX_VERSIONS 1 LIMIT 2 CELL_LIMIT 3;
# Limits apply to each interval separately.
SELECT * FROM t WHERE (ROW = "r2" OR ROW >= "r3") LIMIT 1;
SELECT c FROM t WHERE ROW > "r1" LIMIT 2 OFFSET 1 KEYS_ONLY;
SELECT * FROM t OFFSET 1 CELL_OFFSET 1;
SELECT * FROM t WHERE ROW = "r2" NO_CACHE SCAN_AND_FILTER_ROWS;
SELECT * FROM t WHERE ROW = "r2" KEYS_ONLY FS="|";
SELECT c FROM t INTO FILE "$TMP/files/select.tsv";
SELECT a FROM t DISPLAY_TIMESTAMPS INTO FILE "file://$TMP/files/select_ts.tsv.gz";
SELECT c FROM t INTO FILE "$TMP/nodir/x.tsv";
# Issue 17: Hypertable's output forms. KEYS_ONLY prints the row once per cell; RETURN_DELETES
# prints a delete with an empty value and its kind; `f:*` is every qualifier of f; a row
# interval that starts after its end is a bad scan specification.
CREATE TABLE forms (a, b);
INSERT INTO forms VALUES ('r1', 'a', 'x'), ('r1', 'a:q', 'y'), ('r2', 'b', 'z'), ('r3', 'a', 'w'), ('r4', 'b:q', 'v');
SELECT * FROM forms KEYS_ONLY;
SELECT a:* FROM forms;
SELECT a:"*" FROM forms;
DELETE a FROM forms WHERE ROW = 'r1';
DELETE * FROM forms WHERE ROW = 'r2';
DELETE b:q FROM forms WHERE ROW = 'r4';
SELECT * FROM forms RETURN_DELETES;
SELECT * FROM forms WHERE ROW > 'r3' AND ROW < 'r1';
SELECT * FROM forms WHERE 'r3' < ROW < 'r1';
SELECT * FROM forms WHERE 'r3' < ROW < 'r3';
SELECT * FROM forms WHERE 'r3' <= ROW <= 'r3';
# Hypertable's timestamp spellings: a fraction of a second, `:N` nanoseconds, a bare date.
CREATE TABLE stamps (a);
INSERT INTO stamps VALUES ('2009-02-12 02:12:13.5', 'r', 'a', 'half'), ('2009-02-12 02:12:13:4', 'r', 'a', 'four ns'), ('2009-02-12', 'r', 'a', 'midnight'), ('2009-02-12 02:12:13.123456789123', 'r', 'a', 'truncated');
SELECT * FROM stamps DISPLAY_TIMESTAMPS;
SELECT * FROM stamps WHERE TIMESTAMP >= '2009-02-12 02:12:13.5';
INSERT INTO stamps VALUES ('2009-02-12 02:12:13.5:4', 'r', 'a', 'bad');
DELETE a FROM stamps WHERE ROW = 'r' TIMESTAMP 'noon';

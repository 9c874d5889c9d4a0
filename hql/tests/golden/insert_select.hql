# INSERT 3- and 4-tuples, escapes, and the output options.
CREATE TABLE t (a, b MAX_VERSIONS 5);
INSERT INTO t VALUES ("r1", "a", "plain"), ('r1', 'a:q1', 'single quoted');
INSERT INTO t VALUES ("2020-01-01 00:00:00", "r2", "b", "old"), ("2020-01-02 12:30:00.000000001", "r2", "b", "new");
INSERT INTO t VALUES ("2020-01-03 00:00:00", "esc\\ape", "a:q\tt", "line1\nline2\ttab\\back");
INSERT INTO t VALUES ("2020-01-03 00:00:00", "nul", "a", "x\0y");
SELECT * FROM t;
SELECT * FROM t NO_ESCAPE;
SELECT * FROM t KEYS_ONLY;
SELECT b FROM t DISPLAY_TIMESTAMPS;
SELECT b FROM t DISPLAY_TIMESTAMPS FS=',';
SELECT a:q1 FROM t;
SELECT a FROM t WHERE ROW = "r1";
SELECT CELLS * FROM t WHERE ROW = "r2";
INSERT INTO t VALUES ("r3", "nofamily", "x");
INSERT INTO t VALUES ("r3", "a", "x"), ("r3", "nofamily:q", "y");
SELECT * FROM t WHERE ROW = "r3";
INSERT INTO t VALUES ("not a time", "r3", "a", "x");
INSERT INTO t VALUES ("", "a", "x");
INSERT INTO missing VALUES ("r", "a", "x");
# GUID() makes a fresh id; check its shape, not its value.
INSERT INTO t VALUES ("g1", "a", GUID());
SELECT a FROM t WHERE ROW = "g1" AND VALUE REGEXP "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$" KEYS_ONLY;

# Every kind of delete.
CREATE TABLE t (a MAX_VERSIONS 5, b);
INSERT INTO t VALUES ("2023-01-01 00:00:01", "r1", "a:q", "q1"), ("2023-01-01 00:00:02", "r1", "a:q", "q2"), ("2023-01-01 00:00:03", "r1", "a:q", "q3"), ("2023-01-01 00:00:01", "r1", "a:p", "p1"), ("2023-01-01 00:00:01", "r1", "b", "b1");
INSERT INTO t VALUES ("2023-01-01 00:00:01", "r2", "a", "x"), ("2023-01-01 00:00:01", "r2", "b", "y"), ("2023-01-01 00:00:01", "r3", "a", "z");
SELECT * FROM t DISPLAY_TIMESTAMPS;
# VERSION: exactly one version.
DELETE a:q FROM t WHERE ROW = "r1" VERSION "2023-01-01 00:00:02";
SELECT a:q FROM t DISPLAY_TIMESTAMPS;
# TIMESTAMP: versions at or before.
DELETE a:q FROM t WHERE ROW = "r1" TIMESTAMP "2023-01-01 00:00:01";
SELECT a:q FROM t DISPLAY_TIMESTAMPS;
# A cell, a family, a row.
DELETE a:q FROM t WHERE ROW = "r1";
SELECT * FROM t WHERE ROW = "r1";
DELETE a FROM t WHERE ROW = "r1";
SELECT * FROM t WHERE ROW = "r1";
DELETE b, a FROM t WHERE ROW = "r2";
SELECT * FROM t WHERE ROW = "r2";
DELETE * FROM t WHERE ROW = "r3";
SELECT * FROM t;
# A row delete with a timestamp spares newer cells.
INSERT INTO t VALUES ("2023-01-01 00:00:05", "r4", "a", "old"), ("2023-01-01 00:00:09", "r4", "b", "new");
DELETE * FROM t WHERE ROW = "r4" TIMESTAMP "2023-01-01 00:00:06";
SELECT * FROM t WHERE ROW = "r4";
SELECT * FROM t WHERE ROW = "r4" RETURN_DELETES DISPLAY_TIMESTAMPS;
# Writing after a delete makes the cell visible again.
INSERT INTO t VALUES ("r3", "a", "back");
SELECT * FROM t WHERE ROW = "r3";
DELETE nofamily FROM t WHERE ROW = "r1";
DELETE * FROM missing WHERE ROW = "r1";
DELETE * FROM t WHERE ROW = "r1" VERSION "2023-01-01 00:00:01";

# Shell commands and administration statements.
print "hello from print";
print
help
help insert;
help dump table;
help nonsense;
clear;
pause 0.1;
CREATE TABLE t (a);
INSERT INTO t VALUES ("r", "a", "v");
COMPACT TABLE t;
COMPACT TYPE=MINOR TABLE t;
COMPACT TYPE=MERGING TABLE t "r";
COMPACT TYPE=GC TABLE t;
COMPACT RANGES USER;
WAIT FOR MAINTENANCE;
SELECT * FROM t;
BALANCE;
SET a = 1;
source $TMP/does-not-exist.hql;
# Semicolons and # inside strings do not end a statement.
INSERT INTO t VALUES ("r;1", "a", "x; # not a comment
y");
SELECT * FROM t WHERE ROW = "r;1"; # a comment after a statement
SELECT * FROM t INTO FILE "fs://x.tsv";
# A statement may span lines,
SELECT *
    FROM t
    WHERE ROW = "r";
# and one line may hold several.
SELECT * FROM t; EXISTS TABLE t;
SELCT * FROM t;
# As in Hypertable's shell, a failed statement drops the rest of its line: EXISTS does not run.
SELCT * FROM t; EXISTS TABLE t;
SELECT * FROM t WHERE ROW = "r" LIMT 1;
SELECT * FROM
t WHERE
ROW === "r";
INSERT INTO t VALUES ("r", "a");
quit
SELECT * FROM t;

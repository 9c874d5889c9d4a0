# DUMP TABLE in the 4-field format LOAD DATA INFILE reads back.
CREATE TABLE t (a MAX_VERSIONS 2, b, cnt COUNTER);
INSERT INTO t VALUES ("2025-01-01 00:00:01", "r1", "a", "one"), ("2025-01-01 00:00:02", "r1", "a", "two"), ("2025-01-01 00:00:01", "r1", "b:q", "tab\there"), ("2025-01-01 00:00:01", "r2", "b", "new\nline"), ("2025-01-01 00:00:03", "r2", "cnt", "4"), ("2025-01-01 00:00:04", "r2", "cnt", "3");
DUMP TABLE t;
DUMP TABLE t MAX_VERSIONS 1;
DUMP TABLE t COLUMNS a WHERE ROW = "r1";
DUMP TABLE t COLUMNS b, cnt NO_TIMESTAMPS;
DUMP TABLE t WHERE TIMESTAMP >= "2025-01-01 00:00:02" FS=',';
DUMP TABLE t INTO FILE "$TMP/files/dump.tsv";
DUMP TABLE t NO_TIMESTAMPS INTO FILE "$TMP/files/dump.tsv.gz";
DUMP TABLE missing;
DUMP TABLE t COLUMNS nofamily;
# Timestamps are dumped as integer nanoseconds; LOAD DATA reads them back exactly.
CREATE TABLE t2 (a MAX_VERSIONS 2, b, cnt COUNTER);
LOAD DATA INFILE "$TMP/files/dump.tsv" INTO TABLE t2;
SELECT * FROM t2 DISPLAY_TIMESTAMPS;

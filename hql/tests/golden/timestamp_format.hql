# --timestamp-format nanos
# The shell's --timestamp-format nanos (Hypertable's usecs): SELECT prints integer nanoseconds.
CREATE TABLE t (a, b);
INSERT INTO t VALUES ("2025-01-01 00:00:01.5", "r1", "a", "one"), ("1970-01-01 00:00:00:7", "r2", "b", "two");
SELECT * FROM t DISPLAY_TIMESTAMPS;
SELECT * FROM t WHERE TIMESTAMP < "2000-01-01" DISPLAY_TIMESTAMPS KEYS_ONLY;
SELECT * FROM t;

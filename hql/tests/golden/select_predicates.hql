# Row and cell intervals, OR-lists, prefixes, regexes, timestamp and value predicates.
CREATE TABLE t (a, b);
INSERT INTO t VALUES ("2021-01-01 00:00:01", "apple", "a", "1"), ("2021-01-01 00:00:02", "apricot", "a:x", "2"), ("2021-01-01 00:00:03", "banana", "b", "3"), ("2021-01-01 00:00:04", "blueberry", "a", "4"), ("2021-01-01 00:00:05", "cherry", "a:y", "5"), ("2021-01-01 00:00:06", "cherry", "b:z", "6"), ("2021-01-01 00:00:07", "date", "b", "seven");
SELECT * FROM t WHERE ROW = "banana";
SELECT * FROM t WHERE ROW > "banana";
SELECT * FROM t WHERE ROW >= "banana" AND ROW < "cherry";
SELECT * FROM t WHERE "apricot" < ROW <= "cherry";
SELECT * FROM t WHERE "b" <= ROW < "c";
SELECT * FROM t WHERE ROW =^ "ap";
SELECT * FROM t WHERE (ROW = "apple" OR ROW =^ "bl" OR ROW > "cherry");
SELECT * FROM t WHERE ROW REGEXP "rr";
SELECT * FROM t WHERE ROW > "z";
SELECT * FROM t WHERE ROW > "c" AND ROW < "b";
SELECT * FROM t WHERE CELL = "cherry", "b:z";
SELECT * FROM t WHERE CELL >= "cherry", "a";
SELECT * FROM t WHERE "apricot", "a:x" <= CELL < "cherry", "b";
SELECT * FROM t WHERE CELL =^ "cherry", "a";
SELECT * FROM t WHERE (CELL = "apple", "a" OR CELL = "date", "b");
# Each interval is its own scan, run in the order written (Hypertable's rule): out of order
# they come back as written, an overlap returns its cells again, LIMIT counts per interval.
SELECT * FROM t WHERE (ROW = "date" OR ROW = "apple");
SELECT * FROM t WHERE (ROW =^ "c" OR ROW >= "cherry");
SELECT * FROM t WHERE (ROW > "c" OR ROW < "b") LIMIT 1;
SELECT * FROM t WHERE (CELL = "date", "b" OR CELL = "apple", "a");
SELECT * FROM t WHERE TIMESTAMP > "2021-01-01 00:00:05" DISPLAY_TIMESTAMPS;
SELECT * FROM t WHERE TIMESTAMP <= "2021-01-01 00:00:02" DISPLAY_TIMESTAMPS;
SELECT * FROM t WHERE "2021-01-01 00:00:02" < TIMESTAMP < "2021-01-01 00:00:05" DISPLAY_TIMESTAMPS;
SELECT * FROM t WHERE TIMESTAMP = "2021-01-01 00:00:04" DISPLAY_TIMESTAMPS;
SELECT * FROM t WHERE VALUE REGEXP "^[0-9]$" AND ROW >= "c";
SELECT a:^x FROM t;
SELECT a:/^[xy]$/, b FROM t WHERE ROW = "cherry";
SELECT * FROM t WHERE b = "3";
SELECT * FROM t WHERE a =^ "4" OR b =~ /^s/;
SELECT a FROM t WHERE EXISTS(b:z);
SELECT a FROM t WHERE b:z = "6";
SELECT * FROM t WHERE a =^ "" OR b =^ "" LIMIT 2 OFFSET 1;
SELECT * FROM t WHERE a =^ "" OR b =^ "" CELL_LIMIT 3 KEYS_ONLY;
SELECT * FROM t WHERE REGEXP(a:y, "5");
# LIMIT, OFFSET and the cell limits count the rows and cells that the value predicates keep,
# per row interval (the range server filters before it counts).
SELECT * FROM t WHERE a =^ "" LIMIT 2;
SELECT * FROM t WHERE a =^ "" OFFSET 2;
SELECT * FROM t WHERE a =^ "" LIMIT 1 OFFSET 3;
SELECT * FROM t WHERE b = "3" OR a = "4" LIMIT 1 OFFSET 1;
SELECT * FROM t WHERE a =^ "" CELL_OFFSET 2 CELL_LIMIT 2;
SELECT * FROM t WHERE (ROW < "c" OR ROW >= "c") AND b =^ "" LIMIT 1;
SELECT * FROM t WHERE ROW > "b" AND a =^ "" OR b = "seven" LIMIT 2 KEYS_ONLY;
SELECT * FROM t WHERE ROW = "apple" AND CELL = "apple", "a";
SELECT * FROM t WHERE TIMESTAMP > "yesterday";
SELECT * FROM t WHERE ROW REGEXP "(";
SELECT nofamily FROM t;
SELECT * FROM t WHERE CELL = "apple", "nofamily";
# Hypertable's scan specification errors.
SELECT * FROM t WHERE "cherry","a" <= CELL <= "apple","a";
SELECT * FROM t WHERE "apple","b" <= CELL <= "apple","a";
SELECT * FROM t WHERE "apple","b" < CELL < "apple","b";
SELECT * FROM t WHERE "apple","a" <= CELL <= "apple","a";
SELECT * FROM t WHERE ROW > "a" AND ROW >= "b";
SELECT * FROM t WHERE ROW = "a" AND ROW < "b";
SELECT * FROM t WHERE ROW > "a" AND ROW < "c";
SELECT * FROM t WHERE "x" =^ ROW;
SELECT * FROM t WHERE ROW REGEXP "a" AND ROW REGEXP "b";
SELECT * FROM t WHERE VALUE REGEXP "a" AND VALUE REGEXP "b";
SELECT * FROM t WHERE TIMESTAMP > "2021-01-01" AND TIMESTAMP < "2022-01-01";
SELECT * FROM t WHERE TIMESTAMP > "2021-01-01" AND TIMESTAMP >= "2022-01-01";
SELECT * FROM t LIMIT 1 LIMIT 2;
SELECT * FROM t CELL_OFFSET 1 OFFSET 1;
SELECT * FROM t CELL_OFFSET 1 LIMIT 1;

# ROW IN: literal key sets and key files (one row per line, .gz too), ANDed with the other
# predicates; keys come back in row order, each once.
CREATE TABLE t (a, b);
INSERT INTO t VALUES ("apple", "a", "1"), ("apricot", "a:x", "2"), ("banana", "b", "3"), ("blueberry", "a", "4"), ("cherry", "a:y", "5"), ("cherry", "b:z", "6"), ("date", "b", "seven");
SELECT * FROM t WHERE ROW IN ("cherry", "apple", "nope", "apple");
SELECT * FROM t WHERE ROW IN ('banana');
SELECT a FROM t WHERE ROW IN ("apple", "cherry", "date");
SELECT * FROM t WHERE ROW IN ("apple", "banana", "cherry") AND ROW > "apple";
SELECT * FROM t WHERE ROW IN ("apple", "banana", "cherry") AND ROW IN ("cherry", "banana", "zebra");
SELECT * FROM t WHERE ROW IN ("apple", "cherry") AND b =^ "";
# Each key is a row interval, and LIMIT counts per interval, as for an OR-list of ROW = k.
SELECT * FROM t WHERE ROW IN ("apple", "cherry", "date") LIMIT 1;
SELECT * FROM t WHERE ROW IN FILE "$DATA/rows.txt";
SELECT * FROM t WHERE ROW IN FILE "$DATA/rows.txt.gz" KEYS_ONLY;
SELECT * FROM t WHERE ROW IN FILE "$DATA/rows.txt" AND ROW IN FILE "$DATA/rows.txt.gz";
# Bad key sets: the error names the file and line.
SELECT * FROM t WHERE ROW IN FILE "$DATA/rows_blank.txt";
SELECT * FROM t WHERE ROW IN FILE "$DATA/missing.txt";
SELECT * FROM t WHERE ROW IN ("");
SELECT * FROM t WHERE ROW IN ();

# Aggregates: COUNT(*), COUNT(f), SUM, AVG, MIN, MAX over the newest version of each cell the
# same SELECT returns, printed as one tab-separated line in the order of the select list.
CREATE TABLE t (attribid, val MAX_VERSIONS 3, d TIME_ORDER DESC, note);
INSERT INTO t VALUES ("o1 F1", "attribid", "A1"), ("o1 F1", "val", "10"), ("o2 F1", "attribid", "A2"), ("o2 F1", "val", "-2.5"), ("o3 F2", "attribid", "A1"), ("o3 F2", "val", "0.125"), ("o4 F2", "attribid", "A1"), ("o4 F2", "val", "n/a"), ("o5 F1", "note", "no val here");
SELECT COUNT(*) FROM t;
SELECT COUNT(*), COUNT(val), SUM(val), AVG(val), MIN(val), MAX(val) FROM t;
SELECT MAX(val), MIN(val), COUNT(*) FROM t;
# Only the columns named are read: rows without them are not counted by COUNT(*) alone...
SELECT COUNT(val), COUNT(attribid) FROM t;
# ... but COUNT(*) with them counts every row matched.
SELECT COUNT(*), COUNT(attribid) FROM t;
# Value predicates (run in the range server), row intervals, key sets, prefixes.
SELECT COUNT(*), SUM(val), AVG(val) FROM t WHERE attribid = "A1";
SELECT SUM(val) FROM t WHERE ROW >= "o2" AND ROW < "o4";
SELECT COUNT(*), SUM(val) FROM t WHERE ROW IN ("o1 F1", "o3 F2", "nope", "o1 F1");
SELECT COUNT(*), SUM(val) FROM t WHERE ROW IN FILE "$DATA/agg_rows.txt";
SELECT COUNT(*), SUM(val) FROM t WHERE ROW =^ "o3";
SELECT COUNT(*), SUM(val) FROM t WHERE ROW IN ("o1 F1", "o2 F1", "o3 F2") AND attribid = "A1";
# Empty results: counts are 0, the rest NULL.
SELECT COUNT(*), COUNT(val), SUM(val), AVG(val), MIN(val), MAX(val) FROM t WHERE ROW = "zzz";
SELECT COUNT(*), SUM(val) FROM t WHERE ROW > "b" AND ROW < "a";
SELECT SUM(note), AVG(note), COUNT(note) FROM t;
# Versions: only the newest of each cell counts; timestamps choose which versions are seen.
INSERT INTO t VALUES ("2022-01-01 00:00:01", "v", "val", "1"), ("2022-01-01 00:00:02", "v", "val", "2"), ("2022-01-01 00:00:03", "v", "val", "3");
SELECT val FROM t WHERE ROW = "v" DISPLAY_TIMESTAMPS;
SELECT COUNT(val), SUM(val) FROM t WHERE ROW = "v";
SELECT COUNT(val), SUM(val) FROM t WHERE ROW = "v" AND TIMESTAMP < "2022-01-01 00:00:03";
# TIME_ORDER DESC returns versions oldest first; the newest still counts.
INSERT INTO t VALUES ("2022-01-01 00:00:01", "v", "d", "100"), ("2022-01-01 00:00:02", "v", "d", "200");
SELECT d FROM t WHERE ROW = "v";
SELECT SUM(d), MAX(d) FROM t;
# Deletes: deleted cells are gone.
DELETE val FROM t WHERE ROW = "o1 F1";
SELECT COUNT(*), COUNT(val), SUM(val) FROM t WHERE ROW < "p";
# Decimal scales: sums keep the largest scale, MIN and MAX print as written (without plus
# signs or leading zeros), AVG rounds half to even at max(scale, 6) digits with trailing
# zeros left out.
CREATE TABLE n (x, q);
INSERT INTO n VALUES ("a", "x", "1.50"), ("b", "x", "+2.5"), ("c", "x", "-007"), ("d", "x", "0.000001"), ("e", "x", "1e3"), ("f", "x", " 4"), ("g", "x", "5."), ("h", "x", ".5"), ("i", "x", "");
SELECT COUNT(x), SUM(x), AVG(x), MIN(x), MAX(x) FROM n;
INSERT INTO n VALUES ("a", "q:one", "1"), ("a", "q:two", "2"), ("b", "q:one", "2"), ("c", "q:one", "2");
SELECT COUNT(q), SUM(q), AVG(q), SUM(q:one), AVG(q:one), MAX(q:two) FROM n;
SELECT AVG(q:one), COUNT(*) FROM n WHERE ROW < "c";
INSERT INTO n VALUES ("big", "q:big", "99999999999999999999.999999999999999999"), ("big", "q:small", "-0.000000000000000001");
SELECT SUM(q:big), MIN(q), MAX(q), AVG(q:small) FROM n;
INSERT INTO n VALUES ("big2", "q:big", "99999999999999999999.999999999999999999");
SELECT COUNT(q:big), MAX(q:big) FROM n;
SELECT SUM(q:big) FROM n;
SELECT AVG(q) FROM n;
INSERT INTO n VALUES ("tiny", "x", "0.0000000000000000001");
SELECT MAX(x) FROM n;
# Limits and offsets apply before aggregating, as to the plain SELECT (a cluster folds such
# scans on the client).
SELECT val FROM t LIMIT 2;
SELECT COUNT(*), COUNT(val), SUM(val) FROM t LIMIT 2;
SELECT COUNT(val), SUM(val) FROM t OFFSET 1;
SELECT COUNT(*), SUM(val) FROM t CELL_LIMIT 3;
SELECT COUNT(*), SUM(val) FROM t CELL_OFFSET 7 CELL_LIMIT 2;
SELECT COUNT(*), SUM(val) FROM t CELL_LIMIT_PER_FAMILY 1;
SELECT COUNT(*), SUM(val) FROM t WHERE ROW IN ("o2 F1", "o3 F2", "v") LIMIT 1;
# Names: case does not matter; a family may be called like a function.
CREATE TABLE c (count, sum);
INSERT INTO c VALUES ("r", "count", "3"), ("r", "sum", "4");
SELECT count, sum FROM c;
select count(count), Sum(sum), max(count) from c;
# Errors.
SELECT COUNT(*), val FROM t;
SELECT val, SUM(val) FROM t;
SELECT SUM(*) FROM t;
SELECT SUM(nope) FROM t;
SELECT COUNT(*) FROM t MAX_VERSIONS 2;
SELECT COUNT(*) FROM t REVS 1;
SELECT COUNT(*) FROM t KEYS_ONLY;
SELECT COUNT(*) FROM t RETURN_DELETES;
SELECT SUM(val) FROM t DISPLAY_TIMESTAMPS;
SELECT SUM(val) FROM t INTO FILE "$TMP/files/x.txt";
SELECT COUNT(*) FROM nope;

# Composite row keys (ht extension): ROW KEY declares Hypertable's text layout, fixed-width
# parts joined by a space; predicates name the parts; writes are checked.
CREATE TABLE o (attribid, val, ROW KEY (objectid UINT(3), fieldtype CHAR(2)));
SHOW CREATE TABLE o;
INSERT INTO o VALUES ("001 F1", "attribid", "A1"), ("001 F1", "val", "10"), ("001 F2", "attribid", "A2"), ("001 F2", "val", "11"), ("002 F1", "attribid", "A1"), ("002 F1", "val", "20"), ("005 F1", "attribid", "A3"), ("005 F1", "val", "50"), ("005 F2", "attribid", "A1"), ("005 F2", "val", "51");
INSERT INTO o VALUES ("009 F ", "val", "90"), ("010 F2", "val", "100"), ("012 F1", "val", "120");
# Rows that do not fit the layout are refused, and nothing of the statement is written.
INSERT INTO o VALUES ("011 F1", "val", "110"), ("11 F1", "val", "x");
INSERT INTO o VALUES ("0a1 F1", "val", "x");
INSERT INTO o VALUES ("009 F  ", "val", "x");
SELECT * FROM o WHERE objectid = 5;
SELECT * FROM o WHERE objectid IN (1, 5, 7) AND fieldtype = 'F1';
SELECT val FROM o WHERE objectid IN (5, 1) AND (fieldtype = 'F2' OR fieldtype = 'F1');
# A leading part left out: a skip scan over the second part.
SELECT * FROM o WHERE fieldtype = 'F2';
SELECT * FROM o WHERE fieldtype IN ('F', 'F2') AND objectid >= 5;
SELECT * FROM o WHERE objectid BETWEEN 2 AND 9;
SELECT * FROM o WHERE (objectid < 2 OR objectid > 9);
SELECT * FROM o WHERE (objectid < 2 OR fieldtype = 'F2');
SELECT * FROM o WHERE objectid > 1 AND objectid <= 5 AND ROW < "005";
SELECT * FROM o WHERE objectid IN FILE "$DATA/objectids.txt";
SELECT * FROM o WHERE objectid IN (1, 2, 5) AND attribid = "A1";
# Key parts count as one interval: LIMIT counts the rows of them all.
SELECT * FROM o WHERE objectid IN (1, 2, 5) LIMIT 2;
SELECT * FROM o WHERE fieldtype = 'F1' CELL_LIMIT 3;
SELECT * FROM o WHERE objectid IN (1, 2, 5) SCAN_AND_FILTER_ROWS;
SELECT * FROM o WHERE objectid BETWEEN 9 AND 1;
# Bad values name the part; bad key files name the file and line.
SELECT * FROM o WHERE objectid = 1000;
SELECT * FROM o WHERE fieldtype IN ('F12');
SELECT * FROM o WHERE objectid IN FILE "$DATA/objectids_bad.txt";
SELECT * FROM o WHERE color = 3;
# LOAD DATA builds rows from the fields named like the parts, and checks them.
CREATE TABLE l (attribid, val, ROW KEY (objectid UINT(3), fieldtype CHAR(2)));
LOAD DATA INFILE "$DATA/objects.tsv" INTO TABLE l;
SELECT * FROM l;
# Declarations are checked.
CREATE TABLE bad1 (val, ROW KEY (val UINT(3)));
CREATE TABLE bad2 (val, ROW KEY (a VARCHAR, b UINT(2)));
CREATE TABLE bad3 (val, ROW KEY (a UINT(20)));
CREATE TABLE bad4 (val, ROW KEY (a UINT(2)), ROW KEY (b UINT(2)));
ALTER TABLE o ADD (ROW KEY (x UINT(2)));
ALTER TABLE o ADD (fieldtype);
CREATE TABLE v (val, ROW KEY (region CHAR(2), name VARCHAR));
INSERT INTO v VALUES ("eu alice", "val", "1"), ("eu bob", "val", "2"), ("us carol", "val", "3"), ("us ", "val", "4");
SELECT * FROM v WHERE name >= 'b';
SELECT * FROM v WHERE region = 'us' AND name IN ('carol', '');
SHOW CREATE TABLE v;
# EXPLAIN shows the plan without running it.
EXPLAIN SELECT * FROM o WHERE objectid IN (1, 5, 7) AND fieldtype = 'F1';
# A key set of 8 rows or more has the blocks its rows start in asked for ahead.
EXPLAIN SELECT * FROM o WHERE objectid IN (1, 2, 3, 4, 5, 6, 7, 8) AND fieldtype = 'F1';
EXPLAIN SELECT val FROM o WHERE objectid IN (1, 5) AND attribid = "A1" LIMIT 1;
EXPLAIN SELECT * FROM o WHERE fieldtype = 'F2' AND objectid BETWEEN 2 AND 9;
EXPLAIN SELECT * FROM o WHERE objectid IN (1, 2) SCAN_AND_FILTER_ROWS;
EXPLAIN SELECT * FROM o WHERE objectid = 1 AND objectid = 2;
EXPLAIN SELECT * FROM o WHERE (ROW = "001 F1" OR ROW = "002 F1" OR ROW > "009") SCAN_AND_FILTER_ROWS;
SELECT * FROM o WHERE (ROW = "001 F1" OR ROW = "002 F1" OR ROW > "009") SCAN_AND_FILTER_ROWS;
EXPLAIN SELECT * FROM o;

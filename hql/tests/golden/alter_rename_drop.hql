# ALTER TABLE on a table with data; RENAME TABLE; DROP TABLE.
CREATE NAMESPACE other;
CREATE TABLE t (a MAX_VERSIONS 3, b);
INSERT INTO t VALUES ("2024-01-01 00:00:01", "r", "a", "1"), ("2024-01-01 00:00:02", "r", "a", "2"), ("2024-01-01 00:00:03", "r", "a", "3"), ("r", "b", "bee");
SELECT * FROM t;
ALTER TABLE t MODIFY (a MAX_VERSIONS 1);
SELECT * FROM t;
ALTER TABLE t ADD (c TTL 1 DAY, ACCESS GROUP g2 (d, e) IN_MEMORY);
INSERT INTO t VALUES ("r", "c", "see"), ("r", "e", "ee");
SELECT * FROM t;
ALTER TABLE t DROP (b);
SELECT * FROM t;
# A re-added family gets a new id: the dropped cells stay gone.
ALTER TABLE t ADD (b);
SELECT * FROM t;
ALTER TABLE t RENAME COLUMN FAMILY (c, sea);
SELECT sea FROM t;
SHOW CREATE TABLE t;
DESCRIBE TABLE WITH IDS t;
# A modified access group lists every live member (Hypertable's rule); the one here lists
# none, so nothing of the statement is applied.
ALTER TABLE t ADD (x) DROP (d) MODIFY (ACCESS GROUP g2 BLOCKSIZE 8192);
SHOW CREATE TABLE t;
ALTER TABLE t ADD (x) DROP (d) MODIFY (ACCESS GROUP g2 (e) BLOCKSIZE 8192);
SHOW CREATE TABLE t;
ALTER TABLE t ADD (a);
ALTER TABLE t DROP (nothere);
ALTER TABLE t MODIFY (nothere MAX_VERSIONS 2);
ALTER TABLE t RENAME COLUMN FAMILY (sea, a);
ALTER TABLE t MODIFY (a COUNTER);
ALTER TABLE missing ADD (z);
RENAME TABLE t TO other/t2;
GET LISTING;
USE other;
SELECT * FROM t2;
RENAME TABLE t2 TO /nons/t3;
CREATE TABLE t4 (a);
RENAME TABLE t2 TO t4;
DROP TABLE t2;
SELECT * FROM t2;
CREATE TABLE t2 (a);
SELECT * FROM t2;

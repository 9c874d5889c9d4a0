# TTL expiry and counters.
CREATE TABLE t (short TTL 1 SECOND, long TTL 1 HOUR, forever);
INSERT INTO t VALUES ("r", "short", "gone soon"), ("r", "long", "stays"), ("r", "forever", "stays");
SELECT * FROM t;
pause 1.5;
SELECT * FROM t;
CREATE TABLE c (hits COUNTER, n);
INSERT INTO c VALUES ("page1", "hits", "1"), ("page1", "hits", "1"), ("page1", "hits", "+5");
INSERT INTO c VALUES ("page1", "hits:mobile", "3"), ("page2", "hits", "10"), ("page2", "hits", "-4");
SELECT * FROM c;
INSERT INTO c VALUES ("page2", "hits", "=100");
INSERT INTO c VALUES ("page2", "hits", "1");
SELECT hits FROM c WHERE ROW = "page2";
INSERT INTO c VALUES ("page1", "hits", "lots");
COMPACT TABLE c;
SELECT * FROM c;

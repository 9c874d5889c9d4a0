# Combiner families (issue 14): counter, sum, max, min, string_set and uid_set, merged on read
# and by minor, merging and major compactions; APPEND_ONLY refuses deletes.
CREATE TABLE stats (hits COUNTER, total COMBINER sum, peak COMBINER max, low COMBINER min, tags COMBINER string_set(MAX = 100), docs COMBINER uid_set(MAX = 20) APPEND_ONLY);
SHOW CREATE TABLE stats;
INSERT INTO stats VALUES ("r1", "hits", "1"), ("r1", "hits", "+2"), ("r1", "total", "10"), ("r1", "total", "-3"), ("r1", "peak", "5"), ("r1", "peak", "12"), ("r1", "low", "5"), ("r1", "low", "-7"), ("r1", "tags", "red"), ("r1", "tags", "blue"), ("r1", "tags", "red"), ("r1", "docs", "d9"), ("r1", "docs", "d1");
SELECT * FROM stats;
# Versions with equal timestamps each count once: the sets count members inserted (uid_set)
# or distinct (string_set).
INSERT INTO stats VALUES ("2024-01-01 00:00:00", "r2", "hits", "1"), ("2024-01-01 00:00:00", "r2", "hits", "1"), ("2024-01-01 00:00:00", "r2", "total", "4"), ("2024-01-01 00:00:00", "r2", "total", "4"), ("2024-01-01 00:00:00", "r2", "docs", "d5"), ("2024-01-01 00:00:00", "r2", "docs", "d5"), ("2024-01-01 00:00:00", "r2", "tags", "x"), ("2024-01-01 00:00:00", "r2", "tags", "x");
SELECT * FROM stats WHERE ROW = "r2";
# Compactions in between change nothing that a read sees.
COMPACT TYPE=MINOR TABLE stats;
INSERT INTO stats VALUES ("r1", "total", "3"), ("r1", "docs", "d5"), ("r1", "hits", "=100"), ("r1", "peak", "7"), ("r1", "low", "-8");
SELECT * FROM stats WHERE ROW = "r1";
COMPACT TYPE=MINOR TABLE stats;
COMPACT TYPE=MERGING TABLE stats;
INSERT INTO stats VALUES ("r1", "hits", "5"), ("r1", "docs", "d1");
SELECT * FROM stats WHERE ROW = "r1";
COMPACT TABLE stats;
SELECT * FROM stats;
INSERT INTO stats VALUES ("r1", "total", "-10");
COMPACT TYPE=MINOR TABLE stats;
SELECT total FROM stats;
# Bad values are refused.
INSERT INTO stats VALUES ("r3", "total", "x");
INSERT INTO stats VALUES ("r3", "peak", "1.5");
SELECT * FROM stats WHERE ROW = "r3";
# Deletes of an APPEND_ONLY family's cells, and of rows of its table, are refused.
DELETE docs FROM stats WHERE ROW = "r1";
DELETE docs: FROM stats WHERE ROW = "r1";
DELETE * FROM stats WHERE ROW = "r1";
SELECT docs FROM stats;
# Past MAX members a set keeps only its count.
CREATE TABLE few (s COMBINER string_set(MAX = 2), u COMBINER uid_set(MAX = 2));
INSERT INTO few VALUES ("r", "s", "a"), ("r", "s", "b"), ("r", "s", "a"), ("r", "u", "x"), ("r", "u", "y");
SELECT * FROM few;
# (A major compaction first: past MAX a string_set cannot tell a repeated member from a new
# one, so its count is exact only for members added after the set was combined.)
COMPACT TABLE few;
INSERT INTO few VALUES ("r", "s", "c"), ("r", "u", "z");
SELECT * FROM few;
INSERT INTO few VALUES ("r", "u", "w");
SELECT * FROM few;
COMPACT TABLE few;
SELECT * FROM few;
DELETE u FROM few WHERE ROW = "r";
SELECT * FROM few;
DESCRIBE TABLE few;
# Combiner settings the schema or the registry refuses.
CREATE TABLE bad (a COUNTER COMBINER sum);
CREATE TABLE bad (a COMBINER sum MAX_VERSIONS 2);
CREATE TABLE bad (a COMBINER sum TIME_ORDER DESC);
CREATE TABLE bad (a COMBINER average);
CREATE TABLE bad (a COMBINER sum(ENCODING = 'roman'));
CREATE TABLE bad (a COMBINER uid_set(MAX = 'lots'));
CREATE TABLE bad (a COMBINER min(SIZE = 3));
EXISTS TABLE bad;

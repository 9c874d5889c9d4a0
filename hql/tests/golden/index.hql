# Secondary indexes (issue 17): INDEX f keeps a value index in ^t, QUALIFIER INDEX f a
# qualifier index in ^^t, beside t. Queries whose value predicates the indexes answer read only
# the rows the index names, and return exactly what a scan without the index returns.
CREATE TABLE Users (name, email MAX_VERSIONS 1, INDEX email, QUALIFIER INDEX name, visits COUNTER, plain);
GET LISTING;
INSERT INTO Users VALUES ('u1', 'email', 'a@b'), ('u1', 'name:first', 'Ann'), ('u2', 'email', 'c@d'), ('u2', 'name:last', 'Bo'), ('u3', 'email', 'a@bc'), ('u3', 'plain', 'x'), ('u4', 'name:first', 'Cy');
INSERT INTO Users VALUES ('u5', 'email', 'tab\there'), ('u5', 'name:odd\tq', 'z');
# Entries as Hypertable keeps them: family id, value, qualifier, row, TAB-separated, escaped.
SELECT * FROM "^Users";
SELECT * FROM "^^Users";
DESCRIBE TABLE "^Users";
SHOW CREATE TABLE "^^Users";
SELECT * FROM Users WHERE email = 'a@b';
SELECT * FROM Users WHERE email =^ 'a@';
SELECT email FROM Users WHERE email = 'c@d' OR email = 'a@bc';
SELECT * FROM Users WHERE EXISTS(name:first);
SELECT * FROM Users WHERE name:first = 'Ann';
SELECT * FROM Users WHERE email = 'nobody';
SELECT * FROM Users WHERE ROW > 'u1' AND email =^ 'a';
SELECT * FROM Users WHERE email =^ 'a' LIMIT 1;
SELECT * FROM Users WHERE email = 'a@b' KEYS_ONLY;
# An overwrite (MAX_VERSIONS 1) and a delete: the old entries go or no longer match.
INSERT INTO Users VALUES ('u1', 'email', 'new@b');
SELECT * FROM Users WHERE email = 'a@b';
SELECT * FROM Users WHERE email = 'new@b';
DELETE email FROM Users WHERE ROW = 'u3';
SELECT * FROM Users WHERE email =^ 'a';
SELECT * FROM "^Users";
DELETE * FROM Users WHERE ROW = 'u4';
SELECT * FROM "^^Users";
# A predicate the index cannot answer (a regex, an unindexed family) scans the table.
SELECT * FROM Users WHERE email =~ /^c/;
SELECT * FROM Users WHERE plain = 'x';
# REBUILD re-creates the index tables from the table's cells.
REBUILD INDICES Users;
SELECT * FROM "^Users";
REBUILD QUALIFIER INDICES Users;
SELECT * FROM "^^Users";
# An index added by ALTER is filled from the cells already there; one dropped goes.
ALTER TABLE Users ADD (INDEX plain);
SELECT * FROM Users WHERE plain = 'x';
ALTER TABLE Users DROP QUALIFIER INDEX (name);
GET LISTING;
SELECT * FROM Users WHERE EXISTS(name:first);
# Index tables follow RENAME and DROP, and cannot be made, altered or dropped by name.
RENAME TABLE Users TO People;
GET LISTING;
SELECT * FROM People WHERE email = 'new@b';
CREATE TABLE "^x" (a);
DROP TABLE "^People";
ALTER TABLE "^People" ADD (b);
CREATE TABLE c (n COUNTER, INDEX n);
DROP TABLE People;
GET LISTING;

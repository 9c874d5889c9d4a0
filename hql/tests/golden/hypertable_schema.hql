# SHOW CREATE TABLE, DESCRIBE TABLE and ALTER TABLE as Hypertable 0.9.8.11 prints and runs
# them (../shared/HYPERTABLE-FORMATS.md, sections 1, 2 and 5): options set at any level are
# printed, defaults merged in; names quoted unless letters and digits; groups in clause order,
# `default` after them; family ids group by group; a blank line after each.
CREATE TABLE Users (name, email MAX_VERSIONS 1, INDEX email, QUALIFIER INDEX name, visits COUNTER);
SHOW CREATE TABLE Users;
DESCRIBE TABLE WITH IDS Users;
CREATE TABLE web_pages (title TTL 2 days, body, ACCESS GROUP content (body) COMPRESSOR "ZLIB --best" BLOCKSIZE 65536 MAX_VERSIONS 3, ACCESS GROUP meta (title) IN_MEMORY) GROUP_COMMIT_INTERVAL 100 REPLICATION 2 TIME_ORDER desc;
SHOW CREATE TABLE web_pages;
DESCRIBE TABLE web_pages;
CREATE TABLE "2x" ('a-b' TTL 90 MINUTES, c, ACCESS GROUP "hot data" ());
SHOW CREATE TABLE "2x";
# Family ids follow the groups: b (group g) is 1, a (default, after g) is 2, so a row's
# cells of b come first.
CREATE TABLE order_test (a, b, ACCESS GROUP g (b));
INSERT INTO order_test VALUES ('r', 'a', 'from a'), ('r', 'b', 'from b');
SELECT * FROM order_test;
DESCRIBE TABLE WITH IDS order_test;
# ALTER: DROP, RENAME and DROP INDEX act clause by clause; ADD and MODIFY at the end. MODIFY
# starts the family afresh (visits is dropped, email keeps its index but not MAX_VERSIONS 1).
ALTER TABLE Users ADD (age) DROP (visits) RENAME COLUMN FAMILY (name, full_name) MODIFY (email MAX_VERSIONS 5);
SHOW CREATE TABLE Users;
DESCRIBE TABLE WITH IDS Users;
ALTER TABLE Users MODIFY (email);
SHOW CREATE TABLE Users;
# A freed name may be added again in the same statement: a new family, a new id.
INSERT INTO Users VALUES ('u1', 'age', '41');
ALTER TABLE Users DROP (age) ADD (age MAX_VERSIONS 2);
SELECT * FROM Users;
DESCRIBE TABLE WITH IDS Users;
# A modified group starts afresh and moves to the end.
ALTER TABLE web_pages MODIFY (ACCESS GROUP content (body) BLOCKSIZE 4096);
SHOW CREATE TABLE web_pages;
# What ALTER refuses, with Hypertable's messages; nothing of such a statement is applied.
ALTER TABLE web_pages MODIFY (ACCESS GROUP content (body) IN_MEMORY);
ALTER TABLE web_pages MODIFY (ACCESS GROUP content (body) COMPRESSOR "none");
ALTER TABLE web_pages MODIFY (ACCESS GROUP meta (title), ACCESS GROUP meta (title));
ALTER TABLE web_pages MODIFY (ACCESS GROUP meta (title, body));
ALTER TABLE web_pages MODIFY (ACCESS GROUP meta (title, title));
ALTER TABLE web_pages MODIFY (ACCESS GROUP nothere (title));
ALTER TABLE web_pages MODIFY (title TIME_ORDER asc);
ALTER TABLE web_pages ADD (ACCESS GROUP meta (x));
ALTER TABLE web_pages DROP (nothere);
ALTER TABLE Users DROP (visits);
ALTER TABLE Users RENAME COLUMN FAMILY (nothere, x);
ALTER TABLE Users DROP INDEX (nothere);
ALTER TABLE Users ADD (INDEX email);
ALTER TABLE Users MODIFY (INDEX email);
ALTER TABLE Users ADD (x) DROP (nothere);
SHOW CREATE TABLE Users;
# An ALTER that changes nothing succeeds.
ALTER TABLE Users DROP INDEX (age);
# An index set on an existing family by MODIFY, and one on a family renamed in the same
# statement: both are set once, where the clause is read.
ALTER TABLE Users MODIFY (QUALIFIER INDEX email);
ALTER TABLE Users RENAME COLUMN FAMILY (age, years) ADD (INDEX years);
SHOW CREATE TABLE Users;
ALTER TABLE web_pages MODIFY (title TIME_ORDER desc TTL 172800);

# LOAD DATA INFILE: every option, on files under tests/golden/data/.
CREATE TABLE s (a, b);
LOAD DATA INFILE "$DATA/single.tsv" INTO TABLE s;
SELECT * FROM s;
# Timestamps and a delete in the 4- and 5-field single-cell format.
LOAD DATA INFILE "$DATA/single_ts.tsv" INTO TABLE s;
SELECT * FROM s WHERE ROW > "r1";
SELECT a FROM s WHERE ROW = "r1" AND TIMESTAMP < "2025-01-01 00:00:00" DISPLAY_TIMESTAMPS;
# No header: SINGLE_CELL_FORMAT takes the first line as data.
LOAD DATA INFILE SINGLE_CELL_FORMAT "$DATA/noheader.tsv" INTO TABLE s;
SELECT * FROM s WHERE ROW =^ "n";
# Escapes are undone unless NO_ESCAPE.
LOAD DATA INFILE "$DATA/escapes.tsv" INTO TABLE s;
LOAD DATA INFILE NO_ESCAPE "$DATA/escapes.tsv" INTO TABLE s;
SELECT a FROM s WHERE ROW = "e1";
# Another field separator.
LOAD DATA INFILE FS=',' "$DATA/fs.csv" INTO TABLE s;
SELECT * FROM s WHERE ROW =^ "c";
# Multi-cell format: the header names the columns, the first field is the row.
CREATE TABLE q (query, item, click_url);
LOAD DATA INFILE "$DATA/multi.tsv" INTO TABLE q;
SELECT * FROM q;
# HEADER_FILE gives the header; every line of the data file is data.
LOAD DATA INFILE HEADER_FILE="$DATA/header.txt" "$DATA/body.tsv" INTO TABLE q;
SELECT query FROM q WHERE ROW = "1234";
# ROW_KEY_COLUMN with widths and joins, TIMESTAMP_COLUMN, DUPLICATE_KEY_COLUMNS.
CREATE TABLE k (name, query);
LOAD DATA INFILE ROW_KEY_COLUMN="%05id"+name TIMESTAMP_COLUMN=when "$DATA/keys.tsv" INTO TABLE k;
SELECT * FROM k DISPLAY_TIMESTAMPS;
CREATE TABLE k2 (id, name, when, query);
LOAD DATA INFILE ROW_KEY_COLUMN="%-6name"+%3id DUPLICATE_KEY_COLUMNS "$DATA/keys.tsv" INTO TABLE k2;
SELECT * FROM k2 WHERE ROW =^ " " KEYS_ONLY;
SELECT id, name, query FROM k2;
# Unknown columns fail, unless IGNORE_UNKNOWN_COLUMNS.
LOAD DATA INFILE "$DATA/unknown.tsv" INTO TABLE q;
LOAD DATA INFILE IGNORE_UNKNOWN_COLUMNS "$DATA/unknown.tsv" INTO TABLE q;
SELECT * FROM q WHERE ROW = "u1";
# A bad line stops the load and says what was loaded before it.
CREATE TABLE bad (a);
LOAD DATA INFILE "$DATA/bad.tsv" INTO TABLE bad;
SELECT * FROM bad;
LOAD DATA INFILE "$DATA/missing.tsv" INTO TABLE bad;
LOAD DATA INFILE "$DATA/single.tsv" INTO TABLE nosuchtable;
# DUMP TABLE, then LOAD DATA INFILE of the dump (gzip) gives an identical table.
DUMP TABLE q INTO FILE "$TMP/q.tsv.gz";
CREATE TABLE q2 (query, item, click_url);
LOAD DATA INFILE "$TMP/q.tsv.gz" INTO TABLE q2;
DUMP TABLE q2 NO_TIMESTAMPS;
DUMP TABLE q NO_TIMESTAMPS;
# INTO FILE converts without a table.
LOAD DATA INFILE ROW_KEY_COLUMN=id TIMESTAMP_COLUMN=when "$DATA/keys.tsv" INTO FILE "$TMP/files/converted.tsv";
# NO_LOG loads all the same.
CREATE TABLE nolog (a, b);
LOAD DATA INFILE NO_LOG "$DATA/single.tsv" INTO TABLE nolog;
SELECT * FROM nolog;
# Hypertable's bare DELETE flag: no column deletes the row, a column its family, or with
# timestamps leading, the cell.
CREATE TABLE bare (a, b);
LOAD DATA INFILE "$DATA/bare_delete.tsv" INTO TABLE bare;
SELECT * FROM bare;
LOAD DATA INFILE "$DATA/bare_delete_ts.tsv" INTO TABLE bare;
SELECT * FROM bare;

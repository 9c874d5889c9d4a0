# --skip-bad-lines: LOAD DATA INFILE counts, reports and skips bad lines (ht's addition).
CREATE TABLE bad (a);
LOAD DATA INFILE "$DATA/bad.tsv" INTO TABLE bad;
SELECT * FROM bad;

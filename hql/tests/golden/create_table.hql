# CREATE TABLE with every option, SHOW CREATE TABLE and DESCRIBE TABLE.
CREATE TABLE plain (a, b, c);
SHOW CREATE TABLE plain;
CREATE TABLE opts (
  v MAX_VERSIONS 3 TTL 2 HOURS,
  w REVS = 1 TIME_ORDER DESC,
  cnt COUNTER,
  x TTL = 90 SECONDS,
  INDEX v,
  QUALIFIER INDEX w,
  ACCESS GROUP hot (v, w) IN_MEMORY BLOCKSIZE 4096 REPLICATION 2 BLOOMFILTER "rows+cols --false-positive 0.02",
  ACCESS GROUP cold (x) COMPRESSOR "none" TTL 1 WEEK,
  ACCESS GROUP empty ()
) GROUP_COMMIT_INTERVAL 100 DURABILITY log;
SHOW CREATE TABLE opts;
DESCRIBE TABLE opts;
DESCRIBE TABLE WITH IDS opts;
# Table-wide defaults reach every family; group defaults reach the group's families.
CREATE TABLE defaults (
  a,
  b MAX_VERSIONS 1,
  ACCESS GROUP g (c, d) MAX_VERSIONS 2 COMPRESSOR "snappy"
) MAX_VERSIONS 5 TTL 3 DAYS IN_MEMORY;
SHOW CREATE TABLE defaults;
CREATE TABLE copy LIKE opts;
SHOW CREATE TABLE copy;
CREATE TABLE IF NOT EXISTS plain (zzz);
SHOW CREATE TABLE plain;
CREATE TABLE plain (a);
CREATE TABLE dup (a, a);
CREATE TABLE twogroups (a, ACCESS GROUP x (a), ACCESS GROUP y (a));
CREATE TABLE badctr (a COUNTER MAX_VERSIONS 2);
CREATE TABLE badctr2 (a COUNTER TIME_ORDER DESC);
CREATE TABLE badctr3 (a MAX_VERSIONS 2 COUNTER true);
CREATE TABLE badctr4 (a TIME_ORDER desc, b COUNTER false MAX_VERSIONS 3);
CREATE TABLE badctr5 (a COUNTER) MAX_VERSIONS 2;
CREATE TABLE badctr6 (a MAX_VERSIONS 2) COUNTER true;
CREATE TABLE twice (cf1 TIME_ORDER ASC TIME_ORDER DESC);
CREATE TABLE badindex (a, INDEX b);
CREATE TABLE dupgroup (a, ACCESS GROUP g (a), ACCESS GROUP g ());
CREATE TABLE nons/t (a);
SHOW CREATE TABLE missing;
CREATE TABLE presplit (a) SPLIT ON ('g', 'p');
INSERT INTO presplit VALUES ('a', 'a', '1'), ('h', 'a', '2'), ('q', 'a', '3'), ('p', 'a', '4'), ('g', 'a', '5');
SELECT * FROM presplit;
SELECT * FROM presplit WHERE ROW >= 'g' AND ROW < 'q';
SHOW CREATE TABLE presplit;
CREATE TABLE badsplit (a) SPLIT ON ('p', 'g');
CREATE TABLE badsplit (a) SPLIT ON ('g', 'g');
CREATE TABLE badsplit (a) SPLIT ON ('');
GET LISTING;

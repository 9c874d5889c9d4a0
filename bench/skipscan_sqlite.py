#!/usr/bin/env python3
"""SQLite's side of `ht bench skipscan` (python3's built-in sqlite3).

  skipscan_sqlite.py load  DB CACHE_BYTES TSV    load objectid\tfieldtype\tattribid\tval rows
  skipscan_sqlite.py query DB CACHE_BYTES KEYS   one query in this fresh process (cold runs)
  skipscan_sqlite.py serve DB CACHE_BYTES        read key-file paths on stdin, one query each
                                                 (warm runs: the page cache stays hot)

A query prints `COUNT AVG MS`: the time covers filling the temporary key table and the SELECT,
not reading the key file.
"""

import sys
import time
import sqlite3

BATCH = 100_000


def connect(db, cache_bytes):
    con = sqlite3.connect(db, isolation_level=None)
    # A negative cache_size is in KiB: as large as ht's block cache.
    con.execute(f"PRAGMA cache_size = -{max(1, int(cache_bytes) // 1024)}")
    return con


def load(db, cache_bytes, tsv):
    con = connect(db, cache_bytes)
    con.execute("PRAGMA journal_mode = OFF")
    con.execute("PRAGMA synchronous = OFF")
    con.execute(
        "CREATE TABLE t (objectid INTEGER, fieldtype TEXT, attribid TEXT, val INTEGER, "
        "PRIMARY KEY (objectid, fieldtype)) WITHOUT ROWID"
    )
    start = time.perf_counter()
    n = 0
    batch = []
    with open(tsv) as f:
        for line in f:
            o, ft, a, v = line.rstrip("\n").split("\t")
            batch.append((int(o), ft, a, int(v)))
            if len(batch) >= BATCH:
                con.execute("BEGIN")
                con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", batch)
                con.execute("COMMIT")
                n += len(batch)
                batch = []
    if batch:
        con.execute("BEGIN")
        con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", batch)
        con.execute("COMMIT")
        n += len(batch)
    con.close()
    print(f"loaded {n} rows in {time.perf_counter() - start:.1f}s")


def read_keys(path):
    with open(path) as f:
        return [(int(line),) for line in f if line.strip()]


def query(con, keys):
    start = time.perf_counter()
    con.execute("DROP TABLE IF EXISTS temp.keys")
    con.execute("CREATE TEMP TABLE keys (id INTEGER)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO temp.keys VALUES (?)", keys)
    con.execute("COMMIT")
    count, avg = con.execute(
        "SELECT COUNT(*), AVG(val) FROM t WHERE objectid IN (SELECT id FROM keys) "
        "AND fieldtype = 'F1' AND attribid = 'A1'"
    ).fetchone()
    ms = (time.perf_counter() - start) * 1e3
    avg = "NULL" if avg is None else repr(float(avg))
    return f"{count} {avg} {ms:.3f}"


def main():
    verb, db, cache_bytes = sys.argv[1], sys.argv[2], sys.argv[3]
    if verb == "load":
        load(db, cache_bytes, sys.argv[4])
    elif verb == "query":
        con = connect(db, cache_bytes)
        keys = read_keys(sys.argv[4])
        print(query(con, keys), flush=True)
    elif verb == "serve":
        con = connect(db, cache_bytes)
        for line in sys.stdin:
            path = line.strip()
            if path == "quit":
                break
            print(query(con, read_keys(path)), flush=True)
    else:
        sys.exit(f"unknown verb {verb!r}")


if __name__ == "__main__":
    main()

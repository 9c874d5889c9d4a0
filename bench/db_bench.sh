#!/usr/bin/env bash
# The RocksDB side of `ht bench engine`: the five workloads of ../shared/bench/rocksdb-baseline.sh
# with its flags (8-byte keys, 16-byte values, lz4, one thread, batches of 1000, the write-ahead log
# on), plus `overwrite` and `readwhilewriting` on the fillrandom database, point reads capped at
# READS, and RocksDB's own statistics for the write amplification of that database: bytes written
# to the write-ahead log, by flushes and by compactions, per byte of user data.
# Usage: bench/db_bench.sh NUM READS WORK_DIR
# Prints "<workload> <ops_per_sec>" lines and "write_amplification <x>".
set -euo pipefail
num=$1
reads=$2
work=$3
mkdir -p "$work"
if ! command -v db_bench >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rocksdb-tools) >/dev/null
fi
db="$work/rocksdb"
common=(--num="$num" --key_size=8 --value_size=16 --compression_type=lz4 --threads=1 --db="$db"
  --batch_size=1000)
run() { # $1: label suffix, $2: output file; rest: db_bench flags
  local suffix=$1 out=$2
  shift 2
  db_bench "$@" "${common[@]}" 2>&1 | tr '\r' '\n' >"$out"
  awk -v s="$suffix" '/ ops\/sec/ && $2 == ":" {print $1 s, $5}' "$out"
}
rm -rf "$db"
# readseq reads --reads entries: a full scan needs reads = num.
run "" "$work/a1" --benchmarks=fillrandom,readseq --reads="$num" --sync=0 --statistics
run "" "$work/a2" --benchmarks=readrandom,overwrite,readwhilewriting --use_existing_db=1 \
  --reads="$reads" --sync=0 --statistics
awk '$1 == "rocksdb.bytes.written" {u += $4}
  $1 == "rocksdb.wal.bytes" || $1 == "rocksdb.flush.write.bytes" || $1 == "rocksdb.compact.write.bytes" {w += $4}
  END {if (u > 0) printf "write_amplification %.3f\n", w / u}' "$work/a1" "$work/a2"
rm -rf "$db"
run "" "$work/b" --benchmarks=fillseq --sync=0
rm -rf "$db"
run "_sync" "$work/c" --benchmarks=fillrandom --sync=1
rm -rf "$db"

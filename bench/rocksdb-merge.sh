#!/usr/bin/env bash
# RocksDB's db_bench (Debian package rocksdb-tools) on the workloads `ht bench iterators` runs
# with a `sum` combiner family: MERGES uint64add merges of 8-byte values to random keys of
# 0..KEYS (mergerandom), then READS point reads of random keys of the merged values
# (readrandom), in one invocation on one database, as ht reads right after its increments.
# 8-byte keys, lz4, one thread, the write-ahead log on without fsync per write (ht's
# durability=flush). db_bench's mergerandom issues one Merge() per operation: --batch_size
# does not apply to it (ht writes batches of 1000; see bench/RESULTS.md).
# Usage: rocksdb-merge.sh [KEYS] [MERGES] [READS] [WORK_DIR]
# Prints one line per workload: "<workload> <ops_per_sec>".
set -euo pipefail
keys=${1:-10000}
merges=${2:-10000000}
reads=${3:-100000}
work=${4:-$(mktemp -d)}
mkdir -p "$work"
if ! command -v db_bench >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rocksdb-tools) >/dev/null
fi
db="$work/rocksdb-merge"
rm -rf "$db"
# --num: the key space (and readrandom's); --merge_keys: the keys mergerandom draws from;
# --writes: how many merges (mergerandom runs max(writes, reads) operations).
db_bench --benchmarks=mergerandom,readrandom --merge_operator=uint64add \
  --num="$keys" --merge_keys="$keys" --writes="$merges" --reads="$reads" \
  --key_size=8 --value_size=8 --batch_size=1000 --sync=0 --disable_wal=0 \
  --compression_type=lz4 --threads=1 --db="$db" 2>&1 |
  tr '\r' '\n' | awk '/ ops\/sec/ && $2 == ":" {print $1, $5}'
rm -rf "$db"

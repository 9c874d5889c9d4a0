#!/usr/bin/env bash
# Rewrites the seed corpora (fuzz/corpus/<target>/seed-*) with real files made by the code
# itself (the test seeds_are_real_files in ht/tests/fuzz_corpus.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
HT_FUZZ_WRITE_SEEDS=1 cargo nextest run -p ht --test fuzz_corpus seeds_are_real_files
du -sh fuzz/corpus

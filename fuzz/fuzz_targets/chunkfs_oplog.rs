//! Fuzz target `chunkfs_oplog`: see `ht_fuzz::chunkfs_oplog` (fuzz/src/targets.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ht_fuzz::chunkfs_oplog(data));

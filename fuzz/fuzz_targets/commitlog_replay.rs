//! Fuzz target `commitlog_replay`: see `ht_fuzz::commitlog_replay` (fuzz/src/targets.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ht_fuzz::commitlog_replay(data));

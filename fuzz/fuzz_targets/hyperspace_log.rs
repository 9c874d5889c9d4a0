//! Fuzz target `hyperspace_log`: see `ht_fuzz::hyperspace_log` (fuzz/src/targets.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ht_fuzz::hyperspace_log(data));

//! Fuzz target `hyperspace_state`: see `ht_fuzz::hyperspace_state` (fuzz/src/targets.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ht_fuzz::hyperspace_state(data));

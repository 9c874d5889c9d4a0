//! Fuzz target `set_value`: see `ht_fuzz::set_value` (fuzz/src/targets.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ht_fuzz::set_value(data));

//! Fuzz target `metalog_read`: see `ht_fuzz::metalog_read` (fuzz/src/targets.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ht_fuzz::metalog_read(data));

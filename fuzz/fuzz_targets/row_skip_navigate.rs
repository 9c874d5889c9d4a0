//! Fuzz target `row_skip_navigate`: see `ht_fuzz::row_skip_navigate` (fuzz/src/targets.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ht_fuzz::row_skip_navigate(data));

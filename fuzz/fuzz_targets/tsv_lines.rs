//! Fuzz target `tsv_lines`: see `ht_fuzz::tsv_lines` (fuzz/src/targets.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ht_fuzz::tsv_lines(data));

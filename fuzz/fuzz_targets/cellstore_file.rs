//! Fuzz target `cellstore_file`: see `ht_fuzz::cellstore_file` (fuzz/src/targets.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ht_fuzz::cellstore_file(data));

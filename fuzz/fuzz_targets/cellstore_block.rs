//! Fuzz target `cellstore_block`: see `ht_fuzz::cellstore_block` (fuzz/src/targets.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ht_fuzz::cellstore_block(data));

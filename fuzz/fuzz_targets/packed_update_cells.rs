//! Fuzz target `packed_update_cells`: see `ht_fuzz::packed_update_cells` (fuzz/src/targets.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ht_fuzz::packed_update_cells(data));

//! Fuzz target `packed_scan_cells`: see `ht_fuzz::packed_scan_cells` (fuzz/src/targets.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ht_fuzz::packed_scan_cells(data));

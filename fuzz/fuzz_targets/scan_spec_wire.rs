//! Fuzz target `scan_spec_wire`: see `ht_fuzz::scan_spec_wire` (fuzz/src/targets.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ht_fuzz::scan_spec_wire(data));

//! Fuzz target `objstore_manifest`: see `ht_fuzz::objstore_manifest` (fuzz/src/targets.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ht_fuzz::objstore_manifest(data));

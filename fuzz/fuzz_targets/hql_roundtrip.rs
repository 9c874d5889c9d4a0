//! Fuzz target `hql_roundtrip`: see `ht_fuzz::hql_roundtrip` (fuzz/src/targets.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ht_fuzz::hql_roundtrip(data));

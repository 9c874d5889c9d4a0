//! Fuzz target `rpc_frame`: see `ht_fuzz::rpc_frame` (fuzz/src/targets.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ht_fuzz::rpc_frame(data));

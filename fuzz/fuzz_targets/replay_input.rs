#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| slidelog_fuzz::replay_input(data));

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| slidelog_fuzz::serve_json(data));

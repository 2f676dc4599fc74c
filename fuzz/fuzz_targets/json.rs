#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| autoloader::fuzzing::fuzz_json(data));

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| autoloader::testing::fuzzing::fuzz_checkpoint(data));

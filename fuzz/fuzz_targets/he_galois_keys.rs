#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| secinfer_fuzz::he_galois_keys(data));

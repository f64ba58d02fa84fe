#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| secinfer_fuzz::choco_hello(data));

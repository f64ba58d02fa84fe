#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| secinfer_fuzz::ot_iknp_sender(data));

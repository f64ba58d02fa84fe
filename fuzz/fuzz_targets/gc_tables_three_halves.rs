#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| secinfer_fuzz::gc_tables_three_halves(data));

#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| secinfer_fuzz::handshake_and_server_session(data));

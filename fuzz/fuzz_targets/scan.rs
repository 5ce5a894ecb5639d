//! The reader, the fold and the lifecycle on arbitrary bytes (see `dshs_fuzz::scan_target`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dshs_fuzz::scan_target(data));

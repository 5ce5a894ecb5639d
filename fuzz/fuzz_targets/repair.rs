//! Repair planning on arbitrary logs (see `dshs_fuzz::repair_target`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dshs_fuzz::repair_target(data));

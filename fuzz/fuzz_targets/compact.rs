//! Compaction planning on arbitrary logs (see `dshs_fuzz::compact_target`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dshs_fuzz::compact_target(data));

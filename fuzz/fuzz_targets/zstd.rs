//! The Zstandard reader, the scan and repair on zstd logs (see `dshs_fuzz::zstd_target`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| dshs_fuzz::zstd_target(data));

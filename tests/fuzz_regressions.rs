//! Every input the fuzzers ever crashed on (`testdata/fuzz/`, one file each, named for the
//! bug) replayed through the fuzz targets' own checks (`fuzz/src/lib.rs`), under
//! `cargo test`: a fixed bug stays fixed without cargo-fuzz or a nightly toolchain.

#[path = "../fuzz/src/lib.rs"]
mod fuzz;

use std::path::Path;

#[test]
fn saved_fuzz_inputs_pass_every_target() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/fuzz");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("testdata/fuzz exists") {
        let path = entry.expect("readable directory").path();
        if path.extension().is_none_or(|e| e != "bin") {
            continue;
        }
        let data = std::fs::read(&path).expect("readable input");
        for (target, run) in [
            ("scan", fuzz::scan_target as fn(&[u8])),
            ("repair", fuzz::repair_target),
            ("zstd", fuzz::zstd_target),
            ("compact", fuzz::compact_target),
        ] {
            let outcome = std::panic::catch_unwind(|| run(&data));
            assert!(outcome.is_ok(), "{target} fails on {}", path.display());
        }
        n += 1;
    }
    assert!(n > 0, "no saved inputs found in {}", dir.display());
}

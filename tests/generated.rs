//! Logs from the benchmark generator are valid in every format version: a broad end-to-end
//! check of the fold (appends, tool calls, prunes, nested compactions, packed rows, ranges).

#[path = "../benches/gen/mod.rs"]
mod generator;

mod common;

use dshs::log::scan::Status;

#[test]
fn generated_logs_validate_cleanly_in_every_version() {
    for version in 0..=4u8 {
        for seed in [1u64, 7, 99] {
            let mut buf = Vec::new();
            let mut g = generator::Generator::new(&mut buf, version, seed);
            g.run(400_000).expect("generate");
            let text = String::from_utf8(buf).expect("generator writes UTF-8");
            let (scan, findings) = common::scan_text(&text);
            assert_eq!(
                scan.status(),
                Status::Valid,
                "v{version} seed {seed}: {findings:#?}"
            );
            assert!(findings.is_empty(), "v{version} seed {seed}: {findings:#?}");
            let state = scan.state.expect("folded");
            assert!(
                state.surface.replace_generation() > 0,
                "v{version}: no replacement exercised"
            );
        }
    }
}

#[test]
fn pathological_logs_are_valid_with_replacements_spread_over_the_surface() {
    for version in [0u8, 3, 4] {
        let mut buf = Vec::new();
        let mut g = generator::Generator::new(&mut buf, version, 5);
        g.pathological(3_000, 300).expect("generate");
        let text = String::from_utf8(buf).expect("generator writes UTF-8");
        let (scan, findings) = common::scan_text(&text);
        assert_eq!(scan.status(), Status::Valid, "v{version}: {findings:#?}");
        assert!(findings.is_empty(), "v{version}: {findings:#?}");
        let state = scan.state.expect("folded");
        assert!(state.surface.len() >= 3_000, "v{version}");
        // Every prune is one replacement (v3+ may also replace the system prompt).
        assert!(
            state.surface.replace_generation() >= 300,
            "v{version}: {} replacements",
            state.surface.replace_generation()
        );
    }
}

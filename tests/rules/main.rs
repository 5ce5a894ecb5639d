//! Rule-by-rule tests of the core checks that are not the surface fold, per format version:
//! header (§4), vocabulary (§7), payloads (§9, §10), lifecycle (§13), compaction (§15.4),
//! v0 legacy shapes (§16), and a catalogue test that every finding code is produced by some
//! minimal log (the table in `catalogue.rs` doubles as documentation).
//!
//! Each negative test starts from a log that is clean under the same version (see
//! `baseline_logs_are_clean`) and changes one thing, so it fails when the check is removed.

mod build;
mod catalogue;
#[path = "../common/mod.rs"]
mod common;
mod compaction;
mod header;
mod legacy;
mod lifecycle;
mod payload;
mod vocab;

use build::Log;

#[test]
fn baseline_logs_are_clean_in_every_version() {
    for v in 0..=4 {
        let mut log = Log::new(v);
        log.user("hello");
        log.tool_turn(1, "c1");
        log.tool_turn(2, "c2");
        log.scan().assert_clean();
    }
}

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
mod sqlite;
#[path = "../../benches/store/mod.rs"]
mod store;
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

/// §21.6: the status is decided in DSH's order of checks, whatever else is found.
#[test]
fn status_follows_dshs_order_of_checks() {
    use dshs::log::Status;
    let unknown = |l: &mut Log| {
        l.ev("acme/new", "{}", "");
    };
    // (3) a header shape error outranks (4) an unknown required type.
    let mut log = Log::with_header(3, &build::header_with(3, r#","extra":1"#));
    unknown(&mut log);
    let r = log.scan();
    assert_eq!(r.codes(), ["header-unexpected-field", "unknown-event-type"]);
    assert_eq!(r.status(), Status::Invalid);
    // (3) fatal physical damage outranks (4) too.
    let mut log = Log::new(3);
    log.junk("not json");
    unknown(&mut log);
    log.turn_start(1);
    log.turn_end(1);
    let r = log.scan();
    assert_eq!(r.codes(), ["committed-unparsable", "unknown-event-type"]);
    assert_eq!(r.status(), Status::Invalid);
    // (4) an unknown required type outranks (5) every other error.
    let mut log = Log::new(3);
    log.turn_start(2);
    log.ev("user/message", r#"{"role":"user"}"#, build::APPEND);
    unknown(&mut log);
    let r = log.scan();
    assert_eq!(
        r.codes(),
        [
            "turn-number-unexpected",
            "message-id-missing",
            "unknown-event-type",
            "open-turn-at-end"
        ]
    );
    assert_eq!(r.status(), Status::Unsupported);
    // (5) any other error; (6) warnings alone are valid.
    let mut log = Log::new(3);
    log.turn_start(2);
    assert_eq!(log.scan().status(), Status::Invalid);
    let mut log = Log::new(3);
    log.turn_start(1);
    assert_eq!(log.scan().status(), Status::Valid);
}

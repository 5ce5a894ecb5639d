//! §4 header rules, per version, through the whole pass.

use dshs::log::{Severity, Status};

use crate::build::{Log, header, header_with, run_file, run_text};
use dshs::log::vocab::KnownTypes;

fn scan_header(line: &str) -> crate::build::Run {
    // A garbage row after the header shows that nothing after a refused header is read.
    run_text(
        &format!("{line}\n{{\"not\":\"an event\"}}\n"),
        &KnownTypes::default(),
    )
}

fn scan_header_only(line: &str) -> crate::build::Run {
    run_text(&format!("{line}\n"), &KnownTypes::default())
}

#[test]
fn version_refusal_comes_before_every_other_header_and_row_rule() {
    // Every other field is broken too: only the version is reported.
    for version in [
        "5",
        "17",
        "1e3",
        "-1",
        "-3",
        "3.5",
        "0.5",
        "4.000001",
        "9007199254740993",
    ] {
        let line = format!(
            r#"{{"type":"nope","version":{version},"id":3,"createdAt":-1,"cwd":"rel","sandboxMode":"x","seedLength":"a","extra":1}}"#
        );
        let r = scan_header(&line);
        assert_eq!(
            r.codes(),
            ["format-version-unsupported"],
            "version {version}"
        );
        assert_eq!(r.status(), Status::Unsupported, "version {version}");
        assert_eq!(r.scan.events(), 0);
    }
    // The reported version: the integer for integers, none for fractions.
    assert_eq!(scan_header(r#"{"version":7}"#).scan.version, Some(7));
    assert_eq!(scan_header(r#"{"version":-1}"#).scan.version, Some(-1));
    assert_eq!(scan_header(r#"{"version":2.5}"#).scan.version, None);
}

#[test]
fn version_spelling_does_not_matter() {
    // `4.0` and `4e0` are the safe integer 4 (§0.2).
    for spelled in ["4.0", "4e0", "0.4e1"] {
        let line = header(4).replace(r#""version":4"#, &format!(r#""version":{spelled}"#));
        let r = scan_header_only(&line);
        r.assert_clean();
        assert_eq!(r.scan.version, Some(4), "{spelled}");
    }
}

#[test]
fn missing_or_non_numeric_version_is_a_header_error_not_a_refusal() {
    let no_version = r#"{"type":"session","id":"s1","createdAt":1,"delegationDepth":0}"#;
    for line in [
        no_version.to_owned(),
        header(3).replace(r#""version":3"#, r#""version":"3""#),
        header(3).replace(r#""version":3"#, r#""version":null"#),
        header(3).replace(r#""version":3"#, r#""version":true"#),
        header(3).replace(r#""version":3"#, r#""version":[3]"#),
        "[1,2]".to_owned(),
        r#""session""#.to_owned(),
    ] {
        let r = scan_header(&line);
        assert_eq!(r.codes(), ["header-field-invalid"], "{line}");
        assert_eq!(r.status(), Status::Invalid, "{line}");
        assert_eq!(r.scan.version, None);
    }
    let r = scan_header("{\"type\":\"session\"");
    assert_eq!(r.codes(), ["header-not-json"]);
    let r = scan_header(&format!("\u{feff}{}", header(3)));
    assert_eq!(r.codes(), ["header-not-json"]);
    assert!(r.findings[0].message.contains("byte-order mark"));
}

#[test]
fn valid_headers_with_every_optional_field() {
    for v in 0..=4u8 {
        let seed = if v <= 1 { r#","seedLength":0"# } else { "" };
        let line = header_with(
            v,
            &format!(
                r#","cwd":"/work/p","parentSession":"p0","origin":"subagent","agentPreset":"coder"{seed}"#
            ),
        );
        scan_header_only(&line).assert_clean();
    }
}

/// Replace or add one member of a valid header.
fn with_member(v: u8, key: &str, value: Option<&str>) -> String {
    let mut members: Vec<(String, String)> = vec![
        ("type".into(), r#""session""#.into()),
        ("version".into(), v.to_string()),
        ("id".into(), r#""s1""#.into()),
        ("createdAt".into(), "1".into()),
        ("delegationDepth".into(), "0".into()),
    ];
    if v >= 2 {
        members.push(("isSeeded".into(), "false".into()));
    }
    members.retain(|(k, _)| k != key);
    if let Some(value) = value {
        members.push((key.to_owned(), value.to_owned()));
    }
    let body: Vec<String> = members
        .iter()
        .map(|(k, v)| format!("\"{k}\":{v}"))
        .collect();
    format!("{{{}}}", body.join(","))
}

#[test]
fn each_field_rule_in_every_version() {
    let invalid: &[(&str, Option<&str>)] = &[
        ("type", None),
        ("type", Some(r#""Session""#)),
        ("type", Some("1")),
        ("id", None),
        ("id", Some("7")),
        ("id", Some("null")),
        ("createdAt", None),
        ("createdAt", Some("-1")),
        ("createdAt", Some("-0")),
        ("createdAt", Some("1.5")),
        ("createdAt", Some(r#""1""#)),
        ("createdAt", Some("9007199254740992")),
        ("delegationDepth", None),
        ("delegationDepth", Some("-1")),
        ("delegationDepth", Some("-0")),
        ("delegationDepth", Some("0.5")),
        ("delegationDepth", Some("true")),
        ("origin", Some(r#""user""#)),
        ("origin", Some("null")),
        ("agentPreset", Some("3")),
        ("parentSession", Some("{}")),
    ];
    for v in 0..=4u8 {
        for (key, value) in invalid {
            let r = scan_header_only(&with_member(v, key, *value));
            assert_eq!(r.codes(), ["header-field-invalid"], "v{v} {key}={value:?}");
            assert_eq!(r.status(), Status::Invalid);
            assert!(
                r.findings[0].message.contains(key),
                "{}",
                r.findings[0].message
            );
        }
        // Spelling of a number does not matter.
        scan_header_only(&with_member(v, "createdAt", Some("1e3"))).assert_clean();
        scan_header_only(&with_member(v, "delegationDepth", Some("2.0"))).assert_clean();
    }
}

#[test]
fn cwd_must_be_an_absolute_posix_or_windows_path() {
    for v in 0..=4u8 {
        for ok in [
            r#""/""#,
            r#""/home/me""#,
            r#""C:\\Users\\me""#,
            r#""d:/work""#,
            r#""\\\\server\\share""#,
        ] {
            scan_header_only(&with_member(v, "cwd", Some(ok))).assert_clean();
        }
        for bad in [
            r#""rel/dir""#,
            r#""""#,
            r#""C:""#,
            r#""C:rel""#,
            r#""~/x""#,
            r#""\\single""#,
            "3",
            "null",
        ] {
            let r = scan_header_only(&with_member(v, "cwd", Some(bad)));
            assert_eq!(r.codes(), ["header-cwd-not-absolute"], "v{v} cwd {bad}");
            assert_eq!(r.status(), Status::Invalid);
        }
    }
}

#[test]
fn unknown_header_key_is_a_warning_in_v0_and_an_error_from_v1() {
    for v in 0..=4u8 {
        let r = scan_header_only(&with_member(v, "model", Some(r#""x""#)));
        assert_eq!(r.codes(), ["header-unexpected-field"], "v{v}");
        let (severity, status) = if v == 0 {
            (Severity::Warning, Status::Valid)
        } else {
            (Severity::Error, Status::Invalid)
        };
        assert_eq!(r.findings[0].severity, severity, "v{v}");
        assert_eq!(r.status(), status, "v{v}");
    }
}

#[test]
fn retired_policy_fields_are_refused_in_every_version() {
    for v in 0..=4u8 {
        for key in ["sandboxMode", "approvalPolicy"] {
            let r = scan_header_only(&with_member(v, key, Some(r#""never""#)));
            // Reported as retired, not (also) as an unexpected key.
            assert_eq!(r.codes(), ["header-retired-field"], "v{v} {key}");
            assert_eq!(r.findings[0].severity, Severity::Error);
            assert_eq!(r.status(), Status::Invalid);
        }
    }
}

#[test]
fn seed_field_is_seed_length_in_v0_v1_and_is_seeded_from_v2() {
    for v in 0..=1u8 {
        scan_header_only(&with_member(v, "seedLength", Some("0"))).assert_clean();
        for bad in ["-1", "1.5", r#""2""#, "true"] {
            let r = scan_header_only(&with_member(v, "seedLength", Some(bad)));
            assert_eq!(r.codes(), ["header-field-invalid"], "v{v} seedLength {bad}");
        }
        // isSeeded is not a v0/v1 field: an unexpected key (v0 warning, v1 error).
        let r = scan_header_only(&with_member(v, "isSeeded", Some("false")));
        assert_eq!(r.codes(), ["header-unexpected-field"], "v{v}");
        assert_eq!(
            r.findings[0].severity,
            if v == 0 {
                Severity::Warning
            } else {
                Severity::Error
            }
        );
    }
    for v in 2..=4u8 {
        // seedLength is named as the v0/v1 field, once, as an error.
        let r = scan_header_only(&with_member(v, "seedLength", Some("0")));
        assert_eq!(r.codes(), ["header-seed-field"], "v{v}");
        assert!(r.findings[0].message.contains("isSeeded"));
        assert_eq!(r.status(), Status::Invalid);
        // isSeeded is required and boolean.
        let r = scan_header_only(&with_member(v, "isSeeded", None));
        assert_eq!(r.codes(), ["header-field-invalid"], "v{v}");
        assert!(r.findings[0].message.contains("isSeeded"));
        for bad in ["0", r#""false""#, "null"] {
            let r = scan_header_only(&with_member(v, "isSeeded", Some(bad)));
            assert_eq!(r.codes(), ["header-field-invalid"], "v{v} isSeeded {bad}");
        }
    }
}

#[test]
fn every_broken_field_is_reported_not_only_the_first() {
    let line = r#"{"type":"x","version":3,"id":1,"createdAt":-1,"delegationDepth":-1,"isSeeded":1,"cwd":"rel","extra":1}"#;
    let r = scan_header_only(line);
    let mut codes = r.codes();
    codes.sort_unstable();
    assert_eq!(
        codes,
        [
            "header-cwd-not-absolute",
            "header-field-invalid",
            "header-field-invalid",
            "header-field-invalid",
            "header-field-invalid",
            "header-field-invalid",
            "header-unexpected-field",
        ]
    );
}

#[test]
fn header_errors_do_not_stop_event_checks() {
    // A header shape error still lets the events be checked (all findings are listed).
    let mut log = Log::with_header(3, &with_member(3, "extra", Some("1")));
    log.turn_start(2);
    let r = log.scan();
    assert_eq!(
        r.codes(),
        [
            "header-unexpected-field",
            "turn-number-unexpected",
            "open-turn-at-end"
        ]
    );
    assert_eq!(r.status(), Status::Invalid);
}

// --- §4.3 inherited cut ------------------------------------------------------------------

#[test]
fn seed_length_may_not_exceed_the_committed_events() {
    for v in 0..=1u8 {
        let make = |len: u64| {
            let mut log =
                Log::with_header(v, &with_member(v, "seedLength", Some(&len.to_string())));
            log.user("a");
            log.user("b");
            log
        };
        make(2).scan().assert_clean();
        make(0).scan().assert_clean();
        let r = make(3).scan();
        assert_eq!(r.codes(), ["seed-length-exceeds-events"], "v{v}");
        assert_eq!(r.status(), Status::Invalid);
        // Only committed events count: a torn final line is not an event.
        let mut text = make(3).text();
        text.push_str(r#"{"type":"user/message","seq":2"#);
        let r = run_text(&text, &KnownTypes::default());
        assert_eq!(
            r.codes(),
            ["torn-line", "seed-length-exceeds-events"],
            "v{v}"
        );
    }
}

fn seeded(v: u8, is_seeded: bool) -> Log {
    Log::with_header(v, &with_member(v, "isSeeded", Some(&is_seeded.to_string())))
}

#[test]
fn is_seeded_must_match_an_inherited_end_seed_marker() {
    for v in 2..=4u8 {
        // Seeded with a marker; unseeded without one; a plain resume marker is not inherited.
        let mut ok = seeded(v, true);
        ok.user("inherited");
        ok.ev("session/end-seed", r#"{"inherited":true}"#, "");
        ok.scan().assert_clean();
        let mut ok = seeded(v, false);
        ok.user("a");
        ok.ev("session/end-seed", "{}", "");
        ok.scan().assert_clean();

        // isSeeded:true without any inherited marker.
        let mut log = seeded(v, true);
        log.user("a");
        log.ev("session/end-seed", "{}", "");
        let r = log.scan();
        assert_eq!(r.codes(), ["seed-marker-mismatch"], "v{v}");
        assert!(r.findings[0].message.contains("lacks"));
        assert_eq!(r.status(), Status::Invalid);

        // isSeeded:false with one.
        let mut log = seeded(v, false);
        log.user("a");
        let marker = log.ev("session/end-seed", r#"{"inherited":true}"#, "");
        let r = log.scan();
        assert_eq!(r.codes(), ["seed-marker-mismatch"], "v{v}");
        assert_eq!(r.findings[0].seq, Some(marker));
        assert!(r.findings[0].message.contains("unseeded"));
    }
}

#[test]
fn the_inherited_count_comes_from_the_last_inherited_marker() {
    for v in 2..=4u8 {
        let mut log = seeded(v, true);
        log.user("a");
        log.ev("session/end-seed", r#"{"inherited":true}"#, "");
        log.user("b");
        let last = log.ev("session/end-seed", r#"{"inherited":true}"#, "");
        log.ev("session/end-seed", "{}", "");
        let r = log.scan();
        r.assert_clean();
        let state = r.scan.state.as_ref().expect("folded");
        assert_eq!(state.inherited_marker, Some(last), "v{v}");

        // An unseeded log names the last inherited marker when it complains.
        let mut log = seeded(v, false);
        log.ev("session/end-seed", r#"{"inherited":true}"#, "");
        let last = log.ev("session/end-seed", r#"{"inherited":true}"#, "");
        let r = log.scan();
        assert_eq!(r.codes(), ["seed-marker-mismatch"]);
        assert_eq!(r.findings[0].seq, Some(last));
    }
}

#[test]
fn seed_rules_do_not_cross_versions() {
    // v0/v1 have no marker rule; v2+ have no count rule.
    for v in 0..=1u8 {
        let mut log = Log::new(v);
        log.ev("session/end-seed", r#"{"inherited":true}"#, "");
        log.scan().assert_clean();
    }
}

// --- §2.1/§2.2 file name and directory layout --------------------------------------------

fn layout_header(v: u8, id: &str, cwd: Option<&str>) -> String {
    let cwd = cwd.map_or_else(String::new, |c| {
        format!(r#","cwd":{}"#, crate::build::js(c))
    });
    header_with(v, &cwd).replace(r#""id":"s1""#, &format!(r#""id":{}"#, crate::build::js(id)))
        + "\n"
}

#[test]
fn generation_name_must_agree_with_the_header_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    for v in 0..=4u8 {
        let text = layout_header(v, "s1", None);
        let own = if v == 0 {
            "session.jsonl".to_owned()
        } else {
            format!("session.v{v}.jsonl")
        };
        run_file(dir.path(), &format!("ok{v}/{own}"), &text).assert_clean();
        let other = if v == 0 {
            "session.v3.jsonl"
        } else {
            "session.jsonl"
        };
        let r = run_file(dir.path(), &format!("bad{v}/{other}"), &text);
        assert_eq!(r.codes(), ["generation-name-mismatch"], "v{v} as {other}");
        assert_eq!(r.findings[0].severity, Severity::Warning);
        assert_eq!(r.status(), Status::Valid);
    }
    // Names that are not canonical generation names are hints of nothing: no check.
    let text = layout_header(3, "s1", None);
    for name in [
        "session.v0.jsonl",
        "session.v03.jsonl",
        "Session.v4.jsonl",
        "copy.jsonl",
        "session.v4.jsonl.tmp",
    ] {
        run_file(dir.path(), &format!("free/{name}"), &text).assert_clean();
    }
}

#[test]
fn header_id_and_cwd_must_match_a_dsh_shaped_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    // <project>/<encoded id>/session.vN.jsonl, as DSH lays it out.
    let text = layout_header(3, "ses 1/x", Some("/home/me/proj"));
    run_file(
        root,
        "--home-me-proj--/ses~00201~002Fx/session.v3.jsonl",
        &text,
    )
    .assert_clean();
    let no_cwd = layout_header(4, "s1", None);
    run_file(root, "_no-cwd/s1/session.v4.jsonl", &no_cwd).assert_clean();

    // The session directory does not encode the id.
    let r = run_file(root, "--home-me-proj--/other/session.v3.jsonl", &text);
    assert_eq!(r.codes(), ["header-id-path-mismatch"]);
    assert!(
        r.findings[0].message.contains("ses~00201~002Fx"),
        "{}",
        r.findings[0].message
    );
    assert_eq!(
        (r.findings[0].severity, r.status()),
        (Severity::Warning, Status::Valid)
    );
    // The project directory does not come from the cwd.
    let r = run_file(
        root,
        "--elsewhere--/ses~00201~002Fx/session.v3.jsonl",
        &text,
    );
    assert_eq!(r.codes(), ["header-id-path-mismatch"]);
    assert!(r.findings[0].message.contains("--home-me-proj--"));
    // A header without cwd belongs under _no-cwd, and one with a cwd does not.
    let r = run_file(root, "--x--/s1/session.v4.jsonl", &no_cwd);
    assert_eq!(r.codes(), ["header-id-path-mismatch"]);
    let r = run_file(root, "_no-cwd/ses~00201~002Fx/session.v3.jsonl", &text);
    assert_eq!(r.codes(), ["header-id-path-mismatch"]);

    // Paths without DSH's shape are never compared.
    run_file(root, "plain/dir/session.v3.jsonl", &text).assert_clean();
    run_file(root, "----/other/session.v3.jsonl", &text).assert_clean();
    run_file(root, "--home-me-proj--/other/notes.jsonl", &text).assert_clean();
}

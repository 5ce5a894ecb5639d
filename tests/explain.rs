//! `dshs explain [CODE]` (CLI.md "validate"): lists every code of the catalogue, explains
//! one code with its meaning and fix, refuses an unknown code with exit 2.

mod common;

use common::dshs;
use dshs::log::codes::CATALOGUE;
use predicates::prelude::*;

fn stdout_of(args: &[&str]) -> String {
    let out = dshs().args(args).assert().success();
    String::from_utf8(out.get_output().stdout.clone()).expect("utf-8 output")
}

#[test]
fn the_list_names_every_code_of_the_catalogue() {
    let listed = stdout_of(&["explain"]);
    for info in CATALOGUE {
        // Whole names, not prefixes: each code is followed by padding or a cell border.
        let found = listed.lines().any(|l| {
            l.split(|c: char| c.is_whitespace() || c == '│' || c == '┆')
                .any(|cell| cell == info.name)
        });
        assert!(found, "`dshs explain` does not list {}", info.name);
    }
    assert!(listed.contains("dshs explain CODE"));
}

#[test]
fn every_code_is_explained_with_its_rule_meaning_and_fix() {
    for info in CATALOGUE {
        let text = stdout_of(&["explain", info.name]);
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(info.name), "{text}");
        assert!(text.contains(&info.rule()), "{text}");
        assert!(text.contains(info.meaning), "{}: {text}", info.name);
        assert!(text.contains(info.fix), "{}: {text}", info.name);
        assert!(text.contains("What it means:") && text.contains("How to fix it:"));
    }
}

#[test]
fn the_severity_rule_is_spelled_out() {
    assert!(
        stdout_of(&["explain", "turn-end-mismatch"]).contains("warning in v0–v2, error in v3+")
    );
    assert!(
        stdout_of(&["explain", "header-unexpected-field"]).contains("warning in v0, error in v1+")
    );
    assert!(stdout_of(&["explain", "unknown-event-type"]).contains("unsupported (error, exit 3)"));
    assert!(stdout_of(&["explain", "torn-line"]).contains("severity: warning"));
    // Codes that stop DSH from loading say that surface/derive refuse the log.
    assert!(
        stdout_of(&["explain", "replace-range-reversed"]).contains("`surface` and `derive` refuse")
    );
    assert!(!stdout_of(&["explain", "turn-end-mismatch"]).contains("refuse"));
}

#[test]
fn an_unknown_code_is_a_usage_error_with_suggestions() {
    dshs()
        .args(["explain", "no-such-code"])
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::starts_with(
            "dshs: error: unknown finding code `no-such-code`",
        ));
    dshs()
        .args(["explain", "replace-start"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "did you mean replace-start-not-on-surface",
        ));
    // Untrusted input is escaped in the message.
    let out = dshs().args(["explain", "x\u{1b}[2Jy"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

#[test]
fn explain_is_coloured_only_when_asked() {
    let plain = stdout_of(&["explain", "torn-line"]);
    assert!(!plain.contains('\u{1b}'));
    let coloured = stdout_of(&["--color", "always", "explain", "torn-line"]);
    assert!(coloured.contains('\u{1b}'));
}

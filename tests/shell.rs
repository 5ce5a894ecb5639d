//! Shell integration: the man page (drift, sections), help texts, `--quiet`, colour choices
//! across every command, and a closed pipe on a big log. Completions: tests/completions.rs.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{dshs, testdata};

const V3: &str =
    r#"{"type":"session","version":3,"id":"s","createdAt":1,"delegationDepth":0,"isSeeded":false}"#;

fn turn_rows(seq0: u64, turn: u64) -> String {
    format!(
        "{{\"type\":\"turn/start\",\"seq\":{seq0},\"time\":0,\"data\":{{\"turn\":{turn}}}}}\n{{\"type\":\"turn/end\",\"seq\":{},\"time\":0,\"data\":{{\"turn\":{turn},\"reason\":{{\"kind\":\"completed\"}}}}}}\n",
        seq0 + 1
    )
}

/// Fatal damage in the committed part: surface/derive refuse it, everything exits 1.
fn corrupt_log() -> String {
    format!("{V3}\n{}not json\n{}", turn_rows(0, 1), turn_rows(3, 2))
}

/// An unknown required event type: exit 3.
fn unsupported_log() -> String {
    format!(
        "{V3}\n{}\n",
        r#"{"type":"acme/new","seq":0,"time":0,"data":{}}"#
    )
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

// --- man page ---------------------------------------------------------------------------------

#[test]
fn committed_man_page_matches_the_cli() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("doc/dshs.1");
    let committed = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let out = dshs().arg("man").assert().success();
    assert!(
        out.get_output().stdout == committed,
        "doc/dshs.1 is out of date; run scripts/gen-shell.sh"
    );
}

#[test]
fn man_page_has_every_command_exit_status_and_examples() {
    let out = dshs().arg("man").assert().success();
    let page = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(page.starts_with(".ie") || page.starts_with(".TH"), "roff");
    assert!(page.contains("\n.TH DSHS 1 \"\" \"dshs "));
    assert!(page.is_ascii(), "non-ASCII is escaped for roff");
    for section in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "OPTIONS",
        "COMMANDS",
        "EXAMPLES",
        "ENVIRONMENT",
    ] {
        assert!(page.contains(&format!("\n.SH {section}\n")), "no {section}");
    }
    assert!(page.contains("\n.SH \"EXIT STATUS\"\n"));
    for cmd in commands() {
        assert!(
            page.contains(&format!("\n.SS \"dshs {cmd}\"\n")),
            "no {cmd}"
        );
    }
    // The exit-status table: each code as a tagged paragraph, with its meaning.
    for (code, words) in [
        ("0", "success; for validate"),
        ("1", "the log is invalid or corrupt"),
        ("2", "usage error, unreadable file"),
        ("3", "a live writer holds the session"),
    ] {
        let at = page
            .find(&format!(".TP\n\\fB{code}\\fR\n"))
            .unwrap_or_else(|| panic!("no {code}"));
        assert!(page[at..].contains(words), "{code}: {words}");
    }
    assert!(page.contains("dshs repair \\-\\-dry\\-run session.jsonl"));
    // Global options are described once, not under every command.
    let commands =
        &page[page.find("\n.SH COMMANDS").unwrap()..page.find("\n.SH \"EXIT STATUS\"").unwrap()];
    assert!(!commands.contains("known\\-types") && !commands.contains("\\-\\-quiet"));
}

#[test]
fn man_page_renders_with_man_where_installed() {
    let Ok(probe) = Command::new("man").arg("--version").output() else {
        eprintln!("skipped: man is not installed");
        return;
    };
    if !probe.status.success() {
        eprintln!("skipped: man is not usable");
        return;
    }
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("doc/dshs.1");
    let out = Command::new("man")
        .arg("-l")
        .arg(&page)
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("MANWIDTH", "80")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("EXIT STATUS") && text.contains("dshs validate"),
        "{text}"
    );
    let warnings = String::from_utf8_lossy(&out.stderr);
    assert!(!warnings.contains("warning"), "{warnings}");
    // groff itself, warnings on, no preprocessor: the page is plain ASCII roff.
    if let Ok(out) = Command::new("groff")
        .args(["-man", "-ww", "-z"])
        .arg(&page)
        .output()
    {
        let warnings = String::from_utf8_lossy(&out.stderr);
        assert!(warnings.is_empty(), "{warnings}");
    }
}

// --- help -------------------------------------------------------------------------------------

/// Every command `dshs --help` lists (so a new command is covered by these tests as it lands).
fn commands() -> Vec<String> {
    let out = dshs().arg("--help").assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let list = text
        .split_once("Commands:\n")
        .expect("a command list")
        .1
        .split("\n\n")
        .next()
        .unwrap_or_default();
    let names: Vec<String> = list
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(String::from)
        .collect();
    for known in [
        "validate",
        "explain",
        "surface",
        "derive",
        "show",
        "stats",
        "repair",
        "completions",
        "man",
    ] {
        assert!(names.iter().any(|n| n == known), "{known} not in {names:?}");
    }
    names
}

#[test]
fn help_lists_every_exit_code_and_command() {
    for flag in ["-h", "--help"] {
        let out = dshs().arg(flag).assert().success();
        let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        assert!(text.contains("Exit status:"), "{flag}");
        for code in ["0", "1", "2", "3"] {
            assert!(
                text.contains(&format!("\n  {code}  ")),
                "{flag}: no exit code {code}"
            );
        }
        for cmd in [
            "validate",
            "explain",
            "surface",
            "derive",
            "show",
            "stats",
            "repair",
            "completions",
            "man",
        ] {
            assert!(text.contains(&format!("\n  {cmd} ")), "{flag}: no {cmd}");
        }
    }
    let long = dshs().arg("--help").assert().success();
    assert!(
        String::from_utf8_lossy(&long.get_output().stdout).contains("Examples:\n  dshs validate")
    );
}

/// The codes the examples explain exist.
#[test]
fn explain_examples_name_real_codes() {
    let mut seen = 0;
    for args in [&["--help"][..], &["help", "explain"]] {
        let out = dshs().args(args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        for (i, _) in text.match_indices("dshs explain ") {
            let word = text[i + "dshs explain ".len()..]
                .split_whitespace()
                .next()
                .unwrap_or_default();
            if word.is_empty() || word.starts_with(['#', '[']) || word.starts_with("CODE") {
                continue;
            }
            dshs().args(["explain", word]).assert().success();
            seen += 1;
        }
    }
    assert!(seen >= 2, "only {seen} examples checked");
}

#[test]
fn help_for_each_command_has_examples_and_exit_codes() {
    for cmd in &commands() {
        let cmd = cmd.as_str();
        let via_help = dshs().args(["help", cmd]).assert().success();
        let via_flag = dshs().args([cmd, "--help"]).assert().success();
        let text = String::from_utf8_lossy(&via_help.get_output().stdout).into_owned();
        assert_eq!(
            via_help.get_output().stdout,
            via_flag.get_output().stdout,
            "{cmd}"
        );
        assert!(text.contains(&format!("Usage: dshs {cmd}")), "{cmd}");
        assert!(
            text.contains(&format!("Examples:\n  dshs {cmd}")) || text.contains("Examples:\n  cat"),
            "{cmd}: {text}"
        );
        assert!(text.contains("Exit status"), "{cmd}");
        assert!(text.contains("\n  2  "), "{cmd}: usage errors exit 2");
        // The short help is shorter and still has the exit codes where they matter.
        let short = dshs().args([cmd, "-h"]).assert().success();
        assert!(
            short.get_output().stdout.len() < via_flag.get_output().stdout.len(),
            "{cmd}"
        );
    }
}

#[test]
fn every_argument_has_a_help_line() {
    // `dshs CMD -h` prints each argument with its one-line help: no bare names.
    for cmd in &commands() {
        let cmd = cmd.as_str();
        let out = dshs().args([cmd, "-h"]).assert().success();
        let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        let mut section = "";
        for line in text.lines() {
            if line.ends_with(':') && !line.starts_with(' ') {
                section = line;
                continue;
            }
            if matches!(section, "Options:" | "Arguments:")
                && line.starts_with("  ")
                && !line.starts_with("        ")
            {
                let words: Vec<&str> = line.split("  ").filter(|w| !w.trim().is_empty()).collect();
                assert!(words.len() >= 2, "{cmd}: no help for `{line}`");
            }
        }
    }
}

// --- --quiet ----------------------------------------------------------------------------------

#[test]
fn quiet_prints_nothing_for_every_command_and_keeps_the_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let valid = testdata("sample/session.v4.jsonl");
    let corrupt = write(dir.path(), "corrupt.jsonl", &corrupt_log());
    let unsupported = write(dir.path(), "unsupported.jsonl", &unsupported_log());
    let crashed_text = std::fs::read_to_string(testdata("sample/crashed.v3.jsonl")).unwrap();
    let crashed = write(dir.path(), "session.v3.jsonl", &crashed_text);
    let missing = dir.path().join("missing.jsonl");
    let compactable = write(
        dir.path(),
        "compactable.jsonl",
        &std::fs::read_to_string(&valid).unwrap(),
    );
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    let compact_args = |flags: &[&str], log: &Path| {
        let mut args = vec!["compact".to_owned(), "--summary".to_owned(), "x".to_owned()];
        args.extend(flags.iter().map(|f| f.to_string()));
        args.push(s(log));
        args
    };
    let cases: Vec<(Vec<String>, i32)> = vec![
        (vec!["validate".into(), s(&valid)], 0),
        (vec!["validate".into(), s(&corrupt)], 1),
        (
            vec![
                "validate".into(),
                "--format".into(),
                "json".into(),
                s(&corrupt),
            ],
            1,
        ),
        (vec!["validate".into(), s(&unsupported)], 3),
        (vec!["validate".into(), s(&missing)], 2),
        (vec!["surface".into(), s(&valid)], 0),
        (
            vec![
                "surface".into(),
                "--format".into(),
                "json".into(),
                s(&corrupt),
            ],
            1,
        ),
        (
            vec!["surface".into(), "--at".into(), "9999".into(), s(&valid)],
            2,
        ),
        (vec!["derive".into(), s(&valid)], 0),
        (vec!["derive".into(), s(&corrupt)], 1),
        (vec!["derive".into(), s(&unsupported)], 3),
        (vec!["show".into(), s(&valid)], 0),
        (vec!["show".into(), s(&corrupt)], 1),
        (vec!["stats".into(), s(&valid)], 0),
        (
            vec![
                "stats".into(),
                "--format".into(),
                "json".into(),
                s(&corrupt),
            ],
            1,
        ),
        (vec!["explain".into()], 0),
        (vec!["explain".into(), "torn-line".into()], 0),
        (vec!["explain".into(), "no-such-code".into()], 2),
        (vec!["repair".into(), "--dry-run".into(), s(&crashed)], 0),
        (vec!["repair".into(), s(&corrupt)], 1),
        (
            compact_args(&["--dry-run", "--start", "21", "--end", "15"], &valid),
            0,
        ),
        (compact_args(&["--start", "13", "--end", "13"], &valid), 1),
        (compact_args(&["--start", "1", "--end", "2"], &crashed), 1),
        (
            compact_args(&["--start", "1", "--end", "2"], &unsupported),
            3,
        ),
        (vec!["completions".into(), "bash".into()], 0),
        (vec!["man".into()], 0),
    ];
    for (args, code) in &cases {
        for flag in ["-q", "--quiet"] {
            let out = dshs().arg(flag).args(args).output().unwrap();
            assert_eq!(out.status.code(), Some(*code), "{flag} {args:?}");
            assert!(
                out.stdout.is_empty(),
                "{flag} {args:?}: stdout {:?}",
                String::from_utf8_lossy(&out.stdout)
            );
            assert!(
                out.stderr.is_empty(),
                "{flag} {args:?}: stderr {:?}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // The same run without -q does print something (so the check above can fail).
        let loud = dshs().args(args).output().unwrap();
        assert_eq!(loud.status.code(), Some(*code), "{args:?}");
        assert!(
            !loud.stdout.is_empty() || !loud.stderr.is_empty(),
            "{args:?}"
        );
    }
    // -q after the command works too, and repair still repairs.
    let out = dshs()
        .args(["repair", "-q"])
        .arg(&crashed)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
    dshs()
        .args(["-q", "validate", "--deny-warnings"])
        .arg(&crashed)
        .assert()
        .code(0)
        .stdout("")
        .stderr("");
    assert!(std::fs::read_dir(dir.path()).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("session.v3.jsonl.dshs-cut-")
    }));
    // Standard input, too.
    dshs()
        .args(["-q", "derive", "-"])
        .write_stdin(corrupt_log())
        .assert()
        .code(1)
        .stdout("")
        .stderr("");
    // A usage error still explains itself.
    dshs()
        .args(["-q", "validate", "--no-such-flag", "x"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--no-such-flag"));
    // A real (non-dry-run) compaction: silent, yet the log did change.
    let before = std::fs::read(&compactable).unwrap();
    let out = dshs()
        .arg("-q")
        .args(compact_args(
            &["--start", "21", "--end", "15"],
            &compactable,
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
    assert_ne!(std::fs::read(&compactable).unwrap(), before);
}

// --- colour -----------------------------------------------------------------------------------

const ESC: u8 = 0x1b;

/// Every command that prints for people, on a log with findings (so severities are painted).
fn human_commands(dir: &Path) -> Vec<Vec<String>> {
    let corrupt = write(dir, "corrupt.jsonl", &corrupt_log())
        .to_str()
        .unwrap()
        .to_owned();
    let valid = testdata("sample/session.v4.jsonl")
        .to_str()
        .unwrap()
        .to_owned();
    let crashed_text = std::fs::read_to_string(testdata("sample/crashed.v3.jsonl")).unwrap();
    let crashed = write(dir, "session.v3.jsonl", &crashed_text)
        .to_str()
        .unwrap()
        .to_owned();
    [
        vec!["validate", &corrupt],
        vec!["surface", &valid],
        vec!["surface", &corrupt],
        vec!["derive", "--format", "markdown", &valid],
        vec!["show", &corrupt],
        vec!["stats", &corrupt],
        vec!["explain"],
        vec!["explain", "torn-line"],
        vec!["repair", "--dry-run", &crashed],
    ]
    .into_iter()
    .map(|v| v.into_iter().map(String::from).collect())
    .collect()
}

#[test]
fn never_and_no_color_print_no_escape_codes_and_always_does_into_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let mut coloured = Vec::new();
    for args in human_commands(dir.path()) {
        let never = dshs()
            .args(["--color", "never"])
            .args(&args)
            .output()
            .unwrap();
        assert!(
            !never.stdout.contains(&ESC) && !never.stderr.contains(&ESC),
            "never {args:?}"
        );
        let no_color = dshs().env("NO_COLOR", "1").args(&args).output().unwrap();
        assert!(
            !no_color.stdout.contains(&ESC) && !no_color.stderr.contains(&ESC),
            "NO_COLOR {args:?}"
        );
        let always = dshs()
            .args(["--color", "always"])
            .args(&args)
            .output()
            .unwrap();
        if always.stdout.contains(&ESC) || always.stderr.contains(&ESC) {
            coloured.push(args[..args.len().min(2)].join(" "));
        }
        // JSON is never coloured.
        let json = dshs()
            .args(["--color", "always"])
            .args(&args)
            .arg("--format")
            .arg("json")
            .output()
            .unwrap();
        assert!(!json.stdout.contains(&ESC), "json {args:?}");
    }
    // What paints: findings, the surface table, show's marks, stats' headings, an explanation.
    let coloured: Vec<&str> = coloured
        .iter()
        .map(|c| c.split(' ').next().unwrap())
        .collect();
    assert_eq!(
        coloured,
        ["validate", "surface", "show", "stats", "explain"]
    );
}

/// NO_COLOR and --color on a real terminal (`script` gives the command a pseudo-terminal).
#[test]
fn no_color_is_obeyed_on_a_terminal() {
    let script_ok = Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !script_ok {
        eprintln!("skipped: `script` (util-linux) is not installed");
        return;
    }
    let bin = assert_cmd::cargo::cargo_bin("dshs");
    let dir = tempfile::tempdir().unwrap();
    let corrupt = write(dir.path(), "corrupt.jsonl", &corrupt_log());
    let run = |env: &[(&str, &str)], color: &str| {
        let line = format!(
            "{} --color {color} validate {}",
            bin.display(),
            corrupt.display()
        );
        let mut cmd = Command::new("script");
        cmd.args(["-qec", &line, "/dev/null"])
            .env_remove("NO_COLOR")
            .env("TERM", "xterm");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.stdin(Stdio::null()).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        out.stdout.contains(&ESC)
    };
    assert!(run(&[], "auto"), "auto on a terminal colours");
    assert!(!run(&[("NO_COLOR", "1")], "auto"), "NO_COLOR=1");
    assert!(
        run(&[("NO_COLOR", "")], "auto"),
        "an empty NO_COLOR does not count"
    );
    assert!(!run(&[("TERM", "dumb")], "auto"), "TERM=dumb");
    assert!(!run(&[], "never"), "--color never");
    assert!(
        run(&[("NO_COLOR", "1")], "always"),
        "--color always beats NO_COLOR"
    );
}

// --- pipes ------------------------------------------------------------------------------------

/// `dshs derive big.jsonl | head -1` in a real shell pipeline: dshs's own status is 0 and it
/// says nothing.
#[test]
fn derive_into_head_exits_0_silently() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::from(V3);
    log.push('\n');
    log.push_str(r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#);
    log.push('\n');
    let text = "lorem ipsum ".repeat(40);
    for seq in 1..=3000 {
        log.push_str(&format!(
            r#"{{"type":"user/message","seq":{seq},"time":1,"data":{{"content":[{{"type":"text","text":"{seq} {text}"}}],"source":{{"kind":"user"}},"role":"user","id":"u{seq}"}},"surfaceOp":"append"}}"#
        ));
        log.push('\n');
    }
    log.push_str(r#"{"type":"turn/end","seq":3001,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}"#);
    log.push('\n');
    let big = write(dir.path(), "big.jsonl", &log);
    // Sanity: the log is valid and derives to 3000 messages when read to the end.
    let all = dshs()
        .args(["derive", "--format", "ndjson"])
        .arg(&big)
        .assert()
        .success();
    assert_eq!(
        all.get_output()
            .stdout
            .iter()
            .filter(|b| **b == b'\n')
            .count(),
        3000
    );
    let bin = assert_cmd::cargo::cargo_bin("dshs");
    for format in ["json", "ndjson", "markdown"] {
        // `$?` of a pipeline is head's (and sh has no pipefail): a subshell records dshs's own.
        let script = format!(
            "( '{}' derive --format {format} '{}' 2>err; echo $? > status ) | head -1 >/dev/null; cat status",
            bin.display(),
            big.display()
        );
        let out = Command::new("sh")
            .arg("-c")
            .arg(&script)
            .current_dir(dir.path())
            .env_remove("NO_COLOR")
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0", "{format}");
        let err = std::fs::read_to_string(dir.path().join("err")).unwrap();
        assert_eq!(err, "", "{format}");
    }
    // The same with a reader that goes away after one line, without a shell.
    let mut child = Command::new(&bin)
        .args(["derive", "--format", "ndjson"])
        .arg(&big)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("\"role\":\"user\""), "{first}");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty());
}

// --- error messages ---------------------------------------------------------------------------

fn stderr_of(args: &[&str], dir: &Path) -> (i32, String) {
    let out = dshs().current_dir(dir).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn errors_say_what_where_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "corrupt.jsonl", &corrupt_log());
    write(d, "unsupported.jsonl", &unsupported_log());

    // Refusals name the file, the line and code of the finding, and the command that explains it.
    let (code, err) = stderr_of(&["surface", "corrupt.jsonl"], d);
    assert_eq!(code, 1);
    assert!(
        err.contains("corrupt.jsonl:4: error[committed-unparsable]"),
        "{err}"
    );
    assert!(
        err.contains("`dshs explain committed-unparsable` how to fix it"),
        "{err}"
    );
    let (code, err) = stderr_of(&["derive", "unsupported.jsonl"], d);
    assert_eq!(code, 3);
    assert!(
        err.contains("`dshs explain unknown-event-type` says what to do"),
        "{err}"
    );
    let (code, err) = stderr_of(&["repair", "corrupt.jsonl"], d);
    assert_eq!(code, 1);
    assert!(
        err.contains(
            "nothing was written. `dshs explain committed-unparsable` says how to fix it by hand"
        ),
        "{err}"
    );
    let (code, err) = stderr_of(&["repair", "unsupported.jsonl"], d);
    assert_eq!(code, 3);
    assert!(
        err.contains("`dshs explain unknown-event-type` says what to do); nothing was written"),
        "{err}"
    );

    // A bad --at says what a seq is.
    let (code, err) = stderr_of(&["derive", "--at", "abc", "corrupt.jsonl"], d);
    assert_eq!(code, 2);
    assert!(
        err.contains("`abc` is not an event seq (a whole number"),
        "{err}"
    );
    let (code, err) = stderr_of(&["validate", "--max-findings", "x", "corrupt.jsonl"], d);
    assert_eq!(code, 2);
    assert!(err.contains("`x` is not a count"), "{err}");

    // A missing known-types file: said once, with where it came from.
    let (code, err) = stderr_of(
        &["--known-types", "nope.txt", "validate", "corrupt.jsonl"],
        d,
    );
    assert_eq!(code, 2);
    assert!(
        err.starts_with("dshs: error: --known-types: cannot read known-types file nope.txt: "),
        "{err}"
    );
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
    let out = dshs()
        .current_dir(d)
        .env("DSHS_KNOWN_TYPES", d.join("nope.txt"))
        .args(["validate", "corrupt.jsonl"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.contains("(listed in DSHS_KNOWN_TYPES; fix the file or the variable)"),
        "{err}"
    );
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
}

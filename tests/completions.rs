//! The committed completion scripts (completions/) match what the CLI definition generates,
//! complete what they should, and work in real shells where those are installed. When the
//! drift test fails after a CLI change, regenerate: `scripts/gen-shell.sh`.

mod common;

use std::path::Path;
use std::process::Command;

use common::dshs;

/// `dshs completions SHELL` → the file it is committed (and installed) as.
const SCRIPTS: [(&str, &str); 5] = [
    ("bash", "dshs.bash"),
    ("zsh", "_dshs"),
    ("fish", "dshs.fish"),
    ("elvish", "dshs.elv"),
    ("powershell", "_dshs.ps1"),
];

fn generated(shell: &str) -> String {
    let out = dshs().args(["completions", shell]).assert().success();
    String::from_utf8(out.get_output().stdout.clone()).expect("UTF-8 script")
}

#[test]
fn committed_completion_scripts_match_the_cli() {
    for (shell, file) in SCRIPTS {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("completions")
            .join(file);
        let committed =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            generated(shell) == committed,
            "completions/{file} is out of date; run scripts/gen-shell.sh"
        );
    }
}

#[test]
fn enumerated_values_are_offered() {
    let formats = ["human", "json", "table", "ndjson", "markdown"];
    let colors = ["auto", "always", "never"];
    let shells = ["bash", "zsh", "fish", "elvish", "powershell"];
    for (shell, _) in SCRIPTS {
        let script = generated(shell);
        // Every script knows every command and flag.
        for word in [
            "validate",
            "explain",
            "surface",
            "derive",
            "show",
            "stats",
            "repair",
            "man",
            "format",
            "color",
            "quiet",
            "known-types",
            "dry-run",
            "deny-warnings",
            "max-findings",
        ] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
        // clap_complete's elvish and PowerShell scripts complete names only, never values.
        if matches!(shell, "bash" | "zsh" | "fish") {
            for v in formats.iter().chain(&colors).chain(&shells) {
                assert!(script.contains(v), "{shell}: no value {v}");
            }
        }
    }
    // As completion lists, in the syntax of each shell that lists values.
    let bash = generated("bash");
    assert!(bash.contains(r#"compgen -W "auto always never""#));
    assert!(bash.contains(r#"compgen -W "json ndjson markdown""#));
    assert!(bash.contains(r#"compgen -W "table json""#));
    assert!(bash.contains("bash zsh fish elvish powershell"));
    let zsh = generated("zsh");
    assert!(zsh.contains(":WHEN:(auto always never)"));
    assert!(zsh.contains(":FORMAT:(json ndjson markdown)"));
    assert!(zsh.contains(
        ":shell -- The shell to generate a completion script for:(bash zsh fish elvish powershell)"
    ));
    let fish = generated("fish");
    for v in colors.iter().chain(&shells) {
        assert!(
            fish.contains(&format!("{v}\\t"))
                || fish.contains(&format!("{v} "))
                || fish.contains(&format!("{v}\"")),
            "fish: {v}"
        );
    }
    assert!(fish.contains(r#"-f -a "bash zsh fish elvish powershell""#));
    // `explain CODE` completes to the catalogue's codes.
    for shell in ["bash", "zsh", "fish"] {
        let script = generated(shell);
        for code in [
            "committed-seq-gap",
            "torn-line",
            "replace-start-not-on-surface",
        ] {
            assert!(script.contains(code), "{shell}: explain {code}");
        }
    }
}

/// The commands whose positional argument is a log.
const LOG_COMMANDS: [&str; 10] = [
    "validate", "surface", "derive", "show", "stats", "repair", "compact", "grep", "usage",
    "export",
];

#[test]
fn log_arguments_complete_to_logs_and_directories() {
    let zsh = generated("zsh");
    assert!(zsh.contains(r#":file -- Log file, session directory, SQLite session store (STORE.db or STORE.db#SESSION_ID), or `-` for standard input:_files -g "*.jsonl(|.zst|.zstd)"'"#));
    assert!(zsh.contains(r#"or `-` for standard input:_files -g "*.jsonl(|.zst|.zstd)"'"#));
    assert!(zsh.contains(r#"'*::files -- Log files (plain or zstd)"#));
    // --output and --known-types take any file.
    assert!(zsh.contains(":OUT:_files'"));
    let bash = generated("bash");
    assert!(bash.contains("_dshs_logs() {"));
    assert!(bash.contains(r#"$(compgen -d -- "${cur}")"#));
    assert!(bash.contains(r#"$(compgen -f -X '!*.jsonl.zstd' -- "${cur}")"#));
    // Every command that reads a log uses it.
    assert_eq!(
        bash.matches("            _dshs_logs\n").count(),
        LOG_COMMANDS.len()
    );
    let fish = generated("fish");
    for cmd in LOG_COMMANDS {
        assert!(
            fish.contains(&format!(
                r#"complete -c dshs -n "__fish_dshs_using_subcommand {cmd}" -f -a "(__fish_dshs_logs)""#
            )),
            "fish: {cmd}"
        );
    }
}

#[test]
fn numbers_and_free_text_do_not_complete_to_files() {
    let bash = generated("bash");
    for opt in ["--at", "--max-findings", "--turn", "--grep", "--type"] {
        let at = bash
            .find(&format!("                {opt})\n"))
            .unwrap_or_else(|| panic!("bash: no case for {opt}"));
        let body = &bash[at..at + 200];
        assert!(
            body.contains(r#"COMPREPLY=("${cur}")"#),
            "bash {opt}: {body}"
        );
    }
    let fish = generated("fish");
    for line in fish
        .lines()
        .filter(|l| l.contains(" -l at ") || l.contains(" -l grep "))
    {
        assert!(line.ends_with(" -r -f"), "fish: {line}");
    }
}

#[test]
fn unknown_shell_is_a_usage_error() {
    dshs().args(["completions", "tcsh"]).assert().code(2);
}

/// scripts/check-completions.sh in one shell: Ok(true) passed, Ok(false) skipped.
fn check_in(shell: &str) {
    let installed = Command::new(shell)
        .arg("-c")
        .arg("exit 0")
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        eprintln!("skipped: {shell} is not installed");
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check-completions.sh");
    let Ok(out) = Command::new("bash").arg(&script).arg(shell).output() else {
        eprintln!("skipped: bash is not installed to run {}", script.display());
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "{shell} completion checks failed:\n{text}"
    );
    assert!(text.contains("ok   ") && !text.contains("FAIL"), "{text}");
}

#[test]
fn bash_completes_in_bash() {
    check_in("bash");
}

#[test]
fn zsh_completes_in_zsh() {
    check_in("zsh");
}

#[test]
fn fish_completes_in_fish() {
    check_in("fish");
}

//! The committed completion scripts match what the CLI definition generates. When this fails
//! after a CLI change, regenerate them:
//! `for s in bash zsh fish elvish powershell; do cargo run -q -- completions $s > completions/dshs.$s; done`

mod common;

use common::dshs;

#[test]
fn committed_completion_scripts_match_the_cli() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let path = format!("{}/completions/dshs.{shell}", env!("CARGO_MANIFEST_DIR"));
        let committed = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let out = dshs().args(["completions", shell]).assert().success();
        assert!(
            out.get_output().stdout == committed,
            "completions/dshs.{shell} is out of date; regenerate it (see the top of this file)"
        );
    }
}

#[test]
fn unknown_shell_is_a_usage_error() {
    dshs().args(["completions", "tcsh"]).assert().code(2);
}

//! The README's examples are tests: every ```` ```console ```` block of README.md runs as
//! written (trycmd) and its output must match, so a stale example fails `cargo test`.
//!
//! trycmd runs the blocks in a copy: README.md beside `README.in/`, which holds a copy of
//! `testdata/` — the examples use repo-relative paths, and the ones that write (`repair`,
//! `compact`) work on copies in `demo/` inside that copy, so the checkout is never changed.
//! `TZ` and `COLUMNS` are set to odd values here: an example whose output depends on them must
//! set them itself, as a reader would have to.
//!
//! To see what changed: `TRYCMD=dump cargo test --test readme` writes the actual outputs under
//! `dump/`.

use std::path::{Path, PathBuf};

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create copy dir");
    for entry in std::fs::read_dir(from).expect("read testdata") {
        let entry = entry.expect("dir entry");
        let kind = entry.file_type().expect("file type");
        let dest = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &dest);
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &dest).expect("copy testdata file");
        }
    }
}

/// A program the README runs besides dshs (`cp`, `mkdir`, `rm`, `cat`), from PATH.
fn tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").expect("PATH is set");
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} not found on PATH"))
}

#[test]
fn readme_examples_run_as_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().expect("temp dir");
    std::fs::copy(root.join("README.md"), tmp.path().join("README.md")).expect("copy README");
    copy_tree(
        &root.join("testdata"),
        &tmp.path().join("README.in/testdata"),
    );

    // Inherited by every command; an example's own `TZ=…` prefix wins (trycmd's case-level
    // `env` would override it instead).
    // SAFETY: this test binary has this one test, and no other thread runs yet.
    unsafe {
        std::env::set_var("TZ", "Pacific/Chatham");
        std::env::set_var("COLUMNS", "37");
        std::env::set_var("DSH_HOME", "/nonexistent/dsh-home");
        std::env::remove_var("DSHS_KNOWN_TYPES");
        std::env::remove_var("DSHS_THREADS");
    }
    trycmd::TestCases::new()
        .register_bin("dshs", trycmd::cargo::cargo_bin("dshs"))
        .register_bin("cp", tool("cp"))
        .register_bin("mkdir", tool("mkdir"))
        .register_bin("rm", tool("rm"))
        .register_bin("cat", tool("cat"))
        .case(tmp.path().join("README.md"))
        .run();
}

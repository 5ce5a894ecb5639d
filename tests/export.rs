//! `dshs export` (CLI.md "export"): the page of a real fixture byte-for-byte, a page for every
//! log of testdata/ with `derive`'s messages, hostile text kept as text, secrets masked, and
//! the files `-o` writes. The browser checks are in tests/export_browser.rs.
//!
//! After a deliberate change to the page, regenerate its expectation:
//! `scripts/gen-export-golden.sh`.

mod common;

use std::path::{Path, PathBuf};

use common::{dshs, testdata};

const FIXTURE: &str =
    "fixtures/zhengxuyu__snapshots__session__compaction-recovery__session.v4.concrete.jsonl";

fn export(args: &[&str]) -> (i32, String, String) {
    let out = dshs().arg("export").args(args).output().expect("dshs runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).expect("the page is UTF-8"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The text of the page's data element, as embedded.
fn data_of(html: &str) -> &str {
    let open = "<script type=\"application/json\" id=\"data\">";
    let start = html.find(open).expect("a data element") + open.len();
    let len = html[start..].find("</script>").expect("its end");
    &html[start..start + len]
}

/// The data with the escapes the page adds taken back out (the log's own text then).
fn unescaped(data: &str) -> String {
    data.replace("\\u003c", "<")
        .replace("\\u003e", ">")
        .replace("\\u0026", "&")
        .replace("\\u2028", "\u{2028}")
        .replace("\\u2029", "\u{2029}")
}

/// JSON text with every surrogate escape made U+FFFD: serde_json refuses a lone one, which
/// JavaScript reads (the hostile fixture has one), and counting needs no text.
fn no_surrogates(data: &str) -> String {
    let b = data.as_bytes();
    let mut out = String::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            if b[i + 1] == b'u'
                && data.get(i + 2..i + 6).is_some_and(|h| {
                    u16::from_str_radix(h, 16).is_ok_and(|c| (0xd800..0xe000).contains(&c))
                })
            {
                out.push_str("\\ufffd");
                i += 6;
            } else {
                out.push_str(&data[i..i + 2]);
                i += 2;
            }
            continue;
        }
        let c = data[i..].chars().next().unwrap();
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// The surface messages of a page's data: depth-0 nodes that derive a message.
fn surface_messages(data: &str) -> usize {
    let v: serde_json::Value =
        serde_json::from_str(&no_surrogates(data)).expect("the data is JSON");
    v["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|n| n["depth"] == 0 && !n["m"].is_null())
        .count()
}

#[test]
fn golden_page_of_a_real_fixture() {
    // The page names the log as given: relative, as scripts/gen-export-golden.sh gives it.
    let run = || {
        let out = dshs()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["export", &format!("testdata/{FIXTURE}")])
            .output()
            .expect("dshs runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8(out.stdout).expect("UTF-8"),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, html, err) = run();
    assert_eq!(code, 0, "{err}");
    let expected = std::fs::read_to_string(testdata("export/compaction-recovery.v4.html"))
        .expect("the committed page");
    assert!(
        html == expected,
        "the page differs from testdata/export/compaction-recovery.v4.html; if the change is \
         deliberate, run scripts/gen-export-golden.sh and review the diff"
    );
    // The same log, the same bytes.
    let (_, again, _) = run();
    assert_eq!(html, again);
}

/// The names of the files in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn logs(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("testdata is readable")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            logs(&p, out);
        } else if name.ends_with(".jsonl") || name.ends_with(".zstd") || name.ends_with(".zst") {
            out.push(p);
        }
    }
}

#[test]
fn every_testdata_log_gives_a_page_with_derives_messages() {
    let mut all = Vec::new();
    logs(&testdata(""), &mut all);
    assert!(all.len() > 50, "testdata holds the logs");
    let mut pages = 0;
    for log in &all {
        let path = log.to_str().unwrap();
        let derived = dshs()
            .args(["derive", "--format", "ndjson", path])
            .output()
            .expect("dshs runs");
        let (code, html, err) = export(&["--no-redact", path]);
        assert_eq!(
            Some(code),
            derived.status.code(),
            "{path}: export and derive disagree on the exit status: {err}"
        );
        if derived.stdout.is_empty() && code != 0 {
            assert!(html.is_empty(), "{path}: a refused log gives no page");
            continue;
        }
        pages += 1;
        let data = data_of(&html);
        let lines: Vec<&[u8]> = derived
            .stdout
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(surface_messages(data), lines.len(), "{path}");
        // Every message byte-for-byte (a line that is not UTF-8 is read lossily by both).
        let text = unescaped(data);
        for line in lines {
            let line = String::from_utf8_lossy(line);
            assert!(
                text.contains(&*line),
                "{path}: message not in the page: {line}"
            );
        }
    }
    assert!(pages > 50, "only {pages} pages were made");
}

#[test]
fn hostile_text_stays_text() {
    let log = testdata("export/hostile.v4.jsonl");
    let (code, html, err) = export(&[log.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    // The only scripts are the page's own: the data element and the script of assets/.
    let lower = html.to_ascii_lowercase();
    assert_eq!(lower.matches("<script").count(), 2, "scripts in the page");
    assert_eq!(lower.matches("</script").count(), 2);
    let script = format!("<script>{}</script>", dshs_page_js());
    assert!(html.contains(&script), "the page's own script, unchanged");
    let data = data_of(&html);
    for bad in ["<", ">", "&", "\u{2028}", "\u{2029}"] {
        assert!(!data.contains(bad), "{bad:?} left raw in the data");
    }
    // Outside the data and the script there is no markup from the log.
    let outside = html.replace(data, "").replace(dshs_page_js(), "");
    for bad in [
        "<img",
        "<a ",
        "href=\"javascript",
        "-->",
        "<!--",
        "onerror=\"",
        "\u{1b}",
    ] {
        assert!(!outside.contains(bad), "{bad:?} outside the data");
    }
    // The title reads as written, escaped.
    assert!(outside.contains("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;"));
    // The text reads as written: every derived message is in the data, byte for byte.
    let derived = dshs()
        .args(["derive", "--format", "ndjson", log.to_str().unwrap()])
        .output()
        .expect("dshs runs");
    let text = unescaped(data);
    let mut n = 0;
    for line in derived
        .stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
    {
        let line = std::str::from_utf8(line).expect("UTF-8");
        assert!(line.contains("</script>"), "the fixture is hostile");
        assert!(
            text.contains(line),
            "message not in the page as written: {line}"
        );
        n += 1;
    }
    assert_eq!(n, 5);
    assert!(
        text.contains("\\ud800"),
        "a lone surrogate escape stays as stored"
    );
}

fn dshs_page_js() -> &'static str {
    include_str!("../assets/export/page.js")
}

#[test]
fn secrets_are_masked_unless_asked_not_to() {
    let src = std::fs::read_to_string(testdata(FIXTURE)).unwrap();
    let key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123";
    let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    let uuid = "0b9f3c1e-5d2a-4c8e-9f7a-1234567890ab";
    let text = format!("COMPACTION RECOVERED\\nkey {key}\\n{token} {sha} {uuid}");
    let log = src.replace("COMPACTION RECOVERED", &text);
    assert_ne!(log, src);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secret.jsonl");
    std::fs::write(&path, log).unwrap();
    let (code, html, err) = export(&[path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !html.contains(key) && !html.contains(token),
        "a secret in the page"
    );
    assert!(html.contains("[redacted api-key]") && html.contains("[redacted github-token]"));
    let n = html.matches("[redacted ").count();
    assert!(n >= 2);
    assert!(
        data_of(&html).ends_with(&format!(",\"redacted\":{n}}}")),
        "the page says how many"
    );
    assert!(err.contains(&format!("{n} secrets redacted")), "{err}");
    assert!(
        html.contains(sha) && html.contains(uuid),
        "ordinary text masked"
    );
    let (code, html, _) = export(&["--no-redact", path.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(html.contains(key) && html.contains(token));
    assert!(data_of(&html).ends_with(",\"redacted\":null}"));
}

#[test]
fn output_file_is_the_page_and_leaves_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("page.html");
    std::fs::write(&out, "old").unwrap();
    let (code, stdout, err) = export(&[
        "-o",
        out.to_str().unwrap(),
        testdata(FIXTURE).to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.is_empty());
    let (_, page, _) = export(&[testdata(FIXTURE).to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), page);
    assert_eq!(names_in(dir.path()), ["page.html"], "a temporary file left");
    // The page is readable as a file made by the user would be, not private like a
    // temporary file; a page it replaces keeps its mode.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let fresh = dir.path().join("fresh.html");
    let f = testdata(FIXTURE);
    let (code, _, _) = export(&["-o", fresh.to_str().unwrap(), f.to_str().unwrap()]);
    assert_eq!((code, mode(&fresh)), (0, 0o644));
    std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o640)).unwrap();
    let (code, _, _) = export(&["-o", fresh.to_str().unwrap(), f.to_str().unwrap()]);
    assert_eq!((code, mode(&fresh)), (0, 0o640));
    std::fs::remove_file(&fresh).unwrap();
    // A refused log writes nothing, and the old page stays.
    let bad = testdata(
        "fixtures/wangnaiyu__snapshots__session__compaction-recovery__session.v4.concrete.jsonl",
    );
    let (code, _, _) = export(&["-o", out.to_str().unwrap(), bad.to_str().unwrap()]);
    assert_eq!(code, 3);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), page);
}

/// `-o` through a link replaces the file it leads to and keeps the link; `-o` naming a device
/// writes to it (renaming a page over `/dev/stdout` would replace the device).
#[test]
fn output_through_a_link_or_to_a_device_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let f = testdata(FIXTURE);
    let (_, page, _) = export(&[f.to_str().unwrap()]);
    let target = dir.path().join("target.html");
    std::fs::write(&target, "old").unwrap();
    let link = dir.path().join("link.html");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let (code, _, err) = export(&["-o", link.to_str().unwrap(), f.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(link.is_symlink(), "the link was replaced");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), page);
    let null = dir.path().join("null");
    std::os::unix::fs::symlink("/dev/null", &null).unwrap();
    let (code, _, err) = export(&["-o", null.to_str().unwrap(), f.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(null.is_symlink(), "the link to a device was replaced");
    let dangling = dir.path().join("dangling.html");
    std::os::unix::fs::symlink(dir.path().join("nowhere/x.html"), &dangling).unwrap();
    let (code, _, err) = export(&["-o", dangling.to_str().unwrap(), f.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("a link to nothing"), "{err}");
    assert!(dangling.is_symlink());
    assert_eq!(
        names_in(dir.path()),
        ["dangling.html", "link.html", "null", "target.html"]
    );
}

/// A log that is a FIFO is read by the fold alone: nothing else opens it first (which would
/// wait for the writer, or leave it writing to no reader).
#[test]
fn a_fifo_log_is_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("session.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let log = std::fs::read(testdata(FIXTURE)).unwrap();
    let (_, file_page, _) = export(&[testdata(FIXTURE).to_str().unwrap()]);
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().write(true).open(&fifo)?;
            f.write_all(&log)
        })
    };
    let (code, page, err) = export(&[fifo.to_str().unwrap()]);
    writer.join().unwrap().expect("the whole log was read");
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        surface_messages(data_of(&page)),
        surface_messages(data_of(&file_page))
    );
}

#[test]
fn at_and_turn_narrow_the_page() {
    let f = testdata(FIXTURE);
    let f = f.to_str().unwrap();
    let (code, html, err) = export(&["--at", "15", f]);
    assert_eq!(code, 0, "{err}");
    let derived = dshs()
        .args(["derive", "--format", "ndjson", "--at", "15", f])
        .output()
        .unwrap();
    let n = derived
        .stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    assert_eq!(surface_messages(data_of(&html)), n);
    let (code, html, _) = export(&["--turn", "2", f]);
    assert_eq!(code, 0);
    assert_eq!(surface_messages(data_of(&html)), 0, "the log has one turn");
    let (code, html, _) = export(&["--turn", "1", f]);
    assert_eq!(code, 0);
    assert_eq!(surface_messages(data_of(&html)), 5);
}

#[test]
fn several_sessions_make_a_directory_with_an_index_and_linked_sub_agents() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("site");
    let parent =
        testdata("fixtures/upstream__acp-agent__subagent-fork-in-process__session.concrete.jsonl");
    let child = testdata(
        "fixtures/upstream__acp-agent__subagent-fork-in-process__session.1.concrete.jsonl",
    );
    let (code, _, err) = export(&[
        "-o",
        out.to_str().unwrap(),
        parent.to_str().unwrap(),
        child.to_str().unwrap(),
    ]);
    assert!(code == 0 || code == 1, "{err}");
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names.contains(&"index.html".to_owned()));
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(!index.contains("<script"), "the index has no script");
    for n in names.iter().filter(|n| *n != "index.html") {
        assert!(
            index.contains(&format!("href=\"{n}\"")),
            "{n} not in the index"
        );
    }
    // The sub-agent's page links its parent, the parent's page its sub-agent.
    let page = |n: &str| std::fs::read_to_string(out.join(n)).unwrap();
    let child_name = "ada8966c-9fa3-441b-8721-37ff1e795e6a.html";
    let parent_name = "96cf59c9-b347-48b9-b234-a5200913ad05.html";
    let child_data: serde_json::Value = serde_json::from_str(data_of(&page(child_name))).unwrap();
    assert_eq!(child_data["parentPage"]["href"], parent_name);
    let parent_data: serde_json::Value = serde_json::from_str(data_of(&page(parent_name))).unwrap();
    assert_eq!(parent_data["children"][0]["href"], child_name);
    // Several paths without -o: refused, nothing written.
    let (code, html, _) = export(&[parent.to_str().unwrap(), child.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(html.is_empty());
}

#[test]
fn turns_carry_their_tokens_counted_once() {
    // Each call's usage is written twice in this log (stream and message): counted once.
    let f = testdata("fixtures/upstream__acp-agent__multi-turn__session.concrete.jsonl");
    let (code, html, err) = export(&[f.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(data_of(&html)).unwrap();
    let totals: Vec<u64> = v["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["usage"]["totalTokens"].as_u64().unwrap())
        .collect();
    assert_eq!(totals, vec![2864 + 20, 64 + 2816 + 21]);
    assert_eq!(v["tokens"]["totalTokens"], 2884 + 2901);
    assert_eq!(v["tokens"]["calls"], 2);
    // --at before the second call (its message is seq 68): only the first counts.
    let (_, html, _) = export(&["--at", "40", f.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(data_of(&html)).unwrap();
    assert_eq!(v["tokens"]["totalTokens"], 2884);
}

#[test]
fn the_index_masks_what_the_pages_mask() {
    let src = std::fs::read_to_string(testdata(FIXTURE)).unwrap();
    let key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123";
    let log = src.replace(
        "\"title\":\"Establish a durable compaction premise\"",
        &format!("\"title\":\"deploy with {key}\""),
    );
    assert_ne!(log, src);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    std::fs::write(&path, log).unwrap();
    let site = dir.path().join("site");
    std::fs::create_dir(&site).unwrap();
    // -o naming a directory: a directory export, even of one session.
    let (code, _, err) = export(&["-o", site.to_str().unwrap(), path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let index = std::fs::read_to_string(site.join("index.html")).unwrap();
    assert!(index.contains("deploy with [redacted api-key]"), "{index}");
    assert!(!index.contains(key));
    for e in std::fs::read_dir(&site).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        assert!(!text.contains(key));
    }
}

/// Exports racing to one `-o` file, and a reader watching it, many rounds: every read of the
/// file is one whole page (never a mix or a prefix), the file ends as the page of an export
/// that reported success, every success wrote its page whole, and no temporary file is left.
#[test]
fn racing_exports_to_one_file_leave_a_whole_page_of_a_reported_success() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let logs = [
        testdata(FIXTURE),
        testdata("sample/session.v4.jsonl"),
        testdata("sample/warn.v2.jsonl"),
    ];
    let pages: Vec<String> = logs
        .iter()
        .map(|l| export(&[l.to_str().unwrap()]).1)
        .collect();
    assert!(
        pages[0] != pages[1] && pages[1] != pages[2],
        "distinct pages"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("page.html");
    std::fs::write(&out, &pages[0]).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (out, pages, done) = (out.clone(), pages.clone(), done.clone());
        std::thread::spawn(move || {
            let mut reads = 0;
            while !done.load(Ordering::Relaxed) {
                let now = std::fs::read_to_string(&out).expect("the file is always there");
                assert!(pages.contains(&now), "a read saw a partial or mixed page");
                reads += 1;
            }
            reads
        })
    };
    for round in 0..16 {
        let children: Vec<_> = logs
            .iter()
            .map(|l| {
                std::process::Command::new(env!("CARGO_BIN_EXE_dshs"))
                    .arg("export")
                    .args(["-o", out.to_str().unwrap(), l.to_str().unwrap()])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .env_remove("DSHS_KNOWN_TYPES")
                    .spawn()
                    .expect("dshs starts")
            })
            .collect();
        let mut succeeded = Vec::new();
        for (i, child) in children.into_iter().enumerate() {
            let o = child.wait_with_output().expect("dshs ends");
            assert!(
                o.status.success(),
                "round {round}, export {i}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            succeeded.push(i);
        }
        let last = std::fs::read_to_string(&out).unwrap();
        assert!(
            succeeded.iter().any(|&i| pages[i] == last),
            "round {round}: the file is no reported success's page"
        );
        assert_eq!(
            names_in(dir.path()),
            ["page.html"],
            "round {round}: a temporary file was left"
        );
    }
    done.store(true, Ordering::Relaxed);
    assert!(reader.join().expect("the reader saw only whole pages") > 0);
}

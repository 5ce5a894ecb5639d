//! `dshs export` pages in a real browser: headless Chromium runs the page's script and
//! dumps the DOM it built. Checked: as many messages as `derive` gives, `#q=` hides the
//! messages that do not match, `#seq=` of a shadowed node opens the compaction's folded
//! history, no console message (no script error, no refused load), no resource fetched.
//!
//! Chromium comes from the distribution (`.ci/run` installs it). Without it these tests say
//! so and pass: a missing download must not block a landing.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{dshs, testdata};

const FIXTURE: &str =
    "fixtures/zhengxuyu__snapshots__session__compaction-recovery__session.v4.concrete.jsonl";

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("DSHS_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if path.exists() {
        Some(path)
    } else {
        eprintln!(
            "export_browser: no Chromium at {} (install the distribution's `chromium` package, or set DSHS_CHROMIUM); the browser checks are SKIPPED",
            path.display()
        );
        None
    }
}

/// The DOM after the page's script ran, and the console lines Chromium logged.
struct Loaded {
    dom: String,
    console: Vec<String>,
}

fn open(browser: &Path, page: &Path, fragment: &str) -> Loaded {
    let profile = tempfile::tempdir().expect("a profile directory");
    let url = format!("file://{}{fragment}", page.display());
    // Each wait has a limit: `timeout` ends a browser that hangs.
    let out = Command::new("timeout")
        .args(["--kill-after=5", "90"])
        .arg(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(&url)
        .stdin(Stdio::null())
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium failed on {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let console = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_owned)
        .collect();
    Loaded {
        dom: String::from_utf8(out.stdout).expect("UTF-8 DOM"),
        console,
    }
}

/// The page's elements of surface messages: `(seq, class)`.
fn surface_articles(dom: &str) -> Vec<(u64, String)> {
    let mut found = Vec::new();
    let mut rest = dom;
    while let Some(at) = rest.find("<article class=\"") {
        rest = &rest[at + 16..];
        let class = &rest[..rest.find('"').unwrap()];
        let tag = &rest[..rest.find('>').unwrap()];
        if !class.split(' ').any(|c| c == "msg") || !tag.contains("data-depth=\"0\"") {
            continue;
        }
        let seq = tag
            .split("data-seq=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .and_then(|s| s.parse().ok())
            .expect("a seq");
        found.push((seq, class.to_owned()));
    }
    found
}

fn derived(log: &Path) -> usize {
    let out = dshs()
        .args(["derive", "--format", "ndjson"])
        .arg(log)
        .output()
        .expect("dshs runs");
    out.stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count()
}

fn page_of(log: &Path, dir: &Path, name: &str) -> PathBuf {
    let page = dir.join(name);
    let out = dshs()
        .arg("export")
        .arg("-o")
        .arg(&page)
        .arg(log)
        .output()
        .expect("dshs runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    page
}

fn clean(l: &Loaded, what: &str) {
    assert!(
        l.console.is_empty(),
        "{what}: console messages: {:#?}",
        l.console
    );
    assert!(
        !l.dom.contains("data-blocked="),
        "{what}: a load was refused"
    );
    assert!(
        l.dom.contains("data-resources=\"0\""),
        "{what}: a resource was fetched"
    );
}

#[test]
fn the_page_renders_derives_messages_searches_and_unfolds_history() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let log = testdata(FIXTURE);
    let page = page_of(&log, dir.path(), "page.html");

    let plain = open(&browser, &page, "");
    clean(&plain, "page");
    let shown = surface_articles(&plain.dom);
    assert_eq!(shown.len(), derived(&log), "messages rendered vs derive");
    assert!(
        plain
            .dom
            .contains(&format!("data-rendered=\"{}\"", shown.len()))
    );
    assert!(shown.iter().all(|(_, c)| !c.contains("hidden")));
    // The folded history is there, closed, and built only when opened.
    assert!(
        !plain.dom.contains("id=\"seq-8\""),
        "history built before it is opened"
    );
    assert!(
        plain
            .dom
            .contains("<details class=\"history\"><summary>2 earlier surface nodes")
    );

    // `#q=`: only the messages holding the text (or history holding it) stay.
    let searched = open(&browser, &page, "#q=COMPACTION%20RECOVERED");
    clean(&searched, "#q=");
    let after = surface_articles(&searched.dom);
    assert_eq!(after.len(), shown.len());
    let visible: Vec<u64> = after
        .iter()
        .filter(|(_, c)| !c.split(' ').any(|x| x == "hidden"))
        .map(|(s, _)| *s)
        .collect();
    // The answer, and the compaction summary whose folded history holds the request.
    assert_eq!(visible, vec![21, 24], "the messages that match");
    assert!(searched.dom.contains("2 messages match"));

    // `#seq=` of a node the compaction shadowed opens the history that holds it.
    let unfolded = open(&browser, &page, "#seq=8");
    clean(&unfolded, "#seq=");
    let hist = unfolded
        .dom
        .find("<details class=\"history\" open=\"\">")
        .expect("the history is open");
    let inner = &unfolded.dom[hist..];
    assert!(inner.contains("id=\"seq-8\"") && inner.contains("id=\"seq-9\""));
}

#[test]
fn a_hostile_page_runs_only_its_own_script() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let log = testdata("export/hostile.v4.jsonl");
    let page = page_of(&log, dir.path(), "hostile.html");
    let l = open(&browser, &page, "");
    clean(&l, "hostile page");
    assert_eq!(surface_articles(&l.dom).len(), derived(&log));
    assert_eq!(l.dom.matches("<script").count(), 2, "scripts in the DOM");
    assert!(!l.dom.contains("<img"), "an image element from log text");
    assert!(
        !l.dom.contains("<a href=\"javascript"),
        "a link from log text"
    );
    // The text reads as written (escaped by the DOM serializer).
    assert!(
        l.dom
            .contains("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;")
    );
}

#[test]
fn a_broken_page_is_seen_as_broken() {
    // The console check can fail: a page whose data does not parse logs an error.
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let page = page_of(&testdata(FIXTURE), dir.path(), "page.html");
    let html = std::fs::read_to_string(&page).unwrap();
    let broken = html.replacen("id=\"data\">{", "id=\"data\">{x", 1);
    assert_ne!(broken, html);
    std::fs::write(&page, broken).unwrap();
    let l = open(&browser, &page, "");
    assert!(
        l.console.iter().any(|c| c.contains("SyntaxError")),
        "{:#?}",
        l.console
    );
}

//! `dshs usage`: the reference totals of every real log (checked by hand against USAGE.md),
//! one test per counting rule (each fails if its rule is removed), the JSON shape of CLI.md,
//! and the property that every grouping gives the same grand total.

mod common;

#[path = "../benches/gen/mod.rs"]
mod generator;

use common::{dshs, json_lines, testdata};
use serde_json::{Value, json};

/// `dshs usage ARGS` as JSON Lines (exit 0).
fn usage(args: &[&str]) -> Vec<Value> {
    let out = dshs()
        .arg("usage")
        .args(["--format", "json"])
        .args(args)
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_lines(&out.stdout)
}

fn total(lines: &[Value]) -> &Value {
    let t = lines.last().expect("a total line");
    assert_eq!(t["type"], "total");
    t
}

fn path(rel: &str) -> String {
    testdata(rel).display().to_string()
}

/// (calls, callsWithoutUsage, input, cache read, output, reasoning) of one log.
type Counts = (u64, u64, u64, u64, u64, u64);

fn counts(rel: &str) -> Counts {
    let lines = usage(&["--no-cost", &path(rel)]);
    let t = total(&lines);
    let n = |k: &str| t[k].as_u64().unwrap();
    assert_eq!(n("cacheWriteTokens"), 0, "{rel}");
    assert_eq!(
        n("totalTokens"),
        n("inputTokens") + n("cacheReadTokens") + n("outputTokens"),
        "{rel}: disjoint buckets, reasoning not added again"
    );
    (
        n("calls"),
        n("callsWithoutUsage"),
        n("inputTokens"),
        n("cacheReadTokens"),
        n("outputTokens"),
        n("reasoningTokens"),
    )
}

/// Every real log, totals written from USAGE.md by reading its usage records by hand. The
/// comments give the seqs of the calls.
#[test]
fn every_real_log_counts_as_checked_by_hand() {
    let expected: &[(&str, Counts)] = &[
        // v4: seq 8, message usage 1769/24 (19 reasoning), the stream's record is the same call.
        (
            "shiguredo__snapshots__sdk__text-turn__session.v4.concrete.jsonl",
            (1, 0, 1769, 0, 24, 19),
        ),
        // v0: usage chunk + finish + message 10/10: one call.
        (
            "upstream__acp-agent__cancel-tool-calls__session.concrete.jsonl",
            (1, 0, 10, 0, 10, 0),
        ),
        // v0: seq 11, a message cancelled mid-stream, no usage anywhere.
        (
            "upstream__acp-agent__cancel__session.concrete.jsonl",
            (1, 1, 0, 0, 0, 0),
        ),
        // v0: an empty response (usage 0/0, finish) retried: 12/3 (chunk and message).
        (
            "upstream__acp-agent__empty-response-retry__session.concrete.jsonl",
            (2, 0, 12, 0, 3, 0),
        ),
        // v0: an error finish without usage, claimed by its message.
        (
            "upstream__acp-agent__error-finish__session.concrete.jsonl",
            (1, 1, 0, 0, 0, 0),
        ),
        // v0: seq 16 2864/12 and seq 29 64/28, each written twice.
        (
            "upstream__acp-agent__max-tokens-continue__session.concrete.jsonl",
            (2, 0, 2928, 0, 40, 0),
        ),
        (
            "upstream__acp-agent__multi-turn__session.concrete.jsonl",
            (2, 0, 2928, 2816, 41, 36),
        ),
        // v0 with packed rows: seq 57 2878/83/17r, seq 121 167/52 + 2816 cache read /21r.
        (
            "upstream__acp-agent__packed-chunks__session.concrete.jsonl",
            (2, 0, 3045, 2816, 135, 38),
        ),
        (
            "upstream__acp-agent__parallel-tool-calls__session.concrete.jsonl",
            (2, 0, 20, 0, 6, 0),
        ),
        // v0 sub-agent child, seedLength 42: seq 39 (2885/25) is the parent's; seq 96 97/39
        // + 2816 cache read is its own.
        (
            "upstream__acp-agent__subagent-fork-in-process__session.1.concrete.jsonl",
            (1, 0, 97, 2816, 39, 34),
        ),
        // Its parent: seq 39 2885/25/23r, seq 157 158/147 + 2816/59r, seq 197 65/30 + 3072/25r.
        (
            "upstream__acp-agent__subagent-fork-in-process__session.concrete.jsonl",
            (3, 0, 3108, 5888, 202, 107),
        ),
        (
            "upstream__acp-agent__text-turn__session.concrete.jsonl",
            (1, 0, 3091, 0, 23, 20),
        ),
        (
            "upstream__acp-agent__todo-write__session.concrete.jsonl",
            (2, 0, 5932, 5760, 122, 26),
        ),
        (
            "upstream__acp-agent__tool-call-turn__session.concrete.jsonl",
            (2, 0, 3049, 2816, 117, 42),
        ),
        // A replay script: no assistant events.
        (
            "upstream__headless__semantic-checkpoint-snapshots__tool-outcome-unknown__replay.raw.jsonl",
            (0, 0, 0, 0, 0, 0),
        ),
        (
            "upstream__headless__semantic-checkpoint-snapshots__tool-outcome-unknown__session.expected.concrete.jsonl",
            (2, 2, 0, 0, 0, 0),
        ),
        // v0: seq 13 24/6; seq 18 a failed attempt (error finish, no usage) retried after the
        // compaction; seq 20 the summary's call 20/4; seq 28 20/4.
        (
            "upstream__headless__snapshots__compaction-recovery__session.concrete.jsonl",
            (4, 1, 64, 0, 14, 0),
        ),
        (
            "upstream__web__fresh-round-trip__session.concrete.jsonl",
            (2, 0, 219, 15488, 111, 40),
        ),
        // seq 64 124/103 + 7680/27r, seq 108 215/32 + 7808/29r (model from request/header).
        (
            "upstream__web__seeded-history__seed.concrete.jsonl",
            (2, 0, 339, 15488, 135, 56),
        ),
        (
            "wangnaiyu__snapshots__sdk__text-turn__session.v4.concrete.jsonl",
            (1, 0, 1769, 0, 24, 19),
        ),
        // v4: seq 13 24/6; seq 18 an assistant/attempt (error, no usage); seq 20 the summary
        // 20/4; seq 24 20/4.
        (
            "wangnaiyu__snapshots__session__compaction-recovery__session.v4.concrete.jsonl",
            (4, 1, 64, 0, 14, 0),
        ),
        (
            "wangnaiyu__vfs__preview-follow-up-builder__session.v4.raw.jsonl",
            (1, 1, 0, 0, 0, 0),
        ),
        // v3 replay child (not seeded): seq 4 and 9, 10/5 each, in message and stream.
        (
            "zdsh__cli__subagent-inheritance__child.replay.v3.raw.jsonl",
            (2, 0, 20, 0, 10, 0),
        ),
        (
            "zdsh__snapshot__record-suite__rec-child__session.v3.concrete.jsonl",
            (0, 0, 0, 0, 0, 0),
        ),
        (
            "zdsh__snapshot__suite__pin-turn__session.v3.concrete.jsonl",
            (0, 0, 0, 0, 0, 0),
        ),
        (
            "zdsh__snapshot__suite__plain-turn__session.v3.concrete.jsonl",
            (1, 1, 0, 0, 0, 0),
        ),
        (
            "zdsh__vfs__preview-architecture-review__session.v3.raw.jsonl",
            (1, 1, 0, 0, 0, 0),
        ),
        (
            "zdsh__vfs__preview-follow-up-builder__session.v2.raw.jsonl",
            (1, 1, 0, 0, 0, 0),
        ),
        (
            "zdsh__vfs__preview-follow-up-builder__session.v3.raw.jsonl",
            (1, 1, 0, 0, 0, 0),
        ),
        (
            "zhengxuyu__snapshots__sdk__text-turn__session.v4.concrete.jsonl",
            (1, 0, 1769, 0, 24, 19),
        ),
        (
            "zhengxuyu__snapshots__session__compaction-recovery__session.v4.concrete.jsonl",
            (4, 1, 64, 0, 14, 0),
        ),
        (
            "zhengxuyu__snapshots__session__packed-chunks__writer.expected.concrete.jsonl",
            (2, 0, 3045, 2816, 135, 38),
        ),
    ];
    let mut listed = 0;
    for (file, want) in expected {
        assert_eq!(counts(&format!("fixtures/{file}")), *want, "{file}");
        listed += 1;
    }
    // Every real log is listed but the one whose header is a placeholder (no version).
    let all = std::fs::read_dir(testdata("fixtures")).unwrap().count();
    assert_eq!(listed + 1, all);
    let out = dshs()
        .args(["usage", "--format", "json"])
        .arg(path(
            "fixtures/upstream__acp-snapshot__suite__plain-turn__session.concrete.jsonl",
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "nothing could be read");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("not counted: its header has no numeric version")
    );
}

#[test]
fn v0_usage_in_chunk_and_message_counts_once() {
    // max-tokens-continue writes each of its 2 calls' usage twice ("usage" 4 times).
    let text = std::fs::read_to_string(testdata(
        "fixtures/upstream__acp-agent__max-tokens-continue__session.concrete.jsonl",
    ))
    .unwrap();
    assert_eq!(text.matches("\"usage\":{\"inputTokens\"").count(), 4);
    let t = counts("fixtures/upstream__acp-agent__max-tokens-continue__session.concrete.jsonl");
    assert_eq!((t.0, t.2, t.4), (2, 2928, 40));
}

#[test]
fn v4_attempt_and_compaction_summary_are_calls() {
    let t = counts(
        "fixtures/zhengxuyu__snapshots__session__compaction-recovery__session.v4.concrete.jsonl",
    );
    // Without the summary's call: 3 calls, 44/10; without the attempt: 3 calls, 0 without usage.
    assert_eq!((t.0, t.1, t.2, t.4), (4, 1, 64, 14));
}

#[test]
fn inherited_seed_events_are_the_parents() {
    // v4: the call before the inherited end-seed (1000/100) is the parent's.
    let t = counts("usage/seeded-child.v4.jsonl");
    assert_eq!((t.0, t.2, t.4), (1, 7, 3));
    // v0: seedLength 42.
    let t =
        counts("fixtures/upstream__acp-agent__subagent-fork-in-process__session.1.concrete.jsonl");
    assert_eq!((t.0, t.2), (1, 97));
}

#[test]
fn a_session_directory_counts_its_newest_generation_once() {
    let lines = usage(&["--by", "session", "--no-cost", &path("usage/root")]);
    let two = lines
        .iter()
        .find(|l| l["session"] == "usage-two-gens")
        .expect("the two-generation session");
    // The v4 generation: 10/1 and 20/2; the v0 generation's 10/1 is the same call.
    assert_eq!(
        (two["calls"].clone(), two["inputTokens"].clone()),
        (json!(2), json!(30))
    );
    assert_eq!(total(&lines)["sessions"], 2);
    assert_eq!(total(&lines)["inputTokens"], 33);
}

#[test]
fn a_session_in_two_inputs_counts_once_and_says_which() {
    let dir = path("usage/root/--proj--/two-gens");
    let file = path("usage/root/--proj--/two-gens/session.v4.jsonl");
    let out = dshs()
        .args(["usage", "--format", "json", "--no-cost", &dir, &file, &dir])
        .output()
        .unwrap();
    assert!(out.status.success());
    let lines = json_lines(&out.stdout);
    assert_eq!(total(&lines)["inputTokens"], 30);
    assert_eq!(total(&lines)["sessions"], 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("session usage-two-gens is in"), "{err}");
    assert!(err.contains("counted once, from"), "{err}");
    // A store and a log holding the same session.
    let lines = usage(&[
        "--no-cost",
        &path("sqlite/db/per-fixture/deepseek-ai--max-tokens-continue-session.db"),
        &path("fixtures/upstream__acp-agent__max-tokens-continue__session.concrete.jsonl"),
    ]);
    assert_eq!(total(&lines)["inputTokens"], 2928);
    assert_eq!(total(&lines)["sessions"], 1);
}

#[test]
fn a_crash_tail_call_counts_and_a_torn_line_does_not() {
    let t = counts("usage/crash-tail.v4.jsonl");
    // 1/1 committed, 5/5 after the damaged line; the torn 100/100 is not an event.
    assert_eq!((t.0, t.2, t.4), (2, 6, 6));
}

#[test]
fn a_model_without_a_price_is_unpriced_not_free() {
    let lines = usage(&["--by", "model", &path("usage/unpriced.v4.jsonl")]);
    let row = |m: &str| lines.iter().find(|l| l["key"] == m).unwrap().clone();
    let own = row("my-own-model");
    assert_eq!(own["costUSD"], Value::Null);
    assert_eq!(own["unpricedTokens"], 550);
    let flash = row("deepseek-v4-flash");
    assert_eq!(flash["costUSD"], json!(0.14));
    assert_eq!(flash["unpricedTokens"], 0);
    // The total: the priced part, and the unpriced tokens beside it.
    let t = total(&lines);
    assert_eq!(
        (t["costUSD"].clone(), t["unpricedTokens"].clone()),
        (json!(0.14), json!(550))
    );
    // The table marks the cost and names the model.
    let out = dshs()
        .args(["usage", "--by", "model", &path("usage/unpriced.v4.jsonl")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("unpriced"), "{text}");
    assert!(text.contains("$0.1400*"), "{text}");
    assert!(
        text.contains("* the cost leaves out calls of models without a price at their time: my-own-model (550 tokens)"),
        "{text}"
    );
    // --no-cost leaves costs out altogether.
    let lines = usage(&["--no-cost", &path("usage/unpriced.v4.jsonl")]);
    assert!(total(&lines).get("costUSD").is_none());
}

#[test]
fn a_call_across_midnight_is_bucketed_by_the_zone_and_its_concluding_time() {
    let file = path("usage/midnight.v0.jsonl");
    let day = |args: &[&str], tz: &str| {
        let out = dshs()
            .args(["usage", "--format", "json", "--no-cost"])
            .args(args)
            .arg(&file)
            .env("TZ", tz)
            .output()
            .unwrap();
        assert!(out.status.success());
        json_lines(&out.stdout)[0]["key"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // Concluded by its message at 2026-11-30 15:00:05 UTC = 2026-12-01 00:00:05 in +09:00;
    // its usage chunk was written on the day before there.
    assert_eq!(day(&["-z", "+09:00"], "UTC"), "2026-12-01");
    assert_eq!(day(&["--timezone", "UTC"], "UTC"), "2026-11-30");
    // TZ decides without --timezone (a POSIX rule: no time zone database needed).
    assert_eq!(day(&[], "<+09>-9"), "2026-12-01");
    assert_eq!(day(&[], "UTC"), "2026-11-30");
    if std::path::Path::new("/usr/share/zoneinfo/Asia/Tokyo").exists() {
        assert_eq!(day(&["-z", "Asia/Tokyo"], "UTC"), "2026-12-01");
    }
    // --since and --until are dates in the same zone.
    let lines = usage(&["-z", "+09:00", "--since", "2026-12-01", &file]);
    assert_eq!(total(&lines)["calls"], 1);
    let lines = usage(&["-z", "+09:00", "--until", "2026-11-30", &file]);
    assert_eq!(total(&lines)["calls"], 0);
    let lines = usage(&["-z", "UTC", "--until", "2026-11-30", &file]);
    assert_eq!(total(&lines)["calls"], 1);
}

#[test]
fn each_call_is_priced_at_its_own_time_across_a_price_change() {
    let lines = usage(&["--by", "turn", &path("usage/price-change.v4.jsonl")]);
    // 12:14 UTC: 1M input at 0.14 + 1M cache read at 0.028; 12:16: cache read at 0.0028.
    assert_eq!(lines[0]["key"], "1");
    assert_eq!(lines[0]["costUSD"], json!(0.168));
    assert_eq!(lines[1]["key"], "2");
    assert_eq!(lines[1]["costUSD"], json!(0.1428));
    assert_eq!(total(&lines)["costUSD"], json!(0.3108));
}

#[test]
fn a_price_file_overrides_the_shipped_price() {
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.json");
    std::fs::write(
        &prices,
        r#"[{"model":"my-own-model","hit":1,"miss":1000,"output":1000}]"#,
    )
    .unwrap();
    let lines = usage(&[
        "--by",
        "model",
        "--pricing",
        prices.to_str().unwrap(),
        &path("usage/unpriced.v4.jsonl"),
    ]);
    let own = lines.iter().find(|l| l["key"] == "my-own-model").unwrap();
    // 500 input + 50 output at 1000 per 1M.
    assert_eq!(own["costUSD"], json!(0.55));
    assert_eq!(total(&lines)["unpricedTokens"], 0);
    std::fs::write(&prices, "[{\"model\":1}]").unwrap();
    dshs()
        .args(["usage", "--pricing", prices.to_str().unwrap()])
        .arg(path("usage/unpriced.v4.jsonl"))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--pricing"));
}

#[test]
fn json_rows_have_the_fields_of_the_contract() {
    let lines = usage(&[
        "--by",
        "session",
        "--breakdown",
        &path("usage/seeded-child.v4.jsonl"),
    ]);
    let row = &lines[0];
    let keys: Vec<&str> = row
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for k in [
        "type",
        "by",
        "key",
        "calls",
        "callsWithoutUsage",
        "inputTokens",
        "cacheReadTokens",
        "cacheWriteTokens",
        "outputTokens",
        "reasoningTokens",
        "totalTokens",
        "costUSD",
        "unpricedTokens",
        "models",
        "file",
        "session",
        "parentSession",
    ] {
        assert!(keys.contains(&k), "{k} missing from {row}");
    }
    assert_eq!(row["type"], "row");
    assert_eq!(row["by"], "session");
    assert_eq!(row["parentSession"], "usage-parent");
    let model = &lines[1];
    assert_eq!(model["type"], "model");
    assert_eq!(model["key"], row["key"]);
    assert_eq!(model["model"], "deepseek-v4-flash");
    assert_eq!(total(&lines)["sessions"], 1);
}

#[test]
fn by_turn_needs_one_session() {
    dshs()
        .args(["usage", "--by", "turn"])
        .arg(path("usage/root"))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--by turn needs one session"));
}

#[test]
fn the_table_fits_a_narrow_terminal_without_wrapping_numbers() {
    let out = dshs()
        .args(["usage", "--breakdown", &path("usage/price-change.v4.jsonl")])
        .env("COLUMNS", "40")
        .env("TZ", "UTC")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for line in text.lines().take_while(|l| !l.ends_with("session")) {
        assert!(line.chars().count() <= 40, "{line:?} in\n{text}");
    }
    assert!(text.contains("TOTAL") && text.contains("$0.3108"), "{text}");
    let wide = dshs()
        .args(["usage", &path("usage/price-change.v4.jsonl")])
        .env("TZ", "UTC")
        .output()
        .unwrap();
    let wide = String::from_utf8_lossy(&wide.stdout);
    assert!(
        wide.contains("CACHE WRITE") && wide.contains("MODELS"),
        "{wide}"
    );
}

/// Generated logs (the benchmark generator), cut into sessions at arbitrary lines: `--by
/// day`, `--by session` and `--by model` give the same grand total, which is the sum of
/// their rows.
mod grand_total {
    use super::*;
    use proptest::prelude::*;

    fn sessions_of(version: u8, seed: u64, size: u64, cuts: &[usize], dir: &std::path::Path) {
        let mut buf = Vec::new();
        generator::Generator::new(&mut buf, version, seed)
            .run(size)
            .expect("generate");
        let text = String::from_utf8(buf).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        let header: serde_json::Value = serde_json::from_str(lines.remove(0)).unwrap();
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (lines.len() + 1)).collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut start = 0;
        for (i, &end) in cuts.iter().chain([&lines.len()]).enumerate() {
            let mut h = header.clone();
            h["id"] = json!(format!("s{version}-{seed}-{i}"));
            let mut out = serde_json::to_string(&h).unwrap();
            out.push('\n');
            for l in &lines[start..end.max(start)] {
                out.push_str(l);
                out.push('\n');
            }
            start = end.max(start);
            let d = dir.join(format!("p/s{version}-{seed}-{i}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("session.jsonl"), out).unwrap();
        }
    }

    fn sums(lines: &[Value]) -> Vec<u64> {
        let keys = [
            "calls",
            "callsWithoutUsage",
            "inputTokens",
            "cacheReadTokens",
            "cacheWriteTokens",
            "outputTokens",
            "reasoningTokens",
            "totalTokens",
        ];
        let t = total(lines);
        let rows: Vec<&Value> = lines.iter().filter(|l| l["type"] == "row").collect();
        for k in keys {
            let sum: u64 = rows.iter().map(|r| r[k].as_u64().unwrap()).sum();
            assert_eq!(sum, t[k].as_u64().unwrap(), "{k}: rows add up to the total");
        }
        keys.iter().map(|k| t[k].as_u64().unwrap()).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]
        #[test]
        fn every_grouping_gives_the_same_grand_total(
            logs in prop::collection::vec((0u8..=4, 1u64..1000, prop::collection::vec(any::<usize>(), 0..4)), 1..4),
        ) {
            let dir = tempfile::tempdir().unwrap();
            for (version, seed, cuts) in &logs {
                sessions_of(*version, *seed, 30_000, cuts, dir.path());
            }
            let root = dir.path().display().to_string();
            let day = usage(&["--by", "day", "--no-cost", &root]);
            let session = usage(&["--by", "session", "--no-cost", &root]);
            let model = usage(&["--by", "model", "--no-cost", &root]);
            let (d, s, m) = (sums(&day), sums(&session), sums(&model));
            prop_assert!(d[0] > 0, "the generator writes calls");
            prop_assert_eq!(&d, &s);
            prop_assert_eq!(&d, &m);
        }
    }
}

//! `dshs surface`: the JSON document of CLI.md, the table, `--at SEQ` as a replay of the
//! log prefix, and the exit statuses (fold failure 1, unsupported 3, usage 2).

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{dshs, testdata};
use serde_json::Value;

/// `surface --format json` of a file: exit status, parsed document, stderr.
fn surface_json(path: &Path, extra: &[&str]) -> (i32, Option<Value>, String) {
    let out = dshs()
        .args(["surface", "--format", "json"])
        .args(extra)
        .arg(path)
        .output()
        .expect("runs");
    let code = out.status.code().expect("exit code");
    let doc = (code == 0).then(|| {
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("not one JSON document: {e}: {:?}", out.stdout))
    });
    (code, doc, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect()
}

fn seqs(doc: &Value) -> Vec<u64> {
    doc["nodes"]
        .as_array()
        .expect("nodes array")
        .iter()
        .map(|n| n["seq"].as_u64().expect("seq"))
        .collect()
}

/// The document has exactly the CLI.md shape.
fn assert_shape(doc: &Value) {
    assert_eq!(
        keys(doc),
        BTreeSet::from(["version", "nodes", "replaceGeneration", "replacements"])
    );
    for n in doc["nodes"].as_array().unwrap() {
        assert_eq!(
            keys(n),
            BTreeSet::from(["seq", "type", "op", "role"]),
            "{n}"
        );
        assert!(n["seq"].is_u64());
        assert!(
            ["append", "replace"].contains(&n["op"].as_str().unwrap()),
            "{n}"
        );
        assert!(n["type"].as_str().unwrap().contains('/'), "{n}");
        assert!(n["role"].is_string() || n["role"].is_null(), "{n}");
    }
    let reps = doc["replacements"].as_array().unwrap();
    for r in reps {
        assert_eq!(
            keys(r),
            BTreeSet::from(["seq", "startSeq", "endSeq", "shadowedSeqs"]),
            "{r}"
        );
        assert!(
            r["shadowedSeqs"]
                .as_array()
                .unwrap()
                .iter()
                .all(Value::is_u64)
        );
    }
    assert_eq!(
        doc["replaceGeneration"].as_u64().unwrap(),
        reps.len() as u64
    );
}

#[test]
fn sample_json_has_the_contract_shape() {
    let (code, doc, _) = surface_json(&testdata("sample/session.v4.jsonl"), &[]);
    assert_eq!(code, 0);
    let doc = doc.unwrap();
    assert_shape(&doc);
    assert_eq!(doc["version"], 4);
    assert_eq!(seqs(&doc), [7, 21, 13, 15, 24]);
    assert_eq!(
        doc["nodes"][1],
        serde_json::json!({"seq":21,"type":"user/message","op":"replace","role":"user"})
    );
    assert_eq!(
        doc["nodes"][3],
        serde_json::json!({"seq":15,"type":"tool/result","op":"append","role":"tool"})
    );
    assert_eq!(doc["replaceGeneration"], 1);
    assert_eq!(
        doc["replacements"],
        serde_json::json!([{"seq":21,"startSeq":8,"endSeq":9,"shadowedSeqs":[8,9]}])
    );
}

#[test]
fn nested_replacements_are_listed_in_order() {
    let (code, doc, _) = surface_json(&testdata("v3/nested-replace.jsonl"), &[]);
    assert_eq!(code, 0);
    let doc = doc.unwrap();
    assert_shape(&doc);
    assert_eq!(seqs(&doc), [2, 32, 27]);
    assert_eq!(
        doc["replacements"],
        serde_json::json!([
            {"seq":11,"startSeq":3,"endSeq":4,"shadowedSeqs":[3,4]},
            {"seq":15,"startSeq":11,"endSeq":5,"shadowedSeqs":[11,5]},
            {"seq":26,"startSeq":22,"endSeq":22,"shadowedSeqs":[22]},
            {"seq":32,"startSeq":15,"endSeq":26,"shadowedSeqs":[15,6,19,20,26]}
        ])
    );
}

/// `--at SEQ` equals the surface of the log cut right after SEQ, for every SEQ of a log
/// with nested replacements (a replace over an earlier replacement, endpoints out of
/// numeric order, a tool-result prune).
#[test]
fn at_seq_equals_the_truncated_log_for_every_seq() {
    let path = testdata("v3/nested-replace.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let dir = tempfile::tempdir().unwrap();
    let events = lines.len() - 1;
    for seq in 0..events {
        let cut = dir.path().join(format!("cut-{seq}.jsonl"));
        std::fs::write(&cut, lines[..seq + 2].join("\n") + "\n").unwrap();
        let (code, truncated, err) = surface_json(&cut, &[]);
        assert_eq!(code, 0, "truncated after {seq}: {err}");
        let (code, at, err) = surface_json(&path, &["--at", &seq.to_string()]);
        assert_eq!(code, 0, "--at {seq}: {err}");
        assert_eq!(at, truncated, "--at {seq}");
        // derive replays the same prefix.
        let derived_at = dshs()
            .args(["derive", "--at", &seq.to_string()])
            .arg(&path)
            .output()
            .unwrap();
        let derived_cut = dshs().arg("derive").arg(&cut).output().unwrap();
        assert!(derived_at.status.success());
        assert_eq!(derived_at.stdout, derived_cut.stdout, "derive --at {seq}");
    }
    // Spot checks of the replay itself.
    let at = |seq: &str| seqs(&surface_json(&path, &["--at", seq]).1.unwrap());
    assert_eq!(at("6"), [2, 3, 4, 5, 6]);
    assert_eq!(at("11"), [2, 11, 5, 6]);
    assert_eq!(at("15"), [2, 15, 6]);
    assert_eq!(at("26"), [2, 15, 6, 19, 20, 26]);
    assert_eq!(at("33"), [2, 32, 27]);
}

#[test]
fn at_past_the_last_event_is_a_usage_error() {
    let path = testdata("sample/session.v4.jsonl");
    let (code, _, err) = surface_json(&path, &["--at", "27"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no event with seq 27") && err.contains("last event is seq 26"),
        "{err}"
    );
    dshs()
        .args(["derive", "--at", "1000"])
        .arg(&path)
        .assert()
        .code(2)
        .stdout("");
    let (code, doc, _) = surface_json(&path, &["--at", "26"]);
    assert_eq!(code, 0);
    assert_eq!(doc, surface_json(&path, &[]).1);
}

fn write_log(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const V3_HEADER: &str = r#"{"type":"session","version":3,"id":"t","createdAt":1,"cwd":"/w","isSeeded":false,"delegationDepth":0}"#;

fn v3_user(seq: u64, text: &str, op: &str) -> String {
    format!(
        r#"{{"type":"user/message","seq":{seq},"time":1,"data":{{"content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}},"role":"user","id":"u{seq}"}},"surfaceOp":{op}}}"#
    )
}

#[test]
fn a_fold_rejection_exits_1_with_the_findings_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let log = [
        V3_HEADER.to_owned(),
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#.to_owned(),
        v3_user(1, "hi", r#""append""#),
        // Replaces a range that is not on the surface.
        v3_user(2, "x", r#"{"op":"replace","startSeq":0,"endSeq":1}"#)
            .replace(r#""surfaceOp""#, r#""sourceEventSeqs":[0,1],"surfaceOp""#),
        r#"{"type":"turn/end","seq":3,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}"#
            .to_owned(),
    ]
    .join("\n")
        + "\n";
    let p = write_log(dir.path(), "bad.jsonl", &log);
    for cmd in ["surface", "derive"] {
        let out = dshs().arg(cmd).arg(&p).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{cmd}");
        assert!(out.stdout.is_empty(), "{cmd} printed a surface");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("error[replace-start-not-on-surface] seq 2"),
            "{cmd}: {err}"
        );
        assert!(err.contains("cannot be folded"), "{cmd}: {err}");
        // Only what stops the fold is listed, not lifecycle chatter.
        assert!(!err.contains("warning["), "{cmd}: {err}");
    }
}

#[test]
fn fatal_damage_in_the_committed_region_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let log = [
        V3_HEADER,
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        "{not json",
        r#"{"type":"turn/end","seq":2,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ]
    .join("\n")
        + "\n";
    let p = write_log(dir.path(), "damaged.jsonl", &log);
    let (code, _, err) = surface_json(&p, &[]);
    assert_eq!(code, 1);
    assert!(err.contains("error[committed-unparsable]"), "{err}");
    // The same damage without a later turn end is a crash tail: dropped, not fatal.
    let tail = log.replace(
        r#"{"type":"turn/end","seq":2,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        "",
    );
    let p = write_log(dir.path(), "tail.jsonl", tail.trim_end_matches('\n'));
    let (code, doc, err) = surface_json(&p, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(seqs(&doc.unwrap()), Vec::<u64>::new());
}

#[test]
fn lifecycle_findings_do_not_stop_surface_or_derive() {
    let dir = tempfile::tempdir().unwrap();
    // Turn 2 without turn 1: a lifecycle error in v3.
    let log = [
        V3_HEADER.to_owned(),
        v3_user(0, "outside", r#""append""#),
        r#"{"type":"turn/start","seq":1,"time":1,"data":{"turn":2}}"#.to_owned(),
        r#"{"type":"turn/end","seq":2,"time":1,"data":{"turn":2,"reason":{"kind":"completed"}}}"#
            .to_owned(),
    ]
    .join("\n")
        + "\n";
    let p = write_log(dir.path(), "lifecycle.jsonl", &log);
    dshs().arg("validate").arg(&p).assert().code(1);
    let (code, doc, _) = surface_json(&p, &[]);
    assert_eq!(code, 0);
    assert_eq!(seqs(&doc.unwrap()), [0]);
    let out = dshs().args(["surface"]).arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("validate reports 1 error"));
}

#[test]
fn unsupported_logs_exit_3_and_missing_files_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_log(
        dir.path(),
        "v9.jsonl",
        "{\"type\":\"session\",\"version\":9,\"id\":\"x\",\"createdAt\":1,\"cwd\":\"/w\",\"delegationDepth\":0}\n",
    );
    for cmd in ["surface", "derive"] {
        let out = dshs().arg(cmd).arg(&p).output().unwrap();
        assert_eq!(out.status.code(), Some(3), "{cmd}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("format-version-unsupported"), "{err}");
        dshs()
            .arg(cmd)
            .arg(dir.path().join("missing.jsonl"))
            .assert()
            .code(2)
            .stderr(predicates::str::contains("dshs: error: cannot open"));
    }
    // An event type unknown to the version and not ignorable: unsupported, not corrupt.
    let log = format!(
        "{V3_HEADER}\n{}\n",
        r#"{"type":"future/thing","seq":0,"time":1,"data":{}}"#
    );
    let p = write_log(dir.path(), "unknown.jsonl", &log);
    let (code, _, err) = surface_json(&p, &[]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("unknown-event-type"), "{err}");
}

#[test]
fn table_lists_nodes_with_previews_and_a_summary() {
    let out = dshs()
        .args(["surface"])
        .arg(testdata("sample/session.v4.jsonl"))
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].contains("seq") && lines[0].contains("preview"),
        "{text}"
    );
    assert_eq!(lines.len(), 2 + 5 + 1, "{text}");
    assert!(
        lines[3].contains("21") && lines[3].contains("replace 8..9"),
        "{text}"
    );
    assert!(lines[4].contains("→ bash("), "{text}");
    assert!(lines[6].contains("COMPACTION RECOVERED"), "{text}");
    assert!(
        lines[7].ends_with("v4, 5 surface nodes after seq 26, replace generation 1"),
        "{text}"
    );
    for l in &lines[..7] {
        assert!(l.chars().count() <= 100, "wider than COLUMNS: {l}");
    }
    assert!(!text.contains('\x1b'), "no colour when not a terminal");
    // -q prints nothing at all (tests/shell.rs checks every command).
    let quiet = dshs()
        .args(["-q", "surface"])
        .arg(testdata("sample/session.v4.jsonl"))
        .output()
        .unwrap();
    assert!(quiet.stdout.is_empty() && quiet.status.success());
}

#[test]
fn table_colour_follows_the_colour_choice_and_json_is_never_coloured() {
    let path = testdata("sample/session.v4.jsonl");
    let coloured = dshs()
        .args(["--color", "always", "surface"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&coloured.stdout).contains('\x1b'));
    let json = dshs()
        .args(["--color", "always", "surface", "--format", "json"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&json.stdout).contains('\x1b'));
}

#[test]
fn log_text_in_the_table_is_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let log = format!(
        "{V3_HEADER}\n{}\n",
        v3_user(0, r"evil \u001b[2J\u0007 text\u202e", r#""append""#)
    );
    let p = write_log(dir.path(), "evil.jsonl", &log);
    let out = dshs().arg("surface").arg(&p).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains('\x1b') && !text.contains('\x07') && !text.contains('\u{202e}'));
    assert!(text.contains(r"evil \u{1b}[2J\u{7} text\u{202e}"), "{text}");
}

#[test]
fn standard_input_works_for_table_and_json() {
    let path = testdata("sample/session.v4.jsonl");
    let bytes = std::fs::read(&path).unwrap();
    let from_file = surface_json(&path, &[]).1;
    let out = dshs()
        .args(["surface", "--format", "json", "-"])
        .write_stdin(bytes.clone())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).ok(), from_file);
    let table = dshs()
        .args(["surface", "-"])
        .write_stdin(bytes)
        .output()
        .unwrap();
    assert!(table.status.success());
    assert!(String::from_utf8_lossy(&table.stdout).contains("COMPACTION RECOVERED"));
}

// Every shared fixture: the surface the shared README gives (seqs from tests/fixtures.rs).

enum Want {
    /// Exit 0 with these leading seqs and this many nodes.
    Nodes(&'static [u64], Option<usize>),
    /// Exit 1: the log cannot be folded.
    Invalid,
    /// Exit 3: a V4-draft log.
    Draft,
}

fn fixture(file: &str, want: Want) {
    let path = testdata(&format!("fixtures/{file}"));
    let (code, doc, err) = surface_json(&path, &[]);
    match want {
        Want::Nodes(prefix, count) => {
            assert_eq!(code, 0, "{file}: {err}");
            let doc = doc.unwrap();
            assert_shape(&doc);
            let got = seqs(&doc);
            assert_eq!(&got[..prefix.len().min(got.len())], prefix, "{file}");
            assert_eq!(got.len(), count.unwrap_or(prefix.len()), "{file}");
            // The table shows one row per node (plus header, rule and summary).
            let out = dshs().arg("surface").arg(&path).output().unwrap();
            assert!(out.status.success(), "{file}");
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).lines().count(),
                got.len() + 3,
                "{file}"
            );
        }
        Want::Invalid => {
            assert_eq!(code, 1, "{file}");
            assert!(err.contains(": error["), "{file}: {err}");
        }
        Want::Draft => {
            assert_eq!(code, 3, "{file}");
            assert!(err.contains("error[format-v4-draft]"), "{file}: {err}");
        }
    }
}

macro_rules! fixtures {
    ($($name:ident: $file:literal => $want:expr;)*) => {
        $(#[test] fn $name() { fixture($file, $want); })*
        const COVERED: &[&str] = &[$($file),*];
    };
}

#[test]
fn every_shared_fixture_has_a_surface_test() {
    for entry in std::fs::read_dir(testdata("fixtures")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            COVERED.contains(&name.as_str()),
            "no surface test for {name}"
        );
    }
}

fixtures! {
    fx_upstream_acp_snapshot_suite_plain_turn: "upstream__acp-snapshot__suite__plain-turn__session.concrete.jsonl" => Want::Invalid;
    fx_upstream_web_fresh_round_trip: "upstream__web__fresh-round-trip__session.concrete.jsonl" => Want::Invalid;
    fx_upstream_web_seeded_history_seed: "upstream__web__seeded-history__seed.concrete.jsonl" => Want::Invalid;
    fx_upstream_acp_agent_cancel_tool_calls: "upstream__acp-agent__cancel-tool-calls__session.concrete.jsonl" => Want::Nodes(&[4, 5, 17, 19, 21], None);
    fx_upstream_acp_agent_cancel: "upstream__acp-agent__cancel__session.concrete.jsonl" => Want::Nodes(&[4, 5, 11], None);
    fx_upstream_acp_agent_empty_response_retry: "upstream__acp-agent__empty-response-retry__session.concrete.jsonl" => Want::Nodes(&[4, 5, 18], None);
    fx_upstream_acp_agent_error_finish: "upstream__acp-agent__error-finish__session.concrete.jsonl" => Want::Nodes(&[4, 5], None);
    fx_upstream_acp_agent_max_tokens_continue: "upstream__acp-agent__max-tokens-continue__session.concrete.jsonl" => Want::Nodes(&[4, 5, 16, 23, 29], None);
    fx_upstream_acp_agent_multi_turn: "upstream__acp-agent__multi-turn__session.concrete.jsonl" => Want::Nodes(&[4, 5, 34, 41, 68], None);
    fx_upstream_acp_agent_packed_chunks: "upstream__acp-agent__packed-chunks__session.concrete.jsonl" => Want::Nodes(&[4, 5, 57, 61, 121], None);
    fx_upstream_acp_agent_parallel_tool_calls: "upstream__acp-agent__parallel-tool-calls__session.concrete.jsonl" => Want::Nodes(&[4, 5, 17, 20, 21, 29], None);
    fx_upstream_acp_agent_subagent_fork_in_process_1: "upstream__acp-agent__subagent-fork-in-process__session.1.concrete.jsonl" => Want::Nodes(&[4, 5, 39, 49, 50, 96], None);
    fx_upstream_acp_agent_subagent_fork_in_process: "upstream__acp-agent__subagent-fork-in-process__session.concrete.jsonl" => Want::Nodes(&[4, 5, 39, 46, 157, 159, 197], None);
    fx_upstream_acp_agent_text_turn: "upstream__acp-agent__text-turn__session.concrete.jsonl" => Want::Nodes(&[4, 5, 37], None);
    fx_upstream_acp_agent_todo_write: "upstream__acp-agent__todo-write__session.concrete.jsonl" => Want::Nodes(&[4, 5, 96, 99, 112], None);
    fx_upstream_acp_agent_tool_call_turn: "upstream__acp-agent__tool-call-turn__session.concrete.jsonl" => Want::Nodes(&[4, 5, 63, 65, 101], None);
    fx_upstream_headless_tool_outcome_unknown_replay: "upstream__headless__semantic-checkpoint-snapshots__tool-outcome-unknown__replay.raw.jsonl" => Want::Nodes(&[], None);
    fx_upstream_headless_tool_outcome_unknown_session: "upstream__headless__semantic-checkpoint-snapshots__tool-outcome-unknown__session.expected.concrete.jsonl" => Want::Nodes(&[1, 3, 5, 13, 21], None);
    fx_upstream_headless_compaction_recovery: "upstream__headless__snapshots__compaction-recovery__session.concrete.jsonl" => Want::Nodes(&[21, 13, 15, 28], None);
    fx_zdsh_vfs_preview_follow_up_builder_v2: "zdsh__vfs__preview-follow-up-builder__session.v2.raw.jsonl" => Want::Nodes(&[1, 4], None);
    fx_zdsh_cli_subagent_inheritance_child_replay_v3: "zdsh__cli__subagent-inheritance__child.replay.v3.raw.jsonl" => Want::Nodes(&[2, 3, 4, 6, 9], None);
    fx_zdsh_vfs_preview_architecture_review_v3: "zdsh__vfs__preview-architecture-review__session.v3.raw.jsonl" => Want::Nodes(&[1, 4, 8, 10, 14, 16, 20, 22, 26, 28, 32, 34], Some(58));
    fx_zdsh_vfs_preview_follow_up_builder_v3: "zdsh__vfs__preview-follow-up-builder__session.v3.raw.jsonl" => Want::Nodes(&[1, 4], None);
    fx_zdsh_snapshot_record_suite_rec_child_v3: "zdsh__snapshot__record-suite__rec-child__session.v3.concrete.jsonl" => Want::Nodes(&[2, 4], None);
    fx_zdsh_snapshot_suite_pin_turn_v3: "zdsh__snapshot__suite__pin-turn__session.v3.concrete.jsonl" => Want::Nodes(&[6], None);
    fx_zdsh_snapshot_suite_plain_turn_v3: "zdsh__snapshot__suite__plain-turn__session.v3.concrete.jsonl" => Want::Nodes(&[2], None);
    fx_shiguredo_sdk_text_turn_v4: "shiguredo__snapshots__sdk__text-turn__session.v4.concrete.jsonl" => Want::Nodes(&[7, 8, 9, 13], None);
    fx_wangnaiyu_vfs_preview_follow_up_builder_v4: "wangnaiyu__vfs__preview-follow-up-builder__session.v4.raw.jsonl" => Want::Nodes(&[1, 4], None);
    fx_wangnaiyu_sdk_text_turn_v4_draft: "wangnaiyu__snapshots__sdk__text-turn__session.v4.concrete.jsonl" => Want::Draft;
    fx_wangnaiyu_compaction_recovery_v4_draft: "wangnaiyu__snapshots__session__compaction-recovery__session.v4.concrete.jsonl" => Want::Draft;
    fx_zhengxuyu_sdk_text_turn_v4: "zhengxuyu__snapshots__sdk__text-turn__session.v4.concrete.jsonl" => Want::Nodes(&[7, 8, 9, 14], None);
    fx_zhengxuyu_compaction_recovery_v4: "zhengxuyu__snapshots__session__compaction-recovery__session.v4.concrete.jsonl" => Want::Nodes(&[7, 21, 13, 15, 24], None);
    fx_zhengxuyu_packed_chunks_writer_v4: "zhengxuyu__snapshots__session__packed-chunks__writer.expected.concrete.jsonl" => Want::Nodes(&[7, 8, 9, 13, 17, 20], None);
}

/// A v3 log of `n` user messages (texts of varied width), with every 50th replaced.
fn long_log(n: usize) -> String {
    let mut out = String::from(
        r#"{"type":"session","version":3,"id":"long","createdAt":1790000000000,"cwd":"/work","isSeeded":false,"delegationDepth":0}"#,
    );
    out.push('\n');
    let mut seq = 0;
    for i in 0..n {
        let text = format!(
            "message {i} {}",
            ["é", "日本語", "tab\\there", "x"][i % 4].repeat(i % 40)
        );
        out.push_str(&format!(
            r#"{{"type":"user/message","seq":{seq},"time":{seq},"data":{{"id":"u{seq}","role":"user","content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#
        ));
        out.push('\n');
        seq += 1;
        if i % 50 == 49 {
            let prev = seq - 1;
            out.push_str(&format!(
                r#"{{"type":"user/message","seq":{seq},"time":{seq},"data":{{"id":"r{seq}","role":"user","content":[{{"type":"text","text":"replaced {prev}"}}],"source":{{"kind":"user"}}}},"sourceEventSeqs":[{prev}],"surfaceOp":{{"op":"replace","startSeq":{prev},"endSeq":{prev}}}}}"#
            ));
            out.push('\n');
            seq += 1;
        }
    }
    out
}

#[test]
fn the_table_is_the_same_on_one_thread_and_on_two() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.jsonl");
    // 3,000 rows: twelve chunks of 256, more than the rows made ahead of the output.
    std::fs::write(&path, long_log(3000)).unwrap();
    let table = |threads: &str, columns: &str| {
        let out = dshs()
            .args(["surface"])
            .arg(&path)
            .env("DSHS_THREADS", threads)
            .env("COLUMNS", columns)
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .expect("runs");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    for columns in ["120", "40"] {
        let one = table("1", columns);
        assert_eq!(
            one.lines().count(),
            2 + 3000 + 1,
            "header, rule, rows, summary"
        );
        assert!(one.contains("replace 49..49"), "{one}");
        assert_eq!(table("2", columns), one, "COLUMNS={columns}");
    }
}

#[test]
fn a_slow_first_chunk_of_rows_does_not_stall_the_table() {
    // The first 256 rows preview 100 KB messages, the 3,000 after them short ones: the rows
    // after the first chunk are all made while it is, and the output must still go on (it
    // once waited for rows nobody was making).
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::from(
        r#"{"type":"session","version":3,"id":"slow","createdAt":1790000000000,"cwd":"/work","isSeeded":false,"delegationDepth":0}"#,
    );
    log.push('\n');
    let big = "word ".repeat(20_000);
    for seq in 0..3256u64 {
        let text = if seq < 256 { big.as_str() } else { "short" };
        log.push_str(&format!(
            r#"{{"type":"user/message","seq":{seq},"time":{seq},"data":{{"id":"u{seq}","role":"user","content":[{{"type":"text","text":"{seq} {text}"}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#
        ));
        log.push('\n');
    }
    let path = dir.path().join("slow.jsonl");
    std::fs::write(&path, log).unwrap();
    let out = dshs()
        .args(["surface"])
        .arg(&path)
        .env("DSHS_THREADS", "2")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let table = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        table.lines().count(),
        2 + 3256 + 1,
        "header, rule, rows, summary"
    );
    assert!(
        table.contains(" 3255 │ user/message"),
        "{}",
        &table[table.len() - 500..]
    );
}

/// Issue 37 item 16: a fork child's log starts with the events it inherited, closed by a
/// `session/end-seed {inherited:true}` marker. `--at` inside that prefix is a replay of the
/// prefix, not a log that lacks the marker: every seq of a valid seeded log folds, with
/// `surface` and `derive` alike; the whole log missing its marker is still refused.
#[test]
fn at_inside_a_fork_child_s_inherited_prefix_folds() {
    let path = testdata("fixtures/zdsh__vfs__preview-architecture-review__session.v3.raw.jsonl");
    dshs().arg("validate").arg(&path).assert().success();
    let text = std::fs::read_to_string(&path).unwrap();
    let marker = text
        .lines()
        .position(|l| l.contains("\"session/end-seed\""))
        .expect("an end-seed marker");
    // Seqs are assigned in line order from 0 after the header.
    for seq in [0, 3, marker - 2, marker - 1, marker + 2] {
        let (code, doc, err) = surface_json(&path, &["--at", &seq.to_string()]);
        assert_eq!(code, 0, "--at {seq}: {err}");
        assert!(doc.is_some());
        let derived = dshs()
            .args(["derive", "--at", &seq.to_string()])
            .arg(&path)
            .output()
            .unwrap();
        assert!(derived.status.success(), "derive --at {seq}");
    }
    // The same prefix as a log of its own does lack its marker.
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.jsonl");
    let prefix: Vec<&str> = text.lines().take(5).collect();
    std::fs::write(&cut, prefix.join("\n") + "\n").unwrap();
    let (code, _, err) = surface_json(&cut, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("seed-marker-mismatch"), "{err}");
}

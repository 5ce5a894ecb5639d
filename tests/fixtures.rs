//! Every shared DSH fixture (copied into testdata/fixtures) gets the verdict, surface and
//! open-turn state that ../shared/fixtures/README.md gives it. V4-draft logs are reported as
//! unsupported (README: "expected to be reported as an unsupported draft format").

mod common;

use common::{dshs, json_lines, scan_file, testdata};
use dshs::log::scan::Status;

fn check(
    file: &str,
    status: Status,
    seqs: Option<&[u64]>,
    node_count: Option<usize>,
    open_turn: bool,
) {
    let path = testdata(&format!("fixtures/{file}"));
    let (scan, findings) = scan_file(&path);
    assert_eq!(scan.status(), status, "{file}: {findings:#?}");
    if status == Status::Valid {
        assert_eq!(scan.tally.errors, 0, "{file}: {findings:#?}");
    }
    if let (Some(want), Some(state)) = (seqs, &scan.state) {
        let got = state.surface.seqs();
        assert_eq!(&got[..want.len().min(got.len())], want, "{file} surface");
        assert_eq!(
            got.len(),
            node_count.unwrap_or(want.len()),
            "{file} surface length"
        );
    }
    if scan.state.is_some() {
        assert_eq!(scan.open_turn(), open_turn, "{file} open turn");
    }
    if status == Status::Unsupported {
        assert!(
            findings
                .iter()
                .any(|f| f.code.as_str() == "format-v4-draft"),
            "{file}: {findings:#?}"
        );
    }
    // The same verdict through the CLI, with the exit status of the contract.
    let exit = match status {
        Status::Valid => 0,
        Status::Invalid => 1,
        Status::Unsupported => 3,
        Status::Unreadable => 2,
    };
    let out = dshs()
        .args(["validate", "--format", "json"])
        .arg(&path)
        .assert()
        .code(exit);
    let records = json_lines(&out.get_output().stdout);
    let summary = records.last().expect("summary line");
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["status"], status.as_str());
    if scan.state.is_some() {
        assert_eq!(summary["openTurn"], open_turn);
        assert_eq!(summary["surfaceNodes"], scan.surface_nodes());
    }
}

macro_rules! fixture {
    ($name:ident, $file:literal, $status:expr, $seqs:expr, $count:expr, $open:expr) => {
        #[test]
        fn $name() {
            check($file, $status, $seqs, $count, $open);
        }
    };
}

fixture!(
    upstream_acp_snapshot_suite_plain_turn_session_concrete,
    "upstream__acp-snapshot__suite__plain-turn__session.concrete.jsonl",
    Status::Invalid,
    None,
    None,
    false
); // vnone: NEGATIVE: synthetic suite file, header has no version, request/header lacks provider
fixture!(
    upstream_web_fresh_round_trip_session_concrete,
    "upstream__web__fresh-round-trip__session.concrete.jsonl",
    Status::Invalid,
    None,
    None,
    false
); // v0: LEGACY pre-identity v0 shapes: turn/start.trigger, request/header.messagePrefix, assistant
fixture!(
    upstream_web_seeded_history_seed_concrete,
    "upstream__web__seeded-history__seed.concrete.jsonl",
    Status::Invalid,
    None,
    None,
    false
); // v0: LEGACY pre-identity v0 shapes (as above), packed rows
fixture!(
    upstream_acp_agent_cancel_tool_calls_session_concrete,
    "upstream__acp-agent__cancel-tool-calls__session.concrete.jsonl",
    Status::Valid,
    Some(&[4, 5, 17, 19, 21]),
    None,
    false
); // v0: cancelled parallel calls: \"tool call aborted\" and \"aborted before dispatch\" error resu
fixture!(
    upstream_acp_agent_cancel_session_concrete,
    "upstream__acp-agent__cancel__session.concrete.jsonl",
    Status::Valid,
    Some(&[4, 5, 11]),
    None,
    false
); // v0: cancelled turn: turn/end {aborted, reason:{kind:user}}
fixture!(
    upstream_acp_agent_empty_response_retry_session_concrete,
    "upstream__acp-agent__empty-response-retry__session.concrete.jsonl",
    Status::Valid,
    Some(&[4, 5, 18]),
    None,
    false
); // v0: llm/retry after empty response
fixture!(
    upstream_acp_agent_error_finish_session_concrete,
    "upstream__acp-agent__error-finish__session.concrete.jsonl",
    Status::Valid,
    Some(&[4, 5]),
    None,
    false
); // v0: provider error: finish{error} chunk, turn/end {error}
fixture!(
    upstream_acp_agent_max_tokens_continue_session_concrete,
    "upstream__acp-agent__max-tokens-continue__session.concrete.jsonl",
    Status::Valid,
    Some(&[4, 5, 16, 23, 29]),
    None,
    false
); // v0: max-tokens finish; truncated tool-call block dropped; turn/end {max-tokens}; replayState i
fixture!(
    upstream_acp_agent_multi_turn_session_concrete,
    "upstream__acp-agent__multi-turn__session.concrete.jsonl",
    Status::Valid,
    Some(&[4, 5, 34, 41, 68]),
    None,
    false
); // v0: several turns
fixture!(
    upstream_acp_agent_packed_chunks_session_concrete,
    "upstream__acp-agent__packed-chunks__session.concrete.jsonl",
    Status::Valid,
    Some(&[4, 5, 57, 61, 121]),
    None,
    false
); // v0: text/reasoning/tool-call packed rows; long sourceEventSeqs arrays
fixture!(
    upstream_acp_agent_parallel_tool_calls_session_concrete,
    "upstream__acp-agent__parallel-tool-calls__session.concrete.jsonl",
    Status::Valid,
    Some(&[4, 5, 17, 20, 21, 29]),
    None,
    false
); // v0: two tool calls in one step
fixture!(
    upstream_acp_agent_subagent_fork_in_process_session_1_concrete,
    "upstream__acp-agent__subagent-fork-in-process__session.1.concrete.jsonl",
    Status::Valid,
    Some(&[4, 5, 39, 49, 50, 96]),
    None,
    false
); // v0: fork child: header parentSession + seedLength:42 + origin subagent + delegationDepth 1; un
fixture!(
    upstream_acp_agent_subagent_fork_in_process_session_concrete,
    "upstream__acp-agent__subagent-fork-in-process__session.concrete.jsonl",
    Status::Valid,
    Some(&[4, 5, 39, 46, 157, 159, 197]),
    None,
    false
); // v0: parent session spawning a fork child
fixture!(
    upstream_acp_agent_text_turn_session_concrete,
    "upstream__acp-agent__text-turn__session.concrete.jsonl",
    Status::Valid,
    Some(&[4, 5, 37]),
    None,
    false
); // v0: single text turn; packed reasoning rows
fixture!(
    upstream_acp_agent_todo_write_session_concrete,
    "upstream__acp-agent__todo-write__session.concrete.jsonl",
    Status::Valid,
    Some(&[4, 5, 96, 99, 112]),
    None,
    false
); // v0: todo/write events
fixture!(
    upstream_acp_agent_tool_call_turn_session_concrete,
    "upstream__acp-agent__tool-call-turn__session.concrete.jsonl",
    Status::Valid,
    Some(&[4, 5, 63, 65, 101]),
    None,
    false
); // v0: tool call + result, packed rows
fixture!(
    upstream_headless_semantic_checkpoint_snapshots_tool_outcome_unknown_replay_raw,
    "upstream__headless__semantic-checkpoint-snapshots__tool-outcome-unknown__replay.raw.jsonl",
    Status::Valid,
    Some(&[]),
    None,
    false
); // v0: header-only replay input (99 bytes)
fixture!(
    upstream_headless_semantic_checkpoint_snapshots_tool_outcome_unknown_session_expected_concrete,
    "upstream__headless__semantic-checkpoint-snapshots__tool-outcome-unknown__session.expected.concrete.jsonl",
    Status::Valid,
    Some(&[1, 3, 5, 13, 21]),
    None,
    false
); // v0: CRASH REPAIR result: closer tool/result TOOL_OUTCOME_UNKNOWN (id interrupted-tool-result-u
fixture!(
    upstream_headless_snapshots_compaction_recovery_session_concrete,
    "upstream__headless__snapshots__compaction-recovery__session.concrete.jsonl",
    Status::Valid,
    Some(&[21, 13, 15, 28]),
    None,
    false
); // v0: context overflow -> compaction/start, compaction/summary, replacing user/message (plugin c
fixture!(
    zdsh_vfs_preview_follow_up_builder_session_v2_raw,
    "zdsh__vfs__preview-follow-up-builder__session.v2.raw.jsonl",
    Status::Valid,
    Some(&[1, 4]),
    None,
    false
); // v2: subagent child (continuable descriptor); v2 and v3 copies are identical apart from the hea
fixture!(
    zdsh_cli_subagent_inheritance_child_replay_v3_raw,
    "zdsh__cli__subagent-inheritance__child.replay.v3.raw.jsonl",
    Status::Valid,
    Some(&[2, 3, 4, 6, 9]),
    None,
    false
); // v3: empty system head (content []); v3 tool/result with tool-result wrapper and error FS_SANDB
fixture!(
    zdsh_vfs_preview_architecture_review_session_v3_raw,
    "zdsh__vfs__preview-architecture-review__session.v3.raw.jsonl",
    Status::Valid,
    Some(&[1, 4, 8, 10, 14, 16, 20, 22, 26, 28, 32, 34]),
    Some(58),
    false
); // v3: seeded subagent child (isSeeded:true); inherited marker session/end-seed {inherited:true} 
fixture!(
    zdsh_vfs_preview_follow_up_builder_session_v3_raw,
    "zdsh__vfs__preview-follow-up-builder__session.v3.raw.jsonl",
    Status::Valid,
    Some(&[1, 4]),
    None,
    false
); // v3: subagent child (continuable descriptor); v2 and v3 copies are identical apart from the hea
fixture!(
    zdsh_snapshot_record_suite_rec_child_session_v3_concrete,
    "zdsh__snapshot__record-suite__rec-child__session.v3.concrete.jsonl",
    Status::Valid,
    Some(&[2, 4]),
    None,
    true
); // v3: open turn; system head then user message
fixture!(
    zdsh_snapshot_suite_pin_turn_session_v3_concrete,
    "zdsh__snapshot__suite__pin-turn__session.v3.concrete.jsonl",
    Status::Valid,
    Some(&[6]),
    None,
    true
); // v3: system head replaced by a second system/message (replace{startSeq:2,endSeq:2}); request/he
fixture!(
    zdsh_snapshot_suite_plain_turn_session_v3_concrete,
    "zdsh__snapshot__suite__plain-turn__session.v3.concrete.jsonl",
    Status::Valid,
    Some(&[2]),
    None,
    true
); // v3: assistant/attempt with embedded stream; open turn (tail without turn/end)
fixture!(
    shiguredo_snapshots_sdk_text_turn_session_v4_concrete,
    "shiguredo__snapshots__sdk__text-turn__session.v4.concrete.jsonl",
    Status::Valid,
    Some(&[7, 8, 9, 13]),
    None,
    false
); // v4: later finalized v4 (no delivery marker; runtime-context with working-directory section)
fixture!(
    wangnaiyu_vfs_preview_follow_up_builder_session_v4_raw,
    "wangnaiyu__vfs__preview-follow-up-builder__session.v4.raw.jsonl",
    Status::Valid,
    Some(&[1, 4]),
    None,
    false
); // v4: same events as the zsagi v2/v3 copies, header version 4
fixture!(
    wangnaiyu_snapshots_sdk_text_turn_session_v4_concrete,
    "wangnaiyu__snapshots__sdk__text-turn__session.v4.concrete.jsonl",
    Status::Unsupported,
    Some(&[8, 14]),
    None,
    false
); // v4: V4-draft counterpart (system source {kind:plugin,...})
fixture!(
    wangnaiyu_snapshots_session_compaction_recovery_session_v4_concrete,
    "wangnaiyu__snapshots__session__compaction-recovery__session.v4.concrete.jsonl",
    Status::Unsupported,
    Some(&[8, 13, 24]),
    None,
    false
); // v4: V4-draft counterpart of the zhengxuyu file (plugin sources, wrapped tool result)
fixture!(
    zhengxuyu_snapshots_sdk_text_turn_session_v4_concrete,
    "zhengxuyu__snapshots__sdk__text-turn__session.v4.concrete.jsonl",
    Status::Valid,
    Some(&[7, 8, 9, 14]),
    None,
    false
); // v4: finalized v4 text turn; delivery-accepted marker sessionFormatVersion 4; feedback events
fixture!(
    zhengxuyu_snapshots_session_compaction_recovery_session_v4_concrete,
    "zhengxuyu__snapshots__session__compaction-recovery__session.v4.concrete.jsonl",
    Status::Valid,
    Some(&[7, 21, 13, 15, 24]),
    None,
    false
); // v4: finalized v4 compaction: checkpoint user/message source {kind:compact-checkpoint}, replace
fixture!(
    zhengxuyu_snapshots_session_packed_chunks_writer_expected_concrete,
    "zhengxuyu__snapshots__session__packed-chunks__writer.expected.concrete.jsonl",
    Status::Valid,
    Some(&[7, 8, 9, 13, 17, 20]),
    None,
    false
); // v4: finalized v4; hook/invoked + hook/result; error tool result role:tool isError:true

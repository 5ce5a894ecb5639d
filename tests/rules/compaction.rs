//! §15.4 compaction rules: the bracket agrees with itself and with the surface (v3+,
//! errors); an unfinished compaction is a warning in every version; an end-seed expires it.

use dshs::log::{Severity, Status};

use crate::build::{APPEND, Log, Run};

/// The parts of a compaction bracket a test may change.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Part {
    Start,
    Summary,
    Checkpoint,
    End,
}

/// Surface nodes before the compaction: (system head if v3+, user, assistant).
struct Setup {
    log: Log,
    head: Option<u64>,
    user: u64,
    assistant: u64,
}

fn setup(v: u8) -> Setup {
    let mut log = Log::new(v);
    log.turn_start(1);
    log.step_start(1, 1);
    let head = (v >= 3).then(|| log.system(1, 1));
    let user = log.user("please summarise");
    let assistant = log.assistant(1, 1, &[]);
    log.step_end(1, 1);
    log.turn_end(1);
    Setup {
        log,
        head,
        user,
        assistant,
    }
}

/// A complete compaction of the user and assistant nodes, between turns or (`in_turn`)
/// inside turn 2. `edit` may change a part's data (JSON text) or drop it (`None`).
fn compacted(v: u8, in_turn: bool, edit: &dyn Fn(Part, String) -> Option<String>) -> Log {
    let Setup {
        mut log,
        user,
        assistant,
        ..
    } = setup(v);
    if in_turn {
        log.turn_start(2);
    }
    let turn = if in_turn { "2" } else { "null" };
    // The checkpoint cites the start and summary events that exist, then the nodes.
    let mut cited = Vec::new();
    if let Some(d) = edit(
        Part::Start,
        format!(r#"{{"compactionId":"k1","turn":{turn}}}"#),
    ) {
        cited.push(log.ev("compaction/start", &d, ""));
    }
    let summary = format!(
        r#"{{"compactionId":"k1","summary":[{{"type":"text","text":"sum"}}],"shadowedRange":{{"start":{user},"end":{assistant}}},"shadowedSeqs":[{user},{assistant}],"shadowedTokenCount":10,"provider":"p","model":"m"}}"#
    );
    if let Some(d) = edit(Part::Summary, summary) {
        cited.push(log.ev("compaction/summary", &d, ""));
    }
    cited.extend([user, assistant]);
    let cited: Vec<String> = cited.iter().map(u64::to_string).collect();
    let cited = cited.join(",");
    let source = if v >= 4 {
        r#"{"kind":"compact-checkpoint","compactionId":"k1"}"#
    } else {
        r#"{"kind":"plugin","plugin":"compact","compactionId":"k1"}"#
    };
    let (s, e) = if v >= 3 {
        ("startSeq", "endSeq")
    } else {
        ("start", "end")
    };
    let checkpoint = format!(
        r#"{{"content":[{{"type":"text","text":"<compacted-summary>sum</compacted-summary>"}}],"source":{source},"role":"user","id":"cp"}}"#
    );
    if let Some(d) = edit(Part::Checkpoint, checkpoint) {
        log.ev(
            "user/message",
            &d,
            &format!(
                r#","sourceEventSeqs":[{cited}],"surfaceOp":{{"op":"replace","{s}":{user},"{e}":{assistant}}}"#
            ),
        );
    }
    if let Some(d) = edit(
        Part::End,
        format!(r#"{{"compactionId":"k1","turn":{turn}}}"#),
    ) {
        log.ev("compaction/end", &d, "");
    }
    if in_turn {
        log.turn_end(2);
    }
    log
}

fn keep(_: Part, d: String) -> Option<String> {
    Some(d)
}

/// Apply `f` to one part only.
fn on(part: Part, f: impl Fn(String) -> Option<String>) -> impl Fn(Part, String) -> Option<String> {
    move |p, d| if p == part { f(d) } else { Some(d) }
}

fn sub(from: &'static str, to: &'static str) -> impl Fn(String) -> Option<String> {
    move |d: String| {
        assert!(d.contains(from), "{from} not in {d}");
        Some(d.replacen(from, to, 1))
    }
}

/// v3+: exactly `codes` (errors); v0–v2: the same log is clean.
#[track_caller]
fn refused_from_v3(in_turn: bool, edit: &dyn Fn(Part, String) -> Option<String>, codes: &[&str]) {
    for v in 0..=4u8 {
        let r = compacted(v, in_turn, edit).scan();
        if v >= 3 {
            assert_eq!(r.codes(), codes, "v{v}");
            assert!(r.findings.iter().all(|f| f.severity == Severity::Error));
            assert_eq!(r.status(), Status::Invalid);
        } else {
            r.assert_clean();
        }
    }
}

#[test]
fn a_well_formed_compaction_is_clean_in_every_version() {
    for v in 0..=4u8 {
        for in_turn in [false, true] {
            let r = compacted(v, in_turn, &keep).scan();
            r.assert_clean();
            let s = setup(v);
            let checkpoint = s.log.seq() + 2 + u64::from(in_turn);
            let want: Vec<u64> = s.head.into_iter().chain([checkpoint]).collect();
            assert_eq!(r.surface(), want, "v{v}");
        }
    }
    // A sourceCommandId repeated on every part is fine.
    for v in 0..=4u8 {
        let cmd = |_: Part, d: String| {
            Some(d.replacen(
                r#""compactionId":"k1""#,
                r#""compactionId":"k1","sourceCommandId":"cmd""#,
                1,
            ))
        };
        compacted(v, false, &cmd).scan().assert_clean();
    }
}

#[test]
fn compaction_ids_must_agree() {
    refused_from_v3(
        false,
        &on(Part::Summary, sub(r#""k1""#, r#""k2""#)),
        &["compaction-mismatch"],
    );
    refused_from_v3(
        false,
        &on(Part::End, sub(r#""k1""#, r#""k2""#)),
        &["compaction-mismatch"],
    );
    refused_from_v3(
        false,
        &on(Part::End, sub(r#""k1""#, "7")),
        &["compaction-mismatch"],
    );
}

#[test]
fn source_command_ids_must_agree() {
    // Only the start names a command: the summary and the end disagree with it.
    refused_from_v3(
        false,
        &on(
            Part::Start,
            sub(r#""k1""#, r#""k1","sourceCommandId":"cmd""#),
        ),
        &["compaction-mismatch", "compaction-mismatch"],
    );
    // Only the end names one.
    refused_from_v3(
        false,
        &on(Part::End, sub(r#""k1""#, r#""k1","sourceCommandId":"cmd""#)),
        &["compaction-mismatch"],
    );
}

#[test]
fn the_turn_context_is_the_open_turn_inside_a_turn_and_null_outside() {
    // Outside any turn the start says null; inside, the open turn's number.
    refused_from_v3(
        false,
        &|p, d: String| {
            Some(if matches!(p, Part::Start | Part::End) {
                d.replace("null", "1")
            } else {
                d
            })
        },
        &["compaction-mismatch"],
    );
    refused_from_v3(
        true,
        &|p, d: String| {
            Some(if matches!(p, Part::Start | Part::End) {
                d.replace(r#""turn":2"#, r#""turn":null"#)
            } else {
                d
            })
        },
        &["compaction-mismatch"],
    );
    refused_from_v3(
        true,
        &|p, d: String| {
            Some(if matches!(p, Part::Start | Part::End) {
                d.replace(r#""turn":2"#, r#""turn":3"#)
            } else {
                d
            })
        },
        &["compaction-mismatch"],
    );
    // A missing turn is not null.
    refused_from_v3(
        false,
        &|p, d: String| {
            Some(if matches!(p, Part::Start | Part::End) {
                d.replace(r#","turn":null"#, "")
            } else {
                d
            })
        },
        &["compaction-mismatch"],
    );
    // The end repeats the start's context.
    refused_from_v3(
        true,
        &on(Part::End, sub(r#""turn":2"#, r#""turn":null"#)),
        &["compaction-mismatch"],
    );
    refused_from_v3(
        false,
        &on(Part::End, sub(r#""turn":null"#, r#""turn":1"#)),
        &["compaction-mismatch"],
    );
}

#[test]
fn parts_without_an_active_compaction_and_overlapping_starts() {
    for v in 3..=4u8 {
        let r = compacted(v, false, &on(Part::Start, |_| None)).scan();
        let mut want = vec!["compaction-mismatch"];
        if v == 4 {
            want.push("compaction-checkpoint-source");
        }
        want.push("compaction-mismatch");
        assert_eq!(r.codes(), want, "v{v}");
    }
    // A start while another compaction runs.
    for v in 0..=4u8 {
        let mut log = compacted(v, false, &on(Part::End, |_| None));
        log.ev(
            "compaction/start",
            r#"{"compactionId":"k2","turn":null}"#,
            "",
        );
        log.ev(
            "compaction/end",
            r#"{"compactionId":"k2","turn":null,"error":"aborted"}"#,
            "",
        );
        let r = log.scan();
        if v >= 3 {
            assert_eq!(r.codes(), ["compaction-mismatch"], "v{v}");
            assert!(r.findings[0].message.contains("still active"));
        } else {
            r.assert_clean();
        }
    }
}

#[test]
fn a_span_names_exactly_the_surface_nodes_between_its_endpoints() {
    let span = |range: &'static str, seqs: &'static str| {
        move |p: Part, d: String| {
            if p != Part::Summary {
                return Some(d);
            }
            let s = setup(4); // same seqs for v3 and v4
            let d = d
                .replace(
                    &format!(r#""start":{},"end":{}"#, s.user, s.assistant),
                    range,
                )
                .replace(
                    &format!(r#""shadowedSeqs":[{},{}]"#, s.user, s.assistant),
                    seqs,
                );
            Some(d)
        }
    };
    // setup(3|4): turn/start 0, step/start 1, system 2, user 3, assistant 4.
    let cases = [
        (r#""start":3,"end":4"#, r#""shadowedSeqs":[3]"#),
        (r#""start":3,"end":4"#, r#""shadowedSeqs":[4,3]"#),
        (r#""start":3,"end":4"#, r#""shadowedSeqs":[3,4,5]"#),
        (r#""start":3,"end":4"#, r#""shadowedSeqs":"3-4""#),
        (r#""start":3,"end":4"#, r#""shadowedCount":2"#),
        (r#""start":9,"end":4"#, r#""shadowedSeqs":[3,4]"#),
        (r#""start":3,"end":9"#, r#""shadowedSeqs":[3,4]"#),
        (r#""start":4,"end":3"#, r#""shadowedSeqs":[3,4]"#),
        (r#""start":0,"end":4"#, r#""shadowedSeqs":[0,1,2,3,4]"#),
        (r#""begin":3,"end":4"#, r#""shadowedSeqs":[3,4]"#),
        // Covering the protected system head (the checkpoint itself still replaces 3..4).
        (r#""start":2,"end":4"#, r#""shadowedSeqs":[2,3,4]"#),
    ];
    for (range, seqs) in cases {
        for v in 3..=4u8 {
            let r = compacted(v, false, &span(range, seqs)).scan();
            assert_eq!(
                r.codes(),
                ["compaction-span-invalid"],
                "v{v} {range} {seqs}"
            );
        }
    }
    let r = compacted(
        3,
        false,
        &span(r#""start":2,"end":4"#, r#""shadowedSeqs":[2,3,4]"#),
    )
    .scan();
    assert!(
        r.findings[0].message.contains("system head"),
        "{}",
        r.findings[0].message
    );
    // v0–v2 do not check spans.
    for v in 0..=2u8 {
        let r = compacted(v, false, &|p, d: String| {
            if p != Part::Summary {
                return Some(d);
            }
            assert!(d.contains(r#""shadowedSeqs":[2,3]"#), "{d}");
            Some(d.replace(r#""shadowedSeqs":[2,3]"#, r#""shadowedSeqs":[9]"#))
        })
        .scan();
        r.assert_clean();
    }
}

#[test]
fn a_prune_span_follows_the_same_rule() {
    for v in 0..=4u8 {
        for (listed, ok) in [("[R]", true), ("[]", false), ("[R,R]", false)] {
            let mut log = Log::new(v);
            log.tool_turn(1, "c1");
            let r = log.seq() - 3; // the result of turn 1
            let listed = listed.replace('R', &r.to_string());
            log.turn_start(2);
            log.ev(
                "compaction/prune",
                &format!(r#"{{"shadowedRange":{{"start":{r},"end":{r}}},"shadowedSeqs":{listed},"shadowedTokenCount":1}}"#),
                "",
            );
            let (s, e) = if v >= 3 {
                ("startSeq", "endSeq")
            } else {
                ("start", "end")
            };
            let data = crate::build::tool_result_data(v, &format!("r{r}"), 1, 1, "c1", "[pruned]");
            log.ev(
                "tool/result",
                &data,
                &format!(
                    r#","sourceEventSeqs":[{r}],"surfaceOp":{{"op":"replace","{s}":{r},"{e}":{r}}}"#
                ),
            );
            log.turn_end(2);
            let run = log.scan();
            if ok || v < 3 {
                run.assert_clean();
            } else {
                assert_eq!(run.codes(), ["compaction-span-invalid"], "v{v} {listed}");
            }
        }
    }
}

#[test]
fn a_successful_compaction_has_exactly_one_summary() {
    // No summary (and no checkpoint).
    refused_from_v3(
        false,
        &|p, d| {
            if matches!(p, Part::Summary | Part::Checkpoint) {
                None
            } else {
                Some(d)
            }
        },
        &["compaction-summary-count"],
    );
    // A failed attempt has none, and that is fine.
    for v in 0..=4u8 {
        let failed = |p: Part, d: String| match p {
            Part::Summary | Part::Checkpoint => None,
            Part::End => {
                Some(d.replace(r#""turn":null"#, r#""turn":null,"error":"model refused""#))
            }
            Part::Start => Some(d),
        };
        let r = compacted(v, false, &failed).scan();
        r.assert_clean();
        assert_eq!(
            r.scan.state.as_ref().map(|s| s.compaction.compactions),
            Some(0)
        );
    }
    // Two summaries.
    for v in 0..=4u8 {
        let mut log = compacted(v, false, &on(Part::End, |_| None));
        let seqs = {
            let s = setup(v);
            // the checkpoint replaced user..assistant; the surface is [head?, checkpoint]
            s.log.seq() + 2
        };
        log.ev(
            "compaction/summary",
            &format!(
                r#"{{"compactionId":"k1","summary":[],"shadowedRange":{{"start":{seqs},"end":{seqs}}},"shadowedSeqs":[{seqs}],"shadowedTokenCount":1,"provider":"p","model":"m"}}"#
            ),
            "",
        );
        log.ev("compaction/end", r#"{"compactionId":"k1","turn":null}"#, "");
        let r = log.scan();
        if v >= 3 {
            assert_eq!(r.codes(), ["compaction-summary-count"], "v{v}");
            assert!(r.findings[0].message.contains("2 summaries"));
        } else {
            r.assert_clean();
        }
    }
}

#[test]
fn a_v4_checkpoint_names_the_active_compaction() {
    for v in 3..=4u8 {
        let other = |p: Part, d: String| {
            Some(if p == Part::Checkpoint {
                d.replace(r#""compactionId":"k1""#, r#""compactionId":"k2""#)
            } else {
                d
            })
        };
        let r = compacted(v, false, &other).scan();
        if v == 4 {
            assert_eq!(r.codes(), ["compaction-checkpoint-source"]);
            assert_eq!(r.status(), Status::Invalid);
        } else {
            // v3 checkpoints are plugin-sourced messages; nothing to check.
            r.assert_clean();
        }
        let nameless = |p: Part, d: String| {
            Some(if p == Part::Checkpoint {
                d.replace(r#","compactionId":"k1""#, "")
            } else {
                d
            })
        };
        let want: &[&str] = if v == 4 {
            &["compaction-checkpoint-source"]
        } else {
            &[]
        };
        assert_eq!(compacted(v, false, &nameless).scan().codes(), want, "v{v}");
    }
    // A checkpoint-sourced message with no compaction running.
    let mut log = Log::new(4);
    log.ev(
        "user/message",
        r#"{"id":"u","role":"user","content":[],"source":{"kind":"compact-checkpoint","compactionId":"k1"}}"#,
        APPEND,
    );
    assert_eq!(log.scan().codes(), ["compaction-checkpoint-source"]);
}

fn open_compaction(v: u8) -> Log {
    let mut log = setup(v).log;
    log.ev(
        "compaction/start",
        r#"{"compactionId":"k1","turn":null}"#,
        "",
    );
    log
}

#[test]
fn an_unfinished_compaction_is_a_warning_in_every_version() {
    for v in 0..=4u8 {
        let log = open_compaction(v);
        let start = log.seq() - 1;
        let r: Run = log.scan();
        assert_eq!(
            r.graded(),
            [("compaction-open-at-end", Severity::Warning)],
            "v{v}"
        );
        assert_eq!(r.findings[0].seq, Some(start));
        assert_eq!(r.status(), Status::Valid);
    }
}

#[test]
fn an_end_seed_expires_an_unfinished_compaction() {
    for v in 0..=4u8 {
        let mut log = open_compaction(v);
        log.ev("session/end-seed", "{}", "");
        log.scan().assert_clean();
        // A new compaction after the resume is not "while another is active".
        let mut log = open_compaction(v);
        log.ev("session/end-seed", "{}", "");
        log.ev(
            "compaction/start",
            r#"{"compactionId":"k2","turn":null}"#,
            "",
        );
        log.ev(
            "compaction/end",
            r#"{"compactionId":"k2","turn":null,"error":"x"}"#,
            "",
        );
        log.scan().assert_clean();
    }
}

#[test]
fn mismatch_messages_name_what_was_found_and_what_was_wanted() {
    let messages = |in_turn: bool, edit: &dyn Fn(Part, String) -> Option<String>| {
        let r = compacted(4, in_turn, edit).scan();
        r.findings
            .iter()
            .map(|f| f.message.clone())
            .collect::<Vec<_>>()
    };
    // A turn left out is "(missing)".
    assert_eq!(
        messages(false, &on(Part::Start, sub(r#","turn":null"#, ""))),
        ["compaction/start turn must be null outside a turn (found (missing))"]
    );
    assert_eq!(
        messages(true, &on(Part::Start, sub(r#","turn":2"#, ""))),
        [
            "compaction/start turn must be the open turn 2 (found (missing))",
            "compaction/end turn 2 differs from its compaction/start turn null"
        ]
    );
    assert_eq!(
        messages(true, &on(Part::End, sub(r#","turn":2"#, ""))),
        ["compaction/end turn (missing) differs from its compaction/start turn 2"]
    );
    // The checkpoint names another compaction, none, or none is active: "(none)".
    assert_eq!(
        messages(false, &on(Part::Checkpoint, sub(r#""k1""#, r#""k2""#))),
        [r#"compact-checkpoint message names compaction "k2" but the active one is "k1""#]
    );
    assert_eq!(
        messages(
            false,
            &on(Part::Checkpoint, sub(r#","compactionId":"k1""#, ""))
        ),
        [r#"compact-checkpoint message names compaction (none) but the active one is "k1""#]
    );
    assert_eq!(
        messages(false, &on(Part::Start, |_| None)),
        [
            "compaction/summary without an active compaction/start",
            r#"compact-checkpoint message names compaction "k1" but the active one is (none)"#,
            "compaction/end without an active compaction/start"
        ]
    );
}

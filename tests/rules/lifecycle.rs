//! §13 lifecycle: the v0 companion rules (warnings in v0–v2, §13.3) and the v3/v4
//! restore-time rules (errors). Most tests build the *same* log under every version and
//! check that only the severity (or, for v3+-only rules, the presence) changes.

use dshs::log::codes::Area;
use dshs::log::{Severity, Status};

use crate::build::{APPEND, Log, lifecycle_severity, tool_result_data, tool_result_message};

/// Build `body` under every version and return the lifecycle findings with severities.
/// Per version: the lifecycle findings with their severity, and the log's status.
type PerVersion = Vec<(u8, Vec<(&'static str, Severity)>, Status)>;

fn per_version(body: impl Fn(&mut Log)) -> PerVersion {
    (0..=4u8)
        .map(|v| {
            let mut log = Log::new(v);
            body(&mut log);
            let r = log.scan();
            let graded = r
                .findings
                .iter()
                .filter(|f| f.code.info().area == Area::Lifecycle)
                .map(|f| (f.code.as_str(), f.severity))
                .collect();
            // Everything else about these logs is clean.
            let others: Vec<&str> = r
                .findings
                .iter()
                .filter(|f| f.code.info().area != Area::Lifecycle)
                .map(|f| f.code.as_str())
                .collect();
            assert!(others.is_empty(), "v{v}: unexpected {others:?}");
            (v, graded, r.status())
        })
        .collect()
}

/// The same codes in every version: warnings in v0–v2 (log still valid), errors in v3+.
#[track_caller]
fn expect_everywhere(body: impl Fn(&mut Log), codes: &[&str]) {
    for (v, graded, status) in per_version(body) {
        let sev = lifecycle_severity(v);
        let want: Vec<(&str, Severity)> = codes
            .iter()
            .map(|c| {
                let s = if *c == "open-turn-at-end" {
                    Severity::Warning
                } else {
                    sev
                };
                (*c, s)
            })
            .collect();
        assert_eq!(graded, want, "v{v}");
        let errors = want.iter().any(|(_, s)| *s == Severity::Error);
        assert_eq!(
            status,
            if errors {
                Status::Invalid
            } else {
                Status::Valid
            },
            "v{v}"
        );
    }
}

/// Only in v3+ (as errors); v0–v2 see `old` instead (usually nothing).
#[track_caller]
fn expect_restore_only(body: impl Fn(&mut Log), old: &[&str], new: &[&str]) {
    for (v, graded, status) in per_version(body) {
        let codes: Vec<&str> = graded.iter().map(|(c, _)| *c).collect();
        if v >= 3 {
            assert_eq!(codes, new, "v{v}");
            assert!(
                graded
                    .iter()
                    .all(|(c, s)| *s == Severity::Error || *c == "open-turn-at-end")
            );
            let errors = new.iter().any(|c| *c != "open-turn-at-end");
            assert_eq!(
                status,
                if errors {
                    Status::Invalid
                } else {
                    Status::Valid
                },
                "v{v}"
            );
        } else {
            assert_eq!(codes, old, "v{v}");
            assert!(graded.iter().all(|(_, s)| *s == Severity::Warning));
            assert_eq!(status, Status::Valid, "v{v}");
        }
    }
}

#[test]
fn a_balanced_log_has_no_lifecycle_finding() {
    expect_everywhere(
        |l| {
            l.tool_turn(1, "c1");
            l.turn_start(2);
            l.step_start(2, 1);
            l.assistant(2, 1, &[]);
            l.step_end(2, 1);
            l.step_start(2, 2);
            l.step_end(2, 2);
            l.turn_end(2);
        },
        &[],
    );
}

#[test]
fn turn_start_while_open() {
    expect_everywhere(
        |l| {
            l.turn_start(1);
            l.turn_start(1);
            l.turn_end(1);
        },
        &["turn-start-while-open"],
    );
}

#[test]
fn turn_number_unexpected() {
    expect_everywhere(
        |l| {
            l.turn_start(2);
            l.turn_end(2);
        },
        &["turn-number-unexpected"],
    );
    // Turns count on after each end, even after a mistake.
    expect_everywhere(
        |l| {
            l.turn_start(1);
            l.turn_end(1);
            l.turn_start(3);
            l.turn_end(3);
            l.turn_start(3);
            l.turn_end(3);
        },
        &["turn-number-unexpected"],
    );
}

#[test]
fn turn_end_mismatch() {
    expect_everywhere(
        |l| {
            l.turn_start(1);
            l.turn_end(2);
        },
        &["turn-end-mismatch"],
    );
    // A turn end with no open turn at all.
    expect_everywhere(
        |l| {
            l.turn_start(1);
            l.turn_end(1);
            l.turn_end(1);
        },
        &["turn-end-mismatch"],
    );
}

#[test]
fn turn_end_with_open_step() {
    expect_everywhere(
        |l| {
            l.turn_start(1);
            l.step_start(1, 1);
            l.turn_end(1);
        },
        &["turn-end-with-open-step"],
    );
}

#[test]
fn step_start_wrong_turn() {
    expect_everywhere(
        |l| {
            l.turn_start(1);
            l.step_start(2, 1);
            l.step_end(2, 1);
            l.turn_end(1);
        },
        // step/end names turn 2 too, so it is outside the open step as well.
        &["step-start-wrong-turn", "event-outside-open-step"],
    );
    // No open turn at all.
    expect_everywhere(
        |l| {
            l.step_start(1, 1);
        },
        &["step-start-wrong-turn"],
    );
}

#[test]
fn step_start_while_open() {
    expect_everywhere(
        |l| {
            l.turn_start(1);
            l.step_start(1, 1);
            l.step_start(1, 1);
            l.step_end(1, 1);
            l.turn_end(1);
        },
        &["step-start-while-open"],
    );
}

#[test]
fn step_number_unexpected() {
    expect_everywhere(
        |l| {
            l.turn_start(1);
            l.step_start(1, 2);
            l.step_end(1, 2);
            l.turn_end(1);
        },
        &["step-number-unexpected"],
    );
    // Steps restart at 1 in each turn.
    expect_everywhere(
        |l| {
            l.turn_start(1);
            l.step_start(1, 1);
            l.step_end(1, 1);
            l.turn_end(1);
            l.turn_start(2);
            l.step_start(2, 2);
            l.step_end(2, 2);
            l.turn_end(2);
        },
        &["step-number-unexpected"],
    );
}

#[test]
fn model_output_calls_and_results_belong_to_the_open_step() {
    // An assistant message with no step open.
    expect_everywhere(
        |l| {
            l.turn_start(1);
            l.assistant(1, 1, &[]);
            l.turn_end(1);
        },
        &["event-outside-open-step"],
    );
    // A tool call naming another step.
    expect_everywhere(
        |l| {
            l.turn_start(1);
            l.step_start(1, 1);
            l.assistant(1, 1, &[("c1", "bash", "{}")]);
            let c = l.tool_call(1, 2, "c1", "bash", "{}");
            l.tool_result(1, 1, "c1", Some(c));
            l.step_end(1, 1);
            l.turn_end(1);
        },
        &["event-outside-open-step"],
    );
    // A step end naming another step.
    expect_everywhere(
        |l| {
            l.turn_start(1);
            l.step_start(1, 1);
            l.step_end(1, 2);
            l.turn_end(1);
        },
        &["event-outside-open-step"],
    );
    // An appended result after its step ended (v3+: it then settles nothing either).
    for (v, graded, _) in per_version(|l| {
        l.turn_start(1);
        l.step_start(1, 1);
        l.assistant(1, 1, &[("c1", "bash", "{}")]);
        let c = l.tool_call(1, 1, "c1", "bash", "{}");
        l.step_end(1, 1);
        l.tool_result(1, 1, "c1", Some(c));
        l.turn_end(1);
    }) {
        let codes: Vec<&str> = graded.iter().map(|(c, _)| *c).collect();
        let want: &[&str] = if v >= 3 {
            &[
                "unresolved-call-at-boundary",
                "event-outside-open-step",
                "tool-result-without-call",
            ]
        } else {
            &["event-outside-open-step", "tool-result-without-call"]
        };
        assert_eq!(codes, want, "v{v}");
    }
}

#[test]
fn assistant_chunks_belong_to_the_open_step_in_v0_and_v1() {
    for v in 0..=1u8 {
        let chunk = r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x"}}"#;
        let mut ok = Log::new(v);
        ok.in_step(|l| {
            l.ev("assistant/chunk", chunk, "");
        });
        ok.scan().assert_clean();
        let mut log = Log::new(v);
        log.turn_start(1);
        log.ev("assistant/chunk", chunk, "");
        log.turn_end(1);
        let r = log.scan();
        assert_eq!(
            r.graded(),
            [("event-outside-open-step", Severity::Warning)],
            "v{v}"
        );
        // Packed chunk members too.
        let mut log = Log::new(v);
        log.turn_start(1);
        log.junk(r#"{"type":"text-chunks","seq0":1,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["a","b","c"]}}"#);
        let r = log.scan();
        assert_eq!(
            r.codes(),
            [
                "event-outside-open-step",
                "event-outside-open-step",
                "event-outside-open-step",
                "open-turn-at-end"
            ],
            "v{v}"
        );
    }
}

#[test]
fn system_developer_and_attempt_events_need_an_open_step_from_v3() {
    let body = |l: &mut Log, ty: &str, data: &str, extra: &str| {
        l.turn_start(1);
        l.ev(ty, data, extra);
        l.turn_end(1);
    };
    // v2 has assistant/attempt but no step rule for it.
    let mut log = Log::new(2);
    body(
        &mut log,
        "assistant/attempt",
        r#"{"turn":1,"step":1,"stream":[]}"#,
        "",
    );
    log.scan().assert_clean();
    for v in 3..=4u8 {
        let mut cases = vec![
            (
                "assistant/attempt",
                r#"{"turn":1,"step":1,"stream":[]}"#.to_owned(),
                "",
            ),
            (
                "system/message",
                crate::build::system_data(v, "s", 1, 1),
                APPEND,
            ),
        ];
        if v == 4 {
            cases.push((
                "developer/message",
                r#"{"turn":1,"step":1,"message":{"id":"d","role":"developer","content":[{"type":"text","text":"x"}],"source":{"kind":"agent-instructions"}}}"#.to_owned(),
                APPEND,
            ));
        }
        for (ty, data, extra) in cases {
            let mut log = Log::new(v);
            body(&mut log, ty, &data, extra);
            let r = log.scan();
            assert_eq!(
                r.graded(),
                [("event-outside-open-step", Severity::Error)],
                "v{v} {ty}"
            );
            let mut ok = Log::new(v);
            ok.in_step(|l| {
                l.ev(ty, &data, extra);
            });
            ok.scan().assert_clean();
        }
    }
}

#[test]
fn request_events_need_an_open_turn_and_todo_write_only_before_v3() {
    for ty in ["request/header", "request/context"] {
        let data = if ty == "request/header" {
            r#"{"header":{"config":{"provider":"p","model":"m"}},"reason":"initial"}"#
        } else {
            r#"{"provider":"p","model":"m"}"#
        };
        expect_everywhere(
            |l| {
                l.ev(ty, data, "");
            },
            &["event-outside-turn"],
        );
        // Inside a turn, no step needed.
        expect_everywhere(
            |l| {
                l.turn_start(1);
                l.ev(ty, data, "");
                l.turn_end(1);
            },
            &[],
        );
    }
    expect_restore_only(
        |l| {
            l.ev("todo/write", r#"{"todos":[]}"#, "");
        },
        &["event-outside-turn"],
        &[],
    );
}

#[test]
fn unconstrained_events_may_sit_anywhere() {
    expect_everywhere(
        |l| {
            l.user("between turns");
            l.ev("session/end-seed", "{}", "");
            l.ev("goal/change", "{}", "");
            l.turn_start(1);
            l.step_start(1, 1);
            l.ev("session/end-seed", "{}", "");
            l.user("inside a step");
            l.step_end(1, 1);
            l.turn_end(1);
        },
        &[],
    );
}

// --- tool calls and results ------------------------------------------------------------------

#[test]
fn tool_result_without_call() {
    // A result for a call nobody started (v0–v2) / advertised (v3+).
    expect_everywhere(
        |l| {
            l.in_step(|l| {
                l.tool_result(1, 1, "ghost", None);
            })
        },
        &["tool-result-without-call"],
    );
    // Answering the same call twice.
    expect_everywhere(
        |l| {
            l.in_step(|l| {
                l.assistant(1, 1, &[("c1", "bash", "{}")]);
                let c = l.tool_call(1, 1, "c1", "bash", "{}");
                l.tool_result(1, 1, "c1", Some(c));
                l.tool_result(1, 1, "c1", Some(c));
            })
        },
        &["tool-result-without-call"],
    );
}

#[test]
fn v0_to_v2_need_a_started_call_but_exempt_the_not_started_repair() {
    // Advertised but never started: the v0 companion wants a prior tool/call …
    let advertised_only = |l: &mut Log, data: &str| {
        l.in_step(|l| {
            l.assistant(1, 1, &[("c1", "bash", "{}")]);
            l.ev("tool/result", data, APPEND);
        })
    };
    for v in 0..=2u8 {
        let mut log = Log::new(v);
        advertised_only(&mut log, &tool_result_data(v, "r", 1, 1, "c1", "ok"));
        assert_eq!(
            log.scan().graded(),
            [("tool-result-without-call", Severity::Warning)],
            "v{v}"
        );
        // … unless it is the not-started repair (flag set and TOOL_NOT_STARTED).
        let mut log = Log::new(v);
        let seq = log.seq() + 3;
        advertised_only(
            &mut log,
            &not_started_repair(v, "c1", seq, "interrupted", NOT_STARTED),
        );
        log.scan().assert_clean();
        // The exemption needs both parts.
        let mut log = Log::new(v);
        let data = not_started_repair(v, "c1", seq, "interrupted", NOT_STARTED)
            .replace("TOOL_NOT_STARTED", "TOOL_OUTCOME_UNKNOWN");
        advertised_only(&mut log, &data);
        assert_eq!(log.scan().codes(), ["tool-result-without-call"], "v{v}");
    }
}

const NOT_STARTED: &str = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.";

/// The crash-repair result for a call that never started (§14.3), for seq `seq`.
fn not_started_repair(v: u8, call: &str, seq: u64, cause: &str, text: &str) -> String {
    let message = tool_result_message(v, &format!("{cause}-tool-result-{call}-{seq}"), call, text)
        .replace(r#""isError":false"#, r#""isError":true"#);
    format!(
        r#"{{"turn":1,"step":1,"message":{message},"error":{{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}}}}"#
    )
}

#[test]
fn tool_result_replacement_needs_an_open_turn_only() {
    // Prune a result after its turn ended: a replacement outside any turn.
    let body = |l: &mut Log, inside: bool| {
        l.turn_start(1);
        l.step_start(1, 1);
        l.assistant(1, 1, &[("c1", "bash", "{}")]);
        let c = l.tool_call(1, 1, "c1", "bash", "{}");
        let r = l.tool_result(1, 1, "c1", Some(c));
        l.step_end(1, 1);
        if !inside {
            l.turn_end(1);
        }
        let v = l.v;
        let (s, e) = if v >= 3 {
            ("startSeq", "endSeq")
        } else {
            ("start", "end")
        };
        let data = tool_result_data(v, &format!("r{r}"), 1, 1, "c1", "[pruned]");
        l.ev(
            "tool/result",
            &data,
            &format!(
                r#","sourceEventSeqs":[{r}],"surfaceOp":{{"op":"replace","{s}":{r},"{e}":{r}}}"#
            ),
        );
        if inside {
            l.turn_end(1);
        }
    };
    // Inside the turn, even with no step open: fine.
    expect_everywhere(|l| body(l, true), &[]);
    expect_everywhere(|l| body(l, false), &["tool-result-replace-outside-turn"]);
}

#[test]
fn unresolved_calls_at_a_boundary_are_refused_from_v3() {
    // A step ends with an advertised call unanswered.
    expect_restore_only(
        |l| {
            l.in_step(|l| {
                l.assistant(1, 1, &[("c1", "bash", "{}"), ("c2", "bash", "{}")]);
                let c = l.tool_call(1, 1, "c1", "bash", "{}");
                l.tool_result(1, 1, "c1", Some(c));
            })
        },
        &[],
        &["unresolved-call-at-boundary"],
    );
    // A started call left unanswered at a turn end (with the step still open).
    expect_restore_only(
        |l| {
            l.turn_start(1);
            l.step_start(1, 1);
            l.assistant(1, 1, &[("c1", "bash", "{}")]);
            l.tool_call(1, 1, "c1", "bash", "{}");
            l.turn_end(1);
        },
        &["turn-end-with-open-step"],
        &["turn-end-with-open-step", "unresolved-call-at-boundary"],
    );
    // An open final turn with a pending call is an unfinished tail, not a violation.
    expect_restore_only(
        |l| {
            l.turn_start(1);
            l.step_start(1, 1);
            l.assistant(1, 1, &[("c1", "bash", "{}")]);
            l.tool_call(1, 1, "c1", "bash", "{}");
        },
        &["open-turn-at-end"],
        &["open-turn-at-end"],
    );
}

#[test]
fn call_ids_are_unique_within_the_session_from_v3() {
    expect_restore_only(
        |l| {
            l.tool_turn(1, "c1");
            l.tool_turn(2, "c1");
        },
        &[],
        &["duplicate-call-id"],
    );
    // Within one message too.
    expect_restore_only(
        |l| {
            l.in_step(|l| {
                l.assistant(1, 1, &[("c1", "bash", "{}"), ("c1", "bash", "{}")]);
                let c = l.tool_call(1, 1, "c1", "bash", "{}");
                l.tool_result(1, 1, "c1", Some(c));
                let c = l.tool_call(1, 1, "c1", "bash", "{}");
                l.tool_result(1, 1, "c1", Some(c));
            })
        },
        &[],
        &["duplicate-call-id"],
    );
}

#[test]
fn a_tool_call_repeats_an_advertised_call_exactly_from_v3() {
    let with_call = |name: &'static str, args: &'static str, id: &'static str| {
        move |l: &mut Log| {
            l.in_step(|l| {
                l.assistant(1, 1, &[("c1", "bash", r#"{"cmd":"ls"}"#)]);
                let c = l.tool_call(1, 1, id, name, args);
                l.tool_result(1, 1, "c1", Some(c));
            })
        }
    };
    expect_restore_only(with_call("bash", r#"{"cmd":"ls"}"#, "c1"), &[], &[]);
    expect_restore_only(
        with_call("python", r#"{"cmd":"ls"}"#, "c1"),
        &[],
        &["tool-call-mismatch"],
    );
    // Arguments are compared as the exact string, not as JSON.
    expect_restore_only(
        with_call("bash", r#"{"cmd": "ls"}"#, "c1"),
        &[],
        &["tool-call-mismatch"],
    );
    // A call nobody advertised (then the result answers a call that was never started).
    for (v, graded, _) in per_version(with_call("bash", r#"{"cmd":"ls"}"#, "c9")) {
        let codes: Vec<&str> = graded.iter().map(|(c, _)| *c).collect();
        let want: &[&str] = if v >= 3 {
            &["tool-call-mismatch", "tool-result-before-start"]
        } else {
            &["tool-result-without-call"]
        };
        assert_eq!(codes, want, "v{v}");
    }
    // Starting a call that was already answered.
    expect_restore_only(
        |l| {
            l.in_step(|l| {
                l.assistant(1, 1, &[("c1", "bash", "{}")]);
                let c = l.tool_call(1, 1, "c1", "bash", "{}");
                l.tool_result(1, 1, "c1", Some(c));
                l.tool_call(1, 1, "c1", "bash", "{}");
            })
        },
        &[],
        &["tool-call-mismatch"],
    );
}

/// A step where `c1` is advertised but never started, answered by `data` (built for the
/// result's own seq).
fn unstarted(data: impl Fn(u8, u64) -> String, extra: &'static str) -> impl Fn(&mut Log) {
    move |l: &mut Log| {
        l.in_step(|l| {
            l.assistant(1, 1, &[("c1", "bash", "{}")]);
            let seq = l.seq();
            l.ev("tool/result", &data(l.v, seq), extra);
        })
    }
}

#[test]
fn a_result_before_any_start_must_be_the_exact_not_started_repair_from_v3() {
    let exact = |v: u8, seq: u64| not_started_repair(v, "c1", seq, "interrupted", NOT_STARTED);
    // v0–v2 accept it through the companion's exemption; v3+ through the restore rule.
    expect_restore_only(unstarted(exact, APPEND), &[], &[]);
    // An ordinary result before the call started.
    expect_restore_only(
        unstarted(|v, _| tool_result_data(v, "r", 1, 1, "c1", "ok"), APPEND),
        &["tool-result-without-call"],
        &["tool-result-before-start"],
    );
    type Variant = Box<dyn Fn(u8, u64) -> String>;
    let broken: Vec<(&str, Variant, &str)> = vec![
        (
            "id with another seq",
            Box::new(move |v, seq| {
                exact(v, seq).replace(&format!("c1-{seq}"), &format!("c1-{}", seq + 1))
            }),
            APPEND,
        ),
        (
            "id with a leading zero",
            Box::new(move |v, seq| {
                exact(v, seq).replace(&format!("c1-{seq}"), &format!("c1-0{seq}"))
            }),
            APPEND,
        ),
        (
            "other text",
            Box::new(move |v, seq| exact(v, seq).replace("Retry it if", "Retry if")),
            APPEND,
        ),
        (
            "outcome-unknown error",
            Box::new(move |v, seq| {
                exact(v, seq).replace("ToolNotStartedError", "ToolOutcomeUnknownError")
            }),
            APPEND,
        ),
        (
            "extra error member",
            Box::new(move |v, seq| {
                exact(v, seq).replace(
                    r#""code":"TOOL_NOT_STARTED""#,
                    r#""code":"TOOL_NOT_STARTED","x":1"#,
                )
            }),
            APPEND,
        ),
        (
            "flag false",
            Box::new(move |v, seq| {
                exact(v, seq).replace(r#""isError":true"#, r#""isError":false"#)
            }),
            APPEND,
        ),
        (
            "two text blocks",
            Box::new(move |v, seq| {
                let t = crate::build::js(NOT_STARTED);
                exact(v, seq).replace(
                    &format!(r#"{{"type":"text","text":{t}}}"#),
                    &format!(r#"{{"type":"text","text":{t}}},{{"type":"text","text":"x"}}"#),
                )
            }),
            APPEND,
        ),
        (
            "sourceEventSeqs",
            Box::new(exact),
            r#","sourceEventSeqs":[0],"surfaceOp":"append""#,
        ),
    ];
    for (what, data, extra) in broken {
        for v in 3..=4u8 {
            let mut log = Log::new(v);
            unstarted(&data, extra)(&mut log);
            let r = log.scan();
            assert_eq!(
                r.codes_in(Area::Lifecycle),
                ["tool-result-before-start"],
                "v{v} {what}"
            );
            assert_eq!(r.findings[r.findings.len() - 1].severity, Severity::Error);
        }
    }
}

#[test]
fn v4_accepts_the_forked_repair_with_any_text() {
    let forked = |text: &'static str| {
        move |v: u8, seq: u64| not_started_repair(v, "c1", seq, "forked", text)
    };
    let any = "The history inherited by this branch has no record of this tool call starting.";
    for (v, graded, _) in per_version(unstarted(forked(any), APPEND)) {
        let codes: Vec<&str> = graded.iter().map(|(c, _)| *c).collect();
        match v {
            4 => assert_eq!(codes, Vec::<&str>::new()),
            3 => assert_eq!(codes, ["tool-result-before-start"]),
            // The v0 companion only looks at the flag and the error code.
            _ => assert_eq!(codes, Vec::<&str>::new(), "v{v}"),
        }
    }
    // Still one text block, the flag and the not-started error.
    let two_blocks = |v: u8, seq: u64| {
        not_started_repair(v, "c1", seq, "forked", "a").replace(
            r#"{"type":"text","text":"a"}"#,
            r#"{"type":"text","text":"a"},{"type":"text","text":"b"}"#,
        )
    };
    let mut log = Log::new(4);
    unstarted(two_blocks, APPEND)(&mut log);
    assert_eq!(log.scan().codes(), ["tool-result-before-start"]);
}

#[test]
fn command_done_needs_its_run_from_v3() {
    expect_restore_only(
        |l| {
            l.ev(
                "command/run",
                r#"{"commandId":"k1","command":"compact"}"#,
                "",
            );
            l.ev("command/done", r#"{"commandId":"k1"}"#, "");
        },
        &[],
        &[],
    );
    expect_restore_only(
        |l| {
            l.ev("command/done", r#"{"commandId":"k1"}"#, "");
        },
        &[],
        &["command-done-without-run"],
    );
    // Run ids are unique.
    expect_restore_only(
        |l| {
            l.ev("command/run", r#"{"commandId":"k1"}"#, "");
            l.ev("command/run", r#"{"commandId":"k1"}"#, "");
            l.ev("command/done", r#"{"commandId":"k1"}"#, "");
        },
        &[],
        &["command-done-without-run"],
    );
    // Another command's run does not count.
    expect_restore_only(
        |l| {
            l.ev("command/run", r#"{"commandId":"k1"}"#, "");
            l.ev("command/done", r#"{"commandId":"k2"}"#, "");
        },
        &[],
        &["command-done-without-run"],
    );
}

#[test]
fn an_open_turn_at_the_end_is_a_warning_in_every_version() {
    expect_everywhere(
        |l| {
            l.turn_start(1);
            l.step_start(1, 1);
            l.assistant(1, 1, &[]);
        },
        &["open-turn-at-end"],
    );
    for v in 0..=4u8 {
        let mut log = Log::new(v);
        log.tool_turn(1, "c1");
        let start = log.turn_start(2);
        let r = log.scan();
        assert_eq!(r.graded(), [("open-turn-at-end", Severity::Warning)]);
        assert!(r.scan.open_turn());
        // It points at the turn start.
        assert_eq!(r.findings[0].seq, Some(start));
        assert_eq!(r.findings[0].pos.line, start + 2);
    }
}

#[test]
fn the_same_mistakes_are_warnings_in_v2_and_errors_in_v3() {
    // One log, two headers: every companion rule fires once.
    let body = |l: &mut Log| {
        l.turn_start(2); // turn-number-unexpected (turns start at 1)
        l.step_start(2, 2); // step-number-unexpected (steps start at 1)
        l.step_start(2, 1); // step-start-while-open
        l.step_end(2, 1);
        l.turn_start(2); // turn-start-while-open, turn-number-unexpected (next is still 1)
        l.step_start(3, 1); // step-start-wrong-turn
        l.turn_end(3); // turn-end-mismatch, turn-end-with-open-step
    };
    let mut v2 = Log::new(2);
    body(&mut v2);
    let mut v3 = Log::new(3);
    body(&mut v3);
    let (r2, r3) = (v2.scan(), v3.scan());
    assert_eq!(
        r3.codes(),
        [
            "turn-number-unexpected",
            "step-number-unexpected",
            "step-start-while-open",
            "turn-start-while-open",
            "turn-number-unexpected",
            "step-start-wrong-turn",
            "turn-end-mismatch",
            "turn-end-with-open-step",
        ]
    );
    assert_eq!(r2.codes(), r3.codes());
    // Each message names the event, the number it carries and what was open or expected.
    let messages: Vec<&str> = r3.findings.iter().map(|f| f.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "turn/start expected turn 1, got 2",
            "step/start expected step 1 in turn 2, got 2",
            "step/start 1 while step 2 is still open",
            "turn/start 2 while turn 2 is still open",
            "turn/start expected turn 1, got 2",
            "step/start in turn 3 but open turn is 2",
            "turn/end 3 does not match open turn 2",
            "turn/end 3 while step 1 is still open",
        ]
    );
    assert!(r2.findings.iter().all(|f| f.severity == Severity::Warning));
    assert!(r3.findings.iter().all(|f| f.severity == Severity::Error));
    assert_eq!((r2.status(), r3.status()), (Status::Valid, Status::Invalid));
    // Old versions say what the warning means for a current DSH.
    assert!(
        r2.findings[0].message.contains("current DSH"),
        "{}",
        r2.findings[0].message
    );
    assert!(!r3.findings[0].message.contains("current DSH"));
}

#[test]
fn the_crash_repair_fixture_stays_valid() {
    let path = crate::common::testdata(
        "fixtures/upstream__headless__semantic-checkpoint-snapshots__tool-outcome-unknown__session.expected.concrete.jsonl",
    );
    let (scan, findings) = crate::common::scan_file(&path);
    assert!(findings.is_empty(), "{findings:#?}");
    assert_eq!(scan.status(), Status::Valid);
    assert!(!scan.open_turn());
}

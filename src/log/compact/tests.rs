use super::*;
use crate::log::scan::ScanOptions;

const V0: &str = r#"{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}"#;
const V3: &str =
    r#"{"type":"session","version":3,"id":"s","createdAt":1,"delegationDepth":0,"isSeeded":false}"#;
const V4: &str =
    r#"{"type":"session","version":4,"id":"s","createdAt":1,"delegationDepth":0,"isSeeded":false}"#;

/// A log written one event per line; seqs are counted.
struct Log {
    v: u8,
    text: String,
    seq: u64,
}

impl Log {
    fn new(v: u8) -> Log {
        let header = match v {
            0 => V0,
            3 => V3,
            _ => V4,
        };
        Log {
            v,
            text: format!("{header}\n"),
            seq: 0,
        }
    }

    fn ev(&mut self, ty: &str, data: &str, tail: &str) -> u64 {
        let seq = self.seq;
        self.text.push_str(&format!(
            r#"{{"type":"{ty}","seq":{seq},"time":{},"data":{data}{tail}}}"#,
            100 + seq
        ));
        self.text.push('\n');
        self.seq += 1;
        seq
    }

    fn turn_start(&mut self, t: u64) -> u64 {
        self.ev("turn/start", &format!(r#"{{"turn":{t}}}"#), "")
    }

    fn turn_end(&mut self, t: u64) -> u64 {
        self.ev(
            "turn/end",
            &format!(r#"{{"turn":{t},"reason":{{"kind":"completed"}}}}"#),
            "",
        )
    }

    fn step_start(&mut self, t: u64, s: u64) -> u64 {
        self.ev("step/start", &format!(r#"{{"turn":{t},"step":{s}}}"#), "")
    }

    fn step_end(&mut self, t: u64, s: u64) -> u64 {
        self.ev("step/end", &format!(r#"{{"turn":{t},"step":{s}}}"#), "")
    }

    fn system(&mut self, t: u64, s: u64) -> u64 {
        let source = if self.v >= 4 {
            r#"{"kind":"system-prompt"}"#
        } else {
            r#"{"kind":"plugin","plugin":"@deepseek-ai/dsh-system-prompt"}"#
        };
        let d = format!(
            r#"{{"turn":{t},"step":{s},"message":{{"id":"sys","role":"system","content":[{{"type":"text","text":"be terse"}}],"source":{source}}}}}"#
        );
        self.ev("system/message", &d, r#","surfaceOp":"append""#)
    }

    fn user(&mut self, text: &str) -> u64 {
        let d = format!(
            r#"{{"id":"u{}","role":"user","content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}}}}"#,
            self.seq
        );
        self.ev("user/message", &d, r#","surfaceOp":"append""#)
    }

    fn assistant(&mut self, t: u64, s: u64, text: &str, calls: &[&str]) -> u64 {
        let mut content = Vec::new();
        if !text.is_empty() {
            content.push(format!(r#"{{"type":"text","text":"{text}"}}"#));
        }
        for id in calls {
            content.push(format!(
                r#"{{"type":"tool-call","id":"{id}","name":"bash","arguments":"{{}}"}}"#
            ));
        }
        let stream = if self.v >= 2 { r#","stream":[]"# } else { "" };
        let d = format!(
            r#"{{"turn":{t},"step":{s},"message":{{"id":"a{}","role":"assistant","content":[{}],"source":{{"kind":"model","provider":"p","model":"m"}}}}{stream}}}"#,
            self.seq,
            content.join(",")
        );
        self.ev("assistant/message", &d, r#","surfaceOp":"append""#)
    }

    fn call(&mut self, t: u64, s: u64, id: &str) -> u64 {
        let d = format!(
            r#"{{"turn":{t},"step":{s},"callId":"{id}","name":"bash","arguments":"{{}}"}}"#
        );
        self.ev("tool/call", &d, "")
    }

    fn result(&mut self, t: u64, s: u64, id: &str, call_seq: u64) -> u64 {
        let msg = if self.v >= 4 {
            format!(
                r#"{{"id":"r{}","role":"tool","toolCallId":"{id}","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"text","text":"ok"}}]}}"#,
                self.seq
            )
        } else {
            format!(
                r#"{{"id":"r{}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[{{"type":"text","text":"ok"}}]}}]}}"#,
                self.seq
            )
        };
        self.ev(
            "tool/result",
            &format!(r#"{{"turn":{t},"step":{s},"message":{msg}}}"#),
            &format!(r#","surfaceOp":"append","sourceEventSeqs":[{call_seq}]"#),
        )
    }
}

fn minted() -> Minted {
    Minted {
        compaction_id: "<uuid-1>".into(),
        message_id: "<uuid-2>".into(),
        time: 1_790_000_000_000,
    }
}

fn req(start: u64, end: u64, summary: &str) -> Request {
    Request {
        start,
        end,
        summary: summary.into(),
    }
}

/// Scan `text` (written to a temporary file, as the command does), plan and verify.
fn attempt(text: &str, r: &Request) -> Result<(CompactPlan, Verdict), PlanError> {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
    let mut lookout = Lookout::new(r);
    let s = crate::log::scan::scan(
        text.as_bytes(),
        None,
        &ScanOptions::default(),
        &mut Vec::new(),
        &mut lookout,
    )
    .unwrap();
    let mut deriver = Deriver::open(file.path()).unwrap();
    let p = plan(&s, &lookout, r, minted(), &mut deriver)?;
    let v = verify(text.as_bytes(), &p, None, &ScanOptions::default()).unwrap();
    Ok((p, v))
}

fn compacted(text: &str, r: &Request) -> (CompactPlan, String) {
    let (p, v) = attempt(text, r).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(v.ok, "{:#?}", v.findings);
    (
        p.clone(),
        format!("{text}{}", std::str::from_utf8(p.append()).unwrap()),
    )
}

fn refusal(text: &str, r: &Request) -> Refusal {
    match attempt(text, r) {
        Err(PlanError::Refused(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// FORMAT.md §15.5's example: v3, nodes [2, 5, 6, 9, 12, 14] with head 2, compacting 5..12,
/// next seq 40. Node 12's text is padded so the token estimate is the example's 812.
fn worked_example_log(pad: usize) -> String {
    let mut l = Log::new(3);
    l.turn_start(1);
    l.step_start(1, 1);
    assert_eq!(l.system(1, 1), 2);
    l.step_end(1, 1);
    l.step_start(1, 2);
    assert_eq!(l.user("please look"), 5);
    assert_eq!(l.assistant(1, 2, "looking", &[]), 6);
    l.step_end(1, 2);
    l.step_start(1, 3);
    assert_eq!(l.user("and then?"), 9);
    l.ev(
        "session/title",
        r#"{"title":"t","messageSeqs":[],"source":"user"}"#,
        "",
    );
    l.ev(
        "session/title",
        r#"{"title":"u","messageSeqs":[],"source":"user"}"#,
        "",
    );
    assert_eq!(l.assistant(1, 3, &"x".repeat(pad), &[]), 12);
    l.step_end(1, 3);
    assert_eq!(l.user("thanks"), 14);
    l.turn_end(1);
    for t in 2..=13 {
        l.turn_start(t);
        l.turn_end(t);
    }
    assert_eq!(l.seq, 40);
    l.text
}

#[test]
fn the_worked_example_of_15_5_is_reproduced_byte_for_byte() {
    let r = req(5, 12, "<TEXT>");
    let pad = (0..4000)
        .find(|&pad| {
            attempt(&worked_example_log(pad), &r).is_ok_and(|(p, _)| p.shadowed_tokens == 812)
        })
        .expect("some padding gives 812 tokens");
    let (p, _) = compacted(&worked_example_log(pad), &r);
    let expected = r#"{"type":"compaction/start","seq":40,"time":1790000000000,"data":{"compactionId":"<uuid-1>","turn":null}}
{"type":"compaction/summary","seq":41,"time":1790000000000,"data":{"compactionId":"<uuid-1>","summary":[{"type":"text","text":"<TEXT>"}],"shadowedRange":{"start":5,"end":12},"shadowedSeqs":[5,6,9,12],"shadowedTokenCount":812,"provider":"dshs","model":"manual"}}
{"type":"user/message","seq":42,"time":1790000000000,"data":{"content":[{"type":"text","text":"<PREAMBLE>\n\n<compacted-summary>"},{"type":"text","text":"<TEXT>"},{"type":"text","text":"</compacted-summary>"}],"source":{"kind":"plugin","plugin":"compact","compactionId":"<uuid-1>"},"role":"user","id":"<uuid-2>"},"sourceEventSeqs":[40,41,5,6,9,12],"surfaceOp":{"op":"replace","startSeq":5,"endSeq":12}}
{"type":"compaction/end","seq":43,"time":1790000000000,"data":{"compactionId":"<uuid-1>","turn":null}}
"#
    .replace("<PREAMBLE>", PREAMBLE);
    assert_eq!(std::str::from_utf8(p.append()).unwrap(), expected);
    assert_eq!(p.expected_surface, [2, 42, 14]);
    assert_eq!(p.keep, worked_example_log(pad).len() as u64);
}

#[test]
fn the_token_estimate_sums_quarter_bytes_of_each_derived_message_rounded_up() {
    // An assistant message with empty content derives nothing and counts 0.
    let mut l = Log::new(4);
    l.turn_start(1);
    l.step_start(1, 1);
    let u = l.user("hello");
    let a = l.assistant(1, 1, "", &[]);
    l.step_end(1, 1);
    l.turn_end(1);
    let (p, _) = compacted(&l.text, &req(u, a, "s"));
    let user_line = l.text.lines().nth(1 + u as usize).unwrap();
    let msg = &user_line
        [user_line.find(r#""data":"#).unwrap() + 7..user_line.find(r#","surfaceOp""#).unwrap()];
    assert_eq!(p.shadowed, [u, a]);
    assert_eq!(p.shadowed_tokens, (msg.len() as u64).div_ceil(4));
}

#[test]
fn each_version_writes_its_own_endpoint_keys_and_checkpoint_source() {
    for (v, keys, source) in [
        (
            0,
            (r#""start":"#, r#""end":"#),
            r#""source":{"kind":"plugin","plugin":"compact","compactionId":"<uuid-1>"}"#,
        ),
        (
            3,
            (r#""startSeq":"#, r#""endSeq":"#),
            r#""source":{"kind":"plugin","plugin":"compact","compactionId":"<uuid-1>"}"#,
        ),
        (
            4,
            (r#""startSeq":"#, r#""endSeq":"#),
            r#""source":{"kind":"compact-checkpoint","compactionId":"<uuid-1>"}"#,
        ),
    ] {
        let mut l = Log::new(v);
        let u = l.user("first");
        l.turn_start(1);
        l.step_start(1, 1);
        let a = l.assistant(1, 1, "calling", &["c1"]);
        let c = l.call(1, 1, "c1");
        let res = l.result(1, 1, "c1", c);
        l.step_end(1, 1);
        l.turn_end(1);
        let (p, _) = compacted(&l.text, &req(u, res, "sum"));
        let checkpoint = &p.lines[2];
        assert!(
            checkpoint.ends_with(&format!(
                r#","sourceEventSeqs":[{},{},{u},{a},{res}],"surfaceOp":{{"op":"replace",{}{u},{}{res}}}}}"#,
                p.first_seq,
                p.first_seq + 1,
                keys.0,
                keys.1
            )),
            "v{v}: {checkpoint}"
        );
        assert!(checkpoint.contains(source), "v{v}: {checkpoint}");
        assert_eq!(p.expected_surface, [p.checkpoint_seq()]);
    }
}

#[test]
fn a_range_holding_an_earlier_checkpoint_is_compacted_again() {
    for v in [0, 3, 4] {
        let mut l = Log::new(v);
        let a = l.user("one");
        let b = l.user("two");
        let c = l.user("three");
        let (p1, once) = compacted(&l.text, &req(a, b, "first"));
        let (p2, _) = compacted(&once, &req(p1.checkpoint_seq(), c, "second"));
        assert_eq!(p2.shadowed, [p1.checkpoint_seq(), c], "v{v}");
        assert_eq!(p2.expected_surface, [p2.checkpoint_seq()]);
    }
}

#[test]
fn summary_text_is_escaped_like_json_stringify() {
    let mut l = Log::new(4);
    let a = l.user("one");
    let (p, _) = compacted(&l.text, &req(a, a, "line\n\"quoted\" \\ tab\t\u{1} é"));
    assert!(
        p.lines[1].contains(r#""text":"line\n\"quoted\" \\ tab\t\u0001 é""#),
        "{}",
        p.lines[1]
    );
}

#[test]
fn refusals_name_the_seq_and_the_reason() {
    let mut l = Log::new(3);
    l.turn_start(1);
    l.step_start(1, 1);
    let sys = l.system(1, 1);
    let u = l.user("go");
    let a = l.assistant(1, 1, "calling", &["call_abc"]);
    let c = l.call(1, 1, "call_abc");
    let r = l.result(1, 1, "call_abc", c);
    l.step_end(1, 1);
    l.step_start(1, 2);
    let done = l.assistant(1, 2, "done", &[]);
    l.step_end(1, 2);
    l.turn_end(1);
    let text = l.text.clone();

    assert_eq!(refusal(&text, &req(u, done, "  \n")), Refusal::EmptySummary);
    assert_eq!(
        refusal(&text, &req(sys, u, "s")),
        Refusal::SystemHead {
            start: sys,
            end: u,
            next: Some(u)
        }
    );
    let split = refusal(&text, &req(u, a, "s"));
    assert_eq!(
        split,
        Refusal::SplitsToolCall {
            start: u,
            end: a,
            side: CutSide::After,
            open: 1,
            call: Some(SplitCall {
                call_id: "call_abc".into(),
                assistant: a,
                result: Some(r)
            })
        }
    );
    assert!(
        split.describe("f").contains(&format!(
            "range {u}..{a} splits tool call call_abc (assistant seq {a}) from its result (seq {r})"
        )),
        "{}",
        split.describe("f")
    );
    assert!(matches!(
        refusal(&text, &req(r, done, "s")),
        Refusal::SplitsToolCall {
            side: CutSide::Before,
            call: Some(SplitCall {
                result: Some(_),
                ..
            }),
            ..
        }
    ));
    assert_eq!(
        refusal(&text, &req(done, u, "s")),
        Refusal::Reversed {
            start: done,
            end: u,
            start_index: 4,
            end_index: 1
        }
    );
    assert_eq!(
        refusal(&text, &req(c, done, "s")),
        Refusal::OffSurface {
            endpoint: Endpoint::Start,
            seq: c,
            why: OffSurface::NotSurfaceType {
                ty: "tool/call".into()
            }
        }
    );
    assert_eq!(
        refusal(&text, &req(u, 500, "s")),
        Refusal::OffSurface {
            endpoint: Endpoint::End,
            seq: 500,
            why: OffSurface::NoSuchEvent {
                last: Some(l.seq - 1)
            }
        }
    );

    // Shadowed endpoints name the replacement (and the one that replaced it in turn).
    let (p1, once) = compacted(&text, &req(u, r, "first"));
    let (p2, twice) = compacted(&once, &req(p1.checkpoint_seq(), done, "second"));
    assert_eq!(
        refusal(&twice, &req(a, a, "s")),
        Refusal::OffSurface {
            endpoint: Endpoint::Start,
            seq: a,
            why: OffSurface::Replaced {
                by: p1.checkpoint_seq(),
                now: p2.checkpoint_seq()
            }
        }
    );
    assert!(
        refusal(&once, &req(u, done, "s"))
            .describe("f")
            .contains(&format!("(it was replaced by seq {})", p1.checkpoint_seq()))
    );

    // An open last turn, a torn line, a running compaction, a log with errors.
    let mut open = Log::new(3);
    let x = open.user("x");
    open.turn_start(1);
    assert!(matches!(
        refusal(&open.text, &req(x, x, "s")),
        Refusal::OpenTurn {
            start_seq: Some(1),
            ..
        }
    ));
    let torn = format!("{text}{{\"type\":\"tur");
    assert!(matches!(
        refusal(&torn, &req(u, done, "s")),
        Refusal::TornTail { .. }
    ));
    let mut running = Log::new(3);
    let y = running.user("y");
    running.ev(
        "compaction/start",
        r#"{"compactionId":"k","turn":null}"#,
        "",
    );
    assert_eq!(
        refusal(&running.text, &req(y, y, "s")),
        Refusal::ActiveCompaction
    );
    // A message without its surfaceOp, followed by a turn end: fatal, not a crash tail.
    let mut bad = Log::new(3);
    bad.text = text.clone();
    bad.seq = l.seq;
    bad.ev(
        "user/message",
        r#"{"id":"m","role":"user","content":[],"source":{"kind":"user"}}"#,
        "",
    );
    bad.turn_start(2);
    bad.turn_end(2);
    assert!(matches!(
        refusal(&bad.text, &req(u, done, "s")),
        Refusal::Invalid { .. }
    ));
    let crash = format!("{text}not json\n");
    assert!(matches!(
        refusal(&crash, &req(u, done, "s")),
        Refusal::CrashTail { rows: 1, .. }
    ));
    let newer = "{\"type\":\"session\",\"version\":9}\n";
    assert_eq!(refusal(newer, &req(0, 0, "s")), Refusal::Unsupported);
}

#[test]
fn verify_rejects_a_plan_whose_result_differs_from_the_expected_surface() {
    let mut l = Log::new(4);
    let a = l.user("a");
    let b = l.user("b");
    let (mut p, v) = attempt(&l.text, &req(a, b, "s")).unwrap();
    assert!(v.ok);
    p.expected_surface = vec![a, p.checkpoint_seq()];
    let v = verify(l.text.as_bytes(), &p, None, &ScanOptions::default()).unwrap();
    assert!(!v.ok);
    assert_eq!(v.surface, [p.checkpoint_seq()]);
}

#[test]
fn uuids_are_version_4_lower_case_and_fresh() {
    let u = uuid_v4(&[0xff; 16]);
    assert_eq!(u, "ffffffff-ffff-4fff-bfff-ffffffffffff");
    assert_eq!(uuid_v4(&[0; 16]), "00000000-0000-4000-8000-000000000000");
    let (m1, m2) = (Minted::fresh().unwrap(), Minted::fresh().unwrap());
    for id in [&m1.compaction_id, &m1.message_id, &m2.compaction_id] {
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
        assert!(
            id.chars()
                .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
        );
    }
    assert_ne!(m1.compaction_id, m1.message_id);
    assert_ne!(m1.compaction_id, m2.compaction_id);
    assert!(m1.time > 1_700_000_000_000);
}

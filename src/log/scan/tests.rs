use super::*;
use crate::log::finding::Finding;
use crate::log::test_support::{replace_keys, testdata_logs};

const V3: &str =
    r#"{"type":"session","version":3,"id":"s","createdAt":1,"delegationDepth":0,"isSeeded":false}"#;

fn run(text: &str) -> (Scan, Vec<Finding>) {
    let mut findings = Vec::new();
    let s = scan(
        text.as_bytes(),
        None,
        &ScanOptions::default(),
        &mut findings,
        &mut (),
    )
    .unwrap();
    (s, findings)
}

fn codes(f: &[Finding]) -> Vec<&'static str> {
    f.iter().map(|f| f.code.as_str()).collect()
}

fn turn(seq0: u64, turn: u64) -> String {
    format!(
        "{{\"type\":\"turn/start\",\"seq\":{seq0},\"time\":0,\"data\":{{\"turn\":{turn}}}}}\n{{\"type\":\"turn/end\",\"seq\":{},\"time\":0,\"data\":{{\"turn\":{turn},\"reason\":{{\"kind\":\"completed\"}}}}}}\n",
        seq0 + 1
    )
}

#[test]
fn empty_file_has_no_header() {
    let (s, f) = run("");
    assert_eq!(codes(&f), ["file-no-header"]);
    assert_eq!(s.status(), Status::Invalid);
}

#[test]
fn header_only_is_valid_with_zero_events() {
    let (s, f) = run(&format!("{V3}\n"));
    assert!(f.is_empty(), "{f:?}");
    assert_eq!((s.status(), s.events()), (Status::Valid, 0));
}

#[test]
fn torn_final_line_is_a_warning_and_never_parsed() {
    let (s, f) = run(&format!("{V3}\n{}{{\"type\":\"turn/sta", turn(0, 1)));
    assert_eq!(codes(&f), ["torn-line"]);
    assert_eq!((s.status(), s.events()), (Status::Valid, 2));
    assert!(s.torn.is_some());
    assert_eq!(s.committed_bytes, (V3.len() + 1 + turn(0, 1).len()) as u64);
}

#[test]
fn damage_after_the_last_turn_end_is_a_crash_tail() {
    let text = format!(
        "{V3}\n{}not json\n{{\"type\":\"turn/start\",\"seq\":2,\"time\":0,\"data\":{{\"turn\":2}}}}\n",
        turn(0, 1)
    );
    let (s, f) = run(&text);
    assert_eq!(codes(&f), ["crash-tail"]);
    assert_eq!((s.status(), s.events()), (Status::Valid, 2));
    let tail = s.crash.unwrap();
    assert_eq!((tail.line, tail.rows), (4, 2));
}

#[test]
fn damage_before_a_later_turn_end_is_corruption() {
    let text = format!("{V3}\nnot json\n{}", turn(0, 1));
    let (s, f) = run(&text);
    assert_eq!(codes(&f), ["committed-unparsable"]);
    assert_eq!(s.status(), Status::Invalid);
    // Checking went on after the damage: both events were folded.
    assert_eq!(s.events(), 2);
}

#[test]
fn seq_gap_before_a_turn_end_is_fatal_and_resynchronises() {
    let text = format!("{V3}\n{}", turn(5, 1));
    let (s, f) = run(&text);
    assert_eq!(codes(&f), ["committed-seq-gap"]);
    assert_eq!(s.status(), Status::Invalid);
    assert_eq!(f[0].seq, Some(5));
}

#[test]
fn seq_gap_at_the_end_is_a_crash_tail() {
    let text = format!(
        "{V3}\n{}{{\"type\":\"turn/start\",\"seq\":7,\"time\":0,\"data\":{{\"turn\":2}}}}\n",
        turn(0, 1)
    );
    let (s, f) = run(&text);
    assert_eq!(codes(&f), ["crash-tail"]);
    assert_eq!(s.events(), 2);
}

#[test]
fn unsupported_version_stops_before_other_header_rules() {
    let (s, f) = run("{\"type\":\"session\",\"version\":7}\n{\"junk\":1}\n");
    assert_eq!(codes(&f), ["format-version-unsupported"]);
    assert_eq!((s.status(), s.version), (Status::Unsupported, Some(7)));
}

#[test]
fn unknown_required_type_is_unsupported_but_ignorable_is_opaque() {
    let text = format!(
        "{V3}\n{{\"type\":\"acme/new\",\"seq\":0,\"time\":0,\"data\":1}}\n{{\"type\":\"acme/other\",\"seq\":1,\"time\":0,\"data\":1,\"ignorable\":true,\"surfaceOp\":5}}\n"
    );
    let (s, f) = run(&text);
    assert_eq!(codes(&f), ["unknown-event-type"]);
    assert_eq!((s.status(), s.events()), (Status::Unsupported, 2));
}

#[test]
fn stop_after_replays_a_prefix() {
    let text = format!("{V3}\n{}{}", turn(0, 1), turn(2, 2));
    let mut findings = Vec::new();
    let opts = ScanOptions {
        stop_after: Some(1),
        ..ScanOptions::default()
    };
    let s = scan(text.as_bytes(), None, &opts, &mut findings, &mut ()).unwrap();
    assert_eq!(s.events(), 2);
    assert!(!s.stop_not_reached);
}

// =======================================================================================
// The committed prefix and the crash tail (§6), per format version
// =======================================================================================

const ALL: [usize; 5] = [0, 1, 2, 3, 4];

fn header(v: usize) -> String {
    if v <= 1 {
        format!(r#"{{"type":"session","version":{v},"id":"s","createdAt":1,"delegationDepth":0}}"#)
    } else {
        format!(
            r#"{{"type":"session","version":{v},"id":"s","createdAt":1,"delegationDepth":0,"isSeeded":false}}"#
        )
    }
}

fn ev(seq: u64, ty: &str, data: &str) -> String {
    format!(r#"{{"type":"{ty}","seq":{seq},"time":0,"data":{data}}}"#)
}

fn start(seq: u64, t: u64) -> String {
    ev(seq, "turn/start", &format!(r#"{{"turn":{t}}}"#))
}

fn end(seq: u64, t: u64) -> String {
    ev(
        seq,
        "turn/end",
        &format!(r#"{{"turn":{t},"reason":{{"kind":"completed"}}}}"#),
    )
}

fn user_data(seq: u64) -> String {
    format!(
        r#"{{"id":"u{seq}","role":"user","content":[{{"type":"text","text":"hi"}}],"source":{{"kind":"user"}}}}"#
    )
}

/// A `user/message` appended to the surface.
fn user(seq: u64) -> String {
    with(
        &ev(seq, "user/message", &user_data(seq)),
        r#""surfaceOp":"append""#,
    )
}

/// Add envelope members to an event line.
fn with(line: &str, members: &str) -> String {
    format!("{},{members}}}", &line[..line.len() - 1])
}

/// The log text: header and lines, each ended by a newline.
fn log(v: usize, lines: &[String]) -> String {
    let mut out = header(v);
    out.push('\n');
    for l in lines {
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// Bytes of the header and the first `k` lines.
fn through(v: usize, lines: &[String], k: usize) -> u64 {
    (header(v).len() + 1 + lines[..k].iter().map(|l| l.len() + 1).sum::<usize>()) as u64
}

fn run_opts(text: &str, opts: &ScanOptions) -> (Scan, Vec<Finding>) {
    let mut findings = Vec::new();
    let s = scan(text.as_bytes(), None, opts, &mut findings, &mut ()).unwrap();
    (s, findings)
}

/// The kinds of bad row of §6.1.
#[derive(Debug, Clone, Copy)]
enum Bad {
    /// B1
    Unparsable,
    /// B1: an empty line is unparsable JSON.
    EmptyLine,
    /// B2
    NotEvent,
    /// B3: invalid range encoding (any version).
    Ranges,
    /// B3: v0/v1 a malformed packed row; v2+ any packed row.
    Packed,
    /// B4
    Gap,
    /// B5 (v3+): C1, a surface event without `surfaceOp`.
    Canonical,
}

const B1_TO_B4: [Bad; 6] = [
    Bad::Unparsable,
    Bad::EmptyLine,
    Bad::NotEvent,
    Bad::Ranges,
    Bad::Packed,
    Bad::Gap,
];

/// A bad row where `seq` is expected: its text, the seq the next row carries, and the codes
/// reported when the row turns out to be committed.
fn bad_row(v: usize, kind: Bad, seq: u64) -> (String, u64, Vec<&'static str>) {
    match kind {
        Bad::Unparsable => (
            r#"{"type":"user/message","seq":"#.to_owned(),
            seq + 1,
            vec!["committed-unparsable"],
        ),
        Bad::EmptyLine => (String::new(), seq + 1, vec!["committed-unparsable"]),
        Bad::NotEvent => ("[42]".to_owned(), seq + 1, vec!["committed-not-event"]),
        Bad::Ranges => (
            with(
                &ev(seq, "user/message", &user_data(seq)),
                r#""sourceEventSeqs":[[1,0]],"surfaceOp":"append""#,
            ),
            seq + 1,
            vec!["committed-malformed-row"],
        ),
        Bad::Packed => {
            let texts = if v <= 1 { "[]" } else { r#"["a"]"# };
            (
                format!(
                    r#"{{"type":"text-chunks","seq0":{seq},"time0":0,"data":{{"turn":1,"step":1,"index":0,"dt":[],"texts":{texts}}}}}"#
                ),
                seq + 1,
                vec!["committed-malformed-row"],
            )
        }
        Bad::Gap => (user(seq + 6), seq + 7, vec!["committed-seq-gap"]),
        Bad::Canonical => (
            ev(seq, "user/message", &user_data(seq)),
            seq + 1,
            vec!["surface-op-missing"],
        ),
    }
}

fn kinds(v: usize) -> Vec<Bad> {
    let mut k = B1_TO_B4.to_vec();
    if v >= 3 {
        k.push(Bad::Canonical);
    }
    k
}

impl Bad {
    /// The seq a fatal finding names for this kind of row where `seq` is expected: the row's
    /// own, when it states a usable one.
    fn own_seq(self, seq: u64) -> Option<u64> {
        match self {
            Bad::Unparsable | Bad::EmptyLine | Bad::NotEvent => None,
            Bad::Ranges | Bad::Packed | Bad::Canonical => Some(seq),
            Bad::Gap => Some(seq + 6),
        }
    }
}

/// One log of [`each_bad_row`].
struct BadCase<'a> {
    /// The version and kind, as `v3 Gap`.
    what: String,
    /// Bytes of the header and the first `k` lines.
    through: &'a dyn Fn(usize) -> u64,
    /// The codes the bad row reports when it is committed.
    committed: Vec<&'static str>,
    /// The seq its fatal finding names.
    own_seq: Option<u64>,
}

/// Scans, for every version and kind of bad row, a log of a completed turn 1, the bad row,
/// a user message and turn 2 starting; `later_end` also ends turn 2, which commits the bad
/// row.
fn each_bad_row(later_end: bool, check: impl Fn(BadCase<'_>, Scan, Vec<Finding>)) {
    for v in ALL {
        for kind in kinds(v) {
            let (bad, next, committed) = bad_row(v, kind, 3);
            let mut lines = vec![
                start(0, 1),
                user(1),
                end(2, 1),
                bad,
                user(next),
                start(next + 1, 2),
            ];
            if later_end {
                lines.push(end(next + 2, 2));
            }
            let (s, f) = run(&log(v, &lines));
            let case = BadCase {
                what: format!("v{v} {kind:?}"),
                through: &|k| through(v, &lines, k),
                committed,
                own_seq: kind.own_seq(3),
            };
            check(case, s, f);
        }
    }
}

#[test]
fn every_bad_row_kind_after_the_last_turn_end_is_a_dropped_crash_tail() {
    each_bad_row(false, |BadCase { what, through, .. }, s, f| {
        assert_eq!(codes(&f), ["crash-tail"], "{what}: {f:?}");
        assert!(!f[0].is_error());
        assert_eq!(s.status(), Status::Valid, "{what}");
        // The tail's events are not counted and never reach the surface.
        assert_eq!(s.events(), 3, "{what}");
        assert_eq!(s.surface_nodes(), 1, "{what}");
        assert!(!s.open_turn(), "{what}");
        assert_eq!(s.committed_bytes, through(3), "{what}");
        let tail = s.crash.expect("crash tail");
        assert_eq!((tail.line, tail.rows), (5, 3), "{what}");
        assert_eq!(tail.byte, through(3), "{what}");
        assert_eq!(tail.end, through(6), "{what}");
        assert_eq!(f[0].pos.line, 5, "{what}");
    });
}

#[test]
fn every_bad_row_kind_before_a_later_turn_end_is_fatal_and_names_the_rows_own_seq() {
    each_bad_row(true, |case, s, f| {
        let BadCase {
            what,
            through,
            committed,
            own_seq,
        } = case;
        assert_eq!(codes(&f), committed, "{what}: {f:?}");
        assert!(f.iter().all(|f| f.is_error() && f.pos.line == 5), "{what}");
        assert_eq!(f[0].seq, own_seq, "{what}");
        assert_eq!(s.status(), Status::Invalid, "{what}");
        assert!(s.crash.is_none(), "{what}");
        assert_eq!(s.committed_bytes, through(7), "{what}");
    });
}

#[test]
fn damage_in_the_middle_of_an_open_turn_is_fatal_once_the_turn_ends() {
    for v in ALL {
        let lines = vec![start(0, 1), "garbage".to_owned(), user(2), end(3, 1)];
        let (s, f) = run(&log(v, &lines));
        assert_eq!(codes(&f), ["committed-unparsable"], "v{v}");
        assert_eq!(s.status(), Status::Invalid);
    }
}

#[test]
fn a_gap_row_that_is_itself_a_turn_end_is_fatal() {
    for v in ALL {
        let lines = vec![start(0, 1), user(1), end(5, 1)];
        let (s, f) = run(&log(v, &lines));
        assert_eq!(codes(&f), ["committed-seq-gap"], "v{v}");
        assert_eq!(f[0].seq, Some(5));
        assert_eq!(s.status(), Status::Invalid);
        assert!(s.crash.is_none());
    }
}

#[test]
fn a_malformed_row_that_is_a_turn_end_is_fatal() {
    for v in ALL {
        let lines = vec![
            start(0, 1),
            user(1),
            with(&end(2, 1), r#""sourceEventSeqs":[[1,0]]"#),
        ];
        let (s, f) = run(&log(v, &lines));
        // The malformed turn/end never folds, so turn 1 also stays open.
        assert_eq!(
            codes(&f),
            ["committed-malformed-row", "open-turn-at-end"],
            "v{v}"
        );
        assert_eq!(s.status(), Status::Invalid);
    }
}

#[test]
fn a_canonical_violation_on_a_turn_end_itself_is_fatal_in_v3_and_v4() {
    for v in [3, 4] {
        let lines = vec![
            start(0, 1),
            user(1),
            with(&end(2, 1), r#""surfaceOp":"append""#),
        ];
        let (s, f) = run(&log(v, &lines));
        assert_eq!(codes(&f), ["surface-metadata-on-log-only"], "v{v}");
        assert_eq!(s.status(), Status::Invalid);
    }
}

#[test]
fn v3_canonical_violations_are_bad_rows_each_with_its_own_code() {
    let replace_old_keys =
        r#""sourceEventSeqs":[1],"surfaceOp":{"op":"replace","start":1,"end":1}"#;
    let cases: Vec<(String, &str)> = vec![
        (ev(3, "user/message", &user_data(3)), "surface-op-missing"),
        (
            with(&todo(3), r#""surfaceOp":"append""#),
            "surface-metadata-on-log-only",
        ),
        (
            with(&todo(3), r#""sourceEventSeqs":[1]"#),
            "surface-metadata-on-log-only",
        ),
        (
            with(&ev(3, "user/message", &user_data(3)), replace_old_keys),
            "replace-op-invalid",
        ),
        (
            with(
                &ev(3, "user/message", &user_data(3)),
                r#""sourceEventSeqs":[1],"surfaceOp":{"op":"replace","startSeq":1,"endSeq":3}"#,
            ),
            "replace-endpoint-not-earlier",
        ),
        (with(&user(3), "\"x\":1").replace(r#","x":1"#, ""), ""), // control: valid
    ];
    for v in [3, 4] {
        for (row, code) in &cases {
            // At the end: a crash tail (or, for the control, simply valid).
            let lines = vec![start(0, 1), user(1), end(2, 1), row.clone()];
            let (s, f) = run(&log(v, &lines));
            if code.is_empty() {
                assert!(f.is_empty(), "{f:?}");
                continue;
            }
            assert_eq!(codes(&f), ["crash-tail"], "v{v} {code}");
            assert_eq!(s.events(), 3);
            // Before a turn end: fatal with the rule's own code.
            let lines = vec![
                start(0, 1),
                user(1),
                end(2, 1),
                row.clone(),
                start(4, 2),
                end(5, 2),
            ];
            let (s, f) = run(&log(v, &lines));
            assert_eq!(codes(&f), [*code], "v{v}");
            assert_eq!(s.status(), Status::Invalid);
        }
    }
}

fn todo(seq: u64) -> String {
    ev(seq, "todo/write", r#"{"todos":[]}"#)
}

#[test]
fn v3_source_seqs_on_assistant_is_a_bad_row() {
    // C3: without it being a bad row, the committed fold would reject the event instead.
    for v in [3, 4] {
        let assistant = with(
            &ev(
                3,
                "assistant/message",
                r#"{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}},"stream":[]}"#,
            ),
            r#""sourceEventSeqs":[],"surfaceOp":"append""#,
        );
        let lines = vec![start(0, 1), user(1), end(2, 1), assistant];
        let (s, f) = run(&log(v, &lines));
        assert_eq!(codes(&f), ["crash-tail"], "v{v}: {f:?}");
        assert_eq!(s.events(), 3);
    }
}

#[test]
fn v3_request_header_with_empty_tools_is_a_bad_row() {
    // C7: `tools: []` in a request/header.
    for v in [3, 4] {
        let header = ev(
            3,
            "request/header",
            r#"{"header":{"config":{"provider":"p","model":"m"},"tools":[]},"reason":"initial"}"#,
        );
        let lines = vec![
            start(0, 1),
            user(1),
            end(2, 1),
            start(3, 2),
            header.replace("\"seq\":3", "\"seq\":4"),
        ];
        let (s, f) = run(&log(v, &lines));
        assert_eq!(codes(&f), ["crash-tail", "open-turn-at-end"], "v{v}: {f:?}");
        assert_eq!(s.events(), 4);
        let mut lines = lines.clone();
        lines.push(end(5, 2));
        let (_, f) = run(&log(v, &lines));
        assert_eq!(codes(&f), ["request-header-empty-optional"], "v{v}");
    }
}

#[test]
fn v3_tool_result_error_without_flag_is_fatal_before_a_turn_end() {
    // C8: `data.error` present but the failure flag not set.
    for v in [3, 4] {
        let message = if v == 3 {
            r#"{"id":"r","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[],"isError":false}],"source":{"kind":"tool","callId":"c"}}"#
        } else {
            r#"{"id":"r","role":"tool","toolCallId":"c","isError":false,"content":[],"source":{"kind":"tool","callId":"c"}}"#
        };
        let result = with(
            &ev(
                4,
                "tool/result",
                &format!(
                    r#"{{"turn":1,"step":1,"message":{message},"error":{{"name":"E","code":"X"}}}}"#
                ),
            ),
            r#""sourceEventSeqs":[3],"surfaceOp":"append""#,
        );
        let assistant = with(
            &ev(
                2,
                "assistant/message",
                r#"{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}},"stream":[]}"#,
            ),
            r#""surfaceOp":"append""#,
        );
        let lines = vec![
            start(0, 1),
            ev(1, "step/start", r#"{"turn":1,"step":1}"#),
            assistant,
            ev(
                3,
                "tool/call",
                r#"{"turn":1,"step":1,"callId":"c","name":"bash","arguments":"{}"}"#,
            ),
            result.clone(),
            ev(5, "step/end", r#"{"turn":1,"step":1}"#),
            end(6, 1),
        ];
        let (s, f) = run(&log(v, &lines));
        assert_eq!(codes(&f), ["tool-result-error-without-flag"], "v{v}");
        assert_eq!(s.status(), Status::Invalid);
        // Flagged, it is valid.
        let flagged = lines
            .iter()
            .map(|l| l.replace(r#""isError":false"#, r#""isError":true"#))
            .collect::<Vec<_>>();
        let (s, f) = run(&log(v, &flagged));
        assert!(f.is_empty(), "v{v}: {f:?}");
        assert_eq!(s.status(), Status::Valid);
    }
}

#[test]
fn v0_to_v2_semantic_errors_at_the_very_end_are_not_a_crash_tail() {
    for v in [0, 1, 2] {
        // A surface event without surfaceOp: rejected by the fold, not dropped.
        let lines = vec![
            start(0, 1),
            user(1),
            end(2, 1),
            ev(3, "user/message", &user_data(3)),
        ];
        let (s, f) = run(&log(v, &lines));
        assert_eq!(codes(&f), ["surface-op-missing"], "v{v}");
        assert_eq!(s.status(), Status::Invalid);
        assert!(s.crash.is_none());
        assert_eq!(s.events(), 4);
        // A bad envelope.
        let lines = vec![
            start(0, 1),
            user(1),
            end(2, 1),
            with(&start(3, 2), r#""extra":1"#),
        ];
        let (s, f) = run(&log(v, &lines));
        assert_eq!(codes(&f), ["envelope-invalid"], "v{v}");
        assert_eq!(s.status(), Status::Invalid);
        assert!(s.crash.is_none());
        // A log-only event with surface metadata.
        let lines = vec![
            start(0, 1),
            user(1),
            end(2, 1),
            with(&start(3, 2), r#""surfaceOp":"append""#),
        ];
        let (_, f) = run(&log(v, &lines));
        assert!(codes(&f).contains(&"surface-metadata-on-log-only"), "v{v}");
        assert!(!codes(&f).contains(&"crash-tail"), "v{v}");
    }
}

#[test]
fn v0_packed_rows_count_as_all_their_members() {
    for v in [0, 1] {
        let packed = r#"{"type":"text-chunks","seq0":2,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}"#;
        let lines = vec![
            start(0, 1),
            ev(1, "step/start", r#"{"turn":1,"step":1}"#),
            packed.to_owned(),
            ev(5, "step/end", r#"{"turn":1,"step":1}"#),
            end(6, 1),
        ];
        let (s, f) = run(&log(v, &lines));
        assert!(f.is_empty(), "v{v}: {f:?}");
        assert_eq!(s.events(), 7);
        // A packed row is one row: its members stand or fall together.
        let lines = vec![
            start(0, 1),
            user(1),
            end(2, 1),
            packed.replace("\"seq0\":2", "\"seq0\":4"),
        ];
        let (s, f) = run(&log(v, &lines));
        assert_eq!(codes(&f), ["crash-tail"], "v{v}");
        assert_eq!(s.events(), 3);
        let lines = vec![
            start(0, 1),
            ev(1, "step/start", r#"{"turn":1,"step":1}"#),
            packed.replace("\"seq0\":2", "\"seq0\":3"),
            ev(6, "step/end", r#"{"turn":1,"step":1}"#),
            end(7, 1),
        ];
        let (_, f) = run(&log(v, &lines));
        assert_eq!(codes(&f), ["committed-seq-gap"], "v{v}");
        assert_eq!(f[0].seq, Some(3));
    }
}

/// An observer that sees every event, so packed rows are folded member by member.
struct EveryEvent;

impl Observer for EveryEvent {}

/// What a pass concluded, for comparing two ways of folding the same log.
fn outcome(text: &str, opts: &ScanOptions, observer: &mut dyn Observer) -> String {
    let mut findings = Vec::new();
    let s = scan(text.as_bytes(), None, opts, &mut findings, observer).unwrap();
    let Some(state) = s.state.as_ref() else {
        return format!("{:?}, no fold\n{findings:#?}", s.status());
    };
    format!(
        "{:?} events {} bytes {} closers {:?} next {} surface {:?}\n{findings:#?}",
        s.status(),
        s.events(),
        s.committed_bytes,
        state.closers.last(),
        state.surface.next_seq(),
        state.surface.seqs()
    )
}

/// `()`, but asking for whole trees ([`Shape::Full`]).
struct WholeTrees;

impl Observer for WholeTrees {
    fn wants_each_event(&self) -> bool {
        false
    }
    fn inert(&self) -> bool {
        true
    }
}

#[test]
fn lean_trees_change_nothing_the_checks_say_of_any_testdata_log() {
    let logs = testdata_logs();
    assert!(logs.len() > 100, "{} logs", logs.len());
    let (mut streams, mut packed, mut encoded) = (0, 0, 0);
    // Whether a lean packed tree holds a line's `sourceEventSeqs` range-encoded.
    let encodes = |line: &str| {
        let list = |shape| {
            let parsed = crate::log::json::parse_tallied_in(line, None, None, shape).ok();
            parsed.and_then(|(v, ..)| v.get("sourceEventSeqs").map(Json::to_js_string))
        };
        list(Shape::LeanPacked) != list(Shape::Full)
    };
    for log in &logs {
        let bytes = std::fs::read(log).unwrap();
        streams += usize::from(memchr::memmem::find(&bytes, br#""stream":[{"#).is_some());
        packed += usize::from(memchr::memmem::find(&bytes, br#""seq0":"#).is_some());
        let text = String::from_utf8_lossy(&bytes);
        // Where `()` asks for lean packed trees.
        let dialect = run(&text).0.dialect;
        let lean_packed = dialect.is_some_and(|d| tree_shape(d, &(), false) == Shape::LeanPacked);
        encoded += usize::from(lean_packed && text.lines().any(encodes));
        for threads in [1, 2] {
            let opts = ScanOptions {
                threads,
                block_bytes: 512,
                ..ScanOptions::default()
            };
            assert_eq!(
                outcome(&text, &opts, &mut ()),
                outcome(&text, &opts, &mut WholeTrees),
                "{} on {threads} threads",
                log.display()
            );
        }
    }
    assert!(streams >= 30, "{streams} logs with stream records");
    assert!(packed >= 8, "{packed} logs with packed rows");
    assert!(
        encoded >= 30,
        "{encoded} logs with plain runs of sourceEventSeqs"
    );
}

#[test]
fn a_range_encoded_source_list_draws_the_findings_of_the_plain_one() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/v0/packed-compaction.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let stored = r#""sourceEventSeqs":[15,16,17,18,19,20,21,22]"#;
    assert!(
        text.contains(stored),
        "the assistant message's list (seq 23)"
    );
    for (list, says) in [
        ("[15,16,17,18,19,20,21,22]", None),
        ("[2,15,16,17,18]", None),
        (
            "[15,16,17,23]",
            Some("must reference earlier events: 23 >= current seq 23"),
        ),
        ("[21,22,23,24,25]", Some("23 >= current seq 23")),
        (
            "[15,16,17,17]",
            Some("must not contain duplicates (17 repeats)"),
        ),
        (
            "[15,16,17,9007199254740992]",
            Some("non-negative safe integers"),
        ),
    ] {
        let text = text.replace(stored, &format!(r#""sourceEventSeqs":{list}"#));
        let opts = ScanOptions::default();
        let lean = outcome(&text, &opts, &mut ());
        assert_eq!(lean, outcome(&text, &opts, &mut WholeTrees), "{list}");
        match says {
            Some(says) => assert!(lean.contains(says), "{list}: {lean}"),
            None => assert!(lean.starts_with("Valid"), "{list}: {lean}"),
        }
    }
}

/// The length of each `texts` array in the stream records of the events it sees.
struct StreamTexts {
    reads: bool,
    lens: Vec<usize>,
}

impl Observer for StreamTexts {
    fn event(&mut self, info: &EventInfo<'_, '_>, _: &FoldState) {
        let records = info.event.data.get("stream").and_then(Json::as_arr);
        for r in records.unwrap_or_default() {
            if let Some(texts) = r.get("texts").and_then(Json::as_arr) {
                self.lens.push(texts.len());
            }
        }
    }
    fn reads_stream_records(&self) -> bool {
        self.reads
    }
}

/// A turn of one step whose `assistant/message` (seq 2, content `content`) embeds `stream`.
fn streamed_turn(content: &str, stream: &str) -> Vec<String> {
    let message = ev(
        2,
        "assistant/message",
        &format!(
            r#"{{"turn":1,"step":1,"message":{{"id":"m","role":"assistant","content":{content},"source":{{"kind":"model","provider":"p","model":"m"}}}},"stream":{stream}}}"#
        ),
    );
    let step = |seq, ty| ev(seq, ty, r#"{"turn":1,"step":1}"#);
    vec![
        start(0, 1),
        step(1, "step/start"),
        with(&message, r#""surfaceOp":"append""#),
        step(3, "step/end"),
        end(4, 1),
    ]
}

#[test]
fn a_pass_builds_lean_trees_only_for_observers_that_never_read_stream_records() {
    let lines = streamed_turn(
        r#"[{"type":"text","text":"ab"}]"#,
        r#"[{"type":"text-chunks","time0":1,"index":0,"dt":[0,1],"texts":["a","b"]}]"#,
    );
    // A bad row before the turn end: the rows after it are kept aside and replayed.
    let mut replayed = lines.clone();
    replayed.insert(2, "not json".to_owned());
    for (text, damaged) in [(log(3, &lines), false), (log(3, &replayed), true)] {
        for threads in [1, 2] {
            let opts = ScanOptions {
                threads,
                block_bytes: 64,
                ..ScanOptions::default()
            };
            for reads in [true, false] {
                let mut seen = StreamTexts {
                    reads,
                    lens: Vec::new(),
                };
                let mut findings = Vec::new();
                scan(text.as_bytes(), None, &opts, &mut findings, &mut seen).unwrap();
                let want = if reads { 2 } else { 0 };
                assert_eq!(seen.lens, [want], "{threads} threads, damaged: {damaged}");
                assert_eq!(findings.is_empty(), !damaged, "{findings:?}");
            }
        }
    }
}

#[test]
fn a_pass_leaves_out_packed_rows_arrays_only_where_it_folds_first_members_alone() {
    let shapes = |observer: &dyn Fn(&Dialect) -> Shape| {
        crate::log::dialect::DIALECTS
            .iter()
            .map(observer)
            .collect::<Vec<_>>()
    };
    let (full, lean, packed) = (Shape::Full, Shape::Lean, Shape::LeanPacked);
    assert_eq!(
        shapes(&|d| tree_shape(d, &(), false)),
        [packed, packed, lean, lean, lean]
    );
    // Every member folded: a packed row's arrays are read.
    let each = StreamTexts {
        reads: false,
        lens: Vec::new(),
    };
    assert_eq!(
        shapes(&|d| tree_shape(d, &each, false)),
        [full, full, lean, lean, lean]
    );
    assert_eq!(shapes(&|d| tree_shape(d, &WholeTrees, false)), [full; 5]);
    assert_eq!(shapes(&|d| tree_shape(d, &EveryEvent, false)), [full; 5]);
}

#[test]
fn the_stream_checks_read_a_lean_tree_as_a_whole_one() {
    for (v, stream, code, says) in [
        (
            3,
            r#"[{"type":"text-chunks","dt":[1],"texts":["a"]},{"type":"nope","dt":[[1]],"texts":[{"type":"text-chunks"}]}]"#,
            "assistant-stream-missing",
            "stream record 1 ",
        ),
        (
            4,
            r#"[{"type":"text-chunks","dt":[1],"texts":["a"]},{"type":"chunk","chunk":{"type":"block-end","index":0,"block":{"type":"tool-result","content":[{"type":"text","text":"x"}]}}}]"#,
            "retired-tool-result-block",
            "data.stream[1].chunk",
        ),
    ] {
        let text = log(v, &streamed_turn("[]", stream));
        let opts = ScanOptions::default();
        let lean = outcome(&text, &opts, &mut ());
        assert_eq!(lean, outcome(&text, &opts, &mut WholeTrees));
        let (_, f) = run_opts(&text, &opts);
        let hit = f.iter().find(|f| f.code.as_str() == code);
        assert!(hit.is_some_and(|f| f.message.contains(says)), "v{v}: {f:?}");
    }
}

#[test]
fn packed_members_fold_like_events() {
    let text = |seq0: u64, turn: u64, step: u64| {
        format!(
            r#"{{"type":"text-chunks","seq0":{seq0},"time0":10,"data":{{"turn":{turn},"step":{step},"index":0,"dt":[5,-2],"texts":["a","b","c"]}}}}"#
        )
    };
    let tool = |seq0: u64| {
        format!(
            r#"{{"type":"tool-call-chunks","seq0":{seq0},"time0":10,"data":{{"turn":1,"step":1,"index":1,"id":"c1","name":"bash","dt":[1],"args":["{{","}}"]}}}}"#
        )
    };
    let step = |seq: u64, ty: &str| ev(seq, ty, r#"{"turn":1,"step":1}"#);
    let logs: Vec<(&str, Vec<String>)> = vec![
        (
            "clean",
            vec![
                start(0, 1),
                step(1, "step/start"),
                text(2, 1, 1),
                tool(5),
                step(7, "step/end"),
                end(8, 1),
            ],
        ),
        // The first member draws a finding: so does every other one.
        (
            "outside a step",
            vec![start(0, 1), text(1, 1, 1), end(4, 1)],
        ),
        (
            "another step",
            vec![
                start(0, 1),
                step(1, "step/start"),
                text(2, 1, 2),
                step(5, "step/end"),
                end(6, 1),
            ],
        ),
        (
            "another turn",
            vec![
                start(0, 1),
                step(1, "step/start"),
                text(2, 7, 1),
                step(5, "step/end"),
                end(6, 1),
            ],
        ),
        // Damaged: the row goes back to seq 1, and its later members land on seqs already on
        // the surface (its first does not).
        (
            "back over the surface",
            vec![
                start(0, 1),
                step(1, "step/start"),
                user(2),
                user(3),
                text(1, 1, 1),
                step(4, "step/end"),
                end(5, 1),
            ],
        ),
        // After a bad row: folded speculatively, then committed by the turn end...
        (
            "speculative, committed",
            vec![
                start(0, 1),
                step(1, "step/start"),
                "not json".into(),
                text(3, 1, 1),
                step(6, "step/end"),
                end(7, 1),
            ],
        ),
        // ...or dropped with the crash tail.
        (
            "speculative, dropped",
            vec![
                start(0, 1),
                step(1, "step/start"),
                "not json".into(),
                text(3, 1, 1),
            ],
        ),
        (
            "a single member",
            vec![start(0, 1), step(1, "step/start"), {
                r#"{"type":"reasoning-chunks","seq0":2,"time0":3,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["x"]}}"#.to_owned()
            }],
        ),
    ];
    for v in [0, 1] {
        for (what, lines) in &logs {
            let log = log(v, lines);
            for stop_after in [None, Some(2), Some(3), Some(4)] {
                let opts = |threads, block_bytes| ScanOptions {
                    stop_after,
                    threads,
                    block_bytes,
                    ..ScanOptions::default()
                };
                // Member by member, one line at a time.
                let expected = outcome(&log, &opts(1, 0), &mut EveryEvent);
                for (threads, block_bytes) in [(1, 0), (2, 64)] {
                    assert_eq!(
                        outcome(&log, &opts(threads, block_bytes), &mut ()),
                        expected,
                        "v{v} {what}, stop after {stop_after:?}, {threads} threads"
                    );
                }
            }
        }
    }
    // The rows above draw the findings they are meant to.
    let opts = ScanOptions::default();
    let (_, f) = run_opts(&log(0, &logs[1].1), &opts);
    assert_eq!(codes(&f), ["event-outside-open-step"; 3]);
    let (_, f) = run_opts(&log(0, &logs[4].1), &opts);
    let repeated = f.iter().filter(|f| f.message.contains("repeats the seq"));
    assert_eq!(
        repeated.map(|f| f.seq).collect::<Vec<_>>(),
        [Some(2), Some(3)]
    );
}

#[test]
fn packed_tags_are_malformed_rows_from_v2_on() {
    let packed = r#"{"type":"text-chunks","seq0":3,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b"]}}"#;
    for v in ALL {
        let lines = vec![
            start(0, 1),
            user(1),
            end(2, 1),
            packed.to_owned(),
            start(5, 2),
            end(6, 2),
        ];
        let (_, f) = run(&log(v, &lines));
        if v <= 1 {
            // Valid in v0/v1 (the chunks sit outside a step: lifecycle warnings only).
            assert!(f.iter().all(|f| !f.is_error()), "v{v}: {f:?}");
        } else {
            // One finding for the one bad row, naming the rule it breaks.
            assert_eq!(codes(&f), ["committed-malformed-row"], "v{v}");
            assert!(f[0].message.contains("only in formats v0 and v1"));
            assert!(f[0].message.contains("rule packed-row-malformed"));
        }
    }
}

#[test]
fn always_fatal_v3_findings_are_reported_even_inside_a_crash_tail() {
    let system_header = ev(
        4,
        "request/header",
        r#"{"header":{"config":{"provider":"p","model":"m"},"system":""},"reason":"initial"}"#,
    );
    let dispatch = ev(4, "tool/code-dispatch", "{}");
    let bad_system = with(
        &ev(
            4,
            "system/message",
            r#"{"turn":2,"step":1,"message":{"role":"system","content":[],"source":{"kind":"system-prompt"}}}"#,
        ),
        r#""surfaceOp":"append""#,
    );
    let retired_block = with(
        &ev(
            4,
            "user/message",
            r#"{"id":"u","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]}],"source":{"kind":"user"}}"#,
        ),
        r#""surfaceOp":"append""#,
    );
    let mut cases = vec![
        (3, system_header.clone(), "request-header-system-retired"),
        (4, system_header, "request-header-system-retired"),
        (3, dispatch.clone(), "retired-event-type"),
        (4, dispatch, "retired-event-type"),
        (3, bad_system.clone(), "message-id-missing"),
        (4, bad_system, "message-id-missing"),
    ];
    cases.push((4, retired_block, "retired-tool-result-block"));
    for (v, row, code) in cases {
        let lines = vec![start(0, 1), user(1), end(2, 1), "garbage".to_owned(), row];
        let (s, f) = run(&log(v, &lines));
        assert_eq!(codes(&f), [code, "crash-tail"], "v{v}");
        assert_eq!(s.status(), Status::Invalid, "v{v} {code}");
        // The tail is still dropped.
        assert_eq!(s.events(), 3);
        assert_eq!(s.committed_bytes, through(v, &lines, 3));
    }
}

#[test]
fn an_always_fatal_finding_on_the_first_bad_row_of_a_crash_tail_is_reported() {
    // The first bad row is a B5 row (no surfaceOp: a canonical violation, §8 C1) whose
    // system message also lacks its id (fatal anywhere, §6.2 step 6); only garbage follows.
    let bad_system = ev(
        3,
        "system/message",
        r#"{"turn":2,"step":1,"message":{"role":"system","content":[],"source":{"kind":"system-prompt"}}}"#,
    );
    for v in [3, 4] {
        let lines = vec![
            start(0, 1),
            user(1),
            end(2, 1),
            bad_system.clone(),
            "x".into(),
        ];
        let (s, f) = run(&log(v, &lines));
        assert_eq!(codes(&f), ["message-id-missing", "crash-tail"], "v{v}");
        assert_eq!(s.status(), Status::Invalid, "v{v}");
        assert_eq!(s.events(), 3);
    }
}

#[test]
fn a_crash_tail_of_junk_alone_is_dropped_without_holding_anything() {
    // 200,000 blank lines after the last turn end: one crash-tail warning; the kept rows
    // went to the spool's file (past its in-memory part) and were never read back.
    let mut text = log(3, &[start(0, 1), user(1), end(2, 1)]);
    text.push_str(&"\n".repeat(200_000));
    let (s, f) = run(&text);
    assert_eq!(codes(&f), ["crash-tail"]);
    assert_eq!(s.crash.map(|c| c.rows), Some(200_000));
    assert_eq!(s.status(), Status::Valid);
    // The same junk before a turn end is committed damage: every row reported.
    let mut text = log(3, &[start(0, 1), user(1), end(2, 1)]);
    text.push_str(&"\n".repeat(200_000));
    text.push_str(&format!("{}\n{}\n", start(3, 2), end(4, 2)));
    let (s, f) = run(&text);
    assert_eq!(f.len(), 200_000, "{:?}", &f[..f.len().min(3)]);
    assert!(f.iter().all(|f| f.code.as_str() == "committed-unparsable"));
    assert_eq!(f[199_999].pos.line, 200_004);
    assert_eq!(s.status(), Status::Invalid);
}

#[test]
fn always_fatal_rows_are_not_bad_rows_so_they_commit_at_the_end() {
    for v in [3, 4] {
        let lines = vec![
            start(0, 1),
            user(1),
            end(2, 1),
            ev(3, "tool/code-dispatch", "{}"),
        ];
        let (s, f) = run(&log(v, &lines));
        assert_eq!(codes(&f), ["retired-event-type"], "v{v}");
        assert!(s.crash.is_none());
        assert_eq!(s.events(), 4);
    }
    // An ignorable one stays opaque.
    let lines = vec![
        start(0, 1),
        with(&ev(1, "tool/code-dispatch", "{}"), r#""ignorable":true"#),
        end(2, 1),
    ];
    let (s, f) = run(&log(3, &lines));
    assert!(f.is_empty(), "{f:?}");
    assert_eq!(s.status(), Status::Valid);
}

#[test]
fn in_v0_to_v2_tail_findings_are_all_dropped() {
    let system_header = ev(
        4,
        "request/header",
        r#"{"header":{"config":{"provider":"p","model":"m"},"system":""},"reason":"initial"}"#,
    );
    for v in [0, 1, 2] {
        let lines = vec![
            start(0, 1),
            user(1),
            end(2, 1),
            "garbage".to_owned(),
            system_header.clone(),
        ];
        let (_, f) = run(&log(v, &lines));
        assert_eq!(codes(&f), ["crash-tail"], "v{v}");
    }
}

#[test]
fn torn_line_and_crash_tail_together() {
    for v in ALL {
        let lines = vec![
            start(0, 1),
            user(1),
            end(2, 1),
            "garbage".to_owned(),
            user(4),
        ];
        let mut text = log(v, &lines);
        text.push_str(r#"{"type":"turn/end","seq":5"#);
        let (s, f) = run(&text);
        assert_eq!(codes(&f), ["crash-tail", "torn-line"], "v{v}");
        assert_eq!(s.status(), Status::Valid);
        assert_eq!(s.events(), 3);
        assert_eq!(s.committed_bytes, through(v, &lines, 3));
        let torn = s.torn.expect("torn");
        assert_eq!(torn.byte, through(v, &lines, 5));
        assert_eq!(torn.line, 7);
        let tail = s.crash.expect("tail");
        assert_eq!((tail.rows, tail.end), (2, torn.byte));
        assert_eq!(s.total_bytes, text.len() as u64);
    }
}

#[test]
fn a_torn_turn_end_does_not_commit_earlier_damage() {
    // The torn line is never parsed, so its turn/end cannot make the damage fatal.
    for v in ALL {
        let lines = vec![start(0, 1), user(1), end(2, 1), "garbage".to_owned()];
        let mut text = log(v, &lines);
        text.push_str(&end(4, 1));
        let (s, f) = run(&text);
        assert_eq!(codes(&f), ["crash-tail", "torn-line"], "v{v}");
        assert_eq!(s.status(), Status::Valid);
    }
}

#[test]
fn events_count_excludes_the_torn_line_and_open_turn_is_reported() {
    for v in ALL {
        let lines = vec![start(0, 1), user(1)];
        let mut text = log(v, &lines);
        text.push_str(&end(2, 1));
        let (s, f) = run(&text);
        assert_eq!(codes(&f), ["torn-line", "open-turn-at-end"], "v{v}");
        assert_eq!(s.events(), 2);
        assert!(s.open_turn());
        assert!(s.torn.is_some());
        assert_eq!(s.status(), Status::Valid);
        let (s, _) = run(&log(v, &[start(0, 1), user(1), end(2, 1)]));
        assert!(!s.open_turn());
        assert!(s.torn.is_none());
    }
}

#[test]
fn crash_tail_rolls_back_an_open_turn_state() {
    // The tail opens turn 2; once dropped, the committed prefix ends between turns.
    for v in ALL {
        let lines = vec![
            start(0, 1),
            end(1, 1),
            "garbage".to_owned(),
            start(3, 2),
            user(4),
        ];
        let (s, f) = run(&log(v, &lines));
        assert_eq!(codes(&f), ["crash-tail"], "v{v}");
        assert!(!s.open_turn());
        assert_eq!(s.surface_nodes(), 0);
    }
}

/// A log of version `v` with appends, a replacement, turns and a tool result.
fn busy_log(v: usize) -> Vec<String> {
    let (s, e) = replace_keys(v);
    vec![
        start(0, 1),
        user(1),
        user(2),
        end(3, 1),
        start(4, 2),
        with(
            &ev(5, "user/message", &user_data(5)),
            &format!(r#""sourceEventSeqs":[1,2],"surfaceOp":{{"op":"replace","{s}":1,"{e}":2}}"#),
        ),
        user(6),
        end(7, 2),
        start(8, 3),
        user(9),
    ]
}

#[test]
fn stop_after_equals_folding_the_log_truncated_after_that_seq() {
    for v in ALL {
        let lines = busy_log(v);
        for k in 0..lines.len() {
            let opts = ScanOptions {
                stop_after: Some(k as u64),
                record_replacements: true,
                ..ScanOptions::default()
            };
            let (at, f_at) = run_opts(&log(v, &lines), &opts);
            let truncated = ScanOptions {
                record_replacements: true,
                ..ScanOptions::default()
            };
            let (cut, f_cut) = run_opts(&log(v, &lines[..=k]), &truncated);
            let what = format!("v{v} --at {k}");
            assert!(!at.stop_not_reached, "{what}");
            assert_eq!(codes(&f_at), codes(&f_cut), "{what}");
            assert_eq!(at.events(), cut.events(), "{what}");
            assert_eq!(at.open_turn(), cut.open_turn(), "{what}");
            let (a, c) = (at.state.unwrap(), cut.state.unwrap());
            assert_eq!(a.surface.seqs(), c.surface.seqs(), "{what}");
            assert_eq!(
                a.surface.replacements().unwrap(),
                c.surface.replacements().unwrap(),
                "{what}"
            );
            assert_eq!(at.committed_bytes, cut.committed_bytes, "{what}");
        }
        let opts = ScanOptions {
            stop_after: Some(lines.len() as u64),
            ..ScanOptions::default()
        };
        let (at, _) = run_opts(&log(v, &lines), &opts);
        assert!(at.stop_not_reached, "v{v}");
    }
}

#[test]
fn stop_after_ignores_damage_and_errors_after_the_seq() {
    for v in ALL {
        let lines = vec![
            start(0, 1),
            user(1),
            end(2, 1),
            ev(3, "user/message", &user_data(3)),
            "garbage".to_owned(),
            start(5, 2),
            end(6, 2),
        ];
        let opts = ScanOptions {
            stop_after: Some(2),
            ..ScanOptions::default()
        };
        let (s, f) = run_opts(&log(v, &lines), &opts);
        assert!(f.is_empty(), "v{v}: {f:?}");
        assert_eq!((s.status(), s.events()), (Status::Valid, 3));
        // Without --at the same log is corrupt.
        assert_eq!(run(&log(v, &lines)).0.status(), Status::Invalid);
    }
}

#[test]
fn stop_after_inside_a_crash_tail_still_drops_it() {
    for v in ALL {
        let lines = vec![
            start(0, 1),
            end(1, 1),
            "garbage".to_owned(),
            start(3, 2),
            end(4, 2),
        ];
        let opts = ScanOptions {
            stop_after: Some(3),
            ..ScanOptions::default()
        };
        let (s, f) = run_opts(&log(v, &lines), &opts);
        let (cut, f_cut) = run(&log(v, &lines[..4]));
        assert_eq!(codes(&f), codes(&f_cut), "v{v}");
        assert_eq!(codes(&f), ["crash-tail"], "v{v}");
        assert_eq!(s.events(), cut.events());
    }
}

// =======================================================================================
// Status precedence (§21.6)
// =======================================================================================

#[test]
fn header_error_beats_an_unknown_type() {
    let text = format!(
        "{}\n{}\n{}\n{}\n",
        header(3).replace('}', r#","extra":1}"#),
        start(0, 1),
        ev(1, "acme/new", "{}"),
        end(2, 1)
    );
    let (s, f) = run(&text);
    assert_eq!(codes(&f), ["header-unexpected-field", "unknown-event-type"]);
    assert_eq!(s.status(), Status::Invalid);
}

#[test]
fn fatal_physical_damage_beats_an_unknown_type() {
    for v in ALL {
        let lines = vec![
            start(0, 1),
            "garbage".to_owned(),
            ev(2, "acme/new", "{}"),
            end(3, 1),
        ];
        let (s, f) = run(&log(v, &lines));
        assert_eq!(
            codes(&f),
            ["committed-unparsable", "unknown-event-type"],
            "v{v}"
        );
        assert_eq!(s.status(), Status::Invalid);
    }
}

#[test]
fn an_unknown_type_beats_a_fold_error() {
    for v in ALL {
        let (s_key, e_key) = replace_keys(v);
        let replace = with(
            &ev(2, "user/message", &user_data(2)),
            &format!(
                r#""sourceEventSeqs":[0],"surfaceOp":{{"op":"replace","{s_key}":0,"{e_key}":0}}"#
            ),
        );
        let lines = vec![start(0, 1), ev(1, "acme/new", "{}"), replace, end(3, 1)];
        let (s, f) = run(&log(v, &lines));
        assert_eq!(
            codes(&f),
            ["unknown-event-type", "replace-start-not-on-surface"],
            "v{v}"
        );
        assert_eq!(s.status(), Status::Unsupported, "v{v}");
    }
}

#[test]
fn v4_draft_beats_header_errors() {
    let draft_result = with(
        &ev(
            2,
            "tool/result",
            r#"{"turn":1,"step":1,"message":{"id":"r","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]}],"source":{"kind":"tool","callId":"c"}}}"#,
        ),
        r#""surfaceOp":"append""#,
    );
    let text = format!(
        "{}\n{}\n{}\n{}\n{}\n",
        header(4).replace('}', r#","extra":1}"#),
        start(0, 1),
        ev(1, "step/start", r#"{"turn":1,"step":1}"#),
        draft_result,
        user(3)
    );
    let (s, f) = run(&text);
    assert_eq!(codes(&f), ["header-unexpected-field", "format-v4-draft"]);
    assert_eq!(s.status(), Status::Unsupported);
    // The same shape in a v3 log is the ordinary v3 tool result.
    let (s, f) = run(&text.replace(r#""version":4"#, r#""version":3"#));
    assert!(!codes(&f).contains(&"format-v4-draft"));
    assert_eq!(s.status(), Status::Invalid);
}

#[test]
fn lifecycle_warnings_alone_leave_v0_to_v2_valid_but_fail_v3() {
    for v in ALL {
        // turn/end without a turn/start.
        let (s, f) = run(&log(v, &[user(0), end(1, 1)]));
        assert_eq!(codes(&f), ["turn-end-mismatch"], "v{v}");
        let expected = if v >= 3 {
            Status::Invalid
        } else {
            Status::Valid
        };
        assert_eq!(s.status(), expected, "v{v}");
    }
}

#[test]
fn duplicate_key_and_invalid_utf8_are_warnings_and_negative_zero_an_error() {
    for v in ALL {
        let dup = start(0, 1).replace(r#""turn":1"#, r#""turn":7,"turn":1"#);
        let mut text = log(v, &[dup, user(1)]).into_bytes();
        let line3 = format!("{}\n", user(2).replace("hi", "h\u{1}i"));
        let mut bad_utf8 = line3.into_bytes();
        let at = bad_utf8.iter().position(|b| *b == 1).unwrap();
        bad_utf8[at] = 0xFF;
        text.extend(bad_utf8);
        text.extend(format!("{}\n", end(3, 1)).into_bytes());
        let mut findings = Vec::new();
        let s = scan(
            &text[..],
            None,
            &ScanOptions::default(),
            &mut findings,
            &mut (),
        )
        .unwrap();
        assert_eq!(
            codes(&findings),
            ["duplicate-json-key", "invalid-utf8"],
            "v{v}"
        );
        assert_eq!(s.status(), Status::Valid);
        assert_eq!(s.events(), 4);
        let (s, f) = run(&log(
            v,
            &[
                start(0, 1),
                user(1).replace(r#""text":"hi""#, r#""text":"hi","n":-0"#),
                end(2, 1),
            ],
        ));
        assert_eq!(codes(&f), ["json-not-lossless"], "v{v}");
        assert_eq!(s.status(), Status::Invalid);
    }
}

#[test]
fn stop_after_a_seq_inside_a_dropped_crash_tail_is_not_reached() {
    // Event 3 exists only in the crash tail: DSH never loads it, so `--at 3` names no event.
    for v in ALL {
        let lines = vec![
            start(0, 1),
            end(1, 1),
            "garbage".to_owned(),
            start(3, 2),
            user(4),
        ];
        let at = |stop: u64| {
            let opts = ScanOptions {
                stop_after: Some(stop),
                ..ScanOptions::default()
            };
            run_opts(&log(v, &lines), &opts).0
        };
        assert!(!at(1).stop_not_reached, "v{v}");
        assert!(at(3).stop_not_reached, "v{v}");
        assert!(at(9).stop_not_reached, "v{v}");
        assert_eq!(at(3).events(), 2);
    }
}

#[test]
fn v4_developer_binding_is_reported_once_per_event_through_the_scan() {
    let developer = |seq: u64, role: &str, blocks: &str, extra: &str| {
        with(
            &ev(
                seq,
                "developer/message",
                &format!(
                    r#"{{"turn":1,"step":1,"message":{{"id":"d{seq}","role":"{role}","content":[{blocks}],"source":{{"kind":"runtime-context"}}}}{extra}}}"#
                ),
            ),
            r#""surfaceOp":"append""#,
        )
    };
    let lines = vec![
        start(0, 1),
        ev(1, "step/start", r#"{"turn":1,"step":1}"#),
        developer(2, "user", "", ""),
        with(
            &ev(
                3,
                "user/message",
                &user_data(3).replace(r#""role":"user""#, r#""role":"developer""#),
            ),
            r#""surfaceOp":"append""#,
        ),
        developer(
            4,
            "developer",
            r#"{"type":"tool-addition","toolName":"x"}"#,
            r#","headerSeq":0"#,
        ),
        developer(5, "developer", r#"{"type":"text","text":"ok"}"#, ""),
        ev(6, "step/end", r#"{"turn":1,"step":1}"#),
        end(7, 1),
    ];
    let (s, f) = run(&log(4, &lines));
    assert_eq!(
        codes(&f),
        [
            "developer-role-mismatch",
            "developer-role-mismatch",
            "developer-header-seq"
        ]
    );
    assert_eq!(
        f.iter().map(|f| f.seq).collect::<Vec<_>>(),
        [Some(2), Some(3), Some(4)]
    );
    // Only the valid developer message reached the surface.
    assert_eq!(s.state.unwrap().surface.seqs(), vec![5]);
}

/// Records what an observer is told, in order.
#[derive(Default)]
struct Log(Vec<String>);

impl Observer for Log {
    fn event(&mut self, info: &EventInfo<'_, '_>, _state: &FoldState) {
        let spec = if info.speculative { " spec" } else { "" };
        self.0.push(format!("event {}{spec}", info.event.seq));
    }
    fn unusable(&mut self, row: &Unusable<'_>) {
        let spec = if row.speculative { " spec" } else { "" };
        self.0.push(format!(
            "unusable line {} seq {:?} type {:?}{spec}",
            row.pos.line, row.seq, row.event_type
        ));
    }
    fn speculation_started(&mut self) {
        self.0.push("started".into());
    }
    fn speculation_ended(&mut self, committed: bool) {
        self.0.push(format!("ended {committed}"));
    }
}

#[test]
fn observer_hears_of_unusable_rows_and_bad_envelopes_in_file_order() {
    let text = format!(
        "{V3}\n{}not json\n{{\"type\":\"todo/write\",\"seq\":2,\"time\":0,\"data\":{{}},\"extra\":1}}\n{}",
        turn(0, 1),
        turn(3, 2)
    );
    let mut log = Log::default();
    let mut findings = Vec::new();
    scan(
        text.as_bytes(),
        None,
        &ScanOptions::default(),
        &mut findings,
        &mut log,
    )
    .unwrap();
    assert_eq!(
        log.0,
        [
            "event 0",
            "event 1",
            "started",
            "unusable line 4 seq None type None spec",
            "unusable line 5 seq Some(2) type Some(\"todo/write\") spec",
            "event 3 spec",
            "event 4 spec",
            "ended true",
        ]
    );
}

#[test]
fn a_malformed_legacy_only_event_is_corrupt_not_unsupported() {
    // v0 `steering/message` is only a legacy shape: when it is malformed, DSH's legacy
    // reader refuses the log before the vocabulary check ever sees the type.
    let text = "{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1,\"delegationDepth\":0}\n\
        {\"type\":\"steering/message\",\"seq\":0,\"time\":0,\"data\":{\"turn\":1},\"surfaceOp\":\"append\"}\n";
    let (s, f) = run(text);
    assert_eq!(codes(&f), ["legacy-shape-malformed"]);
    assert_eq!(s.status(), Status::Invalid);
}

#[test]
fn committed_canonical_violations_and_malformed_system_messages_block_the_fold() {
    // CLI.md: surface/derive refuse a log with fatal damage in the committed region,
    // including v3+ canonical violations (§8 C7, C8) and a malformed system/message
    // (always fatal, §6.2 step 6). Plain message-shape errors do not block.
    let committed = |event: &str| {
        format!(
            "{V3}\n{event}\n{{\"type\":\"turn/start\",\"seq\":1,\"time\":0,\"data\":{{\"turn\":1}}}}\n{{\"type\":\"turn/end\",\"seq\":2,\"time\":0,\"data\":{{\"turn\":1,\"reason\":{{\"kind\":\"completed\"}}}}}}\n"
        )
    };
    let c7 = r#"{"type":"request/header","seq":0,"time":0,"data":{"header":{"config":{"provider":"p","model":"m"},"tools":[]},"reason":"initial"}}"#;
    let c8 = r#"{"type":"tool/result","seq":0,"time":0,"data":{"turn":1,"step":1,"message":{"id":"r","role":"user","source":{"kind":"tool","callId":"c"},"content":[{"type":"tool-result","toolCallId":"c","content":[]}]},"error":{"name":"E","code":"E"}},"surfaceOp":"append"}"#;
    let system = r#"{"type":"system/message","seq":0,"time":0,"data":{"turn":1,"step":1,"message":{"id":"s","role":"system","content":[],"source":{"kind":"user"}}},"surfaceOp":"append"}"#;
    let user = r#"{"type":"user/message","seq":0,"time":0,"data":{"role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}"#;
    for (event, code, blocks) in [
        (c7, "request-header-empty-optional", true),
        (c8, "tool-result-error-without-flag", true),
        (system, "system-source-invalid", true),
        (user, "message-id-missing", false),
    ] {
        let (s, f) = run(&committed(event));
        assert!(codes(&f).contains(&code), "{code}: {f:?}");
        assert_eq!(s.tally.blocking > 0, blocks, "{code}: {f:?}");
    }
}

#[test]
fn a_pipe_leaves_its_producer_a_core() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(auto_threads(false), cores.clamp(1, MAX_THREADS));
    assert_eq!(auto_threads(true), (cores - 1).clamp(1, MAX_THREADS));
    assert!(auto_threads(true) >= 1);
}

/// Done once it has seen `after` events.
struct Enough {
    seen: usize,
    after: usize,
}

impl Observer for Enough {
    fn event(&mut self, _info: &EventInfo<'_, '_>, _state: &FoldState) {
        self.seen += 1;
    }
    fn may_end_early(&self) -> bool {
        true
    }
    fn done(&self) -> bool {
        self.seen >= self.after
    }
}

#[test]
fn an_observer_that_is_done_ends_the_pass_with_no_end_of_log_checks() {
    // Turn 2 is open when the observer is done; the log goes on to damage, an open turn and
    // a torn line, none of which the ended pass may report.
    let text = format!(
        "{V3}\n{}{{\"type\":\"turn/start\",\"seq\":2,\"time\":0,\"data\":{{\"turn\":2}}}}\n\
         not json\n{{\"type\":\"turn/start\",\"seq\":4,\"time\":0,\"data\":{{\"turn\":3}}}}\n\
         {{\"type\":\"turn/sta",
        turn(0, 1)
    );
    let mut plain = Vec::new();
    let full = scan(
        text.as_bytes(),
        None,
        &ScanOptions::default(),
        &mut plain,
        &mut Enough {
            seen: 0,
            after: usize::MAX,
        },
    )
    .unwrap();
    assert!(!full.ended_early);
    assert_eq!(
        codes(&plain),
        ["crash-tail", "torn-line", "open-turn-at-end"]
    );
    // The header alone, then two lines a frame: the pass ends inside the third. Also with
    // the header frame holding more than the header (§3.3): that much the pass did read.
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let framed = |first: usize| {
        let mut frames = input::zstd::encode_frame(lines[..first].concat().as_bytes()).unwrap();
        for two in lines[first..].chunks(2) {
            frames.extend(input::zstd::encode_frame(two.concat().as_bytes()).unwrap());
        }
        frames
    };
    for threads in [1, 2] {
        let opts = ScanOptions {
            threads,
            ..ScanOptions::default()
        };
        let mut findings = Vec::new();
        let mut enough = Enough { seen: 0, after: 3 };
        let s = scan(text.as_bytes(), None, &opts, &mut findings, &mut enough).unwrap();
        assert!(s.ended_early, "{threads} threads");
        assert_eq!(enough.seen, 3);
        assert_eq!((s.events(), s.status()), (3, Status::Valid));
        assert!(findings.is_empty(), "{findings:?}");
        assert!(s.torn.is_none() && s.crash.is_none());
        // The same as zstd frames: no torn frame either, and the rest is not decompressed.
        for (first, want) in [(1, &[][..]), (3, &["zstd-header-frame"][..])] {
            let (reader, framing) = input::decode(io::Cursor::new(framed(first)), "z").unwrap();
            assert!(framing.is_some());
            let mut findings = Vec::new();
            let mut enough = Enough { seen: 0, after: 3 };
            let s = scan_framed(
                reader,
                framing.as_ref(),
                None,
                &opts,
                &mut findings,
                &mut enough,
            )
            .unwrap();
            assert!(s.ended_early);
            assert_eq!(codes(&findings), want, "{findings:?}");
            assert!(s.total_bytes < text.len() as u64, "{}", s.total_bytes);
        }
    }
}

/// Records every event, row and speculation an observer is told of, with what the fold
/// decided of each (for comparing the light pass with the full one).
struct EventList {
    lines: Vec<String>,
    each: bool,
}

impl Observer for EventList {
    fn event(&mut self, info: &EventInfo<'_, '_>, state: &FoldState) {
        let ev = info.event;
        let role = ev
            .message()
            .and_then(|m| m.get("role"))
            .and_then(Json::as_str);
        self.lines.push(format!(
            "event {} {} at {:?} time {} class {:?} accepted {} spec {} turn {:?} step {:?} role {role:?} op {:?} sources {:?} open {:?} events {}",
            ev.seq,
            ev.ty,
            ev.pos,
            ev.time,
            info.class,
            info.accepted,
            info.speculative,
            ev.turn(),
            ev.step(),
            ev.surface_op.as_ref().map(Json::to_js_string),
            // Decoded: a lean packed tree keeps an increasing list range-encoded.
            ev.source_seqs
                .as_ref()
                .map(|s| rows::decode_sources(s, Some(ev.seq)).map(|l| l.iter().collect::<Vec<_>>())),
            state.lifecycle.open_turn(),
            state.events,
        ));
    }
    fn wants_each_event(&self) -> bool {
        self.each
    }
    fn unusable(&mut self, row: &Unusable<'_>) {
        self.lines.push(format!(
            "unusable {:?} seq {:?} type {:?} why {} spec {}",
            row.pos, row.seq, row.event_type, row.why, row.speculative
        ));
    }
    fn speculation_started(&mut self) {
        self.lines.push("started".into());
    }
    fn speculation_ended(&mut self, committed: bool) {
        self.lines.push(format!("ended {committed}"));
    }
    fn reads_stream_records(&self) -> bool {
        false
    }
}

/// Everything a pass of `opts` over `text` decided: status, tally, committed prefix, torn
/// line and crash tail, the surface node by node with its shadow marks (the replacements),
/// the closers, every finding and the event list.
fn decided(text: &[u8], opts: &ScanOptions, each: bool) -> String {
    let mut findings = Vec::new();
    let mut list = EventList {
        lines: Vec::new(),
        each,
    };
    let s = match scan(text, None, opts, &mut findings, &mut list) {
        Ok(s) => s,
        Err(e) => return format!("error {e}"),
    };
    let mut out = format!(
        "{:?} errors {} warnings {} blocking {} events {} committed {} total {} torn {:?} crash {:?}\n",
        s.status(),
        s.tally.errors,
        s.tally.warnings,
        s.tally.blocking,
        s.events(),
        s.committed_bytes,
        s.total_bytes,
        s.torn,
        s.crash,
    );
    if let Some(state) = &s.state {
        for mut node in state.surface.iter() {
            // Where the message is: the fold's hint, or where a reader finds it without one
            // (a key repeated in a part the light pass passes over leaves the hint to it).
            let line = text[node.pos.byte as usize..].split(|&b| b == b'\n').next();
            let found = line.and_then(|l| crate::log::derive::message_span(l, node.kind).ok());
            if node.message_at.is_none() && node.legacy_message().is_none() {
                node.message_at = found.and_then(|s| u32::try_from(s.start).ok());
            }
            out += &format!("node {node:?}\n");
        }
        out += &format!(
            "replacements {:?}\nclosers {:?} open {:?} next {}\n",
            state.surface.replacements().unwrap(),
            state.closers.closers(),
            state.closers.open_turn(),
            state.surface.next_seq()
        );
    }
    for f in &findings {
        out += &format!("{f:?}\n");
    }
    for l in &list.lines {
        out += l;
        out.push('\n');
    }
    out
}

/// `log` and damaged variants of it: the last line torn, cut short or doubled, a middle line
/// corrupted, blanked or cut, a replacement marker pointing nowhere, a stream record of the
/// wrong kind, a key repeated inside a stream, a `-0` in one.
fn damaged_variants(log: &[u8]) -> Vec<(String, Vec<u8>)> {
    let lines: Vec<&[u8]> = log.split_inclusive(|&b| b == b'\n').collect();
    let mut out = vec![("as is".to_owned(), log.to_vec())];
    if lines.len() < 3 {
        return out;
    }
    let join = |ls: &[Vec<u8>]| ls.concat();
    let owned: Vec<Vec<u8>> = lines.iter().map(|l| l.to_vec()).collect();
    let last = owned.len() - 1;
    let mid = owned.len() / 2;
    let mut v = owned.clone();
    v[last].pop_if(|b| *b == b'\n');
    out.push(("last line torn".into(), join(&v)));
    let mut v = owned.clone();
    let half = v[last].len() / 2;
    v[last].truncate(half);
    v[last].push(b'\n');
    out.push(("last line cut short".into(), join(&v)));
    let mut v = owned.clone();
    v.push(owned[last].clone());
    out.push(("last line doubled".into(), join(&v)));
    for (what, with) in [
        (
            "middle line corrupt",
            b"{\"type\":\"tool/result\",\"seq\":\n".to_vec(),
        ),
        ("middle line blank", b"\n".to_vec()),
        ("middle line not an object", b"[1,2]\n".to_vec()),
    ] {
        let mut v = owned.clone();
        v[mid] = with;
        out.push((what.into(), join(&v)));
    }
    let mut v = owned.clone();
    let cut = v[mid].len() / 3;
    v[mid].truncate(cut);
    v[mid].push(b'\n');
    out.push(("middle line cut".into(), join(&v)));
    let edits: [(&str, &[u8], &[u8]); 5] = [
        (
            "bad replace marker",
            br#""surfaceOp":"append""#,
            br#""surfaceOp":{"op":"replace","start":999999,"end":999999}"#,
        ),
        (
            "stream record of the wrong kind",
            br#""stream":[{"#,
            br#""stream":[7,{"#,
        ),
        (
            "key repeated in a stream",
            br#""stream":[{"#,
            br#""stream":[{"type":"x","#,
        ),
        (
            "negative zero in a stream",
            br#""stream":["#,
            br#""stream":[-0,"#,
        ),
        (
            "stream not an array",
            br#""stream":["#,
            br#""stream":{"a":["#,
        ),
    ];
    for (what, from, to) in edits {
        for (i, line) in owned.iter().enumerate().skip(mid) {
            if let Some(at) = memchr::memmem::find(line, from) {
                let mut v = owned.clone();
                let mut edited = line[..at].to_vec();
                edited.extend_from_slice(to);
                edited.extend_from_slice(&line[at + from.len()..]);
                // Keep an object stream's brackets balanced: `{"a":[...]}` for `[...]`.
                if what == "stream not an array"
                    && let Some(end) = memchr::memmem::rfind(&edited, b"]},\"")
                        .or_else(|| memchr::memmem::rfind(&edited, b"]}}"))
                {
                    edited.insert(end + 1, b'}');
                }
                v[i] = edited;
                out.push((format!("{what} at line {}", i + 1), join(&v)));
                break;
            }
        }
    }
    out
}

/// The light pass against the same pass forced whole (what `DSHS_FULL_PASS=1` does): the
/// same decisions, findings and events on `text`, one line at a time and in parallel, for an
/// observer that wants each event and one that does not.
fn assert_light_folds_like_full(name: &str, text: &[u8]) {
    // Each event wanted: one thread is enough (the packed rows are folded member by member).
    for (threads, each) in [(1, false), (2, false), (1, true)] {
        {
            let light = ScanOptions {
                threads,
                block_bytes: 512,
                record_replacements: true,
                light: Some(FullLines::default()),
                ..ScanOptions::default()
            };
            let whole = ScanOptions {
                light: Some(FullLines::all()),
                ..light.clone()
            };
            let (l, w) = (decided(text, &light, each), decided(text, &whole, each));
            assert!(
                l == w,
                "{name}, {threads} threads, each event {each}: the light pass decided\n{}",
                first_difference(&l, &w)
            );
        }
    }
}

/// The first line where two outcomes differ, with both versions.
fn first_difference(a: &str, b: &str) -> String {
    let (mut la, mut lb) = (a.lines(), b.lines());
    loop {
        match (la.next(), lb.next()) {
            (Some(x), Some(y)) if x == y => {}
            (x, y) => return format!("light: {x:?}\nfull:  {y:?}"),
        }
    }
}

#[test]
fn light_pass_folds_like_the_full_pass() {
    let logs = testdata_logs();
    assert!(logs.len() > 100, "{} logs", logs.len());
    let (mut variants, mut skipped_streams) = (0, 0);
    for log in &logs {
        let bytes = std::fs::read(log).unwrap();
        for (what, text) in damaged_variants(&bytes) {
            variants += 1;
            skipped_streams +=
                usize::from(memchr::memmem::find(&text, br#""stream":[{"#).is_some());
            assert_light_folds_like_full(&format!("{} ({what})", log.display()), &text);
        }
    }
    assert!(variants > 5 * logs.len() / 2, "{variants} variants");
    assert!(
        skipped_streams > 100,
        "{skipped_streams} logs with stream records"
    );
}

#[test]
fn the_light_pass_drops_exactly_the_findings_it_does_not_check() {
    // A v3 log whose stream repeats a key and holds a record of no known kind: both findings
    // from the full pass, neither from the light one (forced whole or not).
    let text = log(
        3,
        &streamed_turn(
            r#"[{"type":"text","text":"hi"}]"#,
            r#"[{"type":"x","type":"y"}]"#,
        ),
    );
    let full = decided(text.as_bytes(), &ScanOptions::default(), false);
    assert!(
        full.contains("DuplicateJsonKey") && full.contains("AssistantStreamMissing"),
        "{full}"
    );
    for lines in [FullLines::default(), FullLines::all()] {
        let opts = ScanOptions {
            light: Some(lines),
            ..ScanOptions::default()
        };
        let light = decided(text.as_bytes(), &opts, false);
        assert!(
            !light.contains("DuplicateJsonKey") && !light.contains("AssistantStreamMissing"),
            "{light}"
        );
        assert!(light.starts_with("Valid errors 0 warnings 0"), "{light}");
    }
    // Every code of the list names a check some pass makes.
    for (code, what) in light::UNCHECKED {
        assert!(light::unchecked(*code) && !what.is_empty());
    }
}

#[test]
fn a_light_tree_passes_over_the_stream_only() {
    // The stream is read as JSON all the same: a line broken inside it is unparsable.
    let good = r#"{"type":"assistant/message","seq":0,"time":0,"data":{"turn":1,"stream":[{"type":"text-chunks","dt":[1,2],"texts":["a\n","b"]}],"usage":{"in":1}}}"#;
    let (tree, _) =
        crate::log::json::parse_audited_in(good, None, None, Shape::Envelope).expect("parsed");
    assert_eq!(
        tree.to_js_string(),
        r#"{"type":"assistant/message","seq":0,"time":0,"data":{"turn":1,"stream":[],"usage":{"in":1}}}"#
    );
    for bad in [
        r#"{"type":"a","data":{"stream":[{"type":"x",}]}}"#,
        r#"{"type":"a","data":{"stream":[{"type":"x\q"}]}}"#,
        r#"{"type":"a","data":{"stream":[01]}}"#,
        r#"{"type":"a","data":{"stream":[tru]}}"#,
        r#"{"type":"a","data":{"stream":[{"type" "x"}]}}"#,
    ] {
        assert!(
            crate::log::json::parse_audited_in(bad, None, None, Shape::Envelope).is_err(),
            "{bad}"
        );
        assert!(crate::log::json::parse_audited_in(bad, None, None, Shape::Full).is_err());
    }
}

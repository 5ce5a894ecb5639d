use super::*;

const V0: &str = r#"{"type":"session","version":0,"id":"s0","createdAt":1,"delegationDepth":0}"#;
const V4: &str = r#"{"type":"session","version":4,"id":"s4","createdAt":1,"delegationDepth":0,"isSeeded":false}"#;

fn count(text: &str) -> SessionUsage {
    read(text.as_bytes()).unwrap()
}

fn tokens(input: u64, output: u64) -> Option<Tokens> {
    Some(Tokens {
        input,
        output,
        ..Tokens::default()
    })
}

fn chunk(seq: u64, turn: u64, step: u64, chunk: &str) -> String {
    let time = seq * 10;
    format!(
        r#"{{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{{"turn":{turn},"step":{step},"chunk":{chunk}}}}}"#
    )
}

fn usage_chunk(seq: u64, turn: u64, step: u64, i: u64, o: u64) -> String {
    chunk(
        seq,
        turn,
        step,
        &format!(r#"{{"type":"usage","usage":{{"inputTokens":{i},"outputTokens":{o}}}}}"#),
    )
}

fn finish(seq: u64, turn: u64, step: u64) -> String {
    chunk(
        seq,
        turn,
        step,
        r#"{"type":"finish","reason":{"kind":"stop"}}"#,
    )
}

fn message(
    seq: u64,
    turn: u64,
    step: u64,
    usage: Option<(u64, u64)>,
    stream: Option<&str>,
) -> String {
    let usage = usage.map_or(String::new(), |(i, o)| {
        format!(r#","usage":{{"inputTokens":{i},"outputTokens":{o}}}"#)
    });
    let stream = stream.map_or(String::new(), |s| format!(r#","stream":{s}"#));
    let time = seq * 10;
    format!(
        r#"{{"type":"assistant/message","seq":{seq},"time":{time},"data":{{"turn":{turn},"step":{step},"message":{{"id":"m{seq}","role":"assistant","content":[],"source":{{"kind":"model","provider":"p","model":"deepseek-v4-flash"}}}}{usage}{stream}}},"surfaceOp":"append"}}"#
    )
}

fn stream_with_usage(i: u64, o: u64) -> String {
    format!(
        r#"[{{"type":"text-chunks","time0":1,"index":0,"dt":[],"texts":["usage"]}},{{"type":"chunk","time":2,"chunk":{{"type":"usage","usage":{{"inputTokens":{i},"outputTokens":{o}}}}}}},{{"type":"chunk","time":3,"chunk":{{"type":"finish","reason":{{"kind":"stop"}}}}}}]"#
    )
}

fn log(lines: &[String]) -> String {
    let mut s = String::new();
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s
}

#[test]
fn v0_message_takes_its_own_usage_else_its_attempts_stream_usage() {
    for (own, expected, rule) in [
        (Some((11, 3)), tokens(11, 3), Rule::MessageUsage),
        (None, tokens(10, 2), Rule::StreamUsage),
    ] {
        let text = log(&[
            V0.into(),
            usage_chunk(0, 1, 1, 10, 2),
            finish(1, 1, 1),
            message(2, 1, 1, own, None),
        ]);
        let u = count(&text);
        assert_eq!(u.calls.len(), 1, "{u:?}");
        let call = &u.calls[0];
        assert_eq!((call.tokens, call.rule), (expected, rule));
        assert_eq!((call.seq, call.time), (2, 20));
        assert_eq!(call.model.as_deref(), Some("deepseek-v4-flash"));
    }
}

#[test]
fn v0_failed_attempt_before_a_retry_is_a_call_of_its_own() {
    let text = log(&[
        V0.into(),
        r#"{"type":"request/header","seq":0,"time":0,"data":{"header":{"config":{"provider":"p","model":"deepseek-chat"}},"reason":"initial"}}"#.into(),
        usage_chunk(1, 1, 1, 5, 0),
        chunk(2, 1, 1, r#"{"type":"finish","reason":{"kind":"error","failure":{"message":"x","code":"y"}}}"#),
        usage_chunk(3, 1, 1, 7, 1),
        finish(4, 1, 1),
        message(5, 1, 1, Some((7, 1)), None),
    ]);
    let u = count(&text);
    assert_eq!(u.calls.len(), 2, "{u:?}");
    assert_eq!(u.calls[0].tokens, tokens(5, 0));
    assert_eq!(u.calls[0].concluded, Concluded::Finish);
    assert_eq!(u.calls[0].model.as_deref(), Some("deepseek-chat"));
    assert_eq!(u.calls[0].seq, 2);
    assert_eq!(u.calls[1].tokens, tokens(7, 1));
}

#[test]
fn v0_finished_attempt_without_a_message_counts_at_its_finish() {
    let text = log(&[V0.into(), usage_chunk(0, 1, 1, 4, 4), finish(1, 1, 1)]);
    let u = count(&text);
    assert_eq!(u.calls.len(), 1);
    assert_eq!((u.calls[0].seq, u.calls[0].time), (1, 10));
    assert_eq!(u.calls[0].concluded, Concluded::Finish);
}

#[test]
fn v0_message_without_attempt_is_its_own_call() {
    let text = log(&[V0.into(), message(0, 1, 1, Some((3, 3)), None)]);
    let u = count(&text);
    assert_eq!(u.calls.len(), 1);
    assert_eq!(u.calls[0].tokens, tokens(3, 3));
}

#[test]
fn inherited_calls_are_left_out_by_v0_seed_length_and_the_v2_inherited_marker() {
    let v0 = log(&[
        r#"{"type":"session","version":0,"id":"c","createdAt":1,"delegationDepth":0,"seedLength":3}"#.into(),
        usage_chunk(0, 1, 1, 10, 2),
        finish(1, 1, 1),
        message(2, 1, 1, Some((10, 2)), None),
        usage_chunk(3, 2, 1, 1, 1),
        finish(4, 2, 1),
        message(5, 2, 1, Some((1, 1)), None),
    ]);
    let v2 = log(&[
        r#"{"type":"session","version":4,"id":"c","createdAt":1,"delegationDepth":0,"isSeeded":true}"#.into(),
        message(0, 1, 1, Some((100, 100)), None),
        r#"{"type":"session/end-seed","seq":1,"time":1,"data":{"inherited":true}}"#.into(),
        message(2, 2, 1, Some((1, 2)), None),
    ]);
    // (calls inherited, events inherited): v0 names the events; v2 cuts after the marker.
    for (text, own, inherited) in [(v0, tokens(1, 1), (1, 3)), (v2, tokens(1, 2), (1, 1))] {
        let u = count(&text);
        assert_eq!(u.calls.len(), 1, "{u:?}");
        assert_eq!(u.calls[0].tokens, own);
        assert_eq!((u.inherited_calls, u.inherited_events), inherited);
    }
}

#[test]
fn v4_message_usage_and_stream_usage_are_one_call() {
    let text = log(&[
        V4.into(),
        message(0, 1, 1, Some((9, 9)), Some(&stream_with_usage(8, 8))),
        message(1, 1, 2, None, Some(&stream_with_usage(8, 8))),
        message(2, 1, 3, None, Some("[]")),
    ]);
    let u = count(&text);
    assert_eq!(u.calls.len(), 3);
    assert_eq!(u.calls[0].tokens, tokens(9, 9));
    assert_eq!(u.calls[0].rule, Rule::MessageUsage);
    assert_eq!(u.calls[1].tokens, tokens(8, 8));
    assert_eq!(u.calls[1].rule, Rule::StreamUsage);
    assert_eq!(u.calls[2].tokens, None);
    assert_eq!(u.calls_without_usage(), 1);
}

#[test]
fn v4_attempt_counts_with_the_model_of_the_latest_request_header() {
    let text = log(&[
        V4.into(),
        r#"{"type":"request/header","seq":0,"time":0,"data":{"header":{"config":{"provider":"q","model":"deepseek-v4-pro"}},"reason":"initial"}}"#.into(),
        format!(
            r#"{{"type":"assistant/attempt","seq":1,"time":10,"data":{{"turn":1,"step":1,"stream":{}}}}}"#,
            stream_with_usage(6, 0)
        ),
        message(2, 1, 1, Some((7, 1)), None),
    ]);
    let u = count(&text);
    assert_eq!(u.calls.len(), 2);
    assert_eq!(u.calls[0].concluded, Concluded::AssistantAttempt);
    assert_eq!(u.calls[0].tokens, tokens(6, 0));
    assert_eq!(u.calls[0].model.as_deref(), Some("deepseek-v4-pro"));
    assert_eq!(u.calls[0].provider.as_deref(), Some("q"));
}

#[test]
fn compaction_summary_is_a_call_in_the_open_turn() {
    let text = log(&[
        V4.into(),
        r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":3}}"#.into(),
        r#"{"type":"compaction/summary","seq":1,"time":5,"data":{"compactionId":"c","summary":[],"shadowedRange":{"start":0,"end":0},"shadowedSeqs":[0],"shadowedTokenCount":1,"provider":"p","model":"deepseek-v4-flash","usage":{"inputTokens":20,"outputTokens":4}}}"#.into(),
    ]);
    let u = count(&text);
    assert_eq!(u.calls.len(), 1);
    assert_eq!(u.calls[0].rule, Rule::SummaryUsage);
    assert_eq!(u.calls[0].turn, Some(3));
    assert_eq!(u.calls[0].tokens, tokens(20, 4));
}

#[test]
fn a_summary_written_by_dshs_compact_is_no_call_and_one_without_usage_is() {
    let summary = |seq: u64, p: &str, m: &str| {
        format!(
            r#"{{"type":"compaction/summary","seq":{seq},"time":5,"data":{{"compactionId":"c","summary":[],"shadowedRange":{{"start":0,"end":0}},"shadowedSeqs":[0],"shadowedTokenCount":1,"provider":"{p}","model":"{m}"}}}}"#
        )
    };
    let u = count(&log(&[
        V4.into(),
        summary(0, "dshs", "manual"),
        summary(1, "deepseek-official", "deepseek-v4-flash"),
    ]));
    assert_eq!(u.calls.len(), 1);
    assert_eq!((u.calls[0].seq, u.calls[0].tokens), (1, None));
}

#[test]
fn a_restore_marker_is_not_an_inherited_cut() {
    let text = log(&[
        V4.into(),
        message(0, 1, 1, Some((1, 1)), None),
        r#"{"type":"session/end-seed","seq":1,"time":1,"data":{}}"#.into(),
    ]);
    assert_eq!(count(&text).calls.len(), 1);
}

#[test]
fn crash_tail_calls_count_and_a_torn_line_does_not() {
    let mut text = log(&[
        V4.into(),
        message(0, 1, 1, Some((1, 1)), None),
        "not json".into(),
        message(2, 1, 2, Some((2, 2)), None),
    ]);
    text.push_str(&message(3, 1, 3, Some((4, 4)), None));
    let u = count(&text);
    assert_eq!(u.calls.len(), 2, "{u:?}");
    assert_eq!(u.tokens().total(), 6);
    assert!(u.torn_line);
    // The unparsable line could hold a call (it is not a known skipped type).
    assert_eq!(u.unreadable_lines, 1);
}

#[test]
fn invalid_usage_is_skipped_and_noted_and_a_wrong_total_is_noted() {
    let text = log(&[
        V4.into(),
        r#"{"type":"assistant/message","seq":0,"time":0,"data":{"turn":1,"step":1,"message":{"source":{"model":"m"}},"usage":{"inputTokens":-1,"outputTokens":2}}}"#.into(),
        r#"{"type":"assistant/message","seq":1,"time":0,"data":{"turn":1,"step":2,"message":{"source":{"model":"m"}},"usage":{"inputTokens":1,"outputTokens":2,"reasoningTokens":1,"totalTokens":4}}}"#.into(),
    ]);
    let u = count(&text);
    assert_eq!(u.calls.len(), 1);
    assert_eq!(
        u.invalid_usage,
        Where {
            count: 1,
            first_seq: Some(0)
        }
    );
    assert_eq!(
        u.total_mismatch,
        Where {
            count: 1,
            first_seq: Some(1)
        }
    );
    // Reasoning is a part of output, never added again.
    assert_eq!(u.tokens().total(), 3);
    assert_eq!(u.tokens().reasoning, 1);
}

#[test]
fn other_lines_holding_the_word_usage_are_not_calls() {
    let text = log(&[
        V0.into(),
        r#"{"type":"user/message","seq":0,"time":0,"data":{"id":"u","role":"user","content":[{"type":"text","text":"\"usage\":{\"inputTokens\":5}"}],"source":{"kind":"user"}}}"#.into(),
        r#"{"type":"text-chunks","seq0":1,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["\"usage\"","a","b"]}}"#.into(),
        chunk(4, 1, 1, r#"{"type":"text-delta","index":0,"text":"\"finish\""}"#),
    ]);
    assert!(count(&text).calls.is_empty());
}

#[test]
fn another_key_order_is_still_read() {
    let text = log(&[
        V4.into(),
        r#"{"seq":0,"type":"assistant/message","time":0,"data":{"turn":1,"step":1,"message":{"source":{"model":"m"}},"usage":{"inputTokens":1,"outputTokens":2}}}"#.into(),
    ]);
    assert_eq!(count(&text).calls.len(), 1);
}

#[test]
fn unsupported_versions_are_refused_not_counted() {
    let u = count("{\"type\":\"session\",\"version\":7,\"id\":\"x\"}\n");
    assert!(u.refused.is_some());
    assert!(count("garbage\n").refused.is_some());
}

#[test]
fn long_lines_across_blocks_are_read_or_passed_over() {
    let big = "x".repeat(3 * BLOCK);
    let text = log(&[
        V4.into(),
        format!(r#"{{"type":"user/message","seq":0,"time":0,"data":{{"text":"{big}"}}}}"#),
        format!(
            r#"{{"type":"assistant/message","seq":1,"time":0,"data":{{"turn":1,"step":1,"message":{{"content":[{{"type":"text","text":"{big}"}}],"source":{{"model":"m"}}}},"usage":{{"inputTokens":1,"outputTokens":2}}}}}}"#
        ),
        message(2, 1, 2, Some((1, 1)), None),
    ]);
    let u = count(&text);
    assert_eq!(u.calls.len(), 2, "{:?}", u.refused);
    assert_eq!(u.lines, 4);
    assert_eq!(u.bytes, text.len() as u64);
    // One byte at a time: the same.
    struct Slow<'a>(&'a [u8]);
    impl Read for Slow<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(out.len()).min(7);
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let slow = read(Slow(text.as_bytes())).unwrap();
    assert_eq!(slow, u);
}

#[test]
fn a_tap_counts_what_its_reader_hands_out() {
    use std::io::BufRead;
    let text = log(&[
        V4.into(),
        message(0, 1, 1, Some((1, 2)), None),
        message(1, 1, 2, Some((3, 4)), None),
    ]);
    let (mut tap, feed) = Tap::new(io::BufReader::with_capacity(16, text.as_bytes()));
    let mut line = Vec::new();
    while tap.read_until(b'\n', &mut line).unwrap() > 0 {}
    let counted = std::mem::take(&mut *feed.lock().unwrap()).finish();
    assert_eq!(counted, count(&text));
    assert_eq!(counted.calls.len(), 2);
}

/// The walk of message and attempt lines decides exactly as the parse: every real log and
/// generated logs of every version give the same calls either way.
#[test]
fn the_walk_counts_exactly_as_the_parse() {
    let both = |text: &[u8], what: &str| {
        let mut walked = Feed::new();
        walked.bytes(text);
        let mut parsed = Feed::new();
        parsed.counter.parse_only = true;
        parsed.bytes(text);
        let (w, p) = (walked.finish(), parsed.finish());
        assert_eq!(w, p, "{what}");
        w.calls.len()
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut calls = 0;
    for sub in ["fixtures", "usage", "sample", "v0", "v3"] {
        for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                calls += both(&std::fs::read(&path).unwrap(), &path.display().to_string());
            }
        }
    }
    assert!(calls > 40, "{calls}");
    // Odd spellings: escapes, repeated keys, a usage that is not an object, numbers as floats.
    let odd = log(&[
        V4.into(),
        r#"{"type":"assistant/message","seq":0,"time":1.0,"data":{"turn":1,"step":1,"message":{"source":{"model":"m"}},"usage":{"inputTokens":1,"outputTokens":2}}}"#.into(),
        r#"{"type":"assistant/message","seq":1,"time":1,"data":{"turn":1,"step":1,"message":{"source":{"model":"\u006d"}},"usage":{"inputTokens":1,"outputTokens":2}}}"#.into(),
        r#"{"type":"assistant/message","seq":2,"time":1,"data":{"usage":{"inputTokens":9,"outputTokens":9}},"data":{"turn":1,"step":1,"message":{"source":{"model":"m"}},"usage":7,"stream":[{"type":"chunk","chunk":{"type":"usage"}}]}}"#.into(),
        r#"{"type":"assistant/attempt","seq":3,"time":1,"data":{"turn":1,"step":1,"stream":[{"type":"chunk","chunk":{"type":"usage","usage":{"inputTokens":4,"outputTokens":4}}},{"type":"chunk","chunk":{"type":"usage","usage":{"inputTokens":5,"outputTokens":5}}}]}}"#.into(),
        r#"{"type":"assistant/attempt","seq":4,"time":1,"type":"turn/start","data":{"turn":9}}"#.into(),
        r#"{"type":"assistant/message","seq":-1,"time":1,"data":{}}"#.into(),
        // The small walked lines: a header's model, repeated, escaped, not a string, unplaced.
        r#"{"type":"request/header","seq":5,"time":1,"data":{"header":{"config":{"provider":"a","model":"m1"},"config":{"model":"m2"}}}}"#.into(),
        r#"{"type":"assistant/attempt","seq":6,"time":1,"data":{"turn":1,"step":1}}"#.into(),
        r#"{"type":"request/header","seq":7,"time":1,"data":{"header":{"config":{"provider":"a","model":"m3"}},"header":{"x":1}}}"#.into(),
        r#"{"type":"assistant/attempt","seq":8,"time":1,"data":{"turn":1,"step":1}}"#.into(),
        r#"{"type":"request/header","seq":9,"time":1,"data":{"header":{"config":{"provider":"a","model":"m\u0034"}}}}"#.into(),
        r#"{"type":"assistant/attempt","seq":10,"time":1,"data":{"turn":1,"step":1}}"#.into(),
        r#"{"type":"request/header","seq":11,"data":{"header":{"config":{"provider":"b","model":"m5"}}}}"#.into(),
        r#"{"type":"request/header","seq":12,"time":1,"data":{"header":{"config":{"provider":7,"model":""}}}}"#.into(),
        r#"{"type":"assistant/attempt","seq":13,"time":1,"data":{"turn":1,"step":1}}"#.into(),
        r#"{"type":"turn/start","seq":14,"time":1,"data":{"turn":"3"}}"#.into(),
        r#"{"type":"compaction/summary","seq":15,"time":1,"data":{"provider":"p","model":"m"}}"#.into(),
        r#"{"type":"turn/start","seq":16,"time":1,"data":{"turn":4},"data":{"turn":5}}"#.into(),
        r#"{"type":"compaction/summary","seq":17,"time":1,"data":{"provider":"p","model":"m"}}"#.into(),
        r#"{"type":"turn/end","seq":18,"data":{}}"#.into(),
        r#"{"type":"compaction/summary","seq":19,"time":1,"data":{"provider":"p","model":"m"}}"#.into(),
        r#"{"type":"turn/end","seq":20,"time":1,"data":{}}"#.into(),
        r#"{"type":"compaction/summary","seq":21,"time":1,"data":{"provider":"p","model":"m"}}"#.into(),
        r#"{"type":"turn/start","seq":22,"time":1,"data":{"turn":6.0}}"#.into(),
        r#"{"type":"compaction/summary","seq":23,"time":1,"data":{"provider":"p","model":"m"}}"#.into(),
    ]);
    both(odd.as_bytes(), "odd spellings");
}

/// A header whose bytes after the envelope repeat an earlier header's is passed over only
/// while the provider and model are still what that header set: a header between them that
/// names another model, parsed (escaped), walked member by member (time before seq) or
/// read in place, makes the repeat count again.
#[test]
fn a_repeated_header_is_passed_over_only_while_it_still_holds() {
    let header = |seq: i64, config: &str| {
        format!(
            r#"{{"type":"request/header","seq":{seq},"time":1,"data":{{"header":{{"config":{config}}},"reason":"initial"}}}}"#
        )
    };
    let attempt = |seq: u64| {
        format!(
            r#"{{"type":"assistant/attempt","seq":{seq},"time":1,"data":{{"turn":1,"step":1}}}}"#
        )
    };
    let m1 = r#"{"provider":"p","model":"m1"}"#;
    let text = log(&[
        V4.into(),
        header(1, m1),
        attempt(2),
        header(3, m1),
        attempt(4),
        // Parsed: its escape is not a plain name.
        header(5, r#"{"provider":"p","model":"m\u0032"}"#),
        attempt(6),
        header(7, m1),
        attempt(8),
        // Walked member by member: its time comes before its seq.
        header(9, m1)
            .replacen(r#""seq":9,"time":1"#, r#""time":1,"seq":9"#, 1)
            .replace("m1", "m3"),
        attempt(10),
        header(11, m1),
        attempt(12),
        // Not placed (a negative seq): the model stays.
        header(-1, r#"{"provider":"p","model":"m4"}"#),
        attempt(13),
        header(-1, m1),
        attempt(14),
        // Another header naming the same model joins the repeats; one naming another model
        // leaves it the only one.
        header(15, m1).replace("initial", "series"),
        attempt(16),
        header(17, m1),
        attempt(18),
        header(19, r#"{"provider":"p","model":"m5"}"#),
        attempt(20),
        header(21, m1).replace("initial", "series"),
        attempt(22),
    ]);
    let mut walked = Feed::new();
    walked.bytes(text.as_bytes());
    let mut parsed = Feed::new();
    parsed.counter.parse_only = true;
    parsed.bytes(text.as_bytes());
    let (w, p) = (walked.finish(), parsed.finish());
    assert_eq!(w, p);
    let models: Vec<_> = w
        .calls
        .iter()
        .map(|c| c.model.as_deref().unwrap_or("-"))
        .collect();
    assert_eq!(
        models,
        [
            "m1", "m1", "m2", "m1", "m3", "m1", "m1", "m1", "m1", "m1", "m5", "m1"
        ],
        "{text}"
    );
}

#[test]
fn generated_logs_count_the_same_walked_and_parsed() {
    #[path = "../../../benches/gen/mod.rs"]
    #[allow(dead_code, clippy::all)]
    mod generator;
    for version in 0..=4u8 {
        let mut buf = Vec::new();
        generator::Generator::new(&mut buf, version, 11)
            .run(300_000)
            .unwrap();
        let mut walked = Feed::new();
        walked.bytes(&buf);
        let mut parsed = Feed::new();
        parsed.counter.parse_only = true;
        parsed.bytes(&buf);
        let (w, p) = (walked.finish(), parsed.finish());
        assert!(!w.calls.is_empty(), "v{version}");
        assert_eq!(w, p, "v{version}");
        // The walk, not the parse, read every message and attempt line DSH's way spelled.
        let calls: Vec<&[u8]> = buf
            .split(|&b| b == b'\n')
            .filter(|l| match classify(l) {
                Class::Call => true,
                Class::Chunk => chunk_may_matter(l),
                _ => false,
            })
            .collect();
        assert!(
            !calls.is_empty(),
            "{:?}",
            String::from_utf8_lossy(&buf[..200])
        );
        assert!(calls.iter().all(|l| raw::walk(l).is_some()), "v{version}");
        // … and every usage object in them without the parser.
        let usages: Vec<&[u8]> = calls
            .iter()
            .filter_map(|l| raw::walk(l))
            .flat_map(|f| [f.usage, f.chunk_usage, f.stream_usage.flatten()])
            .flatten()
            .collect();
        assert!(!usages.is_empty(), "v{version}");
        assert!(
            usages.iter().all(|u| raw::buckets(u).is_some()),
            "v{version}"
        );
    }
}

/// Random logs from lines of every walked type (v0/v1 chunks and usage objects included),
/// spelled the usual way and oddly (spacing, key order, repeated keys, escapes, CRLF, a type
/// tag inside another line's string, a torn last line, messages whose text puts brackets,
/// quotes and backslash runs at every offset), in random order and cut into random blocks:
/// walked and parsed count the same.
#[test]
fn random_interleavings_count_the_same_walked_and_parsed() {
    let pool: Vec<String> = vec![
        message(0, 1, 1, Some((1, 2)), None),
        message(0, 1, 2, None, Some(&stream_with_usage(3, 4))),
        message(0, 1, 2, Some((5, 6)), Some(&stream_with_usage(3, 4))),
        r#"{"type":"assistant/message","seq":0,"time":1,"data":{"turn":1,"step":1,"usage":{"inputTokens":1,"outputTokens":2},"stream":[{"type":"chunk","chunk":{"type":"usage","usage":{"inputTokens":3,"outputTokens":3}}}]},"type":"assistant/attempt"}"#.into(),
        r#"{"type":"assistant/attempt","seq":0,"time":1,"data":{"turn":1,"step":1,"stream":[{"type":"chunk","chunk":{"type":"usage","usage":{"inputTokens":2,"outputTokens":2}}}]}}"#.into(),
        r#"{"type":"request/header","seq":0,"time":1,"data":{"header":{"config":{"provider":"a","model":"m1"}}}}"#.into(),
        r#"{ "type" : "request/header" , "seq" : 0 , "time" : 1 , "data" : { "header" : { "config" : { "model" : "m2" } } } }"#.into(),
        r#"{"type":"request/header","seq":0,"time":1,"data":{"header":{"config":{"model":"m\u0033"}}}}"#.into(),
        r#"{"type":"request/header","seq":0,"time":1,"data":{"header":{"config":{"model":"m4"},"config":{}}}}"#.into(),
        r#"{"seq":0,"time":1,"type":"request/header","data":{"header":{"config":{"model":"m5"}}}}"#.into(),
        r#"{"type":"request/header","seq":0,"data":{"header":{"config":{"model":"m6"}}}}"#.into(),
        r#"{"type":"request/header","seq":-1,"time":1,"data":{"header":{"config":{"provider":"a","model":"m1"}}}}"#.into(),
        r#"{"type":"request/header","seq":0,"time":1,"data":{"header":{"config":{"model":"m8"}}},"seq":-1}"#.into(),
        r#"{"type":"request/header","seq":0,"time":1,"data":{"header":{"config":{"model":"m9"}}},"type":"turn/start"}"#.into(),
        "{\"type\":\"request/header\",\"seq\":0,\"time\":1,\"data\":{\"header\":{\"config\":{\"model\":\"m7\"}}}}\r".into(),
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":2}}"#.into(),
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":-2}}"#.into(),
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":2e0}}"#.into(),
        r#"{"type":"turn/start","seq":0,"time":"1","data":{"turn":3}}"#.into(),
        r#"{"type":"turn/end","seq":0,"time":1,"data":{}}"#.into(),
        r#"{"type":"turn/end","seq":0,"time":1,"type":"turn/start","data":{"turn":4}}"#.into(),
        r#"{"type":"tu\u0072n/end","seq":0,"time":1,"data":{}}"#.into(),
        r#"{"type":"compaction/summary","seq":0,"time":1,"data":{"provider":"p","model":"m","usage":{"inputTokens":1,"outputTokens":1}}}"#.into(),
        r#"{"type":"compaction/summary","seq":0,"time":1,"data":{}}"#.into(),
        r#"{"type":"tool/result","seq":0,"time":1,"data":{"text":"{\"type\":\"turn/end\",\"seq\":1,\"time\":1}"}}"#.into(),
        r#"{"type":"user/message","seq":0,"time":1,"data":{"text":"\"type\":\"request/header\" \\"}}"#.into(),
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":5"#.into(),
        "not json".into(),
        // v0/v1 chunks (walked in a v0 log, skipped in a v4 one), and usage objects spelled
        // every way (walked when plain, else parsed).
        usage_chunk(0, 1, 1, 3, 4),
        usage_chunk(0, 1, 2, 5, 6),
        finish(0, 1, 1),
        finish(0, 1, 2),
        chunk(0, 1, 1, r#"{"type":"text","text":"\"usage\""}"#),
        chunk(0, 1, 1, r#"{"type":"us\u0061ge","usage":{"inputTokens":1,"outputTokens":1}}"#),
        chunk(0, 1, 1, r#"{"type":"usage"}"#),
        chunk(0, 1, 1, r#""finish""#),
        chunk(0, 1, 1, r#"{"type":"usage","usage":{"inputTokens":1.0,"outputTokens":2}}"#),
        chunk(0, 1, 1, r#"{"type":"usage","usage":{"inputTokens":-1,"outputTokens":2}}"#),
        chunk(0, 1, 1, r#"{"type":"usage","usage":{"inputTokens":1,"outputTokens":2,"totalTokens":4}}"#),
        chunk(0, 1, 1, r#"{"type":"usage","usage":{"inputTokens":1,"outputTokens":2,"totalTokens":"3"}}"#),
        chunk(0, 1, 1, r#"{"type":"usage","usage":{ "inputTokens" : 1 , "outputTokens" : 2 , "x" : [1,{"a":"]"}] }}"#),
        chunk(0, 1, 1, r#"{"type":"usage","usage":{"inputTokens":1,"outputTokens":2,"inputTokens":"5"}}"#),
        chunk(0, 1, 1, r#"{"type":"usage","usage":{"inputTokens":1,"outputTokens":2,"inputTokens":7}}"#),
        chunk(0, 1, 1, r#"{"type":"usage","usage":{"inputTokens":1,"outputTokens":2,"cacheReadTokens":9007199254740992}}"#),
        chunk(0, 1, 1, r#"{"type":"usage","usage":{"inputTokens":1,"outputTokens":2,"cacheWriteTokens":null,"reasoningTokens":1}}"#),
        chunk(0, 1, 1, r#"{"type":"usage","usage":{"inputTokens":1,"outp\u0075tTokens":2}}"#),
        chunk(0, 1, 1, r#"{"type":"usage","usage":{"inputTokens":1,"outputTokens":2e0}}"#),
        chunk(0, 1, 1, r#"{"type":"usage","usage":[1,2]}"#),
        r#"{"type":"assistant/message","seq":0,"time":1,"data":{"turn":1,"step":1,"usage":{"inputTokens":1,"outputTokens":2,"totalTokens":3,"cacheReadTokens":0}}}"#.into(),
        r#"{"type":"assistant/message","seq":0,"time":1,"data":{"turn":1,"step":1,"message":{"content":[\"x"]},"usage":{"inputTokens":1,"outputTokens":2}}}"#.into(),
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    for round in 0..600 {
        let mut text = format!("{}\n", [V0, V4][next(2)]);
        for seq in 0..next(40) {
            if next(4) == 0 {
                // A message whose text and stream hold brackets, quotes and backslash runs
                // at every offset of the 64-byte windows the container skip reads.
                let mut t = String::new();
                for _ in 0..next(200) {
                    t.push_str(["a", "\\\"", "\\\\", "{", "]", "[", "}", "é", " ", ","][next(10)]);
                }
                let stream = format!(
                    r#"[{{"type":"text-chunks","time0":1,"index":0,"dt":[1,2,{n}],"texts":["{t}","{t}"]}},{{"type":"chunk","time":2,"chunk":{{"type":"usage","usage":{{"inputTokens":{n},"outputTokens":1}}}}}}]"#,
                    n = next(9)
                );
                let m = message(seq as u64, 1, 1 + next(2) as u64, None, Some(&stream)).replace(
                    r#""content":[]"#,
                    &format!(r#""content":[{{"type":"text","text":"{t}"}},[[{{}}]]]"#),
                );
                text.push_str(&m);
                text.push('\n');
                continue;
            }
            let line = pool[next(pool.len())].replacen("\"seq\":0", &format!("\"seq\":{seq}"), 1);
            text.push_str(&line);
            text.push('\n');
        }
        if next(3) == 0 {
            // A torn last line.
            text.push_str(&message(99, 1, 1, Some((5, 5)), None)[..40]);
        }
        let bytes = text.as_bytes();
        let cut = 1 + next(64);
        let mut walked = Feed::new();
        let mut parsed = Feed::new();
        parsed.counter.parse_only = true;
        for block in bytes.chunks(cut) {
            walked.bytes(block);
        }
        parsed.bytes(bytes);
        assert_eq!(walked.finish(), parsed.finish(), "round {round}:\n{text}");
    }
}

/// A call list handed back for the next log starts that log empty.
#[test]
fn a_recycled_call_list_holds_nothing_of_the_last_log() {
    let first = count(&log(&[V4.into(), message(0, 1, 1, Some((1, 2)), None)]));
    assert_eq!(first.calls.len(), 1);
    recycle(first.calls);
    let second = count(&log(&[V4.into(), message(0, 1, 1, Some((3, 4)), None)]));
    assert_eq!(second.calls.len(), 1);
    assert_eq!(second.calls[0].tokens, tokens(3, 4));
}

/// The buffer of a cut line, kept for the next log, starts that log empty: a log that ended
/// torn, or inside a long line passed over, leaves nothing the next one reads as its start.
#[test]
fn a_kept_line_buffer_holds_nothing_of_the_last_log() {
    let next = log(&[V4.into(), message(0, 1, 1, Some((3, 4)), None)]);
    let alone = count(&next);
    let long = format!(
        "{{\"type\":\"tool/result\",\"x\":\"{}",
        "y".repeat(LONG + 10)
    );
    for torn in [message(0, 1, 1, Some((1, 2)), None), long] {
        let mut first = Feed::new();
        first.bytes(log(&[V4.into()]).as_bytes());
        first.bytes(&torn.as_bytes()[..torn.len() - 3]);
        assert!(first.finish().torn_line);
        let mut second = Feed::new();
        second.bytes(next.as_bytes());
        assert_eq!(second.finish(), alone);
    }
}

/// A walked name is the piece of the checked line it was cut from, and nothing else.
#[test]
fn a_piece_is_the_str_it_is_in_the_line() {
    let line = r#"{"model":"日本","x":"y"}"#;
    let at = line.find("日本").unwrap();
    let b = line.as_bytes();
    assert_eq!(piece(line, &b[at..at + 6]), Some("日本"));
    // Cut inside a character, or not from the line at all.
    assert_eq!(piece(line, &b[at..at + 4]), None);
    let elsewhere = String::from("y");
    assert_eq!(piece(line, elsewhere.as_bytes()), None);
}

/// Every type the count reads is found by its name; others are not.
#[test]
fn every_read_type_is_found_by_its_name() {
    for (kind, class) in READ {
        assert_eq!(read_kind(kind.name().as_bytes()), Some((kind, class)));
        assert_eq!(class_of_type(kind.name().as_bytes()), class);
    }
    for other in [
        Kind::ToolResult,
        Kind::StepStart,
        Kind::StepEnd,
        Kind::UserMessage,
    ] {
        assert_eq!(read_kind(other.name().as_bytes()), None, "{other:?}");
    }
    assert_eq!(read_kind(&[b'a'; 100]), None);
}

use super::*;
use crate::log::json;
use crate::log::test_support::testdata_logs;

fn cut(line: &str, kind: SurfaceKind) -> Result<String, MessageError> {
    message_bytes(line.as_bytes(), kind).map(|b| String::from_utf8(b.to_vec()).unwrap())
}

#[test]
fn user_message_is_data_itself_byte_for_byte() {
    let msg = r#"{"z":1.0,"id":"u1","role":"user","n":1e2,"content":[{"type":"text","text":"caf\u00e9 café"}],"source":{"kind":"user"}}"#;
    let line =
        format!(r#"{{"type":"user/message","seq":3,"time":0,"data":{msg},"surfaceOp":"append"}}"#);
    assert_eq!(cut(&line, SurfaceKind::User).unwrap(), msg);
}

#[test]
fn other_messages_are_data_message() {
    let msg = r#"{"role":"assistant","content":[],"id":"a","source":{"kind":"model","provider":"p","model":"m"},"x":-1.50E+3}"#;
    let line = format!(
        r#"{{"type":"assistant/message","seq":4,"time":0,"data":{{"turn":1,"step":1,"message":{msg},"stream":[{{"message":"not this"}}]}},"surfaceOp":"append"}}"#
    );
    for kind in [
        SurfaceKind::Assistant,
        SurfaceKind::ToolResult,
        SurfaceKind::System,
        SurfaceKind::Developer,
    ] {
        assert_eq!(cut(&line, kind).unwrap(), msg);
    }
}

#[test]
fn keys_resolve_like_json_parse_last_wins_and_escaped() {
    // The last `data` wins, even over a message found in an earlier duplicate.
    let line = r#"{"data":{"message":{"id":"first"}},"seq":1,"data":{"message":{"id":"second"}}}"#;
    assert_eq!(
        cut(line, SurfaceKind::Assistant).unwrap(),
        r#"{"id":"second"}"#
    );
    // A later duplicate without the message erases the earlier find.
    let line = r#"{"data":{"message":{"id":"first"}},"data":{"turn":1}}"#;
    assert_eq!(
        cut(line, SurfaceKind::Assistant),
        Err(MessageError::Missing("data.message"))
    );
    // An escaped key spelling is the same key.
    let line = r#"{"d\u0061ta":{"m\u0065ssage":{"id":"esc"}}}"#;
    assert_eq!(
        cut(line, SurfaceKind::Assistant).unwrap(),
        r#"{"id":"esc"}"#
    );
}

#[test]
fn whitespace_around_values_is_not_part_of_the_message() {
    let line = "{ \"data\" :  { \"id\" : \"u\" }  , \"seq\":1 }\r";
    assert_eq!(cut(line, SurfaceKind::User).unwrap(), "{ \"id\" : \"u\" }");
}

#[test]
fn missing_or_non_object_places_are_reported() {
    assert_eq!(
        cut(r#"{"seq":1}"#, SurfaceKind::User),
        Err(MessageError::Missing("data"))
    );
    assert_eq!(
        cut(r#"{"data":[{"message":{}}]}"#, SurfaceKind::Assistant),
        Err(MessageError::Missing("data.message"))
    );
    assert_eq!(
        cut(r#"{"data":"message"}"#, SurfaceKind::ToolResult),
        Err(MessageError::Missing("data.message"))
    );
    // A stored non-object message is still what is stored: pass it through.
    assert_eq!(
        cut(r#"{"data":{"message":"odd"}}"#, SurfaceKind::Assistant).unwrap(),
        r#""odd""#
    );
    assert!(matches!(
        cut(r#"{"data":{"message":{}}"#, SurfaceKind::Assistant),
        Err(MessageError::NotJson(_))
    ));
}

#[test]
fn invalid_utf8_bytes_pass_through_unchanged() {
    let mut line = br#"{"type":"user/message","data":{"id":"u","text":"a"#.to_vec();
    line.extend_from_slice(&[0xff, 0xc3, b'b', 0xe2, 0x82]);
    line.extend_from_slice(br#"c"},"seq":1}"#);
    let got = message_bytes(&line, SurfaceKind::User).unwrap();
    let mut want = br#"{"id":"u","text":"a"#.to_vec();
    want.extend_from_slice(&[0xff, 0xc3, b'b', 0xe2, 0x82]);
    want.extend_from_slice(br#"c"}"#);
    assert_eq!(got, &want[..]);
    // Invalid bytes in a key before the message, and in a value after it.
    let mut line = b"{\"k".to_vec();
    line.push(0xff);
    line.extend_from_slice(br#"":1,"data":{"message":{"id":"m"},"s":""#);
    line.push(0xfe);
    line.extend_from_slice(br#""}}"#);
    assert_eq!(
        message_bytes(&line, SurfaceKind::Assistant).unwrap(),
        br#"{"id":"m"}"#
    );
}

#[test]
fn derivation_paths_follow_section_12_1() {
    assert_eq!(message_path(SurfaceKind::User), ["data"]);
    assert_eq!(message_path(SurfaceKind::ToolResult), ["data", "message"]);
}

fn preview_of(msg: &str, max: usize) -> String {
    preview(&json::parse(msg.as_bytes()).unwrap(), max)
}

#[test]
fn preview_is_one_line_text_first() {
    let msg = r#"{"content":[{"type":"reasoning","text":"think"},{"type":"text","text":"Hello\n\n  world\t!"},{"type":"tool-call","id":"c","name":"bash","arguments":"{\"cmd\":\"ls\"}"}]}"#;
    assert_eq!(
        preview_of(msg, 100),
        r#"Hello world ! → bash({"cmd":"ls"}) (reasoning) think"#
    );
    assert_eq!(preview_of(msg, 8), "Hello w…");
    assert_eq!(preview_of(msg, 8).chars().count(), 8);
}

#[test]
fn preview_reads_wrapped_tool_results_and_attachments() {
    let v3 = r#"{"content":[{"type":"tool-result","toolCallId":"c","content":[{"type":"text","text":"alpha\n"}]}]}"#;
    assert_eq!(preview_of(v3, 40), "alpha");
    let img = r#"{"content":[{"type":"image","attachment":{}},{"type":"tool-addition","toolName":"grep"}]}"#;
    assert_eq!(preview_of(img, 40), "[image] [tool-addition grep]");
    assert_eq!(preview_of(r#"{"content":[]}"#, 40), "");
    assert_eq!(preview_of(r#"{"content":"odd"}"#, 40), "");
}

#[test]
fn preview_of_bytes_agrees_with_the_tree_and_falls_back_when_needed() {
    let cases = [
        r#"{"content":[{"type":"text","text":"a\nb"},{"type":"tool-call","name":"x","arguments":"{}"}]}"#,
        // Duplicate keys: the last wins, as in the tree.
        r#"{"content":[{"type":"text","text":"first","text":"second"}]}"#,
        // Odd types the quick read cannot take.
        r#"{"content":[{"type":"text","text":7},{"type":"text","text":"ok","content":"x"}]}"#,
        r#"{"content":"none"}"#,
        r#"{"role":"user"}"#,
    ];
    for c in cases {
        assert_eq!(
            preview_bytes(c.as_bytes(), 50).unwrap(),
            preview_of(c, 50),
            "{c}"
        );
    }
    assert_eq!(
        preview_bytes(
            br#"{"content":[{"type":"text","text":"first","text":"second"}]}"#,
            50
        )
        .unwrap(),
        "second"
    );
    let mut bad = br#"{"content":[{"type":"text","text":"x"#.to_vec();
    bad.extend_from_slice(&[0xff, b'"', b'}', b']', b'}']);
    assert_eq!(preview_bytes(&bad, 50).unwrap(), "x\u{fffd}");
    assert!(matches!(
        preview_bytes(b"{", 50),
        Err(MessageError::NotJson(_))
    ));
}

#[test]
fn lines_come_back_whatever_the_order_they_are_asked_in() {
    use std::io::Write as _;
    // Lines of varied length (some longer than an excursion's read), the last without `\n`.
    let lines: Vec<String> = (0..3000)
        .map(|i| {
            format!(
                "{{\"i\":{i},\"pad\":\"{}\"}}",
                "x".repeat((i * 37) % 20_000)
            )
        })
        .collect();
    let mut file = tempfile::NamedTempFile::new().unwrap();
    let mut starts = Vec::new();
    let mut at = 0u64;
    for (i, l) in lines.iter().enumerate() {
        starts.push(at);
        file.write_all(l.as_bytes()).unwrap();
        at += l.len() as u64;
        if i + 1 < lines.len() {
            file.write_all(b"\n").unwrap();
            at += 1;
        }
    }
    file.flush().unwrap();
    let mut order: Vec<usize> = (0..lines.len()).collect();
    // In order with excursions far ahead and back, a run of excursions going forward, and
    // backward steps.
    for i in (0..order.len()).step_by(5) {
        order.swap(i, (i * 7919) % lines.len());
    }
    order.extend((0..200).rev());
    order.extend((2000..2100).step_by(3));
    let mut d = Deriver::open(file.path()).unwrap();
    for &i in &order {
        let got = d.line_at(starts[i]).unwrap();
        assert_eq!(got, lines[i].as_bytes(), "line {i}");
    }
}

/// Every line of every plain log under `testdata/`.
fn testdata_lines() -> Vec<Vec<u8>> {
    let mut lines: Vec<Vec<u8>> = Vec::new();
    for log in testdata_logs() {
        let bytes = std::fs::read(&log).unwrap();
        lines.extend(bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec));
    }
    lines
}

#[test]
fn the_skim_finds_what_the_parser_finds() {
    let mut lines = testdata_lines();
    lines.extend(
        [
            r#"{"data":{"message":{"a":1}},"data":{"message":[1,{"b":"}"}]}}"#,
            r#"{"data":{"message":{"a":1}},"data":"x"}"#,
            r#" { "data" : { "message" : "s\"}" , "x" : [ ] } } "#,
            r#"{"d\u0061ta":{"message":1}}"#,
            r#"{"data":{"message":{"a":[}}}"#,
            r#"{"data":{"message":1}} x"#,
            r#"{"data":{"message":1},}"#,
            r#"{"data":{"message":"unterminated}}"#,
            r#"{"data":{"message":{"a":1]}}"#,
            r#"{"data":{}}"#,
            r#"{}"#,
        ]
        .iter()
        .map(|l| l.as_bytes().to_vec()),
    );
    let deep = format!(
        r#"{{"data":{{"message":{}1{}}}}}"#,
        "[".repeat(150),
        "]".repeat(150)
    );
    lines.push(deep.into_bytes());
    let mut skimmed = 0;
    for line in &lines {
        for path in [
            message_path(SurfaceKind::User),
            message_path(SurfaceKind::Assistant),
        ] {
            // What `message_span` found before it skimmed.
            let by_parser = match locate(line, path) {
                Err(_) if std::str::from_utf8(line).is_err() => locate(&utf8_shaped(line), path),
                other => other,
            }
            .ok();
            if let Some(found) = (Skim { b: line, i: 0 }).line(path, &mut Skim::span) {
                skimmed += 1;
                assert_eq!(Some(found), by_parser, "{}", String::from_utf8_lossy(line));
            }
        }
    }
    assert!(skimmed > 1000, "{skimmed} lines skimmed");
}

/// The preview as the tree gives it, from the message `message_span` finds (the reference
/// the quick read must agree with).
fn tree_preview(line: &[u8], kind: SurfaceKind, max: usize) -> Option<String> {
    let span = message_span(line, kind).ok()?;
    let text = String::from_utf8_lossy(&line[span]);
    Some(preview(&json::parse(text.as_bytes()).ok()?, max))
}

/// The quick read of a whole line, where it applies.
fn quick_line_preview(line: &[u8], kind: SurfaceKind, max: usize) -> Option<String> {
    let blocks = Skim { b: line, i: 0 }.line(message_path(kind), &mut Skim::message)??;
    quick_preview(&blocks, max)
}

#[test]
fn the_quick_preview_is_the_tree_s_preview() {
    let mut lines = testdata_lines();
    let message = |m: &str| format!(r#"{{"type":"assistant/message","data":{{"message":{m}}}}}"#);
    let crafted = [
        // Escapes, decoded only as far as shown: `\n`, `\"`, `\u00e9`, a surrogate pair.
        r#"{"content":[{"type":"text","text":"a\nb \"q\" caf\u00e9 \ud83d\ude00 \/ \\ \t\r\f\b end"}]}"#,
        // Whitespace other than ASCII spaces collapses too.
        "{\"content\":[{\"type\":\"text\",\"text\":\"a\u{a0}b\u{3000}c\u{2028}d \\u00a0 e\"}]}",
        // Order: text, then calls, results and attachments, then reasoning.
        r#"{"content":[{"type":"reasoning","text":"why"},{"type":"tool-call","name":"sh","arguments":"{\"c\":\"ls -l\"}"},{"type":"text","text":"said"},{"type":"image"},{"type":"file"},{"type":"tool-addition","toolName":"grep"},{"type":"tool-removal"}]}"#,
        // A v0–v3 tool result's own blocks, nested, and an unnamed call with no arguments.
        r#"{"content":[{"type":"tool-result","content":[{"type":"text","text":"out\nput"},{"type":"tool-result","content":[{"type":"text","text":"deep"}]}]},{"type":"tool-call"}]}"#,
        // Nulls are absent; an escaped type is decoded.
        r#"{"content":[{"type":"text","text":null},{"type":"t\u0065xt","text":"x","name":null,"content":null}]}"#,
        r#"{"content":null,"role":"user"}"#,
        r#"{"role":"user"}"#,
        r#"{"content":[]}"#,
        // Duplicates: the last wins.
        r#"{"content":[{"type":"text","text":"first","text":null,"text":"third"}]}"#,
        // What the quick read leaves to the tree: odd types and shapes.
        r#"{"content":[{"type":"text","text":"first","text":"second"}]}"#,
        r#"{"content":[{"type":"text","text":"a"}],"content":[{"type":"text","text":"b"}]}"#,
        r#"{"content":[{"type":"text","text":7},{"type":"text","text":"ok"}]}"#,
        r#"{"content":[["text","array"],{"type":"text","text":"ok"}]}"#,
        r#"{"content":"none"}"#,
        r#"{"content":[{"type":"tool-result","content":"odd"}]}"#,
        r#"{"c\u006fntent":[{"type":"text","text":"escaped key"}]}"#,
        r#"["content"]"#,
        r#""a string""#,
        // A lone surrogate, shown and not shown.
        r#"{"content":[{"type":"text","text":"x \udc00 y"}]}"#,
        r#"{"content":[{"type":"text","text":"x y z w v u t s r q p o n m l k j i h \ud800"}]}"#,
    ];
    for m in crafted {
        lines.push(message(m).into_bytes());
    }
    // Bytes that are not UTF-8, inside what is shown and past it.
    for tail in [
        &b"x\xff y"[..],
        b"abcdefghijklmnopqrstuvwxyz abcdefghij \xfe",
    ] {
        let mut l =
            br#"{"type":"user/message","data":{"content":[{"type":"text","text":""#.to_vec();
        l.extend_from_slice(tail);
        l.extend_from_slice(br#""}]}}"#);
        lines.push(l);
    }
    let (mut quick, mut compared) = (0, 0);
    for line in &lines {
        for kind in [SurfaceKind::User, SurfaceKind::Assistant] {
            let reference = tree_preview(line, kind, 1000);
            for max in [0, 1, 5, 17, 40, 1000] {
                let reference = tree_preview(line, kind, max);
                let Some(got) = quick_line_preview(line, kind, max) else {
                    continue;
                };
                quick += 1;
                assert_eq!(
                    Some(&got),
                    reference.as_ref(),
                    "max {max}: {}",
                    String::from_utf8_lossy(line)
                );
            }
            // Whatever path it takes, the message's preview is the tree's.
            if let Ok(span) = message_span(line, kind) {
                compared += 1;
                assert_eq!(
                    preview_bytes(&line[span], 1000).ok(),
                    reference,
                    "{}",
                    String::from_utf8_lossy(line)
                );
            }
        }
    }
    assert!(quick > 5000, "the quick read was taken {quick} times");
    assert!(compared > 1000, "{compared} messages compared");
}

#[test]
fn the_quick_preview_leaves_odd_messages_to_the_tree() {
    for m in [
        r#"{"content":[{"type":"text","text":7}]}"#,
        r#"{"content":[["text","array"]]}"#,
        r#"{"content":{"type":"text"}}"#,
        r#"{"c\u006fntent":[]}"#,
        r#"{"content":[{"type":"text","text":"x \udc00 y"}]}"#,
    ] {
        let blocks = Skim {
            b: m.as_bytes(),
            i: 0,
        }
        .whole(Skim::message);
        assert!(blocks.and_then(|b| quick_preview(&b, 100)).is_none(), "{m}");
    }
    // The array-shaped block the struct reader once took positionally is no text.
    assert_eq!(
        preview_bytes(br#"{"content":[["text","array"]]}"#, 100).unwrap(),
        ""
    );
}

#[test]
fn escapes_and_unicode_spaces_preview_as_decoded_text() {
    let cases = [
        (
            r#"{"content":[{"type":"text","text":"a\nb \"q\" caf\u00e9 \ud83d\ude00 \/ \\ end"}]}"#,
            "a b \"q\" café 😀 / \\ end",
        ),
        (
            "{\"content\":[{\"type\":\"text\",\"text\":\"a\u{a0}b\u{3000}c\u{2028}d \\u00a0 e\"}]}",
            "a b c d e",
        ),
    ];
    for (m, want) in cases {
        let line = format!(r#"{{"type":"assistant/message","data":{{"message":{m}}}}}"#);
        let quick = quick_line_preview(line.as_bytes(), SurfaceKind::Assistant, 100);
        assert_eq!(quick.as_deref(), Some(want), "{m}");
        assert_eq!(preview_bytes(m.as_bytes(), 100).unwrap(), want, "{m}");
    }
}

/// The surface of the log at `path`, folded on `threads` threads in small blocks.
fn folded(path: &std::path::Path, threads: usize) -> Option<crate::log::scan::FoldState> {
    use crate::log::scan::{ScanOptions, scan};
    let reader = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let opts = ScanOptions {
        threads,
        block_bytes: 4096,
        ..ScanOptions::default()
    };
    let mut findings: Vec<crate::log::finding::Finding> = Vec::new();
    scan(reader, Some(path), &opts, &mut findings, &mut ())
        .unwrap()
        .state
}

/// Where the fold saw a message start is where `message_span` finds it, and reading from
/// there derives and previews exactly what reading the whole line does.
fn check_message_offsets(path: &std::path::Path, threads: usize) -> (usize, usize) {
    let Some(state) = folded(path, threads) else {
        return (0, 0);
    };
    let mut d = Deriver::open(path).unwrap();
    let (mut known, mut nodes) = (0, 0);
    for node in state.surface.iter() {
        if !node.derives || node.legacy_message().is_some() {
            continue;
        }
        nodes += 1;
        let line = d.line_at(node.pos.byte).unwrap().to_vec();
        let span = message_span(&line, node.kind);
        let mut whole = node;
        whole.message_at = None;
        if let Some(at) = node.message_at {
            known += 1;
            let span = span.as_ref().expect("a message where the fold saw one");
            assert_eq!(
                at as usize,
                span.start,
                "{} seq {}",
                path.display(),
                node.seq
            );
        }
        let message = |d: &mut Deriver, n: &Node| d.message(n).map(|m| m.into_owned()).ok();
        assert_eq!(message(&mut d, &node), message(&mut d, &whole));
        for max in [0, 7, 60] {
            assert_eq!(
                d.preview(&node, max).ok(),
                d.preview(&whole, max).ok(),
                "{} seq {} at {max}",
                path.display(),
                node.seq
            );
        }
    }
    (known, nodes)
}

#[test]
fn the_fold_tells_where_each_message_starts() {
    let (mut known, mut nodes) = (0, 0);
    for log in &testdata_logs() {
        for threads in [1, 2] {
            let (k, n) = check_message_offsets(log, threads);
            known += k;
            nodes += n;
        }
    }
    // Most messages are where the fold can tell (the rest: v0 rewrites, escaped keys, lines
    // that are not UTF-8).
    assert!(
        known * 10 > nodes * 9,
        "{known} of {nodes} messages located"
    );
}

#[test]
fn message_offsets_follow_json_parse_and_give_up_on_what_they_cannot_tell() {
    use std::io::Write as _;
    // `data` as given, bytes that are not UTF-8 included.
    let user = |seq: u64, data: &[u8]| {
        let mut line =
            format!(r#"{{"type":"user/message","seq":{seq},"time":0,"data":"#).into_bytes();
        line.extend_from_slice(data);
        line.extend_from_slice(br#","surfaceOp":"append"}"#);
        line
    };
    let content = r#""content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}"#;
    // Each line, and whether the fold can tell where its message starts.
    let lines: [(Vec<u8>, bool); 5] = [
        (
            user(1, format!(r#"{{ "id":"a","role":"user",{content}}}"#).as_bytes()),
            true,
        ),
        // An escaped first key: the tree no longer knows where the key was.
        (
            user(2, format!(r#"{{"\u0069d":"b","role":"user",{content}}}"#).as_bytes()),
            false,
        ),
        // `data` twice: the last wins, as in JSON.parse. A line that repeats a key is read
        // whole, where the last of a key is found.
        (
            format!(
                r#"{{"type":"user/message","seq":3,"time":0,"data":{{"id":"x"}},"data":{{"id":"c","role":"user",{content}}},"surfaceOp":"append"}}"#
            )
            .into_bytes(),
            false,
        ),
        // A byte that is not UTF-8 (inside a text): the parser read a lossy copy.
        (
            user(
                4,
                b"{\"id\":\"d\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"h\xffi\"}],\"source\":{\"kind\":\"user\"}}",
            ),
            false,
        ),
        // `content` twice in the message: a preview read from the message's start would stop
        // at the first.
        (
            user(
                5,
                br#"{"id":"e","role":"user","content":[{"type":"text","text":"first"}],"content":[{"type":"text","text":"second"}],"source":{"kind":"user"}}"#,
            ),
            false,
        ),
    ];
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(
        file,
        r#"{{"type":"session","version":3,"id":"s","createdAt":1,"delegationDepth":0,"isSeeded":false}}"#
    )
    .unwrap();
    writeln!(
        file,
        r#"{{"type":"turn/start","seq":0,"time":0,"data":{{"turn":1}}}}"#
    )
    .unwrap();
    for (line, _) in &lines {
        file.write_all(line).unwrap();
        file.write_all(b"\n").unwrap();
    }
    file.flush().unwrap();
    for threads in [1, 2] {
        let state = folded(file.path(), threads).expect("a fold");
        let located: Vec<bool> = state
            .surface
            .iter()
            .map(|n| n.message_at.is_some())
            .collect();
        let want: Vec<bool> = lines.iter().map(|(_, at)| *at).collect();
        assert_eq!(located, want, "on {threads} thread(s)");
        assert_eq!(check_message_offsets(file.path(), threads), (1, 5));
        let last = state.surface.iter().last().expect("five nodes");
        let mut d = Deriver::open(file.path()).unwrap();
        assert_eq!(d.preview(&last, 40).unwrap(), "second");
    }
}

/// A preview's text by its definition: words split at whitespace, joined by single spaces,
/// cut to `max` characters with `…` (which takes the last one, trailing spaces dropped).
fn words_clipped(text: &str, max: usize) -> String {
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if words.chars().count() <= max {
        return words;
    }
    let mut kept: String = words.chars().take(max).collect();
    kept.pop();
    kept.truncate(kept.trim_end().len());
    kept.push('…');
    kept
}

#[test]
fn previews_are_the_words_joined_by_single_spaces_then_cut() {
    let texts = [
        "plain words of ascii text",
        "  leading and  double  spaces   and trailing  ",
        "tabs\tand\nnewlines\r\nbetween words",
        "a b c d e f g h i j k l m n o p",
        "unicode\u{a0}spaces\u{3000}and 日本語 words é",
        "x",
        "",
    ];
    for text in texts {
        let stored = serde_json::to_string(text).unwrap();
        let message = format!(r#"{{"content":[{{"type":"text","text":{stored}}}]}}"#);
        let tree = json::parse(message.as_bytes()).unwrap();
        for max in 0..40 {
            let want = words_clipped(text, max);
            assert_eq!(
                preview_bytes(message.as_bytes(), max).unwrap(),
                want,
                "{text:?} at {max}"
            );
            assert_eq!(preview(&tree, max), want, "{text:?} at {max} (tree)");
        }
    }
}

proptest::proptest! {
    /// Long runs are read a word at a time and only as far as the room left: any mix of
    /// words, spaces, escapes, controls and wide characters gives the definition's preview,
    /// read from the stored bytes and from the tree, also after a first text block.
    #[test]
    fn any_text_previews_as_its_words_joined_then_cut(
        pieces in proptest::collection::vec(
            proptest::sample::select(vec![
                " ", "  ", "a", "bc", "words of ascii", "\\", "\"", "é", "日", "\n", "\t",
                "\u{7f}", "\u{1}", "~!", "\u{a0}", "0123456789",
            ]),
            0..40,
        ),
        max in 0usize..90,
        first in proptest::sample::select(vec!["", "lead", "some words first "]),
    ) {
        let text: String = pieces.concat();
        for (message, whole) in [
            (
                format!(r#"{{"content":[{{"type":"text","text":{}}}]}}"#, serde_json::to_string(&text).unwrap()),
                text.clone(),
            ),
            (
                format!(
                    r#"{{"content":[{{"type":"text","text":{}}},{{"type":"text","text":{}}}]}}"#,
                    serde_json::to_string(first).unwrap(),
                    serde_json::to_string(&text).unwrap()
                ),
                format!("{first} {text}"),
            ),
        ] {
            let want = words_clipped(&whole, max);
            proptest::prop_assert_eq!(&preview_bytes(message.as_bytes(), max).unwrap(), &want);
            let tree = json::parse(message.as_bytes()).unwrap();
            proptest::prop_assert_eq!(&preview(&tree, max), &want);
        }
    }
}

proptest::proptest! {
    /// The word-at-a-time test is the byte-at-a-time one.
    #[test]
    fn a_word_is_plain_when_each_of_its_bytes_is(
        bytes in proptest::collection::vec(
            proptest::sample::select(vec![
                0u8, 0x1f, b' ', b'!', b'a', b'\\', b'"', b'~', 0x7f, 0x80, 0xc3, 0xff,
            ]),
            8,
        ),
        backslash_plain: bool,
    ) {
        let plain = |c: u8| (0x21..0x7f).contains(&c) && (c != b'\\' || backslash_plain);
        let each = (0..8).all(|k| {
            plain(bytes[k]) || (bytes[k] == b' ' && k < 7 && plain(bytes[k + 1]))
        });
        let w = u64::from_le_bytes(<[u8; 8]>::try_from(&bytes[..]).unwrap());
        proptest::prop_assert_eq!(plain_word(w, backslash_plain), each, "{:?}", bytes);
    }
}

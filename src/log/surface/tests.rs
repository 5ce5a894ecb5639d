use super::*;
use crate::log::dialect::DIALECTS;
use crate::log::finding::Finding;
use crate::log::rows::{Row, decode};
use crate::log::vocab::{KnownTypes, Vocabulary};

/// Fold lines through a fresh manager; returns the codes of every rejection.
fn fold(version: usize, lines: &[&str]) -> (SurfaceManager, Vec<Finding>) {
    let d = &DIALECTS[version];
    let vocab = Vocabulary::new(d, &KnownTypes::default());
    let mut m = SurfaceManager::new(d);
    m.record_replacements();
    let mut findings = Vec::new();
    for l in lines {
        let Row::Events(evs, _) = decode(l.as_bytes(), Pos::default(), d) else {
            panic!("bad row {l}")
        };
        for c in evs {
            let ev = c.event.unwrap();
            let class = vocab.classify(&ev.ty, ev.ignorable);
            m.fold(&ev, class, &mut findings);
        }
    }
    (m, findings)
}

fn user(seq: u64, op: &str) -> String {
    format!(
        r#"{{"type":"user/message","seq":{seq},"time":0,"data":{{"id":"u{seq}","role":"user","content":[],"source":{{"kind":"user"}}}},"surfaceOp":{op}}}"#
    )
}

#[test]
fn appends_build_the_surface_in_order() {
    let (m, f) = fold(3, &[&user(0, r#""append""#), &user(1, r#""append""#)]);
    assert!(f.is_empty());
    assert_eq!(m.seqs(), vec![0, 1]);
}

#[test]
fn replace_uses_surface_positions_not_numbers() {
    // 0 1 2, then 3 replaces 1..2 → 0 3; then 4 replaces 3..0? reversed; 4 replaces 0..3 ok.
    let lines = [
        user(0, r#""append""#),
        user(1, r#""append""#),
        user(2, r#""append""#),
        user(3, r#"{"op":"replace","startSeq":1,"endSeq":2}"#)
            .replace(r#""surfaceOp""#, r#""sourceEventSeqs":[1,2],"surfaceOp""#),
        user(4, r#""append""#),
        user(5, r#"{"op":"replace","startSeq":3,"endSeq":4}"#)
            .replace(r#""surfaceOp""#, r#""sourceEventSeqs":[3,4],"surfaceOp""#),
    ];
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let (m, f) = fold(3, &refs);
    assert!(f.is_empty(), "{f:?}");
    assert_eq!(m.seqs(), vec![0, 5]);
    assert_eq!(m.replace_generation(), 2);
    assert_eq!(m.replacements()[1].shadowed, vec![3, 4]);
}

#[test]
fn reversed_range_is_rejected_and_leaves_state_unchanged() {
    let lines = [
        user(0, r#""append""#),
        user(1, r#""append""#),
        user(2, r#"{"op":"replace","startSeq":1,"endSeq":0}"#)
            .replace(r#""surfaceOp""#, r#""sourceEventSeqs":[0,1],"surfaceOp""#),
    ];
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let (m, f) = fold(3, &refs);
    assert_eq!(
        f.iter().map(|f| f.code).collect::<Vec<_>>(),
        vec![Code::ReplaceRangeReversed]
    );
    assert_eq!(m.seqs(), vec![0, 1]);
    assert_eq!(m.next_seq(), 3);
}

use super::*;
use crate::log::dialect::DIALECTS;
use crate::log::finding::Pos;
use crate::log::rows::{Row, decode};
use crate::log::vocab::{KnownTypes, Vocabulary};

fn run(version: usize, lines: &[&str]) -> Vec<Finding> {
    let d = &DIALECTS[version];
    let vocab = Vocabulary::new(d, &KnownTypes::default());
    let mut l = Lifecycle::new(d);
    let mut out = Vec::new();
    for line in lines {
        let Row::Events(evs, _) = decode(line.as_bytes(), Pos::default(), d) else {
            panic!("{line}")
        };
        for c in evs {
            let ev = c.event.unwrap();
            let class = vocab.classify(&ev.ty, ev.ignorable);
            l.observe(&ev, class, &mut out);
        }
    }
    out
}

const TURN2: &str = r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":2}}"#;

#[test]
fn turn_numbering_is_a_warning_before_v3_and_an_error_after() {
    let v0 = run(0, &[TURN2]);
    assert_eq!(v0.len(), 1);
    assert_eq!(
        (v0[0].code, v0[0].severity),
        (Code::TurnNumberUnexpected, crate::log::Severity::Warning)
    );
    let v3 = run(3, &[TURN2]);
    assert_eq!(
        (v3[0].code, v3[0].severity),
        (Code::TurnNumberUnexpected, crate::log::Severity::Error)
    );
}

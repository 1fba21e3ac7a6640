//! `Reader::parse_only`: lines of other record types are passed over unparsed (counted), lines
//! whose type cannot be read from their first bytes are parsed as usual, and offsets and line
//! numbers stay those of the file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use session_jsonl::{DamageKind, Item, Reader, ReaderOptions};

const TS: &str = r#""run_id":"r","ts":"2026-01-02T03:04:05.000Z""#;

fn items(data: &[u8], types: &'static [&'static str]) -> (Vec<(String, u64, u64)>, u64) {
    let opts = ReaderOptions {
        expect_header: false,
        ..Default::default()
    };
    let mut r = Reader::new(data, opts).parse_only(types);
    let mut out = Vec::new();
    for item in r.by_ref() {
        match item.unwrap() {
            Item::Record(l) => out.push((l.record().kind().to_owned(), l.offset, l.line)),
            Item::Damage(d) => out.push((format!("damage {}", d.kind), d.offset, d.line)),
        }
    }
    (out, r.lines_passed_over())
}

#[test]
fn other_types_are_passed_over_and_the_rest_keeps_its_place() {
    let header = r#"{"type":"header","schema_version":1,"run_id":"r","started_at":"2026-01-02T03:04:05.000Z"}"#;
    // Not even valid JSON after its type: never parsed, so never reported.
    let request = r#"{"type":"llm.request","seq":1,"input":{"messages":[BROKEN"#;
    let start = format!(r#"{{"type":"run.start",{TS},"input":{{"type":"text","text":"hi"}}}}"#);
    // `type` not first: read from the parse, whatever its type.
    let late_type =
        r#"{"run_id":"r","type":"run.status","ts":"2026-01-02T03:04:05.000Z","status":"running"}"#;
    let end = format!(r#"{{"type":"run.end",{TS},"outcome":"completed"}}"#);
    let text = format!("{header}\n{request}\n{start}\n{late_type}\n{end}\n");
    let (got, passed) = items(text.as_bytes(), &["run.start", "run.end"]);
    let o_start = (header.len() + request.len() + 2) as u64;
    let o_late = o_start + start.len() as u64 + 1;
    let o_end = o_late + late_type.len() as u64 + 1;
    assert_eq!(
        got,
        vec![
            ("run.start".to_owned(), o_start, 3),
            ("run.status".to_owned(), o_late, 4),
            ("run.end".to_owned(), o_end, 5),
        ]
    );
    assert_eq!(passed, 2);
}

#[test]
fn damaged_starts_are_parsed_and_reported() {
    let nul = b"\0\0\0{\"type\":\"llm.request\",\"seq\":1}\n";
    let (got, passed) = items(nul, &["run.start"]);
    assert_eq!(passed, 0);
    assert_eq!(got.first().map(|g| g.0.as_str()), Some("damage nul_run"));
    // An escape in the name is no plain name: parsed (and not a known record).
    let escaped = b"{\"type\":\"llm\\u002erequest\",\"x\":1}\n";
    let (_, passed) = items(escaped, &["run.start"]);
    assert_eq!(passed, 0);
    // A torn last line of a passed-over type is passed over too; of a kept type, reported.
    let (got, passed) = items(b"{\"type\":\"llm.request\",\"inp", &["run.start"]);
    assert_eq!((got, passed), (vec![], 1));
    let (got, _) = items(b"{\"type\":\"run.start\",\"inp", &["run.start"]);
    assert_eq!(
        got,
        vec![(format!("damage {}", DamageKind::TornTail), 0, 1)]
    );
}

#[test]
fn without_parse_only_every_line_is_parsed() {
    let text = format!(
        "{}\n",
        r#"{"type":"llm.request","run_id":"r","ts":"2026-01-02T03:04:05.000Z","seq":1,"input":{}}"#
    );
    let opts = ReaderOptions {
        expect_header: false,
        ..Default::default()
    };
    let mut r = Reader::new(text.as_bytes(), opts);
    assert_eq!(r.by_ref().filter(|i| i.is_ok()).count(), 1);
    assert_eq!(r.lines_passed_over(), 0);
}

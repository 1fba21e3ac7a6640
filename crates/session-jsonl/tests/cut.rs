//! Property tests: records written through the writer, the file cut at every byte offset, read
//! with normal, 1-byte and 2-byte reads → exactly the records whose line was complete before
//! the cut, plus at most one torn-tail report; arbitrary bytes never make the reader panic.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod support;

use proptest::prelude::*;
use session_jsonl::{
    DamageKind, Durability, Item, Reader, ReaderOptions, RunWriter, WriterOptions,
};
use session_schema::{Header, Record, Timestamp, parse_record};
use support::Chunked;

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => any::<char>(),
            1 => Just('\0'),
            1 => Just('\n'),
            1 => Just('\u{2028}'),
            1 => Just('😀'),
            1 => Just('あ'),
        ],
        0..12,
    )
    .prop_map(|cs| cs.into_iter().collect())
}

fn record() -> impl Strategy<Value = Record> {
    (0..4u8, text(), any::<u32>()).prop_map(|(kind, s, n)| {
        let ts = "2026-02-03T12:00:00.000Z";
        let v = match kind {
            0 => serde_json::json!({"type":"tool.output","run_id":"r","ts":ts,"tool":"shell","tool_call_id":"c","result_raw":s}),
            1 => serde_json::json!({"type":"agent.event","run_id":"r","ts":ts,"seq":n,"event":{"type":"text","content":s,"timestamp":n}}),
            2 => serde_json::json!({"type":"run.status","run_id":"r","ts":ts,"status":"running","message":s}),
            _ => serde_json::json!({"type":"x.acme.note","n":n,"note":s}),
        };
        parse_record(v.to_string().as_bytes()).unwrap().value
    })
}

fn header() -> Header {
    Header {
        schema_version: 1,
        run_id: "r".into(),
        started_at: Timestamp::from_raw("2026-02-03T12:00:00.000Z"),
        ..Default::default()
    }
}

/// Writes the records through a real writer and returns the file bytes.
fn write_file(records: &[Record]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.jsonl");
    let w = RunWriter::create_file(
        &path,
        &header(),
        WriterOptions::with_durability(Durability::Flush),
    )
    .unwrap();
    for r in records {
        w.append(r).unwrap();
    }
    w.close().unwrap();
    std::fs::read(&path).unwrap()
}

fn read_all(bytes: &[u8], chunk: Option<usize>) -> Vec<Item> {
    let items: Result<Vec<Item>, _> = match chunk {
        None => Reader::new(bytes, ReaderOptions::default()).collect(),
        Some(c) => Reader::new(
            Chunked {
                inner: bytes,
                chunk: c,
            },
            ReaderOptions {
                read_size: c,
                ..ReaderOptions::default()
            },
        )
        .collect(),
    };
    items.unwrap()
}

/// Checks one cut: records = complete lines before `cut`, at most one torn tail.
fn check_cut(bytes: &[u8], lines: &[(usize, usize)], cut: usize, chunk: Option<usize>) {
    let items = read_all(&bytes[..cut], chunk);
    let mut got = Vec::new();
    let mut torn = 0;
    for item in &items {
        match item {
            Item::Record(r) => got.push((r.offset as usize, r.parsed.to_json().unwrap())),
            Item::Damage(d) => match d.kind {
                DamageKind::TornTail => {
                    torn += 1;
                    assert_eq!(d.offset as usize + d.len as usize, cut);
                }
                DamageKind::EmptyFile => assert_eq!(cut, 0),
                DamageKind::MissingHeader => assert!(cut < lines[0].1),
                other => panic!("unexpected {other} at cut {cut}"),
            },
        }
    }
    let want: Vec<(usize, Vec<u8>)> = lines
        .iter()
        .filter(|(_, end)| *end <= cut)
        .map(|&(start, end)| (start, bytes[start..end].to_vec()))
        .collect();
    assert_eq!(got, want, "cut at {cut} with chunk {chunk:?}");
    let inside = lines.iter().any(|&(s, e)| s < cut && cut < e);
    assert_eq!(torn, usize::from(inside), "cut at {cut}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn cut_at_every_offset(records in prop::collection::vec(record(), 0..5)) {
        let bytes = write_file(&records);
        // (start, end-without-newline) of every line.
        let mut lines = Vec::new();
        let mut start = 0;
        for (i, b) in bytes.iter().enumerate() {
            if *b == b'\n' {
                lines.push((start, i));
                start = i + 1;
            }
        }
        prop_assert_eq!(lines.len(), records.len() + 1);
        prop_assert!(!bytes.contains(&0), "NUL must be escaped");
        for cut in 0..=bytes.len() {
            check_cut(&bytes, &lines, cut, None);
            check_cut(&bytes, &lines, cut, Some(1));
            check_cut(&bytes, &lines, cut, Some(2));
        }
        // The whole file reads back as the header plus the records, in order.
        let items = read_all(&bytes, None);
        prop_assert_eq!(items.len(), records.len() + 1);
        for (item, rec) in items[1..].iter().zip(&records) {
            let r = item.as_record().unwrap();
            prop_assert_eq!(&r.parsed.value, rec);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(prop_oneof![any::<u8>(), Just(b'\n'), Just(0u8), Just(b'{')], 0..400),
        max in 1usize..64,
    ) {
        let opts = ReaderOptions { max_line_len: max, read_size: 3, ..ReaderOptions::default() };
        let items: Vec<Item> = Reader::new(&bytes[..], opts).collect::<Result<_, _>>().unwrap();
        let mut last_line = 0;
        for item in &items {
            let line = match item {
                Item::Record(r) => r.line,
                Item::Damage(d) => d.line,
            };
            prop_assert!(line >= last_line);
            last_line = line;
        }
    }
}

/// 48 MiB of one line without buffering it: a `Read` that produces the bytes on the fly.
struct LongLine {
    left: usize,
    tail: &'static [u8],
}

impl std::io::Read for LongLine {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left > 0 {
            let n = buf.len().min(self.left);
            buf[..n].fill(b'x');
            self.left -= n;
            return Ok(n);
        }
        let n = buf.len().min(self.tail.len());
        buf[..n].copy_from_slice(&self.tail[..n]);
        self.tail = &self.tail[n..];
        Ok(n)
    }
}

#[test]
fn oversized_lines_are_skipped_with_bounded_memory() {
    let tail: &'static [u8] = b"\n{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"r\",\"started_at\":\"2026-02-03T12:00:00.000Z\"}\n";
    let opts = ReaderOptions {
        max_line_len: 1 << 20,
        read_size: 64 << 10,
        ..ReaderOptions::default()
    };
    let mut reader = Reader::new(
        LongLine {
            left: 48 << 20,
            tail,
        },
        opts,
    );
    let mut items = Vec::new();
    for item in reader.by_ref() {
        items.push(item.unwrap());
    }
    assert!(
        reader.buffer_capacity() <= (1 << 20) + (64 << 10) + 1,
        "{}",
        reader.buffer_capacity()
    );
    let d = items[0].as_damage().unwrap();
    assert_eq!(
        (d.kind, d.len, d.line),
        (DamageKind::OversizedLine, 48 << 20, 1)
    );
    let r = items[1].as_record().unwrap();
    assert_eq!((r.line, r.offset), (2, (48 << 20) + 1));
    assert_eq!(items.len(), 2);
}

//! The one type for a run read whole, `session_schema::RunRead` (re-exported as
//! `session_jsonl::RunRead` and `session_replay::RunRead`): a damaged run log read from its
//! file (session-jsonl), through the local storage backend (session-storage's `RunCatalogue`)
//! and through session-replay's `io` gives the same records, positions, raw bytes and damage,
//! and session-replay's pure functions take that value as it is.

use std::path::{Path, PathBuf};

use session_jsonl::{Damage, DamageKind, ReaderOptions, RunRead};
use session_replay::{RunMeta, SkipKind, SkippedLine, skipped_lines};
use session_storage::local::LocalBackend;
use session_storage::{LinePosition, RunCatalogue};

const RUN_ID: &str = "8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a";

fn status_line(second: u32, message: &[u8]) -> Vec<u8> {
    let mut line = format!(
        "{{\"type\":\"run.status\",\"run_id\":\"{RUN_ID}\",\"ts\":\"2026-02-03T12:00:{second:02}.000Z\",\"status\":\"running\",\"message\":\""
    )
    .into_bytes();
    line.extend_from_slice(message);
    line.extend_from_slice(b"\"}");
    line
}

/// The lines of the run (without their `\n`, the last one torn) and each line's start offset.
struct Lines {
    lines: Vec<Vec<u8>>,
    starts: Vec<u64>,
    bytes: Vec<u8>,
}

fn damaged_run() -> Lines {
    let header = format!(
        "\u{feff}{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{RUN_ID}\",\"session_id\":\"s-1\",\"started_at\":\"2026-02-03T12:00:00.000Z\"}}"
    )
    .into_bytes();
    let mut nul = vec![0u8; 4];
    nul.extend_from_slice(&status_line(3, b"after NULs"));
    let mut crlf = status_line(6, b"crlf");
    crlf.push(b'\r');
    let lines = vec![
        header,                                                    // 1: BOM, header
        status_line(1, b"ok"),                                     // 2
        b"not json".to_vec(),                                      // 3: corrupt
        nul,                                                       // 4: NUL run, then a record
        status_line(4, b"caf\xff"),                                // 5: invalid UTF-8, repaired
        status_line(5, br"\ud83c"),                                // 6: lone surrogate, repaired
        crlf,                                                      // 7: CRLF
        br#"{"type":"run.status","run_id":5}"#.to_vec(),         // 8: wrong shape
        format!(
            "{{\"type\":\"run.end\",\"run_id\":\"{RUN_ID}\",\"ts\":\"2026-02-03T12:00:07.000Z\",\"outcome\":\"completed\"}}"
        )
        .into_bytes(), // 9
        b"{\"type\":\"run.st".to_vec(), // 10: torn tail
    ];
    let mut bytes = Vec::new();
    let mut starts = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        starts.push(bytes.len() as u64);
        bytes.extend_from_slice(line);
        if i + 1 < lines.len() {
            bytes.push(b'\n');
        }
    }
    Lines {
        lines,
        starts,
        bytes,
    }
}

fn write_run(root: &Path, bytes: &[u8]) -> PathBuf {
    let dir = root.join("2026/02/03");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{RUN_ID}.jsonl"));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Everything of a `RunRead` but its path: per record its line, offset, length, raw bytes, kind
/// and JSON; the damage reports; the bytes read.
type Contract = (
    Vec<(u64, u64, u64, Option<Vec<u8>>, String, Vec<u8>)>,
    Vec<Damage>,
    u64,
);

fn contract(read: &RunRead) -> Contract {
    let records = read
        .records
        .iter()
        .map(|r| {
            (
                r.line,
                r.offset,
                r.len,
                r.raw.clone(),
                r.record().kind().to_owned(),
                r.parsed.to_json().unwrap(),
            )
        })
        .collect();
    (records, read.damage.clone(), read.bytes)
}

fn keep_raw() -> ReaderOptions {
    ReaderOptions {
        keep_raw: true,
        ..ReaderOptions::default()
    }
}

#[test]
fn a_run_read_whole_is_one_value_through_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let run = damaged_run();
    let path = write_run(&root, &run.bytes);
    let backend = LocalBackend::open(&root).unwrap();

    // session-jsonl, from the file.
    let from_file = session_jsonl::read_run_with(&path, keep_raw()).unwrap();
    assert_eq!(from_file.path, path);
    assert_eq!(from_file.bytes, run.bytes.len() as u64);

    // Damage, exactly: kind, line, byte offset, length.
    let start = |line: usize| run.starts[line - 1];
    let damage: Vec<(DamageKind, u64, u64, u64)> = from_file
        .damage
        .iter()
        .map(|d| (d.kind, d.line, d.offset, d.len))
        .collect();
    assert_eq!(
        damage,
        [
            (DamageKind::CorruptLine, 3, start(3), 8),
            (DamageKind::NulRun, 4, start(4), 4),
            (
                DamageKind::InvalidUtf8,
                5,
                start(5),
                run.lines[4].len() as u64
            ),
            (
                DamageKind::LoneSurrogate,
                6,
                start(6),
                run.lines[5].len() as u64
            ),
            (
                DamageKind::SchemaMismatch,
                8,
                start(8),
                run.lines[7].len() as u64
            ),
            (
                DamageKind::TornTail,
                10,
                start(10),
                run.lines[9].len() as u64
            ),
        ]
    );

    // Records: kind, line, offset, and their raw bytes are the file's, byte for byte.
    let records: Vec<(&str, u64, u64)> = from_file
        .records
        .iter()
        .map(|r| (r.record().kind(), r.line, r.offset))
        .collect();
    assert_eq!(
        records,
        [
            ("header", 1, start(1)),
            ("run.status", 2, start(2)),
            ("run.status", 4, start(4) + 4),
            ("run.status", 5, start(5)),
            ("run.status", 6, start(6)),
            ("run.status", 7, start(7)),
            ("run.end", 9, start(9)),
        ]
    );
    for r in &from_file.records {
        let from = usize::try_from(r.offset).unwrap();
        let to = from + usize::try_from(r.len).unwrap();
        assert_eq!(
            r.raw.as_deref(),
            Some(&run.bytes[from..to]),
            "line {}",
            r.line
        );
    }

    // session-storage, through the local backend: the same value (a backend names runs by id,
    // so its `path` is empty).
    let stored = backend.read_run(RUN_ID).unwrap();
    assert_eq!(stored.path, PathBuf::new());
    assert_eq!(
        contract(&stored),
        contract(&session_jsonl::read_run(&path).unwrap())
    );
    let mut items = backend
        .read_items(RUN_ID, LinePosition::START, keep_raw())
        .unwrap();
    let stored_raw = RunRead::from_reader(PathBuf::new(), &mut items).unwrap();
    assert_eq!(contract(&stored_raw), contract(&from_file));

    // One type, named through every crate: the same struct, not a conversion.
    let same: [&session_schema::RunRead; 3] = [&from_file, &stored, &stored_raw];
    assert_eq!(same.len(), 3);

    // session-replay's io: the same value as session-jsonl's read, with verify_run's diagnostics.
    let (log, diags) = session_replay::io::read_run(&path).unwrap();
    let log: session_replay::RunRead = log;
    assert_eq!(log.path, path);
    assert_eq!(
        contract(&log),
        contract(&session_jsonl::read_run(&path).unwrap())
    );
    assert_eq!(
        format!("{diags:?}"),
        format!("{:?}", session_replay::verify_run(&log))
    );
    let meta = RunMeta::of(&log);
    assert_eq!(meta.run_id, RUN_ID);
    assert_eq!(meta.session_id.as_deref(), Some("s-1"));
    let lines: Vec<u64> = from_file.records.iter().map(|r| r.line).collect();
    let log_lines: Vec<Option<u64>> = (0..log.records.len()).map(|i| log.line_of(i)).collect();
    assert_eq!(
        log_lines,
        lines.iter().copied().map(Some).collect::<Vec<_>>()
    );
    // The pure core reads the records in place: invocations and transcripts over `records`.
    let t = session_replay::transcript_with(&log.records, &skipped_lines(&log));
    assert!(t.entries.iter().any(|e| matches!(
        e.kind,
        session_replay::EntryKind::Skipped {
            line: 8,
            kind: SkipKind::Shape
        }
    )));
    // Repairs become notes, the torn tail a note, lost lines warnings.
    let kinds: Vec<(session_replay::DiagnosticKind, Option<&str>)> = diags
        .iter()
        .map(|d| (d.kind, d.run_id.as_deref()))
        .collect();
    assert!(kinds.contains(&(session_replay::DiagnosticKind::RepairedLine, Some(RUN_ID))));
    assert!(kinds.contains(&(session_replay::DiagnosticKind::TornTail, Some(RUN_ID))));
    assert_eq!(
        skipped_lines(&log),
        [
            SkippedLine {
                line: 3,
                byte_offset: start(3),
                kind: SkipKind::Corrupt
            },
            SkippedLine {
                line: 4,
                byte_offset: start(4),
                kind: SkipKind::Corrupt
            },
            SkippedLine {
                line: 8,
                byte_offset: start(8),
                kind: SkipKind::Shape
            },
            SkippedLine {
                line: 10,
                byte_offset: start(10),
                kind: SkipKind::TornTail
            },
        ]
    );
}

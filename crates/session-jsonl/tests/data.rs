//! Data-driven reader tests: every `test_data/NNNN_name.jsonl` is read and its items are compared
//! with `NNNN_name.expected` through one helper, [`check`]. Set `UPDATE_EXPECT=1` to rewrite
//! the expectation files (then review the diff).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod support;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use session_jsonl::{Item, Reader, ReaderOptions};
use support::{Chunked, render};

fn test_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data")
}

/// Options from a leading `# options: key=value ...` line of the expectation file.
fn options(expected: &str) -> ReaderOptions {
    let mut opts = ReaderOptions::default();
    if let Some(line) = expected
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("# options:"))
    {
        for kv in line.split_whitespace() {
            let (k, v) = kv.split_once('=').expect("key=value");
            match k {
                "max_line_len" => opts.max_line_len = v.parse().expect("number"),
                other => panic!("unknown option {other}"),
            }
        }
    }
    opts
}

fn render_all<R: Read>(src: R, opts: ReaderOptions) -> String {
    let mut out = String::new();
    for item in Reader::new(src, opts) {
        let item: Item = item.expect("in-memory reads cannot fail");
        out.push_str(&render(&item));
        out.push('\n');
    }
    out
}

/// Reads `input` and compares the rendered items with the `.expected` file beside it; also
/// checks that 1-, 2- and 7-byte reads and a zstd copy give the same items.
fn check(input: &Path) {
    let expected_path = input.with_extension("expected");
    let expected = fs::read_to_string(&expected_path).unwrap_or_default();
    let opts = options(&expected);
    let bytes = fs::read(input).unwrap();
    let actual = render_all(&bytes[..], opts.clone());
    let header: String = expected
        .lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let want = &expected[header.len()..];
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        fs::write(&expected_path, format!("{header}{actual}")).unwrap();
    } else {
        assert_eq!(actual, want, "items of {}", input.display());
    }
    for chunk in [1, 2, 7] {
        let small = ReaderOptions {
            read_size: chunk,
            ..opts.clone()
        };
        let got = render_all(
            Chunked {
                inner: &bytes[..],
                chunk,
            },
            small,
        );
        assert_eq!(got, actual, "{} with {chunk}-byte reads", input.display());
    }
    let dir = tempfile::tempdir().unwrap();
    let zst = dir.path().join("r1.jsonl.zst");
    fs::write(&zst, zstd::encode_all(&bytes[..], 3).unwrap()).unwrap();
    let got = render_all(session_jsonl::open_run_file(&zst).unwrap(), opts);
    assert_eq!(got, actual, "{} read from zstd", input.display());
}

#[test]
fn every_test_data_file_matches_its_expectation() {
    let mut inputs: Vec<PathBuf> = fs::read_dir(test_data())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    inputs.sort();
    assert!(inputs.len() >= 20, "test_data went missing");
    for input in &inputs {
        assert!(
            input.with_extension("expected").exists()
                || std::env::var_os("UPDATE_EXPECT").is_some(),
            "{} has no .expected file",
            input.display()
        );
        check(input);
    }
}

#[test]
fn every_damage_kind_has_a_test_data_file() {
    let mut all = String::new();
    for e in fs::read_dir(test_data()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|e| e == "expected") {
            all.push_str(&fs::read_to_string(p).unwrap());
        }
    }
    for kind in [
        "torn_tail",
        "corrupt_line",
        "sealed_fragment",
        "schema_mismatch",
        "nul_run",
        "invalid_utf8",
        "lone_surrogate",
        "oversized_line",
        "empty_file",
        "missing_header",
        "newer_schema_version",
        "unknown_schema_version",
        "duplicate_header",
    ] {
        assert!(
            all.contains(&format!("damage {kind} ")),
            "no test data for {kind}"
        );
    }
}

/// The damage messages of `bytes` read as a run file.
fn messages(bytes: &[u8]) -> Vec<(String, String)> {
    session_jsonl::Reader::new(bytes, ReaderOptions::default())
        .filter_map(|i| i.unwrap().as_damage().cloned())
        .map(|d| (d.kind.as_str().to_owned(), d.message))
        .collect()
}

#[test]
fn invalid_utf8_reports_say_how_many_bytes_were_replaced() {
    let h = r#"{"type":"header","schema_version":1,"run_id":"r","started_at":"2026-02-03T12:00:00.000Z"}"#;
    // Two bad sequences: one byte, then two bytes (a three-byte character missing its end).
    let mut bytes = format!("{h}\n").into_bytes();
    bytes.extend_from_slice(br#"{"type":"run.status","run_id":"r","ts":"2026-02-03T12:00:01.000Z","status":"running","message":"a"#);
    bytes.extend_from_slice(b"\xff b \xe2\x82 ");
    bytes.extend_from_slice(b"\"}\n");
    let m = messages(&bytes);
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(m[0].0, "invalid_utf8");
    assert!(
        m[0].1.ends_with("3 byte(s) replaced by 2 U+FFFD"),
        "{}",
        m[0].1
    );
    // A sealed fragment cut inside a character: one report naming the cut.
    let mut bytes = format!("{h}\n").into_bytes();
    bytes.extend_from_slice("{\"type\":\"run.status\",\"message\":\"é".as_bytes());
    bytes.pop();
    bytes.push(b'\n');
    let m = messages(&bytes);
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(m[0].0, "sealed_fragment");
    assert!(
        m[0].1.contains(
            "the line ends inside a multi-byte character (1 byte(s) replaced by 1 U+FFFD)"
        ),
        "{}",
        m[0].1
    );
    assert!(
        m[0].1.contains("the record being written was lost"),
        "{}",
        m[0].1
    );
}

#[test]
fn only_a_cut_object_ending_at_a_newline_is_a_sealed_fragment() {
    let h = r#"{"type":"header","schema_version":1,"run_id":"r","started_at":"2026-02-03T12:00:00.000Z"}"#;
    let kinds = |body: &[u8]| -> Vec<String> {
        let mut bytes = format!("{h}\n").into_bytes();
        bytes.extend_from_slice(body);
        messages(&bytes).into_iter().map(|(k, _)| k).collect()
    };
    assert_eq!(kinds(b"{\"type\":\"run.sta\n"), ["sealed_fragment"]);
    assert_eq!(kinds(b"  {\"type\":\"run.status\",\n"), ["sealed_fragment"]);
    // Garbage, a glued record, text that is no object: corrupt lines.
    assert_eq!(kinds(b"hello\n"), ["corrupt_line"]);
    assert_eq!(
        kinds(b"{\"type\":\"run.st{\"type\":\"x\"}\n"),
        ["corrupt_line"]
    );
    // Not sealed: still a torn tail; cut by NUL padding: a corrupt line beside the NUL run.
    assert_eq!(kinds(b"{\"type\":\"run.sta"), ["torn_tail"]);
    assert_eq!(
        kinds(b"{\"type\":\"run.sta\0\0\n"),
        ["corrupt_line", "nul_run"]
    );
}

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

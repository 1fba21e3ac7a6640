//! A record of a type this version does not know (`x.<org>.*` extensions, newer types) is shown
//! the same way by every renderer: its type, its time and its compact JSON, clipped in `show`
//! and `tail`, whole in `export --format md` and `--format html`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::plant;

use std::path::Path;

const SESSION: &str = "5a1e0001-0000-4000-8000-000000000001";
const RUN: &str = "0e0e0e0e-0000-4000-8000-00000000e0e0";

/// The unknown record as stored (and as its compact JSON reads).
fn note() -> String {
    format!(
        r#"{{"type":"x.acme.note","run_id":"{RUN}","ts":"2026-11-30T10:00:01.500Z","note":"hi","n":[1,2]}}"#
    )
}

/// An unknown record whose JSON is wider than the terminal renderers show.
fn wide() -> String {
    format!(
        r#"{{"type":"x.acme.blob","ts":"2026-11-30T10:00:01.700Z","data":"{}"}}"#,
        "a".repeat(300)
    )
}

/// Plants run `RUN`: header, input, the two unknown records, end.
fn plant_run(root: &Path) {
    plant::run_file(
        root,
        "2026/11/30",
        &format!("{RUN}.jsonl"),
        &[
            format!(
                r#"{{"type":"header","schema_version":1,"run_id":"{RUN}","session_id":"{SESSION}","started_at":"2026-11-30T10:00:00.000Z"}}"#
            ),
            format!(
                r#"{{"type":"run.start","run_id":"{RUN}","session_id":"{SESSION}","ts":"2026-11-30T10:00:01.000Z","input":{{"type":"text","text":"go"}}}}"#
            ),
            note(),
            wide(),
            format!(
                r#"{{"type":"run.end","run_id":"{RUN}","ts":"2026-11-30T10:00:02.000Z","outcome":"completed"}}"#
            ),
        ],
    );
}

fn stdout_of(root: &Path, args: &[&str]) -> String {
    let o = plant::sessions(root, args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    String::from_utf8(o.stdout).unwrap()
}

/// The first 199 columns of the wide record's JSON and an ellipsis.
fn wide_clipped() -> String {
    let mut s: String = wide().chars().take(199).collect();
    s.push('…');
    s
}

#[test]
fn show_gives_an_unknown_record_its_type_time_and_clipped_json() {
    let dir = tempfile::tempdir().unwrap();
    plant_run(dir.path());
    let out = stdout_of(dir.path(), &["show", RUN]);
    let expected = format!(
        "10:00:01 user\n           go\n\
         10:00:01 unknown record x.acme.note\n           {}\n\
         10:00:01 unknown record x.acme.blob\n           {}\n\
         10:00:02 run completed\n",
        note(),
        wide_clipped()
    );
    assert!(out.ends_with(&expected), "{out}");
}

#[test]
fn tail_gives_an_unknown_record_its_time_and_clipped_json() {
    let dir = tempfile::tempdir().unwrap();
    plant_run(dir.path());
    let out = stdout_of(dir.path(), &["tail", RUN]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert_eq!(lines[2], format!("10:00:01 x.acme.note {}", note()));
    assert_eq!(lines[3], format!("10:00:01 x.acme.blob {}", wide_clipped()));
}

#[test]
fn export_md_gives_an_unknown_record_its_time_and_whole_json() {
    let dir = tempfile::tempdir().unwrap();
    plant_run(dir.path());
    let out = stdout_of(dir.path(), &["export", RUN, "--format", "md"]);
    let expected = format!(
        "\n_Record of unknown type `x.acme.note` · 2026-11-30T10:00:01.500Z_\n\n```json\n{}\n```\n\
         \n_Record of unknown type `x.acme.blob` · 2026-11-30T10:00:01.700Z_\n\n```json\n{}\n```\n\
         \n**Outcome: completed** · 2026-11-30T10:00:02.000Z\n",
        note(),
        wide()
    );
    assert!(out.ends_with(&expected), "{out}");
}

#[test]
fn export_html_gives_an_unknown_record_its_time_and_whole_json() {
    let dir = tempfile::tempdir().unwrap();
    plant_run(dir.path());
    let out = stdout_of(dir.path(), &["export", RUN, "--format", "html"]);
    let entry = format!(
        "<div class=\"entry meta\" id=\"L3\"><div class=\"who\"><span class=\"ts\">2026-11-30T10:00:01.500Z</span><a class=\"ln\" href=\"#L3\">line 3</a></div>Record of unknown type <code>x.acme.note</code><pre>{}</pre></div>",
        note().replace('"', "&quot;")
    );
    assert!(out.contains(&entry), "{out}");
    // The wide record is not clipped.
    assert!(out.contains(&wide().replace('"', "&quot;")), "{out}");
}

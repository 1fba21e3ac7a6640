//! One vocabulary, complete matches: a public enum name means one thing in the workspace, and
//! the renderers of record and transcript-entry kinds keep the lint that makes their matches
//! complete. Run by `cargo test`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::project_root;
use crate::tidy::walk;

/// `pub enum <Name>` declarations in the `src/` of every crate, by name, with the crates that
/// declare them (macro-declared enums such as `json_union! { pub enum Record … }` included).
fn public_enums() -> BTreeMap<String, BTreeSet<String>> {
    let mut by_name: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let crates = project_root().join("crates");
    for entry in std::fs::read_dir(&crates).unwrap() {
        let dir = entry.unwrap().path();
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        let krate = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut files: Vec<PathBuf> = Vec::new();
        walk(&src, &mut files).unwrap();
        for f in files
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            for line in text.lines() {
                let Some(rest) = line.trim_start().strip_prefix("pub enum ") else {
                    continue;
                };
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                    by_name.entry(name).or_default().insert(krate.clone());
                }
            }
        }
    }
    by_name
}

#[test]
fn public_enum_names_are_distinct_across_crates() {
    let enums = public_enums();
    // The scan sees the enums it must (a broken scan would pass vacuously).
    for (name, krate) in [
        ("Record", "session-schema"),
        ("DamageKind", "session-jsonl"),
        ("MessageDamageKind", "session-state"),
        ("EntryKind", "session-replay"),
    ] {
        assert!(
            enums.get(name).is_some_and(|c| c.contains(krate)),
            "`pub enum {name}` not found in {krate}"
        );
    }
    let shared: Vec<String> = enums
        .iter()
        .filter(|(_, crates)| crates.len() > 1)
        .map(|(name, crates)| format!("{name}: {crates:?}"))
        .collect();
    assert!(
        shared.is_empty(),
        "public enums declared under the same name in several crates (give each a name \
         that says what it is): {shared:#?}"
    );
}

/// The functions that render or classify every record or transcript-entry kind, each matching
/// another crate's `#[non_exhaustive]` enum: `(file, signature)`.
const COMPLETE_MATCHES: &[(&str, &str)] = &[
    ("crates/session-replay/src/transcript.rs", "pub fn record("),
    (
        "crates/session-cli/src/support/render.rs",
        "fn render_entry(",
    ),
    (
        "crates/session-cli/src/support/render.rs",
        "pub(crate) fn describe(",
    ),
    (
        "crates/session-cli/src/support/html.rs",
        "pub(crate) fn entry(",
    ),
];

#[test]
fn record_and_entry_renderers_deny_wildcard_arms() {
    let attr = "#[deny(clippy::wildcard_enum_match_arm)]";
    let mut bad = Vec::new();
    for (file, sig) in COMPLETE_MATCHES {
        let text = std::fs::read_to_string(project_root().join(file)).unwrap();
        let Some(at) = text.find(sig) else {
            bad.push(format!("{file}: `{sig}` not found"));
            continue;
        };
        // The attributes right above the signature (after the doc comment).
        let before = text[..at].rfind('\n').map_or("", |n| &text[..n]);
        let head: Vec<&str> = before
            .lines()
            .rev()
            .take_while(|l| l.trim_start().starts_with("#["))
            .collect();
        if !head.iter().any(|l| l.trim() == attr) {
            bad.push(format!("{file}: `{sig}` lacks {attr}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Structs declared in the `src/` of every crate whose fields hold a list of `type_name`s
/// (`Vec<T>` or `Vec<path::T>`), as `crate::Struct`.
fn structs_holding_lists_of(type_names: &[&str]) -> BTreeSet<String> {
    let holds = |body: &str, t: &str| {
        body.contains(&format!("Vec<{t}>")) || body.contains(&format!("::{t}>"))
    };
    let mut found = BTreeSet::new();
    let crates = project_root().join("crates");
    for entry in std::fs::read_dir(&crates).unwrap() {
        let dir = entry.unwrap().path();
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        let krate = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut files: Vec<PathBuf> = Vec::new();
        walk(&src, &mut files).unwrap();
        for f in files
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            let mut lines = text.lines();
            while let Some(line) = lines.next() {
                let t = line.trim_start();
                let Some(rest) = ["pub struct ", "pub(crate) struct ", "struct "]
                    .iter()
                    .find_map(|p| t.strip_prefix(p))
                else {
                    continue;
                };
                if !rest.trim_end().ends_with('{') {
                    continue;
                }
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let body: String = lines
                    .by_ref()
                    .take_while(|l| l.trim() != "}")
                    .collect::<Vec<_>>()
                    .join("\n");
                if type_names.iter().all(|t| holds(&body, t)) {
                    found.insert(format!("{krate}::{name}"));
                }
            }
        }
    }
    found
}

/// A run read whole (its records with their positions and its damage reports) is one type,
/// session-jsonl's `RunRead`; session-storage's `ParsedRun` is an alias of it, and
/// session-replay's `RunLog` holds only the projection its pure core takes.
#[test]
fn one_type_holds_a_run_read_whole() {
    let found = structs_holding_lists_of(&["RecordLine", "Damage"]);
    assert_eq!(
        found.into_iter().collect::<Vec<_>>(),
        ["session-jsonl::RunRead"],
        "a second struct holds a run's records and damage: use session_jsonl::RunRead"
    );
    // The scan sees structs of the other crates too (a broken scan would pass vacuously).
    assert!(
        structs_holding_lists_of(&["SkippedLine"]).contains("session-replay::RunLog"),
        "session-replay's RunLog not found by the scan"
    );
}

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
        ("DamageKind", "session-schema"),
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

/// The structs declared in `text` with a `{ … }` body: `(name, body)`.
fn structs_in(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
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
        found.push((name, body));
    }
    found
}

/// Whether a struct body holds a list of any of `type_names` (`Vec<T>` or `Vec<path::T>`).
fn holds_list_of(body: &str, type_names: &[&str]) -> bool {
    type_names
        .iter()
        .any(|t| body.contains(&format!("Vec<{t}>")) || body.contains(&format!("::{t}>")))
}

/// What a run read whole holds: a list of its records (as parsed, or with their positions) and
/// a list of what went wrong reading it (the reader's damage reports, or a projection of them
/// such as the skipped lines). A struct holding one of each is a run read whole.
const RUN_RECORDS: &[&str] = &["Record", "RecordLine"];
const RUN_DAMAGE: &[&str] = &["Damage", "SkippedLine"];

fn holds_a_run_read_whole(body: &str) -> bool {
    holds_list_of(body, RUN_RECORDS) && holds_list_of(body, RUN_DAMAGE)
}

/// Structs declared in the `src/` of every crate whose body passes `keep`, as `crate::Struct`.
fn structs_where(keep: impl Fn(&str) -> bool) -> BTreeSet<String> {
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
            for (name, body) in structs_in(&text) {
                if keep(&body) {
                    found.insert(format!("{krate}::{name}"));
                }
            }
        }
    }
    found
}

/// A run read whole (its records with their positions and its damage reports) is one type,
/// session-schema's `RunRead` (re-exported by session-jsonl and session-replay; session-storage's
/// `ParsedRun` is an alias of it). No other struct holds a run's records beside its damage or
/// a projection of it: session-replay's pure core takes `RunRead` as it is.
#[test]
fn one_type_holds_a_run_read_whole() {
    let found = structs_where(holds_a_run_read_whole);
    assert_eq!(
        found.into_iter().collect::<Vec<_>>(),
        ["session-schema::RunRead"],
        "a second struct holds a run's records and its damage (or skipped lines): use \
         session_schema::RunRead (session_jsonl::RunRead, session_replay::RunRead)"
    );
    // The scan sees structs of the other crates too (a broken scan would pass vacuously):
    // session-jsonl's head scan keeps the damage of a file's first lines.
    assert!(
        structs_where(|b| holds_list_of(b, &["Damage"])).contains("session-jsonl::HeadScan"),
        "session-jsonl's HeadScan not found by the scan"
    );
}

/// The rule catches what the workspace had before one type held a run read whole:
/// session-replay's `RunLog` (records, their lines, the skipped lines) and session-jsonl's
/// `RunRead` before it moved.
#[test]
fn the_run_read_rule_catches_a_projection() {
    let old = r"
/// One run's records plus where they came from.
#[derive(Debug, Clone, Default)]
pub struct RunLog {
    pub meta: RunMeta,
    pub records: Vec<Record>,
    pub lines: Vec<u64>,
    pub skipped: Vec<SkippedLine>,
}

pub struct RunRead {
    pub path: PathBuf,
    pub records: Vec<RecordLine>,
    pub damage: Vec<session_jsonl::Damage>,
    pub bytes: u64,
}

pub struct Listing {
    pub records: Vec<Record>,
    pub total: u64,
}
";
    let caught: Vec<String> = structs_in(old)
        .into_iter()
        .filter(|(_, body)| holds_a_run_read_whole(body))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(caught, ["RunLog", "RunRead"]);
}

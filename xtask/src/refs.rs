//! Checks that references in code and documentation resolve inside the repository, run by
//! `cargo test`.
//!
//! * Every `§` reference names its document — "spec §N" is `docs/spec.md`, "compat §N" (or
//!   "compat notes §N") is `docs/compat.md`, taken from the nearest of those two words before it
//!   — and the section (and item, for "§5 item 9") exists there.
//! * Nothing points at the specification's copies outside the repository, and nothing names a
//!   tracker issue: the repository is read without either.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The sections and numbered items of one document.
#[derive(Debug, Default)]
struct Sections {
    /// `"2"`, `"2.10"`, … from `## 2. …` and `### 2.10 …` headings.
    ids: BTreeSet<String>,
    /// Numbered list entries (`1. …` at the start of a line) per top-level section.
    items: BTreeMap<String, BTreeSet<u32>>,
}

impl Sections {
    fn parse(text: &str) -> Self {
        let mut out = Sections::default();
        let mut top = String::new();
        let mut in_fence = false;
        for line in text.lines() {
            if line.starts_with("```") {
                in_fence = !in_fence;
                continue;
            }
            if in_fence {
                continue;
            }
            if let Some(rest) = line
                .strip_prefix("### ")
                .or_else(|| line.strip_prefix("## "))
            {
                let id: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                let id = id.trim_end_matches('.').to_owned();
                if !id.is_empty() {
                    if line.starts_with("## ") {
                        top.clone_from(&id);
                    }
                    out.ids.insert(id);
                } else if line.starts_with("## ") {
                    top.clear();
                }
                continue;
            }
            let digits: String = line.chars().take_while(char::is_ascii_digit).collect();
            if !digits.is_empty()
                && !top.is_empty()
                && line[digits.len()..].starts_with(". ")
                && let Ok(n) = digits.parse()
            {
                out.items.entry(top.clone()).or_default().insert(n);
            }
        }
        out
    }

    /// Whether `id` (`"5"`, `"2.10"`) names a section, or, as in "§5.9", item 9 of section 5.
    fn has(&self, id: &str) -> bool {
        self.ids.contains(id)
            || id.split_once('.').is_some_and(|(top, item)| {
                item.parse()
                    .is_ok_and(|n| self.items.get(top).is_some_and(|i| i.contains(&n)))
            })
    }
}

/// One parsed `§` reference: the section ids it names and the item numbers, if any.
#[derive(Debug, PartialEq)]
struct Reference {
    sections: Vec<String>,
    items: Vec<u32>,
}

/// A section number such as `2` or `2.10` at the start of `s`, and the rest.
fn section_number(s: &str) -> Option<(String, &str)> {
    let mut end = 0;
    let bytes = s.as_bytes();
    while end < bytes.len()
        && (bytes[end].is_ascii_digit()
            || (bytes[end] == b'.' && bytes.get(end + 1).is_some_and(u8::is_ascii_digit)))
    {
        end += 1;
    }
    (end > 0 && bytes[0].is_ascii_digit()).then(|| (s[..end].to_owned(), &s[end..]))
}

/// Parses what follows a `§`: `5`, `2.10`, `8–9`, `2.5–2.11`, `5 item 9`, `5 items 1–3`,
/// `5 items 1, 5, 9`.
fn parse_reference(after: &str) -> Option<Reference> {
    let (first, mut rest) = section_number(after.trim_start())?;
    let mut sections = vec![first];
    if let Some(r) = rest.strip_prefix('–').or_else(|| rest.strip_prefix('-'))
        && let Some((last, r)) = section_number(r)
    {
        sections.push(last);
        rest = r;
    }
    let mut items = Vec::new();
    let rest = rest.trim_start();
    if let Some(list) = rest
        .strip_prefix("items ")
        .or_else(|| rest.strip_prefix("item "))
    {
        let mut list = list;
        loop {
            let digits: String = list.chars().take_while(char::is_ascii_digit).collect();
            let Ok(n) = digits.parse() else { break };
            items.push(n);
            list = &list[digits.len()..];
            if let Some(r) = list.strip_prefix('–').or_else(|| list.strip_prefix('-')) {
                list = r;
            } else if let Some(r) = list.strip_prefix(", ") {
                list = r;
            } else {
                break;
            }
        }
    }
    Some(Reference { sections, items })
}

/// The document a `§` at byte `at` of `text` refers to: the nearest of the words "spec" and
/// "compat" in the 400 bytes before it.
fn document_before(text: &str, at: usize) -> Option<&'static str> {
    let mut start = at.saturating_sub(400);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let window = text[start..at].to_ascii_lowercase();
    let is_word_char = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    let mut best: Option<(usize, &'static str)> = None;
    for (word, doc) in [("spec", "spec"), ("compat", "compat")] {
        for (i, _) in window.match_indices(word) {
            let before = window[..i].chars().next_back();
            let after = window[i + word.len()..].chars().next();
            if !is_word_char(before) && !is_word_char(after) && best.is_none_or(|(b, _)| i > b) {
                best = Some((i, doc));
            }
        }
    }
    best.map(|(_, doc)| doc)
}

/// Every unresolvable `§` reference of one file's text, as `line: problem`.
fn reference_problems(text: &str, spec: &Sections, compat: &Sections) -> Vec<String> {
    let mut bad = Vec::new();
    for (at, _) in text.match_indices('§') {
        let line = text[..at].matches('\n').count() + 1;
        let after = &text[at + '§'.len_utf8()..];
        let shown: String = after
            .chars()
            .take_while(|c| !c.is_whitespace())
            .take(12)
            .collect();
        // "§N" is the placeholder of the notes that explain the notation.
        if after.starts_with('N') && !after[1..].starts_with(char::is_alphanumeric) {
            continue;
        }
        let Some(reference) = parse_reference(after) else {
            bad.push(format!("{line}: `§{shown}` has no section number"));
            continue;
        };
        let Some(doc) = document_before(text, at) else {
            bad.push(format!(
                "{line}: `§{shown}` does not say which document (write \"spec §N\" or \"compat §N\")"
            ));
            continue;
        };
        let sections = if doc == "spec" { spec } else { compat };
        for id in &reference.sections {
            if !sections.has(id) {
                bad.push(format!(
                    "{line}: {doc} §{id} does not exist in docs/{doc}.md"
                ));
            }
        }
        let top = reference.sections[0].split('.').next().unwrap_or_default();
        for item in &reference.items {
            if !sections.items.get(top).is_some_and(|i| i.contains(item)) {
                bad.push(format!(
                    "{line}: {doc} §{top} item {item} does not exist in docs/{doc}.md"
                ));
            }
        }
    }
    bad
}

/// Mentions of a tracker issue ("issue 3", "issue #3", `issue "Layout"`) in one file's text.
fn issue_mentions(text: &str) -> Vec<usize> {
    let lower = text.to_ascii_lowercase();
    let mut lines = Vec::new();
    for (at, _) in lower.match_indices("issue") {
        let before = lower[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric()) {
            continue;
        }
        // The word may continue on the next comment line: skip spaces, newlines and comment
        // markers.
        let rest = lower[at + "issue".len()..]
            .trim_start_matches(|c: char| c.is_whitespace() || c == '/' || c == '!' || c == '*');
        if rest.starts_with('#')
            || rest.starts_with('"')
            || rest.chars().next().is_some_and(|c| c.is_ascii_digit())
        {
            lines.push(lower[..at].matches('\n').count() + 1);
        }
    }
    lines
}

#[cfg(test)]
fn documentation_files() -> Vec<std::path::PathBuf> {
    let root = crate::project_root();
    let mut files = Vec::new();
    crate::tidy::walk(&root, &mut files).unwrap();
    files.retain(|p| {
        let rel = p.strip_prefix(&root).unwrap_or(p);
        let data = rel.components().any(|c| {
            ["test_data", "testdata", "sample", "schema"]
                .iter()
                .any(|d| c.as_os_str() == *d)
        });
        let text = p
            .extension()
            .is_some_and(|e| ["rs", "md", "toml"].iter().any(|x| e == *x))
            || rel == Path::new(".ci/run");
        text && !data
    });
    // This checker's own tests hold bad references on purpose.
    files.retain(|p| !p.ends_with("xtask/src/refs.rs"));
    assert!(files.len() > 20, "found only {} files", files.len());
    files
}

#[cfg(test)]
fn rel(path: &Path) -> String {
    path.strip_prefix(crate::project_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn section_references_resolve_in_docs() {
    let root = crate::project_root();
    let spec = Sections::parse(&std::fs::read_to_string(root.join("docs/spec.md")).unwrap());
    let compat = Sections::parse(&std::fs::read_to_string(root.join("docs/compat.md")).unwrap());
    assert!(spec.has("3.1") && spec.has("9"), "{spec:?}");
    assert!(compat.has("2.14") && compat.has("5.19"), "{compat:?}");
    let mut bad = Vec::new();
    let mut seen = 0;
    for p in documentation_files() {
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        seen += text.matches('§').count();
        bad.extend(
            reference_problems(&text, &spec, &compat)
                .into_iter()
                .map(|b| format!("{}:{b}", rel(&p))),
        );
    }
    assert!(seen > 80, "only {seen} references found");
    assert!(bad.is_empty(), "unresolved references:\n{}", bad.join("\n"));
}

#[test]
fn nothing_points_outside_the_repository_or_at_the_tracker() {
    // Spelled in pieces so that this file does not match itself.
    let outside = [
        concat!("../", "shared"),
        concat!("session-store", ".md"),
        concat!("compat-notes", ".md"),
    ];
    let mut bad = Vec::new();
    for p in documentation_files() {
        let r = rel(&p);
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        for needle in outside {
            // CI checks that nothing of that name exists beside a fresh clone.
            if text.contains(needle) && r != ".ci/run" {
                bad.push(format!("{r}: mentions `{needle}`"));
            }
        }
        for line in issue_mentions(&text) {
            bad.push(format!("{r}:{line}: names a tracker issue"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_reference_rules_catch_bad_references() {
    let spec = Sections::parse("# t\n## 1. A\n## 3. B\n### 3.1 C\n```\n## 7. fenced\n```\n");
    let compat =
        Sections::parse("## 2. X\n### 2.10 Y\n## 5. Gaps\n1. a\n2. b\n9. c\n## Summary\n1. no\n");
    assert!(!spec.has("7"), "headings in code fences do not count");
    assert!(compat.has("5.9") && !compat.has("5.3"));
    assert_eq!(
        compat.items.keys().collect::<Vec<_>>(),
        ["5"],
        "items after an unnumbered heading belong to no section"
    );
    let ok = "spec §3.1, §1; compat notes §2.10 and §5 items 1–2, 9; compat §5.9; spec §1–3; §N";
    assert_eq!(reference_problems(ok, &spec, &compat), Vec::<String>::new());
    let bad = "spec §2\ncompat §5 item 3\nsee §1\ncompat §x\ninspect §1\ncompat §3.1";
    let problems = reference_problems(bad, &spec, &compat);
    assert_eq!(
        problems,
        [
            "1: spec §2 does not exist in docs/spec.md",
            "2: compat §5 item 3 does not exist in docs/compat.md",
            // "see §1" is preceded by "compat" on line 2, which has no section 1.
            "3: compat §1 does not exist in docs/compat.md",
            "4: `§x` has no section number",
            "5: compat §1 does not exist in docs/compat.md",
            "6: compat §3.1 does not exist in docs/compat.md",
        ]
    );
    assert_eq!(
        reference_problems("as said in §2", &spec, &compat),
        ["1: `§2` does not say which document (write \"spec §N\" or \"compat §N\")"]
    );
    assert_eq!(
        parse_reference(" 5 items 1, 5, 9)."),
        Some(Reference {
            sections: vec!["5".into()],
            items: vec![1, 5, 9]
        })
    );
    assert_eq!(
        parse_reference("2.5–2.11, §5)"),
        Some(Reference {
            sections: vec!["2.5".into(), "2.11".into()],
            items: vec![]
        })
    );
}

#[test]
fn the_issue_rule_catches_tracker_numbers() {
    let text =
        "a\n// see issue 3\n// (issue\n// #12)\nissue \"Layout\"\nno issues here; tissue 3\n";
    assert_eq!(issue_mentions(text), [2, 3, 5]);
}

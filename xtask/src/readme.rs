//! Checks of the READMEs and other Markdown documents, run by `cargo test`.
//!
//! * Every ` ```rust ` block in a README is the body of an example file (from its first `use`
//!   line to the end), linked just before the block, so that it is compiled by `cargo test`
//!   (which builds examples) and cannot drift from it.
//! * Each publishable crate's README opens with such an example and follows it with a
//!   "Guarantees" section; it links only to files inside its package and to docs.rs, so that
//!   every link works on crates.io and docs.rs.
//! * Every relative link in every Markdown document resolves to a file of the repository (and,
//!   with an anchor, to a heading of it); the only web links allowed are docs.rs and crates.io.

use std::path::{Component, Path, PathBuf};

/// A fenced code block: its info string (`rust`, `sh`, …), 1-based opening line and content
/// (lines joined with `\n`, each ending in `\n`).
#[derive(Debug, PartialEq)]
struct Block {
    info: String,
    line: usize,
    content: String,
}

/// A Markdown part of a document, in order: a heading (`## Title`), a link target, or a block.
#[derive(Debug, PartialEq)]
enum Part {
    /// `level`, text, 1-based line.
    Heading(usize, String, usize),
    /// Target as written, 1-based line.
    Link(String, usize),
    Block(Block),
}

/// The headings, inline links and fenced blocks of a Markdown text, in order.
fn parts(text: &str) -> Vec<Part> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if let Some(block) = open.as_mut() {
            if line.trim_start().starts_with("```") {
                out.extend(open.take().map(Part::Block));
            } else {
                block.content.push_str(line);
                block.content.push('\n');
            }
            continue;
        }
        if let Some(info) = line.trim_start().strip_prefix("```") {
            open = Some(Block {
                info: info.trim().to_owned(),
                line: n,
                content: String::new(),
            });
            continue;
        }
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if hashes > 0 && line[hashes..].starts_with(' ') {
            out.push(Part::Heading(
                hashes,
                line[hashes + 1..].trim().to_owned(),
                n,
            ));
            continue;
        }
        // Inline links `[text](target)`, outside inline code spans.
        let mut in_code = false;
        let bytes = line.as_bytes();
        let mut j = 0;
        while j < bytes.len() {
            match bytes[j] {
                b'`' => in_code = !in_code,
                b']' if !in_code && bytes.get(j + 1) == Some(&b'(') => {
                    if let Some(end) = line[j + 2..].find(')') {
                        out.push(Part::Link(line[j + 2..j + 2 + end].to_owned(), n));
                        j += 2 + end;
                    }
                }
                _ => {}
            }
            j += 1;
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, punctuation other than `-` and `_`
/// dropped.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The part of an example file a README shows: from its first `use` line to the end.
fn example_body(text: &str) -> Option<&str> {
    let start = if text.starts_with("use ") {
        0
    } else {
        text.find("\nuse ")? + 1
    };
    Some(&text[start..])
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if matches!(
                    out.components().next_back(),
                    None | Some(Component::ParentDir)
                ) {
                    out.push("..");
                } else {
                    out.pop();
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Web links allowed in documents: the API documentation and the registry.
fn allowed_web_link(target: &str) -> bool {
    ["https://docs.rs/", "https://crates.io/"]
        .iter()
        .any(|p| target.starts_with(p))
}

/// Problems with the ` ```rust ` blocks of one README at `readme` (relative to `root`):
/// `read` gives the text of a repository file by relative path.
fn example_problems(
    readme: &Path,
    text: &str,
    read: &dyn Fn(&Path) -> Option<String>,
) -> Vec<String> {
    let dir = readme.parent().unwrap_or(Path::new(""));
    let mut bad = Vec::new();
    let mut last_example: Option<PathBuf> = None;
    for part in parts(text) {
        match part {
            Part::Link(target, _) if target.ends_with(".rs") && target.contains("examples/") => {
                last_example = Some(normalize(&dir.join(&target)));
            }
            Part::Block(block) if block.info == "rust" => {
                let Some(example) = last_example.take() else {
                    bad.push(format!(
                        "{}:{}: a rust block must follow a link to the example file it shows",
                        readme.display(),
                        block.line
                    ));
                    continue;
                };
                let Some(source) = read(&example) else {
                    bad.push(format!(
                        "{}:{}: {} does not exist",
                        readme.display(),
                        block.line,
                        example.display()
                    ));
                    continue;
                };
                if example_body(&source) != Some(block.content.as_str()) {
                    bad.push(format!(
                        "{}:{}: the block differs from {} (from its first `use` line on)",
                        readme.display(),
                        block.line,
                        example.display()
                    ));
                }
            }
            _ => {}
        }
    }
    bad
}

/// Problems with the shape of a publishable crate's README: an example first, then
/// "Guarantees", and links only into the package (`packaged` lists its files) or to docs.rs.
fn crate_readme_problems(name: &str, text: &str, packaged: &[String]) -> Vec<String> {
    let mut bad = Vec::new();
    let all = parts(text);
    let first_block = all.iter().position(|p| matches!(p, Part::Block(_)));
    let first_section = all
        .iter()
        .position(|p| matches!(p, Part::Heading(level, ..) if *level >= 2));
    match (first_block, &all.get(first_block.unwrap_or(0))) {
        (Some(i), Some(Part::Block(b))) if b.info == "rust" => {
            if first_section.is_some_and(|s| s < i) {
                bad.push(format!(
                    "{name}: README has a section before its opening example"
                ));
            }
            let next = all[i..].iter().find_map(|p| match p {
                Part::Heading(level, title, _) if *level >= 2 => Some(title.as_str()),
                _ => None,
            });
            if next != Some("Guarantees") {
                bad.push(format!(
                    "{name}: the section after the opening example is {next:?}, not \"Guarantees\""
                ));
            }
        }
        _ => bad.push(format!("{name}: README does not open with a rust example")),
    }
    let own_docs = format!("https://docs.rs/{name}");
    if !all
        .iter()
        .any(|p| matches!(p, Part::Link(t, _) if t.starts_with(&own_docs)))
    {
        bad.push(format!(
            "{name}: README does not link its API documentation ({own_docs})"
        ));
    }
    for part in &all {
        let Part::Link(target, line) = part else {
            continue;
        };
        if allowed_web_link(target) {
            continue;
        }
        let path = target.split('#').next().unwrap_or_default();
        let path = normalize(Path::new(path));
        let inside = path.components().next() != Some(Component::ParentDir)
            && !path.as_os_str().is_empty()
            && packaged.iter().any(|f| {
                let f = Path::new(f);
                f == path || f.starts_with(&path)
            });
        if !inside {
            bad.push(format!(
                "{name}: README line {line}: `{target}` is not a file of the package or a docs.rs page"
            ));
        }
    }
    bad
}

/// Problems with the links of one Markdown document at `doc` (relative to the repository):
/// `read` gives the text of a repository file or `Some("")` for a directory, `None` when
/// missing.
fn link_problems(doc: &Path, text: &str, read: &dyn Fn(&Path) -> Option<String>) -> Vec<String> {
    let dir = doc.parent().unwrap_or(Path::new(""));
    let mut bad = Vec::new();
    for part in parts(text) {
        let Part::Link(target, line) = part else {
            continue;
        };
        if allowed_web_link(&target) {
            continue;
        }
        if target.contains("://") || target.starts_with("mailto:") {
            bad.push(format!(
                "{}:{line}: `{target}` points outside the repository (only docs.rs and crates.io)",
                doc.display()
            ));
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let resolved = if path.is_empty() {
            doc.to_path_buf()
        } else {
            normalize(&dir.join(path))
        };
        if resolved.components().next() == Some(Component::ParentDir) {
            bad.push(format!(
                "{}:{line}: `{target}` leaves the repository",
                doc.display()
            ));
            continue;
        }
        let Some(linked) = read(&resolved) else {
            bad.push(format!(
                "{}:{line}: `{target}` does not exist",
                doc.display()
            ));
            continue;
        };
        if let Some(anchor) = anchor {
            let found = parts(&linked)
                .iter()
                .any(|p| matches!(p, Part::Heading(_, title, _) if slug(title) == anchor));
            if !found {
                bad.push(format!(
                    "{}:{line}: `{target}`: no heading with that anchor",
                    doc.display()
                ));
            }
        }
    }
    bad
}

#[cfg(test)]
fn read_repo_file(rel: &Path) -> Option<String> {
    let path = crate::project_root().join(rel);
    if path.is_dir() {
        Some(String::new())
    } else {
        // A binary file (an image a README shows) exists but has no text to look into.
        std::fs::read(path)
            .ok()
            .map(|bytes| String::from_utf8(bytes).unwrap_or_default())
    }
}

#[test]
fn readme_rust_blocks_are_compiled_examples() {
    let mut readmes = vec![PathBuf::from("README.md")];
    readmes.extend(
        crate::publish::PUBLISHABLE
            .iter()
            .map(|c| Path::new("crates").join(c).join("README.md")),
    );
    let mut bad = Vec::new();
    let mut blocks = 0;
    for readme in &readmes {
        let text = read_repo_file(readme).unwrap();
        blocks += parts(&text)
            .iter()
            .filter(|p| matches!(p, Part::Block(b) if b.info == "rust"))
            .count();
        bad.extend(example_problems(readme, &text, &read_repo_file));
    }
    assert!(blocks >= readmes.len(), "only {blocks} rust blocks");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn crate_readmes_open_with_an_example_and_link_inside_their_package() {
    let mut bad = Vec::new();
    for name in crate::publish::PUBLISHABLE {
        let text =
            read_repo_file(&Path::new("crates").join(name).join("README.md")).unwrap_or_default();
        let packaged = crate::publish::package_files(name);
        bad.extend(crate_readme_problems(name, &text, &packaged));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn markdown_links_resolve_inside_the_repository() {
    let root = crate::project_root();
    let mut files = Vec::new();
    crate::tidy::walk(&root, &mut files).unwrap();
    files.retain(|p| p.extension().is_some_and(|e| e == "md"));
    assert!(files.len() > 8, "{files:?}");
    let mut bad = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&root).unwrap_or(&file).to_path_buf();
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        bad.extend(link_problems(&rel, &text, &read_repo_file));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_readme_rules_catch_bad_readmes() {
    let files = |p: &Path| match p.to_str() {
        Some("crates/c/examples/a.rs") => {
            Some("//! Doc.\n\nuse c::x;\n\nfn main() {}\n".to_owned())
        }
        Some("docs/d.md") => Some("# D\n\n## Some `code`, here\n".to_owned()),
        Some("crates") => Some(String::new()),
        _ => None,
    };
    let readme = Path::new("crates/c/README.md");
    let good = "# c\n\n[`examples/a.rs`](examples/a.rs):\n\n```rust\nuse c::x;\n\nfn main() {}\n```\n\n## Guarantees\n\n[API](https://docs.rs/c)\n";
    assert_eq!(example_problems(readme, good, &files), Vec::<String>::new());
    let packaged = ["README.md".to_owned(), "examples/a.rs".to_owned()];
    assert_eq!(
        crate_readme_problems("c", good, &packaged),
        Vec::<String>::new()
    );
    let drifted = good.replace("fn main() {}\n```", "fn main() { }\n```");
    assert_eq!(example_problems(readme, &drifted, &files).len(), 1);
    let unlinked = good.replace("[`examples/a.rs`](examples/a.rs)", "An example");
    assert_eq!(example_problems(readme, &unlinked, &files).len(), 1);

    let late = good.replace("# c\n\n", "# c\n\n## Intro\n\n");
    assert_eq!(crate_readme_problems("c", &late, &packaged).len(), 1);
    let outside = format!("{good}\n[format](../../docs/format.md) [tests](tests/x.rs)\n");
    assert_eq!(crate_readme_problems("c", &outside, &packaged).len(), 2);
    let no_guarantees = good.replace("## Guarantees", "## Details");
    assert_eq!(
        crate_readme_problems("c", &no_guarantees, &packaged).len(),
        1
    );

    let doc = Path::new("docs/x.md");
    let links = "[a](d.md#some-code-here) [b](d.md#nope) [c](../crates) [d](../../x) [e](https://example.com/) [f](https://docs.rs/c) `[g](nowhere)`";
    assert_eq!(
        link_problems(doc, links, &files),
        [
            "docs/x.md:1: `d.md#nope`: no heading with that anchor",
            "docs/x.md:1: `../../x` leaves the repository",
            "docs/x.md:1: `https://example.com/` points outside the repository (only docs.rs and crates.io)",
        ]
    );
}

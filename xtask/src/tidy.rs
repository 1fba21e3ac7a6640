//! Tidy checks over the source tree, run by `cargo test`.

use std::path::{Path, PathBuf};

/// Every file below `dir`, skipping build output and VCS metadata.
pub(crate) fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if entry.file_type()?.is_dir() {
            if name == ".git" || name == "target" || name.starts_with("target-") {
                continue;
            }
            walk(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
fn rust_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    walk(&crate::project_root(), &mut files).unwrap();
    files.retain(|p| p.extension().is_some_and(|e| e == "rs"));
    files.retain(|p| !p.components().any(|c| c.as_os_str() == "test_data"));
    assert!(files.len() > 10, "found only {} Rust files", files.len());
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
fn every_rust_file_starts_with_a_module_doc() {
    let bad: Vec<String> = rust_files()
        .into_iter()
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .map(|p| rel(&p))
        .collect();
    assert!(bad.is_empty(), "files without a `//!` module doc: {bad:#?}");
}

#[test]
fn no_ignored_or_should_panic_tests() {
    let needles = [concat!("#[", "ignore"), concat!("#[", "should_panic")];
    let mut bad = Vec::new();
    for p in rust_files() {
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        for (i, line) in text.lines().enumerate() {
            if needles.iter().any(|n| line.trim_start().starts_with(n)) {
                bad.push(format!("{}:{}", rel(&p), i + 1));
            }
        }
    }
    assert!(bad.is_empty(), "ignored or should_panic tests: {bad:#?}");
}

#[test]
fn no_trailing_whitespace_outside_test_data() {
    let mut files = Vec::new();
    walk(&crate::project_root(), &mut files).unwrap();
    let mut bad = Vec::new();
    for p in files {
        let is_text = p
            .extension()
            .is_some_and(|e| ["rs", "md", "toml", "yml", "sh"].iter().any(|x| e == *x))
            || p.file_name().is_some_and(|n| n == "run");
        if !is_text
            || p.components().any(|c| {
                ["test_data", "testdata", "sample"]
                    .iter()
                    .any(|d| c.as_os_str() == *d)
            })
        {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        for (i, line) in text.lines().enumerate() {
            if line.ends_with(' ') || line.ends_with('\t') {
                bad.push(format!("{}:{}", rel(&p), i + 1));
            }
        }
    }
    assert!(bad.is_empty(), "trailing whitespace: {bad:#?}");
}

/// Library crates never print; only session-cli (and benches, examples, tests) may.
#[test]
fn library_crates_never_print() {
    let libs = [
        "session-schema",
        "session-jsonl",
        "session-state",
        "session-replay",
        "session-storage",
        "session-pg",
    ];
    let needles = ["println!", "eprintln!", "print!(", "eprint!(", "dbg!("];
    let mut bad = Vec::new();
    for p in rust_files() {
        let r = rel(&p);
        let in_lib_src = libs
            .iter()
            .any(|l| r.starts_with(&format!("crates/{l}/src/")));
        if !in_lib_src {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        // Unit-test modules at the end of a file may print.
        let body = text.split("#[cfg(test)]").next().unwrap_or("");
        for (i, line) in body.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if needles.iter().any(|n| code.contains(n)) {
                bad.push(format!("{r}:{}", i + 1));
            }
        }
    }
    assert!(bad.is_empty(), "library code that prints: {bad:#?}");
}

/// The replay core is pure: only its `io` module touches files or the state database.
#[test]
fn replay_core_does_no_io() {
    let needles = [
        "std::fs",
        "fs::",
        "File::",
        "rusqlite",
        "session_state::",
        "session_jsonl::",
    ];
    let mut bad = Vec::new();
    for p in rust_files() {
        let r = rel(&p);
        if !r.starts_with("crates/session-replay/src/") {
            continue;
        }
        if r.ends_with("/io.rs") || r.contains("/io/") || r.ends_with("/lib.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        let body = text.split("#[cfg(test)]").next().unwrap_or("");
        for (i, line) in body.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if needles.iter().any(|n| code.contains(n)) {
                bad.push(format!("{r}:{}", i + 1));
            }
        }
    }
    assert!(bad.is_empty(), "I/O in the pure replay core: {bad:#?}");
}

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

/// The workspace denies `unsafe_code`; the one place allowed to lift it is the writeback hint
/// of session-state's `fsutil.rs` (one `sync_file_range` call that `rustix` does not offer).
#[test]
fn unsafe_code_is_allowed_in_one_place_only() {
    let allowed = "crates/session-state/src/fsutil.rs";
    let mut found = Vec::new();
    for p in rust_files() {
        let r = rel(&p);
        let code = code_only(&std::fs::read_to_string(&p).unwrap_or_default());
        for (i, line) in code.lines().enumerate() {
            let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
            if compact.contains("allow(unsafe_code") {
                found.push((r.clone(), i + 1));
            }
        }
    }
    let elsewhere: Vec<_> = found.iter().filter(|(r, _)| r != allowed).collect();
    assert!(
        elsewhere.is_empty(),
        "`unsafe_code` allowed at {elsewhere:#?}"
    );
    assert_eq!(found.len(), 1, "{found:#?}");
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

/// `text` with comments and the contents of string and character literals replaced by spaces
/// (line breaks kept), so that patterns are looked for in code only.
#[cfg(test)]
pub(crate) fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        let next = b.get(i + 1).copied();
        let after_ident = i > 0
            && b.get(i - 1)
                .is_some_and(|p| p.is_alphanumeric() || *p == '_');
        if c == '/' && next == Some('/') {
            while let Some(&c) = b.get(i).filter(|c| **c != '\n') {
                out.push(blank(c));
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while let Some(&c) = b.get(i) {
                let n = b.get(i + 1).copied();
                if c == '/' && n == Some('*') {
                    depth += 1;
                } else if c == '*' && n == Some('/') {
                    depth -= 1;
                } else {
                    out.push(blank(c));
                    i += 1;
                    continue;
                }
                out.push_str("  ");
                i += 2;
                if depth == 0 {
                    break;
                }
            }
        } else if !after_ident && (c == 'r' || (c == 'b' && next == Some('r'))) && {
            let mut j = i + if c == 'b' { 2 } else { 1 };
            while b.get(j) == Some(&'#') {
                j += 1;
            }
            b.get(j) == Some(&'"')
        } {
            // A raw string: `r"…"`, `r#"…"#`, `br"…"`.
            while let Some(&c) = b.get(i).filter(|c| **c != '"') {
                out.push(c);
                i += 1;
            }
            let hashes = out.chars().rev().take_while(|c| *c == '#').count();
            out.push('"');
            i += 1;
            while let Some(&c) = b.get(i) {
                if c == '"' && (1..=hashes).all(|h| b.get(i + h) == Some(&'#')) {
                    out.push('"');
                    out.push_str(&"#".repeat(hashes));
                    i += 1 + hashes;
                    break;
                }
                out.push(blank(c));
                i += 1;
            }
        } else if c == '"' {
            out.push('"');
            i += 1;
            while let Some(&c) = b.get(i) {
                i += 1;
                match c {
                    '\\' => {
                        out.push(' ');
                        if let Some(&e) = b.get(i) {
                            out.push(blank(e));
                            i += 1;
                        }
                    }
                    '"' => {
                        out.push('"');
                        break;
                    }
                    c => out.push(blank(c)),
                }
            }
        } else if c == '\'' && next == Some('\\') {
            // An escaped character literal: `'\n'`, `'\''`, `'\u{1b}'`.
            let mut j = i + 3;
            while b.get(j).is_some_and(|c| *c != '\'') {
                j += 1;
            }
            out.push('\'');
            out.push_str(&" ".repeat(j.saturating_sub(i + 1)));
            out.push('\'');
            i = j + 1;
        } else if c == '\'' && b.get(i + 2) == Some(&'\'') {
            out.push_str("' '");
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `code` (from [`code_only`]) with every `#[cfg(test)]` item blanked: up to the first `;`
/// outside braces, or to the brace that closes its body.
#[cfg(test)]
pub(crate) fn without_test_items(code: &str) -> String {
    const ATTR: &str = "#[cfg(test)]";
    let mut bytes = code.as_bytes().to_vec();
    let mut from = 0;
    while let Some(at) = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|s| s.get(from..))
        .and_then(|s| s.find(ATTR))
        .map(|k| k + from)
    {
        let mut depth = 0usize;
        let mut end = bytes.len();
        for (k, b) in bytes.iter().enumerate().skip(at + ATTR.len()) {
            match b {
                b';' if depth == 0 => {
                    end = k + 1;
                    break;
                }
                b'{' => depth += 1,
                b'}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        for b in bytes.get_mut(at..end).into_iter().flatten() {
            if *b != b'\n' {
                *b = b' ';
            }
        }
        from = end;
    }
    String::from_utf8(bytes).unwrap_or_default()
}

#[test]
fn code_only_blanks_comments_strings_and_test_items() {
    let src = "let a = \"x.unwrap()\"; // panic!(\n/* todo!() /* nested */ */ let c = '\\'';\nlet r = r#\"expect(\"#; let l: &'static str = s;\n#[cfg(test)]\nmod tests { fn f() { x.unwrap(); } }\nfn g() { y.unwrap() }\n";
    let code = without_test_items(&code_only(src));
    assert_eq!(code.lines().count(), src.lines().count());
    assert!(!code.contains("x.unwrap"), "{code}");
    assert!(!code.contains("panic!"), "{code}");
    assert!(!code.contains("todo!"), "{code}");
    assert!(!code.contains("expect("), "{code}");
    assert!(code.contains("&'static str"), "{code}");
    assert!(code.contains("fn g() { y.unwrap() }"), "{code}");
}

/// The library crates, whose non-test code reads stored data.
#[cfg(test)]
const LIBRARY_CRATES: [&str; 4] = [
    "session-schema",
    "session-jsonl",
    "session-state",
    "session-replay",
];

/// Provably safe uses of the patterns [`library_code_never_panics_on_stored_data`] rejects:
/// `(file, the line's trimmed code, why it cannot panic)`. Keep it small; an entry that no
/// longer matches fails the test.
#[cfg(test)]
const PANIC_ALLOWED: &[(&str, &str, &str)] = &[];

/// No `unwrap`/`expect`/panicking macro outside `#[cfg(test)]` code in the library crates:
/// they read stored data (run logs, message logs, `state.db`, snapshots written by other
/// programs, crashes and full disks), and bad data must give a typed error or a damage report,
/// never a panic. Truncating `as` casts are caught by clippy (see
/// [`library_crates_keep_the_cast_lints_on`]); indexing is left to review and the property
/// tests (cutting at every byte offset, garbage input), since every index would need an
/// exception here. `debug_assert!` states internal invariants and stays allowed.
#[test]
fn library_code_never_panics_on_stored_data() {
    let needles = [
        ".unwrap()",
        ".expect(",
        ".unwrap_err()",
        ".expect_err(",
        ".unwrap_unchecked(",
        "panic!(",
        "unreachable!(",
        "todo!(",
        "unimplemented!(",
        "assert!(",
        "assert_eq!(",
        "assert_ne!(",
    ];
    let mut bad = Vec::new();
    let mut used = vec![false; PANIC_ALLOWED.len()];
    for p in rust_files() {
        let r = rel(&p);
        if !LIBRARY_CRATES
            .iter()
            .any(|l| r.starts_with(&format!("crates/{l}/src/")))
        {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        let code = without_test_items(&code_only(&text));
        for (i, line) in code.lines().enumerate() {
            let Some(needle) = needles.iter().find(|n| {
                line.match_indices(*n).any(|(at, _)| {
                    // `my_panic!(` is not `panic!(`.
                    n.starts_with('.')
                        || !line[..at]
                            .chars()
                            .next_back()
                            .is_some_and(|c| c.is_alphanumeric() || c == '_')
                })
            }) else {
                continue;
            };
            let allowed = PANIC_ALLOWED
                .iter()
                .position(|(f, l, _)| *f == r && *l == line.trim());
            match allowed {
                Some(k) => used[k] = true,
                None => bad.push(format!("{r}:{}: `{needle}` in `{}`", i + 1, line.trim())),
            }
        }
    }
    assert!(
        bad.is_empty(),
        "panicking code on stored-data paths (return an error or a damage report instead, or \
         add a provably safe case to PANIC_ALLOWED with its reason): {bad:#?}"
    );
    let stale: Vec<_> = PANIC_ALLOWED
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(e, _)| e)
        .collect();
    assert!(
        stale.is_empty(),
        "PANIC_ALLOWED entries that match nothing: {stale:#?}"
    );
}

/// Every library crate turns on clippy's cast lints for its non-test code, so an `as` cast
/// that truncates, wraps or drops the sign of a stored number fails `cargo clippy -D warnings`.
#[test]
fn library_crates_keep_the_cast_lints_on() {
    let lints = [
        "clippy::cast_possible_truncation",
        "clippy::cast_sign_loss",
        "clippy::cast_possible_wrap",
    ];
    let mut bad = Vec::new();
    for l in LIBRARY_CRATES {
        let path = crate::project_root().join(format!("crates/{l}/src/lib.rs"));
        let code = code_only(&std::fs::read_to_string(&path).unwrap_or_default());
        let attr = code
            .find("#![cfg_attr(")
            .and_then(|at| code.get(at..))
            .and_then(|rest| rest.find(")]").and_then(|end| rest.get(..end)))
            .unwrap_or("");
        let compact: String = attr.chars().filter(|c| !c.is_whitespace()).collect();
        if !compact.starts_with("#![cfg_attr(not(test),warn(")
            || !lints.iter().all(|lint| compact.contains(lint))
        {
            bad.push(l);
        }
    }
    assert!(
        bad.is_empty(),
        "library crates without `#![cfg_attr(not(test), warn({}))]` in lib.rs: {bad:?}",
        lints.join(", ")
    );
}

/// Only `lib.rs` of session-cli touches the process's stdout and stderr; every command writes
/// through `Ctx`, whose streams pass through `human::TerminalSafe` (control characters from
/// stored text never reach a terminal).
#[test]
fn cli_output_goes_through_the_terminal_safe_writer() {
    let needles = [
        "io::stdout()",
        "io::stderr()",
        "stdout().lock",
        "stderr().lock",
    ];
    let mut bad = Vec::new();
    for p in rust_files() {
        let r = rel(&p);
        if !r.starts_with("crates/session-cli/src/") || r == "crates/session-cli/src/lib.rs" {
            continue;
        }
        let code = code_only(&std::fs::read_to_string(&p).unwrap_or_default());
        for (i, line) in code.lines().enumerate() {
            if needles.iter().any(|n| line.contains(n)) {
                bad.push(format!("{r}:{}", i + 1));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "process streams used outside lib.rs: {bad:#?}"
    );
}

/// Lines of `code` that read a SQLite column with a typed conversion (`row.get::<_, String>`,
/// `r.get(0)`, `get_unwrap`, `get_ref`, a `FromSql` impl): such a read fails (or panics) on a
/// value of another storage class or on text that is not UTF-8, which the reference writes.
#[cfg(test)]
fn typed_column_reads(code: &str) -> Vec<usize> {
    // Receivers that name a row or a function context in this crate's code.
    const ROWS: [&str; 3] = ["r", "row", "ctx"];
    let mut bad = Vec::new();
    for (i, line) in code.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let anywhere = [
            "get_unwrap(",
            "get_ref(",
            "get_ref_unwrap(",
            "FromSql",
            ".get::<",
        ]
        .iter()
        .any(|n| code.contains(n));
        let on_row = code.match_indices(".get(").any(|(at, _)| {
            let before = &code[..at];
            let ident_start = before
                .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map_or(0, |p| p + 1);
            ROWS.contains(&&before[ident_start..])
        });
        if anywhere || on_row {
            bad.push(i + 1);
        }
    }
    bad
}

/// Every column of `state.db` is read through `crates/session-state/src/column.rs`, which looks
/// at the raw value and reports what does not fit as damage; typed reads elsewhere in
/// session-state's code are refused.
#[test]
fn state_db_columns_are_read_only_through_the_column_module() {
    let mut bad = Vec::new();
    for p in rust_files() {
        let r = rel(&p);
        if !r.starts_with("crates/session-state/src/") || r.ends_with("/column.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        // Unit-test modules at the end of a file may read what they wrote.
        let body = text.split("#[cfg(test)]").next().unwrap_or("");
        bad.extend(
            typed_column_reads(body)
                .into_iter()
                .map(|l| format!("{r}:{l}")),
        );
    }
    assert!(
        bad.is_empty(),
        "typed state.db column reads outside column.rs (use column::Cols): {bad:#?}"
    );
}

#[test]
fn typed_column_reads_are_recognised() {
    let code = "let a = r.get::<_, String>(0)?;\n\
                let b: i64 = row.get(1)?;\n\
                query_row(sql, [], |r| r.get(0))\n\
                let c = header.get(\"x\");\n\
                let d = map.get(&k);\n\
                let e = ctx.get_raw(0);\n\
                let f = row.get_ref(2)?;\n\
                impl FromSql for X {}\n\
                let g = r.get_unwrap(3); // typed";
    assert_eq!(typed_column_reads(code), [1, 2, 3, 7, 8, 9]);
}

//! The terminal side of the tool, in-process: the pager (a fake one, given as `SESSIONS_PAGER`,
//! that records what it gets), shell completions, man pages, tables laid out for a terminal of
//! a fixed width and plain output for pipes. `tests/pty.rs` drives the binary in a real
//! pseudo-terminal.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::copy_tree;

use std::path::{Path, PathBuf};

use session_cli::{Env, Terminal, run_with};
use unicode_width::UnicodeWidthStr;

const RUN: &str = "7a1e0001-0000-4000-8000-000000000101";
const LONG_RUN: &str = "7a1e0009-0000-4000-8000-000000000901";

struct Out {
    code: i32,
    out: String,
    err: String,
}

fn sample() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_tree(&session_test_support::sample_sessions_dir(), &root);
    (dir, root)
}

fn tty(columns: usize) -> Terminal {
    Terminal {
        stdout: true,
        stderr: false,
        columns: Some(columns),
        pager: true,
    }
}

fn run(root: &Path, args: &[&str], vars: &[(&str, &str)], term: Terminal) -> Out {
    let mut argv = vec!["sessions".to_owned(), "--root".to_owned()];
    argv.push(root.display().to_string());
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let mut pairs = vec![
        ("HOME".to_owned(), "/nonexistent-home".to_owned()),
        ("SESSIONS_NOW".to_owned(), "2026-11-30T12:00:00Z".to_owned()),
        ("NO_COLOR".to_owned(), "1".to_owned()),
    ];
    pairs.extend(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    let env = Env::from_pairs(pairs);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run_with(
        argv.into_iter().map(Into::into),
        &mut out,
        &mut err,
        &env,
        term,
    );
    Out {
        code,
        out: String::from_utf8(out).unwrap(),
        err: String::from_utf8(err).unwrap(),
    }
}

/// A pager command line that writes what it reads to `file`.
fn recording_pager(file: &Path) -> String {
    format!("cat > '{}'", file.display())
}

#[test]
fn long_output_goes_through_the_pager_on_a_terminal() {
    let (dir, root) = sample();
    let got = dir.path().join("paged.txt");
    let pager = recording_pager(&got);
    let vars = [("SESSIONS_PAGER", pager.as_str())];
    let direct = run(&root, &["show", RUN, "--no-pager"], &vars, tty(80));
    assert_eq!(direct.code, 0, "{}", direct.err);
    assert!(
        direct.out.contains("What does this project do?"),
        "{}",
        direct.out
    );
    assert!(!got.exists(), "--no-pager started the pager");
    for args in [
        &["show", RUN][..],
        &["history", "5a1e0001-0000-4000-8000-000000000001"],
        &["export", RUN, "--format", "md"],
        &["--help"],
        &["runs", "--help"],
    ] {
        let _ = std::fs::remove_file(&got);
        let paged = run(&root, args, &vars, tty(80));
        assert_eq!(paged.code, 0, "{args:?}: {}", paged.err);
        assert_eq!(paged.out, "", "{args:?} wrote to stdout past the pager");
        let text = std::fs::read_to_string(&got).unwrap();
        assert!(!text.is_empty(), "{args:?}");
        if args == ["show", RUN] {
            assert_eq!(text, direct.out);
        }
    }
    assert!(
        std::fs::read_to_string(&got)
            .unwrap()
            .contains("Usage: sessions runs")
    );
}

#[test]
fn short_output_pipes_files_and_no_pager_choices_write_straight_to_stdout() {
    let (dir, root) = sample();
    let got = dir.path().join("paged.txt");
    let pager = recording_pager(&got);
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, Terminal);
    let cases: Vec<Case<'_>> = vec![
        // Listings are not paged.
        (vec!["runs"], vec![("SESSIONS_PAGER", &pager)], tty(80)),
        // Not a terminal.
        (
            vec!["show", RUN],
            vec![("SESSIONS_PAGER", &pager)],
            Terminal::default(),
        ),
        // Empty or `cat`: no pager; an empty SESSIONS_PAGER also hides PAGER.
        (
            vec!["show", RUN],
            vec![("SESSIONS_PAGER", ""), ("PAGER", &pager)],
            tty(80),
        ),
        (vec!["show", RUN], vec![("PAGER", "cat")], tty(80)),
        (
            vec!["--no-pager", "--help"],
            vec![("PAGER", &pager)],
            tty(80),
        ),
        // An export to a file is not output to page.
        (
            vec!["export", RUN, "--format", "md", "-o"],
            vec![("PAGER", &pager)],
            tty(80),
        ),
    ];
    for (mut args, vars, term) in cases {
        let file = dir.path().join("export.md");
        let file_arg = file.display().to_string();
        if args.last() == Some(&"-o") {
            args.push(&file_arg);
        }
        let r = run(&root, &args, &vars, term);
        assert_eq!(r.code, 0, "{args:?}: {}", r.err);
        assert!(!got.exists(), "{args:?} {vars:?} started the pager");
        if !args.contains(&"-o") {
            assert!(!r.out.is_empty(), "{args:?}");
        }
    }
}

/// A copy of a sample run whose first input is 300 KiB of text (more than a pipe holds).
fn plant_long_run(root: &Path) {
    let day = root.join("2026/11/24");
    let text = std::fs::read_to_string(day.join(format!("{RUN}.jsonl"))).unwrap();
    let long = "All work and no play makes Jack a dull boy. ".repeat(7000);
    let text = text
        .replace(RUN, LONG_RUN)
        .replace("What does this project do? One sentence, please.", &long);
    std::fs::write(day.join(format!("{LONG_RUN}.jsonl")), text).unwrap();
}

#[cfg(unix)]
#[test]
fn quitting_the_pager_early_ends_the_command_quietly() {
    let (dir, root) = sample();
    plant_long_run(&root);
    let got = dir.path().join("head.txt");
    // A reader that looks at the first 100 bytes and quits, as `q` in less does.
    let pager = format!("head -c 100 > '{}'", got.display());
    let r = run(
        &root,
        &["show", LONG_RUN],
        &[("SESSIONS_PAGER", &pager)],
        tty(80),
    );
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(r.err, "", "a broken pipe was reported");
    assert_eq!(r.out, "");
    assert_eq!(std::fs::read(&got).unwrap().len(), 100);
}

/// Every subcommand of `sessions`.
const SUBCOMMANDS: [&str; 25] = [
    "where",
    "runs",
    "sessions",
    "show",
    "replay",
    "history",
    "tail",
    "verify",
    "repair",
    "stats",
    "export",
    "gc",
    "archive",
    "unarchive",
    "reindex",
    "serve",
    "sync",
    "completions",
    "delete",
    "restore",
    "pin",
    "unpin",
    "name",
    "storage",
    "search",
];

#[test]
fn completions_name_every_command_for_every_shell() {
    let (_dir, root) = sample();
    let subcommands = SUBCOMMANDS;
    for (shell, marker) in [
        ("bash", "complete -F _sessions"),
        ("zsh", "#compdef sessions"),
        ("fish", "complete -c sessions"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let r = run(&root, &["completions", shell], &[], Terminal::default());
        assert_eq!(r.code, 0, "{shell}: {}", r.err);
        assert!(r.out.contains(marker), "{shell}");
        for sub in subcommands {
            assert!(r.out.contains(sub), "{shell} completions miss `{sub}`");
        }
        assert!(r.out.contains("no-pager"), "{shell}");
    }
    // No store is needed (nor HOME to find one).
    let mut out = Vec::new();
    let code = run_with(
        ["sessions", "completions", "fish"].map(Into::into),
        &mut out,
        &mut Vec::new(),
        &Env::default(),
        Terminal::default(),
    );
    assert_eq!(code, 0);
    assert!(!out.is_empty());
    let r = run(&root, &["completions", "tcsh"], &[], Terminal::default());
    assert_eq!(r.code, 2);
}

#[test]
fn man_pages_cover_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let pages = session_cli::write_man_pages(dir.path()).unwrap();
    let names: Vec<String> = pages
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.first().map(String::as_str), Some("sessions.1"));
    let main = std::fs::read_to_string(dir.path().join("sessions.1")).unwrap();
    assert!(
        main.starts_with(".ie") || main.contains(".TH sessions 1"),
        "{main}"
    );
    for sub in SUBCOMMANDS {
        let page = format!("sessions-{sub}.1");
        assert!(names.contains(&page), "no {page} in {names:?}");
        assert!(main.contains(sub), "sessions.1 does not mention {sub}");
        let text = std::fs::read_to_string(dir.path().join(&page)).unwrap();
        assert!(text.contains("Examples:"), "{page} has no examples");
        assert!(text.contains("sessions "), "{page}");
    }
    assert_eq!(names.len(), SUBCOMMANDS.len() + 1, "{names:?}");
}

/// The display column at which `needle` starts in `line`.
fn column_of(line: &str, needle: &str) -> Option<usize> {
    line.find(needle).map(|i| line[..i].width())
}

#[test]
fn tables_fit_the_terminal_and_align_wide_characters() {
    let (_dir, root) = sample();
    for width in [80usize, 60, 120] {
        let cols = width.to_string();
        for args in [
            &["runs"][..],
            &["sessions", "--all"],
            &["stats"],
            &["stats", "--by", "session"],
            &["storage"],
        ] {
            let r = run(&root, args, &[("COLUMNS", &cols)], tty(200));
            assert_eq!(r.code, 0, "{args:?}: {}", r.err);
            let lines: Vec<&str> = r.out.lines().collect();
            assert!(lines.len() >= 3, "{args:?}: {}", r.out);
            for l in &lines {
                assert!(
                    l.width() <= width,
                    "{args:?} at {width}: {l:?} is {}",
                    l.width()
                );
            }
        }
    }
    // The rows holding この画像は何ですか？ 🤔 line up with the others.
    let r = run(&root, &["sessions", "--all"], &[], tty(100));
    let rows: Vec<&str> = r.out.lines().skip(2).collect();
    let at: Vec<Option<usize>> = rows.iter().map(|l| column_of(l, "/home/dev")).collect();
    let first = at.iter().flatten().next().copied();
    assert!(first.is_some(), "{}", r.out);
    for (row, col) in rows.iter().zip(&at) {
        if row.ends_with(" -") {
            continue;
        }
        assert_eq!(*col, first, "misaligned: {row:?}\n{}", r.out);
    }
    assert!(r.out.contains("この画像は何ですか？ 🤔"), "{}", r.out);
    // A row per run, never wrapped, on the narrowest width too.
    let r = run(&root, &["runs"], &[("COLUMNS", "20")], tty(200));
    assert_eq!(r.out.lines().count(), 11, "{}", r.out);
}

#[test]
fn piped_tables_are_plain_rows_and_hints_go_to_stderr() {
    let (_dir, root) = sample();
    let r = run(
        &root,
        &["runs", "--limit", "3", "--utc"],
        &[],
        Terminal::default(),
    );
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(
        r.out,
        "2026-11-29 21:05:00Z\t7a1e0006-0000-4000-8000-000000000601\t5a1e0006-0000-4000-8000-000000000006\tcrashed\tclaude-sonnet-4-5\t1\t2,736\tRun the long build (sleep 20) and tell me when it is done.\n\
         2026-11-28 10:00:00Z\t7a1e0005-0000-4000-8000-000000000501\t5a1e0005-0000-4000-8000-000000000005\tcompleted\tclaude-sonnet-4-5\t1\t172,570\tGive me a detailed overview of the repository structure.\n\
         2026-11-27 17:46:10Z\t7a1e0004-0000-4000-8000-000000000402\t5a1e0004-0000-4000-8000-000000000004\tcancelled\tclaude-sonnet-4-5\t1\t0\tNever mind. What's in src/?\n"
    );
    assert!(r.err.contains("more: sessions runs --cursor"), "{}", r.err);
    let r = run(&root, &["sessions", "--all"], &[], Terminal::default());
    assert!(!r.out.contains("all workspaces"));
    assert_eq!(r.err, "all workspaces\n");
    assert!(
        r.out.lines().all(|l| l.split('\t').count() == 6),
        "{}",
        r.out
    );
}

#[test]
fn colour_follows_the_environment() {
    let (_dir, root) = sample();
    let coloured = |vars: &[(&str, &str)], term: Terminal| {
        let mut argv = vec!["runs", "--limit", "1"];
        argv.push("--utc");
        let mut pairs = vec![
            ("HOME".to_owned(), "/h".to_owned()),
            ("SESSIONS_NOW".to_owned(), "2026-11-30T12:00:00Z".to_owned()),
        ];
        pairs.extend(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        let mut full = vec![
            "sessions".to_owned(),
            "--root".to_owned(),
            root.display().to_string(),
        ];
        full.extend(argv.iter().map(|a| (*a).to_owned()));
        let mut out = Vec::new();
        run_with(
            full.into_iter().map(Into::into),
            &mut out,
            &mut Vec::new(),
            &Env::from_pairs(pairs),
            term,
        );
        String::from_utf8(out).unwrap().contains('\u{1b}')
    };
    assert!(coloured(&[], tty(80)));
    assert!(!coloured(&[("NO_COLOR", "1")], tty(80)));
    assert!(!coloured(&[("CLICOLOR", "0")], tty(80)));
    assert!(!coloured(&[("TERM", "dumb")], tty(80)));
    assert!(!coloured(&[], Terminal::default()));
    assert!(coloured(&[("CLICOLOR_FORCE", "1")], Terminal::default()));
}

#[test]
fn rows_holding_emoji_and_cjk_align_with_the_others() {
    use common::plant::{SessionRow, session};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let messages = [
        "Deploy 🚀 to staging",
        "All tests ✅ green",
        "Careful ⚠️ flaky test",
        "Build ❌ failed twice",
        "Star ⭐ the repo",
        "この画像は何ですか",
        "plain ascii message",
    ];
    let ids: Vec<String> = (0..messages.len())
        .map(|i| format!("5e55{i:04}-0000-4000-8000-000000000000"))
        .collect();
    for (i, (id, msg)) in ids.iter().zip(messages).enumerate() {
        let updated = format!("2026-11-2{i}T10:00:00.000Z");
        session(
            &root,
            &SessionRow {
                session_id: id,
                updated_at: &updated,
                run_id: None,
                last_user_message: Some(msg),
                workspace_root: Some("/home/dev/acme-app"),
                meta_json: None,
                messages: None,
            },
        );
    }
    for width in [120, 80, 60] {
        let r = run(&root, &["sessions", "--all", "--utc"], &[], tty(width));
        assert_eq!(r.code, 0, "{}", r.err);
        let rows: Vec<&str> = r.out.lines().filter(|l| l.contains("5e55")).collect();
        assert_eq!(rows.len(), messages.len(), "{}", r.out);
        let at: Vec<Option<usize>> = rows.iter().map(|l| column_of(l, "acme-app")).collect();
        assert!(at[0].is_some(), "{}", r.out);
        assert!(
            at.iter().all(|c| *c == at[0]),
            "misaligned at {width}:\n{}",
            r.out
        );
        for l in r.out.lines() {
            assert!(l.width() <= width, "{l:?}");
        }
    }
    // Wide enough, every message whole.
    let r = run(&root, &["sessions", "--all"], &[], tty(160));
    for m in messages {
        assert!(r.out.contains(m), "{m}: {}", r.out);
    }
}

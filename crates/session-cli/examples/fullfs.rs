//! The full-disk check behind `cargo xtask fullfs`: on a small file system that is then filled
//! to the last byte, saves fail cleanly and reading commands keep working.
//!
//! ```text
//! cargo run -p session-cli --example fullfs -- <DIR>
//! ```
//!
//! `DIR` must be an empty directory on a file system of a few MiB that nothing else writes to
//! (`cargo xtask fullfs` mounts a tmpfs there). The check copies the sample store into it,
//! fills the file system, then:
//! * saves an append, a rewrite and a new session: each either fails with the OS error in its
//!   cause chain, leaving every `messages/*.jsonl` byte-identical and no temp file behind, or
//!   succeeds completely;
//! * runs `sessions show`, `history`, `runs`, `sessions --all`, `stats` and `verify`: none ends
//!   with a data or I/O error (exit 4), and a warning says when the store was read read-only;
//! * frees the space: the same saves succeed and `load` returns them.
//!
//! Exit status 0 when every check holds, 1 otherwise (each failed check is printed).

// A command-line program: printing is its interface.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use session_schema::{BaseMessage, SessionState, parse_message};
use session_state::{ListQuery, StateStore};

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: fullfs <DIR on a small, otherwise unused file system>");
        return ExitCode::from(2);
    };
    let mut check = Check::default();
    if let Err(e) = run(&dir, &mut check) {
        check.fail(format!("setup: {e}"));
    }
    if check.failures.is_empty() {
        println!("fullfs: ok ({} checks)", check.passed);
        ExitCode::SUCCESS
    } else {
        for f in &check.failures {
            eprintln!("fullfs: FAILED: {f}");
        }
        ExitCode::FAILURE
    }
}

#[derive(Default)]
struct Check {
    passed: usize,
    failures: Vec<String>,
}

impl Check {
    fn that(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if ok {
            self.passed += 1;
        } else {
            self.fail(what());
        }
    }

    fn fail(&mut self, what: String) {
        self.failures.push(what);
    }
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn sample() -> PathBuf {
    session_test_support::sample_sessions_dir()
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// A message with `bytes` of text: large enough that saving it needs new blocks.
fn big_message(role: &str, tag: &str, bytes: usize) -> Result<BaseMessage> {
    let text = format!("{tag} {}", "x".repeat(bytes));
    let line = serde_json::json!({"role": role, "content": text}).to_string();
    Ok(parse_message(line.as_bytes())?.value)
}

/// Every `messages/*.jsonl` with its bytes.
type Logs = BTreeMap<String, Vec<u8>>;

/// Every `messages/*.jsonl` with its bytes, and the names of the other files there.
fn messages_dir(root: &Path) -> Result<(Logs, Vec<String>)> {
    let mut logs = BTreeMap::new();
    let mut other = Vec::new();
    for entry in fs::read_dir(root.join("messages"))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !entry.file_type()?.is_file() {
            continue;
        }
        if name.ends_with(".jsonl") {
            logs.insert(name, fs::read(entry.path())?);
        } else if name != ".append-intent" {
            other.push(name);
        }
    }
    Ok((logs, other))
}

/// Fills the file system holding `dir` to the last byte; returns the bytes written.
fn fill(dir: &Path) -> Result<u64> {
    let mut f = fs::File::create(dir.join("filler"))?;
    let mut total = 0u64;
    for chunk in [1 << 20, 64 << 10, 4 << 10, 512, 1] {
        let buf = vec![0u8; chunk];
        loop {
            match f.write(&buf) {
                Ok(0) => break,
                Ok(n) => total += n as u64,
                Err(e) if e.raw_os_error() == Some(28) => break,
                Err(e) => return Err(e.into()),
            }
        }
    }
    f.sync_all().ok();
    Ok(total)
}

/// `err` and its causes on one line.
fn chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        out.push_str(": ");
        out.push_str(&e.to_string());
        cur = e.source();
    }
    out
}

/// `sessions --root <root> <args>` in-process: exit code and stderr.
fn sessions(root: &Path, args: &[&str]) -> (i32, String) {
    let mut argv: Vec<OsString> = vec!["sessions".into(), "--root".into(), root.into()];
    argv.extend(args.iter().map(OsString::from));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = session_cli::run(argv, &mut out, &mut err);
    (code, String::from_utf8_lossy(&err).into_owned())
}

/// The reading commands on the full disk: none ends with a data or I/O error (exit 4); with
/// `closed`, the ones that refresh the run index say that the store was read read-only,
/// else that the index was not brought up to date.
fn reading_commands(root: &Path, id: &str, check: &mut Check, closed: bool) {
    println!(
        "fullfs: reading with the store {}",
        if closed {
            "closed"
        } else {
            "open in another handle"
        }
    );
    for args in [
        &["show", id][..],
        &["history", id],
        &["runs"],
        &["runs", "--json"],
        &["sessions", "--all"],
        &["stats"],
        &["verify"],
    ] {
        let (code, err) = sessions(root, args);
        println!("fullfs: sessions {} -> exit {code}", args.join(" "));
        for line in err.lines().filter(|l| l.contains("warning")).take(2) {
            println!("fullfs:     {line}");
        }
        check.that(code != 4 && code != 101, || {
            format!("sessions {args:?} exited {code} on the full disk: {err}")
        });
        check.that(!err.contains("panicked"), || {
            format!("sessions {args:?} panicked: {err}")
        });
        if matches!(args[0], "runs" | "stats") {
            let want = if closed {
                "reading it read-only"
            } else {
                "run index not brought up to date (no space left on device"
            };
            check.that(err.contains(want), || {
                format!("sessions {args:?} on the full disk did not say `{want}`: {err}")
            });
        }
    }
}

fn run(dir: &Path, check: &mut Check) -> Result<()> {
    let root = dir.join("sessions");
    copy_tree(&sample(), &root)?;
    // Bring the store and its run index up to date while there is room.
    let (code, err) = sessions(&root, &["runs"]);
    check.that(code == 0, || {
        format!("runs before filling exited {code}: {err}")
    });
    let store = StateStore::open(&root)?;
    let listed = store.list(&ListQuery::all())?;
    let id = listed
        .entries
        .iter()
        .map(|e| e.summary.session_id.clone())
        .find(|id| {
            store
                .load(id)
                .ok()
                .flatten()
                .is_some_and(|l| l.state.messages.len() >= 2)
        })
        .ok_or("the sample store has no session with two messages")?;
    // One small append while there is room: the append intent then names this session, so
    // that the big append below fails on the messages file itself.
    let mut old = store.load(&id)?.ok_or("session vanished")?.state;
    old.messages
        .push(big_message("user", "one more question", 100)?);
    store.save(&old)?;
    let mut append = old.clone();
    for i in 0..3 {
        append.messages.push(big_message(
            "assistant",
            &format!("appended {i}"),
            48 << 10,
        )?);
    }
    let mut rewrite = old.clone();
    rewrite.messages[0] = big_message("user", "[summary]", 96 << 10)?;
    let mut fresh = SessionState {
        session_id: "f0000000-0000-4000-8000-0000000000ff".into(),
        updated_at: old.updated_at.clone(),
        ..Default::default()
    };
    fresh
        .messages
        .push(big_message("user", "a new session", 96 << 10)?);

    // 1. The store closed (no `-wal`/`-shm` files): a writable open fails on the full disk
    //    (SQLite cannot set up its WAL); reading commands open it read-only and say why.
    drop(store);
    for suffix in ["-wal", "-shm"] {
        let f = root.join(format!("state.db{suffix}"));
        check.that(!f.exists(), || {
            format!("{} left after closing", f.display())
        });
    }
    println!("fullfs: filled {} bytes", fill(dir)?);
    reading_commands(&root, &id, check, true);
    fs::remove_file(dir.join("filler"))?;

    // 2. A writer holding the store open while the disk fills up: its saves fail cleanly;
    //    reading commands open the store for writing, fail to refresh the run index and say
    //    so.
    let store = StateStore::open(&root)?;
    println!("fullfs: filled {} bytes", fill(dir)?);
    let (logs_before, other_before) = messages_dir(&root)?;

    // Saves on the full disk: complete, or failed with the OS error and nothing changed.
    for (what, state) in [
        ("append", &append),
        ("rewrite", &rewrite),
        ("new session", &fresh),
    ] {
        match store.save(state) {
            Ok(report) => {
                let loaded = store
                    .load(&state.session_id)?
                    .ok_or("saved session vanished")?;
                check.that(loaded.state.messages == state.messages, || {
                    format!("{what}: saved on the full disk but loads differently")
                });
                check.that(report.rename_deferred.is_none(), || {
                    format!("{what}: rename deferred on the full disk")
                });
                println!("fullfs: {what}: saved (it fit)");
                return Err(format!(
                    "{what} fit on the full disk: the file system was not full enough"
                )
                .into());
            }
            Err(e) => {
                let text = chain(&e);
                println!("fullfs: {what}: refused: {text}");
                check.that(
                    text.contains("No space left on device")
                        || text.contains("database or disk is full")
                        || text.contains("disk I/O error"),
                    || format!("{what}: the error does not name the full disk: {text}"),
                );
                let (logs, other) = messages_dir(&root)?;
                check.that(logs == logs_before, || {
                    format!("{what}: a messages file changed on a failed save")
                });
                check.that(other == other_before, || {
                    format!("{what}: files left in messages/: {other:?}")
                });
            }
        }
    }

    reading_commands(&root, &id, check, false);
    drop(store);

    // 3. Space again: the same saves go through.
    fs::remove_file(dir.join("filler"))?;
    let store = StateStore::open(&root)?;
    for (what, state) in [
        ("append", &append),
        ("rewrite", &rewrite),
        ("new session", &fresh),
    ] {
        match store.save(state) {
            Ok(_) => {
                let loaded = store
                    .load(&state.session_id)?
                    .ok_or("saved session vanished")?;
                check.that(loaded.state.messages == state.messages, || {
                    format!("{what}: loads differently after space returned")
                });
                check.that(loaded.damage.is_empty(), || {
                    format!("{what}: damage after space returned: {:?}", loaded.damage)
                });
            }
            Err(e) => check.fail(format!("{what}: still fails with space: {}", chain(&e))),
        }
    }
    let (_, other) = messages_dir(&root)?;
    check.that(other.is_empty(), || {
        format!("files left in messages/: {other:?}")
    });
    Ok(())
}

//! Planting stores by hand, the way the reference runtime (or a hostile or broken program)
//! leaves them: run files written byte for byte, `state.db` rows inserted with SQL.

#![allow(dead_code, clippy::unwrap_used)] // Not every test binary plants every kind of file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Fixed "now" for the commands run here.
pub(crate) const NOW: &str = "2026-11-30T12:00:00Z";

/// Runs `sessions --root <root> <args>` with a clean environment (UTC, fixed now, no colour
/// unless asked).
pub(crate) fn sessions(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sessions"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent-home")
        .env("TZ", "UTC")
        .env("SESSIONS_NOW", NOW)
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .unwrap()
}

/// Writes `<root>/<day>/<name>` (day as `YYYY/MM/DD`) with `lines`, each followed by `\n`.
pub(crate) fn run_file(root: &Path, day: &str, name: &str, lines: &[String]) -> PathBuf {
    let dir = root.join(day);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let mut body = Vec::new();
    for l in lines {
        body.extend_from_slice(l.as_bytes());
        body.push(b'\n');
    }
    std::fs::write(&path, body).unwrap();
    path
}

/// A `session_state` row as the reference writes it, plus its `messages/<session_id>.jsonl`
/// holding `messages` (one line each; no file for `None`). Text columns are written as given.
pub(crate) struct SessionRow<'a> {
    pub(crate) session_id: &'a str,
    pub(crate) updated_at: &'a str,
    pub(crate) run_id: Option<&'a str>,
    pub(crate) last_user_message: Option<&'a str>,
    pub(crate) workspace_root: Option<&'a str>,
    pub(crate) meta_json: Option<&'a str>,
    pub(crate) messages: Option<&'a [&'a str]>,
}

/// Creates `state.db` with the store's schema (first call) and inserts `row`, writing its
/// messages file under the session id.
pub(crate) fn session(root: &Path, row: &SessionRow<'_>) {
    std::fs::create_dir_all(root).unwrap();
    drop(session_state::StateStore::open(root).unwrap());
    let messages = row.messages.unwrap_or_default();
    if let Some(lines) = row.messages {
        let messages_dir = root.join("messages");
        std::fs::create_dir_all(&messages_dir).unwrap();
        let mut body = String::new();
        for m in lines {
            body.push_str(m);
            body.push('\n');
        }
        std::fs::write(messages_dir.join(format!("{}.jsonl", row.session_id)), body).unwrap();
    }
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    conn.execute(
        "INSERT INTO session_state (session_id, updated_at, run_id, invoke_seq, schema_version, \
         meta_json, message_count, last_user_message, workspace_root) \
         VALUES (?1, ?2, ?3, 1, 1, ?4, ?5, ?6, ?7)",
        rusqlite::params![
            row.session_id,
            row.updated_at,
            row.run_id,
            row.meta_json,
            messages.len() as i64,
            row.last_user_message,
            row.workspace_root,
        ],
    )
    .unwrap();
}

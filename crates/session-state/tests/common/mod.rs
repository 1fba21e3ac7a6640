//! Helpers shared by the integration tests of session-state.

#![allow(clippy::unwrap_used)]

use std::fs;
use std::path::Path;

use session_schema::{BaseMessage, parse_message};

#[allow(dead_code)] // Not every test binary copies trees.
/// Copies the directory tree `from` to `to` (created), files byte for byte.
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A message `{"role": role, "content": text}`.
#[allow(dead_code)] // Not every test binary builds messages.
pub(crate) fn msg(role: &str, text: &str) -> BaseMessage {
    let line = serde_json::json!({"role": role, "content": text}).to_string();
    parse_message(line.as_bytes()).unwrap().value
}

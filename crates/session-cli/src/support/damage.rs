//! What loading a session's saved state found wrong in its message log, and the notes it
//! made, in one line for people (`export`'s warnings, `repair`'s details).

use std::path::Path;

use session_state::{LoadNote, MessageDamage, MessageDamageKind};

use crate::support::paths::rel;

/// `messages/<id>.jsonl: line 2, byte 31: torn_tail: <detail>`.
pub(crate) fn describe_damage(root: &Path, d: &MessageDamage) -> String {
    let mut s = rel(root, &d.path).into_owned();
    if let Some(line) = d.line {
        s.push_str(&format!(": line {line}, byte {}", d.byte_offset));
    }
    s.push_str(": ");
    s.push_str(damage_kind(&d.kind));
    match &d.kind {
        MessageDamageKind::CountMismatch { expected, found } => s.push_str(&format!(
            ": state.db says {expected} message(s), {found} found"
        )),
        _ if d.detail.is_empty() => {}
        _ => s.push_str(&format!(": {}", d.detail)),
    }
    if d.kept && !message_lost(d) {
        s.push_str(" (kept as stored)");
    } else if d.line.is_some() {
        s.push_str(" (message not exported)");
    }
    s
}

/// Whether a message-log problem means a message is missing from the export: a line that was
/// skipped, a count that does not match, a file rewritten behind the store's back. A line
/// kept verbatim (`kept`) is exported.
pub(crate) fn message_lost(d: &MessageDamage) -> bool {
    !d.kept
        || matches!(
            d.kind,
            MessageDamageKind::CountMismatch { .. } | MessageDamageKind::FileChanged
        )
}

/// `verify`'s kind names for message-log damage (see the README).
pub(crate) fn damage_kind(kind: &MessageDamageKind) -> &'static str {
    match kind {
        MessageDamageKind::TornTail => "torn_tail",
        MessageDamageKind::Corrupt => "corrupt_line",
        MessageDamageKind::NotObject => "not_object",
        MessageDamageKind::MissingRole => "missing_role",
        MessageDamageKind::Shape => "schema_mismatch",
        MessageDamageKind::CountMismatch { .. } => "message_count_mismatch",
        MessageDamageKind::FileChanged => "messages_file_changed",
        MessageDamageKind::Column(_) => "column_damage",
        _ => "message_damage",
    }
}

/// A load note's kind, detail and position (`file`, `line`, `offset`) when it has one.
pub(crate) fn note_parts(
    root: &Path,
    n: &LoadNote,
) -> (&'static str, String, Option<(String, u64, u64)>) {
    match n {
        LoadNote::MetaUnreadable { detail } => (
            "meta_unreadable",
            format!("meta_json omitted: {detail}"),
            None,
        ),
        LoadNote::ColumnType { column, found } => (
            "column_type",
            format!("column {column} omitted: found {found}"),
            None,
        ),
        LoadNote::LegacyIdMismatch { inner } => (
            "legacy_id_mismatch",
            format!("legacy snapshot names session {inner}"),
            None,
        ),
        LoadNote::LegacySchemaVersion { found } => (
            "legacy_schema_version",
            format!("legacy snapshot has schema_version {found}"),
            None,
        ),
        LoadNote::MigrationFailed { detail } => (
            "migration_failed",
            format!("legacy snapshot not migrated: {detail}"),
            None,
        ),
        LoadNote::UncommittedTail { bytes } => (
            "uncommitted_tail",
            format!("{bytes} byte(s) past the committed end of the messages file ignored"),
            None,
        ),
        LoadNote::LoneSurrogate {
            path,
            line,
            byte_offset,
            escape,
        } => (
            "lone_surrogate",
            format!(
                "{}: line {line}, byte {byte_offset}: lone surrogate {escape} shown as U+FFFD in `state`",
                rel(root, path)
            ),
            Some((rel(root, path).into_owned(), *line, *byte_offset)),
        ),
        other => ("load_note", format!("{other:?}"), None),
    }
}

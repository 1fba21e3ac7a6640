//! Legacy `state/<session_id>.json` snapshots (compat §2.8), read with type checks.

use std::path::Path;

use serde_json::value::RawValue;
use session_schema::{
    BaseMessage, Num, ParseError, RawJson, SessionState, SessionStateSummary, Timestamp,
    parse_message,
};
use time::OffsetDateTime;

use crate::compact::compact_json;
use crate::error::{Result, StateError};
use crate::fsutil;
use crate::messages::{keep_raw, ordered_object, parse_messages};
use crate::summary::summarize;
use crate::types::{LegacyLoad, LoadNote, MessageDamage, MessageDamageKind};

/// Reads and validates the legacy snapshot `path` (`state/<id>.json`) of session `id`.
/// `Ok(None)` when the file does not exist.
pub(crate) fn read_legacy(path: &Path, id: &str) -> Result<Option<LegacyLoad>> {
    let Some(bytes) = fsutil::read_if_exists(path)? else {
        return Ok(None);
    };
    parse_legacy(path, id, &bytes).map(Some)
}

fn invalid(
    path: &Path,
    bytes: &[u8],
    reason: String,
    err: Option<serde_json::Error>,
) -> StateError {
    let (line, column) = err
        .as_ref()
        .map_or((1, 1), |e| (e.line().max(1), e.column().max(1)));
    // Byte offset of (line, column): serde_json counts columns in bytes.
    let mut offset = 0usize;
    for (i, l) in bytes.split(|&b| b == b'\n').enumerate() {
        if i + 1 == line {
            offset += column.saturating_sub(1).min(l.len());
            break;
        }
        offset += l.len() + 1;
    }
    if err.as_ref().is_some_and(serde_json::Error::is_eof) {
        offset = bytes.len();
    }
    StateError::LegacyInvalid {
        path: path.to_path_buf(),
        line: line as u64,
        byte_offset: offset.min(bytes.len()) as u64,
        reason,
        source: err.map(|e| {
            Box::new(ParseError::Syntax {
                column: e.column(),
                eof: e.is_eof(),
                message: e.to_string(),
                source: e,
            })
        }),
    }
}

/// Validates a legacy snapshot. Fixes the reference's quirks (compat §5 item 11): the state is
/// keyed by `id` (the file name) whatever its inner `session_id` says; `session_id` and
/// `updated_at` must be non-empty strings, `messages` an array (absent = empty), `run_id` a
/// string, `invoke_seq` an integer and `meta` an object — values of the wrong type are dropped
/// with a [`LoadNote::ColumnType`] note instead of being stored as-is (the migration goes on
/// without them: refusing it would leave the session unloadable for a field the reference
/// itself ignores when it reads the value back). Every element of `messages` that is a JSON
/// object with a string `role` is kept (verbatim as `BaseMessage::Unknown` when it does not
/// fit the typed model, reported as `Shape` damage); any other element cannot be held by the
/// message model and is reported as damage with its 1-based index (`NotObject`,
/// `MissingRole`), the legacy file keeping it.
pub(crate) fn parse_legacy(path: &Path, id: &str, bytes: &[u8]) -> Result<LegacyLoad> {
    let text = std::str::from_utf8(session_schema::trim_line(bytes).0).map_err(|e| {
        StateError::LegacyInvalid {
            path: path.to_path_buf(),
            line: 1,
            byte_offset: e.valid_up_to() as u64,
            reason: "not UTF-8".to_owned(),
            source: None,
        }
    })?;
    let members = ordered_object(text).map_err(|e| {
        let reason = if e.is_eof() {
            "file ends in the middle of the JSON (cut mid-write)".to_owned()
        } else {
            format!("not a JSON object: {e}")
        };
        invalid(path, bytes, reason, Some(e))
    })?;
    let get = |key: &str| -> Option<&RawValue> {
        members
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_ref())
    };
    let mut notes = Vec::new();
    let mut damage = Vec::new();
    let string_field = |key: &str| -> Option<String> {
        get(key).and_then(|v| serde_json::from_str::<String>(v.get()).ok())
    };
    let inner = string_field("session_id")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            invalid(
                path,
                bytes,
                "`session_id` is missing or not a non-empty string".to_owned(),
                None,
            )
        })?;
    if inner != id {
        notes.push(LoadNote::LegacyIdMismatch { inner });
    }
    let updated_at = string_field("updated_at")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            invalid(
                path,
                bytes,
                "`updated_at` is missing or not a non-empty string".to_owned(),
                None,
            )
        })?;
    if let Some(v) = get("schema_version")
        && v.get() != "1"
    {
        notes.push(LoadNote::LegacySchemaVersion {
            found: v.get().to_owned(),
        });
    }
    let run_id = match get("run_id") {
        None => None,
        Some(v) if v.get() == "null" => None,
        Some(v) => match serde_json::from_str::<String>(v.get()) {
            Ok(s) => Some(s),
            Err(_) => {
                notes.push(LoadNote::ColumnType {
                    column: "run_id",
                    found: v.get().to_owned(),
                });
                None
            }
        },
    };
    let invoke_seq = match get("invoke_seq") {
        None => None,
        Some(v) if v.get() == "null" => None,
        Some(v) => match serde_json::from_str::<i64>(v.get()) {
            Ok(i) => Some(i),
            Err(_) => {
                notes.push(LoadNote::ColumnType {
                    column: "invoke_seq",
                    found: v.get().to_owned(),
                });
                None
            }
        },
    };
    let meta = match get("meta") {
        None => None,
        Some(v) if v.get() == "null" => None,
        Some(v) if v.get().starts_with('{') => {
            let compact = String::from_utf8(compact_json(v.get().as_bytes())).unwrap_or_default();
            RawJson::from_json(compact).ok()
        }
        Some(v) => {
            notes.push(LoadNote::ColumnType {
                column: "meta",
                found: v.get().chars().take(40).collect(),
            });
            None
        }
    };
    let elements: Vec<Box<RawValue>> = match get("messages") {
        None => Vec::new(),
        Some(v) => serde_json::from_str(v.get()).map_err(|e| {
            invalid(
                path,
                bytes,
                format!("`messages` is not an array: {e}"),
                None,
            )
        })?,
    };
    let mut messages: Vec<BaseMessage> = Vec::with_capacity(elements.len());
    let mut written = Vec::new();
    for (i, el) in elements.iter().enumerate() {
        let compact = compact_json(el.get().as_bytes());
        match parse_message(&compact) {
            Ok(p) if p.lone_surrogates.is_empty() => messages.push(p.value),
            Ok(p) => {
                for ls in &p.lone_surrogates {
                    notes.push(LoadNote::LoneSurrogate {
                        path: path.to_path_buf(),
                        line: i as u64 + 1,
                        byte_offset: ls.offset as u64,
                        escape: ls.escape_str().to_owned(),
                    });
                }
                if let Ok(json) = p.to_json() {
                    let mut line = compact_json(&json);
                    line.push(b'\n');
                    written.push((messages.len(), line));
                }
                messages.push(p.value);
            }
            Err(err) => {
                let kept = if err.is_shape() && !matches!(err, ParseError::NotObject) {
                    keep_raw(&compact)
                } else {
                    None
                };
                let kind = match (&err, &kept) {
                    (_, Some(_)) => MessageDamageKind::Shape,
                    (ParseError::NotObject, _) => MessageDamageKind::NotObject,
                    _ => MessageDamageKind::MissingRole,
                };
                damage.push(MessageDamage {
                    path: path.to_path_buf(),
                    line: Some(i as u64 + 1),
                    byte_offset: 0,
                    kind,
                    kept: kept.is_some(),
                    detail: err.to_string(),
                });
                if let Some(m) = kept {
                    messages.push(m);
                }
            }
        }
    }
    Ok(LegacyLoad {
        elements: elements.len() as u64,
        state: SessionState {
            schema_version: Some(Num::from(1i64)),
            session_id: id.to_owned(),
            updated_at: Timestamp::from_raw(updated_at),
            run_id,
            invoke_seq,
            messages,
            meta,
            ..Default::default()
        },
        damage,
        notes,
        written,
    })
}

/// The [`SessionStateSummary`] of a state as a save stores it in its row: for a legacy
/// snapshot, the listing shows what its migration stores (and `load` returns), so the count
/// is the number of messages kept (an element that is not a JSON object, or an object without
/// a string `role`, is reported as damage and not counted).
pub(crate) fn summary_of(state: &SessionState) -> SessionStateSummary {
    let summary = summarize(&state.messages, state.meta.as_ref());
    SessionStateSummary {
        session_id: state.session_id.clone(),
        updated_at: state.updated_at.clone(),
        run_id: state.run_id.clone(),
        message_count: Some(summary.message_count),
        last_user_message: summary.last_user_message,
        workspace_root: summary.workspace_root,
        ..Default::default()
    }
}

/// A session with a `messages/<id>.jsonl` file and no `session_state` row (`state.db`
/// deleted or lost; the reference keeps a legacy snapshot beside the newer file): the row
/// rebuilt from the messages file.
#[derive(Debug)]
pub(crate) struct Adoption {
    /// Messages from the file; `run_id`, `invoke_seq` and `meta` from the snapshot;
    /// `updated_at` the newer of the snapshot's and the file's mtime.
    pub(crate) state: SessionState,
    /// Damage found in the messages file.
    pub(crate) damage: Vec<MessageDamage>,
    /// The snapshot's notes about the fields taken from it, then
    /// [`LoadNote::RebuiltFromMessages`].
    pub(crate) legacy_notes: Vec<LoadNote>,
    /// Notes about the messages file (lone surrogates).
    pub(crate) file_notes: Vec<LoadNote>,
}

/// The messages file `path` (`messages/<id>.jsonl`) of session `id` adopted, its legacy
/// snapshot `legacy` (read from `legacy_path`) supplying the other fields.
///
/// `Ok(None)` when `path` does not exist (the snapshot, if any, is the session). Otherwise
/// the file's messages win: the reference writes the messages file after the snapshot (the
/// snapshot is the older format it migrated from), so the file is never replaced by the
/// snapshot's list. Neither file is changed here.
pub(crate) fn adopt_messages_file(
    path: &Path,
    id: &str,
    legacy: Option<&LegacyLoad>,
    legacy_path: &Path,
) -> Result<Option<Adoption>> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StateError::io("stat messages file", path, e)),
    };
    let Some(bytes) = fsutil::read_if_exists(path)? else {
        return Ok(None);
    };
    let read = parse_messages(path, &bytes);
    let file_time = meta.modified().ok().map(OffsetDateTime::from);
    let snapshot_at = legacy.map(|l| &l.state.updated_at);
    let updated_at = match (snapshot_at.and_then(Timestamp::parse), file_time) {
        (Some(snapshot), Some(file)) if file > snapshot => Timestamp::from_datetime(file),
        (None, Some(file)) => Timestamp::from_datetime(file),
        _ => snapshot_at.cloned().unwrap_or_else(Timestamp::now),
    };
    // Notes about the snapshot's own messages do not apply: its list is not used.
    let mut legacy_notes: Vec<LoadNote> = legacy
        .map(|l| l.notes.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|n| !matches!(n, LoadNote::LoneSurrogate { path, .. } if path == legacy_path))
        .cloned()
        .collect();
    legacy_notes.push(LoadNote::RebuiltFromMessages {
        path: path.to_path_buf(),
        messages: read.messages.len() as u64,
        legacy_messages: legacy.map(|l| l.elements),
    });
    let base = match legacy {
        Some(l) => l.state.clone(),
        None => SessionState {
            schema_version: Some(Num::from(1i64)),
            session_id: id.to_owned(),
            ..Default::default()
        },
    };
    Ok(Some(Adoption {
        state: SessionState {
            updated_at,
            messages: read.messages,
            ..base
        },
        damage: read.damage,
        legacy_notes,
        file_notes: read.notes,
    }))
}

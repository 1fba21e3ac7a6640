//! A session's committed state as `state.db` holds it: the reference's `session_state` row and
//! our `session_files` bookkeeping, read without a failing conversion (see `column`), and the
//! row's columns decoded for `load`.

use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension};
use session_schema::RawJson;

use crate::column::{Cols, ColumnDamage, ColumnDamageKind, OwnedValue, describe, text_of};
use crate::db::{self, db_err};
use crate::error::Result;
use crate::types::{Generation, LoadNote, MessageDamage, MessageDamageKind};

use crate::pending_base::Base;

/// The nine reference columns, in the order [`Stored::values`] holds them.
pub(crate) const ROW_COLUMNS: &str = "session_id, updated_at, run_id, invoke_seq, schema_version, meta_json, message_count, last_user_message, workspace_root";

/// Names of [`ROW_COLUMNS`].
pub(crate) const ROW_NAMES: [&str; 9] = [
    "session_id",
    "updated_at",
    "run_id",
    "invoke_seq",
    "schema_version",
    "meta_json",
    "message_count",
    "last_user_message",
    "workspace_root",
];

/// The storage class a save binds to each of [`ROW_NAMES`]: text (or null) for `true`, an
/// integer (or null) for `false`.
const ROW_BINDS_TEXT: [bool; 9] = [true, true, true, false, false, true, false, true, true];

/// Whether every `session_state` column stores what a save binds to it unchanged, so that the
/// fingerprint of the bound values is the stored row's (SQLite's column affinity, "Datatypes
/// In SQLite", section 3.1: a column of `TEXT` or no affinity keeps text; one of `INTEGER`, `NUMERIC`
/// or no affinity keeps an integer). True for the reference's schema ([`db::CREATE_SESSION_STATE`]);
/// a table declared otherwise (another tool's) makes the save read the stored row back.
///
/// # Errors
/// `PRAGMA table_info` failed.
pub(crate) fn row_keeps_bound_values(conn: &Connection) -> rusqlite::Result<bool> {
    let mut stmt = conn.prepare("SELECT name, type FROM pragma_table_info('session_state')")?;
    let declared = stmt
        .query_map([], |r| {
            let text = |v: &OwnedValue| text_of(v.as_ref()).0.unwrap_or_default();
            let values = crate::column::owned_row(r, 2)?;
            Ok((
                values.first().map(text).unwrap_or_default(),
                values.get(1).map(text).unwrap_or_default(),
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(ROW_NAMES.iter().zip(ROW_BINDS_TEXT).all(|(name, text)| {
        declared
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .is_some_and(|(_, declared)| {
                matches!(
                    (affinity(declared), text),
                    (Affinity::Text | Affinity::Blob, true)
                        | (
                            Affinity::Integer | Affinity::Numeric | Affinity::Blob,
                            false
                        )
                )
            })
    }))
}

/// A column's type affinity ("Datatypes In SQLite", section 3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Affinity {
    Integer,
    Text,
    Blob,
    Real,
    Numeric,
}

/// The affinity of a declared column type, by SQLite's rules in their order.
fn affinity(declared: &str) -> Affinity {
    let t = declared.to_ascii_uppercase();
    if t.contains("INT") {
        Affinity::Integer
    } else if ["CHAR", "CLOB", "TEXT"].iter().any(|w| t.contains(w)) {
        Affinity::Text
    } else if t.contains("BLOB") || t.trim().is_empty() {
        Affinity::Blob
    } else if ["REAL", "FLOA", "DOUB"].iter().any(|w| t.contains(w)) {
        Affinity::Real
    } else {
        Affinity::Numeric
    }
}

/// [`read_stored`]'s statement: the row's [`ROW_COLUMNS`], then `session_files`'
/// [`FILES_NAMES`] of the same session id (matched with the bound id, as each table alone
/// would be, not with the row's stored key).
///
/// The bound id comes in through a one-row subquery (`k`) rather than as `?1` in both
/// tables' terms: with the parameter written into a join's terms, SQLite's planner looks at
/// its bound value, which marks the statement to be prepared again (parsed and planned) after
/// every new binding, on every save (the statement status `SQLITE_STMTSTATUS_REPREPARE`;
/// `save_cost` holds it at zero). The comparisons are the same: `k.id` has no affinity, as a
/// parameter has none.
static ROW_AND_FILES: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let row = ROW_NAMES.map(|n| format!("s.{n}")).join(", ");
    let files = FILES_NAMES.map(|n| format!("f.{n}")).join(", ");
    format!(
        "SELECT {row}, {files} FROM (SELECT ?1 AS id) k \
         JOIN session_state s ON s.session_id = k.id \
         LEFT JOIN session_files f ON f.session_id = k.id"
    )
});

/// Names of the `session_files` columns [`read_stored`] selects.
const FILES_NAMES: [&str; 8] = [
    "session_id",
    "generation",
    "row_fingerprint",
    "file_len",
    "file_lines",
    "file_digest",
    "pending_file",
    "pending_base",
];

/// The committed state of one session as found in the database.
pub(crate) struct Stored {
    /// The nine reference columns as stored.
    pub(crate) values: Vec<OwnedValue>,
    pub(crate) generation: Generation,
    /// Our bookkeeping, when it matches the row (the row was last written by this crate) and
    /// every value of it could be read.
    pub(crate) files: Option<FilesRow>,
    /// Our bookkeeping as recorded, whether or not the row still matches it (a pending temp
    /// file of a commit the reference has saved over since).
    pub(crate) recorded: Option<FilesRow>,
    /// Values of our bookkeeping row that could not be read (the row is then not used).
    pub(crate) damage: Vec<ColumnDamage>,
}

/// Our `session_files` row of a session: which bytes of the messages file are committed.
#[derive(Debug, Clone)]
pub(crate) struct FilesRow {
    pub(crate) file_len: u64,
    pub(crate) file_lines: u64,
    pub(crate) file_digest: u64,
    /// Temp file of a committed rewrite not renamed yet (a name inside `messages/`).
    pub(crate) pending_file: Option<String>,
    /// What the messages file held when that rewrite was committed; `None` when unknown (no
    /// pending rewrite, or one committed by a version that did not record it).
    pub(crate) pending_base: Option<Base>,
}

/// The bookkeeping of one `session_files` row as read: the generation counter (when
/// readable) and the row when every value is usable.
struct FilesRead {
    counter: Option<u64>,
    fingerprint: Option<u64>,
    row: Option<FilesRow>,
    damage: Vec<ColumnDamage>,
}

fn files_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<FilesRead> {
    files_row_at(r, 0)
}

/// [`files_row`] over the columns of `r` from index `base` on (`FILES_NAMES` in order).
fn files_row_at(r: &rusqlite::Row<'_>, base: usize) -> rusqlite::Result<FilesRead> {
    let mut c = Cols::at(r, base, "session_files", &FILES_NAMES)?;
    let counter = c.bits(1)?;
    let fingerprint = c.bits(2)?;
    let file_len = c.count_required(3)?;
    let file_lines = c.count_required(4)?;
    let file_digest = c.bits(5)?;
    let pending_file = c.text(6)?;
    // A name that is text but not a plain file name inside messages/ (never written by us).
    if let Some(name) = &pending_file
        && matches!(c.raw(6)?, rusqlite::types::ValueRef::Text(t) if std::str::from_utf8(t).is_ok())
        && session_schema::check_id(name).is_err()
    {
        c.report(
            6,
            ColumnDamageKind::WrongType {
                found: format!("{} (not a file name inside messages/)", describe(c.raw(6)?)),
            },
        );
    }
    let pending_base = c
        .text(7)?
        .zip(counter)
        .and_then(|(text, g)| Base::decode(&text, g));
    let damaged = c.is_damaged();
    let row = match (file_len, file_lines, file_digest) {
        (Some(file_len), Some(file_lines), Some(file_digest)) if !damaged => Some(FilesRow {
            file_len,
            file_lines,
            file_digest,
            pending_file,
            pending_base,
        }),
        _ => None,
    };
    Ok(FilesRead {
        counter,
        fingerprint,
        row,
        damage: c.finish(),
    })
}

/// Reads the row and our bookkeeping for `session_id` (inside the caller's transaction).
/// Never fails on stored values: the row is kept as stored, bookkeeping that cannot be read is
/// reported in [`Stored::damage`] and not used (the session is then handled like one the
/// reference wrote: the whole messages file is its content).
pub(crate) fn read_stored(
    conn: &Connection,
    db_path: &Path,
    session_id: &str,
) -> Result<Option<Stored>> {
    // The row and our bookkeeping in one statement (a save reads both under its write lock).
    let found: Option<(Vec<OwnedValue>, Option<FilesRead>)> = conn
        .prepare_cached(&ROW_AND_FILES)
        .and_then(|mut stmt| {
            stmt.query_row([session_id], |r| {
                let values = crate::column::owned_row(r, ROW_NAMES.len())?;
                // No bookkeeping row: every column of the join's right side is NULL, its key
                // among them (a stored key is never NULL: it was matched by `=`).
                let files = if crate::column::is_null(r, ROW_NAMES.len())? {
                    None
                } else {
                    Some(files_row_at(r, ROW_NAMES.len())?)
                };
                Ok((values, files))
            })
            .optional()
        })
        .map_err(db_err(db_path, "read session row"))?;
    let Some((values, files)) = found else {
        return Ok(None);
    };
    let refs: Vec<ValueRef<'_>> = values.iter().map(OwnedValue::as_ref).collect();
    let fp = db::row_fingerprint(&refs);
    let (counter, recorded, files, damage) = match files {
        Some(f) => {
            let ours = f.fingerprint == Some(fp);
            (
                f.counter.unwrap_or(0),
                f.row.clone(),
                f.row.filter(|_| ours),
                f.damage,
            )
        }
        None => (0, None, None, Vec::new()),
    };
    Ok(Some(Stored {
        values,
        generation: Generation { counter, row: fp },
        files,
        recorded,
        damage,
    }))
}

fn read_files(conn: &Connection, db_path: &Path, session_id: &str) -> Result<Option<FilesRead>> {
    conn.prepare_cached(
        "SELECT session_id, generation, row_fingerprint, file_len, file_lines, file_digest, \
         pending_file, pending_base FROM session_files WHERE session_id = ?1",
    )
    .and_then(|mut stmt| stmt.query_row([session_id], files_row).optional())
    .map_err(db_err(db_path, "read session bookkeeping"))
}

/// Our bookkeeping for `session_id` as recorded, whatever the `session_state` row says (or
/// whether there is one); `None` when there is none or it cannot be read.
pub(crate) fn read_bookkeeping(
    conn: &Connection,
    db_path: &Path,
    session_id: &str,
) -> Result<Option<FilesRow>> {
    Ok(read_files(conn, db_path, session_id)?.and_then(|f| f.row))
}

/// The columns `load` returns, decoded from a stored row.
pub(crate) struct RowFields {
    pub(crate) updated_at: String,
    pub(crate) run_id: Option<String>,
    pub(crate) invoke_seq: Option<i64>,
    pub(crate) meta: Option<RawJson>,
    /// `message_count` when it is an integer.
    pub(crate) message_count: Option<i64>,
}

/// Decodes the nine columns of session `id`'s row. Text that is not UTF-8 is used as
/// decoded (U+FFFD) and reported; a value of a storage class its column does not hold, or a
/// NULL where one is required, is reported and left out (`updated_at`: decoded lossily, or
/// empty). Every problem is one [`ColumnDamage`] naming the session and the column.
pub(crate) fn decode_row(
    values: &[OwnedValue],
    id: &str,
    notes: &mut Vec<LoadNote>,
) -> (RowFields, Vec<ColumnDamage>) {
    let mut damage = Vec::new();
    let get = |i: usize| values.get(i).map_or(ValueRef::Null, OwnedValue::as_ref);
    let mut report = |i: usize, kind: ColumnDamageKind| {
        damage.push(ColumnDamage {
            table: "session_state",
            column: ROW_NAMES.get(i).copied().unwrap_or("?"),
            row: id.to_owned(),
            kind,
        });
    };
    // Text columns: a number is written out; only TEXT is what the reference writes.
    let mut text = |i: usize, required: bool| -> Option<String> {
        let v = get(i);
        let (t, bad) = text_of(v);
        match (&t, bad) {
            (None, _) if required => report(i, ColumnDamageKind::Null),
            (_, Some(kind)) => {
                let omitted = !matches!(kind, ColumnDamageKind::InvalidUtf8 { .. });
                report(i, kind);
                if omitted && !required {
                    return None;
                }
            }
            _ => {}
        }
        t
    };
    let updated_at = text(1, true).unwrap_or_default();
    let run_id = text(2, false);
    let meta_text = text(5, false);
    text(0, true);
    text(7, false);
    text(8, false);
    let mut int = |i: usize, required: bool, real_ok: bool| -> Option<i64> {
        match get(i) {
            ValueRef::Integer(n) => Some(n),
            ValueRef::Null if !required => None,
            ValueRef::Null => {
                report(i, ColumnDamageKind::Null);
                None
            }
            // An integral REAL (a writer that does not keep integers apart): its value.
            #[allow(clippy::cast_possible_truncation, reason = "a whole number below 2^53")]
            ValueRef::Real(f) if real_ok && f.fract() == 0.0 && f.abs() < 9.0e15 => Some(f as i64),
            other => {
                report(
                    i,
                    ColumnDamageKind::WrongType {
                        found: describe(other),
                    },
                );
                None
            }
        }
    };
    let invoke_seq = int(3, false, true);
    int(4, true, false);
    let message_count = int(6, false, false);
    damage.sort_by_key(|d| ROW_NAMES.iter().position(|n| *n == d.column));
    let meta = meta_text.and_then(|t| match RawJson::from_json(t) {
        Ok(raw) if raw.get().starts_with('{') || raw.get().starts_with('[') => Some(raw),
        Ok(_) => {
            notes.push(LoadNote::MetaUnreadable {
                detail: "meta_json is not an object or array".to_owned(),
            });
            None
        }
        Err(e) => {
            notes.push(LoadNote::MetaUnreadable {
                detail: e.to_string(),
            });
            None
        }
    });
    (
        RowFields {
            updated_at,
            run_id,
            invoke_seq,
            meta,
            message_count,
        },
        damage,
    )
}

/// A [`ColumnDamage`] as load damage: file-level, on `state.db`, nothing lost from the
/// messages.
pub(crate) fn as_message_damage(db_path: &Path, d: ColumnDamage) -> MessageDamage {
    MessageDamage {
        path: db_path.to_path_buf(),
        line: None,
        byte_offset: 0,
        detail: d.to_string(),
        kept: true,
        kind: MessageDamageKind::Column(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_with_invalid_utf8_and_odd_classes_decodes_with_damage() {
        let values = vec![
            OwnedValue::Text(b"s1".to_vec()),
            OwnedValue::Blob(b"2026".to_vec()),
            OwnedValue::Text(b"run-\xED\xA0\xBC".to_vec()),
            OwnedValue::Real(2.5),
            OwnedValue::Integer(1),
            OwnedValue::Null,
            OwnedValue::Text(b"x".to_vec()),
            OwnedValue::Text(b"hi \xED\xA0\xBC".to_vec()),
            OwnedValue::Null,
        ];
        let mut notes = Vec::new();
        let (fields, damage) = decode_row(&values, "s1", &mut notes);
        assert_eq!(fields.updated_at, "2026");
        assert_eq!(
            fields.run_id.as_deref(),
            Some("run-\u{FFFD}\u{FFFD}\u{FFFD}")
        );
        assert_eq!(fields.invoke_seq, None);
        assert_eq!(fields.message_count, None);
        let cols: Vec<(&str, &ColumnDamageKind)> =
            damage.iter().map(|d| (d.column, &d.kind)).collect();
        assert_eq!(
            cols,
            vec![
                (
                    "updated_at",
                    &ColumnDamageKind::WrongType {
                        found: "BLOB of 4 bytes".into()
                    }
                ),
                ("run_id", &ColumnDamageKind::InvalidUtf8 { bytes: 3 }),
                (
                    "invoke_seq",
                    &ColumnDamageKind::WrongType {
                        found: "REAL 2.5".into()
                    }
                ),
                (
                    "message_count",
                    &ColumnDamageKind::WrongType {
                        found: "TEXT \"x\"".into()
                    }
                ),
                (
                    "last_user_message",
                    &ColumnDamageKind::InvalidUtf8 { bytes: 3 }
                ),
            ]
        );
        assert!(notes.is_empty());
    }

    #[test]
    fn declared_types_get_sqlites_affinities() {
        // The examples of "Datatypes In SQLite", section 3.1.1, and the rules' order.
        for (declared, want) in [
            ("INTEGER", Affinity::Integer),
            ("BIGINT", Affinity::Integer),
            ("CHARINT", Affinity::Integer),
            ("FLOATING POINT", Affinity::Integer),
            ("VARCHAR(255)", Affinity::Text),
            ("text", Affinity::Text),
            ("CLOB", Affinity::Text),
            ("BLOB", Affinity::Blob),
            ("", Affinity::Blob),
            ("REAL", Affinity::Real),
            ("DOUBLE PRECISION", Affinity::Real),
            ("NUMERIC", Affinity::Numeric),
            ("DECIMAL(10,5)", Affinity::Numeric),
            ("STRING", Affinity::Numeric),
        ] {
            assert_eq!(affinity(declared), want, "{declared}");
        }
    }
}

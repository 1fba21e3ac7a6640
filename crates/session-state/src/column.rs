//! Reading `state.db` columns without a failing conversion: the one place where this crate
//! looks at a column's value.
//!
//! SQLite stores whatever a writer gives it. The reference writes strings holding lone UTF-16
//! surrogates (a cut emoji) into TEXT columns as the invalid UTF-8 bytes `ED A0 BC`; other
//! tools may leave a BLOB, a NULL or a REAL where a string or integer belongs. rusqlite's
//! typed reads (`row.get::<_, String>`, `row.get::<_, Value>`) turn each of these into an
//! error, which used to stop a listing, a load, a save or `verify` for the whole store. Every
//! read here goes through [`Cols`] (or the free functions below), which looks at the raw
//! [`ValueRef`], decodes text lossily (U+FFFD for each invalid sequence) and records a
//! [`ColumnDamage`] for anything that is not what the column should hold. A tidy test
//! (`xtask/src/tidy.rs`) rejects typed reads anywhere else in this crate.

use std::fmt;

use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};
use rusqlite::{Connection, Params, Row};

/// A value in a `state.db` column that is not what the column should hold. Reported beside
/// the result (a load's [`crate::MessageDamage`], a listing's [`crate::ListDiagnostic`], a
/// run row's [`crate::RunRow::column_damage`], [`crate::IndexReport::column_damage`],
/// [`crate::RunFileDiagnostic::column_damage`], [`crate::ReconstructedRow::column_damage`],
/// [`crate::Recovery::Damage`]); the value is used as decoded (text lossily) or left out.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ColumnDamage {
    /// The table (`session_state`, `session_files`, `runs`, `run_dirs`, `run_watch`,
    /// `session_reconstructed`).
    pub table: &'static str,
    /// The column.
    pub column: &'static str,
    /// The row's key as stored, decoded lossily: the session id (`session_state`,
    /// `session_files`, `session_reconstructed`), the run file's path relative to the sessions root (`runs`,
    /// `run_watch`) or the date directory (`run_dirs`); empty when the key is NULL.
    pub row: String,
    /// What is wrong with the value.
    pub kind: ColumnDamageKind,
}

/// Kinds of [`ColumnDamage`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ColumnDamageKind {
    /// TEXT that is not valid UTF-8 (a lone surrogate written by the reference is the three
    /// bytes `ED A0 BC`). The text was decoded with U+FFFD in place of each invalid sequence.
    InvalidUtf8 {
        /// Invalid bytes that were replaced.
        bytes: u64,
    },
    /// A storage class the column does not hold (a BLOB or a number where text belongs, text
    /// or a REAL where an integer belongs); `found` describes it (`BLOB of 3 bytes`,
    /// `REAL 1.5`, `TEXT "abc"`, `INTEGER 7`). Text and blobs are used as decoded text; other
    /// values are left out.
    WrongType {
        /// The value found.
        found: String,
    },
    /// NULL in a column that needs a value; the value is left out (or empty).
    Null,
    /// An integer outside the column's range (a negative count or length); left out.
    OutOfRange {
        /// The value found.
        found: i64,
    },
}

impl fmt::Display for ColumnDamage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.table, self.column)?;
        let what = match self.table {
            "session_state" | "session_files" | "session_reconstructed" => "session",
            "run_dirs" => "directory",
            _ => "run file",
        };
        if !self.row.is_empty() {
            write!(f, " of {what} {:?}", self.row)?;
        }
        match &self.kind {
            ColumnDamageKind::InvalidUtf8 { bytes } => write!(
                f,
                ": text is not UTF-8 ({bytes} invalid byte(s) replaced with U+FFFD)"
            ),
            ColumnDamageKind::WrongType { found } => write!(f, ": unexpected value {found}"),
            ColumnDamageKind::Null => write!(f, ": NULL where a value is required"),
            ColumnDamageKind::OutOfRange { found } => write!(f, ": {found} is out of range"),
        }
    }
}

/// Lossy text of a TEXT or BLOB value and the damage of decoding it: `None` when the bytes
/// are valid UTF-8.
pub(crate) fn decode_bytes(bytes: &[u8]) -> (String, Option<ColumnDamageKind>) {
    match std::str::from_utf8(bytes) {
        Ok(s) => (s.to_owned(), None),
        Err(_) => {
            let invalid: usize = bytes.utf8_chunks().map(|c| c.invalid().len()).sum();
            (
                String::from_utf8_lossy(bytes).into_owned(),
                Some(ColumnDamageKind::InvalidUtf8 {
                    bytes: u64::try_from(invalid).unwrap_or(u64::MAX),
                }),
            )
        }
    }
}

/// How a value is described in a report: `NULL`, `INTEGER 7`, `REAL 1.5`, `TEXT "abc"` (at
/// most 40 characters, lossily decoded), `BLOB of 3 bytes`.
pub(crate) fn describe(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Null => "NULL".to_owned(),
        ValueRef::Integer(i) => format!("INTEGER {i}"),
        ValueRef::Real(f) => format!("REAL {f}"),
        ValueRef::Text(t) => {
            let text: String = String::from_utf8_lossy(t).chars().take(40).collect();
            format!("TEXT {text:?}")
        }
        ValueRef::Blob(b) => format!("BLOB of {} bytes", b.len()),
    }
}

/// The text a value stands for, lossily: TEXT and BLOB decoded, numbers written out, NULL
/// `None`. The second value is the damage when the value is not valid UTF-8 TEXT.
pub(crate) fn text_of(v: ValueRef<'_>) -> (Option<String>, Option<ColumnDamageKind>) {
    match v {
        ValueRef::Null => (None, None),
        ValueRef::Text(t) => {
            let (s, bad) = decode_bytes(t);
            (Some(s), bad)
        }
        ValueRef::Blob(b) => (
            Some(String::from_utf8_lossy(b).into_owned()),
            Some(ColumnDamageKind::WrongType { found: describe(v) }),
        ),
        ValueRef::Integer(i) => (
            Some(i.to_string()),
            Some(ColumnDamageKind::WrongType { found: describe(v) }),
        ),
        ValueRef::Real(f) => (
            Some(f.to_string()),
            Some(ColumnDamageKind::WrongType { found: describe(v) }),
        ),
    }
}

/// The integer of an INTEGER value; `None` for every other storage class.
pub(crate) fn int_of(v: ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Integer(i) => Some(i),
        _ => None,
    }
}

/// The one integer a query returns (`PRAGMA user_version`, `count(*)`); 0 when it returns no
/// row or a value that is not an integer.
pub(crate) fn query_int<P: Params>(
    conn: &Connection,
    sql: &str,
    params: P,
) -> rusqlite::Result<i64> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params)?;
    match rows.next()? {
        Some(r) => Ok(int_of(r.get_ref(0)?).unwrap_or(0)),
        None => Ok(0),
    }
}

/// The text values of one column of a query's rows, lossily decoded (NULLs left out): column
/// names of `PRAGMA table_info`, for example.
pub(crate) fn query_texts<P: Params>(
    conn: &Connection,
    sql: &str,
    params: P,
    column: usize,
) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(sql)?;
    let mut rows = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        if let (Some(t), _) = text_of(r.get_ref(column)?) {
            out.push(t);
        }
    }
    Ok(out)
}

/// A stored value copied out of a row, whatever its storage class (rusqlite's `Value`
/// cannot hold TEXT that is not UTF-8).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OwnedValue {
    Null,
    Integer(i64),
    Real(f64),
    Text(Vec<u8>),
    Blob(Vec<u8>),
}

impl OwnedValue {
    pub(crate) fn of(v: ValueRef<'_>) -> OwnedValue {
        match v {
            ValueRef::Null => OwnedValue::Null,
            ValueRef::Integer(i) => OwnedValue::Integer(i),
            ValueRef::Real(f) => OwnedValue::Real(f),
            ValueRef::Text(t) => OwnedValue::Text(t.to_vec()),
            ValueRef::Blob(b) => OwnedValue::Blob(b.to_vec()),
        }
    }

    pub(crate) fn as_ref(&self) -> ValueRef<'_> {
        match self {
            OwnedValue::Null => ValueRef::Null,
            OwnedValue::Integer(i) => ValueRef::Integer(*i),
            OwnedValue::Real(f) => ValueRef::Real(*f),
            OwnedValue::Text(t) => ValueRef::Text(t),
            OwnedValue::Blob(b) => ValueRef::Blob(b),
        }
    }
}

impl ToSql for OwnedValue {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(self.as_ref()))
    }
}

/// The first `n` values of a row as stored.
pub(crate) fn owned_row(r: &Row<'_>, n: usize) -> rusqlite::Result<Vec<OwnedValue>> {
    (0..n).map(|i| r.get_ref(i).map(OwnedValue::of)).collect()
}

/// Whether column `i` of `r` is NULL (the right side of a `LEFT JOIN` that found no row).
pub(crate) fn is_null(r: &Row<'_>, i: usize) -> rusqlite::Result<bool> {
    Ok(matches!(r.get_ref(i)?, ValueRef::Null))
}

/// Bytes bound as TEXT as they are (a key read from a row, valid UTF-8 or not), so that a
/// statement finds exactly the stored value.
pub(crate) struct TextBytes<'a>(pub(crate) &'a [u8]);

impl ToSql for TextBytes<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(ValueRef::Text(self.0)))
    }
}

/// The columns of one row of `table`, read without a failing conversion; each problem is
/// recorded as a [`ColumnDamage`] naming the row by its key (the first selected column).
pub(crate) struct Cols<'r, 's> {
    row: &'r Row<'s>,
    /// Index in `row` of the first of `names` (a row of a join holds several tables' columns).
    base: usize,
    table: &'static str,
    names: &'static [&'static str],
    key: String,
    damage: Vec<ColumnDamage>,
}

impl<'r, 's> Cols<'r, 's> {
    /// `names` are the selected columns in order; the first is the row's key.
    pub(crate) fn new(
        row: &'r Row<'s>,
        table: &'static str,
        names: &'static [&'static str],
    ) -> rusqlite::Result<Self> {
        Cols::at(row, 0, table, names)
    }

    /// [`Cols::new`] over the columns of `row` from index `base` on.
    pub(crate) fn at(
        row: &'r Row<'s>,
        base: usize,
        table: &'static str,
        names: &'static [&'static str],
    ) -> rusqlite::Result<Self> {
        let (key, _) = text_of(row.get_ref(base)?);
        Ok(Cols {
            row,
            base,
            table,
            names,
            key: key.unwrap_or_default(),
            damage: Vec::new(),
        })
    }

    /// The value of column `i` as stored.
    pub(crate) fn raw(&self, i: usize) -> rusqlite::Result<ValueRef<'r>> {
        self.row.get_ref(self.base + i)
    }

    /// Records damage of column `i`.
    pub(crate) fn report(&mut self, i: usize, kind: ColumnDamageKind) {
        self.damage.push(ColumnDamage {
            table: self.table,
            column: self.names.get(i).copied().unwrap_or("?"),
            row: self.key.clone(),
            kind,
        });
    }

    /// A nullable TEXT column: `None` for NULL; text lossily decoded; a number written out.
    /// Anything but NULL or valid UTF-8 TEXT is damage.
    pub(crate) fn text(&mut self, i: usize) -> rusqlite::Result<Option<String>> {
        let (text, bad) = text_of(self.raw(i)?);
        if let Some(kind) = bad {
            self.report(i, kind);
        }
        Ok(text)
    }

    /// A NOT NULL TEXT column: as [`Cols::text`], NULL read as `""` and reported.
    pub(crate) fn text_or_empty(&mut self, i: usize) -> rusqlite::Result<String> {
        match self.text(i)? {
            Some(t) => Ok(t),
            None => {
                self.report(i, ColumnDamageKind::Null);
                Ok(String::new())
            }
        }
    }

    /// A nullable INTEGER column: `None` for NULL; anything but an INTEGER is damage and
    /// `None`.
    pub(crate) fn int(&mut self, i: usize) -> rusqlite::Result<Option<i64>> {
        let v = self.raw(i)?;
        match v {
            ValueRef::Null => Ok(None),
            ValueRef::Integer(n) => Ok(Some(n)),
            other => {
                let found = describe(other);
                self.report(i, ColumnDamageKind::WrongType { found });
                Ok(None)
            }
        }
    }

    /// A NOT NULL INTEGER column: as [`Cols::int`], NULL reported too.
    pub(crate) fn int_required(&mut self, i: usize) -> rusqlite::Result<Option<i64>> {
        let v = self.int(i)?;
        if v.is_none() && matches!(self.raw(i)?, ValueRef::Null) {
            self.report(i, ColumnDamageKind::Null);
        }
        Ok(v)
    }

    /// A nullable count: as [`Cols::int`], and a negative value is
    /// [`ColumnDamageKind::OutOfRange`] and `None`.
    pub(crate) fn count(&mut self, i: usize) -> rusqlite::Result<Option<u64>> {
        let n = self.int(i)?;
        Ok(self.non_negative(i, n))
    }

    /// A NOT NULL count, size or length: as [`Cols::int_required`], and a negative value is
    /// [`ColumnDamageKind::OutOfRange`] and `None`.
    pub(crate) fn count_required(&mut self, i: usize) -> rusqlite::Result<Option<u64>> {
        let n = self.int_required(i)?;
        Ok(self.non_negative(i, n))
    }

    fn non_negative(&mut self, i: usize, n: Option<i64>) -> Option<u64> {
        let n = n?;
        match u64::try_from(n) {
            Ok(u) => Some(u),
            Err(_) => {
                self.report(i, ColumnDamageKind::OutOfRange { found: n });
                None
            }
        }
    }

    /// A NOT NULL 64-bit pattern stored as a signed integer (digests, fingerprints,
    /// counters written by `u64 as i64`): the same bits as `u64`.
    pub(crate) fn bits(&mut self, i: usize) -> rusqlite::Result<Option<u64>> {
        Ok(self.int_required(i)?.map(i64::cast_unsigned))
    }

    /// Whether anything was reported.
    pub(crate) fn is_damaged(&self) -> bool {
        !self.damage.is_empty()
    }

    /// The damage reported so far.
    pub(crate) fn finish(self) -> Vec<ColumnDamage> {
        self.damage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_utf8_is_decoded_lossily_and_counted() {
        let (s, bad) = decode_bytes(b"cut \xED\xA0\xBC emoji");
        assert_eq!(s, "cut \u{FFFD}\u{FFFD}\u{FFFD} emoji");
        assert_eq!(bad, Some(ColumnDamageKind::InvalidUtf8 { bytes: 3 }));
        assert_eq!(decode_bytes("é".as_bytes()), ("é".to_owned(), None));
    }

    #[test]
    fn every_storage_class_has_a_text_and_a_verdict() {
        assert_eq!(text_of(ValueRef::Null), (None, None));
        assert_eq!(text_of(ValueRef::Text(b"ok")), (Some("ok".into()), None));
        let (t, bad) = text_of(ValueRef::Blob(b"\x00\xff"));
        assert_eq!(t.as_deref(), Some("\u{0}\u{FFFD}"));
        assert_eq!(
            bad,
            Some(ColumnDamageKind::WrongType {
                found: "BLOB of 2 bytes".into()
            })
        );
        assert_eq!(text_of(ValueRef::Integer(-7)).0.as_deref(), Some("-7"));
        assert_eq!(text_of(ValueRef::Real(1.5)).0.as_deref(), Some("1.5"));
        assert_eq!(int_of(ValueRef::Real(1.0)), None);
    }

    #[test]
    fn damage_names_table_column_and_row() {
        let d = ColumnDamage {
            table: "session_state",
            column: "last_user_message",
            row: "s1".into(),
            kind: ColumnDamageKind::InvalidUtf8 { bytes: 3 },
        };
        assert_eq!(
            d.to_string(),
            "session_state.last_user_message of session \"s1\": text is not UTF-8 (3 invalid byte(s) replaced with U+FFFD)"
        );
    }
}

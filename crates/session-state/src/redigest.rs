//! `user_version` 6: `session_files.file_digest` (and the digest inside `pending_base`) moved
//! from a hand-written multiply–rotate hash to the XXH3-64 chain of `docs/format.md`. Older
//! rows are recomputed from the messages files, by the migration of a writable database and
//! on the fly (SQL functions under a TEMP view) for a read-only one.

use std::path::Path;

use rusqlite::Connection;
use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;

use crate::column::{OwnedValue, int_of, owned_row};
use crate::fsutil;
use crate::pending_base::Base;

/// The `user_version` from which `file_digest` is the XXH3-64 chain.
pub(crate) const DIGEST_USER_VERSION: i64 = 6;

/// SQL function `(session_id, file_len, file_lines, file_digest, pending_file, which)`: the
/// row's `file_lines` (`which` = 0) or `file_digest` (`which` = 1) under the current digest.
pub(crate) const REDIGEST_FN: &str = "session_store_redigest";

/// SQL function `(session_id, generation, pending_base)`: the `pending_base` text under the
/// current digest.
pub(crate) const REBASE_FN: &str = "session_store_rebase";

/// `(file_lines, file_digest)` of a row written before version 6, under the current digest.
///
/// The committed bytes (the first `file_len` bytes of the pending rewrite when its temp file
/// exists, else of `messages/<session_id>.jsonl`, as load reads them) are verified against the
/// old digest first. When they do not verify (the file was replaced, cut or edited, or cannot
/// be read), the row gets the marker `file_lines = file_len + 1`, which no file satisfies
/// (every line holds at least one byte): load and save then treat the file as changed by
/// another writer, exactly as the old digest's mismatch did.
pub(crate) fn redigest(
    messages_dir: &Path,
    session_id: &str,
    pending_file: Option<&str>,
    (file_len, file_lines, file_digest): (u64, u64, u64),
) -> (u64, u64) {
    let marker = (file_len.saturating_add(1), file_digest);
    if session_schema::check_id(session_id).is_err() {
        return marker;
    }
    let main = messages_dir.join(format!("{session_id}.jsonl"));
    let path = pending_file
        .filter(|name| session_schema::check_id(name).is_ok())
        .map(|name| messages_dir.join(name))
        .filter(|p| p.exists())
        .unwrap_or(main);
    // Never follows a link or waits on a FIFO; anything unreadable does not verify.
    let committed = match fsutil::read_prefix_if_exists(&path, file_len) {
        Ok(Some(bytes)) => bytes,
        Ok(None) if file_len == 0 => Vec::new(),
        Ok(None) | Err(_) => return marker,
    };
    if committed.len() as u64 != file_len
        || fsutil::legacy_digest_lines(&committed) != (file_digest, file_lines)
    {
        return marker;
    }
    let (digest, lines) = fsutil::digest_lines(&committed);
    (lines, digest)
}

/// `pending_base` text (as [`Base::encode`] wrote it at `generation`) under the current digest:
/// the whole messages file is verified against the old digest; one that does not verify gets
/// the same `lines = len + 1` marker. Text that does not decode is returned as it is.
pub(crate) fn rebase(messages_dir: &Path, session_id: &str, generation: u64, text: &str) -> String {
    let Some(Base::File { len, lines, digest }) = Base::decode(text, generation) else {
        return text.to_owned();
    };
    let marker = Base::File {
        len,
        lines: len.saturating_add(1),
        digest,
    };
    let base = if session_schema::check_id(session_id).is_err() {
        marker
    } else {
        let main = messages_dir.join(format!("{session_id}.jsonl"));
        match fsutil::read_if_exists(&main) {
            Ok(Some(bytes))
                if bytes.len() as u64 == len
                    && fsutil::legacy_digest_lines(&bytes) == (digest, lines) =>
            {
                let (digest, lines) = fsutil::digest_lines(&bytes);
                Base::File { len, lines, digest }
            }
            _ => marker,
        }
    };
    base.encode(generation)
}

fn text_of(v: ValueRef<'_>) -> Option<&str> {
    match v {
        ValueRef::Text(t) => std::str::from_utf8(t).ok(),
        _ => None,
    }
}

fn count_of(v: ValueRef<'_>) -> Option<u64> {
    int_of(v).and_then(|i| u64::try_from(i).ok())
}

/// Recomputes the digests of every `session_files` row (the migration to version 6, inside
/// the caller's write transaction). Rows whose values cannot be read are left as they are:
/// they are already reported as damaged and not used.
pub(crate) fn migrate(conn: &Connection, messages_dir: &Path) -> rusqlite::Result<()> {
    let rows: Vec<Vec<OwnedValue>> = {
        let mut stmt = conn.prepare(
            "SELECT rowid, session_id, generation, file_len, file_lines, file_digest, \
             pending_file, pending_base FROM session_files",
        )?;
        let mut rows = stmt.query([])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            out.push(owned_row(r, 8)?);
        }
        out
    };
    let mut update = conn.prepare(
        "UPDATE session_files SET file_lines = ?2, file_digest = ?3, pending_base = ?4 \
         WHERE rowid = ?1",
    )?;
    for values in rows {
        let get = |i: usize| values.get(i).map_or(ValueRef::Null, OwnedValue::as_ref);
        let (Some(rowid), Some(id), Some(len), Some(lines), Some(digest)) = (
            int_of(get(0)),
            text_of(get(1)),
            count_of(get(3)),
            count_of(get(4)),
            int_of(get(5)),
        ) else {
            continue;
        };
        let (lines, digest) = redigest(
            messages_dir,
            id,
            text_of(get(6)),
            (len, lines, digest.cast_unsigned()),
        );
        let base = match (text_of(get(7)), count_of(get(2))) {
            (Some(text), Some(g)) => Some(rebase(messages_dir, id, g, text)),
            _ => None,
        };
        let Ok(lines) = i64::try_from(lines) else {
            continue;
        };
        if base.is_some() {
            update.execute(rusqlite::params![rowid, lines, digest.cast_signed(), base])?;
        } else {
            conn.execute(
                "UPDATE session_files SET file_lines = ?2, file_digest = ?3 WHERE rowid = ?1",
                rusqlite::params![rowid, lines, digest.cast_signed()],
            )?;
        }
    }
    Ok(())
}

/// Registers [`REDIGEST_FN`] and [`REBASE_FN`] for the read-only view over an older database.
pub(crate) fn register(conn: &Connection, messages_dir: &Path) -> rusqlite::Result<()> {
    let dir = messages_dir.to_path_buf();
    conn.create_scalar_function(REDIGEST_FN, 6, FunctionFlags::SQLITE_UTF8, move |ctx| {
        let (Some(id), Some(len), Some(lines), Some(digest), Some(which)) = (
            text_of(ctx.get_raw(0)),
            count_of(ctx.get_raw(1)),
            count_of(ctx.get_raw(2)),
            int_of(ctx.get_raw(3)),
            int_of(ctx.get_raw(5)),
        ) else {
            // Unreadable values stay as stored (and are reported as damaged).
            let i = if int_of(ctx.get_raw(5)) == Some(0) {
                2
            } else {
                3
            };
            return Ok(OwnedValue::of(ctx.get_raw(i)));
        };
        let (lines, digest) = redigest(
            &dir,
            id,
            text_of(ctx.get_raw(4)),
            (len, lines, digest.cast_unsigned()),
        );
        Ok(OwnedValue::Integer(if which == 0 {
            i64::try_from(lines).unwrap_or(i64::MAX)
        } else {
            digest.cast_signed()
        }))
    })?;
    let dir = messages_dir.to_path_buf();
    conn.create_scalar_function(REBASE_FN, 3, FunctionFlags::SQLITE_UTF8, move |ctx| {
        Ok(
            match (
                text_of(ctx.get_raw(0)),
                count_of(ctx.get_raw(1)),
                text_of(ctx.get_raw(2)),
            ) {
                (Some(id), Some(g), Some(text)) => {
                    OwnedValue::Text(rebase(&dir, id, g, text).into_bytes())
                }
                _ => OwnedValue::of(ctx.get_raw(2)),
            },
        )
    })
}

//! [`SessionStore`] on PostgreSQL: a `sessions` row (the state without its messages, as JSON
//! bytes, with summary columns and a version) and one `bytea` row per message; saves and
//! deletes compare versions under the row's lock.

use postgres::Transaction;
use session_schema::{
    SessionState, SessionStateSummary, Timestamp, parse_message, parse_session_state,
};
use session_storage::{
    Expected, HolderInfo, LeaseGuard, PageCursor, SessionDamage, SessionListPage, SessionListQuery,
    SessionStore, StorageError, StoredSession, Target, Version, checked_id,
};

use crate::backend::PgBackend;
use crate::error::RowExt;
use crate::error::{PgError, query, storage};
use crate::lease;
use crate::text::{normalize_workspace_root, pg_opt, pg_text, summarize};

/// A session as bytes, ready to store.
struct Encoded {
    head: Vec<u8>,
    messages: Vec<Vec<u8>>,
    hashes: Vec<Vec<u8>>,
    updated_at: String,
    updated_ms: Option<i64>,
    run_id: Option<String>,
    message_count: i64,
    last_user_message: Option<String>,
    workspace_root: Option<String>,
    workspace_norm: Option<String>,
}

fn encode(state: &SessionState) -> Result<Encoded, PgError> {
    let bad = |e: serde_json::Error| PgError::Inconsistent {
        detail: format!("session {} cannot be serialized: {e}", state.session_id),
    };
    let mut head_state = state.clone();
    head_state.messages = Vec::new();
    let head = serde_json::to_vec(&head_state).map_err(bad)?;
    let messages = state
        .messages
        .iter()
        .map(serde_json::to_vec)
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    let summary = summarize(&state.messages, state.meta.as_ref());
    let hashes = messages.iter().map(|m| crate::runs::sha256(m)).collect();
    Ok(Encoded {
        head,
        messages,
        hashes,
        updated_at: pg_text(state.updated_at.as_str()),
        updated_ms: state.updated_at.unix_millis(),
        run_id: pg_opt(state.run_id.as_deref()),
        message_count: i64::try_from(summary.message_count).unwrap_or(i64::MAX),
        last_user_message: pg_opt(summary.last_user_message.as_deref()),
        workspace_norm: summary
            .workspace_root
            .as_deref()
            .map(|w| pg_text(&normalize_workspace_root(w))),
        workspace_root: pg_opt(summary.workspace_root.as_deref()),
    })
}

/// What a save or delete transaction decided.
enum Cas<T> {
    Done(T),
    Conflict(Option<Version>),
}

fn current_version(tx: &mut Transaction<'_>, id: &str) -> Result<Option<String>, PgError> {
    tx.query_opt(
        "SELECT version FROM sessions WHERE session_id = $1 FOR UPDATE",
        &[&id],
    )
    .map_err(query("lock the session row"))?
    .map(|r| r.col(0))
    .transpose()
}

fn save_tx(
    tx: &mut Transaction<'_>,
    id: &str,
    enc: &Encoded,
    expected: &Expected,
    new_version: &str,
    host: &str,
) -> Result<Cas<()>, PgError> {
    let current = current_version(tx, id)?;
    // Our own earlier attempt, whose acknowledgement was lost: done.
    if current.as_deref() == Some(new_version) {
        return Ok(Cas::Done(()));
    }
    let ok = match (expected, &current) {
        (Expected::Any, _) => true,
        (Expected::Absent, None) => true,
        (Expected::Version(v), Some(c)) => v.as_str() == c,
        _ => false,
    };
    if !ok {
        return Ok(Cas::Conflict(current.map(Version::new)));
    }
    let params: [&(dyn postgres::types::ToSql + Sync); 12] = [
        &id,
        &new_version,
        &enc.updated_at,
        &enc.updated_ms,
        &enc.run_id,
        &enc.message_count,
        &enc.last_user_message,
        &enc.workspace_root,
        &enc.workspace_norm,
        &enc.head,
        &host,
        &(current.is_some()),
    ];
    if current.is_none() {
        let inserted = tx
            .execute(
                "INSERT INTO sessions (session_id, version, generation, updated_at, updated_ms, \
                 run_id, message_count, last_user_message, workspace_root, workspace_norm, head, \
                 origin_host) \
                 SELECT $1, $2, 1, $3, $4, $5, $6, $7, $8, $9, $10, $11 WHERE NOT $12 \
                 ON CONFLICT (session_id) DO NOTHING",
                &params,
            )
            .map_err(query("insert the session"))?;
        if inserted == 0 {
            // Created by someone else since our look: compare with theirs.
            let found = current_version(tx, id)?;
            if !matches!(expected, Expected::Any) {
                return Ok(Cas::Conflict(found.map(Version::new)));
            }
            return save_tx(tx, id, enc, expected, new_version, host);
        }
    } else {
        tx.execute(
            "UPDATE sessions SET version = $2, generation = generation + 1, updated_at = $3, \
             updated_ms = $4, run_id = $5, message_count = $6, last_user_message = $7, \
             workspace_root = $8, workspace_norm = $9, head = $10, origin_host = $11, \
             saved_at = now() WHERE session_id = $1 AND $12",
            &params,
        )
        .map_err(query("update the session"))?;
    }
    // Messages are rewritten from the first one that differs (a conversation that only grew
    // costs the new messages, a compaction rewrites the rest).
    let stored: Vec<Vec<u8>> = if current.is_some() {
        tx.query(
            "SELECT data_sha FROM session_messages WHERE session_id = $1 ORDER BY idx",
            &[&id],
        )
        .map_err(query("read the message hashes"))?
        .iter()
        .map(|r| r.col(0))
        .collect::<Result<_, _>>()?
    } else {
        Vec::new()
    };
    let keep = stored
        .iter()
        .zip(&enc.hashes)
        .take_while(|(a, b)| a == b)
        .count();
    let keep_i64 = i64::try_from(keep).unwrap_or(i64::MAX);
    if stored.len() > keep {
        tx.execute(
            "DELETE FROM session_messages WHERE session_id = $1 AND idx >= $2",
            &[&id, &keep_i64],
        )
        .map_err(query("replace the messages"))?;
    }
    if enc.messages.len() > keep {
        let idx: Vec<i64> = (keep..enc.messages.len())
            .map(|i| i64::try_from(i).unwrap_or(i64::MAX))
            .collect();
        tx.execute(
            "INSERT INTO session_messages (session_id, idx, data, data_sha) \
             SELECT $1, * FROM unnest($2::int8[], $3::bytea[], $4::bytea[])",
            &[&id, &idx, &&enc.messages[keep..], &&enc.hashes[keep..]],
        )
        .map_err(query("insert the messages"))?;
        crate::search::index_messages(tx, id, &enc.messages, keep)?;
    }
    Ok(Cas::Done(()))
}

fn load_tx(client: &mut postgres::Client, id: &str) -> Result<Option<StoredSession>, PgError> {
    let mut tx = client
        .build_transaction()
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .map_err(query("begin a read"))?;
    let Some(row) = tx
        .query_opt(
            "SELECT version, head FROM sessions WHERE session_id = $1",
            &[&id],
        )
        .map_err(query("load the session"))?
    else {
        return Ok(None);
    };
    let version: String = row.col(0)?;
    let head: Vec<u8> = row.col(1)?;
    let rows = tx
        .query(
            "SELECT idx, data FROM session_messages WHERE session_id = $1 ORDER BY idx",
            &[&id],
        )
        .map_err(query("load the messages"))?;
    tx.commit().map_err(query("end a read"))?;
    let mut notes = Vec::new();
    let mut damage = Vec::new();
    let mut state = match parse_session_state(&head) {
        Ok(p) => p.value,
        Err(e) => {
            // The stored head is not a state (written by something else): keep what can be
            // kept, say so.
            notes.push(format!("the stored session head does not parse: {e}"));
            SessionState {
                session_id: id.to_owned(),
                updated_at: Timestamp::from_raw(""),
                ..SessionState::default()
            }
        }
    };
    let mut offset = 0u64;
    for (line, r) in rows.iter().enumerate() {
        let data: &[u8] = r.col(1)?;
        match parse_message(data) {
            Ok(p) => state.messages.push(p.value),
            Err(e) => damage.push(SessionDamage {
                line: Some(line as u64 + 1),
                offset,
                kind: "corrupt".to_owned(),
                kept: false,
                detail: e.to_string(),
            }),
        }
        offset += data.len() as u64 + 1;
    }
    Ok(Some(StoredSession {
        state,
        version: Version::new(version),
        damage,
        notes,
    }))
}

/// A session listing cursor: `pgs:<len>:<updated_at><session_id>`.
fn cursor_token(updated: &str, id: &str) -> String {
    format!("pgs:{}:{updated}{id}", updated.len())
}

fn parse_cursor(token: &str) -> Option<(String, String)> {
    let rest = token.strip_prefix("pgs:")?;
    let (len, rest) = rest.split_once(':')?;
    let len: usize = len.parse().ok()?;
    if len > rest.len() || !rest.is_char_boundary(len) {
        return None;
    }
    let (updated, id) = rest.split_at(len);
    (!id.is_empty()).then(|| (updated.to_owned(), id.to_owned()))
}

impl PgBackend {
    fn conflict(id: &str, expected: &Expected, found: Option<Version>) -> StorageError {
        StorageError::VersionConflict {
            session_id: id.to_owned(),
            expected: expected.clone(),
            found,
        }
    }
}

impl SessionStore for PgBackend {
    fn load_session(&self, session_id: &str) -> Result<Option<StoredSession>, StorageError> {
        checked_id(session_id)?;
        let id = session_id.to_owned();
        self.pool
            .run(true, move |s| load_tx(s.client()?, &id))
            .map_err(|e| storage("load", Target::session(session_id), e))
    }

    fn save_session(
        &self,
        state: &SessionState,
        expected: &Expected,
    ) -> Result<Version, StorageError> {
        let id = state.session_id.clone();
        checked_id(&id)?;
        let enc = encode(state).map_err(|e| storage("save", Target::session(&id), e))?;
        // Made here, so that a retry after a lost acknowledgement recognises its own save.
        let new_version = uuid::Uuid::new_v4().simple().to_string();
        let host = self.options.origin_host.clone();
        let (sid, exp, nv) = (id.clone(), expected.clone(), new_version.clone());
        let out = self
            .pool
            .run(true, move |s| {
                let client = s.client()?;
                let mut tx = client.transaction().map_err(query("begin a save"))?;
                let out = save_tx(&mut tx, &sid, &enc, &exp, &nv, &host)?;
                match out {
                    Cas::Done(()) => tx.commit().map_err(query("commit a save"))?,
                    Cas::Conflict(_) => tx.rollback().map_err(query("roll back a save"))?,
                }
                Ok(out)
            })
            .map_err(|e| storage("save", Target::session(&id), e))?;
        match out {
            Cas::Done(()) => Ok(Version::new(new_version)),
            Cas::Conflict(found) => Err(PgBackend::conflict(&id, expected, found)),
        }
    }

    fn list_sessions(&self, q: &SessionListQuery) -> Result<SessionListPage, StorageError> {
        let after = match &q.after {
            Some(c) => {
                Some(
                    parse_cursor(c.as_str()).ok_or_else(|| StorageError::InvalidCursor {
                        token: c.as_str().to_owned(),
                    })?,
                )
            }
            None => None,
        };
        let (after_updated, after_id) = after.unzip();
        let workspace = q
            .workspace
            .as_deref()
            .map(|w| pg_text(&normalize_workspace_root(w)));
        let limit = q
            .limit
            .map(|l| i64::try_from(l).unwrap_or(i64::MAX).saturating_add(1));
        let rows = self
            .pool
            .run(true, move |s| {
                let rows = s
                    .client()?
                    .query(
                        "SELECT session_id, updated_at, run_id, message_count, last_user_message, \
                         workspace_root FROM sessions \
                         WHERE ($1::text IS NULL OR workspace_norm = $1) \
                         AND ($2::text IS NULL OR (updated_at, session_id) < ($2, $3::text)) \
                         ORDER BY updated_at DESC, session_id DESC LIMIT $4",
                        &[&workspace, &after_updated, &after_id, &limit],
                    )
                    .map_err(query("list sessions"))?;
                rows.iter()
                    .map(|r| {
                        let count: i64 = r.col(3)?;
                        Ok(SessionStateSummary {
                            session_id: r.col(0)?,
                            updated_at: Timestamp::from_raw(r.col::<String>(1)?),
                            run_id: r.col(2)?,
                            message_count: Some(u64::try_from(count).unwrap_or(0)),
                            last_user_message: r.col(4)?,
                            workspace_root: r.col(5)?,
                            ..SessionStateSummary::default()
                        })
                    })
                    .collect::<Result<Vec<_>, PgError>>()
            })
            .map_err(|e| storage("list sessions of", Target::Store, e))?;
        let mut sessions = rows;
        let mut next_cursor = None;
        if let Some(l) = q.limit
            && sessions.len() > l
        {
            sessions.truncate(l);
            next_cursor = sessions
                .last()
                .map(|s| PageCursor::new(cursor_token(s.updated_at.as_str(), &s.session_id)));
        }
        Ok(SessionListPage {
            sessions,
            next_cursor,
            notes: Vec::new(),
        })
    }

    fn delete_session(&self, session_id: &str, expected: &Expected) -> Result<bool, StorageError> {
        checked_id(session_id)?;
        let (id, exp) = (session_id.to_owned(), expected.clone());
        // Not retried on a lost connection: a delete that went through would then look like
        // a conflict.
        let out = self
            .pool
            .run(false, move |s| {
                let client = s.client()?;
                let mut tx = client.transaction().map_err(query("begin a delete"))?;
                let current = current_version(&mut tx, &id)?;
                let ok = match (&exp, &current) {
                    (Expected::Any, _) | (Expected::Absent, None) => true,
                    (Expected::Version(v), Some(c)) => v.as_str() == c,
                    _ => false,
                };
                if !ok {
                    tx.rollback().map_err(query("roll back a delete"))?;
                    return Ok(Cas::Conflict(current.map(Version::new)));
                }
                tx.execute("DELETE FROM session_messages WHERE session_id = $1", &[&id])
                    .map_err(query("delete the messages"))?;
                let n = tx
                    .execute("DELETE FROM sessions WHERE session_id = $1", &[&id])
                    .map_err(query("delete the session"))?;
                tx.commit().map_err(query("commit a delete"))?;
                Ok(Cas::Done(n > 0))
            })
            .map_err(|e| storage("delete", Target::session(session_id), e))?;
        match out {
            Cas::Done(found) => Ok(found),
            Cas::Conflict(found) => Err(PgBackend::conflict(session_id, expected, found)),
        }
    }

    fn acquire_lease(
        &self,
        session_id: &str,
        holder: &HolderInfo,
    ) -> Result<Box<dyn LeaseGuard>, StorageError> {
        checked_id(session_id)?;
        Ok(Box::new(lease::acquire(self, session_id, holder)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_garbage() {
        let t = cursor_token("2026-02-03T00:00:00.000Z", "s-a");
        assert_eq!(
            parse_cursor(&t),
            Some(("2026-02-03T00:00:00.000Z".to_owned(), "s-a".to_owned()))
        );
        for bad in ["", "pgs:", "pgs:5:ab", "pg:1:ab", "not a cursor"] {
            assert_eq!(parse_cursor(bad), None, "{bad}");
        }
    }
}

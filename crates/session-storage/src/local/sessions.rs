//! [`SessionStore`] over session-state's [`StateStore`](session_state::StateStore): versions
//! are generations, saves are `save_expecting`, deletes with an expected version are
//! `snapshot` + `delete_snapshotted` (compare-and-swap), leases are [`super::lease`]'s.

use session_schema::SessionState;
use session_state::{
    BatchPolicy, BatchSave, Generation, ListCursor, ListQuery, LoadNote, LoadSource, LoadedSession,
    MAX_BATCH_SESSIONS, MessageDamage, MessageDamageKind, StateError,
};

use super::{LocalBackend, lease, locked, state_err};
use crate::error::{Result, StorageError, Target, checked_id};
use crate::session_store::{LeaseGuard, SessionStore};
use crate::types::{
    Expected, HolderInfo, PageCursor, SessionDamage, SessionListPage, SessionListQuery,
    StoredSession, Version,
};

/// Version token of a session that has no `state.db` row (a legacy snapshot whose migration
/// failed): saving with it expects that there is still no row. Generations print as
/// `<counter>/<hex>`, so they never collide with it.
const NO_ROW: &str = "none";

fn token(generation: Option<Generation>) -> String {
    generation.map_or_else(|| NO_ROW.to_owned(), |g| g.to_string())
}

fn found_version(found: &str) -> Option<Version> {
    (found != NO_ROW).then(|| Version::new(found))
}

fn damage_kind(kind: &MessageDamageKind) -> String {
    match kind {
        MessageDamageKind::TornTail => "torn_tail".to_owned(),
        MessageDamageKind::Corrupt => "corrupt".to_owned(),
        MessageDamageKind::NotObject => "not_object".to_owned(),
        MessageDamageKind::MissingRole => "missing_role".to_owned(),
        MessageDamageKind::Shape => "shape".to_owned(),
        MessageDamageKind::CountMismatch { .. } => "count_mismatch".to_owned(),
        MessageDamageKind::FileChanged => "file_changed".to_owned(),
        other => format!("{other:?}").to_lowercase(),
    }
}

fn session_damage(d: &MessageDamage) -> SessionDamage {
    let detail = match &d.kind {
        MessageDamageKind::CountMismatch { expected, found } => format!(
            "{} (the row says {expected} messages, {found} found)",
            d.detail
        ),
        _ => d.detail.clone(),
    };
    SessionDamage {
        line: d.line,
        offset: d.byte_offset,
        kind: damage_kind(&d.kind),
        kept: d.kept,
        detail,
    }
}

fn note_text(n: &LoadNote) -> String {
    match n {
        LoadNote::MetaUnreadable { detail } => {
            format!("meta is not a JSON object or array and was left out: {detail}")
        }
        LoadNote::ColumnType { column, found } => {
            format!("column {column} holds {found}; the value was left out")
        }
        LoadNote::LegacyIdMismatch { inner } => {
            format!("the legacy snapshot names session {inner}; loaded under the requested id")
        }
        LoadNote::LegacySchemaVersion { found } => {
            format!("the legacy snapshot has schema_version {found}; read as 1")
        }
        LoadNote::MigrationFailed { detail } => {
            format!("migrating the legacy snapshot failed: {detail}")
        }
        LoadNote::RebuiltFromMessages { path, messages, .. } => format!(
            "the row was rebuilt from {} ({messages} messages)",
            path.display()
        ),
        LoadNote::UncommittedTail { bytes } => {
            format!("{bytes} bytes written after the last committed save were ignored")
        }
        LoadNote::LoneSurrogate {
            line,
            byte_offset,
            escape,
            ..
        } => format!(
            "line {line} holds a lone surrogate escape {escape} at byte offset {byte_offset}; loaded as U+FFFD, saved back as written"
        ),
        other => format!("{other:?}"),
    }
}

fn stored(loaded: LoadedSession) -> StoredSession {
    let mut notes = Vec::new();
    if let LoadSource::Legacy { migrated } = loaded.source {
        notes.push(if migrated {
            "loaded from a legacy snapshot, now migrated".to_owned()
        } else {
            "loaded from a legacy snapshot that could not be migrated".to_owned()
        });
    }
    notes.extend(loaded.notes.iter().map(note_text));
    StoredSession {
        version: Version::new(token(loaded.generation)),
        damage: loaded.damage.iter().map(session_damage).collect(),
        notes,
        state: loaded.state,
    }
}

impl LocalBackend {
    fn remember_generation(&self, session_id: &str, generation: Option<Generation>) {
        let mut map = locked(&self.generations);
        match generation {
            Some(g) => {
                if map.len() >= super::CACHE_MAX {
                    map.clear();
                }
                map.insert(session_id.to_owned(), (g.to_string(), g));
            }
            None => {
                map.remove(session_id);
            }
        }
    }

    /// The generation whose token is `version`, from what this backend last saw of the
    /// session or else from a load. `Err(found)` when the stored version is another.
    fn generation_for(
        &self,
        session_id: &str,
        version: &Version,
    ) -> Result<Result<Option<Generation>, Option<Version>>> {
        if version.as_str() == NO_ROW {
            return Ok(Ok(None));
        }
        if let Some((t, g)) = locked(&self.generations).get(session_id)
            && t == version.as_str()
        {
            return Ok(Ok(Some(*g)));
        }
        let current = self.current(session_id)?;
        Ok(match current {
            Some(Some(g)) if g.to_string() == version.as_str() => Ok(Some(g)),
            Some(g) => Err(Some(Version::new(token(g)))),
            None => Err(None),
        })
    }

    /// The stored generation: `None` when there is no session, `Some(None)` for one without
    /// a row.
    fn current(&self, session_id: &str) -> Result<Option<Option<Generation>>> {
        let loaded = self
            .store
            .load(session_id)
            .map_err(|e| state_err("load", Target::session(session_id), e))?;
        let generation = loaded.map(|l| l.generation);
        if let Some(g) = generation {
            self.remember_generation(session_id, g);
        }
        Ok(generation)
    }

    fn conflict(session_id: &str, expected: &Expected, found: Option<Version>) -> StorageError {
        StorageError::VersionConflict {
            session_id: session_id.to_owned(),
            expected: expected.clone(),
            found,
        }
    }

    /// [`SessionStore::save_session`], or with `kept` [`SessionStore::save_session_appended`].
    fn save_one(
        &self,
        state: &SessionState,
        expected: &Expected,
        kept: Option<usize>,
    ) -> Result<Version> {
        let id = state.session_id.as_str();
        checked_id(id)?;
        self.check_writable("save")?;
        let expect = match expected {
            Expected::Any => None,
            Expected::Absent => Some(None),
            Expected::Version(v) => match self.generation_for(id, v)? {
                Ok(g) => Some(g),
                Err(found) => return Err(LocalBackend::conflict(id, expected, found)),
            },
        };
        let saved = match (expect, kept) {
            (None, None) => self.store.save(state),
            (Some(g), None) => self.store.save_expecting(state, g),
            (None, Some(k)) => self.store.save_appended(state, k),
            (Some(g), Some(k)) => self.store.save_appended_expecting(state, g, k),
        };
        match saved {
            Ok(report) => {
                self.remember_generation(id, Some(report.generation));
                Ok(Version::new(report.generation.to_string()))
            }
            Err(StateError::Conflict { found, .. }) => {
                Err(LocalBackend::conflict(id, expected, found_version(&found)))
            }
            Err(e) => Err(state_err("save", Target::session(id), e)),
        }
    }
}

impl SessionStore for LocalBackend {
    fn load_session(&self, session_id: &str) -> Result<Option<StoredSession>> {
        checked_id(session_id)?;
        let loaded = self
            .store
            .load(session_id)
            .map_err(|e| state_err("load", Target::session(session_id), e))?;
        Ok(loaded.map(|l| {
            self.remember_generation(session_id, l.generation);
            stored(l)
        }))
    }

    fn save_session(&self, state: &SessionState, expected: &Expected) -> Result<Version> {
        self.save_one(state, expected, None)
    }

    /// Only the messages after `kept` are serialized and appended when this client made the
    /// session's last save (session-state's `save_appended_expecting`).
    fn save_session_appended(
        &self,
        state: &SessionState,
        expected: &Expected,
        kept: usize,
    ) -> Result<Version> {
        self.save_one(state, expected, Some(kept))
    }

    /// One `StateStore::save_batch` (one `state.db` transaction) per `MAX_BATCH_SESSIONS` (256)
    /// sessions, with
    /// `BatchPolicy::PerSession`.
    fn save_sessions(&self, saves: &[(&SessionState, Expected)]) -> Result<Vec<Result<Version>>> {
        self.check_writable("save")?;
        let mut results: Vec<Option<Result<Version>>> = Vec::with_capacity(saves.len());
        let mut batch: Vec<(usize, BatchSave<'_>)> = Vec::with_capacity(saves.len());
        for (i, (state, expected)) in saves.iter().enumerate() {
            let id = state.session_id.as_str();
            let expect = match checked_id(id).and_then(|()| match expected {
                Expected::Any => Ok(Ok(None)),
                Expected::Absent => Ok(Ok(Some(None))),
                Expected::Version(v) => self.generation_for(id, v).map(|r| r.map(Some)),
            }) {
                Ok(Ok(expect)) => expect,
                Ok(Err(found)) => {
                    results.push(Some(Err(LocalBackend::conflict(id, expected, found))));
                    continue;
                }
                Err(e) => {
                    results.push(Some(Err(e)));
                    continue;
                }
            };
            results.push(None);
            batch.push((
                i,
                match expect {
                    None => BatchSave::new(state),
                    Some(g) => BatchSave::expecting(state, g),
                },
            ));
        }
        for chunk in batch.chunks(MAX_BATCH_SESSIONS) {
            let saves_of_chunk: Vec<BatchSave<'_>> = chunk.iter().map(|(_, b)| *b).collect();
            let report = self
                .store
                .save_batch(&saves_of_chunk, BatchPolicy::PerSession)
                .map_err(|e| state_err("save", Target::Store, e))?;
            for ((i, b), saved) in chunk.iter().zip(report.saves) {
                let id = b.state().session_id.as_str();
                let result = match saved {
                    Ok(report) => {
                        self.remember_generation(id, Some(report.generation));
                        Ok(Version::new(report.generation.to_string()))
                    }
                    Err(StateError::Conflict { found, .. }) => {
                        let expected = saves.get(*i).map_or(Expected::Any, |s| s.1.clone());
                        Err(LocalBackend::conflict(id, &expected, found_version(&found)))
                    }
                    Err(e) => Err(state_err("save", Target::session(id), e)),
                };
                if let Some(slot) = results.get_mut(*i) {
                    *slot = Some(result);
                }
            }
        }
        Ok(results
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| {
                    Err(StorageError::backend(
                        "save",
                        Target::Store,
                        StateError::InvalidBatch {
                            detail: "a session was neither saved nor refused".to_owned(),
                        },
                    ))
                })
            })
            .collect())
    }

    fn list_sessions(&self, query: &SessionListQuery) -> Result<SessionListPage> {
        let mut q = ListQuery::all();
        if let Some(w) = &query.workspace {
            q = q.workspace(w.clone());
        }
        if let Some(l) = query.limit {
            q = q.limit(l);
        }
        if let Some(c) = &query.after {
            let cursor = ListCursor::from_token(c.as_str())
                .map_err(|e| state_err("list sessions of", Target::Store, e))?;
            q = q.after(cursor);
        }
        let page = self
            .store
            .list(&q)
            .map_err(|e| state_err("list sessions of", Target::Store, e))?;
        Ok(SessionListPage {
            sessions: page.entries.into_iter().map(|e| e.summary).collect(),
            next_cursor: page.next_cursor.map(|c| PageCursor::new(c.to_token())),
            notes: page
                .diagnostics
                .iter()
                .map(|d| format!("{}: {}", d.path.display(), d.detail))
                .collect(),
        })
    }

    fn delete_session(&self, session_id: &str, expected: &Expected) -> Result<bool> {
        checked_id(session_id)?;
        self.check_writable("delete")?;
        let target = || Target::session(session_id);
        let report = match expected {
            Expected::Any => self
                .store
                .delete(session_id)
                .map_err(|e| state_err("delete", target(), e))?,
            Expected::Absent => {
                // Nothing to delete if there is nothing; a session is a conflict.
                return match self.current(session_id)? {
                    None => Ok(false),
                    Some(g) => Err(LocalBackend::conflict(
                        session_id,
                        expected,
                        Some(Version::new(token(g))),
                    )),
                };
            }
            Expected::Version(v) => {
                // Compare-and-swap: the session as it is now, deleted only if it is still
                // exactly that (row generation, messages file, legacy snapshot) when the
                // delete runs, under the session's lease and the database write lock.
                let snapshot = self
                    .store
                    .snapshot(session_id)
                    .map_err(|e| state_err("delete", target(), e))?;
                let Some(snapshot) = snapshot else {
                    return Err(LocalBackend::conflict(session_id, expected, None));
                };
                let found = Version::new(token(snapshot.loaded.generation));
                if &found != v {
                    self.remember_generation(session_id, snapshot.loaded.generation);
                    return Err(LocalBackend::conflict(session_id, expected, Some(found)));
                }
                match self.store.delete_snapshotted(&snapshot) {
                    Ok(report) => report,
                    Err(StateError::Conflict { .. }) => {
                        // Changed between the snapshot and the delete: say what it is now.
                        let found = self.current(session_id)?.map(|g| Version::new(token(g)));
                        return Err(LocalBackend::conflict(session_id, expected, found));
                    }
                    Err(e) => return Err(state_err("delete", target(), e)),
                }
            }
        };
        self.remember_generation(session_id, None);
        Ok(report.found())
    }

    fn acquire_lease(&self, session_id: &str, holder: &HolderInfo) -> Result<Box<dyn LeaseGuard>> {
        checked_id(session_id)?;
        let guard = lease::acquire(&self.store, session_id, holder)?;
        Ok(Box::new(guard))
    }
}

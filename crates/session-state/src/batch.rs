//! Saving sessions: the steps of a save, for one session ([`StateStore::save`]) or for many in
//! one commit ([`StateStore::save_batch`]).
//!
//! A save runs in phases, each over every session of the batch before the next one starts
//! (crate README, "Crash consistency" and "Batched saves"):
//!
//! 1. *prepare* (no lock): serialize the new lines, the summary and `meta_json`;
//! 2. *plan* (under the write lock, `BEGIN IMMEDIATE`): read the stored row, check the
//!    compare-and-swap, complete an interrupted rename, decide between append and rewrite;
//! 3. *write*: name every appending session in `messages/.append-intent`, then cut uncommitted
//!    tails, append the new lines or write the temp file of a rewrite; with
//!    `SaveDurability::Sync`, start the writeback of the written bytes (a hint,
//!    `fsutil::start_writeback`);
//! 4. *rows*: every session's `session_state` row and `session_files` bookkeeping in the one
//!    transaction, while the disk writes the files back (nothing of it is visible to another
//!    connection, or durable, before the `COMMIT` of phase 5);
//! 5. *sync and commit* (the syncs with `SaveDurability::Sync`): `fdatasync` of every appended
//!    file, `fsync` of every temp file, then one `fsync` of `messages/` when a file was
//!    created in it (a new messages file or a temp file); then the transaction's `COMMIT`
//!    (one WAL sync for the whole batch), so the rows are never durable before the bytes they
//!    describe;
//! 6. *finish*: rename the temp files of rewrites over their messages files, one directory
//!    `fsync` after them.
//!
//! A failure in phases 3–5 takes back what every session of the batch wrote; a crash leaves
//! each session at its complete old state (before the commit) or its complete new state (after).

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, params};
use session_schema::{Num, RawJson, SessionState};

use crate::column::{OwnedValue, owned_row};
use crate::db::{WriteTx, db_err, row_fingerprint};
use crate::error::{Result, StateError};
use crate::fault_point::FaultPoint;
use crate::fsutil::{self, EMPTY_DIGEST, FileIdentity};
use crate::lease_check::{LeaseCheck, MAX_PAUSE};
use crate::messages::{Lines, ReadMessages, parse_messages};
use crate::pending_base::Base;
use crate::recovery::Uncommitted;
use crate::store::{StateStore, checked};
use crate::stored::{ROW_COLUMNS, ROW_NAMES};
use crate::summary::{Summary, summarize_serialized};
use crate::types::{DeferredRename, Generation, IoStep, Recovery, SaveMode, SaveReport};

/// A text value to bind, or `NULL`.
fn text(t: Option<&str>) -> ValueRef<'_> {
    t.map_or(ValueRef::Null, |t| ValueRef::Text(t.as_bytes()))
}

/// An integer value to bind, or `NULL`.
fn int(i: Option<i64>) -> ValueRef<'static> {
    i.map_or(ValueRef::Null, ValueRef::Integer)
}

/// Writes one row in place: `update` (unless `exists` is false: no row can be there), then
/// `insert` when it changed no row. Neither needs the statement journal that an upsert with
/// `RETURNING` (a trigger to SQLite) opens and fills with every page it touches.
fn update_or_insert(
    conn: &Connection,
    update: &str,
    insert: &str,
    params: &[&dyn rusqlite::ToSql],
    exists: bool,
) -> rusqlite::Result<()> {
    let updated = if exists {
        conn.prepare_cached(update)?.execute(params)?
    } else {
        0
    };
    if updated == 0 {
        conn.prepare_cached(insert)?.execute(params)?;
    }
    Ok(())
}

/// Most sessions in one [`StateStore::save_batch`]. A batch holds one file descriptor per
/// session until its commit (256 stay well inside the usual limit of 1024 per process), and
/// `messages/.append-intent` names every appending session (at most 256 × 129 bytes).
pub const MAX_BATCH_SESSIONS: usize = 256;

/// One session's save in a [`StateStore::save_batch`]: the state to store and, for a
/// compare-and-swap, the generation the stored session must still have.
#[derive(Debug, Clone, Copy)]
pub struct BatchSave<'a> {
    pub(crate) state: &'a SessionState,
    /// `None`: last writer wins ([`StateStore::save`]); `Some(expected)`: as
    /// [`StateStore::save_expecting`].
    pub(crate) expected: Option<Option<Generation>>,
}

impl<'a> BatchSave<'a> {
    /// Saves `state` whatever is stored (last writer wins, like [`StateStore::save`]).
    pub fn new(state: &'a SessionState) -> BatchSave<'a> {
        BatchSave {
            state,
            expected: None,
        }
    }

    /// Saves `state` only if the stored session still has generation `expected` (`None`: the
    /// session must not exist yet), like [`StateStore::save_expecting`].
    pub fn expecting(state: &'a SessionState, expected: Option<Generation>) -> BatchSave<'a> {
        BatchSave {
            state,
            expected: Some(expected),
        }
    }

    /// The state to save.
    pub fn state(&self) -> &'a SessionState {
        self.state
    }
}

/// What [`StateStore::save_batch`] does when one session of the batch cannot be saved (a
/// compare-and-swap [`StateError::Conflict`], an unsafe id, a message that does not
/// serialize, a session whose lease another holder has, …: anything found before the batch
/// writes its first byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum BatchPolicy {
    /// Only that session fails: its slot of [`BatchReport::saves`] holds the error, nothing is
    /// written for it, and the other sessions are saved and committed together.
    #[default]
    PerSession,
    /// The whole batch fails with that session's error and nothing of any session is written:
    /// the batch commits every session or none.
    AllOrNothing,
}

/// What [`StateStore::save_batch`] did.
#[derive(Debug)]
#[non_exhaustive]
pub struct BatchReport {
    /// One result per session, in the order of the batch: the session's [`SaveReport`], or
    /// (with [`BatchPolicy::PerSession`]) why that session alone was not saved.
    pub saves: Vec<Result<SaveReport>>,
    /// Other sessions' uncommitted tails (left by a crashed save) cut before this batch
    /// appended (see [`Recovery::TailCut`]).
    pub recovery: Vec<Recovery>,
}

impl BatchReport {
    /// Number of sessions saved (committed) by the batch.
    pub fn saved(&self) -> usize {
        self.saves.iter().filter(|r| r.is_ok()).count()
    }
}

/// One session's save, prepared before the write lock (CPU work only).
struct Prepared<'a> {
    state: &'a SessionState,
    id: &'a str,
    expected: Option<Option<Generation>>,
    /// What this store's cache says it committed: `(generation, messages)`.
    cached: Option<(Generation, usize)>,
    lines: Lines,
    meta_json: Option<String>,
    /// `meta_json` as parsed for the summary.
    meta: Option<RawJson>,
    summary: Summary,
    /// The summary took the last user message of the remembered prefix from the save cache
    /// (to be looked for again if the plan finds the cache out of date).
    summary_from_cache: bool,
    schema_version: i64,
    main: PathBuf,
}

/// What the plan under the lock decided for one session.
struct Planned {
    new_counter: u64,
    /// The session has a `session_state` row (read under this transaction's write lock).
    row_exists: bool,
    cache_valid: bool,
    /// Where the new lines go (`(lines kept, committed length, committed digest)`), or `None`
    /// for a rewrite.
    append_from: Option<(usize, u64, u64)>,
    /// The stored list as read from the file when it had to be read (a rewrite keeps the
    /// written form of unchanged lines).
    earlier: Option<ReadMessages>,
    recovery: Vec<Recovery>,
    /// The messages file as the plan opened it (read-write) to check it, with its length
    /// then: the append writes through it instead of opening the file again.
    opened: Option<(File, u64)>,
}

/// What the file side of one session's save wrote, before the commit.
struct Staged {
    mode: SaveMode,
    bytes_written: u64,
    /// The committed length and digest chain of the messages file after the commit.
    file_len: u64,
    file_digest: u64,
    /// `stat` of the written file, taken after its sync.
    identity: FileIdentity,
    /// The temp file of a rewrite (a name inside `messages/`).
    pending_file: Option<String>,
    /// What the sync phase syncs: the appended file (open in [`Slot::uncommitted`], so
    /// that a session holds one descriptor) or the temp file of a rewrite.
    to_sync: Option<ToSync>,
    /// The messages directory must be synced (a file was created in it).
    dir_sync: bool,
    /// The batch's row generation of the session after the commit.
    row: u64,
}

/// One session of a batch on its way through the phases.
struct Slot<'a> {
    prepared: Prepared<'a>,
    planned: Planned,
    staged: Option<Staged>,
    uncommitted: Uncommitted,
}

impl StateStore {
    /// Saves many sessions with one commit: one SQLite transaction (one WAL sync) for all of
    /// their rows, after every session's messages file was written and, with
    /// [`crate::SaveDurability::Sync`], `fdatasync`ed (one directory `fsync` for the batch
    /// when files were created). For a runtime that saves many sessions at once; each save
    /// is what [`StateStore::save`] or [`StateStore::save_expecting`] would do for that
    /// session (append or rewrite, the same bytes), and each session is all-or-nothing: a
    /// crash at any point leaves every session of the batch at its complete old state (a
    /// crash before the commit) or its complete new state (after it), as `load`, the
    /// reference's reader and the next `open` see it (crate README, "Batched saves").
    ///
    /// A session that cannot be saved (a compare-and-swap conflict, an unsafe id, a message
    /// holding invalid raw JSON, another holder's lease, a first save over a messages file
    /// that does not start its list, an unreadable file) fails alone with
    /// [`BatchPolicy::PerSession`] (its error in [`BatchReport::saves`]) or fails the whole
    /// batch with [`BatchPolicy::AllOrNothing`]; either way nothing is written for it.
    ///
    /// The lease of every session whose lease this store does not hold is checked under the
    /// write lock, like for a single save: one held by another holder refuses the session
    /// (or waits for a delete or housekeeping step to end).
    ///
    /// # Errors
    /// Of the whole batch, with nothing committed and every file write taken back:
    /// [`StateError::ReadOnly`]; [`StateError::InvalidBatch`] for a session that appears twice
    /// or more than [`MAX_BATCH_SESSIONS`] sessions; [`StateError::Io`] (a write, fsync or
    /// the append intent failing), [`StateError::Db`], [`StateError::Busy`]; with
    /// [`BatchPolicy::AllOrNothing`], the first session's error.
    ///
    /// # Examples
    ///
    /// ```
    /// use session_schema::{SessionState, Timestamp, parse_message};
    /// use session_state::{BatchPolicy, BatchSave, StateError, StateStore};
    ///
    /// let root = tempfile::tempdir()?;
    /// let store = StateStore::open(root.path())?;
    /// let session = |id: &str, text: &str| -> Result<SessionState, Box<dyn std::error::Error>> {
    ///     Ok(SessionState {
    ///         session_id: id.into(),
    ///         updated_at: Timestamp::from_raw("2026-02-03T12:00:00.000Z"),
    ///         messages: vec![parse_message(format!(r#"{{"role":"user","content":"{text}"}}"#).as_bytes())?.value],
    ///         ..Default::default()
    ///     })
    /// };
    /// let a = session("session-a", "first")?;
    /// let b = session("session-b", "second")?;
    /// let taken = session("session-c", "elsewhere")?;
    /// store.save(&taken)?;
    ///
    /// // Two new sessions and a compare-and-swap that fails: c exists already.
    /// let report = store.save_batch(
    ///     &[BatchSave::new(&a), BatchSave::expecting(&b, None), BatchSave::expecting(&taken, None)],
    ///     BatchPolicy::PerSession,
    /// )?;
    /// assert_eq!(report.saved(), 2);
    /// assert!(matches!(report.saves[2], Err(StateError::Conflict { .. })));
    /// assert_eq!(store.load("session-b")?.ok_or("missing")?.state.messages, b.messages);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn save_batch(&self, saves: &[BatchSave<'_>], policy: BatchPolicy) -> Result<BatchReport> {
        self.check_writable("save")?;
        if saves.len() > MAX_BATCH_SESSIONS {
            return Err(StateError::InvalidBatch {
                detail: format!(
                    "{} sessions, at most {MAX_BATCH_SESSIONS} per batch",
                    saves.len()
                ),
            });
        }
        let mut seen = std::collections::BTreeSet::new();
        for s in saves {
            if !seen.insert(s.state.session_id.as_str()) {
                return Err(StateError::InvalidBatch {
                    detail: format!("session {} appears twice", s.state.session_id),
                });
            }
        }
        self.widen_cache(saves.len());
        let items: Vec<SaveItem<'_>> = saves
            .iter()
            .map(|s| (s.state, s.expected, &[][..], None))
            .collect();
        self.save_many(&items, policy, true)
    }

    /// The one save of `state` (see [`StateStore::save_expecting`]); `expected` as in
    /// [`BatchSave`], `written`: lines (by message index, with `\n`) to write instead of
    /// serializing those messages (their form as written, lone surrogate escapes restored).
    /// `check_lease`: respect another holder's lease of the session (`false` for a migration
    /// inside `load`, which needs none).
    /// `kept`: the caller says `state.messages[..kept]` are unchanged since this store's last
    /// save of the session ([`StateStore::save_appended`]).
    pub(crate) fn save_one(
        &self,
        state: &SessionState,
        expected: Option<Option<Generation>>,
        written: &[(usize, Vec<u8>)],
        kept: Option<usize>,
        check_lease: bool,
    ) -> Result<SaveReport> {
        let mut report = self.save_many(
            &[(state, expected, written, kept)],
            BatchPolicy::AllOrNothing,
            check_lease,
        )?;
        let mut recovery = std::mem::take(&mut report.recovery);
        match report.saves.pop() {
            Some(Ok(mut one)) => {
                one.recovery.append(&mut recovery);
                Ok(one)
            }
            Some(Err(e)) => Err(e),
            None => Err(StateError::InvalidBatch {
                detail: "no result for the session".to_owned(),
            }),
        }
    }

    /// The phases of a save (module docs) over `items` (state, expected, lines as written).
    /// `check_leases`: respect the lease of every session that another holder has (checked
    /// under the write lock, see `lease_check`; a session whose lease this store holds is
    /// the holder's).
    fn save_many(
        &self,
        items: &[SaveItem<'_>],
        policy: BatchPolicy,
        check_leases: bool,
    ) -> Result<BatchReport> {
        self.check_writable("save")?;
        let mut results: Vec<Option<Result<SaveReport>>> = Vec::with_capacity(items.len());
        // CPU work before taking the write lock.
        let mut prepared: Vec<(usize, Prepared<'_>)> = Vec::new();
        for (i, &(state, expected, written, kept)) in items.iter().enumerate() {
            match self.prepare(state, expected, written, kept) {
                Ok(p) => {
                    results.push(None);
                    prepared.push((i, p));
                }
                Err(e) if policy == BatchPolicy::AllOrNothing => return Err(e),
                Err(e) => results.push(Some(Err(e))),
            }
        }

        let mut waiting_since: Option<Instant> = None;
        let mut pause = Duration::from_millis(1);
        let (slots, recovery) = loop {
            let conn = self.lock();
            let tx = WriteTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
            if check_leases
                && !self.leases_allow(&mut prepared, &mut results, policy, waiting_since)?
            {
                drop(tx);
                drop(conn);
                waiting_since.get_or_insert_with(Instant::now);
                std::thread::sleep(pause);
                pause = (pause * 2).min(MAX_PAUSE);
                continue;
            }
            let mut slots: Vec<(usize, Slot<'_>)> = Vec::with_capacity(prepared.len());
            for (i, mut p) in std::mem::take(&mut prepared) {
                match self.plan(&conn, &mut p) {
                    Ok(planned) => slots.push((
                        i,
                        Slot {
                            prepared: p,
                            planned,
                            staged: None,
                            uncommitted: Uncommitted::Nothing,
                        },
                    )),
                    Err(e) if policy == BatchPolicy::AllOrNothing => {
                        drop(tx);
                        return Err(e);
                    }
                    Err(e) => {
                        if let Some(r) = results.get_mut(i) {
                            *r = Some(Err(e));
                        }
                    }
                }
            }

            // Phases 3 to 5; a failure takes back every session's writes (an injected crash
            // leaves them, as a crash would).
            let mut recovery = Vec::new();
            if let Err(e) = self.stage_all(&conn, &mut slots, &mut recovery) {
                drop(tx);
                return Err(self.abandon_all(e, slots));
            }
            if slots.is_empty() {
                drop(tx);
            } else if let Err(e) = self.commit_save(tx) {
                // A failed COMMIT rolls back; make sure it did before taking the writes back.
                let landed = slots.iter().all(|(_, slot)| self.landed(&conn, slot));
                if !landed {
                    return Err(self.abandon_all(e, slots));
                }
            }
            drop(conn);
            break (slots, recovery);
        };

        // Committed: remember what was committed, then finish the rewrites.
        let mut finished = Vec::with_capacity(slots.len());
        for (i, slot) in slots {
            let Slot {
                prepared,
                planned,
                staged,
                uncommitted,
            } = slot;
            drop(uncommitted);
            let Some(staged) = staged else { continue };
            let generation = Generation {
                counter: planned.new_counter,
                row: staged.row,
            };
            self.remember(
                prepared.id,
                generation,
                &prepared.state.messages,
                prepared.summary.last_user_message.as_ref(),
                if planned.cache_valid {
                    prepared.cached
                } else {
                    None
                },
                staged.identity,
            );
            finished.push((i, prepared, planned, staged, generation));
        }
        if !finished.is_empty() {
            self.fault(FaultPoint::Committed)?;
        }
        let deferred = self.finish_renames(&finished)?;
        for ((i, _, planned, staged, generation), rename_deferred) in
            finished.into_iter().zip(deferred)
        {
            if let Some(r) = results.get_mut(i) {
                *r = Some(Ok(SaveReport {
                    generation,
                    mode: staged.mode,
                    bytes_written: staged.bytes_written,
                    rename_deferred,
                    recovery: planned.recovery,
                }));
            }
        }
        Ok(BatchReport {
            saves: results
                .into_iter()
                .map(|r| {
                    r.unwrap_or_else(|| {
                        Err(StateError::InvalidBatch {
                            detail: "the session was neither saved nor refused".to_owned(),
                        })
                    })
                })
                .collect(),
            recovery,
        })
    }

    /// Checks, under the write lock, that no other holder's lease stands in the way of the
    /// `prepared` sessions (see `lease_check`). A session another holder has open is refused:
    /// it leaves `prepared` with its error in `results` (with [`BatchPolicy::PerSession`]),
    /// or the whole save fails with that error. `Ok(false)`: a save or housekeeping step of
    /// another holder, or a holder that cannot be identified yet, has a session's lease: let
    /// go of the write lock, wait and check again (up to the waits of
    /// [`StateStore::check_lease_for_save`], counted from `since`).
    fn leases_allow(
        &self,
        prepared: &mut Vec<(usize, Prepared<'_>)>,
        results: &mut [Option<Result<SaveReport>>],
        policy: BatchPolicy,
        since: Option<Instant>,
    ) -> Result<bool> {
        let mut wait = false;
        let mut refused: Vec<(usize, StateError)> = Vec::new();
        for (k, (_, p)) in prepared.iter().enumerate() {
            match self.check_lease_for_save(p.id, since) {
                Ok(LeaseCheck::Free) => {}
                Ok(LeaseCheck::Wait) => wait = true,
                Ok(LeaseCheck::Busy(e)) | Err(e) => refused.push((k, e)),
            }
        }
        if policy == BatchPolicy::AllOrNothing
            && let Some((_, e)) = refused.drain(..).next()
        {
            return Err(e);
        }
        for (k, e) in refused.into_iter().rev() {
            let (i, _) = prepared.remove(k);
            if let Some(r) = results.get_mut(i) {
                *r = Some(Err(e));
            }
        }
        Ok(!wait)
    }

    /// Phase 1 of one session: serialization, summary and `meta_json` (no lock).
    fn prepare<'a>(
        &self,
        state: &'a SessionState,
        expected: Option<Option<Generation>>,
        written: &'a [(usize, Vec<u8>)],
        kept: Option<usize>,
    ) -> Result<Prepared<'a>> {
        let id = state.session_id.as_str();
        checked(id)?;
        // When this store committed a prefix of the list (checked by value, not by
        // serializing, or as the caller says), only the new messages are serialized; whether
        // that prefix is still the committed one is checked under the lock.
        let remembered = kept
            .and_then(|kept| self.cached_prefix_kept(id, &state.messages, kept))
            .or_else(|| self.cached_prefix(id, &state.messages));
        let cached = remembered.as_ref().map(|r| (r.generation, r.kept));
        let mut lines = match cached {
            Some((_, k)) if written.is_empty() => Lines::serialize_from(id, &state.messages, k)?,
            _ => Lines::serialize(id, &state.messages)?,
        };
        for (i, line) in written {
            lines.replace(*i, line);
        }
        let meta_json = match &state.meta {
            Some(m) => Some(
                String::from_utf8(crate::compact::compact_json(m.get().as_bytes())).map_err(
                    |e| StateError::Serialize {
                        session_id: id.to_owned(),
                        index: usize::MAX,
                        source: serde::de::Error::custom(e),
                    },
                )?,
            ),
            None => None,
        };
        let meta = match &meta_json {
            Some(m) => {
                Some(
                    RawJson::from_json(m.clone()).map_err(|source| StateError::Serialize {
                        session_id: id.to_owned(),
                        index: usize::MAX,
                        source,
                    })?,
                )
            }
            None => None,
        };
        // The new lines are serialized already (lines written as they were, with lone
        // surrogate escapes restored, are not used: the summary is of the values).
        // The remembered prefix's own summary stands for its messages (equal to the caller's,
        // by value or as the caller said).
        let known = remembered
            .filter(|_| written.is_empty())
            .map(|r| (r.kept, r.last_user));
        let summary_from_cache = known.is_some();
        let summary = summarize_serialized(
            &state.messages,
            meta.as_ref(),
            |i| {
                if written.is_empty() {
                    lines.line(i)
                } else {
                    None
                }
            },
            known,
        );
        let schema_version = state
            .schema_version
            .as_ref()
            .and_then(Num::as_i64)
            .unwrap_or(1);
        Ok(Prepared {
            state,
            id,
            expected,
            cached,
            lines,
            meta_json,
            meta,
            summary,
            summary_from_cache,
            schema_version,
            main: self.messages_path(id)?,
        })
    }

    /// Phase 2 of one session, inside the write transaction: compare-and-swap, completion of
    /// an interrupted rename, and the choice between append and rewrite. Writes nothing of
    /// this save.
    fn plan(&self, conn: &Connection, p: &mut Prepared<'_>) -> Result<Planned> {
        let id = p.id;
        let main = &p.main;
        let stored = self.read_stored(conn, id)?;
        let current = stored.as_ref().map(|s| s.generation);
        if let Some(expected) = p.expected
            && expected != current
        {
            return Err(StateError::Conflict {
                session_id: id.to_owned(),
                expected: expected.map_or_else(|| "none".to_owned(), |g| g.to_string()),
                found: current.map_or_else(|| "none".to_owned(), |g| g.to_string()),
            });
        }
        let files = stored.as_ref().and_then(|s| s.files.clone());
        // Complete a committed rewrite whose rename a crash interrupted, before touching the
        // file (its content is the committed one), once it is proven nobody saved since;
        // otherwise its temp file is kept aside.
        let mut recovery = Vec::new();
        if let Some(recorded) = stored.as_ref().and_then(|s| s.recorded.as_ref())
            && let Some(done) = self.roll_forward(id, stored.as_ref(), recorded)?
        {
            recovery.push(done);
        }
        let old_counter = current.map_or(0, |g| g.counter);
        // The counter comes from the database, which another tool may have written: wrap
        // instead of overflowing (a generation only needs to differ from the last one).
        let new_counter = old_counter.wrapping_add(1);

        // Append when our committed prefix is exactly the start of the new list.
        let cache_valid = match (p.cached, &files) {
            (Some((g, k)), Some(f)) => Some(g) == current && f.file_lines == k as u64,
            _ => false,
        };
        if p.lines.base != 0 && !cache_valid {
            p.lines = Lines::serialize(id, &p.state.messages)?;
        }
        if p.summary_from_cache && !cache_valid {
            // The prefix was taken as the caller said (`save_appended`) and another commit came
            // since: summarize the caller's whole list.
            let lines = &p.lines;
            p.summary =
                summarize_serialized(&p.state.messages, p.meta.as_ref(), |i| lines.line(i), None);
            p.summary_from_cache = false;
        }
        let lines = &p.lines;
        let messages = &p.state.messages;
        let mut earlier: Option<ReadMessages> = None;
        let mut opened: Option<(File, u64)> = None;
        let append_from: Option<(usize, u64, u64)> = match (&stored, &files) {
            // No row: a messages file already there is never cut or overwritten.
            (None, _) => Some(crate::adopt::first_save_base(id, main, messages)?),
            (Some(_), Some(f)) => {
                let n = usize::try_from(f.file_lines).unwrap_or(usize::MAX);
                let serialized_match = cache_valid
                    || (n <= lines.count() && lines.prefix(n) == (f.file_len, f.file_digest));
                // The bookkeeping says which bytes we committed; appending is only safe when
                // the file still holds exactly them (it may have been replaced, cut, extended
                // or edited since).
                if serialized_match {
                    let recorded = self.cached_identity(id, current);
                    let (holds, file) = self.holds_committed(main, f, recorded)?;
                    opened = file;
                    holds.then_some((n, f.file_len, f.file_digest))
                } else {
                    // The serialized list differs from the committed bytes, which may still
                    // hold the same messages (a line with repaired lone surrogates): compare
                    // the committed lines as parsed.
                    match self.read_committed(main, f)? {
                        Some(bytes) => {
                            let read = parse_messages(main, &bytes);
                            if read.is_prefix_of(&bytes, messages) {
                                Some((n, f.file_len, f.file_digest))
                            } else {
                                earlier = Some(read);
                                None
                            }
                        }
                        None => None,
                    }
                }
            }
            (Some(_), None) => {
                // A row the reference wrote (or an older tool): the whole file is what it
                // stored. Append when it is one clean message per line and those messages
                // start the new list.
                let bytes = fsutil::read_if_exists(main)?.unwrap_or_default();
                let read = parse_messages(main, &bytes);
                if read.is_prefix_of(&bytes, messages) {
                    let (digest, count) = fsutil::digest_lines(&bytes);
                    Some((
                        usize::try_from(count).unwrap_or(usize::MAX),
                        bytes.len() as u64,
                        digest,
                    ))
                } else {
                    earlier = Some(read);
                    None
                }
            }
        };
        Ok(Planned {
            new_counter,
            row_exists: stored.is_some(),
            cache_valid,
            append_from,
            earlier,
            recovery,
            opened: opened.filter(|_| append_from.is_some()),
        })
    }

    /// Phases 3 to 5 (before `COMMIT`) over every planned session.
    fn stage_all(
        &self,
        conn: &Connection,
        slots: &mut [(usize, Slot<'_>)],
        recovery: &mut Vec<Recovery>,
    ) -> Result<()> {
        // The files to append to, opened; the sessions that will have bytes past their
        // committed length until the commit are named in the append intent first.
        let mut targets: Vec<Option<AppendTarget>> = Vec::with_capacity(slots.len());
        let mut intent: Vec<&str> = Vec::new();
        for (_, slot) in slots.iter_mut() {
            let p = &slot.prepared;
            let Some((n, committed_len, _)) = slot.planned.append_from else {
                targets.push(None);
                continue;
            };
            let (file, created, actual) = match slot.planned.opened.take() {
                Some((file, len)) => (file, false, len),
                None => {
                    let (file, created) = fsutil::open_private_rw(&p.main)?;
                    let len = file
                        .metadata()
                        .map_err(|e| StateError::io("stat", &p.main, e))?
                        .len();
                    (file, created, len)
                }
            };
            slot.uncommitted = Uncommitted::Appended {
                file,
                path: p.main.clone(),
                committed_len,
                created,
            };
            let new_bytes = p.lines.concat(n);
            if !new_bytes.is_empty() || actual != committed_len {
                // Bytes past the committed length are taken back if the save fails, and cut
                // by the next open if it crashes.
                intent.push(p.id);
            }
            targets.push(Some(AppendTarget {
                actual,
                created,
                new_bytes,
            }));
        }
        if !intent.is_empty() {
            self.record_append_intent(conn, &intent, recovery)?;
        }

        // Writes.
        for ((_, slot), target) in slots.iter_mut().zip(targets) {
            let staged = match (target, &mut slot.uncommitted) {
                (Some(t), Uncommitted::Appended { file, .. }) => {
                    self.write_append(&slot.prepared, &slot.planned, file, t)?
                }
                // (An append target always has its file in `uncommitted`.)
                _ => self.write_temp(slot)?,
            };
            slot.staged = Some(staged);
        }

        // The rows, while the disk writes the files back (the commit point is the caller's
        // `COMMIT`, after the syncs below: nothing of the rows is visible or durable before).
        for (_, slot) in slots.iter_mut() {
            self.write_rows(conn, slot)?;
        }

        // Syncs: every file, then the directory once.
        let dir = self.messages_dir();
        let (mut created, mut temps) = (false, false);
        for (_, slot) in slots.iter_mut() {
            let Some(staged) = slot.staged.as_mut() else {
                continue;
            };
            let synced = match (staged.to_sync.take(), &slot.uncommitted) {
                (Some(ToSync::Temp(file)), _) => {
                    let path = staged
                        .pending_file
                        .as_ref()
                        .map_or_else(|| dir.clone(), |name| dir.join(name));
                    if self.sync() {
                        self.io().sync_all(IoStep::TempFsync, &file, &path)?;
                    }
                    self.fault(FaultPoint::TempSynced)?;
                    Some((file.metadata(), path))
                }
                (Some(ToSync::Appended), Uncommitted::Appended { file, path, .. }) => {
                    if self.sync() {
                        self.io().sync_data(IoStep::AppendFsync, file, path)?;
                    }
                    self.fault(FaultPoint::AppendSynced)?;
                    Some((file.metadata(), path.clone()))
                }
                _ => None,
            };
            if let Some((meta, path)) = synced {
                staged.identity =
                    FileIdentity::of(&meta.map_err(|e| StateError::io("stat", &path, e))?);
            }
            if staged.pending_file.is_some() {
                temps = true;
            } else if staged.dir_sync {
                created = true;
            }
        }
        if created || temps {
            if self.sync() {
                // One fsync of the directory serves the created files and the temp files.
                if created && temps {
                    self.io()
                        .check(IoStep::AppendDirFsync, "fsync directory", &dir)?;
                }
                let step = if temps {
                    IoStep::TempDirFsync
                } else {
                    IoStep::AppendDirFsync
                };
                self.io().sync_dir(step, &dir)?;
            }
            if created {
                self.fault(FaultPoint::AppendDirSynced)?;
            }
            if temps {
                self.fault(FaultPoint::TempDirSynced)?;
            }
        }

        Ok(())
    }

    /// Phase 3 of an appending session: cuts an uncommitted tail, writes the new lines.
    fn write_append(
        &self,
        p: &Prepared<'_>,
        planned: &Planned,
        file: &mut File,
        target: AppendTarget,
    ) -> Result<Staged> {
        let (n, committed_len, committed_digest) = planned.append_from.unwrap_or_default();
        let AppendTarget {
            actual,
            created,
            new_bytes,
        } = target;
        if actual != committed_len {
            // An uncommitted tail of a crashed save (checked by the plan: the committed bytes
            // before it are ours), or an orphan file of a session that has no row yet.
            self.io()
                .set_len(IoStep::TailTruncate, file, committed_len, &p.main)?;
            self.fault(FaultPoint::TailTruncated)?;
        }
        if !new_bytes.is_empty() {
            self.io().write_all_at(
                IoStep::AppendWrite,
                file,
                &new_bytes,
                committed_len,
                &p.main,
            )?;
            if self.sync() {
                // Written back while the rows are written (see `stage_all`).
                fsutil::start_writeback(file, committed_len, new_bytes.len() as u64);
            }
            self.fault(FaultPoint::AppendWritten)?;
        }
        let needs_sync = !new_bytes.is_empty() || actual != committed_len || created;
        // A file to sync gets its identity from the sync phase, after the `fdatasync`.
        let identity = if needs_sync {
            FileIdentity::default()
        } else {
            FileIdentity::of(
                &file
                    .metadata()
                    .map_err(|e| StateError::io("stat", &p.main, e))?,
            )
        };
        Ok(Staged {
            mode: SaveMode::Appended {
                messages: (p.lines.count().saturating_sub(n)) as u64,
            },
            bytes_written: new_bytes.len() as u64,
            file_len: committed_len + new_bytes.len() as u64,
            file_digest: p.lines.extend_digest(committed_digest, n),
            identity,
            pending_file: None,
            to_sync: needs_sync.then_some(ToSync::Appended),
            dir_sync: created,
            row: 0,
        })
    }

    /// Phase 3 of a rewriting session: the complete list to
    /// `messages/<id>.jsonl.g<generation>.tmp`, which becomes the committed content
    /// (`pending_file`) at the commit and is renamed over the main file after it.
    fn write_temp(&self, slot: &mut Slot<'_>) -> Result<Staged> {
        let p = &mut slot.prepared;
        if p.lines.base != 0 {
            p.lines = Lines::serialize(p.id, &p.state.messages)?;
        }
        if let Some(read) = &slot.planned.earlier {
            for (i, line) in read.unchanged_lines(&p.state.messages) {
                p.lines.replace(i, line);
            }
        }
        let tmp = self.temp_path(p.id, slot.planned.new_counter);
        self.io().check(IoStep::TempCreate, "create", &tmp)?;
        let mut f = fsutil::create_private_truncate(&tmp)?;
        slot.uncommitted = Uncommitted::Temp(tmp.clone());
        let all = p.lines.concat(0);
        self.io().write_all(IoStep::TempWrite, &mut f, &all, &tmp)?;
        if self.sync() {
            fsutil::start_writeback(&f, 0, all.len() as u64);
        }
        self.fault(FaultPoint::TempWritten)?;
        // The rename keeps the inode; it may change the ctime, which only costs the next save
        // one read of the committed bytes.
        let identity =
            FileIdentity::of(&f.metadata().map_err(|e| StateError::io("stat", &tmp, e))?);
        Ok(Staged {
            mode: SaveMode::Rewritten,
            bytes_written: all.len() as u64,
            file_len: p.lines.total_len(),
            file_digest: p.lines.extend_digest(EMPTY_DIGEST, 0),
            identity,
            pending_file: tmp.file_name().map(|n| n.to_string_lossy().into_owned()),
            to_sync: Some(ToSync::Temp(f)),
            dir_sync: true,
            row: 0,
        })
    }

    /// Phase 4 of one session: its `session_state` row and `session_files` bookkeeping,
    /// inside the batch's transaction.
    fn write_rows(&self, conn: &Connection, slot: &mut Slot<'_>) -> Result<()> {
        let p = &slot.prepared;
        let id = p.id;
        let new_counter = slot.planned.new_counter;
        let Some(staged) = slot.staged.as_mut() else {
            return Ok(());
        };
        // What the messages file holds while the rewrite is pending: the roll-forward of an
        // interrupted rename checks that nobody replaced it since.
        let pending_base = match &staged.pending_file {
            Some(_) => Some(Base::of_file(&p.main)?.encode(new_counter)),
            None => None,
        };
        let state = p.state;
        // In `ROW_COLUMNS` order.
        let bound: [ValueRef<'_>; 9] = [
            ValueRef::Text(id.as_bytes()),
            ValueRef::Text(state.updated_at.as_str().as_bytes()),
            text(state.run_id.as_deref()),
            int(state.invoke_seq),
            ValueRef::Integer(p.schema_version),
            text(p.meta_json.as_deref()),
            ValueRef::Integer(i64::try_from(p.summary.message_count).unwrap_or(i64::MAX)),
            text(p.summary.last_user_message.as_deref()),
            text(p.summary.workspace_root.as_deref()),
        ];
        let values = bound.map(ToSqlOutput::Borrowed);
        let params: [&dyn rusqlite::ToSql; 9] =
            values.each_ref().map(|v| v as &dyn rusqlite::ToSql);
        let row = if self.row_keeps_bound_values(conn)? {
            // The columns store the bound values as they are (see `row_keeps_bound_values`):
            // the row's fingerprint is theirs.
            update_or_insert(
                conn,
                "UPDATE session_state SET updated_at = ?2, run_id = ?3, invoke_seq = ?4, \
                 schema_version = ?5, meta_json = ?6, message_count = ?7, \
                 last_user_message = ?8, workspace_root = ?9 WHERE session_id = ?1",
                &format!(
                    "INSERT INTO session_state ({ROW_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                ),
                &params,
                slot.planned.row_exists,
            )
            .map_err(db_err(&self.db_path, "write session row"))?;
            row_fingerprint(&bound)
        } else {
            // The row as stored (after column affinity) comes back from the statement itself.
            conn.prepare_cached(&format!(
                "INSERT INTO session_state ({ROW_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
                 ON CONFLICT(session_id) DO UPDATE SET updated_at = excluded.updated_at, run_id = excluded.run_id, \
                 invoke_seq = excluded.invoke_seq, schema_version = excluded.schema_version, meta_json = excluded.meta_json, \
                 message_count = excluded.message_count, last_user_message = excluded.last_user_message, \
                 workspace_root = excluded.workspace_root \
                 RETURNING {ROW_COLUMNS}"
            ))
            .and_then(|mut stmt| {
                stmt.query_row(&params[..], |r| {
                    let values = owned_row(r, ROW_NAMES.len())?;
                    let refs: Vec<_> = values.iter().map(OwnedValue::as_ref).collect();
                    Ok(row_fingerprint(&refs))
                })
            })
            .map_err(db_err(&self.db_path, "write session row"))?
        };
        update_or_insert(
            conn,
            "UPDATE session_files SET generation = ?2, row_fingerprint = ?3, file_len = ?4, \
             file_lines = ?5, file_digest = ?6, pending_file = ?7, pending_base = ?8 \
             WHERE session_id = ?1",
            "INSERT INTO session_files (session_id, generation, row_fingerprint, file_len, \
             file_lines, file_digest, pending_file, pending_base) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                id,
                new_counter.cast_signed(),
                row.cast_signed(),
                staged.file_len.cast_signed(),
                i64::try_from(p.lines.count()).unwrap_or(i64::MAX),
                staged.file_digest.cast_signed(),
                staged.pending_file,
                pending_base,
            ],
            true,
        )
        .map_err(db_err(&self.db_path, "write session bookkeeping"))?;
        staged.row = row;
        Ok(())
    }

    /// Whether the session's save landed after all (read again after a failed `COMMIT`).
    fn landed(&self, conn: &Connection, slot: &Slot<'_>) -> bool {
        let Some(staged) = &slot.staged else {
            return false;
        };
        let generation = Generation {
            counter: slot.planned.new_counter,
            row: staged.row,
        };
        self.read_stored(conn, slot.prepared.id)
            .ok()
            .flatten()
            .is_some_and(|s| {
                s.generation == generation
                    && s.files.is_some_and(|f| {
                        f.file_len == staged.file_len && f.file_digest == staged.file_digest
                    })
            })
    }

    /// Takes back every session's uncommitted writes (not after an injected crash, which must
    /// leave everything as a crash would) and returns `e`. The sessions leave the save cache:
    /// their next save compares the whole list and removes a temp file this one may have left
    /// (see `finish_renames`).
    fn abandon_all(&self, e: StateError, slots: Vec<(usize, Slot<'_>)>) -> StateError {
        for (_, slot) in &slots {
            self.forget(slot.prepared.id);
        }
        if !matches!(e, StateError::InjectedFault { .. }) {
            for (_, slot) in slots {
                slot.uncommitted.take_back();
            }
        }
        e
    }

    /// Phase 6: renames the committed temp files over their messages files, then one
    /// directory `fsync`; removes a temp file a crashed rewrite may have left at the
    /// generation of an append. One entry per session: the rename that failed (the save is
    /// committed: `load` reads the temp file and the next open or save completes the rename).
    fn finish_renames(&self, finished: &[Finished<'_>]) -> Result<Vec<Option<DeferredRename>>> {
        let dir = self.messages_dir();
        let mut deferred: Vec<Option<DeferredRename>> = vec![None; finished.len()];
        let mut renamed = Vec::new();
        for (k, (_, p, planned, staged, _)) in finished.iter().enumerate() {
            let Some(name) = &staged.pending_file else {
                // A rewrite that crashed before its commit left its temp file at this
                // generation. None can have when this store made the last commit and holds the
                // session's lease: no other save of ours ran since (the lease keeps them out),
                // and a failed one of this store took its temp file back.
                if !(planned.cache_valid && self.leases.holds(p.id)) {
                    // Best effort: the save is committed.
                    let _ = fsutil::remove_if_exists(&self.temp_path(p.id, planned.new_counter));
                }
                continue;
            };
            let tmp = dir.join(name);
            match self.io().rename(IoStep::Rename, &tmp, &p.main) {
                Ok(()) => {
                    self.fault(FaultPoint::Renamed)?;
                    renamed.push((k, tmp));
                }
                // Renamed by another process's roll-forward.
                Err(StateError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    if let Some(d) = deferred.get_mut(k) {
                        *d = Some(DeferredRename {
                            temp: tmp,
                            error: Arc::new(e),
                        });
                    }
                }
            }
        }
        if !renamed.is_empty()
            && self.sync()
            && let Err(e) = self.io().sync_dir(IoStep::RenameDirFsync, &dir)
        {
            let error = Arc::new(e);
            for (k, tmp) in renamed {
                if let Some(d) = deferred.get_mut(k) {
                    *d = Some(DeferredRename {
                        temp: tmp,
                        error: error.clone(),
                    });
                }
            }
            return Ok(deferred);
        }
        if !renamed.is_empty() {
            self.fault(FaultPoint::RenameDirSynced)?;
        }
        Ok(deferred)
    }
}

/// One session of a save: the state, the compare-and-swap expectation (see
/// [`BatchSave::expected`]), lines to write as given and the caller's count of messages kept
/// since its last save (see [`StateStore::save_one`]).
type SaveItem<'a> = (
    &'a SessionState,
    Option<Option<Generation>>,
    &'a [(usize, Vec<u8>)],
    Option<usize>,
);

/// A committed session: its index in the batch and what each phase decided.
type Finished<'a> = (usize, Prepared<'a>, Planned, Staged, Generation);

/// What the sync phase syncs for one session.
enum ToSync {
    /// The appended messages file (open in [`Slot::uncommitted`]): `fdatasync`.
    Appended,
    /// The temp file of a rewrite: `fsync`.
    Temp(File),
}

/// A messages file opened for an append (the file itself is in [`Slot::uncommitted`]),
/// before anything is written to it.
struct AppendTarget {
    /// Its length when opened.
    actual: u64,
    /// Created by this save.
    created: bool,
    /// The lines to append.
    new_bytes: Vec<u8>,
}

//! [`RunCatalogue`] on PostgreSQL: one `bytea` row per line keyed by `(run_id, byte_offset)` (the run id
//! as the run's 8-byte `run_key`),
//! appends with compare-and-swap on the run's committed length under the lock of the run's tip
//! row (`run_tips`: what every append changes; the run row is rewritten only when an append
//! changes a listing column or the summary outside its tally),
//! streamed reads, stats and keyset listings from derived columns.

use std::io::{self, Read};
use std::sync::Arc;

use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::{ToSql, Type};
use postgres::{Statement, Transaction};
use session_jsonl::scan::{HEAD_LIMIT, HeaderFacts, TAIL_LINE_LIMIT, TAIL_PREFIX, scan_facts};
use session_jsonl::{Item, Reader, ReaderOptions, RunEndState};
use session_schema::{ErrorInfo, Record, Timestamp, parse_record};
use session_storage::{
    Appended, Extent, PageCursor, RunBytes, RunCatalogue, RunListPage, RunListQuery, RunStat,
    StorageError, Target, already_present, check_complete_lines, checked_id,
};
use sha2::{Digest, Sha256};

use crate::backend::PgBackend;
use crate::derive::{HeaderState, RunFold, RunTally};
use crate::error::RowExt;
use crate::error::{PgError, query, storage};
use crate::known::KnownRun;
use crate::pool::{Pool, Session};
use crate::search::{AppendDocs, RunDocColumns};
use crate::text::{bound_key, normalize_workspace_root, pg_opt, pg_text};

/// Bytes of lines fetched per round trip by a streamed read.
const READ_BATCH_BYTES: i64 = 4 << 20;
/// Lines fetched per round trip when scanning a run's tail backwards.
const TAIL_BATCH: i64 = 80;
/// Damaged lines skipped at the end before the tail scan gives up (as session-jsonl's).
const TAIL_MAX_DAMAGED: usize = 64;

/// The run-row part of a new run ([`SQL_CREATE`], [`SQL_CREATE_WITH`]): the run row and its
/// tip row, inserted whole with the columns of its first lines (`ON CONFLICT DO NOTHING`: no
/// row when the run exists). Parameters: `$1` run id, `$2` committed length, `$3` line
/// count, `$4` origin host, `$5`..`$8` session id, UTC start, outcome, workspace, `$9`
/// activity, `$10` tally, `$11` first line's hash, `$12` summary, `$13` last line's hash,
/// `$14` is_run.
macro_rules! create_rows {
    () => {
        "WITH new AS (INSERT INTO runs (run_id, origin_host, session_id, started_at_utc, \
         outcome, workspace_norm, summary, first_line_sha, is_run) \
         VALUES ($1, $4, $5, $6, $7, $8, $12, $11, $14) \
         ON CONFLICT (run_id) DO NOTHING RETURNING run_key), \
         tip AS (INSERT INTO run_tips (run_key, committed_len, line_count, activity_ms, tally, \
         last_line_sha) SELECT run_key, $2::int8, $3::int8, $9::int8, $10::bytea, $13::bytea \
         FROM new)"
    };
}
/// A new run's rows ([`create_rows`]); returns its run key, no row when the run exists.
const SQL_CREATE: &str = concat!(create_rows!(), " SELECT new.run_key FROM new");
/// The lock of an append's transaction: the run's tip row (which every writer of a run locks
/// first), with what it holds.
const SQL_LOCK: &str = "SELECT t.committed_len, t.line_count, t.run_key, t.tally \
     FROM runs r JOIN run_tips t ON t.run_key = r.run_key WHERE r.run_id = $1 FOR UPDATE OF t";
/// The run row's summary, read once its tip is locked (a statement of its own: its snapshot
/// then holds what the last writer of the run committed).
const SQL_SUMMARY: &str = "SELECT summary FROM runs WHERE run_key = $1";
const SQL_COPY: &str = "COPY run_lines (run_key, byte_offset, line_no, data, record_type, ts, damage) \
     FROM STDIN (FORMAT binary)";
const SQL_INSERT: &str = "INSERT INTO run_lines (run_key, byte_offset, line_no, data, record_type, ts, damage) \
     SELECT $1::int8, * FROM unnest($2::int8[], $3::int8[], $4::bytea[], $5::text[], $6::text[], $7::text[])";
/// Appends of at most this many lines use one INSERT; larger ones COPY.
const SMALL_APPEND_LINES: usize = 16;
/// The tip row after an append's transaction.
const SQL_UPDATE_TIP: &str = "UPDATE run_tips SET committed_len = $2, line_count = $3, \
     last_write_at = now(), activity_ms = $4, tally = $5, last_line_sha = $6 WHERE run_key = $1";
/// The run row after an append's transaction that changed one of its columns.
const SQL_UPDATE_RUN: &str = "UPDATE runs SET session_id = $2, started_at_utc = $3, outcome = $4, \
     workspace_norm = $5, summary = $6, first_line_sha = coalesce($7, first_line_sha), \
     is_run = $8 WHERE run_key = $1";
/// The run-row part of [`SQL_APPEND_AT`]: the tip row is updated only when it still has the
/// known run key (`$2`) and committed length (`$3`) (compare-and-swap; under READ COMMITTED a
/// concurrent append is waited for and the row re-checked); the run row (`$1`) only then, and
/// only when the append changes one of its columns (`$12`, the summary, is NULL when it does
/// not: a one-time filter, so the run row is not even read).
macro_rules! append_at_cas {
    () => {
        "WITH cas AS (UPDATE run_tips SET committed_len = $4, line_count = $5, \
         last_write_at = now(), activity_ms = $10, tally = $11, last_line_sha = $13 \
         WHERE run_key = $2 AND committed_len = $3 RETURNING run_key), \
         slow AS (UPDATE runs SET session_id = $6, started_at_utc = $7, outcome = $8, \
         workspace_norm = $9, summary = $12, is_run = $14 FROM cas \
         WHERE $12::bytea IS NOT NULL AND runs.run_id = $1 AND runs.run_key = cas.run_key)"
    };
}
/// The search documents of a one-statement append (`$first`.. `$first + 3`: offsets, kinds,
/// times, bodies), inserted for the run key the statement's `$cte` part returned.
macro_rules! docs_cte {
    ($cte:literal, $a:literal, $b:literal, $c:literal, $d:literal) => {
        concat!(
            ", docs AS (INSERT INTO search_docs (run_key, byte_offset, kind, time_ms, body) \
             SELECT ",
            $cte,
            ".run_key, d.* FROM ",
            $cte,
            ", unnest($",
            $a,
            "::int8[], $",
            $b,
            "::text[], $",
            $c,
            "::int8[], $",
            $d,
            "::text[]) AS d)"
        )
    };
}
/// The line rows of a one-statement append, for the run key the statement's `$cte` part
/// returned: one line as plain parameters (`$a`..), or many as six arrays.
macro_rules! lines_one {
    ($cte:literal, $a:literal, $b:literal, $c:literal, $d:literal, $e:literal, $f:literal) => {
        concat!(
            "INSERT INTO run_lines (run_key, byte_offset, line_no, data, record_type, ts, damage) \
             SELECT ",
            $cte,
            ".run_key, $",
            $a,
            "::int8, $",
            $b,
            "::int8, $",
            $c,
            "::bytea, $",
            $d,
            "::text, $",
            $e,
            "::text, $",
            $f,
            "::text FROM ",
            $cte
        )
    };
}
macro_rules! lines_many {
    ($cte:literal, $a:literal, $b:literal, $c:literal, $d:literal, $e:literal, $f:literal) => {
        concat!(
            "INSERT INTO run_lines (run_key, byte_offset, line_no, data, record_type, ts, damage) \
             SELECT ",
            $cte,
            ".run_key, l.* FROM ",
            $cte,
            ", unnest($",
            $a,
            "::int8[], $",
            $b,
            "::int8[], $",
            $c,
            "::bytea[], $",
            $d,
            "::text[], $",
            $e,
            "::text[], $",
            $f,
            "::text[]) AS l"
        )
    };
}
/// An append at the end of a run whose row this client knows ([`KnownRun`]), as one statement
/// (one round trip, one commit): the run row is compared and swapped ([`append_at_cas`]), and
/// the lines (and their search documents) are inserted only when it was. The count of
/// inserted lines says which: 0 means the run is not as known (the full transaction then
/// finds out why). Four forms, each prepared once per connection, so that the common append
/// (one line, no search document: a status, a request, a response) touches neither
/// `search_docs` nor an array: `[one line | many lines][with documents | without]`.
const SQL_APPEND_AT: [[&str; 2]; 2] = [
    [
        concat!(
            append_at_cas!(),
            docs_cte!("cas", 21, 22, 23, 24),
            " ",
            lines_one!("cas", 15, 16, 17, 18, 19, 20)
        ),
        concat!(
            append_at_cas!(),
            " ",
            lines_one!("cas", 15, 16, 17, 18, 19, 20)
        ),
    ],
    [
        concat!(
            append_at_cas!(),
            docs_cte!("cas", 21, 22, 23, 24),
            " ",
            lines_many!("cas", 15, 16, 17, 18, 19, 20)
        ),
        concat!(
            append_at_cas!(),
            " ",
            lines_many!("cas", 15, 16, 17, 18, 19, 20)
        ),
    ],
];
/// The run-row part of [`SQL_CREATE_WITH`].
macro_rules! create_new {
    () => {
        concat!(create_rows!(), ", ins AS (")
    };
}
/// The first append of a run that does not exist yet, as one statement: the run row is
/// inserted with its columns after these lines (unless the run exists by then: `ON CONFLICT DO
/// NOTHING`), and the lines (and their search documents) only when it was. Returns the new
/// run key (NULL when the run existed: the full transaction then decides) and the count of
/// lines inserted. Four forms, as [`SQL_APPEND_AT`].
const SQL_CREATE_WITH: [[&str; 2]; 2] = [
    [
        concat!(
            create_new!(),
            lines_one!("new", 15, 16, 17, 18, 19, 20),
            " RETURNING 1)",
            docs_cte!("new", 21, 22, 23, 24),
            " SELECT (SELECT run_key FROM new), (SELECT count(*) FROM ins)"
        ),
        concat!(
            create_new!(),
            lines_one!("new", 15, 16, 17, 18, 19, 20),
            " RETURNING 1)",
            " SELECT (SELECT run_key FROM new), (SELECT count(*) FROM ins)"
        ),
    ],
    [
        concat!(
            create_new!(),
            lines_many!("new", 15, 16, 17, 18, 19, 20),
            " RETURNING 1)",
            docs_cte!("new", 21, 22, 23, 24),
            " SELECT (SELECT run_key FROM new), (SELECT count(*) FROM ins)"
        ),
        concat!(
            create_new!(),
            lines_many!("new", 15, 16, 17, 18, 19, 20),
            " RETURNING 1)",
            " SELECT (SELECT run_key FROM new), (SELECT count(*) FROM ins)"
        ),
    ],
];
/// Appends of at most this many lines and bytes to a known run (or a new one) go out as one
/// statement ([`SQL_APPEND_AT`], [`SQL_CREATE_WITH`]); larger ones as a transaction with a
/// binary COPY. The one statement saves round trips, which is what a runtime's appends of a
/// record or a few cost; past a few lines its arrays cost more than the round trips: the
/// server decodes every array whole, unnests it and runs the insert's projection per line,
/// where COPY hands each row straight to the table. (`sync` ships a new run's lines, often
/// hundreds, as one chunk: it went as one statement while this was 4096 lines, and `sync`
/// fell behind `COPY`.)
const ONE_STATEMENT_LINES: usize = SMALL_APPEND_LINES;
const ONE_STATEMENT_BYTES: usize = 1 << 20;
/// The run rows and tip rows of new runs created together ([`PgBackend::create_runs`]), one
/// of each per run from arrays, inserted in run id order (so that two copiers creating the same
/// runs at once wait for each other in one order, never in a cycle); a run that exists already
/// gets none (`ON CONFLICT DO NOTHING`). Returns the run id and run key of each run row
/// inserted. Parameters: `$1` origin host, then one array per column (one element per run):
/// `$2` run ids, `$3` committed lengths, `$4` line counts, `$5`..`$8` session ids, UTC starts,
/// outcomes, workspaces, `$9` activity, `$10` tallies, `$11` first lines' hashes, `$12`
/// summaries, `$13` last lines' hashes, `$14` is_run.
const SQL_CREATE_MANY: &str = "WITH v AS (SELECT * FROM unnest($2::text[], $3::int8[], \
     $4::int8[], $5::text[], $6::text[], $7::text[], $8::text[], $9::int8[], $10::bytea[], \
     $11::bytea[], $12::bytea[], $13::bytea[], $14::bool[]) AS v(run_id, committed_len, \
     line_count, session_id, started_at_utc, outcome, workspace_norm, activity_ms, tally, \
     first_line_sha, summary, last_line_sha, is_run)), \
     new AS (INSERT INTO runs (run_id, origin_host, session_id, started_at_utc, outcome, \
     workspace_norm, summary, first_line_sha, is_run) \
     SELECT run_id, $1, session_id, started_at_utc, outcome, workspace_norm, summary, \
     first_line_sha, is_run FROM v ORDER BY run_id COLLATE \"C\" \
     ON CONFLICT (run_id) DO NOTHING RETURNING run_id, run_key), \
     tip AS (INSERT INTO run_tips (run_key, committed_len, line_count, activity_ms, tally, \
     last_line_sha) SELECT new.run_key, v.committed_len, v.line_count, v.activity_ms, v.tally, \
     v.last_line_sha FROM new JOIN v ON v.run_id = new.run_id) \
     SELECT run_id, run_key FROM new";
const SQL_LENGTH: &str = "SELECT t.committed_len FROM runs r \
     JOIN run_tips t ON t.run_key = r.run_key WHERE r.run_id = $1";
const SQL_FINGERPRINT: &str = "SELECT t.committed_len, t.line_count, r.first_line_sha, \
     t.last_line_sha FROM runs r JOIN run_tips t ON t.run_key = r.run_key WHERE r.run_id = $1";

/// [`SQL_FINGERPRINT`] of many runs at once (`$1`: their ids), with each run's id.
const SQL_FINGERPRINTS: &str = "SELECT r.run_id, t.committed_len, t.line_count, \
     r.first_line_sha, t.last_line_sha FROM runs r JOIN run_tips t ON t.run_key = r.run_key \
     WHERE r.run_id = ANY($1)";

/// Most run ids asked in one statement by [`PgBackend::run_fingerprints`].
pub const FINGERPRINT_BATCH: usize = 1000;

/// The statements of an append, prepared once per connection.
struct AppendStatements {
    create: Statement,
    lock: Statement,
    summary: Statement,
    insert: Statement,
    copy: Statement,
    update_tip: Statement,
    update_run: Statement,
}

impl AppendStatements {
    fn prepare(s: &mut Session) -> Result<AppendStatements, PgError> {
        Ok(AppendStatements {
            create: s.prepared(SQL_CREATE)?,
            lock: s.prepared(SQL_LOCK)?,
            summary: s.prepared(SQL_SUMMARY)?,
            insert: s.prepared(SQL_INSERT)?,
            copy: s.prepared(SQL_COPY)?,
            update_tip: s.prepared(SQL_UPDATE_TIP)?,
            update_run: s.prepared(SQL_UPDATE_RUN)?,
        })
    }
}

/// What an append transaction decided (with the run row as it left it).
enum AppendOutcome {
    Done(Appended, Box<KnownRun>),
    Conflict { committed: u64 },
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// SHA-256 of `bytes`.
pub(crate) fn sha256(bytes: &[u8]) -> Vec<u8> {
    Sha256::digest(bytes).to_vec()
}

/// The state of a run, its tip row locked for update.
struct LockedRun {
    key: i64,
    committed: u64,
    lines: u64,
    fold: RunFold,
}

fn lock_run(
    tx: &mut Transaction<'_>,
    st: &AppendStatements,
    run_id: &str,
) -> Result<Option<LockedRun>, PgError> {
    let row = tx
        .query_opt(&st.lock, &[&run_id])
        .map_err(query("lock the run's tip row"))?;
    let Some(row) = row else {
        return Ok(None);
    };
    let key: i64 = row.col(2)?;
    let tally: &[u8] = row.col(3)?;
    let summary = tx
        .query_one(&st.summary, &[&key])
        .map_err(query("read the run's summary"))?;
    let summary: &[u8] = summary.col(0)?;
    let fold = stored_fold(run_id, summary, tally)?;
    Ok(Some(LockedRun {
        key,
        committed: to_u64(row.col(0)?),
        lines: to_u64(row.col(1)?),
        fold,
    }))
}

/// `[from, to)` of a run's stored bytes (lines starting in the range, whole), and whether
/// `from` is the start of a line.
fn stored_range(
    tx: &mut Transaction<'_>,
    run_key: i64,
    from: u64,
    to: u64,
) -> Result<(Vec<u8>, bool), PgError> {
    let rows = tx
        .query(
            "SELECT byte_offset, data FROM run_lines \
             WHERE run_key = $1 AND byte_offset >= $2 AND byte_offset < $3 ORDER BY byte_offset",
            &[&run_key, &to_i64(from), &to_i64(to)],
        )
        .map_err(query("read stored lines"))?;
    let first = match rows.first() {
        Some(r) => Some(to_u64(r.col(0)?)),
        None => None,
    };
    let at_line_start = from == 0 || first == Some(from);
    let mut out = Vec::new();
    for r in &rows {
        let data: &[u8] = r.col(1)?;
        out.extend_from_slice(data);
    }
    Ok((out, at_line_start))
}

fn append_tx(
    tx: &mut Transaction<'_>,
    st: &AppendStatements,
    run_id: &str,
    expected: u64,
    lines: &[u8],
    host: &str,
) -> Result<AppendOutcome, PgError> {
    if expected == 0
        && let Some(done) = create_tx(tx, st, run_id, host, lines)?
    {
        return Ok(done);
    }
    let Some(mut run) = lock_run(tx, st, run_id)? else {
        return Ok(AppendOutcome::Conflict { committed: 0 });
    };
    let n = lines.len() as u64;
    let end = expected + n;
    if run.committed < expected {
        return Ok(AppendOutcome::Conflict {
            committed: run.committed,
        });
    }
    let present = if run.committed == expected {
        0
    } else {
        let to = run.committed.min(end);
        let (mut stored, at_line_start) = stored_range(tx, run.key, expected, to)?;
        stored.truncate(usize::try_from(to - expected).unwrap_or(usize::MAX));
        match already_present(&stored, lines, at_line_start) {
            Some(k) => k,
            None => {
                return Ok(AppendOutcome::Conflict {
                    committed: run.committed,
                });
            }
        }
    };
    let rest = &lines[present..];
    if rest.is_empty() {
        let known = Box::new(KnownRun {
            key: run.key,
            committed: run.committed,
            lines: run.lines,
            fold: run.fold,
        });
        return Ok(AppendOutcome::Done(
            Appended {
                offset: expected,
                end,
                committed_len: known.committed,
                already_present: present as u64,
            },
            known,
        ));
    }
    // What is missing starts exactly at the committed end.
    let at = run.committed;
    let slow_before = run.fold.slow_part();
    let mut docs = AppendDocs::new();
    let new = NewLines::derive(&mut run.fold, rest, at, run.lines + 1, &mut docs);
    store_lines(tx, st, run.key, &new)?;
    crate::search::index_appended(tx, run.key, &docs)?;
    let committed = at + rest.len() as u64;
    let line_count = run.lines + new.data.len() as u64;
    let (tip, cols) = RunColumns::changed(&run.fold, Some(&slow_before), &new)?;
    tx.execute(
        &st.update_tip,
        &[
            &run.key,
            &to_i64(committed),
            &to_i64(line_count),
            &tip.activity_ms,
            &tip.tally,
            &new.last_sha,
        ],
    )
    .map_err(query("update the run's tip row"))?;
    if let Some(cols) = cols {
        tx.execute(
            &st.update_run,
            &[
                &run.key,
                &cols.session_id,
                &cols.started_at_utc,
                &cols.outcome,
                &cols.workspace_norm,
                &cols.summary,
                &new.first_sha,
                &cols.is_run,
            ],
        )
        .map_err(query("update the run row"))?;
    }
    Ok(AppendOutcome::Done(
        Appended {
            offset: expected,
            end,
            committed_len: committed,
            already_present: present as u64,
        },
        Box::new(KnownRun {
            key: run.key,
            committed,
            lines: line_count,
            fold: run.fold,
        }),
    ))
}

/// Stores `new` as lines of run `key`, in the append's transaction: a few with one prepared
/// INSERT (a COPY costs more to set up than it saves), many by binary COPY.
fn store_lines(
    tx: &mut Transaction<'_>,
    st: &AppendStatements,
    key: i64,
    new: &NewLines<'_>,
) -> Result<(), PgError> {
    if new.data.len() <= SMALL_APPEND_LINES {
        tx.execute(
            &st.insert,
            &[
                &key,
                &new.offsets,
                &new.numbers,
                &new.data,
                &new.types,
                &new.tss,
                &new.damage,
            ],
        )
        .map_err(query("insert lines"))?;
    } else {
        // Many lines: binary COPY, inside the append's transaction.
        copy_lines(tx, &st.copy, &[(key, new)])?;
    }
    Ok(())
}

/// Stores the lines of several runs (run key, lines) with one binary COPY, inside the
/// caller's transaction.
fn copy_lines(
    tx: &mut Transaction<'_>,
    copy: &Statement,
    runs: &[(i64, &NewLines<'_>)],
) -> Result<(), PgError> {
    let sink = tx.copy_in(copy).map_err(query("insert lines"))?;
    let mut w = BinaryCopyInWriter::new(
        sink,
        &[
            Type::INT8,
            Type::INT8,
            Type::INT8,
            Type::BYTEA,
            Type::TEXT,
            Type::TEXT,
            Type::TEXT,
        ],
    );
    for (key, new) in runs {
        let rows = new
            .offsets
            .iter()
            .zip(&new.numbers)
            .zip(&new.data)
            .zip(new.types.iter().zip(&new.tss).zip(&new.damage));
        for (((offset, number), line), ((record_type, ts), damage)) in rows {
            w.write(&[key, offset, number, line, record_type, ts, damage])
                .map_err(query("insert lines"))?;
        }
    }
    w.finish().map_err(query("insert lines"))?;
    Ok(())
}

/// The first lines of run `run_id`, which does not exist yet, in the append's transaction:
/// the run row goes in whole, with the columns these lines give ([`SQL_CREATE`]), then the
/// lines and their search documents. No row to lock and none to update afterwards: a new
/// run's row is written once, with its listing columns, rather than inserted empty and
/// rewritten (an update that changes indexed columns, so a new version in every index of
/// `runs`). `None`: the run exists (nothing was written; the caller locks it and decides).
fn create_tx(
    tx: &mut Transaction<'_>,
    st: &AppendStatements,
    run_id: &str,
    host: &str,
    lines: &[u8],
) -> Result<Option<AppendOutcome>, PgError> {
    let mut fold = RunFold::new();
    let mut docs = AppendDocs::new();
    let new = NewLines::derive(&mut fold, lines, 0, 1, &mut docs);
    let (tip, cols) = RunColumns::whole(&fold)?;
    let committed = lines.len() as u64;
    let line_count = new.data.len() as u64;
    let row = tx
        .query_opt(
            &st.create,
            &[
                &run_id,
                &to_i64(committed),
                &to_i64(line_count),
                &pg_text(host),
                &cols.session_id,
                &cols.started_at_utc,
                &cols.outcome,
                &cols.workspace_norm,
                &tip.activity_ms,
                &tip.tally,
                &new.first_sha,
                &cols.summary,
                &new.last_sha,
                &cols.is_run,
            ],
        )
        .map_err(query("create the run row"))?;
    let Some(row) = row else {
        return Ok(None);
    };
    let key: i64 = row.col(0)?;
    store_lines(tx, st, key, &new)?;
    crate::search::index_appended(tx, key, &docs)?;
    Ok(Some(AppendOutcome::Done(
        Appended {
            offset: 0,
            end: committed,
            committed_len: committed,
            already_present: 0,
        },
        Box::new(KnownRun {
            key,
            committed,
            lines: line_count,
            fold,
        }),
    )))
}

/// The transaction of [`PgBackend::create_runs`]: `batch` holds (index in the caller's list,
/// run id, lines), distinct run ids. Returns the position in `batch` and the new state of each
/// run it created.
fn create_many(
    s: &mut Session,
    host: &str,
    batch: &[(usize, String, Vec<u8>)],
) -> Result<Vec<(usize, KnownRun)>, PgError> {
    struct Derived<'a> {
        fold: RunFold,
        new: NewLines<'a>,
        docs: AppendDocs,
    }
    let mut derived = Vec::with_capacity(batch.len());
    // One array per column of SQL_CREATE_MANY.
    let mut ids = Vec::with_capacity(batch.len());
    let (mut lens, mut counts, mut activity) = (Vec::new(), Vec::new(), Vec::new());
    let (mut sessions, mut starts, mut outcomes, mut workspaces) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut tallies, mut firsts, mut summaries, mut lasts, mut is_run) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (_, run_id, lines) in batch {
        let mut fold = RunFold::new();
        let mut docs = AppendDocs::new();
        let new = NewLines::derive(&mut fold, lines, 0, 1, &mut docs);
        let (tip, cols) = RunColumns::whole(&fold)?;
        ids.push(run_id.as_str());
        lens.push(to_i64(lines.len() as u64));
        counts.push(to_i64(new.data.len() as u64));
        sessions.push(cols.session_id);
        starts.push(cols.started_at_utc);
        outcomes.push(cols.outcome);
        workspaces.push(cols.workspace_norm);
        activity.push(tip.activity_ms);
        tallies.push(tip.tally);
        firsts.push(new.first_sha.clone());
        summaries.push(cols.summary);
        lasts.push(new.last_sha.clone());
        is_run.push(cols.is_run);
        derived.push(Derived { fold, new, docs });
    }
    let create = s.prepared(SQL_CREATE_MANY)?;
    let copy = s.prepared(SQL_COPY)?;
    let host = pg_text(host);
    let mut tx = s
        .client()?
        .transaction()
        .map_err(query("begin creating runs"))?;
    let rows = tx
        .query(
            &create,
            &[
                &host,
                &ids,
                &lens,
                &counts,
                &sessions,
                &starts,
                &outcomes,
                &workspaces,
                &activity,
                &tallies,
                &firsts,
                &summaries,
                &lasts,
                &is_run,
            ],
        )
        .map_err(query("create run rows"))?;
    let mut keys = std::collections::BTreeMap::new();
    for r in &rows {
        let id: &str = r.col(0)?;
        let key: i64 = r.col(1)?;
        keys.insert(id.to_owned(), key);
    }
    // The runs created, by position in `batch`, with their keys.
    let made: Vec<(usize, i64)> = ids
        .iter()
        .enumerate()
        .filter_map(|(j, id)| keys.get(*id).map(|k| (j, *k)))
        .collect();
    if made.len() != keys.len() {
        return Err(PgError::Inconsistent {
            detail: format!(
                "{} run rows created for {} runs asked for",
                keys.len(),
                made.len()
            ),
        });
    }
    let lines: Vec<(i64, &NewLines<'_>)> = made
        .iter()
        .filter_map(|(j, k)| derived.get(*j).map(|d| (*k, &d.new)))
        .collect();
    if !lines.is_empty() {
        copy_lines(&mut tx, &copy, &lines)?;
    }
    let docs: Vec<(i64, &AppendDocs)> = made
        .iter()
        .filter_map(|(j, k)| derived.get(*j).map(|d| (*k, &d.docs)))
        .collect();
    crate::search::index_created(&mut tx, &docs)?;
    tx.commit().map_err(query("commit creating runs"))?;
    let mut out = Vec::with_capacity(made.len());
    for (j, key) in made {
        let (Some(d), Some((_, _, lines))) = (derived.get(j), batch.get(j)) else {
            continue;
        };
        out.push((
            j,
            KnownRun {
                key,
                committed: lines.len() as u64,
                lines: d.new.data.len() as u64,
                fold: d.fold.clone(),
            },
        ));
    }
    Ok(out)
}

/// The rows of lines about to be stored, as the columns of `run_lines`, with the run's fold
/// advanced over them.
struct NewLines<'a> {
    offsets: Vec<i64>,
    numbers: Vec<i64>,
    data: Vec<&'a [u8]>,
    types: Vec<Option<String>>,
    tss: Vec<Option<String>>,
    damage: Vec<Option<String>>,
    /// SHA-256 of the run's first line, when these lines start the run.
    first_sha: Option<Vec<u8>>,
    /// SHA-256 of the last of these lines.
    last_sha: Vec<u8>,
}

impl<'a> NewLines<'a> {
    /// `lines` (complete lines) stored from byte offset `at` and line number `first_line` on;
    /// `fold` absorbs them, and `docs` collects their search documents from the same parse.
    fn derive(
        fold: &mut RunFold,
        lines: &'a [u8],
        at: u64,
        first_line: u64,
        docs: &mut AppendDocs,
    ) -> NewLines<'a> {
        let facts = fold.absorb_with(lines, at, first_line, &mut |rec, offset, line_type| {
            docs.record(rec, offset, line_type);
        });
        let n = facts.len();
        let mut out = NewLines {
            offsets: Vec::with_capacity(n),
            numbers: Vec::with_capacity(n),
            data: Vec::with_capacity(n),
            types: Vec::with_capacity(n),
            tss: Vec::with_capacity(n),
            damage: Vec::with_capacity(n),
            first_sha: None,
            last_sha: Vec::new(),
        };
        let mut facts = facts.into_iter();
        let mut start = 0usize;
        for (i, nl) in memchr::memchr_iter(b'\n', lines).enumerate() {
            let line = &lines[start..=nl];
            if at == 0 && i == 0 {
                out.first_sha = Some(sha256(line));
            }
            let f = facts.next().unwrap_or_default();
            out.offsets.push(to_i64(at + start as u64));
            out.numbers.push(to_i64(first_line + i as u64));
            out.data.push(line);
            out.types.push(f.record_type);
            out.tss.push(f.ts);
            out.damage.push(f.damage);
            start = nl + 1;
            if start == lines.len() {
                out.last_sha = sha256(line);
            }
        }
        out
    }
}

impl NewLines<'_> {
    /// Appends the line parameters of a one-statement append to `params`: one line's
    /// columns as plain values, or many lines' as six arrays (see [`SQL_APPEND_AT`]).
    fn bind<'p>(&'p self, params: &mut Vec<&'p (dyn ToSql + Sync)>) {
        if let ([offset], [number], [data], [record_type], [ts], [damage]) = (
            &self.offsets[..],
            &self.numbers[..],
            &self.data[..],
            &self.types[..],
            &self.tss[..],
            &self.damage[..],
        ) {
            params.extend([
                offset as &(dyn ToSql + Sync),
                number,
                data,
                record_type,
                ts,
                damage,
            ]);
        } else {
            params.extend([
                &self.offsets as &(dyn ToSql + Sync),
                &self.numbers,
                &self.data,
                &self.types,
                &self.tss,
                &self.damage,
            ]);
        }
    }
}

impl RunDocColumns {
    /// Appends the document parameters of a one-statement append to `params` (none when
    /// there is no document: that form of the statement has no `search_docs` part).
    fn bind<'p>(&'p self, params: &mut Vec<&'p (dyn ToSql + Sync)>) {
        if !self.offsets.is_empty() {
            params.extend([
                &self.offsets as &(dyn ToSql + Sync),
                &self.kinds,
                &self.times,
                &self.bodies,
            ]);
        }
    }
}

/// The form of a one-statement append ([`SQL_APPEND_AT`], [`SQL_CREATE_WITH`]) for these
/// lines and documents.
fn one_statement(
    forms: &[[&'static str; 2]; 2],
    new: &NewLines<'_>,
    docs: &RunDocColumns,
) -> &'static str {
    let many = usize::from(new.data.len() != 1);
    let without_docs = usize::from(docs.offsets.is_empty());
    forms[many][without_docs]
}

/// The listing columns of a run row, from its fold.
struct RunColumns {
    session_id: Option<String>,
    started_at_utc: String,
    outcome: String,
    workspace_norm: Option<String>,
    /// `runs.summary`: the fold without its tally.
    summary: Vec<u8>,
    /// `runs.is_run`: the first record was a header.
    is_run: bool,
}

/// The columns of a run's tip row that follow from its fold.
struct TipColumns {
    activity_ms: Option<i64>,
    /// `run_tips.tally`.
    tally: Vec<u8>,
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, PgError> {
    serde_json::to_vec(v).map_err(|e| PgError::Inconsistent {
        detail: e.to_string(),
    })
}

impl RunColumns {
    /// The tip's and the run row's columns of a new run whose fold is `fold`.
    fn whole(fold: &RunFold) -> Result<(TipColumns, RunColumns), PgError> {
        let mut slow = fold.clone();
        let tip = TipColumns::of(fold, &slow.take_tally())?;
        Ok((tip, RunColumns::of(&slow)?))
    }

    /// The tip's columns after an append that left the run's fold at `fold`, and the run
    /// row's only when they changed: when the fold's part outside the tally differs from
    /// `slow_before` (its part before the append), or the append holds the run's first line
    /// (`new.first_sha`).
    fn changed(
        fold: &RunFold,
        slow_before: Option<&RunFold>,
        new: &NewLines<'_>,
    ) -> Result<(TipColumns, Option<RunColumns>), PgError> {
        let mut slow = fold.clone();
        let tip = TipColumns::of(fold, &slow.take_tally())?;
        let run = if slow_before == Some(&slow) && new.first_sha.is_none() {
            None
        } else {
            Some(RunColumns::of(&slow)?)
        };
        Ok((tip, run))
    }

    /// The columns of `slow`, a fold without its tally.
    fn of(slow: &RunFold) -> Result<RunColumns, PgError> {
        Ok(RunColumns {
            session_id: pg_opt(slow.session_id.as_deref()),
            started_at_utc: pg_text(slow.started_at_utc.as_deref().unwrap_or("")),
            outcome: pg_text(&slow.outcome),
            workspace_norm: slow
                .workspace_root()
                .map(|w| pg_text(&normalize_workspace_root(&w))),
            summary: to_json(slow)?,
            is_run: slow.header_state == HeaderState::Seen,
        })
    }
}

impl TipColumns {
    fn of(fold: &RunFold, tally: &RunTally) -> Result<TipColumns, PgError> {
        Ok(TipColumns {
            activity_ms: activity_ms(fold.started_at.as_deref(), fold.last_ts.as_deref()),
            tally: to_json(tally)?,
        })
    }
}

/// A run's fold as stored: `summary` (`runs.summary`) with `tally` (`run_tips.tally`).
pub(crate) fn stored_fold(run_id: &str, summary: &[u8], tally: &[u8]) -> Result<RunFold, PgError> {
    RunFold::from_stored(summary, tally).map_err(|e| PgError::Inconsistent {
        detail: format!("summary of run {run_id}: {e}"),
    })
}

/// Creates run `run_id` with `lines` as its first lines, in one statement
/// ([`SQL_CREATE_WITH`]). `None`: the run exists already (nothing was written).
fn create_with(
    s: &mut Session,
    run_id: &str,
    host: &str,
    lines: &[u8],
) -> Result<Option<(Appended, KnownRun)>, PgError> {
    let mut fold = RunFold::new();
    let mut found = AppendDocs::new();
    let new = NewLines::derive(&mut fold, lines, 0, 1, &mut found);
    let docs = RunDocColumns::of_docs(found.docs());
    let committed = lines.len() as u64;
    let line_count = new.data.len() as u64;
    let (tip, cols) = RunColumns::whole(&fold)?;
    let st = s.prepared(one_statement(&SQL_CREATE_WITH, &new, &docs))?;
    let (host, committed_i, count_i) = (pg_text(host), to_i64(committed), to_i64(line_count));
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &run_id,
        &committed_i,
        &count_i,
        &host,
        &cols.session_id,
        &cols.started_at_utc,
        &cols.outcome,
        &cols.workspace_norm,
        &tip.activity_ms,
        &tip.tally,
        &new.first_sha,
        &cols.summary,
        &new.last_sha,
        &cols.is_run,
    ];
    new.bind(&mut params);
    docs.bind(&mut params);
    let row = s
        .client()?
        .query_one(&st, &params)
        .map_err(query("create a run with its lines"))?;
    let Some(key) = row.col::<Option<i64>>(0)? else {
        return Ok(None);
    };
    let inserted: i64 = row.col(1)?;
    if inserted != to_i64(line_count) {
        // One statement: all its rows or none. Anything else is not what was sent.
        return Err(PgError::Inconsistent {
            detail: format!("run {run_id}: a new run of {line_count} lines stored {inserted}"),
        });
    }
    Ok(Some((
        Appended {
            offset: 0,
            end: committed,
            committed_len: committed,
            already_present: 0,
        },
        KnownRun {
            key,
            committed,
            lines: line_count,
            fold,
        },
    )))
}

/// Appends `lines` at the end of run `run_id` as `known` says it is, in one statement
/// ([`SQL_APPEND_AT`]). `None`: the run is not as known (nothing was written).
fn append_at_known(
    s: &mut Session,
    run_id: &str,
    known: KnownRun,
    lines: &[u8],
) -> Result<Option<(Appended, KnownRun)>, PgError> {
    let mut fold = known.fold;
    let at = known.committed;
    let slow_before = fold.slow_part();
    let mut found = AppendDocs::new();
    let new = NewLines::derive(&mut fold, lines, at, known.lines + 1, &mut found);
    let docs = RunDocColumns::of_docs(found.docs());
    let committed = at + lines.len() as u64;
    let line_count = known.lines + new.data.len() as u64;
    let (tip, cols) = RunColumns::changed(&fold, Some(&slow_before), &new)?;
    let st = s.prepared(one_statement(&SQL_APPEND_AT, &new, &docs))?;
    let (at_i, committed_i, count_i) = (to_i64(at), to_i64(committed), to_i64(line_count));
    // The run row's columns: bound whether or not they changed (the statement's form is
    // one); its summary is NULL when they did not, and the run row is then left alone.
    let unchanged = RunColumns {
        session_id: None,
        started_at_utc: String::new(),
        outcome: String::new(),
        workspace_norm: None,
        summary: Vec::new(),
        is_run: false,
    };
    let (run_cols, summary) = match &cols {
        Some(c) => (c, Some(c.summary.as_slice())),
        None => (&unchanged, None),
    };
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![
        &run_id,
        &known.key,
        &at_i,
        &committed_i,
        &count_i,
        &run_cols.session_id,
        &run_cols.started_at_utc,
        &run_cols.outcome,
        &run_cols.workspace_norm,
        &tip.activity_ms,
        &tip.tally,
        &summary,
        &new.last_sha,
        &run_cols.is_run,
    ];
    new.bind(&mut params);
    docs.bind(&mut params);
    let inserted = s
        .client()?
        .execute(&st, &params)
        .map_err(query("append to a known run"))?;
    if inserted == 0 {
        return Ok(None);
    }
    if inserted != new.data.len() as u64 {
        // One statement: all its rows or none. Anything else is not what was sent.
        return Err(PgError::Inconsistent {
            detail: format!(
                "run {run_id}: an append of {} lines stored {inserted}",
                new.data.len()
            ),
        });
    }
    Ok(Some((
        Appended {
            offset: at,
            end: committed,
            committed_len: committed,
            already_present: 0,
        },
        KnownRun {
            key: known.key,
            committed,
            lines: line_count,
            fold,
        },
    )))
}

/// The latest of `started_at` and `last_ts`, as Unix milliseconds.
pub(crate) fn activity_ms(started_at: Option<&str>, last_ts: Option<&str>) -> Option<i64> {
    let ms = |s: Option<&str>| s.and_then(|t| Timestamp::from_raw(t.to_owned()).unix_millis());
    match (ms(started_at), ms(last_ts)) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

impl PgBackend {
    fn committed_len(&self, run_id: &str) -> Result<Option<u64>, StorageError> {
        let id = run_id.to_owned();
        self.pool
            .run(true, move |s| {
                let st = s.prepared(SQL_LENGTH)?;
                let row = s
                    .client()?
                    .query_opt(&st, &[&id])
                    .map_err(query("read the run length"))?;
                row.map(|r| r.col(0).map(to_u64)).transpose()
            })
            .map_err(|e| storage("read", Target::run(run_id), e))
    }

    /// The host that created run `run_id` ([`PgOptions::origin_host`](crate::PgOptions) of its
    /// first writer); `None` when there is no such run.
    ///
    /// # Errors
    /// [`StorageError::UnsafeId`], [`StorageError::Backend`].
    pub fn run_origin(&self, run_id: &str) -> Result<Option<String>, StorageError> {
        checked_id(run_id)?;
        let id = run_id.to_owned();
        self.pool
            .run(true, move |s| {
                let row = s
                    .client()?
                    .query_opt("SELECT origin_host FROM runs WHERE run_id = $1", &[&id])
                    .map_err(query("read the run origin"))?;
                row.map(|r| r.col(0)).transpose()
            })
            .map_err(|e| storage("read", Target::run(run_id), e))
    }

    /// SHA-256 of the first and of the last stored line of run `run_id` and its committed
    /// length: what a copier compares to know that the stored run is the file it copies
    /// (`None`: no such run).
    ///
    /// # Errors
    /// [`StorageError::UnsafeId`], [`StorageError::Backend`].
    pub fn run_fingerprint(&self, run_id: &str) -> Result<Option<RunFingerprint>, StorageError> {
        checked_id(run_id)?;
        let id = run_id.to_owned();
        self.pool
            .run(true, move |s| {
                let st = s.prepared(SQL_FINGERPRINT)?;
                let row = s
                    .client()?
                    .query_opt(&st, &[&id])
                    .map_err(query("read the run fingerprint"))?;
                row.map(|r| {
                    Ok(RunFingerprint {
                        len: to_u64(r.col(0)?),
                        lines: to_u64(r.col(1)?),
                        first_line_sha256: r.col(2)?,
                        last_line_sha256: r.col(3)?,
                    })
                })
                .transpose()
            })
            .map_err(|e| storage("read", Target::run(run_id), e))
    }

    /// [`PgBackend::run_fingerprint`] of many runs, a few statements for all of them: one per
    /// [`FINGERPRINT_BATCH`] ids (`run_id = ANY($1)`), on one connection. What a copier asks
    /// before shipping a list of runs it has no watermark for, instead of a round trip per run.
    /// Returns one entry per id of `run_ids`, in its order (`None`: no such run; a repeated id
    /// gets the same answer each time).
    ///
    /// # Errors
    /// [`StorageError::UnsafeId`] for the first id that cannot name a stored run (nothing was
    /// asked), [`StorageError::Backend`].
    pub fn run_fingerprints(
        &self,
        run_ids: &[&str],
    ) -> Result<Vec<Option<RunFingerprint>>, StorageError> {
        for id in run_ids {
            checked_id(id)?;
        }
        if run_ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = run_ids.iter().map(|id| (*id).to_owned()).collect();
        let found = self
            .pool
            .run(true, move |s| {
                let st = s.prepared(SQL_FINGERPRINTS)?;
                let mut found = std::collections::BTreeMap::new();
                for chunk in ids.chunks(FINGERPRINT_BATCH) {
                    let rows = s
                        .client()?
                        .query(&st, &[&chunk])
                        .map_err(query("read run fingerprints"))?;
                    for r in rows {
                        let id: String = r.col(0)?;
                        let fp = RunFingerprint {
                            len: to_u64(r.col(1)?),
                            lines: to_u64(r.col(2)?),
                            first_line_sha256: r.col(3)?,
                            last_line_sha256: r.col(4)?,
                        };
                        found.insert(id, fp);
                    }
                }
                Ok(found)
            })
            .map_err(|e| storage("read", Target::Store, e))?;
        Ok(run_ids.iter().map(|id| found.get(*id).cloned()).collect())
    }

    /// Creates new runs together, each with `lines` (complete lines) as its whole content so
    /// far, in one transaction: the run rows and tip rows in one statement (in run id order),
    /// every line by one binary COPY, their search documents in one statement, one commit. A
    /// copier shipping many small runs (`sessions sync`) pays the cost of a transaction — its
    /// round trips, statements, COPY set-up and commit — once per batch instead of once per
    /// run. `runs`: (run id, lines); the caller bounds their size (all of it is sent at once).
    ///
    /// Returns, in the order of `runs`, what was appended for each run created, and `None`
    /// for a run that exists already (nothing was written for it: append to it with
    /// [`RunCatalogue::append_lines`], which recognises lines already present), for a repeated
    /// run id (after its first occurrence) and for empty `lines`. A retry after a lost
    /// acknowledgement therefore writes nothing twice: the runs it created exist.
    ///
    /// # Errors
    /// [`StorageError::UnsafeId`]; [`StorageError::IncompleteLine`] when some `lines` do not
    /// end with `\n` (nothing was written); [`StorageError::Backend`] (nothing was written).
    pub fn create_runs(
        &self,
        runs: &[(&str, &[u8])],
    ) -> Result<Vec<Option<Appended>>, StorageError> {
        let mut seen = std::collections::BTreeSet::new();
        let mut batch: Vec<(usize, String, Vec<u8>)> = Vec::new();
        for (i, (run_id, lines)) in runs.iter().enumerate() {
            checked_id(run_id)?;
            check_complete_lines(run_id, 0, lines)?;
            if !lines.is_empty() && seen.insert(*run_id) {
                batch.push((i, (*run_id).to_owned(), lines.to_vec()));
            }
        }
        let mut out = vec![None; runs.len()];
        if batch.is_empty() {
            return Ok(out);
        }
        let host = self.options.origin_host.clone();
        let batch = Arc::new(batch);
        let work = batch.clone();
        let created = self
            .pool
            .run(true, move |s| create_many(s, &host, &work))
            .map_err(|e| storage("create runs in", Target::Store, e))?;
        for (j, known) in created {
            let Some((i, run_id, _)) = batch.get(j) else {
                continue;
            };
            if let Some(slot) = out.get_mut(*i) {
                *slot = Some(Appended {
                    offset: 0,
                    end: known.committed,
                    committed_len: known.committed,
                    already_present: 0,
                });
            }
            self.known.remember(run_id, known);
        }
        Ok(out)
    }

    /// SHA-256 of every stored line of run `run_id` from line `from_line` (1-based) on, with
    /// its byte offset, in order: for comparing a copy line by line without moving the lines.
    ///
    /// # Errors
    /// [`StorageError::UnsafeId`], [`StorageError::Backend`].
    pub fn line_hashes(
        &self,
        run_id: &str,
        from_line: u64,
    ) -> Result<Vec<(u64, Vec<u8>)>, StorageError> {
        checked_id(run_id)?;
        let id = run_id.to_owned();
        self.pool
            .run(true, move |s| {
                let rows = s
                    .client()?
                    .query(
                        "SELECT byte_offset, sha256(data) FROM run_lines \
                         WHERE run_key = (SELECT run_key FROM runs WHERE run_id = $1) \
                         AND line_no >= $2 ORDER BY byte_offset",
                        &[&id, &to_i64(from_line)],
                    )
                    .map_err(query("hash stored lines"))?;
                rows.iter()
                    .map(|r| Ok((to_u64(r.col(0)?), r.col(1)?)))
                    .collect()
            })
            .map_err(|e| storage("read", Target::run(run_id), e))
    }
}

/// What [`PgBackend::run_fingerprint`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFingerprint {
    /// Committed length in bytes.
    pub len: u64,
    /// Stored lines.
    pub lines: u64,
    /// SHA-256 of the first line (with its `\n`).
    pub first_line_sha256: Option<Vec<u8>>,
    /// SHA-256 of the last line (with its `\n`).
    pub last_line_sha256: Option<Vec<u8>>,
}

/// Streams a run's stored lines `[pos, end)` from PostgreSQL, a batch at a time.
struct LineReader {
    pool: Arc<Pool>,
    run_id: String,
    pos: u64,
    end: u64,
    buf: Vec<u8>,
    at: usize,
}

impl LineReader {
    fn fetch(&mut self) -> io::Result<()> {
        let id = self.run_id.clone();
        let (pos, end) = (to_i64(self.pos), to_i64(self.end));
        let rows = self
            .pool
            .run(true, move |s| {
                let rows = s
                    .client()?
                    .query(
                        "WITH r AS (SELECT run_key FROM runs WHERE run_id = $1) \
                         SELECT byte_offset, data FROM run_lines WHERE run_key = (SELECT run_key FROM r) \
                         AND byte_offset >= (SELECT coalesce(max(byte_offset), 0) FROM run_lines \
                                              WHERE run_key = (SELECT run_key FROM r) AND byte_offset <= $2) \
                         AND byte_offset < least($3, $2 + $4) ORDER BY byte_offset",
                        &[&id, &pos, &end, &READ_BATCH_BYTES],
                    )
                    .map_err(query("read lines"))?;
                rows.iter()
                    .map(|r| Ok((to_u64(r.col(0)?), r.col::<Vec<u8>>(1)?)))
                    .collect::<Result<Vec<_>, PgError>>()
            })
            .map_err(io::Error::other)?;
        self.buf.clear();
        self.at = 0;
        let mut expect = None;
        for (offset, data) in rows {
            if let Some(e) = expect
                && e != offset
            {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "run {}: stored lines leave a gap at byte offset {e} (next line at {offset})",
                        self.run_id
                    ),
                ));
            }
            expect = Some(offset + data.len() as u64);
            if self.buf.is_empty() {
                // The first line may start before `pos` (a read from inside a line).
                let skip = usize::try_from(self.pos.saturating_sub(offset)).unwrap_or(usize::MAX);
                if offset > self.pos || skip > data.len() {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "run {}: no stored line holds byte offset {} (removed while being read?)",
                            self.run_id, self.pos
                        ),
                    ));
                }
                self.buf.extend_from_slice(&data[skip..]);
            } else {
                self.buf.extend_from_slice(&data);
            }
        }
        Ok(())
    }
}

impl Read for LineReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos >= self.end || out.is_empty() {
            return Ok(0);
        }
        if self.at >= self.buf.len() {
            self.fetch()?;
            if self.buf.is_empty() {
                return Ok(0);
            }
        }
        let left = usize::try_from(self.end - self.pos).unwrap_or(usize::MAX);
        let n = (self.buf.len() - self.at).min(out.len()).min(left);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Header facts from the first [`HEAD_LIMIT`] bytes of a run, as session-jsonl's
/// `read_header` finds them in a file.
fn head_facts(buf: &[u8], at_eof: bool) -> HeaderFacts {
    let mut start = 0;
    let first = loop {
        match memchr::memchr(b'\n', &buf[start..]) {
            Some(i) if buf[start..start + i].trim_ascii().is_empty() => start += i + 1,
            Some(i) => break Some(start + i),
            None if at_eof => break Some(buf.len()),
            None => break None,
        }
    };
    let Some(end) = first else {
        return scan_facts(&buf[start..]);
    };
    let line = &buf[start..end];
    let mut facts = HeaderFacts::default();
    let mut header = false;
    for item in Reader::new(line, ReaderOptions::default()).flatten() {
        if let Item::Record(r) = item {
            if let Record::Header(h) = r.record() {
                header = true;
                facts = HeaderFacts {
                    kind: Some("header".to_owned()),
                    schema_version: Some(h.schema_version),
                    run_id: Some(h.run_id.clone()),
                    session_id: h.session_id.clone(),
                    started_at: Some(h.started_at.clone()),
                };
            } else if facts.kind.is_none() {
                facts.kind = Some(r.record().kind().to_owned());
            }
        }
    }
    if !header && facts.kind.is_none() {
        facts = scan_facts(line);
    }
    facts
}

/// One line of the tail scan.
enum TailLine {
    Empty,
    Record(Box<Record>),
    Prefix(String, Option<Timestamp>),
    Bad,
}

fn tail_line(len: u64, bytes: &[u8]) -> TailLine {
    // `bytes` holds the line with its "\n", or only its first TAIL_PREFIX bytes.
    let content = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if len == 0 {
        return TailLine::Empty;
    }
    if len > TAIL_LINE_LIMIT {
        let prefix = &content[..content.len().min(TAIL_PREFIX)];
        let facts = scan_facts(prefix);
        return match facts.kind {
            Some(kind) => TailLine::Prefix(kind, facts.started_at),
            None => TailLine::Bad,
        };
    }
    let piece = match memchr::memrchr(0, content) {
        Some(i) => &content[i + 1..],
        None => content,
    };
    let parsed = parse_record(piece).or_else(|e| match e {
        session_schema::ParseError::InvalidUtf8 { .. } => {
            parse_record(String::from_utf8_lossy(piece).as_bytes())
        }
        e => Err(e),
    });
    match parsed {
        Ok(p) => TailLine::Record(Box::new(p.value)),
        Err(_) => TailLine::Bad,
    }
}

/// How the run ended, from its lines read backwards, as session-jsonl's `terminal_state`
/// finds it in a file.
#[derive(Default)]
struct TailScan {
    end: Option<RunEndState>,
    last_type: Option<String>,
    last_ts: Option<Timestamp>,
    damaged: usize,
    found_end: bool,
    looked_back: usize,
    done: bool,
}

impl TailScan {
    fn line(&mut self, line: TailLine) {
        match line {
            TailLine::Empty => {}
            TailLine::Bad => {
                self.damaged += 1;
                if self.damaged > TAIL_MAX_DAMAGED {
                    self.done = true;
                }
            }
            TailLine::Prefix(kind, ts) => {
                if !self.found_end {
                    self.last_type = Some(kind);
                    self.last_ts = ts;
                }
                self.done = true;
            }
            TailLine::Record(rec) => {
                if self.found_end {
                    if let Record::RunError(e) = *rec {
                        if let Some(RunEndState::Ended { error, .. }) = &mut self.end {
                            *error = Some(e.error);
                        }
                        self.done = true;
                        return;
                    }
                    self.looked_back += 1;
                    if self.looked_back >= 2 {
                        self.done = true;
                    }
                } else {
                    self.last_type = Some(rec.kind().to_owned());
                    self.last_ts = rec.ts().cloned();
                    match *rec {
                        Record::RunEnd(end) => {
                            self.end = Some(RunEndState::Ended {
                                outcome: end.outcome,
                                final_text: end.final_text,
                                error: None::<ErrorInfo>,
                            });
                            self.found_end = true;
                        }
                        Record::RunError(e) => {
                            self.end = Some(RunEndState::Errored { error: e.error });
                            self.done = true;
                        }
                        _ => self.done = true,
                    }
                }
            }
        }
    }
}

fn stat_tx(client: &mut postgres::Client, run_id: &str) -> Result<Option<RunStat>, PgError> {
    let mut tx = client
        .build_transaction()
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .map_err(query("begin a read"))?;
    let Some(row) = tx
        .query_opt(
            "SELECT t.committed_len, t.line_count, t.run_key FROM runs r \
             JOIN run_tips t ON t.run_key = r.run_key WHERE r.run_id = $1",
            &[&run_id],
        )
        .map_err(query("stat the run"))?
    else {
        return Ok(None);
    };
    let len = to_u64(row.col(0)?);
    let lines = to_u64(row.col(1)?);
    let key: i64 = row.col(2)?;
    let head_rows = tx
        .query(
            "SELECT data FROM run_lines WHERE run_key = $1 AND byte_offset < $2 ORDER BY byte_offset",
            &[&key, &(HEAD_LIMIT as i64)],
        )
        .map_err(query("read the run header"))?;
    let mut head = Vec::new();
    for r in &head_rows {
        let d: &[u8] = r.col(0)?;
        head.extend_from_slice(d);
        if head.len() >= HEAD_LIMIT {
            break;
        }
    }
    head.truncate(HEAD_LIMIT);
    let header = head_facts(&head, len < HEAD_LIMIT as u64);
    let mut scan = TailScan::default();
    let mut below = to_i64(len);
    while !scan.done && below > 0 {
        let rows = tx
            .query(
                "SELECT byte_offset, length(data) - 1, \
                 CASE WHEN length(data) - 1 > $3 THEN substring(data FROM 1 FOR $4) ELSE data END \
                 FROM run_lines WHERE run_key = $1 AND byte_offset < $2 \
                 ORDER BY byte_offset DESC LIMIT $5",
                &[
                    &key,
                    &below,
                    &(TAIL_LINE_LIMIT as i32),
                    &(TAIL_PREFIX as i32),
                    &TAIL_BATCH,
                ],
            )
            .map_err(query("read the run tail"))?;
        if rows.is_empty() {
            break;
        }
        for r in &rows {
            below = r.col(0)?;
            let l: i32 = r.col(1)?;
            let bytes: &[u8] = r.col(2)?;
            scan.line(tail_line(u64::try_from(l).unwrap_or(0), bytes));
            if scan.done {
                break;
            }
        }
    }
    tx.commit().map_err(query("end a read"))?;
    Ok(Some(RunStat {
        run_id: run_id.to_owned(),
        len,
        lines,
        torn_tail: 0,
        header,
        end: scan.end.unwrap_or(RunEndState::Open),
        last_type: scan.last_type,
        last_ts: scan.last_ts,
        archived: false,
    }))
}

/// A listing cursor: `pg:<len>:<started_at_utc><run_id>`.
fn cursor_token(started: &str, run_id: &str) -> String {
    format!("pg:{}:{started}{run_id}", started.len())
}

fn parse_cursor(token: &str) -> Option<(String, String)> {
    let rest = token.strip_prefix("pg:")?;
    let (len, rest) = rest.split_once(':')?;
    let len: usize = len.parse().ok()?;
    if !rest.is_char_boundary(len.min(rest.len())) || len > rest.len() {
        return None;
    }
    let (started, run_id) = rest.split_at(len);
    (!run_id.is_empty()).then(|| (started.to_owned(), run_id.to_owned()))
}

impl RunCatalogue for PgBackend {
    fn append_lines(
        &self,
        run_id: &str,
        expected_len: u64,
        lines: &[u8],
    ) -> Result<Appended, StorageError> {
        checked_id(run_id)?;
        check_complete_lines(run_id, expected_len, lines)?;
        let conflict = |committed| StorageError::LengthConflict {
            run_id: run_id.to_owned(),
            expected: expected_len,
            committed,
        };
        if lines.is_empty() {
            let committed = self.committed_len(run_id)?.unwrap_or(0);
            return if committed == expected_len {
                Ok(Appended {
                    offset: expected_len,
                    end: expected_len,
                    committed_len: committed,
                    already_present: 0,
                })
            } else {
                Err(conflict(committed))
            };
        }
        let id = run_id.to_owned();
        let data = lines.to_vec();
        let host = self.options.origin_host.clone();
        let known_runs = self.known.clone();
        let small = lines.len() <= ONE_STATEMENT_BYTES
            && memchr::memchr_iter(b'\n', lines).count() <= ONE_STATEMENT_LINES;
        // A retry after a lost connection is safe: the append recognises its own lines.
        let outcome = self
            .pool
            .run(true, move |s| {
                // A new run: one statement, unless it exists.
                if small && expected_len == 0 {
                    match create_with(s, &id, &host, &data) {
                        Ok(Some((done, known))) => {
                            known_runs.remember(&id, known);
                            return Ok(Ok(done));
                        }
                        Ok(None) => {}
                        Err(e) => {
                            known_runs.forget(&id);
                            return Err(e);
                        }
                    }
                }
                // At the end of a run this client left there: one statement.
                if small && let Some(known) = known_runs.at(&id, expected_len) {
                    match append_at_known(s, &id, known, &data) {
                        Ok(Some((done, known))) => {
                            known_runs.remember(&id, known);
                            return Ok(Ok(done));
                        }
                        Ok(None) => known_runs.forget(&id),
                        Err(e) => {
                            known_runs.forget(&id);
                            return Err(e);
                        }
                    }
                }
                let st = AppendStatements::prepare(s)?;
                let client = s.client()?;
                let mut tx = client.transaction().map_err(query("begin an append"))?;
                let out = append_tx(&mut tx, &st, &id, expected_len, &data, &host);
                match out {
                    Ok(AppendOutcome::Done(done, known)) => {
                        tx.commit().map_err(query("commit an append"))?;
                        known_runs.remember(&id, *known);
                        Ok(Ok(done))
                    }
                    Ok(AppendOutcome::Conflict { committed }) => {
                        known_runs.forget(&id);
                        tx.rollback().map_err(query("roll back an append"))?;
                        Ok(Err(committed))
                    }
                    Err(e) => {
                        known_runs.forget(&id);
                        Err(e)
                    }
                }
            })
            .map_err(|e| storage("append to", Target::run_at(run_id, expected_len), e))?;
        outcome.map_err(conflict)
    }

    fn read_bytes(
        &self,
        run_id: &str,
        from: u64,
        extent: Extent,
    ) -> Result<RunBytes, StorageError> {
        checked_id(run_id)?;
        // Only complete lines are ever stored: both extents are the same bytes.
        let _ = extent;
        let Some(len) = self.committed_len(run_id)? else {
            return Err(StorageError::RunNotFound {
                run_id: run_id.to_owned(),
            });
        };
        if from > len {
            return Err(StorageError::OffsetOutOfRange {
                run_id: run_id.to_owned(),
                offset: from,
                len,
            });
        }
        let reader = LineReader {
            pool: self.pool.clone(),
            run_id: run_id.to_owned(),
            pos: from,
            end: len,
            buf: Vec::new(),
            at: 0,
        };
        Ok(RunBytes::new(Box::new(reader), from, len))
    }

    fn stat_run(&self, run_id: &str) -> Result<Option<RunStat>, StorageError> {
        checked_id(run_id)?;
        let id = run_id.to_owned();
        self.pool
            .run(true, move |s| stat_tx(s.client()?, &id))
            .map_err(|e| storage("stat", Target::run(run_id), e))
    }

    fn list_runs(&self, q: &RunListQuery) -> Result<RunListPage, StorageError> {
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
        let session = q.session.as_deref().map(pg_text);
        let since = q.since.as_deref().map(|s| pg_text(&bound_key(s)));
        let until = q.until.as_deref().map(|s| pg_text(&bound_key(s)));
        let outcome = q.outcome.as_ref().map(|o| pg_text(o.as_str()));
        let workspace = q
            .workspace
            .as_deref()
            .map(|w| pg_text(&normalize_workspace_root(w)));
        let (after_started, after_id) = after.unzip();
        let limit = q.limit.map(|l| to_i64(l as u64).saturating_add(1));
        let rows = self
            .pool
            .run(true, move |s| {
                let rows = s
                    .client()?
                    .query(
                        "SELECT run_id, summary, t.committed_len, origin_host, \
                         (extract(epoch FROM t.last_write_at) * 1000000)::bigint, started_at_utc, \
                         t.tally \
                         FROM runs JOIN run_tips t ON t.run_key = runs.run_key \
                         WHERE is_run AND ($1::text IS NULL OR session_id = $1) \
                         AND ($2::text IS NULL OR (started_at_utc <> '' AND started_at_utc >= $2)) \
                         AND ($3::text IS NULL OR (started_at_utc <> '' AND started_at_utc < $3)) \
                         AND ($4::text IS NULL OR outcome = $4) \
                         AND ($5::text IS NULL OR workspace_norm = $5) \
                         AND ($6::text IS NULL OR (started_at_utc, run_id) < ($6, $7::text)) \
                         ORDER BY started_at_utc DESC, run_id DESC LIMIT $8",
                        &[
                            &session,
                            &since,
                            &until,
                            &outcome,
                            &workspace,
                            &after_started,
                            &after_id,
                            &limit,
                        ],
                    )
                    .map_err(query("list runs"))?;
                let mut out = Vec::with_capacity(rows.len());
                for r in &rows {
                    let run_id: String = r.col(0)?;
                    let summary: &[u8] = r.col(1)?;
                    let tally: &[u8] = r.col(6)?;
                    let fold = stored_fold(&run_id, summary, tally)?;
                    let mut sum = fold.summary(&run_id);
                    sum.stored_bytes = to_u64(r.col(2)?);
                    let host: String = r.col(3)?;
                    sum.location = format!("{host}:{run_id}");
                    sum.origin_host = Some(host);
                    sum.last_write_unix_ns = r.col::<i64>(4)?.saturating_mul(1000);
                    let key: String = r.col(5)?;
                    out.push((sum, key));
                }
                Ok(out)
            })
            .map_err(|e| storage("list runs of", Target::Store, e))?;
        let mut rows = rows;
        let mut next_cursor = None;
        if let Some(l) = q.limit
            && rows.len() > l
        {
            rows.truncate(l);
            next_cursor = rows
                .last()
                .map(|(s, key)| PageCursor::new(cursor_token(key, &s.run_id)));
        }
        Ok(RunListPage {
            runs: rows.into_iter().map(|(s, _)| s).collect(),
            next_cursor,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_garbage() {
        for (started, id) in [("2026-03-01T10:00:00.000Z", "run-a"), ("", "x:y")] {
            let t = cursor_token(started, id);
            assert_eq!(parse_cursor(&t), Some((started.to_owned(), id.to_owned())));
        }
        for bad in [
            "",
            "pg:",
            "pg:x:abc",
            "pg:99:short",
            "not a cursor",
            "pg:3:abc",
        ] {
            assert_eq!(parse_cursor(bad), None, "{bad}");
        }
    }

    #[test]
    fn head_facts_read_like_a_file_header() {
        let f = head_facts(
            b"\n  \n{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"r\",\"session_id\":\"s\",\"started_at\":\"2026-02-03T12:00:00.000Z\"}\n",
            true,
        );
        assert_eq!(f.kind.as_deref(), Some("header"));
        assert_eq!(f.session_id.as_deref(), Some("s"));
        let f = head_facts(b"{\"type\":\"run.status\",\"run_id\":\"x\"}\n", true);
        assert_eq!(f.kind.as_deref(), Some("run.status"));
        // A first line longer than the head: facts from its start.
        let f = head_facts(b"{\"type\":\"header\",\"run_id\":\"long\",\"x\":\"", false);
        assert_eq!(
            (f.kind.as_deref(), f.run_id.as_deref()),
            (Some("header"), Some("long"))
        );
    }

    #[test]
    fn activity_is_the_later_of_start_and_last_record() {
        assert_eq!(
            activity_ms(
                Some("2026-01-01T00:00:00.000Z"),
                Some("2026-01-01T00:00:01.000Z")
            ),
            Some(1_767_225_601_000)
        );
        assert_eq!(activity_ms(Some("bad"), None), None);
        assert_eq!(
            activity_ms(None, Some("2026-01-01T00:00:00.000Z")),
            Some(1_767_225_600_000)
        );
    }
}

//! Running totals of the run index (`state.db` tables `run_totals` and `run_dup_ids`, user
//! version 10, and `run_day_totals`, user version 11), kept by SQLite triggers on `runs` so
//! that `sessions stats` reads one row per group instead of every run.
//!
//! `run_totals` holds, per grouping kind and key, the sums `RunTotals` reports over the rows
//! of `runs` that are runs (`diagnostic IS NULL`), every file counted:
//!
//! * kind `q`: the UTC quarter-hour of `started_at_utc` (`YYYY-MM-DDTHH:MM`, minutes `00`,
//!   `15`, `30` or `45`; `(unknown date)` for `''`). Every UTC offset in use is a multiple of
//!   15 minutes, so a quarter-hour lies inside one day of such a zone: the days, weeks and
//!   months of `sessions stats` are sums of quarter-hours.
//! * kind `m`: the model key of [`RunGrouping::Model`].
//! * kind `s`: the session key of [`RunGrouping::Session`].
//!
//! `run_day_totals` holds the same sums per UTC day of `started_at_utc` (`YYYY-MM-DD`; the
//! quarter-hour key's first ten characters, `(unknown date)` and `~…` keys as there): the
//! days of a UTC calendar, and the whole days inside a window, are read one row per day
//! instead of 96 quarter-hours per day ([`read_days`]). It has a table and triggers of its
//! own so that a writer of version 10, which drops and recreates only its own triggers and
//! empties only `run_totals` in a large write, leaves it exact (its own `BEFORE INSERT`
//! trigger takes out the row an `INSERT OR REPLACE` replaces while version 10's is
//! dropped).
//!
//! `run_dup_ids` holds the run ids with more than one row in `runs` (another file of the run,
//! or a file that is no run beside it). A run held by several files is counted once by
//! `stats`, from its most complete file: the reader takes those rows out of the sums again
//! and adds the chosen one ([`RunIndex::run_totals`]).
//!
//! The triggers fire for every writer of `runs`, this version's or an older one's: an
//! `INSERT` first deletes the row it would replace (so `INSERT OR REPLACE`, whose replacing
//! delete fires no trigger unless `recursive_triggers` is on, is counted like a delete and an
//! insert), then adds the new row; an `UPDATE` takes the old row out and puts the new one in;
//! a `DELETE` takes the row out. A sum that overflows a 64-bit integer turns into an SQL
//! float, which the reader takes as "not usable" and falls back to summing the rows.

use std::collections::BTreeMap;

use rusqlite::types::{Value, ValueRef};
use rusqlite::{Connection, StatementStatus};

use crate::column::{OwnedValue, owned_row, query_int, text_of};

/// The `user_version` that added `run_day_totals` and its triggers.
pub(crate) const DAYS_USER_VERSION: i64 = 11;

/// The `GLOB` pattern of a canonical `started_at_utc` as far as the keys read it
/// (`YYYY-MM-DDTHH:MM:…`).
const CANONICAL_GLOB: &str = "'[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-5][0-9]:*'";

/// The quarter-hour key (kind `q`) of the `runs` row `x` (`NEW` or `OLD`, or `runs`).
fn quarter_sql(x: &str) -> String {
    format!(
        "CASE WHEN {x}.started_at_utc IS NULL OR {x}.started_at_utc = '' THEN '(unknown date)' \
         WHEN {x}.started_at_utc GLOB {CANONICAL_GLOB} \
         THEN substr({x}.started_at_utc, 1, 14) || CASE \
         WHEN substr({x}.started_at_utc, 15, 2) < '15' THEN '00' \
         WHEN substr({x}.started_at_utc, 15, 2) < '30' THEN '15' \
         WHEN substr({x}.started_at_utc, 15, 2) < '45' THEN '30' ELSE '45' END \
         ELSE '~' || {x}.started_at_utc END"
    )
}

/// The UTC day key (`run_day_totals.day`) of the row `x`: the first ten characters of its
/// quarter-hour key.
fn day_sql(x: &str) -> String {
    format!(
        "CASE WHEN {x}.started_at_utc IS NULL OR {x}.started_at_utc = '' THEN '(unknown date)' \
         WHEN {x}.started_at_utc GLOB {CANONICAL_GLOB} THEN substr({x}.started_at_utc, 1, 10) \
         ELSE '~' || {x}.started_at_utc END"
    )
}

/// The model key (kind `m`) of the row `x`, as [`RunGrouping::Model`] keys it.
fn model_sql(x: &str) -> String {
    format!(
        "CASE WHEN {x}.model_name IS NULL THEN '(unknown model)' \
         WHEN {x}.model_provider IS NULL THEN {x}.model_name \
         ELSE {x}.model_provider || '/' || {x}.model_name END"
    )
}

/// The session key (kind `s`) of the row `x`, as [`RunGrouping::Session`] keys it.
fn session_sql(x: &str) -> String {
    format!("coalesce({x}.session_id, '(no session)')")
}

/// The three kinds with their key expressions.
fn kinds(x: &str) -> [(&'static str, String); 3] {
    [
        ("q", quarter_sql(x)),
        ("m", model_sql(x)),
        ("s", session_sql(x)),
    ]
}

/// The summed columns of `run_totals`, in order.
const SUMS: &str = "runs, completed, errors, cancelled, invocations, input_tokens, \
                    cached_input_tokens, output_tokens, total_tokens";

/// One upsert adding (`sign` `+`) or taking out (`-`) the sums of the row `x` into `table`
/// at the key columns `cols` (values `vals`), and for `-` the delete of the key's row once
/// it counts no run (`key_is`: the condition naming that row).
fn sums_sql(table: &str, cols: &str, vals: &str, key_is: &str, x: &str, sign: char) -> String {
    let mut out = format!(
        "INSERT INTO {table} ({cols}, {SUMS}) VALUES ({vals}, {sign}1, \
         {sign}({x}.outcome = 'completed'), {sign}({x}.outcome = 'error'), \
         {sign}({x}.outcome = 'cancelled'), {sign}{x}.invocation_count, \
         {sign}{x}.input_tokens, {sign}{x}.cached_input_tokens, {sign}{x}.output_tokens, \
         {sign}{x}.total_tokens) \
         ON CONFLICT ({cols}) DO UPDATE SET runs = runs + excluded.runs, \
         completed = completed + excluded.completed, errors = errors + excluded.errors, \
         cancelled = cancelled + excluded.cancelled, \
         invocations = invocations + excluded.invocations, \
         input_tokens = input_tokens + excluded.input_tokens, \
         cached_input_tokens = cached_input_tokens + excluded.cached_input_tokens, \
         output_tokens = output_tokens + excluded.output_tokens, \
         total_tokens = total_tokens + excluded.total_tokens;\n"
    );
    if sign == '-' {
        out.push_str(&format!(
            "DELETE FROM {table} WHERE {key_is} AND runs = 0;\n"
        ));
    }
    out
}

/// Statements adding (`sign` `+`) or taking out (`-`) the row `x` in every kind of
/// `run_totals`, for a trigger body (the row is a run: the caller's `WHEN` checks
/// `diagnostic IS NULL`).
fn apply_sql(x: &str, sign: char) -> String {
    kinds(x)
        .into_iter()
        .map(|(kind, key)| {
            sums_sql(
                "run_totals",
                "kind, key",
                &format!("'{kind}', {key}"),
                &format!("kind = '{kind}' AND key = {key}"),
                x,
                sign,
            )
        })
        .collect()
}

/// The statement adding or taking out the row `x` in `run_day_totals`.
fn day_apply_sql(x: &str, sign: char) -> String {
    let day = day_sql(x);
    sums_sql(
        "run_day_totals",
        "day",
        &day,
        &format!("day = {day}"),
        x,
        sign,
    )
}

/// Statements bringing `run_dup_ids` up to date for the run id of the row `x`.
fn dup_sql(x: &str) -> String {
    format!(
        "DELETE FROM run_dup_ids WHERE run_id = {x}.run_id \
         AND (SELECT count(*) FROM runs WHERE run_id = {x}.run_id) < 2;\n\
         INSERT OR IGNORE INTO run_dup_ids (run_id) SELECT {x}.run_id \
         WHERE (SELECT count(*) FROM runs WHERE run_id = {x}.run_id) > 1;\n"
    )
}

/// The columns an `UPDATE` of `runs` must change for the totals to change.
const WATCHED: [&str; 13] = [
    "run_id",
    "session_id",
    "model_provider",
    "model_name",
    "outcome",
    "invocation_count",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "total_tokens",
    "started_at_utc",
    "diagnostic",
    "path",
];

/// The tables and triggers (idempotent).
fn schema_sql() -> String {
    let changed = WATCHED
        .iter()
        .map(|c| format!("OLD.{c} IS NOT NEW.{c}"))
        .collect::<Vec<_>>()
        .join(" OR ");
    format!(
        "CREATE TABLE IF NOT EXISTS run_totals (\n\
         kind TEXT NOT NULL, key TEXT NOT NULL,\n\
         runs INTEGER NOT NULL, completed INTEGER NOT NULL, errors INTEGER NOT NULL,\n\
         cancelled INTEGER NOT NULL, invocations INTEGER NOT NULL,\n\
         input_tokens INTEGER NOT NULL, cached_input_tokens INTEGER NOT NULL,\n\
         output_tokens INTEGER NOT NULL, total_tokens INTEGER NOT NULL,\n\
         PRIMARY KEY (kind, key)) WITHOUT ROWID;\n\
         CREATE TABLE IF NOT EXISTS run_dup_ids (run_id TEXT PRIMARY KEY) WITHOUT ROWID;\n\
         CREATE TRIGGER IF NOT EXISTS run_totals_replace BEFORE INSERT ON runs BEGIN\n\
         DELETE FROM runs WHERE path = NEW.path;\nEND;\n\
         CREATE TRIGGER IF NOT EXISTS run_totals_insert AFTER INSERT ON runs BEGIN\n\
         {dup_new}END;\n\
         CREATE TRIGGER IF NOT EXISTS run_totals_insert_run AFTER INSERT ON runs \
         WHEN NEW.diagnostic IS NULL BEGIN\n{add_new}END;\n\
         CREATE TRIGGER IF NOT EXISTS run_totals_delete AFTER DELETE ON runs BEGIN\n\
         {dup_old}END;\n\
         CREATE TRIGGER IF NOT EXISTS run_totals_delete_run AFTER DELETE ON runs \
         WHEN OLD.diagnostic IS NULL BEGIN\n{sub_old}END;\n\
         CREATE TRIGGER IF NOT EXISTS run_totals_update AFTER UPDATE ON runs \
         WHEN OLD.run_id IS NOT NEW.run_id BEGIN\n{dup_old}{dup_new}END;\n\
         CREATE TRIGGER IF NOT EXISTS run_totals_update_old AFTER UPDATE ON runs \
         WHEN OLD.diagnostic IS NULL AND ({changed}) BEGIN\n{sub_old}END;\n\
         CREATE TRIGGER IF NOT EXISTS run_totals_update_new AFTER UPDATE ON runs \
         WHEN NEW.diagnostic IS NULL AND ({changed}) BEGIN\n{add_new}END;\n\
         CREATE TABLE IF NOT EXISTS run_day_totals (\n\
         day TEXT NOT NULL PRIMARY KEY,\n\
         runs INTEGER NOT NULL, completed INTEGER NOT NULL, errors INTEGER NOT NULL,\n\
         cancelled INTEGER NOT NULL, invocations INTEGER NOT NULL,\n\
         input_tokens INTEGER NOT NULL, cached_input_tokens INTEGER NOT NULL,\n\
         output_tokens INTEGER NOT NULL, total_tokens INTEGER NOT NULL) WITHOUT ROWID;\n\
         CREATE TRIGGER IF NOT EXISTS run_day_totals_replace BEFORE INSERT ON runs BEGIN\n\
         DELETE FROM runs WHERE path = NEW.path;\nEND;\n\
         CREATE TRIGGER IF NOT EXISTS run_day_totals_insert AFTER INSERT ON runs \
         WHEN NEW.diagnostic IS NULL BEGIN\n{day_add_new}END;\n\
         CREATE TRIGGER IF NOT EXISTS run_day_totals_delete AFTER DELETE ON runs \
         WHEN OLD.diagnostic IS NULL BEGIN\n{day_sub_old}END;\n\
         CREATE TRIGGER IF NOT EXISTS run_day_totals_update_old AFTER UPDATE ON runs \
         WHEN OLD.diagnostic IS NULL AND ({changed}) BEGIN\n{day_sub_old}END;\n\
         CREATE TRIGGER IF NOT EXISTS run_day_totals_update_new AFTER UPDATE ON runs \
         WHEN NEW.diagnostic IS NULL AND ({changed}) BEGIN\n{day_add_new}END;\n",
        dup_new = dup_sql("NEW"),
        dup_old = dup_sql("OLD"),
        add_new = apply_sql("NEW", '+'),
        sub_old = apply_sql("OLD", '-'),
        day_add_new = day_apply_sql("NEW", '+'),
        day_sub_old = day_apply_sql("OLD", '-'),
    )
}

/// The triggers of `run_totals` and `run_dup_ids` (user version 10), by name.
const TRIGGERS: [&str; 8] = [
    "run_totals_replace",
    "run_totals_insert",
    "run_totals_insert_run",
    "run_totals_delete",
    "run_totals_delete_run",
    "run_totals_update",
    "run_totals_update_old",
    "run_totals_update_new",
];

/// The triggers of `run_day_totals` (user version 11), by name.
const DAY_TRIGGERS: [&str; 5] = [
    "run_day_totals_replace",
    "run_day_totals_insert",
    "run_day_totals_delete",
    "run_day_totals_update_old",
    "run_day_totals_update_new",
];

/// Whether every one of `tables` and `triggers` exists in this database's `main` schema.
fn all_exist(conn: &Connection, tables: &[&str], triggers: &[&str]) -> rusqlite::Result<bool> {
    let list = |names: &[&str]| {
        names
            .iter()
            .map(|t| format!("'{t}'"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let n = query_int(
        conn,
        &format!(
            "SELECT count(*) FROM main.sqlite_master WHERE (type = 'table' AND name IN ({})) \
             OR (type = 'trigger' AND name IN ({}))",
            list(tables),
            list(triggers)
        ),
        [],
    )?;
    Ok(usize::try_from(n).is_ok_and(|n| n == tables.len() + triggers.len()))
}

/// Whether the quarter-hour, model and session totals (`run_totals`, `run_dup_ids`) are kept
/// in this database's `main` schema: both tables and every trigger exist (a read-only open of
/// an older `state.db` has stand-ins at most).
pub(crate) fn quarters_kept(conn: &Connection) -> rusqlite::Result<bool> {
    all_exist(conn, &["run_totals", "run_dup_ids"], &TRIGGERS)
}

/// Whether the day totals (`run_day_totals`) are kept in this database's `main` schema: the
/// table and its triggers exist (not in a `state.db` of user version 10 opened read-only).
pub(crate) fn days_kept(conn: &Connection) -> rusqlite::Result<bool> {
    all_exist(conn, &["run_day_totals"], &DAY_TRIGGERS)
}

/// Whether every running total of this version is kept: [`quarters_kept`] and
/// [`days_kept`].
pub(crate) fn is_current(conn: &Connection) -> rusqlite::Result<bool> {
    Ok(quarters_kept(conn)? && days_kept(conn)?)
}

/// Row changes from which a refresh writes `runs` without the triggers and sums the running
/// totals again afterwards ([`bulk`]): about where one `GROUP BY` pass over 100k rows costs
/// less than the triggers' three upserts per changed row.
pub(crate) const BULK_ROWS: usize = 4096;

/// Runs `write` (many changes to `runs`) with the triggers dropped, then creates them again
/// and sums the running totals from the rows ([`migrate`]): one pass instead of three upserts
/// per inserted and per deleted row. Must run inside the caller's write transaction, which
/// makes the three steps one: a failure or a crash rolls the triggers back with the rows. A
/// database without the running totals just runs `write`.
///
/// `write` gets a [`Fold`]: a writer that fills an empty `runs` may [`Fold::begin`] it and
/// [`Fold::add`] each row it writes; the totals are then written from it instead of being
/// summed from a read of the rows, when it still counts the table's runs after `write`.
///
/// # Errors
/// The first SQLite error of the three steps.
pub(crate) fn bulk<T>(
    conn: &Connection,
    write: impl FnOnce(&mut Fold) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let mut fold = Fold::default();
    if !is_current(conn)? {
        return write(&mut fold);
    }
    for t in TRIGGERS.iter().chain(&DAY_TRIGGERS) {
        conn.execute_batch(&format!("DROP TRIGGER IF EXISTS {t};"))?;
    }
    let out = write(&mut fold)?;
    migrate_with(conn, fold)?;
    Ok(out)
}

/// Creates the tables and triggers and fills them from the rows `runs` already has (the
/// migrations to user versions 10 and 11; run inside the caller's write transaction).
pub(crate) fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    migrate_with(conn, Fold::default())
}

/// [`migrate`], the sums taken from `fold` when it holds every run of the table
/// ([`Fold::begin`] on an empty table, as many runs added as the table holds).
fn migrate_with(conn: &Connection, fold: Fold) -> rusqlite::Result<()> {
    conn.execute_batch(&schema_sql())?;
    conn.execute_batch(
        "DELETE FROM run_totals; DELETE FROM run_day_totals; DELETE FROM run_dup_ids; \
         INSERT INTO run_dup_ids (run_id) SELECT run_id FROM runs GROUP BY run_id \
         HAVING count(*) > 1;",
    )?;
    if fold.state == FoldState::Folding {
        // Every row the table holds went through `add` unless the writer replaced or deleted
        // one after: then fewer runs are stored than were added.
        let stored = query_int(
            conn,
            "SELECT (SELECT count(*) FROM runs) - \
             (SELECT count(*) FROM runs WHERE diagnostic IS NOT NULL)",
            [],
        )?;
        if u64::try_from(stored).ok() == Some(fold.runs) {
            return put_groups(conn, fold.groups);
        }
    }
    if fill_in_one_scan(conn)? {
        return Ok(());
    }
    let day = day_sql("runs");
    let groups = kinds("runs")
        .into_iter()
        .map(|(kind, key)| {
            (
                "run_totals (kind, key",
                format!("'{kind}', {key}"),
                format!("run_totals WHERE kind = '{kind}'"),
            )
        })
        .chain(std::iter::once((
            "run_day_totals (day",
            day,
            "run_day_totals".to_owned(),
        )));
    for (into, key, clear) in groups {
        let fill = |sum: &str| {
            format!(
                "INSERT INTO {into}, {SUMS}) SELECT {key} AS k, \
                 count(*), {sum}(outcome = 'completed'), {sum}(outcome = 'error'), \
                 {sum}(outcome = 'cancelled'), {sum}(invocation_count), {sum}(input_tokens), \
                 {sum}(cached_input_tokens), {sum}(output_tokens), {sum}(total_tokens) \
                 FROM runs WHERE diagnostic IS NULL GROUP BY k"
            )
        };
        if conn.execute_batch(&fill("sum")).is_err() {
            // An integer overflow in a sum (absurd stored counts): floats, which the reader
            // does not use (it sums the rows instead), as the triggers would leave them.
            conn.execute_batch(&format!("DELETE FROM {clear}"))?;
            conn.execute_batch(&fill("total"))?;
        }
    }
    Ok(())
}

/// The sums of one key as they are stored (signed), in the order of [`SUMS`].
type StoredSums = [i64; 9];

/// The `runs` columns a [`TotalsOf`] holds, in its fields' order.
pub(crate) const TOTALS_NAMES: [&str; 10] = [
    "started_at_utc",
    "model_provider",
    "model_name",
    "session_id",
    "outcome",
    "invocation_count",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "total_tokens",
];

/// The values of a `runs` row the running totals read, as stored.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TotalsOf<'a> {
    /// `started_at_utc`.
    pub(crate) started_at_utc: ValueRef<'a>,
    /// `model_provider`.
    pub(crate) model_provider: ValueRef<'a>,
    /// `model_name`.
    pub(crate) model_name: ValueRef<'a>,
    /// `session_id`.
    pub(crate) session_id: ValueRef<'a>,
    /// `outcome`.
    pub(crate) outcome: ValueRef<'a>,
    /// `invocation_count`, `input_tokens`, `cached_input_tokens`, `output_tokens`,
    /// `total_tokens`.
    pub(crate) counts: [ValueRef<'a>; 5],
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum FoldState {
    /// Not started: the totals are summed from the rows.
    #[default]
    Unused,
    /// Every run added so far is summed.
    Folding,
    /// A value the fold does not sum as SQL would (not text, not an integer, an overflow).
    Spoiled,
}

/// The running totals summed in Rust, row by row, with the keys of the triggers' SQL
/// expressions (`quarter_sql`, `day_sql`, `model_sql`, `session_sql`) computed from the
/// stored values: what [`fill_in_one_scan`] sums from one read of the table, and what a
/// writer filling an empty `runs` sums as it writes ([`bulk`]), so that a first build does
/// not read its rows back. Groups are told apart and ordered by their bytes, as the `BINARY`
/// collation of the keys does.
#[derive(Debug, Default)]
pub(crate) struct Fold {
    /// Quarter-hours, models, sessions, days.
    groups: [BTreeMap<Vec<u8>, StoredSums>; 4],
    runs: u64,
    state: FoldState,
}

impl Fold {
    /// Starts summing: the caller adds every run it writes into a `runs` table that held no
    /// row when its write transaction began.
    pub(crate) fn begin(&mut self) {
        if self.state == FoldState::Unused {
            self.state = FoldState::Folding;
        }
    }

    /// Whether rows are being summed ([`Fold::begin`] and nothing unusable so far).
    pub(crate) fn is_folding(&self) -> bool {
        self.state == FoldState::Folding
    }

    /// Adds one run (a row with `diagnostic IS NULL`). A value the SQL sums would treat
    /// otherwise (a key that is not text, a count that is not an integer, a sum past 64
    /// bits) spoils the fold: the totals are then summed by SQL.
    pub(crate) fn add(&mut self, row: &TotalsOf<'_>) {
        if self.state != FoldState::Folding {
            return;
        }
        if self.try_add(row).is_none() {
            self.state = FoldState::Spoiled;
        }
    }

    fn try_add(&mut self, row: &TotalsOf<'_>) -> Option<()> {
        let outcome = match row.outcome {
            ValueRef::Text(t) => t,
            _ => return None,
        };
        let mut add: StoredSums = [
            1,
            i64::from(outcome == b"completed"),
            i64::from(outcome == b"error"),
            i64::from(outcome == b"cancelled"),
            0,
            0,
            0,
            0,
            0,
        ];
        for (slot, v) in add[4..].iter_mut().zip(row.counts) {
            match v {
                ValueRef::Integer(n) => *slot = n,
                _ => return None,
            }
        }
        let started = match row.started_at_utc {
            ValueRef::Null => None,
            // Bytes that are not UTF-8: left to SQL's `GLOB` and `substr`, which read characters.
            ValueRef::Text(t) if std::str::from_utf8(t).is_ok() => Some(t),
            _ => return None,
        };
        let (quarter, day) = time_keys(started);
        let model = match (row.model_provider, row.model_name) {
            (_, ValueRef::Null) => b"(unknown model)".to_vec(),
            (ValueRef::Null, ValueRef::Text(name)) => name.to_vec(),
            (ValueRef::Text(p), ValueRef::Text(name)) => [p, b"/", name].concat(),
            _ => return None,
        };
        let session = match row.session_id {
            ValueRef::Null => b"(no session)".as_slice(),
            ValueRef::Text(t) => t,
            _ => return None,
        };
        let keys: [&[u8]; 4] = [&quarter, &model, session, &day];
        for (map, key) in self.groups.iter_mut().zip(keys) {
            let sums = match map.get_mut(key) {
                Some(sums) => sums,
                None => map.entry(key.to_vec()).or_insert([0; 9]),
            };
            for (sum, a) in sums.iter_mut().zip(add) {
                *sum = sum.checked_add(a)?;
            }
        }
        self.runs += 1;
        Some(())
    }
}

/// Whether `s` matches `CANONICAL_GLOB` (`YYYY-MM-DDTHH:MM:…`, minutes 00–59; the pattern's
/// characters are ASCII, so bytes are characters there).
fn is_canonical(s: &[u8]) -> bool {
    let digits = |r: std::ops::Range<usize>| s[r].iter().all(u8::is_ascii_digit);
    s.len() >= 17
        && digits(0..4)
        && s[4] == b'-'
        && digits(5..7)
        && s[7] == b'-'
        && digits(8..10)
        && s[10] == b'T'
        && digits(11..13)
        && s[13] == b':'
        && (b'0'..=b'5').contains(&s[14])
        && s[15].is_ascii_digit()
        && s[16] == b':'
}

/// The quarter-hour and day keys of a stored `started_at_utc` (`quarter_sql`, `day_sql`).
fn time_keys(started: Option<&[u8]>) -> (Vec<u8>, Vec<u8>) {
    match started {
        None | Some(b"") => (b"(unknown date)".to_vec(), b"(unknown date)".to_vec()),
        Some(s) if is_canonical(s) => {
            let minutes = &s[14..16];
            let quarter: &[u8] = if minutes < b"15".as_slice() {
                b"00"
            } else if minutes < b"30".as_slice() {
                b"15"
            } else if minutes < b"45".as_slice() {
                b"30"
            } else {
                b"45"
            };
            ([&s[..14], quarter].concat(), s[..10].to_vec())
        }
        Some(s) => {
            let key = [b"~".as_slice(), s].concat();
            (key.clone(), key)
        }
    }
}

/// Fills `run_totals` (every kind) and `run_day_totals` from one read of the rows of `runs`
/// that are runs, summed by a [`Fold`]: one read instead of one `GROUP BY` pass over the
/// table per kind and one for the days (four reads of every row of a store-sized table, each
/// with its own sort). Returns `false`, having written nothing, when the fold is spoiled (a
/// key that is not text, a summed value not an integer, a sum past 64 bits): the caller then
/// sums in SQL, whose rules (floats, mixed storage classes) these cases follow.
fn fill_in_one_scan(conn: &Connection) -> rusqlite::Result<bool> {
    let mut fold = Fold::default();
    fold.begin();
    {
        let mut stmt = conn.prepare(&format!(
            "SELECT {} FROM runs WHERE diagnostic IS NULL",
            TOTALS_NAMES.join(", ")
        ))?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let c = crate::column::Cols::new(r, "runs", &TOTALS_NAMES)?;
            fold.add(&TotalsOf {
                started_at_utc: c.raw(0)?,
                model_provider: c.raw(1)?,
                model_name: c.raw(2)?,
                session_id: c.raw(3)?,
                outcome: c.raw(4)?,
                counts: [c.raw(5)?, c.raw(6)?, c.raw(7)?, c.raw(8)?, c.raw(9)?],
            });
            if !fold.is_folding() {
                return Ok(false);
            }
        }
    }
    put_groups(conn, fold.groups)?;
    Ok(true)
}

/// Writes summed groups (quarter-hours, models, sessions, days) into the emptied tables.
fn put_groups(
    conn: &Connection,
    groups: [BTreeMap<Vec<u8>, StoredSums>; 4],
) -> rusqlite::Result<()> {
    let [quarters, models, sessions, days] = groups;
    let mut put = conn.prepare(&format!(
        "INSERT INTO run_totals (kind, key, {SUMS}) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
    ))?;
    for (kind, map) in [("q", quarters), ("m", models), ("s", sessions)] {
        for (key, sums) in map {
            put.execute(rusqlite::params![
                kind,
                rusqlite::types::ToSqlOutput::Borrowed(ValueRef::Text(&key)),
                sums[0],
                sums[1],
                sums[2],
                sums[3],
                sums[4],
                sums[5],
                sums[6],
                sums[7],
                sums[8]
            ])?;
        }
    }
    let mut put = conn.prepare(&format!(
        "INSERT INTO run_day_totals (day, {SUMS}) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
    ))?;
    for (key, sums) in days {
        put.execute(rusqlite::params![
            rusqlite::types::ToSqlOutput::Borrowed(ValueRef::Text(&key)),
            sums[0],
            sums[1],
            sums[2],
            sums[3],
            sums[4],
            sums[5],
            sums[6],
            sums[7],
            sums[8]
        ])?;
    }
    Ok(())
}

/// The kind of running totals a grouping reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// UTC quarter-hours.
    Quarter,
    /// Models.
    Model,
    /// Sessions.
    Session,
}

impl Kind {
    fn tag(self) -> &'static str {
        match self {
            Kind::Quarter => "q",
            Kind::Model => "m",
            Kind::Session => "s",
        }
    }
}

/// The `since` / `until` bounds of a query as the row filter compares them (the run index's
/// UTC key, or the text as given).
#[derive(Debug, Clone, Default)]
pub(crate) struct Window {
    pub(crate) since: Option<String>,
    pub(crate) until: Option<String>,
}

impl Window {
    fn bounded(&self) -> bool {
        self.since.is_some() || self.until.is_some()
    }
}

/// The sums of one row of `run_totals`, in the order of its columns: runs, completed,
/// errors, cancelled, invocations, input, cached input, output and total tokens.
pub(crate) type Sums = [u64; 9];

/// What reading the running totals of a kind gave.
#[derive(Debug, Default)]
pub(crate) struct Read {
    /// Sums per key of the kind: whole quarter-hours inside the window (every quarter-hour
    /// without a window).
    pub(crate) groups: BTreeMap<String, Sums>,
    /// Quarter-hours the window cuts, as `(first, last)` inclusive bounds of
    /// `started_at_utc` (`…:00.000Z`, `…:59.999Z`): their rows are summed by the caller.
    pub(crate) edges: Vec<(String, String)>,
    /// Rows of `run_totals` read.
    pub(crate) rows: u64,
    /// SQLite virtual-machine steps of the read.
    pub(crate) steps: u64,
}

/// The last instant of the quarter-hour `key` (`YYYY-MM-DDTHH:MM`), `…:MM+14:59.999Z`.
fn quarter_last(key: &str) -> Option<String> {
    let head = key.get(..14)?;
    let minute: u32 = key.get(14..16)?.parse().ok()?;
    Some(format!("{head}{:02}:59.999Z", minute + 14))
}

/// The quarter-hour key holding the canonical UTC key `at` (its first 14 characters and the
/// minute rounded down to a multiple of 15); `None` for other text.
fn quarter_of(at: &str) -> Option<String> {
    let head = at.get(..14)?;
    let minute: u32 = at.get(14..16)?.parse().ok()?;
    Some(format!("{head}{:02}", minute - minute % 15))
}

/// Reads the running totals of `kind` for the window `w`. `Ok(None)` when they cannot answer
/// exactly: a sum is not a non-negative integer (an overflow), a start time is not canonical
/// (a `~` key), or a window bounds a kind other than [`Kind::Quarter`].
pub(crate) fn read(conn: &Connection, kind: Kind, w: &Window) -> rusqlite::Result<Option<Read>> {
    if kind != Kind::Quarter && w.bounded() {
        return Ok(None);
    }
    let mut out = Read::default();
    // Only the quarter-hours that can hold a start inside the window, and every `~` key.
    let lo = w.since.as_deref().and_then(quarter_of).unwrap_or_default();
    let hi = w.until.clone().unwrap_or_else(|| "\u{10ffff}".to_owned());
    let sql = format!(
        "SELECT key, {SUMS} FROM run_totals WHERE kind = ?1 \
         AND ((key >= ?2 AND key <= ?3) OR key >= '~')"
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query(rusqlite::params![kind.tag(), lo, hi])?;
    while let Some(r) = rows.next()? {
        out.rows += 1;
        let v = owned_row(r, 10)?;
        let Some(key) = v.first().and_then(|k| text_of(k.as_ref()).0) else {
            return Ok(None);
        };
        let Some(t) = sums_of(&v) else {
            return Ok(None);
        };
        if kind != Kind::Quarter {
            out.groups.insert(key, t);
            continue;
        }
        if key.starts_with('~') {
            return Ok(None);
        }
        if key == "(unknown date)" {
            // No place in time: matches no bound.
            if !w.bounded() {
                out.groups.insert(key, t);
            }
            continue;
        }
        let (Some(last), first) = (quarter_last(&key), format!("{key}:00.000Z")) else {
            return Ok(None);
        };
        let after_since = w.since.as_deref().is_none_or(|s| first.as_str() >= s);
        let before_until = w.until.as_deref().is_none_or(|u| last.as_str() < u);
        let outside = w.since.as_deref().is_some_and(|s| last.as_str() < s)
            || w.until.as_deref().is_some_and(|u| first.as_str() >= u);
        if after_since && before_until {
            out.groups.insert(key, t);
        } else if !outside {
            out.edges.push((first, last));
        }
    }
    drop(rows);
    out.steps = u64::try_from(stmt.get_status(StatementStatus::VmStep)).unwrap_or(0);
    Ok(Some(out))
}

/// The sums of one row of `run_totals` or `run_day_totals` (`v`: the key, then [`SUMS`]);
/// `None` when one is not a non-negative integer (an overflow turned it into a float).
fn sums_of(v: &[OwnedValue]) -> Option<Sums> {
    let mut sums = [0u64; 9];
    for (i, s) in sums.iter_mut().enumerate() {
        match v.get(i + 1).map(OwnedValue::as_ref) {
            Some(ValueRef::Integer(n)) if n >= 0 => *s = n.unsigned_abs(),
            _ => return None,
        }
    }
    Some(sums)
}

/// Reads the running totals by UTC day for the window `w`: each day the window holds whole
/// is one row of `run_day_totals`; each day it cuts (at most the two of `since` and `until`)
/// is read by quarter-hour ([`read`] of that day's part of the window), so the cost is one
/// row per day plus at most 2 × 96 quarter-hours, whatever the runs. The keys of
/// [`Read::groups`] are days (`YYYY-MM-DD`, `(unknown date)` without a window) and the
/// quarter-hours of cut days; [`Read::edges`] are the quarter-hours the window cuts.
/// `Ok(None)` as for [`read`].
///
/// A day `D` holds the keys from `DT00:00:` (the least a canonical key of `D` can be) up to,
/// not including, `DU` (`U` follows `T`): it lies inside the window when `since ≤ DT00:00:`
/// and `until ≥ DU`, outside when `since ≥ DU` or `until ≤ DT00:00:`, else it is cut.
pub(crate) fn read_days(conn: &Connection, w: &Window) -> rusqlite::Result<Option<Read>> {
    let mut out = Read::default();
    let Some((days, rows, steps)) = read_day_rows(conn, w)? else {
        return Ok(None);
    };
    out.rows = rows;
    out.steps = steps;
    let mut cut = Vec::new();
    for (day, sums) in days {
        // Only there when the window is unbounded.
        if day == UNKNOWN_DATE {
            out.groups.insert(day, sums);
            continue;
        }
        let (first, end) = (format!("{day}T00:00:"), format!("{day}U"));
        let since = w.since.as_deref();
        let until = w.until.as_deref();
        let outside =
            since.is_some_and(|s| s >= end.as_str()) || until.is_some_and(|u| u <= first.as_str());
        let inside =
            since.is_none_or(|s| s <= first.as_str()) && until.is_none_or(|u| u >= end.as_str());
        if outside {
            continue;
        }
        if inside {
            out.groups.insert(day, sums);
        } else {
            // The day's part of the window, by quarter-hour.
            let start = format!("{day}T00:00:00.000Z");
            cut.push(Window {
                since: Some(since.map_or(start.clone(), |s| s.max(start.as_str()).to_owned())),
                until: Some(until.map_or(end.clone(), |u| u.min(end.as_str()).to_owned())),
            });
        }
    }
    for part in &cut {
        let Some(q) = read(conn, Kind::Quarter, part)? else {
            return Ok(None);
        };
        out.rows += q.rows;
        out.steps = out.steps.saturating_add(q.steps);
        out.groups.extend(q.groups);
        out.edges.extend(q.edges);
    }
    Ok(Some(out))
}

/// The key of the runs without a usable start time (`started_at_utc` `''`), in every kind
/// of time key.
pub(crate) const UNKNOWN_DATE: &str = "(unknown date)";

/// Sums by day, rows read and virtual-machine steps of [`read_day_rows`].
pub(crate) type DayRows = (BTreeMap<String, Sums>, u64, u64);

/// The rows of `run_day_totals` whose days can hold a start inside the window `w` (with
/// `(unknown date)` when `w` is unbounded), by day, the rows read (`(unknown date)`'s
/// included when it is left out) and the read's SQLite virtual-machine steps. `Ok(None)` as
/// for [`read`]: a `~` key (a start time that is not canonical) or a sum that is not a
/// non-negative integer.
pub(crate) fn read_day_rows(conn: &Connection, w: &Window) -> rusqlite::Result<Option<DayRows>> {
    let lo = w.since.as_deref().map_or("", |s| s.get(..10).unwrap_or(s));
    let hi = w
        .until
        .as_deref()
        .map_or("\u{10ffff}", |u| u.get(..10).unwrap_or(u));
    let sql = format!(
        "SELECT day, {SUMS} FROM run_day_totals WHERE (day >= ?1 AND day <= ?2) OR day >= '~'"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut out = BTreeMap::new();
    let mut read = 0u64;
    let mut rows = stmt.query(rusqlite::params![lo, hi])?;
    while let Some(r) = rows.next()? {
        read += 1;
        let v = owned_row(r, 10)?;
        let (Some(day), Some(sums)) = (v.first().and_then(|k| text_of(k.as_ref()).0), sums_of(&v))
        else {
            return Ok(None);
        };
        if day.starts_with('~') {
            return Ok(None);
        }
        if day == UNKNOWN_DATE && w.bounded() {
            continue;
        }
        out.insert(day, sums);
    }
    drop(rows);
    let steps = u64::try_from(stmt.reset_status(StatementStatus::VmStep)).unwrap_or(0);
    Ok(Some((out, read, steps)))
}

/// The sums of the quarter-hour rows of `run_totals` whose keys are in `[from, to)`, added
/// up by SQLite (one result row, whatever the number of quarter-hours), and the statement's
/// virtual-machine steps. `Ok(None)` when a sum is not a non-negative integer or the total
/// overflows.
pub(crate) fn quarter_range(
    conn: &Connection,
    from: &str,
    to: &str,
) -> rusqlite::Result<Option<(Sums, u64)>> {
    let cols: Vec<&str> = SUMS.split(", ").map(str::trim).collect();
    let sums = cols
        .iter()
        .map(|c| format!("sum({c})"))
        .collect::<Vec<_>>()
        .join(", ");
    let bad = cols
        .iter()
        .map(|c| format!("typeof({c}) <> 'integer' OR {c} < 0"))
        .collect::<Vec<_>>()
        .join(" OR ");
    let sql = format!(
        "SELECT {sums}, sum({bad}) FROM run_totals WHERE kind = 'q' AND key >= ?1 AND key < ?2"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    // An overflowing `sum()` fails while stepping: not usable, the caller sums the rows.
    let Ok(v) = stmt.query_row(rusqlite::params![from, to], |r| owned_row(r, 10)) else {
        return Ok(None);
    };
    let steps = u64::try_from(stmt.reset_status(StatementStatus::VmStep)).unwrap_or(0);
    let mut out = [0u64; 9];
    for (i, o) in out.iter_mut().enumerate() {
        match v.get(i).map(OwnedValue::as_ref) {
            Some(ValueRef::Integer(n)) if n >= 0 => *o = n.unsigned_abs(),
            Some(ValueRef::Null) => {}
            _ => return Ok(None),
        }
    }
    match v.get(9).map(OwnedValue::as_ref) {
        Some(ValueRef::Integer(0) | ValueRef::Null) => Ok(Some((out, steps))),
        _ => Ok(None),
    }
}

/// The quarter-hour key SQL of a `runs` row (for summing the rows of a cut quarter-hour, and
/// for [`RunGrouping::QuarterHour`] when the rows are summed).
pub(crate) fn quarter_key_sql() -> String {
    quarter_sql("runs")
}

/// The quarter-hour key of a `runs.started_at_utc` in Rust, as [`quarter_sql`] gives it.
pub(crate) fn quarter_key(started_at_utc: Option<&str>) -> String {
    let at = match started_at_utc {
        None | Some("") => return "(unknown date)".to_owned(),
        Some(at) => at,
    };
    let b = at.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let canonical = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 15].into_iter().all(digit)
        && b.get(14).is_some_and(|c| (b'0'..=b'5').contains(c))
        && [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')]
            .into_iter()
            .all(|(i, c)| b.get(i) == Some(&c));
    match quarter_of(at) {
        Some(q) if canonical => q,
        _ => format!("~{at}"),
    }
}

/// The text of an SQL value list for the bounds of one cut quarter-hour.
pub(crate) fn edge_args(edge: &(String, String)) -> [Value; 2] {
    [Value::Text(edge.0.clone()), Value::Text(edge.1.clone())]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::column::int_of;

    /// The first column of every row of `sql`.
    fn ints(conn: &Connection, sql: &str) -> Vec<i64> {
        let mut stmt = conn.prepare(sql).unwrap();
        let rows = stmt.query_map([], |r| owned_row(r, 1)).unwrap();
        rows.map(|r| {
            r.ok()
                .and_then(|v| v.first().and_then(|v| int_of(v.as_ref())))
                .unwrap_or(-1)
        })
        .collect()
    }

    fn db() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE runs (path TEXT PRIMARY KEY, run_id TEXT NOT NULL, session_id TEXT, \
             model_provider TEXT, model_name TEXT, outcome TEXT NOT NULL, \
             invocation_count INTEGER NOT NULL, input_tokens INTEGER NOT NULL, \
             cached_input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, \
             total_tokens INTEGER NOT NULL, started_at_utc TEXT NOT NULL DEFAULT '', \
             diagnostic TEXT);",
        )
        .unwrap();
        conn
    }

    fn insert(conn: &Connection, path: &str, run: &str, start: &str, tokens: i64) {
        conn.execute(
            "INSERT OR REPLACE INTO runs (path, run_id, session_id, model_provider, model_name, \
             outcome, invocation_count, input_tokens, cached_input_tokens, output_tokens, \
             total_tokens, started_at_utc) VALUES (?1, ?2, 's', 'p', 'm', 'completed', 1, ?3, \
             0, 0, ?3, ?4)",
            rusqlite::params![path, run, tokens, start],
        )
        .unwrap();
    }

    #[test]
    fn triggers_keep_quarter_hours_through_replace_update_and_delete() {
        let conn = db();
        migrate(&conn).unwrap();
        assert!(is_current(&conn).unwrap());
        insert(&conn, "a", "r1", "2026-11-30T10:14:59.999Z", 5);
        insert(&conn, "b", "r2", "2026-11-30T10:15:00.000Z", 7);
        // Replaced by a second write of the same file: counted once, with the new values.
        insert(&conn, "a", "r1", "2026-11-30T10:14:59.999Z", 6);
        let q = "SELECT runs FROM run_totals WHERE kind = 'q' ORDER BY key";
        assert_eq!(ints(&conn, q), vec![1, 1]);
        let t = "SELECT total_tokens FROM run_totals WHERE kind = 'q' ORDER BY key";
        assert_eq!(ints(&conn, t), vec![6, 7]);
        assert_eq!(
            ints(
                &conn,
                "SELECT total_tokens FROM run_totals WHERE kind = 'm'"
            ),
            vec![13]
        );
        conn.execute_batch("UPDATE runs SET started_at_utc = '2026-11-30T10:20:00.000Z'")
            .unwrap();
        assert_eq!(ints(&conn, q), vec![2]);
        conn.execute_batch("UPDATE runs SET diagnostic = 'empty' WHERE path = 'b'")
            .unwrap();
        assert_eq!(ints(&conn, t), vec![6]);
        // Another file of run r1, then gone again.
        insert(&conn, "c", "r1", "", 1);
        assert_eq!(ints(&conn, "SELECT count(*) FROM run_dup_ids"), vec![1]);
        conn.execute_batch("DELETE FROM runs WHERE path = 'c'")
            .unwrap();
        assert_eq!(ints(&conn, "SELECT count(*) FROM run_dup_ids"), vec![0]);
        conn.execute_batch("DELETE FROM runs").unwrap();
        assert_eq!(ints(&conn, "SELECT count(*) FROM run_totals"), vec![0]);
    }

    /// Every row of the running-totals tables, with the storage class of every value.
    fn totals_tables(conn: &Connection) -> Vec<String> {
        let mut out = Vec::new();
        for sql in [
            "SELECT * FROM run_totals ORDER BY kind, key",
            "SELECT * FROM run_day_totals ORDER BY day",
            "SELECT * FROM run_dup_ids ORDER BY run_id",
        ] {
            let mut stmt = conn.prepare(sql).unwrap();
            let n = stmt.column_count();
            let rows = stmt.query_map([], |r| owned_row(r, n)).unwrap();
            out.extend(rows.map(|r| format!("{:?}", r.unwrap())));
            out.push(String::new());
        }
        out
    }

    /// Statements run on `conn` by `op` that read the rows of `runs` (an `INSERT … SELECT` or
    /// a `SELECT` with `FROM runs`; the schema's trigger bodies are not reads).
    fn reads_of_runs(conn: &mut Connection, op: impl FnOnce(&Connection)) -> Vec<String> {
        use rusqlite::trace::{TraceEvent, TraceEventCodes};
        use std::sync::{Arc, Mutex};
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = Arc::clone(&seen);
        conn.trace_v2(
            TraceEventCodes::SQLITE_TRACE_STMT,
            Some(move |e: TraceEvent<'_>| {
                if let TraceEvent::Stmt(_, sql) = e {
                    sink.lock().unwrap().push(sql.to_owned());
                }
            }),
        )
        .unwrap();
        op(conn);
        conn.trace_v2(TraceEventCodes::empty(), None::<fn(TraceEvent<'_>)>)
            .unwrap();
        let all = seen.lock().unwrap().clone();
        all.into_iter()
            .filter(|sql| {
                let sql = sql.trim_start();
                (sql.starts_with("INSERT") || sql.starts_with("SELECT"))
                    && (sql.contains("FROM runs ") || sql.ends_with("FROM runs"))
            })
            .collect()
    }

    #[test]
    fn summing_the_totals_again_reads_the_runs_twice_and_gives_what_the_triggers_keep() {
        let mut conn = db();
        migrate(&conn).unwrap();
        for i in 0..300i64 {
            insert(
                &conn,
                &format!("p{i:03}"),
                &format!("r{}", i % 250),
                &format!(
                    "2026-05-{:02}T{:02}:{:02}:00.000Z",
                    1 + i % 28,
                    i % 24,
                    (i * 7) % 60
                ),
                i,
            );
        }
        // Keys of every shape: no session, no model, no provider, no date, not canonical, and
        // a file that is no run.
        conn.execute_batch(
            "UPDATE runs SET session_id = NULL WHERE path = 'p001'; \
             UPDATE runs SET model_name = NULL WHERE path = 'p002'; \
             UPDATE runs SET model_provider = NULL, outcome = 'error' WHERE path = 'p003'; \
             UPDATE runs SET started_at_utc = '' WHERE path = 'p004'; \
             UPDATE runs SET started_at_utc = 'later', outcome = 'cancelled' WHERE path = 'p005'; \
             UPDATE runs SET diagnostic = 'empty file' WHERE path = 'p006';",
        )
        .unwrap();
        // Start times at the edges of the canonical pattern and of the quarter-hours, each
        // summed by the fold (below) as the triggers' `GLOB`, `substr` and `CASE` key it.
        let starts = [
            "2026-05-01T10:14:59.999Z",
            "2026-05-01T10:15:00Z",
            "2026-05-01T10:29:00",
            "2026-05-01T10:30:",
            "2026-05-01T10:44:00.000Z",
            "2026-05-01T10:45:00.000Z",
            "2026-05-01T10:59:59.999Z",
            "2026-05-01T10:60:00.000Z",
            "2026-05-01T10:5",
            "2026-05-01T10:59",
            "2026-05-01 10:15:00.000Z",
            "2026-5-01T10:15:00.000Z",
            "x026-05-01T10:15:00.000Z",
            "2026-05-01T10:15:00.000Z\u{e9}",
            "\u{e9}026-05-01T10:15:00.000Z",
            "2026-05-01T10:15:00.000Z\0tail",
            "2026-05-01T1\u{0}0:15:00.000Z",
            " ",
        ];
        for (i, at) in starts.iter().enumerate() {
            conn.execute(
                "UPDATE runs SET started_at_utc = ?1 WHERE path = ?2",
                rusqlite::params![at, format!("p{:03}", 20 + i)],
            )
            .unwrap();
        }
        conn.execute(
            "UPDATE runs SET model_provider = ?1 WHERE path = 'p040'",
            ["p\0q"],
        )
        .unwrap();
        conn.execute_batch(
            "UPDATE runs SET session_id = '' WHERE path = 'p041'; \
             UPDATE runs SET outcome = 'completed ' WHERE path = 'p042';",
        )
        .unwrap();
        let by_triggers = totals_tables(&conn);
        assert!(by_triggers.len() > 300, "{} rows", by_triggers.len());
        let reads = reads_of_runs(&mut conn, |c| migrate(c).unwrap());
        assert_eq!(totals_tables(&conn), by_triggers);
        // One read for the run ids held by several rows, one for every sum: not one per kind
        // of totals and one for the days (five reads of every row, each sorted).
        assert_eq!(reads.len(), 2, "{reads:#?}");

        // A sum past 64 bits: summed in SQL, as before (floats, not usable by the reader).
        conn.execute(
            "UPDATE runs SET total_tokens = ?1 WHERE path IN ('p010', 'p011')",
            [i64::MAX],
        )
        .unwrap();
        migrate(&conn).unwrap();
        let kind = crate::column::query_texts(
            &conn,
            "SELECT DISTINCT typeof(total_tokens) FROM run_totals WHERE kind = 's' \
             AND key = (SELECT session_id FROM runs WHERE path = 'p010')",
            [],
            0,
        )
        .unwrap();
        assert_eq!(kind, vec!["real".to_owned()]);
        assert_eq!(
            ints(&conn, "SELECT sum(runs) FROM run_totals WHERE kind = 'q'"),
            vec![299]
        );
    }

    #[test]
    fn a_bulk_write_sums_once_keeps_the_triggers_and_rolls_back_whole() {
        let conn = db();
        migrate(&conn).unwrap();
        insert(&conn, "a", "r1", "2026-11-30T10:14:59.999Z", 5);
        let totals = "SELECT kind || key || runs || '/' || total_tokens FROM run_totals \
                      ORDER BY kind, key";
        let text = |conn: &Connection| -> Vec<String> {
            let mut stmt = conn.prepare(totals).unwrap();
            stmt.query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        // Many rows written without the triggers: the totals are those the triggers keep.
        let steps = std::cell::Cell::new(0u32);
        bulk(&conn, |_| {
            assert!(!is_current(&conn).unwrap(), "the triggers are off inside");
            conn.execute_batch("DELETE FROM runs")?;
            for i in 0..40i64 {
                insert(
                    &conn,
                    &format!("p{i}"),
                    &format!("r{}", i % 30),
                    "2026-11-30T11:00:00.000Z",
                    i,
                );
                steps.set(steps.get() + 1);
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(steps.get(), 40);
        assert!(is_current(&conn).unwrap());
        let bulk_totals = text(&conn);
        let dups = ints(&conn, "SELECT count(*) FROM run_dup_ids");
        assert_eq!(dups, vec![10]);
        let fresh = db();
        migrate(&fresh).unwrap();
        for i in 0..40i64 {
            insert(
                &fresh,
                &format!("p{i}"),
                &format!("r{}", i % 30),
                "2026-11-30T11:00:00.000Z",
                i,
            );
        }
        assert_eq!(bulk_totals, text(&fresh));
        // The triggers work again after it.
        insert(&conn, "z", "rz", "2026-11-30T12:00:00.000Z", 1);
        assert_eq!(
            ints(
                &conn,
                "SELECT runs FROM run_totals WHERE kind = 'q' ORDER BY key"
            ),
            vec![40, 1]
        );
        // A write that fails inside the caller's transaction takes nothing with it.
        conn.execute_batch("BEGIN").unwrap();
        let failed = bulk(&conn, |_| {
            conn.execute_batch("DELETE FROM runs")?;
            conn.execute_batch("SELECT * FROM no_such_table")
        });
        assert!(failed.is_err());
        conn.execute_batch("ROLLBACK").unwrap();
        assert!(is_current(&conn).unwrap());
        assert_eq!(ints(&conn, "SELECT count(*) FROM runs"), vec![41]);
    }

    #[test]
    fn quarter_keys_and_bounds() {
        assert_eq!(
            quarter_of("2026-11-30T10:44:59.999Z").as_deref(),
            Some("2026-11-30T10:30")
        );
        assert_eq!(
            quarter_last("2026-11-30T10:45").as_deref(),
            Some("2026-11-30T10:59:59.999Z")
        );
        assert_eq!(quarter_of("junk"), None);
    }
}

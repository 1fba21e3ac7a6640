//! Numbered migrations, applied in one transaction under a transaction-level advisory lock.
//!
//! Every process that opens a store calls [`migrate`]. It takes
//! `pg_advisory_xact_lock(MIGRATION_LOCK)` first — before it even creates `schema_migrations`,
//! since two concurrent `CREATE TABLE IF NOT EXISTS` can fail on each other — so processes
//! starting at once queue on the lock: the first applies what is missing and commits (which
//! releases the lock), the others then find nothing left to do. A failing migration rolls the
//! whole transaction back. No migration uses `CREATE INDEX CONCURRENTLY` (it cannot run in a
//! transaction); an index on a big table that must not block writers gets a migration of its
//! own, documented as such.

use postgres::Client;

use crate::error::PgError;
use crate::error::RowExt;

/// The advisory lock of migrations: two `int4` keys (`'sess'`, 1), a lock space apart from
/// the one-`bigint` keys of session leases.
const MIGRATION_LOCK: (i32, i32) = (0x7365_7373, 1);

/// A numbered migration.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Its number: applied in increasing order, each once.
    pub version: i32,
    /// A short name, recorded in `schema_migrations`.
    pub name: &'static str,
    /// The SQL, run inside the migration transaction.
    pub sql: &'static str,
}

/// Every migration of this build, in order.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "runs, run lines, sessions, leases, gc audit",
        sql: r#"
-- One row: this store's identity, so that a copier's watermarks of one store are never
-- taken for another's.
CREATE TABLE store_info (
    store_id    text PRIMARY KEY DEFAULT gen_random_uuid()::text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO store_info DEFAULT VALUES;

CREATE TABLE runs (
    run_id          text COLLATE "C" PRIMARY KEY,
    -- A short key for the lines: eight bytes per line instead of the run id.
    run_key         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    committed_len   bigint NOT NULL CHECK (committed_len >= 0),
    line_count      bigint NOT NULL CHECK (line_count >= 0),
    origin_host     text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_write_at   timestamptz NOT NULL DEFAULT now(),
    -- Derived by session-pg's tolerant parser (never by PostgreSQL), for listings:
    session_id      text COLLATE "C",
    started_at_utc  text COLLATE "C" NOT NULL DEFAULT '',
    outcome         text COLLATE "C" NOT NULL DEFAULT 'open',
    workspace_norm  text COLLATE "C",
    -- Latest of started_at and the last record's ts, Unix milliseconds (gc ages by it).
    activity_ms     bigint,
    -- The parser's running state and every summary column, as JSON (bytea: never refused).
    summary         bytea NOT NULL,
    -- Hash chain over the stored lines: sha256 of the first line and of the last one.
    first_line_sha  bytea,
    last_line_sha   bytea
)
-- Every append updates its run's row: room on the page lets those be HOT updates (no new
-- index entries), which they are as long as no indexed column changes; activity_ms is
-- therefore not indexed (gc, which reads it, is rare and scans).
WITH (fillfactor = 70);
CREATE INDEX runs_listing ON runs (started_at_utc DESC, run_id DESC);
CREATE INDEX runs_session ON runs (session_id, started_at_utc DESC, run_id DESC);

CREATE TABLE run_lines (
    -- runs.run_key. No foreign key: a per-row check would cost more than the insert
    -- itself; lines are written only under their run row's lock and removed with it.
    run_key      bigint NOT NULL,
    byte_offset  bigint NOT NULL CHECK (byte_offset >= 0),
    line_no      bigint NOT NULL CHECK (line_no >= 1),
    -- The line exactly as appended, with its "\n": bytea, never jsonb or text.
    data         bytea NOT NULL,
    -- Derived by session-pg's tolerant parser:
    record_type  text,
    ts           text,
    damage       text,
    PRIMARY KEY (run_key, byte_offset)
);

CREATE TABLE sessions (
    session_id         text COLLATE "C" PRIMARY KEY,
    version            text NOT NULL,
    generation         bigint NOT NULL,
    updated_at         text COLLATE "C" NOT NULL,
    -- updated_at as Unix milliseconds when it is an RFC 3339 time (gc ages by it).
    updated_ms         bigint,
    run_id             text,
    message_count      bigint NOT NULL,
    last_user_message  text,
    workspace_root     text,
    workspace_norm     text COLLATE "C",
    -- The state without its messages, as saved (JSON bytes).
    head               bytea NOT NULL,
    origin_host        text NOT NULL,
    saved_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sessions_listing ON sessions (updated_at DESC, session_id DESC);

CREATE TABLE session_messages (
    -- Written and removed only under the session row's lock (no per-row foreign key check).
    session_id  text COLLATE "C" NOT NULL,
    idx         bigint NOT NULL CHECK (idx >= 0),
    data        bytea NOT NULL,
    -- sha256(data), so that a save rewrites only the messages after the common prefix.
    data_sha    bytea NOT NULL,
    PRIMARY KEY (session_id, idx)
);

-- Who holds a session lease (the lease itself is a session-level advisory lock).
CREATE TABLE session_leases (
    session_id   text COLLATE "C" PRIMARY KEY,
    holder_name  text NOT NULL,
    holder_host  text NOT NULL,
    holder_pid   bigint NOT NULL,
    backend_pid  integer NOT NULL,
    since        timestamptz NOT NULL DEFAULT now()
);

-- What gc removed, kept after the data is gone.
CREATE TABLE gc_audit (
    id             bigserial PRIMARY KEY,
    removed_at     timestamptz NOT NULL DEFAULT now(),
    kind           text NOT NULL CHECK (kind IN ('run', 'session')),
    item_id        text NOT NULL,
    session_id     text,
    origin_host    text,
    bytes          bigint NOT NULL,
    lines          bigint NOT NULL,
    activity_ms    bigint,
    cutoff_ms      bigint NOT NULL,
    removed_by     text NOT NULL
);
"#,
    },
    Migration {
        version: 2,
        name: "runs.is_run: files whose first record is a header",
        sql: r#"
-- A run whose first record is no header (an empty file, NUL bytes, records without a header)
-- is kept byte for byte but is no run: listings leave it out, as the local store does. The
-- summary is the serialized fold, whose `header_state` is "seen" exactly when the first
-- record was a header (a string value holding those bytes would be escaped).
ALTER TABLE runs ADD COLUMN is_run boolean
    GENERATED ALWAYS AS (position('"header_state":"seen"'::bytea IN summary) > 0) STORED;
"#,
    },
    Migration {
        version: 3,
        name: "search documents: tsvector and pg_trgm indexes",
        sql: r#"
-- Trigram indexes for substring search (a trusted extension since PostgreSQL 13: the
-- database owner, or a role with CREATE on the database, may create it).
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- The searchable documents of run lines (run_key set) and of saved session messages
-- (session_id and msg_idx set), as session-replay's extraction gives them (session-pg's
-- search module writes them with the lines and messages they come from).
CREATE TABLE search_docs (
    doc_id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- runs.run_key (no foreign key, as run_lines: removed with the run by a trigger).
    run_key      bigint,
    session_id   text COLLATE "C",
    msg_idx      bigint,
    -- Byte offset of the record in its run, or of the message's line in the session's
    -- messages file.
    byte_offset  bigint NOT NULL CHECK (byte_offset >= 0),
    kind         text NOT NULL,
    -- The record's time, Unix milliseconds.
    time_ms      bigint,
    -- The document's text: NUL removed, invalid UTF-8 replaced by U+FFFD.
    body         text NOT NULL,
    -- Words of the first 100,000 characters (a tsvector stays under its 1 MB limit).
    words        tsvector GENERATED ALWAYS AS
                     (to_tsvector('simple'::regconfig, left(body, 100000))) STORED,
    CHECK ((run_key IS NULL) = (session_id IS NOT NULL AND msg_idx IS NOT NULL))
);
CREATE INDEX search_docs_run ON search_docs (run_key, byte_offset) WHERE run_key IS NOT NULL;
CREATE INDEX search_docs_message ON search_docs (session_id, msg_idx) WHERE run_key IS NULL;
CREATE INDEX search_docs_words ON search_docs USING gin (words);
CREATE INDEX search_docs_trigrams ON search_docs USING gin (body gin_trgm_ops);

-- Documents go with what they come from, whoever removes it (gc, a save that rewrites
-- messages, a delete), in the same transaction.
CREATE FUNCTION search_docs_drop_runs() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    DELETE FROM search_docs d USING removed_runs g WHERE d.run_key = g.run_key;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER runs_drop_search_docs AFTER DELETE ON runs
    REFERENCING OLD TABLE AS removed_runs
    FOR EACH STATEMENT EXECUTE FUNCTION search_docs_drop_runs();
CREATE FUNCTION search_docs_drop_messages() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    DELETE FROM search_docs d USING removed_messages g
        WHERE d.run_key IS NULL AND d.session_id = g.session_id AND d.msg_idx = g.idx;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER session_messages_drop_search_docs AFTER DELETE ON session_messages
    REFERENCING OLD TABLE AS removed_messages
    FOR EACH STATEMENT EXECUTE FUNCTION search_docs_drop_messages();
"#,
    },
    Migration {
        version: 4,
        name: "appends: runs.is_run written by the client, no per-statement CHECKs",
        sql: r#"
-- What an append costs the server, per statement: PostgreSQL re-reads the expression of
-- every CHECK constraint and of every stored generated column of a table from its catalogue
-- text each time a statement writes the table (an append is one such statement). These
-- four CHECKs guard values session-pg computes from unsigned integers (never negative, a
-- line number never 0), and is_run is a fact of the fold the writer holds anyway: the
-- writer now sets it (false for a run row without a header record) beside the summary.
ALTER TABLE runs ALTER COLUMN is_run DROP EXPRESSION;
ALTER TABLE runs ALTER COLUMN is_run SET DEFAULT false;
ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_committed_len_check;
ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_line_count_check;
ALTER TABLE run_lines DROP CONSTRAINT IF EXISTS run_lines_byte_offset_check;
ALTER TABLE run_lines DROP CONSTRAINT IF EXISTS run_lines_line_no_check;
"#,
    },
    Migration {
        version: 5,
        name: "run_tips: what every append changes, apart from the run row",
        sql: r#"
-- An append used to rewrite its run's whole row (listing columns, the summary, four
-- indexes' worth of a wide tuple) to move the committed length on. What every append
-- changes now lives in a narrow row per run, updated by compare-and-swap on committed_len;
-- the run row (listing columns, the summary without its counts) is rewritten only when a
-- line changes one of its columns (a header, the first input, a model, the outcome). Every
-- writer of a run takes its tip row's lock first (appends, gc, a reindex), then the run
-- row's when it writes that too.
CREATE TABLE run_tips (
    -- runs.run_key (no foreign key: removed with the run by a trigger).
    run_key        bigint PRIMARY KEY,
    committed_len  bigint NOT NULL,
    line_count     bigint NOT NULL,
    last_write_at  timestamptz NOT NULL DEFAULT now(),
    -- Latest of started_at and the last record's ts, Unix milliseconds (gc ages by it).
    activity_ms    bigint,
    -- sha256 of the last stored line.
    last_line_sha  bytea,
    -- The summary fields every append changes (record counts, token sums, last status and
    -- ts), as JSON; they override those of runs.summary.
    tally          bytea NOT NULL
)
-- Every append updates its tip row: room on the page keeps those HOT updates (its one
-- index, on run_key, never changes).
WITH (fillfactor = 70);
-- The whole summary of a run written before this migration holds the tally's fields.
INSERT INTO run_tips (run_key, committed_len, line_count, last_write_at, activity_ms,
                      last_line_sha, tally)
    SELECT run_key, committed_len, line_count, last_write_at, activity_ms, last_line_sha,
           summary
    FROM runs;
ALTER TABLE runs DROP COLUMN committed_len, DROP COLUMN line_count,
    DROP COLUMN last_write_at, DROP COLUMN activity_ms, DROP COLUMN last_line_sha;
-- Tips go with their runs, whoever removes them, in the same transaction.
CREATE FUNCTION run_tips_drop_runs() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    DELETE FROM run_tips t USING removed_runs g WHERE t.run_key = g.run_key;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER runs_drop_tips AFTER DELETE ON runs
    REFERENCING OLD TABLE AS removed_runs
    FOR EACH STATEMENT EXECUTE FUNCTION run_tips_drop_runs();
"#,
    },
];

/// Highest migration of this build.
pub fn latest_version() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// What [`migrate`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MigrationReport {
    /// Migrations applied by this call, in order.
    pub applied: Vec<i32>,
    /// The schema version afterwards.
    pub version: i32,
}

/// Brings the database's schema up to [`latest_version`] (see the module documentation).
///
/// # Errors
/// [`PgError::SchemaTooNew`] when the database is ahead of this build (nothing is changed);
/// [`PgError::Migration`] / [`PgError::Query`] when a step fails (all rolled back).
pub fn migrate(client: &mut Client) -> Result<MigrationReport, PgError> {
    migrate_with(client, MIGRATIONS)
}

pub(crate) fn migrate_with(
    client: &mut Client,
    migrations: &[Migration],
) -> Result<MigrationReport, PgError> {
    let q = |op| move |source| PgError::Query { op, source };
    let mut tx = client.transaction().map_err(q("begin the migration"))?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, $2)",
        &[&MIGRATION_LOCK.0, &MIGRATION_LOCK.1],
    )
    .map_err(q("take the migration lock"))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             version     integer PRIMARY KEY,
             name        text NOT NULL,
             applied_at  timestamptz NOT NULL DEFAULT now()
         )",
    )
    .map_err(q("create schema_migrations"))?;
    let current: i32 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM schema_migrations",
            &[],
        )
        .map_err(q("read the schema version"))?
        .col(0)?;
    let known = migrations.last().map_or(0, |m| m.version);
    if current > known {
        return Err(PgError::SchemaTooNew {
            found: current,
            known,
        });
    }
    let mut report = MigrationReport {
        applied: Vec::new(),
        version: current,
    };
    for m in migrations.iter().filter(|m| m.version > current) {
        let fail = |source| PgError::Migration {
            version: m.version,
            name: m.name,
            source,
        };
        tx.batch_execute(m.sql).map_err(fail)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
            &[&m.version, &m.name],
        )
        .map_err(fail)?;
        report.applied.push(m.version);
        report.version = m.version;
    }
    tx.commit().map_err(q("commit the migrations"))?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_in_order_and_never_concurrent() {
        let mut last = 0;
        for m in MIGRATIONS {
            assert!(m.version > last, "migration {} out of order", m.version);
            last = m.version;
            assert!(
                !m.sql.to_ascii_uppercase().contains("CONCURRENTLY"),
                "migration {} uses CONCURRENTLY, which cannot run in its transaction",
                m.version
            );
            for word in ["BEGIN;", "COMMIT;"] {
                assert!(
                    !m.sql.to_ascii_uppercase().contains(word),
                    "migration {} manages its own transaction",
                    m.version
                );
            }
        }
        assert_eq!(latest_version(), last);
    }

    #[test]
    fn run_lines_are_bytea_never_text_or_jsonb() {
        let code: Vec<&str> = MIGRATIONS
            .iter()
            .flat_map(|m| m.sql.lines())
            .filter(|l| !l.trim_start().starts_with("--"))
            .collect();
        let data: Vec<&&str> = code
            .iter()
            .filter(|l| l.trim_start().starts_with("data "))
            .collect();
        assert_eq!(data.len(), 2, "run lines and session messages");
        for l in data {
            assert!(l.contains("bytea"), "{l}");
        }
        assert!(!code.iter().any(|l| l.contains("jsonb")));
    }
}

//! What one durable save costs `state.db`, counted rather than timed: the SQL statements it
//! runs (SQLite's statement trace on the store's own connection) and the pages it writes (WAL
//! frames appended per commit). A statement or a touched page added to the save path fails
//! here before it shows up in the floor benchmark (`benches/state.rs`, "durable save against
//! its floor").

#[cfg(test)]
mod tests {
    use session_schema::{BaseMessage, SessionState, Timestamp, parse_message};

    use crate::pass_cost::tests::traced_statements;
    use crate::store::StateStore;
    use crate::types::{SaveDurability, SaveMode, StoreOptions};

    const ID: &str = "c0575a7e-0000-4000-8000-000000000001";

    fn message(i: usize) -> BaseMessage {
        let role = if i.is_multiple_of(2) {
            "user"
        } else {
            "assistant"
        };
        parse_message(format!(r#"{{"role":"{role}","content":"message {i}"}}"#).as_bytes())
            .unwrap()
            .value
    }

    fn state(n: usize) -> SessionState {
        SessionState {
            schema_version: Some(1i64.into()),
            session_id: ID.to_owned(),
            updated_at: Timestamp::from_raw("2026-12-01T10:00:00.000Z"),
            run_id: Some("8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a".to_owned()),
            invoke_seq: Some(n.try_into().unwrap_or(i64::MAX)),
            messages: (0..n).map(message).collect(),
            ..Default::default()
        }
    }

    fn open_sync(root: &std::path::Path) -> StateStore {
        let options = StoreOptions {
            durability: SaveDurability::Sync,
            ..StoreOptions::default()
        };
        StateStore::open_with(root, options).unwrap()
    }

    /// The first words of a statement, enough to tell which one ran (`SELECT … FROM session_files`
    /// is named by its table).
    fn kind(sql: &str) -> String {
        let words: Vec<&str> = sql.split_whitespace().collect();
        let verb = words.first().copied().unwrap_or("").to_ascii_uppercase();
        let table = |after: &str| {
            words
                .iter()
                .position(|w| w.eq_ignore_ascii_case(after))
                .and_then(|i| words.get(i + 1))
                .map(|t| t.trim_end_matches(['(', ';']).to_owned())
                .unwrap_or_default()
        };
        // The first table a `SELECT` reads (past a subquery of bound values).
        let read = words
            .windows(2)
            .find(|w| {
                ["FROM", "JOIN"]
                    .iter()
                    .any(|k| w[0].eq_ignore_ascii_case(k))
                    && w[1].chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
            .map(|w| w[1].to_owned())
            .unwrap_or_default();
        match verb.as_str() {
            "SELECT" => format!("{verb} {read}"),
            "DELETE" => format!("{verb} {}", table("FROM")),
            "INSERT" => format!("{verb} {}", table("INTO")),
            "UPDATE" => format!("{verb} {}", words.get(1).copied().unwrap_or("")),
            "BEGIN" => words.join(" ").to_ascii_uppercase(),
            _ => verb,
        }
    }

    #[test]
    fn an_appending_save_runs_three_statements_besides_its_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let store = open_sync(dir.path());
        for n in 1..=2 {
            store.save(&state(n)).unwrap();
        }
        let ran = traced_statements(
            &store,
            |_, sql| kind(sql),
            || {
                let report = store.save(&state(3)).unwrap();
                assert_eq!(report.mode, SaveMode::Appended { messages: 1 });
            },
        );
        // Read the row and the bookkeeping in one statement (compare-and-swap and the append
        // decision), write both. The row is updated in place: an upsert with RETURNING would open a statement
        // journal (RETURNING is a trigger to SQLite) and copy every page it touches into it.
        assert_eq!(
            ran,
            [
                "BEGIN IMMEDIATE",
                "SELECT session_state",
                "UPDATE session_state",
                "UPDATE session_files",
                "COMMIT",
            ]
        );
    }

    /// Every statement of a save (leased or not, appending or writing a new session) is planned
    /// once: none is prepared again after a new binding. SQLite does that to a statement whose
    /// plan looked at a bound value (a parameter in a join's terms did), which parsed and planned
    /// the row's `SELECT` anew on every save (about a tenth of an appending save's time).
    #[test]
    fn no_statement_of_a_save_is_prepared_again() {
        use rusqlite::StatementStatus;
        let dir = tempfile::tempdir().unwrap();
        let store = open_sync(dir.path());
        // A new session, appending saves without and with a lease, then another session
        // (the same statements with another bound id).
        let seen = traced_statements(
            &store,
            |stmt, sql| (kind(sql), stmt.get_status(StatementStatus::RePrepare)),
            || {
                for n in 1..=3 {
                    store.save(&state(n)).unwrap();
                }
                let lease = store.lease(ID).unwrap();
                for n in 4..=6 {
                    lease.save(&state(n)).unwrap();
                }
                drop(lease);
                let mut other = state(2);
                other.session_id = "c0575a7e-0000-4000-8000-000000000002".to_owned();
                store.save(&other).unwrap();
                store.save(&state(7)).unwrap();
            },
        );
        // Each statement's count of preparations again (it is the statement's own, kept while
        // it stays in the connection's cache) is the same at every save it runs in.
        let mut counts: std::collections::BTreeMap<&str, Vec<i32>> = Default::default();
        for (k, n) in seen.iter() {
            counts.entry(k).or_default().push(*n);
        }
        assert_eq!(counts.get("SELECT session_state").map(Vec::len), Some(10));
        assert_eq!(counts.get("UPDATE session_state").map(Vec::len), Some(6));
        let grew: Vec<_> = counts
            .iter()
            .filter(|(_, n)| n.first() != n.last())
            .collect();
        assert!(grew.is_empty(), "prepared again at every save: {grew:?}");
    }

    /// WAL frames (pages) appended by `saves` appending saves of one session, measured from an
    /// empty WAL.
    fn frames_per_save(saves: usize) -> (u64, u64) {
        let dir = tempfile::tempdir().unwrap();
        let store = open_sync(dir.path());
        store.save(&state(1)).unwrap();
        let page_size = {
            let conn = store.lock();
            conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
                .unwrap();
            crate::column::query_int(&conn, "PRAGMA page_size", [])
                .unwrap()
                .cast_unsigned()
        };
        let wal = dir.path().join("state.db-wal");
        let len = || std::fs::metadata(&wal).map_or(0, |m| m.len());
        assert_eq!(len(), 0);
        for n in 2..2 + saves {
            store.save(&state(n)).unwrap();
        }
        // A 32-byte WAL header, then one 24-byte header and one page per frame.
        let frames = (len() - 32) / (24 + page_size);
        assert_eq!((len() - 32) % (24 + page_size), 0);
        (frames, page_size)
    }

    #[test]
    fn an_appending_save_writes_three_pages() {
        let saves = 8;
        let (frames, page_size) = frames_per_save(saves);
        assert_eq!(page_size, u64::from(crate::db::NEW_DB_PAGE_SIZE));
        assert_eq!(frames, 3 * saves as u64);
    }
}

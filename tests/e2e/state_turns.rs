//! Property: our state store and the reference take turns saving one session (the reference
//! the way compat notes §2.6 describe: whole file via temp + rename, then an upsert of every
//! column), with growing, edited and shortened histories and restarts in between. After every
//! save the messages file is exactly what the reference writes for the last saved list, the
//! row holds its summary, and `load` returns that list without damage.

use std::fs;
use std::path::Path;

use proptest::prelude::*;
use session_schema::{BaseMessage, SessionState, Timestamp};
use session_state::{StateStore, StoreOptions};

use crate::support::*;

const SESSION: &str = "7a4e5000-0000-4000-8000-000000000001";

#[derive(Debug, Clone)]
enum Op {
    /// Our runtime appends messages to its in-memory history and saves.
    Extend(Vec<Msg>),
    /// Our runtime rewrites an earlier message (normalisation, compaction) and saves.
    Edit(prop::sample::Index, String),
    /// Our runtime keeps only a prefix (compaction) and saves.
    Truncate(prop::sample::Index),
    /// The reference saves its own history: ours with `Msg`s added and `n` dropped at the end.
    Reference(prop::sample::Index, Vec<Msg>),
    /// Our runtime adopts what is stored (a resume), adds messages and saves.
    Resume(Vec<Msg>),
    /// The process restarts: a new store instance.
    Restart,
}

#[derive(Debug, Clone)]
enum Msg {
    User(String),
    Assistant(String),
    Tool(String),
}

impl Msg {
    fn line(&self) -> String {
        match self {
            Msg::User(t) => user_msg(t),
            Msg::Assistant(t) => assistant_msg(t),
            Msg::Tool(t) => tool_msg("call_1", "shell", t),
        }
    }
}

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 äß日本🦀\n\"\\\\]{0,24}"
}

fn msgs_strategy() -> impl Strategy<Value = Vec<Msg>> {
    prop::collection::vec(
        prop_oneof![
            text().prop_map(Msg::User),
            text().prop_map(Msg::Assistant),
            text().prop_map(Msg::Tool),
        ],
        1..4,
    )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => msgs_strategy().prop_map(Op::Extend),
        1 => (any::<prop::sample::Index>(), text()).prop_map(|(i, t)| Op::Edit(i, t)),
        1 => any::<prop::sample::Index>().prop_map(Op::Truncate),
        2 => (any::<prop::sample::Index>(), prop::collection::vec(
                prop_oneof![text().prop_map(Msg::User), text().prop_map(Msg::Assistant)], 0..3))
            .prop_map(|(i, m)| Op::Reference(i, m)),
        1 => msgs_strategy().prop_map(Op::Resume),
        1 => Just(Op::Restart),
    ]
}

fn open(root: &Path) -> StateStore {
    let options = StoreOptions {
        durability: session_state::SaveDurability::NoSync,
        ..StoreOptions::default()
    };
    StateStore::open_with(root, options).expect("open store")
}

fn state(lines: &[String], tick: u64) -> SessionState {
    SessionState {
        session_id: SESSION.into(),
        updated_at: Timestamp::from_unix_millis(1_790_000_000_000 + tick as i64),
        run_id: Some(format!("run-{tick}")),
        invoke_seq: Some(tick as i64),
        messages: lines.iter().map(|l| msg(l)).collect(),
        ..Default::default()
    }
}

/// The display text of the last user message, computed from what this test wrote.
fn last_user(list: &[Msg]) -> Option<String> {
    list.iter().rev().find_map(|m| match m {
        Msg::User(t) => Some(t.clone()),
        _ => None,
    })
}

/// The reference's `save`: the whole file through a temp file and `rename`, then the upsert.
fn reference_save(root: &Path, list: &[Msg], tick: u64) {
    let file = root.join(format!("messages/{SESSION}.jsonl"));
    let body: String = list.iter().map(|m| m.line() + "\n").collect();
    let tmp = root.join(format!("messages/{SESSION}.jsonl.4242.{tick}.tmp"));
    fs::write(&tmp, body).expect("temp");
    fs::rename(&tmp, &file).expect("rename");
    let conn = rusqlite::Connection::open(root.join("state.db")).expect("open db");
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .expect("busy timeout");
    conn.execute(
        "INSERT INTO session_state (session_id, updated_at, run_id, invoke_seq, schema_version, meta_json, message_count, last_user_message, workspace_root) \
         VALUES (?1, ?2, ?3, ?4, 1, NULL, ?5, ?6, NULL) \
         ON CONFLICT(session_id) DO UPDATE SET updated_at = excluded.updated_at, run_id = excluded.run_id, \
         invoke_seq = excluded.invoke_seq, schema_version = excluded.schema_version, meta_json = excluded.meta_json, \
         message_count = excluded.message_count, last_user_message = excluded.last_user_message, \
         workspace_root = excluded.workspace_root",
        rusqlite::params![
            SESSION,
            Timestamp::from_unix_millis(1_790_000_000_000 + tick as i64).as_str(),
            format!("ref-run-{tick}"),
            tick as i64,
            list.len() as i64,
            last_user(list),
        ],
    )
    .expect("the reference's upsert");
}

fn check(root: &Path, store: &StateStore, list: &[Msg]) -> Result<(), TestCaseError> {
    let file = fs::read(root.join(format!("messages/{SESSION}.jsonl"))).expect("messages");
    let want: String = list.iter().map(|m| m.line() + "\n").collect();
    prop_assert_eq!(
        String::from_utf8_lossy(&file),
        want,
        "the reference's file format"
    );
    let conn = rusqlite::Connection::open(root.join("state.db")).expect("open db");
    let (count, last): (i64, Option<String>) = conn
        .query_row(
            "SELECT message_count, last_user_message FROM session_state WHERE session_id = ?1",
            [SESSION],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("row");
    prop_assert_eq!(count, list.len() as i64);
    prop_assert_eq!(last, last_user(list));
    let loaded = store.load(SESSION).expect("load").expect("saved");
    prop_assert!(loaded.damage.is_empty(), "{:?}", loaded.damage);
    let want_msgs: Vec<BaseMessage> = list.iter().map(|m| msg(&m.line())).collect();
    prop_assert_eq!(loaded.state.messages, want_msgs);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn our_store_and_the_reference_take_turns_on_one_session(
        first in msgs_strategy(),
        ops in prop::collection::vec(op(), 1..10),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_owned();
        let mut store = open(&root);
        // Our runtime's in-memory history, and what is stored (last writer wins).
        let mut ours: Vec<Msg> = first;
        let lines = |l: &[Msg]| l.iter().map(Msg::line).collect::<Vec<_>>();
        store.save(&state(&lines(&ours), 0)).expect("first save");
        let mut stored = ours.clone();
        check(&root, &store, &stored)?;
        for (tick, op) in ops.into_iter().enumerate() {
            let tick = tick as u64 + 1;
            match op {
                Op::Extend(more) => {
                    ours.extend(more);
                    store.save(&state(&lines(&ours), tick)).expect("save");
                    stored = ours.clone();
                }
                Op::Edit(i, t) => {
                    if ours.is_empty() {
                        ours.push(Msg::User(t));
                    } else {
                        let i = i.index(ours.len());
                        ours[i] = Msg::Assistant(t);
                    }
                    store.save(&state(&lines(&ours), tick)).expect("save");
                    stored = ours.clone();
                }
                Op::Truncate(i) => {
                    ours.truncate(i.index(ours.len() + 1));
                    store.save(&state(&lines(&ours), tick)).expect("save");
                    stored = ours.clone();
                }
                Op::Reference(cut, more) => {
                    let mut theirs = stored.clone();
                    theirs.truncate(theirs.len() - cut.index(theirs.len() + 1).min(theirs.len()));
                    theirs.extend(more);
                    reference_save(&root, &theirs, tick);
                    stored = theirs;
                }
                Op::Resume(more) => {
                    let loaded = store.load(SESSION).expect("load").expect("saved");
                    prop_assert!(loaded.damage.is_empty(), "{:?}", loaded.damage);
                    ours = stored.clone();
                    ours.extend(more);
                    store
                        .save_expecting(&state(&lines(&ours), tick), loaded.generation)
                        .expect("compare-and-swap save after a resume");
                    stored = ours.clone();
                }
                Op::Restart => {
                    drop(store);
                    store = open(&root);
                }
            }
            check(&root, &store, &stored)?;
        }
    }
}

//! Cases of the session store: round trip, compare-and-swap on save and delete, racing
//! savers, listing and paging.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use session_schema::{SessionState, parse_message};

use super::data::{js, session, state};
use super::{Check, Fail, Harness, ensure, ensure_eq};
use crate::SessionStore;
use crate::error::StorageError;
use crate::types::{Expected, PageCursor, SessionListQuery, StoredSession, Version};

/// A session with every kind of message the format has, unknown fields and roles included.
fn rich_session(session_id: &str) -> Result<SessionState, Fail> {
    let messages = [
        r#"{"role":"system","content":"be brief"}"#,
        r#"{"role":"user","content":"list files","x_client":{"k":[1,2.5,"three",null]}}"#,
        r#"{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}}]}"#,
        r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"shell","arguments":"{\"cmd\":\"ls -la\"}"}}]}"#,
        r#"{"role":"tool","tool_call_id":"c1","tool_name":"shell","content":"a.txt\nb.txt\n\u0000 nul kept","is_error":false}"#,
        r#"{"role":"reasoning","content":"thinking…","raw_item":{"id":"r1","summary":[]}}"#,
        r#"{"role":"x-acme-note","text":"a role this version does not know","n":1}"#,
        r#"{"role":"assistant","content":"done: ünïcödé, emoji 😀, CJK 漢字"}"#,
    ];
    state(&format!(
        r#"{{"schema_version":1,"session_id":{},"updated_at":"2026-02-03T12:00:02.900Z","run_id":"run-1","invoke_seq":3,"messages":[{}],"meta":{{"codelia_workspace_root":"/w/rich","todos":[{{"text":"x","done":false}}],"x_future":{{"nested":[1,{{"a":null}}]}}}}}}"#,
        js(session_id),
        messages.join(",")
    ))
}

fn meta_value(s: &SessionState) -> Option<serde_json::Value> {
    s.meta.as_ref().and_then(|m| m.to_value().ok())
}

fn same_state(got: &SessionState, want: &SessionState, what: &str) -> Check {
    ensure_eq!(got.session_id, want.session_id, "{what}: session id");
    ensure_eq!(got.updated_at, want.updated_at, "{what}: updated_at");
    ensure_eq!(got.run_id, want.run_id, "{what}: run id");
    ensure_eq!(got.invoke_seq, want.invoke_seq, "{what}: invoke_seq");
    ensure_eq!(
        got.messages.len(),
        want.messages.len(),
        "{what}: message count"
    );
    for (i, (g, w)) in got.messages.iter().zip(&want.messages).enumerate() {
        ensure_eq!(g, w, "{what}: message {i}");
    }
    ensure_eq!(meta_value(got), meta_value(want), "{what}: meta");
    Ok(())
}

fn load_version<S: SessionStore + ?Sized>(b: &S, id: &str) -> Result<Option<Version>, Fail> {
    Ok(b.load_session(id)?.map(|s| s.version))
}

pub(crate) fn save_load_round_trip<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    ensure!(
        b.load_session("rich")?.is_none(),
        "a fresh store has the session"
    );
    let st = rich_session("rich")?;
    let v1 = b.save_session(&st, &Expected::Absent)?;
    let loaded = b
        .load_session("rich")?
        .ok_or_else(|| Fail::Failed("saved session not found".into()))?;
    ensure_eq!(loaded.version, v1, "version of the loaded session");
    same_state(&loaded.state, &st, "first load")?;
    ensure!(
        loaded.damage.is_empty(),
        "damage in a healthy session: {:?}",
        loaded.damage
    );
    // Another client sees the same.
    if let Some(other) = h.second_client(&b)? {
        let seen = other
            .load_session("rich")?
            .ok_or_else(|| Fail::Failed("second client does not see the session".into()))?;
        ensure_eq!(seen.version, v1, "version seen by a second client");
        same_state(&seen.state, &st, "load by a second client")?;
    }
    let mut longer = st.clone();
    let more = parse_message(br#"{"role":"user","content":"and now?"}"#)
        .map_err(|e| Fail::Failed(e.to_string()))?;
    longer.messages.push(more.value);
    longer.updated_at = session_schema::Timestamp::from_raw("2026-02-03T12:00:05.000Z");
    let v2 = b.save_session(&longer, &Expected::Version(v1.clone()))?;
    ensure!(v2 != v1, "a save did not change the version ({v1})");
    let loaded = b
        .load_session("rich")?
        .ok_or_else(|| Fail::Failed("session gone after a save".into()))?;
    ensure_eq!(loaded.version, v2, "version after the second save");
    same_state(&loaded.state, &longer, "after an appended message")?;
    // Earlier messages changed (a compaction): the whole list is replaced.
    let mut compacted = longer.clone();
    compacted.messages.drain(1..5);
    let v3 = b.save_session(&compacted, &Expected::Any)?;
    ensure!(v3 != v2 && v3 != v1, "versions repeat: {v1} {v2} {v3}");
    let loaded = b
        .load_session("rich")?
        .ok_or_else(|| Fail::Failed("session gone after a compaction".into()))?;
    same_state(&loaded.state, &compacted, "after a compaction")?;
    // The same state saved again still gets a new version.
    let v4 = b.save_session(&compacted, &Expected::Version(v3.clone()))?;
    ensure!(v4 != v3, "an unchanged save kept the version {v3}");
    Ok(())
}

/// The stored session `id`; a failure naming `what` when there is none.
fn stored<S: SessionStore + ?Sized>(b: &S, id: &str, what: &str) -> Result<StoredSession, Fail> {
    b.load_session(id)?
        .ok_or_else(|| Fail::Failed(format!("{what}: session {id} not found")))
}

/// `st` with `n` more user messages (`"turn {first}"`, …) and a later `updated_at`.
fn with_turns(st: &SessionState, first: usize, n: usize) -> Result<SessionState, Fail> {
    let mut out = st.clone();
    for i in first..first + n {
        let m = parse_message(format!(r#"{{"role":"user","content":"turn {i}"}}"#).as_bytes())
            .map_err(|e| Fail::Failed(e.to_string()))?;
        out.messages.push(m.value);
    }
    out.updated_at =
        session_schema::Timestamp::from_raw(format!("2026-02-03T12:{:02}:00.000Z", first % 60));
    Ok(out)
}

pub(crate) fn appending_saves<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    let st = rich_session("grow")?;
    let v1 = b.save_session(&st, &Expected::Absent)?;
    // The caller appended since its last save: the session stored is its whole list.
    let kept = st.messages.len();
    let two = with_turns(&st, 1, 2)?;
    let v2 = b.save_session_appended(&two, &Expected::Version(v1.clone()), kept)?;
    ensure!(v2 != v1, "an appending save kept the version {v1}");
    let loaded = stored(&b, "grow", "session gone after an appending save")?;
    ensure_eq!(loaded.version, v2, "version after an appending save");
    same_state(&loaded.state, &two, "after an appending save")?;
    // Compare-and-swap as for any save: a stale version is a conflict, nothing written.
    let three = with_turns(&two, 3, 1)?;
    expect_conflict(
        b.save_session_appended(&three, &Expected::Version(v1.clone()), two.messages.len()),
        Some(&v2),
        "appending save from a stale version",
    )?;
    expect_conflict(
        b.save_session_appended(&three, &Expected::Absent, two.messages.len()),
        Some(&v2),
        "appending save expecting no session",
    )?;
    let loaded = stored(&b, "grow", "session gone after refused saves")?;
    ensure_eq!(loaded.version, v2, "version after refused appending saves");
    same_state(&loaded.state, &two, "after refused appending saves")?;
    let v3 = b.save_session_appended(&three, &Expected::Any, two.messages.len())?;
    // A count that is not the last save's (too small, too large) still stores the list given.
    let four = with_turns(&three, 4, 2)?;
    let v4 = b.save_session_appended(&four, &Expected::Version(v3.clone()), 2)?;
    let loaded = stored(&b, "grow", "after a save with a smaller count")?;
    ensure_eq!(
        loaded.version,
        v4,
        "version after a save with a wrong count"
    );
    same_state(&loaded.state, &four, "after a save with a smaller count")?;
    let five = with_turns(&four, 6, 1)?;
    b.save_session_appended(&five, &Expected::Version(v4), five.messages.len() + 3)?;
    let loaded = stored(&b, "grow", "after a save with a count past the list")?;
    same_state(
        &loaded.state,
        &five,
        "after a save with a count past the list",
    )?;
    // A first save through it: nothing was kept.
    let new = session("grow-new", "2026-02-03T12:00:00.000Z", 2, None)?;
    let v = b.save_session_appended(&new, &Expected::Absent, 0)?;
    let loaded = stored(&b, "grow-new", "a first appending save stored nothing")?;
    ensure_eq!(loaded.version, v, "version of a first appending save");
    same_state(&loaded.state, &new, "after a first appending save")?;
    // Another client's save in between: the list given is what is stored.
    if let Some(other) = h.second_client(&b)? {
        let current =
            load_version(&b, "grow")?.ok_or_else(|| Fail::Failed("session gone".into()))?;
        let six = with_turns(&five, 7, 1)?;
        let w = other.save_session(&six, &Expected::Version(current))?;
        let seven = with_turns(&six, 8, 1)?;
        b.save_session_appended(&seven, &Expected::Version(w), five.messages.len())?;
        let loaded = stored(&b, "grow", "after another client's save")?;
        same_state(&loaded.state, &seven, "after another client's save")?;
    }
    Ok(())
}

fn expect_conflict(
    result: Result<Version, StorageError>,
    found: Option<&Version>,
    what: &str,
) -> Check {
    match result {
        Err(e @ StorageError::VersionConflict { .. }) => {
            ensure!(e.is_conflict(), "{what}: a version conflict is a conflict");
            let StorageError::VersionConflict { found: f, .. } = &e else {
                return Err(Fail::Failed(format!("{what}: {e}")));
            };
            ensure_eq!(f.as_ref(), found, "{what}: version found");
            Ok(())
        }
        other => Err(Fail::Failed(format!(
            "{what}: got {other:?}, want a version conflict"
        ))),
    }
}

pub(crate) fn compare_and_swap_on_save<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    let s1 = session("cas", "2026-02-03T12:00:00.000Z", 1, None)?;
    let s2 = session("cas", "2026-02-03T12:00:01.000Z", 2, None)?;
    let s3 = session("cas", "2026-02-03T12:00:02.000Z", 3, None)?;
    let made_up = Version::new("not-a-version-of-this-store");
    expect_conflict(
        b.save_session(&s1, &Expected::Version(made_up.clone())),
        None,
        "save of a missing session expecting a version",
    )?;
    ensure!(
        b.load_session("cas")?.is_none(),
        "a refused save created the session"
    );
    let v1 = b.save_session(&s1, &Expected::Absent)?;
    expect_conflict(
        b.save_session(&s2, &Expected::Absent),
        Some(&v1),
        "second create",
    )?;
    let v2 = b.save_session(&s2, &Expected::Version(v1.clone()))?;
    expect_conflict(
        b.save_session(&s3, &Expected::Version(v1.clone())),
        Some(&v2),
        "save from a stale version",
    )?;
    expect_conflict(
        b.save_session(&s3, &Expected::Version(made_up)),
        Some(&v2),
        "save from a made-up version",
    )?;
    let loaded = b
        .load_session("cas")?
        .ok_or_else(|| Fail::Failed("session gone".into()))?;
    ensure_eq!(loaded.version, v2, "version after refused saves");
    same_state(&loaded.state, &s2, "state after refused saves")?;
    // Through a second client, the stale version is refused just the same.
    if let Some(other) = h.second_client(&b)? {
        expect_conflict(
            other.save_session(&s3, &Expected::Version(v1.clone())),
            Some(&v2),
            "stale save through a second client",
        )?;
        let v3 = other.save_session(&s3, &Expected::Version(v2.clone()))?;
        expect_conflict(
            b.save_session(&s1, &Expected::Version(v2.clone())),
            Some(&v3),
            "save from a version another client replaced",
        )?;
    }
    Ok(())
}

pub(crate) fn racing_savers<H: Harness>(h: &H) -> Check {
    const RACERS: usize = 6;
    let b = Arc::new(h.fresh()?);
    let second = h.second_client(&b)?.map(Arc::new);
    let v0 = b.save_session(
        &session("race", "2026-02-03T12:00:00.000Z", 1, None)?,
        &Expected::Absent,
    )?;
    let states = (0..RACERS)
        .map(|i| {
            session(
                "race",
                &format!("2026-02-03T12:01:{i:02}.000Z"),
                2 + i,
                None,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let results: Vec<Option<Result<Version, StorageError>>> = std::thread::scope(|s| {
        let handles: Vec<_> = states
            .iter()
            .enumerate()
            .map(|(i, st)| {
                let client: &dyn SessionStore = match (&second, i % 2) {
                    (Some(c), 1) => c.as_ref(),
                    _ => b.as_ref(),
                };
                let v0 = v0.clone();
                s.spawn(move || client.save_session(st, &Expected::Version(v0)))
            })
            .collect();
        handles.into_iter().map(|j| j.join().ok()).collect()
    });
    let results = results
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| Fail::Failed("a racing saver panicked".into()))?;
    let winners: Vec<(usize, &Version)> = results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.as_ref().ok().map(|v| (i, v)))
        .collect();
    ensure_eq!(winners.len(), 1, "winners of a race from one version");
    let (w, wv) = winners[0];
    for (i, r) in results.iter().enumerate() {
        if i == w {
            continue;
        }
        match r {
            Err(StorageError::VersionConflict { found, .. }) => {
                ensure_eq!(found.as_ref(), Some(wv), "version a loser found")
            }
            other => ensure!(false, "saver {i} got {other:?}"),
        }
    }
    let loaded = b
        .load_session("race")?
        .ok_or_else(|| Fail::Failed("raced session gone".into()))?;
    ensure_eq!(&loaded.version, wv, "version after the race");
    same_state(&loaded.state, &states[w], "state after the race")?;

    // Load-modify-save loops: every update lands exactly once.
    const WORKERS: usize = 4;
    const UPDATES: usize = 4;
    let outcome: Vec<Result<(), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..WORKERS)
            .map(|t| {
                let client: &dyn SessionStore = match (&second, t % 2) {
                    (Some(c), 1) => c.as_ref(),
                    _ => b.as_ref(),
                };
                s.spawn(move || -> Result<(), String> {
                    for u in 0..UPDATES {
                        let text =
                            format!(r#"{{"role":"user","content":"worker {t} update {u}"}}"#);
                        let msg = parse_message(text.as_bytes())
                            .map_err(|e| e.to_string())?
                            .value;
                        loop {
                            let cur = client
                                .load_session("race")
                                .map_err(|e| e.to_string())?
                                .ok_or("session gone")?;
                            let mut st = cur.state;
                            st.messages.push(msg.clone());
                            match client.save_session(&st, &Expected::Version(cur.version)) {
                                Ok(_) => break,
                                Err(StorageError::VersionConflict { .. }) => continue,
                                Err(e) => return Err(e.to_string()),
                            }
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|j| j.join().unwrap_or_else(|_| Err("worker panicked".into())))
            .collect()
    });
    for r in outcome {
        r.map_err(Fail::Failed)?;
    }
    let loaded = b
        .load_session("race")?
        .ok_or_else(|| Fail::Failed("session gone after the updates".into()))?;
    let base = states[w].messages.len();
    ensure_eq!(
        loaded.state.messages.len(),
        base + WORKERS * UPDATES,
        "messages after the load-modify-save loops"
    );
    let texts: BTreeSet<String> = loaded.state.messages[base..]
        .iter()
        .filter_map(|m| m.content().map(|c| c.plain_text()))
        .collect();
    ensure_eq!(texts.len(), WORKERS * UPDATES, "distinct updates");
    Ok(())
}

pub(crate) fn delete_with_compare_and_swap<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    let keep = session("keep", "2026-02-03T12:00:00.000Z", 1, None)?;
    b.save_session(&keep, &Expected::Absent)?;
    let v1 = b.save_session(
        &session("gone", "2026-02-03T12:00:01.000Z", 1, None)?,
        &Expected::Absent,
    )?;
    let v2 = b.save_session(
        &session("gone", "2026-02-03T12:00:02.000Z", 2, None)?,
        &Expected::Version(v1.clone()),
    )?;
    for (expected, what) in [
        (Expected::Version(v1.clone()), "a stale version"),
        (Expected::Absent, "no session"),
        (
            Expected::Version(Version::new("made-up")),
            "a made-up version",
        ),
    ] {
        match b.delete_session("gone", &expected) {
            Err(StorageError::VersionConflict {
                found, session_id, ..
            }) => {
                ensure_eq!(session_id.as_str(), "gone", "session of the conflict");
                ensure_eq!(
                    found.as_ref(),
                    Some(&v2),
                    "version found deleting with {what}"
                );
            }
            other => ensure!(false, "delete expecting {what} gave {other:?}"),
        }
        ensure_eq!(
            load_version(&b, "gone")?,
            Some(v2.clone()),
            "session after a refused delete"
        );
    }
    ensure!(
        b.delete_session("gone", &Expected::Version(v2.clone()))?,
        "delete found nothing"
    );
    ensure!(
        b.load_session("gone")?.is_none(),
        "deleted session still loads"
    );
    let listed: Vec<String> = b
        .list_sessions(&SessionListQuery::default())?
        .sessions
        .into_iter()
        .map(|s| s.session_id)
        .collect();
    ensure_eq!(
        listed,
        vec!["keep".to_owned()],
        "sessions listed after the delete"
    );
    match b.delete_session("gone", &Expected::Version(v2.clone())) {
        Err(StorageError::VersionConflict { found, .. }) => {
            ensure_eq!(found, None, "version found after the delete")
        }
        other => ensure!(false, "second delete expecting a version gave {other:?}"),
    }
    ensure!(
        !b.delete_session("gone", &Expected::Any)?,
        "delete of nothing found something"
    );
    ensure!(
        !b.delete_session("gone", &Expected::Absent)?,
        "delete of nothing found something"
    );
    // The id can be used again; the other session was not touched.
    let again = session("gone", "2026-02-03T12:00:03.000Z", 3, None)?;
    b.save_session(&again, &Expected::Absent)?;
    let loaded = b
        .load_session("gone")?
        .ok_or_else(|| Fail::Failed("recreated session not found".into()))?;
    same_state(&loaded.state, &again, "recreated session")?;
    ensure!(
        b.delete_session("keep", &Expected::Any)?,
        "unconditional delete found nothing"
    );
    ensure!(
        b.load_session("keep")?.is_none(),
        "unconditionally deleted session loads"
    );
    Ok(())
}

pub(crate) fn list_filters_and_paging<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    // (id, updated_at, workspace); listing order is updated_at then id, both descending.
    let rows = [
        ("s-a", "2026-02-01T00:00:00.000Z", Some("/w/one")),
        ("s-b", "2026-02-02T00:00:00.000Z", Some("/w/two")),
        ("s-c", "2026-02-03T00:00:00.000Z", Some("/w/one/")),
        ("s-d", "2026-02-03T00:00:00.000Z", None),
        ("s-e", "2026-02-03T00:00:00.000Z", Some("/w/one")),
        ("s-f", "2026-02-05T00:00:00.000Z", Some("/w/two")),
        ("s-g", "2026-02-04T00:00:00.000Z", Some("/w/one")),
    ];
    for (id, at, ws) in rows {
        b.save_session(&session(id, at, 1, ws)?, &Expected::Absent)?;
    }
    let all = b.list_sessions(&SessionListQuery::default())?;
    let ids: Vec<&str> = all.sessions.iter().map(|s| s.session_id.as_str()).collect();
    ensure_eq!(
        ids,
        vec!["s-f", "s-g", "s-e", "s-d", "s-c", "s-b", "s-a"],
        "all sessions"
    );
    ensure!(
        all.next_cursor.is_none(),
        "a listing without limit has a cursor"
    );
    let g = &all.sessions[1];
    ensure_eq!(g.message_count, Some(2), "message count");
    ensure_eq!(
        g.last_user_message.as_deref(),
        Some("question 0 of s-g"),
        "last user message"
    );
    ensure_eq!(
        g.workspace_root.as_deref(),
        Some("/w/one"),
        "workspace root"
    );
    ensure_eq!(
        g.updated_at.as_str(),
        "2026-02-04T00:00:00.000Z",
        "updated_at"
    );
    for (filter, want) in [
        ("/w/one", vec!["s-g", "s-e", "s-c", "s-a"]),
        ("/w/one/", vec!["s-g", "s-e", "s-c", "s-a"]),
        ("/w/two", vec!["s-f", "s-b"]),
        ("/w/none", vec![]),
    ] {
        let page = b.list_sessions(&SessionListQuery {
            workspace: Some(filter.to_owned()),
            ..SessionListQuery::default()
        })?;
        let ids: Vec<&str> = page
            .sessions
            .iter()
            .map(|s| s.session_id.as_str())
            .collect();
        ensure_eq!(ids, want, "sessions of workspace {filter}");
    }
    for (workspace, limit, want) in [
        (None, 3, vec!["s-f,s-g,s-e", "s-d,s-c,s-b", "s-a"]),
        (None, 2, vec!["s-f,s-g", "s-e,s-d", "s-c,s-b", "s-a"]),
        (Some("/w/one"), 3, vec!["s-g,s-e,s-c", "s-a"]),
    ] {
        let mut q = SessionListQuery {
            workspace: workspace.map(str::to_owned),
            limit: Some(limit),
            after: None,
        };
        let mut pages = Vec::new();
        loop {
            let page = b.list_sessions(&q)?;
            pages.push(
                page.sessions
                    .iter()
                    .map(|s| s.session_id.as_str())
                    .collect::<Vec<_>>()
                    .join(","),
            );
            match page.next_cursor {
                Some(c) => q.after = Some(c),
                None => break,
            }
            ensure!(pages.len() < 10, "paging does not end");
        }
        ensure_eq!(pages, want, "pages of {limit} of workspace {workspace:?}");
    }
    match b.list_sessions(&SessionListQuery {
        after: Some(PageCursor::new("not a cursor")),
        ..SessionListQuery::default()
    }) {
        Err(StorageError::InvalidCursor { token }) => {
            ensure_eq!(token.as_str(), "not a cursor", "token of the error")
        }
        other => ensure!(false, "an invalid cursor gave {other:?}"),
    }
    Ok(())
}

pub(crate) fn list_paging_under_inserts<H: Harness>(h: &H) -> Check {
    let b = Arc::new(h.fresh()?);
    let second = h.second_client(&b)?.map(Arc::new);
    let mut originals = BTreeSet::new();
    for i in 0..18u32 {
        // Pairs share an updated_at: ties straddle pages.
        let at = format!("2026-02-10T10:{:02}:00.000Z", i / 2);
        let id = format!("orig-{i:02}");
        b.save_session(&session(&id, &at, 1, None)?, &Expected::Absent)?;
        originals.insert(id);
    }
    let stop = AtomicBool::new(false);
    let seen: Result<Vec<String>, Fail> = std::thread::scope(|s| {
        let inserter = s.spawn(|| -> Result<(), String> {
            let client: &dyn SessionStore = match &second {
                Some(c) => c.as_ref(),
                None => b.as_ref(),
            };
            let mut n = 0u32;
            while !stop.load(Ordering::SeqCst) && n < 40 {
                // Newer, older and equal to the existing times.
                let at = format!("2026-02-10T{:02}:{:02}:00.000Z", 9 + n % 3, n % 10);
                let st =
                    session(&format!("new-{n:02}"), &at, 1, None).map_err(|e| format!("{e:?}"))?;
                client
                    .save_session(&st, &Expected::Absent)
                    .map_err(|e| e.to_string())?;
                n += 1;
            }
            Ok(())
        });
        let mut seen = Vec::new();
        let mut q = SessionListQuery {
            limit: Some(4),
            ..SessionListQuery::default()
        };
        let result = loop {
            let page = match b.list_sessions(&q) {
                Ok(p) => p,
                Err(e) => break Err(Fail::from(e)),
            };
            seen.extend(page.sessions.into_iter().map(|s| s.session_id));
            match page.next_cursor {
                Some(c) => q.after = Some(c),
                None => break Ok(()),
            }
            if seen.len() > 500 {
                break Err(Fail::Failed("paging does not end".into()));
            }
        };
        stop.store(true, Ordering::SeqCst);
        match inserter.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(Fail::Failed(format!("inserter: {e}"))),
            Err(_) => return Err(Fail::Failed("inserter panicked".into())),
        }
        result.map(|()| seen)
    });
    let seen = seen?;
    let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
    for id in &seen {
        *counts.entry(id.as_str()).or_insert(0) += 1;
    }
    let repeated: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    ensure!(
        repeated.is_empty(),
        "sessions repeated across pages: {repeated:?}"
    );
    let missing: Vec<_> = originals
        .iter()
        .filter(|id| !counts.contains_key(id.as_str()))
        .collect();
    ensure!(
        missing.is_empty(),
        "sessions skipped by the paging: {missing:?}"
    );
    Ok(())
}

//! `sessions repair` on the reference runtime's recorded store with a crash planted in it: the
//! dry run changes nothing; the repair seals the torn tail with one newline (no record
//! rewritten), migrates the never-loaded legacy snapshot so both implementations see it, and
//! rebuilds the index; every layer then reports the same facts about the repaired files.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use session_jsonl::{DamageKind, read_run};
use session_state::{IndexedRunOutcome, ListQuery, LoadSource, StateStore};

use crate::support::*;

/// S9: killed mid-tool; its run log ends without run.end.
const S9: &str = "8cde78e5-83d1-486e-9235-92043137d532";
const S9_RUN: &str = "2a11c3a2-3276-4762-88f9-5f8918cb8042";
/// L3: legacy snapshot the reference never loaded.
const L3: &str = "c0ffee00-1234-4abc-8def-00112233aabb";
const NOW: &str = "2026-12-01T00:00:00.000Z";
/// A `tool.output` the kill cut short, written after the recording ended.
const FRAGMENT: &str = r#"{"type":"tool.output","run_id":"2a11c3a2-3276-4762-88f9-5f8918cb8042","ts":"2026-11-30T11:39:30.001Z","tool":"shell","tool_call_id":"toolu_01Fake0000000"#;

fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    files_under(root)
        .into_iter()
        .map(|rel| {
            let bytes = fs::read(root.join(&rel)).expect("read");
            (rel, bytes)
        })
        .collect()
}

#[test]
fn repair_seals_migrates_and_reindexes_a_recorded_store() {
    let expected = codelia_expected();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("sessions");
    copy_tree(&codelia_dir().join("sessions"), &root);
    let run_rel = format!("2026/11/30/{S9_RUN}.jsonl");
    let run_path = root.join(&run_rel);
    let original = fs::read(&run_path).expect("S9 run");
    let mut torn = original.clone();
    torn.extend_from_slice(FRAGMENT.as_bytes());
    fs::write(&run_path, &torn).expect("plant the torn tail");
    // The crash was an hour ago: a torn tail written in the last two minutes may belong to a
    // run still being written, and `repair` would leave it alone.
    fs::File::options()
        .write(true)
        .open(&run_path)
        .and_then(|f| {
            f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
        })
        .expect("set the crash time");

    // First contact builds the run index; after that a dry run changes no byte anywhere.
    let runs = sessions(&root, NOW, &["runs", "--json", "--limit", "50"]);
    assert_eq!(runs.code, 0, "{}", runs.stderr);
    let s9 = runs
        .json_lines()
        .into_iter()
        .find(|r| r["run_id"] == S9_RUN)
        .expect("S9 listed");
    assert_eq!(
        (s9["outcome"].as_str(), s9["damage_count"].as_u64()),
        (Some("crashed"), Some(1))
    );
    let before = tree(&root);
    let dry = sessions(&root, NOW, &["repair", "--dry-run", "--json"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    let plan: Vec<(String, String)> = dry
        .json_lines()
        .iter()
        .map(|a| {
            (
                a["action"].as_str().unwrap_or("").to_owned(),
                a["file"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert!(
        plan.contains(&("seal_torn_tail".to_owned(), run_rel.clone())),
        "{plan:?}"
    );
    assert!(
        plan.contains(&("migrate_legacy".to_owned(), format!("state/{L3}.json"))),
        "{plan:?}"
    );
    assert_eq!(tree(&root), before, "the dry run changed a file");

    let repair = sessions(&root, NOW, &["repair", "--json"]);
    assert_eq!(repair.code, 0, "{}", repair.stderr);
    let done: Vec<(String, String, String)> = repair
        .json_lines()
        .iter()
        .map(|a| {
            (
                a["action"].as_str().unwrap_or("").to_owned(),
                a["file"].as_str().unwrap_or("").to_owned(),
                a["status"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let planned_actions: Vec<(&str, &str)> =
        plan.iter().map(|(a, f)| (a.as_str(), f.as_str())).collect();
    let done_actions: Vec<(&str, &str)> = done
        .iter()
        .map(|(a, f, _)| (a.as_str(), f.as_str()))
        .collect();
    assert_eq!(
        done_actions, planned_actions,
        "repair did what the dry run planned"
    );
    assert!(done.iter().all(|(_, _, s)| s == "done"), "{done:?}");

    // The torn tail is sealed with exactly one newline; every other run file is untouched.
    let mut sealed = torn.clone();
    sealed.push(b'\n');
    assert_eq!(fs::read(&run_path).expect("read"), sealed);
    for (id, facts) in expected["runs"].as_object().expect("runs") {
        if id == S9_RUN {
            continue;
        }
        let rel = facts["file"].as_str().expect("file");
        let rel = rel.strip_prefix("sessions/").expect("under sessions/");
        assert_eq!(
            fs::read(root.join(rel)).expect("run"),
            fs::read(codelia_dir().join("sessions").join(rel)).expect("original"),
            "{rel}"
        );
    }
    let read = read_run(&run_path).expect("read sealed");
    assert_eq!(
        read.records.len(),
        expected["runs"][S9_RUN]["lines"].as_u64().expect("lines") as usize
    );
    assert_eq!(read.damage.len(), 1, "{:?}", read.damage);
    assert_eq!(read.damage[0].kind, DamageKind::SealedFragment);
    assert_eq!(read.damage[0].offset, original.len() as u64);

    // L3 is migrated under its own id; the legacy file stays for the reference.
    let store = StateStore::open(&root).expect("store");
    let l3 = store.load(L3).expect("load").expect("L3");
    assert!(matches!(l3.source, LoadSource::Db), "{:?}", l3.source);
    let legacy = &expected["legacy_state_files"][L3];
    assert_eq!(
        l3.state.messages.len() as u64,
        legacy["legacy_message_count"].as_u64().expect("n")
    );
    assert!(root.join(format!("state/{L3}.json")).is_file());
    assert_eq!(
        fs::read(root.join(format!("state/{L3}.json"))).expect("legacy"),
        fs::read(codelia_dir().join(format!("sessions/state/{L3}.json"))).expect("original")
    );
    let messages = fs::read(root.join(format!("messages/{L3}.jsonl"))).expect("migrated messages");
    assert_eq!(messages.iter().filter(|&&b| b == b'\n').count(), 3);
    let conn = rusqlite::Connection::open(root.join("state.db")).expect("db");
    let (count, last): (i64, String) = conn
        .query_row(
            "SELECT message_count, last_user_message FROM session_state WHERE session_id = ?1",
            [L3],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the reference sees a row for L3");
    assert_eq!(count, 3);
    assert_eq!(
        last,
        legacy["legacy_last_user_message"].as_str().expect("last")
    );
    drop(conn);
    let listed = store.list(&ListQuery::all()).expect("list");
    assert_eq!(listed.entries.len(), 12);

    // The rebuilt index and the other commands agree on the sealed run.
    let row = store
        .runs_for_session(S9)
        .expect("rows")
        .pop()
        .expect("S9 run");
    assert_eq!(row.outcome, IndexedRunOutcome::Open);
    assert_eq!(row.damage_count, 1);
    assert_eq!(row.file_size, sealed.len() as u64);
    assert!(store.reindex().expect("reindex").changes.is_empty());
    drop(store);
    // The sealed fragment is a note, not a problem: `repair && verify` succeeds.
    let verify = sessions(&root, NOW, &["verify", "--json", S9_RUN]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
    let kinds: Vec<(String, String, u64)> = verify
        .json_lines()
        .iter()
        .filter(|f| f.get("kind").is_some())
        .map(|f| {
            (
                f["severity"].as_str().unwrap_or("").to_owned(),
                f["kind"].as_str().unwrap_or("").to_owned(),
                f["offset"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (
                "note".to_owned(),
                "sealed_fragment".to_owned(),
                original.len() as u64
            ),
            ("note".to_owned(), "no_run_end".to_owned(), 0),
        ]
    );
    let summary = verify.json_lines().pop().expect("summary");
    assert_eq!(summary["bytes"], sealed.len() as u64);
    let again = sessions(&root, NOW, &["repair", "--dry-run", "--json"]);
    assert!(
        !again
            .json_lines()
            .iter()
            .any(|a| a["action"] == "seal_torn_tail" || a["action"] == "migrate_legacy"),
        "nothing left to repair: {}",
        again.stdout
    );
}

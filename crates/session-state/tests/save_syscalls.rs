//! What a durable save asks of the kernel, counted with `strace` in a child process (this
//! test binary again): per `SaveDurability::Sync` save of an appending session, exactly two
//! `fdatasync` (the messages file, then SQLite's WAL at `COMMIT`: SQLite built with
//! `HAVE_FDATASYNC`, see `.cargo/config.toml`) and no `fsync`; a save without a lease opens
//! the lease file read-only to check it and creates, writes or removes nothing in `leases/`;
//! a batch of K sessions makes K + 1 `fdatasync`; each save opens its messages file once. A
//! lease holder's `save_appended` makes no `lseek` (the append is a `pwrite`), reads the
//! append intent through a descriptor kept open, removes nothing and takes three `stat`s.
//! Skipped with a message when `strace` is not installed or cannot trace here.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;
use common::msg;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use session_schema::{SessionState, Timestamp};
use session_state::{BatchPolicy, BatchSave, SaveDurability, StateStore, StoreOptions};

/// Set in the child: the sessions root to save into.
const CHILD: &str = "SESSION_STATE_SYSCALL_CHILD";

/// Saves counted per phase.
const SAVES: usize = 12;

/// Sessions in the counted batch.
const BATCH: usize = 6;

const ID: &str = "5e55104e-0000-4000-8000-0000000000c5";

fn state(id: &str, n: usize) -> SessionState {
    SessionState {
        schema_version: Some(1i64.into()),
        session_id: id.to_owned(),
        updated_at: Timestamp::from_raw("2026-12-01T10:00:00.000Z"),
        messages: (0..n)
            .map(|i| {
                msg(
                    if i % 2 == 0 { "user" } else { "assistant" },
                    &format!("m{i}"),
                )
            })
            .collect(),
        ..Default::default()
    }
}

/// A system call the trace shows where the counted phase `name` begins or ends: an `open` of
/// a file that does not exist.
fn mark(root: &Path, name: &str) {
    let _ = fs::File::open(root.join(format!("strace-mark-{name}")));
}

fn open_sync(root: &Path) -> StateStore {
    StateStore::open_with(
        root,
        StoreOptions {
            durability: SaveDurability::Sync,
            ..StoreOptions::default()
        },
    )
    .unwrap()
}

/// The child: saves without a lease, through a held lease and in a batch, each phase
/// between two marks, each in a store of its own (so that no phase reaches a WAL checkpoint,
/// whose syncs are not a save's).
fn child(root: &Path) {
    let store = open_sync(&root.join("unleased"));
    store.save(&state(ID, 1)).unwrap();
    mark(root, "unleased-begin");
    for n in 2..2 + SAVES {
        store.save(&state(ID, n)).unwrap();
    }
    mark(root, "unleased-end");
    let store = open_sync(&root.join("leased"));
    store.save(&state(ID, 1)).unwrap();
    let lease = store.lease(ID).unwrap();
    mark(root, "leased-begin");
    for n in 2 + SAVES..2 + 2 * SAVES {
        lease.save(&state(ID, n)).unwrap();
    }
    mark(root, "leased-end");
    drop(lease);
    let store = open_sync(&root.join("appended"));
    let mut s = state(ID, 1);
    store.save(&s).unwrap();
    let lease = store.lease(ID).unwrap();
    lease.save_appended(&state(ID, 2), 1).unwrap();
    s = state(ID, 2);
    mark(root, "appended-begin");
    for n in 3..3 + SAVES {
        let kept = s.messages.len();
        s = state(ID, n);
        lease.save_appended(&s, kept).unwrap();
    }
    mark(root, "appended-end");
    drop(lease);
    let store = open_sync(&root.join("batch"));
    let ids: Vec<String> = (0..BATCH)
        .map(|i| format!("5e55104e-0000-4000-8000-0000000b{i:04x}"))
        .collect();
    let first: Vec<SessionState> = ids.iter().map(|id| state(id, 1)).collect();
    let saves: Vec<BatchSave<'_>> = first.iter().map(BatchSave::new).collect();
    assert_eq!(
        store
            .save_batch(&saves, BatchPolicy::AllOrNothing)
            .unwrap()
            .saved(),
        BATCH
    );
    let second: Vec<SessionState> = ids.iter().map(|id| state(id, 2)).collect();
    let saves: Vec<BatchSave<'_>> = second.iter().map(BatchSave::new).collect();
    mark(root, "batch-begin");
    let report = store.save_batch(&saves, BatchPolicy::AllOrNothing).unwrap();
    mark(root, "batch-end");
    assert_eq!(report.saved(), BATCH);
}

/// One traced system call: its name and the rest of the line.
struct Call {
    name: String,
    line: String,
}

/// The calls of `trace` (`strace -f -o` output) between the marks of phase `phase`.
fn phase(trace: &str, phase: &str) -> Vec<Call> {
    let mut calls = Vec::new();
    let mut inside = false;
    for raw in trace.lines() {
        // `-f` prefixes the pid; a call interrupted by another thread's shows up as
        // `<... name resumed>`, counted on its first line.
        let line = raw
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .trim_start();
        if line.starts_with("<...") {
            continue;
        }
        if line.contains(&format!("strace-mark-{phase}-begin")) {
            inside = true;
            continue;
        }
        if line.contains(&format!("strace-mark-{phase}-end")) {
            break;
        }
        if inside && let Some(name) = line.split('(').next() {
            calls.push(Call {
                name: name.to_owned(),
                line: line.to_owned(),
            });
        }
    }
    calls
}

fn count(calls: &[Call], name: &str) -> usize {
    calls.iter().filter(|c| c.name == name).count()
}

fn summary(calls: &[Call]) -> BTreeMap<&str, usize> {
    let mut m = BTreeMap::new();
    for c in calls {
        *m.entry(c.name.as_str()).or_default() += 1;
    }
    m
}

#[test]
fn durable_saves_make_two_data_syncs_and_create_no_lease_file() {
    if let Some(root) = std::env::var_os(CHILD) {
        child(Path::new(&root));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let Some(trace) = common::traced_child(
        "durable_saves_make_two_data_syncs_and_create_no_lease_file",
        "fsync,fdatasync,open,openat,creat,unlink,unlinkat,rename,renameat,renameat2,mkdir,\
         mkdirat,flock,lseek,read,statx,fstat,newfstatat,sync_file_range",
        CHILD,
        &root,
        &dir.path().join("trace.txt"),
    ) else {
        return;
    };

    let lease_file = format!("leases/{ID}.lease");
    let unleased = phase(&trace, "unleased");
    let report = format!("{:?}", summary(&unleased));
    assert_eq!(count(&unleased, "fdatasync"), 2 * SAVES, "{report}");
    assert_eq!(count(&unleased, "fsync"), 0, "{report}");
    // One read-only look at the lease per save; nothing created, renamed or removed.
    let lease_opens: Vec<&Call> = unleased
        .iter()
        .filter(|c| c.line.contains("leases/"))
        .collect();
    assert_eq!(lease_opens.len(), SAVES, "{report}");
    assert!(
        lease_opens.iter().all(|c| c.line.contains(&lease_file)
            && c.line.contains("O_RDONLY")
            && !c.line.contains("O_CREAT")),
        "{report}"
    );
    // Nothing else touches `leases/` (the lease file is neither created nor removed).
    assert_eq!(
        unleased
            .iter()
            .filter(|c| c.name != "openat" && c.line.contains("leases"))
            .count(),
        0,
        "{report}"
    );
    assert!(!root.join("unleased/leases").exists());
    // The messages file is opened once per save: the check of its committed bytes opens it
    // and the append writes through that descriptor.
    let opens_of = |calls: &[Call], file: &str| {
        calls
            .iter()
            .filter(|c| c.name.starts_with("open") && c.line.contains(&format!("{file}\"")))
            .count()
    };
    let messages_file = format!("messages/{ID}.jsonl");
    assert_eq!(opens_of(&unleased, &messages_file), SAVES, "{report}");

    let leased = phase(&trace, "leased");
    let report = format!("{:?}", summary(&leased));
    assert_eq!(count(&leased, "fdatasync"), 2 * SAVES, "{report}");
    assert_eq!(count(&leased, "fsync"), 0, "{report}");
    assert_eq!(opens_of(&leased, &messages_file), SAVES, "{report}");
    assert_eq!(
        leased.iter().filter(|c| c.line.contains("leases/")).count(),
        0,
        "{report}"
    );

    let appended = phase(&trace, "appended");
    let report = format!("{:?}", summary(&appended));
    assert_eq!(count(&appended, "fdatasync"), 2 * SAVES, "{report}");
    // The messages file's writeback is started right after its write (the row statements run
    // while the disk writes it), then its `fdatasync`, then the WAL's at `COMMIT`.
    let syncs: Vec<&str> = appended
        .iter()
        .filter(|c| matches!(c.name.as_str(), "sync_file_range" | "fdatasync"))
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        syncs,
        ["sync_file_range", "fdatasync", "fdatasync"].repeat(SAVES),
        "{report}"
    );
    assert_eq!(opens_of(&appended, &messages_file), SAVES, "{report}");
    // The new lines go out with one `pwrite` at the committed length: no `lseek`.
    assert_eq!(count(&appended, "lseek"), 0, "{report}");
    // No temp file of a crashed rewrite to remove: the store made the last commit and holds
    // the lease.
    assert_eq!(count(&appended, "unlink"), 0, "{report}");
    // The append intent (already naming the session) stays open from the store's first
    // appending save: no `open`, no `read` (one `pread`, not traced here) per save.
    assert_eq!(
        appended
            .iter()
            .filter(|c| c.name.starts_with("open") && c.line.contains(".append-intent"))
            .count(),
        0,
        "{report}"
    );
    assert_eq!(count(&appended, "read"), 0, "{report}");
    // The messages file's `stat` when it is opened and after its `fdatasync`, and the kept
    // append intent's (its link count), nothing else.
    let stats = ["statx", "fstat", "newfstatat"]
        .iter()
        .map(|n| count(&appended, n))
        .sum::<usize>();
    assert_eq!(stats, 3 * SAVES, "{report}");

    let batch = phase(&trace, "batch");
    let report = format!("{:?}", summary(&batch));
    assert_eq!(count(&batch, "fdatasync"), BATCH + 1, "{report}");
    assert_eq!(count(&batch, "fsync"), 0, "{report}");
    assert_eq!(
        batch
            .iter()
            .filter(|c| c.name.starts_with("open") && c.line.contains(".jsonl\""))
            .count(),
        BATCH,
        "{report}"
    );
    assert_eq!(
        batch.iter().filter(|c| c.line.contains("leases/")).count(),
        BATCH,
        "{report}"
    );
}

#[test]
fn the_wal_of_a_durable_store_stops_growing_after_its_first_checkpoint() {
    // A commit that overwrites WAL blocks syncs data only; one that extends the WAL is a
    // journal commit of the file system too. A `Sync` store checkpoints every 128 pages
    // (SQLite's default: 1000), so that the WAL is reused from its start early on: after
    // 100 saves of ~2 KB messages (three to five WAL frames each, 300 frames or more in all)
    // it holds at most 128 frames plus one save's.
    let dir = tempfile::tempdir().unwrap();
    let store = open_sync(dir.path());
    let big = |i: usize| msg("user", &format!("{i}: {}", "x".repeat(2000)));
    let mut s = state(ID, 0);
    for i in 0..100 {
        s.messages.push(big(i));
        store.save(&s).unwrap();
    }
    let wal = fs::metadata(dir.path().join("state.db-wal")).unwrap().len();
    let page_size: u32 = rusqlite::Connection::open(dir.path().join("state.db"))
        .unwrap()
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .unwrap();
    let frame = u64::from(page_size) + 24;
    assert!(wal > 32, "{wal}");
    assert!(wal <= 32 + (128 + 16) * frame, "WAL of {wal} bytes");
    assert_eq!(store.load(ID).unwrap().unwrap().state.messages.len(), 100);
}

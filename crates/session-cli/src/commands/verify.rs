//! `sessions verify [RUN…]`: check run files (damage with offsets, invocation pairing, request
//! snapshot continuity), message logs and the session index; exit 1 when problems are found.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use session_jsonl::DamageKind;
use session_replay::{DiagnosticKind, Severity};
use session_state::{EntrySource, LoadSource, MessageDamageKind};

use crate::Ctx;
use crate::cli::VerifyArgs;
use crate::error::{CliError, EXIT_OK, EXIT_PROBLEMS, one_line};
use crate::json_rows::{self, FindingRow, Row, SummaryRow, VerifySummary, write_row};
use crate::progress::Progress;
use crate::style::{Paint, bytes as fmt_bytes};
use crate::support::lib_errors::jsonl_err;
use crate::support::open::{messages_files, open_store_read_only, orphan_messages, state_err};
use crate::support::paths::rel;
use crate::support::store::locate_run;
use crate::support::stream::for_each_item_sized;

/// One finding of `verify`.
#[derive(Debug, Clone)]
struct Finding {
    /// The file concerned.
    pub(crate) file: PathBuf,
    /// The run or session id, when known.
    pub(crate) id: Option<String>,
    /// Stable snake_case kind name (`torn_tail`, `missing_response`,
    /// `message_count_mismatch`, …; the list is in the crate README).
    pub(crate) kind: String,
    /// `true`: a problem (exit 1); `false`: a note (expected in real data, shown for context).
    pub(crate) problem: bool,
    /// 1-based line, when known.
    pub(crate) line: Option<u64>,
    /// Byte offset, when known.
    pub(crate) offset: Option<u64>,
    /// Lower-case explanation.
    pub(crate) message: String,
}

/// `verify`'s name of a session-replay finding: snake_case like the reader's damage kinds
/// (session-replay names its kinds in kebab-case). The names are part of `verify --json`'s
/// interface and listed in the crate README.
fn diagnostic_kind_name(kind: DiagnosticKind) -> String {
    let name = match kind {
        DiagnosticKind::MissingResponse => "missing_response",
        DiagnosticKind::OrphanResponse => "orphan_response",
        DiagnosticKind::DuplicateSeq => "duplicate_seq",
        DiagnosticKind::SeqNotIncreasing => "seq_not_increasing",
        DiagnosticKind::OverInclusiveSnapshot => "over_inclusive_snapshot",
        DiagnosticKind::SnapshotDivergence => "snapshot_divergence",
        DiagnosticKind::SnapshotReset => "snapshot_reset",
        DiagnosticKind::Undecodable => "undecodable",
        DiagnosticKind::NoRunEnd => "no_run_end",
        DiagnosticKind::TornTail => "torn_tail",
        DiagnosticKind::SkippedLine => "skipped_line",
        DiagnosticKind::HeaderProblem => "header_problem",
        DiagnosticKind::ForeignRecord => "foreign_record",
        DiagnosticKind::NoSuchInvocation => "no_such_invocation",
        DiagnosticKind::EmptyRun => "empty_run",
        DiagnosticKind::RepairedLine => "repaired_line",
        DiagnosticKind::UnreadableRun => "unreadable_run",
        DiagnosticKind::RebuiltToolResult => "rebuilt_tool_result",
        // A kind added to session-replay later: the same spelling rule.
        _ => return kind.as_str().replace('-', "_"),
    };
    name.to_owned()
}

/// Damage kinds that are notes: a repair or a best-effort mode (the record was still read),
/// or a torn write that was sealed (by `repair` or a reopening writer): the fragment is kept
/// and shown, the loss it stands for was acknowledged, so `repair && verify` succeeds.
fn damage_is_problem(kind: DamageKind) -> bool {
    !matches!(
        kind,
        DamageKind::LoneSurrogate | DamageKind::NewerSchemaVersion | DamageKind::SealedFragment
    )
}

/// Whether a session-replay finding is a problem, and its message. Warnings are problems,
/// except an over-inclusive request snapshot: the reference serializes a request's snapshot
/// after its response was appended (compat notes §5 item 9), so pristine reference data has
/// them; it is a note whose message names `replay --corrected`, which gives the prompt
/// actually sent.
fn grade(
    kind: DiagnosticKind,
    severity: Severity,
    message: String,
    run_id: Option<&str>,
) -> (bool, String) {
    if kind == DiagnosticKind::OverInclusiveSnapshot {
        let run = run_id.unwrap_or("<run-id>");
        return (
            false,
            format!(
                "{message}; a known quirk of the reference (compat notes §5 item 9): \
                 `sessions replay {run} --seq N --corrected` gives the prompt actually sent"
            ),
        );
    }
    (severity == Severity::Warning, message)
}

/// What [`check_run`] learnt about one file besides its findings.
struct Checked {
    /// Bytes of content read (decompressed for an archive).
    pub(crate) content_bytes: u64,
    /// The file's size on disk.
    pub(crate) file_size: u64,
    /// The run id its records name (the header's `run_id`; `None` when no record names one).
    pub(crate) id: Option<String>,
    /// How complete it is, for choosing among several files of one run.
    pub(crate) terminal: bool,
    /// Records read.
    pub(crate) records: u64,
}

/// Checks one run file; appends findings and returns what [`Checked`] holds. A file whose
/// name is not `<run_id>.jsonl[.zst]` of that id is a `run_id_mismatch` problem: readers that
/// find runs by name (the reference's, `find_run`) do not find it, and a copy under another
/// name counts the run twice.
fn check_run(path: &Path, findings: &mut Vec<Finding>) -> Result<Checked, CliError> {
    check_run_ref(&crate::backend::RunRef::File(path.to_owned()), findings)
}

/// [`check_run`] of a run of either kind of store; a stored run's key plays the file name's
/// part (its `file` is the run's location), its size is its stored bytes.
///
/// The run is streamed: each item the reader yields goes through session-replay's
/// [`RunChecker`](session_replay::RunChecker) and is dropped, so memory follows the longest
/// line, not the file; of the damage only what a finding shows is kept.
fn check_run_ref(
    src: &crate::backend::RunRef,
    findings: &mut Vec<Finding>,
) -> Result<Checked, CliError> {
    let owned = src.display_path();
    let path = owned.as_path();
    let mut checker = session_replay::RunChecker::new(owned.clone());
    let mut damage: Vec<(DamageKind, u64, u64, String)> = Vec::new();
    let mut terminal = false;
    let (bytes, file_size) = for_each_item_sized(src, false, |item| {
        match &item {
            session_jsonl::Item::Record(r) => {
                terminal |= matches!(
                    r.record(),
                    session_schema::Record::RunEnd(_) | session_schema::Record::RunError(_)
                );
            }
            session_jsonl::Item::Damage(d) => {
                damage.push((d.kind, d.line, d.offset, d.message.clone()));
            }
        }
        checker.push(&item);
        Ok(())
    })?;
    let checked = checker.finish();
    let id = Some(checked.meta.run_id.clone()).filter(|s| !s.is_empty());
    if let Some(header_id) = &id {
        let name_id = src.run_id();
        if name_id.as_deref() != Some(header_id.as_str()) {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            findings.push(Finding {
                file: path.to_owned(),
                id: id.clone(),
                kind: "run_id_mismatch".into(),
                problem: true,
                line: Some(1),
                offset: Some(0),
                message: format!(
                    "file name `{name}` does not match the header's run_id {header_id} \
                     (expected `{header_id}.jsonl`); runs are found by file name"
                ),
            });
        }
    }
    for (kind, line, offset, message) in damage {
        findings.push(Finding {
            file: path.to_owned(),
            id: id.clone(),
            kind: kind.as_str().to_owned(),
            problem: damage_is_problem(kind),
            line: Some(line),
            offset: Some(offset),
            message,
        });
    }
    let diags = checked
        .structure
        .iter()
        .chain(&checked.invocations)
        .chain(&checked.snapshots);
    // The same finding can come from two checks (for example a missing response); keep one.
    let mut seen = std::collections::BTreeSet::new();
    for d in diags {
        // Line-level damage is already reported from the reader, with its exact offset.
        if matches!(
            d.kind,
            DiagnosticKind::TornTail | DiagnosticKind::SkippedLine | DiagnosticKind::RepairedLine
        ) {
            continue;
        }
        if !seen.insert((d.kind, d.record, d.message.as_str())) {
            continue;
        }
        let pos = d.record.and_then(|i| checked.position(i));
        let (problem, message) = grade(d.kind, d.severity, d.message.clone(), id.as_deref());
        findings.push(Finding {
            file: path.to_owned(),
            id: id.clone(),
            kind: diagnostic_kind_name(d.kind),
            problem,
            line: pos.map(|p| p.0),
            offset: pos.map(|p| p.1),
            message,
        });
    }
    Ok(Checked {
        content_bytes: bytes,
        file_size,
        id,
        terminal,
        records: checked.records as u64,
    })
}

/// [`check_run`] of one file with its findings, and what it read counted in a tally for the
/// thread that reports it (openings only when `count_reads`).
fn checked_run(
    path: &Path,
    count_reads: bool,
) -> (
    Vec<Finding>,
    Result<Checked, CliError>,
    session_jsonl::Tally,
) {
    let scope = session_jsonl::TallyScope::start(count_reads);
    let mut found = Vec::new();
    let checked = check_run(path, &mut found);
    (found, checked, scope.finish())
}

/// `duplicate_run_id` problems: files whose records name the same run (`(run id, how
/// complete the file is)`, in listing order). The file that is the run is the most complete
/// one, by the rule every command uses ([`session_jsonl::rank_files`]: a terminal record,
/// then most records, then size; then a plain file over an archive, a file named after the
/// run over a copy, listing order); every other file is reported as the duplicate, naming the
/// file that is counted. Deleting what is reported never deletes the conversation.
fn duplicate_findings(
    root: &Path,
    files: &[(String, session_jsonl::Completeness)],
) -> Vec<Finding> {
    let mut by_id: BTreeMap<&str, Vec<session_jsonl::Completeness>> = BTreeMap::new();
    for (id, c) in files {
        by_id.entry(id.as_str()).or_default().push(c.clone());
    }
    let mut out = Vec::new();
    for (id, mut ranked) in by_id.into_iter().filter(|(_, p)| p.len() > 1) {
        session_jsonl::rank_files(&mut ranked);
        let best = &ranked[0];
        for c in &ranked[1..] {
            out.push(Finding {
                file: c.path.clone(),
                id: Some(id.to_owned()),
                kind: "duplicate_run_id".into(),
                problem: true,
                line: None,
                offset: None,
                message: format!(
                    "holds run {id} again ({}); {} holds it too and is the one counted ({})",
                    c.describe(),
                    rel(root, &best.path),
                    best.describe()
                ),
            });
        }
    }
    out
}

/// `verify` on a shared store: every run of the catalogue (or the named ones) through the
/// same checks as a run file, and with no run named every session loaded
/// ([`SessionStore::load_session`](session_storage::SessionStore::load_session)), its damaged
/// messages reported (kept ones as notes).
pub(crate) fn verify_shared(
    ctx: &mut Ctx<'_>,
    shared: &crate::backend::Shared,
    args: &VerifyArgs,
) -> Result<i32, CliError> {
    use session_storage::{RunCatalogue, RunListQuery, SessionListQuery, SessionStore};
    let pg = shared.backend()?;
    let err = |e| crate::backend::storage_err(shared, e);
    let mut runs: Vec<crate::backend::RunRef> = Vec::new();
    let whole_store = args.runs.is_empty();
    if whole_store {
        let mut query = RunListQuery {
            limit: Some(1000),
            ..RunListQuery::default()
        };
        loop {
            let page = pg.list_runs(&query).map_err(err)?;
            runs.extend(
                page.runs
                    .iter()
                    .map(|s| crate::backend::RunRef::stored(&pg, s)),
            );
            match page.next_cursor {
                Some(c) => query.after = Some(c),
                None => break,
            }
        }
    } else {
        for r in &args.runs {
            let found = crate::support::shared::resolve_target(
                ctx,
                shared,
                r,
                crate::support::ids::Want::Run,
            )?;
            runs.extend(found.runs);
        }
    }
    let mut findings = Vec::new();
    let progress = Progress::new(ctx.progress, runs.len() as u64, "verifying runs");
    let mut total_bytes = 0u64;
    for r in &runs {
        match check_run_ref(r, &mut findings) {
            Ok(c) => total_bytes += c.file_size,
            Err(e) => findings.push(Finding {
                file: r.display_path(),
                id: r.run_id(),
                kind: "unreadable".into(),
                problem: true,
                line: None,
                offset: None,
                message: e.to_string(),
            }),
        }
        progress.inc();
    }
    progress.finish();
    let mut sessions_checked = 0usize;
    if whole_store {
        let mut query = SessionListQuery {
            limit: Some(500),
            ..SessionListQuery::default()
        };
        loop {
            let page = pg.list_sessions(&query).map_err(err)?;
            for s in &page.sessions {
                sessions_checked += 1;
                let Some(loaded) = pg.load_session(&s.session_id).map_err(err)? else {
                    continue;
                };
                for d in loaded.damage {
                    findings.push(Finding {
                        file: PathBuf::from(format!("session {}", s.session_id)),
                        id: Some(s.session_id.clone()),
                        kind: d.kind,
                        problem: !d.kept,
                        line: d.line,
                        offset: Some(d.offset),
                        message: d.detail,
                    });
                }
            }
            match page.next_cursor {
                Some(c) => query.after = Some(c),
                None => break,
            }
        }
    }
    report(
        ctx,
        args.json,
        &findings,
        runs.len(),
        (total_bytes, total_bytes),
        sessions_checked,
    )?;
    Ok(if findings.iter().any(|f| f.problem) {
        EXIT_PROBLEMS
    } else {
        EXIT_OK
    })
}

/// `sessions verify`: checks run files and saved state, one finding line each.
///
/// # Errors
/// Usage (2), not found (3) or data (4), as the command's help describes.
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &VerifyArgs) -> Result<i32, CliError> {
    let root = ctx.root.path.clone();
    let mut findings = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    let whole_store = args.runs.is_empty();
    if whole_store {
        crate::support::open::check_root(ctx)?;
        let listing = session_jsonl::list_run_files(&root).map_err(jsonl_err)?;
        for d in &listing.nonstandard_dirs {
            findings.push(Finding {
                file: d.clone(),
                id: None,
                kind: "nonstandard_date_dir".into(),
                problem: true,
                line: None,
                offset: None,
                message:
                    "date directory is not zero-padded; the reference's readers do not see its runs"
                        .into(),
            });
        }
        for s in &listing.skipped {
            findings.push(Finding {
                file: s.path.clone(),
                id: None,
                kind: "unreadable_dir".into(),
                problem: true,
                line: None,
                offset: None,
                message: format!("cannot list directory: {}", s.error),
            });
        }
        files.extend(listing.files.into_iter().map(|f| f.path));
    } else {
        for r in &args.runs {
            let p = Path::new(r);
            if p.is_file() {
                files.push(p.to_owned());
            } else {
                files.push(locate_run(ctx, r)?);
            }
        }
    }
    let progress = Progress::new(ctx.progress, files.len() as u64, "verifying runs");
    let (mut total_bytes, mut content_bytes) = (0u64, 0u64);
    let mut ids: Vec<(String, session_jsonl::Completeness)> = Vec::new();
    // Files checked ahead on a few threads, taken in listing order: the report is the one a
    // check on this thread gives.
    let count_reads = session_jsonl::counting_file_reads();
    let mut checks = session_state::read_pool::InOrder::start(
        files.clone(),
        session_state::read_pool::max_threads(files.len()),
        || (),
        move |f: &PathBuf, ()| checked_run(f, count_reads),
    );
    for (i, f) in files.iter().enumerate() {
        let (found, checked, tally) = checks
            .take(i)
            .unwrap_or_else(|| checked_run(f, count_reads));
        tally.add_to_this_thread();
        findings.extend(found);
        match checked {
            Ok(c) => {
                total_bytes += c.file_size;
                content_bytes += c.content_bytes;
                if let Some(id) = c.id.or_else(|| crate::support::paths::run_id_of_path(f)) {
                    let rank = session_jsonl::Completeness::new(
                        f,
                        &id,
                        c.terminal,
                        c.records,
                        c.file_size,
                    );
                    ids.push((id, rank));
                }
            }
            Err(e) => findings.push(Finding {
                file: f.clone(),
                id: crate::support::paths::run_id_of_path(f),
                kind: "unreadable".into(),
                problem: true,
                line: None,
                offset: None,
                message: e.to_string(),
            }),
        }
        progress.inc();
    }
    progress.finish();
    if whole_store {
        findings.extend(duplicate_findings(&root, &ids));
    }
    let mut sessions_checked = 0usize;
    if whole_store {
        sessions_checked = verify_state(ctx, &mut findings)?;
    }
    report(
        ctx,
        args.json,
        &findings,
        files.len(),
        (total_bytes, content_bytes),
        sessions_checked,
    )?;
    Ok(if findings.iter().any(|f| f.problem) {
        EXIT_PROBLEMS
    } else {
        EXIT_OK
    })
}

/// Prints the findings and the summary; `(bytes, content_bytes)`: the files' sizes on disk and
/// the bytes of content read (larger for archives, which are read decompressed).
fn report(
    ctx: &mut Ctx<'_>,
    json: bool,
    findings: &[Finding],
    files: usize,
    (bytes, content_bytes): (u64, u64),
    sessions: usize,
) -> Result<(), CliError> {
    let root = ctx.root.path.clone();
    let problems = findings.iter().filter(|f| f.problem).count();
    let notes = findings.len() - problems;
    let problem_files: std::collections::BTreeSet<&Path> = findings
        .iter()
        .filter(|f| f.problem)
        .map(|f| f.file.as_path())
        .collect();
    if json {
        for f in findings {
            let row = FindingRow {
                file: rel(&root, &f.file).into_owned(),
                id: f.id.clone(),
                severity: if f.problem {
                    json_rows::Severity::Problem
                } else {
                    json_rows::Severity::Note
                },
                kind: f.kind.clone(),
                line: f.line,
                offset: f.offset,
                message: f.message.clone(),
            };
            write_row(ctx.out, &Row::Finding(row))?;
        }
        let summary = VerifySummary {
            run_files: files as u64,
            bytes,
            content_bytes,
            sessions: sessions as u64,
            problems: problems as u64,
            notes: notes as u64,
        };
        write_row(ctx.out, &Row::Summary(SummaryRow::Verify(summary)))?;
        return Ok(());
    }
    let s = ctx.style;
    for f in findings {
        let label = if f.problem {
            s.paint(Paint::Red, "problem")
        } else {
            s.paint(Paint::Dim, "note")
        };
        let at = match (f.line, f.offset) {
            (Some(l), Some(o)) => format!(":{l} (byte offset {o})"),
            (Some(l), None) => format!(":{l}"),
            (None, Some(o)) => format!(" (byte offset {o})"),
            (None, None) => String::new(),
        };
        writeln!(
            ctx.out,
            "{}{at}: {label} [{}] {}",
            rel(&root, &f.file),
            f.kind,
            f.message
        )?;
    }
    let verdict = if problems == 0 {
        s.paint(Paint::Green, "no problems")
    } else {
        s.paint(
            Paint::Red,
            &format!("{problems} problem(s) in {} file(s)", problem_files.len()),
        )
    };
    let size = if content_bytes == bytes {
        fmt_bytes(bytes)
    } else {
        format!(
            "{}, {} decompressed",
            fmt_bytes(bytes),
            fmt_bytes(content_bytes)
        )
    };
    writeln!(
        ctx.out,
        "checked {files} run file(s) ({size}){}: {verdict}, {notes} note(s)",
        if sessions > 0 {
            format!(" and {sessions} session(s)")
        } else {
            String::new()
        }
    )?;
    Ok(())
}

/// The findings for message logs without a `state.db` row: one `orphan_messages` problem per
/// file, and when `state.db` has no session row at all while `messages/` holds logs, one
/// `state_empty_with_messages` problem (a zero-byte or replaced `state.db`).
fn orphan_findings(
    root: &std::path::Path,
    listed: &std::collections::BTreeSet<String>,
    has_rows: bool,
    findings: &mut Vec<Finding>,
) {
    let orphans = orphan_messages(root, listed);
    let logs = messages_files(root).len();
    if !has_rows && logs > 0 {
        findings.push(Finding {
            file: root.join("state.db"),
            id: None,
            kind: "state_empty_with_messages".into(),
            problem: true,
            line: None,
            offset: None,
            message: format!(
                "state.db has no session rows but messages/ holds {logs} session log(s): the \
                 sessions are missing from the listings (a zero-byte or replaced state.db?)"
            ),
        });
    }
    for (id, path) in orphans {
        findings.push(Finding {
            file: path,
            id: Some(id),
            kind: "orphan_messages".into(),
            problem: true,
            line: None,
            offset: None,
            message: "message log without a state.db row: the session is not listed or \
                      loadable; `sessions repair` rebuilds its row"
                .into(),
        });
    }
    // What is not a regular file is never read (a FIFO would make every reader wait, a link
    // could point anywhere); those of listed sessions are reported by their load.
    // (Legacy snapshots that are not regular files are the listing's `unlistable_snapshot`.)
    for (id, path, kind) in irregular_messages(root) {
        if listed.contains(&id) {
            continue;
        }
        findings.push(Finding {
            file: path,
            id: Some(id),
            kind: "not_regular_file".into(),
            problem: true,
            line: None,
            offset: None,
            message: format!(
                "a {kind} where a message log belongs: never followed or read; move it away"
            ),
        });
    }
}

/// `messages/<id>.jsonl` entries (safe ids) that are not regular files, with what they are;
/// symbolic links are not followed.
fn irregular_messages(root: &std::path::Path) -> Vec<(String, std::path::PathBuf, &'static str)> {
    let Ok(rd) = std::fs::read_dir(root.join("messages")) else {
        return Vec::new();
    };
    let mut out: Vec<_> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let id = name.strip_suffix(".jsonl")?;
            let kind = irregular_kind(e.file_type().ok()?)?;
            session_schema::is_safe_id(id).then(|| (id.to_owned(), e.path(), kind))
        })
        .collect();
    out.sort();
    out
}

/// What a directory entry is when it is not a regular file.
fn irregular_kind(t: std::fs::FileType) -> Option<&'static str> {
    if t.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("FIFO");
        }
        if t.is_socket() {
            return Some("socket");
        }
        if t.is_char_device() || t.is_block_device() {
            return Some("device");
        }
    }
    Some(if t.is_symlink() {
        "symbolic link"
    } else if t.is_dir() {
        "directory"
    } else {
        "special file"
    })
}

/// Checks every listed session: damage in its messages file, a row whose `message_count`
/// disagrees with the file, legacy snapshots not migrated yet. Legacy-only sessions are not
/// loaded (that would migrate them; `repair` does). Returns the number of sessions checked.
///
/// # Errors
/// Data (4) when the store cannot be opened or listed.
fn verify_state(ctx: &mut Ctx<'_>, findings: &mut Vec<Finding>) -> Result<usize, CliError> {
    // The run files were checked already; a state.db that cannot be opened or listed is one
    // more finding, not the end of the report.
    let db = ctx.root.path.join("state.db");
    let logs = messages_files(&ctx.root.path).len();
    let unavailable = |e: CliError| Finding {
        file: db.clone(),
        id: None,
        kind: "state_unavailable".into(),
        problem: true,
        line: None,
        offset: None,
        message: if logs > 0 {
            format!(
                "{e}; the {logs} session(s) of messages/ cannot be listed or loaded until it \
                 is readable"
            )
        } else {
            e.to_string()
        },
    };
    let store = match open_store_read_only(ctx) {
        Ok(s) => s,
        Err(e) => {
            findings.push(unavailable(e));
            return Ok(0);
        }
    };
    let page = match store.list(&session_state::ListQuery::all()) {
        Ok(p) => p,
        Err(e) => {
            findings.push(unavailable(state_err(e)));
            return Ok(0);
        }
    };
    let listed: std::collections::BTreeSet<String> = page
        .entries
        .iter()
        .map(|e| e.summary.session_id.clone())
        .collect();
    let has_rows = page.entries.iter().any(|e| e.source == EntrySource::Db);
    orphan_findings(&ctx.root.path, &listed, has_rows, findings);
    // Rows `repair` rebuilt after state.db was lost, not saved since: a note, not a problem.
    // A damaged mark of ours is a problem: one finding per damaged column.
    for r in store.reconstructed_sessions().unwrap_or_default() {
        for c in &r.column_damage {
            findings.push(column_finding(&db, c));
        }
        if !r.row_unchanged {
            continue;
        }
        let file = store
            .messages_path(&r.session_id)
            .unwrap_or_else(|_| ctx.root.path.join("messages"));
        findings.push(Finding {
            file,
            id: Some(r.session_id.clone()),
            kind: "reconstructed_row".into(),
            problem: false,
            line: None,
            offset: None,
            message: format!(
                "state.db row rebuilt by `sessions repair` at {} from the message log ({} \
                 message(s)) and {} run log(s){}; the row's meta ({}) could not be recovered \
                 and is written again by the runtime's next save",
                r.reconstructed_at.as_str(),
                r.messages,
                r.run_files,
                if r.legacy_snapshot {
                    " and the legacy snapshot"
                } else {
                    ""
                },
                if r.legacy_snapshot {
                    "beyond the snapshot's"
                } else {
                    "resume context, to-dos, model override"
                },
            ),
        });
    }
    // Index rows of files that are not runs: nothing lists them, so their damage is found
    // here (the damage of listed run rows is `sessions runs`' and `reindex`'s business).
    for d in store.run_file_diagnostics().unwrap_or_default() {
        for c in &d.column_damage {
            findings.push(column_finding(&db, c));
        }
    }
    // Values of state.db rows: one finding per session and column, whether the listing or
    // a load found it.
    let mut column_seen: std::collections::BTreeSet<(String, &'static str, &'static str)> =
        std::collections::BTreeSet::new();
    for d in &page.diagnostics {
        match &d.column {
            Some(c) => {
                column_seen.insert((c.row.clone(), c.table, c.column));
                findings.push(column_finding(&d.path, c));
            }
            None => findings.push(Finding {
                file: d.path.clone(),
                id: None,
                kind: "unlistable_snapshot".into(),
                problem: true,
                line: None,
                offset: None,
                message: d.detail.clone(),
            }),
        }
    }
    let bar = Progress::new(
        ctx.progress,
        page.entries.len() as u64,
        "verifying sessions",
    );
    for entry in &page.entries {
        bar.inc();
        let id = entry.summary.session_id.clone();
        if entry.source == EntrySource::Legacy {
            let file = store
                .legacy_path(&id)
                .unwrap_or_else(|_| ctx.root.path.join("state"));
            findings.push(Finding {
                file,
                id: Some(id),
                kind: "legacy_not_migrated".into(),
                problem: false,
                line: None,
                offset: None,
                message: "legacy snapshot without a state.db row; `sessions repair` migrates it"
                    .into(),
            });
            continue;
        }
        // A row whose id is not a safe file name (not UTF-8, decoded with U+FFFD) has no
        // messages file to load; its column finding says so.
        if !session_schema::is_safe_id(&id) {
            continue;
        }
        let messages = store
            .messages_path(&id)
            .unwrap_or_else(|_| ctx.root.path.join("messages"));
        let loaded = match store.load(&id) {
            Ok(Some(l)) => l,
            Ok(None) => continue,
            Err(e) => {
                findings.push(Finding {
                    file: messages,
                    id: Some(id),
                    kind: "unloadable_session".into(),
                    problem: true,
                    line: None,
                    offset: None,
                    message: one_line(&e),
                });
                continue;
            }
        };
        if matches!(loaded.source, LoadSource::Legacy { .. }) {
            continue;
        }
        for d in &loaded.damage {
            if let MessageDamageKind::Column(c) = &d.kind {
                if column_seen.insert((c.row.clone(), c.table, c.column)) {
                    findings.push(column_finding(&d.path, c));
                }
                continue;
            }
            let (kind, problem) = match &d.kind {
                MessageDamageKind::TornTail => ("torn_tail", true),
                MessageDamageKind::Corrupt => ("corrupt_line", true),
                MessageDamageKind::NotObject => ("not_object", true),
                MessageDamageKind::MissingRole => ("missing_role", true),
                MessageDamageKind::Shape => ("schema_mismatch", true),
                MessageDamageKind::CountMismatch { .. } => ("message_count_mismatch", true),
                MessageDamageKind::FileChanged => ("messages_file_changed", true),
                MessageDamageKind::NotRegularFile { .. } => ("not_regular_file", true),
                MessageDamageKind::TooLarge { .. } => ("too_large", true),
                _ => ("message_damage", true),
            };
            findings.push(Finding {
                file: d.path.clone(),
                id: Some(id.clone()),
                kind: kind.into(),
                problem,
                line: d.line,
                offset: Some(d.byte_offset),
                message: d.detail.clone(),
            });
        }
    }
    bar.finish();
    Ok(page.entries.len())
}

/// The `verify` finding for a value of a `state.db` row that is not what its column should
/// hold.
fn column_finding(db: &std::path::Path, c: &session_state::ColumnDamage) -> Finding {
    Finding {
        file: db.to_path_buf(),
        id: matches!(
            c.table,
            "session_state" | "session_files" | "session_reconstructed"
        )
        .then(|| c.row.clone()),
        kind: "column_damage".into(),
        problem: true,
        line: None,
        offset: None,
        message: c.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnostic_kinds_are_snake_case_spellings_of_session_replay_kinds() {
        let all = [
            DiagnosticKind::MissingResponse,
            DiagnosticKind::OrphanResponse,
            DiagnosticKind::DuplicateSeq,
            DiagnosticKind::SeqNotIncreasing,
            DiagnosticKind::OverInclusiveSnapshot,
            DiagnosticKind::SnapshotDivergence,
            DiagnosticKind::SnapshotReset,
            DiagnosticKind::Undecodable,
            DiagnosticKind::NoRunEnd,
            DiagnosticKind::TornTail,
            DiagnosticKind::SkippedLine,
            DiagnosticKind::HeaderProblem,
            DiagnosticKind::ForeignRecord,
            DiagnosticKind::NoSuchInvocation,
            DiagnosticKind::EmptyRun,
            DiagnosticKind::RepairedLine,
            DiagnosticKind::UnreadableRun,
            DiagnosticKind::RebuiltToolResult,
        ];
        for k in all {
            let name = diagnostic_kind_name(k);
            assert_eq!(name, k.as_str().replace('-', "_"));
            assert!(
                name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{name}"
            );
        }
        assert_eq!(
            diagnostic_kind_name(DiagnosticKind::OverInclusiveSnapshot),
            "over_inclusive_snapshot"
        );
    }

    #[test]
    fn over_inclusive_snapshots_are_notes_with_the_corrected_hint_and_other_warnings_problems() {
        let (problem, msg) = grade(
            DiagnosticKind::OverInclusiveSnapshot,
            Severity::Warning,
            "snapshot holds its own response".into(),
            Some("r1"),
        );
        assert!(!problem);
        assert!(
            msg.starts_with("snapshot holds its own response; "),
            "{msg}"
        );
        assert!(
            msg.contains("sessions replay r1 --seq N --corrected"),
            "{msg}"
        );
        for kind in [
            DiagnosticKind::SnapshotDivergence,
            DiagnosticKind::DuplicateSeq,
            DiagnosticKind::OrphanResponse,
        ] {
            let (problem, msg) = grade(kind, Severity::Warning, "m".into(), None);
            assert!(problem, "{kind:?}");
            assert_eq!(msg, "m");
        }
        let (problem, _) = grade(DiagnosticKind::NoRunEnd, Severity::Note, "m".into(), None);
        assert!(!problem);
    }
}

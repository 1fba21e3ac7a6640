//! The checks fed one item at a time ([`RunChecker`], [`InvocationPairing`],
//! [`SnapshotCheck`], [`RunStructureCheck`]) find exactly what the whole-run checks found
//! before they became wrappers over them: the same diagnostics in the same order, the same
//! snapshot report, the same run meta, and the positions of the records they name. The
//! functions as they were are kept here, and only here, as the reference: on every run log of
//! the workspace's test data (recorded reference runs, the sample store, the damaged logs of
//! session-jsonl and session-replay), on those logs cut at many offsets, and on generated runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::value::RawValue;
use session_replay::{
    Diagnostic, DiagnosticKind, RunCheckReport, RunChecker, RunMeta, RunRead, Severity,
    SnapshotReport, check_snapshots, invocations, verify_run,
};
use session_schema::{
    AgentEvent, BaseMessage, Damage, DamageKind, Item, Record, parse_record, surrogate,
};

/// The functions as they were before the checks were fed item by item.
mod old {
    use super::*;
    use session_replay::{Divergence, OverInclusive, SkipKind, skipped_lines};

    fn diag(kind: DiagnosticKind, severity: Severity, message: String) -> Diagnostic {
        Diagnostic {
            kind,
            severity,
            run_id: None,
            record: None,
            message,
        }
    }

    fn warning(kind: DiagnosticKind, message: impl Into<String>) -> Diagnostic {
        diag(kind, Severity::Warning, message.into())
    }

    fn note(kind: DiagnosticKind, message: impl Into<String>) -> Diagnostic {
        diag(kind, Severity::Note, message.into())
    }

    trait At {
        fn at(self, i: usize) -> Self;
        fn in_run(self, run: Option<&str>) -> Self;
    }

    impl At for Diagnostic {
        fn at(mut self, i: usize) -> Self {
            self.record = Some(i);
            self
        }
        fn in_run(mut self, run: Option<&str>) -> Self {
            self.run_id = run.map(str::to_owned);
            self
        }
    }

    pub(super) fn from_records<R: AsRef<Record>>(records: &[R]) -> Option<RunMeta> {
        let run_start_session = || {
            records.iter().find_map(|r| match r.as_ref() {
                Record::RunStart(s) => s.session_id.clone(),
                _ => None,
            })
        };
        if let Some(Record::Header(h)) = records.first().map(AsRef::as_ref) {
            return Some(RunMeta {
                run_id: h.run_id.clone(),
                session_id: h.session_id.clone().or_else(run_start_session),
                started_at: h.started_at.clone(),
            });
        }
        let first = records
            .iter()
            .map(AsRef::as_ref)
            .find(|r| r.run_id().is_some())?;
        Some(RunMeta {
            run_id: first.run_id().unwrap_or_default().to_owned(),
            session_id: run_start_session(),
            started_at: first.ts().cloned().unwrap_or_default(),
        })
    }

    pub(super) fn meta_of(run: &RunRead) -> RunMeta {
        from_records(&run.records).unwrap_or_else(|| RunMeta {
            run_id: run
                .path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(session_schema::parse_run_file_name)
                .map(|(id, _)| id.to_owned())
                .unwrap_or_default(),
            ..RunMeta::default()
        })
    }

    pub(super) fn verify_run(run: &RunRead) -> Vec<Diagnostic> {
        let mut diags = Vec::new();
        let meta = meta_of(run);
        let run_id = (!meta.run_id.is_empty()).then_some(meta.run_id.as_str());
        if run.records.is_empty() {
            diags.push(
                warning(DiagnosticKind::EmptyRun, "the run log holds no record").in_run(run_id),
            );
        } else if !matches!(run.record(0), Some(Record::Header(_))) {
            diags.push(
                warning(
                    DiagnosticKind::HeaderProblem,
                    "the first record is not a header; the reference's readers do not see this run",
                )
                .at(0)
                .in_run(run_id),
            );
        }
        for (i, r) in run.record_values().enumerate() {
            if i > 0 && matches!(r, Record::Header(_)) {
                diags.push(
                    warning(DiagnosticKind::HeaderProblem, "a second header record")
                        .at(i)
                        .in_run(run_id),
                );
            }
            if let (Some(own), Some(other)) = (run_id, r.run_id())
                && own != other
            {
                diags.push(
                    warning(
                        DiagnosticKind::ForeignRecord,
                        format!("{} record belongs to run {other}", r.kind()),
                    )
                    .at(i)
                    .in_run(run_id),
                );
            }
        }
        for s in &skipped_lines(run) {
            let d = match s.kind {
                SkipKind::TornTail => note(
                    DiagnosticKind::TornTail,
                    format!(
                        "line {} (byte offset {}) is cut short",
                        s.line, s.byte_offset
                    ),
                ),
                kind => warning(
                    DiagnosticKind::SkippedLine,
                    format!(
                        "line {} (byte offset {}) was skipped ({})",
                        s.line,
                        s.byte_offset,
                        kind.as_str()
                    ),
                ),
            };
            diags.push(d.in_run(run_id));
        }
        if !run.records.is_empty() && !run.has_run_end() {
            diags.push(
                note(
                    DiagnosticKind::NoRunEnd,
                    "the run has no run.end record (crashed or still running)",
                )
                .in_run(run_id),
            );
        }
        for d in &run.damage {
            if matches!(
                d.kind,
                DamageKind::InvalidUtf8
                    | DamageKind::LoneSurrogate
                    | DamageKind::NewerSchemaVersion
                    | DamageKind::UnknownSchemaVersion
            ) {
                diags.push(
                    note(
                        DiagnosticKind::RepairedLine,
                        format!("line {} (byte offset {}): {}", d.line, d.offset, d.message),
                    )
                    .in_run(Some(meta.run_id.as_str())),
                );
            }
        }
        diags
    }

    /// The diagnostics of `invocations` as it was.
    pub(super) fn invocation_diags<R: AsRef<Record>>(records: &[R]) -> Vec<Diagnostic> {
        // (seq, request record, run id of the request, answered)
        let mut out: Vec<(i64, Option<usize>, String, bool)> = Vec::new();
        let mut diags = Vec::new();
        let mut by_seq: BTreeMap<i64, usize> = BTreeMap::new();
        let mut last_request_seq: Option<i64> = None;
        for (i, record) in records.iter().map(AsRef::as_ref).enumerate() {
            match record {
                Record::LlmRequest(q) => {
                    if by_seq.contains_key(&q.seq) {
                        diags.push(
                            warning(
                                DiagnosticKind::DuplicateSeq,
                                format!("llm.request seq {} appears more than once", q.seq),
                            )
                            .at(i)
                            .in_run(Some(&q.run_id)),
                        );
                    } else if let Some(prev) = last_request_seq.filter(|p| q.seq <= *p) {
                        diags.push(
                            warning(
                                DiagnosticKind::SeqNotIncreasing,
                                format!("llm.request seq {} follows seq {prev}", q.seq),
                            )
                            .at(i)
                            .in_run(Some(&q.run_id)),
                        );
                    }
                    last_request_seq = Some(q.seq);
                    by_seq.insert(q.seq, out.len());
                    out.push((q.seq, Some(i), q.run_id.clone(), false));
                }
                Record::LlmResponse(r) => match by_seq.get(&r.seq).copied() {
                    Some(k) if !out[k].3 => out[k].3 = true,
                    Some(_) => diags.push(
                        warning(
                            DiagnosticKind::DuplicateSeq,
                            format!("a second llm.response for seq {}", r.seq),
                        )
                        .at(i)
                        .in_run(Some(&r.run_id)),
                    ),
                    None => {
                        diags.push(
                            warning(
                                DiagnosticKind::OrphanResponse,
                                format!("llm.response seq {} has no llm.request before it", r.seq),
                            )
                            .at(i)
                            .in_run(Some(&r.run_id)),
                        );
                        by_seq.insert(r.seq, out.len());
                        out.push((r.seq, None, r.run_id.clone(), true));
                    }
                },
                _ => {}
            }
        }
        for (seq, request, run_id, answered) in &out {
            if !answered {
                diags.push(
                    note(
                        DiagnosticKind::MissingResponse,
                        format!("llm.request seq {seq} never got a response"),
                    )
                    .at(request.unwrap_or_default())
                    .in_run(Some(run_id)),
                );
            }
        }
        diags
    }

    fn split_array(raw: &str) -> Result<Vec<&RawValue>, serde_json::Error> {
        serde_json::from_str::<Vec<&RawValue>>(raw)
    }

    fn same_json(a: &RawValue, b: &RawValue) -> bool {
        if a.get() == b.get() {
            return true;
        }
        match (
            surrogate::decode::<serde_json::Value>(a.get()),
            surrogate::decode::<serde_json::Value>(b.get()),
        ) {
            (Ok((x, _)), Ok((y, _))) => x == y,
            _ => false,
        }
    }

    fn own_response_position_split(req: &[&RawValue], resp: &[&RawValue]) -> Option<OverInclusive> {
        if resp.is_empty() || req.len() < resp.len() {
            return None;
        }
        let call_ids: Vec<String> = resp
            .iter()
            .filter_map(|m| {
                surrogate::decode::<BaseMessage>(m.get())
                    .ok()
                    .map(|(m, _)| m)
            })
            .flat_map(|m| {
                m.tool_calls()
                    .iter()
                    .map(|c| c.id.clone())
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut start = req.len() - resp.len();
        loop {
            let block_matches = req[start..start + resp.len()]
                .iter()
                .zip(resp)
                .all(|(a, b)| same_json(a, b));
            if block_matches {
                return Some(OverInclusive {
                    own_response_at: start,
                    appended: req.len() - start,
                });
            }
            if start == 0 || call_ids.is_empty() {
                return None;
            }
            let last = req[start + resp.len() - 1];
            let answers = match surrogate::decode::<BaseMessage>(last.get()) {
                Ok((BaseMessage::Tool(t), _)) => call_ids.contains(&t.tool_call_id),
                _ => false,
            };
            if !answers {
                return None;
            }
            start -= 1;
        }
    }

    fn first_divergence(prev: &[&RawValue], current: &[&RawValue]) -> Option<usize> {
        let common = prev.len().min(current.len());
        (0..common)
            .find(|&k| !same_json(prev[k], current[k]))
            .or((current.len() < prev.len()).then_some(current.len()))
    }

    fn appended_elements(prev: &str, cur: &str) -> Option<String> {
        let body = prev.strip_suffix(']')?;
        if !body.starts_with('[') || !cur.starts_with('[') {
            return None;
        }
        if body == "[" {
            return Some(cur.to_owned());
        }
        if body.ends_with(|c: char| c.is_ascii_whitespace()) {
            return None;
        }
        let rest = cur.strip_prefix(body)?;
        if rest.starts_with(']') {
            Some("[]".to_owned())
        } else {
            rest.strip_prefix(',').map(|r| format!("[{r}"))
        }
    }

    fn divergence_message(d: &Divergence) -> String {
        if d.message_index >= d.len {
            format!(
                "llm.request seq {} (record {}) has {} message(s), fewer than the {} of seq {} \
                 (record {})",
                d.seq, d.record, d.len, d.previous_len, d.previous_seq, d.previous_record
            )
        } else {
            format!(
                "llm.request seq {} (record {}) message {} differs from message {} of seq {} \
                 (record {})",
                d.seq,
                d.record,
                d.message_index,
                d.message_index,
                d.previous_seq,
                d.previous_record
            )
        }
    }

    pub(super) fn check_snapshots<R: AsRef<Record>>(
        records: &[R],
    ) -> (SnapshotReport, Vec<Diagnostic>) {
        let mut report = SnapshotReport::default();
        let mut diags = Vec::new();
        let mut responses: BTreeMap<i64, usize> = BTreeMap::new();
        for (i, r) in records.iter().map(AsRef::as_ref).enumerate() {
            if let Record::LlmResponse(resp) = r {
                responses.entry(resp.seq).or_insert(i);
            }
        }
        let mut previous: Option<(i64, usize, &str, usize)> = None;
        let mut compacted = false;
        for (i, r) in records.iter().map(AsRef::as_ref).enumerate() {
            match r {
                Record::AgentEvent(e) => {
                    if let AgentEvent::CompactionComplete(c) = &e.event
                        && c.compacted == Some(true)
                    {
                        compacted = true;
                    }
                }
                Record::LlmRequest(q) => {
                    report.requests += 1;
                    let raw = q.input.messages.get();
                    let response = responses.get(&q.seq).filter(|ri| **ri > i).and_then(|ri| {
                        match records[*ri].as_ref() {
                            Record::LlmResponse(resp) => {
                                split_array(resp.output.messages.get()).ok()
                            }
                            _ => None,
                        }
                    });
                    let fast = previous.and_then(|(_, _, prev_raw, prev_len)| {
                        let appended = appended_elements(prev_raw, raw)?;
                        let new = split_array(&appended).ok()?;
                        let own = match &response {
                            Some(resp) if new.len() >= resp.len() => {
                                Some(own_response_position_split(&new, resp).map(|o| {
                                    OverInclusive {
                                        own_response_at: o.own_response_at + prev_len,
                                        appended: o.appended,
                                    }
                                }))
                            }
                            Some(_) => None,
                            None => Some(None),
                        }?;
                        Some((prev_len + new.len(), own))
                    });
                    let (len, own) = match fast {
                        Some((len, own)) => {
                            report.compared += 1;
                            (len, own)
                        }
                        None => {
                            let current = match split_array(raw) {
                                Ok(c) => c,
                                Err(e) => {
                                    diags.push(
                                        warning(
                                            DiagnosticKind::Undecodable,
                                            format!(
                                                "messages of llm.request seq {} are not an array: {e}",
                                                q.seq
                                            ),
                                        )
                                        .at(i)
                                        .in_run(Some(&q.run_id)),
                                    );
                                    previous = None;
                                    continue;
                                }
                            };
                            if let Some((pseq, pidx, prev_raw, _)) = previous {
                                report.compared += 1;
                                let prev = split_array(prev_raw).unwrap_or_default();
                                let d = first_divergence(&prev, &current).map(|k| Divergence {
                                    seq: q.seq,
                                    record: i,
                                    previous_seq: pseq,
                                    previous_record: pidx,
                                    message_index: k,
                                    previous_len: prev.len(),
                                    len: current.len(),
                                });
                                match d {
                                    Some(_) if compacted => {
                                        report.resets_after_compaction.push(q.seq);
                                        diags.push(
                                            note(
                                                DiagnosticKind::SnapshotReset,
                                                format!(
                                                    "llm.request seq {} starts a new history after \
                                                     compaction",
                                                    q.seq
                                                ),
                                            )
                                            .at(i)
                                            .in_run(Some(&q.run_id)),
                                        );
                                    }
                                    Some(d) => {
                                        diags.push(
                                            warning(
                                                DiagnosticKind::SnapshotDivergence,
                                                divergence_message(&d),
                                            )
                                            .at(i)
                                            .in_run(Some(&q.run_id)),
                                        );
                                        report.divergences.push(d);
                                    }
                                    None => {}
                                }
                            }
                            let own = response
                                .as_ref()
                                .and_then(|resp| own_response_position_split(&current, resp));
                            (current.len(), own)
                        }
                    };
                    if let Some(o) = own {
                        report.over_inclusive.push(q.seq);
                        diags.push(
                            warning(
                                DiagnosticKind::OverInclusiveSnapshot,
                                format!(
                                    "llm.request seq {} already holds its own response from \
                                     message {} on ({} appended message(s)); the prompt sent had \
                                     {} message(s)",
                                    q.seq, o.own_response_at, o.appended, o.own_response_at
                                ),
                            )
                            .at(i)
                            .in_run(Some(&q.run_id)),
                        );
                    }
                    compacted = false;
                    previous = Some((q.seq, i, raw, len));
                }
                _ => {}
            }
        }
        (report, diags)
    }
}

/// Feeds `items` to a [`RunChecker`] of `path`, one at a time.
fn stream(path: &Path, items: impl IntoIterator<Item = Item>) -> RunCheckReport {
    let mut checker = RunChecker::new(path.to_owned());
    for item in items {
        checker.push(&item);
    }
    checker.finish()
}

/// The items of `run` in file order (records and damage interleaved by offset, as a reader
/// yields them: a recovered record right after its report).
fn items_of(run: &RunRead) -> Vec<Item> {
    let mut items: Vec<(u64, u8, Item)> = Vec::new();
    for d in &run.damage {
        items.push((d.offset, 0, Item::Damage(d.clone())));
    }
    for r in &run.records {
        items.push((r.offset, 1, Item::Record(r.clone())));
    }
    items.sort_by_key(|(offset, order, _)| (*offset, *order));
    items.into_iter().map(|(_, _, i)| i).collect()
}

/// Everything the old functions say of `run`, compared with the streaming checks fed `items`
/// and with the whole-run wrappers; `what` names the case in failures.
fn assert_same(what: &str, run: &RunRead, items: Vec<Item>) {
    let report = stream(&run.path, items);
    let old_meta = old::meta_of(run);
    assert_eq!(report.meta, old_meta, "{what}: meta");
    assert_eq!(RunMeta::of(run), old_meta, "{what}: RunMeta::of");
    let old_structure = old::verify_run(run);
    assert_eq!(
        report.structure, old_structure,
        "{what}: verify_run (streamed)"
    );
    assert_eq!(verify_run(run), old_structure, "{what}: verify_run");
    let old_invocations = old::invocation_diags(&run.records);
    assert_eq!(
        report.invocations, old_invocations,
        "{what}: invocations (streamed)"
    );
    assert_eq!(
        invocations(&run.records).1,
        old_invocations,
        "{what}: invocations"
    );
    let (old_report, old_snapshots) = old::check_snapshots(&run.records);
    assert_eq!(
        report.snapshots, old_snapshots,
        "{what}: snapshots (streamed)"
    );
    assert_eq!(
        report.snapshot_report, old_report,
        "{what}: snapshot report (streamed)"
    );
    assert_eq!(
        check_snapshots(&run.records),
        (old_report, old_snapshots),
        "{what}: check_snapshots"
    );
    assert_eq!(report.records, run.records.len(), "{what}: records");
    // Every record a finding names has its position.
    for d in report
        .structure
        .iter()
        .chain(&report.invocations)
        .chain(&report.snapshots)
    {
        if let Some(i) = d.record {
            let r = &run.records[i];
            assert_eq!(report.position(i), Some((r.line, r.offset)), "{what}: {d}");
        }
    }
}

/// Every run log of the workspace's test data.
fn run_files() -> Vec<PathBuf> {
    let root = session_test_support::workspace_root();
    let mut out = Vec::new();
    for dir in [
        root.join("crates/session-jsonl/test_data"),
        root.join("crates/session-replay/test_data"),
        session_test_support::sample_sessions_dir(),
        session_test_support::codelia_sessions_dir(),
    ] {
        walk(&dir, &mut out);
    }
    out.retain(|p| {
        let name = p.file_name().unwrap().to_string_lossy();
        (name.ends_with(".jsonl") || name.ends_with(".jsonl.zst"))
            && !p.components().any(|c| c.as_os_str() == "messages")
    });
    out.sort();
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn every_test_run_log_streamed_gives_what_the_whole_run_checks_gave() {
    let files = run_files();
    assert!(files.len() > 60, "{} run logs", files.len());
    let mut findings = 0;
    let mut kinds = std::collections::BTreeSet::new();
    for path in &files {
        let run = session_jsonl::read_run(path).unwrap();
        let reader = session_jsonl::Reader::open(path).unwrap();
        let items: Vec<Item> = reader.map(Result::unwrap).collect();
        assert_same(&path.display().to_string(), &run, items);
        let report = stream(path, items_of(&run));
        for d in report
            .structure
            .iter()
            .chain(&report.invocations)
            .chain(&report.snapshots)
        {
            findings += 1;
            kinds.insert(d.kind);
        }
    }
    // The data exercises the checks: each kind below is found somewhere.
    for kind in [
        DiagnosticKind::MissingResponse,
        DiagnosticKind::OverInclusiveSnapshot,
        DiagnosticKind::SnapshotDivergence,
        DiagnosticKind::SnapshotReset,
        DiagnosticKind::DuplicateSeq,
        DiagnosticKind::NoRunEnd,
        DiagnosticKind::TornTail,
        DiagnosticKind::SkippedLine,
        DiagnosticKind::HeaderProblem,
        DiagnosticKind::RepairedLine,
        DiagnosticKind::EmptyRun,
    ] {
        assert!(kinds.contains(&kind), "no {kind:?} in {findings} findings");
    }
}

#[test]
fn run_logs_cut_at_many_offsets_stream_to_the_same_findings() {
    for path in run_files()
        .iter()
        .filter(|p| !p.to_string_lossy().ends_with(".zst"))
    {
        let bytes = std::fs::read(path).unwrap();
        let step = (bytes.len() / 40).max(1);
        for cut in (0..bytes.len()).step_by(step) {
            let mut reader =
                session_jsonl::Reader::new(&bytes[..cut], session_jsonl::ReaderOptions::default());
            let run = RunRead::from_reader(path.clone(), &mut reader).unwrap();
            let items = items_of(&run);
            assert_same(&format!("{} cut at {cut}", path.display()), &run, items);
        }
    }
}

const SYS: &str = r#"{"role":"system","content":"s"}"#;
const USER: &str = r#"{"role":"user","content":"q"}"#;
const CALL: &str = r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{}"}}]}"#;
const RESULT: &str = r#"{"role":"tool","tool_call_id":"c1","tool_name":"read","content":"x"}"#;
const OK: &str = r#"{"role":"assistant","content":"ok"}"#;
const SPACED: &str = r#"{ "role": "user", "content": "q" }"#;
const ALPHABET: &[&str] = &[SYS, USER, CALL, RESULT, OK, SPACED];

fn record(line: &str) -> Record {
    parse_record(line.as_bytes()).unwrap().value
}

/// One generated record: `kind` picks the type, `seq` its seq, `msgs` its messages.
fn generated(kind: u8, seq: i64, msgs: &[usize], run: &str) -> Record {
    let arr = || {
        let items: Vec<&str> = msgs.iter().map(|k| ALPHABET[*k % ALPHABET.len()]).collect();
        format!("[{}]", items.join(","))
    };
    let ts = "2026-01-01T00:00:00.000Z";
    match kind {
        0..=3 => record(&format!(
            r#"{{"type":"llm.request","run_id":"{run}","ts":"{ts}","seq":{seq},"input":{{"messages":{},"tools":null,"tool_choice":null}}}}"#,
            if kind == 3 {
                "{\"not\":\"an array\"}".to_owned()
            } else {
                arr()
            }
        )),
        4..=6 => record(&format!(
            r#"{{"type":"llm.response","run_id":"{run}","ts":"{ts}","seq":{seq},"output":{{"messages":{},"usage":null,"stop_reason":null,"provider_meta":null}}}}"#,
            arr()
        )),
        7 => record(&format!(
            r#"{{"type":"agent.event","run_id":"{run}","ts":"{ts}","seq":{seq},"event":{{"type":"compaction_complete","timestamp":1770365103000,"compacted":true}}}}"#
        )),
        8 => record(&format!(
            r#"{{"type":"header","schema_version":1,"run_id":"{run}","started_at":"{ts}"}}"#
        )),
        9 => record(&format!(
            r#"{{"type":"run.start","run_id":"{run}","session_id":"s{seq}","ts":"{ts}","input":{{"type":"text","text":"hi"}}}}"#
        )),
        _ => record(&format!(
            r#"{{"type":"run.end","run_id":"{run}","ts":"{ts}","outcome":"completed"}}"#
        )),
    }
}

proptest::proptest! {
    /// Generated runs (duplicate and decreasing seqs, orphan and late responses, compactions,
    /// snapshots that diverge or hold their own response, foreign records, damage between
    /// records) stream to exactly the old findings.
    #[test]
    fn generated_runs_stream_to_the_same_findings(
        header in proptest::bool::ANY,
        steps in proptest::collection::vec(
            (0u8..12, 1i64..5, proptest::collection::vec(0usize..6, 0..5), 0u8..8),
            0..24,
        ),
        damage_at in proptest::collection::vec((0usize..24, 0u8..4), 0..4),
    ) {
        let mut records = Vec::new();
        if header {
            records.push(generated(8, 0, &[], "r1"));
        }
        // Snapshots mostly grow: each request extends the previous one's messages.
        let mut history: Vec<usize> = Vec::new();
        for (kind, seq, msgs, foreign) in &steps {
            let run = if *foreign == 0 { "r2" } else { "r1" };
            let msgs = if *kind <= 2 && *foreign > 2 {
                history.extend(msgs.iter().copied());
                history.clone()
            } else {
                msgs.clone()
            };
            records.push(generated(*kind, *seq, &msgs, run));
        }
        let mut run = RunRead::from_records(records);
        run.path = PathBuf::from("/s/2026/01/01/named.jsonl");
        let kinds = [
            DamageKind::CorruptLine,
            DamageKind::TornTail,
            DamageKind::InvalidUtf8,
            DamageKind::SchemaMismatch,
        ];
        for (at, kind) in damage_at {
            let offset = run.records.get(at).map_or(run.bytes, |r| r.offset);
            run.damage.push(Damage {
                kind: kinds[usize::from(kind)],
                offset,
                line: 0,
                len: 0,
                message: "generated".into(),
                raw: None,
                excerpt: None,
            });
        }
        run.damage.sort_by_key(|d| d.offset);
        let items = items_of(&run);
        assert_same("generated", &run, items);
    }
}

//! Cases of the run catalogue: byte-exactness, offsets, damage, incomplete lines, length
//! conflicts, retries, concurrency, stat, listing.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use session_jsonl::{DamageKind, RunEndState};

use super::data::{
    RunSpec, backend_items, damaged_lines, file_level_runs, line, put_run, read_from,
    reference_items,
};
use super::{Check, Fail, Harness, ensure, ensure_eq};
use crate::RunCatalogue;
use crate::error::StorageError;
use crate::types::{Extent, LinePosition, Outcome, PageCursor, RunListQuery, RunSummary};

/// The byte strings of the byte-exactness case, one append each.
fn tricky_chunks() -> Vec<Vec<u8>> {
    let header = line(
        r#"{"type":"header","schema_version":1,"run_id":"exact","started_at":"2026-02-03T12:00:00.000Z"}"#,
    );
    let mut bom_first = b"\xef\xbb\xbf".to_vec();
    bom_first.extend_from_slice(&header);
    let mut nul_run = vec![0u8; 4096];
    nul_run.extend_from_slice(b"{\"type\":\"run.status\"}\n");
    let invalid_utf8 = b"{\"text\":\"\xff\xfe\xfd \xc3\x28 \xed\xa0\x80 \xf0\x90\x80\"}\n".to_vec();
    let lone = br#"{"type":"run.status","message":"\ud83d alone, \udc00 too, pair \ud83d\ude00"}"#;
    let mut lone_surrogates = lone.to_vec();
    lone_surrogates.push(b'\n');
    let crlf = b"{\"a\":1}\r\n{\"b\":2}\r\n\r\n".to_vec();
    let glued = b"{\"a\":1}{\"b\":2}[3]\"four\"\n".to_vec();
    let mut long = b"{\"type\":\"llm.response\",\"blob\":\"".to_vec();
    long.extend(std::iter::repeat_n(b'x', (2 << 20) + 17));
    long.extend_from_slice(b"\"}\n");
    let mut control = (0u8..=255).filter(|b| *b != b'\n').collect::<Vec<u8>>();
    control.push(b'\n');
    vec![
        bom_first,
        nul_run,
        [invalid_utf8, lone_surrogates].concat(),
        crlf,
        glued,
        long,
        control,
        b"\n\n".to_vec(),
    ]
}

pub(crate) fn append_read_byte_exact<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    let chunks = tricky_chunks();
    let mut all = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let done = b.append_lines("exact", all.len() as u64, chunk)?;
        ensure_eq!(done.offset, all.len() as u64, "offset of chunk {i}");
        ensure_eq!(
            done.end,
            (all.len() + chunk.len()) as u64,
            "end of chunk {i}"
        );
        ensure_eq!(
            done.committed_len,
            done.end,
            "committed length after chunk {i}"
        );
        ensure_eq!(done.already_present, 0, "chunk {i} is a fresh append");
        all.extend_from_slice(chunk);
    }
    let committed = b.read_all("exact", Extent::Committed)?;
    ensure!(
        committed == all,
        "committed bytes differ from the appended ones (got {} bytes, want {}; first difference at {:?})",
        committed.len(),
        all.len(),
        committed.iter().zip(&all).position(|(a, b)| a != b)
    );
    let with_tail = b.read_all("exact", Extent::WithTornTail)?;
    ensure!(
        with_tail == all,
        "bytes with torn tail differ from the appended ones"
    );
    let stat = b
        .stat_run("exact")?
        .ok_or_else(|| Fail::Failed("stat found no run".into()))?;
    ensure_eq!(stat.len, all.len() as u64, "stat length");
    ensure_eq!(
        stat.lines,
        memchr::memchr_iter(b'\n', &all).count() as u64,
        "stat line count"
    );
    ensure_eq!(stat.torn_tail, 0, "torn tail bytes");
    Ok(())
}

pub(crate) fn reads_from_any_offset<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    let spec = RunSpec::new("offsets", "2026-02-03T12:00:00.000Z").session("s1");
    let mut all = spec.header();
    b.append_lines("offsets", 0, &all)?;
    for l in spec.body() {
        b.append_lines("offsets", all.len() as u64, &l)?;
        all.extend_from_slice(&l);
    }
    let len = all.len() as u64;
    let line_starts: Vec<u64> = std::iter::once(0)
        .chain(memchr::memchr_iter(b'\n', &all).map(|i| i as u64 + 1))
        .collect();
    let mut offsets: BTreeSet<u64> = line_starts.iter().copied().collect();
    offsets.extend([1, 7, len / 2, len - 1, len]);
    for &from in &offsets {
        for extent in [Extent::Committed, Extent::WithTornTail] {
            let bytes = b.read_bytes("offsets", from, extent)?;
            ensure_eq!(
                (bytes.start(), bytes.end()),
                (from, len),
                "snapshot bounds from {from} ({extent:?})"
            );
            let got = read_from(&b, "offsets", from, extent)?;
            ensure!(
                got.as_slice() == &all[from as usize..],
                "read from {from} ({extent:?}) is not the suffix of the run"
            );
        }
    }
    match b.read_bytes("offsets", len + 1, Extent::Committed) {
        Err(StorageError::OffsetOutOfRange {
            run_id,
            offset,
            len: l,
        }) => ensure_eq!(
            (run_id.as_str(), offset, l),
            ("offsets", len + 1, len),
            "out-of-range error"
        ),
        other => ensure!(false, "read past the end gave {other:?}"),
    }
    // Parsed reads from a line give the same items as the tail of a whole read.
    let whole = reference_items(&all, LinePosition::START)?;
    for (i, &start) in line_starts.iter().enumerate() {
        let pos = LinePosition {
            offset: start,
            line: i as u64 + 1,
        };
        let got = backend_items(&b, "offsets", pos)?;
        let want = reference_items(&all, pos)?;
        ensure_eq!(got, want, "items from line {}", i + 1);
        if i > 0 {
            let tail: Vec<&String> = whole.iter().skip(i).collect();
            let got_refs: Vec<&String> = got.iter().collect();
            ensure_eq!(
                got_refs,
                tail,
                "items from line {} against a whole read",
                i + 1
            );
        }
    }
    // A read is a snapshot: lines appended after it was opened are not part of it.
    let mut open_read = b.read_bytes("offsets", 0, Extent::Committed)?;
    let more = line(
        r#"{"type":"run.status","run_id":"offsets","ts":"2026-02-03T12:00:09.000Z","status":"running"}"#,
    );
    b.append_lines("offsets", len, &more)?;
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut open_read, &mut got)?;
    ensure!(
        got == all,
        "a read opened before an append saw {} bytes, want {}",
        got.len(),
        all.len()
    );
    Ok(())
}

pub(crate) fn damage_is_kept_and_flagged<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    let mut all = Vec::new();
    for (what, bytes) in damaged_lines("damaged") {
        let done = b.append_lines("damaged", all.len() as u64, &bytes)?;
        ensure_eq!(
            done.end,
            (all.len() + bytes.len()) as u64,
            "append of the {what}"
        );
        all.extend_from_slice(&bytes);
    }
    let stored = b.read_all("damaged", Extent::WithTornTail)?;
    ensure!(stored == all, "damaged lines were not stored byte for byte");
    let got = backend_items(&b, "damaged", LinePosition::START)?;
    let want = reference_items(&all, LinePosition::START)?;
    ensure_eq!(got, want, "items of the damaged run");
    let parsed = b.read_run("damaged")?;
    let kinds: BTreeSet<&str> = parsed.damage.iter().map(|d| d.kind.as_str()).collect();
    for kind in [
        DamageKind::CorruptLine,
        DamageKind::SchemaMismatch,
        DamageKind::NulRun,
        DamageKind::InvalidUtf8,
        DamageKind::LoneSurrogate,
        DamageKind::DuplicateHeader,
    ] {
        ensure!(
            kinds.contains(kind.as_str()),
            "no {kind} report in {kinds:?}"
        );
    }
    let lost = parsed
        .damage
        .iter()
        .filter(|d| !d.kind.record_recovered())
        .count() as u64;
    let mut files = vec![(
        "damaged".to_owned(),
        lost,
        parsed.records.len() as u64,
        true,
    )];
    for (what, suffix, bytes) in file_level_runs() {
        let id = format!("file-{suffix}");
        b.append_lines(&id, 0, &bytes)?;
        ensure!(
            b.read_all(&id, Extent::Committed)? == bytes,
            "run with {what} not stored byte for byte"
        );
        let got = backend_items(&b, &id, LinePosition::START)?;
        let want = reference_items(&bytes, LinePosition::START)?;
        ensure_eq!(got, want, "items of the run with {what}");
        let parsed = b.read_run(&id)?;
        let lost = parsed
            .damage
            .iter()
            .filter(|d| !d.kind.record_recovered())
            .count() as u64;
        // A file whose first record is no header is no run (format: "Files that are no runs").
        let is_run = parsed
            .records
            .first()
            .is_some_and(|r| matches!(r.parsed.value, session_schema::Record::Header(_)));
        files.push((id, lost, parsed.records.len() as u64, is_run));
    }
    // Damaged runs are listed, never left out, with their damage counted; files without a
    // header are kept byte for byte but never listed as runs.
    let page = b.list_runs(&RunListQuery::default())?;
    for (id, lost, records, is_run) in files {
        if !is_run {
            ensure!(
                page.runs.iter().all(|r| r.run_id != id),
                "{id} has no header and is listed as a run"
            );
            continue;
        }
        let row = page
            .runs
            .iter()
            .find(|r| r.run_id == id)
            .ok_or_else(|| Fail::Failed(format!("damaged run {id} is not listed")))?;
        ensure_eq!(row.damage_count, lost, "damage count of {id}");
        ensure_eq!(row.record_count, records, "record count of {id}");
    }
    Ok(())
}

pub(crate) fn incomplete_lines_are_refused<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    for (bytes, offset, len) in [(&b"abc"[..], 0, 3), (b"a\nbc", 2, 2)] {
        match b.append_lines("torn", 0, bytes) {
            Err(StorageError::IncompleteLine {
                run_id,
                offset: o,
                len: l,
            }) => ensure_eq!(
                (run_id.as_str(), o, l),
                ("torn", offset, len),
                "incomplete line error for {bytes:?}"
            ),
            other => ensure!(false, "append of {bytes:?} gave {other:?}"),
        }
    }
    ensure!(
        b.stat_run("torn")?.is_none(),
        "a refused append created the run"
    );
    let header = RunSpec::new("torn", "2026-02-03T12:00:00.000Z").header();
    b.append_lines("torn", 0, &header)?;
    let n = header.len() as u64;
    match b.append_lines("torn", n, b"{\"type\":\"run.end\"") {
        Err(StorageError::IncompleteLine { offset, len, .. }) => {
            ensure_eq!(
                (offset, len),
                (n, 17),
                "incomplete line error after the header"
            )
        }
        other => ensure!(false, "append of a torn line gave {other:?}"),
    }
    ensure!(
        b.read_all("torn", Extent::WithTornTail)? == header,
        "a refused torn line was stored"
    );
    let stat = b
        .stat_run("torn")?
        .ok_or_else(|| Fail::Failed("no run after its header".into()))?;
    ensure_eq!(
        (stat.len, stat.lines, stat.torn_tail),
        (n, 1, 0),
        "stat after a refused line"
    );
    // An empty append checks the length and writes nothing.
    let done = b.append_lines("torn", n, b"")?;
    ensure_eq!(
        (
            done.offset,
            done.end,
            done.committed_len,
            done.already_present
        ),
        (n, n, n, 0),
        "empty append at the committed length"
    );
    for wrong in [0, n - 1, n + 1] {
        match b.append_lines("torn", wrong, b"") {
            Err(StorageError::LengthConflict {
                expected,
                committed,
                ..
            }) => ensure_eq!((expected, committed), (wrong, n), "empty append at {wrong}"),
            other => ensure!(false, "empty append at {wrong} gave {other:?}"),
        }
    }
    ensure!(b.stat_run("never")?.is_none(), "unknown run exists");
    b.append_lines("never", 0, b"")?;
    ensure!(
        b.stat_run("never")?.is_none(),
        "an empty append created a run"
    );
    Ok(())
}

pub(crate) fn length_conflicts<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    let spec = RunSpec::new("cas", "2026-02-03T12:00:00.000Z");
    let header = spec.header();
    let body = spec.body();
    let n = header.len() as u64;
    b.append_lines("cas", 0, &header)?;
    let next = &body[0];
    for wrong in [0, 1, n - 1, n + 1, n + 1000] {
        let err = b.append_lines("cas", wrong, next).err();
        ensure!(
            err.as_ref().is_some_and(StorageError::is_conflict),
            "append at {wrong} gave {err:?}"
        );
        ensure_eq!(
            err.as_ref().and_then(StorageError::run_id),
            Some("cas"),
            "run of the conflict"
        );
        match err {
            Some(StorageError::LengthConflict {
                expected,
                committed,
                ..
            }) => ensure_eq!((expected, committed), (wrong, n), "conflict at {wrong}"),
            other => ensure!(false, "append at {wrong} gave {other:?}"),
        }
    }
    ensure!(
        b.read_all("cas", Extent::WithTornTail)? == header,
        "a refused append changed the run"
    );
    let done = b.append_lines("cas", n, next)?;
    ensure_eq!(
        done.committed_len,
        n + next.len() as u64,
        "length after the right append"
    );
    Ok(())
}

pub(crate) fn retries_are_recognised<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    let spec = RunSpec::new("retry", "2026-02-03T12:00:00.000Z");
    let body = spec.body();
    let a = [spec.header(), body[0].clone()].concat();
    let bb = body[1].clone();
    let c = body[2].clone();
    let (na, nb, nc) = (a.len() as u64, bb.len() as u64, c.len() as u64);
    let first = b.append_lines("retry", 0, &a)?;
    ensure_eq!(first.already_present, 0, "first append");
    let again = b.append_lines("retry", 0, &a)?;
    ensure!(again.was_retry(), "retry of the first append: {again:?}");
    ensure_eq!(
        (
            again.offset,
            again.end,
            again.committed_len,
            again.already_present
        ),
        (0, na, na, na),
        "retry of the first append"
    );
    b.append_lines("retry", na, &bb)?;
    let again = b.append_lines("retry", na, &bb)?;
    ensure_eq!(
        (
            again.offset,
            again.end,
            again.committed_len,
            again.already_present
        ),
        (na, na + nb, na + nb, nb),
        "retry of the second append"
    );
    // A retry of an older append, after later lines: acknowledged with the current length.
    let old = b.append_lines("retry", 0, &a)?;
    ensure_eq!(
        (old.end, old.committed_len, old.already_present),
        (na, na + nb, na),
        "late retry of the first append"
    );
    // A retry that carries more lines than the lost attempt had: only the rest is written.
    let merged = [bb.clone(), c.clone()].concat();
    let done = b.append_lines("retry", na, &merged)?;
    ensure_eq!(
        (
            done.offset,
            done.end,
            done.committed_len,
            done.already_present
        ),
        (na, na + nb + nc, na + nb + nc, nb),
        "retry completing a partly stored append"
    );
    ensure!(!done.was_retry(), "a completed append is not a pure retry");
    let want = [a.clone(), bb.clone(), c.clone()].concat();
    ensure!(
        b.read_all("retry", Extent::Committed)? == want,
        "run after retries is not each line once"
    );
    // Same offset, other bytes: a conflict, not a retry.
    let mut other = c.clone();
    if let Some(x) = other.iter_mut().find(|x| x.is_ascii_digit()) {
        *x = if *x == b'9' { b'8' } else { *x + 1 };
    }
    let changed_pair = [bb.clone(), other.clone()].concat();
    for (at, bytes, what) in [
        (na, changed_pair.as_slice(), "a changed second line"),
        (na + nb, other.as_slice(), "changed bytes"),
        (0, bb.as_slice(), "another line at 0"),
        (1, &a[1..], "the same bytes not at a line start"),
    ] {
        match b.append_lines("retry", at, bytes) {
            Err(StorageError::LengthConflict { committed, .. }) => {
                ensure_eq!(committed, na + nb + nc, "conflict for {what}")
            }
            other => ensure!(false, "append of {what} at {at} gave {other:?}"),
        }
    }
    ensure!(
        b.read_all("retry", Extent::Committed)? == want,
        "a refused retry changed the run"
    );
    Ok(())
}

pub(crate) fn missing_runs<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    ensure!(b.stat_run("ghost")?.is_none(), "stat of a missing run");
    for extent in [Extent::Committed, Extent::WithTornTail] {
        match b.read_bytes("ghost", 0, extent) {
            Err(StorageError::RunNotFound { run_id }) => {
                ensure_eq!(run_id.as_str(), "ghost", "run of the error")
            }
            other => ensure!(false, "read of a missing run gave {other:?}"),
        }
    }
    match b.read_run("ghost") {
        Err(StorageError::RunNotFound { .. }) => {}
        other => ensure!(false, "parsed read of a missing run gave {other:?}"),
    }
    match b.append_lines("ghost", 7, b"{}\n") {
        Err(StorageError::LengthConflict {
            expected,
            committed,
            ..
        }) => ensure_eq!(
            (expected, committed),
            (7, 0),
            "append to a missing run at 7"
        ),
        other => ensure!(false, "append to a missing run at 7 gave {other:?}"),
    }
    ensure!(
        b.stat_run("ghost")?.is_none(),
        "a refused append created the run"
    );
    ensure!(
        b.list_runs(&RunListQuery::default())?.runs.is_empty(),
        "a fresh store lists runs"
    );
    Ok(())
}

pub(crate) fn concurrent_appenders<H: Harness>(h: &H) -> Check {
    const THREADS: usize = 6;
    const LINES: usize = 8;
    let b = Arc::new(h.fresh()?);
    let second = h.second_client(&b)?.map(Arc::new);
    let header = RunSpec::new("race", "2026-02-03T12:00:00.000Z").header();
    b.append_lines("race", 0, &header)?;
    let results: Vec<Result<u64, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let client: &dyn RunCatalogue = match (&second, t % 2) {
                    (Some(c), 1) => c.as_ref(),
                    _ => b.as_ref(),
                };
                s.spawn(move || -> Result<u64, String> {
                    let mut conflicts = 0;
                    let mut expected = 0;
                    for i in 0..LINES {
                        let l = line(&format!(
                            r#"{{"type":"run.status","run_id":"race","ts":"2026-02-03T12:00:01.000Z","status":"running","message":"thread {t} line {i}"}}"#
                        ));
                        loop {
                            match client.append_lines("race", expected, &l) {
                                Ok(done) => {
                                    if done.already_present != 0 {
                                        return Err(format!(
                                            "thread {t} line {i} taken for a retry: {done:?}"
                                        ));
                                    }
                                    expected = done.committed_len;
                                    break;
                                }
                                Err(StorageError::LengthConflict { committed, .. }) => {
                                    conflicts += 1;
                                    expected = committed;
                                }
                                Err(e) => return Err(format!("thread {t}: {e}")),
                            }
                        }
                    }
                    Ok(conflicts)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|j| j.join().unwrap_or_else(|_| Err("appender panicked".into())))
            .collect()
    });
    for r in results {
        r.map_err(Fail::Failed)?;
    }
    let all = b.read_all("race", Extent::Committed)?;
    ensure!(all.starts_with(&header), "the header moved");
    let body = &all[header.len()..];
    let lines: Vec<&[u8]> = body
        .split(|c| *c == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    ensure_eq!(lines.len(), THREADS * LINES, "lines after the race");
    let distinct: BTreeSet<&[u8]> = lines.iter().copied().collect();
    ensure_eq!(
        distinct.len(),
        THREADS * LINES,
        "distinct lines after the race"
    );
    for l in &lines {
        ensure!(
            l.starts_with(br#"{"type":"run.status""#) && l.ends_with(b"\"}"),
            "an interleaved line: {}",
            String::from_utf8_lossy(l)
        );
    }
    Ok(())
}

pub(crate) fn stat_reports_facts<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    let mut spec = RunSpec::new("facts", "2026-02-03T12:00:00.000Z").session("s-facts");
    spec.outcome = None;
    let open = spec.lines();
    b.append_lines("facts", 0, &open)?;
    let stat = b
        .stat_run("facts")?
        .ok_or_else(|| Fail::Failed("no stat".into()))?;
    ensure_eq!(stat.run_id.as_str(), "facts", "run id");
    ensure_eq!(stat.len, open.len() as u64, "length");
    ensure_eq!(stat.lines, 5, "lines");
    ensure_eq!(
        stat.header.kind.as_deref(),
        Some("header"),
        "first line type"
    );
    ensure_eq!(stat.header.schema_version, Some(1), "schema version");
    ensure_eq!(
        stat.header.run_id.as_deref(),
        Some("facts"),
        "header run id"
    );
    ensure_eq!(
        stat.header.session_id.as_deref(),
        Some("s-facts"),
        "header session id"
    );
    ensure_eq!(
        stat.header.started_at.as_ref().map(|t| t.as_str()),
        Some("2026-02-03T12:00:00.000Z"),
        "header started_at"
    );
    ensure_eq!(stat.end, RunEndState::Open, "end of an open run");
    ensure_eq!(
        stat.last_type.as_deref(),
        Some("llm.response"),
        "last record type"
    );
    ensure!(!stat.archived, "a new run is not archived");
    let mut ended = spec.clone();
    ended.error = true;
    ended.outcome = Some("error".into());
    let tail: Vec<u8> = ended.body()[4..].concat();
    b.append_lines("facts", open.len() as u64, &tail)?;
    let stat = b
        .stat_run("facts")?
        .ok_or_else(|| Fail::Failed("no stat".into()))?;
    ensure_eq!(
        stat.len,
        (open.len() + tail.len()) as u64,
        "length after the end"
    );
    ensure_eq!(stat.lines, 8, "lines after the end");
    match &stat.end {
        RunEndState::Ended { outcome, error, .. } => {
            ensure_eq!(outcome.as_str(), "error", "outcome");
            ensure_eq!(
                error.as_ref().map(|e| e.message.as_str()),
                Some("overloaded"),
                "the run.error before the end"
            );
        }
        other => ensure!(false, "end of an ended run: {other:?}"),
    }
    ensure_eq!(
        stat.last_type.as_deref(),
        Some("run.end"),
        "last record type"
    );
    ensure_eq!(
        stat.last_ts.as_ref().map(|t| t.as_str().to_owned()),
        Some(ended.last_ts()),
        "last ts"
    );
    Ok(())
}

/// The runs of the filter case: `(id, spec)`, listing order newest first.
fn filter_runs() -> Vec<RunSpec> {
    let mut a = RunSpec::new("run-a", "2026-03-01T10:00:00.000Z").session("s1");
    a.ui_root = Some("/w/a".into());
    a.model = Some(("openai".into(), "gpt-x".into()));
    let mut b = RunSpec::new("run-b", "2026-03-02T10:00:00.000Z").session("s1");
    b.error = true;
    b.outcome = Some("error".into());
    b.cwd = Some("/w/b".into());
    let mut c = RunSpec::new("run-c", "2026-03-03T10:00:00.000Z").session("s2");
    c.outcome = Some("cancelled".into());
    c.ui_root = Some("/w/a/".into());
    c.cwd = Some("/w/b".into());
    let mut d = RunSpec::new("run-d", "2026-03-04T10:00:00.000+02:00").session("s2");
    d.outcome = None;
    let e = RunSpec::new("run-e", "not a time");
    let mut f = RunSpec::new("run-f", "2026-03-05T00:00:00.000Z").session("s3");
    f.outcome = Some("timeout".into());
    vec![f, d, c, b, a, e]
}

fn ids(runs: &[RunSummary]) -> Vec<&str> {
    runs.iter().map(|r| r.run_id.as_str()).collect()
}

fn query() -> RunListQuery {
    RunListQuery::default()
}

pub(crate) fn list_filters<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    let specs = filter_runs();
    // Created oldest first, the undated one in the middle: the order must not come from
    // creation.
    for i in [4, 5, 3, 2, 1, 0] {
        put_run(&b, &specs[i])?;
    }
    let cases: Vec<(&str, RunListQuery, Vec<&str>)> = vec![
        (
            "everything",
            query(),
            vec!["run-f", "run-d", "run-c", "run-b", "run-a", "run-e"],
        ),
        (
            "session s1",
            RunListQuery {
                session: Some("s1".into()),
                ..query()
            },
            vec!["run-b", "run-a"],
        ),
        (
            "since (inclusive)",
            RunListQuery {
                since: Some("2026-03-02T10:00:00.000Z".into()),
                ..query()
            },
            vec!["run-f", "run-d", "run-c", "run-b"],
        ),
        (
            "until (exclusive)",
            RunListQuery {
                until: Some("2026-03-03T10:00:00.000Z".into()),
                ..query()
            },
            vec!["run-b", "run-a"],
        ),
        (
            "since with an offset",
            RunListQuery {
                since: Some("2026-03-04T09:00:00+02:00".into()),
                ..query()
            },
            vec!["run-f", "run-d"],
        ),
        (
            "since and until",
            RunListQuery {
                since: Some("2026-03-02T00:00:00Z".into()),
                until: Some("2026-03-04T08:00:00.000Z".into()),
                ..query()
            },
            vec!["run-c", "run-b"],
        ),
        (
            "completed",
            RunListQuery {
                outcome: Some(Outcome::Completed),
                ..query()
            },
            vec!["run-a", "run-e"],
        ),
        (
            "error",
            RunListQuery {
                outcome: Some(Outcome::Error),
                ..query()
            },
            vec!["run-b"],
        ),
        (
            "cancelled",
            RunListQuery {
                outcome: Some(Outcome::Cancelled),
                ..query()
            },
            vec!["run-c"],
        ),
        (
            "open",
            RunListQuery {
                outcome: Some(Outcome::Open),
                ..query()
            },
            vec!["run-d"],
        ),
        (
            "unknown outcome",
            RunListQuery {
                outcome: Some(Outcome::Other("timeout".into())),
                ..query()
            },
            vec!["run-f"],
        ),
        (
            "workspace",
            RunListQuery {
                workspace: Some("/w/a".into()),
                ..query()
            },
            vec!["run-c", "run-a"],
        ),
        (
            "workspace with a trailing slash",
            RunListQuery {
                workspace: Some("/w/a/".into()),
                ..query()
            },
            vec!["run-c", "run-a"],
        ),
        (
            "workspace from the header",
            RunListQuery {
                workspace: Some("/w/b".into()),
                ..query()
            },
            vec!["run-b"],
        ),
        (
            "session and outcome",
            RunListQuery {
                session: Some("s2".into()),
                outcome: Some(Outcome::Open),
                ..query()
            },
            vec!["run-d"],
        ),
        (
            "no match",
            RunListQuery {
                session: Some("nobody".into()),
                ..query()
            },
            vec![],
        ),
    ];
    for (what, q, want) in cases {
        let page = b.list_runs(&q)?;
        ensure_eq!(ids(&page.runs), want, "runs for {what}");
        ensure!(
            page.next_cursor.is_none(),
            "a page without limit has a cursor ({what})"
        );
    }
    // Pages of two.
    let mut q = RunListQuery {
        limit: Some(2),
        ..query()
    };
    let mut pages = Vec::new();
    loop {
        let page = b.list_runs(&q)?;
        pages.push(ids(&page.runs).join(","));
        match page.next_cursor {
            Some(c) => q.after = Some(c),
            None => break,
        }
        ensure!(pages.len() < 10, "paging does not end");
    }
    ensure_eq!(
        pages,
        vec!["run-f,run-d", "run-c,run-b", "run-a,run-e"],
        "pages of two"
    );
    // Filters and paging together.
    let q = RunListQuery {
        since: Some("2026-03-01T00:00:00Z".into()),
        limit: Some(3),
        ..query()
    };
    let first = b.list_runs(&q)?;
    ensure_eq!(
        ids(&first.runs),
        vec!["run-f", "run-d", "run-c"],
        "filtered first page"
    );
    let q = RunListQuery {
        after: first.next_cursor,
        ..q
    };
    let second = b.list_runs(&q)?;
    ensure_eq!(
        ids(&second.runs),
        vec!["run-b", "run-a"],
        "filtered second page"
    );
    ensure!(
        second.next_cursor.is_none(),
        "cursor after the last filtered page"
    );
    match b.list_runs(&RunListQuery {
        after: Some(PageCursor::new("not a cursor")),
        ..query()
    }) {
        Err(StorageError::InvalidCursor { token }) => {
            ensure_eq!(token.as_str(), "not a cursor", "token of the error")
        }
        other => ensure!(false, "an invalid cursor gave {other:?}"),
    }
    Ok(())
}

pub(crate) fn list_summaries<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    let specs = filter_runs();
    for s in &specs {
        put_run(&b, s)?;
    }
    let page = b.list_runs(&query())?;
    let find = |id: &str| {
        page.runs
            .iter()
            .find(|r| r.run_id == id)
            .cloned()
            .ok_or_else(|| Fail::Failed(format!("{id} not listed")))
    };
    let a = find("run-a")?;
    let spec_a = &specs[4];
    ensure_eq!(
        a.header_run_id,
        None,
        "header run id of a run stored under its own id"
    );
    ensure_eq!(a.session_id.as_deref(), Some("s1"), "session");
    ensure_eq!(
        a.started_at.as_deref(),
        Some("2026-03-01T10:00:00.000Z"),
        "started_at"
    );
    ensure_eq!(
        a.started_at_utc.as_deref(),
        Some("2026-03-01T10:00:00.000Z"),
        "started_at_utc"
    );
    ensure_eq!(
        (a.model_provider.as_deref(), a.model_name.as_deref()),
        (Some("openai"), Some("gpt-x")),
        "model from the header"
    );
    ensure_eq!(a.outcome, Outcome::Completed, "outcome");
    ensure_eq!(a.last_status.as_deref(), Some("completed"), "last status");
    ensure_eq!(a.record_count, 7, "records");
    ensure_eq!(a.invocation_count, 1, "invocations");
    ensure_eq!(
        (
            a.tokens.input,
            a.tokens.cached_input,
            a.tokens.cache_creation,
            a.tokens.output,
            a.tokens.total
        ),
        (100, 40, 0, 20, 120),
        "tokens"
    );
    ensure_eq!(
        a.first_input.as_deref(),
        Some("task of run-a"),
        "first input line"
    );
    ensure_eq!(
        a.workspace_root.as_deref(),
        Some("/w/a"),
        "workspace from ui_context"
    );
    ensure_eq!(a.damage_count, 0, "damage");
    let want_last = spec_a.last_ts();
    ensure_eq!(a.last_ts.as_deref(), Some(want_last.as_str()), "last ts");
    ensure!(!a.archived, "archived");
    ensure!(a.stored_bytes > 0, "stored bytes");
    let d = find("run-d")?;
    ensure_eq!(
        d.started_at_utc.as_deref(),
        Some("2026-03-04T08:00:00.000Z"),
        "started_at_utc of an offset time"
    );
    ensure_eq!(
        (d.model_provider.as_deref(), d.model_name.as_deref()),
        (Some("acme"), Some("acme-large")),
        "model from the first llm.request"
    );
    ensure_eq!(d.outcome, Outcome::Open, "outcome without run.end");
    ensure_eq!(
        d.last_status.as_deref(),
        Some("running"),
        "last status of an open run"
    );
    let c = find("run-c")?;
    ensure_eq!(
        c.workspace_root.as_deref(),
        Some("/w/a/"),
        "ui_context wins over cwd"
    );
    let bb = find("run-b")?;
    ensure_eq!(
        bb.workspace_root.as_deref(),
        Some("/w/b"),
        "workspace from the header cwd"
    );
    ensure_eq!(bb.outcome, Outcome::Error, "error outcome");
    let e = find("run-e")?;
    ensure_eq!(
        e.started_at_utc,
        None,
        "started_at_utc of an unparseable time"
    );
    ensure_eq!(e.session_id, None, "no session");
    let f = find("run-f")?;
    ensure_eq!(
        f.outcome,
        Outcome::Other("timeout".into()),
        "unknown outcome kept"
    );
    // A run whose stored header names another run id is listed under its own key.
    let other = RunSpec::new("header-says-x", "2026-03-06T00:00:00.000Z").lines();
    b.append_lines("copy-of-x", 0, &other)?;
    let page = b.list_runs(&RunListQuery {
        since: Some("2026-03-06T00:00:00Z".into()),
        ..query()
    })?;
    ensure_eq!(
        ids(&page.runs),
        vec!["copy-of-x"],
        "run stored under another id"
    );
    ensure_eq!(
        page.runs[0].header_run_id.as_deref(),
        Some("header-says-x"),
        "header run id of a copy"
    );
    Ok(())
}

pub(crate) fn list_paging_under_inserts<H: Harness>(h: &H) -> Check {
    let b = Arc::new(h.fresh()?);
    let second = h.second_client(&b)?.map(Arc::new);
    // 24 runs over three days, three at a time sharing one start time: ties straddle pages.
    let mut originals = BTreeSet::new();
    for i in 0..24u32 {
        let day = 10 + i / 8;
        let minute = (i % 8) / 3;
        let id = format!("page-{i:02}");
        put_run(
            b.as_ref(),
            &RunSpec::new(&id, &format!("2026-04-{day:02}T10:{minute:02}:00.000Z")),
        )?;
        originals.insert(id);
    }
    let stop = AtomicBool::new(false);
    let seen: Result<Vec<RunSummary>, Fail> = std::thread::scope(|s| {
        let inserter = s.spawn(|| -> Result<u32, String> {
            let client: &dyn RunCatalogue = match &second {
                Some(c) => c.as_ref(),
                None => b.as_ref(),
            };
            let mut n = 0u32;
            while !stop.load(Ordering::SeqCst) && n < 60 {
                // Before, among and after the existing runs, and on their exact times.
                let day = 9 + n % 5;
                let minute = n % 4;
                let spec = RunSpec::new(
                    &format!("new-{n:02}"),
                    &format!("2026-04-{day:02}T10:{minute:02}:00.000Z"),
                );
                client
                    .append_lines(&spec.run_id, 0, &spec.lines())
                    .map_err(|e| e.to_string())?;
                n += 1;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Ok(n)
        });
        let mut seen = Vec::new();
        let mut q = RunListQuery {
            limit: Some(5),
            ..query()
        };
        let result = loop {
            let page = match b.list_runs(&q) {
                Ok(p) => p,
                Err(e) => break Err(Fail::from(e)),
            };
            seen.extend(page.runs);
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
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(Fail::Failed(format!("inserter: {e}"))),
            Err(_) => return Err(Fail::Failed("inserter panicked".into())),
        }
        result.map(|()| seen)
    });
    let seen = seen?;
    let mut counts = std::collections::BTreeMap::new();
    for r in &seen {
        *counts.entry(r.run_id.as_str()).or_insert(0u32) += 1;
    }
    let repeated: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    ensure!(
        repeated.is_empty(),
        "runs repeated across pages: {repeated:?}"
    );
    let missing: Vec<_> = originals
        .iter()
        .filter(|id| !counts.contains_key(id.as_str()))
        .collect();
    ensure!(
        missing.is_empty(),
        "runs skipped by the paging: {missing:?}"
    );
    for w in seen.windows(2) {
        ensure!(
            w[0].started_at_utc >= w[1].started_at_utc,
            "pages out of order: {} ({:?}) before {} ({:?})",
            w[0].run_id,
            w[0].started_at_utc,
            w[1].run_id,
            w[1].started_at_utc
        );
    }
    Ok(())
}

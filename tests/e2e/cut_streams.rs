//! Property: random runs written through the writer in a random durability mode, the file cut
//! at a random offset (a crash). The reader yields exactly the records whose line was complete
//! plus at most one torn tail; the run index and the replayed invocations agree with that
//! prefix; reopening the cut file seals it and the next record reads back.

use std::fs;
use std::path::Path;

use proptest::prelude::*;
use session_jsonl::{DamageKind, Durability, RunWriter, WriterOptions, read_run};
use session_schema::Record;
use session_state::{IndexedRunOutcome, StateStore};

use crate::support::*;

const SESSION: &str = "9f0e8d7c-6b5a-4f3e-8d2c-1b0a9f8e7d6c";
const RUN: &str = "0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d";

#[derive(Debug, Clone)]
enum Step {
    /// `llm.request`, and its `llm.response` unless the call failed.
    Invocation {
        answered: bool,
        tok: Tok,
    },
    ToolOutput {
        text: String,
        is_error: bool,
    },
    Event {
        text: String,
    },
    Status,
    Context(u64),
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => any::<char>(),
            2 => Just('\n'),
            1 => Just('\0'),
            1 => Just('\u{7f}'),
            2 => Just('日'),
            2 => Just('🦀'),
            1 => Just('"'),
            1 => Just('\\'),
            1 => Just('\u{2028}'),
        ],
        0..48,
    )
    .prop_map(String::from_iter)
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (any::<bool>(), 1u64..50_000, 0u64..40_000, 1u64..4_000).prop_map(
            |(answered, input, cached, output)| Step::Invocation {
                answered,
                tok: Tok { input, cached: cached.min(input), output },
            }
        ),
        2 => (text(), any::<bool>()).prop_map(|(text, is_error)| Step::ToolOutput { text, is_error }),
        2 => text().prop_map(|text| Step::Event { text }),
        1 => Just(Step::Status),
        1 => (0u64..=100).prop_map(Step::Context),
    ]
}

fn durability(i: u8) -> Durability {
    match i % 4 {
        0 => Durability::Buffered,
        1 => Durability::Flush,
        2 => Durability::SyncData,
        _ => Durability::group_commit(),
    }
}

/// What one record contributes to the index and to replay.
#[derive(Debug, Clone, Default)]
struct Facts {
    request_seq: Option<i64>,
    response_seq: Option<i64>,
    tok: Tok,
    end: Option<&'static str>,
    status: Option<&'static str>,
}

fn build(
    input: &str,
    steps: &[Step],
    seq_base: i64,
    end: Option<&'static str>,
) -> (Vec<Record>, Vec<Facts>) {
    let mut s = RunScript::new(RUN, SESSION, "2026-05-17T23:59:59.990Z");
    let mut records = vec![s.header("openai", "gpt-5.6"), s.run_start(input)];
    let mut facts = vec![Facts::default(), Facts::default()];
    let mut seq = seq_base;
    let mut event_seq = 0;
    for step in steps {
        match step {
            Step::Invocation { answered, tok } => {
                seq += 1;
                let user = user_msg(input);
                records.push(s.request(seq, "openai", "gpt-5.6", &msgs(&[&user])));
                facts.push(Facts {
                    request_seq: Some(seq),
                    ..Default::default()
                });
                if *answered {
                    let a = assistant_msg("ok");
                    records.push(s.response(seq, "gpt-5.6", &msgs(&[&a]), *tok, "completed"));
                    facts.push(Facts {
                        response_seq: Some(seq),
                        tok: *tok,
                        ..Default::default()
                    });
                }
            }
            Step::ToolOutput { text, is_error } => {
                records.push(s.tool_output("shell", &format!("call_{seq}"), text, *is_error));
                facts.push(Facts::default());
            }
            Step::Event { text } => {
                records.push(s.event(event_seq, &ev_text(text)));
                event_seq += 1;
                facts.push(Facts::default());
            }
            Step::Status => {
                records.push(s.status("running"));
                facts.push(Facts {
                    status: Some("running"),
                    ..Default::default()
                });
            }
            Step::Context(p) => {
                records.push(s.context(*p));
                facts.push(Facts::default());
            }
        }
    }
    if let Some(outcome) = end {
        records.push(s.status(outcome));
        facts.push(Facts {
            status: Some(outcome),
            ..Default::default()
        });
        records.push(s.end(outcome, None));
        facts.push(Facts {
            end: Some(outcome),
            ..Default::default()
        });
    }
    (records, facts)
}

fn check_cut(
    records: &[Record],
    facts: &[Facts],
    mode: u8,
    choose_cut: &dyn Fn(&[u8], usize) -> usize,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let written = dir.path().join("written");
    let w = RunWriter::create(
        &written,
        header_of(&records[0]),
        WriterOptions::with_durability(durability(mode)),
    )
    .expect("create");
    for r in &records[1..] {
        w.append(r).expect("append");
    }
    let path = w.path().to_owned();
    w.close().expect("close");
    let full = fs::read(&path).expect("read back");
    let want: Vec<u8> = records.iter().flat_map(line_of).collect();
    prop_assert_eq!(&full, &want, "the file is the records' lines in order");

    // Ends of each line (index of its `\n`).
    let ends: Vec<usize> = full
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(i, _)| i)
        .collect();
    prop_assert_eq!(ends.len(), records.len());
    // The header line is complete (with or without its newline); cut anywhere after that.
    let cut = choose_cut(&full, ends[0]);
    prop_assert!(cut >= ends[0] && cut <= full.len());
    let complete = ends.iter().filter(|&&e| e <= cut).count();
    let line_start = if complete == 0 {
        0
    } else {
        (ends[complete - 1] + 1).min(cut)
    };
    let torn = cut > line_start;

    let crashed = dir.path().join("crashed");
    let rel = path.strip_prefix(&written).expect("under root");
    let cut_path = crashed.join(rel);
    fs::create_dir_all(cut_path.parent().expect("parent")).expect("mkdir");
    fs::write(&cut_path, &full[..cut]).expect("write cut");

    // Reader: exactly the complete prefix, then at most one torn tail at its offset.
    let read = read_run(&cut_path).expect("read cut");
    prop_assert_eq!(read.records.len(), complete);
    for (got, want) in read.records.iter().zip(records) {
        let mut line = line_of(want);
        line.pop();
        prop_assert_eq!(got.parsed.to_json().expect("to_json"), line);
    }
    if torn {
        prop_assert_eq!(read.damage.len(), 1, "{:?}", read.damage);
        prop_assert_eq!(read.damage[0].kind, DamageKind::TornTail);
        prop_assert_eq!(read.damage[0].offset, line_start as u64);
        prop_assert_eq!(read.damage[0].line, complete as u64 + 1);
    } else {
        prop_assert!(read.damage.is_empty(), "{:?}", read.damage);
    }

    // Run index: counts and tokens of the complete prefix only.
    let kept = &facts[..complete];
    let store = StateStore::open(&crashed).expect("store");
    let report = store.index_runs().expect("index");
    prop_assert_eq!(report.added, 1);
    let rows = store.runs_for_session(SESSION).expect("rows");
    prop_assert_eq!(rows.len(), 1);
    let row = &rows[0];
    prop_assert_eq!(row.record_count, complete as u64);
    prop_assert_eq!(row.damage_count, u64::from(torn));
    prop_assert_eq!(
        row.invocation_count,
        kept.iter().filter(|f| f.request_seq.is_some()).count() as u64
    );
    let sum = |f: fn(&Tok) -> u64| kept.iter().map(|k| f(&k.tok)).sum::<u64>();
    prop_assert_eq!(row.input_tokens, sum(|t| t.input));
    prop_assert_eq!(row.cached_input_tokens, sum(|t| t.cached));
    prop_assert_eq!(row.output_tokens, sum(|t| t.output));
    prop_assert_eq!(row.total_tokens, sum(Tok::total));
    let outcome = match kept.iter().find_map(|f| f.end) {
        Some("completed") => IndexedRunOutcome::Completed,
        Some("error") => IndexedRunOutcome::Error,
        Some("cancelled") => IndexedRunOutcome::Cancelled,
        _ => IndexedRunOutcome::Open,
    };
    prop_assert_eq!(&row.outcome, &outcome);
    let last_status = kept.iter().rev().find_map(|f| f.status);
    prop_assert_eq!(row.last_status.as_deref(), last_status);
    drop(store);

    // Replay: the invocations of the prefix, with the cut-off responses missing.
    let (log, _) = session_replay::io::read_run(&cut_path).expect("replay read");
    let (invs, _) = session_replay::invocations(&log.records);
    let got: Vec<(i64, bool)> = invs.iter().map(|i| (i.seq, i.missing_response())).collect();
    let answered: Vec<i64> = kept.iter().filter_map(|f| f.response_seq).collect();
    let expected: Vec<(i64, bool)> = kept
        .iter()
        .filter_map(|f| f.request_seq)
        .map(|s| (s, !answered.contains(&s)))
        .collect();
    prop_assert_eq!(got, expected);
    prop_assert_eq!(log.has_torn_tail(), torn);

    // Restart: reopen the cut file, append a run.end, read everything back.
    if kept.iter().all(|f| f.end.is_none()) {
        check_resume(&cut_path, &full[..cut], records, complete, line_start, torn)?;
    }
    Ok(())
}

fn check_resume(
    path: &Path,
    before: &[u8],
    records: &[Record],
    complete: usize,
    line_start: usize,
    torn: bool,
) -> Result<(), TestCaseError> {
    let mut s = RunScript::new(RUN, SESSION, "2026-05-18T00:00:30.000Z");
    let end = s.end("cancelled", None);
    let w = RunWriter::open_append(path, WriterOptions::with_durability(Durability::Flush))
        .expect("reopen");
    w.append(&end).expect("append after reopen");
    w.close().expect("close");
    let mut want = before.to_vec();
    if before.last() != Some(&b'\n') {
        want.push(b'\n');
    }
    want.extend(line_of(&end));
    prop_assert_eq!(fs::read(path).expect("read"), want, "sealed, never glued");
    let read = read_run(path).expect("read resumed");
    prop_assert_eq!(read.records.len(), complete + 1);
    let last = read.records.last().expect("record");
    prop_assert!(matches!(last.record(), Record::RunEnd(_)));
    for (got, want) in read.records[..complete].iter().zip(records) {
        let mut line = line_of(want);
        line.pop();
        prop_assert_eq!(got.parsed.to_json().expect("to_json"), line);
    }
    if torn {
        prop_assert_eq!(read.damage.len(), 1, "{:?}", read.damage);
        prop_assert_eq!(read.damage[0].kind, DamageKind::SealedFragment);
        prop_assert_eq!(read.damage[0].offset, line_start as u64);
    } else {
        prop_assert!(read.damage.is_empty(), "{:?}", read.damage);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 40,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_cut_run_reads_back_as_its_complete_prefix_in_every_layer(
        input in text(),
        steps in prop::collection::vec(step(), 0..12),
        seq_base in 0i64..40,
        end in prop_oneof![
            Just(None),
            Just(Some("completed")),
            Just(Some("error")),
            Just(Some("cancelled")),
        ],
        mode in 0u8..4,
        cut_at in any::<prop::sample::Index>(),
    ) {
        let (records, facts) = build(&input, &steps, seq_base, end);
        check_cut(&records, &facts, mode, &|full, header_end| {
            header_end + cut_at.index(full.len() - header_end + 1)
        })?;
    }
}

/// Every cut inside a multi-byte character (the runtime writes non-ASCII text): torn before
/// the restart, one sealed damaged line after it, in every layer.
#[test]
fn cuts_inside_multi_byte_characters_resume_cleanly() {
    let steps = [
        Step::Event {
            text: "日本🦀".into(),
        },
        Step::ToolOutput {
            text: "é€".into(),
            is_error: false,
        },
    ];
    let (records, facts) = build("ünï 日本", &steps, 3, None);
    let full: Vec<u8> = records.iter().flat_map(line_of).collect();
    let header_end = full.iter().position(|&b| b == b'\n').expect("header line");
    let inside: Vec<usize> = (header_end..full.len())
        .filter(|&i| (full[i] & 0xC0) == 0x80)
        .collect();
    assert!(inside.len() > 10, "the run holds multi-byte characters");
    for cut in inside {
        check_cut(&records, &facts, 1, &|_, _| cut).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
    }
}

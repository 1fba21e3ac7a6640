//! Skimming `llm.request` lines: most bytes of a real run log are the conversation each
//! `llm.request` repeats (`input.messages`), which an index never looks at. With
//! [`ReaderOptions::skim_llm_requests`](crate::ReaderOptions::skim_llm_requests) such a line is
//! recognised from its first bytes, its messages array is checked for structure only (every
//! string closed, brackets balanced) without being decoded, and the rest of the line (type,
//! run id, `ts`, `seq`, `model`, the other `input` fields, `meta`, unknown keys) is parsed as
//! usual with an empty messages array in place. Anything unexpected (another key order, a BOM,
//! invalid UTF-8, a lone surrogate escape outside the messages, a structural fault) sends the
//! line through the full parse, so damage is classified as always.
//!
//! What a skim does not see: JSON grammar faults inside the messages array that leave strings
//! and brackets balanced (`[1 2]`, a raw control character in a string) and lone surrogate
//! escapes inside it. `sessions verify` reads without skimming and reports them.

use std::cell::Cell;

use session_schema::{Parsed, Record, parse_record_str};

/// How every line the writers produce for an `llm.request` starts.
const PREFIX: &[u8] = br#"{"type":"llm.request","#;
/// The key of the messages array, as the writers put it: first key of `input`.
const MESSAGES: &[u8] = br#""input":{"messages":["#;

thread_local! {
    static DESERIALIZED: Cell<u64> = const { Cell::new(0) };
    static SKIMMED: Cell<u64> = const { Cell::new(0) };
}

/// `llm.request` records fully deserialized (messages included) by every reader on the calling
/// thread since it started; for tests that hold what an operation decodes
/// (`after - before`).
pub fn llm_requests_deserialized_on_this_thread() -> u64 {
    DESERIALIZED.with(Cell::get)
}

/// `llm.request` records skimmed (messages checked for structure, not decoded) by every
/// reader on the calling thread since it started.
pub fn llm_requests_skimmed_on_this_thread() -> u64 {
    SKIMMED.with(Cell::get)
}

/// Takes the calling thread's `(deserialized, skimmed)` counts back to `to` (values read
/// earlier on this thread), returning what was counted since: the counts move to the
/// thread a [`crate::tally::Tally`] is handed to.
pub(crate) fn take_since(to: (u64, u64)) -> (u64, u64) {
    let d = DESERIALIZED.with(|c| c.replace(to.0));
    let s = SKIMMED.with(|c| c.replace(to.1));
    (d.saturating_sub(to.0), s.saturating_sub(to.1))
}

/// Adds counts taken on another thread ([`take_since`]) to the calling thread's.
pub(crate) fn add(counts: (u64, u64)) {
    DESERIALIZED.with(|c| c.set(c.get().saturating_add(counts.0)));
    SKIMMED.with(|c| c.set(c.get().saturating_add(counts.1)));
}

/// The calling thread's `(deserialized, skimmed)` counts.
pub(crate) fn counts() -> (u64, u64) {
    (DESERIALIZED.with(Cell::get), SKIMMED.with(Cell::get))
}

/// Counts a record a full parse produced.
pub(crate) fn count_full(record: &Record) {
    if matches!(record, Record::LlmRequest(_)) {
        DESERIALIZED.with(|c| c.set(c.get().saturating_add(1)));
    }
}

/// The record of an `llm.request` line with an empty `input.messages`, or `None` when the
/// line must take the full parse.
pub(crate) fn skim(line: &[u8]) -> Option<Parsed<Record>> {
    if !line.starts_with(PREFIX) {
        return None;
    }
    let at = memchr::memmem::find(line, MESSAGES)?;
    let open = at + MESSAGES.len() - 1;
    // The key must be the top-level object's `input`: depth 1 before it, outside strings.
    if scan(line, 0, at)? != (1, false) {
        return None;
    }
    let close = array_end(line, open)?;
    // `[` then the rest from the closing `]` on.
    let mut spliced = Vec::with_capacity(open + 1 + line.len() - close);
    spliced.extend_from_slice(&line[..=open]);
    spliced.extend_from_slice(&line[close..]);
    let text = simdutf8::basic::from_utf8(&spliced).ok()?;
    let parsed = parse_record_str(text).ok()?;
    // Repairs carry offsets of the spliced text: let the full parse report them.
    if !parsed.lone_surrogates.is_empty() || !matches!(parsed.value, Record::LlmRequest(_)) {
        return None;
    }
    SKIMMED.with(|c| c.set(c.get().saturating_add(1)));
    Some(parsed)
}

/// Depth of brackets and whether inside a string after scanning `line[from..to]` from depth 0
/// outside a string (`None` when a bracket closes below depth 0).
fn scan(line: &[u8], from: usize, to: usize) -> Option<(u32, bool)> {
    let mut depth = 0u32;
    let mut i = from;
    while i < to {
        match line[i] {
            b'"' => match string_end(line, i + 1) {
                Some(end) if end <= to => i = end,
                _ => return Some((depth, true)),
            },
            b'[' | b'{' => {
                depth += 1;
                i += 1;
            }
            b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                i += 1;
            }
            _ => i += 1,
        }
    }
    Some((depth, false))
}

/// Index just after the closing quote of the string whose content starts at `i`.
fn string_end(line: &[u8], mut i: usize) -> Option<usize> {
    loop {
        let j = i + memchr::memchr2(b'"', b'\\', line.get(i..)?)?;
        if line[j] == b'\\' {
            // An escape: the next byte is part of it (`\"`, `\\`, `\u…`).
            i = j + 2;
        } else {
            return Some(j + 1);
        }
    }
}

/// Index of the `]` closing the array that opens at `open` (`line[open] == b'['`), when every
/// string inside is closed and brackets balance; `None` otherwise.
fn array_end(line: &[u8], open: usize) -> Option<usize> {
    let mut stack: Vec<u8> = vec![b']'];
    let mut i = open + 1;
    while let Some(&b) = line.get(i) {
        match b {
            b'"' => i = string_end(line, i + 1)?,
            b'[' => {
                stack.push(b']');
                i += 1;
            }
            b'{' => {
                stack.push(b'}');
                i += 1;
            }
            b']' | b'}' => {
                if stack.pop()? != b {
                    return None;
                }
                if stack.is_empty() {
                    return Some(i);
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = r#"{"type":"llm.request","run_id":"r","ts":"2026-02-03T12:00:00.000Z","seq":1,"model":{"provider":"p","name":"m"},"input":{"messages":"#;

    fn line(messages: &str, rest: &str) -> String {
        format!("{HEAD}{messages}{rest}")
    }

    #[test]
    fn the_messages_array_is_found_and_replaced() {
        let l = line(
            r#"[{"role":"user","content":"a \"quoted\" ] } [ {"}]"#,
            r#","tools":null,"tool_choice":"auto"},"meta":{"k":1},"x":2}"#,
        );
        let parsed = skim(l.as_bytes()).expect("skimmed");
        let Record::LlmRequest(r) = &parsed.value else {
            panic!("{:?}", parsed.value)
        };
        assert_eq!(r.seq, 1);
        assert_eq!(r.model.as_ref().and_then(|m| m.name.as_deref()), Some("m"));
        assert_eq!(r.input.messages.get(), "[]");
        let full = parse_record_str(&l).unwrap();
        let Record::LlmRequest(f) = &full.value else {
            panic!()
        };
        assert_eq!(
            (&f.run_id, &f.ts, f.seq, &f.model),
            (&r.run_id, &r.ts, r.seq, &r.model)
        );
        assert_eq!(f.input.tool_choice, r.input.tool_choice);
        assert_eq!(f.meta, r.meta);
    }

    #[test]
    fn what_a_skim_cannot_vouch_for_takes_the_full_parse() {
        for bad in [
            // Torn inside the messages.
            line(r#"[{"role":"user","content":"ab"#, ""),
            line(r#"[{"role":"user","content":"ab"}"#, ""),
            // Mismatched brackets.
            line(r#"[{"role":"user"]]"#, "}}"),
            // A bad shape outside the messages.
            line("[]", r#","tool_choice":7}}"#),
            line("[]", "}"),
            // Glued to the start of another record.
            line(r#"[{"role":"user","content":"ab{"type":"run.status"}"#, "]}}"),
            // Another key order.
            r#"{"type":"llm.request","input":{"messages":[]},"run_id":"r","ts":"2026-02-03T12:00:00.000Z","seq":1}"#
                .to_owned(),
            // Not at the top level.
            r#"{"type":"llm.request","meta":{"input":{"messages":[]}},"run_id":"r","ts":"t","seq":1,"input":{"messages":[]}}"#
                .to_owned(),
            // Another record type.
            r#"{"type":"llm.response","input":{"messages":[]}}"#.to_owned(),
        ] {
            let skimmed = skim(bad.as_bytes());
            let full = parse_record_str(&bad);
            assert!(
                skimmed.is_none() || full.is_ok(),
                "skimmed a line the full parse rejects: {bad}"
            );
            if let (Some(s), Ok(f)) = (&skimmed, &full) {
                assert_eq!(s.value.kind(), f.value.kind());
            }
        }
        // A lone surrogate outside the messages: the full parse reports it.
        let l = line("[]", r#","model":"\ud800"}}"#);
        assert!(skim(l.as_bytes()).is_none());
        assert_eq!(parse_record_str(&l).unwrap().lone_surrogates.len(), 1);
    }
}

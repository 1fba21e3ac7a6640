//! Tool results as people read them: the shapes of the reference's tool outputs recognised in
//! `tool.output.result_raw` / the `tool_result` event's text (spec §3; compat §1.2), so that
//! every renderer (the Markdown transcript here, the CLI's terminal and HTML transcripts) shows
//! a shell result as its output text and other JSON results indented, instead of one line of
//! `\n` escapes.
//!
//! Recognition looks at the text only, never at the tool's name (another runtime may call its
//! shell tool `bash`), and never changes what is shown: strings are decoded exactly, numbers
//! keep the digits they were written with, the other fields of an object stay in stored order.

use std::fmt::{self, Write as _};

use serde_json::value::RawValue;

/// A tool result sorted into the shapes a transcript renders differently
/// ([`view_tool_output`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolOutputView {
    /// Plain text (anything that is not a JSON object or array, including JSON scalars such as
    /// `12`): shown as stored.
    Text,
    /// The reference's shell tool result: a JSON object with a string `stdout` or `stderr`
    /// (`{"key","state","command","exit_code","duration_ms","stdout","stderr"?}`).
    Shell(ShellOutput),
    /// The reference's edit tool result: a JSON object with a string `diff`
    /// (`{"summary","replacements","match_mode","diff"}`).
    Edit(EditOutput),
    /// Any other JSON object or array, re-indented with two spaces per level (keys in stored
    /// order, numbers and string escapes exactly as stored).
    Json {
        /// The indented text (no trailing newline).
        pretty: String,
    },
}

/// The fields of a shell tool result. A field that is absent (or `null`) is `None`; a field
/// present with another JSON type than expected is shown by its JSON text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShellOutput {
    /// The command line (`command`).
    pub command: Option<String>,
    /// The exit status as written (`exit_code`, a number in the reference).
    pub exit_code: Option<String>,
    /// `state` (`completed`, or how the command ended otherwise).
    pub state: Option<String>,
    /// `duration_ms` as written, in milliseconds.
    pub duration_ms: Option<String>,
    /// Standard output (`stdout`; empty when absent).
    pub stdout: String,
    /// Standard error (`stderr`; empty when absent).
    pub stderr: String,
    /// Every other field as (key, compact JSON text), in stored order (`key`, `truncated`, …).
    pub other: Vec<(String, String)>,
}

impl ShellOutput {
    /// The one line of facts below the output: `exit code 0 · 14 ms`, plus the state when it
    /// is not `completed` and every other non-`key` field as `name=value`
    /// (`exit code 137 · killed · 30000 ms · timed_out=true`); empty when nothing is known.
    pub fn status_line(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(c) = &self.exit_code {
            parts.push(format!("exit code {c}"));
        }
        if let Some(s) = self.state.as_deref().filter(|s| *s != "completed") {
            parts.push(s.to_owned());
        }
        if let Some(d) = &self.duration_ms {
            parts.push(format!("{d} ms"));
        }
        for (k, v) in &self.other {
            // `key` is the runtime's own handle of the call: no news for a reader.
            if k != "key" {
                parts.push(format!("{k}={v}"));
            }
        }
        parts.join(" · ")
    }
}

/// The fields of an edit tool result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EditOutput {
    /// `summary` (`Replaced 1 occurrence(s) in src/a.js`).
    pub summary: Option<String>,
    /// The unified diff (`diff`).
    pub diff: String,
    /// Every other field as (key, compact JSON text), in stored order.
    pub other: Vec<(String, String)>,
}

/// The text of a tool result as people read it, for search: a shell result's command, stdout
/// and stderr, an edit's summary and diff (their JSON escapes decoded, so `\n` separates
/// words instead of gluing `n` to the next one); any other result as stored.
pub fn tool_output_text(output: &str) -> String {
    match view_tool_output(output) {
        ToolOutputView::Shell(s) => {
            let mut text = s.command.unwrap_or_default();
            for part in [s.stdout, s.stderr] {
                if !part.is_empty() {
                    text.push('\n');
                    text.push_str(&part);
                }
            }
            text
        }
        ToolOutputView::Edit(e) => match e.summary {
            Some(summary) => format!("{summary}\n{}", e.diff),
            None => e.diff,
        },
        ToolOutputView::Text | ToolOutputView::Json { .. } => output.to_owned(),
    }
}

/// Sorts a tool result's text into the shape to render (see [`ToolOutputView`]). Never fails:
/// text that is not JSON, or JSON of no known shape, is [`ToolOutputView::Text`] or
/// [`ToolOutputView::Json`].
///
/// ```
/// use session_replay::{ToolOutputView, view_tool_output};
///
/// let raw = r#"{"key":"k1","state":"completed","command":"ls","exit_code":0,"duration_ms":14,"stdout":"a\nb"}"#;
/// let ToolOutputView::Shell(sh) = view_tool_output(raw) else { panic!() };
/// assert_eq!(sh.stdout, "a\nb");
/// assert_eq!(sh.status_line(), "exit code 0 · 14 ms");
/// assert_eq!(view_tool_output("12\n"), ToolOutputView::Text);
/// ```
pub fn view_tool_output(output: &str) -> ToolOutputView {
    let trimmed = output.trim_start();
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) {
        return ToolOutputView::Text;
    }
    // Valid JSON only: a result that merely starts with a brace is text.
    if serde_json::from_str::<serde::de::IgnoredAny>(output).is_err() {
        return ToolOutputView::Text;
    }
    if let Ok(fields) = serde_json::from_str::<Fields>(output) {
        let is_str = |k: &str| {
            fields
                .0
                .iter()
                .any(|(n, v)| n == k && v.get().starts_with('"'))
        };
        if is_str("stdout") || is_str("stderr") {
            return ToolOutputView::Shell(shell(fields.0));
        }
        if is_str("diff") {
            return ToolOutputView::Edit(edit(fields.0));
        }
    }
    ToolOutputView::Json {
        pretty: reindent(output),
    }
}

/// The text of one field: a JSON string decoded, `null` as `None`, anything else as its
/// compact JSON text.
fn field_text(raw: &RawValue) -> Option<String> {
    let text = raw.get();
    if text == "null" {
        return None;
    }
    if text.starts_with('"') {
        return serde_json::from_str::<String>(text).ok();
    }
    Some(text.to_owned())
}

fn shell(fields: Vec<(String, Box<RawValue>)>) -> ShellOutput {
    let mut s = ShellOutput::default();
    for (k, v) in fields {
        match k.as_str() {
            "command" => s.command = field_text(&v),
            "exit_code" => s.exit_code = field_text(&v),
            "state" => s.state = field_text(&v),
            "duration_ms" => s.duration_ms = field_text(&v),
            "stdout" => s.stdout = field_text(&v).unwrap_or_default(),
            "stderr" => s.stderr = field_text(&v).unwrap_or_default(),
            _ => s.other.push((k, v.get().to_owned())),
        }
    }
    s
}

fn edit(fields: Vec<(String, Box<RawValue>)>) -> EditOutput {
    let mut e = EditOutput::default();
    for (k, v) in fields {
        match k.as_str() {
            "summary" => e.summary = field_text(&v),
            "diff" => e.diff = field_text(&v).unwrap_or_default(),
            _ => e.other.push((k, v.get().to_owned())),
        }
    }
    e
}

/// A JSON object's fields in stored order, each value as its JSON text (a later duplicate
/// key replaces the earlier one's value, as JSON.parse does, keeping the first place).
struct Fields(Vec<(String, Box<RawValue>)>);

impl<'de> serde::Deserialize<'de> for Fields {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Fields;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Fields, A::Error> {
                let mut out: Vec<(String, Box<RawValue>)> = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Box<RawValue>>()? {
                    match out.iter_mut().find(|(n, _)| *n == k) {
                        Some(slot) => slot.1 = v,
                        None => out.push((k, v)),
                    }
                }
                Ok(Fields(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Re-indents valid JSON text: two spaces per level, one member per line, `": "` after keys,
/// empty `{}`/`[]` kept on one line; the tokens themselves (strings with their escapes,
/// numbers) are copied unchanged.
fn reindent(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + json.len() / 4);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = json.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    };
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                    chars.next();
                }
                if chars.peek().is_some_and(|n| *n == '}' || *n == ']') {
                    if let Some(close) = chars.next() {
                        out.push(close);
                    }
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_ascii_whitespace() => {}
            c => out.push(c),
        }
    }
    out
}

/// A tool result as Markdown, the way [`crate::render_markdown`] shows it: a shell result as
/// `$ command` in an `sh` block, its stdout and stderr in fenced blocks (stderr after a
/// `stderr:` line) and the [`ShellOutput::status_line`] in italics; an edit result as its
/// summary and a `diff` block; other JSON indented in a `json` block; text in a plain block.
/// Every fence is longer than any backtick run inside it. Ends with a newline.
///
/// ```
/// let md = session_replay::tool_output_markdown(r#"{"command":"ls","exit_code":0,"stdout":"a\nb"}"#);
/// assert_eq!(md, "```sh\n$ ls\n```\n```\na\nb\n```\n\n_exit code 0_\n");
/// ```
pub fn tool_output_markdown(output: &str) -> String {
    let mut out = String::new();
    push_markdown(&mut out, output);
    out
}

/// [`tool_output_markdown`] into `out`.
pub(crate) fn push_markdown(out: &mut String, output: &str) {
    match view_tool_output(output) {
        ToolOutputView::Shell(sh) => {
            if let Some(c) = &sh.command {
                crate::markdown::push_fenced(out, "sh", &format!("$ {c}"));
            }
            if !sh.stdout.is_empty() || sh.stderr.is_empty() {
                crate::markdown::push_fenced(out, "", &sh.stdout);
            }
            if !sh.stderr.is_empty() {
                out.push_str("stderr:\n\n");
                crate::markdown::push_fenced(out, "", &sh.stderr);
            }
            let status = sh.status_line();
            if !status.is_empty() {
                let _ = writeln!(out, "\n_{status}_");
            }
        }
        ToolOutputView::Edit(e) => {
            if let Some(s) = &e.summary {
                let _ = writeln!(out, "{s}\n");
            }
            crate::markdown::push_fenced(out, "diff", &e.diff);
        }
        ToolOutputView::Json { pretty } => crate::markdown::push_fenced(out, "json", &pretty),
        ToolOutputView::Text => crate::markdown::push_fenced(out, "", output),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_shell_result_is_its_fields() {
        let raw = r#"{"key":"shell-534a9525","state":"completed","command":"node src/index.js 'Hanako 花子'","exit_code":0,"duration_ms":49,"stdout":"Hello, Hanako 花子!\nline one\n\ttabbed \"quoted\" line"}"#;
        let ToolOutputView::Shell(sh) = view_tool_output(raw) else {
            panic!("not a shell result: {:?}", view_tool_output(raw));
        };
        assert_eq!(
            sh.command.as_deref(),
            Some("node src/index.js 'Hanako 花子'")
        );
        assert_eq!(sh.exit_code.as_deref(), Some("0"));
        assert_eq!(sh.state.as_deref(), Some("completed"));
        assert_eq!(sh.duration_ms.as_deref(), Some("49"));
        assert_eq!(
            sh.stdout,
            "Hello, Hanako 花子!\nline one\n\ttabbed \"quoted\" line"
        );
        assert_eq!(sh.stderr, "");
        assert_eq!(
            sh.other,
            vec![("key".to_owned(), "\"shell-534a9525\"".to_owned())]
        );
        assert_eq!(sh.status_line(), "exit code 0 · 49 ms");
    }

    #[test]
    fn a_failed_shell_result_names_its_state_and_extra_fields() {
        let raw = r#"{"state":"failed","command":"false","exit_code":137,"stderr":"killed\n","timed_out":true,"exit_code_note":null}"#;
        let ToolOutputView::Shell(sh) = view_tool_output(raw) else {
            panic!("not a shell result");
        };
        assert_eq!(sh.stdout, "");
        assert_eq!(sh.stderr, "killed\n");
        assert_eq!(
            sh.status_line(),
            "exit code 137 · failed · timed_out=true · exit_code_note=null"
        );
    }

    #[test]
    fn an_edit_result_is_its_summary_and_diff() {
        let raw = r#"{"summary":"Replaced 1 occurrence(s) in a.js","replacements":1,"match_mode":"exact","diff":"--- a.js\n+++ a.js\n-x\n+y"}"#;
        assert_eq!(
            view_tool_output(raw),
            ToolOutputView::Edit(EditOutput {
                summary: Some("Replaced 1 occurrence(s) in a.js".into()),
                diff: "--- a.js\n+++ a.js\n-x\n+y".into(),
                other: vec![
                    ("replacements".into(), "1".into()),
                    ("match_mode".into(), "\"exact\"".into())
                ],
            })
        );
    }

    #[test]
    fn other_json_is_reindented_exactly() {
        let raw = r#"{"opened":"src/a.js", "n":12345678901234567890123,"e":[],"o":{},"l":[1,{"k":"a\"b\\"}],"z":1.50}"#;
        assert_eq!(
            view_tool_output(raw),
            ToolOutputView::Json {
                pretty: "{\n  \"opened\": \"src/a.js\",\n  \"n\": 12345678901234567890123,\n  \"e\": [],\n  \"o\": {},\n  \"l\": [\n    1,\n    {\n      \"k\": \"a\\\"b\\\\\"\n    }\n  ],\n  \"z\": 1.50\n}".into()
            }
        );
    }

    #[test]
    fn text_scalars_and_broken_json_are_text() {
        for raw in [
            "12\n",
            "\"quoted\"",
            "{not json",
            "[1,",
            "plain words",
            "",
            "true",
        ] {
            assert_eq!(view_tool_output(raw), ToolOutputView::Text, "{raw:?}");
        }
    }

    #[test]
    fn stdout_that_is_not_a_string_is_no_shell_result() {
        let raw = r#"{"stdout":5}"#;
        assert_eq!(
            view_tool_output(raw),
            ToolOutputView::Json {
                pretty: "{\n  \"stdout\": 5\n}".into()
            }
        );
    }

    #[test]
    fn markdown_of_a_shell_result() {
        let mut out = String::new();
        push_markdown(
            &mut out,
            r#"{"command":"ls","exit_code":2,"duration_ms":3,"stdout":"a\nb\n","stderr":"ls: x: No such file"}"#,
        );
        assert_eq!(
            out,
            "```sh\n$ ls\n```\n```\na\nb\n```\nstderr:\n\n```\nls: x: No such file\n```\n\n_exit code 2 · 3 ms_\n"
        );
    }
}

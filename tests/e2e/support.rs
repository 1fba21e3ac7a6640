//! Building blocks shared by the end-to-end tests: runtime-like records, message lines, the
//! fixture tree, and the CLI driven in-process.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use session_schema::{BaseMessage, Record, Timestamp, parse_message, parse_record, to_line};

/// The reference runtime's recorded data (`testdata/codelia-runtime`; read-only, copy before
/// SQLite opens anything).
pub(crate) fn codelia_dir() -> PathBuf {
    session_test_support::codelia_runtime_dir()
}

/// `expected.json` of the reference runtime's recorded data.
pub(crate) fn codelia_expected() -> serde_json::Value {
    let text = fs::read(codelia_dir().join("expected.json")).expect("read expected.json");
    serde_json::from_slice(&text).expect("expected.json is JSON")
}

/// Copies the tree under `src` to `dst` (created), files byte for byte.
pub(crate) fn copy_tree(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).expect("create copy dir");
    for entry in fs::read_dir(src).expect("list fixture dir") {
        let entry = entry.expect("dir entry");
        let from = entry.path();
        let to = dst.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&from, &to);
        } else {
            fs::copy(&from, &to).expect("copy fixture file");
        }
    }
}

/// Every regular file under `dir`, relative to it, sorted.
pub(crate) fn files_under(dir: &Path) -> Vec<PathBuf> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).expect("list dir") {
            let entry = entry.expect("dir entry");
            let p = entry.path();
            if entry.file_type().expect("file type").is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).expect("under base").to_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// A JSON string literal.
pub(crate) fn js(s: &str) -> String {
    serde_json::to_string(s).expect("string serializes")
}

/// Parses one record line written by hand; panics on a line the schema refuses.
pub(crate) fn rec(line: &str) -> Record {
    parse_record(line.as_bytes())
        .unwrap_or_else(|e| panic!("bad test record {line}: {e}"))
        .value
}

/// The header inside a header record.
pub(crate) fn header_of(record: &Record) -> &session_schema::Header {
    match record {
        Record::Header(h) => h,
        other => panic!("not a header: {}", other.kind()),
    }
}

/// Parses one message line written by hand.
pub(crate) fn msg(line: &str) -> BaseMessage {
    parse_message(line.as_bytes())
        .unwrap_or_else(|e| panic!("bad test message {line}: {e}"))
        .value
}

/// The exact line (with `\n`) the writer puts on disk for `record`.
pub(crate) fn line_of(record: &Record) -> Vec<u8> {
    to_line(record).expect("record serializes")
}

/// `{"role":"system",…}`.
pub(crate) fn system_msg(text: &str) -> String {
    format!(r#"{{"role":"system","content":{}}}"#, js(text))
}

/// `{"role":"user",…}`.
pub(crate) fn user_msg(text: &str) -> String {
    format!(r#"{{"role":"user","content":{}}}"#, js(text))
}

/// `{"role":"assistant",…}` with text.
pub(crate) fn assistant_msg(text: &str) -> String {
    format!(r#"{{"role":"assistant","content":{}}}"#, js(text))
}

/// An assistant message holding one function call.
pub(crate) fn assistant_call(call_id: &str, tool: &str, args_json: &str) -> String {
    format!(
        r#"{{"role":"assistant","content":null,"tool_calls":[{{"id":{},"type":"function","function":{{"name":{},"arguments":{}}}}}]}}"#,
        js(call_id),
        js(tool),
        js(args_json)
    )
}

/// A tool result message.
pub(crate) fn tool_msg(call_id: &str, tool: &str, content: &str) -> String {
    format!(
        r#"{{"role":"tool","tool_call_id":{},"tool_name":{},"content":{}}}"#,
        js(call_id),
        js(tool),
        js(content)
    )
}

/// A JSON array of message lines.
pub(crate) fn msgs(list: &[&String]) -> String {
    let parts: Vec<&str> = list.iter().map(|s| s.as_str()).collect();
    format!("[{}]", parts.join(","))
}

/// Token usage of one response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tok {
    pub(crate) input: u64,
    pub(crate) cached: u64,
    pub(crate) output: u64,
}

impl Tok {
    pub(crate) fn total(&self) -> u64 {
        self.input + self.output
    }
}

/// Writes the records of one run the way the reference runtime orders them, with a clock that
/// advances 7 ms per record.
pub(crate) struct RunScript {
    pub(crate) run_id: String,
    pub(crate) session_id: String,
    pub(crate) started_ms: i64,
    clock: i64,
}

impl RunScript {
    pub(crate) fn new(run_id: &str, session_id: &str, started_at: &str) -> RunScript {
        let ms = Timestamp::from_raw(started_at)
            .unix_millis()
            .expect("test timestamps parse");
        RunScript {
            run_id: run_id.into(),
            session_id: session_id.into(),
            started_ms: ms,
            clock: ms,
        }
    }

    fn ts(&mut self) -> String {
        self.clock += 7;
        js(Timestamp::from_unix_millis(self.clock).as_str())
    }

    pub(crate) fn started_at(&self) -> Timestamp {
        Timestamp::from_unix_millis(self.started_ms)
    }

    pub(crate) fn header(&self, provider: &str, model: &str) -> Record {
        rec(&format!(
            r#"{{"type":"header","schema_version":1,"run_id":{},"session_id":{},"started_at":{},"client":{{"name":"codelia-tui","version":"0.1.0"}},"server":{{"name":"codelia-runtime","version":"0.1.0"}},"model":{{"provider":{},"name":{},"reasoning":"medium","source":"config"}},"prompts":{{"system":"You are a coding agent."}},"tools":{{"definitions":[{{"name":"read","description":"Read a file","parameters":{{"type":"object","properties":{{"file_path":{{"type":"string"}}}}}},"strict":false}}],"source":"runtime"}},"runtime":{{"os":"linux","arch":"x64","version":"0.1.0"}}}}"#,
            js(&self.run_id),
            js(&self.session_id),
            js(self.started_at().as_str()),
            js(provider),
            js(model)
        ))
    }

    pub(crate) fn run_start(&mut self, text: &str) -> Record {
        let ts = self.ts();
        rec(&format!(
            r#"{{"type":"run.start","run_id":{},"session_id":{},"ts":{ts},"input":{{"type":"text","text":{}}}}}"#,
            js(&self.run_id),
            js(&self.session_id),
            js(text)
        ))
    }

    pub(crate) fn status(&mut self, status: &str) -> Record {
        let ts = self.ts();
        rec(&format!(
            r#"{{"type":"run.status","run_id":{},"ts":{ts},"status":{}}}"#,
            js(&self.run_id),
            js(status)
        ))
    }

    pub(crate) fn request(
        &mut self,
        seq: i64,
        provider: &str,
        model: &str,
        messages: &str,
    ) -> Record {
        let ts = self.ts();
        rec(&format!(
            r#"{{"type":"llm.request","run_id":{},"ts":{ts},"seq":{seq},"model":{{"provider":{},"name":{}}},"input":{{"messages":{messages},"tools":null,"tool_choice":null,"session_key":{}}}}}"#,
            js(&self.run_id),
            js(provider),
            js(model),
            js(&self.session_id)
        ))
    }

    pub(crate) fn response(
        &mut self,
        seq: i64,
        model: &str,
        messages: &str,
        tok: Tok,
        stop: &str,
    ) -> Record {
        let ts = self.ts();
        rec(&format!(
            r#"{{"type":"llm.response","run_id":{},"ts":{ts},"seq":{seq},"output":{{"messages":{messages},"usage":{{"model":{},"input_tokens":{},"input_cached_tokens":{},"input_cache_creation_tokens":0,"output_tokens":{},"total_tokens":{}}},"stop_reason":{},"provider_meta":null}}}}"#,
            js(&self.run_id),
            js(model),
            tok.input,
            tok.cached,
            tok.output,
            tok.total(),
            js(stop)
        ))
    }

    pub(crate) fn event(&mut self, seq: i64, event_json: &str) -> Record {
        let ts = self.ts();
        rec(&format!(
            r#"{{"type":"agent.event","run_id":{},"ts":{ts},"seq":{seq},"event":{event_json}}}"#,
            js(&self.run_id)
        ))
    }

    pub(crate) fn tool_output(
        &mut self,
        tool: &str,
        call_id: &str,
        result: &str,
        is_error: bool,
    ) -> Record {
        let ts = self.ts();
        let err = if is_error { r#","is_error":true"# } else { "" };
        rec(&format!(
            r#"{{"type":"tool.output","run_id":{},"ts":{ts},"tool":{},"tool_call_id":{},"result_raw":{}{err}}}"#,
            js(&self.run_id),
            js(tool),
            js(call_id),
            js(result)
        ))
    }

    pub(crate) fn context(&mut self, percent: u64) -> Record {
        let ts = self.ts();
        rec(&format!(
            r#"{{"type":"run.context","run_id":{},"ts":{ts},"context_left_percent":{percent}}}"#,
            js(&self.run_id)
        ))
    }

    pub(crate) fn end(&mut self, outcome: &str, final_text: Option<&str>) -> Record {
        let ts = self.ts();
        let fin = final_text
            .map(|f| format!(r#","final":{}"#, js(f)))
            .unwrap_or_default();
        rec(&format!(
            r#"{{"type":"run.end","run_id":{},"ts":{ts},"outcome":{}{fin}}}"#,
            js(&self.run_id),
            js(outcome)
        ))
    }
}

/// Event JSON: `tool_call`.
pub(crate) fn ev_tool_call(tool: &str, call_id: &str, args_json: &str) -> String {
    format!(
        r#"{{"type":"tool_call","tool":{},"args":{args_json},"raw_args":{},"tool_call_id":{}}}"#,
        js(tool),
        js(args_json),
        js(call_id)
    )
}

/// Event JSON: `tool_result`.
pub(crate) fn ev_tool_result(tool: &str, call_id: &str, result: &str) -> String {
    format!(
        r#"{{"type":"tool_result","tool":{},"result":{},"tool_call_id":{}}}"#,
        js(tool),
        js(result),
        js(call_id)
    )
}

/// Event JSON: `text`.
pub(crate) fn ev_text(text: &str) -> String {
    format!(r#"{{"type":"text","content":{}}}"#, js(text))
}

/// Event JSON: `final`.
pub(crate) fn ev_final(text: &str) -> String {
    format!(r#"{{"type":"final","content":{}}}"#, js(text))
}

/// Output of one in-process `sessions` invocation.
#[derive(Debug)]
pub(crate) struct CliOut {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl CliOut {
    /// stdout as one JSON value per line.
    pub(crate) fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| {
                    panic!("not a JSON line ({e}): {l}\nstderr: {}", self.stderr)
                })
            })
            .collect()
    }
}

/// Runs `sessions --root <root> <args…>` in-process with a fixed environment (`HOME` under
/// `home`, `SESSIONS_NOW` = `now`, no colour).
pub(crate) fn sessions(root: &Path, now: &str, args: &[&str]) -> CliOut {
    let home = root.parent().unwrap_or(root).to_string_lossy().into_owned();
    let env = session_cli::Env::from_pairs([
        ("HOME".to_owned(), home),
        ("SESSIONS_NOW".to_owned(), now.to_owned()),
        ("NO_COLOR".to_owned(), "1".to_owned()),
    ]);
    let mut argv: Vec<OsString> = vec!["sessions".into(), "--root".into(), root.into()];
    argv.extend(args.iter().map(OsString::from));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = session_cli::run_with(
        argv,
        &mut out,
        &mut err,
        &env,
        session_cli::Terminal::default(),
    );
    CliOut {
        code,
        stdout: String::from_utf8(out).expect("stdout is UTF-8"),
        stderr: String::from_utf8(err).expect("stderr is UTF-8"),
    }
}

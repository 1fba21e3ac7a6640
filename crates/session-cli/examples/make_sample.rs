//! Writes the sample session store committed at `sample/sessions/` through the project's own
//! writers (session-jsonl `RunWriter`, session-state `StateStore`), with fixed ids and
//! timestamps so the result is byte-stable.
//!
//! ```text
//! cargo run -p session-cli --example make_sample -- [--force] <DIR>
//! ```
//!
//! `DIR` must not exist or be empty; `--force` replaces a previous sample there (it refuses
//! to remove a directory that does not look like a session store).
//!
//! Contents (workspace `/home/dev/acme-app` unless noted), one session per day from
//! 2026-10-20 to 2026-11-29:
//! * S1 — two runs: a plain question with a reasoning block, then a follow-up with tool calls
//!   (`shell`, whose result is the reference's JSON object with stdout, stderr and exit code;
//!   `read` of a Japanese file).
//! * S2 — a user message with an image part and Japanese/emoji text; a `view_image` tool.
//! * S3 — an errored run (rate-limit retry, then overload errors → `run.error`), then a run
//!   that succeeds; `llm.request.seq` continues across the runs.
//! * S4 — a run cancelled while a tool runs, then one cancelled while waiting for the model.
//! * S5 — a long run that triggers a compaction (`compaction_start/complete`, `run.context`).
//! * S6 — a crashed run: the writer is dropped mid-tool, then a cut fragment of the next record
//!   is appended without its newline (the planted damage: a torn tail).
//! * S7 — an old session in another workspace (`/home/dev/notes`).
//! * L1 — a legacy `state/<id>.json` snapshot with no `state.db` row and no run files.

// A command-line program: printing is its interface.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use session_jsonl::{Durability, RunWriter, WriterOptions};
use session_schema::{
    AgentEvent, AgentEventRecord, AssistantMessage, BaseMessage, CompactionCompleteEvent,
    CompactionStartEvent, ContentEvent, ContentPart, ErrorInfo, FailureKind, FunctionCall,
    FunctionTool, Header, HeaderTools, ImagePart, ImageUrl, Lazy, LlmRequest, LlmRequestInput,
    LlmResponse, LlmResponseOutput, LlmRetryEvent, MessageContent, ModelInfo, NameVersion, Num,
    PartsInput, Prompts, RawJson, ReasoningMessage, Record, RunContext, RunEnd, RunError, RunInput,
    RunOutcome, RunStart, RunStatus, RunStatusKind, RuntimeInfo, SessionState, StepCompleteEvent,
    StepStartEvent, StepStatus, TextEvent, TextInput, TextPart, Timestamp, ToolCall, ToolCallEvent,
    ToolDefinition, ToolMessage, ToolOutput, ToolResultEvent, UserMessage,
};
use session_state::StateStore;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const SYSTEM: &str = "You are a coding assistant working in the user's repository. Use the tools to inspect files before answering.";
const ACME: &str = "/home/dev/acme-app";

fn main() -> ExitCode {
    let mut force = false;
    let mut dir = None;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--force" => force = true,
            "-h" | "--help" => {
                eprintln!("usage: make_sample [--force] <DIR>");
                return ExitCode::SUCCESS;
            }
            _ => dir = Some(PathBuf::from(a)),
        }
    }
    let Some(dir) = dir else {
        eprintln!("usage: make_sample [--force] <DIR>");
        return ExitCode::from(2);
    };
    match prepare(&dir, force).and_then(|()| write_sample(&dir)) {
        Ok(()) => {
            println!("sample store written to {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("make_sample: {e}");
            ExitCode::from(4)
        }
    }
}

/// Makes sure `dir` is absent or empty; with `force`, removes a previous sample store.
fn prepare(dir: &Path, force: bool) -> Res<()> {
    if !dir.exists() {
        return Ok(());
    }
    let entries: Vec<_> = std::fs::read_dir(dir)?.flatten().collect();
    if entries.is_empty() {
        return Ok(());
    }
    if !force {
        return Err(format!(
            "{} is not empty (pass --force to replace a previous sample)",
            dir.display()
        )
        .into());
    }
    let looks_like_store = dir.join("state.db").is_file();
    let only_store_entries = entries.iter().all(|e| {
        let n = e.file_name().to_string_lossy().into_owned();
        n.chars().all(|c| c.is_ascii_digit())
            || [
                "state.db",
                "state.db-wal",
                "state.db-shm",
                "messages",
                "state",
                "trash",
            ]
            .contains(&n.as_str())
    });
    if !(looks_like_store && only_store_entries) {
        return Err(format!(
            "{} does not look like a session store; not removing it",
            dir.display()
        )
        .into());
    }
    std::fs::remove_dir_all(dir)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Small constructors.

fn ms(rfc3339: &str) -> i64 {
    Timestamp::from_raw(rfc3339).unix_millis().unwrap_or(0)
}

fn text(s: &str) -> MessageContent {
    MessageContent::Text(s.to_owned())
}

fn user(s: &str) -> BaseMessage {
    BaseMessage::User(UserMessage {
        content: text(s),
        ..Default::default()
    })
}

fn assistant(s: &str) -> BaseMessage {
    BaseMessage::Assistant(AssistantMessage {
        content: Some(text(s)),
        ..Default::default()
    })
}

fn reasoning(s: &str) -> BaseMessage {
    BaseMessage::Reasoning(ReasoningMessage {
        content: Some(s.to_owned()),
        ..Default::default()
    })
}

fn call(id: &str, name: &str, args: &str) -> BaseMessage {
    BaseMessage::Assistant(AssistantMessage {
        content: None,
        tool_calls: Some(vec![ToolCall {
            id: id.into(),
            call_type: Some("function".into()),
            function: FunctionCall {
                name: name.into(),
                arguments: args.into(),
                ..Default::default()
            },
            ..Default::default()
        }]),
        ..Default::default()
    })
}

fn tool_msg(id: &str, name: &str, content: MessageContent, is_error: bool) -> BaseMessage {
    BaseMessage::Tool(ToolMessage {
        tool_call_id: id.into(),
        tool_name: name.into(),
        content,
        is_error: is_error.then_some(true),
        ..Default::default()
    })
}

fn raw(json: &str) -> Res<RawJson> {
    Ok(RawJson::from_json(json)?)
}

fn tools() -> Res<Vec<ToolDefinition>> {
    let t = |name: &str, desc: &str, params: &str| -> Res<ToolDefinition> {
        Ok(ToolDefinition::Function(FunctionTool {
            name: name.into(),
            description: Some(desc.into()),
            parameters: Some(raw(params)?),
            strict: Some(false),
            ..Default::default()
        }))
    };
    Ok(vec![
        t(
            "shell",
            "Run a shell command in the sandbox and return its output.",
            r#"{"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false}"#,
        )?,
        t(
            "read",
            "Read a text file from the workspace with line numbers.",
            r#"{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"],"additionalProperties":false}"#,
        )?,
        t(
            "view_image",
            "Load an image file so the model can see it.",
            r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}"#,
        )?,
    ])
}

/// A session being written: its id, workspace and the durable history that is saved.
struct Session {
    id: String,
    workspace: String,
    invoke_seq: i64,
    history: Vec<BaseMessage>,
}

impl Session {
    fn new(id: &str, workspace: &str) -> Self {
        Session {
            id: id.into(),
            workspace: workspace.into(),
            invoke_seq: 0,
            history: Vec::new(),
        }
    }

    fn save(&self, store: &StateStore, run_id: &str, at: i64) -> Res<()> {
        let meta = serde_json::to_string(
            &serde_json::json!({ "codelia_workspace_root": self.workspace }),
        )?;
        store.save(&SessionState {
            schema_version: Some(Num::from(1u64)),
            session_id: self.id.clone(),
            updated_at: Timestamp::from_unix_millis(at),
            run_id: Some(run_id.into()),
            invoke_seq: Some(self.invoke_seq),
            messages: self.history.clone(),
            meta: Some(raw(&meta)?),
            ..Default::default()
        })?;
        Ok(())
    }
}

/// One run being written, with its own clock (milliseconds) and agent-event counter.
struct Run {
    w: RunWriter,
    id: String,
    now: i64,
    ev: i64,
    model: (&'static str, &'static str),
}

impl Run {
    fn start(
        root: &Path,
        s: &mut Session,
        id: &str,
        at: &str,
        model: (&'static str, &'static str),
        input: RunInput,
    ) -> Res<Run> {
        let now = ms(at);
        let header = Header {
            schema_version: 1,
            run_id: id.into(),
            session_id: Some(s.id.clone()),
            started_at: Timestamp::from_unix_millis(now),
            client: Some(NameVersion {
                name: "codelia-tui".into(),
                version: "0.1.0".into(),
                ..Default::default()
            }),
            server: Some(NameVersion {
                name: "codelia-runtime".into(),
                version: "0.1.80".into(),
                ..Default::default()
            }),
            model: Some(ModelInfo {
                provider: Some(model.0.into()),
                name: Some(model.1.into()),
                reasoning: Some("medium".into()),
                ..Default::default()
            }),
            prompts: Some(Prompts {
                system: Some(SYSTEM.into()),
                ..Default::default()
            }),
            tools: Some(HeaderTools {
                definitions: Some(Lazy::new(&tools()?)?),
                source: Some("runtime".into()),
                ..Default::default()
            }),
            runtime: Some(RuntimeInfo {
                os: Some("linux".into()),
                arch: Some("x64".into()),
                version: Some("0.1.80".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let w = RunWriter::create(
            root,
            &header,
            WriterOptions::with_durability(Durability::Flush),
        )?;
        let mut r = Run {
            w,
            id: id.into(),
            now,
            ev: 0,
            model,
        };
        let ts = r.tick(300);
        let user_msg = match &input {
            RunInput::Text(t) => user(&t.text),
            RunInput::Parts(p) => BaseMessage::User(UserMessage {
                content: MessageContent::Parts(p.parts.clone()),
                ..Default::default()
            }),
            _ => user(""),
        };
        r.w.append(&Record::RunStart(RunStart {
            run_id: id.into(),
            session_id: Some(s.id.clone()),
            ts,
            input,
            ..Default::default()
        }))?;
        s.history.push(user_msg);
        r.status(RunStatusKind::Running, None)?;
        Ok(r)
    }

    fn tick(&mut self, d: i64) -> Timestamp {
        self.now += d;
        Timestamp::from_unix_millis(self.now)
    }

    fn status(&mut self, status: RunStatusKind, message: Option<&str>) -> Res<()> {
        let ts = self.tick(2);
        self.w.append(&Record::RunStatus(RunStatus {
            run_id: self.id.clone(),
            ts,
            status,
            message: message.map(Into::into),
            ..Default::default()
        }))?;
        Ok(())
    }

    /// `llm.request` with the full history (system prompt first); returns its seq.
    fn request(&mut self, s: &mut Session) -> Res<i64> {
        s.invoke_seq += 1;
        let mut messages = vec![BaseMessage::System(session_schema::SystemMessage {
            content: text(SYSTEM),
            ..Default::default()
        })];
        messages.extend(s.history.iter().cloned());
        let ts = self.tick(40);
        self.w.append(&Record::LlmRequest(LlmRequest {
            run_id: self.id.clone(),
            ts,
            seq: s.invoke_seq,
            model: Some(ModelInfo {
                provider: Some(self.model.0.into()),
                name: Some(self.model.1.into()),
                ..Default::default()
            }),
            input: LlmRequestInput {
                messages: Lazy::new(&messages)?,
                tools: Some(Lazy::new(&Some(tools()?))?),
                tool_choice: Some(None),
                session_key: Some(s.id.clone()),
                ..Default::default()
            },
            ..Default::default()
        }))?;
        Ok(s.invoke_seq)
    }

    fn response(
        &mut self,
        s: &mut Session,
        seq: i64,
        out: Vec<BaseMessage>,
        tokens: (u64, u64),
        stop: &str,
    ) -> Res<()> {
        let ts = self.tick(1400);
        self.w.append(&Record::LlmResponse(LlmResponse {
            run_id: self.id.clone(),
            ts,
            seq,
            output: LlmResponseOutput {
                messages: Lazy::new(&out)?,
                usage: Some(Some(session_schema::Usage {
                    model: self.model.1.into(),
                    input_tokens: tokens.0,
                    input_cached_tokens: Some(Some(tokens.0 / 2)),
                    output_tokens: tokens.1,
                    total_tokens: tokens.0 + tokens.1,
                    ..Default::default()
                })),
                stop_reason: Some(Some(stop.into())),
                provider_meta: Some(RawJson::null()),
                ..Default::default()
            },
            ..Default::default()
        }))?;
        s.history.extend(out);
        Ok(())
    }

    fn event(&mut self, event: AgentEvent) -> Res<()> {
        let ts = self.tick(5);
        let seq = self.ev;
        self.ev += 1;
        self.w.append(&Record::AgentEvent(AgentEventRecord {
            run_id: self.id.clone(),
            ts,
            seq,
            event,
            ..Default::default()
        }))?;
        Ok(())
    }

    fn epoch(&self) -> Num {
        Num::from(self.now)
    }

    /// A tool call, its `tool.output` and the step events around it; the result goes into
    /// the history as a tool message.
    fn tool(
        &mut self,
        s: &mut Session,
        id: &str,
        name: &str,
        args: &str,
        output: &str,
        is_error: bool,
    ) -> Res<()> {
        self.tool_call_only(id, name, args)?;
        self.tool_output(id, name, output, is_error)?;
        self.event(AgentEvent::ToolResult(ToolResultEvent {
            tool: Some(name.into()),
            result: Some(output.into()),
            tool_call_id: Some(id.into()),
            is_error: is_error.then_some(true),
            ..Default::default()
        }))?;
        self.event(AgentEvent::StepComplete(StepCompleteEvent {
            step_id: Some(format!("step-{id}")),
            status: Some(if is_error {
                StepStatus::Error
            } else {
                StepStatus::Completed
            }),
            duration_ms: Some(Num::from(180i64)),
            ..Default::default()
        }))?;
        s.history.push(tool_msg(id, name, text(output), is_error));
        Ok(())
    }

    fn tool_call_only(&mut self, id: &str, name: &str, args: &str) -> Res<()> {
        self.event(AgentEvent::StepStart(StepStartEvent {
            step_id: Some(format!("step-{id}")),
            title: Some(name.into()),
            step_number: Some(Num::from(self.ev)),
            ..Default::default()
        }))?;
        self.event(AgentEvent::ToolCall(ToolCallEvent {
            tool: Some(name.into()),
            args: Some(raw(args)?),
            tool_call_id: Some(id.into()),
            ..Default::default()
        }))?;
        Ok(())
    }

    fn tool_output(&mut self, id: &str, name: &str, output: &str, is_error: bool) -> Res<()> {
        let ts = self.tick(180);
        self.w.append(&Record::ToolOutput(ToolOutput {
            run_id: self.id.clone(),
            ts,
            tool: name.into(),
            tool_call_id: id.into(),
            result_raw: output.into(),
            is_error: is_error.then_some(true),
            ..Default::default()
        }))?;
        Ok(())
    }

    fn reasoning(&mut self, t: &str) -> Res<()> {
        let n = self.epoch();
        self.event(AgentEvent::Reasoning(TextEvent {
            content: Some(t.into()),
            timestamp: Some(n),
            ..Default::default()
        }))
    }

    fn text(&mut self, t: &str) -> Res<()> {
        let n = self.epoch();
        self.event(AgentEvent::Text(TextEvent {
            content: Some(t.into()),
            timestamp: Some(n),
            ..Default::default()
        }))
    }

    fn context(&mut self, left: i64) -> Res<()> {
        let ts = self.tick(1);
        self.w.append(&Record::RunContext(RunContext {
            run_id: self.id.clone(),
            ts,
            context_left_percent: Num::from(left),
            ..Default::default()
        }))?;
        Ok(())
    }

    fn finish_ok(mut self, s: &Session, store: &StateStore, final_text: &str) -> Res<()> {
        self.event(AgentEvent::Final(ContentEvent {
            content: Some(final_text.into()),
            ..Default::default()
        }))?;
        self.status(RunStatusKind::Completed, None)?;
        let ts = self.tick(3);
        self.w.append(&Record::RunEnd(RunEnd {
            run_id: self.id.clone(),
            ts,
            outcome: RunOutcome::Completed,
            final_text: Some(final_text.into()),
            ..Default::default()
        }))?;
        let at = self.now + 40;
        self.w.close()?;
        s.save(store, &self.id, at)
    }

    fn finish_cancelled(
        mut self,
        s: &Session,
        store: &StateStore,
        message: Option<&str>,
    ) -> Res<()> {
        self.status(RunStatusKind::Cancelled, message)?;
        let ts = self.tick(3);
        self.w.append(&Record::RunEnd(RunEnd {
            run_id: self.id.clone(),
            ts,
            outcome: RunOutcome::Cancelled,
            ..Default::default()
        }))?;
        let at = self.now + 40;
        self.w.close()?;
        s.save(store, &self.id, at)
    }
}

fn text_input(t: &str) -> RunInput {
    RunInput::Text(TextInput {
        text: t.into(),
        ..Default::default()
    })
}

// ---------------------------------------------------------------------------------------------
// The sessions.

fn write_sample(root: &Path) -> Res<()> {
    std::fs::create_dir_all(root)?;
    let store = StateStore::open(root)?;
    let sonnet = ("anthropic", "claude-sonnet-4-5");
    let gpt = ("openai", "gpt-5.1");

    // S1: plain question with reasoning, then a follow-up with tools.
    let mut s1 = Session::new("5a1e0001-0000-4000-8000-000000000001", ACME);
    let mut r = Run::start(
        root,
        &mut s1,
        "7a1e0001-0000-4000-8000-000000000101",
        "2026-11-24T09:12:03.120Z",
        sonnet,
        text_input("What does this project do? One sentence, please."),
    )?;
    let seq = r.request(&mut s1)?;
    r.response(
        &mut s1,
        seq,
        vec![
            reasoning("The README says it is a tiny greeting service."),
            assistant("acme-app is a tiny Node.js service that prints a personalised greeting."),
        ],
        (3120, 41),
        "end_turn",
    )?;
    r.reasoning("The README says it is a tiny greeting service.")?;
    r.context(98)?;
    r.finish_ok(
        &s1,
        &store,
        "acme-app is a tiny Node.js service that prints a personalised greeting.",
    )?;

    let mut r = Run::start(
        root,
        &mut s1,
        "7a1e0001-0000-4000-8000-000000000102",
        "2026-11-24T09:14:40.500Z",
        sonnet,
        text_input("List the files and show me the Japanese release notes."),
    )?;
    let seq = r.request(&mut s1)?;
    r.response(
        &mut s1,
        seq,
        vec![
            assistant("Let me look at the repository first."),
            call(
                "toolu_sample_0001",
                "shell",
                r#"{"command":"ls; cat CHANGELOG.md"}"#,
            ),
            call(
                "toolu_sample_0002",
                "read",
                r#"{"file_path":"docs/notes-ja.md"}"#,
            ),
        ],
        (3410, 88),
        "tool_use",
    )?;
    r.text("Let me look at the repository first.")?;
    r.tool(
        &mut s1,
        "toolu_sample_0001",
        "shell",
        r#"{"command":"ls; cat CHANGELOG.md"}"#,
        // The reference's shell result: a JSON object (`stdout`, `stderr`, `exit_code`, …).
        r#"{"key":"shell-5a1e0001","state":"completed","command":"ls; cat CHANGELOG.md","exit_code":1,"duration_ms":12,"stdout":"AGENTS.md\nREADME.md\ndocs\npackage.json\nsrc\n","stderr":"cat: CHANGELOG.md: No such file or directory\n"}"#,
        false,
    )?;
    r.tool(&mut s1, "toolu_sample_0002", "read", r#"{"file_path":"docs/notes-ja.md"}"#, "    1  # リリースノート 0.3.1\n    2  \n    3  - 挨拶メッセージを改善しました 🎉\n    4  - `slugify` を追加しました（英数字のみ対応）\n", false)?;
    let seq = r.request(&mut s1)?;
    let answer = "The repo holds README.md, AGENTS.md, docs/, src/ and package.json. The release notes (0.3.1) say the greeting was improved 🎉 and `slugify` was added (ASCII letters and digits only).";
    r.response(
        &mut s1,
        seq,
        vec![assistant(answer)],
        (3980, 72),
        "end_turn",
    )?;
    r.context(96)?;
    r.finish_ok(&s1, &store, answer)?;

    // S2: a user message with an image part, Japanese text and an emoji; view_image tool.
    let mut s2 = Session::new("5a1e0002-0000-4000-8000-000000000002", ACME);
    let parts = vec![
        ContentPart::Text(TextPart { text: Some("この画像は何ですか？ 🤔 ".into()), ..Default::default() }),
        ContentPart::ImageUrl(ImagePart {
            image_url: ImageUrl {
                url: "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEklEQVR4nGP4z8DAwMDAxMDAAAAeEgIC7C5ViwAAAABJRU5ErkJggg==".into(),
                media_type: Some("image/png".into()),
                ..Default::default()
            },
            ..Default::default()
        }),
        ContentPart::Text(TextPart { text: Some(" Compare it with assets/logo.png.".into()), ..Default::default() }),
    ];
    let mut r = Run::start(
        root,
        &mut s2,
        "7a1e0002-0000-4000-8000-000000000201",
        "2026-11-25T14:02:11.000Z",
        gpt,
        RunInput::Parts(PartsInput {
            parts,
            ..Default::default()
        }),
    )?;
    let seq = r.request(&mut s2)?;
    r.response(
        &mut s2,
        seq,
        vec![call(
            "call_sample_0003",
            "view_image",
            r#"{"path":"assets/logo.png"}"#,
        )],
        (2870, 25),
        "completed",
    )?;
    r.tool(
        &mut s2,
        "call_sample_0003",
        "view_image",
        r#"{"path":"assets/logo.png"}"#,
        "Image loaded: assets/logo.png\n[image]",
        false,
    )?;
    let seq = r.request(&mut s2)?;
    let answer = "どちらも同じ 4×4 ピクセルのロゴです。色も形も一致しています 👍";
    r.response(
        &mut s2,
        seq,
        vec![assistant(answer)],
        (3150, 38),
        "completed",
    )?;
    r.finish_ok(&s2, &store, answer)?;

    // S3: an errored run (retries, then run.error), then a successful one; seq continues.
    let mut s3 = Session::new("5a1e0003-0000-4000-8000-000000000003", ACME);
    let mut r = Run::start(
        root,
        &mut s3,
        "7a1e0003-0000-4000-8000-000000000301",
        "2026-11-26T08:30:00.000Z",
        sonnet,
        text_input("Summarize package.json."),
    )?;
    r.request(&mut s3)?;
    for (attempt, kind, status) in [
        (2, FailureKind::RateLimit, 429),
        (3, FailureKind::Overloaded, 529),
    ] {
        r.event(AgentEvent::LlmRetry(LlmRetryEvent {
            provider: Some("anthropic".into()),
            failure_kind: Some(kind),
            next_attempt: Some(Num::from(attempt as i64)),
            max_attempts: Some(Num::from(3i64)),
            delay_ms: Some(Num::from(1000i64)),
            delay_source: Some("retry-after".into()),
            status: Some(Num::from(status as i64)),
            ..Default::default()
        }))?;
    }
    let msg = "Anthropic request failed. Automatic retry attempts were exhausted.";
    r.status(RunStatusKind::Error, Some(msg))?;
    let ts = r.tick(2);
    r.w.append(&Record::RunError(RunError {
        run_id: r.id.clone(),
        ts,
        error: ErrorInfo {
            name: "ProviderFailureError".into(),
            message: msg.into(),
            provider: Some("anthropic".into()),
            status: Some(Num::from(529i64)),
            attempts: Some(Num::from(3i64)),
            max_attempts: Some(Num::from(3i64)),
            ..Default::default()
        },
        ..Default::default()
    }))?;
    let ts = r.tick(2);
    r.w.append(&Record::RunEnd(RunEnd {
        run_id: r.id.clone(),
        ts,
        outcome: RunOutcome::Error,
        ..Default::default()
    }))?;
    let at = r.now + 30;
    let id = r.id.clone();
    r.w.close()?;
    s3.save(&store, &id, at)?;
    let mut r = Run::start(
        root,
        &mut s3,
        "7a1e0003-0000-4000-8000-000000000302",
        "2026-11-26T08:31:15.000Z",
        sonnet,
        text_input("Try again please."),
    )?;
    let seq = r.request(&mut s3)?;
    let answer = "package.json declares acme-app 0.3.1 with a `start` script (`node src/index.js`) and no dependencies.";
    r.response(
        &mut s3,
        seq,
        vec![assistant(answer)],
        (2510, 33),
        "end_turn",
    )?;
    r.finish_ok(&s3, &store, answer)?;

    // S4: cancelled while a tool runs, then cancelled while waiting for the model.
    let mut s4 = Session::new("5a1e0004-0000-4000-8000-000000000004", ACME);
    let mut r = Run::start(
        root,
        &mut s4,
        "7a1e0004-0000-4000-8000-000000000401",
        "2026-11-27T17:45:00.000Z",
        sonnet,
        text_input("Run the slow integration check (sleep 30)."),
    )?;
    let seq = r.request(&mut s4)?;
    r.response(
        &mut s4,
        seq,
        vec![call(
            "toolu_sample_0004",
            "shell",
            r#"{"command":"sleep 30 && npm test"}"#,
        )],
        (2600, 30),
        "tool_use",
    )?;
    r.tool_call_only(
        "toolu_sample_0004",
        "shell",
        r#"{"command":"sleep 30 && npm test"}"#,
    )?;
    r.tool_output(
        "toolu_sample_0004",
        "shell",
        r#"{"state":"cancelled","command":"sleep 30 && npm test"}"#,
        true,
    )?;
    // The runtime drops the unanswered call from the saved history (compat notes §3).
    s4.history.pop();
    r.finish_cancelled(&s4, &store, None)?;
    let mut r = Run::start(
        root,
        &mut s4,
        "7a1e0004-0000-4000-8000-000000000402",
        "2026-11-27T17:46:10.000Z",
        sonnet,
        text_input("Never mind. What's in src/?"),
    )?;
    r.request(&mut s4)?;
    r.finish_cancelled(&s4, &store, Some("Operation aborted"))?;

    // S5: a long run with a compaction.
    let mut s5 = Session::new("5a1e0005-0000-4000-8000-000000000005", ACME);
    let mut r = Run::start(
        root,
        &mut s5,
        "7a1e0005-0000-4000-8000-000000000501",
        "2026-11-28T10:00:00.000Z",
        sonnet,
        text_input("Give me a detailed overview of the repository structure."),
    )?;
    let seq = r.request(&mut s5)?;
    let overview = "Overview: src/index.js is the entry point, src/utils/format.js holds formatGreeting and slugify, docs/ has the release notes in Japanese.";
    r.response(
        &mut s5,
        seq,
        vec![assistant(overview)],
        (172_160, 410),
        "end_turn",
    )?;
    r.context(14)?;
    let n = r.epoch();
    r.event(AgentEvent::CompactionStart(CompactionStartEvent {
        timestamp: Some(n),
        ..Default::default()
    }))?;
    let n = r.epoch();
    r.event(AgentEvent::CompactionComplete(CompactionCompleteEvent {
        timestamp: Some(n),
        compacted: Some(true),
        ..Default::default()
    }))?;
    r.context(94)?;
    // After compaction the durable history is the summary plus the last answer.
    s5.history = vec![
        user(
            "[codelia.compaction.summary] The user asked for an overview of acme-app; the entry point and helpers were described.",
        ),
        assistant(overview),
    ];
    r.finish_ok(&s5, &store, overview)?;

    // S6: a crashed run with a torn tail.
    let mut s6 = Session::new("5a1e0006-0000-4000-8000-000000000006", ACME);
    let mut r = Run::start(
        root,
        &mut s6,
        "7a1e0006-0000-4000-8000-000000000601",
        "2026-11-29T21:05:00.000Z",
        sonnet,
        text_input("Run the long build (sleep 20) and tell me when it is done."),
    )?;
    let seq = r.request(&mut s6)?;
    r.response(
        &mut s6,
        seq,
        vec![
            assistant("Starting the long build."),
            call(
                "toolu_sample_0005",
                "shell",
                r#"{"command":"sleep 20 && echo built"}"#,
            ),
        ],
        (2700, 36),
        "tool_use",
    )?;
    r.text("Starting the long build.")?;
    r.tool_call_only(
        "toolu_sample_0005",
        "shell",
        r#"{"command":"sleep 20 && echo built"}"#,
    )?;
    // The debounced save fired mid-run; its history has the dangling call stripped.
    let mut saved = Session::new(&s6.id, ACME);
    saved.invoke_seq = s6.invoke_seq;
    saved.history = s6.history[..s6.history.len() - 1].to_vec();
    saved.save(&store, &r.id, r.now + 20)?;
    let path = r.w.path().to_owned();
    let next = Record::ToolOutput(ToolOutput {
        run_id: r.id.clone(),
        ts: r.tick(20_000),
        tool: "shell".into(),
        tool_call_id: "toolu_sample_0005".into(),
        result_raw: r#"{"state":"completed","exit_code":0,"stdout":"built"}"#.into(),
        ..Default::default()
    });
    drop(r);
    // The planted damage: the process died in the middle of writing the next record.
    let line = session_schema::to_line(&next)?;
    let cut = &line[..line.len() * 3 / 5];
    let mut f = std::fs::OpenOptions::new().append(true).open(&path)?;
    std::io::Write::write_all(&mut f, cut)?;
    f.sync_all()?;

    // S7: an old session in another workspace.
    let mut s7 = Session::new("5a1e0007-0000-4000-8000-000000000007", "/home/dev/notes");
    let mut r = Run::start(
        root,
        &mut s7,
        "7a1e0007-0000-4000-8000-000000000701",
        "2026-10-20T07:55:00.000Z",
        gpt,
        text_input("What's on my todo list?"),
    )?;
    let seq = r.request(&mut s7)?;
    r.response(
        &mut s7,
        seq,
        vec![assistant(
            "Your list has one item: “Renew the domain (due Friday)”.",
        )],
        (1980, 21),
        "completed",
    )?;
    r.finish_ok(
        &s7,
        &store,
        "Your list has one item: “Renew the domain (due Friday)”.",
    )?;
    drop(store);

    // L1: a legacy snapshot written the way the reference's old versions wrote it.
    let legacy = SessionState {
        schema_version: Some(Num::from(1u64)),
        session_id: "5a1e00a1-0000-4000-8000-0000000000a1".into(),
        updated_at: Timestamp::from_raw("2026-10-02T08:15:30.120Z"),
        run_id: Some("7a1e00a1-0000-4000-8000-0000000000a1".into()),
        invoke_seq: Some(2),
        messages: vec![
            user("How do I run the tests?"),
            assistant("Run `npm test` from the repository root."),
        ],
        ..Default::default()
    };
    let mut text = serde_json::to_string_pretty(&legacy)?;
    text.push('\n');
    std::fs::write(
        root.join("state")
            .join(format!("{}.json", legacy.session_id)),
        text,
    )?;
    Ok(())
}

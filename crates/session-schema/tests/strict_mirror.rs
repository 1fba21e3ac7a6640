//! A strict, test-only mirror of the format with `deny_unknown_fields` everywhere: decoding every
//! fixture line through it fails as soon as the reference writes a field our types do not model,
//! so schema drift is noticed instead of silently carried in `extra`.
//!
//! The production types are tolerant on purpose; this mirror is the alarm. When it fails, model
//! the new field in `src/` and add it here.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
enum Record {
    #[serde(rename = "header")]
    Header {
        schema_version: u64,
        run_id: String,
        session_id: Option<String>,
        started_at: String,
        client: Option<NameVersion>,
        server: Option<NameVersion>,
        model: Option<Model>,
        prompts: Option<Prompts>,
        tools: Option<HeaderTools>,
        runtime: Option<Runtime>,
        meta: Option<Value>,
    },
    #[serde(rename = "run.start")]
    RunStart {
        run_id: String,
        session_id: Option<String>,
        ts: String,
        input: RunInput,
        ui_context: Option<UiContext>,
        meta: Option<Value>,
    },
    #[serde(rename = "run.context")]
    RunContext {
        run_id: String,
        ts: String,
        context_left_percent: f64,
        meta: Option<Value>,
    },
    #[serde(rename = "agent.event")]
    AgentEvent {
        run_id: String,
        ts: String,
        seq: i64,
        event: Event,
        meta: Option<Value>,
    },
    #[serde(rename = "tool.output")]
    ToolOutput {
        run_id: String,
        ts: String,
        tool: String,
        tool_call_id: String,
        result_raw: String,
        is_error: Option<bool>,
        output_ref: Option<OutputRef>,
        meta: Option<Value>,
    },
    #[serde(rename = "llm.request")]
    LlmRequest {
        run_id: String,
        ts: String,
        seq: i64,
        model: Option<Model>,
        input: RequestInput,
        meta: Option<Value>,
    },
    #[serde(rename = "llm.response")]
    LlmResponse {
        run_id: String,
        ts: String,
        seq: i64,
        output: ResponseOutput,
        meta: Option<Value>,
    },
    #[serde(rename = "run.status")]
    RunStatus {
        run_id: String,
        ts: String,
        status: String,
        message: Option<String>,
        meta: Option<Value>,
    },
    #[serde(rename = "run.error")]
    RunError {
        run_id: String,
        ts: String,
        error: ErrorInfo,
        meta: Option<Value>,
    },
    #[serde(rename = "run.end")]
    RunEnd {
        run_id: String,
        ts: String,
        outcome: String,
        #[serde(rename = "final")]
        final_text: Option<String>,
        meta: Option<Value>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NameVersion {
    name: String,
    version: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Model {
    provider: Option<String>,
    name: Option<String>,
    reasoning: Option<String>,
    fast: Option<bool>,
    source: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Prompts {
    system: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeaderTools {
    definitions: Option<Vec<ToolDef>>,
    source: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Runtime {
    cwd: Option<String>,
    os: Option<String>,
    arch: Option<String>,
    version: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ToolDef {
    Hosted(HostedTool),
    Function(FunctionTool),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HostedTool {
    #[serde(rename = "type")]
    kind: HostedTag,
    search_kind: Option<String>,
    name: String,
    provider: Option<String>,
    search_context_size: Option<String>,
    allowed_domains: Option<Vec<String>>,
    blocked_domains: Option<Vec<String>>,
    max_uses: Option<u64>,
    user_location: Option<Value>,
    allowed_x_handles: Option<Vec<String>>,
    excluded_x_handles: Option<Vec<String>>,
    from_date: Option<String>,
    to_date: Option<String>,
    enable_image_understanding: Option<bool>,
    enable_video_understanding: Option<bool>,
}

#[derive(Deserialize)]
enum HostedTag {
    #[serde(rename = "hosted_search")]
    HostedSearch,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FunctionTool {
    #[serde(rename = "type")]
    kind: Option<String>,
    name: String,
    description: Option<String>,
    parameters: Option<Value>,
    strict: Option<bool>,
}

#[derive(Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
enum RunInput {
    #[serde(rename = "text")]
    Text { text: String },
    #[serde(rename = "parts")]
    Parts { parts: Vec<Part> },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UiContext {
    cwd: Option<String>,
    workspace_root: Option<String>,
    active_file: Option<ActiveFile>,
    selection: Option<Selection>,
    extensions: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ActiveFile {
    path: String,
    language_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Selection {
    path: String,
    range: Range,
    selected_text: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Range {
    start: Position,
    end: Position,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Position {
    line: u64,
    column: u64,
}

#[derive(Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
enum Event {
    #[serde(rename = "text", alias = "reasoning")]
    Text { content: String, timestamp: f64 },
    #[serde(rename = "llm.retry")]
    Retry {
        provider: String,
        failure_kind: String,
        next_attempt: u64,
        max_attempts: u64,
        delay_ms: f64,
        delay_source: String,
        status: Option<u64>,
    },
    #[serde(rename = "step_start")]
    StepStart {
        step_id: String,
        title: String,
        step_number: u64,
    },
    #[serde(rename = "tool_call")]
    ToolCall {
        tool: String,
        args: Value,
        raw_args: Option<String>,
        tool_call_id: String,
        display_name: Option<String>,
    },
    #[serde(rename = "tool_result")]
    ToolResult {
        tool: String,
        result: String,
        tool_call_id: String,
        is_error: Option<bool>,
        screenshot_base64: Option<Option<String>>,
    },
    #[serde(rename = "step_complete")]
    StepComplete {
        step_id: String,
        status: String,
        duration_ms: f64,
    },
    #[serde(rename = "compaction_start")]
    CompactionStart { timestamp: f64 },
    #[serde(rename = "compaction_complete")]
    CompactionComplete { timestamp: f64, compacted: bool },
    #[serde(rename = "final")]
    Final { content: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputRef {
    id: String,
    byte_size: Option<u64>,
    line_count: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestInput {
    messages: Vec<Message>,
    tools: Option<Vec<ToolDef>>,
    tool_choice: Option<String>,
    model: Option<String>,
    session_key: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResponseOutput {
    messages: Vec<Message>,
    usage: Option<Usage>,
    stop_reason: Option<String>,
    provider_meta: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Usage {
    model: String,
    provider_model: Option<String>,
    input_tokens: u64,
    input_cached_tokens: Option<u64>,
    input_cache_creation_tokens: Option<u64>,
    input_image_tokens: Option<u64>,
    output_tokens: u64,
    total_tokens: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorInfo {
    name: String,
    message: String,
    stack: Option<String>,
    provider: Option<String>,
    kind: Option<String>,
    status: Option<u64>,
    attempts: Option<u64>,
    max_attempts: Option<u64>,
}

#[derive(Deserialize)]
#[serde(tag = "role", deny_unknown_fields)]
enum Message {
    #[serde(rename = "system")]
    System {
        content: Content,
        name: Option<String>,
        cache: Option<bool>,
    },
    #[serde(rename = "user")]
    User {
        content: Content,
        name: Option<String>,
    },
    #[serde(rename = "assistant")]
    Assistant {
        content: Option<Content>,
        name: Option<String>,
        tool_calls: Option<Vec<ToolCall>>,
        refusal: Option<String>,
    },
    #[serde(rename = "tool")]
    Tool {
        tool_call_id: String,
        tool_name: String,
        content: Content,
        is_error: Option<bool>,
        output_ref: Option<OutputRef>,
        trimmed: Option<bool>,
    },
    #[serde(rename = "reasoning")]
    Reasoning {
        content: Option<String>,
        raw_item: Option<Value>,
    },
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
enum Part {
    #[serde(rename = "text")]
    Text { text: String },
    #[serde(rename = "image_url")]
    Image { image_url: ImageUrl },
    #[serde(rename = "document")]
    Document { source: DocSource },
    #[serde(rename = "other")]
    Other {
        provider: String,
        kind: String,
        payload: Value,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImageUrl {
    url: String,
    detail: Option<String>,
    media_type: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DocSource {
    data: String,
    media_type: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCall {
    id: String,
    #[serde(rename = "type")]
    kind: Option<String>,
    function: FunctionCall,
    provider_meta: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FunctionCall {
    name: String,
    arguments: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LegacyState {
    schema_version: Option<u64>,
    session_id: String,
    updated_at: String,
    run_id: Option<String>,
    invoke_seq: Option<i64>,
    messages: Vec<Message>,
    meta: Option<Value>,
}

fn fixture_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            fixture_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn fixtures_contain_no_field_the_types_do_not_model() {
    let root = session_test_support::testdata_dir();
    let mut files = Vec::new();
    fixture_files(&root, &mut files);
    let mut checked = 0;
    for path in files {
        let name = path.to_string_lossy().into_owned();
        if !name.ends_with(".json") && !name.ends_with(".jsonl") || name.ends_with("expected.json")
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        if name.ends_with(".json") && path.parent().is_some_and(|p| p.ends_with("state")) {
            serde_json::from_str::<LegacyState>(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            checked += 1;
            continue;
        }
        if !name.ends_with(".jsonl") {
            continue;
        }
        let is_messages = path.parent().is_some_and(|p| p.ends_with("messages"));
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.is_empty()) {
            let result = if is_messages {
                serde_json::from_str::<Message>(line).map(drop)
            } else {
                serde_json::from_str::<Record>(line).map(drop)
            };
            result.unwrap_or_else(|e| panic!("{name}:{}: unmodelled field or shape: {e}", i + 1));
            checked += 1;
        }
    }
    assert!(checked >= 352, "{checked}");
}

#[test]
fn the_mirror_catches_a_new_field() {
    let line = r#"{"type":"run.end","run_id":"r","ts":"t","outcome":"completed","brand_new":1}"#;
    assert!(serde_json::from_str::<Record>(line).is_err());
    let line = r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"n","arguments":"{}","strict":true}}]}"#;
    assert!(serde_json::from_str::<Message>(line).is_err());
}

//! `BaseMessage` and its parts (compat notes §1.3): what `llm.request.input.messages`,
//! `llm.response.output.messages`, `SessionState.messages` and every line of
//! `messages/<session_id>.jsonl` hold.

use std::fmt;

use serde::de::{Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::raw::RawJson;

json_union! {
    /// One conversation message, discriminated by `role`.
    pub enum BaseMessage tag "role" {
        /// System prompt or system reminder.
        "system" => System(SystemMessage),
        /// User input.
        "user" => User(UserMessage),
        /// Model output: text and/or one tool call (providers' items are split one per message).
        "assistant" => Assistant(AssistantMessage),
        /// A tool result answering an assistant tool call.
        "tool" => Tool(ToolMessage),
        /// Provider reasoning (thinking) kept for replay.
        "reasoning" => Reasoning(ReasoningMessage),
    }
}

impl Default for BaseMessage {
    fn default() -> Self {
        BaseMessage::User(UserMessage::default())
    }
}

impl BaseMessage {
    /// The role as written (`system`, `user`, …, or an unknown role).
    pub fn role(&self) -> &str {
        self.tag()
    }

    /// The tool calls of an assistant message (empty for every other role).
    pub fn tool_calls(&self) -> &[ToolCall] {
        match self {
            BaseMessage::Assistant(m) => m.tool_calls.as_deref().unwrap_or(&[]),
            _ => &[],
        }
    }

    /// The message content, when the role has one and it is not `null`.
    pub fn content(&self) -> Option<&MessageContent> {
        match self {
            BaseMessage::System(m) => Some(&m.content),
            BaseMessage::User(m) => Some(&m.content),
            BaseMessage::Assistant(m) => m.content.as_ref(),
            BaseMessage::Tool(m) => Some(&m.content),
            BaseMessage::Reasoning(_) | BaseMessage::Unknown(_) => None,
        }
    }
}

json_object! {
    /// `{role:"system", content, name?, cache?}`.
    pub struct SystemMessage {
        /// Text or text parts.
        "content" => content: req MessageContent,
        /// Optional participant name.
        "name" => name: opt String,
        /// Provider prompt-cache hint.
        "cache" => cache: opt bool,
    }
}

json_object! {
    /// `{role:"user", content, name?}`.
    pub struct UserMessage {
        /// Text or content parts (text, images, documents, provider items).
        "content" => content: req MessageContent,
        /// Optional participant name.
        "name" => name: opt String,
    }
}

json_object! {
    /// `{role:"assistant", content, name?, tool_calls?, refusal?}`.
    pub struct AssistantMessage {
        /// Text, parts, or `null` (a pure tool-call message).
        "content" => content: req Option<MessageContent>,
        /// Optional participant name.
        "name" => name: opt String,
        /// Tool calls; the reference writes one per message.
        "tool_calls" => tool_calls: opt Vec<ToolCall>,
        /// Provider refusal text (`null` allowed).
        "refusal" => refusal: opt Option<String>,
    }
}

json_object! {
    /// `{role:"tool", tool_call_id, tool_name, content, is_error?, output_ref?, trimmed?}`.
    pub struct ToolMessage {
        /// The `ToolCall.id` this answers.
        "tool_call_id" => tool_call_id: req String,
        /// The tool's name.
        "tool_name" => tool_name: req String,
        /// The result as text or parts (possibly a truncated copy, see `trimmed`).
        "content" => content: req MessageContent,
        /// Whether the tool failed.
        "is_error" => is_error: opt bool,
        /// Where the full output is cached.
        "output_ref" => output_ref: opt ToolOutputRef,
        /// The content is a trimmed copy of the output.
        "trimmed" => trimmed: opt bool,
    }
}

json_object! {
    /// `{role:"reasoning", content, raw_item?}`.
    pub struct ReasoningMessage {
        /// Reasoning text or `null` (`"[redacted]"` for redacted thinking).
        "content" => content: req Option<String>,
        /// The provider-native item (opaque, needed to replay to the provider).
        "raw_item" => raw_item: opt RawJson,
    }
}

json_object! {
    /// `{id, type:"function", function:{name, arguments}, provider_meta?}`.
    pub struct ToolCall {
        /// Call id, answered by `ToolMessage.tool_call_id`.
        "id" => id: req String,
        /// Always `"function"` in practice.
        "type" => call_type: opt String,
        /// Name and JSON-text arguments.
        "function" => function: req FunctionCall,
        /// The raw provider item (opaque).
        "provider_meta" => provider_meta: opt RawJson,
    }
}

json_object! {
    /// `{name, arguments}` of a tool call; `arguments` is JSON *text*.
    pub struct FunctionCall {
        /// Tool name.
        "name" => name: req String,
        /// Arguments as a JSON document in a string.
        "arguments" => arguments: req String,
    }
}

json_object! {
    /// `{id, byte_size?, line_count?}`: a reference into the tool-output cache (compat §2.14).
    pub struct ToolOutputRef {
        /// Cache file id (`tool_call_id` with `[^a-zA-Z0-9_-]` replaced by `_`).
        "id" => id: req String,
        /// Size of the output in UTF-8 bytes.
        "byte_size" => byte_size: opt u64,
        /// `content.split(/\r?\n/).length` (so `"a\n"` counts 2).
        "line_count" => line_count: opt u64,
    }
}

/// Message content: a plain string or a list of parts.
#[derive(Debug, Clone, PartialEq)]
pub enum MessageContent {
    /// `"content": "..."`.
    Text(String),
    /// `"content": [ {type:...}, ... ]`.
    Parts(Vec<ContentPart>),
}

impl Default for MessageContent {
    fn default() -> Self {
        MessageContent::Text(String::new())
    }
}

impl Serialize for MessageContent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            MessageContent::Text(s) => serializer.serialize_str(s),
            MessageContent::Parts(p) => p.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for MessageContent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ContentVisitor;
        impl<'de> Visitor<'de> for ContentVisitor {
            type Value = MessageContent;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of content parts")
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(MessageContent::Text(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(MessageContent::Text(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut parts = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(p) = seq.next_element()? {
                    parts.push(p);
                }
                Ok(MessageContent::Parts(parts))
            }
        }
        deserializer.deserialize_any(ContentVisitor)
    }
}

json_union! {
    /// One part of a multi-part content, discriminated by `type`.
    pub enum ContentPart tag "type" {
        /// `{type:"text", text}`.
        "text" => Text(TextPart),
        /// `{type:"image_url", image_url:{url, detail?, media_type?}}`.
        "image_url" => ImageUrl(ImagePart),
        /// `{type:"document", source:{data, media_type}}`.
        "document" => Document(DocumentPart),
        /// `{type:"other", provider, kind, payload}`: a provider item the format does not model.
        "other" => Other(OtherPart),
    }
}

json_object! {
    /// `{type:"text", text}`. A missing `text` reads as `None` (rendered as empty).
    pub struct TextPart {
        /// The text.
        "text" => text: opt String,
    }
}

json_object! {
    /// `{type:"image_url", image_url}`.
    pub struct ImagePart {
        /// The image reference.
        "image_url" => image_url: req ImageUrl,
    }
}

open_enum! {
    /// Image detail level requested from the provider.
    pub enum ImageDetail {
        /// Provider decides.
        Auto = "auto",
        /// Low resolution.
        Low = "low",
        /// High resolution.
        High = "high",
    }
}

json_object! {
    /// `{url, detail?, media_type?}`; `url` is often a `data:` URL.
    pub struct ImageUrl {
        /// `https:` or `data:` URL.
        "url" => url: req String,
        /// Detail level.
        "detail" => detail: opt ImageDetail,
        /// `image/png`, `image/jpeg`, `image/webp`, `image/gif`, or another type.
        "media_type" => media_type: opt String,
    }
}

json_object! {
    /// `{type:"document", source}`.
    pub struct DocumentPart {
        /// Document data.
        "source" => source: req DocumentSource,
    }
}

json_object! {
    /// `{data, media_type}` (base64 data, `application/pdf`).
    pub struct DocumentSource {
        /// Base64 data.
        "data" => data: req String,
        /// Media type.
        "media_type" => media_type: opt String,
    }
}

json_object! {
    /// `{type:"other", provider, kind, payload}`.
    pub struct OtherPart {
        /// Provider name.
        "provider" => provider: opt String,
        /// Provider item kind.
        "kind" => kind: opt String,
        /// The item (opaque).
        "payload" => payload: opt RawJson,
    }
}

impl MessageContent {
    /// Display-mode stringification (`stringifyContent(content, {mode:"display"})`, compat
    /// notes §2.10): strings verbatim; parts mapped text → text, `image_url` → `[image]`,
    /// `document` → `[document]`, `other` → `[other:<provider>/<kind>]`, unknown → `[content]`,
    /// joined with no separator; an empty result falls back to the compact JSON of the content.
    pub fn display_string(&self) -> String {
        match self {
            MessageContent::Text(s) => s.clone(),
            MessageContent::Parts(parts) => {
                let mut out = String::new();
                for part in parts {
                    part.push_display(&mut out);
                }
                if out.is_empty() {
                    serde_json::to_string(self).unwrap_or_default()
                } else {
                    out
                }
            }
        }
    }

    /// Text parts and image placeholders only, without the JSON fallback: what the reference's
    /// `session.history` uses for a `hidden_user_message` (`"check this [image] please"`).
    pub fn plain_text(&self) -> String {
        match self {
            MessageContent::Text(s) => s.clone(),
            MessageContent::Parts(parts) => {
                let mut out = String::new();
                for part in parts {
                    part.push_display(&mut out);
                }
                out
            }
        }
    }
}

impl ContentPart {
    fn push_display(&self, out: &mut String) {
        match self {
            ContentPart::Text(t) => out.push_str(t.text.as_deref().unwrap_or("")),
            ContentPart::ImageUrl(_) => out.push_str("[image]"),
            ContentPart::Document(_) => out.push_str("[document]"),
            ContentPart::Other(o) => {
                out.push_str("[other:");
                out.push_str(o.provider.as_deref().unwrap_or("undefined"));
                out.push('/');
                out.push_str(o.kind.as_deref().unwrap_or("undefined"));
                out.push(']');
            }
            ContentPart::Unknown(_) => out.push_str("[content]"),
        }
    }
}

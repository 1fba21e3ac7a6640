//! Tool definitions and tool choice (compat notes §1.4).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::raw::{PairsAccess, RawJson};

/// A tool offered to the model.
///
/// The reference discriminates on `type === "hosted_search"`; anything else, including a missing
/// `type`, is a function tool. Function tools are persisted flat:
/// `{name, description, parameters, strict}`.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolDefinition {
    /// A function tool the runtime or client executes.
    Function(FunctionTool),
    /// A provider-hosted search tool.
    HostedSearch(HostedSearchTool),
}

json_object! {
    /// `{type?, name, description, parameters, strict?}`.
    pub struct FunctionTool {
        /// `"function"` or absent.
        "type" => tool_type: opt String,
        /// Tool name.
        "name" => name: req String,
        /// Description shown to the model.
        "description" => description: opt String,
        /// JSON Schema of the arguments (opaque).
        "parameters" => parameters: opt RawJson,
        /// Strict argument validation.
        "strict" => strict: opt bool,
    }
}

json_object! {
    /// `{type:"hosted_search", search_kind?, name, provider?, …}` (web or X search).
    pub struct HostedSearchTool {
        /// `"web"` or `"x"`.
        "search_kind" => search_kind: opt String,
        /// Tool name (`web_search`, `x_search`).
        "name" => name: req String,
        /// `openai`, `anthropic`, `openrouter`, `google`, `xai`, or another provider.
        "provider" => provider: opt String,
        /// `low`, `medium`, `high`.
        "search_context_size" => search_context_size: opt String,
        /// Only these domains.
        "allowed_domains" => allowed_domains: opt Vec<String>,
        /// Never these domains.
        "blocked_domains" => blocked_domains: opt Vec<String>,
        /// Search budget per request.
        "max_uses" => max_uses: opt u64,
        /// `{city?, country?, region?, timezone?}` (opaque).
        "user_location" => user_location: opt RawJson,
        /// X search: only these handles.
        "allowed_x_handles" => allowed_x_handles: opt Vec<String>,
        /// X search: never these handles.
        "excluded_x_handles" => excluded_x_handles: opt Vec<String>,
        /// X search: from date.
        "from_date" => from_date: opt String,
        /// X search: to date.
        "to_date" => to_date: opt String,
        /// X search: image understanding.
        "enable_image_understanding" => enable_image_understanding: opt bool,
        /// X search: video understanding.
        "enable_video_understanding" => enable_video_understanding: opt bool,
    }
}

impl ToolDefinition {
    /// The tool's name.
    pub fn name(&self) -> &str {
        match self {
            ToolDefinition::Function(t) => &t.name,
            ToolDefinition::HostedSearch(t) => &t.name,
        }
    }
}

impl Serialize for ToolDefinition {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolDefinition::Function(t) => t.serialize(serializer),
            ToolDefinition::HostedSearch(t) => {
                use serde::ser::SerializeMap;
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("type", "hosted_search")?;
                t.serialize_fields(&mut map)?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for ToolDefinition {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let pairs: Vec<(String, RawJson)> = {
            struct PairsVisitor;
            impl<'de> serde::de::Visitor<'de> for PairsVisitor {
                type Value = Vec<(String, RawJson)>;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a tool definition object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Self::Value, A::Error> {
                    let mut pairs = Vec::new();
                    crate::raw::buffer_map(&mut map, &mut pairs)?;
                    Ok(pairs)
                }
            }
            deserializer.deserialize_map(PairsVisitor)?
        };
        let type_pos = pairs.iter().position(|(k, _)| k == "type");
        let hosted = type_pos.is_some_and(|p| pairs[p].1.get() == "\"hosted_search\"");
        if hosted {
            let mut access = PairsAccess::new(&pairs, type_pos);
            HostedSearchTool::visit_fields(&mut access)
                .map(ToolDefinition::HostedSearch)
                .map_err(D::Error::custom)
        } else {
            let mut access = PairsAccess::new(&pairs, None);
            FunctionTool::visit_fields(&mut access)
                .map(ToolDefinition::Function)
                .map_err(D::Error::custom)
        }
    }
}

open_enum! {
    /// `tool_choice`: `"auto"`, `"required"`, `"none"`, or the name of one tool (as `Other`).
    pub enum ToolChoice {
        /// The model decides.
        Auto = "auto",
        /// The model must call a tool.
        Required = "required",
        /// No tool calls.
        None = "none",
    }
}

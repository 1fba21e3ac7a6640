//! JSON Schema of the record union (feature `json-schema`), emitted by `cargo xtask schema`.
//!
//! Open sets are marked: unions carry `"x-open": true` (unknown tags are kept) and open string
//! enums are `anyOf [{enum: known}, {type: string}]`. `x-schema-version` is the header's
//! `schema_version`; the breaking-change check in xtask compares it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::message::MessageContent;
use crate::number::Num;
use crate::raw::{Lazy, RawJson};
use crate::record::{Record, SCHEMA_VERSION};
use crate::state::{SessionState, SessionStateSummary};
use crate::timestamp::Timestamp;

/// A type that can describe itself as JSON Schema.
pub trait Describe {
    /// Name under `$defs` for named types; `None` inlines the schema.
    fn type_name() -> Option<&'static str> {
        None
    }
    /// The schema of the type.
    fn describe(generator: &mut Generator) -> Value;
}

/// Collects named definitions while schemas are generated.
#[derive(Debug, Default)]
pub struct Generator {
    defs: BTreeMap<String, Value>,
}

impl Generator {
    /// The schema of `T`: a `$ref` for named types (generated once), inline otherwise.
    pub fn subschema<T: Describe>(&mut self) -> Value {
        match T::type_name() {
            Some(name) => {
                if !self.defs.contains_key(name) {
                    self.defs.insert(name.to_owned(), Value::Null);
                    let schema = T::describe(self);
                    self.defs.insert(name.to_owned(), schema);
                }
                json!({ "$ref": format!("#/$defs/{name}") })
            }
            None => T::describe(self),
        }
    }

    /// A union variant: `T`'s schema plus the tag key fixed to `value`.
    pub fn tagged_variant<T: Describe>(&mut self, tag: &str, value: &str) -> Value {
        let inner = self.subschema::<T>();
        json!({
            "allOf": [
                { "type": "object", "properties": { tag: { "const": value } }, "required": [tag] },
                inner,
            ]
        })
    }
}

/// The complete schema document: the `Record` union (one run-log line), plus `SessionState`
/// and `SessionStateSummary` under `$defs`.
pub fn schema_document() -> Value {
    let mut generator = Generator::default();
    let root = generator.subschema::<Record>();
    generator.subschema::<SessionState>();
    generator.subschema::<SessionStateSummary>();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "session-store run-log record",
        "x-schema-version": SCHEMA_VERSION,
        "$ref": root["$ref"],
        "$defs": generator.defs,
    })
}

macro_rules! simple {
    ($($ty:ty => $schema:expr),* $(,)?) => {
        $(
            impl Describe for $ty {
                fn describe(_generator: &mut Generator) -> Value {
                    $schema
                }
            }
        )*
    };
}

simple! {
    String => json!({ "type": "string" }),
    bool => json!({ "type": "boolean" }),
    u64 => json!({ "type": "integer", "minimum": 0 }),
    i64 => json!({ "type": "integer" }),
    Num => json!({ "type": "number" }),
    Timestamp => json!({ "type": "string", "format": "date-time" }),
    RawJson => json!({}),
}

impl<T: Describe> Describe for Option<T> {
    fn describe(generator: &mut Generator) -> Value {
        json!({ "anyOf": [generator.subschema::<T>(), { "type": "null" }] })
    }
}

impl<T: Describe> Describe for Vec<T> {
    fn describe(generator: &mut Generator) -> Value {
        json!({ "type": "array", "items": generator.subschema::<T>() })
    }
}

impl<T: Describe> Describe for Lazy<T> {
    fn describe(generator: &mut Generator) -> Value {
        generator.subschema::<T>()
    }
}

/// A tool definition: a function tool, or a hosted search tool tagged `"type": "hosted_search"`.
impl Describe for crate::tool::ToolDefinition {
    fn type_name() -> Option<&'static str> {
        Some("ToolDefinition")
    }
    fn describe(generator: &mut Generator) -> serde_json::Value {
        let hosted =
            generator.tagged_variant::<crate::tool::HostedSearchTool>("type", "hosted_search");
        let function = generator.subschema::<crate::tool::FunctionTool>();
        serde_json::json!({ "anyOf": [function, hosted] })
    }
}

impl Describe for MessageContent {
    fn type_name() -> Option<&'static str> {
        Some("MessageContent")
    }
    fn describe(generator: &mut Generator) -> Value {
        let parts = generator.subschema::<Vec<crate::message::ContentPart>>();
        json!({ "anyOf": [{ "type": "string" }, parts] })
    }
}

//! `cargo xtask schema [--check]`: the committed JSON Schema and the breaking-change check.
//!
//! Breaking (fails `--check` unless `x-schema-version` grew): a type or field removed, an
//! optional field made required, a new required field, an enum value or union variant removed, a
//! field's type changed. Additive changes (new optional fields, new types, new enum values or
//! variants) pass and are listed.

use std::path::PathBuf;

use serde_json::Value;

use crate::Result;

fn schema_path() -> PathBuf {
    crate::project_root()
        .join("schema")
        .join("session-record.schema.json")
}

fn generate() -> Result<Value> {
    let out = crate::cargo()
        .args([
            "run",
            "-q",
            "-p",
            "session-schema",
            "--features",
            "json-schema",
            "--example",
            "emit_schema",
        ])
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "emit_schema failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// `cargo xtask schema cli [--check]`: the JSON Schema of the `--json` lines of `sessions`,
/// printed by session-cli's `emit_json_schema` example, written to (or, with `--check`,
/// compared with) `docs/cli-json.schema.json`.
pub(crate) fn run_cli(check: bool) -> Result<()> {
    let out = crate::cargo()
        .args([
            "run",
            "-q",
            "-p",
            "session-cli",
            "--example",
            "emit_json_schema",
        ])
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "emit_json_schema failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let new: Value = serde_json::from_slice(&out.stdout)?;
    let path = crate::project_root()
        .join("docs")
        .join("cli-json.schema.json");
    let text = format!("{}\n", serde_json::to_string_pretty(&new)?);
    if check {
        let old = std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: {e} (run `cargo xtask schema cli`)", path.display()))?;
        if old != text {
            return Err(
                format!("{} is stale: run `cargo xtask schema cli`", path.display()).into(),
            );
        }
        println!("cli schema unchanged");
        return Ok(());
    }
    std::fs::write(&path, text)?;
    println!("wrote {}", path.display());
    Ok(())
}

pub(crate) fn run(check: bool) -> Result<()> {
    let new = generate()?;
    let path = schema_path();
    if !check {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, format!("{}\n", serde_json::to_string_pretty(&new)?))?;
        println!("wrote {}", path.display());
        return Ok(());
    }
    let old: Value = serde_json::from_str(&std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "{}: {e} (run `cargo xtask schema` to create it)",
            path.display()
        )
    })?)?;
    let report = compare(&old, &new);
    for line in &report.additive {
        println!("additive: {line}");
    }
    if report.breaking.is_empty() {
        if old != new {
            println!("schema changed additively; run `cargo xtask schema` to commit the new one");
        } else {
            println!("schema unchanged");
        }
        return Ok(());
    }
    if version(&new) > version(&old) {
        println!(
            "breaking changes with schema_version {} -> {}:\n  {}",
            version(&old),
            version(&new),
            report.breaking.join("\n  ")
        );
        return Ok(());
    }
    Err(format!(
        "breaking schema changes without a schema_version bump (still {}):\n  {}",
        version(&new),
        report.breaking.join("\n  ")
    )
    .into())
}

fn version(doc: &Value) -> u64 {
    doc["x-schema-version"].as_u64().unwrap_or(0)
}

/// What changed between two schema documents.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) breaking: Vec<String>,
    pub(crate) additive: Vec<String>,
}

pub(crate) fn compare(old: &Value, new: &Value) -> Report {
    let mut report = Report::default();
    let empty = serde_json::Map::new();
    let old_defs = old["$defs"].as_object().unwrap_or(&empty);
    let new_defs = new["$defs"].as_object().unwrap_or(&empty);
    for (name, old_def) in old_defs {
        match new_defs.get(name) {
            None => report.breaking.push(format!("type {name} removed")),
            Some(new_def) => compare_node(old_def, new_def, name, &mut report),
        }
    }
    for name in new_defs.keys().filter(|n| !old_defs.contains_key(*n)) {
        report.additive.push(format!("type {name} added"));
    }
    if old["$ref"] != new["$ref"] {
        report.breaking.push("root type changed".to_owned());
    }
    report
}

/// A short signature of a schema node used to pair union alternatives and detect type changes.
fn signature(node: &Value) -> String {
    if let Some(r) = node["$ref"].as_str() {
        return format!("ref:{r}");
    }
    if let Some(c) = node.get("const") {
        return format!("const:{c}");
    }
    if let Some(all) = node["allOf"].as_array() {
        // A tagged union variant: its tag constant identifies it.
        let tags: Vec<String> = all
            .iter()
            .filter_map(|n| n["properties"].as_object())
            .flat_map(|p| {
                p.values()
                    .filter_map(|v| v.get("const").map(|c| c.to_string()))
            })
            .collect();
        if !tags.is_empty() {
            return format!("variant:{}", tags.join(","));
        }
    }
    if node.get("enum").is_some() {
        return "enum".to_owned();
    }
    if let Some(t) = node.get("type") {
        let items = node.get("items").map(signature).unwrap_or_default();
        return format!("type:{t}{items}");
    }
    if node.get("anyOf").is_some() {
        return "anyOf".to_owned();
    }
    "any".to_owned()
}

fn compare_node(old: &Value, new: &Value, path: &str, report: &mut Report) {
    if let Some(old_enum) = old["enum"].as_array() {
        let new_enum = new["enum"].as_array().cloned().unwrap_or_default();
        for v in old_enum {
            if !new_enum.contains(v) {
                report
                    .breaking
                    .push(format!("{path}: enum value {v} removed"));
            }
        }
        for v in &new_enum {
            if !old_enum.contains(v) {
                report
                    .additive
                    .push(format!("{path}: enum value {v} added"));
            }
        }
    }
    if old.get("const") != new.get("const") && old.get("const").is_some() {
        report.breaking.push(format!("{path}: constant changed"));
    }
    if old.get("$ref") != new.get("$ref") && old.get("$ref").is_some() {
        report.breaking.push(format!("{path}: type changed"));
    }
    if old.get("type") != new.get("type") && old.get("type").is_some() {
        report.breaking.push(format!(
            "{path}: type changed from {} to {}",
            old["type"], new["type"]
        ));
    }
    if let (Some(o), Some(n)) = (old.get("items"), new.get("items")) {
        compare_node(o, n, &format!("{path}[]"), report);
    }
    for key in ["anyOf", "allOf"] {
        if let Some(old_alts) = old[key].as_array() {
            let new_alts = new[key].as_array().cloned().unwrap_or_default();
            for o in old_alts {
                let sig = signature(o);
                match new_alts.iter().find(|n| signature(n) == sig) {
                    Some(n) => compare_node(o, n, &format!("{path}|{sig}"), report),
                    None => report
                        .breaking
                        .push(format!("{path}: alternative {sig} removed or changed")),
                }
            }
            for n in &new_alts {
                let sig = signature(n);
                if !old_alts.iter().any(|o| signature(o) == sig) {
                    report
                        .additive
                        .push(format!("{path}: alternative {sig} added"));
                }
            }
        }
    }
    let empty = serde_json::Map::new();
    let old_props = old["properties"].as_object().unwrap_or(&empty);
    let new_props = new["properties"].as_object().unwrap_or(&empty);
    let required = |v: &Value| -> Vec<String> {
        v["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str().map(str::to_owned))
            .collect()
    };
    let old_req = required(old);
    let new_req = required(new);
    for (name, o) in old_props {
        match new_props.get(name) {
            None => report
                .breaking
                .push(format!("{path}.{name}: field removed")),
            Some(n) => compare_node(o, n, &format!("{path}.{name}"), report),
        }
    }
    for name in &new_req {
        if old_req.contains(name) {
            continue;
        }
        if old_props.contains_key(name) {
            report
                .breaking
                .push(format!("{path}.{name}: optional field became required"));
        } else {
            report
                .breaking
                .push(format!("{path}.{name}: new required field"));
        }
    }
    for name in new_props.keys().filter(|n| !old_props.contains_key(*n)) {
        if !new_req.contains(name) {
            report
                .additive
                .push(format!("{path}.{name}: optional field added"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(version: u64, defs: Value) -> Value {
        json!({ "x-schema-version": version, "$ref": "#/$defs/Record", "$defs": defs })
    }

    fn run_end(extra_props: Value, required: Value, outcome_enum: Value) -> Value {
        let mut props = json!({
            "run_id": { "type": "string" },
            "outcome": { "anyOf": [{ "enum": outcome_enum }, { "type": "string" }] },
            "final": { "type": "string" },
        });
        for (k, v) in extra_props.as_object().unwrap() {
            props[k] = v.clone();
        }
        json!({ "Record": { "anyOf": [ { "allOf": [
                    { "type": "object", "properties": { "type": { "const": "run.end" } }, "required": ["type"] },
                    { "$ref": "#/$defs/RunEnd" } ] } ] },
                "RunEnd": { "type": "object", "properties": props, "required": required } })
    }

    fn base() -> Value {
        doc(
            1,
            run_end(
                json!({}),
                json!(["run_id", "outcome"]),
                json!(["completed", "error"]),
            ),
        )
    }

    #[test]
    fn identical_schemas_have_no_changes() {
        let r = compare(&base(), &base());
        assert!(r.breaking.is_empty() && r.additive.is_empty(), "{r:?}");
    }

    #[test]
    fn additive_changes_pass() {
        let new = doc(
            1,
            run_end(
                json!({ "duration_ms": { "type": "number" } }),
                json!(["run_id", "outcome"]),
                json!(["completed", "error", "timed_out"]),
            ),
        );
        let r = compare(&base(), &new);
        assert!(r.breaking.is_empty(), "{r:?}");
        assert_eq!(r.additive.len(), 2, "{r:?}");
    }

    #[test]
    fn breaking_changes_are_found() {
        // Field removed, optional became required, enum value removed, type changed.
        let mut defs = run_end(
            json!({}),
            json!(["run_id", "outcome", "final"]),
            json!(["completed"]),
        );
        defs["RunEnd"]["properties"]
            .as_object_mut()
            .unwrap()
            .remove("run_id");
        defs["RunEnd"]["properties"]["final"] = json!({ "type": "integer" });
        let r = compare(&base(), &doc(1, defs));
        let text = r.breaking.join("\n");
        assert!(text.contains("RunEnd.run_id: field removed"), "{text}");
        assert!(
            text.contains("RunEnd.final: optional field became required"),
            "{text}"
        );
        assert!(text.contains("enum value \"error\" removed"), "{text}");
        assert!(text.contains("RunEnd.final: type changed"), "{text}");
    }

    #[test]
    fn removed_variant_is_breaking() {
        let mut new = base();
        new["$defs"]["Record"]["anyOf"] = json!([]);
        let r = compare(&base(), &new);
        assert!(r.breaking.iter().any(|b| b.contains("variant")), "{r:?}");
    }

    #[test]
    fn committed_schema_matches_the_record_types() {
        // The committed file must parse and have the shape compare() expects.
        let text = std::fs::read_to_string(schema_path()).expect("schema/ is committed");
        let committed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(committed["x-schema-version"], 1);
        for name in [
            "Record",
            "Header",
            "LlmRequest",
            "BaseMessage",
            "SessionState",
        ] {
            assert!(committed["$defs"].get(name).is_some(), "{name} missing");
        }
    }
}

//! Prints the JSON Schema of the record union (pretty, stable key order) to stdout.
//!
//! Run through `cargo xtask schema`, which writes it to `schema/session-record.schema.json`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

fn main() {
    let doc = session_schema::json_schema::schema_document();
    match serde_json::to_string_pretty(&doc) {
        Ok(text) => println!("{text}"),
        Err(e) => {
            eprintln!("emit_schema: {e}");
            std::process::exit(1);
        }
    }
}

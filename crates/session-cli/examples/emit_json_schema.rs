//! Prints the JSON Schema of the `--json` lines of `sessions` (docs/cli-json.schema.json);
//! `cargo xtask schema cli` writes it there.
#![allow(clippy::print_stdout, clippy::print_stderr)]

fn main() {
    let schema = session_cli::json_schema();
    match serde_json::to_string_pretty(&schema) {
        Ok(text) => println!("{text}"),
        Err(e) => {
            eprintln!("emit_json_schema: {e}");
            std::process::exit(1);
        }
    }
}

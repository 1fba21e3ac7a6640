//! The `sessions` command-line tool (see the `session_cli` library for everything it does).
fn main() -> std::process::ExitCode {
    session_cli::main_with_std()
}

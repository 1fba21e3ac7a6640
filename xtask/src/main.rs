//! Project task runner: `cargo xtask <task>`.

fn main() {}

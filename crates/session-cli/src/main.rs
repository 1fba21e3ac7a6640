//! The `sessions` command-line tool.

fn main() {}

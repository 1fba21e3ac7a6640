//! Writes the man pages of `sessions` (`sessions.1` and one page per command, generated from
//! the command-line definition) into a directory, created when missing. `cargo xtask man DIR`
//! runs it.
//!
//! ```text
//! cargo run -p session-cli --example man -- target/man
//! man -l target/man/sessions-runs.1
//! ```

// A command-line program: printing is its interface.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(std::env::args_os().nth(1).ok_or("usage: man <directory>")?);
    std::fs::create_dir_all(&dir)?;
    let pages = session_cli::write_man_pages(&dir)?;
    for page in &pages {
        println!("{}", page.display());
    }
    Ok(())
}

//! The main job on the bundled sample store, without touching the repository: copies
//! `sample/sessions` to a temporary directory and runs `sessions runs`, `sessions show` on a run
//! with tool calls, and `sessions verify` there (the sample has one planted torn tail, so
//! `verify` reports exactly one problem).
//!
//! ```text
//! cargo run -q -p session-cli --example demo            # runs, show, verify
//! cargo run -q -p session-cli --example demo -- stats   # any other sessions command
//! ```

// A command-line program: printing is its interface.
#![allow(clippy::print_stderr)]

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use session_cli::{Env, Terminal};

fn copy_tree(src: &Path, dst: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dst)?;
    for e in std::fs::read_dir(src)? {
        let e = e?;
        let to = dst.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_tree(&e.path(), &to)?;
        } else {
            std::fs::copy(e.path(), &to)?;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let sample = session_test_support::sample_sessions_dir();
    let tmp = match tempfile::tempdir() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("demo: cannot create a temporary directory: {e}");
            return ExitCode::from(4);
        }
    };
    let root = tmp.path().join("sessions");
    if let Err(e) = copy_tree(&sample, &root) {
        eprintln!("demo: cannot copy {}: {e}", sample.display());
        return ExitCode::from(4);
    }
    let extra: Vec<String> = std::env::args().skip(1).collect();
    let commands: Vec<Vec<String>> = if extra.is_empty() {
        vec![
            vec!["runs".into()],
            vec!["show".into(), "7a1e0001-0000-4000-8000-000000000102".into()],
            vec!["verify".into()],
        ]
    } else {
        vec![extra]
    };
    let env = Env::from_process();
    let term = Terminal::detect();
    let mut worst = 0;
    for args in commands {
        let mut out = std::io::stdout();
        // A closed pipe (`| head`) ends the demo quietly.
        if writeln!(
            out,
            "$ sessions --root {} {}",
            root.display(),
            args.join(" ")
        )
        .is_err()
        {
            break;
        }
        let mut argv: Vec<OsString> = vec![
            "sessions".into(),
            "--root".into(),
            root.clone().into_os_string(),
        ];
        argv.extend(args.into_iter().map(OsString::from));
        let mut err = std::io::stderr();
        let code = session_cli::run_with(argv, &mut out, &mut err, &env, term);
        worst = worst.max(code);
        if writeln!(out, "(exit status {code})\n").is_err() {
            break;
        }
    }
    // Exit status 1 is `verify` reporting the planted damage: the demo worked.
    if worst <= 1 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(u8::try_from(worst).unwrap_or(4))
    }
}

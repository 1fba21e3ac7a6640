//! The `sessions` command: inspect, verify, repair, export and clean up the session store of an
//! agent runtime (the reference layout of spec §2, compat notes §2.1).
//!
//! This crate is the only one in the workspace that prints or turns errors into exit codes. The
//! library layers do the work: session-jsonl reads and writes run files, session-state owns
//! `state.db`, the message logs and the run index, session-replay turns records into prompts,
//! transcripts, histories and statistics.
//!
//! [`run`] drives the tool in-process (tests use it with in-memory buffers); the binary calls
//! [`main_with_std`].
//!
//! Exit codes: 0 success, 1 `verify` found problems, 2 usage error, 3 not found, 4 data or I/O
//! error (see [`error`]).
//!
//! ```
//! use session_cli::{Env, Terminal, run_with};
//!
//! let env = Env::from_pairs([("HOME".to_owned(), "/home/dev".to_owned())]);
//! let (mut out, mut err) = (Vec::new(), Vec::new());
//! let code = run_with(["sessions", "where", "--json"].map(Into::into), &mut out, &mut err, &env, Terminal::default());
//! assert_eq!(code, session_cli::EXIT_OK);
//! let line = String::from_utf8(out).unwrap();
//! assert!(line.contains(r#""root":"/home/dev/.codelia/sessions""#));
//! assert!(line.contains(r#""source":"home""#));
//!
//! let (mut out, mut err) = (Vec::new(), Vec::new());
//! let code = run_with(["sessions", "runs", "--limit", "x"].map(Into::into), &mut out, &mut err, &env, Terminal::default());
//! assert_eq!(code, session_cli::EXIT_USAGE);
//! ```

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use clap::Parser;
use time::{OffsetDateTime, UtcOffset};

mod cli;
mod commands;
mod env;
pub mod error;
mod hooks;
mod html;
mod human;
mod jsonw;
mod progress;
mod redact;
mod root;
mod store;
mod style;
mod timefmt;

pub use env::Env;
pub use error::{CliError, EXIT_DATA, EXIT_NOT_FOUND, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE};

use cli::{Cli, ColorChoice, Command};
use style::Style;
use timefmt::TimeDisplay;

/// What the output streams are connected to.
#[derive(Debug, Clone, Copy, Default)]
pub struct Terminal {
    /// stdout is a terminal: colour may be used.
    pub stdout: bool,
    /// stderr is a terminal: progress bars may be drawn.
    pub stderr: bool,
}

impl Terminal {
    /// Detects the process's real stdout and stderr.
    pub fn detect() -> Self {
        Terminal {
            stdout: std::io::stdout().is_terminal(),
            stderr: std::io::stderr().is_terminal(),
        }
    }
}

/// Everything a command needs: output streams, settings and the resolved root.
pub(crate) struct Ctx<'a> {
    /// stdout; escaped for the terminal when the command's output is for people
    /// ([`human::stdout_is_human`]).
    pub(crate) out: &'a mut dyn Write,
    /// stderr; always escaped for the terminal ([`human::TerminalSafe`]).
    pub(crate) err: &'a mut dyn Write,
    pub(crate) style: Style,
    pub(crate) progress: bool,
    pub(crate) root: root::Root,
    pub(crate) local: UtcOffset,
    pub(crate) now: OffsetDateTime,
    /// `--read-only`: open the store read-only whatever the command.
    pub(crate) read_only: bool,
    /// Fault-injection hooks of the tests (none in normal use).
    pub(crate) hooks: hooks::Hooks,
}

impl Ctx<'_> {
    /// Local or UTC display as asked.
    pub(crate) fn times(&self, utc: bool) -> TimeDisplay {
        TimeDisplay {
            offset: if utc { UtcOffset::UTC } else { self.local },
        }
    }

    /// The current directory (for the default workspace of `sessions`).
    pub(crate) fn cwd(&self) -> Result<PathBuf, CliError> {
        std::env::current_dir().map_err(|e| CliError::io(".", e))
    }

    /// A warning line on stderr (`sessions: warning: …`). Failures to write it are ignored:
    /// stderr is the last resort.
    pub(crate) fn warn(&mut self, msg: &str) {
        let _ = writeln!(self.err, "sessions: warning: {msg}");
    }
}

/// Runs the tool with `args` (including the program name, like `std::env::args_os`), writing to
/// `stdout` and `stderr`, with the process environment, and returns the exit code.
///
/// The streams are treated as non-terminals: no colour (unless `--color always`), no progress
/// bars.
pub fn run(
    args: impl IntoIterator<Item = OsString>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> i32 {
    run_with(
        args,
        stdout,
        stderr,
        &Env::from_process(),
        Terminal::default(),
    )
}

/// [`run`] with an explicit environment and terminal flags.
pub fn run_with(
    args: impl IntoIterator<Item = OsString>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
    env: &Env,
    term: Terminal,
) -> i32 {
    // Everything on stderr is for people (warnings, errors, usage): escaped for the terminal.
    let mut safe_err = human::TerminalSafe::new(stderr, human::Mode::Human { color: false });
    let stderr: &mut dyn Write = &mut safe_err;
    // The local offset must be read before any thread starts (the `time` crate refuses
    // otherwise); on failure times are shown in UTC.
    let local = UtcOffset::current_local_offset().unwrap_or(UtcOffset::UTC);
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            let (text, code) = match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    (e.render().to_string(), EXIT_OK)
                }
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    (e.render().to_string(), EXIT_USAGE)
                }
                _ => (e.render().to_string(), EXIT_USAGE),
            };
            let target: &mut dyn Write = if code == EXIT_OK { stdout } else { stderr };
            let _ = target.write_all(text.as_bytes());
            return code;
        }
    };
    let color = match cli.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => term.stdout && env.get("NO_COLOR").is_none(),
    };
    let now = match env.get("SESSIONS_NOW") {
        Some(raw) => match timefmt::parse_instant(raw, OffsetDateTime::now_utc()) {
            Ok(t) => t,
            Err(e) => return report(stderr, &e),
        },
        None => OffsetDateTime::now_utc(),
    };
    let root = match root::resolve(cli.root.clone(), env) {
        Ok(r) => r,
        Err(e) => return report(stderr, &e),
    };
    let out_mode = if human::stdout_is_human(&cli.command) {
        human::Mode::Human { color }
    } else {
        human::Mode::Exact
    };
    let mut safe_out = human::TerminalSafe::new(stdout, out_mode);
    let mut ctx = Ctx {
        out: &mut safe_out,
        err: stderr,
        style: Style { color },
        progress: term.stderr,
        root,
        local,
        now,
        read_only: cli.read_only,
        hooks: hooks::Hooks::from_env(env),
    };
    let result = dispatch(&mut ctx, cli.command);
    let _ = ctx.out.flush();
    match result {
        Ok(code) => code,
        Err(e) => report(ctx.err, &e),
    }
}

/// Runs the binary: real arguments, environment and streams; exit code for `main`.
pub fn main_with_std() -> std::process::ExitCode {
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut err = stderr.lock();
    let code = run_with(
        std::env::args_os(),
        &mut out,
        &mut err,
        &Env::from_process(),
        Terminal::detect(),
    );
    drop(out);
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(4))
}

fn report(stderr: &mut dyn Write, e: &CliError) -> i32 {
    let code = e.exit_code();
    if code != EXIT_OK {
        let _ = writeln!(stderr, "sessions: {e}");
    }
    code
}

fn dispatch(ctx: &mut Ctx<'_>, command: Command) -> Result<i32, CliError> {
    match command {
        Command::Where(a) => commands::where_cmd(ctx, &a),
        Command::Runs(a) => commands::runs(ctx, &a),
        Command::Sessions(a) => commands::sessions(ctx, &a),
        Command::Show(a) => commands::show(ctx, &a),
        Command::Search(a) => commands::search(ctx, &a),
        Command::Replay(a) => commands::replay(ctx, &a),
        Command::History(a) => commands::history(ctx, &a),
        Command::Tail(a) => commands::tail(ctx, &a),
        Command::Verify(a) => commands::verify(ctx, &a),
        Command::Repair(a) => commands::repair(ctx, &a),
        Command::Stats(a) => commands::stats(ctx, &a),
        Command::Export(a) => commands::export(ctx, &a),
        Command::Gc(a) => commands::gc(ctx, &a),
        Command::Archive(a) => commands::archive(ctx, &a),
        Command::Unarchive(a) => commands::unarchive(ctx, &a),
        Command::Reindex(a) => commands::reindex(ctx, &a),
        Command::Serve(a) => commands::serve(ctx, &a),
        Command::Sync(a) => commands::sync(ctx, &a),
    }
}

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
//! Exit codes, the same in every command: 0 success, 1 findings (`verify` found problems,
//! `sync` left something unshipped), 2 usage error (including an unsafe id or an ambiguous id
//! prefix), 3 not found, 4 data or I/O error (see [`error`]).
//!
//! Every `--json` line (and the `replay` and `export --format json` documents) is one object
//! with a `"type"`, of the contract described in the workspace's `docs/cli-json.md`;
//! [`json_schema`] gives its JSON Schema.
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

use clap::{CommandFactory, FromArgMatches};
use time::{OffsetDateTime, UtcOffset};

mod backend;
mod cli;
mod commands;
mod env;
pub mod error;
mod hooks;
mod human;
mod json_rows;
mod jsonw;
mod pager;
mod progress;
mod redact;
mod root;
mod style;
mod support;
mod timefmt;

pub use env::Env;
pub use error::{CliError, EXIT_DATA, EXIT_NOT_FOUND, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE};
pub use json_rows::json_schema;

use cli::{Cli, Command};
use style::Style;
use support::{table, term};
use timefmt::TimeDisplay;

/// What the output streams are connected to. [`Terminal::default`] is two pipes: no colour,
/// plain tables, no progress bars, no pager.
#[derive(Debug, Clone, Copy, Default)]
pub struct Terminal {
    /// stdout is a terminal: colour may be used, tables are laid out for its width.
    pub stdout: bool,
    /// stderr is a terminal: progress bars may be drawn.
    pub stderr: bool,
    /// The width of stdout's terminal in columns, when known (`COLUMNS` overrides it; 80
    /// when neither is known).
    pub columns: Option<usize>,
    /// Long output may go through a pager: stdout is this process's own terminal (set by
    /// [`Terminal::detect`]; an in-process caller sets it only when it wants the pager run).
    pub pager: bool,
}

impl Terminal {
    /// Detects the process's real stdout and stderr.
    pub fn detect() -> Self {
        let stdout = std::io::stdout().is_terminal();
        Terminal {
            stdout,
            stderr: std::io::stderr().is_terminal(),
            columns: terminal_size::terminal_size()
                .filter(|_| stdout)
                .map(|(w, _)| usize::from(w.0)),
            pager: stdout,
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
    /// How tables are laid out: for the terminal's width, or plain for a pipe.
    pub(crate) layout: term::Layout,
    pub(crate) progress: bool,
    pub(crate) root: root::Root,
    /// The shared store the command works on (`--store`/`$SESSIONS_STORE` naming a
    /// PostgreSQL store); `None`: the local store at [`Ctx::root`].
    pub(crate) shared: Option<std::sync::Arc<backend::Shared>>,
    pub(crate) local: UtcOffset,
    pub(crate) now: OffsetDateTime,
    /// The zone in which dates, `today` and calendar ages of time arguments are read
    /// ([`timefmt::input_zone`]).
    pub(crate) zone: jiff::tz::TimeZone,
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

    /// A hint for people (the next page, a wider scope, an empty result): a dim line on stdout
    /// on a terminal; on stderr when stdout is piped, so that it stays out of what scripts read.
    pub(crate) fn hint(&mut self, text: &str) -> Result<(), CliError> {
        match self.layout {
            term::Layout::Terminal { .. } => {
                writeln!(self.out, "{}", self.style.paint(style::Paint::Dim, text))?;
            }
            term::Layout::Plain => {
                let _ = writeln!(self.err, "{text}");
            }
        }
        Ok(())
    }

    /// Writes a table laid out for [`Ctx::layout`].
    pub(crate) fn table(&mut self, table: &table::Table) -> Result<(), CliError> {
        self.out
            .write_all(table.render(self.layout, self.style).as_bytes())?;
        Ok(())
    }
}

/// The command-line definition with help wrapped at `columns`.
fn command_for(columns: usize) -> clap::Command {
    Cli::command().term_width(columns)
}

/// Writes man pages for `sessions` and each of its subcommands (`sessions.1`,
/// `sessions-runs.1`, …; roff, section 1) into `dir`, which must exist, and returns their
/// paths in order. `cargo xtask man DIR` calls it.
///
/// # Errors
/// The I/O error of a page that could not be written.
pub fn write_man_pages(dir: &std::path::Path) -> std::io::Result<Vec<PathBuf>> {
    let mut cmd = command_for(term::MAX_HELP_COLUMNS);
    cmd.build();
    let mut written = Vec::new();
    man_page(&cmd, dir, &mut written)?;
    Ok(written)
}

fn man_page(
    cmd: &clap::Command,
    dir: &std::path::Path,
    out: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    let path = dir.join(man.get_filename());
    let mut bytes = Vec::new();
    man.render(&mut bytes)?;
    std::fs::write(&path, bytes)?;
    out.push(path);
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        man_page(sub, dir, out)?;
    }
    Ok(())
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
    let args: Vec<OsString> = args.into_iter().collect();
    let layout = term::layout(env, term);
    let parsed = command_for(term::help_columns(env, term))
        .try_get_matches_from(&args)
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => return clap_exit(&e, &args, stdout, stderr, env, term),
    };
    let color = term::colour(cli.color, env, term);
    if let Command::Completions(a) = &cli.command {
        // Generated into memory: clap_complete panics when its writer fails (a closed pipe).
        let mut script = Vec::new();
        clap_complete::generate(a.shell, &mut Cli::command(), "sessions", &mut script);
        return match stdout.write_all(&script).and_then(|()| stdout.flush()) {
            Ok(()) => EXIT_OK,
            Err(e) => report(stderr, &CliError::Output(e)),
        };
    }
    let now = match env.get("SESSIONS_NOW") {
        Some(raw) => {
            match timefmt::parse_instant(raw, OffsetDateTime::now_utc(), &jiff::tz::TimeZone::UTC) {
                Ok(t) => t,
                Err(e) => return report(stderr, &e),
            }
        }
        None => OffsetDateTime::now_utc(),
    };
    let choice = match backend::resolve(cli.store.as_deref(), cli.root.clone(), env) {
        Ok(c) => c,
        Err(e) => return report(stderr, &e),
    };
    let root = choice.root;
    let shared = choice.shared.map(std::sync::Arc::new);
    let out_mode = if human::stdout_is_human(&cli.command) {
        human::Mode::Human { color }
    } else {
        human::Mode::Exact
    };
    let pager = (term.pager && pager::pages(&cli))
        .then(|| pager::command_line(env))
        .flatten();
    let mut paged = pager::Paged::new(stdout, pager, env);
    let result = {
        let mut safe_out = human::TerminalSafe::new(&mut paged, out_mode);
        let mut ctx = Ctx {
            out: &mut safe_out,
            err: &mut *stderr,
            style: Style { color },
            layout,
            progress: term::progress(env, term),
            root,
            shared,
            local,
            now,
            zone: timefmt::input_zone(env),
            read_only: cli.read_only,
            hooks: hooks::Hooks::from_env(env),
        };
        let result = commands::dispatch(&mut ctx, cli.command);
        let _ = ctx.out.flush();
        result
    };
    // Errors are reported once the reader has quit the pager, so that they stay on the screen.
    paged.finish();
    match result {
        Ok(code) => code,
        Err(e) => report(stderr, &e),
    }
}

/// Help, version and usage errors: help and version on stdout (help through the pager on a
/// terminal, coloured when colour is on), usage errors on stderr with exit status 2.
fn clap_exit(
    e: &clap::Error,
    args: &[OsString],
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
    env: &Env,
    term: Terminal,
) -> i32 {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            // `--color` was not parsed: help follows the automatic rule, `--no-pager` is looked
            // for among the words.
            let text = if term::auto_colour(env, term.stdout) {
                e.render().ansi().to_string()
            } else {
                e.render().to_string()
            };
            let help = e.kind() == ErrorKind::DisplayHelp;
            let no_pager = args.iter().any(|a| a == "--no-pager");
            let pager = (help && term.pager && !no_pager)
                .then(|| pager::command_line(env))
                .flatten();
            let mut paged = pager::Paged::new(stdout, pager, env);
            let _ = paged.write_all(text.as_bytes());
            paged.finish();
            EXIT_OK
        }
        _ => {
            let _ = stderr.write_all(e.render().to_string().as_bytes());
            EXIT_USAGE
        }
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

//! Command-line definition (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

const AFTER_HELP: &str = "\
Store location: --root DIR wins; otherwise CODELIA_LAYOUT=xdg (any case) selects
${XDG_STATE_HOME:-~/.local/state}/codelia/sessions (an empty XDG_STATE_HOME counts as unset),
else ~/.codelia/sessions. `sessions where` shows the choice.

Exit status:
  0  success (verify: no problems found)
  1  verify found problems
  2  usage error (bad arguments)
  3  not found (no such run, session or store)
  4  data or I/O error (the message names the file and byte offset where known)

Colour is used only when stdout is a terminal and NO_COLOR is unset (override with --color).
Progress bars appear on stderr only when stderr is a terminal.";

/// Inspect, verify, repair, export and clean up agent session history.
/// The largest count `--limit`, `--max-runs` and `--max-events` accept: larger values are a
/// usage error (exit 2) instead of overflowing page arithmetic or the database's integers.
pub(crate) const MAX_COUNT: usize = 1_000_000;

/// The longest `tail --timeout` in seconds (one year; 0 still means "wait forever").
pub(crate) const MAX_TIMEOUT_SECS: u64 = 366 * 86_400;

/// Parses a count argument: a whole number from 0 to [`MAX_COUNT`].
fn count_arg(text: &str) -> Result<usize, String> {
    let range = format!("a whole number from 0 to {MAX_COUNT}");
    let n: u128 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not {range}"))?;
    usize::try_from(n)
        .ok()
        .filter(|n| *n <= MAX_COUNT)
        .ok_or_else(|| format!("{text} is too large: use {range}"))
}

#[derive(Debug, Parser)]
#[command(name = "sessions", version, about, after_help = AFTER_HELP, propagate_version = true)]
pub(crate) struct Cli {
    /// Session store directory (the `sessions/` folder); overrides the environment.
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) root: Option<PathBuf>,
    /// Open the store read-only: no file under the root is created or changed (the run
    /// index is used as the last writer left it; `repair`, `gc`, `archive` and `reindex`
    /// accept only `--dry-run`). Used automatically, with a warning, when the store cannot be
    /// written.
    #[arg(long, global = true)]
    pub(crate) read_only: bool,
    /// When to colour output.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub(crate) color: ColorChoice,
    /// The command.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ColorChoice {
    /// Colour when stdout is a terminal and NO_COLOR is unset.
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Print the resolved store root and how it was chosen.
    Where(WhereArgs),
    /// List runs, newest first, from the run index.
    Runs(RunsArgs),
    /// List saved sessions (current directory's workspace by default).
    Sessions(SessionsArgs),
    /// Show a readable transcript of a run or of every run of a session.
    Show(ShowArgs),
    /// Full-text search of user input, assistant and reasoning text, tool calls, tool output
    /// and final answers; ranked hits grouped per run.
    Search(SearchArgs),
    /// Print the exact prompt sent at an invocation of a run, as JSON.
    Replay(ReplayArgs),
    /// Replay a session's history the way the reference's `session.history` does.
    History(HistoryArgs),
    /// Print a run's records as they are written (`-f` keeps following).
    Tail(TailArgs),
    /// Check run files and message logs; exit 1 when problems are found.
    Verify(VerifyArgs),
    /// Seal torn tails, rebuild state.db rows of message logs without one, migrate legacy
    /// snapshots and rebuild the run index.
    Repair(RepairArgs),
    /// Token usage and run counts with a small bar chart.
    Stats(StatsArgs),
    /// Export a run or a session as Markdown, JSON, JSONL or one HTML page.
    Export(ExportArgs),
    /// Move old runs and sessions to the trash under the root, or empty the trash.
    Gc(GcArgs),
    /// Compress old run files to `.jsonl.zst` (still readable by every command, but not by the
    /// reference runtime: `unarchive` brings them back).
    Archive(ArchiveArgs),
    /// Restore archived runs (`.jsonl.zst`) to plain `.jsonl`, which the reference runtime
    /// reads again.
    Unarchive(UnarchiveArgs),
    /// Rebuild the run index from scratch and report the difference.
    Reindex(ReindexArgs),
    /// Serve a local, read-only web viewer on 127.0.0.1 (prints its URL with a token first).
    Serve(ServeArgs),
    /// Ship the store to a shared PostgreSQL store, exactly once (--follow keeps shipping).
    Sync(crate::commands::SyncArgs),
}

#[derive(Debug, Args)]
pub(crate) struct WhereArgs {
    /// One JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Outcome filter values for `runs --outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub(crate) enum OutcomeArg {
    /// `run.end{completed}`.
    Completed,
    /// `run.end{error}` or a `run.error` record.
    Error,
    /// `run.end{cancelled}`.
    Cancelled,
    /// No terminal record and the file is locked by a writer.
    Running,
    /// No terminal record and no writer holds the file.
    Crashed,
}

#[derive(Debug, Args)]
pub(crate) struct RunsArgs {
    /// Only runs of this session.
    #[arg(long, value_name = "SESSION_ID")]
    pub(crate) session: Option<String>,
    /// Only runs started at or after this time (RFC 3339, YYYY-MM-DD, or an age like 7d).
    #[arg(long, value_name = "TIME")]
    pub(crate) since: Option<String>,
    /// Only runs started before this time (same forms as --since).
    #[arg(long, value_name = "TIME")]
    pub(crate) until: Option<String>,
    /// Only runs with this outcome (repeatable).
    #[arg(long, value_enum, value_name = "OUTCOME")]
    pub(crate) outcome: Vec<OutcomeArg>,
    /// Only runs whose workspace root (from run.start ui_context or the session) is DIR.
    #[arg(long, value_name = "DIR")]
    pub(crate) workspace: Option<String>,
    /// Page size (1 to 1000000).
    #[arg(long, default_value_t = 20, value_name = "N", value_parser = count_arg)]
    pub(crate) limit: usize,
    /// Continue after this cursor (printed at the end of the previous page).
    #[arg(long, value_name = "CURSOR")]
    pub(crate) cursor: Option<String>,
    /// Show start times in UTC instead of local time.
    #[arg(long)]
    pub(crate) utc: bool,
    /// Answer from the run index as it is, without first picking up new or changed run files
    /// (the refresh looks at every file; on very large stores this skips that walk).
    #[arg(long)]
    pub(crate) no_refresh: bool,
    /// One JSON object per line.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct SessionsArgs {
    /// Every workspace, including sessions without one.
    #[arg(long)]
    pub(crate) all: bool,
    /// Sessions of this workspace root instead of the current directory's.
    #[arg(long, value_name = "DIR", conflicts_with = "all")]
    pub(crate) workspace: Option<String>,
    /// At most N sessions (0 = no limit; at most 1000000).
    #[arg(long, default_value_t = 50, value_name = "N", value_parser = count_arg)]
    pub(crate) limit: usize,
    /// Show times in UTC instead of local time.
    #[arg(long)]
    pub(crate) utc: bool,
    /// One JSON object per line.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// A run id or a session id.
    pub(crate) id: String,
    /// Print the records exactly as stored instead of a transcript.
    #[arg(long)]
    pub(crate) raw: bool,
    /// Start the transcript of a run at the record at this byte offset (as `search` prints
    /// it); earlier records are left out.
    #[arg(long, value_name = "OFFSET", conflicts_with = "raw")]
    pub(crate) at: Option<u64>,
    /// Show times in UTC instead of local time.
    #[arg(long)]
    pub(crate) utc: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// The run id.
    pub(crate) run: String,
    /// Invocation number (`llm.request.seq`); default: the last one of the run.
    #[arg(long, value_name = "N")]
    pub(crate) seq: Option<i64>,
    /// Drop the request's own response when the snapshot was serialized too late (compat §5.9).
    #[arg(long)]
    pub(crate) corrected: bool,
}

#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// The session id.
    pub(crate) session: String,
    /// At most this many runs (newest kept).
    #[arg(long, default_value_t = 20, value_name = "N", value_parser = count_arg)]
    pub(crate) max_runs: usize,
    /// At most this many events (newest kept).
    #[arg(long, default_value_t = 1500, value_name = "N", value_parser = count_arg)]
    pub(crate) max_events: usize,
    /// One JSON object per line (events, then a summary line).
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct TailArgs {
    /// The run id.
    pub(crate) run: String,
    /// Keep following the file until the run ends (or Ctrl-C).
    #[arg(short = 'f', long)]
    pub(crate) follow: bool,
    /// Print the records as stored (one JSON object per line) instead of one summary line each.
    #[arg(long, visible_alias = "json")]
    pub(crate) raw: bool,
    /// With -f: stop after this many seconds without the run ending (0 = wait forever; at most
    /// one year).
    #[arg(long, default_value_t = 0, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(0..=MAX_TIMEOUT_SECS))]
    pub(crate) timeout: u64,
}

#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// Run ids or run file paths to check (default: the whole store).
    pub(crate) runs: Vec<String>,
    /// One JSON object per problem, then a summary object.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RepairArgs {
    /// Show the plan without changing anything.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Also seal the torn tail of a run written in the last two minutes (it may still be
    /// being written by a runtime that takes no lock). A locked run is never sealed.
    #[arg(long)]
    pub(crate) force: bool,
    /// One JSON object per action.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `stats --by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum StatsBy {
    /// UTC day of the run's start.
    Day,
    /// Model name.
    Model,
    /// Session id.
    Session,
}

#[derive(Debug, Args)]
pub(crate) struct StatsArgs {
    /// Group by.
    #[arg(long, value_enum, default_value_t = StatsBy::Day)]
    pub(crate) by: StatsBy,
    /// Only runs started at or after this time.
    #[arg(long, value_name = "TIME")]
    pub(crate) since: Option<String>,
    /// Only runs started before this time.
    #[arg(long, value_name = "TIME")]
    pub(crate) until: Option<String>,
    /// One JSON object per group.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `export --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ExportFormat {
    /// Markdown transcript.
    Md,
    /// One JSON document.
    Json,
    /// The records as stored, one per line.
    Jsonl,
    /// One self-contained HTML page (inline CSS, no script, no external request).
    Html,
}

/// `--redact` and its patterns (`export`, `serve`).
#[derive(Debug, Args)]
pub(crate) struct RedactArgs {
    /// Replace secrets (provider API keys and tokens, bearer tokens, private keys, passwords in
    /// URLs, secret-named KEY=value assignments) with placeholders such as
    /// [REDACTED:github-token#1]; the same secret gets the same placeholder. Stored files are
    /// never changed.
    #[arg(long)]
    pub(crate) redact: bool,
    /// Also redact what this regular expression matches (repeatable; implies --redact).
    #[arg(long, value_name = "REGEX")]
    pub(crate) redact_pattern: Vec<String>,
    /// Also redact what the patterns in FILE match (one regular expression per line; blank
    /// lines and lines starting with # are skipped; repeatable; implies --redact).
    #[arg(long, value_name = "FILE")]
    pub(crate) redact_patterns: Vec<PathBuf>,
}

impl RedactArgs {
    /// Whether any redaction was asked for.
    pub(crate) fn on(&self) -> bool {
        self.redact || !self.redact_pattern.is_empty() || !self.redact_patterns.is_empty()
    }
}

#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// A run id or a session id.
    pub(crate) id: String,
    /// Output format.
    #[arg(long, value_enum)]
    pub(crate) format: ExportFormat,
    /// Write to this file instead of stdout (never inside the store root; an existing file
    /// only with --force).
    #[arg(short, long, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
    /// With -o: replace FILE when it exists.
    #[arg(long, requires = "output")]
    pub(crate) force: bool,
    /// Redaction.
    #[command(flatten)]
    pub(crate) redact: RedactArgs,
}

#[derive(Debug, Args)]
pub(crate) struct GcArgs {
    /// Age threshold (e.g. 30d, 12h, 2w).
    #[arg(long, value_name = "AGE", required_unless_present = "empty_trash")]
    pub(crate) older_than: Option<String>,
    /// Show what would move without moving anything.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Delete the trash folder for real.
    #[arg(long, conflicts_with = "older_than")]
    pub(crate) empty_trash: bool,
    /// One JSON object per moved item.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ArchiveArgs {
    /// Age threshold (e.g. 90d).
    #[arg(long, value_name = "AGE")]
    pub(crate) older_than: String,
    /// Show what would be compressed without writing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// One JSON object per archived file.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `unarchive`: which archived runs to restore. Selectors combine (all must match); at least
/// one is required so that a bare `sessions unarchive` restores nothing by accident.
#[derive(Debug, Args)]
pub(crate) struct UnarchiveArgs {
    /// Run ids to restore (their archived files; a run that is not archived is skipped).
    #[arg(value_name = "RUN", conflicts_with = "all")]
    pub(crate) runs: Vec<String>,
    /// Every archived run (with --since/--until/--session: every one that matches).
    #[arg(long)]
    pub(crate) all: bool,
    /// Only runs started at or after this time (RFC 3339, YYYY-MM-DD, or an age like 7d).
    #[arg(long, value_name = "TIME")]
    pub(crate) since: Option<String>,
    /// Only runs started before this time (same forms as --since).
    #[arg(long, value_name = "TIME")]
    pub(crate) until: Option<String>,
    /// Only runs of this session (so that the reference can resume it with its history).
    #[arg(long, value_name = "SESSION_ID")]
    pub(crate) session: Option<String>,
    /// Show what would be restored without writing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// One JSON object per restored file.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ReindexArgs {
    /// One JSON object with the difference.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also rebuild the search index (`search.db`) from the run files.
    #[arg(long)]
    pub(crate) search: bool,
}

/// `search --kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub(crate) enum KindArg {
    /// What the user typed.
    User,
    /// Assistant text.
    Assistant,
    /// Reasoning text.
    Reasoning,
    /// Tool calls (the tool's name and its arguments).
    ToolCall,
    /// Tool output (the first 64 KiB of each).
    ToolOutput,
    /// Final answers.
    Final,
}

impl KindArg {
    /// The kind's name in `search.db`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            KindArg::User => "user",
            KindArg::Assistant => "assistant",
            KindArg::Reasoning => "reasoning",
            KindArg::ToolCall => "tool-call",
            KindArg::ToolOutput => "tool-output",
            KindArg::Final => "final",
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct SearchArgs {
    /// What to look for. Plain text: each word is matched as a quoted phrase (all must
    /// occur; punctuation such as `ux-capac` is text, not query syntax), as a word or, for
    /// words of three characters or more, inside longer words (Japanese and other scripts
    /// without spaces).
    #[arg(required = true, value_name = "TEXT")]
    pub(crate) text: Vec<String>,
    /// Pass TEXT to SQLite FTS5 as query syntax (AND, OR, NOT, NEAR, prefix*, "phrases").
    #[arg(long)]
    pub(crate) fts: bool,
    /// Only runs of this session.
    #[arg(long, value_name = "SESSION_ID")]
    pub(crate) session: Option<String>,
    /// Only runs whose own workspace root is DIR.
    #[arg(long, value_name = "DIR")]
    pub(crate) workspace: Option<String>,
    /// Only records written at or after this time (RFC 3339, YYYY-MM-DD, or an age like 7d).
    #[arg(long, value_name = "TIME")]
    pub(crate) since: Option<String>,
    /// Only records written before this time (same forms as --since).
    #[arg(long, value_name = "TIME")]
    pub(crate) until: Option<String>,
    /// Only hits of this kind (repeatable).
    #[arg(long, value_enum, value_name = "KIND")]
    pub(crate) kind: Vec<KindArg>,
    /// At most N hits (1 to 1000000).
    #[arg(long, default_value = "20", value_parser = count_arg, value_name = "N")]
    pub(crate) limit: usize,
    /// Show times in UTC instead of local time.
    #[arg(long)]
    pub(crate) utc: bool,
    /// One JSON object per hit (grouped per run, best run first).
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// TCP port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 8765, value_name = "N")]
    pub(crate) port: u16,
    /// Open the printed URL in the default browser.
    #[arg(long)]
    pub(crate) open: bool,
    /// Redaction of every page.
    #[command(flatten)]
    pub(crate) redact: RedactArgs,
}

//! Command-line definition (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

const AFTER_HELP: &str = "\
Store location: --store STORE or --root DIR wins (not both), then
$SESSIONS_STORE, then $SESSIONS_ROOT; otherwise CODELIA_LAYOUT=xdg (any case)
selects ${XDG_STATE_HOME:-~/.local/state}/codelia/sessions (an empty
XDG_STATE_HOME counts as unset), else ~/.codelia/sessions. A STORE that is a
postgres:// or postgresql:// URL (a unix socket directory as ?host=/dir) or
libpq key=value pairs is a shared PostgreSQL store; any other STORE is a local
directory. `sessions where` shows the choice (passwords redacted).

Exit status (the same in every command):
  0  success (verify: no problems found; tail -f: the run ended)
  1  findings (not failures): verify found problems; sync left runs unshipped
  2  usage error: bad arguments, an unsafe id, an ambiguous id prefix, a bad
     time or zone
  3  not found: no such run, session, invocation or store; `-` in a workspace
     without any
  4  data or I/O error (the message names the file and byte offset where known)

Terminal: colour when stdout is a terminal, unless NO_COLOR is set, CLICOLOR=0
or TERM=dumb; CLICOLOR_FORCE=1 forces it (--color wins over all of these).
Tables fit COLUMNS or the terminal's width; piped, they are tab-separated rows
without header, and hints go to stderr. Long output (show, history, export,
--help) on a terminal goes through $SESSIONS_PAGER, else $PAGER, else
`less -FRX` (empty or `cat`: no pager; --no-pager). Progress bars appear on
stderr when it is a terminal other than TERM=dumb, after a second of work.

Ids: a unique prefix (4+ characters) of a run or session id works wherever an
id does; `-` or --last is the newest of the current directory's workspace, and
@title a session named by `sessions name`.

Examples:
  sessions runs --since 7d             the last week's runs
  sessions show 7a1e0001-0000-4000-8000-000000000101
  sessions stats --by model            tokens per model
  sessions verify && sessions repair --dry-run
  sessions completions bash >> ~/.bash_completion";

/// The heading of the options every command takes.
const GLOBAL: &str = "Global options";

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

/// `tail -n`: which records to print first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TailLines {
    /// The last N (`-n N`).
    Last(usize),
    /// From the K-th on, counting from 1 (`-n +K`; `+0` counts as `+1`, as in tail(1)).
    From(usize),
}

/// Parses `tail -n`: `N` or `+K`, each a count from 0 to [`MAX_COUNT`].
fn tail_lines_arg(text: &str) -> Result<TailLines, String> {
    match text.trim().strip_prefix('+') {
        Some(k) if k.starts_with('+') => Err(format!("`{text}` is not N or +K")),
        Some(k) => count_arg(k).map(TailLines::From),
        None => count_arg(text).map(TailLines::Last),
    }
}

#[derive(Debug, Parser)]
#[command(name = "sessions", version, about, after_help = AFTER_HELP, propagate_version = true)]
pub(crate) struct Cli {
    /// Session store directory (the `sessions/` folder); overrides $SESSIONS_ROOT and the
    /// layout variables.
    #[arg(long, global = true, value_name = "DIR", help_heading = GLOBAL, conflicts_with = "store")]
    pub(crate) root: Option<PathBuf>,
    /// The store to work on: a shared PostgreSQL store (a postgres:// or postgresql:// URL,
    /// a unix socket directory as ?host=/dir, or libpq key=value pairs) or a local directory
    /// (as --root). Wins over $SESSIONS_STORE, which wins over $SESSIONS_ROOT. On a shared
    /// store runs, sessions, show, replay, history, tail, export, stats, verify and gc work;
    /// the other commands refuse.
    #[arg(long, global = true, value_name = "STORE", help_heading = GLOBAL)]
    pub(crate) store: Option<String>,
    /// Open the store read-only: no file under the root is created or changed (the run
    /// index is used as the last writer left it; `repair`, `gc`, `archive`, `reindex`,
    /// `delete` and `restore` accept only `--dry-run`; `pin`, `unpin` and `name` refuse). Used automatically, with a warning, when the store cannot be
    /// written.
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub(crate) read_only: bool,
    /// When to colour output.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN", help_heading = GLOBAL)]
    pub(crate) color: ColorChoice,
    /// Write long output straight to the terminal instead of through the pager.
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub(crate) no_pager: bool,
    /// The command.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ColorChoice {
    /// Colour when stdout is a terminal, unless NO_COLOR, CLICOLOR=0 or TERM=dumb say no
    /// (CLICOLOR_FORCE=1 says yes).
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

// The EXAMPLES section of each command (`after_help`); every line is a valid invocation
// (`every_command_has_examples_that_parse` in the tests).
const EXAMPLES_WHERE: &str = "\
Examples:
  sessions where
  sessions where --json";
const EXAMPLES_RUNS: &str = "\
Examples:
  sessions runs --since 7d --outcome error
  sessions runs --session 5a1e0003-0000-4000-8000-000000000003
  sessions runs --json --limit 1000 | jq -r .run_id";
const EXAMPLES_SESSIONS: &str = "\
Examples:
  sessions sessions
  sessions sessions --all --limit 10
  sessions sessions --workspace ~/src/app --json";
const EXAMPLES_SHOW: &str = "\
Examples:
  sessions show 7a1e0001-0000-4000-8000-000000000101
  sessions show 5a1e0001-0000-4000-8000-000000000001 --utc
  sessions show 7a1e0001-0000-4000-8000-000000000101 --raw --no-pager";
const EXAMPLES_REPLAY: &str = "\
Examples:
  sessions replay 7a1e0001-0000-4000-8000-000000000102
  sessions replay 7a1e0001-0000-4000-8000-000000000102 --seq 1 --corrected";
const EXAMPLES_HISTORY: &str = "\
Examples:
  sessions history 5a1e0001-0000-4000-8000-000000000001
  sessions history 5a1e0001-0000-4000-8000-000000000001 --max-runs 5 --json";
const EXAMPLES_TAIL: &str = "\
Examples:
  sessions tail 7a1e0006
  sessions tail -n 50 7a1e0006-0000-4000-8000-000000000601
  sessions tail -n +1 --raw 7a1e0006 | jq .type
  sessions tail -f --last --timeout 600";
const EXAMPLES_VERIFY: &str = "\
Examples:
  sessions verify
  sessions verify 7a1e0006-0000-4000-8000-000000000601
  sessions verify --json > problems.jsonl";
const EXAMPLES_REPAIR: &str = "\
Examples:
  sessions repair --dry-run
  sessions repair
  sessions repair --force --json";
const EXAMPLES_STATS: &str = "\
Examples:
  sessions stats
  sessions stats --by model --since 30d
  sessions stats --by week --tz Europe/Paris --since \"3 months ago\"
  sessions stats --by session --json";
const EXAMPLES_EXPORT: &str = "\
Examples:
  sessions export 7a1e0001-0000-4000-8000-000000000101 --format md
  sessions export 5a1e0001-0000-4000-8000-000000000001 -o s.html --format html
  sessions export 7a1e0001-0000-4000-8000-000000000101 --format jsonl | wc -l
  sessions export --last -o session.md";
const EXAMPLES_GC: &str = "\
Examples:
  sessions gc --older-than 90d --dry-run
  sessions gc --older-than 90d
  sessions gc --empty-trash";
const EXAMPLES_ARCHIVE: &str = "\
Examples:
  sessions archive --older-than 90d --dry-run
  sessions archive --older-than 180d";
const EXAMPLES_UNARCHIVE: &str = "\
Examples:
  sessions unarchive 7a1e0007-0000-4000-8000-000000000701
  sessions unarchive --all --since 2026-01-01
  sessions unarchive --session 5a1e0007-0000-4000-8000-000000000007 --dry-run";
const EXAMPLES_REINDEX: &str = "\
Examples:
  sessions reindex
  sessions reindex --json";
const EXAMPLES_SERVE: &str = "\
Examples:
  sessions serve --open
  sessions serve --port 0 --redact";
const EXAMPLES_SYNC: &str = "\
Examples:
  sessions sync --to postgres://sessions@db.internal/sessions
  sessions sync --to 'host=/run/postgresql dbname=sessions' --follow
  sessions sync --to postgres://db.internal/sessions --verify";
const EXAMPLES_DELETE: &str = "\
Examples:
  sessions delete 5a1e0004-0000-4000-8000-000000000004 --dry-run
  sessions delete @scratch 7a1e0006";
const EXAMPLES_RESTORE: &str = "\
Examples:
  sessions restore 20261201T180000Z --dry-run
  sessions restore 5a1e0004-0000-4000-8000-000000000004";
const EXAMPLES_PIN: &str = "\
Examples:
  sessions pin @release-notes 5a1e0002";
const EXAMPLES_UNPIN: &str = "\
Examples:
  sessions unpin @release-notes";
const EXAMPLES_NAME: &str = "\
Examples:
  sessions name 5a1e0001-0000-4000-8000-000000000001 release-notes
  sessions name 5a1e0002 \"flaky test hunt\"
  sessions name @release-notes --clear";
const EXAMPLES_STORAGE: &str = "\
Examples:
  sessions storage
  sessions storage --limit 30 --json | jq 'select(.type==\"summary\")'";
const EXAMPLES_SEARCH: &str = "\
Examples:
  sessions search \"connection refused\"
  sessions search ux-capac --kind tool-output --since 7d
  sessions search 'retry NEAR backoff' --fts --session 5a1e0002
  sessions search timeout --json | jq -r .byte_offset";
const EXAMPLES_COMPLETIONS: &str = "\
Examples:
  sessions completions bash >> ~/.bash_completion
  sessions completions zsh > \"${fpath[1]}/_sessions\"
  sessions completions fish > ~/.config/fish/completions/sessions.fish
  sessions completions powershell >> $PROFILE";

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Print the resolved store root and how it was chosen.
    #[command(after_help = EXAMPLES_WHERE)]
    Where(WhereArgs),
    /// List runs, newest first, from the run index.
    #[command(after_help = EXAMPLES_RUNS)]
    Runs(RunsArgs),
    /// List saved sessions (current directory's workspace by default).
    #[command(after_help = EXAMPLES_SESSIONS)]
    Sessions(SessionsArgs),
    /// Show a readable transcript of a run or of every run of a session.
    #[command(after_help = EXAMPLES_SHOW)]
    Show(ShowArgs),
    /// Full-text search of user input, assistant and reasoning text, tool calls, tool output
    /// and final answers; ranked hits grouped per run.
    #[command(after_help = EXAMPLES_SEARCH)]
    Search(SearchArgs),
    /// Print the exact prompt sent at an invocation of a run, as JSON.
    #[command(after_help = EXAMPLES_REPLAY)]
    Replay(ReplayArgs),
    /// Replay a session's history the way the reference's `session.history` does.
    #[command(after_help = EXAMPLES_HISTORY)]
    History(HistoryArgs),
    /// Print the last records of a run (`-n N`, default 10; `-f` keeps following).
    #[command(after_help = EXAMPLES_TAIL)]
    Tail(TailArgs),
    /// Check run files and message logs; exit 1 when problems are found.
    #[command(after_help = EXAMPLES_VERIFY)]
    Verify(VerifyArgs),
    /// Seal torn tails, rebuild state.db rows of message logs without one, migrate legacy
    /// snapshots and rebuild the run index.
    #[command(after_help = EXAMPLES_REPAIR)]
    Repair(RepairArgs),
    /// Token usage and run counts with a small bar chart.
    #[command(after_help = EXAMPLES_STATS)]
    Stats(StatsArgs),
    /// Export a run or a session as Markdown, JSON, JSONL or one HTML page.
    #[command(after_help = EXAMPLES_EXPORT)]
    Export(ExportArgs),
    /// Move runs and sessions to the trash under the root by age, count or size (never pinned
    /// ones), or empty the trash.
    #[command(after_help = EXAMPLES_GC)]
    Gc(GcArgs),
    /// Compress old run files to `.jsonl.zst` (still readable by every command, but not by the
    /// reference runtime: `unarchive` brings them back).
    #[command(after_help = EXAMPLES_ARCHIVE)]
    Archive(ArchiveArgs),
    /// Restore archived runs (`.jsonl.zst`) to plain `.jsonl`, which the reference runtime
    /// reads again.
    #[command(after_help = EXAMPLES_UNARCHIVE)]
    Unarchive(UnarchiveArgs),
    /// Rebuild the run index from scratch and report the difference.
    #[command(after_help = EXAMPLES_REINDEX)]
    Reindex(ReindexArgs),
    /// Serve a local, read-only web viewer on 127.0.0.1 (prints its URL with a token first).
    #[command(after_help = EXAMPLES_SERVE)]
    Serve(ServeArgs),
    /// Ship the store to a shared PostgreSQL store, exactly once (--follow keeps shipping).
    #[command(after_help = EXAMPLES_SYNC)]
    Sync(SyncArgs),
    /// Move runs and sessions to the trash, as gc does (`restore` puts them back; only
    /// `gc --empty-trash` deletes).
    #[command(after_help = EXAMPLES_DELETE)]
    Delete(DeleteArgs),
    /// Put a trash batch, or one run or session from the trash, back into the store (refused
    /// when it would overwrite anything).
    #[command(after_help = EXAMPLES_RESTORE)]
    Restore(RestoreArgs),
    /// Pin sessions: no gc rule ever moves them or their runs.
    #[command(after_help = EXAMPLES_PIN)]
    Pin(PinArgs),
    /// Unpin sessions.
    #[command(after_help = EXAMPLES_UNPIN)]
    Unpin(PinArgs),
    /// Give a session a title, shown in listings and usable as an id (`show @title`).
    #[command(after_help = EXAMPLES_NAME)]
    Name(NameArgs),
    /// Bytes by area (runs, archives, messages, state.db, trash), day, session and trash batch.
    #[command(after_help = EXAMPLES_STORAGE)]
    Storage(StorageArgs),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish) on stdout.
    #[command(after_help = EXAMPLES_COMPLETIONS)]
    Completions(CompletionsArgs),
}

#[derive(Debug, Args)]
pub(crate) struct DeleteArgs {
    /// Run ids (that run), session ids (the session and all its runs) or @titles.
    #[arg(required = true, value_name = "ID")]
    pub(crate) ids: Vec<String>,
    /// Show what would move without moving anything.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// One JSON object per line: an action per item, then a summary naming the trash batch.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RestoreArgs {
    /// A trash batch (its directory name under trash/, as `delete` and `gc` print it), or a
    /// run or session id or @title (its newest copy in the trash; a session comes back with
    /// its runs).
    #[arg(value_name = "BATCH|ID")]
    pub(crate) target: String,
    /// Show what would be restored without restoring anything.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// One JSON object per line: an action per item, then a summary.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct PinArgs {
    /// Session ids or @titles.
    #[arg(required = true, value_name = "SESSION")]
    pub(crate) ids: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct NameArgs {
    /// The session id (or its current @title).
    #[arg(value_name = "SESSION")]
    pub(crate) id: String,
    /// The title.
    #[arg(value_name = "TITLE", required_unless_present = "clear")]
    pub(crate) title: Option<String>,
    /// Remove the session's title.
    #[arg(long, conflicts_with = "title")]
    pub(crate) clear: bool,
}

#[derive(Debug, Args)]
pub(crate) struct StorageArgs {
    /// Rows of the day and session tables (the largest sessions, the latest days).
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = count_arg)]
    pub(crate) limit: usize,
    /// One JSON object per line: days, sessions and trash batches, then the totals.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
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
    /// Only runs of this session (a unique prefix of at least 4 characters names its session;
    /// `-`: the newest session of the current directory's workspace).
    #[arg(long, value_name = "SESSION_ID")]
    pub(crate) session: Option<String>,
    /// Only runs started at or after this time: RFC 3339, a date (2026-11-30) or date and
    /// time (2026-11-30 14:00) in the local zone, today, yesterday, or an age (90m, 1d12h, 7d,
    /// 2 weeks, 1y, 2 days ago).
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
    /// A run id or a session id, or a unique prefix of one (at least 4 characters); `-`: the
    /// newest session of the current directory's workspace (its newest run when it has no
    /// saved session).
    #[arg(required_unless_present = "last")]
    pub(crate) id: Option<String>,
    /// The newest session of the current directory's workspace (as `-`).
    #[arg(long, conflicts_with = "id")]
    pub(crate) last: bool,
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
    /// The run id, or a unique prefix of one (at least 4 characters); `-`: the newest run of
    /// the current directory's workspace.
    #[arg(required_unless_present = "last")]
    pub(crate) run: Option<String>,
    /// The newest run of the current directory's workspace (as `-`).
    #[arg(long, conflicts_with = "run")]
    pub(crate) last: bool,
    /// Invocation number (`llm.request.seq`); default: the last one of the run.
    #[arg(long, value_name = "N")]
    pub(crate) seq: Option<i64>,
    /// Drop the request's own response when the snapshot was serialized too late (compat §5.9).
    #[arg(long)]
    pub(crate) corrected: bool,
}

#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// The session id, or a unique prefix of one (at least 4 characters); `-`: the newest
    /// session of the current directory's workspace.
    #[arg(required_unless_present = "last")]
    pub(crate) session: Option<String>,
    /// The newest session of the current directory's workspace (as `-`).
    #[arg(long, conflicts_with = "session")]
    pub(crate) last: bool,
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
    /// The run id, or a unique prefix of one (at least 4 characters); `-`: the newest run of
    /// the current directory's workspace.
    #[arg(required_unless_present = "last")]
    pub(crate) run: Option<String>,
    /// The newest run of the current directory's workspace (as `-`).
    #[arg(long, conflicts_with = "run")]
    pub(crate) last: bool,
    /// Print the last N records (lines of the run file: records and damage reports), like
    /// tail(1); 0 prints none (with -f: only what comes next); +K prints from the K-th on
    /// (+1: all of them).
    #[arg(short = 'n', long = "lines", default_value = "10", value_name = "N", value_parser = tail_lines_arg)]
    pub(crate) lines: TailLines,
    /// Keep following the file until the run ends (or Ctrl-C). A run that has already ended
    /// is printed and not followed (stderr says so; exit 0).
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
    /// Run ids (or unique prefixes of at least 4 characters; `-`: the newest run of the
    /// current directory's workspace) or run file paths to check (default: the whole store).
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
    /// Day of the run's start in the --tz zone (`2026-11-30`).
    Day,
    /// ISO week of the run's start in the --tz zone, Monday to Sunday (`2026-W48`; the
    /// ISO week-numbering year, so 2026-12-31 is in `2026-W53` and 2027-01-01 too).
    Week,
    /// Month of the run's start in the --tz zone (`2026-11`).
    Month,
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
    /// The time zone of the day, week and month groups and of dates in --since/--until:
    /// an IANA name (Europe/Paris), UTC, or local ($TZ, else the system's zone).
    #[arg(long, value_name = "ZONE", default_value = "local")]
    pub(crate) tz: String,
    /// Only runs started at or after this time (same forms as `runs --since`).
    #[arg(long, value_name = "TIME")]
    pub(crate) since: Option<String>,
    /// Only runs started before this time (same forms as --since).
    #[arg(long, value_name = "TIME")]
    pub(crate) until: Option<String>,
    /// One JSON object per group.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The id argument of a command with `--last`: the id given, or `-` (the newest).
pub(crate) fn id_or_newest(id: Option<&String>) -> &str {
    id.map_or(NEWEST, String::as_str)
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
    /// A run id or a session id, or a unique prefix of one (at least 4 characters); `-`: the
    /// newest session of the current directory's workspace (its newest run when it has no
    /// saved session).
    #[arg(required_unless_present = "last")]
    pub(crate) id: Option<String>,
    /// The newest session of the current directory's workspace (as `-`).
    #[arg(long, conflicts_with = "id")]
    pub(crate) last: bool,
    /// Output format [default: from the -o file's extension (.md, .json, .jsonl, .html),
    /// else md]. An explicit format wins over the extension.
    #[arg(long, value_enum)]
    pub(crate) format: Option<ExportFormat>,
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

impl ExportArgs {
    /// The format to write: `--format` when given, else the one the `-o` file's extension
    /// names (`.md`/`.markdown`, `.json`, `.jsonl`/`.ndjson`, `.html`/`.htm`, any case), else
    /// Markdown.
    pub(crate) fn effective_format(&self) -> ExportFormat {
        if let Some(f) = self.format {
            return f;
        }
        let ext = self
            .output
            .as_deref()
            .and_then(|p| p.extension())
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("json") => ExportFormat::Json,
            Some("jsonl" | "ndjson") => ExportFormat::Jsonl,
            Some("html" | "htm") => ExportFormat::Html,
            _ => ExportFormat::Md,
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct GcArgs {
    /// Age threshold (e.g. 30d, 12h, 2w, 1d12h, 6 months, 1y).
    #[arg(long, value_name = "AGE", required_unless_present_any = ["empty_trash", "keep_last", "max_size"])]
    pub(crate) older_than: Option<String>,
    /// Keep the newest N sessions (by last save) and their runs; alone, move every other
    /// session; with --older-than, only the old ones beyond the newest N.
    #[arg(long, value_name = "N", value_parser = count_arg)]
    pub(crate) keep_last: Option<usize>,
    /// After the other rules, move the oldest sessions (with their runs) and runs until the
    /// store's runs, messages and snapshots take at most SIZE (e.g. 500M, 5G; powers of 1024).
    #[arg(long, value_name = "SIZE")]
    pub(crate) max_size: Option<String>,
    /// Show what would move without moving anything.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Delete the trash folder for real.
    #[arg(long, conflicts_with_all = ["older_than", "keep_last", "max_size"])]
    pub(crate) empty_trash: bool,
    /// One JSON object per moved item.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ArchiveArgs {
    /// Age threshold (e.g. 90d, 3 months, 1y).
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
    /// Run ids to restore (their archived files; a run that is not archived is skipped); a
    /// unique prefix of at least 4 characters names its run.
    #[arg(value_name = "RUN", conflicts_with = "all")]
    pub(crate) runs: Vec<String>,
    /// Every archived run (with --since/--until/--session: every one that matches).
    #[arg(long)]
    pub(crate) all: bool,
    /// Only runs started at or after this time: RFC 3339, a date (2026-11-30) or date and
    /// time (2026-11-30 14:00) in the local zone, today, yesterday, or an age (90m, 1d12h, 7d,
    /// 2 weeks, 1y, 2 days ago).
    #[arg(long, value_name = "TIME")]
    pub(crate) since: Option<String>,
    /// Only runs started before this time (same forms as --since).
    #[arg(long, value_name = "TIME")]
    pub(crate) until: Option<String>,
    /// Only runs of this session (so that the reference can resume it with its history; a
    /// unique prefix of at least 4 characters names its session).
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
    /// occur; punctuation such as `ux-capac` is text, not query syntax), as a word or
    /// inside longer words (Japanese and other scripts without spaces): words of three
    /// characters or more through the trigram index, shorter ones in such scripts by a scan
    /// of the newest 200,000 documents. Ranking: the 2,000 newest matches of the word
    /// index are ranked by relevance (BM25), so a first page stays fast for a word in
    /// every run; a rarer word has all its matches ranked.
    #[arg(required = true, value_name = "TEXT")]
    pub(crate) text: Vec<String>,
    /// Pass TEXT to SQLite FTS5 as query syntax (AND, OR, NOT, NEAR, prefix*, "phrases"),
    /// on the word index only (no substring hits).
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

/// Arguments of `sessions sync`.
#[derive(Debug, clap::Args)]
pub(crate) struct SyncArgs {
    /// The shared store: a postgres:// or postgresql:// URL (a unix socket directory as
    /// ?host=/path) or libpq key=value pairs.
    #[arg(
        long,
        value_name = "STORE",
        env = "SESSIONS_STORE",
        hide_env_values = true
    )]
    pub(crate) to: String,
    /// Keep shipping what is written, one pass every --interval seconds, until interrupted.
    #[arg(long)]
    pub(crate) follow: bool,
    /// Seconds between passes with --follow.
    #[arg(long, value_name = "SECONDS", default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub(crate) interval: u64,
    /// Compare every stored line's hash with the local line and report the first divergence.
    #[arg(long)]
    pub(crate) verify: bool,
    /// Stop --follow after this many passes (scripts and tests).
    #[arg(long, hide = true, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) passes: Option<u64>,
    /// Most bytes of lines per transaction (at least one line is always sent).
    #[arg(long, hide = true, default_value_t = 4 << 20, value_parser = clap::value_parser!(u64).range(1..=(256 << 20)))]
    pub(crate) chunk_bytes: u64,
}

/// The id argument that means "the newest in this workspace".
pub(crate) const NEWEST: &str = "-";

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// The words of one example line as a shell would pass them: quotes removed, leading
    /// `NAME=value` assignments and everything from a pipe or redirection on left out.
    fn words(line: &str) -> Vec<String> {
        let mut words = Vec::new();
        let (mut word, mut quote, mut any) = (String::new(), None, false);
        for c in line.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => word.push(c),
                (None, '\'' | '"') => {
                    quote = Some(c);
                    any = true;
                }
                (None, ' ') => {
                    if any || !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                    any = false;
                }
                (None, c) => word.push(c),
            }
        }
        if any || !word.is_empty() {
            words.push(word);
        }
        let start = words.iter().position(|w| w == "sessions").unwrap_or(0);
        words
            .into_iter()
            .skip(start)
            .take_while(|w| !matches!(w.as_str(), "|" | ">" | ">>" | "&&"))
            .collect()
    }

    #[test]
    fn every_command_has_examples_that_parse() {
        let cmd = Cli::command();
        let mut seen = 0;
        for sub in cmd.get_subcommands() {
            let name = sub.get_name();
            let help = sub
                .get_after_help()
                .map(ToString::to_string)
                .unwrap_or_default();
            let mut lines = help.lines();
            assert_eq!(
                lines.next(),
                Some("Examples:"),
                "`sessions {name}` has no examples"
            );
            let examples: Vec<&str> = lines.collect();
            assert!(!examples.is_empty(), "{name}");
            for line in examples {
                // Wrapped help of an 80-column terminal never breaks an example.
                assert!(line.len() <= 78, "too long for 80 columns: {line}");
                let argv = words(line.trim());
                assert_eq!(
                    argv.get(1).map(String::as_str),
                    Some(name),
                    "an example of `{name}` runs another command: {line}"
                );
                if let Err(e) = Cli::try_parse_from(&argv) {
                    panic!("example `{line}` does not parse: {e}");
                }
            }
            seen += 1;
        }
        assert_eq!(seen, cmd.get_subcommands().count());
        assert!(seen >= 18);
        // The top-level help has examples too, each a valid command line.
        let top = cmd
            .get_after_help()
            .map(ToString::to_string)
            .unwrap_or_default();
        let examples = top.split("Examples:\n").nth(1).unwrap_or_default();
        assert!(examples.lines().count() >= 4);
        for line in top.lines() {
            assert!(
                line.chars().count() <= 80,
                "too long for 80 columns: {line}"
            );
        }
        for line in examples.lines() {
            let line = line.trim().split("   ").next().unwrap_or_default();
            if let Err(e) = Cli::try_parse_from(words(line)) {
                panic!("example `{line}` does not parse: {e}");
            }
        }
    }

    #[test]
    fn example_words_are_split_like_a_shell() {
        assert_eq!(
            words("SESSIONS_STORE=x sessions sync --to 'host=/a b' --verify | jq ."),
            ["sessions", "sync", "--to", "host=/a b", "--verify"]
        );
        assert_eq!(words("sessions x \"\" y > f"), ["sessions", "x", "", "y"]);
    }

    #[test]
    fn global_options_have_their_own_heading_and_help_wraps() {
        let mut cmd = Cli::command().term_width(60);
        cmd.build();
        let help = cmd
            .find_subcommand_mut("runs")
            .map(|c| c.render_help().to_string())
            .unwrap_or_default();
        let (own, global) = help.split_once("Global options:").unwrap();
        assert!(own.contains("--since"));
        for flag in ["--root", "--read-only", "--color", "--no-pager"] {
            assert!(global.contains(flag), "{flag}");
            assert!(!own.contains(flag), "{flag}");
        }
        assert!(help.contains("Examples:\n  sessions runs --since 7d"));
        for line in help.lines() {
            assert!(line.chars().count() <= 60, "{line:?}");
        }
    }
}

//! `sessions tail [-n N|+K] [-f] <run-id>`: print the last N records of a run (10 by default,
//! like tail(1); `+K` from the K-th on), and with `-f` keep following it until its `run.end`. `-f` on a run that has
//! already ended prints the records, says on stderr that the run ended, and exits 0.

use std::collections::VecDeque;
use std::io::Write;
use std::time::{Duration, Instant};

use session_jsonl::{FollowOptions, Follower, Item};
use session_schema::Record;

use crate::Ctx;
use crate::cli::{TailArgs, TailLines};
use crate::error::{CliError, EXIT_OK};
use crate::style::{Paint, Style, escape_controls, one_line};
use crate::support::lib_errors::jsonl_err;
use crate::support::paths::rel;
use crate::support::render::describe;
use crate::support::store::locate_run;
use crate::timefmt::TimeDisplay;

/// The items of a run `tail -n` keeps (the last N, or those from the K-th on), and how the
/// run ended when a `run.end` was among all the items seen (not only the kept ones).
struct LastItems {
    which: TailLines,
    seen: usize,
    items: VecDeque<Item>,
    ended: Option<String>,
}

impl LastItems {
    fn new(which: TailLines) -> Self {
        LastItems {
            which,
            seen: 0,
            items: VecDeque::new(),
            ended: None,
        }
    }

    fn push(&mut self, item: Item) {
        if let Item::Record(r) = &item
            && let Record::RunEnd(end) = r.record()
        {
            self.ended = Some(end.outcome.as_str().to_owned());
        }
        self.seen += 1;
        match self.which {
            TailLines::Last(0) => {}
            TailLines::Last(n) => {
                if self.items.len() == n {
                    self.items.pop_front();
                }
                self.items.push_back(item);
            }
            TailLines::From(k) => {
                if self.seen >= k {
                    self.items.push_back(item);
                }
            }
        }
    }

    /// [`LastItems::push`], then prints at once what `-n +K` keeps (nothing is held back
    /// from the K-th item on, so memory does not grow with the run).
    fn feed(
        &mut self,
        ctx: &mut Ctx<'_>,
        times: TimeDisplay,
        raw: bool,
        item: Item,
    ) -> Result<(), CliError> {
        self.push(item);
        if matches!(self.which, TailLines::From(_)) {
            self.print(ctx, times, raw)?;
        }
        Ok(())
    }

    fn print(&mut self, ctx: &mut Ctx<'_>, times: TimeDisplay, raw: bool) -> Result<(), CliError> {
        for item in self.items.drain(..) {
            print_item(ctx.out, ctx.err, ctx.style, times, raw, &item)?;
        }
        Ok(())
    }
}

/// Says on stderr that `-f` does not follow a run that has ended.
fn say_ended(ctx: &mut Ctx<'_>, run: &str, outcome: &str) {
    // Best effort, like every message on stderr.
    let _ = writeln!(
        ctx.err,
        "sessions: run {run} has already ended (run.end: {outcome}); not following"
    );
}

/// `sessions tail ID`: the last records of a run, and with `--follow` what is appended.
///
/// # Errors
/// Usage (2), not found (3) or data (4), as the command's help describes.
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &TailArgs) -> Result<i32, CliError> {
    let arg = crate::cli::id_or_newest(args.run.as_ref());
    if let Some(shared) = ctx.shared.clone() {
        let found = crate::support::shared::resolve_target(
            ctx,
            &shared,
            arg,
            crate::support::ids::Want::Run,
        )?;
        let [src] = found.runs.as_slice() else {
            return Err(CliError::Usage(format!("{arg} is not a run id")));
        };
        return tail_stored(ctx, args, src);
    }
    let path = locate_run(ctx, arg)?;
    let run = crate::support::paths::run_id_of_path(&path).unwrap_or_else(|| arg.to_owned());
    let times = ctx.times(false);
    let mut last = LastItems::new(args.lines);
    if session_jsonl::is_archived(&path) {
        // Archived runs are finished; print them once.
        let reader = session_jsonl::Reader::open_with(
            &path,
            session_jsonl::ReaderOptions {
                keep_raw: args.raw,
                ..Default::default()
            },
        )
        .map_err(jsonl_err)?;
        for item in reader {
            last.feed(
                ctx,
                times,
                args.raw,
                item.map_err(|e| CliError::io(&path, e))?,
            )?;
        }
        last.print(ctx, times, args.raw)?;
        if args.follow {
            let outcome = last.ended.take().unwrap_or_else(|| "none, archived".into());
            say_ended(ctx, &run, &outcome);
        }
        return Ok(EXIT_OK);
    }
    let opts = FollowOptions {
        reader: session_jsonl::ReaderOptions {
            keep_raw: args.raw,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut f = Follower::open(&path, opts).map_err(jsonl_err)?;
    let identity = FileIdentity::of(&path);
    if !args.follow {
        // One item at a time: memory follows the longest line (times N for `-n N`), not the
        // file.
        f.end_input();
        while let Some(item) = f.poll().map_err(jsonl_err)? {
            last.feed(ctx, times, args.raw, item)?;
        }
        last.print(ctx, times, args.raw)?;
        return Ok(EXIT_OK);
    }
    // What is in the file now: its last N items, then what comes next.
    while let Some(item) = f.poll().map_err(jsonl_err)? {
        last.push(item);
    }
    if f.ended() {
        for item in f.finish().map_err(jsonl_err)? {
            last.push(item);
        }
        last.print(ctx, times, args.raw)?;
        ctx.out.flush()?;
        let outcome = last.ended.take().unwrap_or_default();
        say_ended(ctx, &run, &outcome);
        return Ok(EXIT_OK);
    }
    last.print(ctx, times, args.raw)?;
    ctx.out.flush()?;
    let idle = (args.timeout > 0).then(|| Duration::from_secs(args.timeout));
    let mut last_seen = Instant::now();
    let mut checked = Instant::now();
    let shown = rel(&ctx.root.path, &path).into_owned();
    loop {
        if checked.elapsed() >= CHECK_EVERY {
            checked = Instant::now();
            if let Some(gone) = identity.vanished(&path) {
                // What the open file still holds was written before the change: show it.
                while let Some(item) = f.poll().map_err(jsonl_err)? {
                    print_item(ctx.out, ctx.err, ctx.style, times, args.raw, &item)?;
                }
                ctx.out.flush()?;
                return Err(gone.error(&shown, &path));
            }
        }
        let next = f.wait(CHECK_EVERY).map_err(|e| {
            CliError::Data(format!(
                "{shown}: stopped following: {}",
                crate::error::one_line(&e)
            ))
        })?;
        match next {
            Some(item) => {
                print_item(ctx.out, ctx.err, ctx.style, times, args.raw, &item)?;
                ctx.out.flush()?;
                last_seen = Instant::now();
            }
            None => {
                if f.ended() {
                    break;
                }
                if idle.is_some_and(|d| last_seen.elapsed() >= d) {
                    // Read whatever partial line is there as final, then stop.
                    for item in f.finish().map_err(jsonl_err)? {
                        print_item(ctx.out, ctx.err, ctx.style, times, args.raw, &item)?;
                    }
                    ctx.warn(&format!(
                        "no new records for {} s and no run.end; stopped following",
                        args.timeout
                    ));
                    break;
                }
            }
        }
        if f.ended() {
            break;
        }
    }
    Ok(EXIT_OK)
}

/// `tail` of a run of a catalogue (a shared store). Without `-f` the run as stored, torn
/// tail included, through the same reader as a file. With `-f` the complete lines only:
/// what is committed now, then every [`CHECK_EVERY`] the run's committed length
/// ([`RunCatalogue::stat_run`](session_storage::RunCatalogue::stat_run)) and, when it grew,
/// the bytes from the last offset read ([`RunCatalogue::read_bytes`](session_storage::RunCatalogue::read_bytes)),
/// until a `run.end` (or `--timeout` seconds without a new record).
fn tail_stored(
    ctx: &mut Ctx<'_>,
    args: &TailArgs,
    src: &crate::backend::RunRef,
) -> Result<i32, CliError> {
    use session_storage::{Extent, LinePosition};
    let crate::backend::RunRef::Stored {
        catalogue,
        run_id,
        location,
    } = src
    else {
        return Err(CliError::Usage("not a stored run".into()));
    };
    let times = ctx.times(false);
    let mut last = LastItems::new(args.lines);
    if !args.follow {
        crate::support::stream::for_each_item(src, args.raw, |item| {
            last.feed(ctx, times, args.raw, item)
        })?;
        last.print(ctx, times, args.raw)?;
        return Ok(EXIT_OK);
    }
    let options = session_jsonl::ReaderOptions {
        keep_raw: args.raw,
        ..Default::default()
    };
    // Reads the committed lines from `at` on, calling `each` with every item; returns the
    // position after them.
    let read_from = |at: LinePosition,
                     each: &mut dyn FnMut(Item) -> Result<(), CliError>|
     -> Result<LinePosition, CliError> {
        let bytes = catalogue
            .read_bytes(run_id, at.offset, Extent::Committed)
            .map_err(|e| crate::support::lib_errors::stored_err(location, e))?;
        let mut opts = options.clone();
        opts.expect_header = at.offset == 0;
        let mut reader = session_jsonl::Reader::with_position(bytes, opts, at.offset, at.line);
        while let Some(item) = reader.next() {
            let item = item.map_err(|e| {
                CliError::Data(format!(
                    "{location}: line {}, byte offset {}: {}",
                    reader.next_line(),
                    reader.complete_offset(),
                    crate::error::one_line(&e)
                ))
            })?;
            each(item)?;
        }
        Ok(LinePosition {
            offset: reader.complete_offset(),
            line: reader.next_line(),
        })
    };
    let mut at = read_from(LinePosition::START, &mut |item| {
        last.push(item);
        Ok(())
    })?;
    let ended = last.ended.take();
    last.print(ctx, times, args.raw)?;
    ctx.out.flush()?;
    if let Some(outcome) = ended {
        say_ended(ctx, run_id, &outcome);
        return Ok(EXIT_OK);
    }
    let idle = (args.timeout > 0).then(|| Duration::from_secs(args.timeout));
    let mut last_seen = Instant::now();
    loop {
        std::thread::sleep(CHECK_EVERY);
        let stat = catalogue
            .stat_run(run_id)
            .map_err(|e| crate::support::lib_errors::stored_err(location, e))?;
        let Some(stat) = stat else {
            return Err(CliError::NotFound(format!(
                "{location}: run removed from the shared store while being followed                  (`sessions gc` removes old runs)"
            )));
        };
        if stat.len > at.offset {
            let mut ended = false;
            let (out, err, style) = (&mut *ctx.out, &mut *ctx.err, ctx.style);
            at = read_from(at, &mut |item| {
                if let Item::Record(r) = &item {
                    ended |= matches!(r.record(), Record::RunEnd(_));
                }
                print_item(out, err, style, times, args.raw, &item)
            })?;
            ctx.out.flush()?;
            last_seen = Instant::now();
            if ended {
                return Ok(EXIT_OK);
            }
        } else if stat.len < at.offset {
            return Err(CliError::Data(format!(
                "{location}: the stored run became shorter ({} bytes) than what was read ({})                  while being followed; stopped",
                stat.len, at.offset
            )));
        } else if idle.is_some_and(|d| last_seen.elapsed() >= d) {
            ctx.warn(&format!(
                "no new records for {} s and no run.end; stopped following",
                args.timeout
            ));
            return Ok(EXIT_OK);
        }
    }
}

/// How often `tail -f` checks that the followed path still names the file it opened.
const CHECK_EVERY: Duration = Duration::from_millis(250);

/// What the followed path named when it was opened (device and inode on Unix).
struct FileIdentity(Option<(u64, u64)>);

/// How the followed file went away.
enum Gone {
    /// Nothing at the path any more (deleted, moved to the trash by `gc`, archived).
    Removed,
    /// Another file now has the path (the old one was renamed over or recreated).
    Replaced,
}

impl FileIdentity {
    fn of(path: &std::path::Path) -> Self {
        FileIdentity(std::fs::metadata(path).ok().and_then(|m| identity(&m)))
    }

    /// Whether the path no longer names the opened file.
    fn vanished(&self, path: &std::path::Path) -> Option<Gone> {
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(Gone::Removed),
            Err(_) => None,
            Ok(m) => match (self.0, identity(&m)) {
                (Some(a), Some(b)) if a != b => Some(Gone::Replaced),
                _ => None,
            },
        }
    }
}

#[cfg(unix)]
fn identity(m: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn identity(_: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

impl Gone {
    /// Removed: not found (3); replaced: data error (4).
    fn error(&self, shown: &str, path: &std::path::Path) -> CliError {
        match self {
            Gone::Removed => {
                let mut archive = path.as_os_str().to_owned();
                archive.push(".zst");
                let why = if std::path::Path::new(&archive).exists() {
                    "it was archived (`sessions tail` prints the archive)"
                } else {
                    "it was deleted or moved (`sessions gc` moves runs to the trash)"
                };
                CliError::NotFound(format!(
                    "{shown}: run file removed while being followed: {why}"
                ))
            }
            Gone::Replaced => CliError::Data(format!(
                "{shown}: run file replaced by another file while being followed; \
                 stopped (run `sessions tail` again to read the new file)"
            )),
        }
    }
}

/// Prints one item: a record as one summary line, or with `raw` as its stored line; a damage
/// report as a red line, or with `raw` on `err`, so that raw output holds only stored lines.
fn print_item(
    out: &mut dyn Write,
    err: &mut dyn Write,
    s: Style,
    times: TimeDisplay,
    raw: bool,
    item: &Item,
) -> Result<(), CliError> {
    match item {
        Item::Record(r) => {
            if raw {
                match &r.raw {
                    Some(bytes) => out.write_all(bytes)?,
                    None => out.write_all(&r.parsed.to_json().unwrap_or_default())?,
                }
                out.write_all(b"\n")?;
            } else {
                let rec = r.record();
                let ts = match rec {
                    Record::Unknown(u) => u.ts().map(|t| times.show(t.as_str())),
                    _ => rec.ts().map(|t| times.show(t.as_str())),
                }
                .unwrap_or_default();
                let clock = ts.get(11..19).unwrap_or(&ts).to_owned();
                writeln!(
                    out,
                    "{} {} {}",
                    s.paint(Paint::Dim, &one_line(&escape_controls(&clock), 40)),
                    s.paint(Paint::Bold, &one_line(&escape_controls(rec.kind()), 80)),
                    one_line(
                        &escape_controls(&describe(rec)),
                        crate::support::render::UNKNOWN_RECORD_JSON_WIDTH
                    )
                )?;
            }
        }
        Item::Damage(d) => {
            let text = one_line(&escape_controls(&format!("damage: {d}")), 400);
            if raw {
                // Best effort, like every warning: stderr is the last resort.
                let _ = writeln!(err, "sessions: {text}");
            } else {
                writeln!(out, "{}", s.paint(Paint::Red, &text))?;
            }
        }
    }
    Ok(())
}

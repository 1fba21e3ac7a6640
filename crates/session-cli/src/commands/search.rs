//! `sessions search`: full-text search over the store's run logs through `search.db`
//! (session-state's `SearchIndex`, brought up to date by session-replay's
//! `io::search::refresh_search` after the run index refresh).

use session_state::{HIGHLIGHT_END, HIGHLIGHT_START, SearchIndex, SearchQuery, StateStore};
use session_storage::{RunSearch, RunSearchQuery, StorageError};

use crate::Ctx;
use crate::backend::{Shared, storage_err};
use crate::cli::SearchArgs;
use crate::error::{CliError, EXIT_OK};
use crate::json_rows::{self, Row, SearchHitRow, TitleHitRow, write_row};
use crate::style::{Paint, escape_controls as v};
use crate::support::open::{open_reading, refresh_index, refresh_search_index, state_err};
use crate::support::search_hits::{Hit, group_by_run, split_marks};
use crate::support::shared::resolve_id;

/// `sessions search TEXT`.
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &SearchArgs) -> Result<i32, CliError> {
    let text = args.text.join(" ");
    if text.trim().is_empty() {
        return Err(CliError::Usage("search: give the text to look for".into()));
    }
    let mut q = SearchQuery::new(text);
    q.fts = args.fts;
    q.session_id = args
        .session
        .as_deref()
        .map(|s| crate::support::ids::session_arg(ctx, s))
        .transpose()?;
    if let Some(w) = &args.workspace {
        let abs = crate::support::listing::workspace_arg(ctx, w)?;
        q.workspace = Some(session_state::normalize_workspace_root(&abs));
    }
    q.since_ms = instant_ms(ctx, args.since.as_deref())?;
    q.until_ms = instant_ms(ctx, args.until.as_deref())?;
    q.kinds = args.kind.iter().map(|k| k.as_str().to_owned()).collect();
    q.limit = args.limit as u64;

    let (store, why) = open_reading(ctx)?;
    let index = if store.is_read_only() {
        if let Some(why) = &why {
            ctx.warn(&format!(
                "{why}: the search index is used as it is (runs written since it was last updated are missing)"
            ));
        }
        match SearchIndex::open_read_only(store.root()).map_err(state_err)? {
            Some(i) => i,
            None => {
                return Err(CliError::NotFound(format!(
                    "no search index at {} yet: run `sessions search` once on a writable store",
                    store.root().join(session_state::SEARCH_DB).display()
                )));
            }
        }
    } else {
        refresh_index(ctx, &store)?;
        match refresh_search_index(ctx, &store, true) {
            Some(i) => i,
            None => {
                return Err(CliError::Data(format!(
                    "the search index {} cannot be opened (see the warning above)",
                    store.root().join(session_state::SEARCH_DB).display()
                )));
            }
        }
    };
    let hits = index.search(&q).map_err(|e| match e {
        session_state::StateError::SearchQuery { .. } => {
            CliError::Usage(crate::error::one_line(&e))
        }
        e => state_err(e),
    })?;
    let titled = titled_sessions(&store, args, &q)?;
    write_results(ctx, args, &titled, &hits)
}

/// The hits of either store, grouped per run, as `--json` rows or for people.
fn write_results<H: Hit>(
    ctx: &mut Ctx<'_>,
    args: &SearchArgs,
    titled: &[session_state::SessionLabel],
    hits: &[H],
) -> Result<i32, CliError> {
    let groups = group_by_run(hits);
    if args.json {
        for l in titled {
            let row = TitleHitRow {
                session_id: l.session_id.clone(),
                title: l.title.clone().unwrap_or_default(),
                pinned: l.pinned,
            };
            write_row(ctx.out, &Row::TitleHit(row))?;
        }
        for (_, run_hits) in &groups {
            for h in run_hits {
                write_row(ctx.out, &Row::SearchHit(hit_row(*h)))?;
            }
        }
        return Ok(EXIT_OK);
    }
    for l in titled {
        let pin = if l.pinned { "  [pinned]" } else { "" };
        writeln!(
            ctx.out,
            "{}  titled \"{}\"{pin}",
            ctx.style
                .paint(Paint::Bold, &format!("session {}", v(&l.session_id))),
            v(l.title.as_deref().unwrap_or_default()),
        )?;
    }
    if !titled.is_empty() && !hits.is_empty() {
        writeln!(ctx.out)?;
    }
    if hits.is_empty() {
        if titled.is_empty() {
            writeln!(ctx.out, "no matches")?;
        }
        return Ok(EXIT_OK);
    }
    let times = ctx.times(args.utc);
    for (i, (_, run_hits)) in groups.iter().enumerate() {
        let Some(first) = run_hits.first() else {
            continue;
        };
        if i > 0 {
            writeln!(ctx.out)?;
        }
        let session = first
            .session_id()
            .map(|s| format!("  session {}", v(s)))
            .unwrap_or_default();
        // Saved messages of a session no run log holds: no run id.
        let heading = if first.run_id().is_empty() {
            "saved messages".to_owned()
        } else {
            v(first.run_id()).into_owned()
        };
        writeln!(
            ctx.out,
            "{}{session}  {}",
            ctx.style.paint(Paint::Bold, &heading),
            ctx.style.paint(Paint::Dim, &v(first.location())),
        )?;
        for h in run_hits {
            let when = h
                .time_ms()
                .map(|ms| times.show(session_schema::Timestamp::from_unix_millis(ms).as_str()))
                .unwrap_or_default();
            // Matches in colour, or between brackets when there is no colour.
            let snippet = if ctx.style.color {
                highlight(h.snippet(), &|s| ctx.style.paint(Paint::Yellow, s))
            } else {
                highlight(h.snippet(), &|s| format!("[{s}]"))
            };
            writeln!(
                ctx.out,
                "  @{:<8} {:<11} {when}\n    {snippet}",
                h.byte_offset(),
                h.kind()
            )?;
        }
    }
    writeln!(
        ctx.out,
        "\n{} hit(s) in {} run(s); `sessions show RUN --at OFFSET` opens a transcript at a hit",
        hits.len(),
        groups.len()
    )?;
    Ok(EXIT_OK)
}

/// A snippet on one line for the terminal: controls escaped, line breaks as `⏎`, matched
/// parts through `mark`.
fn highlight(snippet: &str, mark: &dyn Fn(&str) -> String) -> String {
    let one_line: String = snippet
        .chars()
        .map(|c| if c == '\n' || c == '\r' { '⏎' } else { c })
        .collect();
    let mut out = String::new();
    let mut rest = one_line.as_str();
    while let Some(i) = rest.find(HIGHLIGHT_START) {
        out.push_str(&v(&rest[..i]));
        let after = &rest[i + HIGHLIGHT_START.len_utf8()..];
        let j = after.find(HIGHLIGHT_END).unwrap_or(after.len());
        out.push_str(&mark(&v(&after[..j])));
        rest = after.get(j + HIGHLIGHT_END.len_utf8()..).unwrap_or("");
    }
    out.push_str(&v(rest));
    out
}

/// The sessions whose title (`sessions name`, our own table) holds every word of the text,
/// ignoring case, in id order. Titles are not records: only a search without `--fts`,
/// `--kind`, `--since`, `--until` and `--workspace` looks at them (`--session` narrows them
/// to that session).
fn titled_sessions(
    store: &StateStore,
    args: &SearchArgs,
    q: &SearchQuery,
) -> Result<Vec<session_state::SessionLabel>, CliError> {
    if args.fts
        || !args.kind.is_empty()
        || args.since.is_some()
        || args.until.is_some()
        || args.workspace.is_some()
    {
        return Ok(Vec::new());
    }
    let words: Vec<String> = args
        .text
        .join(" ")
        .split_whitespace()
        .map(str::to_lowercase)
        .collect();
    Ok(crate::support::labels::titles(store)?
        .into_values()
        .filter(|l| q.session_id.as_ref().is_none_or(|s| *s == l.session_id))
        .filter(|l| {
            l.title.as_deref().is_some_and(|t| {
                let t = t.to_lowercase();
                words.iter().all(|w| t.contains(w.as_str()))
            })
        })
        .collect())
}

fn hit_row<H: Hit>(h: &H) -> SearchHitRow {
    let (snippet, marks) = split_marks(h.snippet());
    SearchHitRow {
        run_id: Some(h.run_id().to_owned()).filter(|r| !r.is_empty()),
        session_id: h.session_id().map(str::to_owned),
        workspace: h.workspace().map(str::to_owned),
        file: h.location().to_owned(),
        byte_offset: h.byte_offset(),
        // snake_case like every value of the JSON contract (`--kind` takes `tool-output`).
        kind: h.kind().replace('-', "_"),
        time: h.time_ms().map(|ms| {
            session_schema::Timestamp::from_unix_millis(ms)
                .as_str()
                .to_owned()
        }),
        snippet,
        highlights: marks.iter().map(|(s, e)| [*s, *e]).collect(),
        matched_by: if h.by_words() {
            json_rows::MatchedBy::Words
        } else {
            json_rows::MatchedBy::Substring
        },
    }
}

/// `sessions search TEXT` on a shared store: the backend's own index (PostgreSQL: `tsvector`
/// and `pg_trgm`, fed by the same extraction as `search.db`), the same filters and output.
/// Session titles are local only, so no title rows.
pub(crate) fn search_shared(
    ctx: &mut Ctx<'_>,
    shared: &Shared,
    args: &SearchArgs,
) -> Result<i32, CliError> {
    let text = args.text.join(" ");
    if text.trim().is_empty() {
        return Err(CliError::Usage("search: give the text to look for".into()));
    }
    let mut q = RunSearchQuery::new(text);
    q.native_syntax = args.fts;
    q.session_id = match args.session.as_deref() {
        Some(s) => Some(resolve_id(ctx, shared, s, crate::support::ids::Want::Session)?.1),
        None => None,
    };
    if let Some(w) = &args.workspace {
        let abs = crate::support::listing::workspace_arg(ctx, w)?;
        q.workspace = Some(session_pg::normalize_workspace_root(&abs));
    }
    q.since_ms = instant_ms(ctx, args.since.as_deref())?;
    q.until_ms = instant_ms(ctx, args.until.as_deref())?;
    q.kinds = args.kind.iter().map(|k| k.as_str().to_owned()).collect();
    q.limit = args.limit as u64;
    let pg = shared.backend()?;
    let hits = RunSearch::search(pg.as_ref(), &q).map_err(|e| match e {
        StorageError::InvalidSearchQuery { .. } => CliError::Usage(crate::error::one_line(&e)),
        e => storage_err(shared, e),
    })?;
    write_results(ctx, args, &[], &hits)
}

/// `--since`/`--until` as Unix milliseconds.
fn instant_ms(ctx: &Ctx<'_>, t: Option<&str>) -> Result<Option<i64>, CliError> {
    t.map(|t| {
        crate::timefmt::parse_instant(t, ctx.now, &ctx.zone)
            .map(|dt| i64::try_from(dt.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX))
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_become_offsets_and_terminal_highlights() {
        let s =
            format!("a {HIGHLIGHT_START}bé{HIGHLIGHT_END} c\x1b {HIGHLIGHT_START}d{HIGHLIGHT_END}");
        assert_eq!(
            split_marks(&s),
            ("a bé c\x1b d".to_owned(), vec![(2, 4), (8, 9)])
        );
        assert_eq!(highlight(&s, &|t| format!("<{t}>")), "a <bé> c\\u001b <d>");
        assert_eq!(highlight("x\ny", &|t| t.to_owned()), "x⏎y");
    }
}

//! Full-text search on PostgreSQL: the documents of run lines and saved session messages in
//! `search_docs` (migration 3), a `tsvector` (the `simple` configuration) with a GIN index
//! for words and a `pg_trgm` GIN index for substrings, and [`RunSearch`] over them.
//!
//! * **The same documents as the local `search.db`.** Lines go through the workspace's
//!   tolerant reader (session-jsonl) and session-replay's [`Extractor`], the extraction the
//!   local index uses; saved messages through [`message_documents`].
//! * **Written with the lines.** An append indexes its new lines in its own transaction, with
//!   a new [`Extractor`] per append (the documented incremental rule: a `tool_result` event
//!   whose `tool.output` came in an earlier append is indexed once more, as tool output).
//!   Each appended line is parsed once: the append's fold hands the records it reads to the
//!   extraction ([`AppendDocs`]), which skips the records of `llm.request` lines. An append
//!   whose lines give no document does not touch `search_docs` at all. A save indexes the
//!   messages it writes. Removing a run (`gc`) or messages removes
//!   their documents (statement triggers of migration 3), in the same transaction.
//! * **Stores from before migration 3** have runs without documents:
//!   [`PgBackend::reindex_search`] indexes every stored run and session again.
//! * **Queries** ([`PgBackend::search`]): each word of plain text becomes a phrase
//!   (`phraseto_tsquery`, never a syntax error); word hits are ranked with `ts_rank` among the
//!   newest [`RANK_WINDOW`] matching documents (a common word is not ranked over every
//!   document that holds it); then, when every word has three characters or more, documents
//!   holding every word as a case-insensitive substring (`ILIKE` through the trigram index),
//!   newest first. Snippets are cut around the first match and marked like the local ones.

use postgres::Transaction;
use postgres::types::ToSql;
use session_jsonl::{Item, Reader, ReaderOptions};
use session_replay::search::{Document, Extractor, message_documents};
use session_schema::Record;
use session_storage::{
    HIGHLIGHT_END, HIGHLIGHT_START, RunSearch, RunSearchHit, RunSearchQuery, SearchMatch,
    StorageError, Target,
};

use crate::backend::PgBackend;
use crate::derive::MAX_LINE_LEN;
use crate::error::{PgError, RowExt, query, storage};

/// Word hits ranked per query: the newest this many documents matching every word (or
/// [`RunSearchQuery::limit`] of them when that is larger).
pub const RANK_WINDOW: i64 = 1000;

/// Characters of a document's text that its `tsvector` covers (the rest is found by
/// substring search only): keeps every `tsvector` under PostgreSQL's 1 MB limit.
pub const WORDS_PREFIX_CHARS: usize = 100_000;

/// Characters of a snippet shown before the first match.
const SNIPPET_BEFORE: usize = 40;

/// Characters of a snippet in all (more when the first match is longer).
const SNIPPET_WIDTH: usize = 160;

/// The record type never indexed.
const LLM_REQUEST: &str = "llm.request";

const SQL_INSERT_RUN_DOCS: &str = "INSERT INTO search_docs (run_key, byte_offset, kind, time_ms, body) \
     SELECT $1::int8, * FROM unnest($2::int8[], $3::text[], $4::int8[], $5::text[])";

const SQL_INSERT_MANY_RUN_DOCS: &str = "INSERT INTO search_docs (run_key, byte_offset, kind, time_ms, body) \
     SELECT * FROM unnest($1::int8[], $2::int8[], $3::text[], $4::int8[], $5::text[])";

const SQL_INSERT_MESSAGE_DOCS: &str = "INSERT INTO search_docs (session_id, msg_idx, byte_offset, kind, time_ms, body) \
     SELECT $1::text, * FROM unnest($2::int8[], $3::int8[], $4::text[], $5::int8[], $6::text[])";

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// Text as stored in `search_docs.body`: NUL removed (`text` refuses it), the highlight
/// markers replaced by U+FFFD so that a snippet's marks are always ours.
pub(crate) fn body_text(text: &str) -> String {
    text.chars()
        .filter(|c| *c != '\0')
        .map(|c| {
            if c == HIGHLIGHT_START || c == HIGHLIGHT_END {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect()
}

/// The documents of complete lines `bytes`, which start at byte `offset`, line `line` of
/// their run, read by the tolerant reader (lossy UTF-8, text beside NUL runs) as the local
/// index reads them.
fn segment_documents(
    extractor: &mut Extractor,
    bytes: &[u8],
    offset: u64,
    line: u64,
    out: &mut Vec<Document>,
) {
    if bytes.is_empty() {
        return;
    }
    let options = ReaderOptions {
        max_line_len: MAX_LINE_LEN,
        read_size: bytes.len().clamp(1, 1 << 20),
        keep_raw: false,
        expect_header: false,
        ..ReaderOptions::default()
    };
    for item in Reader::with_position(bytes, options, offset, line) {
        // Reading from memory cannot fail; damage gives nothing to index.
        if let Ok(Item::Record(r)) = item {
            out.extend(extractor.documents(r.record(), r.offset));
        }
    }
}

/// The documents of an append, collected from the records its fold reads
/// ([`RunFold::absorb_with`](crate::derive::RunFold::absorb_with)), so that each appended
/// line is parsed once, for its derived columns and its documents alike. Records of a line
/// whose (first) record is an `llm.request` give none. One collector per append (the
/// documented incremental rule of the module documentation).
pub(crate) struct AppendDocs {
    extractor: Extractor,
    docs: Vec<Document>,
}

impl AppendDocs {
    /// A collector for one append.
    pub(crate) fn new() -> AppendDocs {
        AppendDocs {
            extractor: Extractor::new(),
            docs: Vec::new(),
        }
    }

    /// One record read by the append's fold, at byte `offset` of its run, on a line whose
    /// record type is `line_type`.
    pub(crate) fn record(&mut self, record: &Record, offset: u64, line_type: Option<&str>) {
        if line_type != Some(LLM_REQUEST) {
            self.docs.extend(self.extractor.documents(record, offset));
        }
    }

    /// The documents collected, in order.
    pub(crate) fn docs(&self) -> &[Document] {
        &self.docs
    }
}

/// The documents of appended complete lines `lines` (starting at byte `at`, line
/// `first_line`), `types` the record type the append parser found per line: `llm.request`
/// lines are skipped, the others read in runs of consecutive lines (a second parse: the
/// reference [`AppendDocs`] is checked against).
#[cfg(test)]
pub(crate) fn appended_documents(
    lines: &[u8],
    at: u64,
    first_line: u64,
    types: &[Option<String>],
) -> Vec<Document> {
    let mut extractor = Extractor::new();
    let mut out = Vec::new();
    // Start (in `lines`) and line number of the pending run of lines to read.
    let mut seg: Option<(usize, u64)> = None;
    let mut start = 0usize;
    for (i, nl) in memchr::memchr_iter(b'\n', lines).enumerate() {
        let number = first_line + i as u64;
        let skip = types
            .get(i)
            .and_then(|t| t.as_deref())
            .is_some_and(|t| t == LLM_REQUEST);
        if skip {
            if let Some((s, l)) = seg.take() {
                let bytes = lines.get(s..start).unwrap_or_default();
                segment_documents(&mut extractor, bytes, at + s as u64, l, &mut out);
            }
        } else if seg.is_none() {
            seg = Some((start, number));
        }
        start = nl + 1;
    }
    if let Some((s, l)) = seg {
        let bytes = lines.get(s..start).unwrap_or_default();
        segment_documents(&mut extractor, bytes, at + s as u64, l, &mut out);
    }
    out
}

/// The search documents of appended lines as the columns of `search_docs` (byte offset,
/// kind, time, body), ready to be bound as arrays: by the append transaction's own INSERT
/// ([`index_appended`]) or by the one-statement appends, whose statement inserts them in a
/// data-modifying `WITH` part beside the lines.
#[derive(Debug, Default)]
pub(crate) struct RunDocColumns {
    pub(crate) offsets: Vec<i64>,
    pub(crate) kinds: Vec<&'static str>,
    pub(crate) times: Vec<Option<i64>>,
    pub(crate) bodies: Vec<String>,
}

impl RunDocColumns {
    /// `docs` as columns.
    pub(crate) fn of_docs(docs: &[Document]) -> RunDocColumns {
        RunDocColumns {
            offsets: docs.iter().map(|d| to_i64(d.byte_offset)).collect(),
            kinds: docs.iter().map(|d| d.kind.as_str()).collect(),
            times: docs.iter().map(|d| d.time_ms).collect(),
            bodies: docs.iter().map(|d| body_text(&d.text)).collect(),
        }
    }
}

/// Writes `docs` of run `run_key` (inside the caller's transaction).
fn insert_run_docs(
    tx: &mut Transaction<'_>,
    run_key: i64,
    docs: &[Document],
) -> Result<(), PgError> {
    if docs.is_empty() {
        return Ok(());
    }
    let cols = RunDocColumns::of_docs(docs);
    tx.execute(
        SQL_INSERT_RUN_DOCS,
        &[
            &run_key,
            &cols.offsets,
            &cols.kinds,
            &cols.times,
            &cols.bodies,
        ],
    )
    .map_err(query("index lines for search"))?;
    Ok(())
}

/// Indexes the lines an append adds to run `run_key`, in the append's transaction (called
/// by the append right after it stored them; `docs`: what its fold collected).
///
/// # Errors
/// [`PgError::Query`].
pub(crate) fn index_appended(
    tx: &mut Transaction<'_>,
    run_key: i64,
    docs: &AppendDocs,
) -> Result<(), PgError> {
    insert_run_docs(tx, run_key, docs.docs())
}

/// Indexes the lines of several runs created together (run key, what the fold of each
/// collected: [`AppendDocs`]) with one statement, in the transaction that created them.
///
/// # Errors
/// [`PgError::Query`].
pub(crate) fn index_created(
    tx: &mut Transaction<'_>,
    runs: &[(i64, &AppendDocs)],
) -> Result<(), PgError> {
    let mut keys = Vec::new();
    let mut cols = RunDocColumns::default();
    for (key, docs) in runs {
        let more = RunDocColumns::of_docs(docs.docs());
        keys.extend(std::iter::repeat_n(*key, more.offsets.len()));
        cols.offsets.extend(more.offsets);
        cols.kinds.extend(more.kinds);
        cols.times.extend(more.times);
        cols.bodies.extend(more.bodies);
    }
    if keys.is_empty() {
        return Ok(());
    }
    tx.execute(
        SQL_INSERT_MANY_RUN_DOCS,
        &[&keys, &cols.offsets, &cols.kinds, &cols.times, &cols.bodies],
    )
    .map_err(query("index lines for search"))?;
    Ok(())
}

/// The documents of saved messages `messages[from..]` (JSON bytes, one message each), with
/// byte offsets as in the session's messages file (each message one line: its bytes and a
/// `\n`); a message that does not parse gives nothing, as in the local index.
pub(crate) fn message_docs(messages: &[Vec<u8>], from: usize) -> Vec<(usize, Document)> {
    let mut out = Vec::new();
    let mut offset = 0u64;
    for (i, m) in messages.iter().enumerate() {
        if i >= from {
            let text = String::from_utf8_lossy(m);
            if let Ok(msg) = serde_json::from_str::<session_schema::BaseMessage>(&text) {
                out.extend(message_documents(&msg, offset).into_iter().map(|d| (i, d)));
            }
        }
        offset += m.len() as u64 + 1;
    }
    out
}

/// Indexes the saved messages `messages[from..]` of session `session_id`, in the save's
/// transaction (the documents of the messages it replaced went with them).
///
/// # Errors
/// [`PgError::Query`].
pub(crate) fn index_messages(
    tx: &mut Transaction<'_>,
    session_id: &str,
    messages: &[Vec<u8>],
    from: usize,
) -> Result<(), PgError> {
    let docs = message_docs(messages, from);
    if docs.is_empty() {
        return Ok(());
    }
    let idx: Vec<i64> = docs.iter().map(|(i, _)| to_i64(*i as u64)).collect();
    let offsets: Vec<i64> = docs.iter().map(|(_, d)| to_i64(d.byte_offset)).collect();
    let kinds: Vec<&str> = docs.iter().map(|(_, d)| d.kind.as_str()).collect();
    let times: Vec<Option<i64>> = docs.iter().map(|(_, d)| d.time_ms).collect();
    let bodies: Vec<String> = docs.iter().map(|(_, d)| body_text(&d.text)).collect();
    tx.execute(
        SQL_INSERT_MESSAGE_DOCS,
        &[&session_id, &idx, &offsets, &kinds, &times, &bodies],
    )
    .map_err(query("index saved messages for search"))?;
    Ok(())
}

/// What [`PgBackend::reindex_search`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SearchReindexReport {
    /// Runs indexed again.
    pub runs: u64,
    /// Sessions whose saved messages were indexed again.
    pub sessions: u64,
    /// Documents written.
    pub documents: u64,
}

/// Bytes of lines read per round trip by a reindex.
const REINDEX_BATCH_BYTES: i64 = 4 << 20;

fn reindex_run(client: &mut postgres::Client, run_id: &str) -> Result<u64, PgError> {
    let mut tx = client.transaction().map_err(query("begin a reindex"))?;
    // The lock of the run's tip row, which every append takes: no append runs meanwhile.
    let Some(row) = tx
        .query_opt(
            "SELECT t.run_key FROM runs r JOIN run_tips t ON t.run_key = r.run_key \
             WHERE r.run_id = $1 FOR UPDATE OF t",
            &[&run_id],
        )
        .map_err(query("lock the run row"))?
    else {
        return Ok(0);
    };
    let key: i64 = row.col(0)?;
    tx.execute("DELETE FROM search_docs WHERE run_key = $1", &[&key])
        .map_err(query("drop a run's search documents"))?;
    let mut extractor = Extractor::new();
    let mut written = 0u64;
    let mut from = 0i64;
    // A run of consecutive lines read so far: its bytes, start offset, first line number.
    let mut seg: Vec<u8> = Vec::new();
    let mut seg_at: (u64, u64) = (0, 1);
    loop {
        let rows = tx
            .query(
                "SELECT byte_offset, line_no, data, record_type IS NOT DISTINCT FROM $3 \
                 FROM run_lines WHERE run_key = $1 AND byte_offset >= $2 \
                 AND byte_offset < $2 + $4 ORDER BY byte_offset",
                &[&key, &from, &LLM_REQUEST, &REINDEX_BATCH_BYTES],
            )
            .map_err(query("read stored lines"))?;
        let more = tx
            .query_opt(
                "SELECT byte_offset FROM run_lines WHERE run_key = $1 AND byte_offset >= $2 \
                 ORDER BY byte_offset LIMIT 1",
                &[&key, &(from + REINDEX_BATCH_BYTES)],
            )
            .map_err(query("read stored lines"))?;
        let mut docs = Vec::new();
        for r in &rows {
            let offset = to_u64(r.col(0)?);
            let line = to_u64(r.col(1)?);
            let data: &[u8] = r.col(2)?;
            let skip: bool = r.col(3)?;
            let contiguous = !seg.is_empty() && seg_at.0 + seg.len() as u64 == offset;
            if skip || !contiguous {
                segment_documents(&mut extractor, &seg, seg_at.0, seg_at.1, &mut docs);
                seg.clear();
            }
            if !skip {
                if seg.is_empty() {
                    seg_at = (offset, line);
                }
                seg.extend_from_slice(data);
            }
        }
        if more.is_none() {
            segment_documents(&mut extractor, &seg, seg_at.0, seg_at.1, &mut docs);
            seg.clear();
        }
        written += docs.len() as u64;
        insert_run_docs(&mut tx, key, &docs)?;
        match more {
            Some(r) => from = r.col(0)?,
            None => break,
        }
    }
    tx.commit().map_err(query("commit a reindex"))?;
    Ok(written)
}

fn reindex_session(client: &mut postgres::Client, session_id: &str) -> Result<u64, PgError> {
    let mut tx = client.transaction().map_err(query("begin a reindex"))?;
    if tx
        .query_opt(
            "SELECT 1 FROM sessions WHERE session_id = $1 FOR UPDATE",
            &[&session_id],
        )
        .map_err(query("lock the session row"))?
        .is_none()
    {
        return Ok(0);
    }
    tx.execute(
        "DELETE FROM search_docs WHERE session_id = $1 AND run_key IS NULL",
        &[&session_id],
    )
    .map_err(query("drop a session's search documents"))?;
    let messages: Vec<Vec<u8>> = tx
        .query(
            "SELECT data FROM session_messages WHERE session_id = $1 ORDER BY idx",
            &[&session_id],
        )
        .map_err(query("read saved messages"))?
        .iter()
        .map(|r| r.col(0))
        .collect::<Result<_, _>>()?;
    let n = message_docs(&messages, 0).len() as u64;
    index_messages(&mut tx, session_id, &messages, 0)?;
    tx.commit().map_err(query("commit a reindex"))?;
    Ok(n)
}

/// Escapes `%`, `_` and `\` for a `LIKE` pattern (backslash is the escape character).
fn like_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Lower case of `c` when it is one character (else `c`): positions of a folded text are
/// those of the text.
fn fold(c: char) -> char {
    let mut l = c.to_lowercase();
    match (l.next(), l.next()) {
        (Some(x), None) => x,
        _ => c,
    }
}

/// A snippet of `body` around the first case-insensitive occurrence of any of `needles`:
/// [`SNIPPET_WIDTH`] characters from [`SNIPPET_BEFORE`] before it, each occurrence in it
/// between [`HIGHLIGHT_START`] and [`HIGHLIGHT_END`], `…` where text was left out. Without
/// an occurrence (a word match the text shows differently), the start of the text.
pub(crate) fn snippet(body: &str, needles: &[&str]) -> String {
    let chars: Vec<char> = body.chars().collect();
    let folded: Vec<char> = chars.iter().map(|c| fold(*c)).collect();
    let needles: Vec<Vec<char>> = needles
        .iter()
        .map(|n| n.chars().map(fold).collect::<Vec<char>>())
        .filter(|n| !n.is_empty())
        .collect();
    let mut matches: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < folded.len() {
        let best = needles
            .iter()
            .filter(|n| {
                folded
                    .get(i..i + n.len())
                    .is_some_and(|w| w == n.as_slice())
            })
            .map(Vec::len)
            .max();
        match best {
            Some(len) => {
                matches.push((i, i + len));
                i += len;
            }
            None => i += 1,
        }
    }
    let n = chars.len();
    let (first_start, first_end) = matches.first().copied().unwrap_or((0, 0));
    let mut start = first_start.saturating_sub(SNIPPET_BEFORE);
    // Begin at a word when one starts shortly after the cut.
    if start > 0
        && let Some(k) = (start..first_start.min(start + 15)).find(|&k| {
            chars
                .get(k.wrapping_sub(1))
                .is_some_and(|c| c.is_whitespace())
        })
    {
        start = k;
    }
    let mut end = n.min((start + SNIPPET_WIDTH).max(first_end));
    if end < n
        && let Some(k) = (first_end.max(end.saturating_sub(15))..end)
            .rev()
            .find(|&k| chars.get(k).is_some_and(|c| c.is_whitespace()))
    {
        end = k;
    }
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    let mut m = matches
        .iter()
        .filter(|(s, e)| *e > start && *s < end)
        .peekable();
    let mut open = false;
    for (k, c) in chars.iter().enumerate().take(end).skip(start) {
        if !open
            && let Some((s, _)) = m.peek()
            && k >= *s
        {
            out.push(HIGHLIGHT_START);
            open = true;
        }
        out.push(*c);
        if open
            && let Some((_, e)) = m.peek()
            && k + 1 >= *e
        {
            out.push(HIGHLIGHT_END);
            open = false;
            m.next();
        }
    }
    if open {
        out.push(HIGHLIGHT_END);
    }
    if end < n {
        out.push('…');
    }
    out
}

/// The words to highlight of a query: its words, or for native syntax the runs of letters
/// and digits in it.
fn highlight_words(q: &RunSearchQuery) -> Vec<String> {
    if q.native_syntax {
        q.text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    } else {
        q.words().into_iter().map(str::to_owned).collect()
    }
}

/// One raw hit row: doc id, score, run id, session, workspace, origin host, offset, kind,
/// time, body.
struct Row {
    doc_id: i64,
    score: f64,
    run_id: String,
    session_id: Option<String>,
    workspace: Option<String>,
    host: Option<String>,
    byte_offset: u64,
    kind: String,
    time_ms: Option<i64>,
    body: String,
}

/// The columns of a hit, from `search_docs d` and its run `r` / session `s`.
const HIT_COLUMNS: &str = "d.doc_id, coalesce(r.run_id, ''), coalesce(r.session_id, d.session_id), \
     coalesce(r.workspace_norm, s.workspace_norm), r.origin_host, d.byte_offset, d.kind, d.time_ms, d.body";

const HIT_JOINS: &str = "search_docs d LEFT JOIN runs r ON r.run_key = d.run_key \
     LEFT JOIN sessions s ON d.run_key IS NULL AND s.session_id = d.session_id";

/// Which documents are searchable, and the filters of `q`, as SQL over `d`, `r`, `s`; the
/// filter values are pushed to `params`.
fn filters(q: &RunSearchQuery, params: &mut Vec<Box<dyn ToSql + Sync + Send>>) -> String {
    // Saved messages count only for sessions that no run log holds (as the local index).
    let mut sql = String::from(
        "(r.run_key IS NOT NULL OR (d.run_key IS NULL AND NOT EXISTS \
         (SELECT 1 FROM runs r2 WHERE r2.session_id = d.session_id)))",
    );
    let mut add = |sql: &mut String, cond: &str, v: Box<dyn ToSql + Sync + Send>| {
        params.push(v);
        sql.push_str(&format!(" AND {cond} ${}", params.len()));
    };
    if let Some(s) = &q.session_id {
        add(
            &mut sql,
            "coalesce(r.session_id, d.session_id) =",
            Box::new(s.clone()),
        );
    }
    if let Some(w) = &q.workspace {
        add(
            &mut sql,
            "coalesce(r.workspace_norm, s.workspace_norm) =",
            Box::new(w.clone()),
        );
    }
    if let Some(t) = q.since_ms {
        add(&mut sql, "d.time_ms >=", Box::new(t));
    }
    if let Some(t) = q.until_ms {
        add(&mut sql, "d.time_ms <", Box::new(t));
    }
    if !q.kinds.is_empty() {
        params.push(Box::new(q.kinds.clone()));
        sql.push_str(&format!(" AND d.kind = ANY(${})", params.len()));
    }
    sql
}

fn hit_row(r: &postgres::Row, score: Option<f64>) -> Result<Row, PgError> {
    Ok(Row {
        doc_id: r.col(0)?,
        score: score.unwrap_or(0.0),
        run_id: r.col(1)?,
        session_id: r.col(2)?,
        workspace: r.col(3)?,
        host: r.col(4)?,
        byte_offset: to_u64(r.col(5)?),
        kind: r.col(6)?,
        time_ms: r.col(7)?,
        body: r.col(8)?,
    })
}

/// Word hits: ranked among the newest [`RANK_WINDOW`] (or `limit`) matching documents.
fn word_hits(client: &mut postgres::Client, q: &RunSearchQuery) -> Result<Vec<Row>, PgError> {
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    let tsquery = if q.native_syntax {
        params.push(Box::new(q.text.clone()));
        "to_tsquery('simple', $1)".to_owned()
    } else {
        let words = q.words();
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let mut parts = Vec::new();
        for w in words {
            params.push(Box::new(w.to_owned()));
            parts.push(format!("phraseto_tsquery('simple', ${})", params.len()));
        }
        parts.join(" && ")
    };
    let cond = filters(q, &mut params);
    // A caller asking for more hits than the window gets them: the window grows to the limit.
    params.push(Box::new(RANK_WINDOW.max(to_i64(q.limit))));
    let window = params.len();
    params.push(Box::new(to_i64(q.limit)));
    let limit = params.len();
    let sql = format!(
        "WITH q AS (SELECT {tsquery} AS q), \
         cand AS (SELECT d.doc_id, d.words FROM {HIT_JOINS}, q \
                  WHERE d.words @@ q.q AND {cond} ORDER BY d.doc_id DESC LIMIT ${window}), \
         page AS (SELECT c.doc_id, ts_rank(c.words, q.q)::float8 AS score FROM cand c, q \
                  ORDER BY score DESC, c.doc_id DESC LIMIT ${limit}) \
         SELECT {HIT_COLUMNS}, p.score FROM page p JOIN search_docs d ON d.doc_id = p.doc_id \
         LEFT JOIN runs r ON r.run_key = d.run_key \
         LEFT JOIN sessions s ON d.run_key IS NULL AND s.session_id = d.session_id \
         ORDER BY p.score DESC, d.doc_id DESC"
    );
    let refs: Vec<&(dyn ToSql + Sync)> = params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect();
    let rows = client
        .query(&sql, &refs)
        .map_err(query("search the word index"))?;
    rows.iter()
        .map(|r| {
            let score: f64 = r.col(9)?;
            hit_row(r, Some(score))
        })
        .collect()
}

/// Substring hits: documents holding every word (case-insensitive), newest first.
fn substring_hits(
    client: &mut postgres::Client,
    q: &RunSearchQuery,
    limit: u64,
) -> Result<Vec<Row>, PgError> {
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    let mut like = Vec::new();
    for w in q.words() {
        params.push(Box::new(format!("%{}%", like_escape(w))));
        like.push(format!("d.body ILIKE ${}", params.len()));
    }
    if like.is_empty() {
        return Ok(Vec::new());
    }
    let cond = filters(q, &mut params);
    params.push(Box::new(to_i64(limit)));
    let sql = format!(
        "SELECT {HIT_COLUMNS} FROM {HIT_JOINS} WHERE {} AND {cond} \
         ORDER BY d.doc_id DESC LIMIT ${}",
        like.join(" AND "),
        params.len()
    );
    let refs: Vec<&(dyn ToSql + Sync)> = params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect();
    let rows = client
        .query(&sql, &refs)
        .map_err(query("search the substring index"))?;
    rows.iter().map(|r| hit_row(r, None)).collect()
}

fn to_hit(row: Row, by: SearchMatch, words: &[&str]) -> RunSearchHit {
    let location = if row.run_id.is_empty() {
        format!(
            "messages/{}.jsonl",
            row.session_id.as_deref().unwrap_or_default()
        )
    } else {
        format!("{}:{}", row.host.as_deref().unwrap_or_default(), row.run_id)
    };
    let mut hit = RunSearchHit::new(by);
    hit.snippet = snippet(&row.body, words);
    hit.run_id = row.run_id;
    hit.session_id = row.session_id;
    hit.workspace = row.workspace;
    hit.location = location;
    hit.byte_offset = row.byte_offset;
    hit.kind = row.kind;
    hit.time_ms = row.time_ms;
    hit.score = row.score;
    hit
}

impl PgBackend {
    /// Full-text search ([`RunSearch::search`]; see the module documentation for the
    /// semantics). Native syntax ([`RunSearchQuery::native_syntax`]) is PostgreSQL's
    /// `to_tsquery('simple', …)` and asks the word index only.
    ///
    /// # Errors
    /// [`StorageError::InvalidSearchQuery`] for native syntax `to_tsquery` refuses;
    /// [`StorageError::Backend`].
    pub fn search(&self, q: &RunSearchQuery) -> Result<Vec<RunSearchHit>, StorageError> {
        if q.limit == 0 {
            return Ok(Vec::new());
        }
        let query = q.clone();
        let rows = self
            .pool
            .run(true, move |s| {
                let client = s.client()?;
                let mut hits: Vec<(Row, SearchMatch)> = word_hits(client, &query)?
                    .into_iter()
                    .map(|r| (r, SearchMatch::Words))
                    .collect();
                let room = query.limit.saturating_sub(hits.len() as u64);
                if !query.native_syntax && query.wants_substrings() && room > 0 {
                    let seen: std::collections::BTreeSet<i64> =
                        hits.iter().map(|(r, _)| r.doc_id).collect();
                    let extra =
                        substring_hits(client, &query, room.saturating_add(hits.len() as u64))?;
                    for r in extra {
                        if hits.len() as u64 >= query.limit {
                            break;
                        }
                        if !seen.contains(&r.doc_id) {
                            hits.push((r, SearchMatch::Substring));
                        }
                    }
                }
                Ok(hits)
            })
            .map_err(|e| match e.sql_state() {
                // syntax_error: what to_tsquery says of bad native syntax (our SQL is fixed).
                Some("42601") if q.native_syntax => StorageError::InvalidSearchQuery {
                    query: q.text.clone(),
                    message: match &e {
                        PgError::Query { source, .. } => source
                            .as_db_error()
                            .map_or_else(|| source.to_string(), |d| d.message().to_owned()),
                        other => other.to_string(),
                    },
                },
                _ => storage("search", Target::Store, e),
            })?;
        let words = highlight_words(q);
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        Ok(rows
            .into_iter()
            .map(|(r, by)| to_hit(r, by, &words))
            .collect())
    }

    /// Indexes every stored run and saved session for search again, one transaction each
    /// (under the run's or session's row lock, so appends and saves wait, never interleave):
    /// for a store that holds runs from before migration 3 (its [`migration`] report lists
    /// 10 as applied), or after the extraction rules changed. Idempotent.
    ///
    /// [`migration`]: PgBackend::migration
    ///
    /// # Errors
    /// [`PgError::Query`] (what was committed before stays indexed; run it again).
    pub fn reindex_search(&self) -> Result<SearchReindexReport, PgError> {
        self.pool.run(true, |s| {
            let client = s.client()?;
            let mut report = SearchReindexReport::default();
            let runs: Vec<String> = client
                .query("SELECT run_id FROM runs ORDER BY run_key", &[])
                .map_err(query("list runs"))?
                .iter()
                .map(|r| r.col(0))
                .collect::<Result<_, _>>()?;
            for id in &runs {
                report.documents += reindex_run(client, id)?;
                report.runs += 1;
            }
            let sessions: Vec<String> = client
                .query("SELECT session_id FROM sessions ORDER BY session_id", &[])
                .map_err(query("list sessions"))?
                .iter()
                .map(|r| r.col(0))
                .collect::<Result<_, _>>()?;
            for id in &sessions {
                report.documents += reindex_session(client, id)?;
                report.sessions += 1;
            }
            Ok(report)
        })
    }

    /// Number of search documents stored for run `run_id` (0 for an unknown run).
    ///
    /// # Errors
    /// [`StorageError::UnsafeId`], [`StorageError::Backend`].
    pub fn search_document_count(&self, run_id: &str) -> Result<u64, StorageError> {
        session_storage::checked_id(run_id)?;
        let id = run_id.to_owned();
        self.pool
            .run(true, move |s| {
                let n: i64 = s
                    .client()?
                    .query_one(
                        "SELECT count(*) FROM search_docs d JOIN runs r ON r.run_key = d.run_key \
                         WHERE r.run_id = $1",
                        &[&id],
                    )
                    .map_err(query("count search documents"))?
                    .col(0)?;
                Ok(to_u64(n))
            })
            .map_err(|e| storage("count search documents of", Target::run(run_id), e))
    }
}

impl RunSearch for PgBackend {
    fn search(&self, query: &RunSearchQuery) -> Result<Vec<RunSearchHit>, StorageError> {
        PgBackend::search(self, query)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(s: &str) -> String {
        s.replace(HIGHLIGHT_START, "[").replace(HIGHLIGHT_END, "]")
    }

    #[test]
    fn snippets_mark_every_occurrence_case_insensitively() {
        assert_eq!(
            shown(&snippet("Fix the Parser; the parser fails", &["parser"])),
            "Fix the [Parser]; the [parser] fails"
        );
        assert_eq!(
            shown(&snippet("これは日本語のテキストです", &["日本語"])),
            "これは[日本語]のテキストです"
        );
        // No occurrence: the start of the text, unmarked.
        assert_eq!(shown(&snippet("ux capac", &["ux-capac"])), "ux capac");
    }

    #[test]
    fn long_texts_are_cut_around_the_first_match() {
        let body = format!("{} needle {}", "a ".repeat(200), "b ".repeat(200));
        let s = shown(&snippet(&body, &["needle"]));
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains("[needle]"));
        assert!(s.chars().count() <= SNIPPET_WIDTH + 4, "{s}");
        let before = s.split("[needle]").next().unwrap_or_default();
        assert!(before.chars().count() <= SNIPPET_BEFORE + 1, "{before:?}");
    }

    #[test]
    fn the_migration_indexes_words_of_the_documented_prefix() {
        let words = format!("left(body, {WORDS_PREFIX_CHARS})");
        assert!(
            crate::schema::MIGRATIONS
                .iter()
                .any(|m| m.sql.contains(&words)),
            "no migration computes {words}"
        );
    }

    #[test]
    fn bodies_lose_nul_and_our_markers() {
        assert_eq!(body_text("a\0b\u{E000}c\u{E001}"), "ab\u{FFFD}c\u{FFFD}");
    }

    #[test]
    fn like_patterns_are_escaped() {
        assert_eq!(like_escape(r"50%_a\b"), r"50\%\_a\\b");
    }

    #[test]
    fn llm_requests_are_skipped_and_offsets_kept() {
        let lines = concat!(
            r#"{"type":"run.start","run_id":"r","ts":"2026-01-02T03:04:05.000Z","input":{"type":"text","text":"find me"}}"#,
            "\n",
            r#"{"type":"llm.request","run_id":"r","seq":1,"input":{"messages":[{"role":"user","content":"find me"}]}}"#,
            "\n",
            r#"{"type":"agent.event","run_id":"r","ts":"2026-01-02T03:04:06.000Z","seq":1,"event":{"type":"text","content":"found"}}"#,
            "\n"
        )
        .as_bytes();
        let types = vec![None, Some(LLM_REQUEST.to_owned()), None];
        let docs = appended_documents(lines, 100, 3, &types);
        let first = lines.iter().position(|b| *b == b'\n').unwrap_or(0) as u64 + 1;
        let second = first
            + lines[first as usize..]
                .iter()
                .position(|b| *b == b'\n')
                .unwrap_or(0) as u64
            + 1;
        let got: Vec<(u64, &str, &str)> = docs
            .iter()
            .map(|d| (d.byte_offset, d.kind.as_str(), d.text.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (100, "user", "find me"),
                (100 + second, "assistant", "found")
            ]
        );
    }

    #[test]
    fn lines_the_append_parser_named_llm_request_are_never_parsed_again() {
        // The parser's facts decide: a line named llm.request is skipped unread, whatever
        // it holds (here a run.start, which would give a document if it were read).
        let line = concat!(
            r#"{"type":"run.start","run_id":"r","ts":"2026-01-02T03:04:05.000Z","input":{"type":"text","text":"never read"}}"#,
            "\n"
        )
        .as_bytes();
        let named = |t: Option<&str>| vec![t.map(str::to_owned)];
        assert!(appended_documents(line, 0, 1, &named(Some(LLM_REQUEST))).is_empty());
        assert_eq!(appended_documents(line, 0, 1, &named(None)).len(), 1);
    }

    /// The documents `AppendDocs` collects from the fold's one parse of `lines` (appended
    /// in pieces of `piece` lines, as a writer appends them), and those the second parse of
    /// [`appended_documents`] gives for the same pieces.
    fn both_ways(lines: &[u8], piece: usize) -> (Vec<Document>, Vec<Document>) {
        use crate::derive::RunFold;
        let mut fold = RunFold::new();
        let (mut once, mut twice) = (Vec::new(), Vec::new());
        let (mut at, mut line) = (0usize, 1u64);
        while at < lines.len() {
            let rest = lines.get(at..).unwrap_or_default();
            let end = memchr::memchr_iter(b'\n', rest)
                .nth(piece - 1)
                .map_or(rest.len(), |i| i + 1);
            let part = rest.get(..end).unwrap_or_default();
            let mut docs = AppendDocs::new();
            let facts = fold.absorb_with(part, at as u64, line, &mut |r, o, t| {
                docs.record(r, o, t);
            });
            let types: Vec<Option<String>> = facts.into_iter().map(|f| f.record_type).collect();
            once.extend(docs.docs().iter().cloned());
            twice.extend(appended_documents(part, at as u64, line, &types));
            at += end;
            line += types.len() as u64;
        }
        (once, twice)
    }

    #[test]
    fn one_parse_of_an_append_gives_the_documents_of_a_second_parse() {
        // Lines the reader repairs or flags (glued records, NUL runs, invalid UTF-8, a BOM,
        // CRLF, an llm.request glued before a text event, garbage) beside every kind of
        // record that gives a document. (The recorded reference runs go through the same
        // path in tests/search.rs and tests/append_cost.rs.)
        let text = r#"{"type":"agent.event","run_id":"r","ts":"2026-01-02T03:04:06.000Z","seq":1,"event":{"type":"text","content":"found"}}"#;
        let request = r#"{"type":"llm.request","run_id":"r","seq":1,"input":{"messages":[{"role":"user","content":"hidden"}]}}"#;
        let start = r#"{"type":"run.start","run_id":"r","ts":"2026-01-02T03:04:05.000Z","input":{"type":"text","text":"find me"}}"#;
        let call = r#"{"type":"agent.event","run_id":"r","ts":"2026-01-02T03:04:07.000Z","seq":2,"event":{"type":"tool_call","tool":"grep","tool_call_id":"c1","args":{"q":"needle"}}}"#;
        let output = r#"{"type":"tool.output","run_id":"r","ts":"2026-01-02T03:04:08.000Z","tool":"grep","tool_call_id":"c1","result_raw":"needle found"}"#;
        let result = r#"{"type":"agent.event","run_id":"r","ts":"2026-01-02T03:04:09.000Z","seq":3,"event":{"type":"tool_result","tool":"grep","tool_call_id":"c1","result":"needle found"}}"#;
        let end = r#"{"type":"run.end","run_id":"r","ts":"2026-01-02T03:04:10.000Z","outcome":"completed","final":"all done"}"#;
        let mut crafted = Vec::new();
        for l in [
            format!("\u{feff}{start}\r"),
            format!("{text}{text}"),
            format!("{request}{text}"),
            format!("{text}{request}"),
            "not json at all".to_owned(),
            request.to_owned(),
            text.replace("found", "fo\u{0}und"),
            call.to_owned(),
            output.to_owned(),
            result.to_owned(),
            end.to_owned(),
        ] {
            crafted.extend_from_slice(l.as_bytes());
            crafted.push(b'\n');
        }
        crafted.extend_from_slice(b"\0\0\0\n");
        crafted.extend_from_slice(&text.as_bytes()[..40]);
        crafted.extend_from_slice(b"\xff\xfe\"}}\n");
        crafted.extend_from_slice(start.replace("find me", "caf\u{e9}").as_bytes());
        crafted.push(b'\n');
        let mut counts = Vec::new();
        for piece in [1, 3, usize::MAX] {
            let (once, twice) = both_ways(&crafted, piece);
            assert_eq!(once, twice, "appended {piece} lines at a time");
            counts.push(once.len());
        }
        // Appended one line at a time, the tool_result whose output came in an earlier
        // append is indexed once more (the documented incremental rule).
        assert_eq!(counts, vec![6, 6, 5], "documents compared");
    }

    #[test]
    fn message_offsets_count_every_earlier_message() {
        let msgs = vec![
            br#"{"role":"user","content":"one"}"#.to_vec(),
            b"not json".to_vec(),
            br#"{"role":"assistant","content":"two"}"#.to_vec(),
        ];
        let docs = message_docs(&msgs, 1);
        let got: Vec<(usize, u64, &str)> = docs
            .iter()
            .map(|(i, d)| (*i, d.byte_offset, d.text.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![(2, (msgs[0].len() + msgs[1].len() + 2) as u64, "two")]
        );
    }
}

//! Bringing a store's search index (`search.db`, session-state's [`SearchIndex`]) up to date
//! with its run files, through the pure extraction of [`crate::search`].

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use session_jsonl::{Item, Reader, ReaderOptions, TallyScope};
use session_state::{
    IndexedFile, SearchDoc, SearchIndex, SearchWork, StateStore, SubstringWriter, read_pool,
};

use super::Error;
use crate::search::{Document, Extractor, INDEXED_RECORD_TYPES, message_documents};

/// What [`refresh_search`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SearchRefreshReport {
    /// Run files opened and read (new, grown or changed ones).
    pub files_read: u64,
    /// Bytes read from them (decompressed bytes for archives), from where their indexing
    /// stopped.
    pub bytes_read: u64,
    /// Documents added.
    pub docs_added: u64,
    /// Lines passed over without being parsed: records of types that hold nothing searchable
    /// (`llm.request` snapshots, headers, …; see [`crate::search::INDEXED_RECORD_TYPES`]).
    pub lines_passed_over: u64,
    /// Files dropped with their documents (gone from the run index).
    pub removed: u64,
    /// Files archived or restored whose documents were kept, not read again.
    pub renamed: u64,
    /// Files that could not be read, with the error; looked at again by the next refresh.
    pub failed: Vec<(PathBuf, String)>,
    /// Threads that read the files and extracted their documents: 1 when the writing thread
    /// did it between its writes, else the worker threads of the pass (see
    /// [`refresh_search_on`]).
    pub reading_threads: usize,
}

/// Indexes what the run files of `store` gained since the last refresh: call it right after
/// [`StateStore::index_runs`] (it compares against the run index, see
/// [`SearchIndex::plan`]). Each changed file is read from the end of its last indexed
/// complete line up to the size the run index saw (complete lines only: a partial last line
/// waits for its newline), its records turned into documents by [`Extractor`]; damaged lines
/// give what the reader recovers of them (lossy UTF-8, repaired surrogates, text beside NUL
/// runs) and never fail the refresh. A refresh with nothing new opens no run file.
///
/// The files are read and their documents extracted on a few worker threads (session-state's
/// [`read_pool::InOrder`], [`read_pool::max_threads`] of them; none for a handful of files)
/// while this thread, the one writer of `search.db`, stores them in the plan's order: the
/// index, its document ids and the report are those of [`refresh_search_on`] with one thread.
///
/// # Errors
/// [`Error::SearchIndex`] when `search.db` or `state.db` fails. A run file that cannot be
/// read is reported in [`SearchRefreshReport::failed`], not as an error.
pub fn refresh_search(
    store: &StateStore,
    index: &SearchIndex,
) -> Result<SearchRefreshReport, Error> {
    refresh_search_on(store, index, None)
}

/// [`refresh_search`] with the number of threads that read the files chosen by the caller:
/// `Some(1)` (or `Some(0)`) reads them on the calling thread, between its writes; `Some(n)`
/// starts `n` workers; `None` lets [`read_pool::max_threads`] choose from the number of files.
/// Whatever the number, the documents, their order in `search.db` and the report are the same
/// (but [`SearchRefreshReport::reading_threads`]).
///
/// # Errors
/// As [`refresh_search`].
pub fn refresh_search_on(
    store: &StateStore,
    index: &SearchIndex,
    threads: Option<usize>,
) -> Result<SearchRefreshReport, Error> {
    let plan = index.plan(store).map_err(Error::search)?;
    let mut report = SearchRefreshReport {
        removed: plan.removed,
        renamed: plan.renamed,
        ..Default::default()
    };
    let threads = threads.unwrap_or_else(|| read_pool::max_threads(plan.work.len()));
    // The workers' reads are counted on them and their tallies added here, in the plan's
    // order, as if this thread had read the files.
    let count_reads = session_jsonl::counting_file_reads();
    let mut reads = read_pool::InOrder::start(
        plan.work.clone(),
        threads,
        || (),
        move |work: &SearchWork, _: &mut ()| {
            let scope = TallyScope::start(count_reads);
            let read = read_documents(work);
            (read, scope.finish())
        },
    );
    report.reading_threads = reads.workers().max(1);
    // Files are written in batches of about BATCH_BYTES of text (or BATCH_FILES files), one
    // transaction each: FTS5 writes one index segment per transaction. The substring index
    // takes each batch in on a thread of its own while the next is written.
    index
        .with_substring_writer(|writer| -> Result<(), Error> {
            let mut batch: Vec<(&SearchWork, Batch)> = Vec::new();
            let mut pending = 0usize;
            for (i, work) in plan.work.iter().enumerate() {
                let (read, tally) = match reads.take(i) {
                    Some(done) => done,
                    // No worker left to run it (none could be started): read it here.
                    None => (read_documents(work), session_jsonl::Tally::default()),
                };
                tally.add_to_this_thread();
                match read {
                    Ok(read) => {
                        report.files_read += 1;
                        report.bytes_read += read.bytes;
                        report.docs_added += read.docs.len() as u64;
                        report.lines_passed_over += read.passed_over;
                        pending += read.docs.iter().map(|d| d.text.len()).sum::<usize>();
                        batch.push((work, read));
                        if pending >= BATCH_BYTES || batch.len() >= BATCH_FILES {
                            flush(writer, &mut batch)?;
                            pending = 0;
                        }
                    }
                    Err(e) => report.failed.push((work.path.clone(), e)),
                }
            }
            drop(reads);
            flush(writer, &mut batch)
        })
        .map_err(Error::search)??;
    Ok(report)
}

/// Text bytes of documents written per transaction. The substring index takes a batch in
/// while the next is written, so the last batch's trigrams are written alone: batches a few
/// times smaller than FTS5's `hashsize` keep that tail short (and each a single segment).
const BATCH_BYTES: usize = 2 << 20;

/// Files written per transaction.
const BATCH_FILES: usize = 2_000;

fn flush(writer: &SubstringWriter<'_>, batch: &mut Vec<(&SearchWork, Batch)>) -> Result<(), Error> {
    if batch.is_empty() {
        return Ok(());
    }
    let files: Vec<IndexedFile<'_>> = batch
        .iter()
        .map(|(work, b)| IndexedFile {
            work,
            docs: &b.docs,
            indexed_to: b.indexed_to,
            next_line: b.next_line,
        })
        .collect();
    writer.apply_many(&files).map_err(Error::search)?;
    batch.clear();
    Ok(())
}

struct Batch {
    docs: Vec<SearchDoc>,
    indexed_to: u64,
    next_line: u64,
    bytes: u64,
    passed_over: u64,
}

/// Counts the bytes and line ends a reader pulls through it.
struct Counting<R> {
    inner: R,
    /// Bytes read.
    n: u64,
    /// `\n` bytes among them.
    newlines: u64,
    /// Bytes up to and including the last `\n` (0 before the first).
    complete: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.inner.read(buf)?;
        let chunk = buf.get(..k).unwrap_or_default();
        let newlines = chunk.iter().filter(|b| **b == b'\n').count();
        if newlines > 0
            && let Some(i) = chunk.iter().rposition(|b| *b == b'\n')
        {
            self.complete = self.n + i as u64 + 1;
        }
        self.newlines += newlines as u64;
        self.n += k as u64;
        Ok(k)
    }
}

fn read_documents(work: &SearchWork) -> Result<Batch, String> {
    if work.legacy_snapshot {
        return read_legacy_snapshot(work);
    }
    if work.session_file {
        return read_messages(work);
    }
    // Only the records that give documents are parsed; file-level checks (a missing header)
    // are of no use here.
    let opts = ReaderOptions {
        expect_header: false,
        ..Default::default()
    };
    let src: Box<dyn Read> = if work.compressed {
        let r = session_jsonl::open_run_file(&work.path).map_err(|e| error_text(&e))?;
        Box::new(r)
    } else {
        let mut f = std::fs::File::open(&work.path).map_err(|e| e.to_string())?;
        if work.from > 0 {
            f.seek(SeekFrom::Start(work.from))
                .map_err(|e| e.to_string())?;
        }
        // Only what the run index saw: what is appended meanwhile comes with the next refresh.
        Box::new(f.take(work.file_size.saturating_sub(work.from)))
    };
    let mut counting = Counting {
        inner: src,
        n: 0,
        newlines: 0,
        complete: 0,
    };
    let hint = (!work.compressed).then(|| work.file_size.saturating_sub(work.from));
    let mut reader =
        Reader::with_position_and_hint(&mut counting, opts, work.from, work.line, hint)
            .parse_only(INDEXED_RECORD_TYPES);
    let mut extractor = Extractor::new();
    let mut docs = Vec::new();
    for item in reader.by_ref() {
        match item {
            Ok(Item::Record(r)) => {
                for d in extractor.documents(r.record(), r.offset) {
                    docs.push(SearchDoc {
                        byte_offset: d.byte_offset,
                        kind: d.kind.as_str(),
                        text: d.text,
                        time_ms: d.time_ms,
                    });
                }
            }
            Ok(Item::Damage(_)) => {}
            Err(e) => return Err(error_text(&e)),
        }
    }
    let passed_over = reader.lines_passed_over();
    drop(reader);
    // A last line without its newline (a record being written, or a torn tail) is not
    // indexed: it is read again, whole, once it has one.
    let indexed_to = work.from.saturating_add(counting.complete);
    docs.retain(|d| d.byte_offset < indexed_to);
    Ok(Batch {
        docs,
        indexed_to,
        next_line: work.line.saturating_add(counting.newlines),
        bytes: counting.n,
        passed_over,
    })
}

fn error_text(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

fn doc(d: Document) -> SearchDoc {
    SearchDoc {
        byte_offset: d.byte_offset,
        kind: d.kind.as_str(),
        text: d.text,
        time_ms: d.time_ms,
    }
}

/// The documents of a legacy snapshot `state/<id>.json`, read whole (at most
/// [`session_state::MAX_SESSION_FILE_BYTES`]): those of the messages file its migration would
/// write ([`session_state::legacy_snapshot_lines`]), each message at the byte offset of its
/// line there, so a hit keeps its offset when the session is migrated. A snapshot the store
/// cannot load gives no document, and is looked at again when it changes.
fn read_legacy_snapshot(work: &SearchWork) -> Result<Batch, String> {
    let bytes = read_whole(work)?;
    let id = work.session_id.as_deref().unwrap_or_default();
    let lines = session_state::legacy_snapshot_lines(id, &work.path, &bytes).unwrap_or_default();
    let mut docs = Vec::new();
    let mut offset = 0u64;
    for line in &lines {
        let text = String::from_utf8_lossy(line);
        if let Ok(m) = serde_json::from_str::<session_schema::BaseMessage>(&text) {
            docs.extend(message_documents(&m, offset).into_iter().map(doc));
        }
        offset += line.len() as u64;
    }
    Ok(Batch {
        docs,
        indexed_to: bytes.len() as u64,
        next_line: 1,
        bytes: bytes.len() as u64,
        passed_over: 0,
    })
}

/// The whole of a saved session's file (at most [`session_state::MAX_SESSION_FILE_BYTES`]), a
/// regular file only.
fn read_whole(work: &SearchWork) -> Result<Vec<u8>, String> {
    let md = std::fs::symlink_metadata(&work.path).map_err(|e| e.to_string())?;
    if !md.is_file() {
        return Err("not a regular file".into());
    }
    let f = std::fs::File::open(&work.path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    f.take(session_state::MAX_SESSION_FILE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    Ok(bytes)
}

/// The documents of a saved session's messages file, read whole (at most
/// [`session_state::MAX_SESSION_FILE_BYTES`]): one message per complete line, decoded lossily;
/// lines that are not a message give nothing.
fn read_messages(work: &SearchWork) -> Result<Batch, String> {
    let md = std::fs::symlink_metadata(&work.path).map_err(|e| e.to_string())?;
    if !md.is_file() {
        return Err("not a regular file".into());
    }
    let f = std::fs::File::open(&work.path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    f.take(session_state::MAX_SESSION_FILE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    let mut docs = Vec::new();
    let mut offset = 0u64;
    let mut lines = 0u64;
    let mut rest = bytes.as_slice();
    while let Some(i) = rest.iter().position(|b| *b == b'\n') {
        let (line, after) = rest.split_at(i);
        let text = String::from_utf8_lossy(line);
        if let Ok(m) = serde_json::from_str::<session_schema::BaseMessage>(&text) {
            docs.extend(message_documents(&m, offset).into_iter().map(doc));
        }
        offset += i as u64 + 1;
        lines += 1;
        rest = after.get(1..).unwrap_or_default();
    }
    Ok(Batch {
        docs,
        indexed_to: offset,
        next_line: lines + 1,
        bytes: bytes.len() as u64,
        passed_over: 0,
    })
}

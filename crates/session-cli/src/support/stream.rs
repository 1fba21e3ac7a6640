//! Run logs read as a stream: one record in memory at a time, so a command's memory follows
//! the longest line, not the file. Used by `show`, `export` and `tail`.

use std::io::Write;
use std::path::{Path, PathBuf};

use session_jsonl::{Damage, Item, Reader, ReaderOptions};
use session_replay::RunMeta;
use session_schema::Record;

use crate::backend::RunRef;
use crate::error::CliError;
use crate::support::lib_errors::{jsonl_err, stored_err};

/// What one pass over a run file tells a streaming export before its records are written.
pub(crate) struct RunSummary {
    /// The file; for a run of a shared store its location (`host:run_id`), what messages and
    /// `file` fields show.
    pub(crate) path: PathBuf,
    /// The run, for the next pass.
    pub(crate) src: RunRef,
    /// Run id, session id and start time, as [`RunMeta::from_records`] derives them (the file
    /// name's run id when no record names a run).
    pub(crate) meta: RunMeta,
    /// `outcome` of the last `run.end`.
    pub(crate) outcome: Option<String>,
    /// The reader's damage reports, in file order.
    pub(crate) damage: Vec<Damage>,
    /// The transcript's first pass: its head and the call ids with a `tool.output`.
    pub(crate) transcript: session_replay::TranscriptBuilder,
}

impl RunSummary {
    /// Run lines the reader could not turn into records.
    pub(crate) fn lost_lines(&self) -> usize {
        self.damage
            .iter()
            .filter(|d| !d.kind.record_recovered())
            .count()
    }
}

/// The error of a read that failed at the reader's position.
fn read_err<R: std::io::Read>(path: &Path, reader: &Reader<R>, e: std::io::Error) -> CliError {
    jsonl_err(session_jsonl::JsonlError::Read {
        path: path.to_owned(),
        line: reader.next_line(),
        offset: reader.complete_offset(),
        source: e,
    })
}

/// Calls `each` with every item of the run `src` (a run file, or a run of a catalogue read
/// through the same tolerant reader), in order, one at a time.
///
/// # Errors
/// Data/IO (4) naming the file (or stored run), line and byte offset when a read fails;
/// not found (3) for a stored run that is gone; `each`'s errors.
pub(crate) fn for_each_item(
    src: impl Into<RunRef>,
    keep_raw: bool,
    each: impl FnMut(Item) -> Result<(), CliError>,
) -> Result<(), CliError> {
    for_each_item_to_end(src, keep_raw, each).map(|_| ())
}

/// [`for_each_item`], returning the bytes read: the reader's offset past its last complete
/// line at the end (the file's length, decompressed for an archive; what
/// `RunRead::bytes` holds for the run read whole).
///
/// # Errors
/// As [`for_each_item`].
pub(crate) fn for_each_item_to_end(
    src: impl Into<RunRef>,
    keep_raw: bool,
    each: impl FnMut(Item) -> Result<(), CliError>,
) -> Result<u64, CliError> {
    for_each_item_sized(src, keep_raw, each).map(|(bytes, _)| bytes)
}

/// [`for_each_item_to_end`], returning with the bytes read the size of the run on disk: for
/// a file, its length from the `fstat` of the open file (no path-based `stat`; for an
/// archive, the compressed length), or the bytes read when the file grew while it was read
/// (what was checked); for a stored run, the bytes read.
///
/// # Errors
/// As [`for_each_item`].
pub(crate) fn for_each_item_sized(
    src: impl Into<RunRef>,
    keep_raw: bool,
    mut each: impl FnMut(Item) -> Result<(), CliError>,
) -> Result<(u64, u64), CliError> {
    let options = ReaderOptions {
        keep_raw,
        ..ReaderOptions::default()
    };
    match src.into() {
        RunRef::File(path) => {
            let mut reader = Reader::open_with(&path, options).map_err(jsonl_err)?;
            while let Some(item) = reader.next() {
                let item = item.map_err(|e| read_err(&path, &reader, e))?;
                each(item)?;
            }
            let opened = reader.opened_len().unwrap_or(0);
            let size = if session_jsonl::is_archived(&path) {
                opened
            } else {
                opened.max(reader.bytes_read())
            };
            Ok((reader.complete_offset(), size))
        }
        RunRef::Stored {
            catalogue,
            run_id,
            location,
        } => {
            let mut reader = catalogue
                .read_items(&run_id, session_storage::LinePosition::START, options)
                .map_err(|e| stored_err(&location, e))?;
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
            let bytes = reader.complete_offset();
            Ok((bytes, bytes))
        }
    }
}

/// The first pass of a streaming export: meta, outcome and damage of the run `src`.
///
/// # Errors
/// As [`for_each_item`].
pub(crate) fn summarize(src: impl Into<RunRef>) -> Result<RunSummary, CliError> {
    let src: RunRef = src.into();
    let mut header: Option<RunMeta> = None;
    let mut first_named: Option<(String, session_schema::Timestamp)> = None;
    let mut start_session: Option<String> = None;
    let mut outcome = None;
    let mut damage = Vec::new();
    let mut first_record = true;
    let mut transcript = session_replay::TranscriptBuilder::default();
    for_each_item(&src, false, |item| {
        match item {
            Item::Damage(d) => damage.push(d),
            Item::Record(r) => {
                let rec = r.parsed.value;
                transcript.note_head(&rec);
                transcript.note_tool_output(&rec);
                if first_record && let Record::Header(h) = &rec {
                    header = Some(RunMeta {
                        run_id: h.run_id.clone(),
                        session_id: h.session_id.clone(),
                        started_at: h.started_at.clone(),
                    });
                }
                first_record = false;
                if first_named.is_none()
                    && let Some(id) = rec.run_id()
                {
                    first_named = Some((id.to_owned(), rec.ts().cloned().unwrap_or_default()));
                }
                match &rec {
                    Record::RunStart(s) if start_session.is_none() => {
                        start_session.clone_from(&s.session_id);
                    }
                    Record::RunEnd(e) => outcome = Some(e.outcome.as_str().to_owned()),
                    _ => {}
                }
            }
        }
        Ok(())
    })?;
    let meta = header.unwrap_or_else(|| match first_named {
        Some((run_id, started_at)) => RunMeta {
            run_id,
            session_id: start_session,
            started_at,
        },
        None => RunMeta {
            run_id: src.run_id().unwrap_or_default(),
            ..RunMeta::default()
        },
    });
    Ok(RunSummary {
        path: src.display_path(),
        src,
        meta,
        outcome,
        damage,
        transcript,
    })
}

/// The second pass of a streamed transcript: calls `each` with every entry of the run file
/// at `path` in order, one record read at a time (`builder` comes from the first pass,
/// [`RunSummary::transcript`]); the same entries as `session_replay::transcript_with` over
/// the whole file. `each` also gets the record an entry comes from and its (line, byte
/// offset); `None` for a skipped line and the closing entry.
///
/// # Errors
/// As [`for_each_item`]; `each`'s errors.
pub(crate) fn for_each_entry(
    path: impl Into<RunRef>,
    builder: &mut session_replay::TranscriptBuilder,
    mut each: impl FnMut(
        &session_replay::Entry,
        Option<&Record>,
        Option<(u64, u64)>,
    ) -> Result<(), CliError>,
) -> Result<(), CliError> {
    use session_replay::{Entry, EntryKind, SkipKind};
    let mut index = 0usize;
    let mut torn = None;
    let mut entries = Vec::new();
    for_each_item(path, false, |item| {
        match item {
            Item::Record(r) => {
                builder.record(index, &r.parsed.value, &mut entries);
                index += 1;
                let pos = Some((r.line, r.offset));
                for e in entries.drain(..) {
                    each(&e, Some(&r.parsed.value), pos)?;
                }
            }
            Item::Damage(d) => match SkipKind::of_damage(d.kind) {
                Some(SkipKind::TornTail) => torn = Some(d.line),
                Some(kind) => {
                    let e = Entry {
                        ts: None,
                        record: None,
                        kind: EntryKind::Skipped { line: d.line, kind },
                    };
                    each(&e, None, None)?;
                }
                None => {}
            },
        }
        Ok(())
    })?;
    match builder.incomplete(torn) {
        Some(e) => each(&e, None, None),
        None => Ok(()),
    }
}

/// Calls `each` with every record's line as stored (byte-exact, without its `\n`; a BOM or
/// CR kept), one at a time.
///
/// # Errors
/// As [`for_each_item`]; data (4) when a record has no stored line and cannot be written.
pub(crate) fn for_each_record_line(
    src: impl Into<RunRef>,
    mut each: impl FnMut(&[u8]) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let src: RunRef = src.into();
    let path = src.display_path();
    for_each_item(&src, true, |item| {
        let Item::Record(r) = item else {
            return Ok(());
        };
        match &r.raw {
            Some(raw) => each(raw),
            None => {
                // The line as read is kept whenever `keep_raw` is on; re-serializing is the
                // fallback the whole-file export had too.
                let bytes = r.parsed.to_json().map_err(|e| {
                    CliError::Data(format!("{}: line {}: {e}", path.display(), r.line))
                })?;
                each(&bytes)
            }
        }
    })
}

/// Where a streaming export writes: the command's stdout, or a temporary file beside the
/// `--output` path renamed over it once complete (a failed export leaves nothing behind).
pub(crate) enum Sink<'a> {
    /// Standard output.
    Out(&'a mut dyn Write),
    /// A temporary file, renamed to `path` by [`Sink::commit`].
    File {
        /// The file asked for.
        path: PathBuf,
        /// The temporary file in its directory.
        tmp: PathBuf,
        /// Writer over the temporary file.
        file: std::io::BufWriter<std::fs::File>,
    },
}

impl<'a> Sink<'a> {
    /// A sink for `output` (`None`: `out`).
    ///
    /// # Errors
    /// IO (4) when the temporary file cannot be created.
    pub(crate) fn new(output: Option<&Path>, out: &'a mut dyn Write) -> Result<Self, CliError> {
        let Some(path) = output else {
            return Ok(Sink::Out(out));
        };
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "export".into());
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let file = std::fs::File::create(&tmp).map_err(|e| CliError::io(path, e))?;
        Ok(Sink::File {
            path: path.to_owned(),
            tmp,
            file: std::io::BufWriter::new(file),
        })
    }

    /// Writes `bytes`.
    ///
    /// # Errors
    /// Output error on stdout (a closed pipe ends quietly), IO (4) on the file.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> Result<(), CliError> {
        match self {
            Sink::Out(out) => out.write_all(bytes).map_err(CliError::from),
            Sink::File { path, file, .. } => {
                file.write_all(bytes).map_err(|e| CliError::io(&*path, e))
            }
        }
    }

    /// Gives the export up: a temporary file is removed (nothing is left behind).
    pub(crate) fn abandon(self) {
        if let Sink::File { tmp, file, .. } = self {
            drop(file);
            let _ = std::fs::remove_file(&tmp);
        }
    }

    /// Finishes the export: flushes, and for a file syncs it and renames it into place.
    ///
    /// # Errors
    /// IO (4); the temporary file is removed.
    pub(crate) fn commit(self) -> Result<(), CliError> {
        match self {
            Sink::Out(_) => Ok(()),
            Sink::File { path, tmp, file } => {
                let res = (|| {
                    let f = file.into_inner().map_err(|e| e.into_error())?;
                    f.sync_all()?;
                    std::fs::rename(&tmp, &path)
                })();
                res.map_err(|e| {
                    let _ = std::fs::remove_file(&tmp);
                    CliError::io(&path, e)
                })
            }
        }
    }
}

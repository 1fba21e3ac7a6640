//! Ranking a window of the word index's matches by BM25 without FTS5's `rank`.
//!
//! FTS5's `bm25()` (`fts5_aux.c`, `fts5Bm25Function`) needs, for each phrase of the query,
//! the number of documents holding it; it counts them on every query by walking the phrase's
//! whole document list (`xQueryPhrase`), which for a word in half a million documents is most
//! of a first page's time. Here the same formula is computed from:
//! - the documents per phrase: kept in `phrase_docs` for the phrases that are in at least
//!   [`PHRASE_CACHE_MIN`] documents (counted once, when first asked, then kept current by
//!   every write of the index: [`added`], [`removing`]), counted by FTS5 for the others
//!   (a short walk);
//! - the number of documents and of tokens: FTS5's own totals (the "averages" record, rowid
//!   1 of `docs_words_data`, two varints);
//! - each document's length in tokens: FTS5's `docs_words_docsize` (one varint);
//! - each phrase's occurrences in a document: its text cut by [`super::tokens`], which
//!   tokenizes as FTS5 does for the characters it claims; a document with any other
//!   character (or whose token count differs from FTS5's) makes [`rank_window`] return
//!   `None`, and the caller asks FTS5's `rank` instead.
//!
//! The scores are those FTS5 computes, to the bit (same operations in the same order);
//! `ranked_scores_equal_fts5s_to_the_bit` in the parent module's tests compares them.

use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::{Connection, params};

use super::tokens;
use crate::column::{Cols, int_of, query_int};

/// Phrases in at least this many documents have their count kept in `phrase_docs`; counting
/// a rarer one walks a short document list.
pub(crate) const PHRASE_CACHE_MIN: i64 = 1_000;

/// Most phrases kept in `phrase_docs` (each write of the index counts its new documents for
/// every one): when full, the phrase in the fewest documents makes room for a commoner one.
pub(crate) const PHRASE_CACHE_MAX: i64 = 256;

/// FTS5 query for a phrase key (folded tokens joined by one space: letters and digits only).
fn phrase_match(key: &str) -> String {
    format!("\"{key}\"")
}

/// A query phrase's key in `phrase_docs`: its folded tokens joined by one space.
pub(crate) fn phrase_key(tokens: &[String]) -> String {
    tokens.join(" ")
}

/// The number of documents holding each phrase of `keys`, in the transaction the caller
/// opened: from `phrase_docs`, else counted by FTS5 (adding the documents walked to
/// `walked`) and, when `writable` and the phrase is in at least [`PHRASE_CACHE_MIN`]
/// documents, kept there (which makes the caller's transaction a write; when another process
/// wrote since it began, the count is used and not kept).
pub(crate) fn phrase_docs(
    conn: &Connection,
    keys: &[String],
    writable: bool,
    walked: &AtomicU64,
) -> rusqlite::Result<Vec<i64>> {
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let kept: Option<i64> = {
            let mut stmt = conn.prepare_cached("SELECT docs FROM phrase_docs WHERE phrase = ?1")?;
            let mut rows = stmt.query([key])?;
            // A kept count that is not an integer is not used: the phrase is counted again.
            match rows.next()? {
                Some(r) => int_of(Cols::new(r, "phrase_docs", &["docs"])?.raw(0)?),
                None => None,
            }
        };
        if let Some(n) = kept {
            out.push(n);
            continue;
        }
        let n = query_int(
            conn,
            "SELECT count(*) FROM docs_words WHERE docs_words MATCH ?1",
            [phrase_match(key)],
        )?;
        walked.fetch_add(u64::try_from(n).unwrap_or(0), Ordering::Relaxed);
        if writable && n >= PHRASE_CACHE_MIN {
            match keep(conn, key, n) {
                Ok(()) => {}
                // Another process wrote since this transaction began (or holds the lock):
                // the count stands for this query, and is not kept.
                Err(rusqlite::Error::SqliteFailure(f, _))
                    if f.code == rusqlite::ErrorCode::DatabaseBusy
                        || f.code == rusqlite::ErrorCode::DatabaseLocked => {}
                Err(e) => return Err(e),
            }
        }
        out.push(n);
    }
    Ok(out)
}

/// Keeps `key`'s count, making room when [`PHRASE_CACHE_MAX`] phrases are kept.
fn keep(conn: &Connection, key: &str, n: i64) -> rusqlite::Result<()> {
    let kept = query_int(conn, "SELECT count(*) FROM phrase_docs", [])?;
    if kept >= PHRASE_CACHE_MAX {
        let fewest = query_int(conn, "SELECT coalesce(min(docs), 0) FROM phrase_docs", [])?;
        if fewest >= n {
            return Ok(());
        }
        conn.prepare_cached(
            "DELETE FROM phrase_docs WHERE phrase = \
             (SELECT phrase FROM phrase_docs ORDER BY docs, phrase LIMIT 1)",
        )?
        .execute([])?;
    }
    conn.prepare_cached("INSERT OR REPLACE INTO phrase_docs (phrase, docs) VALUES (?1, ?2)")?
        .execute(params![key, n])?;
    Ok(())
}

/// The kept phrases.
fn kept_phrases(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare_cached("SELECT phrase FROM phrase_docs")?;
    let mut rows = stmt.query([])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let mut c = Cols::new(r, "phrase_docs", &["phrase"])?;
        // A key that is not text was never written by this module: left alone.
        if let (Some(key), false) = (c.text(0)?, c.is_damaged()) {
            out.push(key);
        }
    }
    Ok(out)
}

/// After a write added documents with ids from `first` on (every document with such an id is
/// new: SQLite gives a new row the highest id plus one), in the same transaction: counts them
/// into every kept phrase.
pub(crate) fn added(conn: &Connection, first: i64) -> rusqlite::Result<()> {
    for key in kept_phrases(conn)? {
        conn.prepare_cached(
            "UPDATE phrase_docs SET docs = docs + (SELECT count(*) FROM docs_words \
             WHERE docs_words MATCH ?1 AND rowid >= ?2) WHERE phrase = ?3",
        )?
        .execute(params![phrase_match(&key), first, key])?;
    }
    Ok(())
}

/// Before the documents of `file` from byte offset `from` on with ids below `below` are
/// removed from the word index (the others were added by the same transaction and not
/// counted yet), in the same transaction: takes them out of every kept phrase's count.
pub(crate) fn removing(
    conn: &Connection,
    file: &str,
    from: i64,
    below: i64,
) -> rusqlite::Result<()> {
    for key in kept_phrases(conn)? {
        conn.prepare_cached(
            "UPDATE phrase_docs SET docs = docs - (SELECT count(*) FROM docs d \
             CROSS JOIN docs_words ON docs_words.rowid = d.id WHERE d.file = ?1 \
             AND d.byte_offset >= ?2 AND d.id < ?3 AND docs_words MATCH ?4) WHERE phrase = ?5",
        )?
        .execute(params![file, from, below, phrase_match(&key), key])?;
    }
    Ok(())
}

/// SQLite's variable-length integer (as FTS5 writes its totals and document sizes): the
/// value and the bytes it took.
fn varint(buf: &[u8]) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    for (i, &b) in buf.iter().enumerate().take(9) {
        if i == 8 {
            return Some(((v << 8) | u64::from(b), 9));
        }
        v = (v << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// FTS5's totals of the word index: documents and tokens (`None` when the record is absent
/// or not as expected).
fn totals(conn: &Connection) -> rusqlite::Result<Option<(i64, i64)>> {
    let block: Option<Vec<u8>> = {
        let mut stmt = conn.prepare_cached("SELECT block FROM docs_words_data WHERE id = 1")?;
        let mut rows = stmt.query([])?;
        match rows.next()? {
            Some(r) => match Cols::new(r, "docs_words_data", &["block"])?.raw(0)? {
                rusqlite::types::ValueRef::Blob(b) => Some(b.to_vec()),
                _ => None,
            },
            None => None,
        }
    };
    let Some(block) = block else {
        return Ok(None);
    };
    let Some((rows, used)) = varint(&block) else {
        return Ok(None);
    };
    let Some((tokens, _)) = block.get(used..).and_then(varint) else {
        return Ok(None);
    };
    match (i64::try_from(rows), i64::try_from(tokens)) {
        (Ok(r), Ok(t)) if r > 0 => Ok(Some((r, t))),
        _ => Ok(None),
    }
}

/// FTS5's inverse document frequency of a phrase in `hits` of `rows` documents.
fn idf(rows: i64, hits: i64) -> f64 {
    let idf = (((rows - hits) as f64 + 0.5) / (hits as f64 + 0.5)).ln();
    if idf <= 0.0 { 1e-6 } else { idf }
}

/// FTS5's BM25 of a document of `len` tokens holding each phrase `freq[i]` times (negative:
/// lower is better), `avgdl` the mean document length.
fn bm25(idf: &[f64], freq: &[f64], len: f64, avgdl: f64) -> f64 {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let mut score = 0.0;
    for (i, f) in idf.iter().zip(freq) {
        score += i * ((f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * len / avgdl)));
    }
    -score
}

/// One ranked document: score, file, byte offset, id.
pub(crate) type Ranked = (f64, String, i64, i64);

/// The `limit` best of the documents `ids` (all matching every phrase of `phrases`, whose
/// numbers of documents `docs` gives), by BM25 as FTS5 computes it, ties by file and offset. `None`
/// when a document cannot be tokenized here (see the module documentation).
pub(crate) fn rank_window(
    conn: &Connection,
    phrases: &[Vec<String>],
    docs: impl FnOnce() -> rusqlite::Result<Vec<i64>>,
    ids: &[i64],
    limit: u64,
) -> rusqlite::Result<Option<Vec<Ranked>>> {
    let Some((rows, tokens_total)) = totals(conn)? else {
        return Ok(None);
    };
    let list = serde_json::to_string(ids)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    let mut stmt = conn.prepare_cached(
        "SELECT d.id, d.text, s.sz, f.path, d.byte_offset FROM docs d \
         JOIN docs_words_docsize s ON s.id = d.id JOIN search_files f ON f.path = d.file \
         WHERE d.id IN (SELECT value FROM json_each(?1))",
    )?;
    let mut found = stmt.query([list])?;
    // Each document's phrase counts and length first: the phrases' document counts (perhaps
    // a walk) are asked for only when every document could be tokenized.
    let mut counted: Vec<(Vec<f64>, f64, String, i64, i64)> = Vec::with_capacity(ids.len());
    while let Some(r) = found.next()? {
        let mut c = Cols::new(r, "docs", &["id", "text", "sz", "path", "byte_offset"])?;
        let (Some(id), Some(path), Some(offset)) =
            (int_of(c.raw(0)?), c.text(3)?, int_of(c.raw(4)?))
        else {
            return Ok(None);
        };
        if c.is_damaged() {
            return Ok(None);
        }
        let text = match c.raw(1)? {
            rusqlite::types::ValueRef::Text(t) => t,
            _ => return Ok(None),
        };
        let Ok(text) = std::str::from_utf8(text) else {
            return Ok(None);
        };
        let size = match c.raw(2)? {
            rusqlite::types::ValueRef::Blob(b) => varint(b).map(|(v, _)| v),
            _ => None,
        };
        let Some(spans) = tokens::tokens(text) else {
            return Ok(None);
        };
        if size != Some(spans.len() as u64) {
            return Ok(None);
        }
        let freq: Vec<f64> = phrases
            .iter()
            .map(|p| tokens::occurrences(text, &spans, p) as f64)
            .collect();
        if freq.contains(&0.0) {
            // Not a match as FTS5 sees it: leave the ranking to FTS5.
            return Ok(None);
        }
        counted.push((freq, spans.len() as f64, path, offset, id));
    }
    drop(found);
    let avgdl = tokens_total as f64 / rows as f64;
    let idf: Vec<f64> = docs()?.into_iter().map(|n| idf(rows, n)).collect();
    let mut out: Vec<Ranked> = counted
        .into_iter()
        .map(|(freq, len, path, offset, id)| (bm25(&idf, &freq, len, avgdl), path, offset, id))
        .collect();
    out.sort_by(|a, b| {
        a.0.partial_cmp(&b.0)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.1.cmp(&b.1))
            .then_with(|| a.2.cmp(&b.2))
    });
    out.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_decode_as_sqlite_writes_them() {
        assert_eq!(varint(&[0x05]), Some((5, 1)));
        assert_eq!(varint(&[0x81, 0x00]), Some((128, 2)));
        assert_eq!(varint(&[0x81, 0x80, 0x01]), Some((16_385, 3)));
        assert_eq!(varint(&[0xff; 9]), Some((u64::MAX, 9)));
        assert_eq!(varint(&[0x81]), None);
        assert_eq!(varint(&[]), None);
    }
}

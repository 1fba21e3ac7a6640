//! The word index's tokenizer (`unicode61 remove_diacritics 2`) redone for the characters
//! whose treatment is known, so the ranking ([`super::bm25`]) can count a phrase's
//! occurrences in a document without asking FTS5 (whose BM25 walks the phrase's whole
//! document list on every query to count its documents).
//!
//! `unicode61` splits text into runs of token characters (Unicode categories L*, N* and Co)
//! and folds each token (case, diacritics). Its tables are SQLite's own, so this module
//! claims only characters whose treatment is known (checked against the bundled SQLite) and
//! for which folding changes nothing but ASCII case: ASCII, the CJK ideographs of Unicode 1.1, kana,
//! Hangul syllables, and common punctuation, arrows, box drawing, symbols and emoji (all
//! separators). A text holding any other character is not tokenized ([`tokens`] returns
//! `None`) and the caller leaves the ranking to FTS5. The test
//! `claimed_characters_tokenize_as_fts5_does` checks every claimed character against the
//! bundled SQLite.

/// FTS5 truncates a token to this many bytes (`FTS5_MAX_TOKEN_SIZE`); texts with longer
/// tokens are not tokenized here.
const MAX_TOKEN_BYTES: usize = 32_768;

/// How `unicode61` treats a character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Part of a token, folded to itself (ASCII letters: to lower case).
    Token,
    /// Between tokens.
    Separator,
    /// Not claimed here.
    Unknown,
}

/// Characters outside ASCII that are token characters (letters of categories Lo, Lm or
/// Nl), unchanged by folding.
const TOKEN_RANGES: &[(char, char)] = &[
    ('\u{3005}', '\u{3007}'), // 々 〆 〇
    ('\u{3041}', '\u{3094}'), // hiragana
    ('\u{309D}', '\u{309E}'), // ゝ ゞ
    ('\u{30A1}', '\u{30FA}'), // katakana
    ('\u{30FC}', '\u{30FE}'), // ー ヽ ヾ
    ('\u{4E00}', '\u{9FA5}'), // CJK unified ideographs of Unicode 1.1
    ('\u{AC00}', '\u{D7A3}'), // Hangul syllables
];

/// Characters outside ASCII that separate tokens (spaces, punctuation, symbols).
const SEPARATOR_RANGES: &[(char, char)] = &[
    ('\u{00A0}', '\u{00A1}'), // no-break space, ¡
    ('\u{00A7}', '\u{00A7}'), // section sign
    ('\u{00AB}', '\u{00AB}'), // «
    ('\u{00B0}', '\u{00B1}'), // ° ±
    ('\u{00B6}', '\u{00B7}'), // ¶ ·
    ('\u{00BB}', '\u{00BB}'), // »
    ('\u{00BF}', '\u{00BF}'), // ¿
    ('\u{00D7}', '\u{00D7}'), // ×
    ('\u{00F7}', '\u{00F7}'), // ÷
    ('\u{2000}', '\u{2064}'), // general punctuation: spaces, dashes, quotes, …, bullets
    ('\u{206A}', '\u{206F}'), // (U+2065 to U+2069 are token characters to SQLite)
    ('\u{2190}', '\u{21FF}'), // arrows
    ('\u{2200}', '\u{22FF}'), // mathematical operators
    ('\u{2500}', '\u{25FF}'), // box drawing, blocks, geometric shapes
    ('\u{2600}', '\u{26FF}'), // miscellaneous symbols
    ('\u{2701}', '\u{2775}'), // dingbats (up to the circled digits)
    ('\u{2794}', '\u{27BF}'), // dingbat arrows
    ('\u{3000}', '\u{3004}'), // ideographic space, 、 。 〃 〄
    ('\u{3008}', '\u{3020}'), // CJK brackets and marks
    ('\u{30FB}', '\u{30FB}'), // ・
    ('\u{FF01}', '\u{FF0F}'), // full-width punctuation
    ('\u{FF1A}', '\u{FF20}'),
    ('\u{FF3B}', '\u{FF40}'),
    ('\u{FF5B}', '\u{FF65}'),
    // Emoji of Unicode 6.0 (SQLite's tables take later ones for token characters).
    ('\u{1F300}', '\u{1F320}'),
    ('\u{1F330}', '\u{1F335}'),
    ('\u{1F337}', '\u{1F37C}'),
    ('\u{1F380}', '\u{1F393}'),
    ('\u{1F3A0}', '\u{1F3C4}'),
    ('\u{1F3C6}', '\u{1F3CA}'),
    ('\u{1F3E0}', '\u{1F3F0}'),
    ('\u{1F400}', '\u{1F43E}'),
    ('\u{1F440}', '\u{1F440}'),
    ('\u{1F442}', '\u{1F4F7}'),
    ('\u{1F4F9}', '\u{1F4FC}'),
    ('\u{1F500}', '\u{1F53D}'),
    ('\u{1F540}', '\u{1F543}'),
    ('\u{1F550}', '\u{1F567}'),
    ('\u{1F5FB}', '\u{1F640}'),
    ('\u{1F645}', '\u{1F64F}'),
    ('\u{1F680}', '\u{1F6C5}'),
];

fn in_ranges(c: char, ranges: &[(char, char)]) -> bool {
    ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi)
}

fn class(c: char) -> Class {
    if c.is_ascii() {
        if c.is_ascii_alphanumeric() {
            Class::Token
        } else {
            Class::Separator
        }
    } else if in_ranges(c, TOKEN_RANGES) {
        Class::Token
    } else if in_ranges(c, SEPARATOR_RANGES) {
        Class::Separator
    } else {
        Class::Unknown
    }
}

/// The tokens of `text` as byte ranges of it, in order, as `unicode61` cuts them (each
/// token's folded form is its text with ASCII letters in lower case). `None` when `text`
/// holds a character not claimed by this module, or a token longer than FTS5 keeps.
pub(crate) fn tokens(text: &str) -> Option<Vec<(usize, usize)>> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    for (i, c) in text.char_indices() {
        match class(c) {
            Class::Token => {
                if start.is_none() {
                    start = Some(i);
                }
            }
            Class::Separator => {
                if let Some(s) = start.take() {
                    out.push((s, i));
                }
            }
            Class::Unknown => return None,
        }
    }
    if let Some(s) = start {
        out.push((s, text.len()));
    }
    if out.iter().any(|(s, e)| e - s > MAX_TOKEN_BYTES) {
        return None;
    }
    Some(out)
}

/// The folded tokens of a query phrase (`None` as for [`tokens`]).
pub(crate) fn folded(text: &str) -> Option<Vec<String>> {
    Some(
        tokens(text)?
            .into_iter()
            .map(|(s, e)| text[s..e].to_ascii_lowercase())
            .collect(),
    )
}

/// How many times the phrase `phrase` (folded tokens, at least one) occurs in `text`, whose
/// tokens are `spans`: FTS5's count of the phrase's instances in the document.
pub(crate) fn occurrences(text: &str, spans: &[(usize, usize)], phrase: &[String]) -> u64 {
    if phrase.is_empty() || spans.len() < phrase.len() {
        return 0;
    }
    let token = |i: usize| &text[spans[i].0..spans[i].1];
    (0..=spans.len() - phrase.len())
        .filter(|&i| {
            phrase
                .iter()
                .enumerate()
                .all(|(k, p)| token(i + k).eq_ignore_ascii_case(p))
        })
        .count() as u64
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use rusqlite::Connection;

    /// The terms FTS5 (`unicode61 remove_diacritics 2`) makes of each of `docs`, in order.
    fn fts5_terms(docs: &[String]) -> Vec<Vec<String>> {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5(text, tokenize='unicode61 remove_diacritics 2');
             CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance');",
        )
        .unwrap();
        for (i, d) in docs.iter().enumerate() {
            conn.execute(
                "INSERT INTO t (rowid, text) VALUES (?1, ?2)",
                rusqlite::params![i as i64 + 1, d],
            )
            .unwrap();
        }
        let mut out = vec![Vec::new(); docs.len()];
        let mut stmt = conn
            .prepare("SELECT doc, offset, term FROM v ORDER BY doc, offset")
            .unwrap();
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .unwrap();
        for row in rows {
            let (doc, offset, term) = row.unwrap();
            let terms = &mut out[usize::try_from(doc - 1).unwrap()];
            assert_eq!(terms.len(), usize::try_from(offset).unwrap());
            terms.push(term);
        }
        out
    }

    fn ours(text: &str) -> Vec<String> {
        folded(text).unwrap()
    }

    #[test]
    fn claimed_characters_tokenize_as_fts5_does() {
        // Every claimed character outside ASCII, and every ASCII character, between two
        // letters and alone, a few hundred per document.
        let mut chars: Vec<char> = (0u8..128).map(char::from).collect();
        for &(lo, hi) in TOKEN_RANGES.iter().chain(SEPARATOR_RANGES) {
            chars.extend((lo..=hi).filter(|c| class(*c) != Class::Unknown));
        }
        let chunks: Vec<&[char]> = chars.chunks(300).collect();
        let docs: Vec<String> = chunks
            .iter()
            .map(|chunk| {
                chunk
                    .iter()
                    .map(|c| format!("x{c}Y {c} "))
                    .collect::<String>()
            })
            .collect();
        let theirs = fts5_terms(&docs);
        let mut wrong = Vec::new();
        for ((chunk, doc), terms) in chunks.iter().zip(&docs).zip(&theirs) {
            let mine = ours(doc);
            // Two terms per character either way: `x`, `y` or `x{c}y`, `{c}`.
            assert_eq!(terms.len(), 2 * chunk.len());
            for (k, c) in chunk.iter().enumerate() {
                if mine[2 * k..2 * k + 2] != terms[2 * k..2 * k + 2] {
                    wrong.push(*c);
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "not as FTS5 cuts them: {:?}",
            wrong
                .iter()
                .map(|c| format!("{:X}", u32::from(*c)))
                .collect::<Vec<_>>()
        );
        // A character not claimed: not tokenized.
        assert_eq!(tokens("café"), None);
        assert_eq!(tokens("Ｒust"), None);
    }

    #[test]
    fn phrases_are_counted_as_fts5_counts_their_instances() {
        let text = "Module module_3 MODULE-module: モジュール module";
        let spans = tokens(text).unwrap();
        assert_eq!(spans.len(), 7);
        assert_eq!(occurrences(text, &spans, &["module".to_owned()]), 5);
        // "Module module" and "MODULE-module".
        let pair = folded("module-MODULE").unwrap();
        assert_eq!(occurrences(text, &spans, &pair), 2);
        assert_eq!(occurrences(text, &spans, &folded("モジュール").unwrap()), 1);
        assert_eq!(
            occurrences("a a a", &tokens("a a a").unwrap(), &folded("a a").unwrap()),
            2
        );
        assert_eq!(tokens(&"x".repeat(MAX_TOKEN_BYTES + 1)), None);
        assert_eq!(tokens(&"x".repeat(MAX_TOKEN_BYTES)).unwrap().len(), 1);
    }
}

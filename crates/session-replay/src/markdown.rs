//! Markdown building blocks shared by the transcript and the tool-output views.

use std::fmt::Write as _;

/// Appends `text` to `out` as a fenced code block tagged `lang` (empty for none), ending
/// with a line break; the fence is longer than any backtick run in `text`, so the block
/// closes where it should.
pub(crate) fn push_fenced(out: &mut String, lang: &str, text: &str) {
    // A fence longer than any backtick run in the text keeps the block closed correctly.
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let _ = writeln!(out, "{fence}{lang}");
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
    let _ = writeln!(out, "{fence}");
}

//! The writer between the commands and the terminal.
//!
//! Stored text — session ids in file names, user messages, workspace paths, model and tool
//! names, error messages, anything read from a run log, a message log or `state.db` — may hold
//! terminal control sequences (ESC/CSI/OSC, BEL, C1 controls) and bidirectional overrides. On
//! a terminal they move the cursor, clear the screen, set the title, write the clipboard or
//! reorder what is shown. Commands escape the text they lay out (so that columns stay aligned),
//! but the guarantee does not rest on every call site remembering it: everything written to
//! stderr, and to stdout when it is human output, goes through [`TerminalSafe`], which applies
//! [`escape_controls`], the one escaping function. The only control sequences that get through
//! are the colours [`crate::style::Style::paint`] makes, and only when colour is on.
//!
//! Which stdout is human output is decided in one place, [`stdout_is_human`], over every
//! command: a new command cannot be added without saying so. Machine output (JSON documents and
//! listings, byte-exact copies of stored lines) is not rewritten: JSON escapes control
//! characters itself, and a byte-exact copy is asked for by name (`--raw`, `--format jsonl`).

use std::io::{self, Write};

use crate::cli::{Command, ExportFormat};
use crate::style::{Paint, escape_controls};

/// Whether `command` writes human output on stdout (then it passes through [`TerminalSafe`]);
/// `false` for JSON and for byte-exact copies of stored lines.
pub(crate) fn stdout_is_human(command: &Command) -> bool {
    match command {
        Command::Where(a) => !a.json,
        Command::Runs(a) => !a.json,
        Command::Sessions(a) => !a.json,
        Command::Show(a) => !a.raw,
        Command::Search(a) => !a.json,
        Command::Replay(_) => false,
        Command::History(a) => !a.json,
        Command::Tail(a) => !a.raw,
        Command::Verify(a) => !a.json,
        Command::Repair(a) => !a.json,
        Command::Stats(a) => !a.json,
        // An HTML page is a document (its stored text is escaped by the renderer).
        Command::Export(a) => a.effective_format() == ExportFormat::Md,
        Command::Gc(a) => !a.json,
        Command::Archive(a) => !a.json,
        Command::Unarchive(a) => !a.json,
        Command::Sync(_) => true,
        Command::Reindex(a) => !a.json,
        // The URL line; the pages go to the browser.
        Command::Serve(_) => true,
        Command::Delete(a) => !a.json,
        Command::Restore(a) => !a.json,
        Command::Pin(_) | Command::Unpin(_) | Command::Name(_) => true,
        Command::Storage(a) => !a.json,
        // A shell script, written as generated.
        Command::Completions(_) => false,
    }
}

/// What [`TerminalSafe`] lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Human output: control characters and bidi overrides escaped; the colour sequences of
    /// [`crate::style::Style`] kept when `color` is on.
    Human {
        /// Whether the output is coloured.
        color: bool,
    },
    /// Machine output, written unchanged.
    Exact,
}

/// A writer that escapes what must not reach a terminal (see the module docs).
///
/// Text arrives in pieces (`write!` writes each argument separately); a UTF-8 sequence cut
/// between two writes waits for its end, and bytes that are not UTF-8 are shown as U+FFFD.
pub(crate) struct TerminalSafe<'a> {
    inner: &'a mut dyn Write,
    mode: Mode,
    /// The start of a UTF-8 sequence that the last write cut (at most 3 bytes).
    pending: Vec<u8>,
}

impl<'a> TerminalSafe<'a> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: &'a mut dyn Write, mode: Mode) -> Self {
        TerminalSafe {
            inner,
            mode,
            pending: Vec::new(),
        }
    }

    fn emit(&mut self, text: &str) -> io::Result<()> {
        let color = match self.mode {
            Mode::Human { color } => color,
            Mode::Exact => return self.inner.write_all(text.as_bytes()),
        };
        if !color {
            return self.inner.write_all(escape_controls(text).as_bytes());
        }
        let mut rest = text;
        while let Some(at) = rest.find('\u{1b}') {
            let (before, from_esc) = rest.split_at(at);
            self.inner.write_all(escape_controls(before).as_bytes())?;
            let keep = colour_sequence_len(from_esc);
            let (esc, after) = from_esc.split_at(keep.unwrap_or(1));
            if keep.is_some() {
                self.inner.write_all(esc.as_bytes())?;
            } else {
                self.inner.write_all(escape_controls(esc).as_bytes())?;
            }
            rest = after;
        }
        self.inner.write_all(escape_controls(rest).as_bytes())
    }

    fn take(&mut self, buf: &[u8]) -> io::Result<()> {
        if self.mode == Mode::Exact {
            return self.inner.write_all(buf);
        }
        let joined;
        let mut rest: &[u8] = if self.pending.is_empty() {
            buf
        } else {
            let mut v = std::mem::take(&mut self.pending);
            v.extend_from_slice(buf);
            joined = v;
            &joined
        };
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => return self.emit(text),
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    self.emit(std::str::from_utf8(valid).unwrap_or_default())?;
                    match e.error_len() {
                        // Cut at the end of this write: wait for the rest.
                        None => {
                            self.pending = after.to_vec();
                            return Ok(());
                        }
                        Some(n) => {
                            self.emit("\u{fffd}")?;
                            rest = after.get(n..).unwrap_or_default();
                        }
                    }
                }
            }
        }
    }
}

/// The length of the colour sequence `text` starts with (`ESC [ <code> m` for a code of
/// [`Paint`] or the reset), if it does.
fn colour_sequence_len(text: &str) -> Option<usize> {
    let params = text.strip_prefix("\u{1b}[")?;
    let end = params.get(..3.min(params.len()))?.find('m')?;
    let code = params.get(..end)?;
    let ours = code == "0" || Paint::ALL.iter().any(|p| p.code() == code);
    ours.then_some(2 + end + 1)
}

impl Write for TerminalSafe<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.take(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            // A sequence that never got its end.
            self.pending.clear();
            self.emit("\u{fffd}")?;
        }
        self.inner.flush()
    }
}

impl Drop for TerminalSafe<'_> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(mode: Mode, pieces: &[&[u8]]) -> String {
        let mut out = Vec::new();
        {
            let mut w = TerminalSafe::new(&mut out, mode);
            for p in pieces {
                w.write_all(p).unwrap();
            }
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn controls_and_bidi_overrides_are_escaped_in_human_output() {
        let hostile = "id\u{1b}]0;title\u{7}\u{1b}[2J\u{9b}31m\u{9d}x\u{202e}txt.exe\u{8}\r\n";
        assert_eq!(
            through(Mode::Human { color: false }, &[hostile.as_bytes()]),
            "id\\u001b]0;title\\u0007\\u001b[2J\\u009b31m\\u009dx\\u202etxt.exe\\u0008\n"
        );
        // Machine output is left alone.
        assert_eq!(through(Mode::Exact, &[hostile.as_bytes()]), hostile);
    }

    #[test]
    fn only_our_colours_pass_and_only_with_colour_on() {
        let painted = crate::style::Style { color: true }.paint(Paint::Red, "x\u{1b}[8my");
        assert_eq!(
            through(Mode::Human { color: true }, &[painted.as_bytes()]),
            "\u{1b}[31mx\\u001b[8my\u{1b}[0m"
        );
        assert_eq!(
            through(Mode::Human { color: false }, &[painted.as_bytes()]),
            "\\u001b[31mx\\u001b[8my\\u001b[0m"
        );
        // A lone ESC at the end, an unknown SGR, a long parameter.
        assert_eq!(
            through(
                Mode::Human { color: true },
                &[b"a\x1b", b"[1m", b"\x1b[38;5;1m\x1b[3166m\x1b["]
            ),
            "a\\u001b[1m\\u001b[38;5;1m\\u001b[3166m\\u001b["
        );
    }

    #[test]
    fn characters_cut_between_writes_are_joined_and_bad_bytes_replaced() {
        let text = "日本\u{9b}";
        let bytes = text.as_bytes();
        let pieces: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(
            through(Mode::Human { color: false }, &pieces),
            "日本\\u009b"
        );
        assert_eq!(
            through(Mode::Human { color: false }, &[b"a\xffb\xe6\x97"]),
            "a\u{fffd}b\u{fffd}"
        );
    }
}

//! What the terminal allows, decided once per invocation from the environment and from what
//! the output streams are connected to ([`crate::Terminal`]): colour, the width tables are laid
//! out for, progress bars and the pager.
//!
//! * Colour (`--color auto`) follows the conventions `anstream` implements for clap:
//!   `CLICOLOR_FORCE` (any value but `0`) forces colour, else `NO_COLOR` (any non-empty value)
//!   or `CLICOLOR=0` or `TERM=dumb` turn it off, else stdout must be a terminal.
//! * Layout: on a terminal, tables are laid out for `COLUMNS` (when it is a positive number)
//!   or the terminal's width (80 when neither is known) and never wrap; piped output is plain
//!   (one row per line, tab-separated, no header, padding or clipping; hints go to stderr).
//!   `SESSIONS_FORCE_TTY` lays out for a terminal even when stdout is not one (its value, when
//!   a number, is the width), like `GH_FORCE_TTY`.
//! * Progress bars need stderr to be a terminal that is not `TERM=dumb`.

use crate::Env;
use crate::Terminal;
use crate::cli::ColorChoice;

/// The width assumed for a terminal whose size is unknown.
pub(crate) const DEFAULT_COLUMNS: usize = 80;

/// The narrowest width tables are laid out for (narrower values are raised to it).
pub(crate) const MIN_COLUMNS: usize = 20;

/// How tabular human output is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// For a terminal of this many columns: aligned, clipped to fit, never wrapped; hints on
    /// stdout.
    Terminal {
        /// Columns available (at least [`MIN_COLUMNS`]).
        width: usize,
    },
    /// For a pipe or a file: rows of tab-separated cells, nothing padded or clipped, no
    /// header; hints on stderr.
    Plain,
}

/// Whether `--color` with `choice` colours stdout (see the module docs for `auto`).
pub(crate) fn colour(choice: ColorChoice, env: &Env, term: Terminal) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => auto_colour(env, term.stdout),
    }
}

/// The `auto` rule for a stream that is (`is_terminal`) or is not a terminal.
pub(crate) fn auto_colour(env: &Env, is_terminal: bool) -> bool {
    if env.get("CLICOLOR_FORCE").is_some_and(|v| v != "0") {
        return true;
    }
    if env.get("NO_COLOR").is_some() || env.get("CLICOLOR") == Some("0") || dumb(env) {
        return false;
    }
    is_terminal
}

/// `TERM=dumb`: a terminal that draws no colour and cannot move the cursor.
fn dumb(env: &Env) -> bool {
    env.get("TERM") == Some("dumb")
}

/// Whether progress bars may be drawn on stderr.
pub(crate) fn progress(env: &Env, term: Terminal) -> bool {
    term.stderr && !dumb(env)
}

/// A positive column count from an environment value.
fn columns_value(text: &str) -> Option<usize> {
    text.trim().parse::<usize>().ok().filter(|n| *n > 0)
}

/// The width of the terminal: `COLUMNS`, else the measured size, else [`DEFAULT_COLUMNS`].
pub(crate) fn columns(env: &Env, term: Terminal) -> usize {
    env.get("COLUMNS")
        .and_then(columns_value)
        .or(term.columns)
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_COLUMNS)
        .max(MIN_COLUMNS)
}

/// The widest help text is wrapped at.
pub(crate) const MAX_HELP_COLUMNS: usize = 100;

/// The width help is wrapped to: the terminal's ([`columns`]) on a terminal or when `COLUMNS`
/// is set, else [`MAX_HELP_COLUMNS`], which is also the most.
pub(crate) fn help_columns(env: &Env, term: Terminal) -> usize {
    if term.stdout || env.get("COLUMNS").and_then(columns_value).is_some() {
        columns(env, term).min(MAX_HELP_COLUMNS)
    } else {
        MAX_HELP_COLUMNS
    }
}

/// The layout of tables (see the module docs).
pub(crate) fn layout(env: &Env, term: Terminal) -> Layout {
    if let Some(force) = env.get("SESSIONS_FORCE_TTY") {
        let width = columns_value(force)
            .map(|n| n.max(MIN_COLUMNS))
            .unwrap_or_else(|| columns(env, term));
        return Layout::Terminal { width };
    }
    if term.stdout {
        Layout::Terminal {
            width: columns(env, term),
        }
    } else {
        Layout::Plain
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        Env::from_pairs(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        )
    }

    fn tty(columns: Option<usize>) -> Terminal {
        Terminal {
            stdout: true,
            stderr: true,
            columns,
            pager: true,
        }
    }

    #[test]
    fn colour_follows_the_clicolor_conventions() {
        let auto = |pairs: &[(&str, &str)], t: bool| auto_colour(&env(pairs), t);
        assert!(auto(&[], true));
        assert!(!auto(&[], false));
        assert!(!auto(&[("NO_COLOR", "1")], true));
        // An empty NO_COLOR is unset (no-color.org).
        assert!(auto(&[("NO_COLOR", "")], true));
        assert!(!auto(&[("CLICOLOR", "0")], true));
        assert!(auto(&[("CLICOLOR", "1")], true));
        assert!(!auto(&[("TERM", "dumb")], true));
        assert!(auto(&[("TERM", "xterm-256color")], true));
        assert!(auto(&[("CLICOLOR_FORCE", "1")], false));
        assert!(auto(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")], false));
        assert!(!auto(&[("CLICOLOR_FORCE", "0")], false));
        // --color always/never win over everything.
        let e = env(&[("NO_COLOR", "1"), ("TERM", "dumb")]);
        assert!(colour(ColorChoice::Always, &e, Terminal::default()));
        let e = env(&[("CLICOLOR_FORCE", "1")]);
        assert!(!colour(ColorChoice::Never, &e, tty(None)));
    }

    #[test]
    fn progress_needs_a_terminal_that_is_not_dumb() {
        assert!(progress(&env(&[]), tty(None)));
        assert!(!progress(&env(&[("TERM", "dumb")]), tty(None)));
        assert!(!progress(&env(&[]), Terminal::default()));
    }

    #[test]
    fn help_wraps_to_the_terminal_up_to_100_columns() {
        assert_eq!(help_columns(&env(&[]), Terminal::default()), 100);
        assert_eq!(
            help_columns(&env(&[("COLUMNS", "72")]), Terminal::default()),
            72
        );
        assert_eq!(help_columns(&env(&[]), tty(Some(60))), 60);
        assert_eq!(help_columns(&env(&[]), tty(Some(200))), 100);
        assert_eq!(help_columns(&env(&[]), tty(None)), 80);
    }

    #[test]
    fn layout_width_comes_from_columns_then_the_tty() {
        assert_eq!(layout(&env(&[]), Terminal::default()), Layout::Plain);
        // COLUMNS alone does not make a pipe a terminal.
        assert_eq!(
            layout(&env(&[("COLUMNS", "80")]), Terminal::default()),
            Layout::Plain
        );
        assert_eq!(
            layout(&env(&[]), tty(Some(132))),
            Layout::Terminal { width: 132 }
        );
        assert_eq!(
            layout(&env(&[("COLUMNS", "80")]), tty(Some(132))),
            Layout::Terminal { width: 80 }
        );
        for bad in ["0", "-3", "wide", "  "] {
            assert_eq!(
                layout(&env(&[("COLUMNS", bad)]), tty(Some(100))),
                Layout::Terminal { width: 100 },
                "{bad}"
            );
        }
        assert_eq!(
            layout(&env(&[]), tty(None)),
            Layout::Terminal {
                width: DEFAULT_COLUMNS
            }
        );
        assert_eq!(
            layout(&env(&[("COLUMNS", "5")]), tty(None)),
            Layout::Terminal { width: MIN_COLUMNS }
        );
        assert_eq!(
            layout(&env(&[("SESSIONS_FORCE_TTY", "100")]), Terminal::default()),
            Layout::Terminal { width: 100 }
        );
        assert_eq!(
            layout(
                &env(&[("SESSIONS_FORCE_TTY", "yes"), ("COLUMNS", "90")]),
                Terminal::default()
            ),
            Layout::Terminal { width: 90 }
        );
    }
}

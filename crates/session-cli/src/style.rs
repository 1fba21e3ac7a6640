//! Terminal styling (ANSI colour through `anstyle`, only when enabled; see
//! [`crate::support::term::colour`] for when), widths and clipping (`unicode-width`) and the bar chart.

/// Colours used by the human output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Paint {
    /// Headings and ids.
    Bold,
    /// Secondary text (timestamps, hints).
    Dim,
    /// Success.
    Green,
    /// Errors and damage.
    Red,
    /// Warnings, cancelled runs.
    Yellow,
    /// Users.
    Cyan,
    /// Tools.
    Magenta,
}

/// Applies colours when enabled.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Style {
    /// Whether to emit ANSI escapes.
    pub(crate) color: bool,
}

impl Paint {
    /// The `anstyle` style of the colour.
    pub(crate) fn style(self) -> anstyle::Style {
        use anstyle::{AnsiColor, Effects, Style};
        match self {
            Paint::Bold => Style::new().effects(Effects::BOLD),
            Paint::Dim => Style::new().effects(Effects::DIMMED),
            Paint::Green => AnsiColor::Green.on_default(),
            Paint::Red => AnsiColor::Red.on_default(),
            Paint::Yellow => AnsiColor::Yellow.on_default(),
            Paint::Cyan => AnsiColor::Cyan.on_default(),
            Paint::Magenta => AnsiColor::Magenta.on_default(),
        }
    }

    /// The SGR parameter of the colour (what [`Paint::style`] renders between `ESC [` and `m`).
    pub(crate) fn code(self) -> &'static str {
        match self {
            Paint::Bold => "1",
            Paint::Dim => "2",
            Paint::Green => "32",
            Paint::Red => "31",
            Paint::Yellow => "33",
            Paint::Cyan => "36",
            Paint::Magenta => "35",
        }
    }

    /// Every colour, for the writer that lets exactly these sequences through.
    pub(crate) const ALL: [Paint; 7] = [
        Paint::Bold,
        Paint::Dim,
        Paint::Green,
        Paint::Red,
        Paint::Yellow,
        Paint::Cyan,
        Paint::Magenta,
    ];
}

impl Style {
    /// `text` wrapped in the escape for `paint` (unchanged without colour). These sequences
    /// are the only control characters human output may hold
    /// ([`crate::human::TerminalSafe`] lets exactly them through, and only with colour on).
    pub(crate) fn paint(&self, paint: Paint, text: &str) -> String {
        if !self.color {
            return text.to_owned();
        }
        let style = paint.style();
        format!("{}{text}{}", style.render(), style.render_reset())
    }
}

/// Terminal columns of `text` as a terminal draws it (UAX #11 East Asian Width with emoji
/// presentation, by the `unicode-width` crate): 2 for CJK and emoji such as 🚀 ✅ ❌ ⭐ and ⚠️
/// (a text-style symbol followed by VARIATION SELECTOR-16), 0 for combining marks and joiners.
/// Control characters must be escaped ([`escape_controls`]) before the text is measured.
pub(crate) fn width(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

/// `text` (escaped by [`escape_controls`]) padded with spaces to `cols` terminal columns, as
/// measured by [`width`]; longer text is returned whole. For the fixed report layouts that are
/// not [`crate::support::table`]s (`sessions storage`).
pub(crate) fn pad(text: &str, cols: usize) -> String {
    let text = escape_controls(text);
    let n = width(&text);
    if n >= cols {
        text.into_owned()
    } else {
        format!("{text}{}", " ".repeat(cols - n))
    }
}

/// The first line of `text`, clipped to `max` terminal columns with `…` (never splits a
/// character), escaped by [`escape_controls`] with tabs as spaces, so one entry stays on one
/// line.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let first = text.trim_start().lines().next().unwrap_or("");
    let more_lines = text.trim().lines().nth(1).is_some();
    let clean: String = escape_controls(first).replace('\t', " ");
    if width(&clean) <= max && !more_lines {
        return clean;
    }
    let mut out = clip_to(&clean, max.saturating_sub(1));
    out.push('…');
    out
}

/// The longest prefix of `text` (whole characters) at most `max` columns wide. A character
/// that widens what precedes it (VARIATION SELECTOR-16 after ⚠) is measured with it, so the
/// prefix never ends in a sequence that is wider than it was counted.
pub(crate) fn clip_to(text: &str, max: usize) -> String {
    if width(text) <= max {
        return text.to_owned();
    }
    let mut out = String::new();
    for c in text.chars() {
        out.push(c);
        if width(&out) > max {
            out.pop();
            // A mark or selector that widened its base: the base goes too.
            if zero_width(c) {
                out.pop();
            }
            break;
        }
    }
    out
}

/// Whether `c` takes no column of its own (a combining mark, joiner or variation selector).
fn zero_width(c: char) -> bool {
    unicode_width::UnicodeWidthChar::width(c).unwrap_or(0) == 0
}

/// The longest suffix of `text` (whole characters) at most `max` columns wide.
pub(crate) fn clip_start_to(text: &str, max: usize) -> String {
    if width(text) <= max {
        return text.to_owned();
    }
    let mut rev: Vec<char> = Vec::new();
    for c in text.chars().rev() {
        rev.push(c);
        let tail: String = rev.iter().rev().collect();
        if width(&tail) > max {
            rev.pop();
            break;
        }
    }
    // Marks and selectors whose base was cut off.
    while rev.last().is_some_and(|c| zero_width(*c)) {
        rev.pop();
    }
    rev.iter().rev().collect()
}

/// Whether `c` must not reach a terminal as itself: a control character (C0, DEL, C1) other
/// than `\n` and `\t` — ESC starts the CSI/OSC sequences that move the cursor, clear the
/// screen, set the window title or write the clipboard, BEL rings, CSI (U+009B) and OSC
/// (U+009D) do the same in one character — or an explicit bidirectional formatting character
/// (U+202A–U+202E, U+2066–U+2069), which reorders the text displayed after it ("Trojan
/// Source").
pub(crate) fn is_unsafe_for_terminal(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The one escaping function for stored text shown to people: every character for which
/// [`is_unsafe_for_terminal`] holds is written visibly as its JSON escape (`\u001b` for ESC,
/// `\u202e` for RIGHT-TO-LEFT OVERRIDE), so that a log cannot move the cursor, clear the screen,
/// set the window title or reorder what is shown; a CR before `\n` is dropped (CRLF line ends).
/// Multi-line text keeps its lines; [`one_line`] is the single-line counterpart.
///
/// Every byte of human output also passes through it in [`crate::human::TerminalSafe`], so text
/// that a command forgot to escape is escaped there.
pub(crate) fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_unsafe_for_terminal) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            c if is_unsafe_for_terminal(c) => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A horizontal bar of `width` cells for `value` out of `max`, using eighth-blocks.
pub(crate) fn bar(value: u64, max: u64, width: usize) -> String {
    if max == 0 || width == 0 {
        return String::new();
    }
    let eighths =
        ((u128::from(value) * width as u128 * 8 + u128::from(max) / 2) / u128::from(max)) as usize;
    let eighths = if value > 0 { eighths.max(1) } else { 0 };
    let mut s = "█".repeat(eighths / 8);
    const PARTS: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
    s.push_str(PARTS[eighths % 8]);
    s
}

/// `1234567` → `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Byte counts as `12.3 MiB`.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipping_keeps_characters_whole() {
        assert_eq!(one_line("hello", 10), "hello");
        assert_eq!(one_line("この画像は何ですか", 9), "この画像…");
        assert_eq!(width(&one_line("この画像は何ですか", 9)), 9);
        assert_eq!(width("🤔 ok"), 5);
        assert_eq!(one_line("a\nb", 10), "a…");
        assert_eq!(one_line("tab\there", 20), "tab here");
        assert_eq!(one_line("\u{1b}[2Jx\u{202e}y", 40), "\\u001b[2Jx\\u202ey");
    }

    #[test]
    fn control_characters_are_written_visibly() {
        assert_eq!(
            escape_controls("\u{1b}]0;pwned\u{7}\u{1b}[2J\rEVIL\u{8}\u{9b}x"),
            "\\u001b]0;pwned\\u0007\\u001b[2J\\u000dEVIL\\u0008\\u009bx"
        );
        assert_eq!(escape_controls("a\r\nb\tc\n"), "a\nb\tc\n");
        assert_eq!(escape_controls("日本\u{7f}"), "日本\\u007f");
        assert_eq!(
            escape_controls("a\u{202e}b\u{2066}c\u{2069}\u{202a}"),
            "a\\u202eb\\u2066c\\u2069\\u202a"
        );
        // Marks and other format characters that cannot reorder or control are kept.
        assert_eq!(
            escape_controls("\u{200f}\u{200d}\u{2028}"),
            "\u{200f}\u{200d}\u{2028}"
        );
        assert!(matches!(
            escape_controls("plain\n"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn paints_render_the_codes_the_terminal_writer_lets_through() {
        for p in Paint::ALL {
            assert_eq!(
                Style { color: true }.paint(p, "x"),
                format!("\x1b[{}mx\x1b[0m", p.code()),
                "{p:?}"
            );
            assert_eq!(Style { color: false }.paint(p, "x"), "x");
        }
    }

    #[test]
    fn wide_symbols_and_emoji_count_two_columns() {
        // The symbols the hand-made table counted as one column each.
        for s in ["🚀", "✅", "⚠️", "❌", "⭐", "日", "🤔", "ｶ"] {
            let want = if s == "ｶ" { 1 } else { 2 };
            assert_eq!(width(s), want, "{s}");
        }
        assert_eq!(width("⚠"), 1);
        assert_eq!(width("e\u{301}"), 1);
        assert_eq!(clip_to("ab⚠️cd", 3), "ab");
        assert_eq!(clip_to("ab⚠️cd", 4), "ab⚠️");
        assert_eq!(clip_start_to("/home/dev/acme-app", 8), "acme-app");
        assert_eq!(clip_start_to("日本語", 5), "本語");
        assert_eq!(one_line("✅ done ⭐ star", 8), "✅ done…");
        assert_eq!(width(&one_line("✅ done ⭐ star", 8)), 8);
    }

    #[test]
    fn bars_scale() {
        assert_eq!(bar(10, 10, 4), "████");
        assert_eq!(bar(5, 10, 4), "██");
        assert_eq!(bar(1, 1000, 4), "▏");
        assert_eq!(bar(0, 10, 4), "");
    }

    #[test]
    fn numbers() {
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(12), "12");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn one_line_fits_and_is_one_line(text in "\\PC{0,80}(\n\\PC{0,20}){0,3}", max in 2usize..60) {
            let s = one_line(&text, max);
            prop_assert!(width(&s) <= max, "{s:?} wider than {max}");
            prop_assert!(!s.contains('\n'));
            prop_assert!(!s.chars().any(char::is_control));
        }

        #[test]
        fn escaped_text_keeps_only_newlines_and_tabs(text in "[\\x00-\\x{a0}a日\\x{2028}-\\x{206f}]{0,40}") {
            let e = escape_controls(&text);
            prop_assert!(!e.chars().any(is_unsafe_for_terminal));
            prop_assert_eq!(e.matches('\n').count(), text.matches('\n').count());
        }

        #[test]
        fn bars_never_exceed_their_width(value in 0u64..1_000_000, max in 1u64..1_000_000, w in 1usize..50) {
            let value = value.min(max);
            prop_assert!(bar(value, max, w).chars().count() <= w + 1);
        }
    }
}

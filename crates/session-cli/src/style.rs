//! Terminal styling (ANSI colour only when enabled), clipping and the bar chart.

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
    /// The SGR parameter of the colour.
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

/// The SGR sequence that ends every painted text.
pub(crate) const RESET: &str = "\x1b[0m";

impl Style {
    /// `text` wrapped in the escape for `paint` (unchanged without colour). These sequences
    /// are the only control characters human output may hold
    /// ([`crate::human::TerminalSafe`] lets exactly them through, and only with colour on).
    pub(crate) fn paint(&self, paint: Paint, text: &str) -> String {
        if !self.color {
            return text.to_owned();
        }
        format!("\x1b[{}m{text}{RESET}", paint.code())
    }
}

/// Terminal columns of one character: 2 for East Asian wide and emoji ranges, 0 for combining
/// marks, zero-width joiners and variation selectors, 1 otherwise (a small approximation of
/// UAX #11 that keeps tables with Japanese text and emoji aligned).
pub(crate) fn char_width(c: char) -> usize {
    match c as u32 {
        0x0300..=0x036F | 0x200B..=0x200F | 0xFE00..=0xFE0F | 0x1F3FB..=0x1F3FF => 0,
        0x1100..=0x115F
        | 0x2E80..=0x303E
        | 0x3041..=0x33FF
        | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF
        | 0xA000..=0xA4CF
        | 0xAC00..=0xD7A3
        | 0xF900..=0xFAFF
        | 0xFE30..=0xFE4F
        | 0xFF00..=0xFF60
        | 0xFFE0..=0xFFE6
        | 0x1F300..=0x1F64F
        | 0x1F900..=0x1F9FF
        | 0x20000..=0x3FFFD => 2,
        _ => 1,
    }
}

/// Terminal columns of `text`.
pub(crate) fn width(text: &str) -> usize {
    text.chars().map(char_width).sum()
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
    let mut out = String::new();
    let mut used = 0;
    for c in clean.chars() {
        let w = char_width(c);
        if used + w + 1 > max {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
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

/// Pads `text`, escaped by [`escape_controls`] (so that the columns stay aligned when it holds
/// control characters), with spaces to `cols` terminal columns.
pub(crate) fn pad(text: &str, cols: usize) -> String {
    let text = escape_controls(text);
    let n = width(&text);
    if n >= cols {
        text.into_owned()
    } else {
        format!("{text}{}", " ".repeat(cols - n))
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
        assert_eq!(pad("日本", 6), "日本  ");
        assert_eq!(pad("a\u{1b}", 8), "a\\u001b ");
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
        fn pad_reaches_the_width(text in "\\PC{0,30}", cols in 0usize..40) {
            let p = pad(&text, cols);
            prop_assert_eq!(width(&p), width(&text).max(cols));
            prop_assert!(p.starts_with(&text));
        }

        #[test]
        fn bars_never_exceed_their_width(value in 0u64..1_000_000, max in 1u64..1_000_000, w in 1usize..50) {
            let value = value.min(max);
            prop_assert!(bar(value, max, w).chars().count() <= w + 1);
        }
    }
}

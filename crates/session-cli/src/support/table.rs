//! Tables of human output (`runs`, `sessions`, `stats`) laid out for the terminal.
//!
//! On a terminal ([`Layout::Terminal`]) every column is as wide as its widest cell, measured
//! in terminal columns (`unicode-width`: 🚀, ✅, ⚠️ and CJK count two), so columns align
//! whatever the rows hold and whatever the time zone makes of a time's width. When the row is
//! wider than the terminal, the table's plan is applied step by step — shrink a column (text
//! clipped with `…`, paths from the left, ids to a prefix), drop a column — until it fits;
//! rows never wrap. Piped ([`Layout::Plain`]) a table is its rows of tab-separated cells:
//! no header, no padding, no clipping, one row per line, no decoration columns.

use crate::style::{Paint, Style, bar, clip_start_to, clip_to, escape_controls, one_line, width};
use crate::support::term::Layout;

/// The text between two columns.
const GAP: &str = " ";

/// How a column aligns its cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// How a cell too wide for its column is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Clip {
    /// Keep the start, end with `…`.
    End,
    /// Keep the end, start with `…` (paths: the last components say the most).
    Start,
    /// Keep a prefix without a mark (ids: a prefix is still an id). Such a column is either
    /// whole or at its minimum, never in between.
    Prefix,
}

/// One column.
#[derive(Debug, Clone)]
pub(crate) struct Column {
    header: &'static str,
    align: Align,
    clip: Clip,
    /// The width of a bar column (bars are drawn to the column's width).
    bar: Option<usize>,
}

impl Column {
    /// A left-aligned text column clipped at its end.
    pub(crate) fn text(header: &'static str) -> Column {
        Column {
            header,
            align: Align::Left,
            clip: Clip::End,
            bar: None,
        }
    }

    /// A right-aligned number column.
    pub(crate) fn number(header: &'static str) -> Column {
        Column {
            align: Align::Right,
            ..Column::text(header)
        }
    }

    /// An id column, shortened to a prefix.
    pub(crate) fn id(header: &'static str) -> Column {
        Column {
            clip: Clip::Prefix,
            ..Column::text(header)
        }
    }

    /// A path column, clipped from the left.
    pub(crate) fn path(header: &'static str) -> Column {
        Column {
            clip: Clip::Start,
            ..Column::text(header)
        }
    }

    /// A bar-chart column `cols` wide (left out of plain output).
    pub(crate) fn bar(header: &'static str, cols: usize) -> Column {
        Column {
            bar: Some(cols),
            ..Column::text(header)
        }
    }
}

/// One cell.
#[derive(Debug, Clone)]
pub(crate) enum Cell {
    /// Stored or computed text (escaped and put on one line when laid out).
    Text {
        /// The text.
        text: String,
        /// Its colour, if any.
        paint: Option<Paint>,
    },
    /// A bar of `value` out of `max`, as wide as its column.
    Bar {
        /// The value.
        value: u64,
        /// The value of a full bar.
        max: u64,
    },
}

impl Cell {
    /// Plain text.
    pub(crate) fn text(text: impl Into<String>) -> Cell {
        Cell::Text {
            text: text.into(),
            paint: None,
        }
    }

    /// Coloured text.
    pub(crate) fn painted(text: impl Into<String>, paint: Paint) -> Cell {
        Cell::Text {
            text: text.into(),
            paint: Some(paint),
        }
    }
}

/// One step of fitting a table into the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Make column `.0` at most `.1` columns wide.
    Shrink(usize, usize),
    /// Leave column `.0` out.
    Drop(usize),
}

/// A table: columns, a plan to fit it, rows.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    columns: Vec<Column>,
    plan: Vec<Step>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    /// A table with these columns and the steps that fit it into a narrow terminal, in order.
    pub(crate) fn new(columns: Vec<Column>, plan: Vec<Step>) -> Table {
        Table {
            columns,
            plan,
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells are empty; extra cells are ignored).
    pub(crate) fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    /// The lines of the table, each ending in `\n`.
    pub(crate) fn render(&self, layout: Layout, style: Style) -> String {
        match layout {
            Layout::Plain => self.render_plain(style),
            Layout::Terminal { width } => self.render_terminal(width, style),
        }
    }

    fn render_plain(&self, style: Style) -> String {
        let mut out = String::new();
        for row in &self.rows {
            let mut cells = Vec::new();
            for (i, col) in self.columns.iter().enumerate() {
                if col.bar.is_some() {
                    continue;
                }
                let text = match row.get(i) {
                    Some(Cell::Text {
                        text,
                        paint: Some(p),
                    }) => style.paint(*p, &plain_cell(text)),
                    Some(Cell::Text { text, .. }) => plain_cell(text),
                    _ => String::new(),
                };
                cells.push(text);
            }
            out.push_str(&cells.join("\t"));
            out.push('\n');
        }
        out
    }

    /// Each cell as one line of escaped text (bars empty), row by row.
    fn one_line_cells(&self) -> Vec<Vec<String>> {
        self.rows
            .iter()
            .map(|row| {
                (0..self.columns.len())
                    .map(|i| match row.get(i) {
                        Some(Cell::Text { text, .. }) => one_line(text, usize::MAX),
                        _ => String::new(),
                    })
                    .collect()
            })
            .collect()
    }

    /// Column widths for a terminal of `total` columns (`None`: the column is left out).
    fn widths(&self, cells: &[Vec<String>], total: usize) -> Vec<Option<usize>> {
        let natural: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, col)| {
                let cells = cells.iter().filter_map(|r| r.get(i)).map(|c| width(c));
                let widest = cells.max().unwrap_or(0);
                width(col.header).max(widest).max(col.bar.unwrap_or(0))
            })
            .collect();
        let mut widths: Vec<Option<usize>> = natural.iter().map(|w| Some(*w)).collect();
        let used = |widths: &[Option<usize>]| {
            let shown: Vec<usize> = widths.iter().flatten().copied().collect();
            shown.iter().sum::<usize>() + GAP.len() * shown.len().saturating_sub(1)
        };
        for step in &self.plan {
            let over = used(&widths).saturating_sub(total);
            if over == 0 {
                break;
            }
            match *step {
                Step::Shrink(i, min) => {
                    let clip = self.columns.get(i).map(|c| c.clip);
                    if let Some(Some(w)) = widths.get_mut(i) {
                        *w = if clip == Some(Clip::Prefix) {
                            min.min(*w)
                        } else {
                            (*w - over.min(*w)).max(min.min(*w))
                        };
                    }
                }
                Step::Drop(i) => {
                    if let Some(w) = widths.get_mut(i) {
                        *w = None;
                    }
                }
            }
        }
        // Give what a Prefix jump freed back to the columns clipped on the way.
        for step in self.plan.iter().rev() {
            let slack = total.saturating_sub(used(&widths));
            if slack == 0 {
                break;
            }
            if let Step::Shrink(i, _) = *step
                && self.columns.get(i).is_some_and(|c| c.clip != Clip::Prefix)
                && let (Some(Some(w)), Some(n)) = (widths.get_mut(i), natural.get(i))
            {
                *w += slack.min(n.saturating_sub(*w));
            }
        }
        // Still too wide (a very narrow terminal): narrow the columns from the right, then
        // leave them out from the right, so that no row ever wraps.
        for i in (0..widths.len()).rev() {
            let over = used(&widths).saturating_sub(total);
            if over == 0 {
                break;
            }
            if let Some(Some(w)) = widths.get_mut(i) {
                *w = (*w - over.min(*w)).max(1);
            }
        }
        for i in (1..widths.len()).rev() {
            if used(&widths) <= total {
                break;
            }
            if let Some(w) = widths.get_mut(i) {
                *w = None;
            }
        }
        widths
    }

    fn render_terminal(&self, total: usize, style: Style) -> String {
        let cells = self.one_line_cells();
        let widths = self.widths(&cells, total);
        let last_shown = widths.iter().rposition(Option::is_some);
        let mut out = String::new();
        let mut line = Vec::new();
        for (i, col) in self.columns.iter().enumerate() {
            if let Some(Some(w)) = widths.get(i) {
                line.push(fit(col, col.header, *w, Some(i) == last_shown));
            }
        }
        out.push_str(&style.paint(Paint::Bold, &line.join(GAP)));
        out.push('\n');
        for (row, texts) in self.rows.iter().zip(&cells) {
            let mut line = Vec::new();
            for (i, col) in self.columns.iter().enumerate() {
                let Some(Some(w)) = widths.get(i) else {
                    continue;
                };
                let last = Some(i) == last_shown;
                let piece = match row.get(i) {
                    Some(Cell::Bar { value, max }) => {
                        let b = bar(*value, *max, *w);
                        let padded = if last { b.clone() } else { pad_to(&b, *w) };
                        style.paint(Paint::Cyan, &padded)
                    }
                    Some(Cell::Text { paint, .. }) => {
                        let text = texts.get(i).map_or("", String::as_str);
                        let fitted = fit(col, text, *w, last);
                        match paint {
                            Some(p) => style.paint(*p, &fitted),
                            None => fitted,
                        }
                    }
                    None => fit(col, "", *w, last),
                };
                line.push(piece);
            }
            let joined = line.join(GAP);
            out.push_str(joined.trim_end_matches(' '));
            out.push('\n');
        }
        out
    }
}

/// `text` cut to `w` columns as the column says and padded to exactly `w` (the last column
/// is not padded, so that lines carry no trailing spaces).
fn fit(col: &Column, text: &str, w: usize, last: bool) -> String {
    let cut = if width(text) <= w {
        text.to_owned()
    } else {
        match col.clip {
            Clip::Prefix => clip_to(text, w),
            Clip::End => format!("{}…", clip_to(text, w.saturating_sub(1))),
            Clip::Start => format!("…{}", clip_start_to(text, w.saturating_sub(1))),
        }
    };
    if last && col.align == Align::Left {
        return cut;
    }
    let gap = " ".repeat(w.saturating_sub(width(&cut)));
    match col.align {
        Align::Left => format!("{cut}{gap}"),
        Align::Right => format!("{gap}{cut}"),
    }
}

/// `text` padded with spaces to `w` columns.
fn pad_to(text: &str, w: usize) -> String {
    format!("{text}{}", " ".repeat(w.saturating_sub(width(text))))
}

/// A cell of plain output: all of it, escaped, on one line (tabs and line breaks as spaces).
fn plain_cell(text: &str) -> String {
    escape_controls(text.trim())
        .chars()
        .map(|c| if matches!(c, '\t' | '\n') { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_COLOUR: Style = Style { color: false };

    fn sample(inputs: &[&str]) -> Table {
        let mut t = Table::new(
            vec![
                Column::text("STARTED"),
                Column::id("RUN"),
                Column::number("TOKENS"),
                Column::text("INPUT"),
            ],
            vec![Step::Shrink(3, 10), Step::Shrink(1, 8), Step::Drop(2)],
        );
        for (n, input) in inputs.iter().enumerate() {
            t.row(vec![
                Cell::text("2026-12-01 05:38:23+09:00"),
                Cell::text(format!("7a1e000{n}-0000-4000-8000-000000000601")),
                Cell::text("172,570"),
                Cell::text(*input),
            ]);
        }
        t
    }

    fn lines(s: &str) -> Vec<&str> {
        s.lines().collect()
    }

    const WIDE: [&str; 6] = [
        "Deploy 🚀 now",
        "tests ✅ pass",
        "careful ⚠️ here",
        "failed ❌ twice",
        "star ⭐ it",
        "この画像は何ですか",
    ];

    #[test]
    fn wide_characters_align_and_every_line_fits() {
        let t = sample(&WIDE);
        for w in [80, 60, 45, 30, 20] {
            let out = t.render(Layout::Terminal { width: w }, NO_COLOUR);
            let ls = lines(&out);
            assert_eq!(ls.len(), WIDE.len() + 1, "{out}");
            for l in &ls {
                assert!(width(l) <= w, "{w}: {l:?} is {} wide", width(l));
            }
            // The last column starts at the same display column in every row.
            let starts: Vec<usize> = ls
                .iter()
                .skip(1)
                .map(|l| width(&l[..l.rfind("  ").map_or(0, |i| i + 1)]))
                .collect();
            assert!(starts.windows(2).all(|p| p[0] == p[1]), "{w}: {out}");
        }
        let out = t.render(Layout::Terminal { width: 120 }, NO_COLOUR);
        assert_eq!(
            lines(&out)[3],
            "2026-12-01 05:38:23+09:00 7a1e0002-0000-4000-8000-000000000601 172,570 careful ⚠️ here"
        );
        assert_eq!(
            lines(&out)[0],
            "STARTED                   RUN                                   TOKENS INPUT"
        );
    }

    #[test]
    fn the_plan_shrinks_input_then_ids_then_drops() {
        let t = sample(&["Give me a detailed overview of the repository structure"]);
        let at = |w| t.render(Layout::Terminal { width: w }, NO_COLOUR);
        // Wide enough: nothing cut.
        assert!(at(200).contains("of the repository structure"));
        // 80: with the whole id (25 + 1 + 36 + 1 + 7 + 1 = 71) the input would get 9 of the 10
        // it may shrink to, so the id becomes its prefix and the input gets the rest back.
        let out = at(80);
        assert_eq!(
            lines(&out)[1],
            "2026-12-01 05:38:23+09:00 7a1e0000 172,570 Give me a detailed overview of the r…"
        );
        assert_eq!(width(lines(&out)[1]), 80);
        // 45: the token column dropped too.
        let out = at(45);
        assert_eq!(
            lines(&out)[1],
            "2026-12-01 05:38:23+09:00 7a1e0000 Give me a…"
        );
        // Narrower than the plan reaches: cut from the right, never wrapped.
        let out = at(20);
        assert!(lines(&out).iter().all(|l| width(l) <= 20), "{out}");
    }

    #[test]
    fn plain_output_is_tab_separated_without_header_padding_or_clipping() {
        let mut t = sample(&["line one\nline two\twith tab \u{1b}[2J", "✅"]);
        t.columns.push(Column::bar("BAR", 30));
        t.rows[1][3] = Cell::painted("✅", Paint::Green);
        let out = t.render(Layout::Plain, NO_COLOUR);
        assert_eq!(
            out,
            "2026-12-01 05:38:23+09:00\t7a1e0000-0000-4000-8000-000000000601\t172,570\tline one line two with tab \\u001b[2J\n\
             2026-12-01 05:38:23+09:00\t7a1e0001-0000-4000-8000-000000000601\t172,570\t✅\n"
        );
        // Colour, when forced on for a pipe, paints the cells and nothing else.
        let out = t.render(Layout::Plain, Style { color: true });
        assert!(
            out.ends_with("\t172,570\t\u{1b}[32m✅\u{1b}[0m\n"),
            "{out:?}"
        );
    }

    #[test]
    fn colours_wrap_the_fitted_text_and_bars_fill_their_column() {
        let mut t = Table::new(
            vec![
                Column::text("DAY"),
                Column::number("RUNS"),
                Column::bar("TOKENS", 8),
            ],
            vec![Step::Shrink(2, 4)],
        );
        t.row(vec![
            Cell::painted("2026-11-28", Paint::Green),
            Cell::text("10"),
            Cell::Bar { value: 5, max: 10 },
        ]);
        let out = t.render(Layout::Terminal { width: 80 }, Style { color: true });
        assert_eq!(
            out,
            "\u{1b}[1mDAY        RUNS TOKENS\u{1b}[0m\n\u{1b}[32m2026-11-28\u{1b}[0m   10 \u{1b}[36m████\u{1b}[0m\n"
        );
        let out = t.render(Layout::Terminal { width: 20 }, NO_COLOUR);
        assert_eq!(out, "DAY        RUNS TOK…\n2026-11-28   10 ██\n");
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn rows_never_exceed_the_terminal_and_never_wrap(
            cells in proptest::collection::vec(
                ("[a-z0-9 ]{0,12}", "[\\PC🚀✅⚠️❌⭐日本]{0,40}", 0u64..1_000_000),
                1..6,
            ),
            width in 20usize..160,
        ) {
            let mut t = Table::new(
                vec![
                    Column::id("ID"),
                    Column::number("N"),
                    Column::text("TEXT"),
                    Column::path("PATH"),
                    Column::bar("BAR", 12),
                ],
                vec![Step::Shrink(2, 10), Step::Shrink(0, 4), Step::Shrink(3, 6), Step::Drop(1)],
            );
            for (id, text, n) in &cells {
                t.row(vec![
                    Cell::text(id.clone()),
                    Cell::text(n.to_string()),
                    Cell::text(text.clone()),
                    Cell::text(format!("/home/{id}")),
                    Cell::Bar { value: *n, max: 1_000_000 },
                ]);
            }
            let out = t.render(Layout::Terminal { width }, Style { color: false });
            prop_assert_eq!(out.lines().count(), cells.len() + 1);
            for l in out.lines() {
                prop_assert!(crate::style::width(l) <= width, "{:?} wider than {}", l, width);
            }
            let plain = t.render(Layout::Plain, Style { color: false });
            prop_assert_eq!(plain.lines().count(), cells.len());
            for l in plain.lines() {
                prop_assert_eq!(l.split('\t').count(), 4);
            }
        }
    }
}

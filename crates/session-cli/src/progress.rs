//! Progress bars on stderr, drawn only when stderr is a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar, or nothing when stderr is not a terminal.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar of `len` steps labelled `what`; hidden unless `enabled`.
    pub(crate) fn new(enabled: bool, len: u64, what: &str) -> Self {
        if !enabled {
            return Progress { bar: None };
        }
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}") {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_owned());
        Progress { bar: Some(bar) }
    }

    /// One step done.
    pub(crate) fn inc(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    /// Removes the bar.
    pub(crate) fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Progress {
    /// A bar whose length is learned from the first [`Progress::update`].
    pub(crate) fn lazy(enabled: bool, what: &str) -> Self {
        Progress::new(enabled, 0, what)
    }

    /// Sets position and length (for callbacks that report `done, total`).
    pub(crate) fn update(&self, done: u64, total: u64) {
        if let Some(b) = &self.bar {
            b.set_length(total);
            b.set_position(done);
        }
    }
}

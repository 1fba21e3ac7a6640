//! Progress bars on stderr, drawn only when stderr is a terminal that can draw them
//! ([`crate::support::term::progress`]) and only once the work has lasted [`SHOW_AFTER`]: work that ends
//! sooner leaves no flicker behind.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long work runs before its bar appears.
pub(crate) const SHOW_AFTER: Duration = Duration::from_secs(1);

/// A progress bar, or nothing when stderr is not a terminal.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    show_after: Duration,
    shown: std::cell::Cell<bool>,
}

impl Progress {
    /// A bar of `len` steps labelled `what`; hidden unless `enabled`, and until the work has
    /// lasted [`SHOW_AFTER`].
    pub(crate) fn new(enabled: bool, len: u64, what: &str) -> Self {
        Progress::with_delay(enabled, len, what, SHOW_AFTER)
    }

    /// [`Progress::new`] that shows the bar once the work has lasted `show_after`.
    pub(crate) fn with_delay(enabled: bool, len: u64, what: &str, show_after: Duration) -> Self {
        let bar = enabled.then(|| {
            let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
            if let Ok(style) =
                ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}")
            {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_message(what.to_owned());
            bar
        });
        let p = Progress {
            bar,
            started: Instant::now(),
            show_after,
            shown: std::cell::Cell::new(false),
        };
        p.reveal();
        p
    }

    /// Draws the bar on stderr once the work has lasted long enough.
    fn reveal(&self) {
        if let Some(b) = &self.bar
            && !self.shown.get()
            && self.started.elapsed() >= self.show_after
        {
            self.shown.set(true);
            b.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    /// Whether the bar is drawn.
    #[cfg(test)]
    pub(crate) fn visible(&self) -> bool {
        self.shown.get()
    }

    /// One step done.
    pub(crate) fn inc(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
            self.reveal();
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
            self.reveal();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_appear_only_for_work_that_lasts() {
        // Short work: the bar is never drawn.
        let quick = Progress::new(true, 10, "quick");
        for _ in 0..10 {
            quick.inc();
        }
        assert!(!quick.visible());
        quick.finish();
        // Work past the delay: drawn from the next step on.
        let slow = Progress::with_delay(true, 10, "slow", Duration::from_millis(20));
        assert!(!slow.visible());
        std::thread::sleep(Duration::from_millis(30));
        slow.update(1, 10);
        assert!(slow.visible());
        slow.finish();
        // Disabled (not a terminal, TERM=dumb): nothing, whatever the time.
        let off = Progress::with_delay(false, 10, "off", Duration::ZERO);
        off.inc();
        assert!(!off.visible());
    }
}

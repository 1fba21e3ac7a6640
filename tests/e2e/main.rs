//! End-to-end tests across the session-store crates.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod archive_roundtrip;
mod crash_resume;
mod cut_streams;
mod gc_restore;
mod live_run;
mod repair_real_data;
mod resume_real_data;
mod run_read;
mod search_refresh;
mod shared_root;
mod state_turns;
mod stored_values;
mod support;

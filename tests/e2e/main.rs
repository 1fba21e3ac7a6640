//! End-to-end tests across the session-store crates.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod crash_resume;
mod shared_root;
mod support;

//! End-to-end tests across the session-store crates.

//! session-jsonl: skeleton; see the crate README.

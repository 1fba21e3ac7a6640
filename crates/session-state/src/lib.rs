//! session-state: skeleton; see the crate README.

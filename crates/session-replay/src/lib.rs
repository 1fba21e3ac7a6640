//! session-replay: skeleton; see the crate README.

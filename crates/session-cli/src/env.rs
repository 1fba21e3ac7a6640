//! A snapshot of the environment variables the tool reads, so commands never consult the
//! process environment directly and tests can pass their own.

use std::collections::BTreeMap;

/// Environment variables by name. Empty values are treated as unset by [`Env::get`].
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    /// The current process environment (variables that are not valid UTF-8 are skipped).
    pub fn from_process() -> Self {
        Env::from_pairs(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
        )
    }

    /// An environment made of the given pairs.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        Env {
            vars: pairs.into_iter().collect(),
        }
    }

    /// Whether `name` is set, even to the empty string (an empty `SESSIONS_PAGER` means "no
    /// pager", which is not the same as leaving it unset).
    pub fn is_set(&self, name: &str) -> bool {
        self.vars.contains_key(name)
    }

    /// The value of `name`, or `None` when unset or empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

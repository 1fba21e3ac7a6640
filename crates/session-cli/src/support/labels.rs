//! Session titles and pins as the commands read them: `@title` as an id, the titles shown
//! beside sessions, the pinned sessions `gc` never moves.
//!
//! Titles and pins live in our table `session_labels` of `state.db` (session-state's
//! `StateStore::labels`); the reference runtime ignores it.

use std::collections::{BTreeMap, BTreeSet};

use session_state::{SessionLabel, StateStore};

use crate::Ctx;
use crate::error::CliError;
use crate::support::open::{open_store_read_only, state_err};

/// The labels of the store, or none when there is no `state.db` yet.
fn labels_of(store: &StateStore) -> Result<Vec<SessionLabel>, CliError> {
    store.labels().map_err(state_err)
}

/// The pinned session ids of `store`.
///
/// # Errors
/// Data (4) when the labels cannot be read.
pub(crate) fn pinned_sessions(store: &StateStore) -> Result<BTreeSet<String>, CliError> {
    Ok(labels_of(store)?
        .into_iter()
        .filter(|l| l.pinned)
        .map(|l| l.session_id)
        .collect())
}

/// The session titles of `store` by session id.
///
/// # Errors
/// Data (4) when the labels cannot be read.
pub(crate) fn titles(store: &StateStore) -> Result<BTreeMap<String, SessionLabel>, CliError> {
    Ok(labels_of(store)?
        .into_iter()
        .map(|l| (l.session_id.clone(), l))
        .collect())
}

/// `raw` as a session id: `@title` is the session with that title (exactly; when none has
/// it exactly, the one whose title matches ignoring case), anything else is returned as it
/// is.
///
/// # Errors
/// Not found (3) when no session has the title; usage (2) when several have it, listing them.
pub(crate) fn resolve_title(store: &StateStore, raw: &str) -> Result<String, CliError> {
    let Some(title) = raw.strip_prefix('@') else {
        return Ok(raw.to_owned());
    };
    let labels = labels_of(store)?;
    let with = |exact: bool| -> Vec<&SessionLabel> {
        labels
            .iter()
            .filter(|l| {
                l.title.as_deref().is_some_and(|t| {
                    if exact {
                        t == title
                    } else {
                        t.to_lowercase() == title.to_lowercase()
                    }
                })
            })
            .collect()
    };
    let mut found = with(true);
    if found.is_empty() {
        found = with(false);
    }
    match found.as_slice() {
        [one] => Ok(one.session_id.clone()),
        [] => Err(CliError::NotFound(format!(
            "no session titled \"{title}\" (`sessions name ID TITLE` gives one)"
        ))),
        many => Err(CliError::Usage(format!(
            "the title \"{title}\" names {} sessions; use one of their ids: {}",
            many.len(),
            many.iter()
                .map(|l| format!("{} ({})", l.session_id, l.title.as_deref().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// `raw` as a session id for a reading command (`@title` looked up read-only; any other text
/// returned as is, without opening the store).
///
/// # Errors
/// As [`resolve_title`]; not found (3) when `@title` is asked of a store without `state.db`.
pub(crate) fn resolve_id(ctx: &mut Ctx<'_>, raw: &str) -> Result<String, CliError> {
    if !raw.starts_with('@') {
        return Ok(raw.to_owned());
    }
    if !ctx.root.path.join("state.db").is_file() {
        return Err(CliError::NotFound(format!(
            "no session titled \"{}\": {} has no state.db",
            &raw[1..],
            ctx.root.path.display()
        )));
    }
    let store = open_store_read_only(ctx)?;
    resolve_title(&store, raw)
}

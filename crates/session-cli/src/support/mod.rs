//! What the commands share, so that no command imports another: opening the store, resolving
//! ids and targets, locating and reading runs, listings, renderers, tables and the terminal,
//! the shared store's look-ups, and the machinery of the commands that change the store.
//!
//! Nothing here imports [`crate::commands`]; the modules form no import cycle (xtask's
//! `cycles` test). Roughly bottom-up:
//! - [`paths`]: short paths for messages, run ids of file names, the workspace of a directory;
//! - [`lib_errors`]: the library layers' errors as exit codes;
//! - [`term`], [`table`]: the terminal's layout and tables laid out for it;
//! - [`open`]: opening `state.db`, where a listing's runs come from, index refreshes;
//! - [`store`], [`stream`]: locating run files and reading them (whole or streamed);
//! - [`ids`], [`labels`], [`target`], [`shared`]: what an id argument names, locally and on
//!   a shared store;
//! - [`listing`], [`cold`]: listing runs from the index or, without one, from the files;
//! - [`render`], [`html`], [`search_hits`], [`damage`]: turning records, hits and damage into
//!   text and HTML;
//! - [`housekeeping`], [`trash`], [`label_edit`]: what the commands that change the store share.

pub(crate) mod cold;
pub(crate) mod damage;
pub(crate) mod housekeeping;
pub(crate) mod html;
pub(crate) mod ids;
pub(crate) mod label_edit;
pub(crate) mod labels;
pub(crate) mod lib_errors;
pub(crate) mod listing;
pub(crate) mod open;
pub(crate) mod paths;
pub(crate) mod render;
pub(crate) mod search_hits;
pub(crate) mod shared;
pub(crate) mod store;
pub(crate) mod stream;
pub(crate) mod table;
pub(crate) mod target;
pub(crate) mod term;
pub(crate) mod trash;

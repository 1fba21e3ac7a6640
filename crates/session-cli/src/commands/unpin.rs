//! `sessions unpin ID…`: `gc` may expire the sessions again.

use crate::Ctx;
use crate::cli::PinArgs;
use crate::error::CliError;

/// `sessions unpin ID…`.
///
/// # Errors
/// As [`crate::support::label_edit::set_pinned`].
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &PinArgs) -> Result<i32, CliError> {
    crate::support::label_edit::set_pinned(ctx, args, false)
}

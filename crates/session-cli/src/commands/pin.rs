//! `sessions pin ID…`: pinned sessions are never expired by `gc`.

use crate::Ctx;
use crate::cli::PinArgs;
use crate::error::CliError;

/// `sessions pin ID…`.
///
/// # Errors
/// As [`crate::support::label_edit::set_pinned`].
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &PinArgs) -> Result<i32, CliError> {
    crate::support::label_edit::set_pinned(ctx, args, true)
}

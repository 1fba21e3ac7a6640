//! `sessions show`: a run or a session's runs as a transcript (or the stored lines with
//! `--raw`).

use crate::Ctx;
use crate::backend::Shared;
use crate::cli::ShowArgs;
use crate::error::CliError;
use crate::support::ids::Want;
use crate::support::render::show_target;
use crate::support::shared::resolve_target;
use crate::support::target;

/// `sessions show [ID]` on the local store.
///
/// # Errors
/// As [`target::resolve_target`] and [`show_target`].
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &ShowArgs) -> Result<i32, CliError> {
    let target = target::resolve_target(ctx, crate::cli::id_or_newest(args.id.as_ref()))?;
    // Values of the session's state.db row that are not what their column should hold (text
    // that is not UTF-8 is shown decoded, with U+FFFD).
    for d in &target.damage {
        if let session_state::MessageDamageKind::Column(c) = &d.kind {
            ctx.warn(&format!("saved state: {c}"));
        }
    }
    let runs: Vec<crate::backend::RunRef> = target.paths.iter().map(Into::into).collect();
    show_target(
        ctx,
        args,
        target.session.as_deref(),
        target.state.as_ref(),
        &runs,
    )
}

/// `sessions show` on the shared store.
pub(crate) fn show_shared(
    ctx: &mut Ctx<'_>,
    shared: &Shared,
    args: &ShowArgs,
) -> Result<i32, CliError> {
    let id = crate::cli::id_or_newest(args.id.as_ref());
    let target = resolve_target(ctx, shared, id, Want::Either)?;
    show_target(
        ctx,
        args,
        target.session.as_deref(),
        target.state.as_ref(),
        &target.runs,
    )
}

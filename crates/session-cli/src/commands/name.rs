//! `sessions name ID TITLE`: gives a session a title (then `@title` names it), or removes
//! it with `--clear`.

use crate::Ctx;
use crate::cli::NameArgs;
use crate::error::{CliError, EXIT_OK};
use crate::support::label_edit::{existing_session, now_text, open_for_labels};
use crate::support::open::state_err;

/// `sessions name ID TITLE` / `sessions name ID --clear`.
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &NameArgs) -> Result<i32, CliError> {
    let store = open_for_labels(ctx)?;
    let id = existing_session(ctx, &store, &args.id)?;
    let title = if args.clear {
        None
    } else {
        let t = args.title.as_deref().unwrap_or_default().trim();
        if t.is_empty() {
            return Err(CliError::Usage(
                "a title must not be empty (`--clear` removes one)".into(),
            ));
        }
        if t.starts_with('@') || t.chars().any(char::is_control) {
            return Err(CliError::Usage(
                "a title must not start with @ or hold control characters".into(),
            ));
        }
        Some(t.to_owned())
    };
    store
        .set_title(&id, title.as_deref(), &now_text(ctx))
        .map_err(state_err)?;
    match &title {
        Some(t) => writeln!(ctx.out, "session {id} is titled \"{t}\" (use it as @{t})")?,
        None => writeln!(ctx.out, "session {id} has no title")?,
    }
    Ok(EXIT_OK)
}

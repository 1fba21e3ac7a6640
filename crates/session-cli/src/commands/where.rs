//! `sessions where`: the store the commands work on, why it was chosen, and the order the
//! choices are made in.

use crate::Ctx;
use crate::backend::Shared;
use crate::cli::WhereArgs;
use crate::error::{CliError, EXIT_OK};
use crate::json_rows::{Row, WhereRow, write_row};

/// `sessions where`: the local root (or, with a shared store, that store) and how it was
/// chosen; one `where` row with `--json`.
///
/// # Errors
/// I/O (4) when stdout cannot be written.
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &WhereArgs) -> Result<i32, CliError> {
    if let Some(shared) = ctx.shared.clone() {
        return where_shared(ctx, &shared, args);
    }
    let root = &ctx.root;
    let exists = root.path.is_dir();
    if args.json {
        write_row(ctx.out, &where_row(root, None))?;
    } else {
        writeln!(ctx.out, "{}", root.path.display())?;
        writeln!(ctx.out, "  chosen: {}", root.source)?;
        let order: Vec<&str> = crate::root::PRECEDENCE
            .iter()
            .map(|(_, how)| *how)
            .collect();
        writeln!(ctx.out, "  precedence: {}", order.join(" > "))?;
        if !exists {
            writeln!(ctx.out, "  (the directory does not exist yet)")?;
        }
    }
    Ok(EXIT_OK)
}

/// `where --json`'s row for the local root `root`, with the shared store when one is named
/// (`store`; the local and the shared `where` write the same row).
fn where_row(root: &crate::root::Root, store: Option<crate::json_rows::SharedStoreRow>) -> Row {
    Row::Where(WhereRow {
        root: root.path.to_string_lossy().into_owned(),
        source: root.source.key(),
        exists: root.path.is_dir(),
        precedence: crate::root::RootSource::ORDER
            .iter()
            .map(crate::root::RootSource::key)
            .collect(),
        store,
    })
}

/// `sessions where` naming the shared store (password redacted) and the local root that
/// `sync` would read.
fn where_shared(ctx: &mut Ctx<'_>, shared: &Shared, args: &WhereArgs) -> Result<i32, CliError> {
    use crate::json_rows::{SharedStoreRow, SharedStoreSource};
    let root = ctx.root.clone();
    if args.json {
        let store = SharedStoreRow {
            connection: shared.config.redacted().to_owned(),
            source: match shared.source {
                crate::backend::StoreSource::Flag => SharedStoreSource::Flag,
                crate::backend::StoreSource::EnvVar => SharedStoreSource::Env,
            },
        };
        let row = where_row(&root, Some(store));
        write_row(ctx.out, &row)?;
        return Ok(EXIT_OK);
    }
    writeln!(ctx.out, "{}", shared.config.redacted())?;
    writeln!(
        ctx.out,
        "  chosen: a shared PostgreSQL store, from {}",
        shared.source.how()
    )?;
    writeln!(
        ctx.out,
        "  precedence: --store or --root > $SESSIONS_STORE > $SESSIONS_ROOT > the layouts"
    )?;
    if !root.path.as_os_str().is_empty() {
        writeln!(
            ctx.out,
            "  local store (what `sessions sync` reads): {}",
            root.path.display()
        )?;
    }
    Ok(EXIT_OK)
}

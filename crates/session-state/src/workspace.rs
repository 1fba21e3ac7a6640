//! Workspace-root normalisation for the `list` filter (compat §2.9).

use crate::summary::js_trim;

/// Normalises a workspace root for exact comparison, like Node's `path.resolve` on POSIX:
/// trims white space, makes a relative path absolute against the current directory, removes
/// `.` segments and empty segments, resolves `..` lexically (never above `/`) and drops a
/// trailing `/`.
///
/// Symbolic links are not resolved (neither does the reference). Both the stored column and the
/// query go through this function, so `/repo/main/` matches `/repo/main`.
pub fn normalize_workspace_root(root: &str) -> String {
    let trimmed = js_trim(root);
    let joined;
    let path = if trimmed.starts_with('/') {
        trimmed
    } else {
        joined = match std::env::current_dir() {
            Ok(cwd) => format!("{}/{}", cwd.to_string_lossy(), trimmed),
            Err(_) => format!("/{trimmed}"),
        };
        &joined
    };
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    let mut out = String::with_capacity(path.len());
    for p in &parts {
        out.push('/');
        out.push_str(p);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_lexically() {
        for (input, want) in [
            ("/home/dev/acme-app", "/home/dev/acme-app"),
            ("/home/dev/acme-app/", "/home/dev/acme-app"),
            (" /home//dev/./x/../acme-app ", "/home/dev/acme-app"),
            ("/", "/"),
            ("/..", "/"),
        ] {
            assert_eq!(normalize_workspace_root(input), want, "{input}");
        }
        assert!(normalize_workspace_root("rel").starts_with('/'));
    }
}

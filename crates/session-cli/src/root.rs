//! Where the session store lives (compat notes §2.1).
//!
//! `--root DIR` wins, then the environment variable `SESSIONS_ROOT` (our own; the reference
//! does not read it). Otherwise the reference's layout: `CODELIA_LAYOUT=xdg` (any case) puts the
//! store under `${XDG_STATE_HOME:-~/.local/state}/codelia/sessions`, anything else under
//! `~/.codelia/sessions`. Unlike the reference, an empty `XDG_STATE_HOME` counts as unset (the
//! XDG rule), so the store never silently becomes the relative path `codelia/sessions`.

use std::fmt;
use std::path::PathBuf;

use crate::env::Env;
use crate::error::CliError;

/// How the root was chosen; printed by `sessions where`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RootSource {
    /// `--root DIR` on the command line.
    Flag,
    /// The [`ROOT_VAR`] environment variable (set and non-empty).
    EnvVar,
    /// `CODELIA_LAYOUT=xdg` with `XDG_STATE_HOME` set and non-empty.
    XdgStateHome,
    /// `CODELIA_LAYOUT=xdg` with `XDG_STATE_HOME` unset or empty: `~/.local/state`.
    XdgDefault,
    /// The reference's default "home" layout.
    Home,
}

impl RootSource {
    /// Every rule, in the order they are tried (the order of [`PRECEDENCE`]).
    pub(crate) const ORDER: [RootSource; 5] = [
        RootSource::Flag,
        RootSource::EnvVar,
        RootSource::XdgStateHome,
        RootSource::XdgDefault,
        RootSource::Home,
    ];

    /// Machine-readable name (`where --json`).
    pub(crate) fn key(&self) -> crate::json_rows::RootSource {
        use crate::json_rows::RootSource as Key;
        match self {
            RootSource::Flag => Key::Flag,
            RootSource::EnvVar => Key::Env,
            RootSource::XdgStateHome => Key::XdgStateHome,
            RootSource::XdgDefault => Key::XdgDefault,
            RootSource::Home => Key::Home,
        }
    }
}

impl fmt::Display for RootSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RootSource::Flag => "from --root",
            RootSource::EnvVar => "from $SESSIONS_ROOT",
            RootSource::XdgStateHome => "CODELIA_LAYOUT=xdg, from $XDG_STATE_HOME/codelia/sessions",
            RootSource::XdgDefault => {
                "CODELIA_LAYOUT=xdg, $XDG_STATE_HOME unset or empty: ~/.local/state/codelia/sessions"
            }
            RootSource::Home => "default layout: ~/.codelia/sessions (set CODELIA_LAYOUT=xdg for the XDG layout)",
        })
    }
}

/// The resolved store root and how it was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Root {
    /// The `sessions/` directory.
    pub(crate) path: PathBuf,
    /// Why this path.
    pub(crate) source: RootSource,
}

/// The environment variable naming the store root when `--root` is not given.
pub(crate) const ROOT_VAR: &str = "SESSIONS_ROOT";

/// The ways the root is chosen, first match wins: the `--json` key of each ([`RootSource::key`])
/// and how `sessions where` names it.
pub(crate) const PRECEDENCE: [(&str, &str); 5] = [
    ("flag", "--root"),
    ("env", "$SESSIONS_ROOT"),
    ("xdg_state_home", "CODELIA_LAYOUT=xdg with $XDG_STATE_HOME"),
    ("xdg_default", "CODELIA_LAYOUT=xdg: ~/.local/state"),
    ("home", "~/.codelia/sessions"),
];

/// Resolves the store root from the `--root` flag and the environment, in this order:
/// `--root DIR`; `$SESSIONS_ROOT` (an empty value counts as unset); `CODELIA_LAYOUT=xdg`
/// with `$XDG_STATE_HOME`; the XDG default; `~/.codelia/sessions`.
///
/// # Errors
/// [`CliError::Usage`] when no flag is given and `HOME` is unset or empty (nothing to resolve
/// `~` against).
pub(crate) fn resolve(flag: Option<PathBuf>, env: &Env) -> Result<Root, CliError> {
    if let Some(path) = flag {
        return Ok(Root {
            path,
            source: RootSource::Flag,
        });
    }
    if let Some(path) = env.get(ROOT_VAR) {
        return Ok(Root {
            path: PathBuf::from(path),
            source: RootSource::EnvVar,
        });
    }
    let home = || {
        env.get("HOME").map(PathBuf::from).ok_or_else(|| {
            CliError::Usage("HOME is not set; pass --root DIR to name the session store".into())
        })
    };
    let xdg = env
        .get("CODELIA_LAYOUT")
        .is_some_and(|v| v.eq_ignore_ascii_case("xdg"));
    if xdg {
        if let Some(state) = env.get("XDG_STATE_HOME") {
            return Ok(Root {
                path: PathBuf::from(state).join("codelia").join("sessions"),
                source: RootSource::XdgStateHome,
            });
        }
        return Ok(Root {
            path: home()?.join(".local/state/codelia/sessions"),
            source: RootSource::XdgDefault,
        });
    }
    Ok(Root {
        path: home()?.join(".codelia/sessions"),
        source: RootSource::Home,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        Env::from_pairs(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn flag_wins_over_everything() {
        let e = env(&[
            ("HOME", "/h"),
            ("CODELIA_LAYOUT", "xdg"),
            ("XDG_STATE_HOME", "/s"),
        ]);
        let r = resolve(Some("/x".into()), &e).unwrap();
        assert_eq!(r.path, PathBuf::from("/x"));
        assert_eq!(r.source, RootSource::Flag);
    }

    #[test]
    fn sessions_root_comes_after_the_flag_and_before_the_layouts() {
        let e = env(&[
            ("HOME", "/h"),
            ("CODELIA_LAYOUT", "xdg"),
            ("XDG_STATE_HOME", "/s"),
            ("SESSIONS_ROOT", "/env/store"),
        ]);
        let r = resolve(None, &e).unwrap();
        assert_eq!(r.path, PathBuf::from("/env/store"));
        assert_eq!(r.source, RootSource::EnvVar);
        assert_eq!(serde_json::to_string(&r.source.key()).unwrap(), "\"env\"");
        let r = resolve(Some("/x".into()), &e).unwrap();
        assert_eq!(r.path, PathBuf::from("/x"));
        assert_eq!(r.source, RootSource::Flag);
        // Without HOME the variable alone is enough; an empty one counts as unset.
        let r = resolve(None, &env(&[("SESSIONS_ROOT", "/only")])).unwrap();
        assert_eq!(r.path, PathBuf::from("/only"));
        let r = resolve(None, &env(&[("HOME", "/h"), ("SESSIONS_ROOT", "")])).unwrap();
        assert_eq!(r.source, RootSource::Home);
    }

    #[test]
    fn home_layout_by_default_and_for_other_layout_values() {
        for e in [
            env(&[("HOME", "/h")]),
            env(&[("HOME", "/h"), ("CODELIA_LAYOUT", "home")]),
        ] {
            let r = resolve(None, &e).unwrap();
            assert_eq!(r.path, PathBuf::from("/h/.codelia/sessions"));
            assert_eq!(r.source, RootSource::Home);
        }
    }

    #[test]
    fn xdg_is_case_insensitive_and_empty_state_home_is_unset() {
        let r = resolve(
            None,
            &env(&[
                ("HOME", "/h"),
                ("CODELIA_LAYOUT", "XdG"),
                ("XDG_STATE_HOME", "/s"),
            ]),
        )
        .unwrap();
        assert_eq!(r.path, PathBuf::from("/s/codelia/sessions"));
        assert_eq!(r.source, RootSource::XdgStateHome);
        let r = resolve(
            None,
            &env(&[
                ("HOME", "/h"),
                ("CODELIA_LAYOUT", "xdg"),
                ("XDG_STATE_HOME", ""),
            ]),
        )
        .unwrap();
        assert_eq!(r.path, PathBuf::from("/h/.local/state/codelia/sessions"));
        assert_eq!(r.source, RootSource::XdgDefault);
    }

    #[test]
    fn missing_home_is_a_usage_error() {
        let err = resolve(None, &env(&[])).unwrap_err();
        assert_eq!(err.exit_code(), 2);
    }
}

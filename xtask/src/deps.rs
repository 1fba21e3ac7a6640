//! The layer rules of `docs/architecture.md`, checked over `cargo metadata`.
//!
//! Each workspace crate may depend (normal or build dependency) only on the workspace crates
//! below it (session-storage sits beside session-replay: above session-state, below
//! session-cli; session-pg sits above session-storage, which it uses without its local
//! backend, and session-replay, which it uses without `io` for search extraction, and below
//! session-cli); only session-state links rusqlite, and nothing of it
//! reaches session-pg, not even through features; only session-cli uses the terminal crates;
//! session-schema keeps its required dependencies to serde, serde_json, uuid, time and
//! thiserror; xtask uses only serde_json. Dev-dependencies are free.

use std::collections::BTreeMap;

/// Allowed normal/build dependencies on workspace members, per member.
const LAYERS: &[(&str, &[&str])] = &[
    ("session-schema", &[]),
    ("session-jsonl", &["session-schema"]),
    ("session-state", &["session-schema", "session-jsonl"]),
    (
        "session-replay",
        &["session-schema", "session-jsonl", "session-state"],
    ),
    (
        "session-storage",
        &["session-schema", "session-jsonl", "session-state"],
    ),
    (
        "session-pg",
        &[
            "session-schema",
            "session-jsonl",
            "session-replay",
            "session-storage",
        ],
    ),
    (
        "session-cli",
        &[
            "session-schema",
            "session-jsonl",
            "session-state",
            "session-replay",
            "session-storage",
            "session-pg",
        ],
    ),
    ("xtask", &[]),
    ("session-store-tests", &[]),
];

/// External crates reserved to one member.
const RESERVED: &[(&str, &str)] = &[
    ("rusqlite", "session-state"),
    ("libsqlite3-sys", "session-state"),
    ("clap", "session-cli"),
    ("clap_complete", "session-cli"),
    ("clap_mangen", "session-cli"),
    ("indicatif", "session-cli"),
    ("anstyle", "session-cli"),
    ("unicode-width", "session-cli"),
    ("terminal_size", "session-cli"),
];

/// The complete allowed list of required (non-optional) dependencies for some members.
const CLOSED: &[(&str, &[&str])] = &[
    (
        "session-schema",
        &["serde", "serde_json", "uuid", "time", "thiserror"],
    ),
    ("xtask", &["serde_json"]),
];

/// `(member, dependency, kind, optional)` for every declared dependency of every member.
#[cfg(test)]
fn declared_edges() -> Vec<(String, String, String, bool)> {
    let out = crate::cargo()
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    edges_from_metadata(&String::from_utf8_lossy(&out.stdout))
}

fn edges_from_metadata(json: &str) -> Vec<(String, String, String, bool)> {
    let meta: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    let mut edges = Vec::new();
    for pkg in meta["packages"].as_array().into_iter().flatten() {
        let name = pkg["name"].as_str().unwrap_or_default().to_owned();
        for dep in pkg["dependencies"].as_array().into_iter().flatten() {
            edges.push((
                name.clone(),
                dep["name"].as_str().unwrap_or_default().to_owned(),
                dep["kind"].as_str().unwrap_or("normal").to_owned(),
                dep["optional"].as_bool().unwrap_or(false),
            ));
        }
    }
    edges
}

/// Every rule violated by `edges`, as readable lines.
fn violations(edges: &[(String, String, String, bool)]) -> Vec<String> {
    let layers: BTreeMap<&str, &[&str]> = LAYERS.iter().copied().collect();
    let mut bad = Vec::new();
    for (member, dep, kind, optional) in edges {
        if kind == "dev" {
            continue;
        }
        if let Some(allowed) = layers.get(member.as_str())
            && layers.contains_key(dep.as_str())
            && !allowed.contains(&dep.as_str())
        {
            bad.push(format!("{member} -> {dep}: breaks the layer order"));
        }
        for (krate, owner) in RESERVED {
            if dep == krate && member != owner {
                bad.push(format!("{member} -> {dep}: only {owner} may use {dep}"));
            }
        }
        for (closed, allowed) in CLOSED {
            if member == closed && !optional && !allowed.contains(&dep.as_str()) {
                bad.push(format!(
                    "{member} -> {dep}: not in its allowed dependency list"
                ));
            }
        }
    }
    bad
}

#[test]
fn workspace_follows_the_layer_rules() {
    let edges = declared_edges();
    let members: Vec<&str> = LAYERS.iter().map(|(m, _)| *m).collect();
    for m in &members {
        assert!(
            edges.iter().any(|(name, ..)| name == m) || *m == "xtask",
            "member {m} missing from cargo metadata"
        );
    }
    let bad = violations(&edges);
    assert!(
        bad.is_empty(),
        "dependency rules broken:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_rules_catch_bad_edges() {
    let edge = |a: &str, b: &str, kind: &str| (a.to_owned(), b.to_owned(), kind.to_owned(), false);
    let bad = violations(&[
        edge("session-schema", "session-jsonl", "normal"),
        edge("session-replay", "session-cli", "normal"),
        edge("session-jsonl", "rusqlite", "normal"),
        edge("session-state", "clap", "normal"),
        edge("session-schema", "memchr", "normal"),
        edge("session-jsonl", "session-state", "dev"),
        edge("session-state", "rusqlite", "normal"),
        edge("session-storage", "session-cli", "normal"),
        edge("session-storage", "rusqlite", "normal"),
        edge("session-storage", "session-state", "normal"),
        edge("session-cli", "session-storage", "normal"),
        edge("session-pg", "session-state", "normal"),
        edge("session-pg", "session-storage", "normal"),
        edge("session-pg", "session-state", "dev"),
    ]);
    // schema -> jsonl breaks both the layer order and the closed dependency list.
    assert_eq!(bad.len(), 9, "{bad:#?}");
    assert!(bad.contains(&"session-pg -> session-state: breaks the layer order".to_owned()));
    assert!(bad.contains(&"session-storage -> session-cli: breaks the layer order".to_owned()));
    assert!(
        bad.contains(
            &"session-storage -> rusqlite: only session-state may use rusqlite".to_owned()
        )
    );
}

/// Package names in `cargo tree -p <krate> -e normal` with the given feature arguments.
#[cfg(test)]
fn normal_tree(krate: &str, features: &[&str]) -> std::collections::BTreeSet<String> {
    tree(krate, "normal", features)
}

/// Package names in `cargo tree -p <krate> -e <edges>` with the given feature arguments.
#[cfg(test)]
fn tree(krate: &str, edges: &str, features: &[&str]) -> std::collections::BTreeSet<String> {
    let out = crate::cargo()
        .args(["tree", "--offline", "-e", edges, "--prefix", "none"])
        .args(["--format", "{p}", "-p", krate])
        .args(features)
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The feature flags of the crate READMEs' "Features" sections: without its default features a
/// crate compiles none of what they bring in (and with them it does, so the check bites).
#[test]
fn default_features_are_what_brings_in_io_sqlite_and_zstd() {
    let cases: &[(&str, &[&str])] = &[
        (
            "session-replay",
            &[
                "session-jsonl",
                "session-state",
                "libsqlite3-sys",
                "zstd-sys",
            ],
        ),
        ("session-jsonl", &["zstd", "zstd-sys"]),
    ];
    let mut bad = Vec::new();
    for (krate, gated) in cases {
        let full = normal_tree(krate, &[]);
        let bare = normal_tree(krate, &["--no-default-features"]);
        for dep in *gated {
            if !full.contains(*dep) {
                bad.push(format!(
                    "{krate}: {dep} is not in the default build any more"
                ));
            }
            if bare.contains(*dep) {
                bad.push(format!("{krate} --no-default-features still builds {dep}"));
            }
        }
    }
    // What a reader of `cargo tree -p session-replay --no-default-features` sees includes the
    // dev-dependencies: a test that reads SQLite belongs with the cross-crate tests.
    let shown = tree("session-replay", "all", &["--no-default-features"]);
    for dep in ["libsqlite3-sys", "zstd-sys"] {
        if shown.contains(dep) {
            bad.push(format!(
                "cargo tree -p session-replay --no-default-features shows {dep} (a dev-dependency?)"
            ));
        }
    }
    let core = normal_tree("session-replay", &["--no-default-features"]);
    let ours: Vec<&String> = core.iter().filter(|p| p.starts_with("session-")).collect();
    if ours != ["session-replay", "session-schema"] {
        bad.push(format!(
            "session-replay's core depends on {ours:?}, not only session-schema"
        ));
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// session-pg uses session-storage without its `local` feature: neither session-state nor
/// SQLite is compiled into it.
#[test]
fn session_pg_links_no_sqlite() {
    let packages = normal_tree("session-pg", &[]);
    assert!(packages.contains("session-storage"), "{packages:?}");
    for banned in ["rusqlite", "libsqlite3-sys", "session-state"] {
        assert!(
            !packages.contains(banned),
            "session-pg is built with {banned}"
        );
    }
}

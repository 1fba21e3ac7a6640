//! Checks that hold the published face of the workspace, run by `cargo test`: which crates are
//! publishable and with what registry metadata, what their packages contain, and the minimum
//! supported Rust version (MSRV).
//!
//! The MSRV is one number, `rust-version` of every member, equal to `msrv` in `clippy.toml`.
//! Clippy's `incompatible_msrv` lint (denied by the `-D warnings` of CI's clippy step) rejects
//! standard-library items stabilised after it; [`dependencies_need_no_newer_toolchain`] rejects
//! a locked dependency whose own `rust-version` is newer. Language features are not linted: the
//! README lists the ones that set the floor.

use std::path::PathBuf;

use serde_json::Value;

/// The crates published to the registry, in dependency order.
pub(crate) const PUBLISHABLE: &[&str] = &[
    "session-schema",
    "session-jsonl",
    "session-state",
    "session-replay",
    "session-storage",
    "session-pg",
    "session-cli",
];

/// No single file of a package may be larger (bytes): recorded data belongs in the workspace.
const MAX_PACKAGED_FILE: u64 = 256 * 1024;
/// Nor the whole package (bytes, uncompressed): a bound that catches data slipping in as many
/// small files. session-state's own source and tests are about 1 MiB (the run index, search,
/// running totals), so the bound leaves room for source and none for a recorded store.
const MAX_PACKAGE: u64 = 2 * 1024 * 1024;

/// Paths out of a crate into the rest of the repository.
const WORKSPACE_PATHS: &[&str] = &[
    "join(\"../..",
    "\"../../testdata",
    "\"../../sample",
    "\"../../README",
    "\"../../docs",
];

/// `(major, minor)` of a version such as `1.89` or `1.89.0`.
fn major_minor(version: &str) -> Option<(u64, u64)> {
    let mut parts = version.trim().split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().unwrap_or("0").parse().ok()?;
    Some((major, minor))
}

/// The `msrv = "…"` value of a `clippy.toml` text.
fn clippy_msrv(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "msrv").then(|| value.trim().trim_matches('"').to_owned())
    })
}

/// Files of a package listing (`cargo package --list`) that are not plain packaged sources:
/// generated entries cargo adds itself.
fn is_generated(path: &str) -> bool {
    [".cargo_vcs_info.json", "Cargo.toml", "Cargo.lock"].contains(&path)
}

/// Problems of one package listing: `files` are `(path in package, size, text if UTF-8)`.
fn package_problems(name: &str, files: &[(String, u64, Option<String>)]) -> Vec<String> {
    let mut bad = Vec::new();
    for required in ["README.md", "LICENSE-MIT", "LICENSE-APACHE", "src/lib.rs"] {
        if !files.iter().any(|(p, ..)| p == required) {
            bad.push(format!("{name}: the package has no {required}"));
        }
    }
    let mut total = 0;
    for (path, size, text) in files {
        total += size;
        if *size > MAX_PACKAGED_FILE {
            bad.push(format!(
                "{name}: {path} is {size} bytes (over {MAX_PACKAGED_FILE}); leave it out of the package"
            ));
        }
        if path.ends_with(".rs")
            && let Some(text) = text
            && let Some(needle) = std::iter::once(&"session_test_support")
                .chain(WORKSPACE_PATHS)
                .find(|n| text.contains(**n))
        {
            bad.push(format!(
                "{name}: {path} uses `{needle}`, which a package built from the registry does not have; add it to `exclude`"
            ));
        }
    }
    if total > MAX_PACKAGE {
        bad.push(format!(
            "{name}: the package holds {total} bytes (over {MAX_PACKAGE})"
        ));
    }
    bad
}

/// Problems of one member's registry metadata (`cargo metadata` package object).
fn metadata_problems(pkg: &Value) -> Vec<String> {
    let name = pkg["name"].as_str().unwrap_or_default();
    let publishable = pkg["publish"].is_null();
    let mut bad = Vec::new();
    if publishable != PUBLISHABLE.contains(&name) {
        bad.push(format!(
            "{name}: publish is {}, expected {}",
            pkg["publish"],
            if PUBLISHABLE.contains(&name) {
                "publishable"
            } else {
                "publish = false"
            }
        ));
    }
    if !publishable {
        return bad;
    }
    let text = |key: &str| pkg[key].as_str().unwrap_or_default().to_owned();
    for key in ["description", "license", "repository", "homepage", "readme"] {
        if text(key).is_empty() {
            bad.push(format!("{name}: no {key}"));
        }
    }
    for key in ["repository", "homepage", "documentation"] {
        let url = text(key);
        if !url.starts_with("https://") || url.contains(".invalid") || url.contains("example.") {
            bad.push(format!("{name}: {key} `{url}` is not a real https address"));
        }
    }
    if text("documentation") != format!("https://docs.rs/{name}") {
        bad.push(format!(
            "{name}: documentation is not https://docs.rs/{name}"
        ));
    }
    let keywords = pkg["keywords"].as_array().map_or(0, Vec::len);
    if !(1..=5).contains(&keywords) {
        bad.push(format!(
            "{name}: {keywords} keywords (the registry takes 1 to 5)"
        ));
    }
    if pkg["categories"].as_array().is_none_or(Vec::is_empty) {
        bad.push(format!("{name}: no categories"));
    }
    if pkg["metadata"]["docs"]["rs"]["all-features"] != Value::Bool(true) {
        bad.push(format!(
            "{name}: [package.metadata.docs.rs] does not document all features"
        ));
    }
    bad
}

fn metadata(no_deps: bool) -> Value {
    let mut cmd = crate::cargo();
    cmd.args(["metadata", "--format-version", "1", "--offline"]);
    if no_deps {
        cmd.arg("--no-deps");
    } else {
        cmd.args(["--filter-platform", &host_triple()]);
    }
    let out = cmd.output().expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let out = std::process::Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .to_owned()
}

fn msrv() -> String {
    let text = std::fs::read_to_string(crate::project_root().join("clippy.toml")).unwrap();
    clippy_msrv(&text).expect("clippy.toml sets msrv")
}

#[test]
fn one_msrv_in_every_member_and_clippy() {
    let msrv = msrv();
    assert!(major_minor(&msrv).is_some(), "clippy.toml msrv `{msrv}`");
    let meta = metadata(true);
    let mut bad = Vec::new();
    for pkg in meta["packages"].as_array().unwrap() {
        let name = pkg["name"].as_str().unwrap();
        let rv = pkg["rust_version"].as_str().unwrap_or("(none)");
        if major_minor(rv) != major_minor(&msrv) {
            bad.push(format!("{name}: rust-version {rv}"));
        }
    }
    assert!(
        bad.is_empty(),
        "every member's rust-version must equal clippy.toml's msrv {msrv}:\n{}",
        bad.join("\n")
    );
    let readme = std::fs::read_to_string(crate::project_root().join("README.md")).unwrap();
    assert!(
        readme.contains(&format!("Rust {msrv} or newer")),
        "the README must state the MSRV as `Rust {msrv} or newer`"
    );
}

#[test]
fn dependencies_need_no_newer_toolchain() {
    let msrv = major_minor(&msrv()).unwrap();
    let meta = metadata(false);
    let mut bad = Vec::new();
    for pkg in meta["packages"].as_array().unwrap() {
        if let Some(rv) = pkg["rust_version"].as_str()
            && major_minor(rv).is_some_and(|v| v > msrv)
        {
            bad.push(format!(
                "{} {} needs Rust {rv}",
                pkg["name"], pkg["version"]
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "locked dependencies newer than the MSRV {}.{}:\n{}",
        msrv.0,
        msrv.1,
        bad.join("\n")
    );
}

#[test]
fn publishable_crates_carry_registry_metadata() {
    let meta = metadata(true);
    let mut bad = Vec::new();
    let mut found = Vec::new();
    for pkg in meta["packages"].as_array().unwrap() {
        found.push(pkg["name"].as_str().unwrap().to_owned());
        bad.extend(metadata_problems(pkg));
    }
    for name in PUBLISHABLE {
        assert!(found.iter().any(|f| f == name), "{name} is not a member");
    }
    assert!(bad.is_empty(), "registry metadata:\n{}", bad.join("\n"));
}

/// Held while `cargo package` runs: it reads the git status of the checkout and may refresh and
/// write `.git/index`, which two of them at once can fail at (seen on a fresh clone, whose index
/// stat data is stale, as "could not obtain index object").
static PACKAGE_GIT: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The files of crate `name`'s package, relative to the crate directory
/// (`cargo package --list`). Calls are serialised ([`PACKAGE_GIT`]).
pub(crate) fn package_files(name: &str) -> Vec<String> {
    let _git = PACKAGE_GIT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let out = crate::cargo()
        .args([
            "package",
            "--list",
            "--allow-dirty",
            "--offline",
            "-p",
            name,
        ])
        .output()
        .expect("cargo package --list runs");
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn packages_hold_only_what_builds_outside_the_workspace() {
    let mut bad = Vec::new();
    for name in PUBLISHABLE {
        let dir: PathBuf = crate::project_root().join("crates").join(name);
        let files: Vec<(String, u64, Option<String>)> = package_files(name)
            .into_iter()
            .filter(|p| !is_generated(p))
            .map(|p| {
                let path = dir.join(&p);
                let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                let text = std::fs::read_to_string(&path).ok();
                (p, size, text)
            })
            .collect();
        assert!(files.len() > 3, "{name}: {files:?}");
        bad.extend(package_problems(name, &files));
    }
    assert!(bad.is_empty(), "package contents:\n{}", bad.join("\n"));
}

/// Tests of every crate reach the repository's data only through session-test-support, so that
/// the one place that knows the layout is the crate that is never published.
#[test]
fn only_session_test_support_reaches_outside_its_crate() {
    let root = crate::project_root();
    let mut files = Vec::new();
    crate::tidy::walk(&root.join("crates"), &mut files).unwrap();
    crate::tidy::walk(&root.join("tests"), &mut files).unwrap();
    let mut bad = Vec::new();
    for p in files {
        let rel = p.strip_prefix(&root).unwrap_or(&p).display().to_string();
        if !rel.ends_with(".rs") || rel.starts_with("crates/session-test-support/") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        if let Some(needle) = WORKSPACE_PATHS.iter().find(|n| text.contains(**n)) {
            bad.push(format!("{rel}: `{needle}`"));
        }
    }
    assert!(
        bad.is_empty(),
        "paths out of the crate (use session_test_support):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_package_rules_catch_bad_packages() {
    let file = |p: &str, size: u64, text: &str| (p.to_owned(), size, Some(text.to_owned()));
    let good = [
        file("README.md", 10, "# x"),
        file("LICENSE-MIT", 10, ""),
        file("LICENSE-APACHE", 10, ""),
        file("src/lib.rs", 10, "//! x"),
    ];
    assert_eq!(package_problems("c", &good), Vec::<String>::new());
    let mut bad = good.to_vec();
    bad.retain(|(p, ..)| p != "LICENSE-MIT");
    bad.push(file(
        "tests/a.rs",
        10,
        "use session_test_support::copy_tree;",
    ));
    bad.push(file(
        "tests/b.rs",
        10,
        "let p = dir.join(\"../../sample\");",
    ));
    bad.push(file("test_data/big.jsonl", MAX_PACKAGED_FILE + 1, ""));
    let problems = package_problems("c", &bad);
    assert_eq!(problems.len(), 4, "{problems:#?}");
    assert!(problems[0].contains("no LICENSE-MIT"), "{problems:#?}");
}

#[test]
fn the_metadata_rules_catch_bad_manifests() {
    let good = serde_json::json!({
        "name": "session-jsonl", "publish": null, "description": "d", "license": "MIT",
        "repository": "https://github.com/o/r", "homepage": "https://github.com/o/r",
        "documentation": "https://docs.rs/session-jsonl", "readme": "README.md",
        "keywords": ["a"], "categories": ["filesystem"],
        "metadata": {"docs": {"rs": {"all-features": true}}},
    });
    assert_eq!(metadata_problems(&good), Vec::<String>::new());
    let mut placeholder = good.clone();
    placeholder["repository"] = "https://example.invalid/x".into();
    placeholder["keywords"] = serde_json::json!(["a", "b", "c", "d", "e", "f"]);
    assert_eq!(metadata_problems(&placeholder).len(), 2);
    let mut unpublished = good.clone();
    unpublished["publish"] = serde_json::json!([]);
    assert_eq!(metadata_problems(&unpublished).len(), 1);
    let mut test_support = good;
    test_support["name"] = "session-test-support".into();
    let problems = metadata_problems(&test_support);
    assert!(
        problems[0].contains("expected publish = false"),
        "{problems:#?}"
    );
    test_support["publish"] = serde_json::json!([]);
    assert_eq!(metadata_problems(&test_support), Vec::<String>::new());
}

#[test]
fn msrv_parsing() {
    assert_eq!(major_minor("1.89"), Some((1, 89)));
    assert_eq!(major_minor("1.89.0"), Some((1, 89)));
    assert!(major_minor("1.100") > major_minor("1.89"));
    assert_eq!(major_minor("x"), None);
    assert_eq!(
        clippy_msrv("# msrv = \"1.0\" is a comment\nmsrv = \"1.89\"\n").as_deref(),
        Some("1.89")
    );
}

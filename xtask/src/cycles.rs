//! No import cycles between the modules of a crate, checked over the source by `cargo test`.
//!
//! Granularity: one node per source file of a crate's `src/` tree (`store.rs`,
//! `commands/state.rs`, `local/mod.rs`); inline modules are folded into the file that holds
//! them. Files are the unit a reader opens and the unit the layering of `docs/architecture.md`
//! talks about, so a cycle between two files is a cycle a reader has to untangle, even when
//! both sit under one directory module.
//!
//! A file A depends on a file B when A's code (outside `#[cfg(test)]` items, comments and
//! string literals) names a path into B: `crate::b::…`, `super::b::…`, `self::b::…`, a bare
//! `b::…` for a child module `b`, in a `use` tree or in an expression or type. A path that stops
//! at a name imported by a module (`pub use inner::Name`, or a plain `use`, which the module's
//! descendants see too) is followed to the file that defines it. The crate root (`lib.rs`, `main.rs`) is the crate's facade: its re-exports make
//! no edges, its other code does.
//!
//! Every strongly connected component of more than one file is reported with the edges inside
//! it and the first line that makes each edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One token of code: an identifier, `::`, or a single punctuation character, with its line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    text: String,
    line: usize,
}

fn tokens(code: &str) -> Vec<Token> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while chars
                .get(i)
                .is_some_and(|c| c.is_alphanumeric() || *c == '_')
            {
                i += 1;
            }
            out.push(Token {
                text: chars.get(start..i).unwrap_or_default().iter().collect(),
                line,
            });
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push(Token {
                text: "::".to_owned(),
                line,
            });
            i += 2;
        } else {
            out.push(Token {
                text: c.to_string(),
                line,
            });
            i += 1;
        }
    }
    out
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// One leaf of a `use` tree: its path (`self` leaves kept as written), its line.
#[derive(Debug)]
struct UseLeaf {
    path: Vec<String>,
    alias: Option<String>,
    line: usize,
}

/// Parses the use tree starting at `toks[i]` under `prefix`; returns the index after it.
fn use_tree(toks: &[Token], mut i: usize, prefix: Vec<String>, out: &mut Vec<UseLeaf>) -> usize {
    let mut path = prefix;
    while let Some(t) = toks.get(i) {
        match t.text.as_str() {
            "{" => {
                i += 1;
                while let Some(t) = toks.get(i) {
                    match t.text.as_str() {
                        "}" => return i + 1,
                        "," => i += 1,
                        _ => {
                            let next = use_tree(toks, i, path.clone(), out);
                            i = next.max(i + 1);
                        }
                    }
                }
                return i;
            }
            "*" => {
                path.push("*".to_owned());
                out.push(UseLeaf {
                    path,
                    alias: None,
                    line: t.line,
                });
                return i + 1;
            }
            "::" => i += 1,
            s if is_ident(s) => {
                path.push(s.to_owned());
                if toks.get(i + 1).is_some_and(|n| n.text == "::") {
                    i += 2;
                    continue;
                }
                let mut alias = None;
                let mut end = i + 1;
                if toks.get(i + 1).is_some_and(|n| n.text == "as") {
                    alias = toks.get(i + 2).map(|n| n.text.clone());
                    end = i + 3;
                }
                out.push(UseLeaf {
                    path,
                    alias,
                    line: t.line,
                });
                return end;
            }
            _ => return i,
        }
    }
    i
}

/// A file of a crate: its module path (`["commands", "state"]`, `[]` for the root), its name
/// relative to `src/`, its code with comments, literals and `#[cfg(test)]` items blanked (line
/// breaks kept), and its source as written.
#[derive(Debug)]
pub(crate) struct SourceFile {
    module: Vec<String>,
    name: String,
    text: String,
    source: String,
}

impl SourceFile {
    /// `name` is the path below `src/` (`lib.rs`, `store.rs`, `commands/mod.rs`).
    pub(crate) fn new(name: &str, source: &str) -> Self {
        let stem = name.strip_suffix(".rs").unwrap_or(name);
        let mut module: Vec<String> = stem.split('/').map(str::to_owned).collect();
        if module.last().is_some_and(|l| l == "mod") {
            module.pop();
        }
        if module.len() == 1 && module.first().is_some_and(|m| m == "lib" || m == "main") {
            module.clear();
        }
        Self {
            module,
            name: name.to_owned(),
            text: crate::tidy::without_test_items(&crate::tidy::code_only(source)),
            source: source.to_owned(),
        }
    }
}

/// An edge between two files with the first line that makes it (`file:line: source text`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Edge {
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) at: String,
}

/// A strongly connected component of more than one file, with the edges inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cycle {
    /// File names, sorted.
    pub(crate) files: Vec<String>,
    pub(crate) edges: Vec<Edge>,
}

impl std::fmt::Display for Cycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "cycle between {}:", self.files.join(", "))?;
        for e in &self.edges {
            writeln!(f, "    {} -> {}    ({})", e.from, e.to, e.at)?;
        }
        Ok(())
    }
}

/// A path found in a file: the module it is written in (file module plus enclosing inline
/// modules), its segments, its line, and whether it is a `pub use` re-export.
struct Mention {
    scope: Vec<String>,
    path: Vec<String>,
    alias: Option<String>,
    line: usize,
    /// Written in a `use` item.
    is_use: bool,
    /// Written in a `pub use` item.
    reexport: bool,
}

/// Module path of the inline modules enclosing each token (`mod name { … }`).
fn inline_scopes(toks: &[Token]) -> Vec<Vec<String>> {
    let mut out = Vec::with_capacity(toks.len());
    let mut stack: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut pending: Option<String> = None;
    for (k, t) in toks.iter().enumerate() {
        out.push(stack.iter().map(|(n, _)| n.clone()).collect());
        match t.text.as_str() {
            "mod" if k == 0 || toks.get(k - 1).is_none_or(|p| p.text != "::") => {
                pending = toks
                    .get(k + 1)
                    .filter(|n| is_ident(&n.text))
                    .map(|n| n.text.clone());
            }
            "{" => {
                depth += 1;
                if let Some(name) = pending.take() {
                    stack.push((name, depth));
                }
            }
            "}" => {
                if stack.last().is_some_and(|(_, d)| *d == depth) {
                    stack.pop();
                }
                depth = depth.saturating_sub(1);
            }
            ";" => pending = None,
            _ => {}
        }
    }
    out
}

fn mentions(file: &SourceFile, children: &BTreeSet<String>) -> Vec<Mention> {
    let toks = tokens(&file.text);
    let scopes = inline_scopes(&toks);
    let scope_at = |k: usize| {
        let mut s = file.module.clone();
        s.extend(scopes.get(k).cloned().unwrap_or_default());
        s
    };
    let mut out = Vec::new();
    let mut in_use = vec![false; toks.len()];
    for (k, t) in toks.iter().enumerate() {
        let prev = k
            .checked_sub(1)
            .and_then(|p| toks.get(p))
            .map(|p| p.text.as_str());
        if t.text != "use" || prev == Some("::") || toks.get(k + 1).is_some_and(|n| n.text == "<") {
            continue;
        }
        let reexport = toks
            .get(k.saturating_sub(5)..k)
            .unwrap_or_default()
            .iter()
            .rev()
            .take_while(|p| !matches!(p.text.as_str(), ";" | "{" | "}" | "]"))
            .any(|p| p.text == "pub");
        let mut leaves = Vec::new();
        let end = use_tree(&toks, k + 1, Vec::new(), &mut leaves);
        for flag in in_use.get_mut(k..end).into_iter().flatten() {
            *flag = true;
        }
        for leaf in leaves {
            out.push(Mention {
                scope: scope_at(k),
                path: leaf.path,
                alias: leaf.alias,
                line: leaf.line,
                is_use: true,
                reexport,
            });
        }
    }
    for (k, t) in toks.iter().enumerate() {
        if in_use.get(k).copied().unwrap_or(true) {
            continue;
        }
        let prev = k
            .checked_sub(1)
            .and_then(|p| toks.get(p))
            .map(|p| p.text.as_str());
        let starts = matches!(t.text.as_str(), "crate" | "super" | "self")
            || (children.contains(&t.text) && scopes.get(k).is_some_and(Vec::is_empty));
        if !starts
            || matches!(prev, Some("::" | "$" | "." | "mod"))
            || toks.get(k + 1).is_none_or(|n| n.text != "::")
        {
            continue;
        }
        let mut path = vec![t.text.clone()];
        let mut j = k + 1;
        while toks.get(j).is_some_and(|n| n.text == "::") {
            match toks.get(j + 1).filter(|n| is_ident(&n.text)) {
                Some(n) => path.push(n.text.clone()),
                None => break,
            }
            j += 2;
        }
        out.push(Mention {
            scope: scope_at(k),
            path,
            alias: None,
            line: t.line,
            is_use: false,
            reexport: false,
        });
    }
    out
}

/// The absolute module path a mention names, or `None` for a path into another crate or a
/// local item.
fn absolute(m: &Mention, children: &BTreeSet<String>) -> Option<Vec<String>> {
    let mut segs = m.path.iter().peekable();
    let mut base = match segs.peek().map(|s| s.as_str()) {
        Some("crate") => {
            segs.next();
            Vec::new()
        }
        Some("self") => {
            segs.next();
            m.scope.clone()
        }
        Some("super") => {
            let mut b = m.scope.clone();
            while segs.peek().is_some_and(|s| *s == "super") {
                segs.next();
                b.pop()?;
            }
            b
        }
        Some(first) if children.contains(first) => m.scope.clone(),
        _ => return None,
    };
    base.extend(segs.filter(|s| *s != "self" && *s != "*").cloned());
    Some(base)
}

/// Finds every import cycle between the files of one crate.
pub(crate) fn find_cycles(files: &[SourceFile]) -> Vec<Cycle> {
    let modules: BTreeMap<Vec<String>, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.module.clone(), i))
        .collect();
    let children_of = |module: &[String]| -> BTreeSet<String> {
        modules
            .keys()
            .filter(|k| k.len() == module.len() + 1 && k.starts_with(module))
            .filter_map(|k| k.last().cloned())
            .collect()
    };
    // Per file: its mentions, resolved to absolute paths.
    let mut resolved: Vec<Vec<(Vec<String>, Mention)>> = Vec::new();
    // Re-exports: (module, name) -> absolute path of what it names.
    let mut reexports: BTreeMap<(Vec<String>, String), Vec<String>> = BTreeMap::new();
    for f in files {
        let children = children_of(&f.module);
        let mut list = Vec::new();
        for m in mentions(f, &children) {
            let Some(abs) = absolute(&m, &children) else {
                continue;
            };
            // Any `use` at a module's top level names an item for the module's descendants
            // too (`crate::Result` through the root's `use support::Result`).
            if m.is_use && m.scope == f.module {
                let name = m.alias.clone().or_else(|| m.path.last().cloned());
                if let Some(name) = name.filter(|n| n != "*" && n != "self") {
                    reexports.insert((f.module.clone(), name), abs.clone());
                }
            }
            list.push((abs, m));
        }
        resolved.push(list);
    }
    let file_of = |abs: &[String]| -> Option<usize> {
        let mut path = abs.to_vec();
        for _ in 0..16 {
            let prefix = (0..=path.len())
                .rev()
                .find(|n| modules.contains_key(path.get(..*n).unwrap_or_default()))?;
            let module = path.get(..prefix).unwrap_or_default().to_vec();
            match path
                .get(prefix)
                .and_then(|name| reexports.get(&(module.clone(), name.clone())))
            {
                Some(target) if target.len() > prefix || !target.starts_with(&module) => {
                    let mut next = target.clone();
                    next.extend(path.get(prefix + 1..).unwrap_or_default().iter().cloned());
                    path = next;
                }
                _ => return modules.get(&module).copied(),
            }
        }
        None
    };
    // Edges with their first line.
    let mut edges: BTreeMap<(usize, usize), (usize, String)> = BTreeMap::new();
    for (i, list) in resolved.iter().enumerate() {
        let Some(f) = files.get(i) else { continue };
        for (abs, m) in list {
            if f.module.is_empty() && m.reexport {
                continue;
            }
            let Some(to) = file_of(abs) else { continue };
            if to == i {
                continue;
            }
            let entry = edges.entry((i, to)).or_insert((usize::MAX, String::new()));
            if m.line < entry.0 {
                *entry = (m.line, format!("{}:{}", f.name, m.line));
            }
        }
    }
    let mut graph: Vec<Vec<usize>> = vec![Vec::new(); files.len()];
    for &(from, to) in edges.keys() {
        if let Some(out) = graph.get_mut(from) {
            out.push(to);
        }
    }
    let mut cycles = Vec::new();
    for scc in strongly_connected(&graph) {
        if scc.len() < 2 {
            continue;
        }
        let set: BTreeSet<usize> = scc.iter().copied().collect();
        let name = |i: usize| files.get(i).map(|f| f.name.clone()).unwrap_or_default();
        let mut names: Vec<String> = scc.iter().map(|&i| name(i)).collect();
        names.sort();
        let mut inside: Vec<Edge> = edges
            .iter()
            .filter(|((a, b), _)| set.contains(a) && set.contains(b))
            .map(|(&(a, b), (line, at))| {
                let source = files
                    .get(a)
                    .and_then(|f| f.source.lines().nth(line.saturating_sub(1)))
                    .map(str::trim)
                    .unwrap_or_default();
                Edge {
                    from: name(a),
                    to: name(b),
                    at: format!("{at}: {source}"),
                }
            })
            .collect();
        inside.sort();
        cycles.push(Cycle {
            files: names,
            edges: inside,
        });
    }
    cycles.sort_by(|a, b| a.files.cmp(&b.files));
    cycles
}

/// Tarjan's algorithm: the strongly connected components of `graph`.
fn strongly_connected(graph: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'g> {
        graph: &'g [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &s.graph[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                scc.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(scc);
        }
    }
    let n = graph.len();
    let mut s = State {
        graph,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The files of the crate whose sources are below `src`, code only (comments, literals and
/// `#[cfg(test)]` items blanked).
fn crate_files(src: &Path) -> Vec<SourceFile> {
    let mut paths = Vec::new();
    crate::tidy::walk(src, &mut paths).unwrap();
    paths.retain(|p| p.extension().is_some_and(|e| e == "rs"));
    paths.sort();
    paths
        .iter()
        .map(|p| {
            let name = p
                .strip_prefix(src)
                .unwrap()
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            SourceFile::new(&name, &std::fs::read_to_string(p).unwrap())
        })
        .collect()
}

/// Cycles that predate this check, per crate (its `src/` below the project root) as the set of
/// files of the strongly connected component. A cycle passes only when its files are a subset
/// of one entry: a cycle that shrinks (or splits) passes, a new cycle or a file joining an old
/// one fails. Remove an entry once its cycle is broken; add none. (session-replay's
/// transcript/tool-output, session-storage's `local/` and `conformance/`, session-jsonl's
/// layout/duplicates/reader/resume, session-cli's, session-schema's, session-state's and
/// xtask's own cycles are broken: the list is empty.)
const KNOWN_CYCLES: &[(&str, &[&str])] = &[];

/// Whether `cycle`, found in the crate below `src` (relative to the project root), lies within
/// one of [`KNOWN_CYCLES`].
fn known(src: &str, cycle: &Cycle) -> bool {
    known_in(KNOWN_CYCLES, src, cycle)
}

/// [`known`] against the allow-list `list`.
fn known_in(list: &[(&str, &[&str])], src: &str, cycle: &Cycle) -> bool {
    list.iter().any(|(krate, files)| {
        *krate == src && cycle.files.iter().all(|f| files.contains(&f.as_str()))
    })
}

#[test]
fn no_import_cycles_between_the_modules_of_a_crate() {
    let root = crate::project_root();
    let mut roots = Vec::new();
    for base in [root.join("crates"), root.clone()] {
        for entry in std::fs::read_dir(&base).unwrap() {
            let src = entry.unwrap().path().join("src");
            if src.is_dir() && src.parent().unwrap().join("Cargo.toml").is_file() {
                roots.push(src);
            }
        }
    }
    roots.sort();
    assert!(
        roots.len() >= 8,
        "found only {} crates: {roots:?}",
        roots.len()
    );
    let mut report = String::new();
    let mut known_found = 0;
    let mut files_seen = 0;
    for src in &roots {
        let rel = src
            .strip_prefix(&root)
            .unwrap_or(src)
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        let files = crate_files(src);
        files_seen += files.len();
        for cycle in find_cycles(&files) {
            if known(&rel, &cycle) {
                known_found += 1;
            } else {
                report.push_str(&format!("in {rel}: {cycle}"));
            }
        }
    }
    assert!(
        report.is_empty(),
        "import cycles between the modules of a crate (move the shared items down into the \
         lower module or into a new small one; do not hide the imports):\n{report}"
    );
    // The check sees the crates: their files were read, and the known cycles are still there
    // to be found.
    assert!(
        files_seen >= 100,
        "read only {files_seen} source files: is the walk reading the crates?"
    );
    assert!(
        known_found > 0 || KNOWN_CYCLES.is_empty(),
        "no known cycle found: is the walk reading the crates?"
    );
}

#[test]
fn a_known_cycle_passes_only_while_it_stays_within_its_files() {
    let cycle = |files: &[&str]| Cycle {
        files: files.iter().map(|f| (*f).to_owned()).collect(),
        edges: Vec::new(),
    };
    let schema = "crates/session-schema/src";
    let whole = [
        "event.rs",
        "json_schema.rs",
        "line.rs",
        "message.rs",
        "raw.rs",
        "record.rs",
        "state.rs",
        "tool.rs",
    ];
    let list: &[(&str, &[&str])] = &[(schema, &whole)];
    assert!(known_in(list, schema, &cycle(&["line.rs", "raw.rs"])));
    assert!(known_in(list, schema, &cycle(&whole)));
    assert!(!known_in(
        list,
        schema,
        &cycle(&["ids.rs", "line.rs", "raw.rs"])
    ));
    assert!(!known_in(
        list,
        "crates/session-jsonl/src",
        &cycle(&["line.rs", "raw.rs"])
    ));
}

fn synthetic(files: &[(&str, &str)]) -> Vec<Cycle> {
    let files: Vec<SourceFile> = files
        .iter()
        .map(|(name, text)| SourceFile::new(name, text))
        .collect();
    find_cycles(&files)
}

#[test]
fn a_cycle_through_use_lines_and_paths_is_found_with_its_first_lines() {
    let cycles = synthetic(&[
        (
            "lib.rs",
            "pub mod db;\npub mod runs;\npub mod store;\npub use store::StateStore;\n",
        ),
        (
            "db.rs",
            "//! Db.\n// crate::store::x in a comment makes no edge\nuse crate::{runs::{self, Run}, types::T};\npub fn open() {}\n",
        ),
        (
            "runs.rs",
            "//! Runs.\n\nfn f() -> crate::StateStore { todo!() }\n",
        ),
        (
            "store.rs",
            "//! Store.\npub struct StateStore;\nfn g() { super::db::open(); }\n",
        ),
        (
            "types.rs",
            "pub struct T;\nfn h() { let _ = \"crate::db::open\"; }\n",
        ),
    ]);
    assert_eq!(
        cycles,
        vec![Cycle {
            files: vec!["db.rs".into(), "runs.rs".into(), "store.rs".into()],
            edges: vec![
                Edge {
                    from: "db.rs".into(),
                    to: "runs.rs".into(),
                    at: "db.rs:3: use crate::{runs::{self, Run}, types::T};".into(),
                },
                Edge {
                    from: "runs.rs".into(),
                    to: "store.rs".into(),
                    at: "runs.rs:3: fn f() -> crate::StateStore { todo!() }".into(),
                },
                Edge {
                    from: "store.rs".into(),
                    to: "db.rs".into(),
                    at: "store.rs:3: fn g() { super::db::open(); }".into(),
                },
            ],
        }]
    );
}

#[test]
fn file_level_modules_below_a_directory_are_nodes_of_their_own() {
    let cycles = synthetic(&[
        ("lib.rs", "mod commands;\nmod store;\n"),
        (
            "commands/mod.rs",
            "mod state;\nmod verify;\npub(crate) use verify::check;\n",
        ),
        ("commands/state.rs", "use super::verify::Finding;\n"),
        (
            "commands/verify.rs",
            "pub struct Finding;\npub fn check() {}\nfn f() { crate::store::open(); }\n",
        ),
        (
            "store.rs",
            "pub fn open() {}\nfn g() { crate::commands::check() }\n",
        ),
    ]);
    let names: Vec<&[String]> = cycles.iter().map(|c| c.files.as_slice()).collect();
    assert_eq!(names, [["commands/verify.rs", "store.rs"]]);
    let edges: Vec<(&str, &str)> = cycles
        .iter()
        .flat_map(|c| &c.edges)
        .map(|e| (e.from.as_str(), e.to.as_str()))
        .collect();
    // `crate::commands::check` follows the re-export to the file that defines it.
    assert_eq!(
        edges,
        [
            ("commands/verify.rs", "store.rs"),
            ("store.rs", "commands/verify.rs")
        ]
    );
}

#[test]
fn a_dag_passes_and_test_items_make_no_edges() {
    let cycles = synthetic(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\npub use a::A;\n"),
        ("a.rs", "use crate::b::B;\npub struct A(B, crate::c::C);\n"),
        (
            "b.rs",
            "pub struct B(super::c::C);\n#[cfg(test)]\nmod tests { use crate::a::A; }\n",
        ),
        (
            "c.rs",
            "pub struct C;\nmod inner { pub(super) fn f() { self::g(); super::h() } fn g() {} }\nfn h() {}\nmacro_rules! m { () => { $crate::a::A } }\n",
        ),
    ]);
    assert_eq!(cycles, []);
}

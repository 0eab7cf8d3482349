//! No import circles between modules, one level below the layers (`backend/gpu`,
//! `backend/vars`, `session`, `checkpoint`, `compile/fuse`, …): two modules that import each
//! other cannot be read, tested or replaced one at a time. The one documented exception is
//! the ops-and-graph layer (`docs/architecture.md`): a graph holds ops and a family rebuilds
//! graph-file nodes and gradients through the builders, so `ops/*` and `graph/*` may form
//! circles among themselves, never with anything else.

use crate::architecture::{library_code, rust_files};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn ident(s: &str) -> &str {
    let end = s
        .char_indices()
        .find(|&(_, c)| !(c.is_alphanumeric() || c == '_'))
        .map_or(s.len(), |(i, _)| i);
    &s[..end]
}

/// The module path of a source file: `src/backend/gpu/exec/run.rs` → `[backend, gpu, exec,
/// run]`, `src/session/mod.rs` → `[session]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("file under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.first().is_some_and(|p| p == "bin") {
        parts.truncate(1);
    }
    parts
}

/// The paths a file names: every `crate::a::b…` and `super::…` (resolved against `module`),
/// with `use` braces expanded, as segment lists.
fn named_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    fn expand(s: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let mut path = prefix.to_vec();
        let mut rest = s.trim_start();
        loop {
            if let Some(inner) = rest.strip_prefix('{') {
                let mut depth = 0;
                let mut start = 0;
                for (i, c) in inner.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            expand(&inner[start..i], &path, out);
                            return;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            expand(&inner[start..i], &path, out);
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
                return;
            }
            let seg = ident(rest);
            if seg.is_empty() || seg == "self" {
                break;
            }
            path.push(seg.to_string());
            rest = &rest[seg.len()..];
            match rest.strip_prefix("::") {
                Some(r) => rest = r,
                None => break,
            }
        }
        out.push(path);
    }
    let mut out = Vec::new();
    // `super` of module `a::b::c` (from `a/b/c.rs` or `a/b/c/mod.rs`) is `a::b`.
    let parent = module[..module.len().saturating_sub(1)].to_vec();
    for (marker, base) in [("crate::", Vec::new()), ("super::", parent)] {
        let mut rest = code;
        while let Some(i) = rest.find(marker) {
            let before = rest[..i].chars().last();
            rest = &rest[i + marker.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue; // `super::super::x` is read from its first `super::`
            }
            let mut base = base.clone();
            let mut r = rest;
            while let Some(next) = r.strip_prefix("super::") {
                base.pop();
                r = next;
            }
            expand(r, &base, &mut out);
        }
    }
    out
}

/// The unit a module path belongs to: its first two segments when they name a module of
/// their own (a directory or file under `src/`), else its first.
fn unit(src: &Path, path: &[String]) -> Option<String> {
    let first = path.first()?;
    if !(src.join(first).is_dir() || src.join(format!("{first}.rs")).is_file()) {
        return None;
    }
    if first == "bin" {
        return Some(first.clone());
    }
    if let Some(second) = path.get(1) {
        let dir = src.join(first);
        if dir.join(second).is_dir() || dir.join(format!("{second}.rs")).is_file() {
            return Some(format!("{first}/{second}"));
        }
    }
    Some(first.clone())
}

/// Strongly connected components with more than one unit (Tarjan).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct St<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(st: &mut St<'a>, v: &'a str) {
        let i = st.index.len();
        st.index.insert(v, i);
        st.low.insert(v, i);
        st.stack.push(v);
        st.on.insert(v);
        if let Some(ws) = st.edges.get(v) {
            for w in ws {
                let w = w.as_str();
                if !st.index.contains_key(w) {
                    visit(st, w);
                    let l = st.low[w].min(st.low[v]);
                    st.low.insert(v, l);
                } else if st.on.contains(w) {
                    let l = st.index[w].min(st.low[v]);
                    st.low.insert(v, l);
                }
            }
        }
        if st.low[v] == st.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = st.stack.pop() {
                st.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                st.out.push(comp);
            }
        }
    }
    let mut st = St {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !st.index.contains_key(v.as_str()) {
            visit(&mut st, v);
        }
    }
    st.out
}

fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let module = module_of(&src, f);
        let Some(from) = unit(&src, &module) else {
            continue; // lib.rs
        };
        let code = library_code(&std::fs::read_to_string(f).expect("readable source"));
        let entry = edges.entry(from.clone()).or_default();
        for p in named_paths(&code, &module) {
            if let Some(to) = unit(&src, &p) {
                if to != from {
                    entry.insert(to);
                }
            }
        }
    }
    edges
}

#[test]
fn modules_import_each_other_only_within_the_ops_and_graph_layer() {
    let edges = import_graph();
    // The scan must see the layering it checks, or this test proves nothing.
    assert!(
        edges["session/checkpoint"].contains("checkpoint"),
        "{edges:#?}"
    );
    assert!(edges["backend/gpu"].contains("compile"), "{edges:#?}");
    let bad: Vec<Vec<String>> = circles(&edges)
        .into_iter()
        .filter(|c| {
            !c.iter().all(|u| {
                u == "ops" || u == "graph" || u.starts_with("ops/") || u.starts_with("graph/")
            })
        })
        .collect();
    assert!(bad.is_empty(), "import circles between modules: {bad:?}");
}

#[test]
fn the_cycle_finder_finds_a_planted_circle() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.entry("a".into()).or_default().insert("b".into());
    edges.entry("b".into()).or_default().insert("c".into());
    edges.entry("c".into()).or_default().insert("a".into());
    edges.entry("c".into()).or_default().insert("d".into());
    assert_eq!(
        circles(&edges),
        vec![vec!["a".to_string(), "b".into(), "c".into()]]
    );
}

#[test]
fn paths_in_braces_and_super_resolve() {
    let m = vec!["backend".to_string(), "gpu".into(), "exec".into()];
    let got = named_paths(
        "use crate::compile::{Plan, fuse::{x, y}};\nuse super::context;\nuse super::super::vars;",
        &m,
    );
    let got: Vec<String> = got.iter().map(|p| p.join("::")).collect();
    for want in [
        "compile::Plan",
        "compile::fuse::x",
        "compile::fuse::y",
        "backend::gpu::context",
        "backend::vars",
    ] {
        assert!(got.iter().any(|g| g == want), "{want} not in {got:?}");
    }
}

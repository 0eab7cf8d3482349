//! Dependencies point one way (docs/architecture.md): vocabulary → ops and graph → compile →
//! backend → session. This reads the library's sources and fails if a module names a later
//! layer, through a module path or through a name the crate root re-exports.
//!
//! `ops` and `graph` are one layer on purpose: a graph holds ops, and an op family builds
//! graph nodes through the public builders when it rebuilds a graph-file node (and, with
//! reverse mode, when it writes its gradient), so each needs the other.

use std::collections::BTreeSet;
use std::path::Path;

/// The layer of each top-level module; a module may use its own layer and earlier ones.
fn layer(module: &str) -> Option<usize> {
    Some(match module {
        "dtype" | "shape" | "error" | "files" | "host" | "device" | "npy" => 0,
        "ops" | "graph" => 1,
        "train" => 2,
        "compile" => 3,
        "backend" => 4,
        "session" | "trace" | "checkpoint" | "onnx" | "bin" | "lib" => 5,
        _ => return None,
    })
}

/// The module behind a name the crate root re-exports (src/lib.rs).
fn reexport(name: &str) -> Option<&'static str> {
    Some(match name {
        "DType" => "dtype",
        "Shape" => "shape",
        "Error" | "Result" => "error",
        "HostTensor" | "Element" => "host",
        "Device" | "DeviceSpec" | "PhysicalDevice" => "device",
        "SliceArg" => "ops",
        "Graph" | "Tensor" | "Axes" | "Conv2dOptions" | "PadMode" => "graph",
        "Session" | "SessionOptions" | "Counters" => "session",
        "devices" | "visible_devices" => "backend",
        "f16" => "dtype",
        _ => return None,
    })
}

/// The first path segment of every `crate::` path in `src` (inside `use` braces too).
fn crate_paths(src: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = src;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(inner) = rest.strip_prefix('{') {
            let end = matching_brace(inner);
            for item in split_top_level(&inner[..end]) {
                out.insert(first_segment(item.trim()));
            }
        } else {
            out.insert(first_segment(rest));
        }
    }
    out.retain(|s| !s.is_empty() && s != "self");
    out
}

fn matching_brace(s: &str) -> usize {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return i,
            '}' => depth -= 1,
            _ => {}
        }
    }
    s.len()
}

fn split_top_level(s: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn first_segment(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Library code only: a file's unit tests (after `#[cfg(test)]`) may use anything, and
/// comments (doc links to the API a user reaches an item through) are not dependencies.
fn library_code(src: &str) -> String {
    let code = match src.find("#[cfg(test)]\nmod tests") {
        Some(i) => &src[..i],
        None => src,
    };
    code.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable src dir") {
        let p = entry.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn dependencies_point_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 20, "found only {files:?}");
    let mut wrong = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).expect("under src");
        let top = rel
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .map(|s| s.trim_end_matches(".rs").to_string())
            .expect("a file name");
        // The CLI is its own crate: its `crate::` paths are its modules, and it reaches the
        // library through `wgflow::`, the last layer anyway.
        if top == "bin" {
            continue;
        }
        let Some(own) = layer(&top) else {
            wrong.push(format!("{}: module '{top}' has no layer", rel.display()));
            continue;
        };
        let text = std::fs::read_to_string(&f).expect("readable source");
        for seg in crate_paths(&library_code(&text)) {
            let module = if layer(&seg).is_some() {
                seg.clone()
            } else if let Some(m) = reexport(&seg) {
                m.to_string()
            } else {
                wrong.push(format!(
                    "{}: unknown crate path 'crate::{seg}'",
                    rel.display()
                ));
                continue;
            };
            let theirs = layer(&module).expect("a layer");
            if theirs > own {
                wrong.push(format!(
                    "{} (layer {own}) uses crate::{seg} (module '{module}', layer {theirs})",
                    rel.display()
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies against the layering:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_scanner_sees_braced_and_nested_imports() {
    let paths = crate_paths(
        "use crate::{graph::{Graph, Tensor}, Shape};\nlet x = crate::backend::gpu::get(0);",
    );
    let want: BTreeSet<String> = ["graph", "Shape", "backend"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(paths, want);
}

/// docs/architecture.md's family table is the map a newcomer adds an op with: every row's
/// file exists and implements `Family` for the row's payload, which `ops/mod.rs` registers
/// (dispatch and graph-file reading), and every `Family` implementation has a row.
#[test]
fn the_family_table_in_the_architecture_doc_is_true() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).expect("the doc");
    let ops_mod = std::fs::read_to_string(root.join("src/ops/mod.rs")).expect("ops/mod.rs");
    let ticked = |cell: &str| cell.split('`').nth(1).map(str::to_string);
    let mut rows = 0;
    for line in doc.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (Some(file), Some(payload)) = (ticked(cells[2]), ticked(cells[3])) else {
            continue;
        };
        if !file.starts_with("ops/") {
            continue;
        }
        rows += 1;
        let src = std::fs::read_to_string(root.join("src").join(&file))
            .unwrap_or_else(|e| panic!("{file} in the family table: {e}"));
        assert!(
            src.contains(&format!("impl Family for {payload} ")),
            "{file} does not implement Family for {payload}"
        );
        assert!(
            registered(&ops_mod, "families").contains(&payload),
            "{payload} has no line in the families table of ops::registry!"
        );
    }
    let mut files = Vec::new();
    rust_files(&root.join("src/ops"), &mut files);
    let impls: usize = files
        .iter()
        .map(|f| {
            std::fs::read_to_string(f)
                .expect("source")
                .matches("impl Family for ")
                .count()
        })
        .sum();
    assert!(rows >= 9, "found {rows} family rows");
    assert_eq!(
        impls, rows,
        "a Family implementation has no row in docs/architecture.md"
    );
    assert_eq!(
        registered(&ops_mod, "families").len(),
        rows,
        "registry families vs family rows"
    );
}

/// The payload types of one table (`families` or `kernels`) of `ops::registry!`.
fn registered(ops_mod: &str, table: &str) -> Vec<String> {
    let start = ops_mod
        .find(&format!("\n    {table} {{\n"))
        .unwrap_or_else(|| panic!("no {table} table in ops/mod.rs"));
    let body = &ops_mod[start..];
    let body = &body[..body.find("\n    }").expect("the table ends")];
    body.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && l.ends_with("),"))
        .filter_map(|l| {
            let inner = &l[l.find('(')? + 1..l.len() - 2];
            Some(inner.rsplit("::").next()?.to_string())
        })
        .collect()
}

/// Registering a kernel type is its line in `ops::registry!`: every `KernelDef`
/// implementation has one, and no module outside `ops/` matches over kernel types (a file
/// that names more than a few `Kernel::` variants would be an exhaustive match, a fact about
/// kernels that belongs in `KernelDef`).
#[test]
fn kernel_facts_live_in_kernel_def() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ops_mod = std::fs::read_to_string(root.join("src/ops/mod.rs")).expect("ops/mod.rs");
    let kernels = registered(&ops_mod, "kernels");
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut impls = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("source");
        for part in text.split("impl KernelDef for ").skip(1) {
            impls.push(first_segment(part));
        }
        if f.starts_with(root.join("src/ops")) {
            continue;
        }
        let named: BTreeSet<String> = text
            .split("Kernel::")
            .skip(1)
            .map(first_segment)
            .filter(|v| v.chars().next().is_some_and(char::is_uppercase))
            .collect();
        assert!(
            named.len() <= 4,
            "{} names the kernel types {named:?}: ask KernelDef instead of matching",
            f.display()
        );
    }
    impls.sort();
    let mut listed = kernels.clone();
    listed.sort();
    assert_eq!(
        impls, listed,
        "KernelDef implementations vs the kernels table"
    );
}

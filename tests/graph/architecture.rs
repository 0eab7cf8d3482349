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
        "dtype" | "shape" | "error" | "files" | "host" | "device" | "npy" | "id" => 0,
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
        "Error" | "Result" | "BuildKind" | "FeedKind" | "HostKind" | "OnnxKind" => "error",
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
pub(crate) fn library_code(src: &str) -> String {
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

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
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
    registry_lines(ops_mod, table)
        .into_iter()
        .map(|(_, payload)| payload)
        .collect()
}

/// `(variant, payload type)` for each line of one table of `ops::registry!`.
fn registry_lines(ops_mod: &str, table: &str) -> Vec<(String, String)> {
    let start = ops_mod
        .find(&format!("\n    {table} {{\n"))
        .unwrap_or_else(|| panic!("no {table} table in ops/mod.rs"));
    let body = &ops_mod[start..];
    let body = &body[..body.find("\n    }").expect("the table ends")];
    body.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && l.ends_with("),"))
        .filter_map(|l| {
            let open = l.find('(')?;
            let inner = &l[open + 1..l.len() - 2];
            Some((
                l[..open].to_string(),
                inner.rsplit("::").next()?.to_string(),
            ))
        })
        .collect()
}

/// Builders follow the op families (docs/architecture.md): every `graph/build/<name>.rs` but
/// `mod.rs` and `composite.rs` is named after a family of `ops::registry!` (its variant in
/// lower case), and makes that family's ops only, so an op's builder is found beside its
/// family. Formulas over several families belong in `composite.rs`.
#[test]
fn builders_follow_the_op_families() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ops_mod = std::fs::read_to_string(root.join("src/ops/mod.rs")).expect("ops/mod.rs");
    let families: Vec<String> = registry_lines(&ops_mod, "families")
        .into_iter()
        .map(|(variant, _)| variant)
        .collect();
    assert!(families.len() >= 9, "found the families {families:?}");
    let mut files = Vec::new();
    rust_files(&root.join("src/graph/build"), &mut files);
    assert!(files.len() >= 10, "found only {files:?}");
    let mut wrong = Vec::new();
    for f in &files {
        let stem = f.file_stem().and_then(|s| s.to_str()).expect("a file name");
        if stem == "mod" || stem == "composite" {
            continue;
        }
        let Some(own) = families.iter().find(|v| v.to_lowercase() == stem) else {
            wrong.push(format!("graph/build/{stem}.rs is named after no family"));
            continue;
        };
        let text = std::fs::read_to_string(f).expect("source");
        for other in foreign_ops(&library_code(&text), own, &families) {
            wrong.push(format!("graph/build/{stem}.rs makes an Op::{other}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The families other than `own` whose `Op::<Family>(` a builder file makes. A line that
/// only looks at an op (`if let Op::Leaf(..) = ..`, `==`, `!=`) makes none.
fn foreign_ops(code: &str, own: &str, families: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for line in code.lines() {
        if ["if let ", " == ", " != ", "matches!("]
            .iter()
            .any(|r| line.contains(r))
        {
            continue;
        }
        for (i, _) in line.match_indices("Op::") {
            // `UnaryOp::Exp` and the like are not `Op`.
            if line[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let variant = first_segment(&line[i + "Op::".len()..]);
            if variant != own && families.contains(&variant) {
                out.push(variant);
            }
        }
    }
    out
}

#[test]
fn the_family_check_sees_another_familys_op() {
    let families = ["Leaf", "Elementwise", "Reduce"].map(String::from);
    let code = "let a = Op::Reduce(r);\nlet b = UnaryOp::Exp;\n\
                if let Op::Leaf(Leaf::Constant(t)) = &n.op {}\nlet c = crate::ops::Op::Leaf(l);";
    assert_eq!(
        foreign_ops(code, "Elementwise", &families),
        ["Reduce", "Leaf"]
    );
    assert!(foreign_ops(code, "Reduce", &families).len() == 1);
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

/// The backends and the memory planner have no op knowledge: they name no kernel type, and
/// ask `KernelDef` (where inputs lie in the output, which input an output may overwrite,
/// whether bindings may be windowed) instead. Fusion and lowering, which build kernels,
/// may name them.
#[test]
fn backends_and_the_memory_plan_name_no_kernel_type() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ops_mod = std::fs::read_to_string(root.join("src/ops/mod.rs")).expect("ops/mod.rs");
    let kernels = registry_lines(&ops_mod, "kernels");
    let mut files = Vec::new();
    rust_files(&root.join("src/backend"), &mut files);
    files.push(root.join("src/compile/memory.rs"));
    assert!(files.len() > 5, "{files:?}");
    for f in &files {
        let text = std::fs::read_to_string(f).expect("source");
        for (variant, payload) in &kernels {
            let arm = format!("Kernel::{variant}(");
            assert!(
                !text.contains(&arm) && !text.contains(payload.as_str()),
                "{} names the kernel type {variant}: ask KernelDef instead",
                f.display()
            );
        }
    }
}

/// The files of one family's folder (docs/architecture.md, "Op families").
const LAYOUT: [&str; 6] = [
    "mod.rs",
    "wgsl.rs",
    "cpu.rs",
    "reference.rs",
    "grad.rs",
    "file.rs",
];

/// Helpers a family needs beyond the layout, each named in docs/architecture.md: custom's raw
/// WGSL kernels, elementwise's vectorized math and fused-expression IR (with its derivative
/// table), the initializers of variables, the movement ops' shape rules, nn's window geometry
/// and its backward primitives (`NnGradKernel`) with their CPU fast path, cpu:0's
/// phase-plane, direct convolution (with its micro-kernels) and by-rows max pool kernels,
/// the one-pass per-channel bias form and scratch buffers of cpu:0's elementwise programs,
/// cpu:0's integer GEMM for matmuls (with its AMX tiles), its f32 GEMM over a B packed once
/// (whose AVX2 micro-kernel the direct convolution shares), and cpu:0's reduction row folds.
const EXTRAS: [&str; 21] = [
    "custom/raw.rs",
    "matmul/panel.rs",
    "matmul/igemm.rs",
    "matmul/igemm/tiles.rs",
    "reduce/cpu/fold.rs",
    "matmul/few_rows.rs",
    "elementwise/vmath.rs",
    "elementwise/table.rs",
    "elementwise/cpu/bias.rs",
    "elementwise/cpu/slots.rs",
    "elementwise/expr/mod.rs",
    "elementwise/expr/vjp.rs",
    "leaf/init.rs",
    "movement/shape.rs",
    "nn/window.rs",
    "nn/backward.rs",
    "nn/backward_cpu.rs",
    "nn/planes.rs",
    "nn/direct.rs",
    "nn/tiles.rs",
    "nn/maxpool.rs",
];

/// Every family is a folder of `src/ops/` holding only the layout's files and the documented
/// helpers, and the only files directly in `src/ops/` are the registry, the traits, the
/// shared WGSL writer and its CPU counterpart, the SIMD level every CPU kernel asks.
#[test]
fn every_op_family_has_the_one_folder_layout() {
    let ops = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/ops");
    let mut wrong = Vec::new();
    let mut families = 0;
    for entry in std::fs::read_dir(&ops).expect("src/ops") {
        let p = entry.expect("dir entry").path();
        let name = p.file_name().and_then(|n| n.to_str()).expect("a name");
        if p.is_dir() {
            families += 1;
            if !p.join("mod.rs").is_file() {
                wrong.push(format!("ops/{name}/ has no mod.rs"));
            }
            let mut files = Vec::new();
            rust_files(&p, &mut files);
            for f in files {
                let rel = f.strip_prefix(&ops).expect("under ops");
                let rel = rel.to_str().expect("utf-8").replace('\\', "/");
                let in_layout = rel
                    .strip_prefix(&format!("{name}/"))
                    .is_some_and(|f| LAYOUT.contains(&f));
                if !in_layout && !EXTRAS.contains(&rel.as_str()) {
                    wrong.push(format!("ops/{rel} is neither in the layout nor an extra"));
                }
            }
        } else if !["mod.rs", "family.rs", "wgsl.rs", "simd.rs"].contains(&name) {
            wrong.push(format!("ops/{name} belongs in a family's folder"));
        }
    }
    for extra in EXTRAS {
        if !ops.join(extra).is_file() {
            wrong.push(format!("the extra ops/{extra} does not exist"));
        }
    }
    assert!(families >= 10, "found {families} family folders");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The no-panic rule is checked by clippy, not kept by habit: the library and both bindings
/// deny `unwrap`, `expect`, `panic!`, `todo!` and `unimplemented!` outside tests (CI runs
/// clippy with `-D warnings`). Indexing is not denied: 2,000 sites index slices whose bounds
/// the code has checked, and the fuzzers and hostile-input tests exercise them.
#[test]
fn the_no_panic_lints_are_on() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for crate_root in ["src/lib.rs", "python/src/lib.rs", "web/src/lib.rs"] {
        let text = std::fs::read_to_string(root.join(crate_root)).expect("crate root");
        let head = &text[..text
            .find("\nuse ")
            .or_else(|| text.find("\npub mod "))
            .unwrap_or(text.len())];
        for lint in [
            "clippy::unwrap_used",
            "clippy::expect_used",
            "clippy::panic",
            "clippy::todo",
            "clippy::unimplemented",
        ] {
            assert!(
                head.contains("#![cfg_attr(") && head.contains("deny(") && head.contains(lint),
                "{crate_root} does not deny {lint}"
            );
        }
    }
}

/// The elementwise table (`src/ops/elementwise/table.rs`) is the only list of the
/// primitives' names: no other Rust file of the library or its bindings spells out six or
/// more of them as string literals (a hand-kept list, which would drift from the table).
/// The Python package's maps from Python syntax (operators in `_array.py`, `math.*` and
/// AST nodes in `_vectorize.py`) are translations, not lists, and are not scanned.
#[test]
fn the_elementwise_table_is_the_only_list_of_primitive_names() {
    use wgflow::ops::{BinaryOp, UnaryOp};
    let names: Vec<String> = UnaryOp::ALL
        .iter()
        .map(|u| u.name())
        .chain(BinaryOp::ALL.iter().map(|b| b.name()))
        .map(|n| format!("\"{n}\""))
        .collect();
    assert!(names.len() >= 60, "{} names", names.len());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "python/src", "web/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut lists = Vec::new();
    for f in files {
        if f.ends_with("src/ops/elementwise/table.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).expect("readable source");
        let n = names.iter().filter(|n| text.contains(n.as_str())).count();
        if n >= 6 {
            lists.push(format!("{} spells {n} primitive names", f.display()));
        }
    }
    assert!(lists.is_empty(), "{}", lists.join("\n"));
}

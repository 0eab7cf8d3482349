//! The op tables in docs/ cannot drift from the code: every public builder of `Graph` and every
//! elementwise primitive has a row.

use wgflow::ops::{BinaryOp, UnaryOp};

fn docs() -> String {
    [
        include_str!("../../docs/ops.md"),
        include_str!("../../docs/ops_elementwise.md"),
        include_str!("../../docs/ops_nn.md"),
    ]
    .concat()
}

/// Builder files without op rows: user kernels and assignments.
const NOT_OPS: [&str; 2] = ["custom.rs", "state.rs"];

/// Builders that make variables (in `leaf.rs`): state, like assignments, not ops.
const VARIABLE_BUILDERS: [&str; 3] = ["variable", "variable_with", "variables"];

/// Names of `pub fn`s in the builder files (`src/graph/build/`, one per op family, but
/// `NOT_OPS`), plus the macro-generated builders of `elementwise.rs` and `reduce.rs`.
fn builders() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/graph/build");
    let mut sources = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("src/graph/build") {
        let path = entry.expect("a directory entry").path();
        let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
        if file.ends_with(".rs") && !NOT_OPS.contains(&file) {
            sources.push(std::fs::read_to_string(&path).expect("a builder file"));
        }
    }
    assert!(
        sources.len() >= 8,
        "found only {} builder files",
        sources.len()
    );
    let mut names = Vec::new();
    for src in &sources {
        for line in src.lines() {
            let line = line.trim_start();
            if let Some(rest) = line.strip_prefix("pub fn ") {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.push(name);
            }
            // `name => Variant;` rows inside the unary/binary/reduce builder macros.
            if let Some((name, _)) = line.split_once(" => ") {
                if line.ends_with(';') && name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                    names.push(name.to_string());
                }
            }
        }
    }
    names.retain(|n| !VARIABLE_BUILDERS.contains(&n.as_str()));
    names.sort();
    names.dedup();
    names
}

fn has_row(doc: &str, name: &str) -> bool {
    doc.lines().filter(|l| l.starts_with('|')).any(|l| {
        let first = l.split('|').nth(1).unwrap_or("");
        first.split([',', ' ', '`', '(', ')']).any(|w| w == name)
    })
}

#[test]
fn every_builder_and_primitive_has_a_row() {
    let doc = docs();
    let mut missing = Vec::new();
    let builders = builders();
    assert!(builders.len() > 60, "builder scan found only {builders:?}");
    for name in builders {
        if !has_row(&doc, &name) {
            missing.push(name);
        }
    }
    for u in UnaryOp::ALL {
        if !has_row(&doc, u.name()) {
            missing.push(u.name().to_string());
        }
    }
    for b in BinaryOp::ALL {
        if !has_row(&doc, b.name()) {
            missing.push(b.name().to_string());
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "ops without a row in docs/ops*.md: {missing:?}"
    );
}

/// `docs/onnx-ops.md` holds the importer's table as `supported_ops_markdown` prints it
/// (`WGFLOW_UPDATE_DOCS=1` rewrites it).
#[test]
fn the_onnx_op_page_is_the_registry() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/onnx-ops.md");
    let doc = std::fs::read_to_string(path).unwrap_or_default();
    let marker = "<!-- generated from src/onnx/registry.rs -->\n";
    let table = wgflow::onnx::supported_ops_markdown();
    let head = doc.split(marker).next().unwrap_or_default();
    let want = format!("{head}{marker}{table}");
    if std::env::var_os("WGFLOW_UPDATE_DOCS").is_some() {
        std::fs::write(path, &want).unwrap();
        return;
    }
    assert!(
        doc == want,
        "docs/onnx-ops.md is not the registry's table: rerun with WGFLOW_UPDATE_DOCS=1"
    );
}

/// Every ONNX op type has one row, and the translators are reached only through it: no
/// `ops_*.rs` file dispatches on op names from a `translate` of its own.
#[test]
fn every_onnx_op_is_one_registry_row() {
    let ops = wgflow::onnx::supported_ops();
    let mut seen = std::collections::BTreeSet::new();
    for d in &ops {
        assert!(
            seen.insert((d.domain, d.op)),
            "{} twice in the registry",
            d.op
        );
        assert!(
            d.inputs.0 <= d.inputs.1 && d.outputs.0 <= d.outputs.1,
            "{}",
            d.op
        );
        let file = format!(
            "{}/src/onnx/ops_{}.rs",
            env!("CARGO_MANIFEST_DIR"),
            d.family
        );
        assert!(std::path::Path::new(&file).is_file(), "{}: no {file}", d.op);
    }
    assert!(ops.len() > 150, "{} rows", ops.len());
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/onnx");
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("ops_") {
            continue;
        }
        let code = std::fs::read_to_string(e.path()).unwrap();
        assert!(
            !code.contains("fn translate("),
            "{name} has a translate of its own: add rows to src/onnx/registry.rs instead"
        );
    }
}

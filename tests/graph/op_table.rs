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

/// Names of `pub fn`s in the builder files, plus the macro-generated builders of build.rs.
fn builders() -> Vec<String> {
    let sources = [
        include_str!("../../src/graph/build/mod.rs"),
        include_str!("../../src/graph/build/elementwise.rs"),
        include_str!("../../src/graph/build/movement.rs"),
        include_str!("../../src/graph/build/nn.rs"),
    ];
    let mut names = Vec::new();
    for src in sources {
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

//! The graphs committed under graph-examples/*.json, built with the API. `tests/graph/graphdef.rs`
//! checks the committed files equal these (and rewrites them under `WGFLOW_REGEN=1`), so the
//! files cannot drift from the builder API.
#![allow(dead_code)]

use wgflow::{DType, Graph, HostTensor};

/// A graph, its file stem, and the feeds `wgflow run` gets (committed as
/// `graph-examples/<stem>.feeds/<name>.npy`).
pub struct Example {
    pub stem: &'static str,
    pub graph: Graph,
    pub feeds: Vec<(&'static str, HostTensor)>,
}

/// The seed's first program: `[1, 2, 3] + [4, 5, 6]`.
pub fn add() -> Example {
    let mut g = Graph::new();
    let a = g.constant([1.0f32, 2.0, 3.0]).unwrap();
    let b = g.constant([4.0f32, 5.0, 6.0]).unwrap();
    g.add(a, b).unwrap();
    Example {
        stem: "add",
        graph: g,
        feeds: vec![],
    }
}

/// Deterministic small weights in [-0.5, 0.5).
fn weights(rows: usize, cols: usize, seed: usize) -> HostTensor {
    let v: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7 + seed * 13) % 17) as f32 / 17.0 - 0.5)
        .collect();
    HostTensor::new([rows, cols], v).unwrap()
}

/// A two-layer MLP on a fed batch: `relu(x @ w1 + b1) @ w2 + b2`.
pub fn mlp() -> Example {
    let mut g = Graph::new();
    let x = g.placeholder("x", [4, 3], DType::F32).unwrap();
    let h = g
        .name_scope("layer1", |g| {
            let w = g.constant(weights(3, 8, 1))?;
            let b = g.constant(weights(1, 8, 2).reshaped([8])?)?;
            let y = g.matmul(x, w)?;
            let y = g.add(y, b)?;
            g.relu(y)
        })
        .unwrap();
    g.name_scope("layer2", |g| {
        let w = g.constant(weights(8, 2, 3))?;
        let b = g.constant([0.25f32, -0.25])?;
        let y = g.matmul(h, w)?;
        g.add(y, b)
    })
    .unwrap();
    let xs: Vec<f32> = (0..12).map(|i| i as f32 / 4.0 - 1.5).collect();
    Example {
        stem: "mlp",
        graph: g,
        feeds: vec![("x", HostTensor::new([4, 3], xs).unwrap())],
    }
}

/// Softmax over the last axis of a constant `[2, 4]` batch (one row with a large logit).
pub fn softmax() -> Example {
    let mut g = Graph::new();
    let x = g
        .constant([[1.0f32, 2.0, 3.0, 4.0], [-1.0, 0.0, 100.0, 0.5]])
        .unwrap();
    g.softmax(x, -1).unwrap();
    Example {
        stem: "softmax",
        graph: g,
        feeds: vec![],
    }
}

pub fn all() -> Vec<Example> {
    vec![add(), mlp(), softmax()]
}

/// `graph-examples/` from the crate root.
pub fn dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("graph-examples")
}

//! A `BatchNormalization` that reads only a `Conv`'s output is folded into the convolution at
//! import (scaled weights, shifted bias): the imported graph has no normalization left, and
//! its outputs match the two ops computed one after the other in float64, on every device.
//! A normalization on its own with constant statistics becomes a per-channel scale and shift.
//! A convolution whose output has another reader, or whose weights are trainable, is not
//! folded and still matches.

use super::common;
use super::common::grad::uniform;
use super::protos::{attr_float, attr_int, attr_ints, float_init, node, value};
use wgflow::onnx::proto::{GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto};
use wgflow::onnx::{import_bytes, ImportOptions, Message};
use wgflow::{Device, HostTensor};

/// `graph` as a model of ai.onnx opset 15.
fn opset15(graph: GraphProto) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(15),
        }],
        graph: Some(graph),
        ..Default::default()
    }
}

/// One convolution + normalization case.
struct Case {
    n: usize,
    c: usize,
    o: usize,
    groups: usize,
    hw: [usize; 2],
    bias: bool,
    /// The convolution's output is also a model output (a second reader: no fold).
    shared: bool,
}

struct Params {
    x: Vec<f32>,
    w: Vec<f32>,
    b: Vec<f32>,
    /// gamma, beta, mean, var.
    bn: [Vec<f32>; 4],
}

const EPS: f32 = 1e-3;

fn params(k: &Case) -> Params {
    let cg = k.c / k.groups;
    Params {
        x: uniform(k.n * k.c * k.hw[0] * k.hw[1], -1.0, 1.0, 1),
        w: uniform(k.o * cg * 9, -0.5, 0.5, 2),
        b: uniform(k.o, -0.5, 0.5, 3),
        bn: [
            uniform(k.o, 0.5, 2.0, 4),
            uniform(k.o, -1.0, 1.0, 5),
            uniform(k.o, -0.5, 0.5, 6),
            uniform(k.o, 0.1, 2.1, 7),
        ],
    }
}

fn model(k: &Case, p: &Params) -> ModelProto {
    let dims = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<_>>();
    let cg = k.c / k.groups;
    let mut conv_in = vec!["x", "w"];
    let mut init: Vec<TensorProto> = vec![float_init("w", &dims(&[k.o, cg, 3, 3]), p.w.clone())];
    if k.bias {
        conv_in.push("b");
        init.push(float_init("b", &[k.o as i64], p.b.clone()));
    }
    for (name, v) in ["gamma", "beta", "mean", "var"].iter().zip(&p.bn) {
        init.push(float_init(name, &[k.o as i64], v.clone()));
    }
    let nodes: Vec<NodeProto> = vec![
        node(
            "Conv",
            &conv_in,
            &["c"],
            vec![
                attr_ints("pads", &[1, 1, 1, 1]),
                attr_int("group", k.groups as i64),
            ],
        ),
        node(
            "BatchNormalization",
            &["c", "gamma", "beta", "mean", "var"],
            &["y"],
            vec![attr_float("epsilon", EPS)],
        ),
    ];
    let [h, w] = k.hw;
    let mut output = vec![value("y", &dims(&[k.n, k.o, h, w]))];
    if k.shared {
        output.push(value("c", &dims(&[k.n, k.o, h, w])));
    }
    opset15(GraphProto {
        node: nodes,
        name: Some("conv_bn".into()),
        initializer: init,
        input: vec![value("x", &dims(&[k.n, k.c, h, w]))],
        output,
        ..Default::default()
    })
}

/// The convolution (3x3, padding 1, stride 1) then the normalization, in float64.
fn reference(k: &Case, p: &Params) -> Vec<f64> {
    let [h, w] = k.hw;
    let (cg, og) = (k.c / k.groups, k.o / k.groups);
    let mut out = vec![0f64; k.n * k.o * h * w];
    for n in 0..k.n {
        for o in 0..k.o {
            let g = o / og;
            let [gamma, beta, mean, var] = [0, 1, 2, 3].map(|i| p.bn[i][o] as f64);
            for y in 0..h {
                for x in 0..w {
                    let mut acc = if k.bias { p.b[o] as f64 } else { 0.0 };
                    for c in 0..cg {
                        for ky in 0..3 {
                            for kx in 0..3 {
                                let (iy, ix) = ((y + ky) as isize - 1, (x + kx) as isize - 1);
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                    continue;
                                }
                                let xi =
                                    ((n * k.c + g * cg + c) * h + iy as usize) * w + ix as usize;
                                let wi = ((o * cg + c) * 3 + ky) * 3 + kx;
                                acc += p.x[xi] as f64 * p.w[wi] as f64;
                            }
                        }
                    }
                    let v = (acc - mean) / (var + EPS as f64).sqrt() * gamma + beta;
                    out[((n * k.o + o) * h + y) * w + x] = v;
                }
            }
        }
    }
    out
}

fn check(k: &Case, trainable: bool, want_folded: bool) {
    let p = params(k);
    let bytes = model(k, &p).encode_to_vec();
    let opts = ImportOptions {
        trainable,
        ..Default::default()
    };
    let m = import_bytes(&bytes, None, &opts).expect("import");
    // Folded: at most the convolution's bias add is elementwise; unfolded, the
    // normalization adds at least a scale and a shift.
    let elementwise = m
        .graph
        .nodes()
        .filter(|(_, n)| n.op.is_elementwise())
        .count();
    assert_eq!(
        elementwise <= 1,
        want_folded,
        "folded: want {want_folded} (groups {}, bias {}, shared {}, trainable {trainable})",
        k.groups,
        k.bias,
        k.shared
    );
    let want = reference(k, &p);
    let x = HostTensor::new(vec![k.n, k.c, k.hw[0], k.hw[1]], p.x.clone()).unwrap();
    let y = m.outputs[0].tensor;
    let xin = m.inputs[0].tensor;
    for device in std::iter::once(Device::Cpu).chain(common::gpus()) {
        let mut s = common::folding_session_on(&m.graph, device);
        let got = s.run(&[(xin, x.clone())], &[y]).expect("run").remove(0);
        let got = got.to_f32().unwrap();
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let tol = 1e-4 * (1.0 + w.abs());
            assert!(
                (g as f64 - w).abs() <= tol,
                "{device}: y[{i}] = {g}, float64 {w} (groups {}, bias {})",
                k.groups,
                k.bias
            );
        }
    }
}

#[test]
fn a_normalization_after_a_convolution_is_folded_into_it_and_matches_float64() {
    let base = Case {
        n: 2,
        c: 4,
        o: 6,
        groups: 1,
        hw: [7, 5],
        bias: true,
        shared: false,
    };
    check(&base, false, true);
    check(
        &Case {
            groups: 2,
            bias: false,
            ..base
        },
        false,
        true,
    );
    check(
        &Case {
            groups: 4,
            o: 4,
            n: 1,
            hw: [9, 11],
            ..base
        },
        false,
        true,
    );
}

#[test]
fn a_shared_or_trainable_convolution_is_not_folded_and_still_matches() {
    let base = Case {
        n: 1,
        c: 3,
        o: 5,
        groups: 1,
        hw: [6, 6],
        bias: true,
        shared: true,
    };
    check(&base, false, false);
    check(
        &Case {
            shared: false,
            ..base
        },
        true,
        false,
    );
}

/// A normalization with constant statistics that no convolution precedes (DenseNet's) is
/// imported as `x · scale + shift` per channel, with no batch-norm composite left.
#[test]
fn a_normalization_on_its_own_is_an_affine_map_matching_float64() {
    let (n, c, h, w) = (2usize, 5usize, 4usize, 3usize);
    let x = uniform(n * c * h * w, -2.0, 2.0, 11);
    let bn = [
        uniform(c, 0.5, 2.0, 12),
        uniform(c, -1.0, 1.0, 13),
        uniform(c, -0.5, 0.5, 14),
        uniform(c, 0.1, 2.1, 15),
    ];
    let dims = [n as i64, c as i64, h as i64, w as i64];
    let mut init = Vec::new();
    for (name, v) in ["gamma", "beta", "mean", "var"].iter().zip(&bn) {
        init.push(float_init(name, &[c as i64], v.clone()));
    }
    let m = opset15(GraphProto {
        node: vec![node(
            "BatchNormalization",
            &["x", "gamma", "beta", "mean", "var"],
            &["y"],
            vec![attr_float("epsilon", EPS)],
        )],
        name: Some("bn".into()),
        initializer: init,
        input: vec![value("x", &dims)],
        output: vec![value("y", &dims)],
        ..Default::default()
    });
    let m = import_bytes(&m.encode_to_vec(), None, &ImportOptions::default()).expect("import");
    let elementwise = m
        .graph
        .nodes()
        .filter(|(_, n)| n.op.is_elementwise())
        .count();
    assert_eq!(elementwise, 2, "a scale and a shift");
    let xt = HostTensor::new(vec![n, c, h, w], x.clone()).unwrap();
    for device in std::iter::once(Device::Cpu).chain(common::gpus()) {
        let mut s = common::folding_session_on(&m.graph, device);
        let got = s
            .run(&[(m.inputs[0].tensor, xt.clone())], &[m.outputs[0].tensor])
            .expect("run")
            .remove(0)
            .to_f32()
            .unwrap();
        for (i, &g) in got.iter().enumerate() {
            let ch = (i / (h * w)) % c;
            let [gamma, beta, mean, var] = [0, 1, 2, 3].map(|k| bn[k][ch] as f64);
            let want = (x[i] as f64 - mean) / (var + EPS as f64).sqrt() * gamma + beta;
            assert!(
                (g as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                "{device}: y[{i}] = {g}, float64 {want}"
            );
        }
    }
}

//! cpu:0's batch-1 concatenations whose inputs are written straight into their run of the
//! output (`MemoryPlan::placed`), so the concatenation copies nothing, or only the inputs
//! that could not be placed (feeds, constants, a value read twice). Values against what the
//! test computes in float64; the plans never overlap two live values except an input inside
//! the output that holds it; and the placements that must not happen do not (two images,
//! a value handed over in place).

use wgflow::compile::{self, memory::overlaps, Plan, StepKind, Target};
use wgflow::device::DeviceLimits;
use wgflow::ops::Kernel;
use wgflow::{DType, Device, Graph, HostTensor, Session, SessionOptions, Tensor};

fn target(fuse: bool) -> Target {
    Target {
        devices: vec![(Device::Cpu, DeviceLimits::cpu())],
        default_device: Device::Cpu,
        gpu_only_default: None,
        soft_placement: false,
        fuse,
        fold_constants: fuse,
    }
}

fn feed(dims: &[usize]) -> (Vec<f32>, HostTensor) {
    let n: usize = dims.iter().product();
    let v: Vec<f32> = (0..n).map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.25).collect();
    (v.clone(), HostTensor::new(dims.to_vec(), v).unwrap())
}

/// The concatenation along `axis` of row-major `parts` (each with its dims), in float64.
fn concat_f64(parts: &[(Vec<usize>, Vec<f64>)], axis: usize) -> Vec<f64> {
    let outer: usize = parts[0].0[..axis].iter().product();
    let mut out = Vec::new();
    for o in 0..outer {
        for (dims, vals) in parts {
            let run: usize = dims[axis..].iter().product();
            out.extend_from_slice(&vals[o * run..(o + 1) * run]);
        }
    }
    out
}

/// The plan's concatenation inputs that were placed in their output.
fn placed(plan: &Plan) -> usize {
    plan.memory.get(&Device::Cpu).map_or(0, |m| m.placed.len())
}

fn concat_steps(plan: &Plan) -> usize {
    steps_of(plan, |k| matches!(k, Kernel::Concat(_)))
}

/// The plan's dispatches whose kernel `is`.
fn steps_of(plan: &Plan, is: impl Fn(&Kernel) -> bool) -> usize {
    plan.steps
        .iter()
        .filter(|s| matches!(&s.kind, StepKind::Dispatch { kernel, .. } if is(kernel)))
        .count()
}

/// Compile and run `fetches` of `g` on cpu:0 (fused and not), check the plan's invariants
/// and `min_placed` placements, and compare each fetch with `want`.
fn check(
    what: &str,
    g: &Graph,
    feeds: &[(Tensor, HostTensor)],
    fetches: &[Tensor],
    want: &[Vec<f64>],
    min_placed: usize,
) {
    for fuse in [false, true] {
        let plan = compile::compile(g, fetches, &target(fuse)).unwrap();
        for (d, m) in &plan.memory {
            let bad = overlaps(m, &|v| plan.values[v].bytes());
            assert!(bad.is_empty(), "{what} {d}: live values overlap: {bad:?}");
            assert!(m.lower_bound_bytes <= m.peak_bytes, "{what}");
        }
        assert!(
            concat_steps(&plan) > 0,
            "{what}: the concatenation is planned"
        );
        assert!(
            placed(&plan) >= min_placed,
            "{what} (fuse {fuse}): {} placed, want at least {min_placed}\n{}",
            placed(&plan),
            plan.describe()
        );
        let mut s = Session::new(
            g,
            SessionOptions {
                default_device: Some(Device::Cpu),
                fuse,
                ..Default::default()
            },
        )
        .unwrap();
        // Twice: the second run finds the arena as the first left it.
        for run in 0..2 {
            let got = s.run(feeds, fetches).unwrap();
            for (k, (t, w)) in got.iter().zip(want).enumerate() {
                let t = t.to_f32().unwrap();
                assert_eq!(t.len(), w.len(), "{what} fetch {k}");
                for (j, (&a, &b)) in t.iter().zip(w).enumerate() {
                    assert!(
                        (a as f64 - b).abs() <= 1e-6 * (1.0 + b.abs()),
                        "{what} (fuse {fuse}, run {run}) fetch {k} [{j}]: {a} vs {b}"
                    );
                }
            }
        }
    }
}

fn map(v: &[f32], f: impl Fn(f64) -> f64) -> Vec<f64> {
    v.iter().map(|&x| f(x as f64)).collect()
}

#[test]
fn producers_write_into_the_concatenation() {
    let dims = vec![1, 3, 4, 5];
    let mut g = Graph::new();
    let x = g.placeholder("x", dims.clone(), DType::F32).unwrap();
    let a = g.neg(x).unwrap();
    let b = g.exp(x).unwrap();
    let c = g.abs(x).unwrap();
    let y = g.concat(&[a, b, c], 1).unwrap();
    let (xv, xt) = feed(&dims);
    let parts = [
        (dims.clone(), map(&xv, |v| -v)),
        (dims.clone(), map(&xv, f64::exp)),
        (dims.clone(), map(&xv, f64::abs)),
    ];
    // The last reader of the feed writes over it in place, so it is not placed.
    check(
        "three producers",
        &g,
        &[(x, xt)],
        &[y],
        &[concat_f64(&parts, 1)],
        2,
    );
}

#[test]
fn feeds_constants_and_repeated_inputs_are_copied() {
    let dims = vec![1, 2, 3, 4];
    let mut g = Graph::new();
    let x = g.placeholder("x", dims.clone(), DType::F32).unwrap();
    let cv: Vec<f32> = (0..24).map(|i| i as f32 * 0.5).collect();
    let k = g
        .constant(HostTensor::new(dims.clone(), cv.clone()).unwrap())
        .unwrap();
    let a = g.neg(x).unwrap();
    // A feed, a constant and a computed value; then one value twice.
    let y = g.concat(&[a, x, k], 1).unwrap();
    let z = g.concat(&[a, a], 1).unwrap();
    let (xv, xt) = feed(&dims);
    let neg = map(&xv, |v| -v);
    let want_y = concat_f64(
        &[
            (dims.clone(), neg.clone()),
            (dims.clone(), map(&xv, |v| v)),
            (dims.clone(), map(&cv, |v| v)),
        ],
        1,
    );
    let want_z = concat_f64(&[(dims.clone(), neg.clone()), (dims.clone(), neg)], 1);
    check(
        "feed, constant, repeated",
        &g,
        &[(x, xt)],
        &[y, z],
        &[want_y, want_z],
        1,
    );
}

#[test]
fn inputs_read_after_the_concatenation_and_nested_concatenations_keep_their_values() {
    let dims = vec![1, 2, 3, 3];
    let mut g = Graph::new();
    let x = g.placeholder("x", dims.clone(), DType::F32).unwrap();
    let a = g.neg(x).unwrap();
    let b = g.exp(x).unwrap();
    let inner = g.concat(&[a, b], 1).unwrap();
    let c = g.abs(x).unwrap();
    let outer = g.concat(&[inner, c], 1).unwrap();
    // `a` is read again after both concatenations, and fetched; `b` feeds more work.
    let later = g.add(a, b).unwrap();
    let (xv, xt) = feed(&dims);
    let (na, eb, ac) = (map(&xv, |v| -v), map(&xv, f64::exp), map(&xv, f64::abs));
    let mut inner_dims = dims.clone();
    inner_dims[1] = 4;
    let want_inner = concat_f64(&[(dims.clone(), na.clone()), (dims.clone(), eb.clone())], 1);
    let want_outer = concat_f64(&[(inner_dims, want_inner.clone()), (dims.clone(), ac)], 1);
    let want_later: Vec<f64> = na.iter().zip(&eb).map(|(p, q)| p + q).collect();
    check(
        "nested, read later",
        &g,
        &[(x, xt)],
        &[outer, later, a, inner],
        &[want_outer, want_later, na, want_inner],
        2,
    );
}

#[test]
fn two_images_and_axis_zero() {
    // Two images along channels: each input is two runs of the output, so nothing is
    // placed; along axis 0 each input is one run again.
    let dims = vec![2, 3, 2, 2];
    let mut g = Graph::new();
    let x = g.placeholder("x", dims.clone(), DType::F32).unwrap();
    let a = g.neg(x).unwrap();
    let b = g.exp(x).unwrap();
    let y = g.concat(&[a, b], 1).unwrap();
    let (xv, xt) = feed(&dims);
    let parts = [
        (dims.clone(), map(&xv, |v| -v)),
        (dims.clone(), map(&xv, f64::exp)),
    ];
    check(
        "two images",
        &g,
        &[(x, xt.clone())],
        &[y],
        &[concat_f64(&parts, 1)],
        0,
    );
    for fuse in [false, true] {
        let plan = compile::compile(&g, &[y], &target(fuse)).unwrap();
        assert_eq!(placed(&plan), 0, "two images place nothing");
    }
    let mut g = Graph::new();
    let x = g.placeholder("x", dims.clone(), DType::F32).unwrap();
    let a = g.neg(x).unwrap();
    let b = g.exp(x).unwrap();
    let y = g.concat(&[a, b], 0).unwrap();
    check("axis 0", &g, &[(x, xt)], &[y], &[concat_f64(&parts, 0)], 1);
}

/// Work between the inputs' producers and the concatenation (a chain of values of another
/// slot) must not be planned inside the output's storage, which the inputs already hold;
/// and an input handed over in place to a step after the concatenation is not placed
/// (that step would write over the output).
#[test]
fn the_output_lives_from_its_first_input() {
    let dims = vec![1, 4, 8, 8];
    let mut g = Graph::new();
    let x = g.placeholder("x", dims.clone(), DType::F32).unwrap();
    let a = g.neg(x).unwrap();
    let b = g.exp(x).unwrap();
    let mut t = g.abs(x).unwrap();
    for _ in 0..3 {
        let u = g.sin(t).unwrap();
        t = g.add(u, t).unwrap();
    }
    let y = g.concat(&[a, b, t], 1).unwrap();
    // After the concatenation: `b`'s last reader, which could take its slot in place.
    let m = g.max(y, wgflow::Axes::All, true).unwrap();
    let later = g.sub(b, m).unwrap();
    let (xv, xt) = feed(&dims);
    let tv: Vec<f64> = xv
        .iter()
        .map(|&v| {
            let mut t = (v as f64).abs();
            for _ in 0..3 {
                // In f32 as the graph computes it.
                t = ((t as f32).sin() + t as f32) as f64;
            }
            t
        })
        .collect();
    let want_y = concat_f64(
        &[
            (dims.clone(), map(&xv, |v| -v)),
            (dims.clone(), map(&xv, |v| (v as f32).exp() as f64)),
            (dims.clone(), tv),
        ],
        1,
    );
    let top = want_y.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let want_later: Vec<f64> = map(&xv, |v| (v as f32).exp() as f64 - top);
    check(
        "chain before, reader after",
        &g,
        &[(x, xt)],
        &[y, later, x],
        &[want_y, want_later, map(&xv, |v| v)],
        1,
    );
}

/// A transpose of a constant (weights laid out for a product, as the ONNX importer's integer
/// convolutions do) is computed once when the plan is compiled, like an elementwise step of
/// constants: the plan has no permute step, the product reads a constant (which cpu:0 packs
/// once), and the values match the hand-computed product. Without folding the step stays.
#[test]
fn a_transposed_constant_is_folded_into_a_constant() {
    let mut g = Graph::new();
    // w: [2, 3, 2] = 0..12; wt = transpose(w, [2, 0, 1]) reshaped to [2, 6].
    let w: Vec<i32> = (0..12).collect();
    let wc = g.constant(HostTensor::new([2, 3, 2], w).unwrap()).unwrap();
    let wt = g.transpose(wc, &[2, 0, 1]).unwrap();
    let wt = g.reshape(wt, &[2, 6]).unwrap();
    let x = g.placeholder("x", [6, 1], DType::I32).unwrap();
    let y = g.matmul(wt, x).unwrap();
    let permutes = |plan: &Plan| steps_of(plan, |k| matches!(k, Kernel::Permute(_)));
    assert_eq!(
        permutes(&compile::compile(&g, &[y], &target(true)).unwrap()),
        0
    );
    assert_eq!(
        permutes(&compile::compile(&g, &[y], &target(false)).unwrap()),
        1
    );
    let xs: Vec<i32> = vec![1, -2, 3, 5, 0, 7];
    let options = SessionOptions {
        default_device: Some(Device::Cpu),
        ..Default::default()
    };
    let mut s = Session::new(&g, options).unwrap();
    let got = s
        .run(&[(x, HostTensor::new([6, 1], xs.clone()).unwrap())], &[y])
        .unwrap();
    // wt[c, a * 3 + b] = w[a, b, c] = a * 6 + b * 2 + c.
    let want: Vec<i32> = (0..2)
        .map(|c| {
            (0..6)
                .map(|k| ((k / 3) * 6 + (k % 3) * 2 + c) * xs[k as usize])
                .sum()
        })
        .collect();
    assert_eq!(got[0].to_vec::<i32>().unwrap(), want);
}

//! Gradients of users' kernels. Typed elementwise functions are differentiated symbolically:
//! against central finite differences (with broadcasting) on cpu:0 and every GPU against
//! cpu:0, every primitive through `apply_expr`, stops at integer inputs and casts, second
//! derivatives, one backward node per input that fuses. Raw WGSL kernels: gradient kernels
//! on every GPU against float64, and the errors (no gradient kernel, a bad one, saving).

use crate::common::grad::{check, rand, uniform};
use crate::common::{assert_close, gpus, session_on};
use wgflow::ops::custom::{select, ElementwiseFn, Invocations, OutputRule, RawWgsl};
use wgflow::ops::{BinaryOp, Expr, Op, UnaryOp};
use wgflow::{Axes, DType, Device, Error, Graph, HostTensor};

const EPS: f32 = 1e-2;
const RTOL: f32 = 2e-2;
const ATOL: f32 = 2e-3;

fn t(shape: &[usize], v: &[f32]) -> HostTensor {
    HostTensor::new(shape.to_vec(), v.to_vec()).unwrap()
}

fn all_devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

/// `0.5 + k/10` (plus `offset`) for random `k` in `0..=15`: two tensors with offsets 0 and
/// 0.05 are positive and never closer than 0.05 (no ties or branch switches within a step).
fn positive_grid(shape: &[usize], seed: u64, offset: f32) -> HostTensor {
    let n = shape.iter().product();
    let v: Vec<f32> = uniform(n, 0.0, 1.5, seed)
        .into_iter()
        .map(|x| 0.5 + (x * 10.0).round() / 10.0 + offset)
        .collect();
    HostTensor::new(shape.to_vec(), v).unwrap()
}

fn tanh_fn() -> ElementwiseFn {
    ElementwiseFn::new("tanh_fma", |[a, b]| (a * b + a.exp()).tanh())
        .signature("f32(f32, f32)")
        .unwrap()
}

#[test]
fn function_gradients_match_finite_differences_with_broadcasting() {
    let f = tanh_fn();
    for (sa, sb) in [(&[3, 4][..], &[4][..]), (&[2, 1, 3][..], &[1, 4, 1][..])] {
        check(
            &format!("tanh(a·b + e^a) {sa:?} with {sb:?}"),
            &|g, x| g.apply(&f, &[x[0], x[1]]),
            &[rand(sa, -1.0, 1.0, 1), rand(sb, -1.0, 1.0, 2)],
            &[0, 1],
            EPS,
            RTOL,
            ATOL,
        );
    }
}

#[test]
fn every_var_operation_differentiates() {
    let f = ElementwiseFn::new("everything", |[a, b]| {
        select(a.greater(b), a.pow(b), a.min(b) * 2.0)
            + (a.abs() + 1.0).log()
            + b.sigmoid() / b.sqrt()
            - a.max(b).tanh() * (a - b).relu()
            + (a - b).exp() / 3.0
            + (-a).cast(DType::F32) * b
    })
    .signature("f32(f32, f32)")
    .unwrap();
    for (sa, sb) in [(&[3, 4][..], &[4][..]), (&[2, 1, 3][..], &[1, 4, 1][..])] {
        check(
            &format!("everything {sa:?} with {sb:?}"),
            &|g, x| g.apply(&f, &[x[0], x[1]]),
            &[positive_grid(sa, 3, 0.0), positive_grid(sb, 4, 0.05)],
            &[0, 1],
            EPS,
            RTOL,
            ATOL,
        );
    }
}

#[test]
fn every_primitive_differentiates_inside_a_function() {
    // The same rules as the built-in ops, reached through a function node (`apply_expr`).
    let s = [3, 4];
    let unary: Vec<(UnaryOp, HostTensor)> = vec![
        (UnaryOp::Neg, rand(&s, -2.0, 2.0, 1)),
        (UnaryOp::Exp, rand(&s, -2.0, 2.0, 2)),
        (UnaryOp::Log, rand(&s, 0.3, 3.0, 3)),
        (UnaryOp::Sqrt, rand(&s, 0.3, 3.0, 4)),
        (UnaryOp::Tanh, rand(&s, -2.0, 2.0, 5)),
        (UnaryOp::Sigmoid, rand(&s, -3.0, 3.0, 6)),
        (UnaryOp::Floor, positive_grid(&s, 7, 0.05)),
        (UnaryOp::Reciprocal, rand(&s, 0.4, 2.0, 8)),
        (UnaryOp::Rsqrt, rand(&s, 0.3, 3.0, 9)),
        (UnaryOp::Log1p, rand(&s, -0.5, 2.0, 10)),
        (UnaryOp::Expm1, rand(&s, -2.0, 2.0, 11)),
        (UnaryOp::Sin, rand(&s, -3.0, 3.0, 12)),
        (UnaryOp::Cos, rand(&s, -3.0, 3.0, 13)),
        (UnaryOp::Erf, rand(&s, -2.0, 2.0, 14)),
        (UnaryOp::Softplus, rand(&s, -3.0, 3.0, 15)),
    ];
    for (op, x) in unary {
        // op(x) · x, so a zero-gradient op still leaves op(x) as the gradient.
        let e = Expr::binary(
            BinaryOp::Mul,
            Expr::unary(op, Expr::input(0)),
            Expr::input(0),
        );
        check(
            op.name(),
            &|g, x| g.apply_expr(op.name(), e.clone(), &[x[0]]),
            &[x],
            &[0],
            EPS,
            RTOL,
            ATOL,
        );
    }
    let binary = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
        BinaryOp::Pow,
    ];
    for op in binary {
        let e = Expr::binary(op, Expr::input(0), Expr::input(1));
        check(
            op.name(),
            &|g, x| g.apply_expr(op.name(), e.clone(), &[x[0], x[1]]),
            &[
                positive_grid(&[3, 4], 16, 0.0),
                positive_grid(&[4], 17, 0.05),
            ],
            &[0, 1],
            EPS,
            RTOL,
            ATOL,
        );
    }
}

#[test]
fn integer_inputs_and_integer_casts_stop_the_gradient() {
    // a · f32(n) + f32(i32(a)): d/da = n (the cast through i32 stops), d/dn is None.
    let f = ElementwiseFn::new("scale", |[a, n]| {
        a * n.cast(DType::F32) + a.cast(DType::I32).cast(DType::F32)
    })
    .signature("f32(f32, i32)")
    .unwrap();
    let mut g = Graph::new();
    let a = g
        .constant(t(&[2, 3], &[0.5, 1.5, -2.0, 3.0, 0.0, 7.25]))
        .unwrap();
    let n = g.constant([2i32, -3, 5]).unwrap();
    let y = g.apply(&f, &[a, n]).unwrap();
    let y = g.sum(y, Axes::All, false).unwrap();
    let d = g.gradients(y, &[a, n]).unwrap();
    assert!(d[1].is_none(), "the i32 input has no gradient");
    let want = t(&[2, 3], &[2.0, -3.0, 5.0, 2.0, -3.0, 5.0]);
    for dev in all_devices() {
        let out = session_on(&g, dev).run(&[], &[d[0].unwrap()]).unwrap();
        assert_close(&format!("d/da on {dev}"), &out[0], &want, 0.0, 0.0);
    }
    // A function whose only path to `a` is a comparison: None.
    let sign = ElementwiseFn::new("step", |[a]| a.greater(0.0).cast(DType::F32))
        .signature("f32(f32)")
        .unwrap();
    let s = g.apply(&sign, &[a]).unwrap();
    let s = g.sum(s, Axes::All, false).unwrap();
    assert_eq!(g.gradients(s, &[a]).unwrap(), vec![None]);
}

#[test]
fn a_piecewise_constant_function_has_a_zero_gradient() {
    // floor(a) + sign(b) with b broadcast: zeros of each input's shape, not None.
    let e = Expr::binary(
        BinaryOp::Add,
        Expr::unary(UnaryOp::Floor, Expr::input(0)),
        Expr::unary(UnaryOp::Sign, Expr::input(1)),
    );
    let mut g = Graph::new();
    let a = g
        .constant(t(&[2, 3], &[0.5, -1.5, 2.0, 3.0, 0.0, -7.25]))
        .unwrap();
    let b = g.constant(t(&[3], &[-1.0, 0.0, 4.0])).unwrap();
    let y = g.apply_expr("steps", e, &[a, b]).unwrap();
    let y = g.sum(y, Axes::All, false).unwrap();
    let d = g.gradients(y, &[a, b]).unwrap();
    let fetch = [d[0].unwrap(), d[1].unwrap()];
    for dev in all_devices() {
        let out = session_on(&g, dev).run(&[], &fetch).unwrap();
        assert_close(
            &format!("da on {dev}"),
            &out[0],
            &t(&[2, 3], &[0.0; 6]),
            0.0,
            0.0,
        );
        assert_close(
            &format!("db on {dev}"),
            &out[1],
            &t(&[3], &[0.0; 3]),
            0.0,
            0.0,
        );
    }
}

#[test]
fn second_derivative_of_a_function() {
    // The gradient node is a function node too, so it differentiates again:
    // d²/dx² (x³ + sin x) = 6x - sin x.
    let x3 = Expr::binary(
        BinaryOp::Mul,
        Expr::binary(BinaryOp::Mul, Expr::input(0), Expr::input(0)),
        Expr::input(0),
    );
    let e = Expr::binary(BinaryOp::Add, x3, Expr::unary(UnaryOp::Sin, Expr::input(0)));
    let xs = [-1.5f32, -0.25, 0.5, 2.0];
    let mut g = Graph::new();
    let x = g.constant(t(&[4], &xs)).unwrap();
    let y = g.apply_expr("cubic", e, &[x]).unwrap();
    let y = g.sum(y, Axes::All, false).unwrap();
    let d1 = g.gradients(y, &[x]).unwrap()[0].unwrap();
    let d1 = g.sum(d1, Axes::All, false).unwrap();
    let d2 = g.gradients(d1, &[x]).unwrap()[0].unwrap();
    let want: Vec<f32> = xs
        .iter()
        .map(|&v| (6.0 * v as f64 - (v as f64).sin()) as f32)
        .collect();
    for dev in all_devices() {
        let out = session_on(&g, dev).run(&[], &[d2]).unwrap();
        assert_close(
            &format!("x³ + sin x '' on {dev}"),
            &out[0],
            &t(&[4], &want),
            1e-5,
            1e-5,
        );
    }
}

#[test]
fn a_function_gets_one_backward_node_per_input_and_it_fuses() {
    // y = tanh(a·b + e^a) as one function node, b [32] broadcast over a [64, 32]. The
    // backward pass adds exactly two function nodes (`tanh_fma_grad0`, `tanh_fma_grad1`) and
    // b's sum over rows. Plan: the forward function has 4 ops and reads one full-size input,
    // so both gradient kernels recompute it rather than read it (it gets no kernel of its
    // own), and the broadcast seed `dy` is read in place: grad0, grad1 and the row sum, 3
    // kernels. (grad1 stays apart from the sum because it reads the seed through a strided
    // view, which a reduction prologue does not take.)
    let f = tanh_fn();
    let mut g = Graph::new();
    let a = g.placeholder("a", [64, 32], DType::F32).unwrap();
    let b = g.placeholder("b", [32], DType::F32).unwrap();
    let y = g.apply(&f, &[a, b]).unwrap();
    let loss = g.sum(y, Axes::All, false).unwrap();
    let before = g.len();
    let d = g.gradients(loss, &[a, b]).unwrap();
    let custom: Vec<String> = g
        .nodes()
        .skip(before)
        .filter(|(_, n)| matches!(n.op, Op::Custom(_)))
        .map(|(_, n)| n.name.clone())
        .collect();
    assert_eq!(custom.len(), 2, "{custom:?}");
    assert!(custom[0].ends_with("tanh_fma_grad0") && custom[1].ends_with("tanh_fma_grad1"));
    let (da, db) = (d[0].unwrap(), d[1].unwrap());
    let av = rand(&[64, 32], -1.0, 1.0, 1);
    let bv = rand(&[32], -1.0, 1.0, 2);
    let (xs, bs) = (av.to_f32().unwrap(), bv.to_f32().unwrap());
    let mut want_da = vec![0f32; 64 * 32];
    let mut want_db = vec![0f64; 32];
    for r in 0..64 {
        for c in 0..32 {
            let (x, bc) = (xs[r * 32 + c] as f64, bs[c] as f64);
            let th = (x * bc + x.exp()).tanh();
            let h = 1.0 - th * th;
            want_da[r * 32 + c] = (h * (bc + x.exp())) as f32;
            want_db[c] += h * x;
        }
    }
    let want_db: Vec<f32> = want_db.iter().map(|&v| v as f32).collect();
    for dev in all_devices() {
        let mut s = session_on(&g, dev);
        let plan = s.plan(&[da, db]).unwrap();
        assert!(
            plan.dispatch_count() <= 3,
            "on {dev}: {} kernels, want at most 3:\n{}",
            plan.dispatch_count(),
            plan.describe()
        );
        let out = s
            .run(&[(a, av.clone()), (b, bv.clone())], &[da, db])
            .unwrap();
        assert_close(
            &format!("da on {dev}"),
            &out[0],
            &t(&[64, 32], &want_da),
            1e-4,
            1e-5,
        );
        assert_close(
            &format!("db on {dev}"),
            &out[1],
            &t(&[32], &want_db),
            1e-4,
            1e-4,
        );
    }
}

// ---------------------------------------------------------------- raw WGSL kernels

/// `y = a · x²` over two equally long f32 inputs.
const AX2: &str = r#"
@group(0) @binding(0) var<storage, read_write> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i < arrayLength(&y)) { y[i] = a[i] * x[i] * x[i]; }
}
"#;

/// The gradient of `a`: `x² · dy`.
const AX2_DA: &str = r#"
@group(0) @binding(0) var<storage, read_write> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> dy: array<f32>;
@group(0) @binding(3) var<storage, read_write> da: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i < arrayLength(&da)) { da[i] = x[i] * x[i] * dy[i]; }
}
"#;

/// The gradient of `x`: `2 · a · x · dy`.
const AX2_DX: &str = r#"
@group(0) @binding(0) var<storage, read_write> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> dy: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i < arrayLength(&dx)) { dx[i] = 2.0 * a[i] * x[i] * dy[i]; }
}
"#;

fn raw(name: &str, src: &str, like: usize) -> RawWgsl {
    RawWgsl::new(
        name,
        src,
        "main",
        OutputRule::LikeInput(like),
        Invocations::PerOutputElement,
    )
}

fn ax2() -> RawWgsl {
    raw("ax2", AX2, 1)
        .with_gradient(0, raw("ax2_da", AX2_DA, 0))
        .with_gradient(1, raw("ax2_dx", AX2_DX, 1))
}

#[test]
fn raw_kernel_gradient_kernels_on_every_gpu() {
    // loss = Σ tanh(a·x²)·w, so dy = w·(1 - tanh²) reaches the gradient kernels.
    let n = 1000; // several workgroups, the last one partial
    let (av, xv, wv) = (
        uniform(n, -1.0, 1.0, 1),
        uniform(n, -1.5, 1.5, 2),
        uniform(n, 0.5, 1.5, 3),
    );
    let mut g = Graph::new();
    let a = g.constant(t(&[n], &av)).unwrap();
    let x = g.constant(t(&[n], &xv)).unwrap();
    let w = g.constant(t(&[n], &wv)).unwrap();
    let y = g.raw_kernel(&ax2(), &[a, x]).unwrap();
    let th = g.tanh(y).unwrap();
    let yw = g.mul(th, w).unwrap();
    let loss = g.sum(yw, Axes::All, false).unwrap();
    let d = g.gradients(loss, &[a, x]).unwrap();
    let (da, dx) = (d[0].unwrap(), d[1].unwrap());
    let mut want_da = Vec::with_capacity(n);
    let mut want_dx = Vec::with_capacity(n);
    for i in 0..n {
        let (a, x, w) = (av[i] as f64, xv[i] as f64, wv[i] as f64);
        let dy = w * (1.0 - (a * x * x).tanh().powi(2));
        want_da.push((x * x * dy) as f32);
        want_dx.push((2.0 * a * x * dy) as f32);
    }
    let gpus = gpus();
    for &dev in &gpus {
        let out = session_on(&g, dev).run(&[], &[da, dx]).unwrap();
        assert_close(
            &format!("da on {dev}"),
            &out[0],
            &t(&[n], &want_da),
            1e-5,
            1e-6,
        );
        assert_close(
            &format!("dx on {dev}"),
            &out[1],
            &t(&[n], &want_dx),
            1e-5,
            1e-6,
        );
    }
    // On cpu:0 the raw kernels cannot run: an error, not a wrong answer.
    assert!(session_on(&g, Device::Cpu).run(&[], &[da]).is_err());
}

#[test]
fn a_raw_kernel_without_gradient_is_not_differentiable() {
    let mut g = Graph::new();
    let a = g.constant(t(&[4], &[1.0, 2.0, 3.0, 4.0])).unwrap();
    let x = g.constant(t(&[4], &[1.0, 2.0, 3.0, 4.0])).unwrap();
    // No gradient kernels at all.
    let y = g.raw_kernel(&raw("plain", AX2, 1), &[a, x]).unwrap();
    let s = g.sum(y, Axes::All, false).unwrap();
    match g.gradients(s, &[x]) {
        Err(Error::NotDifferentiable { op, node, message }) => {
            assert_eq!((op.as_str(), node.as_str()), ("raw_wgsl", "plain"));
            assert!(
                message.contains("input 1") && message.contains("with_gradient"),
                "{message}"
            );
        }
        other => panic!("expected NotDifferentiable, got {other:?}"),
    }
    // A gradient kernel for a only: asking for x fails, asking for a works.
    let half = raw("half", AX2, 1).with_gradient(0, raw("half_da", AX2_DA, 0));
    let y = g.raw_kernel(&half, &[a, x]).unwrap();
    let s = g.sum(y, Axes::All, false).unwrap();
    let e = g.gradients(s, &[a, x]).unwrap_err().to_string();
    assert!(e.contains("'half'") && e.contains("input 1"), "{e}");
    assert!(g.gradients(s, &[a]).unwrap()[0].is_some());
}

#[test]
fn bad_gradient_kernels_are_rejected() {
    let mut g = Graph::new();
    let a = g.constant(t(&[4], &[1.0, 2.0, 3.0, 4.0])).unwrap();
    let x = g.constant(t(&[4], &[1.0, 2.0, 3.0, 4.0])).unwrap();
    // An input the kernel does not have.
    let k = raw("k", AX2, 1).with_gradient(2, raw("k_d2", AX2_DA, 0));
    let e = g.raw_kernel(&k, &[a, x]).unwrap_err();
    assert!(
        matches!(&e, Error::Build { message, .. } if message.contains("input 2")),
        "{e:?}"
    );
    // A gradient kernel that does not validate: an error when the forward node is built.
    let k = raw("k", AX2, 1).with_gradient(0, raw("k_da", "fn broken(", 0));
    assert!(matches!(
        g.raw_kernel(&k, &[a, x]),
        Err(Error::Shader { .. })
    ));
    // A gradient of the wrong shape.
    let wrong = RawWgsl::new(
        "k_da",
        AX2_DA,
        "main",
        OutputRule::Fixed(wgflow::Shape::new([2]), DType::F32),
        Invocations::PerOutputElement,
    );
    let k = raw("k", AX2, 1).with_gradient(0, wrong);
    let y = g.raw_kernel(&k, &[a, x]).unwrap();
    let s = g.sum(y, Axes::All, false).unwrap();
    match g.gradients(s, &[a]) {
        Err(Error::NotDifferentiable { message, .. }) => {
            assert!(
                message.contains("'k_da'") && message.contains("[2]"),
                "{message}"
            )
        }
        other => panic!("expected NotDifferentiable, got {other:?}"),
    }
}

#[test]
fn graph_files_refuse_raw_kernels_with_gradient_kernels() {
    let mut g = Graph::new();
    let a = g.constant(t(&[4], &[1.0, 2.0, 3.0, 4.0])).unwrap();
    g.raw_kernel(&raw("plain", AX2, 1), &[a, a]).unwrap();
    assert!(g.to_json().is_ok());
    g.raw_kernel(&ax2(), &[a, a]).unwrap();
    let e = g.to_json().unwrap_err().to_string();
    assert!(e.contains("'ax2'") && e.contains("gradient kernels"), "{e}");
}

//! cpu:0's fast elementwise path (`ops/elementwise/cpu.rs`: chunked, vectorized, parallel)
//! against the node-by-node reference evaluator (bit for bit: every op, cast and dtype on
//! special values, broadcasts, views, in-place outputs, random DAGs) and against float64
//! computed here (sizes at chunk and parallel-split boundaries, broadcasting of every kind,
//! views fused by the compiler, in-place chains, long chains). The math functions' error
//! sweeps are in `tests/vmath.rs`.

use wgflow::ops::elementwise::{InputView, CPU_CHUNK as CHUNK, CPU_PARALLEL_WORK as PAR};
use wgflow::ops::{BinaryOp, CpuIn, ElementwiseKernel, Expr, KernelDef, Node, UnaryOp};
use wgflow::{DType, Device, Graph, HostTensor, Session, SessionOptions, Shape, SliceArg, Tensor};

// ---------------------------------------------------------------- helpers

/// A deterministic xorshift stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Values in [-1, 1) on a grid of 1/1024 (so products and sums are exact in f64).
    fn f32s(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (self.below(2048) as f32 - 1024.0) / 1024.0)
            .collect()
    }
}

fn kernel(expr: Expr, inputs: &[(&[usize], DType)], out: &[usize]) -> ElementwiseKernel {
    let inputs: Vec<(Shape, DType)> = inputs
        .iter()
        .map(|(s, d)| (Shape::new(s.to_vec()), *d))
        .collect();
    let dtypes: Vec<DType> = inputs.iter().map(|(_, d)| *d).collect();
    let out_dtype = expr.dtype(&dtypes);
    ElementwiseKernel {
        expr,
        inputs,
        out_shape: Shape::new(out.to_vec()),
        out_dtype,
        views: Vec::new(),
    }
}

/// The fast path (through both entry points) equals the reference bit for bit.
fn check(k: &ElementwiseKernel, data: &[&[u32]], what: &str) {
    check_nan(k, data, what, false)
}

/// [`check`]; with `any_nan`, an f32 NaN matches any f32 NaN (see `random_dags_...`).
fn check_nan(k: &ElementwiseKernel, data: &[&[u32]], what: &str, any_nan: bool) {
    let same = |a: u32, b: u32| {
        a == b
            || (any_nan
                && k.out_dtype == DType::F32
                && f32::from_bits(a).is_nan()
                && f32::from_bits(b).is_nan())
    };
    let want = k.reference(data);
    let got = k.run_fast(data);
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = (0..got.len()).find(|&i| !same(got[i], want[i])) {
        panic!(
            "{what}: {}: element {i} is {:#010x}, the reference gives {:#010x}",
            k.expr.describe(),
            got[i],
            want[i]
        );
    }
    let ins: Vec<CpuIn<'_>> = data.iter().map(|w| CpuIn::Words(w)).collect();
    let mut out = vec![0xdead_beef; want.len()];
    k.run_cpu_into(&ins, &mut out).unwrap();
    assert!(
        out.iter().zip(&want).all(|(&a, &b)| same(a, b)),
        "{what}: run_cpu_into differs"
    );
}

fn specials(d: DType) -> Vec<u32> {
    let f = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    match d {
        DType::F32 => {
            let mut v = f(&[
                0.0,
                -0.0,
                1.0,
                -1.0,
                0.5,
                -0.5,
                1.5,
                -2.5,
                2.0,
                3.0,
                0.1,
                -7.25,
                1e-8,
                -1e-8,
                1e-40,
                -1e-40,
                f32::from_bits(1),
                f32::MIN_POSITIVE,
                f32::MAX,
                f32::MIN,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::NAN,
                88.72,
                89.0,
                -103.9,
                -110.0,
                1e10,
                -3e9,
                2147483648.0,
                4294967296.0,
                16777216.0,
            ]);
            // A quiet NaN with a payload, and x86's default NaN (negative).
            v.extend([0x7fc0_1234, 0xffc0_0000]);
            v
        }
        DType::F16 => vec![
            0, 0x8000, 0x3c00, 0xbc00, 0x3800, 0x4100, 0xc500, 0x7c00, 0xfc00, 0x7e00, 0x0001,
            0x8001, 0x0400, 0x7bff, 0xfbff, 0x5640, 0x2e66, 0x1000,
        ],
        DType::I32 => [
            0,
            1,
            -1,
            2,
            -2,
            3,
            -7,
            7,
            31,
            32,
            100,
            -100,
            65536,
            i32::MIN,
            i32::MIN + 1,
            i32::MAX,
        ]
        .iter()
        .map(|&x| x as u32)
        .collect(),
        DType::U32 => vec![
            0,
            1,
            2,
            3,
            7,
            31,
            32,
            100,
            65536,
            1 << 31,
            u32::MAX - 1,
            u32::MAX,
        ],
        DType::Bool => vec![0, 1],
    }
}

const DTYPES: [DType; 5] = [DType::F32, DType::F16, DType::I32, DType::U32, DType::Bool];

/// `words` repeated to `n` words.
fn cycle(words: &[u32], n: usize) -> Vec<u32> {
    words.iter().copied().cycle().take(n).collect()
}

fn session(g: &Graph, fuse: bool) -> Session {
    Session::new(
        g,
        SessionOptions {
            default_device: Some(Device::Cpu),
            visible_devices: Some(Vec::new()),
            fuse,
            fold_constants: false,
            ..Default::default()
        },
    )
    .unwrap()
}

fn f32s_of(t: &HostTensor) -> Vec<f32> {
    t.to_f32().unwrap()
}

/// `got` within `tol · (1 + |want|)` of float64 `want`, NaN for NaN.
fn assert_near(what: &str, got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else {
            (f64::from(g) - w).abs() <= tol * (1.0 + w.abs())
        };
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

// ---------------------------------------------------------------- every op, bit for bit

#[test]
fn every_unary_op_on_every_dtype_matches_the_reference() {
    for d in DTYPES {
        let words = cycle(&specials(d), CHUNK + 37);
        let n = words.len();
        for op in UnaryOp::ALL {
            let e = Expr::unary(op, Expr::input(0));
            check(
                &kernel(e.clone(), &[(&[n], d)], &[n]),
                &[&words],
                &format!("{op:?} {d}"),
            );
            // A broadcast scalar operand is folded when the program is built.
            for &w in &specials(d) {
                let k = kernel(e.clone(), &[(&[1], d)], &[3, 5]);
                check(&k, &[&[w]], &format!("{op:?} {d} of scalar {w:#x}"));
            }
        }
    }
}

#[test]
fn every_binary_op_on_every_dtype_matches_the_reference() {
    for d in DTYPES {
        // Which of two NaNs with different payloads an IEEE operation returns is not
        // specified, and LLVM may commute the operands of an addition, so the pairs use one
        // NaN (the unary test keeps the others).
        let sp: Vec<u32> = specials(d)
            .into_iter()
            .filter(|&w| {
                !(d == DType::F32 && f32::from_bits(w).is_nan() && w != f32::NAN.to_bits())
            })
            .collect();
        // Every pair of special values, then the same with either operand a scalar.
        let a: Vec<u32> = sp.iter().flat_map(|&x| sp.iter().map(move |_| x)).collect();
        let b: Vec<u32> = sp.iter().flat_map(|_| sp.iter().copied()).collect();
        let (a, b) = (cycle(&a, 2 * CHUNK + 3), cycle(&b, 2 * CHUNK + 3));
        let n = a.len();
        for op in BinaryOp::ALL {
            let e = Expr::binary(op, Expr::input(0), Expr::input(1));
            let what = format!("{op:?} {d}");
            check(
                &kernel(e.clone(), &[(&[n], d), (&[n], d)], &[n]),
                &[&a, &b],
                &what,
            );
            for &w in &sp {
                let k = kernel(e.clone(), &[(&[], d), (&[sp.len()], d)], &[sp.len()]);
                check(&k, &[&[w], &sp], &format!("{what}, scalar {w:#x} first"));
                let k = kernel(e.clone(), &[(&[sp.len()], d), (&[], d)], &[sp.len()]);
                check(&k, &[&sp, &[w]], &format!("{what}, scalar {w:#x} second"));
                let k = kernel(e.clone(), &[(&[], d), (&[1], d)], &[4]);
                check(&k, &[&[w], &[sp[1]]], &format!("{what}, both scalars"));
            }
            // One input used for both operands.
            let e = Expr::binary(op, Expr::input(0), Expr::input(0));
            check(
                &kernel(e, &[(&[n], d)], &[n]),
                &[&a],
                &format!("{what} (x, x)"),
            );
        }
    }
}

#[test]
fn every_cast_and_select_matches_the_reference() {
    for from in DTYPES {
        let words = cycle(&specials(from), CHUNK + 1);
        let n = words.len();
        for to in DTYPES {
            let e = Expr::cast(to, Expr::input(0));
            check(
                &kernel(e, &[(&[n], from)], &[n]),
                &[&words],
                &format!("cast {from} -> {to}"),
            );
        }
        let mut rng = Rng(7);
        let cond: Vec<u32> = (0..n).map(|_| rng.below(2) as u32).collect();
        let other = cycle(&specials(from)[1..], n);
        let e = Expr::select(Expr::input(0), Expr::input(1), Expr::input(2));
        let what = format!("where over {from}");
        let k = kernel(
            e.clone(),
            &[(&[n], DType::Bool), (&[n], from), (&[n], from)],
            &[n],
        );
        check(&k, &[&cond, &words, &other], &what);
        let k = kernel(
            e.clone(),
            &[(&[n], DType::Bool), (&[], from), (&[n], from)],
            &[n],
        );
        check(&k, &[&cond, &words[2..3], &other], &what);
        let k = kernel(
            e.clone(),
            &[(&[n], DType::Bool), (&[n], from), (&[1], from)],
            &[n],
        );
        check(&k, &[&cond, &words, &other[..1]], &what);
        let k = kernel(
            e.clone(),
            &[(&[n], DType::Bool), (&[], from), (&[], from)],
            &[n],
        );
        check(&k, &[&cond, &words[..1], &other[..1]], &what);
        for c in [0, 1] {
            let k = kernel(
                e.clone(),
                &[(&[], DType::Bool), (&[n], from), (&[n], from)],
                &[n],
            );
            check(
                &k,
                &[&[c], &words, &other],
                &format!("{what}, constant condition {c}"),
            );
        }
    }
}

// ---------------------------------------------------------------- float64 references

/// W2's chain, `maximum(a*b + c, 0)*0.5 + exp(-a)`, in the graph and in float64.
fn w2(g: &mut Graph, a: Tensor, b: Tensor, c: Tensor) -> Tensor {
    let zero = g.constant(0.0f32).unwrap();
    let half = g.constant(0.5f32).unwrap();
    let ab = g.mul(a, b).unwrap();
    let abc = g.add(ab, c).unwrap();
    let m = g.maximum(abc, zero).unwrap();
    let h = g.mul(m, half).unwrap();
    let na = g.neg(a).unwrap();
    let e = g.exp(na).unwrap();
    g.add(h, e).unwrap()
}

fn w2_f64(a: f32, b: f32, c: f32) -> f64 {
    let (a, b, c) = (f64::from(a), f64::from(b), f64::from(c));
    (a * b + c).max(0.0) * 0.5 + (-a).exp()
}

#[test]
fn sizes_at_chunk_and_parallel_split_boundaries() {
    let mut rng = Rng(11);
    for n in [
        0,
        1,
        CHUNK - 1,
        CHUNK,
        CHUNK + 1,
        3 * CHUNK + 7,
        // Where W2's 7 steps and a + b's one step start to split across threads.
        PAR / 7 - 1,
        PAR / 7 + 1,
        PAR - 1,
        PAR,
        PAR + 1,
        (1 << 24) + 3,
    ] {
        let mut g = Graph::new();
        let p: Vec<Tensor> = (0..3)
            .map(|i| g.placeholder(&format!("p{i}"), [n], DType::F32).unwrap())
            .collect();
        let y = w2(&mut g, p[0], p[1], p[2]);
        let z = g.add(p[0], p[1]).unwrap();
        let vals: Vec<Vec<f32>> = (0..3).map(|_| rng.f32s(n)).collect();
        let feeds: Vec<(Tensor, HostTensor)> = (0..3)
            .map(|i| (p[i], HostTensor::new([n], vals[i].clone()).unwrap()))
            .collect();
        let out = session(&g, true).run(&feeds, &[y, z]).unwrap();
        let want: Vec<f64> = (0..n)
            .map(|i| w2_f64(vals[0][i], vals[1][i], vals[2][i]))
            .collect();
        assert_near(
            &format!("W2 chain, n = {n}"),
            &f32s_of(&out[0]),
            &want,
            1e-6,
        );
        // f32 sums of f32 values are the float64 sums rounded once.
        let sum: Vec<f32> = (0..n)
            .map(|i| (f64::from(vals[0][i]) + f64::from(vals[1][i])) as f32)
            .collect();
        assert_eq!(f32s_of(&out[1]), sum, "a + b, n = {n}");
        if n < 1 << 20 {
            let k = kernel(
                Expr::binary(
                    BinaryOp::Add,
                    Expr::binary(
                        BinaryOp::Mul,
                        Expr::binary(
                            BinaryOp::Maximum,
                            Expr::binary(
                                BinaryOp::Add,
                                Expr::binary(BinaryOp::Mul, Expr::input(0), Expr::input(1)),
                                Expr::input(2),
                            ),
                            Expr::lit(DType::F32, 0),
                        ),
                        Expr::lit(DType::F32, 0.5f32.to_bits()),
                    ),
                    Expr::unary(UnaryOp::Exp, Expr::unary(UnaryOp::Neg, Expr::input(0))),
                ),
                &[(&[n][..], DType::F32); 3],
                &[n],
            );
            let words: Vec<Vec<u32>> = vals
                .iter()
                .map(|v| v.iter().map(|x| x.to_bits()).collect())
                .collect();
            let data: Vec<&[u32]> = words.iter().map(Vec::as_slice).collect();
            check(&k, &data, &format!("W2 kernel, n = {n}"));
            assert_eq!(
                out[0].words(),
                &k.run_fast(&data)[..],
                "session vs kernel, n = {n}"
            );
        }
    }
}

/// `a * b + c` over broadcast shapes, against float64 rounded where f32 rounds (exact).
fn fma_like(sa: &[usize], sb: &[usize], sc: &[usize], seed: u64) {
    let mut rng = Rng(seed);
    let mut g = Graph::new();
    let shapes = [sa, sb, sc];
    let p: Vec<Tensor> = (0..3)
        .map(|i| {
            g.placeholder(&format!("p{i}"), shapes[i].to_vec(), DType::F32)
                .unwrap()
        })
        .collect();
    let ab = g.mul(p[0], p[1]).unwrap();
    let y = g.add(ab, p[2]).unwrap();
    let vals: Vec<Vec<f32>> = shapes
        .iter()
        .map(|s| rng.f32s(s.iter().product()))
        .collect();
    let feeds: Vec<(Tensor, HostTensor)> = (0..3)
        .map(|i| {
            (
                p[i],
                HostTensor::new(shapes[i].to_vec(), vals[i].clone()).unwrap(),
            )
        })
        .collect();
    let mut s = session(&g, true);
    assert_eq!(
        s.plan(&[y]).unwrap().dispatch_count(),
        1,
        "one fused kernel"
    );
    let out = s.run(&feeds, &[y]).unwrap();
    let shape = out[0].shape().clone();
    let dims = shape.dims().to_vec();
    // NumPy broadcasting by hand: the element of `s` at output index `idx`.
    let at = |s: &[usize], v: &[f32], idx: &[usize]| -> f32 {
        let off = dims.len() - s.len();
        let mut lin = 0;
        for (k, &d) in s.iter().enumerate() {
            lin = lin * d + if d == 1 { 0 } else { idx[off + k] };
        }
        v[lin]
    };
    let mut idx = vec![0; dims.len()];
    let got = f32s_of(&out[0]);
    for (i, &g) in got.iter().enumerate() {
        let mut rem = i;
        for k in (0..dims.len()).rev() {
            idx[k] = rem % dims[k];
            rem /= dims[k];
        }
        let ab = (f64::from(at(sa, &vals[0], &idx)) * f64::from(at(sb, &vals[1], &idx))) as f32;
        let want = (f64::from(ab) + f64::from(at(sc, &vals[2], &idx))) as f32;
        assert_eq!(
            g, want,
            "{sa:?} * {sb:?} + {sc:?}: element {i} (index {idx:?})"
        );
    }
}

#[test]
fn broadcasting_of_every_kind() {
    // scalar, row, column
    fma_like(&[], &[37, 129], &[129], 1);
    fma_like(&[37, 1], &[37, 129], &[1, 129], 2);
    // middle axis, rank-changing, two-sided
    fma_like(&[5, 1, 7], &[5, 300, 7], &[300, 7], 3);
    fma_like(&[7], &[5, 300, 1], &[1, 1, 7], 4);
    fma_like(&[1, 37, 129], &[37, 129], &[37, 1], 5);
    // large enough to split across threads, rows not a multiple of the chunk
    fma_like(&[64, 1], &[1, 4099], &[4099], 6);
    fma_like(&[3, 1, 1, 5], &[1, 70, 33, 1], &[70, 1, 5], 7);
    // Per-channel operands over planes of at least 256 elements (each one word per chunk,
    // chunks cut at the planes' edges): planes shorter and longer than a chunk, two
    // operands with different runs (chunks cut at their common divisor), and enough
    // channels to split across threads.
    fma_like(&[6, 1, 1], &[2, 6, 37, 29], &[1, 6, 1, 1], 8);
    fma_like(&[1, 3, 1, 1], &[2, 3, 70, 70], &[3, 1, 1], 9);
    fma_like(&[3, 1, 1], &[3, 5, 300], &[3, 5, 1], 10);
    fma_like(&[64, 1, 1], &[1, 64, 56, 56], &[1, 64, 1, 1], 11);
}

#[test]
fn strided_views_fused_into_the_consumer() {
    let (r, c) = (150, 517);
    let mut rng = Rng(21);
    let xs = rng.f32s(r * c);
    let ys = rng.f32s(r * c);
    let mut g = Graph::new();
    let x = g.placeholder("x", [r, c], DType::F32).unwrap();
    let y = g.placeholder("y", [c, r], DType::F32).unwrap();
    let yy = g.placeholder("yy", [r, c], DType::F32).unwrap();
    // transpose(y) + x
    let t = g.transpose(y, &[1, 0]).unwrap();
    let u = g.add(t, x).unwrap();
    // flip(x) * yy
    let f = g.flip(x, [0, 1]).unwrap();
    let v = g.mul(f, yy).unwrap();
    // x[::-2, 1:500:3] - x[:75, :167], a broadcast view of one row
    let s1 = g
        .slice(
            x,
            &[
                SliceArg::new(None, None, -2),
                SliceArg::new(Some(1), Some(500), 3),
            ],
        )
        .unwrap();
    let s2 = g
        .slice(x, &[SliceArg::range(0, 75), SliceArg::range(0, 167)])
        .unwrap();
    let w = g.sub(s1, s2).unwrap();
    let row = g
        .slice(yy, &[SliceArg::range(3, 4), SliceArg::range(0, c as isize)])
        .unwrap();
    let b = g.broadcast_to(row, &[r, c]).unwrap();
    let z = g.mul(b, x).unwrap();
    let outs = [u, v, w, z];
    let mut s = session(&g, true);
    let plan = s.plan(&outs).unwrap();
    assert!(
        plan.describe().contains("strided views"),
        "{}",
        plan.describe()
    );
    // Four elementwise kernels, and the one-row slice that broadcast_to reads is copied.
    assert_eq!(plan.dispatch_count(), 5, "{}", plan.describe());
    let feeds = [
        (x, HostTensor::new([r, c], xs.clone()).unwrap()),
        (y, HostTensor::new([c, r], ys.clone()).unwrap()),
        (yy, HostTensor::new([r, c], ys.clone()).unwrap()),
    ];
    let out = s.run(&feeds, &outs).unwrap();
    let add = |a: f32, b: f32| (f64::from(a) + f64::from(b)) as f32;
    let mul = |a: f32, b: f32| (f64::from(a) * f64::from(b)) as f32;
    let want_u: Vec<f32> = (0..r * c)
        .map(|i| add(ys[(i % c) * r + i / c], xs[i]))
        .collect();
    assert_eq!(f32s_of(&out[0]), want_u, "transpose");
    let want_v: Vec<f32> = (0..r * c).map(|i| mul(xs[r * c - 1 - i], ys[i])).collect();
    assert_eq!(f32s_of(&out[1]), want_v, "flip");
    let want_w: Vec<f32> = (0..75 * 167)
        .map(|i| {
            let (i0, j) = (i / 167, i % 167);
            add(xs[(r - 1 - 2 * i0) * c + 1 + 3 * j], -xs[i0 * c + j])
        })
        .collect();
    assert_eq!(f32s_of(&out[2]), want_w, "slices with steps");
    let want_z: Vec<f32> = (0..r * c).map(|i| mul(ys[3 * c + i % c], xs[i])).collect();
    assert_eq!(f32s_of(&out[3]), want_z, "broadcast row");
}

/// A transposed value whose producer is itself elementwise (`neg(transpose(cast(y)))`):
/// the transpose stays a view of the cast's output, fused or not.
#[test]
fn a_view_of_an_elementwise_value_keeps_its_indices() {
    let ys: Vec<f32> = (0..48).map(|i| i as f32 * 1.5).collect();
    let mut g = Graph::new();
    let y = g.placeholder("y", [8, 6], DType::F32).unwrap();
    let h = g.cast(y, DType::I32).unwrap();
    let ht = g.transpose(h, &[1, 0]).unwrap();
    let w = g.neg(ht).unwrap();
    let want: Vec<u32> = (0..48)
        .map(|i| (-((ys[(i % 8) * 6 + i / 8]) as i32)) as u32)
        .collect();
    for fuse in [false, true] {
        let feed = (y, HostTensor::new([8, 6], ys.clone()).unwrap());
        let out = session(&g, fuse).run(&[feed], &[w]).unwrap();
        assert_eq!(out[0].words(), &want[..], "fuse: {fuse}");
    }
}

#[test]
fn in_place_chains_write_over_their_input() {
    for n in [5, CHUNK + 3, 100_003] {
        let mut rng = Rng(31 + n as u64);
        let (xs, cs) = (rng.f32s(n), rng.f32s(n));
        let mut g = Graph::new();
        let x = g.placeholder("x", [n], DType::F32).unwrap();
        let c = g.placeholder("c", [n], DType::F32).unwrap();
        let two = g.constant(2.0f32).unwrap();
        let a = g.mul(x, two).unwrap();
        // The same dying value as both operands.
        let b = g.add(a, a).unwrap();
        let m = g.maximum(b, c).unwrap();
        let e = g.exp(m).unwrap();
        let y = w2(&mut g, e, c, e);
        let mut s = session(&g, false);
        let plan = s.plan(&[y]).unwrap();
        let mem = plan.memory(Device::Cpu).unwrap();
        assert!(mem.in_place.len() >= 4, "{}", plan.describe());
        let feeds = [
            (x, HostTensor::new([n], xs.clone()).unwrap()),
            (c, HostTensor::new([n], cs.clone()).unwrap()),
        ];
        let got = f32s_of(&s.run(&feeds, &[y]).unwrap()[0]);
        let want: Vec<f64> = (0..n)
            .map(|i| {
                let e = (f64::from(xs[i]) * 4.0).max(f64::from(cs[i])).exp();
                let (e, c) = (e as f32, cs[i]);
                w2_f64(e, c, e)
            })
            .collect();
        assert_near(&format!("in-place chain, n = {n}"), &got, &want, 2e-6);
        // Unfused and fused agree bit for bit (both run the fast path, one node at a time
        // or all at once).
        let fused = session(&g, true).run(&feeds, &[y]).unwrap();
        assert_eq!(fused[0].words(), s.run(&feeds, &[y]).unwrap()[0].words());
    }
}

#[test]
fn in_place_inputs_given_directly() {
    let n = 3 * CHUNK + 5;
    let mut rng = Rng(41);
    let a: Vec<u32> = rng.f32s(n).iter().map(|x| x.to_bits()).collect();
    let b: Vec<u32> = rng.f32s(n).iter().map(|x| x.to_bits()).collect();
    let f = DType::F32;
    let (i0, i1) = (Expr::input(0), Expr::input(1));
    let cases: Vec<(Expr, Vec<bool>)> = vec![
        // out = a - b over a, and over b
        (
            Expr::binary(BinaryOp::Sub, i0.clone(), i1.clone()),
            vec![true, false],
        ),
        (
            Expr::binary(BinaryOp::Sub, i0.clone(), i1.clone()),
            vec![false, true],
        ),
        // out = a * a + exp(a) over a, read three times
        (
            Expr::binary(
                BinaryOp::Add,
                Expr::binary(BinaryOp::Mul, i0.clone(), i0.clone()),
                Expr::unary(UnaryOp::Exp, i0.clone()),
            ),
            vec![true, false],
        ),
        // out = a (a copy onto itself), out = b over a
        (i0.clone(), vec![true, false]),
        (i1.clone(), vec![true, false]),
    ];
    for (e, over) in cases {
        let k = kernel(e, &[(&[n], f), (&[n], f)], &[n]);
        let want = k.reference(&[&a, &b]);
        let mut out = if over[0] { a.clone() } else { b.clone() };
        let ins: Vec<CpuIn<'_>> = [&a, &b]
            .iter()
            .zip(&over)
            .map(|(w, &o)| if o { CpuIn::Output } else { CpuIn::Words(w) })
            .collect();
        k.run_cpu_into(&ins, &mut out).unwrap();
        assert!(
            out == want,
            "{} over input {}",
            k.expr.describe(),
            over[1] as u8
        );
    }
    // Both inputs are the output's slot (`x + x` written over x), the second broadcast.
    let k = kernel(
        Expr::binary(BinaryOp::Add, i0.clone(), i1.clone()),
        &[(&[n], f), (&[n], f)],
        &[n],
    );
    let mut out = a.clone();
    k.run_cpu_into(&[CpuIn::Output, CpuIn::Output], &mut out)
        .unwrap();
    assert!(out == k.reference(&[&a, &a]));
    let k = kernel(
        Expr::binary(BinaryOp::Add, i0, i1),
        &[(&[n], f), (&[1], f)],
        &[n],
    );
    let mut out = a.clone();
    k.run_cpu_into(&[CpuIn::Output, CpuIn::Words(&b[..1])], &mut out)
        .unwrap();
    assert!(out == k.reference(&[&a, &b[..1]]));
}

#[test]
fn long_chains_of_over_a_hundred_ops() {
    let n = 50_001;
    let mut rng = Rng(51);
    let (xs, ys) = (rng.f32s(n), rng.f32s(n));
    let mut g = Graph::new();
    let x = g.placeholder("x", [n], DType::F32).unwrap();
    let y = g.placeholder("y", [n], DType::F32).unwrap();
    // Each value is used once, so fusion makes the whole chain one kernel.
    let k1 = g.constant(0.75f32).unwrap();
    let mut h = x;
    for i in 0..60 {
        let m = g.mul(h, k1).unwrap();
        h = g.add(m, y).unwrap();
        if i % 3 == 0 {
            h = g.sin(h).unwrap();
        }
    }
    let mut s = session(&g, true);
    let plan = s.plan(&[h]).unwrap();
    assert_eq!(plan.dispatch_count(), 1, "{}", plan.describe());
    assert!(
        plan.describe().contains("<140 ops over"),
        "{}",
        plan.describe()
    );
    let feeds = [
        (x, HostTensor::new([n], xs.clone()).unwrap()),
        (y, HostTensor::new([n], ys.clone()).unwrap()),
    ];
    let got = f32s_of(&s.run(&feeds, &[h]).unwrap()[0]);
    let want: Vec<f64> = (0..n)
        .map(|i| {
            let (mut h, y) = (f64::from(xs[i]), f64::from(ys[i]));
            for k in 0..60 {
                h = h * 0.75 + y;
                if k % 3 == 0 {
                    h = h.sin();
                }
            }
            h
        })
        .collect();
    assert_near("140-op chain", &got, &want, 1e-5);
}

/// Random expression DAGs (operands drawn from every earlier node, so values are shared and
/// buffers reused; literals, constant conditions, casts, dead nodes) on random broadcast
/// inputs: the fast path equals the reference bit for bit.
#[test]
fn random_dags_match_the_reference() {
    let mut rng = Rng(61);
    let f = DType::F32;
    let un = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Exp,
        UnaryOp::Relu,
        UnaryOp::Sqrt,
        UnaryOp::Tanh,
        UnaryOp::Floor,
        UnaryOp::Sigmoid,
    ];
    let bin = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
        BinaryOp::Pow,
    ];
    for case in 0..300 {
        let out = [1 + rng.below(40), 1 + rng.below(300)];
        let n_in = 1 + rng.below(4);
        let shapes: Vec<Vec<usize>> = (0..n_in)
            .map(|_| match rng.below(4) {
                0 => out.to_vec(),
                1 => vec![out[1]],
                2 => vec![out[0], 1],
                _ => vec![],
            })
            .collect();
        let mut nodes: Vec<Node> = (0..n_in).map(Node::Input).collect();
        nodes.push(Node::Lit(f, 1.5f32.to_bits()));
        let len = 2 + rng.below(if case % 10 == 0 { 200 } else { 30 });
        for _ in 0..len {
            let k = nodes.len();
            let pick = |r: &mut Rng| r.below(k);
            // Only f32 operands: comparisons feed selects and casts return to f32.
            let node = match rng.below(6) {
                0 => Node::Unary(un[rng.below(un.len())], pick(&mut rng)),
                1 | 2 => Node::Binary(bin[rng.below(bin.len())], pick(&mut rng), pick(&mut rng)),
                3 => {
                    nodes.push(Node::Binary(BinaryOp::Less, pick(&mut rng), pick(&mut rng)));
                    Node::Select(k, pick(&mut rng), pick(&mut rng))
                }
                4 => {
                    nodes.push(Node::Lit(DType::Bool, rng.below(2) as u32));
                    Node::Select(k, pick(&mut rng), pick(&mut rng))
                }
                _ => {
                    nodes.push(Node::Cast(DType::I32, pick(&mut rng)));
                    Node::Cast(f, k)
                }
            };
            nodes.push(node);
        }
        let expr = Expr::from_nodes(nodes).unwrap();
        let ins: Vec<(&[usize], DType)> = shapes.iter().map(|s| (s.as_slice(), f)).collect();
        let k = kernel(expr, &ins, &out);
        let words: Vec<Vec<u32>> = shapes
            .iter()
            .map(|s| {
                rng.f32s(s.iter().product())
                    .iter()
                    .map(|x| (x * 4.0).to_bits())
                    .collect()
            })
            .collect();
        let data: Vec<&[u32]> = words.iter().map(Vec::as_slice).collect();
        // NaNs of different payloads meet here (see the binary test).
        check_nan(&k, &data, &format!("random DAG {case}"), true);
    }
}

/// Random strided views (negative, zero and large strides, offsets) of one buffer.
#[test]
fn random_views_match_the_reference() {
    let mut rng = Rng(71);
    for case in 0..400 {
        let rank = 1 + rng.below(4);
        let out: Vec<usize> = (0..rank)
            .map(|k| {
                if k + 1 == rank {
                    1 + rng.below(700)
                } else {
                    1 + rng.below(9)
                }
            })
            .collect();
        // The view's apparent shape: the output's, with some axes 1 (broadcast) or missing.
        let skip = rng.below(rank);
        let shape: Vec<usize> = out[skip..]
            .iter()
            .map(|&d| if rng.below(4) == 0 { 1 } else { d })
            .collect();
        let strides: Vec<i64> = shape.iter().map(|_| rng.below(15) as i64 - 7).collect();
        let low: i64 = shape
            .iter()
            .zip(&strides)
            .map(|(&d, &s)| ((d as i64 - 1) * s).min(0))
            .sum();
        let high: i64 = shape
            .iter()
            .zip(&strides)
            .map(|(&d, &s)| ((d as i64 - 1) * s).max(0))
            .sum();
        let offset = -low + rng.below(5) as i64;
        let len = (offset + high + 1) as usize + rng.below(3);
        let buf: Vec<u32> = (0..len as u32).map(|i| (i as f32).to_bits()).collect();
        let other: Vec<u32> = rng
            .f32s(out.iter().product())
            .iter()
            .map(|x| x.to_bits())
            .collect();
        let e = Expr::binary(
            BinaryOp::Sub,
            Expr::input(0),
            Expr::unary(UnaryOp::Neg, Expr::input(1)),
        );
        let mut k = kernel(e, &[(&shape, DType::F32), (&out, DType::F32)], &out);
        k.views = vec![Some(InputView { offset, strides }), None];
        check(
            &k,
            &[&buf, &other],
            &format!("view case {case}: {shape:?} in {out:?}"),
        );
    }
}

#[test]
fn inconsistent_inputs_are_errors_not_panics() {
    let f = DType::F32;
    let k = kernel(
        Expr::binary(BinaryOp::Add, Expr::input(0), Expr::input(1)),
        &[(&[4], f), (&[4], f)],
        &[4],
    );
    let a = [0u32; 4];
    let mut out = [0u32; 4];
    // Too few words, too few inputs, an output of the wrong length.
    assert!(k
        .run_cpu_into(&[CpuIn::Words(&a[..3]), CpuIn::Words(&a)], &mut out)
        .is_err());
    assert!(k.run_cpu_into(&[CpuIn::Words(&a)], &mut out).is_err());
    assert!(k
        .run_cpu_into(&[CpuIn::Words(&a), CpuIn::Words(&a)], &mut out[..3])
        .is_err());
    // A view reaching past its buffer.
    let mut v = k.clone();
    v.views = vec![
        Some(InputView {
            offset: 1,
            strides: vec![1],
        }),
        None,
    ];
    assert!(v
        .run_cpu_into(&[CpuIn::Words(&a), CpuIn::Words(&a)], &mut out)
        .is_err());
    v.views = vec![
        Some(InputView {
            offset: 2,
            strides: vec![-1],
        }),
        None,
    ];
    assert!(v
        .run_cpu_into(&[CpuIn::Words(&a), CpuIn::Words(&a)], &mut out)
        .is_err());
    // A shape that does not broadcast to the output.
    let k = kernel(Expr::input(0), &[(&[3], f)], &[4]);
    assert!(k.run_cpu_into(&[CpuIn::Words(&a[..3])], &mut out).is_err());
}

/// `relu(x + b)` and `x + b` with a per-channel bias `b` (`[C, 1, 1]` over `[N, C, H, W]`),
/// as a kernel of its own and as the prologue of `mean` over `[H, W]` (a global average
/// pool after a convolution's bias): the one-pass bias form, over channel runs shorter and
/// longer than a chunk, with NaN, infinities and sums that round to -0, against float64.
#[test]
fn per_channel_bias_relu_matches_float64() {
    for (n, c, h, w) in [(1, 1000, 13, 13), (2, 5, 3, 7), (1, 3, 50, 50)] {
        let mut rng = Rng((n * 7 + c) as _);
        let mut xs = rng.f32s(n * c * h * w);
        let mut bs = rng.f32s(c);
        xs[1] = f32::NAN;
        xs[2] = f32::INFINITY;
        xs[3] = -0.0;
        bs[c - 1] = f32::NEG_INFINITY;
        let last = xs.len() - 1;
        xs[last] = f32::INFINITY;
        bs[0] = -0.0;
        let mut g = Graph::new();
        let x = g.placeholder("x", [n, c, h, w], DType::F32).unwrap();
        let b = g.placeholder("b", [c, 1, 1], DType::F32).unwrap();
        let sum = g.add(x, b).unwrap();
        let r = g.relu(sum).unwrap();
        let m = g.mean(r, [2, 3], false).unwrap();
        let feeds = [
            (x, HostTensor::new([n, c, h, w], xs.clone()).unwrap()),
            (b, HostTensor::new([c, 1, 1], bs.clone()).unwrap()),
        ];
        let mut out = session(&g, true).run(&feeds, &[sum, r]).unwrap();
        // Fetched alone, `mean` takes `relu(x + b)` as its prologue.
        let mut s = session(&g, true);
        let plan = s.plan(&[m]).unwrap();
        assert_eq!(plan.dispatch_count(), 1, "{}", plan.describe());
        out.extend(s.run(&feeds, &[m]).unwrap());
        let p = h * w;
        let want: Vec<f64> = (0..xs.len())
            .map(|i| f64::from(xs[i]) + f64::from(bs[(i / p) % c]))
            .collect();
        let relu = |v: f64| if v > 0.0 || v.is_nan() { v } else { 0.0 };
        let same = |g: f32, w: f64| (g.is_nan() && w.is_nan()) || g as f64 == w;
        for (i, (&g, &w)) in f32s_of(&out[0]).iter().zip(&want).enumerate() {
            assert!(same(g, (w as f32) as f64), "x + b [{i}]: {g} vs {w}");
        }
        for (i, (&g, &w)) in f32s_of(&out[1]).iter().zip(&want).enumerate() {
            assert!(same(g, relu((w as f32) as f64)), "relu [{i}]: {g} vs {w}");
            if (w as f32) <= 0.0 {
                assert_eq!(g.to_bits(), 0, "relu [{i}] of {w} is +0");
            }
        }
        for (o, &g) in f32s_of(&out[2]).iter().enumerate() {
            let terms = &want[o * p..(o + 1) * p];
            let mean = terms.iter().map(|&v| relu((v as f32) as f64)).sum::<f64>() / p as f64;
            let tol = 1e-6 * terms.iter().map(|v| v.abs()).sum::<f64>() / p as f64 + 1e-30;
            assert!(
                (g.is_nan() && mean.is_nan()) || (g as f64 - mean).abs() <= tol || g as f64 == mean,
                "mean [{o}]: {g} vs {mean}"
            );
        }
    }
}

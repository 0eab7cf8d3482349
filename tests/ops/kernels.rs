//! Kernel strategies (vec4 elementwise, register-blocked matmul) and fusion, checked on every
//! GPU against cpu:0, with kernel counts asserted.

use crate::common;

use wgflow::compile::StepKind;
use wgflow::ops::{AdapterKind, Kernel};
use wgflow::{DType, Device, Graph, HostTensor};

fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 500.0 - 1.0)
        .collect()
}

fn konst(g: &mut Graph, shape: &[usize], seed: u32) -> wgflow::Tensor {
    let n = shape.iter().product();
    g.constant(HostTensor::new(shape.to_vec(), data(n, seed)).unwrap())
        .unwrap()
}

/// A session on `device` that runs kernels on constant inputs (no constant folding), which
/// is what these tests are about.
fn session_on(g: &Graph, device: Device) -> wgflow::Session {
    wgflow::Session::new(
        g,
        wgflow::SessionOptions {
            default_device: Some(device),
            visible_devices: Some(common::gpu_indices()),
            fold_constants: false,
            ..Default::default()
        },
    )
    .unwrap()
}

/// `outs` computed on cpu:0 with fusion off (every op its own kernel).
fn unfused_on_cpu(g: &Graph, outs: &[wgflow::Tensor]) -> Vec<HostTensor> {
    wgflow::Session::new(
        g,
        wgflow::SessionOptions {
            default_device: Some(Device::Cpu),
            fuse: false,
            fold_constants: false,
            ..Default::default()
        },
    )
    .unwrap()
    .run(&[], outs)
    .unwrap()
}

/// Every GPU equals cpu:0 on `outs`, within `tol`.
fn agree(g: &Graph, outs: &[wgflow::Tensor], tol: f32) {
    let want = session_on(g, Device::Cpu).run(&[], outs).unwrap();
    for gpu in common::gpus() {
        let got = session_on(g, gpu).run(&[], outs).unwrap();
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            common::assert_close(&format!("{gpu} output {i}"), a, b, tol, tol);
        }
    }
}

#[test]
fn blocked_matmul_shapes_match_cpu() {
    let mut g = Graph::new();
    let mut outs = Vec::new();
    for (i, (a, b)) in [
        (vec![32, 16], vec![16, 64]),
        (vec![48, 12], vec![12, 40]),
        (vec![2, 1, 8, 4], vec![3, 4, 8]),
        (vec![7, 8], vec![8, 12]),
        (vec![64, 64], vec![64, 64]),
        (vec![5, 3], vec![3, 4]),
        // Big products get bigger blocks on software adapters: 2^27 and 2^29 multiply-adds.
        (vec![512, 512], vec![512, 512]),
        (vec![1024, 512], vec![512, 1024]),
    ]
    .into_iter()
    .enumerate()
    {
        let x = konst(&mut g, &a, i as u32);
        let y = konst(&mut g, &b, 100 + i as u32);
        outs.push(g.matmul(x, y).unwrap());
    }
    // The strategy chosen for each adapter kind is really blocked for the divisible shapes.
    let mut s = session_on(&g, Device::Cpu);
    let plan = s.plan(&outs).unwrap();
    let blocked: Vec<Option<(usize, usize)>> = plan
        .steps
        .iter()
        .filter_map(|st| match &st.kind {
            StepKind::Dispatch {
                kernel: k @ Kernel::MatMul(_),
                ..
            } => match k.for_adapter(&AdapterKind {
                software: true,
                gl: false,
            }) {
                Kernel::MatMul(m) => Some(m.block),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(
        blocked,
        vec![
            Some((16, 16)),
            Some((16, 8)),
            Some((8, 8)),
            Some((1, 4)),
            Some((16, 16)),
            None,
            Some((16, 32)),
            Some((32, 32)),
        ]
    );
    // Through GL the big products keep 16×16 blocks (their compile would hold GL's context
    // lock past wgpu's 6 s timeout for other threads).
    let gl = AdapterKind {
        software: true,
        gl: true,
    };
    let big: Vec<Option<(usize, usize)>> = plan
        .steps
        .iter()
        .filter_map(|st| match &st.kind {
            StepKind::Dispatch {
                kernel: Kernel::MatMul(m),
                ..
            } if m.out.numel() >= 512 * 512 => Some(m.blocked_for(&gl).block),
            _ => None,
        })
        .collect();
    assert_eq!(big, [Some((16, 16)), Some((16, 16))]);
    agree(&g, &outs, 1e-4);
}

#[test]
fn vec4_elementwise_covers_dtypes_scalars_and_bools() {
    let mut g = Graph::new();
    let a = konst(&mut g, &[8, 4], 1);
    let b = konst(&mut g, &[8, 4], 2);
    let half = g.constant(0.5f32).unwrap();
    let ai = g.cast(a, DType::I32).unwrap();
    let three = g
        .constant(HostTensor::new([1], vec![3i32]).unwrap())
        .unwrap();
    let prod = g.mul(a, b).unwrap();
    let y = g.add(prod, half).unwrap();
    let lt = g.less(a, b).unwrap();
    let sel = g.select(lt, a, b).unwrap();
    let q = g.div(ai, three).unwrap();
    let u = g.cast(ai, DType::U32).unwrap();
    agree(&g, &[y, lt, sel, q, u], 1e-6);
    let mut s = session_on(&g, Device::Cpu);
    let plan = s.plan(&[y, lt, sel]).unwrap();
    for st in &plan.steps {
        if let StepKind::Dispatch {
            kernel: Kernel::Elementwise(k),
            ..
        } = &st.kind
        {
            assert!(k.vectorized(), "{}", k.expr.describe());
        }
    }
}

#[test]
fn fusion_forms_one_kernel_for_chains_and_trees() {
    let mut g = Graph::new();
    let n = 4096;
    let a = konst(&mut g, &[n], 1);
    let b = konst(&mut g, &[n], 2);
    let c = konst(&mut g, &[n], 3);
    let zero = g.constant(0.0f32).unwrap();
    let half = g.constant(0.5f32).unwrap();
    // W2: ((a*b + c) max 0) * 0.5 + exp(-a)
    let ab = g.mul(a, b).unwrap();
    let abc = g.add(ab, c).unwrap();
    let m = g.maximum(abc, zero).unwrap();
    let h = g.mul(m, half).unwrap();
    let na = g.neg(a).unwrap();
    let e = g.exp(na).unwrap();
    let y = g.add(h, e).unwrap();
    let mut s = session_on(&g, Device::Cpu);
    let plan = s.plan(&[y]).unwrap();
    assert_eq!(plan.dispatch_count(), 1, "{}", plan.describe());
    let StepKind::Dispatch {
        kernel: Kernel::Elementwise(k),
        inputs,
    } = &plan.steps.as_slice()[0].kind
    else {
        panic!()
    };
    assert_eq!(
        inputs.len(),
        3,
        "a is bound once although used twice; literals are inlined"
    );
    assert_eq!(k.expr.op_count(), 7);
    // A value with two consumers that reads two full-size tensors is computed once, not
    // duplicated into both (recomputing would read more bytes than storing it)...
    let mut g2 = Graph::new();
    let x = konst(&mut g2, &[n], 4);
    let x2 = konst(&mut g2, &[n], 5);
    let t = g2.mul(x, x2).unwrap();
    let p = g2.exp(t).unwrap();
    let q = g2.neg(t).unwrap();
    // ...while a cheap one over a single tensor is recomputed by each consumer and never stored.
    let u = g2.tanh(x).unwrap();
    let pu = g2.exp(u).unwrap();
    let qu = g2.neg(u).unwrap();
    let mut s2 = session_on(&g2, Device::Cpu);
    assert_eq!(s2.plan(&[p, q]).unwrap().dispatch_count(), 3);
    let plan = s2.plan(&[pu, qu]).unwrap();
    assert_eq!(plan.dispatch_count(), 2, "{}", plan.describe());
    agree(&g, &[y], 1e-6);
    agree(&g2, &[p, q, pu, qu], 1e-6);
}

#[test]
fn bias_and_activation_become_a_matmul_epilogue() {
    let mut g = Graph::new();
    let mut outs = Vec::new();
    // Blocked (N, K divisible by 4) and one-output-per-invocation shapes, batched too.
    for (i, (a, b)) in [
        (vec![32, 16], vec![16, 64]),
        (vec![5, 3], vec![3, 6]),
        (vec![2, 8, 4], vec![4, 12]),
    ]
    .into_iter()
    .enumerate()
    {
        let n = *b.last().unwrap();
        let x = konst(&mut g, &a, i as u32);
        let w = konst(&mut g, &b, 10 + i as u32);
        let bias = konst(&mut g, &[n], 20 + i as u32);
        let m = g.matmul(x, w).unwrap();
        let shape = g.shape(m).unwrap().dims().to_vec();
        let residual = konst(&mut g, &shape, 30 + i as u32);
        let two = g.constant(2.0f32).unwrap();
        let y = g.add(m, bias).unwrap();
        let y = g.relu(y).unwrap();
        let y = g.mul(y, two).unwrap();
        let y = g.add(y, residual).unwrap();
        outs.push(y);
    }
    let mut s = session_on(&g, Device::Cpu);
    let plan = s.plan(&outs).unwrap();
    assert_eq!(plan.dispatch_count(), 3, "{}", plan.describe());
    for st in &plan.steps {
        let StepKind::Dispatch {
            kernel: Kernel::MatMul(m),
            inputs,
        } = &st.kind
        else {
            panic!("{}", plan.describe())
        };
        assert!(m.epilogue.is_some());
        assert_eq!(
            inputs.len(),
            4,
            "a, b, bias, residual (the literal is inlined)"
        );
    }
    agree(&g, &outs, 1e-5);
    // A matmul whose product is also fetched keeps it: no epilogue.
    let mut g2 = Graph::new();
    let x = konst(&mut g2, &[4, 4], 1);
    let m = g2.matmul(x, x).unwrap();
    let r = g2.relu(m).unwrap();
    let mut s2 = session_on(&g2, Device::Cpu);
    assert_eq!(s2.plan(&[m, r]).unwrap().dispatch_count(), 2);
    agree(&g2, &[m, r], 1e-5);
}

#[test]
fn nan_casts_to_true_on_every_device() {
    let mut g = Graph::new();
    let x = g.constant([f32::NAN, 0.0, -0.0, 1.0]).unwrap();
    let b = g.cast(x, DType::Bool).unwrap();
    for dev in std::iter::once(Device::Cpu).chain(common::gpus()) {
        let out = session_on(&g, dev).run(&[], &[b]).unwrap();
        assert_eq!(
            out[0].to_vec::<bool>().unwrap(),
            vec![true, false, false, true],
            "{dev}"
        );
    }
}

/// Reductions pick a strategy by shape (vec4 rows, workgroup tree, or a plain loop); the CPU
/// kernel follows the same order, so every GPU matches cpu:0 bit for bit.
#[test]
fn reduction_strategies_match_cpu_exactly() {
    use wgflow::ops::{ReduceOp, ReduceStrategy};
    let mut g = Graph::new();
    let mut outs = Vec::new();
    let mut strategies = Vec::new();
    for (shape, axes) in [
        (vec![64usize, 128], vec![1isize]),
        (vec![2, 8192], vec![1]),
        (vec![16384], vec![0]),
        (vec![3, 5, 8], vec![1, 2]),
        (vec![64, 6], vec![1]),
        (vec![6, 64], vec![0]),
    ] {
        let x = konst(&mut g, &shape, shape.iter().sum::<usize>() as u32);
        let xi = g.cast(x, DType::I32).unwrap();
        for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min] {
            let y = match op {
                ReduceOp::Sum => g.sum(x, axes.clone(), false),
                ReduceOp::Mean => g.mean(x, axes.clone(), false),
                ReduceOp::Max => g.max(x, axes.clone(), false),
                _ => g.min(x, axes.clone(), false),
            }
            .unwrap();
            outs.push(y);
        }
        outs.push(g.sum(xi, axes.clone(), true).unwrap());
    }
    let mut s = session_on(&g, Device::Cpu);
    let plan = s.plan(&outs).unwrap();
    for st in &plan.steps {
        if let StepKind::Dispatch {
            kernel: Kernel::Reduce(k),
            ..
        } = &st.kind
        {
            strategies.push(k.strategy());
        }
    }
    for want in [
        ReduceStrategy::RowsVec4,
        ReduceStrategy::Tree,
        ReduceStrategy::Loop,
    ] {
        assert!(
            strategies.contains(&want),
            "{want:?} not exercised: {strategies:?}"
        );
    }
    agree(&g, &outs, 0.0);
    // And the orders stay close to a plain sequential sum.
    let cpu = s.run(&[], &outs).unwrap();
    let row: Vec<f32> = data(16384, 16384);
    let plain: f32 = row.iter().sum();
    let got = cpu[2 * 5].to_f32().unwrap()[0];
    assert!(
        (got - plain).abs() <= 1e-3 * plain.abs().max(1.0),
        "{got} vs {plain}"
    );
}

/// Elementwise work after a reduction runs in the reduction's kernel, in every strategy.
#[test]
fn elementwise_work_after_a_reduction_becomes_its_epilogue() {
    let mut g = Graph::new();
    let mut outs = Vec::new();
    for shape in [vec![6usize, 10], vec![64, 128], vec![2, 8192]] {
        let x = konst(&mut g, &shape, shape[1] as u32);
        // rms = sqrt(mean(x * x) + eps)
        let sq = g.mul(x, x).unwrap();
        let ms = g.mean(sq, [1], true).unwrap();
        let eps = g.constant(1e-5f32).unwrap();
        let t = g.add(ms, eps).unwrap();
        outs.push(g.sqrt(t).unwrap());
        // logsumexp = log(sum(exp(x - max))) + max
        let m = g.max(x, [1], true).unwrap();
        let d = g.sub(x, m).unwrap();
        let e = g.exp(d).unwrap();
        let s = g.sum(e, [1], true).unwrap();
        let l = g.log(s).unwrap();
        outs.push(g.add(l, m).unwrap());
    }
    let mut s = session_on(&g, Device::Cpu);
    let plan = s.plan(&outs).unwrap();
    let epilogues = plan
        .steps
        .iter()
        .filter(|st| matches!(&st.kind, StepKind::Dispatch { kernel: Kernel::Reduce(k), .. } if k.epilogue.is_some()))
        .count();
    // Per shape: x*x -> mean -> +eps -> sqrt is one kernel (prologue and epilogue), max is one,
    // and exp(x - max) -> sum -> log -> +max is one.
    assert_eq!(epilogues, 6, "{}", plan.describe());
    assert_eq!(plan.dispatch_count(), 3 * 3, "{}", plan.describe());
    agree(&g, &outs, 1e-5);
}

/// Elementwise work that feeds a reduction runs in the reduction's kernel as it loads, with
/// inputs broadcast to the reduced shape, in every strategy and for every reduction op. On
/// cpu:0 the fused plan gives exactly the unfused plan's values; GPUs agree with cpu:0 to an
/// f32 ulp (a driver may contract the prologue's `x * x` and the accumulation into an FMA).
#[test]
fn elementwise_work_before_a_reduction_becomes_its_prologue() {
    use wgflow::ops::ReduceStrategy;
    let mut g = Graph::new();
    let mut outs = Vec::new();
    for shape in [
        vec![6usize, 10],
        vec![64, 128],
        vec![2, 8192],
        vec![3, 4, 8],
    ] {
        let x = konst(&mut g, &shape, shape[1] as u32 + 7);
        let rows: Vec<usize> = shape[..shape.len() - 1].to_vec();
        let last = *shape.last().unwrap();
        let mut row_shape = rows.clone();
        row_shape.push(1);
        let per_row = konst(&mut g, &row_shape, 3);
        let per_col = konst(&mut g, &[last], 5);
        // sum(x * x), mean((x - row) * col): full, row-broadcast and column-broadcast inputs.
        let sq = g.mul(x, x).unwrap();
        outs.push(g.sum(sq, [-1], false).unwrap());
        let d = g.sub(x, per_row).unwrap();
        let dc = g.mul(d, per_col).unwrap();
        outs.push(g.mean(dc, [-1], true).unwrap());
        // max/min/argmax of a transformed tensor, and any/all of a comparison.
        let t = g.abs(dc).unwrap();
        outs.push(g.max(t, [-1], false).unwrap());
        let nx = g.neg(x).unwrap();
        outs.push(g.argmax(nx, Some(-1), false).unwrap());
        let gt = g.greater(x, per_row).unwrap();
        outs.push(g.any(gt, [-1], false).unwrap());
        // A reduction over a leading axis (the plain loop) with a prologue.
        let ab = g.abs(d).unwrap();
        outs.push(g.sum(ab, [0], false).unwrap());
    }
    let mut s = session_on(&g, Device::Cpu);
    let plan = s.plan(&outs).unwrap();
    let mut strategies = Vec::new();
    let mut prologues = 0;
    for st in &plan.steps {
        if let StepKind::Dispatch {
            kernel: Kernel::Reduce(k),
            ..
        } = &st.kind
        {
            strategies.push(k.strategy());
            prologues += k.prologue.is_some() as usize;
        }
    }
    // Every reduction reads its transformed input directly: no elementwise kernel is left,
    // and every first pass has the prologue. argmax and any over 8192 run as two passes (a
    // partial pass over chunks, then one over the chunks' results); argmax's second pass
    // recomputes the cheap `neg` at the winners.
    assert_eq!(prologues, outs.len() + 1, "{}", plan.describe());
    assert_eq!(plan.dispatch_count(), outs.len() + 2, "{}", plan.describe());
    assert_eq!(strategies.len(), outs.len() + 2, "{}", plan.describe());
    for want in [
        ReduceStrategy::RowsVec4,
        ReduceStrategy::Tree,
        ReduceStrategy::Loop,
    ] {
        assert!(
            strategies.contains(&want),
            "{want:?} not exercised: {strategies:?}"
        );
    }
    agree(&g, &outs, 2e-7);
    let fused = s.run(&[], &outs).unwrap();
    assert_eq!(fused, unfused_on_cpu(&g, &outs));
}

/// Bias, batch norm, activations and a residual after a convolution run in its kernel.
#[test]
fn elementwise_work_after_a_convolution_becomes_its_epilogue() {
    use wgflow::Conv2dOptions;
    let mut g = Graph::new();
    let x = konst(&mut g, &[2, 4, 9, 9], 1);
    let w = konst(&mut g, &[6, 4, 3, 3], 2);
    let b = konst(&mut g, &[6], 3);
    let opts = Conv2dOptions {
        padding: [1, 1],
        ..Default::default()
    };
    // conv + bias -> relu: one kernel.
    let y1 = g.conv2d(x, w, Some(b), opts).unwrap();
    let y1 = g.relu(y1).unwrap();
    // conv -> batch norm (inference) -> relu6 -> + residual: one kernel (with the parameters'
    // sqrt(var + eps) inlined), plus abs(var) over the [6] parameters.
    let c = g.conv2d(x, w, None, opts).unwrap();
    let [m, v, s, sh] = [4u32, 5, 6, 7].map(|k| konst(&mut g, &[6], k));
    let v = g.abs(v).unwrap();
    let n = g.batch_norm(c, m, v, s, sh, 1e-5).unwrap();
    let r6 = g.clip(n, 0.0, 6.0).unwrap();
    let res = konst(&mut g, &[2, 6, 9, 9], 8);
    let y2 = g.add(r6, res).unwrap();
    let outs = [y1, y2];
    let mut sess = session_on(&g, Device::Cpu);
    let plan = sess.plan(&outs).unwrap();
    let convs: Vec<bool> = plan
        .steps
        .iter()
        .filter_map(|st| match &st.kind {
            StepKind::Dispatch {
                kernel: Kernel::Conv2d(k),
                ..
            } => Some(k.epilogue.is_some()),
            _ => None,
        })
        .collect();
    assert_eq!(convs, [true, true], "{}", plan.describe());
    assert_eq!(plan.dispatch_count(), 3, "{}", plan.describe());
    agree(&g, &outs, 1e-5);
    let fused = sess.run(&[], &outs).unwrap();
    assert_eq!(fused, unfused_on_cpu(&g, &outs));
}

/// `broadcast_to` read by elementwise work is a view: the kernel broadcasts the original
/// input, so no broadcast copy runs (unless the broadcast tensor itself is fetched).
#[test]
fn broadcast_to_feeding_elementwise_work_copies_nothing() {
    let mut g = Graph::new();
    let x = konst(&mut g, &[3, 1], 1);
    let y = konst(&mut g, &[2, 3, 4], 2);
    let b = g.broadcast_to(x, &[2, 3, 4]).unwrap();
    let s = g.add(b, y).unwrap();
    let t = g.mul(b, b).unwrap();
    let mut sess = session_on(&g, Device::Cpu);
    let plan = sess.plan(&[s, t]).unwrap();
    assert_eq!(plan.dispatch_count(), 2, "{}", plan.describe());
    assert!(
        plan.steps.iter().all(|st| !matches!(
            &st.kind,
            StepKind::Dispatch {
                kernel: Kernel::Strided(_),
                ..
            }
        )),
        "{}",
        plan.describe()
    );
    // Fetching the broadcast tensor keeps it.
    assert_eq!(sess.plan(&[s, b]).unwrap().dispatch_count(), 2);
    agree(&g, &[s, t, b], 0.0);
    let got = sess.run(&[], &[s, b]).unwrap();
    let (xs, ys) = (data(3, 1), data(24, 2));
    let want: Vec<f32> = (0..24).map(|i| xs[(i / 4) % 3] + ys[i]).collect();
    assert_eq!(got[0].to_f32().unwrap(), want);
}

/// Slices (negative steps included), flips and transposes read by elementwise work are
/// strided views: no copy kernel runs, the values are the copying plan's, and a slot read
/// through a view is never overwritten in place.
#[test]
fn slices_flips_and_transposes_feeding_elementwise_work_are_views() {
    use wgflow::SliceArg;
    let mut g = Graph::new();
    let x = konst(&mut g, &[6, 8], 1);
    let y = konst(&mut g, &[8, 6], 2);
    let e = g.exp(x).unwrap();
    // e[::-2, 1:7] * 2 + e[:3, ::-3]: two views of one step output.
    let a = g
        .slice(e, &[SliceArg::new(None, None, -2), SliceArg::range(1, 7)])
        .unwrap();
    let b = g
        .slice(e, &[SliceArg::range(0, 3), SliceArg::new(None, None, -3)])
        .unwrap();
    let b = g.broadcast_to(b, &[3, 3]).unwrap();
    let b6 = g.concat(&[b, b], 1).unwrap();
    let s = g.add(a, b6).unwrap();
    // flip(e) + e: the same buffer directly and through a view (no in-place reuse).
    let f = g.flip(e, [0, 1]).unwrap();
    let u = g.add(f, e).unwrap();
    // transpose(y) * x, and a transposed i32 tensor.
    let t = g.transpose(y, &[1, 0]).unwrap();
    let v = g.mul(t, x).unwrap();
    let h = g.cast(y, DType::I32).unwrap();
    let ht = g.transpose(h, &[1, 0]).unwrap();
    let w = g.neg(ht).unwrap();
    let outs = [s, u, v, w];
    let mut sess = session_on(&g, Device::Cpu);
    let plan = sess.plan(&outs).unwrap();
    let copies = plan
        .steps
        .iter()
        .filter(|st| {
            matches!(
                &st.kind,
                StepKind::Dispatch {
                    kernel: Kernel::Strided(_) | Kernel::Permute(_),
                    ..
                }
            )
        })
        .count();
    // Only the broadcast feeding concat (not elementwise) is still a copy.
    assert_eq!(copies, 1, "{}", plan.describe());
    assert!(
        plan.describe().contains("strided views"),
        "{}",
        plan.describe()
    );
    // exp differs by an ulp between drivers; the views themselves are exact.
    agree(&g, &outs, 1e-6);
    let fused = sess.run(&[], &outs).unwrap();
    assert_eq!(fused, unfused_on_cpu(&g, &outs));
    // Hand-checked elements of flip(e) + e and transpose(y) * x.
    let (xs, ys) = (data(48, 1), data(48, 2));
    let ex: Vec<f32> = xs.iter().map(|v| v.exp()).collect();
    let got_u = fused[1].to_f32().unwrap();
    assert_eq!(got_u[0], ex[47] + ex[0]);
    assert_eq!(got_u[9], ex[47 - 9] + ex[9]);
    let got_v = fused[2].to_f32().unwrap();
    assert_eq!(got_v[8 + 3], ys[3 * 6 + 1] * xs[8 + 3]);
}

/// Elementwise work on constants alone runs once at compile time (constant folding), and
/// only constants that kernels read take device memory.
#[test]
fn elementwise_work_on_constants_is_folded_at_compile_time() {
    let mut g = Graph::new();
    let w = konst(&mut g, &[64, 32], 1);
    let b = konst(&mut g, &[32], 2);
    let scale = g.constant(0.5f32).unwrap();
    let ws = g.mul(w, scale).unwrap();
    let wt = g.tanh(ws).unwrap();
    let x = g.placeholder("x", [4, 64], DType::F32).unwrap();
    let y = g.matmul(x, wt).unwrap();
    let y = g.add(y, b).unwrap();
    let mut sess = common::folding_session_on(&g, Device::Cpu);
    let plan = sess.plan(&[y]).unwrap();
    // One kernel: the matmul with its bias epilogue; tanh(w * 0.5) became a constant.
    assert_eq!(plan.dispatch_count(), 1, "{}", plan.describe());
    let m = plan.memory(Device::Cpu).unwrap();
    assert_eq!(
        m.constant_bytes,
        (64 * 32 + 32) * 4,
        "only w's folded form and b are stored"
    );
    let feed = HostTensor::new([4, 64], data(256, 3)).unwrap();
    let folded = sess.run(&[(x, feed.clone())], &[y]).unwrap();
    let unfolded = wgflow::Session::new(
        &g,
        wgflow::SessionOptions {
            default_device: Some(Device::Cpu),
            fold_constants: false,
            ..Default::default()
        },
    )
    .unwrap()
    .run(&[(x, feed.clone())], &[y])
    .unwrap();
    assert_eq!(folded, unfolded);
    for gpu in common::gpus() {
        let got = common::folding_session_on(&g, gpu)
            .run(&[(x, feed.clone())], &[y])
            .unwrap();
        common::assert_close(&format!("{gpu}"), &got[0], &folded[0], 1e-5, 1e-5);
    }
}

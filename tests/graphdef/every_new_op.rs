//! The graph of `every_new_op_round_trips_with_identical_plan_and_results` (tests/graph/graphdef.rs).

use wgflow::{DType, Graph, HostTensor, Tensor};

type Unary = fn(&mut Graph, Tensor) -> wgflow::Result<Tensor>;
type Binary = fn(&mut Graph, Tensor, Tensor) -> wgflow::Result<Tensor>;

/// A graph with every op family added after the first graph format: elementwise math, logic,
/// integer ops, creation, random, reductions, movement, NN ops and their composites.
pub fn every_new_op() -> (Graph, Vec<(Tensor, HostTensor)>, Vec<Tensor>) {
    let mut g = Graph::new();
    let x = g.placeholder("x", [2, 4, 5, 5], DType::F32).unwrap();
    let v = g.placeholder("v", [2, 3], DType::F32).unwrap();
    let fetches = build_every_new_op(&mut g, x, v).unwrap();
    let xs: Vec<f32> = (0..200).map(|i| (i as f32 * 0.731).sin() * 3.0).collect();
    let feeds = vec![
        (x, HostTensor::new([2, 4, 5, 5], xs).unwrap()),
        (
            v,
            HostTensor::new([2, 3], vec![-1.5f32, 0.0, 2.25, 3.0, -0.5, 1.0]).unwrap(),
        ),
    ];
    (g, feeds, fetches)
}

fn build_every_new_op(g: &mut Graph, x: Tensor, v: Tensor) -> wgflow::Result<Vec<Tensor>> {
    use wgflow::{Conv2dOptions, PadMode, SliceArg};
    let mut f = Vec::new();
    let unary: [Unary; 13] = [
        Graph::floor,
        Graph::ceil,
        Graph::round,
        Graph::sign,
        Graph::reciprocal,
        Graph::log1p,
        Graph::expm1,
        Graph::sin,
        Graph::cos,
        Graph::erf,
        Graph::softplus,
        Graph::square,
        Graph::silu,
    ];
    for op in unary {
        f.push(op(g, v)?);
    }
    let pos = g.abs(v)?;
    f.push(g.rsqrt(pos)?);
    let nan = g.isnan(v)?;
    let inf = g.isinf(v)?;
    let fin = g.isfinite(v)?;
    f.extend([nan, inf, fin, g.logical_not(fin)?]);
    let c = g.constant([[1.0f32, 0.0, -2.0], [3.0, 0.5, 1.0]])?;
    let cmp: [Binary; 3] = [Graph::not_equal, Graph::less_equal, Graph::greater_equal];
    for op in cmp {
        f.push(op(g, v, c)?);
    }
    let (lt, ge) = (g.less(v, c)?, g.greater_equal(v, c)?);
    let logic: [Binary; 3] = [Graph::logical_and, Graph::logical_or, Graph::logical_xor];
    for op in logic {
        f.push(op(g, lt, ge)?);
    }
    let ia = g.constant([7i32, -7, 9, i32::MIN])?;
    let ib = g.constant([2i32, 2, -4, 3])?;
    let ua = g.constant([7u32, u32::MAX, 0])?;
    let ub = g.constant([2u32, 10, 3])?;
    for (a, b) in [(ia, ib), (ua, ub)] {
        f.push(g.floor_divide(a, b)?);
        f.push(g.remainder(a, b)?);
    }
    f.push(g.gelu(v, false)?);
    f.push(g.gelu(v, true)?);
    f.push(g.leaky_relu(v, 0.1)?);
    f.push(g.elu(v, 1.5)?);
    f.push(g.clip(v, -1.0, 2.0)?);
    // Creation and random.
    f.push(g.zeros([2, 2], DType::I32)?);
    f.push(g.ones([3], DType::Bool)?);
    f.push(g.full([2], DType::U32, 7.0)?);
    f.push(g.arange(0.0, 5.0, 1.5, DType::F32)?);
    f.push(g.linspace(-1.0, 1.0, 5, false)?);
    f.push(g.eye(3, 4, 1, DType::F32)?);
    f.push(g.random_uniform([4, 3], -2.0, 5.0, 42)?);
    f.push(g.random_normal([3, 5], 1.0, 0.5, u64::MAX)?);
    // Reductions.
    f.push(g.prod(v, [1], false)?);
    f.push(g.all(lt, [0], true)?);
    f.push(g.any(lt, wgflow::Axes::All, false)?);
    f.push(g.argmax(v, Some(1), false)?);
    f.push(g.argmin(v, None, false)?);
    f.push(g.argmax(ia, Some(0), true)?);
    f.push(g.var(x, [2, 3], 1, false)?);
    f.push(g.std(v, [0], 0, true)?);
    f.push(g.logsumexp(v, [1], false)?);
    f.push(g.log_softmax(v, -1)?);
    // Movement.
    let e = g.expand_dims(v, 0)?;
    f.push(g.squeeze(e, None)?);
    f.push(g.broadcast_to(c, &[4, 2, 3])?);
    f.push(g.slice(
        x,
        &[
            SliceArg::new(None, None, -1),
            SliceArg::range(1, 4),
            SliceArg::new(Some(4), Some(0), -2),
            SliceArg::new(Some(1), None, 3),
        ],
    )?);
    f.push(g.slice(v, &[SliceArg::new(Some(1), Some(2), 9)])?);
    f.push(g.flip(x, [1, 3])?);
    f.push(g.flip(v, wgflow::Axes::All)?);
    f.push(g.concat(&[v, c, v], 0)?);
    f.push(g.stack(&[v, c], 1)?);
    f.extend(g.split(x, 2, 1)?);
    f.push(g.pad(v, &[(1, 0), (2, 3)], PadMode::Constant(-0.5))?);
    f.push(g.pad(ia, &[(0, 2)], PadMode::Constant(-9.0))?);
    f.push(g.pad(lt, &[(1, 1)], PadMode::Constant(1.0))?);
    f.push(g.pad(v, &[(1, 1), (2, 2)], PadMode::Reflect)?);
    f.push(g.tile(v, &[2, 1, 2])?);
    let idx = g.constant([[2i32, -1], [0, 1]])?;
    f.push(g.take(x, idx, 2)?);
    let small = g.constant([0i32, 2, 1])?;
    f.push(g.take(v, small, 1)?);
    f.push(g.one_hot(small, 4)?);
    // NN.
    let gamma = g.constant([1.0f32, 2.0, 0.5])?;
    let beta = g.constant([0.0f32, -1.0, 1.0])?;
    f.push(g.layer_norm(v, Some(gamma), Some(beta), -1, 1e-5)?);
    f.push(g.layer_norm(v, None, None, -1, 1e-3)?);
    let w = g.constant([[1.0f32, 0.5], [-1.0, 2.0], [0.25, 0.0]])?;
    let b = g.constant([0.5f32, -0.5])?;
    f.push(g.linear(v, w, Some(b))?);
    let ch = |g: &mut Graph, s: f32| g.constant([s, 2.0 * s, 0.5, 1.0]);
    let (bm, bv, bg, bb) = (ch(g, 0.1)?, ch(g, 1.0)?, ch(g, 1.5)?, ch(g, -0.2)?);
    f.push(g.batch_norm(x, bm, bv, bg, bb, 1e-5)?);
    let kw: Vec<f32> = (0..48).map(|i| (i as f32 * 0.37).cos()).collect();
    let kw = g.constant(HostTensor::new([6, 2, 2, 2], kw)?)?;
    let kb = g.constant([0.1f32, 0.2, 0.3, -0.1, -0.2, -0.3])?;
    let opts = Conv2dOptions {
        stride: [1, 2],
        padding: [1, 1],
        dilation: [2, 1],
        groups: 2,
    };
    f.push(g.conv2d(x, kw, Some(kb), opts)?);
    let kw1 = g.constant(HostTensor::new([3, 4, 1, 1], vec![0.5f32; 12])?)?;
    f.push(g.conv2d(x, kw1, None, Conv2dOptions::default())?);
    f.push(g.max_pool2d(x, [2, 2], [2, 2], [1, 1])?);
    f.push(g.avg_pool2d(x, [3, 2], [1, 2], [1, 0])?);
    Ok(f)
}

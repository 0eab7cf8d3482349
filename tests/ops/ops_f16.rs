//! f16 on every device: NumPy goldens (`tests/golden/f16.json`, from `gen_f16.py`) on `cpu:0`,
//! then every GPU with the `shader-f16` feature against `cpu:0` and NumPy. A GPU without the
//! feature (llvmpipe's GL adapter) must refuse f16 with an error naming the feature, and soft
//! placement must move the work to `cpu:0` instead.

use crate::common;

use crate::common::golden::{build_all, check_cpu, ints, run_on, Built, Case};
use serde_json::Value as Json;
use wgflow::{
    f16, Axes, DType, Device, Graph, HostTensor, PadMode, Session, SessionOptions, SliceArg, Tensor,
};

const GOLDEN: &str = include_str!("../golden/f16.json");

fn build(g: &mut Graph, case: &Case, x: &[Tensor]) -> wgflow::Result<Tensor> {
    let (op, attrs) = (case.op.as_str(), &case.attrs);
    let axes = || match &attrs["axes"] {
        Json::Null => Axes::All,
        a => Axes::List(ints(a)),
    };
    let keep = || attrs["keepdims"].as_bool().unwrap_or(false);
    match op {
        "neg" => g.neg(x[0]),
        "abs" => g.abs(x[0]),
        "exp" => g.exp(x[0]),
        "log" => g.log(x[0]),
        "sqrt" => g.sqrt(x[0]),
        "tanh" => g.tanh(x[0]),
        "sigmoid" => g.sigmoid(x[0]),
        "relu" => g.relu(x[0]),
        "floor" => g.floor(x[0]),
        "ceil" => g.ceil(x[0]),
        "round" => g.round(x[0]),
        "square" => g.square(x[0]),
        "reciprocal" => g.reciprocal(x[0]),
        "sin" => g.sin(x[0]),
        "cos" => g.cos(x[0]),
        "rsqrt" => g.rsqrt(x[0]),
        "log1p" => g.log1p(x[0]),
        "expm1" => g.expm1(x[0]),
        "erf" => g.erf(x[0]),
        "sign" => g.sign(x[0]),
        "softplus" => g.softplus(x[0]),
        "where" => g.select(x[0], x[1], x[2]),
        "prod" => g.prod(x[0], axes(), keep()),
        "argmin" => g.argmin(x[0], Some(attrs["axis"].as_i64().unwrap() as isize), false),
        "var" => g.var(
            x[0],
            axes(),
            attrs["ddof"].as_u64().unwrap() as usize,
            keep(),
        ),
        "logsumexp" => g.logsumexp(x[0], axes(), keep()),
        "log_softmax" => g.log_softmax(x[0], attrs["axis"].as_i64().unwrap() as isize),
        "flip" => g.flip(x[0], Axes::List(ints(&attrs["axes"]))),
        "broadcast_to" => {
            let s: Vec<usize> = ints(&attrs["shape"]).iter().map(|&d| d as usize).collect();
            g.broadcast_to(x[0], &s)
        }
        "linear_silu" => {
            let y = g.linear(x[0], x[1], Some(x[2]))?;
            g.silu(y)
        }
        "isnan" => g.isnan(x[0]),
        "isinf" => g.isinf(x[0]),
        "isfinite" => g.isfinite(x[0]),
        "add" => g.add(x[0], x[1]),
        "sub" => g.sub(x[0], x[1]),
        "mul" => g.mul(x[0], x[1]),
        "div" => g.div(x[0], x[1]),
        "maximum" => g.maximum(x[0], x[1]),
        "minimum" => g.minimum(x[0], x[1]),
        "pow" => g.pow(x[0], x[1]),
        "floor_divide" => g.floor_divide(x[0], x[1]),
        "remainder" => g.remainder(x[0], x[1]),
        "equal" => g.equal(x[0], x[1]),
        "less" => g.less(x[0], x[1]),
        "greater" => g.greater(x[0], x[1]),
        "cast" => g.cast(
            x[0],
            DType::parse(attrs["dtype"].as_str().unwrap()).unwrap(),
        ),
        "chain" => {
            let ab = g.mul(x[0], x[1])?;
            let abc = g.add(ab, x[2])?;
            let zero = g.constant(HostTensor::scalar(f16::from_f32(0.0)))?;
            let r = g.maximum(abc, zero)?;
            let half = g.constant(HostTensor::scalar(f16::from_f32(0.5)))?;
            let t = g.mul(r, half)?;
            let na = g.neg(x[0])?;
            let e = g.exp(na)?;
            g.add(t, e)
        }
        "sum" => g.sum(x[0], axes(), keep()),
        "mean" => g.mean(x[0], axes(), keep()),
        "max" => g.max(x[0], axes(), keep()),
        "min" => g.min(x[0], axes(), keep()),
        "argmax" => g.argmax(x[0], Some(attrs["axis"].as_i64().unwrap() as isize), false),
        "matmul" => g.matmul(x[0], x[1]),
        "transpose" => g.transpose(x[0], &ints(&attrs["perm"])),
        "slice" => g.slice(
            x[0],
            &[
                SliceArg::new(None, None, -1),
                SliceArg::range(1, 4),
                SliceArg::new(None, None, -2),
            ],
        ),
        "concat" => {
            let part = g.slice(
                x[1],
                &[SliceArg::full(), SliceArg::full(), SliceArg::full()],
            )?;
            g.concat(&[x[0], part], attrs["axis"].as_i64().unwrap() as isize)
        }
        "pad" => g.pad(
            x[0],
            &[(1, 2), (0, 1)],
            PadMode::Constant(attrs["value"].as_f64().unwrap()),
        ),
        "take" => {
            let idx: Vec<i32> = ints(&attrs["indices"]).iter().map(|&i| i as i32).collect();
            let n = idx.len();
            let t = g.constant(HostTensor::new([n], idx)?)?;
            g.take(x[0], t, 1)
        }
        "reshape" => g.reshape(x[0], &ints(&attrs["shape"])),
        "softmax" => g.softmax(x[0], attrs["axis"].as_i64().unwrap() as isize),
        "layer_norm" => g.layer_norm(x[0], None, None, -1, attrs["eps"].as_f64().unwrap() as f32),
        "gelu" => g.gelu(x[0], false),
        other => panic!("golden op {other} has no builder"),
    }
}

fn built() -> Built {
    build_all(GOLDEN, build)
}

/// GPUs split by whether they have the shader-f16 feature.
fn gpus_by_f16() -> (Vec<Device>, Vec<Device>) {
    let gpus = common::gpus();
    let has: Vec<Device> = wgflow::devices()
        .into_iter()
        .filter(|d| d.device.is_gpu() && d.limits.shader_f16)
        .map(|d| d.device)
        .collect();
    gpus.into_iter().partition(|d| has.contains(d))
}

/// The ops docs/ops.md claims are tested on f16.
fn documented_f16_ops() -> Vec<String> {
    let doc = include_str!("../../docs/ops.md");
    let start = doc
        .find("<!-- f16-ops -->")
        .expect("f16 op list in docs/ops.md")
        + 16;
    let end = doc
        .find("<!-- /f16-ops -->")
        .expect("end of the f16 op list");
    let ops: Vec<String> = doc[start..end]
        .split(',')
        .map(|s| s.trim().trim_matches('`').to_string())
        .collect();
    assert!(ops.len() > 40, "{ops:?}");
    ops
}

#[test]
fn f16_ops_match_numpy_on_cpu() {
    let ops = documented_f16_ops();
    let mut all: Vec<&str> = ops.iter().map(String::as_str).collect();
    all.extend(["chain", "linear_silu"]);
    check_cpu(&built(), &all);
}

#[test]
fn f16_ops_match_cpu_and_numpy_on_gpus_with_shader_f16() {
    let b = built();
    let (with, _) = gpus_by_f16();
    let cpu = run_on(&b, Device::Cpu);
    for gpu in with {
        let got = run_on(&b, gpu);
        for ((case, out), want) in b.cases.iter().zip(&got).zip(&cpu) {
            common::assert_close(
                &format!("{gpu} {}", case.name),
                out,
                want,
                case.rtol,
                case.atol,
            );
            common::assert_close(
                &format!("{gpu} {} vs numpy", case.name),
                out,
                &case.want,
                case.rtol,
                case.atol,
            );
        }
    }
}

#[test]
fn lavapipe_has_shader_f16() {
    // CI's Vulkan adapter is lavapipe, which has the feature: the f16 GPU path must be tested.
    if std::env::var("WGFLOW_REQUIRE_GPU").is_ok_and(|v| v == "1") {
        let vulkan = wgflow::devices()
            .into_iter()
            .filter(|d| d.backend == "vulkan")
            .collect::<Vec<_>>();
        assert!(
            vulkan.iter().any(|d| d.limits.shader_f16),
            "no Vulkan adapter with shader-f16: {vulkan:?}"
        );
    }
}

fn small_f16_graph() -> (Graph, Tensor, Tensor, HostTensor) {
    let mut g = Graph::new();
    let x = g.placeholder("x", [6], DType::F16).unwrap();
    let y = g.exp(x).unwrap();
    let y = g.add(y, x).unwrap();
    let feed =
        HostTensor::new([6], (0..6).map(|i| f16::from_f32(i as f32 * 0.5)).collect()).unwrap();
    (g, x, y, feed)
}

#[test]
fn gpus_without_shader_f16_refuse_f16_clearly_or_fall_back_to_cpu() {
    let (_, without) = gpus_by_f16();
    let (g, x, y, feed) = small_f16_graph();
    let want = common::session_on(&g, Device::Cpu)
        .run(&[(x, feed.clone())], &[y])
        .unwrap();
    for gpu in without {
        let err = common::session_on(&g, gpu)
            .run(&[(x, feed.clone())], &[y])
            .expect_err("f16 on a GPU without shader-f16 must fail");
        let msg = err.to_string();
        assert!(
            msg.contains("shader-f16") && msg.contains(&gpu.to_string()),
            "{msg}"
        );
        assert!(msg.contains("ops_f16.rs"), "names the user's line: {msg}");

        let mut soft = Session::new(
            &g,
            SessionOptions {
                default_device: Some(gpu),
                soft_placement: true,
                ..Default::default()
            },
        )
        .unwrap();
        let got = soft.run(&[(x, feed.clone())], &[y]).unwrap();
        assert_eq!(got, want);
        let plan = soft.plan(&[y]).unwrap();
        assert_eq!(plan.device_of(g.name(y).unwrap()), Some(Device::Cpu));
    }
}

#[test]
fn f16_is_stored_in_two_bytes_on_gpus_and_fuses() {
    let (with, _) = gpus_by_f16();
    for gpu in with {
        let mut g = Graph::new();
        let n = 1001; // odd: the last word of each buffer is half padding
        let a = g.placeholder("a", [n], DType::F16).unwrap();
        let b = g.placeholder("b", [n], DType::F16).unwrap();
        let s = g.mul(a, b).unwrap();
        let s = g.add(s, a).unwrap();
        let y = g.relu(s).unwrap();
        let mut sess = common::session_on(&g, gpu);
        let plan = sess.plan(&[y]).unwrap();
        assert_eq!(plan.dispatch_count(), 1, "{}", plan.describe());
        for v in &plan.values {
            assert_eq!(v.bytes(), 2004, "{v:?}");
        }
        let av: Vec<f16> = (0..n)
            .map(|i| f16::from_f32(i as f32 / 7.0 - 50.0))
            .collect();
        let bv: Vec<f16> = (0..n)
            .map(|i| f16::from_f32((i % 13) as f32 - 6.0))
            .collect();
        let feeds = [
            (a, HostTensor::new([n], av.clone()).unwrap()),
            (b, HostTensor::new([n], bv.clone()).unwrap()),
        ];
        let got = sess.run(&feeds, &[y]).unwrap();
        let cpu = common::session_on(&g, Device::Cpu)
            .run(&feeds, &[y])
            .unwrap();
        assert_eq!(
            got, cpu,
            "{gpu}: f16 arithmetic is exact here, so the devices agree bit for bit"
        );
        let r = |v: f32| f16::from_f32(v).to_f32();
        let want: Vec<f16> = av
            .iter()
            .zip(&bv)
            .map(|(x, y)| f16::from_f32(r(r(x.to_f32() * y.to_f32()) + x.to_f32()).max(0.0)))
            .collect();
        assert_eq!(got[0].to_vec::<f16>().unwrap(), want);
    }
}

#[test]
fn f16_crosses_devices_and_files() {
    // cpu:0 -> GPU -> cpu:0 transfers repack 2-byte elements.
    let (with, _) = gpus_by_f16();
    for gpu in with {
        let mut g = Graph::new();
        let x = g.placeholder("x", [3, 5], DType::F16).unwrap();
        let y = g.device(&gpu.to_string(), |g| g.mul(x, x)).unwrap();
        let z = g.device("cpu:0", |g| g.add(y, x)).unwrap();
        let vals: Vec<f16> = (0..15).map(|i| f16::from_f32(i as f32 - 7.5)).collect();
        let feed = HostTensor::new([3, 5], vals.clone()).unwrap();
        let got = common::session_on(&g, Device::Cpu)
            .run(&[(x, feed)], &[z])
            .unwrap();
        let want: Vec<f16> = vals
            .iter()
            .map(|v| f16::from_f32(f16::from_f32(v.to_f32() * v.to_f32()).to_f32() + v.to_f32()))
            .collect();
        assert_eq!(got[0].to_vec::<f16>().unwrap(), want);
    }
    // .npy round trip as '<f2'.
    let t = HostTensor::new(
        [2, 2],
        [1.5f32, -0.0, 65504.0, f32::INFINITY]
            .map(f16::from_f32)
            .to_vec(),
    )
    .unwrap();
    let bytes = wgflow::npy::to_bytes(&t);
    assert!(String::from_utf8_lossy(&bytes).contains("'<f2'"));
    assert_eq!(wgflow::npy::from_bytes(&bytes).unwrap(), t);
}

#[test]
fn f16_rejects_what_it_cannot_do_at_build_time() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [1, 1, 4, 4], DType::F16).unwrap();
    let w = g.placeholder("w", [1, 1, 2, 2], DType::F16).unwrap();
    let e = g
        .conv2d(x, w, None, Default::default())
        .expect_err("conv2d is f32 only");
    assert!(
        e.to_string().contains("f16") && e.to_string().contains("ops_f16.rs"),
        "{e}"
    );
    let f = g.placeholder("f", [4], DType::F32).unwrap();
    let h = g.placeholder("h", [4], DType::F16).unwrap();
    let e = g.add(f, h).expect_err("no implicit promotion");
    assert!(e.to_string().contains("f16"), "{e}");
}

#[test]
fn user_elementwise_kernels_take_f16_signatures() {
    use wgflow::ops::custom::ElementwiseFn;
    let k = ElementwiseFn::new("fma_half", |[a, b]| a * b + 0.5)
        .signature("float16(float16, float16)")
        .unwrap();
    let mut g = Graph::new();
    let a = g.placeholder("a", [5], DType::F16).unwrap();
    let b = g.placeholder("b", [5], DType::F16).unwrap();
    let y = g.apply(&k, &[a, b]).unwrap();
    let y = g.relu(y).unwrap();
    let av = [0.1f32, -3.0, 100.0, 300.0, 7.25].map(f16::from_f32);
    let bv = [3.0f32, 2.0, 0.3, 300.0, -1.0].map(f16::from_f32);
    let feeds = [
        (a, HostTensor::new([5], av.to_vec()).unwrap()),
        (b, HostTensor::new([5], bv.to_vec()).unwrap()),
    ];
    let r = |v: f32| f16::from_f32(v).to_f32();
    let want: Vec<f16> = av
        .iter()
        .zip(&bv)
        .map(|(x, y)| f16::from_f32(r(r(x.to_f32() * y.to_f32()) + 0.5).max(0.0)))
        .collect();
    assert!(want[3].is_infinite(), "300*300 overflows f16");
    let mut devices = vec![Device::Cpu];
    devices.extend(gpus_by_f16().0);
    for d in devices {
        let mut s = common::session_on(&g, d);
        assert_eq!(
            s.plan(&[y]).unwrap().dispatch_count(),
            1,
            "{d}: fused with relu"
        );
        let got = s.run(&feeds, &[y]).unwrap();
        assert_eq!(got[0].to_vec::<f16>().unwrap(), want, "{d}");
    }
}

#[test]
fn f16_graphs_round_trip_through_graph_files() {
    let mut g = Graph::new();
    let c = g
        .constant(
            HostTensor::new(
                [4],
                [0.1f32, -65504.0, f32::INFINITY, 2.0f32.powi(-24)]
                    .map(f16::from_f32)
                    .to_vec(),
            )
            .unwrap(),
        )
        .unwrap();
    let x = g.placeholder("x", [4], DType::F16).unwrap();
    let y = g.mul(x, c).unwrap();
    let y = g.softmax(y, 0).unwrap();
    let y = g.pad(y, &[(1, 1)], PadMode::Constant(-0.25)).unwrap();
    let text = g.to_json().unwrap();
    let back = Graph::from_json(&text).unwrap();
    assert_eq!(back.to_json().unwrap(), text);
    let feed = HostTensor::new([4], [1.0f32, 0.0, -1.0, 2.0].map(f16::from_f32).to_vec()).unwrap();
    let name = g.name(y).unwrap().to_string();
    let y2 = back.tensor(&name).unwrap();
    let x2 = back.tensor("x").unwrap();
    let a = common::session_on(&g, Device::Cpu)
        .run(&[(x, feed.clone())], &[y])
        .unwrap();
    let b = common::session_on(&back, Device::Cpu)
        .run(&[(x2, feed)], &[y2])
        .unwrap();
    assert_eq!(a, b);
    // A constant that is not exactly an f16 is refused, not rounded.
    let bad = text.replacen("0.099975586", "0.1", 1);
    assert_ne!(bad, text, "{text}");
    let e = Graph::from_json(&bad).expect_err("0.1 is not an f16");
    assert!(e.to_string().contains("f16"), "{e}");
}

#[test]
fn f16_slices_and_transposes_read_through_views_match_cpu() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [3, 5], DType::F16).unwrap();
    let t = g.transpose(x, &[1, 0]).unwrap();
    let s = g
        .slice(
            x,
            &[SliceArg::new(None, None, -1), SliceArg::new(None, None, 2)],
        )
        .unwrap();
    let a = g.neg(t).unwrap();
    let b = g.mul(s, s).unwrap();
    let vals: Vec<f16> = (0..15)
        .map(|i| f16::from_f32(i as f32 * 0.3 - 2.0))
        .collect();
    let feed = HostTensor::new([3, 5], vals).unwrap();
    let want = common::session_on(&g, Device::Cpu)
        .run(&[(x, feed.clone())], &[a, b])
        .unwrap();
    for gpu in gpus_by_f16().0 {
        let mut s = common::session_on(&g, gpu);
        assert_eq!(s.plan(&[a, b]).unwrap().dispatch_count(), 2);
        assert_eq!(s.run(&[(x, feed.clone())], &[a, b]).unwrap(), want, "{gpu}");
    }
}

//! The library on the page's WebGPU adapter, in a real browser (headless Chromium through
//! chromedriver; SwiftShader's Vulkan in CI): `init_web` finds the adapter, the device list
//! shows it as gpu:0 beside cpu:0, and a graph of elementwise work, a reduction and a matmul
//! runs there through `Session::run_async` (a page must not block) against float64 values
//! computed here, and so does one op of each family (elementwise, reductions, batched matmul,
//! movement, gather, convolution and pooling, softmax, cumulative sum). Without an adapter the test passes with a note, unless the build set
//! `WGFLOW_REQUIRE_BROWSER=1`.
#![cfg(target_arch = "wasm32")]

mod common;

use common::{close, det};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};
use wgflow::{
    Axes, Conv2dOptions, DType, Device, Graph, HostTensor, Session, SessionOptions, SliceArg,
};

wasm_bindgen_test_configure!(run_in_browser);

/// wgflow's and wgpu's warnings and errors, on the page's console (the runner prints it).
struct Console;

impl log::Log for Console {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            web_sys_log(&format!("{} {}: {}", r.level(), r.target(), r.args()));
        }
    }
    fn flush(&self) {}
}

#[wasm_bindgen_test]
async fn a_graph_runs_on_the_pages_webgpu_adapter() {
    let _ = log::set_logger(&Console).map(|()| log::set_max_level(log::LevelFilter::Warn));
    if !webgpu_or_skip().await {
        return;
    }
    let list = wgflow::devices();
    assert_eq!(list.len(), 2, "{list:?}");
    assert_eq!(list[0].device, Device::Gpu(0));
    assert_eq!(list[1].device, Device::Cpu);
    web_sys_log(&format!("{:?}", list[0]));
    // A fallback adapter (SwiftShader) is a CPU pretending to be a GPU: wasm cpu:0 beats it,
    // so the default device is cpu:0 there, and gpu:0 only where it is hardware.
    let expected = if list[0].device_type == "software" {
        Device::Cpu
    } else {
        Device::Gpu(0)
    };
    assert_eq!(Device::best(), expected, "{:?}", list[0]);
    assert_eq!(wgflow_web::best_device(), expected.to_string());

    let (m, k, n) = (33usize, 17usize, 29usize);
    let av: Vec<f32> = (0..m * k)
        .map(|i| ((i * 7) % 13) as f32 / 8.0 - 0.75)
        .collect();
    let bv: Vec<f32> = (0..k * n)
        .map(|i| ((i * 5) % 11) as f32 / 4.0 - 1.25)
        .collect();
    let xv: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) / 250.0).collect();
    let mut g = Graph::new();
    let a = g.placeholder("a", [m, k], DType::F32).unwrap();
    let b = g
        .constant(HostTensor::new(vec![k, n], bv.clone()).unwrap())
        .unwrap();
    let c = g.matmul(a, b).unwrap();
    let x = g.placeholder("x", [1000], DType::F32).unwrap();
    let two = g.constant(HostTensor::scalar(2.0f32)).unwrap();
    let y = g.mul(x, two).unwrap();
    let y = g.tanh(y).unwrap();
    let s = g.sum(y, Axes::All, false).unwrap();
    let options = SessionOptions {
        default_device: Some(Device::Gpu(0)),
        ..SessionOptions::default()
    };
    let mut sess = Session::new(&g, options).expect("a session on gpu:0");
    let feeds = [
        (a, HostTensor::new(vec![m, k], av.clone()).unwrap()),
        (x, HostTensor::new(vec![1000], xv.clone()).unwrap()),
    ];
    let out = sess
        .run_async(&feeds, &[c, y, s])
        .await
        .expect("run on gpu:0");
    let got_c: Vec<f32> = out[0].to_vec().unwrap();
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k)
                .map(|q| av[i * k + q] as f64 * bv[q * n + j] as f64)
                .sum();
            let got = got_c[i * n + j] as f64;
            assert!(
                (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                "c[{i},{j}]: {got} against {want}"
            );
        }
    }
    let got_y: Vec<f32> = out[1].to_vec().unwrap();
    let mut total = 0f64;
    for (i, &v) in xv.iter().enumerate() {
        let want = (2.0 * v as f64).tanh();
        total += want;
        assert!(
            (got_y[i] as f64 - want).abs() <= 1e-5,
            "tanh at {v}: {} against {want}",
            got_y[i]
        );
    }
    let got_s: f32 = out[2].item().unwrap();
    assert!(
        (got_s as f64 - total).abs() <= 1e-3,
        "sum: {got_s} against {total}"
    );
}

/// Whether the page has a WebGPU adapter (made gpu:0 by `init_web`); without one a test
/// skips, unless the build set `WGFLOW_REQUIRE_BROWSER=1`.
async fn webgpu_or_skip() -> bool {
    if wgflow::backend::init_web().await.expect("init_web") > 0 {
        return true;
    }
    assert!(
        option_env!("WGFLOW_REQUIRE_BROWSER") != Some("1"),
        "no WebGPU adapter in this browser"
    );
    web_sys_log("no WebGPU adapter: skipped");
    false
}

/// One op of each family on the page's WebGPU adapter, against float64 computed here:
/// elementwise (a select over a comparison), reductions (max, mean), a batched matmul,
/// movement (transpose, slice, concat), gather, a convolution with bias and a max pool,
/// softmax and a cumulative sum.
#[wasm_bindgen_test]
async fn every_op_family_matches_float64_on_the_pages_webgpu_adapter() {
    if !webgpu_or_skip().await {
        return;
    }
    let (b, r, c) = (2usize, 3usize, 4usize);
    let xv = det(b * r * c, 1);
    let x64: Vec<f64> = xv.iter().map(|&v| v as f64).collect();
    let at = |i: usize, j: usize, k: usize| x64[(i * r + j) * c + k];
    let mut g = Graph::new();
    let x = g.placeholder("x", [b, r, c], DType::F32).unwrap();
    let mut fetches = Vec::new();
    let mut wants: Vec<(&str, Vec<f64>)> = Vec::new();

    // Elementwise: where(x > 0, exp(-x), x * x).
    let zero = g.constant(HostTensor::scalar(0.0f32)).unwrap();
    let pos = g.greater(x, zero).unwrap();
    let nx = g.neg(x).unwrap();
    let e = g.exp(nx).unwrap();
    let sq = g.mul(x, x).unwrap();
    fetches.push(g.select(pos, e, sq).unwrap());
    wants.push((
        "select",
        x64.iter()
            .map(|&v| if v > 0.0 { (-v).exp() } else { v * v })
            .collect(),
    ));
    // Reductions.
    fetches.push(g.max(x, Axes::List(vec![1]), false).unwrap());
    wants.push((
        "max over axis 1",
        (0..b)
            .flat_map(|i| (0..c).map(move |k| (i, k)))
            .map(|(i, k)| (0..r).map(|j| at(i, j, k)).fold(f64::MIN, f64::max))
            .collect(),
    ));
    fetches.push(g.mean(x, Axes::List(vec![2]), false).unwrap());
    wants.push((
        "mean over axis 2",
        (0..b * r)
            .map(|ij| (0..c).map(|k| x64[ij * c + k]).sum::<f64>() / c as f64)
            .collect(),
    ));
    // A batched matmul: x @ w, w [b, c, 5].
    let wv = det(b * c * 5, 2);
    let w = g
        .constant(HostTensor::new(vec![b, c, 5], wv.clone()).unwrap())
        .unwrap();
    fetches.push(g.matmul(x, w).unwrap());
    wants.push((
        "batched matmul",
        (0..b * r * 5)
            .map(|o| {
                let (i, j, q) = (o / (r * 5), (o / 5) % r, o % 5);
                (0..c)
                    .map(|k| at(i, j, k) * wv[(i * c + k) * 5 + q] as f64)
                    .sum()
            })
            .collect(),
    ));
    // Movement: concat(transpose(x)[:, 1:3], transpose(x)[:, 0:1]) along axis 1.
    let t = g.transpose(x, &[0, 2, 1]).unwrap();
    let mid = g
        .slice(t, &[SliceArg::full(), SliceArg::range(1, 3)])
        .unwrap();
    let first = g
        .slice(t, &[SliceArg::full(), SliceArg::range(0, 1)])
        .unwrap();
    fetches.push(g.concat(&[mid, first], 1).unwrap());
    wants.push((
        "transpose, slice, concat",
        (0..b)
            .flat_map(|i| [1usize, 2, 0].into_iter().map(move |k| (i, k)))
            .flat_map(|(i, k)| (0..r).map(move |j| (i, j, k)))
            .map(|(i, j, k)| at(i, j, k))
            .collect(),
    ));
    // Gather along axis 2.
    let idx = g
        .constant(HostTensor::new(vec![3], vec![3i32, 0, 3]).unwrap())
        .unwrap();
    fetches.push(g.take(x, idx, 2).unwrap());
    wants.push((
        "take",
        (0..b * r)
            .flat_map(|ij| [3usize, 0, 3].map(|k| x64[ij * c + k]))
            .collect(),
    ));
    // A 3x3 convolution with bias and padding 1 over x as [b, 1, r, c], then a 2x2 max pool.
    let img = g
        .reshape(x, &[b as isize, 1, r as isize, c as isize])
        .unwrap();
    let kv = det(2 * 9, 3);
    let kern = g
        .constant(HostTensor::new(vec![2, 1, 3, 3], kv.clone()).unwrap())
        .unwrap();
    let bias = g
        .constant(HostTensor::new(vec![2], vec![0.25f32, -0.5]).unwrap())
        .unwrap();
    let opts = Conv2dOptions {
        padding: [1, 1],
        ..Conv2dOptions::default()
    };
    let conv = g.conv2d(img, kern, Some(bias), opts).unwrap();
    fetches.push(conv);
    let conv64: Vec<f64> = (0..b * 2 * r * c)
        .map(|o| {
            let (i, oc, y, z) = (o / (2 * r * c), (o / (r * c)) % 2, (o / c) % r, o % c);
            let mut acc = [0.25, -0.5][oc];
            for dy in 0..3 {
                for dz in 0..3 {
                    let (yy, zz) = (y as isize + dy as isize - 1, z as isize + dz as isize - 1);
                    if yy >= 0 && zz >= 0 && (yy as usize) < r && (zz as usize) < c {
                        acc += at(i, yy as usize, zz as usize) * kv[oc * 9 + dy * 3 + dz] as f64;
                    }
                }
            }
            acc
        })
        .collect();
    wants.push(("conv2d", conv64.clone()));
    fetches.push(g.max_pool2d(conv, [2, 2], [2, 2], [0, 0]).unwrap());
    wants.push((
        "max_pool2d",
        (0..b * 2 * (r / 2) * (c / 2))
            .map(|o| {
                let (ic, y, z) = (
                    o / ((r / 2) * (c / 2)),
                    (o / (c / 2)) % (r / 2),
                    o % (c / 2),
                );
                let cell = |dy: usize, dz: usize| conv64[(ic * r + 2 * y + dy) * c + 2 * z + dz];
                cell(0, 0).max(cell(0, 1)).max(cell(1, 0)).max(cell(1, 1))
            })
            .collect(),
    ));
    // Softmax and a cumulative sum along the last axis.
    fetches.push(g.softmax(x, -1).unwrap());
    wants.push((
        "softmax",
        (0..b * r)
            .flat_map(|ij| {
                let row: Vec<f64> = x64[ij * c..(ij + 1) * c].to_vec();
                let m = row.iter().cloned().fold(f64::MIN, f64::max);
                let z: f64 = row.iter().map(|v| (v - m).exp()).sum();
                row.into_iter().map(move |v| (v - m).exp() / z)
            })
            .collect(),
    ));
    fetches.push(g.cumsum(x, -1).unwrap());
    wants.push((
        "cumsum",
        (0..b * r)
            .flat_map(|ij| {
                let row: Vec<f64> = x64[ij * c..(ij + 1) * c].to_vec();
                row.into_iter().scan(0.0, |acc, v| {
                    *acc += v;
                    Some(*acc)
                })
            })
            .collect(),
    ));

    let options = SessionOptions {
        default_device: Some(Device::Gpu(0)),
        ..SessionOptions::default()
    };
    let mut sess = Session::new(&g, options).expect("a session on gpu:0");
    let plan = sess.plan(&fetches).expect("a plan");
    assert!(
        plan.steps.iter().all(|s| s.device == Device::Gpu(0)),
        "every step on gpu:0"
    );
    let feeds = [(x, HostTensor::new(vec![b, r, c], xv).unwrap())];
    let out = sess
        .run_async(&feeds, &fetches)
        .await
        .expect("run on gpu:0");
    for (got, (what, want)) in out.iter().zip(&wants) {
        close(what, &got.to_vec::<f32>().unwrap(), want, 1e-5);
    }
}

fn web_sys_log(s: &str) {
    wasm_bindgen_test::console_log!("{s}");
}

/// An ONNX model on the page's WebGPU adapter: the quantize_dynamic MLP of
/// tests/onnx/quantized.rs (integer matmuls, dynamic quantization) against onnxruntime's
/// output stored beside it, through `InferenceSession::run_async`.
#[wasm_bindgen_test]
async fn an_onnx_model_runs_on_the_pages_webgpu_adapter() {
    if !webgpu_or_skip().await {
        return;
    }
    let model = include_bytes!("../../tests/data/onnx-quantized/mlp_dynamic.onnx");
    let x = wgflow::npy::from_bytes(include_bytes!(
        "../../tests/data/onnx-quantized/mlp_dynamic.input.npy"
    ))
    .unwrap();
    let want: Vec<f32> = wgflow::npy::from_bytes(include_bytes!(
        "../../tests/data/onnx-quantized/mlp_dynamic.unoptimized.npy"
    ))
    .unwrap()
    .to_vec()
    .unwrap();
    let options = SessionOptions {
        default_device: Some(Device::Gpu(0)),
        ..SessionOptions::default()
    };
    let mut s = wgflow::onnx::InferenceSession::from_bytes(
        model.to_vec(),
        None,
        wgflow::onnx::ImportOptions::default(),
        options,
    )
    .expect("import on gpu:0");
    let out = s
        .run_async(None, vec![("x", x)])
        .await
        .expect("run on gpu:0");
    let got: Vec<f32> = out[0].to_vec().unwrap();
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "output {i}: {g} against onnxruntime's {w}"
        );
    }
    // A second run of the same session: the first run's plan is reused.
    let again = s
        .run_async(
            None,
            vec![(
                "x",
                wgflow::npy::from_bytes(include_bytes!(
                    "../../tests/data/onnx-quantized/mlp_dynamic.input.npy"
                ))
                .unwrap(),
            )],
        )
        .await
        .expect("second run");
    assert_eq!(again[0].to_vec::<f32>().unwrap(), got);
}

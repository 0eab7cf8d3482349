//! The library on the page's WebGPU adapter, in a real browser (headless Chromium through
//! chromedriver; SwiftShader's Vulkan in CI): `init_web` finds the adapter, the device list
//! shows it as gpu:0 beside cpu:0, and a graph of elementwise work, a reduction and a matmul
//! runs there through `Session::run_async` (a page must not block) against float64 values
//! computed here. Without an adapter the test passes with a note, unless the build set
//! `WGFLOW_REQUIRE_BROWSER=1`.
#![cfg(target_arch = "wasm32")]

use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};
use wgflow::{Axes, DType, Device, Graph, HostTensor, Session, SessionOptions};

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
    let n = wgflow::backend::init_web().await.expect("init_web");
    if n == 0 {
        assert!(
            option_env!("WGFLOW_REQUIRE_BROWSER") != Some("1"),
            "no WebGPU adapter in this browser"
        );
        web_sys_log("no WebGPU adapter: skipped");
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

fn web_sys_log(s: &str) {
    wasm_bindgen_test::console_log!("{s}");
}

/// An ONNX model on the page's WebGPU adapter: the quantize_dynamic MLP of
/// tests/onnx/quantized.rs (integer matmuls, dynamic quantization) against onnxruntime's
/// output stored beside it, through `InferenceSession::run_async`.
#[wasm_bindgen_test]
async fn an_onnx_model_runs_on_the_pages_webgpu_adapter() {
    if wgflow::backend::init_web().await.expect("init_web") == 0 {
        assert!(option_env!("WGFLOW_REQUIRE_BROWSER") != Some("1"));
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

//! The library compiled to wasm32 and run by a JavaScript engine (`wasm-bindgen-test`:
//! Node.js here, a browser with `WASM_BINDGEN_USE_BROWSER`), on cpu:0, through the bindings a
//! page calls: a saved graph against values computed here, a gradient against its formula
//! and finite differences, the committed quantized ONNX model against onnxruntime's stored
//! output, and bad input that must be an error (never a panic, which would poison the
//! module for the calls after it).
//!
//!     cargo test -p wgflow-web --target wasm32-unknown-unknown
//!
//! with `wasm-bindgen-test-runner` (wasm-bindgen-cli 0.2.130) as the target's runner
//! (`web/.cargo/config.toml` names it; `.ci/run` installs it).
#![cfg(target_arch = "wasm32")]

// The page's build has SIMD128 (web/.cargo/config.toml): a build without it would test
// scalar paths that users never run.
const _: () = assert!(
    cfg!(target_feature = "simd128"),
    "built without SIMD128: web/.cargo/config.toml's rustflags were not applied"
);

mod common;

use common::{close, det};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::wasm_bindgen_test;
use wgflow::{Axes, DType, Graph, HostTensor};
use wgflow_web::{GraphSession, OnnxSession, WgTensor};

fn run(
    s: &mut GraphSession,
    feeds: &[(&str, Vec<f32>, Vec<usize>)],
    fetches: &[&str],
) -> Vec<Vec<f32>> {
    let names = feeds.iter().map(|f| f.0.to_string()).collect();
    let values = feeds
        .iter()
        .map(|f| WgTensor::from_vec(f.1.clone(), f.2.clone()))
        .collect();
    let fetches = fetches.iter().map(|f| f.to_string()).collect();
    match s.run(names, values, fetches) {
        Ok(out) => out.iter().map(|t| t.values().unwrap().to_vec()).collect(),
        Err(_) => panic!("run failed"),
    }
}

/// A dense layer with ReLU, a softmax and a sum, saved as JSON and loaded by the bindings.
#[wasm_bindgen_test]
fn a_saved_graph_runs_and_matches_float64() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [2, 3], DType::F32).unwrap();
    let w = g
        .constant(HostTensor::new(vec![3, 2], vec![0.5f32, -1.0, 2.0, 0.25, -0.5, 1.5]).unwrap())
        .unwrap();
    let b = g
        .constant(HostTensor::new(vec![2], vec![0.1f32, -0.2]).unwrap())
        .unwrap();
    let h = g.matmul(x, w).unwrap();
    let h = g.add(h, b).unwrap();
    let h = g.relu(h).unwrap();
    let y = g.softmax(h, -1).unwrap();
    let s = g.sum(h, Axes::All, false).unwrap();
    let (yn, sn) = (
        g.name(y).unwrap().to_string(),
        g.name(s).unwrap().to_string(),
    );
    let json = g.to_json().unwrap();
    let mut sess = GraphSession::new(&json).unwrap_or_else(|_| panic!("load"));

    let xv = vec![1.0f32, 2.0, 3.0, -1.0, 0.5, 4.0];
    let (wv, bv) = ([0.5, -1.0, 2.0, 0.25, -0.5, 1.5], [0.1, -0.2]);
    let mut hv = [0f64; 4];
    for i in 0..2 {
        for j in 0..2 {
            let mut acc = bv[j];
            for k in 0..3 {
                acc += xv[i * 3 + k] as f64 * wv[k * 2 + j];
            }
            hv[i * 2 + j] = acc.max(0.0);
        }
    }
    let mut yv = Vec::new();
    for r in hv.chunks(2) {
        let m = r[0].max(r[1]);
        let e: Vec<f64> = r.iter().map(|v| (v - m).exp()).collect();
        let z: f64 = e.iter().sum();
        yv.extend(e.iter().map(|v| v / z));
    }
    let out = run(&mut sess, &[("x", xv.clone(), vec![2, 3])], &[&yn, &sn]);
    close("softmax", &out[0], &yv, 1e-6);
    close("sum", &out[1], &[hv.iter().sum()], 1e-6);
    // The same session again, other values.
    let out = run(&mut sess, &[("x", vec![0.0; 6], vec![2, 3])], &[&sn]);
    close("sum of zeros", &out[0], &[0.2], 1e-6);
}

/// The web crate builds with SIMD128 (`web/.cargo/config.toml`), which cpu:0's GEMM then
/// runs on: a product with edges in every blocking (odd M, K and N), with a bias and ReLU,
/// through the bindings, against float64.
#[wasm_bindgen_test]
fn a_simd128_product_matches_float64() {
    let (m, k, n) = (67, 129, 83);
    let (xv, wv, bv) = (det(m * k, 1), det(k * n, 2), det(n, 3));
    let mut g = Graph::new();
    let x = g.placeholder("x", [m, k], DType::F32).unwrap();
    let w = g
        .constant(HostTensor::new(vec![k, n], wv.clone()).unwrap())
        .unwrap();
    let b = g
        .constant(HostTensor::new(vec![n], bv.clone()).unwrap())
        .unwrap();
    let h = g.matmul(x, w).unwrap();
    let h = g.add(h, b).unwrap();
    let y = g.relu(h).unwrap();
    let yn = g.name(y).unwrap().to_string();
    let mut sess = GraphSession::new(&g.to_json().unwrap()).unwrap_or_else(|_| panic!("load"));
    let want: Vec<f64> = (0..m * n)
        .map(|o| {
            let (i, j) = (o / n, o % n);
            let dot: f64 = (0..k)
                .map(|t| xv[i * k + t] as f64 * wv[t * n + j] as f64)
                .sum();
            (dot + bv[j] as f64).max(0.0)
        })
        .collect();
    let out = run(&mut sess, &[("x", xv, vec![m, k])], &[&yn]);
    close("relu(x @ w + b)", &out[0], &want, 1e-5);
}

/// d/dw sum(tanh(x * w)) = x (1 - tanh²(x w)), and central differences agree.
#[wasm_bindgen_test]
fn gradients_match_the_formula_and_finite_differences() {
    let xv = [0.3f32, -1.2, 2.0, 0.7];
    let wv = [0.5f32, 0.25, -0.4, 1.1];
    let mut g = Graph::new();
    let x = g
        .constant(HostTensor::new(vec![4], xv.to_vec()).unwrap())
        .unwrap();
    let w = g.placeholder("w", [4], DType::F32).unwrap();
    let p = g.mul(x, w).unwrap();
    let t = g.tanh(p).unwrap();
    let loss = g.sum(t, Axes::All, false).unwrap();
    let dw = g.gradients(loss, &[w]).unwrap()[0].unwrap();
    let (ln, dn) = (
        g.name(loss).unwrap().to_string(),
        g.name(dw).unwrap().to_string(),
    );
    let mut sess = GraphSession::new(&g.to_json().unwrap()).unwrap_or_else(|_| panic!("load"));
    let out = run(&mut sess, &[("w", wv.to_vec(), vec![4])], &[&dn]);
    let formula: Vec<f64> = xv
        .iter()
        .zip(&wv)
        .map(|(&x, &w)| {
            let t = (x as f64 * w as f64).tanh();
            x as f64 * (1.0 - t * t)
        })
        .collect();
    close("gradient", &out[0], &formula, 1e-5);
    let h = 1e-2f32;
    for i in 0..4 {
        let mut up = wv.to_vec();
        up[i] += h;
        let mut down = wv.to_vec();
        down[i] -= h;
        let lu = run(&mut sess, &[("w", up, vec![4])], &[&ln])[0][0] as f64;
        let ld = run(&mut sess, &[("w", down, vec![4])], &[&ln])[0][0] as f64;
        let fd = (lu - ld) / (2.0 * h as f64);
        assert!(
            (fd - out[0][i] as f64).abs() < 2e-3,
            "w[{i}]: {fd} against {}",
            out[0][i]
        );
    }
}

/// The quantize_dynamic MLP of tests/onnx/quantized.rs, against onnxruntime's unoptimized
/// output stored beside it.
#[wasm_bindgen_test]
fn an_onnx_model_from_bytes_matches_onnxruntime() {
    let model = include_bytes!("../../tests/data/onnx-quantized/mlp_dynamic.onnx");
    let x = wgflow::npy::from_bytes(include_bytes!(
        "../../tests/data/onnx-quantized/mlp_dynamic.input.npy"
    ))
    .unwrap();
    let want = wgflow::npy::from_bytes(include_bytes!(
        "../../tests/data/onnx-quantized/mlp_dynamic.unoptimized.npy"
    ))
    .unwrap();
    let mut s = OnnxSession::new(model.to_vec()).unwrap_or_else(|_| panic!("import"));
    assert_eq!(s.input_names(), ["x"]);
    let feed = WgTensor::from_vec(x.to_vec::<f32>().unwrap(), x.dims().to_vec());
    let out = s
        .run(vec!["x".into()], vec![feed])
        .unwrap_or_else(|_| panic!("run"));
    let want: Vec<f64> = want
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|&v| v as f64)
        .collect();
    close("mlp_dynamic", out[0].values().unwrap(), &want, 1e-5);
}

/// Wrong lengths, unknown names, a truncated model: errors, and the session still runs.
#[wasm_bindgen_test]
fn bad_input_is_an_error_and_the_module_stays_usable() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [3], DType::F32).unwrap();
    let y = g.neg(x).unwrap();
    let yn = g.name(y).unwrap().to_string();
    let mut s = GraphSession::new(&g.to_json().unwrap()).unwrap_or_else(|_| panic!("load"));
    let bad = WgTensor::from_vec(vec![1.0; 4], vec![3]);
    assert!(s
        .run(vec!["x".into()], vec![bad], vec![yn.clone()])
        .is_err());
    let short = WgTensor::from_vec(vec![1.0; 2], vec![2]);
    assert!(s
        .run(vec!["x".into()], vec![short], vec![yn.clone()])
        .is_err());
    let ok = WgTensor::from_vec(vec![1.0, -2.0, 0.5], vec![3]);
    assert!(s
        .run(vec!["nope".into()], vec![ok.clone()], vec![yn.clone()])
        .is_err());
    assert!(s.run(vec![], vec![ok.clone()], vec![yn.clone()]).is_err());
    assert!(GraphSession::new("{ not json").is_err());
    let model = include_bytes!("../../tests/data/onnx-quantized/mlp_dynamic.onnx");
    assert!(OnnxSession::new(model[..model.len() / 2].to_vec()).is_err());
    let out = run(&mut s, &[("x", vec![1.0, -2.0, 0.5], vec![3])], &[&yn]);
    close("after errors", &out[0], &[-1.0, 2.0, -0.5], 0.0);
}

/// An exported transformer encoder as a page feeds it: int64 `input_ids` and
/// `attention_mask` from `BigInt64Array`s, at two batch and sequence sizes in one session
/// (the symbolic dims bound from the feeds), outputs by the model's names in its order, the
/// ArgMax `predictions` back as int64, all against onnxruntime's stored outputs.
#[wasm_bindgen_test]
fn int64_ids_from_big_int64_arrays_match_onnxruntime() {
    use js_sys::BigInt64Array;
    macro_rules! npy {
        ($f:literal) => {
            wgflow::npy::from_bytes(include_bytes!(concat!(
                "../../tests/data/onnx-patterns/encoder.",
                $f,
                ".npy"
            )))
            .unwrap()
        };
    }
    let model = include_bytes!("../../tests/data/onnx-patterns/encoder.onnx");
    let mut s = OnnxSession::new(model.to_vec()).unwrap_or_else(|_| panic!("import"));
    assert_eq!(s.output_names(), ["logits", "predictions", "pooler_logits"]);
    let sizes = [
        (
            npy!("1x7.input_ids"),
            npy!("1x7.attention_mask"),
            npy!("1x7.logits"),
            npy!("1x7.predictions"),
        ),
        (
            npy!("29x7.input_ids"),
            npy!("29x7.attention_mask"),
            npy!("29x7.logits"),
            npy!("29x7.predictions"),
        ),
    ];
    let big = |t: &HostTensor| {
        let v = t.to_i64_vec().unwrap();
        let dims = t.dims().iter().map(|&d| d as u32).collect();
        WgTensor::from_big_int64(BigInt64Array::from(&v[..]), dims)
    };
    for (ids, mask, logits, predictions) in &sizes {
        let out = s
            .run(
                vec!["input_ids".into(), "attention_mask".into()],
                vec![big(ids), big(mask)],
            )
            .unwrap_or_else(|_| panic!("run"));
        assert_eq!(out[0].dtype(), "float32");
        assert_eq!(
            out[0].dims(),
            logits.dims().iter().map(|&d| d as u32).collect::<Vec<_>>()
        );
        let want: Vec<f64> = logits
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|&v| v as f64)
            .collect();
        close("logits", out[0].values().unwrap(), &want, 1e-4);
        assert_eq!(out[1].dtype(), "int64");
        assert_eq!(
            out[1].i64_values().unwrap(),
            predictions.to_i64_vec().unwrap()
        );
        let back = out[1].int64_data().unwrap_or_else(|_| panic!("int64Data"));
        assert_eq!(
            back.length() as usize,
            predictions.dims().iter().product::<usize>()
        );
    }
    // An id past int32 is an error naming its index; the session still runs after it.
    let mut ids = sizes[0].0.to_i64_vec().unwrap();
    ids[3] = 1 << 40;
    let bad = WgTensor::from_big_int64(BigInt64Array::from(&ids[..]), vec![1, 7]);
    let e = s.run(
        vec!["input_ids".into(), "attention_mask".into()],
        vec![bad, big(&sizes[0].1)],
    );
    assert!(e.is_err());
    assert!(s
        .run(
            vec!["input_ids".into(), "attention_mask".into()],
            vec![big(&sizes[0].0), big(&sizes[0].1)],
        )
        .is_ok());
}

/// A graph with two run-time dimensions meeting in one tensor (`[batch, seq, seq]` scores),
/// in a page: on wasm32 the probe sizes that stand in for them (about 2^17 each) overflow a
/// 32-bit element count, which must not panic (it would poison the module) or mislead the
/// plan. Checked against float64.
#[wasm_bindgen_test]
fn two_run_time_dimensions_in_one_tensor_never_panic() {
    let mut g = Graph::new();
    let x = g
        .placeholder_dyn("x", [None, None, Some(2)], DType::F32)
        .unwrap();
    let t = g.transpose(x, &[0, 2, 1]).unwrap();
    let p = g.matmul(x, t).unwrap();
    let p = g.softmax(p, -1).unwrap();
    let z = g.matmul(p, x).unwrap();
    let y = g.sum(z, Axes::List(vec![1, 2]), false).unwrap();
    let yn = g.name(y).unwrap().to_string();
    let json = g.to_json().unwrap();
    let mut s =
        GraphSession::new(&json).unwrap_or_else(|e| panic!("session: {:?}", JsValue::from(e)));
    let values = vec![WgTensor::from_vec(
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        vec![2, 3, 2],
    )];
    let out = s
        .run(vec!["x".into()], values, vec![yn])
        .unwrap_or_else(|e| panic!("run: {:?}", JsValue::from(e)));
    // softmax(x xᵀ) x summed over rows and features, in float64.
    let xs = [[1.0f64, 2.0], [3.0, 4.0], [5.0, 6.0]];
    let mut want = 0.0;
    for r in &xs {
        let logits: Vec<f64> = xs.iter().map(|c| r[0] * c[0] + r[1] * c[1]).collect();
        let m = logits.iter().cloned().fold(f64::MIN, f64::max);
        let e: Vec<f64> = logits.iter().map(|l| (l - m).exp()).collect();
        let total: f64 = e.iter().sum();
        for (w, c) in e.iter().zip(&xs) {
            want += w / total * (c[0] + c[1]);
        }
    }
    close(
        "attention-like",
        out[0].values().unwrap(),
        &[want, want],
        1e-5,
    );
}

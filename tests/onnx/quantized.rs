//! Models quantized as users quantize them (scripts/onnx/quantized_models.py): dynamic
//! (`DynamicQuantizeLinear` + `MatMulInteger`) and static, in both of onnxruntime's formats
//! (QDQ pairs; QOperator's `QLinearConv`, `QGemm`, `QLinearGlobalAveragePool`), on every
//! device, against onnxruntime.
//!
//! The exact reference is onnxruntime with graph optimizations off, which runs the model's
//! own semantics; its optimizer fuses QDQ pairs into integer kernels that round differently
//! (0.07 apart on the QDQ CNN), so the default run is matched to within quantization noise.

use super::protos::{node, typed_model_at};
use std::path::{Path, PathBuf};
use wgflow::onnx::proto::{tensor_proto::DataType, ModelProto, TensorProto};
use wgflow::onnx::{ImportOptions, InferenceSession};
use wgflow::{Device, HostTensor, SessionOptions};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx-quantized")
}

fn npy(name: &str, what: &str) -> HostTensor {
    wgflow::npy::read(dir().join(format!("{name}.{what}.npy"))).unwrap()
}

/// An 8- or 16-bit integer initializer of type `ty`, its values' low bytes as raw data.
fn bytes(name: &str, dims: &[i64], ty: DataType, v: &[i32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(ty as i32),
        raw_data: Some(v.iter().map(|&x| x as u8).collect()),
        ..Default::default()
    }
}

/// cpu:0 and every GPU adapter.
fn devices() -> Vec<Device> {
    let mut devices = vec![Device::Cpu];
    devices.extend(crate::common::gpus());
    devices
}

/// An inference session of `model` on `device`.
fn session_on(model: &ModelProto, device: Device) -> InferenceSession {
    use wgflow::onnx::Message;
    let options = SessionOptions {
        default_device: Some(device),
        visible_devices: Some(crate::common::gpu_indices()),
        ..Default::default()
    };
    InferenceSession::from_bytes(
        model.encode_to_vec(),
        None,
        ImportOptions::default(),
        options,
    )
    .unwrap()
}

fn max_diff(a: &HostTensor, b: &HostTensor) -> f32 {
    let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn quantized_models_match_onnxruntime_on_every_device() {
    let mut devices = vec![Device::Cpu];
    devices.extend(crate::common::gpus());
    for name in [
        "mlp_dynamic",
        "encoder_ffn_dynamic",
        "cnn_static_qdq",
        "cnn_static_qoperator",
        "wide_cnn_dynamic",
        "wide_cnn_static_qoperator",
    ] {
        let (x, exact, ort) = (
            npy(name, "input"),
            npy(name, "unoptimized"),
            npy(name, "output"),
        );
        let scale = exact
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .fold(0f32, |m, v| m.max(v.abs()));
        for &device in &devices {
            let options = SessionOptions {
                default_device: Some(device),
                visible_devices: Some(crate::common::gpu_indices()),
                ..Default::default()
            };
            let mut s = InferenceSession::new(
                &dir().join(format!("{name}.onnx")),
                ImportOptions::default(),
                options,
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            let got = s
                .run(None, &[("x", x.clone())])
                .unwrap_or_else(|e| panic!("{name} on {device}: {e}"));
            assert_eq!(got[0].dims(), exact.dims(), "{name} on {device}");
            let (d_exact, d_ort) = (max_diff(&got[0], &exact), max_diff(&got[0], &ort));
            // cpu:0 computes the model's arithmetic as onnxruntime does; a GPU's f32 division
            // may round a value at a quantization tie the other way: one step of noise.
            let tight = if device == Device::Cpu { 1e-5 } else { 0.1 } * scale.max(1.0);
            assert!(
                d_exact <= tight,
                "{name} on {device}: {d_exact} from onnxruntime (unoptimized)"
            );
            assert!(
                d_ort <= 0.1 * scale.max(1.0),
                "{name} on {device}: {d_ort} from onnxruntime"
            );
        }
    }
}

/// The integer kernels are exact: `MatMulInteger` over K = 1000 (past f32's exact range for
/// the sums) and an 8-bit wrap, against i64 arithmetic here.
#[test]
fn integer_matmul_is_exact_past_f32_range() {
    use super::protos::typed_value;
    // B has 70,000 elements: past the size (2^16) from which the importer makes an integer
    // initializer a graph constant at once instead of an i64 host value.
    let (m, k, n) = (3usize, 1000usize, 70usize);
    let mut rng = crate::common::Rng(17);
    let a: Vec<i32> = (0..m * k).map(|_| rng.below(256) as i32).collect();
    let b: Vec<i32> = (0..k * n).map(|_| rng.below(256) as i32).collect();
    let u8s = DataType::Uint8;
    let model = typed_model_at(
        17,
        vec![typed_value("a", &[m as i64, k as i64], u8s)],
        vec![
            bytes("b", &[k as i64, n as i64], u8s, &b),
            bytes("az", &[], u8s, &[7]),
            bytes("bz", &[], u8s, &[200]),
        ],
        vec![
            node("MatMulInteger", &["a", "b", "az", "bz"], &["y"], vec![]),
            // uint8 + uint8 wraps at 256.
            node("Add", &["a", "a"], &["twice"], vec![]),
        ],
        vec![
            typed_value("y", &[m as i64, n as i64], DataType::Int32),
            typed_value("twice", &[m as i64, k as i64], u8s),
        ],
    );
    for device in devices() {
        let mut s = session_on(&model, device);
        let feed = HostTensor::new([m, k], a.clone()).unwrap();
        let got = s.run(None, &[("a", feed)]).unwrap();
        let y = got[0].to_vec::<i32>().unwrap();
        for i in 0..m {
            for j in 0..n {
                let want: i64 = (0..k)
                    .map(|p| (a[i * k + p] as i64 - 7) * (b[p * n + j] as i64 - 200))
                    .sum();
                assert_eq!(y[i * n + j] as i64, want, "[{i}, {j}] on {device}");
            }
        }
        let twice = got[1].to_vec::<i32>().unwrap();
        assert!(
            twice.iter().zip(&a).all(|(t, x)| *t == (2 * x) % 256),
            "uint8 wraps on {device}"
        );
    }
}

/// One `ConvInteger` case: x `[n, c, h, w]` (or `[n, c, w]` when `h` is `None`), weights
/// `[o, c / group, kh, kw]`, with ONNX's pads (`[top, left, bottom, right]`), strides and
/// dilations.
struct ConvCase {
    x: [usize; 4],
    one_d: bool,
    o: usize,
    k: [usize; 2],
    pads: [usize; 4],
    strides: [usize; 2],
    dilations: [usize; 2],
    group: usize,
}

impl ConvCase {
    fn out_hw(&self) -> [usize; 2] {
        let [_, _, h, w] = self.x;
        let o = |i: usize, len: usize, lo: usize, hi: usize| {
            let span = self.dilations[i] * (self.k[i] - 1) + 1;
            (len + lo + hi - span) / self.strides[i] + 1
        };
        [
            o(0, h, self.pads[0], self.pads[2]),
            o(1, w, self.pads[1], self.pads[3]),
        ]
    }

    /// The convolution of `x - xz` and `w - wz` in i64, one output at a time.
    fn reference(&self, x: &[i32], w: &[i32], xz: i64, wz: i64) -> Vec<i64> {
        let [n, c, h, wd] = self.x;
        let [oh, ow] = self.out_hw();
        let cg = c / self.group;
        let og = self.o / self.group;
        let [kh, kw] = self.k;
        let mut out = Vec::with_capacity(n * self.o * oh * ow);
        for b in 0..n {
            for o in 0..self.o {
                let g = o / og;
                for i in 0..oh {
                    for j in 0..ow {
                        let mut s = 0i64;
                        for ci in 0..cg {
                            let ch = g * cg + ci;
                            for ki in 0..kh {
                                for kj in 0..kw {
                                    let r = (i * self.strides[0] + ki * self.dilations[0]) as i64
                                        - self.pads[0] as i64;
                                    let q = (j * self.strides[1] + kj * self.dilations[1]) as i64
                                        - self.pads[1] as i64;
                                    if r < 0 || q < 0 || r >= h as i64 || q >= wd as i64 {
                                        continue;
                                    }
                                    let xv = x[((b * c + ch) * h + r as usize) * wd + q as usize];
                                    let wv = w[((o * cg + ci) * kh + ki) * kw + kj];
                                    s += (xv as i64 - xz) * (wv as i64 - wz);
                                }
                            }
                        }
                        out.push(s);
                    }
                }
            }
        }
        out
    }
}

/// `ConvInteger` is exact, against i64 arithmetic here: past f32's exact range for its sums
/// (more than 258 products per output: the integer matrix product of gathered windows), with
/// asymmetric pads, strides, dilations, groups, a 1x1 and a 1-D case, and within it (a
/// 3x3 over 3 channels, the exact f32 convolution).
#[test]
fn integer_convolutions_are_exact_on_every_device() {
    use super::protos::{attr_int, attr_ints, typed_value};
    let case = |x, o, k, pads, strides, dilations, group| ConvCase {
        x,
        one_d: false,
        o,
        k,
        pads,
        strides,
        dilations,
        group,
    };
    let mut cases = vec![
        case([2, 40, 9, 9], 6, [3, 3], [1, 1, 1, 1], [1, 1], [1, 1], 1),
        case([1, 64, 11, 10], 4, [3, 3], [0, 1, 2, 0], [2, 1], [2, 2], 2),
        case([2, 300, 5, 5], 5, [1, 1], [0; 4], [1, 1], [1, 1], 1),
        case([1, 3, 6, 7], 4, [3, 3], [1, 1, 1, 1], [1, 1], [1, 1], 1),
    ];
    cases.push(ConvCase {
        one_d: true,
        ..case([1, 30, 1, 16], 3, [1, 10], [0, 2, 0, 2], [1, 3], [1, 1], 1)
    });
    let (xz, wz) = (131i64, -3i64);
    let devices = devices();
    let mut rng = crate::common::Rng(29);
    for (ci, cc) in cases.iter().enumerate() {
        let [n, c, h, wd] = cc.x;
        let [kh, kw] = cc.k;
        let cg = c / cc.group;
        let x: Vec<i32> = (0..n * c * h * wd).map(|_| rng.below(256) as i32).collect();
        let w: Vec<i32> = (0..cc.o * cg * kh * kw)
            .map(|_| rng.below(256) as i32 - 128)
            .collect();
        let want = cc.reference(&x, &w, xz, wz);
        let [oh, ow] = cc.out_hw();
        let (xdims, wdims, ydims): (Vec<i64>, Vec<i64>, Vec<i64>) = if cc.one_d {
            (
                vec![n as i64, c as i64, wd as i64],
                vec![cc.o as i64, cg as i64, kw as i64],
                vec![n as i64, cc.o as i64, ow as i64],
            )
        } else {
            (
                vec![n as i64, c as i64, h as i64, wd as i64],
                vec![cc.o as i64, cg as i64, kh as i64, kw as i64],
                vec![n as i64, cc.o as i64, oh as i64, ow as i64],
            )
        };
        let pick = |v: [usize; 2]| -> Vec<i64> {
            if cc.one_d {
                vec![v[1] as i64]
            } else {
                v.iter().map(|&d| d as i64).collect()
            }
        };
        let pads: Vec<i64> = if cc.one_d {
            vec![cc.pads[1] as i64, cc.pads[3] as i64]
        } else {
            cc.pads.iter().map(|&p| p as i64).collect()
        };
        let conv = node(
            "ConvInteger",
            &["x", "w", "xz", "wz"],
            &["y"],
            vec![
                attr_ints("pads", &pads),
                attr_ints("strides", &pick(cc.strides)),
                attr_ints("dilations", &pick(cc.dilations)),
                attr_int("group", cc.group as i64),
            ],
        );
        let model = typed_model_at(
            17,
            vec![typed_value("x", &xdims, DataType::Uint8)],
            vec![
                bytes("w", &wdims, DataType::Int8, &w),
                bytes("xz", &[], DataType::Uint8, &[xz as i32]),
                bytes("wz", &[], DataType::Int8, &[wz as i32]),
            ],
            vec![conv],
            vec![typed_value("y", &ydims, DataType::Int32)],
        );
        let shape: Vec<usize> = xdims.iter().map(|&d| d as usize).collect();
        for &device in &devices {
            let mut s = session_on(&model, device);
            let feed = HostTensor::new(shape.clone(), x.clone()).unwrap();
            let got = s.run(None, &[("x", feed)]).unwrap();
            let dims: Vec<usize> = ydims.iter().map(|&d| d as usize).collect();
            assert_eq!(got[0].dims(), dims.as_slice(), "case {ci} on {device}");
            let y = got[0].to_vec::<i32>().unwrap();
            for (i, (&g, &r)) in y.iter().zip(&want).enumerate() {
                assert_eq!(g as i64, r, "case {ci}, element {i} on {device}");
            }
        }
    }
}

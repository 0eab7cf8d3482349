//! The golden harness shared by the op tests: load a golden JSON file
//! (format in `tests/golden/README.md`), build every case into one graph with placeholder
//! inputs, run it on `cpu:0` against NumPy and on every GPU against `cpu:0` and NumPy.
#![allow(dead_code)]

use serde_json::Value as Json;
use wgflow::{DType, Device, Graph, HostTensor, Tensor};

pub struct Case {
    pub name: String,
    pub op: String,
    pub attrs: Json,
    pub inputs: Vec<HostTensor>,
    pub want: HostTensor,
    pub rtol: f32,
    pub atol: f32,
}

pub fn tensor(j: &Json) -> HostTensor {
    let shape: Vec<usize> = j["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let dtype = DType::parse(j["dtype"].as_str().unwrap()).unwrap();
    let words: Vec<u32> = j["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| match dtype {
            DType::F32 | DType::F16 => {
                let x = match v.as_str() {
                    Some("nan") => f32::NAN,
                    Some("inf") => f32::INFINITY,
                    Some("-inf") => f32::NEG_INFINITY,
                    _ => v.as_f64().unwrap() as f32,
                };
                if dtype == DType::F16 {
                    wgflow::f16::from_f32(x).to_bits() as u32
                } else {
                    x.to_bits()
                }
            }
            DType::I32 => v.as_i64().unwrap() as i32 as u32,
            DType::U32 | DType::Bool => v.as_u64().unwrap() as u32,
        })
        .collect();
    HostTensor::from_words(wgflow::Shape::new(shape), dtype, words).unwrap()
}

pub fn cases(text: &str) -> Vec<Case> {
    let doc: Json = serde_json::from_str(text).unwrap();
    assert_eq!(doc["version"], 1);
    doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            name: c["name"].as_str().unwrap().to_string(),
            op: c["op"].as_str().unwrap().to_string(),
            attrs: c["attrs"].clone(),
            inputs: c["inputs"].as_array().unwrap().iter().map(tensor).collect(),
            want: tensor(&c["output"]),
            rtol: c["rtol"].as_f64().unwrap() as f32,
            atol: c["atol"].as_f64().unwrap() as f32,
        })
        .collect()
}

pub fn ints(j: &Json) -> Vec<isize> {
    j.as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap() as isize)
        .collect()
}

pub fn pair(j: &Json) -> [usize; 2] {
    let v = ints(j);
    [v[0] as usize, v[1] as usize]
}

/// Builds one case's output from its (placeholder) inputs.
pub type Builder = fn(&mut Graph, &Case, &[Tensor]) -> wgflow::Result<Tensor>;

pub struct Built {
    pub graph: Graph,
    pub feeds: Vec<(Tensor, HostTensor)>,
    pub outputs: Vec<Tensor>,
    pub cases: Vec<Case>,
}

/// Every case in one graph. `pre_perm` / `pre_flip` attributes turn input 0 into a
/// transposed or flipped (non-contiguous in NumPy) view before the op.
pub fn build_all(text: &str, build: Builder) -> Built {
    let mut graph = Graph::new();
    let (mut feeds, mut outputs) = (Vec::new(), Vec::new());
    let cases = cases(text);
    for case in &cases {
        let mut xs: Vec<Tensor> = case
            .inputs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let p = graph
                    .placeholder(
                        &format!("{}/in{i}", case.name),
                        t.shape().clone(),
                        t.dtype(),
                    )
                    .unwrap();
                feeds.push((p, t.clone()));
                p
            })
            .collect();
        if let Some(perm) = case.attrs.get("pre_perm") {
            xs[0] = graph.transpose(xs[0], &ints(perm)).unwrap();
        }
        if let Some(axis) = case.attrs.get("pre_flip") {
            xs[0] = graph.flip(xs[0], axis.as_i64().unwrap() as isize).unwrap();
        }
        let y = build(&mut graph, case, &xs).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        outputs.push(y);
    }
    Built {
        graph,
        feeds,
        outputs,
        cases,
    }
}

pub fn run_on(b: &Built, device: Device) -> Vec<HostTensor> {
    let mut s = super::session_on(&b.graph, device);
    s.run(&b.feeds, &b.outputs)
        .unwrap_or_else(|e| panic!("run on {device}: {e}"))
}

/// `cpu:0` against NumPy; asserts every op in `ops` has at least one case.
pub fn check_cpu(b: &Built, ops: &[&str]) {
    let got = run_on(b, Device::Cpu);
    for (case, out) in b.cases.iter().zip(&got) {
        super::assert_close(
            &format!("cpu:0 {}", case.name),
            out,
            &case.want,
            case.rtol,
            case.atol,
        );
    }
    for op in ops {
        assert!(
            b.cases.iter().any(|c| c.op == *op),
            "no golden case for {op}"
        );
    }
}

/// Every GPU against `cpu:0` and NumPy, with each case's tolerance.
pub fn check_gpus(b: &Built) {
    let gpus = super::gpus();
    let cpu = run_on(b, Device::Cpu);
    for gpu in gpus {
        let got = run_on(b, gpu);
        for ((case, out), want) in b.cases.iter().zip(&got).zip(&cpu) {
            super::assert_close(
                &format!("{gpu} {}", case.name),
                out,
                want,
                case.rtol,
                case.atol,
            );
            super::assert_close(
                &format!("{gpu} {} vs numpy", case.name),
                out,
                &case.want,
                case.rtol,
                case.atol,
            );
        }
    }
}

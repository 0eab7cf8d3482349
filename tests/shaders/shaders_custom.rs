//! The WGSL that typed elementwise functions lower to (alone and fused) validates with naga,
//! for every signature dtype; needs no GPU.

use wgflow::compile::StepKind;
use wgflow::ops::custom::{select, ElementwiseFn};
use wgflow::ops::wgsl::validate;
use wgflow::{DType, Device, Graph, Session, SessionOptions};

#[test]
fn custom_kernels_generate_valid_wgsl() {
    let k = ElementwiseFn::new("k", |[a, b]| {
        let m = a.max(b) * 2 - 1;
        select(a.less(b), m, (a + b).abs()).min(7)
    })
    .signature("f32(f32, f32)")
    .unwrap()
    .signature("i32(i32, i32)")
    .unwrap()
    .signature("u32(u32, u32)")
    .unwrap();
    let math = ElementwiseFn::new("math", |[x]| {
        (x.exp() + x.tanh()).sqrt().log() / x.sigmoid()
    })
    .signature("f32(f32)")
    .unwrap();
    let mut g = Graph::new();
    let mut outs = Vec::new();
    for (d, v) in [
        (DType::F32, g.constant([1.0f32, -2.0, 3.5]).unwrap()),
        (DType::I32, g.constant([1i32, -2, 3]).unwrap()),
        (DType::U32, g.constant([1u32, 2, 3]).unwrap()),
    ] {
        let w = g.constant(wgflow::HostTensor::zeros([2, 3], d)).unwrap();
        let y = g.apply(&k, &[v, w]).unwrap();
        outs.push(y);
        outs.push(g.relu(y).unwrap()); // a fused variant
    }
    let f = g.constant([0.5f32, 1.5]).unwrap();
    outs.push(g.apply(&math, &[f]).unwrap());
    let options = SessionOptions {
        default_device: Some(Device::Cpu),
        fold_constants: false,
        ..Default::default()
    };
    let mut s = Session::new(&g, options).unwrap();
    let plan = s.plan(&outs).unwrap();
    let mut n = 0;
    for step in &plan.steps {
        if let StepKind::Dispatch { kernel, .. } = &step.kind {
            let name = step.nodes.join("+");
            validate(&name, &kernel.wgsl()).unwrap_or_else(|e| panic!("{e}\n{}", kernel.wgsl()));
            n += 1;
        }
    }
    assert!(n >= 7, "{n} kernels");
}

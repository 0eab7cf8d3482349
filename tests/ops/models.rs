//! The graph-examples' CNN and transformer block against NumPy forward passes
//! (`tests/golden/models.json`, from `tests/golden/gen_nn.py`) on `cpu:0` and every GPU.

use crate::common;

include!("../../graph-examples/models.rs");

use wgflow::Device;

type Build = fn(&mut Graph, Tensor) -> wgflow::Result<Tensor>;

fn check_model(name: &str, input: &[usize], input_k: usize, build: Build) {
    let cases = common::golden::cases(include_str!("../golden/models.json"));
    let case = cases.iter().find(|c| c.name == name).expect("golden case");
    // The Rust and NumPy weight formulas agree bit for bit on the input they both generate.
    let x_host = det_weights(input, input_k, 1.0);
    assert_eq!(
        x_host.words(),
        case.inputs[0].words(),
        "{name}: input generator drifted"
    );
    let mut g = Graph::new();
    let x = g
        .placeholder("x", input.to_vec(), wgflow::DType::F32)
        .unwrap();
    let y = build(&mut g, x).unwrap();
    let mut devices = vec![Device::Cpu];
    devices.extend(common::gpus());
    for device in devices {
        let mut s = common::session_on(&g, device);
        let out = s.run(&[(x, x_host.clone())], &[y]).unwrap();
        common::assert_close(
            &format!("{device} {name}"),
            &out[0],
            &case.want,
            case.rtol,
            case.atol,
        );
    }
}

#[test]
fn cnn_matches_numpy_on_every_device() {
    check_model("cnn", &CNN_INPUT, 0, build_cnn);
}

#[test]
fn transformer_block_matches_numpy_on_every_device() {
    check_model("transformer", &TRANSFORMER_INPUT, 5, build_transformer);
}

//! The train_digits models: loss and gradients against JAX (float64, tests/golden/train/,
//! from make.py there) on cpu:0 and every GPU; the same training run on every device; the
//! example's accuracy targets on cpu:0 and the best GPU.

include!("../../graph-examples/digits_model.rs");

use crate::common::{gpus, session_on};
use wgflow::train::{Adam, Optimizer};
use wgflow::Device;

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

/// Parameter number `k` of `shape`: `sin(0.1 i + k) · scale`, as make.py computes it.
fn det_param(shape: &[usize], k: usize) -> HostTensor {
    let n: usize = shape.iter().product();
    let scale = if shape.len() == 1 { 0.05 } else { 0.2 };
    let v: Vec<f32> = (0..n)
        .map(|i| ((0.1 * i as f64 + k as f64).sin() * scale) as f32)
        .collect();
    HostTensor::new(shape.to_vec(), v).unwrap()
}

fn golden(name: &str) -> HostTensor {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/train")
        .join(format!("{name}.npy"));
    wgflow::npy::read(path).unwrap()
}

fn check_gradients(model: Model) {
    let data = load_digits(&data_dir()).unwrap();
    let mut d = build_digits(&data, model, 1).unwrap();
    let grads: Vec<Tensor> = d
        .graph
        .gradients(d.loss, &d.params)
        .unwrap()
        .into_iter()
        .map(|g| g.expect("every parameter has a gradient"))
        .collect();
    let batch = HostTensor::new(vec![32], (0..32).collect::<Vec<i32>>()).unwrap();
    let want_loss = golden(&format!("{}_loss", model.name())).to_f32().unwrap()[0];
    for device in devices() {
        let mut s = session_on(&d.graph, device);
        for (k, (&p, (_, shape))) in d.params.iter().zip(model.params()).enumerate() {
            s.write_variable(p, &det_param(&shape, k)).unwrap();
        }
        let mut fetches = vec![d.loss];
        fetches.extend(&grads);
        let out = s.run(&[(d.batch, batch.clone())], &fetches).unwrap();
        let loss = out[0].item::<f32>().unwrap();
        assert!(
            (loss - want_loss).abs() < 1e-5 * want_loss.abs(),
            "{} on {device}: loss {loss} vs JAX {want_loss}",
            model.name()
        );
        for ((name, _), got) in model.params().iter().zip(&out[1..]) {
            let want = golden(&format!("{}_grad_{name}", model.name()));
            assert_eq!(got.shape(), want.shape(), "{name}");
            let (g, w) = (got.to_f32().unwrap(), want.to_f32().unwrap());
            let scale = w.iter().fold(0f32, |m, v| m.max(v.abs()));
            for (i, (a, b)) in g.iter().zip(&w).enumerate() {
                assert!(
                    (a - b).abs() <= 2e-5 * scale + 1e-7,
                    "{} on {device}: d loss / d {name}[{i}] = {a}, JAX {b} (max |grad| {scale})",
                    model.name()
                );
            }
        }
    }
}

#[test]
fn mlp_loss_and_gradients_match_jax() {
    check_gradients(Model::Mlp);
}

#[test]
fn cnn_loss_and_gradients_match_jax() {
    check_gradients(Model::Cnn);
}

/// Train `model` with the example's settings for `steps` steps (or `epochs` epochs), giving
/// the loss of every step and the final test accuracy.
fn train(model: Model, device: Device, epochs: usize, steps: Option<usize>) -> (Vec<f32>, f32) {
    let data = load_digits(&data_dir()).unwrap();
    let mut d = build_digits(&data, model, 1).unwrap();
    let train = Adam::new(0.003)
        .minimize(&mut d.graph, d.loss, &d.params)
        .unwrap();
    let mut s = session_on(&d.graph, device);
    let mut losses = Vec::new();
    let all = batches(epochs, 64, 42);
    let n = steps.unwrap_or(all.len());
    for idx in all.into_iter().take(n) {
        if steps.is_some() {
            let out = s.run(&[(d.batch, idx)], &[d.loss, train]).unwrap();
            losses.push(out[0].item::<f32>().unwrap());
        } else {
            s.run_targets(&[(d.batch, idx)], &[train]).unwrap();
        }
    }
    let test = (d.batch, test_indices(&data));
    let acc = s.run(&[test], &[d.accuracy]).unwrap()[0]
        .item::<f32>()
        .unwrap();
    (losses, acc)
}

/// The same training run gives the same loss curve on every device: within 1e-3 relative
/// per step over 40 MLP steps and 12 CNN steps (float32 sums in different orders drift
/// apart slowly; Adam normalizes the steps, so early differences do not grow fast).
#[test]
fn the_loss_curve_is_the_same_on_every_device() {
    for (model, steps) in [(Model::Mlp, 40), (Model::Cnn, 12)] {
        let (reference, _) = train(model, Device::Cpu, 2, Some(steps));
        assert!(
            reference[steps - 1] < 0.8 * reference[0],
            "{}: the loss falls ({} -> {})",
            model.name(),
            reference[0],
            reference[steps - 1]
        );
        for gpu in gpus() {
            let (losses, _) = train(model, gpu, 2, Some(steps));
            for (i, (a, b)) in losses.iter().zip(&reference).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-3 * b.abs(),
                    "{} on {gpu}: step {i} loss {a} vs cpu:0 {b}",
                    model.name()
                );
            }
        }
    }
}

/// The example's settings reach its targets (96% for the MLP, 97% for the CNN) on cpu:0
/// and on the best GPU.
#[test]
fn the_example_reaches_its_accuracy_targets() {
    let mut devices = vec![Device::Cpu];
    devices.extend(gpus().first().copied());
    for device in devices {
        let (_, mlp) = train(Model::Mlp, device, 30, None);
        assert!(mlp >= 0.96, "mlp on {device}: test accuracy {mlp}");
        let (_, cnn) = train(Model::Cnn, device, 15, None);
        assert!(cnn >= 0.97, "cnn on {device}: test accuracy {cnn}");
    }
}

//! The `train_gpt` example's model (graph-examples/gpt_model.rs) on cpu:0 and every GPU:
//! a 2-layer model's loss and every parameter's gradient against JAX in float64
//! (tests/data/gpt/make_reference.py, its output committed), and greedy decoding through the
//! key/value caches against the full forward pass over the prefix.

include!("../../graph-examples/gpt_model.rs");

use crate::common::{gpus, session_on};
use wgflow::{Device, Session};

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

/// Parameter `p`'s deterministic values, as make_reference.py computes them (f64, rounded
/// to f32): `0.3·sin(0.7·i + 1.3·p + 0.5)`, layer-norm gains `1 + 0.1·sin(…)`.
fn param_values(g: &Graph, p: usize, t: Tensor) -> HostTensor {
    let shape = g.shape(t).unwrap().clone();
    let gain = g.node(t).unwrap().name.ends_with(".g");
    let v: Vec<f32> = (0..shape.numel())
        .map(|i| {
            let s = (0.7 * i as f64 + 1.3 * p as f64 + 0.5).sin();
            (if gain { 1.0 + 0.1 * s } else { 0.3 * s }) as f32
        })
        .collect();
    HostTensor::new(shape, v).unwrap()
}

fn set_params(s: &mut Session, g: &Graph, gpt: &Gpt) {
    for (p, &t) in gpt.params().iter().enumerate() {
        s.write_variable(t, &param_values(g, p, t)).unwrap();
    }
}

fn argmax(v: &[f32]) -> i32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as i32
}

#[test]
fn a_two_layer_models_loss_and_every_gradient_match_jax_float64_on_every_device() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/gpt/reference.json"
    ))
    .unwrap();
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    let cfg = GptConfig {
        context: 5,
        width: 8,
        heads: 2,
        layers: 2,
    };
    let (b, t) = (2usize, 5usize);
    let xs: Vec<i32> = (0..b * t)
        .map(|k| ((7 * (k / t) + 13 * (k % t) + 3) % VOCAB) as i32)
        .collect();
    let ys: Vec<i32> = (0..b * t)
        .map(|k| ((5 * (k / t) + 11 * (k % t) + 1) % VOCAB) as i32)
        .collect();
    for fused in [true, false] {
        let mut g = Graph::new();
        let mut gpt = Gpt::new(&mut g, cfg, 0).unwrap();
        gpt.fused = fused;
        let x = g.placeholder("x", [b, t], DType::I32).unwrap();
        let y = g.placeholder("y", [b * t], DType::I32).unwrap();
        let logits = gpt.forward(&mut g, x, b, t).unwrap();
        let loss = gpt.loss(&mut g, logits, y, b * t).unwrap();
        let params = gpt.params();
        let grads: Vec<Tensor> = g
            .gradients(loss, &params)
            .unwrap()
            .into_iter()
            .map(|d| d.unwrap())
            .collect();
        let mut fetches = vec![loss];
        fetches.extend(&grads);
        for device in devices() {
            let mut s = session_on(&g, device);
            set_params(&mut s, &g, &gpt);
            let feeds = [
                (x, HostTensor::new(Shape(vec![b, t]), xs.clone()).unwrap()),
                (y, HostTensor::new(Shape(vec![b * t]), ys.clone()).unwrap()),
            ];
            let out = s.run(&feeds, &fetches).unwrap();
            let what = format!("{device} fused {fused}");
            let want_loss = r["loss"].as_f64().unwrap();
            let got = out[0].item::<f32>().unwrap() as f64;
            assert!(
                (got - want_loss).abs() < 1e-5 * want_loss.abs(),
                "{what}: loss {got} vs {want_loss}"
            );
            for (p, &param) in params.iter().enumerate() {
                let name = &g.node(param).unwrap().name;
                let want: Vec<f64> = r["grads"][name.as_str()]
                    .as_array()
                    .unwrap_or_else(|| panic!("{name} in reference.json"))
                    .iter()
                    .map(|v| v.as_f64().unwrap())
                    .collect();
                let got = out[1 + p].to_vec::<f32>().unwrap();
                assert_eq!(got.len(), want.len(), "{what} {name}");
                let top = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                for (i, (&a, &w)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (a as f64 - w).abs() <= 1e-4 * top + 1e-6,
                        "{what} d{name}[{i}]: {a} vs {w} (largest {top})"
                    );
                }
            }
        }
    }
}

#[test]
fn cached_and_uncached_greedy_decoding_agree_on_every_device() {
    let cfg = GptConfig {
        context: 12,
        width: 16,
        heads: 2,
        layers: 2,
    };
    let mut g = Graph::new();
    let gpt = Gpt::new(&mut g, cfg, 3).unwrap();
    let x = g.placeholder("x", [1, cfg.context], DType::I32).unwrap();
    let full = gpt.forward(&mut g, x, 1, cfg.context).unwrap();
    let dec = gpt.decoder(&mut g).unwrap();
    let prompt = [40i32, 77, 3];
    for device in devices() {
        let mut s = session_on(&g, device);
        set_params(&mut s, &g, &gpt);
        let one = |v: i32| HostTensor::new(Shape(vec![1]), vec![v]).unwrap();
        let mut cached = prompt.to_vec();
        let mut uncached = prompt.to_vec();
        let mut logits = Vec::new();
        for pos in 0..cfg.context {
            // Cached: one token at its position; its logits predict the next one.
            let out = s
                .run(
                    &[(dec.tok, one(cached[pos])), (dec.pos, one(pos as i32))],
                    &[dec.logits, dec.update],
                )
                .unwrap();
            logits = out[0].to_vec::<f32>().unwrap();
            if pos + 1 >= cached.len() {
                cached.push(argmax(&logits));
            }
            // Uncached: the whole prefix, padded; row `pos` of the causal forward pass.
            let mut padded = uncached.clone();
            padded.resize(cfg.context, 0);
            let x_feed = HostTensor::new(Shape(vec![1, cfg.context]), padded).unwrap();
            let all = s.run(&[(x, x_feed)], &[full]).unwrap()[0]
                .to_vec::<f32>()
                .unwrap();
            let row = &all[pos * VOCAB..(pos + 1) * VOCAB];
            for (a, b) in row.iter().zip(&logits) {
                assert!(
                    (a - b).abs() <= 1e-4 + 1e-4 * b.abs(),
                    "{device} position {pos}: {a} vs {b}"
                );
            }
            if pos + 1 >= uncached.len() {
                uncached.push(argmax(row));
            }
        }
        assert_eq!(cached, uncached, "{device}");
        assert!(cached.len() == cfg.context + 1 && logits.len() == VOCAB);
        // Not one token repeated: the check decodes a real sequence.
        assert!(
            cached[3..].iter().any(|&t| t != cached[3]),
            "{device}: {cached:?}"
        );
    }
}

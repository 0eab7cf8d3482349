//! Train an MLP and a small CNN on scikit-learn's 8×8 handwritten digits with Adam, on the
//! best device (or the one named), and print the test accuracy.
//!
//! ```text
//! cargo run --release --example train_digits                       # both models, best device
//! cargo run --release --example train_digits -- --model cnn --device cpu:0 --epochs 10
//! ```
//!
//! Defaults: 30 epochs for the MLP, 15 for the CNN, batches of 64, Adam with learning rate
//! 0.003. This machine (2 cores, lavapipe) reaches about 96.7% (MLP) and 97.5% (CNN) test
//! accuracy.
//!
//! One graph serves every batch size: its batch of image indices is a run-time dimension
//! (`placeholder_dyn`), so the full batches of 64, each epoch's last batch of 29 and the 360
//! test images all run it (a plan per size and fetch list, compiled once).
//!
//! The dataset is a device-resident constant; each step feeds only the batch's 64 indices
//! (`take` gathers the images on the device), runs the train op (forward, backward and the
//! Adam update in one run) and fetches nothing but the loss every few steps.

include!("digits_model.rs");

use std::time::Instant;
use wgflow::train::{Adam, Optimizer};
use wgflow::{Device, Session, SessionOptions};

struct Args {
    models: Vec<Model>,
    device: Option<Device>,
    /// `None`: each model's default (30 for the MLP, 15 for the CNN).
    epochs: Option<usize>,
    batch: usize,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        models: vec![Model::Mlp, Model::Cnn],
        device: None,
        epochs: None,
        batch: 64,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--model" => {
                a.models = match value()?.as_str() {
                    "mlp" => vec![Model::Mlp],
                    "cnn" => vec![Model::Cnn],
                    "both" => vec![Model::Mlp, Model::Cnn],
                    m => return Err(format!("unknown model '{m}' (mlp, cnn, both)")),
                }
            }
            "--device" => {
                let spec = value()?;
                a.device = Some(Device::parse(&spec).map_err(|e| format!("--device {spec}: {e}"))?);
            }
            "--epochs" => {
                a.epochs = Some(value()?.parse().map_err(|e| format!("--epochs: {e}"))?)
            }
            "--batch" => a.batch = value()?.parse().map_err(|e| format!("--batch: {e}"))?,
            other => {
                return Err(format!(
                    "unknown argument '{other}' (--model mlp|cnn|both, --device SPEC, --epochs N, --batch N)"
                ))
            }
        }
    }
    Ok(a)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let args = args()?;
    let device = args.device.unwrap_or_else(Device::best);
    let data = load_digits(&data_dir())?;
    for &model in &args.models {
        let mut d = build_digits(&data, model, 1)?;
        let adam = Adam::new(0.003);
        let train = adam.minimize(&mut d.graph, d.loss, &d.params)?;
        let mut s = Session::new(
            &d.graph,
            SessionOptions {
                default_device: Some(device),
                ..Default::default()
            },
        )?;
        let epochs = args.epochs.unwrap_or(match model {
            Model::Mlp => 30,
            Model::Cnn => 15,
        });
        let steps = batches(epochs, args.batch, 42);
        let bar = indicatif::ProgressBar::new(steps.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{prefix} [{bar:30}] {pos}/{len} steps, {msg} ({elapsed})",
            )?
            .progress_chars("=> "),
        );
        bar.set_prefix(format!("{} on {device}", model.name()));
        let start = Instant::now();
        let mut running = None::<f32>;
        for (i, idx) in steps.into_iter().enumerate() {
            if i % 10 == 0 {
                let out = s.run(&[(d.batch, idx)], &[d.loss, train])?;
                let loss = out[0].item::<f32>()?;
                let r = running.map_or(loss, |r| 0.7 * r + 0.3 * loss);
                running = Some(r);
                bar.set_message(format!("loss {r:.4}"));
            } else {
                s.run_targets(&[(d.batch, idx)], &[train])?;
            }
            bar.inc(1);
        }
        bar.finish();
        // The same graph on the whole test set: one more binding of the batch size.
        let acc = s.run(&[(d.batch, test_indices(&data))], &[d.accuracy])?[0].item::<f32>()?;
        println!(
            "{}: test accuracy {:.2}% ({} test images) after {} epochs on {device} in {:.1} s (one graph, {} plans: batches of 64, the last batch of 29, the test set)",
            model.name(),
            100.0 * acc,
            data.images.shape().0[0] - TRAIN,
            epochs,
            start.elapsed().as_secs_f64(),
            s.counters().plans_compiled
        );
    }
    Ok(())
}

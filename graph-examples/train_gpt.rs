//! Train a small character-level GPT on Python's pydoc help topics with AdamW, report the
//! validation loss, and generate text from a prompt with a key/value cache.
//!
//! ```text
//! cargo run --release --example train_gpt                         # best device, defaults
//! cargo run --release --example train_gpt -- --device cpu:0 --steps 600 --save gpt.safetensors
//! cargo run --release --example train_gpt -- --resume gpt.safetensors --steps 200
//! cargo run --release --example train_gpt -- --generate gpt.safetensors --prompt "class " --tokens 300
//! ```
//!
//! The model: token and position embeddings, `--layers` pre-norm blocks of causal multi-head
//! attention and a GELU MLP, a final layer norm and the token embedding as the output
//! projection (`gpt_model.rs`). Each step feeds `--batch` random windows of `--context`
//! characters from the first 90% of the corpus and runs forward, backward and the AdamW
//! update in one run; the last 10% is the validation split.
//!
//! Generation runs the decoder graph one token at a time: each layer's keys and values are
//! variables of `[heads, context, head_dim]` that the step writes at its position, so token
//! `t` attends over the cache instead of running the prefix again. The cache has a fixed
//! maximum length (the context) and masks the positions not yet written; when it is full,
//! the last half of the text is written again from position 0 and generation goes on.

include!("gpt_model.rs");

use std::time::Instant;
use wgflow::train::{Adam, Optimizer};
use wgflow::{Device, Session, SessionOptions};

const CORPUS: &str = include_str!("data/pydoc_topics.txt");

struct Args {
    device: Option<Device>,
    steps: usize,
    batch: usize,
    cfg: GptConfig,
    lr: f32,
    save: Option<String>,
    resume: Option<String>,
    generate: Option<String>,
    prompt: String,
    tokens: usize,
    temperature: f32,
    top_k: usize,
    seed: u64,
    /// Fail (exit 1) when the final validation loss is above this.
    max_val_loss: Option<f32>,
    /// Traced training steps to run at the end, printed as a per-op table.
    profile: usize,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        device: None,
        steps: 1000,
        batch: 16,
        cfg: GptConfig {
            context: 64,
            width: 128,
            heads: 4,
            layers: 2,
        },
        lr: 3e-3,
        save: None,
        resume: None,
        generate: None,
        prompt: "The ".into(),
        tokens: 240,
        temperature: 0.8,
        top_k: 10,
        seed: 1,
        max_val_loss: None,
        profile: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        fn num<T: std::str::FromStr>(flag: &str, v: String) -> Result<T, String>
        where
            T::Err: std::fmt::Display,
        {
            v.parse().map_err(|e| format!("{flag} {v}: {e}"))
        }
        match flag.as_str() {
            "--device" => {
                let spec = value()?;
                a.device = Some(Device::parse(&spec).map_err(|e| format!("--device {spec}: {e}"))?);
            }
            "--steps" => a.steps = num(&flag, value()?)?,
            "--batch" => a.batch = num(&flag, value()?)?,
            "--context" => a.cfg.context = num(&flag, value()?)?,
            "--width" => a.cfg.width = num(&flag, value()?)?,
            "--heads" => a.cfg.heads = num(&flag, value()?)?,
            "--layers" => a.cfg.layers = num(&flag, value()?)?,
            "--lr" => a.lr = num(&flag, value()?)?,
            "--save" => a.save = Some(value()?),
            "--resume" => a.resume = Some(value()?),
            "--generate" => a.generate = Some(value()?),
            "--prompt" => a.prompt = value()?,
            "--tokens" => a.tokens = num(&flag, value()?)?,
            "--temperature" => a.temperature = num(&flag, value()?)?,
            "--top-k" => a.top_k = num(&flag, value()?)?,
            "--seed" => a.seed = num(&flag, value()?)?,
            "--max-val-loss" => a.max_val_loss = Some(num(&flag, value()?)?),
            "--profile" => a.profile = num(&flag, value()?)?,
            other => {
                return Err(format!(
                    "unknown argument '{other}' (--device SPEC, --steps N, --batch N, --context N, \
                     --width N, --heads N, --layers N, --lr X, --save PATH, --resume PATH, \
                     --generate PATH, --prompt TEXT, --tokens N, --temperature X, --top-k N, --seed N, --max-val-loss X, --profile N)"
                ))
            }
        }
    }
    let c = a.cfg;
    if c.heads == 0
        || !c.width.is_multiple_of(c.heads)
        || c.context < 2
        || c.layers == 0
        || a.batch == 0
    {
        return Err(format!(
            "--width ({}) must be a multiple of --heads ({}), --context at least 2, --layers and --batch at least 1",
            c.width, c.heads
        ));
    }
    if a.temperature <= 0.0 || a.top_k == 0 {
        return Err("--temperature must be positive and --top-k at least 1".into());
    }
    Ok(a)
}

/// xorshift64*: the windows and the samples, reproducible from `--seed`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// `batch` windows of `t + 1` tokens starting at `starts`: inputs and next-token targets.
fn windows(text: &[i32], starts: &[usize], t: usize) -> wgflow::Result<(HostTensor, HostTensor)> {
    let mut x = Vec::with_capacity(starts.len() * t);
    let mut y = Vec::with_capacity(starts.len() * t);
    for &s in starts {
        x.extend_from_slice(&text[s..s + t]);
        y.extend_from_slice(&text[s + 1..s + t + 1]);
    }
    let shape = Shape(vec![starts.len(), t]);
    Ok((
        HostTensor::new(shape.clone(), x)?,
        HostTensor::new(Shape(vec![starts.len() * t]), y)?,
    ))
}

/// Warm up for 5% of the steps, then a cosine from `lr` down to `lr / 10`.
fn schedule(lr: f32, step: usize, steps: usize) -> f32 {
    let warm = (steps / 20).max(1);
    if step < warm {
        return lr * (step + 1) as f32 / warm as f32;
    }
    let p = (step - warm) as f32 / (steps - warm).max(1) as f32;
    lr * (0.1 + 0.45 * (1.0 + (std::f32::consts::PI * p).cos()))
}

/// One token drawn from `logits` at `temperature` among the `top_k` most likely.
fn sample(logits: &[f32], temperature: f32, top_k: usize, rng: &mut Rng) -> i32 {
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    order.truncate(top_k.min(logits.len()));
    let top = logits[order[0]];
    let w: Vec<f32> = order
        .iter()
        .map(|&i| ((logits[i] - top) / temperature).exp())
        .collect();
    let mut r = rng.unit() * w.iter().sum::<f32>();
    for (k, &wk) in w.iter().enumerate() {
        if r < wk {
            return order[k] as i32;
        }
        r -= wk;
    }
    order[0] as i32
}

/// Feed `prompt` through the decoder from position 0, then draw `n` more tokens; when the
/// cache is full, write the last half of the text again from position 0.
fn generate(
    s: &mut Session,
    dec: &Decoder,
    cfg: GptConfig,
    prompt: &[i32],
    n: usize,
    a: &Args,
) -> wgflow::Result<String> {
    let mut rng = Rng(a.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut text: Vec<i32> = prompt.to_vec();
    let mut pos = 0usize;
    let mut logits = Vec::new();
    let mut fed = 0usize;
    while text.len() < prompt.len() + n {
        if pos == cfg.context {
            // Full: the last half of the text becomes the new prefix.
            fed = text.len() - cfg.context / 2;
            pos = 0;
        }
        if fed < text.len() {
            let tok = HostTensor::new(Shape(vec![1]), vec![text[fed]])?;
            let p = HostTensor::new(Shape(vec![1]), vec![pos as i32])?;
            logits = s.run(&[(dec.tok, tok), (dec.pos, p)], &[dec.logits, dec.update])?[0]
                .to_vec::<f32>()?;
            fed += 1;
            pos += 1;
            continue;
        }
        text.push(sample(&logits, a.temperature, a.top_k, &mut rng));
    }
    Ok(text.iter().map(|&t| decode_token(t)).collect())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let a = args()?;
    let device = a.device.unwrap_or_else(Device::best);
    let cfg = a.cfg;
    let text: Vec<i32> = CORPUS.chars().map(encode_char).collect();
    let split = text.len() * 9 / 10;
    let (train_text, val_text) = (&text[..split], &text[split..]);

    let mut g = Graph::new();
    let gpt = Gpt::new(&mut g, cfg, a.seed)?;
    let (b, t) = (a.batch, cfg.context);
    let x = g.placeholder("tokens", [b, t], DType::I32)?;
    let y = g.placeholder("targets", [b * t], DType::I32)?;
    let lr = g.placeholder("lr", Shape::scalar(), DType::F32)?;
    let logits = gpt.forward(&mut g, x, b, t)?;
    let loss = gpt.loss(&mut g, logits, y, b * t)?;
    let params = gpt.params();
    let train = Adam::adamw(lr, 0.01).minimize(&mut g, loss, &params)?;
    let dec = gpt.decoder(&mut g)?;
    let mut s = Session::new(
        &g,
        SessionOptions {
            default_device: Some(device),
            ..Default::default()
        },
    )?;
    let n_params: usize = params
        .iter()
        .map(|&p| g.shape(p).map(|s| s.numel()).unwrap_or(0))
        .sum();
    println!(
        "GPT: {} layers, width {}, {} heads, context {}, {n_params} parameters, {} training and {} validation characters, on {device}",
        cfg.layers, cfg.width, cfg.heads, cfg.context, train_text.len(), val_text.len()
    );

    let prompt: Vec<i32> = a.prompt.chars().map(encode_char).collect();
    // What --save writes and --resume reads: the weights, AdamW's moments and step (every
    // variable but the decoder's caches).
    let state: Vec<Tensor> = g
        .variables()
        .into_iter()
        .filter(|v| !dec.caches.contains(v))
        .collect();
    if let Some(path) = &a.generate {
        s.restore_only(path, &params)?;
        let start = Instant::now();
        let out = generate(&mut s, &dec, cfg, &prompt, a.tokens, &a)?;
        eprintln!(
            "{} tokens in {:.2} s",
            a.tokens,
            start.elapsed().as_secs_f64()
        );
        println!("sample: {out}");
        return Ok(());
    }
    if let Some(path) = &a.resume {
        s.restore_only(path, &state)?;
        println!("resumed from {path}");
    }

    // Validation: 8 batches of windows spread evenly over the held-out split.
    let nv = 8 * b;
    let val_starts: Vec<usize> = (0..nv).map(|i| i * (val_text.len() - t - 1) / nv).collect();
    let validate = |s: &mut Session| -> wgflow::Result<f32> {
        let mut total = 0.0;
        let chunks: Vec<&[usize]> = val_starts.chunks(b).collect();
        for c in &chunks {
            let (vx, vy) = windows(val_text, c, t)?;
            total += s.run(&[(x, vx), (y, vy)], &[loss])?[0].item::<f32>()?;
        }
        Ok(total / chunks.len().max(1) as f32)
    };

    let mut rng = Rng(a.seed ^ 0x5DEE_CE66);
    let bar = indicatif::ProgressBar::new(a.steps as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} [{bar:30}] {pos}/{len} steps, {msg} ({elapsed})",
        )?
        .progress_chars("=> "),
    );
    bar.set_prefix(format!("train_gpt on {device}"));
    let start = Instant::now();
    let mut running = None::<f32>;
    for step in 0..a.steps {
        let starts: Vec<usize> = (0..b)
            .map(|_| rng.below(train_text.len() - t - 1))
            .collect();
        let (bx, by) = windows(train_text, &starts, t)?;
        let rate = HostTensor::new(Shape::scalar(), vec![schedule(a.lr, step, a.steps)])?;
        let feeds = [(x, bx), (y, by), (lr, rate)];
        if step % 10 == 0 || step + 1 == a.steps {
            let l = s.run(&feeds, &[loss, train])?[0].item::<f32>()?;
            let r = running.map_or(l, |r| 0.8 * r + 0.2 * l);
            running = Some(r);
            let tps = ((step + 1) * b * t) as f64 / start.elapsed().as_secs_f64();
            bar.set_message(format!("loss {r:.3}, {tps:.0} tokens/s"));
        } else {
            s.run_targets(&feeds, &[train])?;
        }
        bar.inc(1);
    }
    bar.finish();
    let secs = start.elapsed().as_secs_f64();
    if a.steps > 0 {
        println!(
            "{:.0} training tokens/s on {device}",
            (a.steps * b * t) as f64 / secs
        );
    }
    if let Some(path) = &a.save {
        s.save(path, Some(&state))?;
        println!("saved weights and optimizer state to {path}");
    }
    let val = validate(&mut s)?;
    println!(
        "validation loss {val:.3} nats/token after {} steps in {secs:.0} s",
        a.steps
    );
    let gen_start = Instant::now();
    let out = generate(&mut s, &dec, cfg, &prompt, a.tokens, &a)?;
    let gen_secs = gen_start.elapsed().as_secs_f64();
    eprintln!(
        "generated {} tokens in {gen_secs:.2} s ({:.0} tokens/s, KV cache)",
        a.tokens,
        (a.tokens + prompt.len()) as f64 / gen_secs
    );
    println!("sample: {out}");
    if a.profile > 0 {
        // Traced steps at the end (after the save: they move AdamW's moments), each kernel timed on its own;, one table by node and by kernel kind.
        let mut runs = Vec::new();
        for _ in 0..a.profile {
            let starts: Vec<usize> = (0..b)
                .map(|_| rng.below(train_text.len() - t - 1))
                .collect();
            let (bx, by) = windows(train_text, &starts, t)?;
            let rate = HostTensor::new(Shape::scalar(), vec![0.0f32])?;
            let opts = wgflow::trace::RunOptions { trace: true };
            runs.push(
                s.run_with(&[(x, bx), (y, by), (lr, rate)], &[train], &opts)?
                    .1,
            );
        }
        println!("{}", wgflow::trace::Profile::new(&runs).to_table());
    }
    if let Some(max) = a.max_val_loss {
        if val.is_nan() || val > max {
            return Err(format!("validation loss {val:.3} is above --max-val-loss {max}").into());
        }
    }
    Ok(())
}

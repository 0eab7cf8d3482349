//! Recurrent layers unrolled over the sequence length (static, so known at import): `RNN`,
//! `GRU` and `LSTM`, one matmul for every step's input projection and one per step for the
//! recurrence; and `CausalConvWithState`, a depthwise causal 1-D convolution that carries
//! its last `k - 1` inputs as state.

use super::build::{bad, Cx, Node};
use super::ops_control::index;
use crate::{Conv2dOptions, DType, Result, SliceArg, Tensor};

pub(super) fn rnn(cx: &mut Cx, n: &Node) -> Result<Vec<Tensor>> {
    recurrent(cx, n, Cell::Rnn)
}

pub(super) fn gru(cx: &mut Cx, n: &Node) -> Result<Vec<Tensor>> {
    recurrent(cx, n, Cell::Gru)
}

pub(super) fn lstm(cx: &mut Cx, n: &Node) -> Result<Vec<Tensor>> {
    recurrent(cx, n, Cell::Lstm)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cell {
    Rnn,
    Gru,
    Lstm,
}

impl Cell {
    fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }

    /// The activations `f`, `g`, `h` a direction uses, by default.
    fn default_acts(self) -> &'static [&'static str] {
        match self {
            Cell::Rnn => &["Tanh"],
            Cell::Gru => &["Sigmoid", "Tanh"],
            Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
        }
    }
}

/// An activation of the recurrent ops' list, with its alpha and beta.
#[derive(Clone, Copy)]
enum Act {
    Relu,
    Tanh,
    Sigmoid,
    Affine(f32, f32),
    LeakyRelu(f32),
    ThresholdedRelu(f32),
    ScaledTanh(f32, f32),
    HardSigmoid(f32, f32),
    Elu(f32),
    Softsign,
    Softplus,
}

/// The activations of each direction. `activation_alpha`/`activation_beta` are consumed in
/// the order of the activations that take them (the ONNX spec's rule).
fn activations(n: &Node, cell: Cell, dirs: usize) -> Result<Vec<Vec<Act>>> {
    let per = cell.default_acts().len();
    let mut names = n.strings("activations").unwrap_or_else(|| {
        let d = cell.default_acts().iter().map(|s| s.to_string());
        d.cycle().take(per * dirs).collect()
    });
    if names.len() == per && dirs == 2 {
        names = names.iter().chain(&names).cloned().collect();
    }
    if names.len() != per * dirs {
        return Err(bad(format!(
            "activations lists {} functions; {} directions of {} need {}",
            names.len(),
            dirs,
            n.op,
            per * dirs
        )));
    }
    let alphas = n.floats("activation_alpha").unwrap_or_default();
    let betas = n.floats("activation_beta").unwrap_or_default();
    let (mut a, mut b) = (alphas.into_iter(), betas.into_iter());
    let mut acts = Vec::new();
    for name in &names {
        acts.push(match name.to_ascii_lowercase().as_str() {
            "relu" => Act::Relu,
            "tanh" => Act::Tanh,
            "sigmoid" => Act::Sigmoid,
            "affine" => Act::Affine(a.next().unwrap_or(1.0), b.next().unwrap_or(0.0)),
            "leakyrelu" => Act::LeakyRelu(a.next().unwrap_or(0.01)),
            "thresholdedrelu" => Act::ThresholdedRelu(a.next().unwrap_or(1.0)),
            "scaledtanh" => Act::ScaledTanh(a.next().unwrap_or(1.0), b.next().unwrap_or(1.0)),
            "hardsigmoid" => Act::HardSigmoid(a.next().unwrap_or(0.2), b.next().unwrap_or(0.5)),
            "elu" => Act::Elu(a.next().unwrap_or(1.0)),
            "softsign" => Act::Softsign,
            "softplus" => Act::Softplus,
            _ => return Err(n.unsupported(format!("activation '{name}'"))),
        });
    }
    Ok(acts.chunks(per).map(<[Act]>::to_vec).collect())
}

/// One step's shared settings: the activations of this direction and the clip bound.
struct Step {
    acts: Vec<Act>,
    clip: Option<f32>,
}

impl Step {
    /// Activation `k` of `x`, after clipping it to `[-clip, clip]` if asked.
    fn act(&self, cx: &mut Cx, k: usize, x: Tensor) -> Result<Tensor> {
        let x = match self.clip {
            Some(c) => cx.g.clip(x, -(c as f64), c as f64)?,
            None => x,
        };
        let dt = cx.g.dtype(x)?;
        match self.acts[k] {
            Act::Relu => cx.g.relu(x),
            Act::Tanh => cx.g.tanh(x),
            Act::Sigmoid => cx.g.sigmoid(x),
            Act::Softsign => cx.g.softsign(x),
            Act::Softplus => cx.g.softplus(x),
            Act::LeakyRelu(a) => cx.g.leaky_relu(x, a),
            Act::Elu(a) => cx.g.elu(x, a),
            Act::Affine(a, b) => {
                let y = scale(cx, x, a, dt)?;
                let b = cx.scalar(b as f64, dt)?;
                cx.g.add(y, b)
            }
            Act::ThresholdedRelu(a) => {
                let (a, zero) = (cx.scalar(a as f64, dt)?, cx.scalar(0.0, dt)?);
                let keep = cx.g.greater(x, a)?;
                cx.g.select(keep, x, zero)
            }
            Act::ScaledTanh(a, b) => {
                let y = scale(cx, x, b, dt)?;
                let y = cx.g.tanh(y)?;
                scale(cx, y, a, dt)
            }
            Act::HardSigmoid(a, b) => {
                let y = scale(cx, x, a, dt)?;
                let b = cx.scalar(b as f64, dt)?;
                let y = cx.g.add(y, b)?;
                cx.g.clip(y, 0.0, 1.0)
            }
        }
    }
}

fn scale(cx: &mut Cx, x: Tensor, by: f32, dt: DType) -> Result<Tensor> {
    let s = cx.scalar(by as f64, dt)?;
    cx.g.mul(x, s)
}

/// Columns `[from, to)` of a matrix (or of a vector).
fn cols(cx: &mut Cx, x: Tensor, from: usize, to: usize) -> Result<Tensor> {
    let rank = cx.g.probe_shape(x)?.rank();
    let mut args = vec![SliceArg::full(); rank.saturating_sub(1)];
    args.push(SliceArg::range(from as isize, to as isize));
    cx.g.slice(x, &args)
}

fn add_opt(cx: &mut Cx, x: Tensor, b: Option<Tensor>) -> Result<Tensor> {
    match b {
        Some(b) => cx.g.add(x, b),
        None => Ok(x),
    }
}

/// One direction's weights: the recurrence matrix transposed (`[H, gates·H]`), its bias, and
/// the LSTM's peepholes `(i, o, f)`; for a GRU also the transposed rows of its `z, r` gates
/// and of its `h` gate, with their biases. Every piece is built once, before the steps: a
/// slice inside a step would copy the weight again at every step.
struct Weights {
    rt: Tensor,
    rb: Option<Tensor>,
    peep: Option<[Tensor; 3]>,
    gru: Option<GruWeights>,
}

#[derive(Clone, Copy)]
struct GruWeights {
    rt_zr: Tensor,
    rt_h: Tensor,
    rb_zr: Option<Tensor>,
    rb_h: Option<Tensor>,
}

/// Rows `[from, to)` of a matrix, transposed: a leading-axis slice of the stored matrix and
/// a transposed read, both in place (a column slice of the transposed matrix would be copied).
fn rows_t(cx: &mut Cx, x: Tensor, from: usize, to: usize) -> Result<Tensor> {
    let r = cx.g.slice(
        x,
        &[
            SliceArg::range(from as isize, to as isize),
            SliceArg::full(),
        ],
    )?;
    cx.g.transpose(r, &[1, 0])
}

fn recurrent(cx: &mut Cx, n: &Node, cell: Cell) -> Result<Vec<Tensor>> {
    let direction = n.string("direction").unwrap_or_else(|| "forward".into());
    let dirs = match direction.as_str() {
        "forward" | "reverse" => 1,
        "bidirectional" => 2,
        other => return Err(n.unsupported(format!("direction '{other}'"))),
    };
    let layout = n.int("layout", 0);
    if !(0..=1).contains(&layout) {
        return Err(n.unsupported(format!("layout {layout}")));
    }
    if cell == Cell::Lstm && n.int("input_forget", 0) != 0 {
        return Err(n.unsupported("input_forget (coupled input and forget gates)"));
    }
    let clip = n.has("clip").then(|| n.float("clip", 0.0));
    let acts = activations(n, cell, dirs)?;
    let (mut x, w, r) = (cx.t(n, 0)?, cx.t(n, 1)?, cx.t(n, 2)?);
    let b = cx.opt_t(n, 3)?;
    let lens = cx.opt_t(n, 4)?;
    let mut h0 = cx.opt_t(n, 5)?;
    let (mut c0, p) = if cell == Cell::Lstm {
        (cx.opt_t(n, 6)?, cx.opt_t(n, 7)?)
    } else {
        (None, None)
    };
    if layout == 1 {
        x = cx.g.transpose(x, &[1, 0, 2])?;
        for s in [&mut h0, &mut c0] {
            if let Some(t) = *s {
                *s = Some(cx.g.transpose(t, &[1, 0, 2])?);
            }
        }
    }
    let xs = cx.g.probe_shape(x)?.dims().to_vec();
    let ws = cx.g.probe_shape(w)?.dims().to_vec();
    let [seq, batch, input] = xs[..] else {
        return Err(bad(format!("X must have rank 3, got {xs:?}")));
    };
    let g = cell.gates();
    let hidden = match n.int("hidden_size", -1) {
        -1 => cx.g.probe_shape(r)?.dims().last().copied().unwrap_or(0),
        h => usize::try_from(h).map_err(|_| bad("negative hidden_size"))?,
    };
    if ws != [dirs, g * hidden, input] {
        return Err(bad(format!(
            "W has shape {ws:?}, expected {:?}",
            [dirs, g * hidden, input]
        )));
    }
    if seq == 0 {
        return Err(n.unsupported("an empty sequence"));
    }
    let dt = cx.g.dtype(x)?;
    // sequence_lens: a step at or past a batch entry's length leaves its state as it was and
    // writes zeros to Y; so a reverse pass starts at each entry's own last step.
    let lens = match lens {
        Some(l) => {
            let l = cx.g.cast(l, DType::I32)?;
            Some(cx.g.reshape(l, &[batch as isize, 1])?)
        }
        None => None,
    };
    let x2 = cx.g.reshape(x, &[(seq * batch) as isize, input as isize])?;
    let (mut ys, mut hs, mut cs) = (Vec::new(), Vec::new(), Vec::new());
    for (d, dir_acts) in acts.into_iter().enumerate() {
        let reverse = direction == "reverse" || d == 1;
        let wd = index(cx, w, 0, d)?;
        let wt = cx.g.transpose(wd, &[1, 0])?;
        let rd = index(cx, r, 0, d)?;
        let rt = cx.g.transpose(rd, &[1, 0])?;
        let (wb, rb) = match b {
            Some(b) => {
                let bd = index(cx, b, 0, d)?;
                (
                    Some(cols(cx, bd, 0, g * hidden)?),
                    Some(cols(cx, bd, g * hidden, 2 * g * hidden)?),
                )
            }
            None => (None, None),
        };
        let peep = match p {
            Some(p) => {
                let pd = index(cx, p, 0, d)?;
                Some([
                    cols(cx, pd, 0, hidden)?,
                    cols(cx, pd, hidden, 2 * hidden)?,
                    cols(cx, pd, 2 * hidden, 3 * hidden)?,
                ])
            }
            None => None,
        };
        // Every step's input projection in one product.
        // `[seq·batch, gates·H]`: a step's rows are a leading-axis slice, read in place.
        let xw = cx.g.matmul(x2, wt)?;
        let xw = add_opt(cx, xw, wb)?;
        let start = |cx: &mut Cx, s: Option<Tensor>| match s {
            Some(s) => index(cx, s, 0, d),
            None => cx.g.zeros(vec![batch, hidden], dt),
        };
        let mut h = start(cx, h0)?;
        let mut c = start(cx, c0)?;
        let gru = match cell {
            Cell::Gru => Some(GruWeights {
                rt_zr: rows_t(cx, rd, 0, 2 * hidden)?,
                rt_h: rows_t(cx, rd, 2 * hidden, 3 * hidden)?,
                rb_zr: rb.map(|b| cols(cx, b, 0, 2 * hidden)).transpose()?,
                rb_h: rb
                    .map(|b| cols(cx, b, 2 * hidden, 3 * hidden))
                    .transpose()?,
            }),
            _ => None,
        };
        let wts = Weights { rt, rb, peep, gru };
        let step = Step {
            acts: dir_acts,
            clip,
        };
        let mut out: Vec<Option<Tensor>> = vec![None; seq];
        for k in 0..seq {
            let t = if reverse { seq - 1 - k } else { k };
            let xt = cx.g.slice(
                xw,
                &[
                    SliceArg::range((t * batch) as isize, ((t + 1) * batch) as isize),
                    SliceArg::full(),
                ],
            )?;
            let (mut hn, mut cn) = match cell {
                Cell::Rnn => (rnn_step(cx, &step, &wts, xt, h)?, c),
                Cell::Gru => {
                    let lbr = n.int("linear_before_reset", 0) != 0;
                    (gru_step(cx, &step, &wts, xt, h, hidden, lbr)?, c)
                }
                Cell::Lstm => lstm_step(cx, &step, &wts, xt, (h, c), hidden)?,
            };
            let mut y = hn;
            if let Some(l) = lens {
                let ti = cx.scalar(t as f64, DType::I32)?;
                let live = cx.g.less(ti, l)?;
                hn = cx.g.select(live, hn, h)?;
                if cell == Cell::Lstm {
                    cn = cx.g.select(live, cn, c)?;
                }
                let zero = cx.scalar(0.0, dt)?;
                y = cx.g.select(live, hn, zero)?;
            }
            out[t] = Some(y);
            (h, c) = (hn, cn);
        }
        let out: Vec<Tensor> = out.into_iter().flatten().collect();
        ys.push(cx.g.stack(&out, 0)?);
        hs.push(h);
        cs.push(c);
    }
    let mut y = cx.g.stack(&ys, 1)?;
    let mut yh = cx.g.stack(&hs, 0)?;
    let mut yc = cx.g.stack(&cs, 0)?;
    if layout == 1 {
        y = cx.g.transpose(y, &[2, 0, 1, 3])?;
        yh = cx.g.transpose(yh, &[1, 0, 2])?;
        yc = cx.g.transpose(yc, &[1, 0, 2])?;
    }
    Ok(if cell == Cell::Lstm {
        vec![y, yh, yc]
    } else {
        vec![y, yh]
    })
}

/// `H = f(x·Wᵀ + Wb + H·Rᵀ + Rb)`.
fn rnn_step(cx: &mut Cx, s: &Step, w: &Weights, xt: Tensor, h: Tensor) -> Result<Tensor> {
    let hr = cx.g.matmul(h, w.rt)?;
    let hr = add_opt(cx, hr, w.rb)?;
    let pre = cx.g.add(xt, hr)?;
    s.act(cx, 0, pre)
}

/// Gates `z, r, h̃` (in that order in W, R and B); `H = (1 - z)·h̃ + z·H`.
fn gru_step(
    cx: &mut Cx,
    s: &Step,
    w: &Weights,
    xt: Tensor,
    h: Tensor,
    hid: usize,
    linear_before_reset: bool,
) -> Result<Tensor> {
    let Some(GruWeights {
        rt_zr,
        rt_h,
        rb_zr,
        rb_h,
    }) = w.gru
    else {
        return Err(crate::Error::Internal(
            "a GRU step without its gates' weights".into(),
        ));
    };
    let hr = cx.g.matmul(h, rt_zr)?;
    let hr = add_opt(cx, hr, rb_zr)?;
    let xzr = cols(cx, xt, 0, 2 * hid)?;
    let zr = cx.g.add(xzr, hr)?;
    let (z, r) = (cols(cx, zr, 0, hid)?, cols(cx, zr, hid, 2 * hid)?);
    let z = s.act(cx, 0, z)?;
    let r = s.act(cx, 0, r)?;
    let xh = cols(cx, xt, 2 * hid, 3 * hid)?;
    let rec = if linear_before_reset {
        let hr = cx.g.matmul(h, rt_h)?;
        let hr = add_opt(cx, hr, rb_h)?;
        cx.g.mul(r, hr)?
    } else {
        let rh = cx.g.mul(r, h)?;
        let hr = cx.g.matmul(rh, rt_h)?;
        add_opt(cx, hr, rb_h)?
    };
    let pre = cx.g.add(xh, rec)?;
    let hh = s.act(cx, 1, pre)?;
    let dt = cx.g.dtype(z)?;
    let one = cx.scalar(1.0, dt)?;
    let keep = cx.g.sub(one, z)?;
    let a = cx.g.mul(keep, hh)?;
    let b = cx.g.mul(z, h)?;
    cx.g.add(a, b)
}

/// Gates `i, o, f, c` (in that order); peepholes `P = (i, o, f)`.
fn lstm_step(
    cx: &mut Cx,
    s: &Step,
    w: &Weights,
    xt: Tensor,
    (h, c): (Tensor, Tensor),
    hid: usize,
) -> Result<(Tensor, Tensor)> {
    let hr = cx.g.matmul(h, w.rt)?;
    let hr = add_opt(cx, hr, w.rb)?;
    let all = cx.g.add(xt, hr)?;
    let gate = |cx: &mut Cx, k: usize| cols(cx, all, k * hid, (k + 1) * hid);
    let (i, o, f, cc) = (gate(cx, 0)?, gate(cx, 1)?, gate(cx, 2)?, gate(cx, 3)?);
    let peep = |cx: &mut Cx, x: Tensor, k: usize, state: Tensor| match w.peep {
        Some(p) => {
            let pc = cx.g.mul(p[k], state)?;
            cx.g.add(x, pc)
        }
        None => Ok(x),
    };
    let i = peep(cx, i, 0, c)?;
    let i = s.act(cx, 0, i)?;
    let f = peep(cx, f, 2, c)?;
    let f = s.act(cx, 0, f)?;
    let cc = s.act(cx, 1, cc)?;
    let fc = cx.g.mul(f, c)?;
    let ic = cx.g.mul(i, cc)?;
    let c_new = cx.g.add(fc, ic)?;
    let o = peep(cx, o, 1, c_new)?;
    let o = s.act(cx, 0, o)?;
    let hc = s.act(cx, 2, c_new)?;
    Ok((cx.g.mul(o, hc)?, c_new))
}

/// `CausalConvWithState(input [B, C, L], weight [C, 1, k], bias?, past_state? [B, C, k-1])`:
/// the depthwise convolution of `[past_state, input]` (zeros without a past state), with an
/// optional SiLU, and the padded input's last `k - 1` positions as the present state.
pub(super) fn causal_conv(cx: &mut Cx, n: &Node) -> Result<Vec<Tensor>> {
    let act = n.string("activation").unwrap_or_else(|| "none".into());
    if !matches!(act.as_str(), "none" | "silu" | "swish") {
        return Err(n.unsupported(format!("activation '{act}'")));
    }
    let (x, w) = (cx.t(n, 0)?, cx.t(n, 1)?);
    let bias = cx.opt_t(n, 2)?;
    let past = cx.opt_t(n, 3)?;
    let xs = cx.g.probe_shape(x)?.dims().to_vec();
    let ws = cx.g.probe_shape(w)?.dims().to_vec();
    let (&[b, ch, len], &[wc, 1, k]) = (&xs[..], &ws[..]) else {
        return Err(bad(format!(
            "input must be [B, C, L] and weight [C, 1, k], got {xs:?} and {ws:?}"
        )));
    };
    if wc != ch || k == 0 {
        return Err(bad(format!("weight {ws:?} does not fit {ch} channels")));
    }
    let dt = cx.g.dtype(x)?;
    // conv2d takes f32: an f16 model computes in f32 and rounds once at the end, as the
    // reference does for the activation.
    let (x, w, bias, past) = if dt == DType::F16 {
        let f = |cx: &mut Cx, t: Option<Tensor>| t.map(|t| cx.g.cast(t, DType::F32)).transpose();
        (
            cx.g.cast(x, DType::F32)?,
            cx.g.cast(w, DType::F32)?,
            f(cx, bias)?,
            f(cx, past)?,
        )
    } else {
        (x, w, bias, past)
    };
    let padded = if k > 1 {
        let pad = match past {
            Some(p) => p,
            None => cx.g.zeros(vec![b, ch, k - 1], DType::F32)?,
        };
        cx.g.concat(&[pad, x], 2)?
    } else {
        x
    };
    let total = len + k - 1;
    let x4 =
        cx.g.reshape(padded, &[b as isize, ch as isize, 1, total as isize])?;
    let w4 = cx.g.reshape(w, &[ch as isize, 1, 1, k as isize])?;
    let opts = Conv2dOptions {
        stride: [1, 1],
        padding: [0, 0],
        dilation: [1, 1],
        groups: ch,
    };
    let y = cx.g.conv2d(x4, w4, bias, opts)?;
    let mut y = cx.g.reshape(y, &[b as isize, ch as isize, len as isize])?;
    if act != "none" {
        y = cx.g.silu(y)?;
    }
    let state = cx.g.slice(
        padded,
        &[
            SliceArg::full(),
            SliceArg::full(),
            SliceArg::range((total - (k - 1)) as isize, total as isize),
        ],
    )?;
    if dt == DType::F16 {
        return Ok(vec![cx.g.cast(y, dt)?, cx.g.cast(state, dt)?]);
    }
    Ok(vec![y, state])
}

//! The attention family: `Attention` (opsets 23–25: multi-head, GQA/MQA, causal and
//! sliding-window masks, KV cache, softcap, the optional `qk_matmul_output`),
//! `RotaryEmbedding`, `SwiGLU` and `LinearAttention` (the recurrent linear, gated, delta and
//! gated-delta rules, unrolled over the sequence) and `FlexAttention` (`ai.onnx.preview`:
//! reached once the walk accepts that domain; its graph-valued `score_mod`/`prob_mod` are
//! refused). All are composed from matmul, softmax-like reductions, `where` and movement ops.

use super::build::{bad, Cx, Node, Val};
use crate::{DType, HostTensor, Result, SliceArg, Tensor};

/// `x[..., start..stop, ...]` along `axis`.
fn slice_axis(cx: &mut Cx, x: Tensor, axis: usize, start: usize, stop: usize) -> Result<Tensor> {
    let mut args = vec![SliceArg::full(); axis];
    args.push(SliceArg::range(start as isize, stop as isize));
    cx.g.slice(x, &args)
}

fn dims(cx: &Cx, x: Tensor) -> Result<Vec<usize>> {
    Ok(cx.g.probe_shape(x)?.dims().to_vec())
}

fn isz(v: &[usize]) -> Vec<isize> {
    v.iter().map(|&d| d as isize).collect()
}

/// A positive head count from attribute `name`.
fn heads(n: &Node, name: &str) -> Result<usize> {
    match n.int(name, 0) {
        h if h > 0 => Ok(h as usize),
        h => Err(bad(format!(
            "attribute {name} must be a positive head count for 3-D inputs, got {h}"
        ))),
    }
}

/// `[B, S, H·D]` as `[B, H, S, D]`.
fn split_heads(cx: &mut Cx, x: Tensor, h: usize, what: &str) -> Result<Tensor> {
    let d = dims(cx, x)?;
    if d[2] % h != 0 {
        return Err(bad(format!(
            "{what}'s hidden size {} is not a multiple of its {h} heads",
            d[2]
        )));
    }
    let r = cx.g.reshape(
        x,
        &[
            d[0] as isize,
            d[1] as isize,
            h as isize,
            (d[2] / h) as isize,
        ],
    )?;
    cx.g.transpose(r, &[0, 2, 1, 3])
}

/// Repeat each head of `[B, H, S, D]` `r` times, interleaved (`h0, h0, h1, h1, …`).
fn repeat_heads(cx: &mut Cx, x: Tensor, r: usize) -> Result<Tensor> {
    if r == 1 {
        return Ok(x);
    }
    let [b, h, s, d]: [usize; 4] = dims(cx, x)?
        .try_into()
        .map_err(|_| bad("expected a rank-4 tensor"))?;
    let e = cx.g.reshape(x, &isz(&[b, h, 1, s, d]))?;
    let e = cx.g.broadcast_to(e, &[b, h, r, s, d])?;
    cx.g.reshape(e, &isz(&[b, h * r, s, d]))
}

/// `where(allowed, 0, -inf)` in `dt`.
fn bias_of(cx: &mut Cx, allowed: Tensor, dt: DType) -> Result<Tensor> {
    let zero = cx.scalar(0.0, dt)?;
    let ninf = cx.scalar(f64::NEG_INFINITY, dt)?;
    cx.g.select(allowed, zero, ninf)
}

/// A constant `[q, kv]` i32 tensor holding `f(i, j)`.
fn grid(cx: &mut Cx, q: usize, kv: usize, f: impl Fn(i64, i64) -> i64) -> Result<Tensor> {
    let n = super::limits::count(&[q, kv], cx.opts, "an attention mask")?;
    let mut v = super::limits::room(n, "an attention mask")?;
    for i in 0..q as i64 {
        for j in 0..kv as i64 {
            v.push(f(i, j) as i32);
        }
    }
    cx.g.constant(HostTensor::new(vec![q, kv], v)?)
}

/// The attended-position offset of the causal and window masks: a constant (past length or
/// 0), or per batch `nonpad_kv_seqlen[b] - q_len` as an i32 `[B, 1, 1, 1]` tensor.
enum Offset {
    Fixed(i64),
    PerBatch(Tensor),
}

impl Offset {
    /// `allowed(i + offset - j)` over `[q, kv]` (or `[B, 1, q, kv]` per batch), as a bias.
    fn mask(
        &self,
        cx: &mut Cx,
        q: usize,
        kv: usize,
        dt: DType,
        allowed: impl Fn(i64) -> bool + Copy,
        bound: (Option<i64>, Option<i64>),
    ) -> Result<Tensor> {
        let ok = match self {
            Offset::Fixed(o) => {
                let n = super::limits::count(&[q, kv], cx.opts, "an attention mask")?;
                let mut v = super::limits::room(n, "an attention mask")?;
                for i in 0..q as i64 {
                    for j in 0..kv as i64 {
                        v.push(allowed(i + o - j));
                    }
                }
                cx.g.constant(HostTensor::new(vec![q, kv], v)?)?
            }
            Offset::PerBatch(off) => {
                let d = grid(cx, q, kv, |i, j| i - j)?;
                let diff = cx.g.add(d, *off)?;
                let (lo, hi) = bound;
                let mut ok = None;
                for (limit, upper) in [(hi, true), (lo, false)] {
                    let Some(l) = limit else { continue };
                    let c = cx.scalar(l as f64, DType::I32)?;
                    let t = if upper {
                        cx.g.less_equal(diff, c)?
                    } else {
                        cx.g.greater_equal(diff, c)?
                    };
                    ok = Some(match ok {
                        Some(prev) => cx.g.logical_and(prev, t)?,
                        None => t,
                    });
                }
                ok.ok_or_else(|| bad("internal: an empty mask"))?
            }
        };
        bias_of(cx, ok, dt)
    }
}

fn add_opt(cx: &mut Cx, acc: Option<Tensor>, t: Tensor) -> Result<Option<Tensor>> {
    Ok(Some(match acc {
        Some(a) => cx.g.add(a, t)?,
        None => t,
    }))
}

/// Softmax over the last axis that gives 0 (not NaN) for a row that is all `-inf`, as the
/// ONNX reference does.
fn safe_softmax(cx: &mut Cx, x: Tensor) -> Result<Tensor> {
    let dt = cx.g.dtype(x)?;
    let zero = cx.scalar(0.0, dt)?;
    let one = cx.scalar(1.0, dt)?;
    let ninf = cx.scalar(f64::NEG_INFINITY, dt)?;
    let g = &mut cx.g;
    let m = g.max(x, -1isize, true)?;
    let masked = g.equal(m, ninf)?;
    let m = g.select(masked, zero, m)?;
    let d = g.sub(x, m)?;
    let e = g.exp(d)?;
    let s = g.sum(e, -1isize, true)?;
    let empty = g.equal(s, zero)?;
    let s = g.select(empty, one, s)?;
    g.div(e, s)
}

pub(super) fn attention(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let (mut q, mut k, mut v) = (cx.t(n, 0)?, cx.t(n, 1)?, cx.t(n, 2)?);
    let dt = cx.g.dtype(q)?;
    if !dt.is_float() {
        return Err(bad(crate::onnx::wrong_dtype(format!(
            "Attention needs float inputs, got {dt}"
        ))));
    }
    let rank = cx.g.probe_shape(q)?.rank();
    if cx.g.probe_shape(k)?.rank() != rank || cx.g.probe_shape(v)?.rank() != rank {
        return Err(bad("Q, K and V must have the same rank"));
    }
    match rank {
        3 => {
            let (hq, hkv) = (heads(n, "q_num_heads")?, heads(n, "kv_num_heads")?);
            q = split_heads(cx, q, hq, "Q")?;
            k = split_heads(cx, k, hkv, "K")?;
            v = split_heads(cx, v, hkv, "V")?;
        }
        4 => {}
        r => return Err(bad(format!("Q, K and V must be 3-D or 4-D, got rank {r}"))),
    }
    let [b, hq, sq, dq]: [usize; 4] = dims(cx, q)?.try_into().map_err(|_| bad("rank"))?;
    let past_k = cx.opt_t(n, 4)?;
    let past_v = cx.opt_t(n, 5)?;
    let nonpad = cx.opt_t(n, 6)?;
    let past_len = match (past_k, past_v) {
        (Some(pk), Some(_)) => Some(dims(cx, pk)?.get(2).copied().unwrap_or(0)),
        (None, None) => None,
        _ => return Err(bad("past_key and past_value must be given together")),
    };
    if nonpad.is_some() && past_len.is_some() {
        return Err(bad(
            "nonpad_kv_seqlen cannot be combined with past_key/past_value",
        ));
    }
    if let (Some(pk), Some(pv)) = (past_k, past_v) {
        k = cx.g.concat(&[pk, k], 2)?;
        v = cx.g.concat(&[pv, v], 2)?;
    }
    let (present_k, present_v) = (k, v);
    let kd = dims(cx, k)?;
    let skv = kd[2];
    let hkv = kd[1];

    let mode = n.int("qk_matmul_output_mode", 0);
    if !(0..=3).contains(&mode) {
        return Err(n.unsupported(format!("qk_matmul_output_mode {mode}")));
    }
    let softcap = n.float("softcap", 0.0);
    let (left, right) = (
        n.int("left_window_size", -1),
        n.int("right_window_size", -1),
    );
    if left < -1 || right < -1 {
        return Err(bad("left/right_window_size must be -1 or nonnegative"));
    }
    let causal = n.int("is_causal", 0) != 0;
    // The softmax's dtype: f16 inputs may ask for f32 (or f64, computed in f32).
    let sdt = match (n.has("softmax_precision"), n.int("softmax_precision", 0)) {
        (false, _) => dt,
        (true, 1 | 11) => DType::F32,
        (true, 10) => DType::F16,
        (true, 16) if dt == DType::F32 => DType::F32,
        (true, p) => return Err(n.unsupported(format!("softmax_precision {p}"))),
    };

    // The additive bias: mask + causal + window + padding, each broadcast right-aligned.
    let mut bias = None;
    if let Some(m) = cx.opt_t(n, 3)? {
        let mut m = m;
        if cx.g.dtype(m)? == DType::Bool {
            m = bias_of(cx, m, dt)?;
        } else if cx.g.dtype(m)? != dt {
            return Err(bad(crate::onnx::wrong_dtype(
                "attn_mask must be bool or Q's dtype",
            )));
        }
        let md = dims(cx, m)?;
        let last = md.last().copied().unwrap_or(0);
        if md.is_empty() || md.len() > 4 || last > skv {
            return Err(bad(format!(
                "attn_mask of shape {md:?} does not fit {skv} keys"
            )));
        }
        if last < skv {
            let mut pd = md.clone();
            let l = pd.len() - 1;
            pd[l] = skv - last;
            let fill = cx.g.full(pd, dt, f64::NEG_INFINITY)?;
            m = cx.g.concat(&[m, fill], -1)?;
        }
        bias = Some(m);
    }
    let offset = match nonpad {
        Some(np) => {
            if cx.g.dtype(np)? != DType::I32 || dims(cx, np)? != [b] {
                return Err(bad(
                    "nonpad_kv_seqlen must be an integer tensor of shape [batch]",
                ));
            }
            let np4 = cx.g.reshape(np, &isz(&[b, 1, 1, 1]))?;
            let sqc = cx.scalar(sq as f64, DType::I32)?;
            Offset::PerBatch(cx.g.sub(np4, sqc)?)
        }
        None => Offset::Fixed(past_len.unwrap_or(0) as i64),
    };
    if causal {
        let c = offset.mask(cx, sq, skv, dt, |d| d >= 0, (Some(0), None))?;
        bias = add_opt(cx, bias, c)?;
    }
    if left >= 0 || right >= 0 {
        let (l, r) = (left, right);
        let ok = move |d: i64| (l < 0 || d <= l) && (r < 0 || -d <= r);
        let lo = (r >= 0).then_some(-r);
        let hi = (l >= 0).then_some(l);
        let w = offset.mask(cx, sq, skv, dt, ok, (lo, hi))?;
        bias = add_opt(cx, bias, w)?;
    }
    if let Some(np) = nonpad {
        let j = grid(cx, 1, skv, |_, j| j)?;
        let np4 = cx.g.reshape(np, &isz(&[b, 1, 1, 1]))?;
        let ok = cx.g.less(j, np4)?;
        let p = bias_of(cx, ok, dt)?;
        bias = add_opt(cx, bias, p)?;
    }

    // GQA / MQA: each KV head serves q_heads / kv_heads query heads.
    if hq != hkv {
        if hkv == 0 || hq % hkv != 0 || dims(cx, v)?[1] != hkv {
            return Err(bad(format!(
                "{hq} query heads are not a multiple of {hkv} key/value heads"
            )));
        }
        k = repeat_heads(cx, k, hq / hkv)?;
        v = repeat_heads(cx, v, hq / hkv)?;
    }
    if kd[3] != dq {
        return Err(bad(format!(
            "Q's head size {dq} differs from K's {}",
            kd[3]
        )));
    }

    let scale = if n.has("scale") {
        n.float("scale", 1.0) as f64
    } else {
        1.0 / (dq as f64).sqrt()
    };
    let s = cx.scalar(scale.sqrt(), dt)?;
    let qs = cx.g.mul(q, s)?;
    let ks = cx.g.mul(k, s)?;
    let kt = cx.g.transpose(ks, &[0, 1, 3, 2])?;
    let mut qk = cx.g.matmul(qs, kt)?;
    if softcap > 0.0 {
        let c = cx.scalar(softcap as f64, dt)?;
        let x = cx.g.div(qk, c)?;
        let x = cx.g.tanh(x)?;
        qk = cx.g.mul(x, c)?;
    }
    let with_bias = match bias {
        Some(bt) => cx.g.add(qk, bt)?,
        None => qk,
    };
    let logits = if sdt != dt {
        cx.g.cast(with_bias, sdt)?
    } else {
        with_bias
    };
    let mut p = safe_softmax(cx, logits)?;
    if let Some(bt) = bias {
        // A row whose bias is all -inf attends to nothing: its probabilities are 0.
        let m = cx.g.max(bt, -1isize, true)?;
        let ninf = cx.scalar(f64::NEG_INFINITY, dt)?;
        let dead = cx.g.equal(m, ninf)?;
        let zero = cx.scalar(0.0, sdt)?;
        p = cx.g.select(dead, zero, p)?;
    }
    if sdt != dt {
        p = cx.g.cast(p, dt)?;
    }
    let qk_out = match mode {
        0 | 1 => qk,
        2 => with_bias,
        _ => p,
    };
    let mut y = cx.g.matmul(p, v)?;
    if rank == 3 {
        let dv = dims(cx, y)?[3];
        y = cx.g.transpose(y, &[0, 2, 1, 3])?;
        y = cx.g.reshape(y, &isz(&[b, sq, hq * dv]))?;
    }
    Ok(vec![
        y.into(),
        present_k.into(),
        present_v.into(),
        qk_out.into(),
    ])
}

pub(super) fn rotary(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let x = cx.t(n, 0)?;
    let xd = dims(cx, x)?;
    // Work in [B, S, H, D].
    let x4 = match xd.len() {
        4 => cx.g.transpose(x, &[0, 2, 1, 3])?,
        3 => {
            let h = heads(n, "num_heads")?;
            if xd[2] % h != 0 {
                return Err(bad(format!(
                    "hidden size {} is not a multiple of num_heads {h}",
                    xd[2]
                )));
            }
            cx.g.reshape(x, &isz(&[xd[0], xd[1], h, xd[2] / h]))?
        }
        r => return Err(bad(format!("input must be 3-D or 4-D, got rank {r}"))),
    };
    let [b, s, h, d]: [usize; 4] = dims(cx, x4)?.try_into().map_err(|_| bad("rank"))?;
    let rot = match n.int("rotary_embedding_dim", 0) {
        0 => d,
        r if r > 0 && r as usize <= d && r % 2 == 0 => r as usize,
        r => {
            return Err(bad(format!(
                "rotary_embedding_dim {r} does not fit head size {d}"
            )))
        }
    };
    let half = rot / 2;
    let (mut cos, mut sin) = (cx.t(n, 1)?, cx.t(n, 2)?);
    if let Some(pos) = cx.opt_t(n, 3)? {
        cos = cx.g.take(cos, pos, 0)?;
        sin = cx.g.take(sin, pos, 0)?;
    }
    for c in [cos, sin] {
        if dims(cx, c)? != [b, s, half] {
            return Err(bad(format!(
                "cos/sin cache (after position_ids) must be [{b}, {s}, {half}], got {:?}",
                dims(cx, c)?
            )));
        }
    }
    let cos = cx.g.reshape(cos, &isz(&[b, s, 1, half]))?;
    let sin = cx.g.reshape(sin, &isz(&[b, s, 1, half]))?;
    let xr = slice_axis(cx, x4, 3, 0, rot)?;
    let interleaved = n.int("interleaved", 0) != 0;
    let (x1, x2) = if interleaved {
        let p = cx.g.reshape(xr, &isz(&[b, s, h, half, 2]))?;
        let a = slice_axis(cx, p, 4, 0, 1)?;
        let c = slice_axis(cx, p, 4, 1, 2)?;
        (
            cx.g.reshape(a, &isz(&[b, s, h, half]))?,
            cx.g.reshape(c, &isz(&[b, s, h, half]))?,
        )
    } else {
        (
            slice_axis(cx, xr, 3, 0, half)?,
            slice_axis(cx, xr, 3, half, rot)?,
        )
    };
    let g = &mut cx.g;
    let (c1, s2) = (g.mul(cos, x1)?, g.mul(sin, x2)?);
    let real = g.sub(c1, s2)?;
    let (s1, c2) = (g.mul(sin, x1)?, g.mul(cos, x2)?);
    let imag = g.add(s1, c2)?;
    let mut y = if interleaved {
        let st = g.stack(&[real, imag], -1)?;
        g.reshape(st, &isz(&[b, s, h, rot]))?
    } else {
        g.concat(&[real, imag], -1)?
    };
    if rot < d {
        let rest = slice_axis(cx, x4, 3, rot, d)?;
        y = cx.g.concat(&[y, rest], -1)?;
    }
    if xd.len() == 4 {
        cx.g.transpose(y, &[0, 2, 1, 3])
    } else {
        cx.g.reshape(y, &isz(&xd))
    }
}

pub(super) fn swiglu(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let (a, b) = (cx.t(n, 0)?, cx.t(n, 1)?);
    if dims(cx, a)? != dims(cx, b)? {
        return Err(bad("SwiGLU's inputs must have the same shape"));
    }
    let dt = cx.g.dtype(a)?;
    let alpha = cx.scalar(n.float("alpha", 1.0) as f64, dt)?;
    let g = &mut cx.g;
    let z = g.mul(a, alpha)?;
    let sg = g.sigmoid(z)?;
    let sw = g.mul(a, sg)?;
    g.mul(sw, b)
}

pub(super) fn linear_attention(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let rule = n
        .string("update_rule")
        .unwrap_or_else(|| "gated_delta".into());
    let (gating, delta) = match rule.as_str() {
        "linear" => (false, false),
        "gated" => (true, false),
        "delta" => (false, true),
        "gated_delta" => (true, true),
        r => return Err(n.unsupported(format!("update_rule '{r}'"))),
    };
    let (hq, hkv) = (heads(n, "q_num_heads")?, heads(n, "kv_num_heads")?);
    if hq % hkv != 0 {
        return Err(bad(format!(
            "q_num_heads {hq} is not a multiple of kv_num_heads {hkv}"
        )));
    }
    let grp = hq / hkv;
    let (q0, k0, v0) = (cx.t(n, 0)?, cx.t(n, 1)?, cx.t(n, 2)?);
    let out_dt = cx.g.dtype(q0)?;
    let f32_of = |cx: &mut Cx, t: Tensor| -> Result<Tensor> {
        match cx.g.dtype(t)? {
            DType::F32 => Ok(t),
            DType::F16 => cx.g.cast(t, DType::F32),
            d => Err(bad(crate::onnx::wrong_dtype(format!(
                "LinearAttention needs float inputs, got {d}"
            )))),
        }
    };
    let (q, k, v) = (f32_of(cx, q0)?, f32_of(cx, k0)?, f32_of(cx, v0)?);
    let (qd, kd, vd) = (dims(cx, q)?, dims(cx, k)?, dims(cx, v)?);
    if qd.len() != 3 || kd.len() != 3 || vd.len() != 3 {
        return Err(bad("query, key and value must be rank 3 (B, T, H*D)"));
    }
    let (b, t) = (qd[0], qd[1]);
    if qd[2] % hq != 0 || vd[2] % hkv != 0 || kd[2] != hkv * (qd[2] / hq) {
        return Err(bad(
            "query/key/value hidden sizes do not match the head counts",
        ));
    }
    let (dk, dv) = (qd[2] / hq, vd[2] / hkv);
    let q = cx.g.reshape(q, &isz(&[b, t, hkv, grp, dk]))?;
    let k = cx.g.reshape(k, &isz(&[b, t, hkv, dk]))?;
    let v = cx.g.reshape(v, &isz(&[b, t, hkv, dv]))?;
    let decay = cx.opt_t(n, 4)?;
    let beta = cx.opt_t(n, 5)?;
    if gating != decay.is_some() {
        return Err(bad(format!(
            "update_rule '{rule}' {} the decay input",
            if gating { "requires" } else { "forbids" }
        )));
    }
    if delta != beta.is_some() {
        return Err(bad(format!(
            "update_rule '{rule}' {} the beta input",
            if delta { "requires" } else { "forbids" }
        )));
    }
    let decay = match decay {
        Some(g) => {
            let g = f32_of(cx, g)?;
            let gd = dims(cx, g)?;
            let w = match gd.get(2) {
                Some(&l) if gd.len() == 3 && l == hkv => 1,
                Some(&l) if gd.len() == 3 && l == hkv * dk => dk,
                _ => return Err(bad(format!("decay of shape {gd:?} does not fit"))),
            };
            Some((cx.g.reshape(g, &isz(&[b, t, hkv, w]))?, w))
        }
        None => None,
    };
    let beta = match beta {
        Some(x) => {
            let x = f32_of(cx, x)?;
            let xd = dims(cx, x)?;
            let w = match xd.get(2) {
                Some(&l) if xd.len() == 3 && (l == hkv || l == 1) => l,
                _ => return Err(bad(format!("beta of shape {xd:?} does not fit"))),
            };
            Some((x, w))
        }
        None => None,
    };
    let (mut state, state_dt) = match cx.opt_t(n, 3)? {
        Some(p) => {
            if dims(cx, p)? != [b, hkv, dk, dv] {
                return Err(bad(format!("past_state must be [{b}, {hkv}, {dk}, {dv}]")));
            }
            let pdt = cx.g.dtype(p)?;
            (f32_of(cx, p)?, pdt)
        }
        None => (cx.g.zeros(vec![b, hkv, dk, dv], DType::F32)?, out_dt),
    };
    let s = n.float("scale", 0.0);
    let scale = if s == 0.0 {
        1.0 / (dk as f64).sqrt()
    } else {
        s as f64
    };
    let sc = cx.scalar(scale, DType::F32)?;
    let mut outs = Vec::with_capacity(t);
    for i in 0..t {
        let kt = slice_axis(cx, k, 1, i, i + 1)?;
        let k_col = cx.g.reshape(kt, &isz(&[b, hkv, dk, 1]))?;
        let vt = slice_axis(cx, v, 1, i, i + 1)?;
        let mut vt = cx.g.reshape(vt, &isz(&[b, hkv, 1, dv]))?;
        if let Some((g, w)) = decay {
            let gt = slice_axis(cx, g, 1, i, i + 1)?;
            let gt = cx.g.reshape(gt, &isz(&[b, hkv, w, 1]))?;
            let e = cx.g.exp(gt)?;
            state = cx.g.mul(state, e)?;
        }
        if let Some((x, w)) = beta {
            let k_row = cx.g.reshape(kt, &isz(&[b, hkv, 1, dk]))?;
            let got = cx.g.matmul(k_row, state)?;
            let bt = slice_axis(cx, x, 1, i, i + 1)?;
            let bt = cx.g.reshape(bt, &isz(&[b, w, 1, 1]))?;
            let d = cx.g.sub(vt, got)?;
            vt = cx.g.mul(bt, d)?;
        }
        let kv = cx.g.mul(k_col, vt)?;
        state = cx.g.add(state, kv)?;
        let qt = slice_axis(cx, q, 1, i, i + 1)?;
        let qt = cx.g.reshape(qt, &isz(&[b, hkv, grp, dk]))?;
        let o = cx.g.matmul(qt, state)?;
        let o = cx.g.mul(o, sc)?;
        outs.push(cx.g.reshape(o, &isz(&[b, 1, hq * dv]))?);
    }
    let mut out = if outs.len() == 1 {
        outs[0]
    } else {
        cx.g.concat(&outs, 1)?
    };
    if out_dt != DType::F32 {
        out = cx.g.cast(out, out_dt)?;
    }
    if state_dt != DType::F32 {
        state = cx.g.cast(state, state_dt)?;
    }
    Ok(vec![out.into(), state.into()])
}

pub(super) fn flex_attention(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    for a in ["score_mod", "prob_mod"] {
        if n.has(a) {
            return Err(n.unsupported(format!("the graph-valued attribute {a}")));
        }
    }
    let (q, mut k, mut v) = (cx.t(n, 0)?, cx.t(n, 1)?, cx.t(n, 2)?);
    let dt = cx.g.dtype(q)?;
    let (qd, kd, vd) = (dims(cx, q)?, dims(cx, k)?, dims(cx, v)?);
    if qd.len() != 4 || kd.len() != 4 || vd.len() != 4 {
        return Err(bad("FlexAttention needs rank-4 Q, K and V"));
    }
    if kd[1] != vd[1] || kd[2] != vd[2] || kd[3] != qd[3] {
        return Err(bad(format!(
            "Q {qd:?}, K {kd:?} and V {vd:?} do not fit together"
        )));
    }
    let (hq, hkv) = (qd[1], kd[1]);
    if hq != hkv {
        if hkv == 0 || hq % hkv != 0 {
            return Err(bad(format!(
                "{hq} query heads are not a multiple of {hkv} key/value heads"
            )));
        }
        k = repeat_heads(cx, k, hq / hkv)?;
        v = repeat_heads(cx, v, hq / hkv)?;
    }
    // The softmax's dtype: f16 is promoted to f32 unless softmax_precision says otherwise.
    let sdt = match (n.has("softmax_precision"), n.int("softmax_precision", 0)) {
        (false, _) if dt == DType::F16 => DType::F32,
        (false, _) => dt,
        (true, 1 | 11) => DType::F32,
        (true, 10) => DType::F16,
        (true, p) => return Err(n.unsupported(format!("softmax_precision {p}"))),
    };
    let scale = if n.has("scale") {
        n.float("scale", 1.0)
    } else {
        1.0 / (qd[3] as f32).sqrt()
    };
    let s = cx.scalar(scale.sqrt() as f64, dt)?;
    let qs = cx.g.mul(q, s)?;
    let ks = cx.g.mul(k, s)?;
    let kt = cx.g.transpose(ks, &[0, 1, 3, 2])?;
    let mut scores = cx.g.matmul(qs, kt)?;
    if sdt != dt {
        scores = cx.g.cast(scores, sdt)?;
        v = cx.g.cast(v, sdt)?;
    }
    let p = cx.g.softmax(scores, -1)?;
    let y = cx.g.matmul(p, v)?;
    if sdt != dt {
        cx.g.cast(y, dt)
    } else {
        Ok(y)
    }
}

//! Control flow with a subgraph attribute, unrolled at import: `Scan` (over the static scan
//! length), `If` (a condition known at import) and `Loop` (a trip count and conditions known
//! at import). Each iteration walks the body again in a nested scope (`Cx::subgraph`), so
//! the run-time graph is straight-line code.

use super::build::{bad, Cx, Node, Val};
use super::tensor::HostValue;
use crate::{DType, Result, SliceArg, Tensor};

/// The most iterations a `Loop` is unrolled to.
const MAX_UNROLL: usize = 1 << 16;
/// The most graph nodes one `Loop` or `Scan` may create by unrolling (a trip count of
/// INT64_MAX, or a short count over a large body, is an error, not minutes of import).
const MAX_UNROLLED_NODES: usize = 1 << 20;

fn check_unrolled(cx: &Cx, start: usize, what: &str) -> Result<()> {
    if cx.g.len() - start > MAX_UNROLLED_NODES {
        return Err(bad(crate::onnx::unsupported(format!(
            "unsupported: unrolling this {what} creates more than {MAX_UNROLLED_NODES} graph nodes"
        ))));
    }
    Ok(())
}

/// Normalise `axis` against `rank`.
fn axis_of(axis: i64, rank: usize, what: &str) -> Result<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if !(0..r).contains(&a) {
        return Err(bad(format!(
            "{what} {axis} is out of range for rank {rank}"
        )));
    }
    Ok(a as usize)
}

/// `x[.., i, ..]` along `axis`, with that axis dropped.
pub(super) fn index(cx: &mut Cx, x: Tensor, axis: usize, i: usize) -> Result<Tensor> {
    let mut args = vec![SliceArg::full(); axis];
    args.push(SliceArg::range(i as isize, i as isize + 1));
    let s = cx.g.slice(x, &args)?;
    cx.g.squeeze(s, Some(&[axis as isize]))
}

/// A per-list attribute of `count` values (default `default` each).
fn per(n: &Node, name: &str, count: usize, default: i64) -> Result<Vec<i64>> {
    match n.ints(name) {
        Some(v) if v.len() == count => Ok(v),
        Some(v) => Err(bad(format!(
            "{name} has {} values for {count} tensors",
            v.len()
        ))),
        None => Ok(vec![default; count]),
    }
}

pub(super) fn scan(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let body = n.graph("body")?;
    let m = usize::try_from(n.int("num_scan_inputs", -1))
        .map_err(|_| bad("num_scan_inputs is required"))?;
    if n.opset < 9 {
        return scan8(cx, n, m);
    }
    let ins: Vec<Val> = (0..n.inputs.len())
        .map(|i| cx.val_of(n, i))
        .collect::<Result<_>>()?;
    if m > ins.len() {
        return Err(bad(format!(
            "num_scan_inputs {m} is more than the {} inputs",
            ins.len()
        )));
    }
    let states = ins[..ins.len() - m].to_vec();
    let mut xs = Vec::new();
    for (i, v) in ins[ins.len() - m..].iter().enumerate() {
        xs.push(cx.val_tensor(v, &format!("scan input {i}"))?);
    }
    let n_out = body.output.len().saturating_sub(states.len());
    let axes = per(n, "scan_input_axes", m, 0)?;
    let dirs = per(n, "scan_input_directions", m, 0)?;
    let out_axes = per(n, "scan_output_axes", n_out, 0)?;
    let out_dirs = per(n, "scan_output_directions", n_out, 0)?;
    unroll_scan(cx, body, states, &xs, &axes, &dirs, (&out_axes, &out_dirs))
}

/// Scan-8: a leading batch axis on every state and scan input, scanned along axis 1; the
/// body sees one batch element.
fn scan8(cx: &mut Cx, n: &Node, m: usize) -> Result<Vec<Val>> {
    let body = n.graph("body")?;
    if n.input(0).is_some() {
        return Err(n.unsupported("Scan-8 with sequence_lens"));
    }
    let count = n.inputs.len().saturating_sub(1);
    if m > count {
        return Err(bad(format!(
            "num_scan_inputs {m} is more than the {count} inputs"
        )));
    }
    let mut ins = Vec::new();
    for i in 1..n.inputs.len() {
        ins.push(cx.t(n, i)?);
    }
    let batch = match ins.first() {
        Some(&t) => {
            cx.g.probe_shape(t)?
                .dims()
                .first()
                .copied()
                .ok_or_else(|| bad("Scan-8 inputs need a batch axis"))?
        }
        None => return Err(bad("Scan-8 has no inputs")),
    };
    let n_states = count - m;
    let n_out = body.output.len().saturating_sub(n_states);
    let dirs = per(n, "directions", m, 0)?;
    let mut per_batch: Vec<Vec<Tensor>> = Vec::new();
    for b in 0..batch {
        let mut states = Vec::new();
        let mut xs = Vec::new();
        for (k, &t) in ins.iter().enumerate() {
            let s = index(cx, t, 0, b)?;
            if k < n_states {
                states.push(Val::T(s));
            } else {
                xs.push(s);
            }
        }
        let outs = unroll_scan(
            cx,
            body,
            states,
            &xs,
            &vec![0; m],
            &dirs,
            (&vec![0; n_out], &vec![0; n_out]),
        )?;
        let mut ts = Vec::new();
        for (k, v) in outs.iter().enumerate() {
            ts.push(cx.val_tensor(v, &format!("Scan output {k}"))?);
        }
        per_batch.push(ts);
    }
    let n_all = per_batch.first().map_or(0, Vec::len);
    (0..n_all)
        .map(|k| {
            let col: Vec<Tensor> = per_batch.iter().map(|o| o[k]).collect();
            cx.g.stack(&col, 0).map(Val::T)
        })
        .collect()
}

/// Run `body` once per step of the scan inputs `xs`: the states thread through, each scan
/// output is stacked along its axis.
fn unroll_scan(
    cx: &mut Cx,
    body: &super::proto::GraphProto,
    mut states: Vec<Val>,
    xs: &[Tensor],
    axes: &[i64],
    dirs: &[i64],
    (out_axes, out_dirs): (&[i64], &[i64]),
) -> Result<Vec<Val>> {
    let mut len = None;
    let mut axes_u = Vec::new();
    for (j, &x) in xs.iter().enumerate() {
        let dims = cx.g.probe_shape(x)?.dims().to_vec();
        let a = axis_of(axes[j], dims.len(), "scan_input_axes")?;
        if cx.g.dims(x)?.get(a).is_some_and(|d| d.known().is_none()) {
            return Err(cx.sym_error("are a Scan's length, which is unrolled at import"));
        }
        if len.is_some_and(|l| l != dims[a]) {
            return Err(bad("the scan inputs differ in length"));
        }
        len = Some(dims[a]);
        axes_u.push(a);
    }
    let len = len.ok_or_else(|| bad("Scan needs at least one scan input"))?;
    let n_states = states.len();
    let mut collected: Vec<Vec<Tensor>> = vec![Vec::new(); out_axes.len()];
    let start = cx.g.len();
    for t in 0..len {
        check_unrolled(cx, start, "Scan")?;
        let mut inputs = states.clone();
        for (j, &x) in xs.iter().enumerate() {
            let i = if dirs[j] != 0 { len - 1 - t } else { t };
            inputs.push(Val::T(index(cx, x, axes_u[j], i)?));
        }
        let outs = cx.subgraph(body, inputs)?;
        if outs.len() != n_states + out_axes.len() {
            return Err(bad(
                "the body's outputs do not match the states and outputs",
            ));
        }
        states = outs[..n_states].to_vec();
        for (k, v) in outs[n_states..].iter().enumerate() {
            let t = cx.val_tensor(v, &format!("scan output {k}"))?;
            collected[k].push(t);
        }
    }
    let mut result = states;
    for (k, mut list) in collected.into_iter().enumerate() {
        if out_dirs[k] != 0 {
            list.reverse();
        }
        let first = *list
            .first()
            .ok_or_else(|| bad("a scan of length 0 has no outputs to stack"))?;
        let rank = cx.g.probe_shape(first)?.rank();
        let a = axis_of(out_axes[k], rank + 1, "scan_output_axes")?;
        result.push(Val::T(cx.g.stack(&list, a as isize)?));
    }
    Ok(result)
}

/// A boolean scalar known at import.
fn truth(h: &HostValue, what: &str) -> Result<bool> {
    match h {
        HostValue::Ints { v, .. } if v.len() == 1 => Ok(v[0] != 0),
        HostValue::Floats(t) if t.len() == 1 => Ok(t.to_f32()?[0] != 0.0),
        _ => Err(bad(format!("{what} must hold one value"))),
    }
}

pub(super) fn if_(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let cond = cx.host(n, 0)?;
    let branch = if truth(&cond, "the condition")? {
        n.graph("then_branch")?
    } else {
        n.graph("else_branch")?
    };
    cx.subgraph(branch, Vec::new())
}

fn int_scalar(v: i64, dtype: DType) -> Val {
    HostValue::Ints {
        shape: Vec::new(),
        v: vec![v],
        dtype,
    }
    .into()
}

pub(super) fn loop_(cx: &mut Cx, n: &Node) -> Result<Vec<Val>> {
    let body = n.graph("body")?;
    let trips = match n.input(0) {
        Some(_) => {
            if cx.is_sym(n.req(0)?) {
                return Err(cx.sym_error("is a Loop's trip count, which is unrolled at import"));
            }
            let v = cx.ints(n, 0)?;
            let t = *v.first().ok_or_else(|| bad("the trip count is empty"))?;
            let t = usize::try_from(t).unwrap_or(0);
            // Without a condition every one of the trips is unrolled: refuse too many now.
            if n.input(1).is_none() && t > MAX_UNROLL {
                return Err(n.unsupported(format!(
                    "a Loop of {t} iterations (at most {MAX_UNROLL} are unrolled)"
                )));
            }
            Some(t)
        }
        None => None,
    };
    let mut go = match n.input(1) {
        Some(_) => {
            let c = cx.host(n, 1)?;
            truth(&c, "the condition")?
        }
        None => true,
    };
    if trips.is_none() && n.input(1).is_none() {
        return Err(n.unsupported("Loop without a trip count or a condition (it never ends)"));
    }
    let mut carried: Vec<Val> = (2..n.inputs.len())
        .map(|i| cx.val_of(n, i))
        .collect::<Result<_>>()?;
    let n_scan = body.output.len().saturating_sub(1 + carried.len());
    let mut scans: Vec<Vec<Tensor>> = vec![Vec::new(); n_scan];
    let mut i = 0;
    let start = cx.g.len();
    while go && trips.is_none_or(|t| i < t) {
        if i >= MAX_UNROLL {
            return Err(n.unsupported(format!("Loop over more than {MAX_UNROLL} iterations")));
        }
        check_unrolled(cx, start, "Loop")?;
        let mut inputs = vec![int_scalar(i as i64, DType::I32), int_scalar(1, DType::Bool)];
        inputs.extend(carried.iter().cloned());
        let outs = cx.subgraph(body, inputs)?;
        if outs.len() != 1 + carried.len() + n_scan {
            return Err(bad(
                "the body's outputs do not match the loop-carried values",
            ));
        }
        // Without a condition input the loop is a `for` over the trip count: the body's
        // condition is ignored.
        go = match &outs[0] {
            _ if n.input(1).is_none() => true,
            Val::Host(h) => truth(h, "the body's condition")?,
            Val::T(_) => {
                return Err(n.unsupported(
                    "a Loop whose condition is computed at run time (only conditions known at import are unrolled)",
                ))
            }
        };
        carried = outs[1..1 + carried.len()].to_vec();
        for (k, v) in outs[1 + carried.len()..].iter().enumerate() {
            let t = cx.val_tensor(v, &format!("scan output {k}"))?;
            scans[k].push(t);
        }
        i += 1;
    }
    let mut result = carried;
    for list in scans {
        if list.is_empty() {
            return Err(n.unsupported("a Loop of zero iterations with scan outputs"));
        }
        result.push(Val::T(cx.g.stack(&list, 0)?));
    }
    Ok(result)
}

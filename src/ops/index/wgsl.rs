//! The index kernels' WGSL (template `shaders/gather.wgsl`: one invocation per output
//! element).

use super::{IndexKernel, IndexKernelOp, ScatterReduce};
use crate::ops::wgsl::{self, Writer};
use crate::DType;

/// `let name = u32(j)`, the position an index word `word` selects along an axis of length
/// `n` (negative from the end, then clamped).
fn position(w: &mut Writer, name: &str, word: &str, n: usize) {
    w.line(&format!("let {name}_raw = {word};"));
    w.line(&format!(
        "let {name} = u32(clamp(select({name}_raw, {name}_raw + {n}, {name}_raw < 0), 0, {}));",
        n.max(1) - 1
    ));
}

fn is_nan(x: &str) -> String {
    format!("((bitcast<u32>({x}) & 0x7fffffffu) > 0x7f800000u)")
}

/// `acc` combined with the update `v`, as [`super::reference::combine`] does it.
fn combine(reduce: ScatterReduce, d: DType) -> String {
    let pick = |better: &str| {
        let chosen = format!("select(acc, v, v {better} acc)");
        if d == DType::F32 {
            format!(
                "select({chosen}, acc + v, {} || {})",
                is_nan("acc"),
                is_nan("v")
            )
        } else {
            chosen
        }
    };
    match reduce {
        ScatterReduce::None => "v".into(),
        ScatterReduce::Add => "acc + v".into(),
        ScatterReduce::Mul => "acc * v".into(),
        ScatterReduce::Max => pick(">"),
        ScatterReduce::Min => pick("<"),
    }
}

pub(super) fn source(k: &IndexKernel) -> String {
    let (data, index) = (k.data.dims(), k.index.dims());
    let n = data[k.axis];
    let (ds, is) = (k.data.strides(), k.index.strides());
    // Words move untyped (f16 excepted: 2 bytes on a GPU); reductions compute typed.
    let reduces = matches!(
        k.op,
        IndexKernelOp::Scatter { reduce, .. } if reduce != ScatterReduce::None
    );
    let d = if reduces || k.dtype == DType::F16 {
        k.dtype
    } else {
        DType::U32
    };
    let mut bindings = Writer::new();
    let mut body = Writer::new();
    body.indent(1);
    if let IndexKernelOp::TopK { largest } = k.op {
        wgsl::storage_binding(&mut bindings, 0, "in0", k.dtype);
        wgsl::storage_binding(&mut bindings, 1, "out", DType::I32);
        top_k(&mut body, k, largest);
        return fill(k, bindings, body);
    }
    wgsl::storage_binding(&mut bindings, 0, "in0", d);
    wgsl::storage_binding(&mut bindings, 1, "in1", DType::I32);
    let out_binding = match k.op {
        IndexKernelOp::TopK { .. } => unreachable!("handled above"),
        IndexKernelOp::Gather => {
            // The source of out[i]: i's coordinates in the indices' shape, in x's strides,
            // with the axis coordinate from the index.
            let mut st = ds.clone();
            st[k.axis] = 0;
            wgsl::strided_index(&mut body, "base", "i", index, &st);
            position(&mut body, "j", "in1[i]", n);
            body.line(&format!("out[i] = in0[base + j * {}u];", ds[k.axis]));
            2
        }
        IndexKernelOp::Scatter { reduce, lo, hi } => {
            wgsl::storage_binding(&mut bindings, 2, "in2", d);
            let inner: usize = data[k.axis + 1..].iter().product();
            body.line(&format!("var acc = {};", wgsl::load("in0", "i", d)));
            body.line(&format!("let at = (i / {inner}u) % {n}u;"));
            // Only outputs within the indices' extent in every other dimension are reached.
            let mut inside = Vec::new();
            let mut step = 1usize;
            for dim in (0..data.len()).rev() {
                if dim != k.axis && index[dim] < data[dim] {
                    inside.push(format!(
                        "((i / {step}u) % {}u) < {}u",
                        data[dim], index[dim]
                    ));
                }
                step *= data[dim];
            }
            let inside = if inside.is_empty() {
                "true".to_string()
            } else {
                inside.join(" && ")
            };
            let mut st = is.clone();
            st[k.axis] = 0;
            body.line(&format!("if ({inside}) {{"));
            body.indent(2);
            wgsl::strided_index(&mut body, "base", "i", data, &st);
            body.line(&format!("for (var s = {lo}u; s < {hi}u; s = s + 1u) {{"));
            body.indent(3);
            body.line(&format!("let u = base + s * {}u;", is[k.axis]));
            position(&mut body, "j", "in1[u]", n);
            body.line("if (j == at) {");
            body.indent(4);
            body.line(&format!("let v = {};", wgsl::load("in2", "u", d)));
            body.line(&format!("acc = {};", combine(reduce, d)));
            body.indent(3);
            body.line("}");
            body.indent(2);
            body.line("}");
            body.indent(1);
            body.line("}");
            body.line(&format!("{};", wgsl::store("out", "i", "acc", d)));
            3
        }
    };
    wgsl::storage_binding(&mut bindings, out_binding, "out", d);
    fill(k, bindings, body)
}

fn fill(k: &IndexKernel, bindings: Writer, body: Writer) -> String {
    wgsl::fill_template(
        include_str!("../../../shaders/gather.wgsl"),
        &[
            ("BINDINGS", bindings.finish()),
            ("WG", wgsl::WORKGROUP.to_string()),
            ("N", format!("{}u", crate::ops::KernelDef::invocations(k))),
            ("BODY", body.finish()),
        ],
    )
}

/// One invocation per element: its rank in its row (how many elements rank before it, as
/// [`super::reference::ranks_before`] decides); the `k` best write their position.
fn top_k(body: &mut Writer, k: &IndexKernel, largest: bool) {
    let dims = k.data.dims();
    let n = dims[k.axis];
    let kk = k.index.dims()[k.axis];
    let inner: usize = dims[k.axis + 1..].iter().product();
    body.line(&format!("let e = (i / {inner}u) % {n}u;"));
    body.line(&format!("let inn = i % {inner}u;"));
    body.line(&format!("let o = i / {}u;", n * inner));
    body.line(&format!("let base = o * {}u + inn;", n * inner));
    body.line("let v = in0[i];");
    let gt = if largest { ">" } else { "<" };
    let before = if k.dtype == DType::F32 {
        // NaN ranks above every number; two NaNs, or -0 and 0, are equal.
        let nan_wins = if largest {
            "(wn && !vn)"
        } else {
            "(!wn && vn)"
        };
        format!("{nan_wins} || (!wn && !vn && w {gt} v) || (((wn && vn) || w == v) && s < e)")
    } else {
        format!("w {gt} v || (w == v && s < e)")
    };
    body.line("var rank = 0u;");
    if k.dtype == DType::F32 {
        body.line(&format!("let vn = {};", is_nan("v")));
    }
    body.line(&format!("for (var s = 0u; s < {n}u; s = s + 1u) {{"));
    body.indent(2);
    body.line(&format!("let w = in0[base + s * {inner}u];"));
    if k.dtype == DType::F32 {
        body.line(&format!("let wn = {};", is_nan("w")));
    }
    body.line(&format!("if ({before}) {{"));
    body.indent(3);
    body.line("rank = rank + 1u;");
    body.indent(2);
    body.line("}");
    body.indent(1);
    body.line("}");
    body.line(&format!("if (rank < {kk}u) {{"));
    body.indent(2);
    body.line(&format!(
        "out[(o * {kk}u + rank) * {inner}u + inn] = i32(e);"
    ));
    body.indent(1);
    body.line("}");
}

//! The index kernels' WGSL (template `shaders/gather.wgsl`: one invocation per output
//! element).

use super::{IndexKernel, IndexKernelOp, ScatterReduce};
use crate::ops::wgsl::{self, Writer};
use crate::DType;

fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * dims[k + 1];
    }
    s
}

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
    let (ds, is) = (strides(data), strides(index));
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
    wgsl::storage_binding(&mut bindings, 0, "in0", d);
    wgsl::storage_binding(&mut bindings, 1, "in1", DType::I32);
    let mut body = Writer::new();
    body.indent(1);
    let out_binding = match k.op {
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
    wgsl::fill_template(
        include_str!("../../../shaders/gather.wgsl"),
        &[
            ("BINDINGS", bindings.finish()),
            ("WG", wgsl::WORKGROUP.to_string()),
            ("N", format!("{}u", k.out_shape().numel())),
            ("BODY", body.finish()),
        ],
    )
}

//! The attention passes' WGSL (template `shaders/attention.wgsl`): the loops of `cpu.rs`,
//! one invocation per output row, the row's accumulator in private memory.

use super::{AttentionKernel, AttentionPass};
use crate::ops::wgsl::{self, Writer};
use crate::ops::KernelDef;
use crate::DType;

pub(super) fn source(k: &AttentionKernel) -> String {
    let (tq, tk, d) = (k.tq, k.tk, k.d);
    let names: &[&str] = match k.pass {
        AttentionPass::Forward => &["q", "kk", "v"],
        AttentionPass::Lse => &["q", "kk"],
        AttentionPass::GradQ | AttentionPass::GradK => &["q", "kk", "v", "dout", "lse", "delta"],
        AttentionPass::GradV => &["q", "kk", "dout", "lse"],
    };
    let mut b = Writer::new();
    for (i, name) in names.iter().enumerate() {
        wgsl::storage_binding(&mut b, i, name, DType::F32);
    }
    wgsl::storage_binding(&mut b, names.len(), "out", DType::F32);
    let mut w = Writer::new();
    w.indent(1);
    let dm = d.max(1);
    let scale = wgsl::literal(DType::F32, k.scale.to_bits());
    // The dot product of rows a[ao..] and c[co..].
    let dot = |w: &mut Writer, name: &str, a: &str, ao: &str, c: &str, co: &str| {
        w.line(&format!("var {name} = 0.0;"));
        w.line(&format!("for (var e = 0u; e < {d}u; e = e + 1u) {{"));
        w.line(&format!(
            "    {name} = {name} + {a}[{ao} + e] * {c}[{co} + e];"
        ));
        w.line("}");
    };
    let visible = if k.causal {
        format!("min(i + 1u + {}u, {tk}u)", tk - tq)
    } else {
        format!("{tk}u")
    };
    let first = if k.causal {
        format!("select(0u, j + {tq}u - {tk}u, j + {tq}u > {tk}u)")
    } else {
        "0u".to_string()
    };
    match k.pass {
        AttentionPass::Forward | AttentionPass::Lse => {
            w.line(&format!("let bh = r / {tq}u;"));
            w.line(&format!("let i = r % {tq}u;"));
            w.line(&format!("let qo = r * {d}u;"));
            w.line(&format!("let seen = {visible};"));
            // The running maximum and sum of exp(score - maximum).
            w.line("var m = -3.0e38;");
            w.line("var l = 0.0;");
            w.line("for (var j = 0u; j < seen; j = j + 1u) {");
            w.indent(2);
            w.line(&format!("let ko = (bh * {tk}u + j) * {d}u;"));
            dot(&mut w, "s", "q", "qo", "kk", "ko");
            w.line(&format!("let x = {scale} * s;"));
            w.line("let m2 = max(m, x);");
            w.line("l = l * exp(m - m2) + exp(x - m2);");
            w.line("m = m2;");
            w.indent(1);
            w.line("}");
            if k.pass == AttentionPass::Lse {
                w.line("out[r] = m + log(l);");
            } else {
                w.line(&format!("var acc: array<f32, {dm}>;"));
                w.line("for (var j = 0u; j < seen; j = j + 1u) {");
                w.indent(2);
                w.line(&format!("let ko = (bh * {tk}u + j) * {d}u;"));
                dot(&mut w, "s", "q", "qo", "kk", "ko");
                w.line(&format!("let p = exp({scale} * s - m) / l;"));
                w.line(&format!("for (var e = 0u; e < {d}u; e = e + 1u) {{"));
                w.line("    acc[e] = acc[e] + p * v[ko + e];");
                w.line("}");
                w.indent(1);
                w.line("}");
                w.line(&format!("for (var e = 0u; e < {d}u; e = e + 1u) {{"));
                w.line("    out[qo + e] = acc[e];");
                w.line("}");
            }
        }
        AttentionPass::GradQ => {
            w.line(&format!("let bh = r / {tq}u;"));
            w.line(&format!("let i = r % {tq}u;"));
            w.line(&format!("let qo = r * {d}u;"));
            w.line(&format!("var acc: array<f32, {dm}>;"));
            w.line(&format!("for (var j = 0u; j < {visible}; j = j + 1u) {{"));
            w.indent(2);
            w.line(&format!("let ko = (bh * {tk}u + j) * {d}u;"));
            dot(&mut w, "s", "q", "qo", "kk", "ko");
            dot(&mut w, "dp", "dout", "qo", "v", "ko");
            w.line(&format!("let p = exp({scale} * s - lse[r]);"));
            w.line(&format!("let ds = {scale} * p * (dp - delta[r]);"));
            w.line(&format!("for (var e = 0u; e < {d}u; e = e + 1u) {{"));
            w.line("    acc[e] = acc[e] + ds * kk[ko + e];");
            w.line("}");
            w.indent(1);
            w.line("}");
            w.line(&format!("for (var e = 0u; e < {d}u; e = e + 1u) {{"));
            w.line("    out[qo + e] = acc[e];");
            w.line("}");
        }
        AttentionPass::GradK | AttentionPass::GradV => {
            let grad_k = k.pass == AttentionPass::GradK;
            w.line(&format!("let bh = r / {tk}u;"));
            w.line(&format!("let j = r % {tk}u;"));
            w.line(&format!("let ko = r * {d}u;"));
            w.line(&format!("var acc: array<f32, {dm}>;"));
            w.line(&format!("for (var i = {first}; i < {tq}u; i = i + 1u) {{"));
            w.indent(2);
            w.line(&format!("let qr = bh * {tq}u + i;"));
            w.line(&format!("let qo = qr * {d}u;"));
            dot(&mut w, "s", "q", "qo", "kk", "ko");
            w.line(&format!("let p = exp({scale} * s - lse[qr]);"));
            if grad_k {
                dot(&mut w, "dp", "dout", "qo", "v", "ko");
                w.line(&format!("let ds = {scale} * p * (dp - delta[qr]);"));
                w.line(&format!("for (var e = 0u; e < {d}u; e = e + 1u) {{"));
                w.line("    acc[e] = acc[e] + ds * q[qo + e];");
            } else {
                w.line(&format!("for (var e = 0u; e < {d}u; e = e + 1u) {{"));
                w.line("    acc[e] = acc[e] + p * dout[qo + e];");
            }
            w.line("}");
            w.indent(1);
            w.line("}");
            w.line(&format!("for (var e = 0u; e < {d}u; e = e + 1u) {{"));
            w.line("    out[ko + e] = acc[e];");
            w.line("}");
        }
    }
    wgsl::fill_template(
        include_str!("../../../shaders/attention.wgsl"),
        &[
            ("BINDINGS", b.finish()),
            ("WG", wgsl::WORKGROUP.to_string()),
            ("N", format!("{}u", k.invocations())),
            ("BODY", w.finish()),
        ],
    )
}

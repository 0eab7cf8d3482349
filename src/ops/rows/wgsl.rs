//! The row passes' WGSL (template `shaders/rows.wgsl`): `cpu.rs`'s formulas, one workgroup
//! per row.

use super::{RowKernel, RowPass, ROW_WG};
use crate::ops::wgsl::{self, Writer};
use crate::DType;

pub(super) fn source(k: &RowKernel) -> String {
    let d = k.d;
    let names: &[(&str, DType)] = match k.pass {
        RowPass::LayerNorm => &[
            ("x", DType::F32),
            ("gamma", DType::F32),
            ("beta", DType::F32),
        ],
        RowPass::LayerNormXhat => &[("x", DType::F32)],
        RowPass::LayerNormGrad => &[("x", DType::F32), ("gamma", DType::F32), ("dy", DType::F32)],
        RowPass::SoftmaxXent => &[("x", DType::F32), ("labels", DType::I32)],
        RowPass::SoftmaxXentGrad => &[
            ("x", DType::F32),
            ("labels", DType::I32),
            ("dloss", DType::F32),
        ],
    };
    let mut b = Writer::new();
    for (i, (name, dtype)) in names.iter().enumerate() {
        wgsl::storage_binding(&mut b, i, name, *dtype);
    }
    wgsl::storage_binding(&mut b, names.len(), "out", DType::F32);
    let mut w = Writer::new();
    w.indent(1);
    let each = format!("for (var e = t; e < {d}u; e = e + {ROW_WG}u) {{");
    // `name` = the workgroup's sum of `term` (an expression of `e`) over the row.
    let sum = |w: &mut Writer, name: &str, term: &str| {
        w.line(&format!("var {name}_p = 0.0;"));
        w.line(&each);
        w.line(&format!("    {name}_p = {name}_p + {term};"));
        w.line("}");
        w.line(&format!("let {name} = tree_sum(t, {name}_p);"));
    };
    let nf = format!("{d}.0");
    if k.pass.is_norm() {
        let eps = wgsl::literal(DType::F32, k.eps.to_bits());
        sum(&mut w, "s1", "x[base + e]");
        w.line(&format!("let mean = s1 / {nf};"));
        sum(&mut w, "s2", "(x[base + e] - mean) * (x[base + e] - mean)");
        w.line(&format!("let r = 1.0 / sqrt(s2 / {nf} + {eps});"));
    } else {
        w.line("var m_p = -3.4028235e38;");
        w.line(&each);
        w.line("    m_p = max(m_p, x[base + e]);");
        w.line("}");
        w.line("let m = tree_max(t, m_p);");
        // 0 where the maximum is infinite, as log_softmax.
        w.line("let shift = select(0.0, m, abs(m) <= 3.4028235e38);");
        sum(&mut w, "s", "exp(x[base + e] - shift)");
        w.line("let l = labels[row];");
        w.line(&format!("let ok = l >= 0 && u32(l) < {d}u;"));
        w.line(&format!(
            "let nan = {};",
            wgsl::literal(DType::F32, f32::NAN.to_bits())
        ));
    }
    match k.pass {
        RowPass::LayerNorm | RowPass::LayerNormXhat => {
            let tail = if k.pass == RowPass::LayerNorm {
                " * gamma[e] + beta[e]"
            } else {
                ""
            };
            w.line("if (valid) {");
            w.line(&format!("    {each}"));
            w.line(&format!(
                "        out[base + e] = (x[base + e] - mean) * r{tail};"
            ));
            w.line("    }");
            w.line("}");
        }
        RowPass::LayerNormGrad => {
            sum(&mut w, "sa", "dy[base + e] * gamma[e]");
            sum(
                &mut w,
                "sb",
                "dy[base + e] * gamma[e] * (x[base + e] - mean)",
            );
            w.line(&format!("let a = sa / {nf};"));
            w.line(&format!("let bb = sb * r / {nf};"));
            w.line("if (valid) {");
            w.line(&format!("    {each}"));
            w.line(
                "        out[base + e] = r * (dy[base + e] * gamma[e] - a - (x[base + e] - mean) * r * bb);",
            );
            w.line("    }");
            w.line("}");
        }
        RowPass::SoftmaxXent => {
            w.line("if (valid && t == 0u) {");
            w.line(&format!(
                "    let xl = x[base + min(u32(max(l, 0)), {}u)];",
                d.max(1) - 1
            ));
            w.line("    out[row] = select(nan, log(s) - (xl - shift), ok);");
            w.line("}");
        }
        RowPass::SoftmaxXentGrad => {
            w.line("let g = dloss[row];");
            w.line("let sc = g / s;");
            w.line("if (valid) {");
            w.line(&format!("    {each}"));
            w.line("        var v = exp(x[base + e] - shift) * sc;");
            w.line("        if (ok && e == u32(l)) {");
            w.line("            v = v - g;");
            w.line("        }");
            w.line("        out[base + e] = select(nan, v, ok);");
            w.line("    }");
            w.line("}");
        }
    }
    wgsl::fill_template(
        include_str!("../../../shaders/rows.wgsl"),
        &[
            ("BINDINGS", b.finish()),
            ("WG", ROW_WG.to_string()),
            ("ROWS", k.rows.max(1).to_string()),
            ("D", d.to_string()),
            ("BODY", w.finish()),
        ],
    )
}

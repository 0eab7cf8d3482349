//! The segment kernels' WGSL (template `shaders/segment.wgsl`).

use super::{SegmentKernel, SegmentPass};
use crate::ops::wgsl::{self, Writer};
use crate::ops::KernelDef;
use crate::DType;

pub(super) fn source(k: &SegmentKernel) -> String {
    let (m, post, n, d) = (k.positions, k.post, k.segments, k.dtype);
    let mut b = Writer::new();
    let mut w = Writer::new();
    w.indent(1);
    // The output element's (block, segment, column).
    let coords = |w: &mut Writer| {
        w.line(&format!("let c = i % {post}u;"));
        w.line(&format!("let r = (i / {post}u) % {n}u;"));
        w.line(&format!("let q = i / {}u;", n * post));
    };
    let row = |j: &str| format!("(q * {m}u + {j}) * {post}u + c");
    match k.pass {
        SegmentPass::Direct => {
            wgsl::storage_binding(&mut b, 0, "data", d);
            wgsl::storage_binding(&mut b, 1, "ids", DType::I32);
            wgsl::storage_binding(&mut b, 2, "out", d);
            coords(&mut w);
            w.line(&format!("var acc = {};", wgsl::literal(d, 0)));
            w.line(&format!("for (var j = 0u; j < {m}u; j = j + 1u) {{"));
            w.line("    if (ids[j] == i32(r)) {");
            w.line(&format!(
                "        acc = acc + {};",
                wgsl::load("data", &row("j"), d)
            ));
            w.line("    }");
            w.line("}");
            w.line(&format!("{};", wgsl::store("out", "i", "acc", d)));
        }
        SegmentPass::Keys => {
            wgsl::storage_binding(&mut b, 0, "ids", DType::I32);
            wgsl::storage_binding(&mut b, 1, "out", DType::U32);
            w.line(&format!("var id = {n}u;"));
            w.line(&format!("if (i < {m}u) {{"));
            w.line("    let v = ids[i];");
            w.line(&format!("    if (v >= 0 && u32(v) < {n}u) {{"));
            w.line("        id = u32(v);");
            w.line("    }");
            w.line("}");
            w.line("out[2u * i] = id;");
            w.line("out[2u * i + 1u] = i;");
        }
        SegmentPass::Sort { block, stride } => {
            wgsl::storage_binding(&mut b, 0, "keys", DType::U32);
            wgsl::storage_binding(&mut b, 1, "out", DType::U32);
            w.line(&format!("let l = i ^ {stride}u;"));
            w.line("let lo = min(i, l);");
            w.line("let hi = max(i, l);");
            w.line(&format!("let ascending = (lo & {block}u) == 0u;"));
            w.line("let a = vec2<u32>(keys[2u * lo], keys[2u * lo + 1u]);");
            w.line("let e = vec2<u32>(keys[2u * hi], keys[2u * hi + 1u]);");
            w.line("let a_first = a.x < e.x || (a.x == e.x && a.y <= e.y);");
            w.line("let small = select(e, a, a_first);");
            w.line("let large = select(a, e, a_first);");
            w.line("let v = select(large, small, (i == lo) == ascending);");
            w.line("out[2u * i] = v.x;");
            w.line("out[2u * i + 1u] = v.y;");
        }
        SegmentPass::Sum { lo, hi } => {
            let mut at = 0;
            if lo > 0 {
                wgsl::storage_binding(&mut b, 0, "prev", d);
                at = 1;
            }
            wgsl::storage_binding(&mut b, at, "keys", DType::U32);
            wgsl::storage_binding(&mut b, at + 1, "data", d);
            wgsl::storage_binding(&mut b, at + 2, "out", d);
            coords(&mut w);
            let init = if lo > 0 {
                wgsl::load("prev", "i", d)
            } else {
                wgsl::literal(d, 0)
            };
            w.line(&format!("var acc = {init};"));
            // The first sorted position of the window whose segment is at least r.
            w.line(&format!("var a = {lo}u;"));
            w.line(&format!("var e = {hi}u;"));
            w.line("for (var it = 0u; it < 33u && a < e; it = it + 1u) {");
            w.line("    let mid = (a + e) / 2u;");
            w.line("    if (keys[2u * mid] < r) {");
            w.line("        a = mid + 1u;");
            w.line("    } else {");
            w.line("        e = mid;");
            w.line("    }");
            w.line("}");
            w.line(&format!("for (var s = a; s < {hi}u; s = s + 1u) {{"));
            w.line("    if (keys[2u * s] != r) {");
            w.line("        break;");
            w.line("    }");
            w.line("    let j = keys[2u * s + 1u];");
            w.line(&format!(
                "    acc = acc + {};",
                wgsl::load("data", &row("j"), d)
            ));
            w.line("}");
            w.line(&format!("{};", wgsl::store("out", "i", "acc", d)));
        }
    }
    wgsl::fill_template(
        include_str!("../../../shaders/segment.wgsl"),
        &[
            ("BINDINGS", b.finish()),
            ("WG", wgsl::WORKGROUP.to_string()),
            ("N", format!("{}u", k.invocations())),
            ("BODY", w.finish()),
        ],
    )
}

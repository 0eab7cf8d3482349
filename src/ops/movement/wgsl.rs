//! The movement kernels' WGSL writers: concatenation, padding, gathers.

use super::*;

impl ConcatKernel {
    pub fn wgsl(&self) -> String {
        let inner = self.inner();
        let total = self.out_shape.dims()[self.axis];
        let mut body = Writer::new();
        body.indent(1);
        body.line(&format!("let inn = i % {inner}u;"));
        body.line(&format!("let a = (i / {inner}u) % {total}u;"));
        body.line(&format!("let outer = i / {}u;", inner * total));
        let mut start = 0;
        let last = self.in_shapes.len() - 1;
        for (k, shape) in self.in_shapes.iter().enumerate() {
            let d = shape.dims()[self.axis];
            let cond = if k == 0 {
                format!("if (a < {}u) {{", start + d)
            } else if k < last {
                format!("}} else if (a < {}u) {{", start + d)
            } else {
                "} else {".to_string()
            };
            if last == 0 {
                body.line("{");
            } else {
                body.line(&cond);
            }
            body.line(&format!(
                "    out[i] = in{k}[(outer * {d}u + a - {start}u) * {inner}u + inn];"
            ));
            start += d;
        }
        body.line("}");
        let ins = vec![self.dtype; self.in_shapes.len()];
        copy_kernel(&ins, self.dtype, self.out_shape.numel(), body)
    }
}

impl PadKernel {
    pub fn wgsl(&self) -> String {
        let (od, id, st) = (
            self.out_shape.dims(),
            self.in_shape.dims(),
            self.in_shape.strides(),
        );
        let mut body = Writer::new();
        body.indent(1);
        body.line("var ok = true;");
        body.line("var src = 0u;");
        let mut inner = 1usize;
        for k in (0..od.len()).rev() {
            body.line(&format!(
                "let c{k} = i32((i / {inner}u) % {}u) - {};",
                od[k], self.before[k]
            ));
            body.line(&format!("ok = ok && c{k} >= 0 && c{k} < {};", id[k]));
            body.line(&format!("src = src + u32(max(c{k}, 0)) * {}u;", st[k]));
            inner *= od[k];
        }
        let value = if self.dtype == DType::F16 {
            // naga types `bitcast<vec2<f16>>` wrongly; unpack gives the same exact value.
            format!("f16(unpack2x16float({}u).x)", self.value)
        } else {
            format!("{}u", self.value)
        };
        body.line(&format!(
            "out[i] = select({value}, in0[select(0u, src, ok)], ok);"
        ));
        copy_kernel(&[self.dtype], self.dtype, self.out_shape.numel(), body)
    }
}

impl GatherKernel {
    pub fn wgsl(&self) -> String {
        let (n, inner) = self.split();
        let mut body = Writer::new();
        body.indent(1);
        body.line(&format!("let inn = i % {inner}u;"));
        body.line(&format!("let j = (i / {inner}u) % {}u;", self.indices));
        body.line(&format!("let outer = i / {}u;", inner * self.indices));
        body.line("let k0 = bitcast<i32>(in1[j]);");
        body.line(&format!(
            "let k = clamp(select(k0, k0 + {n}, k0 < 0), 0, {});",
            n - 1
        ));
        body.line(&format!(
            "out[i] = in0[(outer * {n}u + u32(k)) * {inner}u + inn];"
        ));
        copy_kernel(
            &[self.dtype, DType::I32],
            self.dtype,
            self.out_shape.numel(),
            body,
        )
    }
}

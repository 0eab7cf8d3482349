//! The reduction kernels' WGSL: one template per strategy (loop, rows, vec4 rows, tree,
//! arg), with fused prologues and epilogues.

use super::*;
use crate::ops::wgsl;

impl ReduceKernel {
    /// WGSL (templates `shaders/reduce.wgsl`, `shaders/arg_reduce.wgsl`): one invocation per
    /// output element looping over the reduced elements in row-major order.
    pub fn wgsl(&self) -> String {
        if let Some((strategy, r)) = self.fast_path() {
            return self.wgsl_rows(strategy, r);
        }
        let (kd, ks, rd, rs) = self.split();
        let (chunk, chunks) = self.chunking();
        let out_d = self.op.out_dtype(self.dtype);
        let (func, epi_args) = self.epilogue_parts();
        let func = format!("{}\n{func}", self.prologue_functions(false));
        let mut base = Writer::new();
        base.indent(1);
        wgsl::strided_index(&mut base, "base", "o", &kd, &ks);
        let mut values = vec![
            ("BINDINGS", self.loop_bindings(out_d)),
            ("FUNC", func),
            ("WG", wgsl::WORKGROUP.to_string()),
            ("N", format!("{}u", self.out_shape.numel())),
            ("CHUNKS", chunks.to_string()),
            ("CHUNK", chunk.to_string()),
            ("R", self.reduced_count().to_string()),
            ("BASE", base.finish()),
        ];
        let mut fold = Writer::new();
        if self.op.is_arg() {
            self.arg_fold(&mut fold, &rd, &rs);
            values.push(("FOLD", fold.finish()));
            return wgsl::fill_template(include_str!("../../../shaders/arg_reduce.wgsl"), &values);
        }
        self.value_fold(&mut fold, &rd, &rs);
        let finish = self.finish_wgsl();
        values.extend([
            ("FOLD", fold.finish()),
            (
                "STORE",
                wgsl::store("out", "oc", &self.apply_epilogue(&finish, &epi_args), out_d),
            ),
        ]);
        wgsl::fill_template(include_str!("../../../shaders/reduce.wgsl"), &values)
    }

    /// The loop kernel's bindings: the sources, the chunk winners of an arg pass over
    /// partials, the epilogue's extras, the output.
    fn loop_bindings(&self, out_d: DType) -> String {
        let mut bindings = Writer::new();
        self.bind_sources(&mut bindings, false);
        let mut next = self.sources();
        if let Pass::ArgOfPartials { .. } = self.pass {
            wgsl::storage_binding(&mut bindings, next, "parts", DType::I32);
            next += 1;
        }
        for (j, (_, xd)) in self.extra().iter().enumerate() {
            let b = next + j;
            wgsl::storage_binding(&mut bindings, b, &format!("in{b}"), *xd);
        }
        wgsl::storage_binding(&mut bindings, next + self.extra().len(), "out", out_d);
        bindings.finish()
    }

    /// argmax/argmin: the index of the first extreme (NaN wins) among the chunk's elements,
    /// or among the chunk winners of a partial pass.
    fn arg_fold(&self, f: &mut Writer, rd: &[usize], rs: &[usize]) {
        let cmp = if self.op == ReduceOp::ArgMax {
            ">"
        } else {
            "<"
        };
        let better = if self.dtype.is_float() {
            format!("!wgf_isnan(best) && (wgf_isnan(v) || v {cmp} best)")
        } else {
            format!("v {cmp} best")
        };
        if let Pass::ArgOfPartials { chunks: k } = self.pass {
            f.indent(1);
            f.line(&format!("var at = u32(parts[o * {k}u]);"));
            offset(f, "off0", "at", 1, rd, rs);
            f.line(&format!("var best = {};", self.src_load("base + off0")));
            f.line(&format!("for (var k = 1u; k < {k}u; k = k + 1u) {{"));
            f.line(&format!("    let r = u32(parts[o * {k}u + k]);"));
        } else {
            offset(f, "off0", "lo", 1, rd, rs);
            f.line(&format!("var best = {};", self.src_load("base + off0")));
            f.line("var at = lo;");
            f.line("for (var r = lo + 1u; r < hi; r = r + 1u) {");
        }
        offset(f, "off", "r", 2, rd, rs);
        f.line(&format!("let v = {};", self.src_load("base + off")));
        f.line(&format!("if ({better}) {{"));
        f.line("    best = v;");
        f.line("    at = r;");
        f.line("}");
        f.indent(1);
        f.line("}");
    }

    /// The other ops: sums in blocks of [`SUM_BLOCK`], the rest element by element.
    fn value_fold(&self, f: &mut Writer, rd: &[usize], rs: &[usize]) {
        let d = self.dtype;
        let zero = zero_of(d);
        let combine = match (self.op, d.is_float()) {
            (ReduceOp::Sum | ReduceOp::Mean, _) => "acc + v",
            (ReduceOp::Prod, _) => "acc * v",
            // NaN is true; the bit test keeps fast-math drivers from folding `NaN != 0` to false.
            (ReduceOp::All, true) => "acc && (v != 0.0 || wgf_isnan(v))",
            (ReduceOp::Any, true) => "acc || (v != 0.0 || wgf_isnan(v))",
            (ReduceOp::All, false) => &format!("acc && (v != {zero})"),
            (ReduceOp::Any, false) => &format!("acc || (v != {zero})"),
            (ReduceOp::Max, true) => "wgf_max(acc, v)",
            (ReduceOp::Min, true) => "wgf_min(acc, v)",
            (ReduceOp::Max, false) => "max(acc, v)",
            (ReduceOp::Min, false) => "min(acc, v)",
            // Written by `arg_fold`.
            (ReduceOp::ArgMax | ReduceOp::ArgMin, _) => "",
        };
        f.indent(1);
        if self.is_sum() {
            let ident = sum_identity_wgsl(d);
            f.line(&format!("var acc = {ident};"));
            f.line(&format!(
                "for (var b = lo; b < hi; b = b + {SUM_BLOCK}u) {{"
            ));
            f.line(&format!("    var s = {ident};"));
            f.line(&format!("    let e = min(b + {SUM_BLOCK}u, hi);"));
            f.line("    for (var r = b; r < e; r = r + 1u) {");
            offset(f, "off", "r", 3, rd, rs);
            f.line(&format!("s = s + {};", self.src_load("base + off")));
            f.indent(1);
            f.line("    }");
            f.line("    acc = acc + s;");
            f.line("}");
            return;
        }
        let (init, start) = match self.op {
            ReduceOp::Prod => (wgsl::one(d), "lo"),
            ReduceOp::All => ("true".to_string(), "lo"),
            ReduceOp::Any => ("false".to_string(), "lo"),
            // No identity: start from the first element.
            ReduceOp::Max
            | ReduceOp::Min
            | ReduceOp::Sum
            | ReduceOp::Mean
            | ReduceOp::ArgMax
            | ReduceOp::ArgMin => {
                offset(f, "off0", "lo", 1, rd, rs);
                (self.src_load("base + off0"), "lo + 1u")
            }
        };
        f.line(&format!("var acc = {init};"));
        f.line(&format!("for (var r = {start}; r < hi; r = r + 1u) {{"));
        offset(f, "off", "r", 2, rd, rs);
        f.line(&format!("let v = {};", self.src_load("base + off")));
        f.line(&format!("acc = {combine};"));
        f.indent(1);
        f.line("}");
    }

    /// `acc` turned into the result: divided by the count for `Mean`.
    fn finish_wgsl(&self) -> String {
        let d = self.dtype;
        let n = self.mean_count();
        match (self.op, d.compute()) {
            (ReduceOp::Mean, DType::F32) => {
                format!("acc / {}", wgsl::literal(DType::F32, (n as f32).to_bits()))
            }
            (ReduceOp::Mean, DType::I32) => {
                format!("wgf_div_i32(acc, {})", wgsl::literal(d, n as u32))
            }
            (ReduceOp::Mean, _) => format!("wgf_div_u32(acc, {})", wgsl::literal(d, n as u32)),
            (
                ReduceOp::Sum
                | ReduceOp::Max
                | ReduceOp::Min
                | ReduceOp::Prod
                | ReduceOp::All
                | ReduceOp::Any
                | ReduceOp::ArgMax
                | ReduceOp::ArgMin,
                _,
            ) => "acc".to_string(),
        }
    }

    /// WGSL of the row strategies.
    fn wgsl_rows(&self, strategy: ReduceStrategy, r: usize) -> String {
        let d = self.dtype;
        let t = d.wgsl();
        let n = self.out_shape.numel();
        let (chunk, chunks) = self.chunking();
        let comb = |a: &str, b: &str| -> String {
            match (self.combine_op(), d.is_float()) {
                (BinaryOp::Add, _) => format!("({a} + {b})"),
                (BinaryOp::Mul, _) => format!("({a} * {b})"),
                (BinaryOp::Maximum, true) => format!("wgf_max({a}, {b})"),
                (BinaryOp::Minimum, true) => format!("wgf_min({a}, {b})"),
                (BinaryOp::Maximum, false) => format!("max({a}, {b})"),
                _ => format!("min({a}, {b})"),
            }
        };
        let mut w = Writer::new();
        let vec = strategy == ReduceStrategy::RowsVec4;
        w.line(&format!(
            "// wgflow reduction ({strategy:?}): {} of rows of {r}, in {chunks} chunk(s) of {chunk}.",
            self.op.name()
        ));
        self.bind_sources(&mut w, vec);
        let n_src = self.sources();
        for (j, (_, xd)) in self.extra().iter().enumerate() {
            let b = n_src + j;
            wgsl::storage_binding(&mut w, b, &format!("in{b}"), *xd);
        }
        wgsl::storage_binding(&mut w, n_src + self.extra().len(), "out", d);
        let (func, epi_args) = self.epilogue_parts();
        let finish = self.apply_epilogue(&self.finish_wgsl(), &epi_args);
        let pro = self.prologue_functions(vec);
        for line in wgsl::PRELUDE.lines().chain(func.lines()).chain(pro.lines()) {
            w.line(line);
        }
        // Output `oc` folds elements [lo, hi) of row `o` (chunk `c`; the last one takes the
        // remainder); `start` is the chunk's first element in the input.
        let range = |w: &mut Writer| {
            w.line(&format!("let o = oc / {chunks}u;"));
            w.line(&format!("let c = oc % {chunks}u;"));
            w.line(&format!("let lo = c * {chunk}u;"));
            w.line(&format!(
                "let hi = select(lo + {chunk}u, {r}u, c + 1u == {chunks}u);"
            ));
            w.line(&format!("let start = o * {r}u + lo;"));
        };
        if vec {
            let lanes = |a: &str, b: &str| -> String {
                match self.combine_op() {
                    BinaryOp::Add | BinaryOp::Mul => comb(a, b),
                    _ => {
                        let l: Vec<String> = ["x", "y", "z", "w"]
                            .iter()
                            .map(|c| comb(&format!("{a}.{c}"), &format!("{b}.{c}")))
                            .collect();
                        format!("vec4<{t}>({})", l.join(", "))
                    }
                }
            };
            w.line(&format!("@compute @workgroup_size({})", wgsl::WORKGROUP));
            w.line("fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {");
            w.indent(1);
            w.line(&format!(
                "let oc = gid.x + gid.y * nwg.x * {}u;",
                wgsl::WORKGROUP
            ));
            w.line(&format!("if (oc >= {n}u) {{"));
            w.line("    return;");
            w.line("}");
            range(&mut w);
            w.line("let base = start / 4u;");
            w.line("let n4 = (hi - lo) / 4u;");
            if self.is_sum() {
                // Blocks of SUM_BLOCK vec4s are summed, then added to the lanes' totals.
                let ident = format!("vec4<{t}>({})", sum_identity_wgsl(d));
                w.line(&format!("var v4 = {ident};"));
                w.line(&format!(
                    "for (var b = 0u; b < n4; b = b + {SUM_BLOCK}u) {{"
                ));
                w.line(&format!("    var s4 = {ident};"));
                w.line(&format!("    let e = min(b + {SUM_BLOCK}u, n4);"));
                w.line("    for (var j = b; j < e; j = j + 1u) {");
                w.line(&format!(
                    "        s4 = s4 + {};",
                    self.src_load4("base + j")
                ));
                w.line("    }");
                w.line("    v4 = v4 + s4;");
                w.line("}");
            } else {
                w.line(&format!("var v4 = {};", self.src_load4("base")));
                w.line("for (var j = 1u; j < n4; j = j + 1u) {");
                w.line(&format!("    let v = {};", self.src_load4("base + j")));
                w.line(&format!("    v4 = {};", lanes("v4", "v")));
                w.line("}");
            }
            w.line(&format!(
                "let acc = {};",
                comb(&comb("v4.x", "v4.y"), &comb("v4.z", "v4.w"))
            ));
            w.line(&format!("{};", wgsl::store("out", "oc", &finish, d)));
            w.indent(0);
            w.line("}");
            return w.finish();
        }
        w.line(&format!("var<workgroup> part: array<{t}, {TREE_WG}>;"));
        w.line("");
        w.line(&format!("@compute @workgroup_size({TREE_WG})"));
        w.line("fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {");
        w.indent(1);
        // No early return: every invocation must reach the barriers.
        w.line(&format!("let oc = min(wid.x + wid.y * nwg.x, {}u);", n - 1));
        w.line("let valid = wid.x + wid.y * nwg.x < oc + 1u;");
        w.line("let t = lid.x;");
        range(&mut w);
        w.line(&format!("var p = {};", self.src_load("start + t")));
        w.line(&format!(
            "for (var i = lo + t + {TREE_WG}u; i < hi; i = i + {TREE_WG}u) {{"
        ));
        w.line(&format!(
            "    p = {};",
            comb("p", &self.src_load(&format!("o * {r}u + i")))
        ));
        w.line("}");
        w.line("part[t] = p;");
        w.line("workgroupBarrier();");
        let mut s = TREE_WG / 2;
        while s > 0 {
            w.line(&format!("if (t < {s}u) {{"));
            w.line(&format!(
                "    part[t] = {};",
                comb("part[t]", &format!("part[t + {s}u]"))
            ));
            w.line("}");
            w.line("workgroupBarrier();");
            s /= 2;
        }
        w.line("if (t == 0u && valid) {");
        w.line("    let acc = part[0];");
        w.line(&format!("    {};", wgsl::store("out", "oc", &finish, d)));
        w.line("}");
        w.indent(0);
        w.line("}");
        w.finish()
    }

    /// Bind the source inputs from binding 0: `in0` (as vec4s when `vec`), or the prologue's
    /// inputs, full-shape ones as vec4s when `vec`.
    fn bind_sources(&self, w: &mut Writer, vec: bool) {
        match &self.prologue {
            None => wgsl::storage_binding_vec(w, 0, "in0", self.dtype, vec),
            Some(p) => {
                for (j, (s, d)) in p.inputs.iter().enumerate() {
                    let v = vec && s == &self.in_shape;
                    wgsl::storage_binding_vec(w, j, &format!("in{j}"), *d, v);
                }
            }
        }
    }

    /// The reduced value at linear input index `idx`.
    fn src_load(&self, idx: &str) -> String {
        match self.prologue {
            None => wgsl::load("in0", idx, self.dtype),
            Some(_) => format!("wgf_load({idx})"),
        }
    }

    /// The four reduced values from vec4 index `idx4` (row strategies).
    fn src_load4(&self, idx4: &str) -> String {
        match self.prologue {
            None => wgsl::load_vec4("in0", idx4, self.dtype),
            Some(_) => format!("wgf_load4({idx4})"),
        }
    }

    /// `wgf_pro` (the prologue expression) and `wgf_load`, or `wgf_load4` when `vec`: each
    /// input is read at its broadcast index, full-shape inputs as vec4s in `wgf_load4`.
    fn prologue_functions(&self, vec: bool) -> String {
        let Some(p) = &self.prologue else {
            return String::new();
        };
        let t = self.dtype.wgsl();
        let dtypes: Vec<DType> = p.inputs.iter().map(|(_, d)| *d).collect();
        let mut w = Writer::new();
        w.line(&crate::ops::elementwise::expr_fn_wgsl(
            "wgf_pro", &p.expr, &dtypes, self.dtype,
        ));
        let dims = self.in_shape.dims();
        // Loads of input j at linear index `at` (a broadcast index unless full-shape).
        let scalar = |w: &mut Writer, j: usize, s: &Shape, d: DType, at: &str, name: &str| {
            if s == &self.in_shape {
                w.line(&format!(
                    "let {name} = {};",
                    wgsl::load(&format!("in{j}"), at, d)
                ));
            } else if s.numel() == 1 {
                w.line(&format!(
                    "let {name} = {};",
                    wgsl::load(&format!("in{j}"), "0u", d)
                ));
            } else {
                let strides = s.broadcast_strides(&self.in_shape);
                wgsl::strided_index(w, &format!("{name}_at"), at, dims, &strides);
                let load = wgsl::load(&format!("in{j}"), &format!("{name}_at"), d);
                w.line(&format!("let {name} = {load};"));
            }
        };
        if !vec {
            w.line(&format!("fn wgf_load(i: u32) -> {t} {{"));
            w.indent(1);
            for (j, (s, d)) in p.inputs.iter().enumerate() {
                scalar(&mut w, j, s, *d, "i", &format!("x{j}"));
            }
            let args: Vec<String> = (0..p.inputs.len()).map(|j| format!("x{j}")).collect();
            w.line(&format!("return wgf_pro({});", args.join(", ")));
            w.indent(0);
            w.line("}");
            return w.finish();
        }
        w.line(&format!("fn wgf_load4(i4: u32) -> vec4<{t}> {{"));
        w.indent(1);
        let lanes = ["x", "y", "z", "w"];
        for (j, (s, d)) in p.inputs.iter().enumerate() {
            if s == &self.in_shape {
                let wide = wgsl::load_vec4(&format!("in{j}"), "i4", *d);
                w.line(&format!("let v{j} = {wide};"));
            } else {
                for (l, _) in lanes.iter().enumerate() {
                    scalar(
                        &mut w,
                        j,
                        s,
                        *d,
                        &format!("(i4 * 4u + {l}u)"),
                        &format!("x{j}_{l}"),
                    );
                }
            }
        }
        let per_lane: Vec<String> = lanes
            .iter()
            .enumerate()
            .map(|(l, lane)| {
                let args: Vec<String> = p
                    .inputs
                    .iter()
                    .enumerate()
                    .map(|(j, (s, _))| {
                        if s == &self.in_shape {
                            format!("v{j}.{lane}")
                        } else {
                            format!("x{j}_{l}")
                        }
                    })
                    .collect();
                format!("wgf_pro({})", args.join(", "))
            })
            .collect();
        w.line(&format!("return vec4<{t}>({});", per_lane.join(", ")));
        w.indent(0);
        w.line("}");
        w.finish()
    }

    /// The epilogue function (empty without one) and the loads of its extra inputs for
    /// output `o`: full-shape inputs at `o`, one-element inputs at 0.
    fn epilogue_parts(&self) -> (String, Vec<String>) {
        let Some(e) = &self.epilogue else {
            return (String::new(), Vec::new());
        };
        let loads = e
            .extra
            .iter()
            .enumerate()
            .map(|(j, (s, d))| {
                let idx = if s.numel() == 1 { "0u" } else { "o" };
                wgsl::load(&format!("in{}", self.sources() + j), idx, *d)
            })
            .collect();
        (e.wgsl_function(self.dtype), loads)
    }

    fn apply_epilogue(&self, value: &str, args: &[String]) -> String {
        if self.epilogue.is_none() {
            return value.to_string();
        }
        // The epilogue sees the stored value: an f16 result is rounded first, as on the CPU.
        let value = if self.dtype == DType::F16 {
            format!("wgf_round_f16({value})")
        } else {
            value.to_string()
        };
        let mut all = vec![format!("({value})")];
        all.extend(args.iter().cloned());
        format!("wgf_epi({})", all.join(", "))
    }
}

/// [`sum_identity`] as a WGSL expression of the compute type (`-0.0` spelled by its bits,
/// so no compiler can fold it to `+0.0`).
fn sum_identity_wgsl(d: DType) -> String {
    match d.compute() {
        DType::F32 => "bitcast<f32>(0x80000000u)".to_string(),
        other => wgsl::literal(other, 0),
    }
}

/// The zero literal compared against in `all`/`any` (bools load as `bool`).
fn zero_of(d: DType) -> String {
    match d {
        DType::Bool => "false".into(),
        _ => wgsl::literal(d, 0),
    }
}

/// `let {name} = <offset of reduced element {linear}>;` at indentation `level`.
fn offset(w: &mut Writer, name: &str, linear: &str, level: usize, rd: &[usize], rs: &[usize]) {
    w.indent(level);
    wgsl::strided_index(w, name, linear, rd, rs);
}

//! The matmul kernel's WGSL strategies: register-blocked (vec4 loads) and workgroup-tiled.

use super::*;
use crate::ops::wgsl::{self, Writer};

impl MatMulKernel {
    /// WGSL: one output per invocation (template `shaders/matmul.wgsl`), or a register-blocked
    /// kernel when [`MatMulKernel::block`] is set. Both accumulate over K in the CPU kernel's
    /// order, one product at a time.
    pub fn wgsl(&self) -> String {
        if self.tiled {
            return self.wgsl_tiled();
        }
        if let Some((tm, tn)) = self.block {
            return self.wgsl_blocked(tm, tn);
        }
        let (m, _, n) = self.mkn();
        let (bd, sa, sb) = self.batch();
        let (func, extra) = self.epilogue_wgsl();
        let mut bindings = Writer::new();
        wgsl::storage_binding(&mut bindings, 0, "in0", self.dtype);
        wgsl::storage_binding(&mut bindings, 1, "in1", self.dtype);
        for (j, (_, d)) in extra.iter().enumerate() {
            wgsl::storage_binding(&mut bindings, 2 + j, &format!("in{}", 2 + j), *d);
        }
        wgsl::storage_binding(&mut bindings, 2 + extra.len(), "out", self.dtype);
        let acc = if self.dtype == DType::F16 {
            "wgf_round_f16(acc)"
        } else {
            "acc"
        };
        let store = if self.epilogue.is_some() {
            let args: Vec<String> = std::iter::once(acc.to_string())
                .chain(extra.iter().enumerate().map(|(j, (kind, d))| {
                    let idx = match kind {
                        EpilogueInput::Full => "o",
                        // A row spans the output's last dim: M when B is a vector.
                        EpilogueInput::Row if self.b.rank() < 2 => "m",
                        EpilogueInput::Row => "n",
                        EpilogueInput::Scalar => "0u",
                    };
                    wgsl::load(&format!("in{}", 2 + j), idx, *d)
                }))
                .collect();
            let value = format!("wgf_epi({})", args.join(", "));
            format!("    {};", wgsl::store("out", "o", &value, self.dtype))
        } else {
            format!("    {};", wgsl::store("out", "o", "acc", self.dtype))
        };
        let ((ra, ka), (kb, nb)) = self.matrix_strides();
        let term = |i: &str, s: usize| match s {
            1 => i.to_string(),
            _ => format!("{i} * {s}u"),
        };
        let a_at = format!("a_base + {} + {}", term("m", ra), term("k", ka));
        let b_at = format!("b_base + {} + {}", term("k", kb), term("n", nb));
        let mut batch = Writer::new();
        batch.indent(1);
        wgsl::strided_index(&mut batch, "a_base", "batch", &bd, &sa);
        wgsl::strided_index(&mut batch, "b_base", "batch", &bd, &sb);
        self.k_len(&mut batch);
        wgsl::fill_template(
            include_str!("../../../shaders/matmul.wgsl"),
            &[
                ("BINDINGS", bindings.finish()),
                ("WG", wgsl::WORKGROUP.to_string()),
                ("TOTAL", format!("{}u", self.out_shape().numel())),
                ("M", m.to_string()),
                ("N", n.to_string()),
                ("BATCH", batch.finish()),
                ("ZERO", wgsl::literal(self.dtype, 0)),
                ("A", wgsl::load("in0", &a_at, self.dtype)),
                ("B", wgsl::load("in1", &b_at, self.dtype)),
                ("FUNC", func),
                ("STORE", store),
            ],
        )
    }

    /// The workgroup-tiled kernel for real GPUs (see [`MatMulKernel::tiled`]). Every
    /// invocation helps stage each K slice, so shapes must divide by the tile; the product
    /// still accumulates over K in order, one product at a time, as on the CPU.
    pub(super) fn wgsl_tiled(&self) -> String {
        let (m, k, n) = self.mkn();
        let (bd, sa, sb) = self.batch();
        let t = self.dtype.wgsl();
        let (tiles_m, tiles_n) = (m / TILE, n / TILE);
        let mut w = Writer::new();
        w.line(
            "// wgflow workgroup-tiled matmul: 16x16 invocations per 64x64 output tile, 4x4 each.",
        );
        self.blocked_header(&mut w);
        w.line(&format!(
            "var<workgroup> a_tile: array<{t}, {}>;",
            TILE * TILE_K
        ));
        w.line(&format!(
            "var<workgroup> b_tile: array<vec4<{t}>, {}>;",
            TILE_K * TILE / 4
        ));
        w.line("");
        w.line("@compute @workgroup_size(256)");
        w.line("fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32, @builtin(num_workgroups) nwg: vec3<u32>) {");
        w.indent(1);
        // No early return: every invocation reaches every barrier (the grid has no spare
        // workgroups, since the tile count is the dispatch size).
        w.line("let tile = wid.x + wid.y * nwg.x;");
        w.line(&format!("let tn = tile % {tiles_n}u;"));
        w.line(&format!("let tm = (tile / {tiles_n}u) % {tiles_m}u;"));
        w.line(&format!("let batch = tile / {}u;", tiles_m * tiles_n));
        wgsl::strided_index(&mut w, "a_base", "batch", &bd, &sa);
        wgsl::strided_index(&mut w, "b_base", "batch", &bd, &sb);
        self.k_len(&mut w);
        w.line(&format!("let o_base = batch * {}u;", m * n));
        w.line("let tx = lid % 16u;");
        w.line("let ty = lid / 16u;");
        w.line(&format!("let m0 = tm * {TILE}u + ty * 4u;"));
        w.line(&format!("let n0 = tn * {TILE}u + tx * 4u;"));
        // Staging: A's 64 rows x 16 k as 256 vec4s along K, B's 16 k x 64 columns as 256
        // vec4s along N; one of each per invocation.
        w.line("let ar = lid / 4u;");
        w.line("let ac = (lid % 4u) * 4u;");
        w.line("let br = lid / 16u;");
        w.line("let bc = lid % 16u;");
        let zero = wgsl::literal(self.dtype, 0);
        for r in 0..4 {
            w.line(&format!("var acc_{r}_0 = vec4<{t}>({zero});"));
        }
        w.line(&format!(
            "for (var k0 = 0u; k0 < k_len; k0 = k0 + {TILE_K}u) {{"
        ));
        w.indent(2);
        let [ta, tb] = self.transposed;
        if ta {
            // A stored `[K, M]`: 16 k x 16 vec4s along M, one per invocation.
            w.line(&format!(
                "let av = {};",
                wgsl::load_vec4(
                    "in0",
                    &format!("(a_base + (k0 + lid / 16u) * {m}u + tm * {TILE}u) / 4u + lid % 16u"),
                    self.dtype
                )
            ));
            for (l, lane) in ["x", "y", "z", "w"].iter().enumerate() {
                w.line(&format!(
                    "a_tile[((lid % 16u) * 4u + {l}u) * {TILE_K}u + lid / 16u] = av.{lane};"
                ));
            }
        } else {
            w.line(&format!(
                "let av = {};",
                wgsl::load_vec4(
                    "in0",
                    &format!("(a_base + (tm * {TILE}u + ar) * {k}u + k0 + ac) / 4u"),
                    self.dtype
                )
            ));
            for (l, lane) in ["x", "y", "z", "w"].iter().enumerate() {
                w.line(&format!("a_tile[ar * {TILE_K}u + ac + {l}u] = av.{lane};"));
            }
        }
        if tb {
            // B stored `[N, K]`: 64 columns x 4 vec4s along K, one per invocation, each lane
            // going to its k row of the tile.
            w.line(&format!(
                "let bv = {};",
                wgsl::load_vec4(
                    "in1",
                    &format!("(b_base + (tn * {TILE}u + ar) * {k}u + k0 + ac) / 4u"),
                    self.dtype
                )
            ));
            for (l, lane) in ["x", "y", "z", "w"].iter().enumerate() {
                w.line(&format!(
                    "b_tile[(ac + {l}u) * 16u + ar / 4u][ar % 4u] = bv.{lane};"
                ));
            }
        } else {
            w.line(&format!(
                "b_tile[br * 16u + bc] = {};",
                wgsl::load_vec4(
                    "in1",
                    &format!("(b_base + (k0 + br) * {n}u + tn * {TILE}u) / 4u + bc"),
                    self.dtype
                )
            ));
        }
        w.line("workgroupBarrier();");
        w.line(&format!(
            "for (var kk = 0u; kk < {TILE_K}u; kk = kk + 1u) {{"
        ));
        w.line("    let b = b_tile[kk * 16u + tx];");
        for r in 0..4 {
            w.line(&format!(
                "    acc_{r}_0 = acc_{r}_0 + a_tile[(ty * 4u + {r}u) * {TILE_K}u + kk] * b;"
            ));
        }
        w.line("}");
        w.line("workgroupBarrier();");
        w.indent(1);
        w.line("}");
        self.blocked_store(&mut w, 4, 1);
        w.indent(0);
        w.line("}");
        w.finish()
    }

    /// Store the `tm × 4·cols` block in `acc_{r}_{c}` (vec4s) at rows `m0 + r`, columns
    /// `n0 + 4c` of batch `o_base`, through the epilogue if there is one.
    fn blocked_store(&self, w: &mut Writer, tm: usize, cols: usize) {
        let (_, _, n) = self.mkn();
        let t = self.dtype.wgsl();
        let (_, extra) = self.epilogue_wgsl();
        for (j, (kind, d)) in extra.iter().enumerate() {
            let b = 2 + j;
            match kind {
                EpilogueInput::Scalar => w.line(&format!(
                    "let e{j} = {};",
                    wgsl::load(&format!("in{b}"), "0", *d)
                )),
                EpilogueInput::Row => {
                    for c in 0..cols {
                        let v = wgsl::load_vec4(&format!("in{b}"), &format!("n0 / 4u + {c}u"), *d);
                        w.line(&format!("let e{j}_{c} = {v};"));
                    }
                }
                EpilogueInput::Full => {}
            }
        }
        for r in 0..tm {
            for c in 0..cols {
                let at = format!("(o_base + (m0 + {r}u) * {n}u + n0) / 4u + {c}u");
                let value = if self.epilogue.is_some() {
                    let lanes: Vec<String> = ["x", "y", "z", "w"]
                        .iter()
                        .map(|lane| {
                            let acc = format!("acc_{r}_{c}.{lane}");
                            let mut args = vec![if self.dtype == DType::F16 {
                                format!("wgf_round_f16({acc})")
                            } else {
                                acc
                            }];
                            for (j, (kind, d)) in extra.iter().enumerate() {
                                args.push(match kind {
                                    EpilogueInput::Scalar => format!("e{j}"),
                                    EpilogueInput::Row => format!("e{j}_{c}.{lane}"),
                                    EpilogueInput::Full => {
                                        wgsl::widen(&format!("in{}[{at}].{lane}", 2 + j), *d)
                                    }
                                });
                            }
                            format!("wgf_epi({})", args.join(", "))
                        })
                        .collect();
                    format!("vec4<{t}>({})", lanes.join(", "))
                } else {
                    format!("acc_{r}_{c}")
                };
                w.line(&format!(
                    "{};",
                    wgsl::store_vec4("out", &at, &value, self.dtype)
                ));
            }
        }
    }

    /// Bindings (vec4 A, B, output and full/row epilogue inputs) and the epilogue function.
    fn blocked_header(&self, w: &mut Writer) {
        let (func, extra) = self.epilogue_wgsl();
        wgsl::storage_binding_vec(w, 0, "in0", self.dtype, true);
        wgsl::storage_binding_vec(w, 1, "in1", self.dtype, true);
        for (j, (kind, d)) in extra.iter().enumerate() {
            let vec = *kind != EpilogueInput::Scalar;
            wgsl::storage_binding_vec(w, 2 + j, &format!("in{}", 2 + j), *d, vec);
        }
        wgsl::storage_binding_vec(w, 2 + extra.len(), "out", self.dtype, true);
        if self.epilogue.is_some() {
            for line in wgsl::PRELUDE.lines().chain(func.lines()) {
                w.line(line);
            }
        }
        w.line("");
    }

    /// Each invocation computes a `tm × tn` output block: for every 4 steps of K it loads one
    /// vec4 of A per row and one vec4 of B per 4 columns, and accumulates into `tm * tn / 4`
    /// vec4 registers written as straight-line code (arrays would live in memory on lavapipe).
    pub(super) fn wgsl_blocked(&self, tm: usize, tn: usize) -> String {
        let (m, k, n) = self.mkn();
        let (bd, sa, sb) = self.batch();
        let t = self.dtype.wgsl();
        let cols = tn / 4;
        let mut w = Writer::new();
        w.line("// wgflow register-blocked matmul: each invocation computes a block of outputs.");
        self.blocked_header(&mut w);
        w.line("@compute @workgroup_size(64)");
        w.line("fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {");
        w.indent(1);
        let (mb, nb) = (m / tm, n / tn);
        w.line("let o = gid.x + gid.y * nwg.x * 64u;");
        w.line(&format!("if (o >= {}u) {{", self.invocations()));
        w.line("    return;");
        w.line("}");
        w.line(&format!("let n0 = (o % {nb}u) * {tn}u;"));
        w.line(&format!("let m0 = ((o / {nb}u) % {mb}u) * {tm}u;"));
        w.line(&format!("let batch = o / {}u;", mb * nb));
        wgsl::strided_index(&mut w, "a_base", "batch", &bd, &sa);
        wgsl::strided_index(&mut w, "b_base", "batch", &bd, &sb);
        // With K read from A's binding, products that differ only in K (an MLP's layers)
        // share one pipeline, and the driver compiles the big kernel once.
        let k_stride = if self.shares_k() {
            w.line(&format!("let k_len = arrayLength(&in0) * 4u / {m}u;"));
            "k_len".to_string()
        } else {
            self.k_len(&mut w);
            format!("{k}u")
        };
        w.line(&format!("let o_base = batch * {}u;", m * n));
        let zero = wgsl::literal(self.dtype, 0);
        for r in 0..tm {
            for c in 0..cols {
                w.line(&format!("var acc_{r}_{c} = vec4<{t}>({zero});"));
            }
        }
        let [ta, tb] = self.transposed;
        w.line("for (var k = 0u; k < k_len; k = k + 4u) {");
        w.indent(2);
        if ta {
            // A stored `[K, M]`: per step of K, the block's rows as vec4s along M.
            for kk in 0..4 {
                for q in 0..tm / 4 {
                    w.line(&format!(
                        "let a{kk}_{q} = {};",
                        wgsl::load_vec4(
                            "in0",
                            &format!("(a_base + (k + {kk}u) * {m}u + m0) / 4u + {q}u"),
                            self.dtype
                        )
                    ));
                }
            }
        } else {
            for r in 0..tm {
                w.line(&format!(
                    "let a{r} = {};",
                    wgsl::load_vec4(
                        "in0",
                        &format!("(a_base + (m0 + {r}u) * {k_stride} + k) / 4u"),
                        self.dtype
                    )
                ));
            }
        }
        if tb {
            // B stored `[N, K]`: per column, the 4 steps of K as one vec4.
            for j in 0..tn {
                w.line(&format!(
                    "let bt{j} = {};",
                    wgsl::load_vec4(
                        "in1",
                        &format!("(b_base + (n0 + {j}u) * {k_stride} + k) / 4u"),
                        self.dtype
                    )
                ));
            }
        }
        let lanes = ["x", "y", "z", "w"];
        for (kk, lane) in lanes.iter().enumerate() {
            for c in 0..cols {
                let b = if tb {
                    let parts: Vec<String> =
                        (0..4).map(|l| format!("bt{}.{lane}", 4 * c + l)).collect();
                    format!("vec4<{t}>({})", parts.join(", "))
                } else {
                    wgsl::load_vec4(
                        "in1",
                        &format!("(b_base + (k + {kk}u) * {n}u + n0) / 4u + {c}u"),
                        self.dtype,
                    )
                };
                w.line(&format!("let b{kk}_{c} = {b};"));
            }
            for r in 0..tm {
                let a = if ta {
                    format!("a{kk}_{}.{}", r / 4, lanes[r % 4])
                } else {
                    format!("a{r}.{lane}")
                };
                for c in 0..cols {
                    w.line(&format!("acc_{r}_{c} = acc_{r}_{c} + {a} * b{kk}_{c};"));
                }
            }
        }
        w.indent(1);
        w.line("}");
        self.blocked_store(&mut w, tm, cols);
        w.indent(0);
        w.line("}");
        w.finish()
    }

    /// `k_len`: how many steps of K this invocation's `batch` (chunk first under split-K)
    /// covers.
    pub(super) fn k_len(&self, w: &mut Writer) {
        let (_, k, _) = self.mkn();
        match self.k_chunk {
            None => w.line(&format!("let k_len = {k}u;")),
            Some(c) => {
                let batches = self.out_batch().numel();
                w.line(&format!(
                    "let k_len = min({c}u, {k}u - (batch / {batches}u) * {c}u);"
                ));
            }
        }
    }
}

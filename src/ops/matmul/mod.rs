//! Matrix products with NumPy `matmul` semantics: batch dims broadcast (read in place through
//! zero strides), 1-D operands are a row or a column, and long K runs split-K.

use crate::dtype::{f16_to_f32_word, f32_to_f16_word};
use crate::ops::elementwise::{binary_cpu, expr_fn_wgsl, InputView};
use crate::ops::family::{
    missing_inputs, Arity, CpuIn, Declared, EmptyInput, Family, GradCx, KernelClass, KernelDef,
    LowerCx, Lowered, Reject,
};
use crate::ops::{BinaryOp, ElementwiseKernel, Expr, Kernel, Pass, ReduceKernel, ReduceOp};
use crate::{DType, Shape};

use crate::graph::def::{NodeDef, NodeIn};
use crate::graph::{Graph, Tensor};

/// cpu:0's kernels; public for `benches/cpu_matmul.rs`, which measures them against sgemm.
pub mod cpu;
pub mod few_rows;
pub mod file;
mod grad;
mod igemm;
pub(crate) mod panel;
mod wgsl;

/// Elementwise work fused after a matmul's product or a reduction's result (bias,
/// activation…): `expr` reads `Input(0)` = that result and `Input(i)` = `extra[i - 1]`. Each extra input is the output's shape, a row
/// vector broadcast over rows and batches (a bias), or a single element, so that every one
/// can be loaded with vec4s next to the accumulators.
///
/// `views[i]`, when present, reads `extra[i]` through a view of a larger buffer (a time
/// step's rows of a recurrent model's input projection): only cpu:0's matmuls take such an
/// epilogue, since they apply it as an elementwise kernel over the finished product.
#[derive(Debug, Clone, PartialEq)]
pub struct Epilogue {
    pub expr: Expr,
    pub extra: Vec<(Shape, DType)>,
    /// Empty, or one entry per `extra`.
    pub views: Vec<Option<InputView>>,
}

impl Epilogue {
    /// Whether the epilogue reads or computes f16 values.
    pub fn uses_f16(&self) -> bool {
        self.extra.iter().any(|(_, d)| *d == DType::F16) || self.expr.mentions(DType::F16)
    }

    /// `fn wgf_epi(x0: acc, x1: extra0, ...) -> acc` applying the expression.
    pub fn wgsl_function(&self, acc: DType) -> String {
        let mut dtypes = vec![acc];
        dtypes.extend(self.extra.iter().map(|(_, d)| *d));
        expr_fn_wgsl("wgf_epi", &self.expr, &dtypes, acc)
    }

    /// The epilogue as an elementwise kernel over the product (`Input(0)`, of `shape`) and
    /// the extra inputs.
    pub fn kernel(&self, shape: &Shape, dtype: DType) -> ElementwiseKernel {
        let mut inputs = vec![(shape.clone(), dtype)];
        inputs.extend(self.extra.iter().cloned());
        let views = if self.has_views() {
            std::iter::once(None)
                .chain(self.views.iter().cloned())
                .collect()
        } else {
            Vec::new()
        };
        ElementwiseKernel {
            expr: self.expr.clone(),
            inputs,
            out_shape: shape.clone(),
            out_dtype: dtype,
            views,
        }
    }

    /// Whether an extra input is read through a view.
    pub fn has_views(&self) -> bool {
        self.views.iter().any(Option::is_some)
    }

    /// Apply on the CPU to `acc` (the kernel's result, of `shape`) and the extra inputs.
    pub fn apply_cpu(
        &self,
        acc: &[u32],
        extra: &[&[u32]],
        shape: &Shape,
        dtype: DType,
    ) -> Vec<u32> {
        let mut words: Vec<&[u32]> = vec![acc];
        words.extend_from_slice(extra);
        self.kernel(shape, dtype).run_fast(&words)
    }
}

/// How an epilogue input lines up with the matmul output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpilogueInput {
    Full,
    Row,
    Scalar,
}

impl EpilogueInput {
    /// Classify `s` against the output shape `out`; `None` if it cannot join an epilogue.
    pub fn of(s: &Shape, out: &Shape) -> Option<EpilogueInput> {
        if s == out {
            return Some(EpilogueInput::Full);
        }
        if s.numel() == 1 {
            return Some(EpilogueInput::Scalar);
        }
        let strides = s.broadcast_strides(out);
        let n = out.dims()[out.rank() - 1];
        let row = strides.iter().rev().skip(1).all(|&x| x == 0)
            && strides.last() == Some(&1)
            && s.numel() == n;
        row.then_some(EpilogueInput::Row)
    }
}

/// NumPy's `matmul` shape rule: a 1-D A is a row `[1, K]` and a 1-D B a column `[K, 1]`
/// whose inserted 1 is dropped from the result (`[K] @ [K] -> []`); batch dims broadcast.
pub fn matmul_shape(a: &Shape, b: &Shape) -> Result<Shape, String> {
    if a.rank() == 0 || b.rank() == 0 {
        return Err(format!(
            "shapes {a} and {b}: both operands need at least 1 dimension (use mul for a scalar)"
        ));
    }
    let (ma, mb) = (as_matrix(a, true), as_matrix(b, false));
    let (m, k) = (ma.dims()[ma.rank() - 2], ma.dims()[ma.rank() - 1]);
    let (k2, n) = (mb.dims()[mb.rank() - 2], mb.dims()[mb.rank() - 1]);
    if k != k2 {
        return Err(format!(
            "shapes {a} and {b}: inner dimensions {k} and {k2} differ"
        ));
    }
    let ba = Shape(ma.dims()[..ma.rank() - 2].to_vec());
    let bb = Shape(mb.dims()[..mb.rank() - 2].to_vec());
    let mut out = Shape::broadcast(&ba, &bb).ok_or_else(|| {
        // Name the first batch axis (from the right, as broadcasting aligns them) that fails.
        let (ra, rb) = (ba.rank(), bb.rank());
        let bad = (1..=ra.min(rb))
            .find(|&i| {
                let (x, y) = (ba.dims()[ra - i], bb.dims()[rb - i]);
                x != y && x != 1 && y != 1
            })
            .map(|i| {
                format!(
                    " ({} vs {} at batch axis -{i})",
                    ba.dims()[ra - i],
                    bb.dims()[rb - i]
                )
            })
            .unwrap_or_default();
        format!("shapes {a} and {b}: batch dimensions {ba} and {bb} cannot broadcast{bad}")
    })?;
    if a.rank() >= 2 {
        out.0.push(m);
    }
    if b.rank() >= 2 {
        out.0.push(n);
    }
    Ok(out)
}

/// `s` as a matrix: a vector becomes the row `[1, K]` (`row`) or the column `[K, 1]`; both
/// are views of the same memory, so kernels index a vector as that matrix.
fn as_matrix(s: &Shape, row: bool) -> Shape {
    match (s.rank(), row) {
        (1, true) => Shape(vec![1, s.dims()[0]]),
        (1, false) => Shape(vec![s.dims()[0], 1]),
        _ => s.clone(),
    }
}

/// Longest stretch of K one invocation loops over. Longer products run split-K: partial
/// products over K chunks, then a sum over the chunks (see [`MatMulKernel::passes`]). Besides
/// spreading a long product over more invocations, this keeps results right on Mesa's
/// llvmpipe/lavapipe, which silently ends every loop of an invocation after 65,535 iterations
/// in total; the tiled kernel loops `17 K / 16` times, so K stays at half that limit. A
/// multiple of the tile depth, so chunks keep the vec4 and tiled strategies.
pub const K_CHUNK: usize = 32768;

/// Products of at least this many multiply-adds get 16×32 blocks on software adapters…
pub const MID_MACS: u64 = 1 << 27;
/// …and at least this many 32×32 (see [`MatMulKernel::blocked_for`]).
pub const BIG_MACS: u64 = 1 << 29;

#[derive(Debug, Clone, PartialEq)]
pub struct MatMulKernel {
    pub a: Shape,
    pub b: Shape,
    pub out: Shape,
    pub dtype: DType,
    /// `(rows, cols)` of the output block each invocation computes with vec4 loads; `None`
    /// is one output per invocation. Chosen per adapter by [`MatMulKernel::blocked_for`].
    pub block: Option<(usize, usize)>,
    /// Workgroup tiling in shared memory (real GPUs): a workgroup of 16×16 invocations
    /// computes a [`TILE`]×[`TILE`] output tile, each invocation a 4×4 block (`block` is
    /// `Some((4, 4))`), staging [`TILE_K`]-deep slices of A and B in workgroup memory.
    pub tiled: bool,
    /// Elementwise work applied to each output before it is stored (set by fusion).
    pub epilogue: Option<Epilogue>,
    /// Split-K: when set, the kernel computes partial products over `K` in chunks of this
    /// length (the last one shorter) and its output is `[chunks, ..out]`, summed by a
    /// reduction after it (set by lowering, see [`MatMulKernel::passes`]).
    pub k_chunk: Option<usize>,
    /// Operands stored as the transpose of their last two axes (A as `[.., K, M]`, B as
    /// `[.., N, K]`), read in place with swapped indexing while `a` and `b` keep the logical
    /// shapes: a backward matmul's `xᵀ` or `Wᵀ` then costs no transpose kernel. Only for
    /// operands of rank 2 or more; set by fusion (see `compile/fuse.rs`).
    pub transposed: [bool; 2],
}

/// Largest A (in bytes) whose K the register-blocked kernel reads from A's binding (see
/// [`MatMulKernel::shares_k`]): far below any adapter's `max_storage_buffer_binding_size`
/// (WebGPU guarantees 128 MiB), so A is never split into windows.
pub const SHARED_K_MAX_A_BYTES: u64 = 1 << 24;

/// Output tile edge of the workgroup-tiled matmul.
pub const TILE: usize = 64;
/// Depth of the A and B slices the tiled matmul stages in workgroup memory.
pub const TILE_K: usize = 16;

impl MatMulKernel {
    fn mkn(&self) -> (usize, usize, usize) {
        let (a, b) = (as_matrix(&self.a, true), as_matrix(&self.b, false));
        let r = a.rank();
        (a.dims()[r - 2], a.dims()[r - 1], b.dims()[b.rank() - 1])
    }

    /// Element strides of one matrix of A along `(m, k)` and of B along `(k, n)`, as stored.
    pub(crate) fn matrix_strides(&self) -> ((usize, usize), (usize, usize)) {
        let (m, k, n) = self.mkn();
        let sa = if self.transposed[0] { (1, m) } else { (k, 1) };
        let sb = if self.transposed[1] { (1, k) } else { (n, 1) };
        (sa, sb)
    }

    /// The output's batch dims: its dims before the matrix dims that 2-D operands add.
    fn out_batch(&self) -> Shape {
        let matrix_dims = (self.a.rank() >= 2) as usize + (self.b.rank() >= 2) as usize;
        Shape(self.out.dims()[..self.out.rank() - matrix_dims].to_vec())
    }

    /// Number of K chunks the kernel computes partial products for (1 without split-K).
    pub fn chunks(&self) -> usize {
        let (_, k, _) = self.mkn();
        self.k_chunk.map_or(1, |c| k.div_ceil(c.max(1)).max(1))
    }

    /// The shape the kernel writes: the product's, after the chunk axis under split-K.
    pub fn out_shape(&self) -> Shape {
        match self.k_chunk {
            None => self.out.clone(),
            Some(_) => {
                let mut d = vec![self.chunks()];
                d.extend_from_slice(self.out.dims());
                Shape(d)
            }
        }
    }

    /// Batch dims of the written output (the chunk axis first under split-K) and the
    /// element strides of A and B along them: zero along broadcast dims, so a broadcast
    /// operand is read in place rather than copied; a chunk steps K.
    fn batch(&self) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
        let (m, k, n) = self.mkn();
        let out_batch = self.out_batch();
        let (a, b) = (as_matrix(&self.a, true), as_matrix(&self.b, false));
        let ab = Shape(a.dims()[..a.rank() - 2].to_vec());
        let bb = Shape(b.dims()[..b.rank() - 2].to_vec());
        let mut sa: Vec<usize> = ab
            .broadcast_strides(&out_batch)
            .iter()
            .map(|s| s * m * k)
            .collect();
        let mut sb: Vec<usize> = bb
            .broadcast_strides(&out_batch)
            .iter()
            .map(|s| s * k * n)
            .collect();
        let mut dims = out_batch.0;
        if let Some(c) = self.k_chunk {
            let ((_, ka), (kb, _)) = self.matrix_strides();
            dims.insert(0, self.chunks());
            sa.insert(0, c * ka);
            sb.insert(0, c * kb);
        }
        (dims, sa, sb)
    }

    /// The kernel that runs first and, when K is longer than [`K_CHUNK`], the reduction that
    /// sums its partial products over chunks (carrying the epilogue).
    pub fn passes(self) -> (MatMulKernel, Option<ReduceKernel>) {
        let (_, k, _) = self.mkn();
        if k <= K_CHUNK || self.k_chunk.is_some() {
            return (self, None);
        }
        let partial = MatMulKernel {
            k_chunk: Some(K_CHUNK),
            epilogue: None,
            block: None,
            tiled: false,
            ..self.clone()
        };
        let sum = ReduceKernel {
            op: ReduceOp::Sum,
            in_shape: partial.out_shape(),
            dtype: self.dtype,
            axes: vec![0],
            out_shape: self.out,
            epilogue: self.epilogue,
            prologue: None,
            pass: Pass::Whole,
        };
        (partial, Some(sum))
    }

    /// Upper bound on the loop iterations one invocation runs, all loops together.
    pub fn loop_iterations(&self) -> u64 {
        let (_, k, _) = self.mkn();
        let len = self.k_chunk.map_or(k, |c| c.min(k)) as u64;
        if self.tiled {
            len / TILE_K as u64 * (1 + TILE_K as u64)
        } else if self.block.is_some() {
            len / 4
        } else {
            len
        }
    }

    /// The epilogue function and its argument kinds (empty when there is no epilogue).
    fn epilogue_wgsl(&self) -> (String, Vec<(EpilogueInput, DType)>) {
        let Some(e) = &self.epilogue else {
            return (String::new(), Vec::new());
        };
        let func = e.wgsl_function(self.dtype);
        let kinds = e
            .extra
            .iter()
            .map(|(s, d)| {
                (
                    EpilogueInput::of(s, &self.out).unwrap_or(EpilogueInput::Full),
                    *d,
                )
            })
            .collect();
        (func, kinds)
    }

    /// Whether the register-blocked kernel reads K from the length of A's binding instead of
    /// writing it into the WGSL: for one unbatched product without split-K whose A is at most
    /// [`SHARED_K_MAX_A_BYTES`], so that A is always bound whole (`arrayLength` of a binding
    /// split into windows would be wrong, and `split_bindings` refuses it).
    pub fn shares_k(&self) -> bool {
        let (m, k, _) = self.mkn();
        let a_bytes = (m * k * self.dtype.gpu_size()) as u64;
        self.block.is_some()
            && !self.tiled
            && self.k_chunk.is_none()
            && self.out_batch().rank() == 0
            && a_bytes <= SHARED_K_MAX_A_BYTES
    }

    /// Choose register blocking for an adapter. Blocks need `N` and `K` divisible by 4 (vec4
    /// loads along K of A and along N of B); other shapes keep one output per invocation.
    /// Software adapters get up to 16×16 outputs per invocation (measured on lavapipe: ~30×
    /// faster than one output per invocation), and bigger blocks for big products, where the
    /// run time outweighs the JIT time a bigger kernel costs at its first dispatch (lavapipe,
    /// 1024³, interleaved runs: 16×16 17.7 GFLOP/s and 0.8 s JIT, 16×32 22.5 and 1.5 s, 32×32
    /// 25.6 and 3.9 s; Mesa caches the compiled kernel on disk for later processes; not through
    /// GL, see [`super::AdapterKind::gl`]). GPUs get
    /// 4×4, which keeps register pressure low enough for full occupancy.
    pub fn blocked_for(&self, adapter: &super::AdapterKind) -> MatMulKernel {
        let (m, k, n) = self.mkn();
        let mut out = self.clone();
        out.block = None;
        out.tiled = false;
        // A stored transposed is loaded with vec4s along M, so M and the block's rows divide
        // by 4 too.
        let ta = self.transposed[0];
        if !n.is_multiple_of(4)
            || !k.is_multiple_of(4)
            || (ta && !m.is_multiple_of(4))
            || !self.dtype.is_numeric()
        {
            return out;
        }
        if !adapter.software
            && m.is_multiple_of(TILE)
            && n.is_multiple_of(TILE)
            && k.is_multiple_of(TILE_K)
        {
            out.block = Some((4, 4));
            out.tiled = true;
            return out;
        }
        let macs = (m * k * n) as u64 * self.out_batch().numel() as u64;
        if adapter.software && !adapter.gl && m.is_multiple_of(16) && n.is_multiple_of(32) {
            if macs >= BIG_MACS && m.is_multiple_of(32) {
                out.block = Some((32, 32));
                return out;
            }
            if macs >= MID_MACS {
                out.block = Some((16, 32));
                return out;
            }
        }
        let max = if adapter.software { 16 } else { 4 };
        let tn = [16, 8, 4].into_iter().find(|&t| t <= max && n % t == 0);
        let tm = [16, 8, 4, 2, 1]
            .into_iter()
            .find(|&t| t <= max && m % t == 0 && (!ta || t % 4 == 0));
        if let (Some(tm), Some(tn)) = (tm, tn) {
            out.block = Some((tm, tn));
        }
        out
    }

    pub fn workgroup_size(&self) -> u32 {
        if self.tiled {
            256
        } else if self.block.is_some() {
            64
        } else {
            crate::ops::wgsl::WORKGROUP
        }
    }

    pub fn invocations(&self) -> u64 {
        let outputs = self.out_shape().numel();
        match self.block {
            Some((tm, tn)) => (outputs / (tm * tn)) as u64,
            None => outputs as u64,
        }
    }
}

// ---------------------------------------------------------------- the family

/// NumPy's `matmul`: batched, broadcast over batch axes, 1-D operands read as vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatMul;

impl Family for MatMul {
    fn rebinds(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "matmul"
    }

    fn arity(&self) -> Arity {
        Arity::Exactly(2)
    }

    /// Operands of one numeric dtype; shapes by [`matmul_shape`].
    fn infer(
        &self,
        inputs: &[(Shape, DType)],
        _declared: Declared<'_>,
    ) -> Result<(Shape, DType), Reject> {
        let [(sa, da), (sb, db)] = inputs else {
            return Err(Reject::from(format!(
                "takes 2 inputs, {} given",
                inputs.len()
            )));
        };
        if da != db || !da.is_numeric() {
            return Err(Reject::dtype(format!(
                "operands must share a numeric dtype, got {da} and {db}"
            )));
        }
        Ok((matmul_shape(sa, sb)?, *da))
    }

    fn read(node: &NodeIn<'_>) -> Option<crate::Result<Self>> {
        file::read(node)
    }

    fn rebuild(&self, g: &mut Graph, _node: &NodeDef, x: &[Tensor]) -> crate::Result<Tensor> {
        file::rebuild(g, x)
    }

    fn lower(&self, cx: &mut LowerCx<'_>) -> crate::Result<Lowered> {
        let (first, sum) = MatMulKernel {
            a: cx.in_shape(0).clone(),
            b: cx.in_shape(1).clone(),
            out: cx.shape.clone(),
            dtype: cx.dtype,
            block: None,
            tiled: false,
            epilogue: None,
            k_chunk: None,
            transposed: [false; 2],
        }
        .passes();
        Ok(match sum {
            None => cx.dispatch(Kernel::MatMul(first)),
            // Split-K: partial products over K chunks, then their sum.
            Some(sum) => {
                let shape = first.out_shape();
                let partial = cx.partial(Kernel::MatMul(first), shape, cx.args.to_vec());
                Lowered::Dispatch {
                    kernel: Kernel::Reduce(sum),
                    inputs: vec![partial],
                }
            }
        })
    }

    /// `[m, 0] @ [0, n]` is zeros.
    fn on_empty_input(&self, _dtype: DType) -> EmptyInput {
        EmptyInput::Fill(0)
    }

    /// `dA = dy @ Bᵀ`, `dB = Aᵀ @ dy`, summed over broadcast batch dims (see `matmul/grad.rs`).
    fn grad(&self, g: &mut Graph, cx: &GradCx<'_>) -> crate::Result<Vec<Option<Tensor>>> {
        self.vjp(g, cx)
    }
}

impl KernelDef for MatMulKernel {
    fn kind(&self) -> &'static str {
        "matmul"
    }

    fn class(&self) -> KernelClass {
        KernelClass::MatMul
    }

    fn flops(&self, _out_elements: u64) -> Option<u64> {
        let kdim = *self.a.dims().last()? as u64;
        Some(2 * self.out.numel() as u64 * kdim)
    }

    fn epilogue_host(&self, extra: &[&Shape]) -> Option<(&Shape, DType, bool)> {
        let fits = extra
            .iter()
            .all(|s| EpilogueInput::of(s, &self.out).is_some());
        Some((&self.out, self.dtype, self.epilogue.is_none() && fits))
    }

    fn set_epilogue(&mut self, epilogue: Option<Epilogue>) {
        self.epilogue = epilogue;
    }

    /// `run_cpu_into` and `run_fast` apply [`Epilogue::kernel`] to the whole product.
    fn epilogue_views_on_cpu(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        let t = |yes: bool| if yes { " (read transposed)" } else { "" };
        let product = format!(
            "matmul {}{} @ {}{}",
            self.a,
            t(self.transposed[0]),
            self.b,
            t(self.transposed[1])
        );
        match &self.epilogue {
            None => product,
            Some(e) => format!("{product} then {}", e.expr.describe()),
        }
    }

    fn wgsl(&self) -> String {
        MatMulKernel::wgsl(self)
    }

    fn uses_f16(&self) -> bool {
        self.dtype == DType::F16 || self.epilogue.as_ref().is_some_and(Epilogue::uses_f16)
    }

    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        if inputs.len() < 2 {
            return Err(missing_inputs(self, inputs.len()));
        }
        Ok(MatMulKernel::run_fast(self, inputs))
    }

    fn run_cpu_into(&self, inputs: &[CpuIn<'_>], out: &mut [u32]) -> crate::Result<()> {
        MatMulKernel::run_cpu_into(self, inputs, out)
    }

    /// A constant B (a layer's weight), packed once instead of on every run: for the f32
    /// panel kernel, or for the integer micro-kernel (a quantized model's weight).
    fn prepare_cpu(&self, constants: &[Option<&[u32]>]) -> Option<crate::ops::CpuPrepared> {
        if let Some(p) = self.pack_constant_f32(constants) {
            let bytes = p.bytes();
            return Some(crate::ops::CpuPrepared::new(p, bytes));
        }
        let packed = self.pack_constant_b(constants)?;
        let bytes = packed.bytes();
        Some(crate::ops::CpuPrepared::new(packed, bytes))
    }

    fn run_cpu_prepared(
        &self,
        inputs: &[CpuIn<'_>],
        out: &mut [u32],
        prepared: &crate::ops::CpuPrepared,
    ) -> crate::Result<()> {
        self.run_cpu_packed(inputs, out, Some(prepared))
    }

    fn invocations(&self) -> u64 {
        MatMulKernel::invocations(self)
    }

    fn workgroup_size(&self) -> u32 {
        MatMulKernel::workgroup_size(self)
    }

    fn loop_iterations(&self) -> Option<u64> {
        Some(MatMulKernel::loop_iterations(self))
    }
}

//! What each op IS: the closed set of primitives, their properties, and the kernels that
//! implement them. Each family is a folder, `ops/<family>/`: `mod.rs` (semantics, shape rule,
//! lowering), `wgsl.rs`, `cpu.rs` (the fast path), `reference.rs` (the scalar oracle),
//! `grad.rs` and `file.rs`, omitting what it lacks (docs/architecture.md, "Op families").
//! Composites (softmax, mean of several axes…) are graph builders over these, in `graph/build/`.

pub mod attention;
pub mod custom;
pub mod elementwise;
pub mod family;
pub mod index;
pub mod leaf;
pub mod matmul;
pub mod movement;
pub mod nn;
pub mod random;
pub mod reduce;
pub mod rows;
pub mod scan;
pub mod segment;
pub mod simd;
pub mod sizes;
pub mod state;
pub mod wgsl;

pub use custom::Custom;
pub use elementwise::{BinaryOp, Elementwise, ElementwiseKernel, Expr, Node, SmallFloat, UnaryOp};
pub use family::{
    Arity, CpuIn, CpuPrepared, Declared, EmptyInput, Family, GradCx, KernelClass, KernelDef,
    LowerCx, Lowered, Reject,
};
pub use leaf::{Initializer, Leaf};
pub use matmul::{Epilogue, EpilogueInput, MatMul, MatMulKernel};
pub use movement::{
    ConcatKernel, GatherKernel, Movement, PadKernel, PermuteKernel, SliceArg, StridedKernel,
    StridedKind,
};
pub use nn::{Conv2dKernel, Nn, NnGradKernel, NnGradOp, PoolKernel, PoolKind, Window};
pub use random::{Distribution, RandomKernel, RandomSpec};
pub use reduce::{Pass, Prologue, Reduce, ReduceKernel, ReduceOp, ReduceStrategy};
pub use scan::{Scan, ScanKernel, ScanOp};
pub use segment::{Segment, SegmentKernel, SegmentPass};
pub use state::State;

/// The registry of op families and kernel types: one line each. A family line makes a variant
/// of [`Op`] (its payload is the family's type, implementing [`Family`]), an arm of
/// [`Op::family`] and an entry in the list graph files are read through ([`Op::read`], first
/// family that knows the op name wins); a kernel line makes a variant of [`Kernel`] and the
/// arms of [`Kernel::as_dyn`]/[`Kernel::as_dyn_mut`]. Everything else about a family or a kernel is
/// in its own files, reached through those traits.
macro_rules! registry {
    (
        families { $($(#[$fdoc:meta])* $family:ident($fty:ty),)* }
        kernels { $($(#[$kdoc:meta])* $kernel:ident($kty:ty),)* }
    ) => {
        /// A primitive op: one variant per op family (see the registry above). Everything
        /// else about an op is in its family's files, reached through [`Op::family`]
        /// ([`Family`]).
        #[derive(Debug, Clone, PartialEq)]
        pub enum Op {
            $($(#[$fdoc])* $family($fty),)*
        }

        impl Op {
            /// The op's family: its name, arity, properties, lowering and gradient.
            pub fn family(&self) -> &dyn Family {
                match self {
                    $(Op::$family(f) => f,)*
                }
            }

            /// The first family that has an op named as the graph-file node says.
            fn read_family(node: &crate::graph::def::NodeIn<'_>) -> Option<crate::Result<Op>> {
                $(
                    if let Some(op) = <$fty>::read(node) {
                        return Some(op.map(Op::$family));
                    }
                )*
                None
            }
        }

        /// A unit of device work after fusion: what a `Dispatch` step runs. One variant per
        /// kernel type (see the registry above); everything else is in its [`KernelDef`].
        #[derive(Debug, Clone, PartialEq)]
        pub enum Kernel {
            $($(#[$kdoc])* $kernel($kty),)*
        }

        impl Kernel {
            /// The kernel as its [`KernelDef`] (WGSL, CPU kernels, dispatch size, and the facts
            /// traces and fusion ask about).
            pub fn as_dyn(&self) -> &dyn KernelDef {
                match self {
                    $(Kernel::$kernel(k) => k,)*
                }
            }

            /// The kernel as a mutable [`KernelDef`] (fusion attaches epilogues through it).
            pub fn as_dyn_mut(&mut self) -> &mut dyn KernelDef {
                match self {
                    $(Kernel::$kernel(k) => k,)*
                }
            }
        }
    };
}

registry! {
    families {
        /// Constants, placeholders and variables (`ops/leaf/`).
        Leaf(Leaf),
        /// Unary, binary, `where` and casts (`ops/elementwise/`).
        Elementwise(Elementwise),
        /// Reductions over axes (`ops/reduce/`).
        Reduce(Reduce),
        /// Batched matmul (`ops/matmul/`).
        MatMul(MatMul),
        /// Reshape, transpose, strided copies, concat, pad, take (`ops/movement/`).
        Movement(Movement),
        /// Convolution, pooling and their backward ops (`ops/nn/`).
        Nn(Nn),
        /// Seeded random tensors (`ops/random/`).
        Random(RandomSpec),
        /// Users' elementwise functions and raw WGSL kernels (`ops/custom/`).
        Custom(Custom),
        /// Cumulative sums and products (`ops/scan/`).
        Scan(Scan),
        /// Assignments to variables and groups of targets (`ops/state/`).
        State(State),
        /// Gathers and scatters along an axis with a tensor of indices (`ops/index/`).
        Index(index::Index),
        Sizes(sizes::Sizes),
        /// Sums of slices that share a segment id (`ops/segment/`).
        Segment(Segment),
        /// Fused scaled dot-product attention and its gradient's passes (`ops/attention/`).
        Attention(attention::Attention),
        /// Fused layer normalisation and softmax cross-entropy over rows (`ops/rows/`).
        Rows(rows::Rows),
    }
    kernels {
        Elementwise(ElementwiseKernel),
        Reduce(ReduceKernel),
        MatMul(MatMulKernel),
        Permute(PermuteKernel),
        Strided(StridedKernel),
        Concat(ConcatKernel),
        Pad(PadKernel),
        Gather(GatherKernel),
        Conv2d(Conv2dKernel),
        Pool(PoolKernel),
        NnGrad(NnGradKernel),
        Random(RandomKernel),
        RawWgsl(custom::RawKernel),
        Scan(ScanKernel),
        Index(index::IndexKernel),
        Segment(SegmentKernel),
        Attention(attention::AttentionKernel),
        Rows(rows::RowKernel),
    }
}

impl Op {
    /// The op's name, used for default node names, messages and graph files.
    pub fn name(&self) -> &'static str {
        self.family().name()
    }

    /// Computed one element at a time from the same position of its (broadcast) inputs.
    pub fn is_elementwise(&self) -> bool {
        self.family().is_elementwise()
    }

    /// Produces no new data: its output aliases its input's storage.
    pub fn is_view(&self) -> bool {
        self.family().is_view()
    }

    /// Runs only on a GPU.
    pub fn is_gpu_only(&self) -> bool {
        self.family().is_gpu_only()
    }

    /// Has no inputs.
    pub fn is_leaf(&self) -> bool {
        self.family().is_leaf()
    }

    /// A variable (state kept by the session).
    pub fn is_variable(&self) -> bool {
        self.family().is_variable()
    }

    /// An assignment to a variable.
    pub fn is_assignment(&self) -> bool {
        self.family().is_assignment()
    }

    /// The op a graph-file node names, read by its family ([`Family::read`]): the one list
    /// of families that reading dispatches through.
    pub fn read(node: &crate::graph::def::NodeIn<'_>) -> crate::Result<Op> {
        Op::read_family(node).unwrap_or_else(|| {
            Err(node.error(
                "op",
                format!("unknown op {}", crate::graph::def::quote(node.op)),
            ))
        })
    }
}

impl Kernel {
    /// A short human-readable description for plans and traces.
    pub fn describe(&self) -> String {
        self.as_dyn().describe()
    }

    /// The kernel's WGSL source.
    pub fn wgsl(&self) -> String {
        // A raw kernel's source comes back as written: it says it uses no f16 helpers.
        wgsl::with_f16_support(self.as_dyn().wgsl(), self.as_dyn().uses_f16())
    }

    /// The WGSL entry point.
    pub fn entry_point(&self) -> &str {
        self.as_dyn().entry_point()
    }

    /// Whether [`Kernel::run_reference`] can run it (raw WGSL kernels are GPU only).
    pub fn has_cpu(&self) -> bool {
        self.as_dyn().has_cpu()
    }

    /// The scalar reference semantics on the host (the oracle the fast CPU path and the GPUs
    /// are tested against); `inputs` are the input tensors' words in binding order. Inputs
    /// that do not match the kernel, or a kernel without a CPU implementation
    /// ([`Kernel::has_cpu`]), are errors.
    pub fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        self.as_dyn().run_reference(inputs)
    }

    /// Run on the CPU into `out` (see [`KernelDef::run_cpu_into`]); an error for a kernel
    /// without a CPU implementation.
    pub fn run_cpu_into(&self, inputs: &[CpuIn<'_>], out: &mut [u32]) -> crate::Result<()> {
        if !self.has_cpu() {
            return Err(crate::Error::Internal(format!(
                "{} has no CPU implementation",
                self.describe()
            )));
        }
        self.as_dyn().run_cpu_into(inputs, out)
    }

    /// See [`KernelDef::prepare_cpu`].
    pub fn prepare_cpu(&self, constants: &[Option<&[u32]>]) -> Option<CpuPrepared> {
        if !self.has_cpu() {
            return None;
        }
        self.as_dyn().prepare_cpu(constants)
    }

    /// [`Kernel::run_cpu_into`] with what [`Kernel::prepare_cpu`] made.
    pub fn run_cpu_prepared(
        &self,
        inputs: &[CpuIn<'_>],
        out: &mut [u32],
        prepared: &CpuPrepared,
    ) -> crate::Result<()> {
        if !self.has_cpu() {
            return self.run_cpu_into(inputs, out);
        }
        self.as_dyn().run_cpu_prepared(inputs, out, prepared)
    }

    /// The workgroup grid `(x, y)` this kernel is dispatched with, or `None` if it exceeds
    /// `max_per_dim` squared.
    pub fn workgroups(&self, max_per_dim: u32) -> Option<(u32, u32)> {
        wgsl::grid(self.invocations(), self.workgroup_size(), max_per_dim)
    }

    /// The workgroup grid on `device` (which allows `max_per_dim` workgroups per dimension),
    /// or an [`crate::Error::Dispatch`] for `node` naming the invocations, workgroup size and
    /// limit.
    pub fn grid_on(
        &self,
        node: &str,
        device: crate::Device,
        max_per_dim: u32,
    ) -> crate::Result<(u32, u32)> {
        self.workgroups(max_per_dim).ok_or_else(|| {
            let size = self.workgroup_size();
            crate::Error::Dispatch {
                node: node.to_string(),
                device: device.to_string(),
                invocations: self.invocations(),
                workgroup_size: size,
                workgroups: self.invocations().div_ceil(u64::from(size.max(1))),
                limit_name: "max_compute_workgroups_per_dimension",
                limit: max_per_dim,
                max_workgroups: u64::from(max_per_dim).pow(2),
            }
        })
    }

    /// Invocations per workgroup of the WGSL kernel.
    pub fn workgroup_size(&self) -> u32 {
        self.as_dyn().workgroup_size()
    }

    /// The kernel as it should run on an adapter: strategies that depend on the kind of
    /// device (e.g. matmul blocking) are chosen here. The CPU backend runs kernels unchanged.
    /// This kernel reading input `keep` in place of input `drop` (which goes), where the kernel
    /// can (elementwise kernels whose two inputs present the same elements); `None`
    /// otherwise. The GPU executor asks when two inputs are bound to one buffer range.
    pub fn merge_input(&self, keep: usize, drop: usize) -> Option<Kernel> {
        match self {
            Kernel::Elementwise(k) => k.merge_input(keep, drop).map(Kernel::Elementwise),
            _ => None,
        }
    }

    pub fn for_adapter(&self, adapter: &AdapterKind) -> Kernel {
        match self {
            Kernel::MatMul(k) => Kernel::MatMul(k.blocked_for(adapter)),
            other => other.clone(),
        }
    }

    /// Upper bound on the loop iterations one invocation of the WGSL kernel runs, all loops
    /// together, for kernels whose loops grow with their shapes (reductions bound theirs
    /// by chunking, see [`reduce::Pass`]); compared with [`LOOP_LIMIT`] on software adapters.
    pub fn loop_iterations(&self) -> Option<u64> {
        self.as_dyn().loop_iterations()
    }

    /// How many invocations the WGSL kernel is dispatched with.
    pub fn invocations(&self) -> u64 {
        self.as_dyn().invocations()
    }
}

/// Loop iterations (all loops together) after which Mesa's llvmpipe/lavapipe silently end an
/// invocation's loops (gallivm's `LP_MAX_TGSI_LOOP_ITERATIONS`).
pub const LOOP_LIMIT: u64 = 65_535;

/// What kernel strategies need to know about an adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AdapterKind {
    /// A CPU-emulated adapter (lavapipe, llvmpipe, WARP): rewards big per-invocation blocks
    /// and few barriers, unlike real GPUs.
    pub software: bool,
    /// Reached through OpenGL. wgpu's GL backend holds one context lock while a pipeline
    /// compiles, and other threads' GL calls give up after 6 s; llvmpipe's GLSL compiler
    /// takes that long for the biggest register blocks, so GL keeps to 16×16 blocks.
    pub gl: bool,
}

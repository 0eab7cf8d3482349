//! What each op IS: the closed set of primitives, their properties, and the kernels that
//! implement them. Each family file holds its shape/dtype rule, CPU reference kernel and WGSL.
//! Composites (softmax, mean of several axes…) are graph builders over these, in `graph/build.rs`.

pub mod custom;
pub mod elementwise;
pub mod elementwise_cpu;
pub mod expr;
pub mod matmul;
pub mod movement;
pub mod nn;
pub mod random;
pub mod reduce;
pub mod wgsl;

pub use elementwise::{BinaryOp, ElementwiseKernel, Expr, Node, UnaryOp};
pub use matmul::{Epilogue, EpilogueInput, MatMulKernel};
pub use movement::{
    ConcatKernel, GatherKernel, PadKernel, PermuteKernel, SliceArg, StridedKernel, StridedKind,
};
pub use nn::{Conv2dKernel, PoolKernel, PoolKind, Window};
pub use random::{Distribution, RandomKernel, RandomSpec};
pub use reduce::{Pass, Prologue, ReduceKernel, ReduceOp, ReduceStrategy};

use crate::{DType, HostTensor};
use std::sync::Arc;

/// A primitive op: the closed set every pass understands.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// A value baked into the graph.
    Constant(HostTensor),
    /// A value fed at run time (by the node's name).
    Placeholder,
    Unary(UnaryOp),
    Binary(BinaryOp),
    /// `where(cond, a, b)`.
    Select,
    Cast(DType),
    Reduce {
        op: ReduceOp,
        axes: Vec<usize>,
    },
    MatMul,
    /// A view with the node's shape: no data moves.
    Reshape,
    Permute(Vec<usize>),
    /// `out[i] = in[offset + Σ coord_k * strides[k]]` over the contiguous input, signed strides.
    Strided {
        kind: StridedKind,
        offset: i64,
        strides: Vec<i64>,
    },
    /// Concatenate all inputs along an axis.
    Concat(usize),
    /// Constant padding: `before[k]` elements ahead of axis `k`; `value` is the raw word.
    Pad {
        before: Vec<usize>,
        value: u32,
    },
    /// `take(x, indices, axis)` with i32 indices (clamped; see [`GatherKernel`]).
    Gather(usize),
    /// NCHW × OIHW convolution.
    Conv2d {
        window: Window,
        groups: usize,
    },
    Pool {
        kind: PoolKind,
        window: Window,
    },
    /// An f32 tensor drawn from a seeded counter-based generator (see `ops/random.rs`).
    Random(RandomSpec),
    /// A user's typed elementwise function, applied (see [`custom::ElementwiseFn`]).
    Custom(Box<custom::CustomElementwise>),
    /// A user's raw WGSL kernel (GPU only; see [`custom::RawWgsl`]).
    RawWgsl(Arc<custom::RawWgsl>),
}

impl Op {
    /// The op's name, used for default node names and messages.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Constant(_) => "constant",
            Op::Placeholder => "placeholder",
            Op::Unary(u) => u.name(),
            Op::Binary(b) => b.name(),
            Op::Select => "where",
            Op::Cast(_) => "cast",
            Op::Reduce { op, .. } => op.name(),
            Op::MatMul => "matmul",
            Op::Reshape => "reshape",
            Op::Permute(_) => "transpose",
            Op::Strided { kind, .. } => kind.name(),
            Op::Concat(_) => "concat",
            Op::Pad { .. } => "pad",
            Op::Gather(_) => "take",
            Op::Conv2d { .. } => "conv2d",
            Op::Pool { kind, .. } => kind.name(),
            Op::Random(r) => r.name(),
            Op::Custom(_) => "custom",
            Op::RawWgsl(_) => "raw_wgsl",
        }
    }

    /// Computed one element at a time from the same position of its (broadcast) inputs.
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Cast(_) | Op::Custom(_)
        )
    }

    /// Produces no new data: its output aliases its input's storage.
    pub fn is_view(&self) -> bool {
        matches!(self, Op::Reshape)
    }

    /// Runs only on a GPU.
    pub fn is_gpu_only(&self) -> bool {
        matches!(self, Op::RawWgsl(_))
    }

    /// Has no inputs.
    pub fn is_leaf(&self) -> bool {
        matches!(self, Op::Constant(_) | Op::Placeholder)
    }
}

/// A unit of device work after fusion: what a `Dispatch` step runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Kernel {
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
    Random(RandomKernel),
    RawWgsl(custom::RawKernel),
}

impl Kernel {
    /// A short human-readable description for plans and traces.
    pub fn describe(&self) -> String {
        match self {
            Kernel::Elementwise(k) => {
                let viewed: Vec<String> = (0..k.inputs.len())
                    .filter(|&i| k.view(i).is_some())
                    .map(|i| format!("in{i}"))
                    .collect();
                if viewed.is_empty() {
                    format!("elementwise {}", k.expr.describe())
                } else {
                    format!(
                        "elementwise {} (strided views of {})",
                        k.expr.describe(),
                        viewed.join(", ")
                    )
                }
            }
            Kernel::Reduce(k) => {
                let of = match &k.prologue {
                    None => k.in_shape.to_string(),
                    Some(p) => format!("{} {}", p.expr.describe(), k.in_shape),
                };
                let pass = match k.pass {
                    reduce::Pass::Whole => String::new(),
                    reduce::Pass::Partial { chunk } => format!(" in chunks of {chunk}"),
                    reduce::Pass::MeanOfPartials { count } => {
                        format!(" of partial sums of {count} elements")
                    }
                    reduce::Pass::ArgOfPartials { chunks } => {
                        format!(" among {chunks} chunk winners")
                    }
                };
                let base = format!("{} over axes {:?} of {of}{pass}", k.op.name(), k.axes);
                match &k.epilogue {
                    None => base,
                    Some(e) => format!("{base} then {}", e.expr.describe()),
                }
            }
            Kernel::MatMul(k) => match &k.epilogue {
                None => format!("matmul {} @ {}", k.a, k.b),
                Some(e) => format!("matmul {} @ {} then {}", k.a, k.b, e.expr.describe()),
            },
            Kernel::Permute(k) => format!("transpose {:?} of {}", k.perm, k.in_shape),
            Kernel::Strided(k) => format!("{} to {}", k.kind.name(), k.out_shape),
            Kernel::Concat(k) => format!("concat axis {} to {}", k.axis, k.out_shape),
            Kernel::Pad(k) => format!("pad {} to {}", k.in_shape, k.out_shape),
            Kernel::Gather(k) => format!("take axis {} of {}", k.axis, k.x_shape),
            Kernel::Conv2d(k) => {
                let base = format!("conv2d {} * {}", k.x, k.w);
                match &k.epilogue {
                    None => base,
                    Some(e) => format!("{base} then {}", e.expr.describe()),
                }
            }
            Kernel::Pool(k) => format!("{} {:?} of {}", k.kind.name(), k.window.kernel, k.x),
            Kernel::Random(k) => format!(
                "{} of {} (seed {})",
                k.spec.name(),
                k.out_shape,
                k.spec.seed
            ),
            Kernel::RawWgsl(k) => format!("raw WGSL '{}' ({})", k.name, k.entry_point),
        }
    }

    /// The kernel's WGSL source.
    pub fn wgsl(&self) -> String {
        let generated = match self {
            Kernel::Elementwise(k) => k.wgsl(),
            Kernel::Reduce(k) => k.wgsl(),
            Kernel::MatMul(k) => k.wgsl(),
            Kernel::Permute(k) => k.wgsl(),
            Kernel::Strided(k) => k.wgsl(),
            Kernel::Concat(k) => k.wgsl(),
            Kernel::Pad(k) => k.wgsl(),
            Kernel::Gather(k) => k.wgsl(),
            Kernel::Conv2d(k) => k.wgsl(),
            Kernel::Pool(k) => k.wgsl(),
            Kernel::Random(k) => k.wgsl(),
            Kernel::RawWgsl(k) => return k.source.clone(),
        };
        crate::ops::wgsl::with_f16_support(generated)
    }

    /// The WGSL entry point.
    pub fn entry_point(&self) -> &str {
        match self {
            Kernel::RawWgsl(k) => &k.entry_point,
            _ => "main",
        }
    }

    /// Whether [`Kernel::run_cpu`] can run it (raw WGSL kernels are GPU only).
    pub fn has_cpu(&self) -> bool {
        !matches!(self, Kernel::RawWgsl(_))
    }

    /// Run on the CPU; `inputs` are the input tensors' words in binding order. A kernel
    /// without a CPU implementation ([`Kernel::has_cpu`]) yields nothing; callers check first.
    pub fn run_cpu(&self, inputs: &[&[u32]]) -> Vec<u32> {
        match self {
            Kernel::RawWgsl(_) => Vec::new(),
            Kernel::Elementwise(k) => k.run_cpu(inputs),
            Kernel::Reduce(k) => k.run_cpu(inputs),
            Kernel::MatMul(k) => k.run_cpu(inputs),
            Kernel::Permute(k) => k.run_cpu(inputs[0]),
            Kernel::Strided(k) => k.run_cpu(inputs[0]),
            Kernel::Concat(k) => k.run_cpu(inputs),
            Kernel::Pad(k) => k.run_cpu(inputs[0]),
            Kernel::Gather(k) => k.run_cpu(inputs[0], inputs[1]),
            Kernel::Conv2d(k) => k.run_cpu(inputs),
            Kernel::Pool(k) => k.run_cpu(inputs[0]),
            Kernel::Random(k) => k.run_cpu(),
        }
    }

    /// The workgroup grid `(x, y)` this kernel is dispatched with, or `None` if it exceeds
    /// `max_per_dim` squared.
    pub fn workgroups(&self, max_per_dim: u32) -> Option<(u32, u32)> {
        crate::ops::wgsl::grid(self.invocations(), self.workgroup_size(), max_per_dim)
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
        match self {
            Kernel::MatMul(k) => k.workgroup_size(),
            Kernel::RawWgsl(k) => k.workgroup_size,
            _ => crate::ops::wgsl::WORKGROUP,
        }
    }

    /// The kernel as it should run on an adapter: strategies that depend on the kind of
    /// device (e.g. matmul blocking) are chosen here. The CPU backend runs kernels unchanged.
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
        match self {
            Kernel::MatMul(k) => Some(k.loop_iterations()),
            Kernel::Conv2d(k) => Some(k.loop_iterations()),
            Kernel::Pool(k) => Some(k.loop_iterations()),
            _ => None,
        }
    }

    /// How many invocations the WGSL kernel is dispatched with.
    pub fn invocations(&self) -> u64 {
        match self {
            Kernel::Elementwise(k) => k.invocations(),
            Kernel::MatMul(k) => k.invocations(),
            Kernel::Reduce(k) => k.invocations(),
            Kernel::Permute(k) => k.out_shape.numel() as u64,
            Kernel::Strided(k) => k.out_shape.numel() as u64,
            Kernel::Concat(k) => k.out_shape.numel() as u64,
            Kernel::Pad(k) => k.out_shape.numel() as u64,
            Kernel::Gather(k) => k.out_shape.numel() as u64,
            Kernel::Conv2d(k) => k.out_shape().numel() as u64,
            Kernel::Pool(k) => k.out.numel() as u64,
            Kernel::Random(k) => k.out_shape.numel() as u64,
            Kernel::RawWgsl(k) => k.invocations,
        }
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

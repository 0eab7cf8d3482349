//! What each op IS: the closed set of primitives, their properties, and the kernels that
//! implement them. Each family file holds its shape/dtype rule, CPU reference kernel and WGSL.
//! Composites (softmax, mean of several axes…) are graph builders over these, in `graph/build.rs`.

pub mod elementwise;
pub mod elementwise_cpu;
pub mod matmul;
pub mod movement;
pub mod random;
pub mod reduce;

pub use elementwise::{BinaryOp, ElementwiseKernel, Expr, UnaryOp};
pub use matmul::MatMulKernel;
pub use movement::PermuteKernel;
pub use random::{Distribution, RandomKernel, RandomSpec};
pub use reduce::{ReduceKernel, ReduceOp};

use crate::{DType, HostTensor};

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
    /// An f32 tensor drawn from a seeded counter-based generator (see `ops/random.rs`).
    Random(RandomSpec),
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
            Op::Random(r) => r.name(),
        }
    }

    /// Computed one element at a time from the same position of its (broadcast) inputs.
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            Op::Unary(_) | Op::Binary(_) | Op::Select | Op::Cast(_)
        )
    }

    /// Produces no new data: its output aliases its input's storage.
    pub fn is_view(&self) -> bool {
        matches!(self, Op::Reshape)
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
    Random(RandomKernel),
}

impl Kernel {
    /// A short human-readable description for plans and traces.
    pub fn describe(&self) -> String {
        match self {
            Kernel::Elementwise(k) => format!("elementwise {}", k.expr.describe()),
            Kernel::Reduce(k) => {
                format!("{} over axes {:?} of {}", k.op.name(), k.axes, k.in_shape)
            }
            Kernel::MatMul(k) => format!("matmul {} @ {}", k.a, k.b),
            Kernel::Permute(k) => format!("transpose {:?} of {}", k.perm, k.in_shape),
            Kernel::Random(k) => format!(
                "{} of {} (seed {})",
                k.spec.name(),
                k.out_shape,
                k.spec.seed
            ),
        }
    }

    /// The kernel's WGSL source.
    pub fn wgsl(&self) -> String {
        match self {
            Kernel::Elementwise(k) => k.wgsl(),
            Kernel::Reduce(k) => k.wgsl(),
            Kernel::MatMul(k) => k.wgsl(),
            Kernel::Permute(k) => k.wgsl(),
            Kernel::Random(k) => k.wgsl(),
        }
    }

    /// Run on the CPU; `inputs` are the input tensors' words in binding order.
    pub fn run_cpu(&self, inputs: &[&[u32]]) -> Vec<u32> {
        match self {
            Kernel::Elementwise(k) => k.run_cpu(inputs),
            Kernel::Reduce(k) => k.run_cpu(inputs[0]),
            Kernel::MatMul(k) => k.run_cpu(inputs[0], inputs[1]),
            Kernel::Permute(k) => k.run_cpu(inputs[0]),
            Kernel::Random(k) => k.run_cpu(),
        }
    }

    /// How many invocations the WGSL kernel is dispatched with (one per output element).
    pub fn invocations(&self) -> u64 {
        (match self {
            Kernel::Elementwise(k) => k.out_shape.numel(),
            Kernel::Reduce(k) => k.out_shape.numel(),
            Kernel::MatMul(k) => k.out.numel(),
            Kernel::Permute(k) => k.out_shape.numel(),
            Kernel::Random(k) => k.out_shape.numel(),
        }) as u64
    }
}

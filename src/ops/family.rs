//! The two traits every op family implements, so that everything about an op lives in its
//! family's file:
//!
//! * [`Family`] — implemented by the family's op type (the payload of its [`Op`](super::Op) variant): the
//!   op's name, arity and properties, its shape/dtype rule ([`Family::infer`]), its lowering
//!   to kernels, what it gives for empty inputs, and its gradient rule ([`Family::grad`]).
//!   Graph files go through it too: the op's attributes are serde types in the family's
//!   `file` module, written by [`Family::write_attrs`], read by [`Family::read`] and checked
//!   by rebuilding the node through the public builders ([`Family::rebuild`]).
//! * [`KernelDef`] — implemented by each kernel type the family lowers to: its WGSL, its CPU
//!   kernel, its dispatch size and description.
//!
//! `ops/mod.rs` registers each family once (a variant of [`Op`](super::Op) and of [`Kernel`] and one arm
//! in [`Op::family`](super::Op::family) and [`Kernel::as_dyn`](super::Kernel::as_dyn)); every other pass calls through the traits, so no
//! `match` over ops is repeated elsewhere. See `docs/architecture.md` for a worked example.

use super::matmul::Epilogue;
use super::Kernel;
use crate::graph::def::{NodeDef, NodeIn, NodeOut};
use crate::graph::{Graph, Tensor};
use crate::{DType, HostTensor, Result, Shape};
use std::fmt;

/// How many inputs an op takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    Exactly(usize),
    /// At least this many (concat).
    AtLeast(usize),
    /// Whatever the op was built with (user kernels).
    Any,
}

impl Arity {
    /// Whether `n` inputs fit.
    pub fn admits(self, n: usize) -> bool {
        match self {
            Arity::Exactly(k) => n == k,
            Arity::AtLeast(k) => n >= k,
            Arity::Any => true,
        }
    }
}

impl fmt::Display for Arity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arity::Exactly(k) => write!(f, "{k}"),
            Arity::AtLeast(k) => write!(f, "{k} or more"),
            Arity::Any => write!(f, "any number of"),
        }
    }
}

/// Why a family's shape/dtype rule ([`Family::infer`]) refused its inputs. The graph turns
/// it into an [`crate::Error::Build`] whose [`crate::BuildKind`] carries the inputs' dtypes or
/// shapes. A plain `String` converts to [`Reject::Shape`], so helpers about shapes, ranks and
/// attributes return `String`s and `?` works; a rule says [`Reject::DType`] where the inputs'
/// dtypes are the fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reject {
    /// A dtype the op does not take, or dtypes that must agree and do not.
    DType(String),
    /// Shapes, ranks, sizes or attributes that do not fit.
    Shape(String),
}

impl Reject {
    /// A [`Reject::DType`].
    pub fn dtype(message: impl Into<String>) -> Reject {
        Reject::DType(message.into())
    }

    /// The message, whatever the kind.
    pub fn message(&self) -> &str {
        match self {
            Reject::DType(m) | Reject::Shape(m) => m,
        }
    }
}

impl From<String> for Reject {
    fn from(message: String) -> Reject {
        Reject::Shape(message)
    }
}

impl From<&str> for Reject {
    fn from(message: &str) -> Reject {
        Reject::Shape(message.into())
    }
}

/// What a builder declares about a node's output where the op's attributes do not fix it:
/// the target of a reshape or view, the extent of a strided read, the padded shape, the
/// reduced shape (which says whether reduced axes are kept), a random tensor's shape, a
/// placeholder's shape and dtype. [`Family::infer`] checks it against the inputs; ops whose
/// attributes fix their output ignore it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Declared<'a> {
    pub shape: Option<&'a Shape>,
    pub dtype: Option<DType>,
}

impl<'a> Declared<'a> {
    /// Nothing declared: the op's rule alone gives the output.
    pub fn none() -> Self {
        Declared::default()
    }

    /// The output shape (the dtype follows from the rule).
    pub fn shape(shape: &'a Shape) -> Self {
        Declared {
            shape: Some(shape),
            dtype: None,
        }
    }

    /// The declared shape, or an error saying that `op` needs one.
    pub fn need_shape(&self, op: &str) -> std::result::Result<&'a Shape, String> {
        self.shape
            .ok_or_else(|| format!("{op} needs a declared output shape"))
    }
}

/// A value a lowering reads or produces: one of the node's inputs, or a partial result made
/// with [`LowerCx::partial`]. Opaque to the families.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arg(pub(crate) crate::id::ValueId);

/// What the compiler offers a lowering: partial passes (split-K products, chunked
/// reductions) whose output the node's last kernel reads.
pub trait Emit {
    /// Dispatch `kernel` over `inputs` into a new value of `shape` and `dtype`.
    fn partial(&mut self, kernel: Kernel, shape: Shape, dtype: DType, inputs: Vec<Arg>) -> Arg;
}

/// One node being lowered.
pub struct LowerCx<'a> {
    /// The node's name (for messages).
    pub name: &'a str,
    /// The node's output.
    pub shape: &'a Shape,
    pub dtype: DType,
    /// The inputs' shapes and dtypes, in argument order.
    pub inputs: &'a [(Shape, DType)],
    /// The inputs as values, in argument order.
    pub args: &'a [Arg],
    /// The device the node runs on (a lowering may pick another algorithm for `cpu:0`).
    pub device: crate::device::Device,
    pub(crate) emit: &'a mut dyn Emit,
}

impl LowerCx<'_> {
    /// Shape of input `i`.
    pub fn in_shape(&self, i: usize) -> &Shape {
        &self.inputs[i].0
    }

    /// Dtype of input `i`.
    pub fn in_dtype(&self, i: usize) -> DType {
        self.inputs[i].1
    }

    /// Dispatch a partial pass (see [`Emit::partial`]) into a value of the node's dtype.
    pub fn partial(&mut self, kernel: Kernel, shape: Shape, inputs: Vec<Arg>) -> Arg {
        let dtype = self.dtype;
        self.emit.partial(kernel, shape, dtype, inputs)
    }

    /// [`LowerCx::partial`] into a value of `dtype` (sort keys, counts).
    pub fn partial_as(
        &mut self,
        kernel: Kernel,
        shape: Shape,
        dtype: DType,
        inputs: Vec<Arg>,
    ) -> Arg {
        self.emit.partial(kernel, shape, dtype, inputs)
    }

    /// The node's last kernel reading all of the node's inputs.
    pub fn dispatch(&self, kernel: Kernel) -> Lowered {
        Lowered::Dispatch {
            kernel,
            inputs: self.args.to_vec(),
        }
    }
}

/// Where a node's value comes from after lowering.
// One lives per node for a moment during lowering, where a 264-byte move costs nothing
// against the work around it; boxing the kernel would add an allocation per node instead.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Lowered {
    /// Fed by name at run time.
    Feed,
    /// Baked into the plan.
    Constant(HostTensor),
    /// Shares the storage of an input (no data moves).
    View(Arg),
    /// A variable, kept by the session outside the plan's arena, with its first value.
    Variable(crate::ops::leaf::Initializer),
    /// The new value of a variable: the node is a view of `value`, which the run copies into
    /// `variable`'s storage when it finishes (reads during the run see the old value).
    Assign { variable: Arg, value: Arg },
    /// The result of a kernel over `inputs`.
    Dispatch { kernel: Kernel, inputs: Vec<Arg> },
}

/// What an op gives when an input is empty but its output is not (an empty output is always
/// an empty constant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmptyInput {
    /// Every element is this word (a sum over nothing is 0, `[m,0]@[0,n]` is zeros).
    Fill(u32),
    /// Lower as usual; the lowering skips the empty inputs (concat).
    Lower,
    /// Cannot happen for a node the builders accept; an internal error if it does.
    Impossible,
}

/// A node whose gradient is asked for (see [`Family::grad`]): its inputs and output as
/// tensors of the graph being extended, and the gradient arriving at its output.
#[derive(Debug, Clone)]
pub struct GradCx<'a> {
    /// The node's name (for messages).
    pub name: &'a str,
    /// The node's inputs, in argument order.
    pub inputs: &'a [Tensor],
    /// The node's output (its forward value, for rules that reuse it: `exp`, `sqrt`…).
    pub output: Tensor,
    /// The gradient of the differentiated sum with respect to the output: same shape and
    /// dtype as the output.
    pub dy: Tensor,
    /// Which inputs need a gradient: a rule may skip the others (answer `None`).
    pub wanted: &'a [bool],
}

impl GradCx<'_> {
    /// Whether input `i` needs a gradient.
    pub fn wants(&self, i: usize) -> bool {
        self.wanted.get(i).copied().unwrap_or(false)
    }
}

/// Everything about the ops of one family. Implemented by the payload of the family's
/// [`Op`](super::Op) variant.
pub trait Family: fmt::Debug {
    /// The op's name: default node names, messages, and the `op` of graph files.
    fn name(&self) -> &'static str;

    /// How many inputs it takes.
    fn arity(&self) -> Arity;

    /// Computed one element at a time from the same position of its (broadcast) inputs;
    /// fusion merges such ops into one expression.
    fn is_elementwise(&self) -> bool {
        false
    }

    /// Produces no new data: its output aliases its input's storage.
    fn is_view(&self) -> bool {
        false
    }

    /// Runs only on a GPU (raw WGSL).
    fn is_gpu_only(&self) -> bool {
        false
    }

    /// Has no inputs and no kernel (constants, placeholders, variables).
    fn is_leaf(&self) -> bool {
        false
    }

    /// A variable: state the session keeps across runs. Placed on its scope's device or the
    /// default device, never moved to follow a consumer, so every plan finds it in one place.
    fn is_variable(&self) -> bool {
        false
    }

    /// An assignment: runs where the variable it writes (its first input) lives.
    fn is_assignment(&self) -> bool {
        false
    }

    /// The shape/dtype rule: the output `(shape, dtype)` for inputs of these shapes and dtypes
    /// (in argument order, already checked against [`Family::arity`]), or why there is none.
    /// `declared` carries what the builder declares where the op's attributes do not fix the
    /// output (see [`Declared`]). The graph reports the message under the op's name and the
    /// caller's location, and enforces the rules common to every op (see
    /// `Graph::add_op`), so a family checks only its own.
    fn infer(
        &self,
        inputs: &[(Shape, DType)],
        declared: Declared<'_>,
    ) -> std::result::Result<(Shape, DType), Reject>;

    /// The node as kernels (or a feed, constant or view).
    fn lower(&self, cx: &mut LowerCx<'_>) -> Result<Lowered>;

    /// The rule for an empty input with a non-empty output (see [`EmptyInput`]).
    fn on_empty_input(&self, _dtype: DType) -> EmptyInput {
        EmptyInput::Impossible
    }

    /// Whether a node of this op may take or produce tensors with dimensions known only at
    /// run time: its [`Family::rebuild`] must give the right node for any sizes from the op
    /// and the declared shape alone (a slice's offsets and strides, computed from the sizes
    /// when it was built, cannot; see `graph/dims.rs`).
    fn rebinds(&self) -> bool {
        false
    }

    /// The shape/dtype rule under other sizes of the run-time dimensions than the node was
    /// built with (the second probe of `graph/dims.rs`). A family whose attributes were
    /// computed from the sizes (a strided read's offset) answers with what does not depend on
    /// them; the binding runs the full rule again.
    fn infer_resized(
        &self,
        inputs: &[(Shape, DType)],
        declared: Declared<'_>,
    ) -> std::result::Result<(Shape, DType), Reject> {
        self.infer(inputs, declared)
    }

    /// The node rebuilt for a binding of run-time sizes (see `graph/dims.rs`): `node` has the
    /// bound shape, `inputs` the bound inputs; `probe_in` and `probe_out` are the shapes the
    /// node was built with (probe sizes for the run-time dimensions). By default the node is
    /// rebuilt as a graph file's is ([`Family::rebuild`]).
    fn rebind(
        &self,
        g: &mut Graph,
        node: &NodeDef,
        inputs: &[Tensor],
        _probe_in: &[Shape],
        _probe_out: &Shape,
    ) -> Result<Tensor> {
        self.rebuild(g, node, inputs)
    }

    /// Graph files: why the op cannot be saved, if it cannot (a raw kernel whose output rule
    /// is a closure).
    fn unsavable(&self) -> Option<String> {
        None
    }

    /// Graph files: write the op's attributes, the fields after the node's common ones
    /// (`name`, `op`, `inputs`, `shape`, `dtype`, `device`), with [`NodeOut::attrs`] or
    /// [`NodeOut::tagged`]. Ops without attributes write nothing.
    fn write_attrs(&self, _out: &mut NodeOut) -> Result<()> {
        Ok(())
    }

    /// Graph files: the op of this family that `node` names, decoded from its attributes
    /// (and from its declared shape and dtype where the format takes them from there), or
    /// `None` when no op of this family has that name. Registered once in [`Op::read`](super::Op::read).
    fn read(node: &NodeIn<'_>) -> Option<Result<Self>>
    where
        Self: Sized;

    /// Graph files: the node rebuilt through the public builder an API user would call, with
    /// arguments derived from the op's attributes and the node's declared `shape`, `dtype`
    /// and `name` (`inputs` are the node's inputs, already checked against [`Family::arity`]).
    /// The builder runs every shape and dtype rule again, and the op it builds must equal
    /// `self`, so a file only describes nodes the API can build.
    fn rebuild(&self, g: &mut Graph, node: &NodeDef, inputs: &[Tensor]) -> Result<Tensor>;

    /// The vector-Jacobian product: for each input, the gradient of the differentiated sum
    /// with respect to it, built as graph nodes with the public builders, of the input's
    /// shape and dtype (a rule undoes broadcasting with [`Graph::sum_to`]); `None` where no
    /// gradient flows (integer and boolean inputs, comparisons, indices, unwanted inputs).
    /// The default answers [`Error::NotDifferentiable`](crate::Error::NotDifferentiable).
    fn grad(&self, _g: &mut Graph, cx: &GradCx<'_>) -> Result<Vec<Option<Tensor>>> {
        Err(crate::Error::NotDifferentiable {
            op: self.name().to_string(),
            node: cx.name.to_string(),
            message: "this op has no gradient rule".into(),
        })
    }
}

/// What a kernel prepared once per plan from its constant inputs
/// ([`KernelDef::prepare_cpu`]); only the kernel that made it reads it.
pub struct CpuPrepared {
    state: Box<dyn std::any::Any + Send + Sync>,
    bytes: u64,
}

impl CpuPrepared {
    /// `state`, which holds `bytes` bytes of host memory (a packed weight): the session
    /// counts them ([`Counters::cpu_prepared_bytes`](crate::Counters)).
    pub fn new<T: std::any::Any + Send + Sync>(state: T, bytes: u64) -> Self {
        CpuPrepared {
            state: Box::new(state),
            bytes,
        }
    }

    /// The state, if it is a `T`.
    pub fn get<T: std::any::Any>(&self) -> Option<&T> {
        self.state.downcast_ref()
    }

    /// The host memory it holds.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// One input of a CPU kernel run by [`KernelDef::run_cpu_into`].
#[derive(Debug, Clone, Copy)]
pub enum CpuIn<'a> {
    /// The input's words, in row-major order (disjoint from the output).
    Words(&'a [u32]),
    /// The output's own slot: the output is written in place over this input.
    Output,
}

impl<'a> CpuIn<'a> {
    /// The input's words, given the output slot's current contents.
    pub fn or_out<'b>(&self, out: &'b [u32]) -> &'b [u32]
    where
        'a: 'b,
    {
        match self {
            CpuIn::Words(w) => w,
            CpuIn::Output => out,
        }
    }
}

/// The inputs' words when none of them is the output's own slot (what a kernel that writes
/// its output as it goes needs).
pub(crate) fn disjoint_words<'a>(inputs: &[CpuIn<'a>]) -> Option<Vec<&'a [u32]>> {
    inputs
        .iter()
        .map(|i| match i {
            CpuIn::Words(w) => Some(*w),
            CpuIn::Output => None,
        })
        .collect()
}

/// A copy of the output slot when an input is the slot itself ([`CpuIn::Output`]): a kernel
/// that overwrites the slot reads that input from the copy (see [`input_words`]).
pub(crate) fn own_copy(inputs: &[CpuIn<'_>], out: &[u32]) -> Option<Vec<u32>> {
    inputs
        .iter()
        .any(|i| matches!(i, CpuIn::Output))
        .then(|| out.to_vec())
}

/// Every input's words, the output's own slot read from [`own_copy`]'s copy.
pub(crate) fn input_words<'a>(inputs: &[CpuIn<'a>], own: &'a Option<Vec<u32>>) -> Vec<&'a [u32]> {
    inputs
        .iter()
        .map(|i| match i {
            CpuIn::Words(w) => *w,
            CpuIn::Output => own.as_deref().unwrap_or_default(),
        })
        .collect()
}

/// [`KernelDef::run_cpu_into`]'s default, for fast paths to fall back on: `kernel`'s
/// reference into a new vector (an input given as [`CpuIn::Output`] read from a copy of the
/// slot), copied into `out`.
pub(crate) fn run_via_reference<K: KernelDef + ?Sized>(
    kernel: &K,
    inputs: &[CpuIn<'_>],
    out: &mut [u32],
) -> crate::Result<()> {
    let own = own_copy(inputs, out);
    let words = kernel.run_reference(&input_words(inputs, &own))?;
    if words.len() != out.len() {
        return Err(crate::Error::Internal(format!(
            "{} produced {} words for an output of {}",
            kernel.describe(),
            words.len(),
            out.len()
        )));
    }
    out.copy_from_slice(&words);
    Ok(())
}

/// The error of a kernel given fewer inputs than it binds.
pub(crate) fn missing_inputs(kernel: &dyn KernelDef, got: usize) -> crate::Error {
    crate::Error::Internal(format!(
        "{} ran with {got} input(s), fewer than it binds",
        kernel.describe()
    ))
}

/// What a kernel does, as traces group kernels and the memory picture colours their outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum KernelClass {
    Elementwise,
    /// Reductions and scans (folds along an axis).
    Reduce,
    MatMul,
    /// Kernels that only move data (permute, strided copies, concat, pad, gather).
    Movement,
    /// Convolutions, pooling and their backward kernels.
    Nn,
    Random,
    /// Users' raw WGSL.
    Custom,
}

/// Everything about one kind of kernel: its WGSL, its CPU implementation, its dispatch, and
/// the facts traces and fusion ask about it (kind, class, FLOPs, epilogues), so that no other
/// module matches over kernel types.
pub trait KernelDef: fmt::Debug {
    /// A short description for plans and traces.
    fn describe(&self) -> String;

    /// The kernel type's name in profiles and traces (`"matmul"`, `"pool"`, ...).
    fn kind(&self) -> &'static str;

    /// The class traces and the memory picture group it under.
    fn class(&self) -> KernelClass;

    /// Floating-point operations of one dispatch writing `out_elements` elements; `None` for
    /// kernels that only move data (the default).
    fn flops(&self, out_elements: u64) -> Option<u64> {
        let _ = out_elements;
        None
    }

    /// For a kernel that can take fused elementwise work after it (an [`Epilogue`]): its
    /// output's shape and dtype, and whether an epilogue whose extra inputs have shapes
    /// `extra` can be attached now. `None` (the default) for kernels that never take one.
    fn epilogue_host(&self, extra: &[&Shape]) -> Option<(&Shape, DType, bool)> {
        let _ = extra;
        None
    }

    /// Whether cpu:0 runs this kernel's epilogue as an elementwise kernel over its finished
    /// output, so that extra inputs may be read through views ([`Epilogue::views`]).
    fn epilogue_views_on_cpu(&self) -> bool {
        false
    }

    /// Attach `epilogue` (only called where [`KernelDef::epilogue_host`] accepted one).
    fn set_epilogue(&mut self, epilogue: Option<Epilogue>) {
        let _ = epilogue;
    }

    /// Take `consumer`, the only reader of this kernel's output, as a final stage on
    /// cpu:0 (a convolution takes the max pool after it: the pool reads each band of the
    /// convolution's rows while they are in cache, and the full-size output is never
    /// stored). `true` when it did; the kernel then writes the consumer's output. Only asked
    /// for steps on cpu:0: a kernel that took a consumer has no WGSL for it.
    fn absorb(&mut self, consumer: &Kernel) -> bool {
        let _ = consumer;
        false
    }

    /// The generated WGSL (before f16 support is switched on).
    fn wgsl(&self) -> String;

    /// The CPU kernel; `inputs` are the input tensors' words in binding order. Only called
    /// when [`KernelDef::has_cpu`] holds.
    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>>;

    /// The CPU kernel writing its result into `out` (the output's slot: exactly the output's
    /// element count in words). An input given as [`CpuIn::Output`] is that same slot (the
    /// memory plan wrote the output in place over a dying input): its words are `out`'s
    /// contents on entry. The default runs [`KernelDef::run_reference`] and copies; fast kernels
    /// override it to write in place, in parallel. Only called when [`KernelDef::has_cpu`]
    /// holds.
    fn run_cpu_into(&self, inputs: &[CpuIn<'_>], out: &mut [u32]) -> crate::Result<()> {
        run_via_reference(self, inputs, out)
    }

    /// Work cpu:0 does once per plan on the inputs that are plan constants (`constants[i]`
    /// holds input i's words when it is one), such as packing a weight matrix for the
    /// product's micro-kernel. What it returns is handed to
    /// [`KernelDef::run_cpu_prepared`] on every run. `None` (the default): nothing to do.
    fn prepare_cpu(&self, constants: &[Option<&[u32]>]) -> Option<CpuPrepared> {
        let _ = constants;
        None
    }

    /// [`KernelDef::run_cpu_into`] with what [`KernelDef::prepare_cpu`] made from the same
    /// constants.
    fn run_cpu_prepared(
        &self,
        inputs: &[CpuIn<'_>],
        out: &mut [u32],
        prepared: &CpuPrepared,
    ) -> crate::Result<()> {
        let _ = prepared;
        self.run_cpu_into(inputs, out)
    }

    /// Whether the WGSL declares or computes f16 values, so it needs `enable f16;` and the
    /// f16 helpers (decided from the kernel's dtypes, not its text).
    fn uses_f16(&self) -> bool;

    /// Whether [`KernelDef::run_reference`] exists (raw WGSL kernels are GPU only).
    fn has_cpu(&self) -> bool {
        true
    }

    /// How many invocations the WGSL kernel is dispatched with.
    fn invocations(&self) -> u64;

    /// Invocations per workgroup.
    fn workgroup_size(&self) -> u32 {
        super::wgsl::WORKGROUP
    }

    /// The WGSL entry point.
    fn entry_point(&self) -> &str {
        "main"
    }

    /// Upper bound on loop iterations per invocation, for kernels whose loops grow with their
    /// shapes (see [`super::LOOP_LIMIT`]).
    fn loop_iterations(&self) -> Option<u64> {
        None
    }

    /// Where each input lies inside the output, in elements, when the inputs are disjoint
    /// runs of it (a concatenation along its outermost non-unit axis): their producers may
    /// then write straight into the output's slot, and the kernel copies only the others.
    /// `None` (the default) for kernels whose inputs are not runs of their output.
    fn input_runs(&self) -> Option<Vec<usize>> {
        None
    }

    /// Whether input `input` is read only at the index the output is written, so the output
    /// may take that input's slot once it dies (each invocation reads its element before
    /// writing it). `false` (the default) for kernels that read around, broadcast or view.
    fn reads_at_output_index(&self, input: usize, output: &Shape) -> bool {
        let _ = (input, output);
        false
    }

    /// Whether a binding larger than the device's binding limit may be split into windows
    /// the kernel is dispatched over one at a time (its WGSL indexes each binding only
    /// through the offsets the windows rebase). `false` for users' raw WGSL, whose indexing
    /// is not ours to rewrite.
    fn binding_windows(&self) -> bool {
        true
    }
}

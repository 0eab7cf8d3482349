//! Raw WGSL kernels (CuPy's `RawKernel`): the user's shader, checked by naga against the
//! binding convention, run on GPUs only.

use super::*;

// ---------------------------------------------------------------------------------------
// Raw WGSL kernels
// ---------------------------------------------------------------------------------------

/// The output shape and dtype of a raw kernel, from the inputs' `(shape, dtype)`.
pub type OutputFn =
    dyn Fn(&[(Shape, DType)]) -> Result<(Shape, DType), String> + Send + Sync + 'static;

/// How a raw kernel's output shape and dtype are found.
#[derive(Clone)]
pub enum OutputRule {
    /// Always this shape and dtype.
    Fixed(Shape, DType),
    /// The shape and dtype of input `i`.
    LikeInput(usize),
    /// Computed from the inputs. A graph holding such a kernel cannot be saved as a GraphDef.
    Fn(Arc<OutputFn>),
}

impl fmt::Debug for OutputRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutputRule::Fixed(s, d) => write!(f, "Fixed({s}, {d})"),
            OutputRule::LikeInput(i) => write!(f, "LikeInput({i})"),
            OutputRule::Fn(_) => write!(f, "Fn(..)"),
        }
    }
}

impl PartialEq for OutputRule {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (OutputRule::Fixed(a, b), OutputRule::Fixed(c, d)) => a == c && b == d,
            (OutputRule::LikeInput(a), OutputRule::LikeInput(b)) => a == b,
            (OutputRule::Fn(a), OutputRule::Fn(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// How many invocations a raw kernel is dispatched with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invocations {
    /// One per output element.
    PerOutputElement,
    /// Exactly this many.
    Fixed(u64),
}

/// A raw WGSL compute kernel (CuPy's `RawKernel`), GPU only.
///
/// **Binding convention.** Everything is in `@group(0)`. Input `i` (in the order passed to
/// [`crate::Graph::raw_kernel`]) is `@binding(i)`, the single output is `@binding(n)` for `n`
/// inputs; each is declared `var<storage, read_write>` as a runtime-sized `array<T>` with `T`
/// the tensor's dtype (`f32`, `i32`, `u32`; bool tensors are `u32` words 0/1). Each binding
/// holds exactly its tensor, so `arrayLength(&x)` is its element count; shapes are known
/// when the node is built, so write them into the source if the kernel needs them. There is
/// no other binding: a shader declaring any other one is rejected when the node is built.
/// Inputs are `read_write` only because several bindings may be slices of one arena buffer
/// (see [`crate::ops::wgsl::storage_binding`]): a kernel must write its output
/// only, never an input, or it corrupts values other kernels still read.
///
/// **Dispatch.** The entry point's `@workgroup_size(X)` must be one-dimensional. The kernel
/// is dispatched with `ceil(invocations / X)` workgroups, folded into a 2-D grid when that
/// exceeds the adapter's per-dimension limit (65535 workgroups by default): recover the
/// linear index as `gid.x + gid.y * nwg.x * X` and guard it against the invocation count.
///
/// **Loops.** Mesa's software adapters (lavapipe, llvmpipe GL) silently end an invocation's
/// loops after 65,535 iterations *in total* (all loops of the invocation together). wgflow's
/// own kernels split their work to stay far below that, but it cannot see inside raw WGSL:
/// keep each invocation's loop count well under 65,535 (spread work over more invocations),
/// or results on those adapters are silently wrong. Tensors larger than
/// `max_storage_buffer_binding_size` cannot be bound to a raw kernel (an error at compile).
///
/// ```
/// # fn main() -> wgflow::Result<()> {
/// use wgflow::ops::custom::{Invocations, OutputRule, RawWgsl};
/// let reverse = RawWgsl::new(
///     "reverse",
///     r#"
/// @group(0) @binding(0) var<storage, read_write> x: array<f32>;
/// @group(0) @binding(1) var<storage, read_write> y: array<f32>;
/// @compute @workgroup_size(64)
/// fn reverse(@builtin(global_invocation_id) gid: vec3<u32>) {
///     let n = arrayLength(&y);
///     if (gid.x < n) { y[gid.x] = -x[n - 1u - gid.x]; }
/// }"#,
///     "reverse",
///     OutputRule::LikeInput(0),
///     Invocations::PerOutputElement,
/// );
/// let mut g = wgflow::Graph::new();
/// let x = g.constant([1.0f32, 2.0, 3.0])?;
/// let y = g.raw_kernel(&reverse, &[x])?; // validated here; runs on a GPU only
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RawWgsl {
    pub name: String,
    pub source: String,
    pub entry_point: String,
    pub output: OutputRule,
    pub invocations: Invocations,
    /// Kernels computing the gradient of some inputs, by input index (see
    /// [`RawWgsl::with_gradient`]).
    pub gradients: Vec<(usize, RawWgsl)>,
}

impl RawWgsl {
    pub fn new(
        name: &str,
        source: &str,
        entry_point: &str,
        output: OutputRule,
        invocations: Invocations,
    ) -> RawWgsl {
        RawWgsl {
            name: name.to_string(),
            source: source.to_string(),
            entry_point: entry_point.to_string(),
            output,
            invocations,
            gradients: Vec::new(),
        }
    }

    /// Make the kernel differentiable with respect to input `input`: `kernel` computes that
    /// input's gradient. It follows the same binding convention, over the forward kernel's
    /// `n` inputs at `@binding(0..n)` then `dy`, the gradient arriving at the forward output
    /// (its shape and dtype), at `@binding(n)`; it writes the input's gradient, which must
    /// have the input's shape and dtype (e.g. [`OutputRule::LikeInput`]`(input)`), at
    /// `@binding(n + 1)`. A later call for the same input replaces the earlier kernel.
    ///
    /// [`crate::Graph::raw_kernel`] validates the gradient kernels with the forward one.
    /// Differentiating with respect to an input that has no gradient kernel is an
    /// [`Error::NotDifferentiable`](crate::Error::NotDifferentiable) naming the node. A graph
    /// holding a raw kernel with gradient kernels cannot be saved as a graph file (the format
    /// has no place for them).
    ///
    /// ```
    /// # fn main() -> wgflow::Result<()> {
    /// use wgflow::ops::custom::{Invocations, OutputRule, RawWgsl};
    /// // y = x³ and its gradient dx = 3x²·dy.
    /// const CUBE: &str = "
    /// @group(0) @binding(0) var<storage, read_write> x: array<f32>;
    /// @group(0) @binding(1) var<storage, read_write> y: array<f32>;
    /// @compute @workgroup_size(64)
    /// fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ///     if (gid.x < arrayLength(&y)) { y[gid.x] = x[gid.x] * x[gid.x] * x[gid.x]; }
    /// }";
    /// const CUBE_GRAD: &str = "
    /// @group(0) @binding(0) var<storage, read_write> x: array<f32>;
    /// @group(0) @binding(1) var<storage, read_write> dy: array<f32>;
    /// @group(0) @binding(2) var<storage, read_write> dx: array<f32>;
    /// @compute @workgroup_size(64)
    /// fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ///     let i = gid.x;
    ///     if (i < arrayLength(&dx)) { dx[i] = 3.0 * x[i] * x[i] * dy[i]; }
    /// }";
    /// let kernel = |src| {
    ///     RawWgsl::new("cube", src, "main", OutputRule::LikeInput(0), Invocations::PerOutputElement)
    /// };
    /// let cube = kernel(CUBE).with_gradient(0, kernel(CUBE_GRAD));
    /// let mut g = wgflow::Graph::new();
    /// let x = g.constant([1.0f32, 2.0])?;
    /// let y = g.raw_kernel(&cube, &[x])?;
    /// let dx = g.gradients(y, &[x])?; // a raw kernel node too: it runs on a GPU
    /// assert!(dx[0].is_some());
    /// # Ok(()) }
    /// ```
    pub fn with_gradient(mut self, input: usize, kernel: RawWgsl) -> RawWgsl {
        self.gradients.retain(|(i, _)| *i != input);
        self.gradients.push((input, kernel));
        self
    }

    /// Validate the source with naga and check the entry point and bindings against the
    /// convention for `inputs` inputs; returns the workgroup size.
    pub fn check(&self, inputs: usize) -> crate::Result<u32> {
        let module = crate::ops::wgsl::validate(&self.name, &self.source)?;
        let bad = |m: String| crate::Error::Shader {
            kernel: self.name.clone(),
            message: m,
        };
        let ep = module
            .entry_points
            .iter()
            .find(|e| e.name == self.entry_point)
            .ok_or_else(|| {
                let names: Vec<&str> = module
                    .entry_points
                    .iter()
                    .map(|e| e.name.as_str())
                    .collect();
                bad(format!(
                    "no entry point '{}' (the shader has: {})",
                    self.entry_point,
                    names.join(", ")
                ))
            })?;
        if ep.stage != naga::ShaderStage::Compute {
            return Err(bad(format!(
                "entry point '{}' is not @compute",
                self.entry_point
            )));
        }
        let [x, y, z] = ep.workgroup_size;
        if y != 1 || z != 1 || x == 0 {
            return Err(bad(format!(
                "@workgroup_size({x}, {y}, {z}) must be one-dimensional, e.g. @workgroup_size(64)"
            )));
        }
        let mut output_declared = false;
        for (_, var) in module.global_variables.iter() {
            let Some(b) = &var.binding else { continue };
            let name = var.name.as_deref().unwrap_or("?");
            output_declared |= b.group == 0 && b.binding as usize == inputs;
            if b.group != 0 || b.binding as usize > inputs {
                return Err(bad(format!(
                    "'{name}' is declared at @group({}) @binding({}), but the convention provides only @group(0) @binding(0..={inputs}) ({inputs} input(s) then the output)",
                    b.group, b.binding
                )));
            }
            let storage_rw = matches!(
                var.space,
                naga::AddressSpace::Storage { access } if access.contains(naga::StorageAccess::STORE)
            );
            if !storage_rw {
                return Err(bad(format!(
                    "'{name}' at @binding({}) must be declared var<storage, read_write>",
                    b.binding
                )));
            }
        }
        // Without it the output would never be written, and with one binding too few for
        // the inputs, the kernel would write its last input.
        if !output_declared {
            return Err(bad(format!(
                "the shader declares no @binding({inputs}) for its output ({inputs} input(s) take @binding(0..{inputs}), the output the next)"
            )));
        }
        Ok(x)
    }

    /// Check the shader's bindings against the tensors bound to them, `dtypes` being every
    /// binding's dtype in order (the inputs, then the output): each binding the shader
    /// declares holds its tensor's element type (`bool` is `u32`; a vector or atomic of it
    /// is accepted).
    pub fn check_bindings(&self, dtypes: &[DType]) -> Result<(), String> {
        let module =
            crate::ops::wgsl::validate(&self.name, &self.source).map_err(|e| e.to_string())?;
        for (_, var) in module.global_variables.iter() {
            let Some(b) = &var.binding else { continue };
            let i = b.binding as usize;
            let Some(&want) = dtypes.get(i) else { continue };
            let name = var.name.as_deref().unwrap_or("?");
            let what = if i + 1 == dtypes.len() {
                "the output".to_string()
            } else {
                format!("input {i}")
            };
            let scalar = match &module.types[var.ty].inner {
                naga::TypeInner::Array { base, .. } => match &module.types[*base].inner {
                    naga::TypeInner::Scalar(s)
                    | naga::TypeInner::Vector { scalar: s, .. }
                    | naga::TypeInner::Atomic(s) => Some(*s),
                    _ => None,
                },
                _ => None,
            };
            let held = scalar.and_then(|s| match (s.kind, s.width) {
                (naga::ScalarKind::Float, 4) => Some(DType::F32),
                (naga::ScalarKind::Float, 2) => Some(DType::F16),
                (naga::ScalarKind::Sint, 4) => Some(DType::I32),
                (naga::ScalarKind::Uint, 4) => Some(DType::U32),
                _ => None,
            });
            let fits = held == Some(want) || (want == DType::Bool && held == Some(DType::U32));
            if !fits {
                let wgsl = match want {
                    DType::F32 => "f32",
                    DType::F16 => "f16",
                    DType::I32 => "i32",
                    DType::U32 | DType::Bool => "u32",
                };
                return Err(format!(
                    "'{name}' at @binding({i}) must be array<{wgsl}>: {what} is {want}"
                ));
            }
        }
        Ok(())
    }

    /// The output shape and dtype for inputs `ins`.
    pub fn output_for(&self, ins: &[(Shape, DType)]) -> Result<(Shape, DType), String> {
        match &self.output {
            OutputRule::Fixed(s, d) => Ok((s.clone(), *d)),
            OutputRule::LikeInput(i) => ins.get(*i).cloned().ok_or_else(|| {
                format!(
                    "output is like input {i}, but there are {} inputs",
                    ins.len()
                )
            }),
            OutputRule::Fn(f) => f(ins),
        }
    }
}

/// A raw kernel as lowered: the shader and its resolved dispatch size.
#[derive(Debug, Clone, PartialEq)]
pub struct RawKernel {
    pub name: String,
    pub source: String,
    pub entry_point: String,
    pub workgroup_size: u32,
    pub invocations: u64,
}

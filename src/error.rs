//! The one error type of wgflow. Every variant names what the user needs to fix the problem:
//! the op, the node, the shapes, the device, and (for graph building) the caller's file:line.
//!
//! Where we panic: nowhere on a path a user controls. Internal invariants that passes
//! establish (e.g. a pruned graph is acyclic) are reported as [`Error::Internal`] rather than
//! panicking, so a bug in wgflow surfaces as an error value too.

use crate::{DType, Shape};
use std::panic::Location;

/// Result alias used throughout wgflow.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong when building, compiling or running a graph.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A builder rejected its inputs (shapes, dtypes, attributes); `kind` says which, with
    /// the inputs' facts.
    #[error("{op} at {location}: {message}")]
    Build {
        op: String,
        location: &'static Location<'static>,
        message: String,
        kind: BuildKind,
    },
    /// A graph was asked about a tensor it did not make (a tensor of another graph, or one
    /// built in a clone after cloning).
    #[error("{method} at {location}: tensor #{index} belongs to another graph, not this one")]
    ForeignTensor {
        /// The `Graph` method that was called.
        method: &'static str,
        /// The tensor's node index (in the graph that made it).
        index: usize,
        location: &'static Location<'static>,
    },
    /// A device spec could not be parsed or names no device that exists.
    #[error("device '{spec}': {message}")]
    Device { spec: String, message: String },
    /// A node could not be placed on the device it asked for.
    #[error("cannot place node '{node}' ({op}) on {requested}: {message}")]
    Placement {
        node: String,
        op: String,
        requested: String,
        message: String,
    },
    /// A feed was missing, unknown, or of the wrong shape or dtype; `kind` says which.
    #[error("feed '{name}': {message}")]
    Feed {
        name: String,
        message: String,
        kind: FeedKind,
    },
    /// A fetch names a tensor the session cannot produce.
    #[error("fetch '{name}': {message}")]
    Fetch { name: String, message: String },
    /// A tensor exceeds a limit of the device it was placed on.
    #[error("node '{node}' on {device}: {what} of {bytes} bytes exceeds the device limit {limit_name} = {limit} bytes")]
    Limit {
        node: String,
        device: String,
        what: String,
        bytes: u64,
        limit_name: &'static str,
        limit: u64,
    },
    /// A kernel would loop more often per invocation than the adapter runs loops: Mesa's
    /// llvmpipe/lavapipe silently end an invocation's loops after 65,535 iterations in total,
    /// so it could only return a wrong result.
    #[error("node '{node}' on {device}: {kernel} loops up to {iterations} times per invocation, but this software adapter (Mesa llvmpipe/lavapipe) silently stops an invocation's loops after {limit} iterations")]
    LoopLimit {
        node: String,
        device: String,
        kernel: String,
        iterations: u64,
        limit: u64,
    },
    /// A kernel needs more workgroups than one dispatch holds: the grid folds into 2-D, so at
    /// most `limit`² workgroups of `workgroup_size` invocations each.
    #[error("node '{node}' on {device}: a dispatch of {invocations} invocations in workgroups of {workgroup_size} needs {workgroups} workgroups, more than the 2-D grid holds: {limit_name} squared = {limit}² = {max_workgroups} workgroups")]
    Dispatch {
        node: String,
        device: String,
        invocations: u64,
        workgroup_size: u32,
        workgroups: u64,
        limit_name: &'static str,
        limit: u32,
        max_workgroups: u64,
    },
    /// Host memory for a value could not be allocated (a shape too large for this machine or
    /// its memory limit): reported instead of aborting the process.
    #[error("node '{node}' on {device}: cannot allocate {bytes} bytes for {what}")]
    Alloc {
        node: String,
        device: String,
        what: String,
        bytes: u64,
    },
    /// wgpu reported an error (validation, out of memory, device lost).
    #[error("gpu error on {device} while {action}: {message}")]
    Gpu {
        device: String,
        action: String,
        message: String,
    },
    /// WGSL text failed to parse or validate.
    #[error("invalid WGSL in {kernel}: {message}")]
    Shader { kernel: String, message: String },
    /// A graph file (GraphDef JSON) is malformed; `at` names the place in the file
    /// (`line L, column C`, or the node and field such as `nodes[3] 'add'.inputs[1]`).
    #[error("graph file at {at}: {message}")]
    GraphDef { at: String, message: String },
    /// A host tensor (or a `.npy` file) could not be made, read or written; `kind` says why.
    #[error("host tensor: {message}")]
    Host { message: String, kind: HostKind },
    /// Two assignments to one variable would run in the same run (which one lands would be
    /// arbitrary); run them in separate runs, or combine them into one value.
    #[error("variable '{variable}' is assigned twice in one run, by '{first}' and by '{second}'")]
    Assign {
        variable: String,
        first: String,
        second: String,
    },
    /// A gradient was asked for through an op that has no gradient rule (a raw WGSL kernel
    /// without a gradient kernel, a random op, an assignment).
    #[error("cannot differentiate through node '{node}' ({op}): {message}")]
    NotDifferentiable {
        op: String,
        node: String,
        message: String,
    },
    /// A checkpoint (`.safetensors` file) could not be written, read or restored: the file is
    /// malformed, or a tensor in it does not match the graph's variable of that name.
    #[error("checkpoint {path}: {message}")]
    Checkpoint { path: String, message: String },
    /// An ONNX model could not be imported: `at` names the file, tensor or node (with its op
    /// type and opset), `message` the reason, `kind` what kind of reason it is.
    #[error("onnx {at}: {message}")]
    Onnx {
        at: String,
        message: String,
        kind: OnnxKind,
    },
    /// A broken invariant inside wgflow; please report it.
    #[error("internal error (please report): {0}")]
    Internal(String),
}

/// What was wrong with a feed ([`Error::Feed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FeedKind {
    /// A value of the wrong dtype (for a placeholder, a variable, a model input).
    DType,
    /// A value of the wrong rank or sizes, or feeds that disagree on a run-time dimension.
    Shape,
    /// A placeholder, model input or run-time size the run needs was not given.
    Missing,
    /// The name or tensor fed is not something that can be fed: no node or dimension has
    /// the name, the tensor is another graph's, or it is not a placeholder.
    Name,
    /// Anything else: the same tensor fed twice, a reserved placeholder, an unreadable file.
    Value,
}

/// Why an ONNX model could not be imported ([`Error::Onnx`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OnnxKind {
    /// The model is malformed or contradicts itself (a missing input, a shape or value that
    /// does not fit), or it is over one of [`crate::onnx::ImportOptions`]' limits.
    Invalid,
    /// An element type that wgflow does not hold or that the op does not take (float64
    /// without `f64_as_f32`, a string tensor, integer inputs to a float-only op).
    DType,
    /// Something valid that wgflow does not run: an op type, domain or opset, an attribute
    /// value, sequences, sparse tensors.
    Unsupported,
}

/// What was wrong with a host tensor ([`Error::Host`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HostKind {
    /// Read as, or written to, a dtype it is not: `to_vec::<f32>()` of an i32 tensor, a
    /// `.npy` dtype wgflow does not hold.
    DType,
    /// The values do not fill the shape, or the shape does not fit the request (`item()` of
    /// more than one element, a reshape to another element count).
    Shape,
    /// A value outside what the dtype holds: an int64 beyond i32, an integer beyond the
    /// `.npy` type it is written as.
    Value,
    /// A `.npy` file could not be read or written, or its bytes are not one wgflow reads: no
    /// magic, a truncated or malformed header, a version or layout it does not take, data
    /// of the wrong length.
    File,
    /// The memory for the values could not be allocated.
    Alloc,
}

/// What kind of input a builder refused ([`Error::Build`]), with the facts it saw.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BuildKind {
    /// The number of inputs: the op's arity as it states it (`"2"`, `"1 or more"`), and the
    /// count given.
    Arity { expected: String, got: usize },
    /// The inputs' dtypes (in argument order) are not ones the op takes together: a
    /// dtype the op does not support, or two that differ where they must agree.
    DType { inputs: Vec<DType> },
    /// The inputs' shapes (in argument order) do not fit the op or its attributes: they do
    /// not broadcast, a rank or size is wrong, an axis is out of range.
    Shape { inputs: Vec<Shape> },
    /// An argument's value (not a tensor's shape or dtype) is outside what the op takes: a
    /// rate, a range, a scale, a learning rate, a size too large, an index in a constant.
    Value,
    /// Anything else a builder refuses: a name taken, a tensor of another graph, a node
    /// that must be a variable, run-time dimensions an op does not take yet.
    Other,
}

impl Error {
    /// A host-tensor error of `kind`.
    pub(crate) fn host(kind: HostKind, message: impl Into<String>) -> Self {
        Error::Host {
            message: message.into(),
            kind,
        }
    }

    /// A build error attributed to the caller location of a `#[track_caller]` builder.
    pub(crate) fn build(
        op: &str,
        location: &'static Location<'static>,
        message: impl Into<String>,
    ) -> Self {
        Error::build_kind(op, location, message, BuildKind::Other)
    }

    /// [`Error::build`] refusing the inputs' dtypes (`inputs`, in argument order).
    pub(crate) fn build_dtype(
        op: &str,
        location: &'static Location<'static>,
        message: impl Into<String>,
        inputs: &[DType],
    ) -> Self {
        let inputs = inputs.to_vec();
        Error::build_kind(op, location, message, BuildKind::DType { inputs })
    }

    /// [`Error::build`] of a given kind.
    pub(crate) fn build_kind(
        op: &str,
        location: &'static Location<'static>,
        message: impl Into<String>,
        kind: BuildKind,
    ) -> Self {
        Error::Build {
            op: op.to_string(),
            location,
            message: message.into(),
            kind,
        }
    }

    /// This builder error as a refusal of the inputs' shapes (`inputs`, in argument order);
    /// another error is returned as it is.
    pub(crate) fn of_shapes(self, inputs: &[&Shape]) -> Self {
        let inputs = inputs.iter().map(|s| (*s).clone()).collect();
        self.of_kind(BuildKind::Shape { inputs })
    }

    /// This builder error as a refusal of the inputs' dtypes (`inputs`, in argument order).
    pub(crate) fn of_dtypes(self, inputs: &[DType]) -> Self {
        self.of_kind(BuildKind::DType {
            inputs: inputs.to_vec(),
        })
    }

    /// This builder error as a refusal of an argument's value.
    pub(crate) fn of_value(self) -> Self {
        self.of_kind(BuildKind::Value)
    }

    /// This builder error as a wrong number of inputs.
    pub(crate) fn of_arity(self, expected: &str, got: usize) -> Self {
        let expected = expected.to_string();
        self.of_kind(BuildKind::Arity { expected, got })
    }

    fn of_kind(self, kind: BuildKind) -> Self {
        match self {
            Error::Build {
                op,
                location,
                message,
                ..
            } => Error::Build {
                op,
                location,
                message,
                kind,
            },
            e => e,
        }
    }

    /// The kind of a builder's refusal; `None` for other errors.
    pub fn build_kind_of(&self) -> Option<&BuildKind> {
        match self {
            Error::Build { kind, .. } => Some(kind),
            _ => None,
        }
    }
}

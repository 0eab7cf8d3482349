//! Builders for user kernels: typed elementwise functions and raw WGSL kernels.

use super::{Graph, Tensor};
use crate::ops::custom::{check_expr, CustomElementwise, ElementwiseFn, RawWgsl};
use crate::ops::Custom;
use crate::ops::{Expr, Op};
use crate::{DType, Error, Result, Shape};
use petgraph::graph::NodeIndex;
use std::panic::Location;
use std::sync::Arc;

type Loc = &'static Location<'static>;

impl Graph {
    /// Apply a typed elementwise function to `inputs` (broadcast together like any
    /// elementwise op). The signature whose argument dtypes equal the inputs' is chosen; the
    /// result has its return dtype. The node lowers to an ordinary elementwise kernel, so it
    /// fuses with neighbouring elementwise ops and runs on every device.
    #[track_caller]
    pub fn apply(&mut self, kernel: &ElementwiseFn, inputs: &[Tensor]) -> Result<Tensor> {
        let loc = Location::caller();
        let op = format!("kernel '{}'", kernel.name());
        let nodes = self.check_all(inputs, &op, loc)?;
        let dtypes: Vec<DType> = inputs.iter().map(|&t| self.dtype(t)).collect();
        let (sig, expr) = kernel
            .resolve(&dtypes)
            .map_err(|m| Error::build(&op, loc, m))?;
        let shape = self.broadcast_all(inputs, &op, loc)?;
        let custom = CustomElementwise {
            name: kernel.name().to_string(),
            expr,
        };
        Ok(self.push(
            Op::Custom(Custom::Elementwise(Box::new(custom))),
            &nodes,
            shape,
            sig.ret,
            kernel.name(),
            loc,
        ))
    }

    /// A node computing an already-typed expression (how graph files rebuild applied
    /// functions). The expression is type-checked against the inputs.
    #[track_caller]
    pub fn apply_expr(&mut self, name: &str, expr: Expr, inputs: &[Tensor]) -> Result<Tensor> {
        let loc = Location::caller();
        let op = format!("kernel '{name}'");
        let nodes = self.check_all(inputs, &op, loc)?;
        let dtypes: Vec<DType> = inputs.iter().map(|&t| self.dtype(t)).collect();
        let dtype = check_expr(&expr, &dtypes).map_err(|m| Error::build(&op, loc, m))?;
        let shape = self.broadcast_all(inputs, &op, loc)?;
        let custom = CustomElementwise {
            name: name.to_string(),
            expr,
        };
        Ok(self.push(
            Op::Custom(Custom::Elementwise(Box::new(custom))),
            &nodes,
            shape,
            dtype,
            name,
            loc,
        ))
    }

    /// A raw WGSL kernel over `inputs` (see [`RawWgsl`] for the binding convention). The
    /// shader is validated with naga and its bindings checked here; an invalid shader is an
    /// [`Error::Shader`] with the line and column. The node runs only on a GPU.
    #[track_caller]
    pub fn raw_kernel(&mut self, kernel: &RawWgsl, inputs: &[Tensor]) -> Result<Tensor> {
        let loc = Location::caller();
        let op = format!("raw kernel '{}'", kernel.name);
        let nodes = self.check_all(inputs, &op, loc)?;
        kernel.check(inputs.len())?;
        let ins: Vec<(Shape, DType)> = inputs
            .iter()
            .map(|&t| (self.shape(t).clone(), self.dtype(t)))
            .collect();
        let (shape, dtype) = kernel
            .output_for(&ins)
            .map_err(|m| Error::build(&op, loc, format!("output rule: {m}")))?;
        if shape.dims().contains(&0) || shape.checked_numel().is_none_or(|n| n > u32::MAX as usize)
        {
            return Err(Error::build(
                &op,
                loc,
                format!("output shape {shape} is empty or too large"),
            ));
        }
        Ok(self.push(
            Op::Custom(Custom::Raw(Arc::new(kernel.clone()))),
            &nodes,
            shape,
            dtype,
            &kernel.name,
            loc,
        ))
    }

    fn check_all(&self, inputs: &[Tensor], op: &str, loc: Loc) -> Result<Vec<NodeIndex>> {
        inputs.iter().map(|&t| self.check(t, op, loc)).collect()
    }

    fn broadcast_all(&self, inputs: &[Tensor], op: &str, loc: Loc) -> Result<Shape> {
        let mut shape = Shape::scalar();
        for &t in inputs {
            shape = Shape::broadcast(&shape, self.shape(t)).ok_or_else(|| {
                let all: Vec<String> = inputs.iter().map(|&t| self.shape(t).to_string()).collect();
                Error::build(
                    op,
                    loc,
                    format!("shapes {} cannot broadcast", all.join(", ")),
                )
            })?;
        }
        Ok(shape)
    }
}

//! Builders for user kernels: typed elementwise functions and raw WGSL kernels.

use super::Loc;
use crate::graph::{Graph, Site, Tensor};
use crate::ops::custom::{CustomElementwise, ElementwiseFn, RawWgsl};
use crate::ops::Custom;
use crate::ops::{Declared, Expr, Op};
use crate::{DType, Error, Result};
use std::panic::Location;
use std::sync::Arc;

impl Graph {
    /// Apply a typed elementwise function to `inputs` (broadcast together like any
    /// elementwise op). The signature whose argument dtypes equal the inputs' is chosen; the
    /// result has its return dtype. The node lowers to an ordinary elementwise kernel, so it
    /// fuses with neighbouring elementwise ops and runs on every device.
    #[track_caller]
    pub fn apply(&mut self, kernel: &ElementwiseFn, inputs: &[Tensor]) -> Result<Tensor> {
        let loc = Location::caller();
        let op = format!("kernel '{}'", kernel.name());
        let dtypes = inputs
            .iter()
            .map(|&t| self.arg(t, &op, loc).map(|n| n.dtype))
            .collect::<Result<Vec<DType>>>()?;
        if dtypes.len() != kernel.arity() {
            let (want, got) = (kernel.arity(), dtypes.len());
            return Err(
                Error::build(&op, loc, format!("takes {want} input(s), got {got}"))
                    .of_arity(&want.to_string(), got),
            );
        }
        let (_, expr) = kernel
            .resolve(&dtypes)
            .map_err(|m| Error::build_dtype(&op, loc, m, &dtypes))?;
        self.apply_at(kernel.name(), expr, inputs, &op, loc)
    }

    /// A node computing an already-typed expression (how graph files rebuild applied
    /// functions). The expression is type-checked against the inputs.
    #[track_caller]
    pub fn apply_expr(&mut self, name: &str, expr: Expr, inputs: &[Tensor]) -> Result<Tensor> {
        let op = format!("kernel '{name}'");
        self.apply_at(name, expr, inputs, &op, Location::caller())
    }

    /// A raw WGSL kernel over `inputs` (see [`RawWgsl`] for the binding convention). The
    /// shader is validated with naga and its bindings checked here; an invalid shader is an
    /// [`Error::Shader`] with the line and column, and so are its gradient kernels
    /// ([`RawWgsl::with_gradient`]). The node runs only on a GPU.
    #[track_caller]
    pub fn raw_kernel(&mut self, kernel: &RawWgsl, inputs: &[Tensor]) -> Result<Tensor> {
        let loc = Location::caller();
        let op = format!("raw kernel '{}'", kernel.name);
        let mut ins = Vec::with_capacity(inputs.len());
        for &t in inputs {
            let n = self.arg(t, &op, loc)?;
            ins.push((n.shape.clone(), n.dtype));
        }
        kernel.check(inputs.len())?;
        for (i, grad) in &kernel.gradients {
            if *i >= inputs.len() {
                return Err(Error::build(
                    &op,
                    loc,
                    format!(
                        "a gradient kernel ('{}') is given for input {i}, but the kernel has {} input(s)",
                        grad.name,
                        inputs.len()
                    ),
                ).of_value());
            }
            // It reads the inputs and dy.
            grad.check(inputs.len() + 1)?;
            // Its bindings: the inputs, dy (the forward output's dtype), dx (input i's).
            if let Ok((_, out)) = kernel.output_for(&ins) {
                let mut dtypes: Vec<DType> = ins.iter().map(|i| i.1).collect();
                dtypes.extend([out, ins[*i].1]);
                grad.check_bindings(&dtypes).map_err(|m| Error::Shader {
                    kernel: grad.name.clone(),
                    message: m,
                })?;
            }
        }
        let custom = Op::Custom(Custom::Raw(Arc::new(kernel.clone())));
        let site = Site::new(&op, loc).named(&kernel.name);
        self.add_op(custom, inputs, Declared::none(), site)
    }

    fn apply_at(
        &mut self,
        name: &str,
        expr: Expr,
        inputs: &[Tensor],
        op: &str,
        loc: Loc,
    ) -> Result<Tensor> {
        let custom = CustomElementwise {
            name: name.to_string(),
            expr,
        };
        let custom = Op::Custom(Custom::Elementwise(Box::new(custom)));
        self.add_op(
            custom,
            inputs,
            Declared::none(),
            Site::new(op, loc).named(name),
        )
    }
}

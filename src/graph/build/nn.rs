//! Builders of the nn family: conv2d and pooling, and their backward primitives
//! (`conv2d_backprop_input`/`_filter`, `max_pool2d_grad`, `avg_pool2d_grad`).

use super::Loc;
use crate::graph::{Graph, Site, Tensor};
use crate::ops::{BinaryOp, Declared, Nn, Op, PoolKind, Window};
use crate::{Error, Result, Shape};
use std::panic::Location;

/// conv2d geometry: per spatial axis `[h, w]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv2dOptions {
    pub stride: [usize; 2],
    /// Zero padding on both sides.
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    /// Input and output channels are split into this many independent groups.
    pub groups: usize,
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Conv2dOptions {
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
            groups: 1,
        }
    }
}

impl Graph {
    /// 2-D convolution (cross-correlation, like PyTorch): `x` `[N, C, H, W]`, `w`
    /// `[O, C / groups, KH, KW]`, optional `bias` `[O]`; f32. Zero padding.
    #[track_caller]
    pub fn conv2d(
        &mut self,
        x: Tensor,
        w: Tensor,
        bias: Option<Tensor>,
        opts: Conv2dOptions,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let window = Window {
            kernel: [0, 0],
            stride: opts.stride,
            padding: opts.padding,
            dilation: opts.dilation,
        };
        // The kernel size is the weight's; the family's rule checks the rest.
        let ws = self.arg(w, "conv2d", loc)?.shape.clone();
        let window = match ws.dims() {
            [_, _, kh, kw] => Window {
                kernel: [*kh, *kw],
                ..window
            },
            _ => window,
        };
        let op = Op::Nn(Nn::Conv2d {
            window,
            groups: opts.groups,
        });
        let y = self.add_op(op, &[x, w], Declared::none(), Site::new("conv2d", loc))?;
        match bias {
            None => Ok(y),
            Some(b) => {
                let o = self.arg(y, "conv2d", loc)?.shape.dims()[1];
                let bs = &self.arg(b, "conv2d", loc)?.shape;
                if bs.dims() != [o] {
                    return Err(Error::build(
                        "conv2d",
                        loc,
                        format!("bias must have shape [{o}], got {bs}"),
                    )
                    .of_shapes(&[bs]));
                }
                let b4 = self.view(b, Shape(vec![1, o, 1, 1]), "reshape", loc)?;
                self.binary(BinaryOp::Add, y, b4, loc)
            }
        }
    }

    /// 2-D max pooling over `[N, C, H, W]` (f32); padding (at most half the kernel) never wins.
    /// NaN propagates.
    #[track_caller]
    pub fn max_pool2d(
        &mut self,
        x: Tensor,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Result<Tensor> {
        self.pool(
            PoolKind::Max,
            x,
            kernel,
            stride,
            padding,
            Location::caller(),
        )
    }

    /// 2-D average pooling; padded positions are excluded from each window's count
    /// (PyTorch's `count_include_pad=False`).
    #[track_caller]
    pub fn avg_pool2d(
        &mut self,
        x: Tensor,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Result<Tensor> {
        self.pool(
            PoolKind::Avg,
            x,
            kernel,
            stride,
            padding,
            Location::caller(),
        )
    }

    fn pool(
        &mut self,
        kind: PoolKind,
        x: Tensor,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        loc: Loc,
    ) -> Result<Tensor> {
        let window = Window {
            kernel,
            stride,
            padding,
            dilation: [1, 1],
        };
        let op = Op::Nn(Nn::Pool { kind, window });
        self.add_op(op, &[x], Declared::none(), Site::new(kind.name(), loc))
    }

    /// The gradient of [`Graph::conv2d`] (without bias) with respect to its input, from the
    /// output's gradient `dy` `[N, O, OH, OW]` and the weights `w` `[O, C / groups, KH, KW]`:
    /// `[N, C, H, W]` with `[H, W] = input_hw`, the forward input's size (several sizes give
    /// the same output size when the stride is above 1). TensorFlow's
    /// `conv2d_backprop_input`; one kernel on every device.
    #[track_caller]
    pub fn conv2d_backprop_input(
        &mut self,
        dy: Tensor,
        w: Tensor,
        input_hw: [usize; 2],
        opts: Conv2dOptions,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let ws = self.arg(w, "conv2d_backprop_input", loc)?.shape.clone();
        let kernel = match ws.dims() {
            [_, _, kh, kw] => [*kh, *kw],
            _ => [0, 0],
        };
        let op = Op::Nn(Nn::Conv2dBackpropInput {
            window: Window::conv(kernel, &opts),
            groups: opts.groups,
            input_hw,
        });
        self.add_op(
            op,
            &[dy, w],
            Declared::none(),
            Site::new("conv2d_backprop_input", loc),
        )
    }

    /// The gradient of [`Graph::conv2d`] with respect to its weights (`[O, C / groups, KH,
    /// KW]` with `[KH, KW] = kernel`), from its input `x` `[N, C, H, W]` and the output's
    /// gradient `dy` `[N, O, OH, OW]`. TensorFlow's `conv2d_backprop_filter`.
    #[track_caller]
    pub fn conv2d_backprop_filter(
        &mut self,
        x: Tensor,
        dy: Tensor,
        kernel: [usize; 2],
        opts: Conv2dOptions,
    ) -> Result<Tensor> {
        let op = Op::Nn(Nn::Conv2dBackpropFilter {
            window: Window::conv(kernel, &opts),
            groups: opts.groups,
        });
        let site = Site::new("conv2d_backprop_filter", Location::caller());
        self.add_op(op, &[x, dy], Declared::none(), site)
    }

    /// The gradient of [`Graph::max_pool2d`] with respect to its input `x`: each window's
    /// `dy` goes to its first maximum (row-major window order; the first NaN when the
    /// maximum is NaN); ties give nothing to the later cells (TensorFlow's and PyTorch's
    /// rule).
    #[track_caller]
    pub fn max_pool2d_grad(
        &mut self,
        x: Tensor,
        dy: Tensor,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Result<Tensor> {
        let loc = Location::caller();
        let xs = self.arg(x, "max_pool2d_grad", loc)?.shape.clone();
        let input_hw = match xs.dims() {
            [_, _, h, w] => [*h, *w],
            _ => [0, 0],
        };
        let op = Op::Nn(Nn::PoolGrad {
            kind: PoolKind::Max,
            window: Window::pool(kernel, stride, padding),
            input_hw,
        });
        self.add_op(
            op,
            &[x, dy],
            Declared::none(),
            Site::new("max_pool2d_grad", loc),
        )
    }

    /// The gradient of [`Graph::avg_pool2d`] with respect to its input (`[N, C, H, W]` with
    /// `[H, W] = input_hw`): each window's `dy / count` spread over its in-bounds cells.
    #[track_caller]
    pub fn avg_pool2d_grad(
        &mut self,
        dy: Tensor,
        input_hw: [usize; 2],
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Result<Tensor> {
        let op = Op::Nn(Nn::PoolGrad {
            kind: PoolKind::Avg,
            window: Window::pool(kernel, stride, padding),
            input_hw,
        });
        let site = Site::new("avg_pool2d_grad", Location::caller());
        self.add_op(op, &[dy], Declared::none(), site)
    }
}

//! Graph files: the window geometry of conv2d and the pools.
//!
//! | `op` | inputs | attributes |
//! |---|---|---|
//! | `conv2d` | 2 (x, w) | `kernel`, `stride`, `padding`, `dilation`: `[h, w]` each; `groups`. The bias of [`Graph::conv2d`] is a separate `add` |
//! | `max_pool2d` `avg_pool2d` | 1 | `kernel`, `stride`, `padding`, `dilation` (always `[1, 1]`) |
//! | `conv2d_backprop_input` | 2 (dy, w) | conv2d's, and `input_hw` (`[h, w]` of the input) |
//! | `conv2d_backprop_filter` | 2 (x, dy) | conv2d's |
//! | `max_pool2d_grad` | 2 (x, dy) | the pool's, and `input_hw` |
//! | `avg_pool2d_grad` | 1 (dy) | the pool's, and `input_hw` |
//!
//! Window entries other than `kernel` are at most [`MAX_WINDOW`].

use super::{Nn, PoolKind, Window};
use crate::graph::def::{NodeIn, NodeOut, Pair, UInt, MAX_ELEMENTS, MAX_WINDOW};
use crate::graph::{Graph, Tensor};
use crate::ops::Family;
use crate::Result;
use serde::{Deserialize, Serialize};

type Big = UInt<{ MAX_ELEMENTS as u64 }>;
type Small = UInt<{ MAX_WINDOW as u64 }>;

/// The family's attributes; each variant is named like its op.
#[derive(Serialize, Deserialize)]
#[serde(
    tag = "op",
    content = "attrs",
    rename_all = "snake_case",
    deny_unknown_fields
)]
enum NnAttrs {
    Conv2d(Conv2dAttrs),
    MaxPool2d(WindowAttrs),
    AvgPool2d(WindowAttrs),
    Conv2dBackpropInput(GradAttrs),
    Conv2dBackpropFilter(Conv2dAttrs),
    MaxPool2dGrad(GradAttrs),
    AvgPool2dGrad(GradAttrs),
}

/// A backward op's window (conv2d's `groups` is 1 for the pools and must be) and the
/// forward input's spatial size.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GradAttrs {
    kernel: Pair<Big>,
    stride: Pair<Small>,
    padding: Pair<Small>,
    dilation: Pair<Small>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    groups: Option<Big>,
    input_hw: Pair<Big>,
}

fn grad_attrs(w: &Window, groups: Option<usize>, hw: [usize; 2]) -> GradAttrs {
    let a = window_attrs(w);
    GradAttrs {
        kernel: a.kernel,
        stride: a.stride,
        padding: a.padding,
        dilation: a.dilation,
        groups: groups.map(|g| UInt(g as u64)),
        input_hw: pair(hw),
    }
}

fn grad_window(a: &GradAttrs) -> Window {
    Window {
        kernel: a.kernel.0.map(UInt::get),
        stride: a.stride.0.map(UInt::get),
        padding: a.padding.0.map(UInt::get),
        dilation: a.dilation.0.map(UInt::get),
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Conv2dAttrs {
    kernel: Pair<Big>,
    stride: Pair<Small>,
    padding: Pair<Small>,
    dilation: Pair<Small>,
    groups: Big,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WindowAttrs {
    kernel: Pair<Big>,
    stride: Pair<Small>,
    padding: Pair<Small>,
    dilation: Pair<Small>,
}

fn pair<const CAP: u64>(v: [usize; 2]) -> Pair<UInt<CAP>> {
    Pair(v.map(|x| UInt(x as u64)))
}

fn window(w: WindowAttrs) -> Window {
    Window {
        kernel: w.kernel.0.map(UInt::get),
        stride: w.stride.0.map(UInt::get),
        padding: w.padding.0.map(UInt::get),
        dilation: w.dilation.0.map(UInt::get),
    }
}

fn window_attrs(w: &Window) -> WindowAttrs {
    WindowAttrs {
        kernel: pair(w.kernel),
        stride: pair(w.stride),
        padding: pair(w.padding),
        dilation: pair(w.dilation),
    }
}

pub(super) fn write_attrs(nn: &Nn, out: &mut NodeOut) -> Result<()> {
    let attrs = match nn {
        Nn::Conv2d { window, groups } => {
            let w = window_attrs(window);
            NnAttrs::Conv2d(Conv2dAttrs {
                kernel: w.kernel,
                stride: w.stride,
                padding: w.padding,
                dilation: w.dilation,
                groups: UInt(*groups as u64),
            })
        }
        Nn::Pool { kind, window } => match kind {
            PoolKind::Max => NnAttrs::MaxPool2d(window_attrs(window)),
            PoolKind::Avg => NnAttrs::AvgPool2d(window_attrs(window)),
        },
        Nn::Conv2dBackpropInput {
            window,
            groups,
            input_hw,
        } => NnAttrs::Conv2dBackpropInput(grad_attrs(window, Some(*groups), *input_hw)),
        Nn::Conv2dBackpropFilter { window, groups } => {
            let w = window_attrs(window);
            NnAttrs::Conv2dBackpropFilter(Conv2dAttrs {
                kernel: w.kernel,
                stride: w.stride,
                padding: w.padding,
                dilation: w.dilation,
                groups: UInt(*groups as u64),
            })
        }
        Nn::PoolGrad {
            kind,
            window,
            input_hw,
        } => {
            let a = grad_attrs(window, None, *input_hw);
            match kind {
                PoolKind::Max => NnAttrs::MaxPool2dGrad(a),
                PoolKind::Avg => NnAttrs::AvgPool2dGrad(a),
            }
        }
    };
    out.tagged(nn.name(), &attrs)
}

pub(super) fn read(node: &NodeIn<'_>) -> Option<Result<Nn>> {
    Some(node.tagged()?.map(|attrs| match attrs {
        NnAttrs::Conv2d(c) => Nn::Conv2d {
            window: window(WindowAttrs {
                kernel: c.kernel,
                stride: c.stride,
                padding: c.padding,
                dilation: c.dilation,
            }),
            groups: c.groups.get(),
        },
        NnAttrs::MaxPool2d(w) => Nn::Pool {
            kind: PoolKind::Max,
            window: window(w),
        },
        NnAttrs::AvgPool2d(w) => Nn::Pool {
            kind: PoolKind::Avg,
            window: window(w),
        },
        NnAttrs::Conv2dBackpropInput(a) => Nn::Conv2dBackpropInput {
            window: grad_window(&a),
            groups: a.groups.map_or(1, UInt::get),
            input_hw: a.input_hw.0.map(UInt::get),
        },
        NnAttrs::Conv2dBackpropFilter(c) => Nn::Conv2dBackpropFilter {
            window: window(WindowAttrs {
                kernel: c.kernel,
                stride: c.stride,
                padding: c.padding,
                dilation: c.dilation,
            }),
            groups: c.groups.get(),
        },
        NnAttrs::MaxPool2dGrad(a) => Nn::PoolGrad {
            kind: PoolKind::Max,
            window: grad_window(&a),
            input_hw: a.input_hw.0.map(UInt::get),
        },
        NnAttrs::AvgPool2dGrad(a) => Nn::PoolGrad {
            kind: PoolKind::Avg,
            window: grad_window(&a),
            input_hw: a.input_hw.0.map(UInt::get),
        },
    }))
}

pub(super) fn rebuild(nn: &Nn, g: &mut Graph, x: &[Tensor]) -> Result<Tensor> {
    match *nn {
        Nn::Conv2d { window, groups } => {
            let opts = window.conv_options(groups);
            g.conv2d(x[0], x[1], None, opts)
        }
        Nn::Pool { kind, window } => match kind {
            PoolKind::Max => g.max_pool2d(x[0], window.kernel, window.stride, window.padding),
            PoolKind::Avg => g.avg_pool2d(x[0], window.kernel, window.stride, window.padding),
        },
        Nn::Conv2dBackpropInput {
            window,
            groups,
            input_hw,
        } => {
            let opts = window.conv_options(groups);
            g.conv2d_backprop_input(x[0], x[1], input_hw, opts)
        }
        Nn::Conv2dBackpropFilter { window, groups } => {
            let opts = window.conv_options(groups);
            g.conv2d_backprop_filter(x[0], x[1], window.kernel, opts)
        }
        Nn::PoolGrad {
            kind,
            window,
            input_hw,
        } => match kind {
            PoolKind::Max => {
                g.max_pool2d_grad(x[0], x[1], window.kernel, window.stride, window.padding)
            }
            PoolKind::Avg => {
                g.avg_pool2d_grad(x[0], input_hw, window.kernel, window.stride, window.padding)
            }
        },
    }
}

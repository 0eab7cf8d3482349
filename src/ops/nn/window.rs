//! The window geometry conv2d, pooling and their backward kernels share: kernel size,
//! stride, padding and dilation per spatial axis, with the output-size rule and the
//! coordinate arithmetic both the CPU kernels and the WGSL use.

/// Window geometry shared by conv2d and pooling, per spatial axis `[h, w]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Window {
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    /// Zero padding on both sides of each axis.
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
}

impl Window {
    /// A convolution's window: the weight's `kernel` and the options' geometry.
    pub fn conv(kernel: [usize; 2], opts: &crate::graph::Conv2dOptions) -> Window {
        Window {
            kernel,
            stride: opts.stride,
            padding: opts.padding,
            dilation: opts.dilation,
        }
    }

    /// A pool's window (pools have no dilation).
    pub fn pool(kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Window {
        Window {
            kernel,
            stride,
            padding,
            dilation: [1, 1],
        }
    }

    /// The conv2d options with this window's geometry and `groups`.
    pub fn conv_options(&self, groups: usize) -> crate::graph::Conv2dOptions {
        crate::graph::Conv2dOptions {
            stride: self.stride,
            padding: self.padding,
            dilation: self.dilation,
            groups,
        }
    }

    /// Output size of each spatial axis for an input of `[h, w]`, or why there is none.
    pub fn out_hw(&self, hw: [usize; 2]) -> Result<[usize; 2], String> {
        let mut out = [0; 2];
        for k in 0..2 {
            if self.stride[k] == 0 || self.dilation[k] == 0 || self.kernel[k] == 0 {
                return Err(format!(
                    "kernel {:?}, stride {:?} and dilation {:?} must be positive",
                    self.kernel, self.stride, self.dilation
                ));
            }
            // Window coordinates are i32 in WGSL: keep every term far from overflow.
            let limit = 1 << 20;
            if [
                self.kernel[k],
                self.stride[k],
                self.padding[k],
                self.dilation[k],
            ]
            .iter()
            .any(|&v| v > limit)
            {
                return Err(format!(
                    "kernel {:?}, stride {:?}, padding {:?} and dilation {:?} must each be at most {limit}",
                    self.kernel, self.stride, self.padding, self.dilation
                ));
            }
            let span = self.dilation[k] * (self.kernel[k] - 1) + 1;
            let padded = hw[k] + 2 * self.padding[k];
            if padded < span {
                return Err(format!(
                    "window {:?} (dilation {:?}) does not fit input {:?} padded by {:?}",
                    self.kernel, self.dilation, hw, self.padding
                ));
            }
            out[k] = (padded - span) / self.stride[k] + 1;
        }
        Ok(out)
    }

    /// Input row/column `o * stride - padding + t * dilation` on axis `k`, if inside `n`.
    pub(crate) fn at(&self, k: usize, o: usize, t: usize, n: usize) -> Option<usize> {
        (o * self.stride[k] + t * self.dilation[k])
            .checked_sub(self.padding[k])
            .filter(|&v| v < n)
    }

    pub(crate) fn wgsl_coord(&self, k: usize, o: &str, t: &str) -> String {
        format!(
            "i32({o} * {}u + {t} * {}u) - {}",
            self.stride[k], self.dilation[k], self.padding[k]
        )
    }
}

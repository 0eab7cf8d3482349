//! How a variable gets its first value: a given tensor, a constant fill, or a seeded random
//! draw scaled by the variable's fan-in and fan-out (Glorot, He). The value is computed on
//! the host when a session first needs the variable, piece by piece straight into the
//! variable's storage ([`Initializer::fill`]), with the same Philox generator as the random
//! ops, so every device starts from bit-identical values.

use crate::dtype::f32_to_f16_word;
use crate::ops::random::{Distribution, RandomKernel, RandomSpec};
use crate::{DType, HostTensor, Shape};

/// A variable's initial value.
#[derive(Debug, Clone, PartialEq)]
pub enum Initializer {
    /// Exactly this tensor (its shape and dtype are the variable's).
    Value(HostTensor),
    /// All zeros (any dtype).
    Zeros,
    /// All ones (any numeric dtype).
    Ones,
    /// Uniform in `[low, high)` from `seed` (float dtypes).
    Uniform { low: f32, high: f32, seed: u64 },
    /// Normal `N(mean, std²)` from `seed` (float dtypes).
    Normal { mean: f32, std: f32, seed: u64 },
    /// Glorot/Xavier uniform: `U(-l, l)` with `l = sqrt(6 / (fan_in + fan_out))`.
    GlorotUniform { seed: u64 },
    /// He/Kaiming normal: `N(0, 2 / fan_in)`.
    HeNormal { seed: u64 },
}

/// `(fan_in, fan_out)` of a weight of `shape`: `[in, out]` for a matrix (the `x @ w` layout
/// of [`Graph::linear`](crate::Graph::linear)), `[out, in, kh, kw]` for a convolution kernel
/// (OIHW, counting the receptive field), the length for a vector. Keras' and PyTorch's
/// conventions for these layouts.
pub fn fans(shape: &Shape) -> (f64, f64) {
    let d = &shape.0;
    match d.len() {
        0 => (1.0, 1.0),
        1 => (d[0] as f64, d[0] as f64),
        2 => (d[0] as f64, d[1] as f64),
        _ => {
            let field: usize = d[2..].iter().product();
            ((d[1] * field) as f64, (d[0] * field) as f64)
        }
    }
}

impl Initializer {
    /// Why this initializer cannot fill a `dtype` `shape` tensor, if it cannot.
    pub fn check(&self, shape: &Shape, dtype: DType) -> Result<(), String> {
        match self {
            Initializer::Value(t) => {
                if t.shape() != shape || t.dtype() != dtype {
                    return Err(format!(
                        "the initial value is {} {}, the variable {dtype} {shape}",
                        t.dtype(),
                        t.shape()
                    ));
                }
            }
            Initializer::Zeros => {}
            Initializer::Ones => {
                if dtype == DType::Bool {
                    return Err("ones needs a numeric dtype, not bool".into());
                }
            }
            Initializer::Uniform { low, high, .. } => {
                if !(low.is_finite() && high.is_finite() && low <= high) {
                    return Err(format!(
                        "uniform needs finite low <= high, got [{low}, {high})"
                    ));
                }
            }
            Initializer::Normal { mean, std, .. } => {
                if !(mean.is_finite() && std.is_finite() && *std >= 0.0) {
                    return Err(format!(
                        "normal needs a finite mean and std >= 0, got mean {mean}, std {std}"
                    ));
                }
            }
            Initializer::GlorotUniform { .. } | Initializer::HeNormal { .. } => {
                if shape.numel() == 0 {
                    return Err("fan-scaled initializers need a non-empty shape".into());
                }
            }
        }
        let random = !matches!(
            self,
            Initializer::Value(_) | Initializer::Zeros | Initializer::Ones
        );
        if random && !dtype.is_float() {
            return Err(format!(
                "a random initializer needs f32 or f16, not {dtype}"
            ));
        }
        Ok(())
    }

    /// The initial value of a `dtype` `shape` variable (after [`Initializer::check`]), as
    /// one host tensor; memory that cannot be had is an [`Error::Alloc`](crate::Error::Alloc)
    /// naming `name`. A session fills a variable's storage with [`Initializer::fill`] instead,
    /// piece by piece, and never holds a large initial value on the host.
    pub fn value(&self, name: &str, shape: &Shape, dtype: DType) -> crate::Result<HostTensor> {
        if let Initializer::Value(t) = self {
            return Ok(t.clone());
        }
        let n = shape.numel();
        let mut words = crate::host::fresh_vec(n).ok_or_else(|| crate::Error::Alloc {
            node: name.to_string(),
            device: "host".into(),
            what: format!("the initial value of variable {dtype} {shape}"),
            bytes: n as u64 * 4,
        })?;
        words.resize(n, 0);
        self.fill(shape, dtype, 0, &mut words);
        HostTensor::from_words(shape.clone(), dtype, words)
    }

    /// Words `start..start + out.len()` (row-major elements, one word each as
    /// [`HostTensor`] keeps them) of a `dtype` `shape` variable's initial value: the same bits
    /// however the value is cut into pieces.
    pub fn fill(&self, shape: &Shape, dtype: DType, start: usize, out: &mut [u32]) {
        let draw = |dist: Distribution, seed: u64, out: &mut [u32]| {
            let kernel = RandomKernel {
                spec: RandomSpec { dist, seed },
                out_shape: shape.clone(),
            };
            kernel.fill_at(0, start, out);
            if dtype == DType::F16 {
                for w in out.iter_mut() {
                    *w = f32_to_f16_word(*w);
                }
            }
        };
        match *self {
            Initializer::Value(ref t) => {
                let words = t.words();
                let end = (start + out.len()).min(words.len());
                let got = end.saturating_sub(start);
                out[..got].copy_from_slice(&words[start.min(end)..end]);
            }
            Initializer::Zeros => out.fill(0),
            Initializer::Ones => out.fill(match dtype {
                DType::F32 => 1f32.to_bits(),
                DType::F16 => f32_to_f16_word(1f32.to_bits()),
                DType::I32 | DType::U32 | DType::Bool => 1,
            }),
            Initializer::Uniform { low, high, seed } => {
                draw(Distribution::Uniform { low, high }, seed, out)
            }
            Initializer::Normal { mean, std, seed } => {
                draw(Distribution::Normal { mean, std }, seed, out)
            }
            Initializer::GlorotUniform { seed } => {
                let (i, o) = fans(shape);
                let l = (6.0 / (i + o)).sqrt() as f32;
                draw(Distribution::Uniform { low: -l, high: l }, seed, out)
            }
            Initializer::HeNormal { seed } => {
                let (i, _) = fans(shape);
                let std = (2.0 / i).sqrt() as f32;
                draw(Distribution::Normal { mean: 0.0, std }, seed, out)
            }
        }
    }
}

impl From<HostTensor> for Initializer {
    fn from(t: HostTensor) -> Self {
        Initializer::Value(t)
    }
}

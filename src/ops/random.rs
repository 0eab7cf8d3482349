//! Random tensors from a seed with a counter-based generator, so that `cpu:0` and every GPU
//! produce the same numbers.
//!
//! The algorithm (identical in the CPU reference below and in `shaders/random.wgsl`):
//! 1. Element `i` (row-major) runs Philox4x32-10 (Salmon et al., SC'11; Random123's
//!    constants) on the counter `[i, 0, 0, 0]` with the key `[seed as u32, (seed >> 32) as u32]`,
//!    giving four words `w0..w3`.
//! 2. Uniform: `u = (w0 >> 8) · 2^-24` in `[0, 1)` (exact), `out = low + (high - low) · u`.
//! 3. Normal (Box-Muller, one of the pair): `u1 = ((w0 >> 8) + 1) · 2^-24` in `(0, 1]`,
//!    `u2 = (w1 >> 8) · 2^-24`, `out = mean + std · sqrt(-2 ln u1) · cos(2π u2)`, with
//!    `ln u1` evaluated as `log1p(u1 - 1)` (the subtraction is exact) and `cos(2π u2)` by
//!    [`cos_turns`] on every device.
//!
//! Uniform numbers are bit-identical everywhere: steps 1–2 are integer work plus one
//! multiply and one add, each correctly rounded (the kernel keeps the driver from fusing them).
//! Normal numbers also go through `log1p` (libm on the CPU, the prelude's series or the
//! driver's `log` on GPUs) and `sqrt`, whose last bits differ between implementations; devices
//! agree within 1e-6 absolute (for `std = 1`).
//!
//! Random ops are stateless: a plan produces the same tensor on every run (like a constant
//! that is computed on the device instead of uploaded). Use a different seed for new numbers.

use crate::ops::family::{Arity, Declared, Family, KernelDef, LowerCx, Lowered};
use crate::ops::wgsl::{self, Writer};
use crate::ops::Kernel;
use crate::{DType, Shape};

use crate::graph::def::{NodeDef, NodeIn, NodeOut};
use crate::graph::{Graph, Tensor};

pub mod file;

/// The distribution a random op samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    /// `[low, high)`.
    Uniform {
        low: f32,
        high: f32,
    },
    Normal {
        mean: f32,
        std: f32,
    },
}

/// What a random op draws: its distribution and seed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomSpec {
    pub dist: Distribution,
    pub seed: u64,
}

impl RandomSpec {
    pub fn name(&self) -> &'static str {
        match self.dist {
            Distribution::Uniform { .. } => "random_uniform",
            Distribution::Normal { .. } => "random_normal",
        }
    }
}

/// A kernel filling an f32 tensor of `out_shape` from `spec`.
#[derive(Debug, Clone, PartialEq)]
pub struct RandomKernel {
    pub spec: RandomSpec,
    pub out_shape: Shape,
}

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// Philox4x32-10 of `counter` under `key`.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (counter, key);
    for round in 0..10 {
        if round > 0 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
        let p0 = (M0 as u64) * (c[0] as u64);
        let p1 = (M1 as u64) * (c[2] as u64);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

const TWO_POW_M24: f32 = 1.0 / 16_777_216.0;

// Taylor coefficients of cos and sin (1/2!, 1/3!, … with signs), as f32 words shared with
// `shaders/random.wgsl`.
const COS_C: [u32; 5] = [0xbf000000, 0x3d2aaaab, 0xbab60b61, 0x37d00d01, 0xb493f27e];
const SIN_C: [u32; 4] = [0xbe2aaaab, 0x3c088889, 0xb9500d01, 0x3638ef1d];

/// `cos(2π·u)` for `u` in `[0, 1)` with the same f32 operations as the WGSL kernel, so that
/// devices differ only where the driver's `log`/`sqrt` do: reduce exactly to a quarter turn
/// `t` in `[-1/8, 1/8]` (`u` is a multiple of 2^-24), then a degree-10/11 Taylor polynomial
/// (truncation < 2e-9).
pub fn cos_turns(u: f32) -> f32 {
    let q = (u * 4.0).round_ties_even();
    let x = (u - q * 0.25) * std::f32::consts::TAU;
    let x2 = x * x;
    let c = |i: usize| f32::from_bits(COS_C[i]);
    let s = |i: usize| f32::from_bits(SIN_C[i]);
    let cos = 1.0 + x2 * (c(0) + x2 * (c(1) + x2 * (c(2) + x2 * (c(3) + x2 * c(4)))));
    let sin = x * (1.0 + x2 * (s(0) + x2 * (s(1) + x2 * (s(2) + x2 * s(3)))));
    match (q as u32) & 3 {
        0 => cos,
        1 => -sin,
        2 => -cos,
        _ => sin,
    }
}

impl RandomKernel {
    fn key(&self) -> [u32; 2] {
        [self.spec.seed as u32, (self.spec.seed >> 32) as u32]
    }

    /// The CPU reference: element words in row-major order.
    pub fn run_cpu(&self) -> Vec<u32> {
        let key = self.key();
        (0..self.out_shape.numel())
            .map(|i| {
                let w = philox4x32_10([i as u32, 0, 0, 0], key);
                let v = match self.spec.dist {
                    Distribution::Uniform { low, high } => {
                        let u = (w[0] >> 8) as f32 * TWO_POW_M24;
                        low + (high - low) * u
                    }
                    Distribution::Normal { mean, std } => {
                        let u1 = ((w[0] >> 8) + 1) as f32 * TWO_POW_M24;
                        let u2 = (w[1] >> 8) as f32 * TWO_POW_M24;
                        // ln u1 as log1p(u1 - 1) (exact subtraction): accurate near u1 = 1,
                        // where a driver's log is not (see `UnaryOp::Log1p`).
                        let z = (-2.0 * (u1 - 1.0).ln_1p()).sqrt() * cos_turns(u2);
                        mean + std * z
                    }
                };
                v.to_bits()
            })
            .collect()
    }

    /// The WGSL source (template `shaders/random.wgsl`).
    pub fn wgsl(&self) -> String {
        let mut bindings = Writer::new();
        wgsl::storage_binding(&mut bindings, 0, "out", crate::DType::F32);
        let lit = |v: f32| wgsl::literal(crate::DType::F32, v.to_bits());
        let (dist, a, b) = match self.spec.dist {
            Distribution::Uniform { low, high } => ("wgf_uniform", lit(low), lit(high)),
            Distribution::Normal { mean, std } => ("wgf_normal", lit(mean), lit(std)),
        };
        let key = self.key();
        wgsl::fill_template(
            include_str!("../../shaders/random.wgsl"),
            &[
                ("BINDINGS", bindings.finish()),
                ("N", format!("{}u", self.out_shape.numel())),
                ("WG", wgsl::WORKGROUP.to_string()),
                ("KEY0", format!("{}u", key[0])),
                ("KEY1", format!("{}u", key[1])),
                ("DIST", dist.to_string()),
                ("A", a),
                ("B", b),
            ],
        )
    }
}

// ---------------------------------------------------------------- the family

impl Family for RandomSpec {
    fn name(&self) -> &'static str {
        RandomSpec::name(self)
    }

    fn arity(&self) -> Arity {
        Arity::Exactly(0)
    }

    /// f32 values of the declared shape.
    fn infer(
        &self,
        _inputs: &[(Shape, DType)],
        declared: Declared<'_>,
    ) -> Result<(Shape, DType), String> {
        Ok((declared.need_shape(self.name())?.clone(), DType::F32))
    }

    fn write_attrs(&self, out: &mut NodeOut) -> crate::Result<()> {
        file::write_attrs(self, out)
    }

    fn read(node: &NodeIn<'_>) -> Option<crate::Result<Self>> {
        file::read(node)
    }

    fn rebuild(&self, g: &mut Graph, node: &NodeDef, _x: &[Tensor]) -> crate::Result<Tensor> {
        file::rebuild(self, g, node)
    }

    fn lower(&self, cx: &mut LowerCx<'_>) -> crate::Result<Lowered> {
        Ok(cx.dispatch(Kernel::Random(RandomKernel {
            spec: *self,
            out_shape: cx.shape.clone(),
        })))
    }
}

impl KernelDef for RandomKernel {
    fn describe(&self) -> String {
        format!(
            "{} of {} (seed {})",
            self.spec.name(),
            self.out_shape,
            self.spec.seed
        )
    }

    fn wgsl(&self) -> String {
        RandomKernel::wgsl(self)
    }

    /// Random tensors are f32.
    fn uses_f16(&self) -> bool {
        false
    }

    fn run_cpu(&self, _inputs: &[&[u32]]) -> Vec<u32> {
        RandomKernel::run_cpu(self)
    }

    fn invocations(&self) -> u64 {
        self.out_shape.numel() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known-answer tests from Random123's `kat_vectors` for philox4x32_10.
    #[test]
    fn cos_turns_is_accurate() {
        let worst = (0..1u32 << 16)
            .map(|k| {
                let u = (k << 8) as f32 * TWO_POW_M24;
                let want = (std::f64::consts::TAU * u as f64).cos();
                (cos_turns(u) as f64 - want).abs()
            })
            .fold(0.0, f64::max);
        assert!(worst < 3e-7, "{worst}");
    }

    #[test]
    fn philox_matches_random123_known_answers() {
        assert_eq!(
            philox4x32_10([0; 4], [0; 2]),
            [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
                [0xa4093822, 0x299f31d0]
            ),
            [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]
        );
    }
}

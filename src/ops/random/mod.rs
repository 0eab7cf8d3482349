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
//! `random_uniform` and `random_normal` are stateless: a plan produces the same tensor on
//! every run (like a constant that is computed on the device instead of uploaded).
//!
//! Their stateful forms (`stateful_random_uniform`, `stateful_random_normal`, and `dropout`
//! built on the first) give new numbers on every run. They read one input, the graph's
//! run counter: a `u32 [2]` placeholder named [`RUN_COUNTER`] that the builders create once
//! per graph and the session feeds by itself with its count of earlier runs that read it
//! (low word, high word). The Philox counter becomes `[i, run_lo, run_hi, 1]`: the last word
//! keeps every stateful stream apart from the stateless one of the same seed, and the rest of
//! the algorithm is unchanged, so stateful uniform numbers are bit-identical on every device
//! too, and a session's `k`-th run draws the same numbers as any other session's `k`-th.

use crate::ops::family::{
    Arity, Declared, Family, KernelClass, KernelDef, LowerCx, Lowered, Reject,
};
use crate::ops::wgsl::{self, Writer};
use crate::ops::Kernel;
use crate::{DType, Shape};

use crate::graph::def::{NodeDef, NodeIn, NodeOut};
use crate::graph::{Graph, Tensor};

pub mod file;

/// The name of the graph's run counter placeholder, which stateful random ops read and the
/// session feeds (users cannot).
pub const RUN_COUNTER: &str = "wgflow/run_counter";

/// The distribution a random op samples, and whether it draws new numbers on every run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    /// `[low, high)`, the same numbers on every run.
    Uniform { low: f32, high: f32 },
    /// `N(mean, std²)`, the same numbers on every run.
    Normal { mean: f32, std: f32 },
    /// `[low, high)`, new numbers on every run (the op reads [`RUN_COUNTER`]).
    StatefulUniform { low: f32, high: f32 },
    /// `N(mean, std²)`, new numbers on every run (the op reads [`RUN_COUNTER`]).
    StatefulNormal { mean: f32, std: f32 },
}

/// How one element is made from its Philox words.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Law {
    Uniform { low: f32, high: f32 },
    Normal { mean: f32, std: f32 },
}

impl Distribution {
    /// Whether the op reads the run counter, giving new numbers on every run.
    pub fn is_stateful(self) -> bool {
        match self {
            Distribution::Uniform { .. } | Distribution::Normal { .. } => false,
            Distribution::StatefulUniform { .. } | Distribution::StatefulNormal { .. } => true,
        }
    }

    fn law(self) -> Law {
        match self {
            Distribution::Uniform { low, high } | Distribution::StatefulUniform { low, high } => {
                Law::Uniform { low, high }
            }
            Distribution::Normal { mean, std } | Distribution::StatefulNormal { mean, std } => {
                Law::Normal { mean, std }
            }
        }
    }
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
            Distribution::StatefulUniform { .. } => "stateful_random_uniform",
            Distribution::StatefulNormal { .. } => "stateful_random_normal",
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

    /// The CPU reference: element words in row-major order (for a stateful op, those of
    /// the session's first run).
    pub fn draw(&self) -> Vec<u32> {
        self.draw_at(0)
    }

    /// The CPU reference for the run whose counter is `run` (ignored by stateless ops).
    pub fn draw_at(&self, run: u64) -> Vec<u32> {
        let mut out = vec![0; self.out_shape.numel()];
        self.fill_at(run, 0, &mut out);
        out
    }

    /// Elements `start..start + out.len()` of run `run`'s draw into `out`: a large tensor is
    /// drawn in pieces with the same bits as in one.
    pub fn fill_at(&self, run: u64, start: usize, out: &mut [u32]) {
        let key = self.key();
        let ctr = if self.spec.dist.is_stateful() {
            [run as u32, (run >> 32) as u32, 1]
        } else {
            [0; 3]
        };
        for (slot, i) in out.iter_mut().zip(start..) {
            *slot = {
                let w = philox4x32_10([i as u32, ctr[0], ctr[1], ctr[2]], key);
                let v = match self.spec.dist.law() {
                    Law::Uniform { low, high } => {
                        let u = (w[0] >> 8) as f32 * TWO_POW_M24;
                        low + (high - low) * u
                    }
                    Law::Normal { mean, std } => {
                        let u1 = ((w[0] >> 8) + 1) as f32 * TWO_POW_M24;
                        let u2 = (w[1] >> 8) as f32 * TWO_POW_M24;
                        // ln u1 as log1p(u1 - 1) (exact subtraction): accurate near u1 = 1,
                        // where a driver's log is not (see `UnaryOp::Log1p`).
                        let z = (-2.0 * (u1 - 1.0).ln_1p()).sqrt() * cos_turns(u2);
                        mean + std * z
                    }
                };
                v.to_bits()
            };
        }
    }

    /// The WGSL source (template `shaders/random.wgsl`).
    pub fn wgsl(&self) -> String {
        let mut bindings = Writer::new();
        let counter = if self.spec.dist.is_stateful() {
            wgsl::storage_binding(&mut bindings, 0, "run_counter", crate::DType::U32);
            wgsl::storage_binding(&mut bindings, 1, "out", crate::DType::F32);
            "vec4<u32>(i, run_counter[0], run_counter[1], 1u)"
        } else {
            wgsl::storage_binding(&mut bindings, 0, "out", crate::DType::F32);
            "vec4<u32>(i, 0u, 0u, 0u)"
        };
        let lit = |v: f32| wgsl::literal(crate::DType::F32, v.to_bits());
        let (dist, a, b) = match self.spec.dist.law() {
            Law::Uniform { low, high } => ("wgf_uniform", lit(low), lit(high)),
            Law::Normal { mean, std } => ("wgf_normal", lit(mean), lit(std)),
        };
        let key = self.key();
        wgsl::fill_template(
            include_str!("../../../shaders/random.wgsl"),
            &[
                ("BINDINGS", bindings.finish()),
                ("N", format!("{}u", self.out_shape.numel())),
                ("COUNTER", counter.to_string()),
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
    fn rebinds(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        RandomSpec::name(self)
    }

    /// None, or the run counter for stateful ops.
    fn arity(&self) -> Arity {
        Arity::Exactly(usize::from(self.dist.is_stateful()))
    }

    /// f32 values of the declared shape; a stateful op's input is the `u32 [2]` run counter.
    fn infer(
        &self,
        inputs: &[(Shape, DType)],
        declared: Declared<'_>,
    ) -> Result<(Shape, DType), Reject> {
        if let [(shape, dtype)] = inputs {
            if *dtype != DType::U32 || shape != &Shape::from([2]) {
                return Err(Reject::from(format!(
                    "reads the run counter, a u32 [2] tensor; got {dtype} {shape}"
                )));
            }
        }
        Ok((declared.need_shape(self.name())?.clone(), DType::F32))
    }

    fn write_attrs(&self, out: &mut NodeOut) -> crate::Result<()> {
        file::write_attrs(self, out)
    }

    fn read(node: &NodeIn<'_>) -> Option<crate::Result<Self>> {
        file::read(node)
    }

    fn rebuild(&self, g: &mut Graph, node: &NodeDef, x: &[Tensor]) -> crate::Result<Tensor> {
        file::rebuild(self, g, node, x)
    }

    fn lower(&self, cx: &mut LowerCx<'_>) -> crate::Result<Lowered> {
        Ok(cx.dispatch(Kernel::Random(RandomKernel {
            spec: *self,
            out_shape: cx.shape.clone(),
        })))
    }
}

impl KernelDef for RandomKernel {
    fn kind(&self) -> &'static str {
        "random"
    }

    fn class(&self) -> KernelClass {
        KernelClass::Random
    }

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

    fn run_reference(&self, inputs: &[&[u32]]) -> crate::Result<Vec<u32>> {
        let run = match inputs.first() {
            Some([lo, hi, ..]) => u64::from(*lo) | (u64::from(*hi) << 32),
            // A stateless op binds nothing; a stateful one without its run counter would
            // silently draw the first run's numbers.
            _ if !self.spec.dist.is_stateful() => 0,
            _ => {
                return Err(crate::Error::Internal(format!(
                    "{} ran without its two-word run counter",
                    self.describe()
                )))
            }
        };
        Ok(RandomKernel::draw_at(self, run))
    }

    fn invocations(&self) -> u64 {
        self.out_shape.numel() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(dist: Distribution) -> RandomKernel {
        RandomKernel {
            spec: RandomSpec { dist, seed: 5 },
            out_shape: Shape::from([3, 7]),
        }
    }

    const ALL: [Distribution; 4] = [
        Distribution::Uniform {
            low: -1.0,
            high: 2.0,
        },
        Distribution::Normal {
            mean: 0.5,
            std: 2.0,
        },
        Distribution::StatefulUniform {
            low: -1.0,
            high: 2.0,
        },
        Distribution::StatefulNormal {
            mean: 0.5,
            std: 2.0,
        },
    ];

    #[test]
    fn kernels_validate_and_only_stateful_ones_bind_the_counter() {
        for dist in ALL {
            let src = Kernel::Random(kernel(dist)).wgsl();
            wgsl::validate("random", &src).unwrap_or_else(|e| panic!("{e}\n{src}"));
            assert_eq!(src.contains("run_counter"), dist.is_stateful(), "{dist:?}");
        }
    }

    #[test]
    fn the_cpu_kernel_reads_the_counter_words_low_then_high() {
        let run = 0x0000_0003_0000_0002u64;
        for dist in ALL {
            let k = kernel(dist);
            let fed = KernelDef::run_reference(&k, &[&[2, 3]]).unwrap();
            assert_eq!(fed, k.draw_at(run), "{dist:?}");
            assert_eq!(fed != k.draw_at(run + 1), dist.is_stateful(), "{dist:?}");
            assert_eq!(fed != k.draw(), dist.is_stateful(), "{dist:?}");
        }
        // Run 0 of a stateful op is not the stateless stream of the same seed.
        let (a, b) = (kernel(ALL[0]).draw(), kernel(ALL[2]).draw());
        assert!(a.iter().zip(&b).all(|(x, y)| x != y));
    }

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

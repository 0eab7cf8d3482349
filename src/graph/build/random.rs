//! Builders of the random family: seeded uniform and normal tensors. They run a kernel on the
//! device; see [`crate::ops::random`] for the exact algorithm. Their stateful forms
//! (`stateful_random_uniform`, `stateful_random_normal`) draw new numbers on every run: they
//! read the graph's run counter, a placeholder the session feeds by itself (made in
//! `leaf.rs`).

use super::Loc;
use crate::graph::{Graph, Site, Tensor};
use crate::ops::{Declared, Distribution, Op, RandomSpec};
use crate::{Error, Result, Shape};
use std::panic::Location;

impl Graph {
    /// f32 values uniform in `[low, high)` from `seed`; the same seed gives bit-identical
    /// values on every device (Philox4x32-10, see [`crate::ops::random`]) and on every run.
    #[track_caller]
    pub fn random_uniform(
        &mut self,
        shape: impl Into<Shape>,
        low: f32,
        high: f32,
        seed: u64,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        check_uniform("random_uniform", low, high, loc)?;
        let dist = Distribution::Uniform { low, high };
        self.random(RandomSpec { dist, seed }, shape.into(), loc)
    }

    /// f32 values from the normal distribution `N(mean, std²)` by Box-Muller from `seed`;
    /// devices agree within 1e-6·std (their `log1p`/`sqrt` may differ in the last bit).
    #[track_caller]
    pub fn random_normal(
        &mut self,
        shape: impl Into<Shape>,
        mean: f32,
        std: f32,
        seed: u64,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        check_normal("random_normal", mean, std, loc)?;
        let dist = Distribution::Normal { mean, std };
        self.random(RandomSpec { dist, seed }, shape.into(), loc)
    }

    /// Like [`Graph::random_uniform`], with new numbers on every run (`tf.random.uniform`,
    /// a stateful op): run `k` of a session (counting the runs that read any stateful random
    /// op) draws from Philox's counter `[i, k_lo, k_hi, 1]`, so a session's sequence of runs is
    /// reproducible and bit-identical on every device. Two stateful ops with the same seed
    /// and shape draw the same numbers in a run: give each its own seed.
    ///
    /// ```
    /// # fn main() -> wgflow::Result<()> {
    /// use wgflow::{Graph, Session, SessionOptions};
    /// let mut g = Graph::new();
    /// let u = g.stateful_random_uniform([4], 0.0, 1.0, 7)?;
    /// let mut s = Session::new(&g, SessionOptions::default())?;
    /// let a = s.run(&[], &[u])?; // the session feeds the run counter
    /// let b = s.run(&[], &[u])?;
    /// assert_ne!(a[0].words(), b[0].words());
    /// # Ok(()) }
    /// ```
    #[track_caller]
    pub fn stateful_random_uniform(
        &mut self,
        shape: impl Into<Shape>,
        low: f32,
        high: f32,
        seed: u64,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        check_uniform("stateful_random_uniform", low, high, loc)?;
        let dist = Distribution::StatefulUniform { low, high };
        self.random(RandomSpec { dist, seed }, shape.into(), loc)
    }

    /// Like [`Graph::random_normal`], with new numbers on every run (see
    /// [`Graph::stateful_random_uniform`]).
    #[track_caller]
    pub fn stateful_random_normal(
        &mut self,
        shape: impl Into<Shape>,
        mean: f32,
        std: f32,
        seed: u64,
    ) -> Result<Tensor> {
        let loc = Location::caller();
        check_normal("stateful_random_normal", mean, std, loc)?;
        let dist = Distribution::StatefulNormal { mean, std };
        self.random(RandomSpec { dist, seed }, shape.into(), loc)
    }

    pub(super) fn random(&mut self, spec: RandomSpec, shape: Shape, loc: Loc) -> Result<Tensor> {
        let site = Site::new(spec.name(), loc);
        let inputs = if spec.dist.is_stateful() {
            vec![self.run_counter(spec.name(), loc)?]
        } else {
            Vec::new()
        };
        self.add_op(Op::Random(spec), &inputs, Declared::shape(&shape), site)
    }
}

fn check_uniform(op: &str, low: f32, high: f32, loc: Loc) -> Result<()> {
    if low.is_finite() && high.is_finite() && low <= high {
        return Ok(());
    }
    Err(Error::build(
        op,
        loc,
        format!("needs finite low <= high, got [{low}, {high})"),
    )
    .of_value())
}

fn check_normal(op: &str, mean: f32, std: f32, loc: Loc) -> Result<()> {
    if mean.is_finite() && std.is_finite() && std >= 0.0 {
        return Ok(());
    }
    Err(Error::build(
        op,
        loc,
        format!("needs a finite mean and std >= 0, got mean {mean}, std {std}"),
    )
    .of_value())
}

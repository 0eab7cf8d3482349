//! Training, TensorFlow 1 style: an optimizer turns the gradients of a loss into one train
//! target, a [`Graph::group`](crate::Graph::group) of variable assignments built as ordinary
//! graph nodes. Running that target once is one training step:
//!
//! ```
//! # fn main() -> wgflow::Result<()> {
//! use wgflow::train::{Optimizer, Sgd};
//! use wgflow::{Graph, HostTensor, Session, SessionOptions};
//! let mut g = Graph::new();
//! let w = g.variable("w", HostTensor::from([1.0f32, -2.0]))?;
//! let sq = g.mul(w, w)?;
//! let loss = g.sum(sq, [0], false)?; // gradient 2w
//! let train = Sgd::new(0.25).minimize(&mut g, loss, &[w])?;
//! let mut s = Session::new(&g, SessionOptions::default())?;
//! s.run_targets(&[], &[train])?; // w -= 0.25 * 2w
//! assert_eq!(s.read_variable(w)?.to_vec::<f32>()?, vec![0.5, -1.0]);
//! # Ok(()) }
//! ```
//!
//! The optimizers' state (momenta, Adam's moments and step count) lives in variables they
//! create next to the ones they update, so sessions keep it across runs like any variable.

pub mod optim;

pub use optim::{Adam, LearningRate, Optimizer, Sgd};

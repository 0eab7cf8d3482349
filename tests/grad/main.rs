//! Gradients against finite differences, backward kernels, optimizers, training.
//! One test binary (like naga's `tests/naga/main.rs`): each file here is a module, `pub` as
//! its items were when it was a test crate of its own.

#[path = "../common/mod.rs"]
mod common;

pub mod gpt;
pub mod grad_custom;
pub mod grad_elementwise;
pub mod grad_fused;
pub mod grad_matmul;
pub mod grad_movement;
pub mod grad_nn;
pub mod grad_reduce;
pub mod grad_smoke;
pub mod nn_backward;
pub mod optim;
pub mod train_digits;

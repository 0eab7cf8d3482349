//! Ops and kernels on every device: golden values, CPU kernels, matmuls, custom and raw
//! kernels, random ops, property tests.
//! One test binary (like naga's `tests/naga/main.rs`): each file here is a module, `pub` as
//! its items were when it was a test crate of its own.

#[path = "../common/mod.rs"]
mod common;

pub mod cpu_conv_pool;
pub mod cpu_elementwise;
pub mod cpu_matmul;
pub mod cpu_reduce_conv;
pub mod custom_kernels;
pub mod empty_tensors;
pub mod kernels;
pub mod matmul_int;
pub mod matmul_numpy;
pub mod matmul_transposed;
pub mod models;
pub mod ops_attention;
pub mod ops_elementwise;
pub mod ops_f16;
pub mod ops_golden;
pub mod ops_index;
pub mod ops_movement;
pub mod ops_nn;
pub mod ops_rows;
pub mod ops_scan;
pub mod ops_segment;
pub mod prop_elementwise;
pub mod prop_reduce;
pub mod random_stateful;
pub mod raw_kernels;
pub mod simd_levels;
pub mod vmath;

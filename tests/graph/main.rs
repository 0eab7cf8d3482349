//! Graphs and sessions: graph files, placement, variables, checkpoints, build errors,
//! memory plans, traces, transfers, the crate's architecture rules.
//! One test binary (like naga's `tests/naga/main.rs`): each file here is a module, `pub` as
//! its items were when it was a test crate of its own.

#[path = "../common/mod.rs"]
mod common;

pub mod architecture;
pub mod checkpoint;
pub mod concat_in_place;
pub mod dynamic;
pub mod errors;
pub mod file_length;
pub mod graphdef;
pub mod memory;
pub mod memory_svg;
pub mod module_cycles;
pub mod npy;
pub mod op_table;
pub mod placement;
pub mod session;
pub mod trace;
pub mod transfer;
pub mod variables;

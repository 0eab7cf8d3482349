//! Tensors and graphs at the sizes where kernels break (binding, grid and loop limits,
//! 2^24+ elements, long chains) and concurrent threads. The memory-heavy tests take
//! [`heavy`] first, so that at most one of them runs at a time whatever the test-thread
//! count.
//! One test binary (like naga's `tests/naga/main.rs`): each file here is a module, `pub` as
//! its items were when it was a test crate of its own.

#[path = "../common/mod.rs"]
mod common;

pub mod binding_limit;
pub mod concurrency;
pub mod fused_boundary;
pub mod graph_stress;
pub mod grid_boundary;
pub mod loop_limit;
pub mod reductions_big;
pub mod state_big;

/// Held by each memory-heavy test for its whole run: several of them at once (one per test
/// thread) could take many GiB together on software adapters.
static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Waits for the other heavy tests; a failed (panicked) one does not block the rest.
pub fn heavy() -> std::sync::MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}

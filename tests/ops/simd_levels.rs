//! Every vector body of cpu:0's kernels against float64 and NumPy references: the golden and
//! float64 tests below run again in a child process with `WGFLOW_CPU_SIMD` capped at each
//! level under this CPU's (`ops::simd`), so a machine with AVX-512 also tests the AVX2 and
//! portable bodies.

use std::process::Command;
use wgflow::ops::simd::{level, SimdLevel};

/// Tests whose kernels branch on the level, each checked against an independent reference.
const TESTS: &[&str] = &[
    "simd_levels::every_simd_level_matches_the_references",
    "ops_elementwise::every_elementwise_op_on_cpu_matches_numpy",
    "ops_golden::every_op_on_cpu_matches_numpy",
    "cpu_conv_pool::pooled_convolutions_match_float64",
    "cpu_conv_pool::bias_and_relu_in_registers_match_the_separate_pass",
    "ops_attention::fused_attention_and_its_gradients_match_float64_and_the_composite_on_every_device",
    "ops_rows::fused_layer_norm_and_its_gradients_match_float64_on_every_device",
    "ops_rows::fused_cross_entropy_and_its_gradient_match_float64_on_every_device",
    "matmul_numpy::shapes_and_values_follow_numpy",
    "matmul_int::integer_products_wrap_like_i32_on_every_device",
];

#[test]
fn every_simd_level_matches_the_references() {
    if let Ok(cap) = std::env::var("WGFLOW_CPU_SIMD") {
        // A child run (the parent covers the levels): the cap holds.
        assert!(
            level().name() == cap || level() == SimdLevel::Portable,
            "{cap}: {level:?}",
            level = level()
        );
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let below = [
        SimdLevel::Portable,
        SimdLevel::Avx2,
        SimdLevel::Avx512,
        SimdLevel::Avx512Vnni,
        SimdLevel::Amx,
    ];
    for cap in below.into_iter().filter(|&l| l < level()) {
        let out = Command::new(&exe)
            .args(TESTS)
            .args(["--exact", "--test-threads", "1"])
            .env("WGFLOW_CPU_SIMD", cap.name())
            .output()
            .expect("run the test binary");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "at WGFLOW_CPU_SIMD={}:\n{text}\n{}",
            cap.name(),
            String::from_utf8_lossy(&out.stderr)
        );
        let ran = format!("{} passed", TESTS.len());
        assert!(
            text.contains(&ran),
            "at {}: not all ran:\n{text}",
            cap.name()
        );
        eprintln!("WGFLOW_CPU_SIMD={}: {ran}", cap.name());
    }
}

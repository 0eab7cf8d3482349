//! The on-disk pipeline cache: written after pipelines are created, off with
//! `WGFLOW_PIPELINE_CACHE=0`. Its own test binary, because the cache directory is read once
//! per process when a GPU context is created.

mod common;

use wgflow::{Device, Graph};

#[test]
fn pipeline_cache_is_written_to_the_cache_dir() {
    let dir = std::env::temp_dir().join(format!("wgflow-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::env::set_var("WGFLOW_CACHE_DIR", &dir);
    let gpus = common::gpus();
    let vulkan: Vec<Device> = wgflow::devices()
        .into_iter()
        .filter(|d| d.device.is_gpu() && d.backend == "vulkan")
        .map(|d| d.device)
        .collect();
    let mut g = Graph::new();
    let a = g.constant([1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let b = g.sqrt(a).unwrap();
    for gpu in &gpus {
        let out = common::session_on(&g, *gpu).run(&[], &[b]).unwrap();
        assert_eq!(out[0].to_f32().unwrap()[3], 2.0);
    }
    // wgpu supports pipeline caches on Vulkan; GL has none.
    let files: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    if !vulkan.is_empty() {
        assert!(
            files.iter().any(|f| f
                .file_name()
                .to_string_lossy()
                .starts_with("wgpu_pipeline_cache_vulkan")),
            "no cache file in {}",
            dir.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

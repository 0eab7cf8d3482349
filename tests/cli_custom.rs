//! The `wgflow` binary on saved graphs holding user kernels: a typed elementwise function runs
//! on every device; a raw WGSL kernel runs on every GPU and is refused on `cpu:0` with the
//! placement error on stderr.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};
use wgflow::ops::custom::{ElementwiseFn, Invocations, OutputRule, RawWgsl};
use wgflow::{DType, Device, Graph};

fn wgflow(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wgflow"))
        .args(args)
        .env_remove("WGFLOW_VISIBLE_DEVICES")
        .output()
        .expect("run wgflow")
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wgflow-cli-custom-{}-{name}", std::process::id()));
    std::fs::remove_dir_all(&d).ok();
    std::fs::create_dir_all(&d).unwrap();
    d
}

const REVERSE: &str = r#"
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn rev(@builtin(global_invocation_id) gid: vec3<u32>) {
    let n = arrayLength(&y);
    if (gid.x < n) { y[gid.x] = x[n - 1u - gid.x]; }
}
"#;

#[test]
fn saved_user_kernels_run_through_the_cli() {
    let dir = scratch("graphs");
    let mut g = Graph::new();
    let x = g.constant([1.0f32, -2.0, 3.0, 4.5]).unwrap();
    let k = ElementwiseFn::new("sq_plus", |[a]| a * a + 0.5)
        .signature("f32(f32)")
        .unwrap();
    let y = g.apply(&k, &[x]).unwrap();
    let custom = dir.join("custom.json");
    g.save(&custom).unwrap();
    let r = RawWgsl::new(
        "rev",
        REVERSE,
        "rev",
        OutputRule::LikeInput(0),
        Invocations::PerOutputElement,
    );
    let z = g.raw_kernel(&r, &[y]).unwrap();
    assert_eq!(g.dtype(z).unwrap(), DType::F32);
    let raw = dir.join("raw.json");
    g.save(&raw).unwrap();

    let mut devices = vec![Device::Cpu];
    devices.extend(common::gpus());
    for dev in devices {
        let d = dev.to_string();
        let out = scratch(&format!("out-{d}").replace(':', "_"));
        let o = wgflow(&[
            "run",
            custom.to_str().unwrap(),
            "--fetch",
            "sq_plus",
            "--device",
            &d,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let got = wgflow::npy::read(out.join("sq_plus.npy")).unwrap();
        assert_eq!(got.to_vec::<f32>().unwrap(), vec![1.5, 4.5, 9.5, 20.75]);

        let o = wgflow(&[
            "run",
            raw.to_str().unwrap(),
            "--fetch",
            "rev",
            "--device",
            &d,
            "--out",
            out.to_str().unwrap(),
        ]);
        if dev.is_gpu() {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let got = wgflow::npy::read(out.join("rev.npy")).unwrap();
            assert_eq!(got.to_vec::<f32>().unwrap(), vec![20.75, 9.5, 4.5, 1.5]);
        } else {
            assert!(!o.status.success());
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.contains("cannot place node 'rev'") && err.contains("runs only on a GPU"),
                "{err}"
            );
        }
    }
}

//! Raw WGSL kernels: values on every GPU, validation and binding-convention errors, GPU-only
//! placement (error on cpu:0, moved by soft placement), and GraphDef.

use crate::common;

use std::sync::Arc;
use wgflow::ops::custom::{Invocations, OutputRule, RawWgsl};
use wgflow::{DType, Device, Error, Graph, Session, SessionOptions, Shape};

/// `y[i] = -x[n-1-i]`: a reversal and a negation, which built-in ops would need two
/// kernels for (and there is no reverse op at all).
const REVERSE: &str = r#"
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn reverse_neg(@builtin(global_invocation_id) gid: vec3<u32>) {
    let n = arrayLength(&y);
    if (gid.x < n) {
        y[gid.x] = -x[n - 1u - gid.x];
    }
}
"#;

/// `out = a * x + y` with `a` a one-element input.
const SAXPY: &str = r#"
@group(0) @binding(0) var<storage, read_write> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(32)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < arrayLength(&out)) {
        out[gid.x] = a[0] * x[gid.x] + y[gid.x];
    }
}
"#;

fn reverse() -> RawWgsl {
    RawWgsl::new(
        "reverse_neg",
        REVERSE,
        "reverse_neg",
        OutputRule::LikeInput(0),
        Invocations::PerOutputElement,
    )
}

fn gpu_session(g: &Graph, d: Device) -> Session {
    common::session_on(g, d)
}

#[test]
fn raw_kernels_give_expected_values_on_every_gpu() {
    let saxpy = RawWgsl::new(
        "saxpy",
        SAXPY,
        "main",
        OutputRule::Fn(Arc::new(|ins: &[(Shape, DType)]| {
            if ins.len() != 3 || ins[1] != ins[2] {
                return Err(format!(
                    "saxpy needs a, x, y with x and y alike, got {ins:?}"
                ));
            }
            Ok(ins[1].clone())
        })),
        Invocations::PerOutputElement,
    );
    let n = 1000; // several workgroups, last one partial
    let xs: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let ys: Vec<f32> = (0..n).map(|i| 3.0 - i as f32).collect();
    let mut g = Graph::new();
    let x = g.constant(xs.clone()).unwrap();
    let y = g.constant(ys.clone()).unwrap();
    let a = g.constant([2.0f32]).unwrap();
    let r = g.raw_kernel(&reverse(), &[x]).unwrap();
    let s = g.raw_kernel(&saxpy, &[a, x, y]).unwrap();
    // A raw kernel feeding a normal op (and the other way round) on the same device.
    let t = g.add(r, s).unwrap();
    assert_eq!(g.shape(r).unwrap().dims(), &[n]);
    let want_r: Vec<f32> = (0..n).map(|i| -xs[n - 1 - i]).collect();
    let want_s: Vec<f32> = (0..n).map(|i| 2.0 * xs[i] + ys[i]).collect();
    let want_t: Vec<f32> = (0..n).map(|i| want_r[i] + want_s[i]).collect();
    let gpus = common::gpus();
    for &d in &gpus {
        let out = gpu_session(&g, d).run(&[], &[r, s, t]).unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), want_r, "{d}");
        assert_eq!(out[1].to_vec::<f32>().unwrap(), want_s, "{d}");
        assert_eq!(out[2].to_vec::<f32>().unwrap(), want_t, "{d}");
    }
    // The closure rule's error is a build error at the call.
    let e = g.raw_kernel(&saxpy, &[x, a, y]).unwrap_err().to_string();
    assert!(
        e.contains("raw kernel 'saxpy'") && e.contains("output rule"),
        "{e}"
    );
}

#[test]
fn fixed_invocations_and_output() {
    // One invocation writes a 2x2 block; the output rule is fixed.
    let src = r#"
@group(0) @binding(0) var<storage, read_write> o: array<i32>;
@compute @workgroup_size(1)
fn fill(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = 0u; i < 4u; i++) { o[i] = i32(i) * 7 - 3; }
}"#;
    let k = RawWgsl::new(
        "fill",
        src,
        "fill",
        OutputRule::Fixed(Shape::new([2, 2]), DType::I32),
        Invocations::Fixed(1),
    );
    let mut g = Graph::new();
    let o = g.raw_kernel(&k, &[]).unwrap();
    assert_eq!(g.shape(o).unwrap().dims(), &[2, 2]);
    for d in common::gpus() {
        let out = gpu_session(&g, d).run(&[], &[o]).unwrap();
        assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![-3, 4, 11, 18], "{d}");
    }
}

/// A raw kernel dispatched with more invocations than the grid holds: the error counts
/// invocations (not bytes), gives the workgroup size, and names the per-dimension limit,
/// squared because the grid folds into 2-D.
#[test]
fn too_many_invocations_name_the_workgroup_size_and_the_grid_limit() {
    let src = r#"
@group(0) @binding(0) var<storage, read_write> o: array<u32>;
@compute @workgroup_size(64)
fn tick(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x == 0u && gid.y == 0u) { o[0] = 1u; }
}"#;
    let invocations: u64 = 1 << 40;
    let k = RawWgsl::new(
        "tick",
        src,
        "tick",
        OutputRule::Fixed(Shape::new([1]), DType::U32),
        Invocations::Fixed(invocations),
    );
    let mut g = Graph::new();
    let o = g.raw_kernel(&k, &[]).unwrap();
    let check = |msg: &str, limit: u64| {
        let want = [
            format!("a dispatch of {invocations} invocations"),
            "in workgroups of 64".to_string(),
            format!("needs {} workgroups", invocations / 64),
            format!(
                "max_compute_workgroups_per_dimension squared = {limit}² = {}",
                limit * limit
            ),
        ];
        for w in &want {
            assert!(msg.contains(w.as_str()), "wanted {w:?} in: {msg}");
        }
        assert!(!msg.contains("bytes"), "{msg}");
    };
    // Without a GPU: the kernel's own check, at the default per-dimension limit.
    let kernel = wgflow::ops::Kernel::RawWgsl(wgflow::ops::custom::RawKernel {
        name: "tick".into(),
        source: src.into(),
        entry_point: "tick".into(),
        workgroup_size: 64,
        invocations,
    });
    let e = kernel.grid_on("tick", Device::Gpu(0), 65535).unwrap_err();
    assert!(matches!(e, Error::Dispatch { .. }), "{e:?}");
    check(&e.to_string(), 65535);
    assert_eq!(
        kernel.grid_on("tick", Device::Gpu(0), 1 << 20).unwrap(),
        (1 << 20, 1 << 14)
    );
    for d in common::gpus() {
        let limit = wgflow::devices()
            .into_iter()
            .find(|p| p.device == d)
            .unwrap()
            .limits
            .max_compute_workgroups_per_dimension as u64;
        if limit * limit >= invocations / 64 {
            continue;
        }
        let e = gpu_session(&g, d).plan(&[o]).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("node '{}' on {d}", g.name(o).unwrap())),
            "{msg}"
        );
        check(&msg, limit);
    }
}

fn shader_msg(e: Error) -> String {
    match &e {
        Error::Shader { .. } => e.to_string(),
        other => panic!("expected a shader error, got {other:?}"),
    }
}

#[test]
fn invalid_wgsl_names_line_and_column() {
    let src = REVERSE.replace("-x[n - 1u - gid.x]", "-x[n - 1u - gid.x] + undefined_thing");
    let k = RawWgsl::new(
        "bad",
        &src,
        "reverse_neg",
        OutputRule::LikeInput(0),
        Invocations::PerOutputElement,
    );
    let mut g = Graph::new();
    let x = g.constant([1.0f32]).unwrap();
    let m = shader_msg(g.raw_kernel(&k, &[x]).unwrap_err());
    // The bad line is line 9 of the source (it starts with a newline); naga reports col 40.
    assert!(m.contains("bad:9:"), "{m}");
    assert!(m.contains("undefined_thing"), "{m}");
    // A type error found by validation, not parsing, also carries a position.
    let src = REVERSE.replace("y[gid.x] = -x", "y[gid.x] = 1u + x");
    let k = RawWgsl::new(
        "typed",
        &src,
        "reverse_neg",
        OutputRule::LikeInput(0),
        Invocations::PerOutputElement,
    );
    let m = shader_msg(g.raw_kernel(&k, &[x]).unwrap_err());
    assert!(m.contains("typed:"), "{m}");
}

#[test]
fn bindings_and_entry_point_are_checked_against_the_convention() {
    let mut g = Graph::new();
    let x = g.constant([1.0f32, 2.0]).unwrap();
    let cases = [
        (
            REVERSE.replace("@binding(1)", "@binding(2)"),
            "reverse_neg",
            "@binding(2)",
        ),
        (
            REVERSE.replace("@group(0) @binding(1)", "@group(1) @binding(1)"),
            "reverse_neg",
            "@group(1)",
        ),
        (
            REVERSE.replace("var<storage, read_write> x", "var<storage, read> x"),
            "reverse_neg",
            "must be declared var<storage, read_write>",
        ),
        (
            REVERSE.to_string(),
            "main",
            "no entry point 'main' (the shader has: reverse_neg)",
        ),
        (
            REVERSE.replace("@workgroup_size(64)", "@workgroup_size(8, 8)"),
            "reverse_neg",
            "must be one-dimensional",
        ),
    ];
    for (src, entry, want) in cases {
        let k = RawWgsl::new(
            "k",
            &src,
            entry,
            OutputRule::LikeInput(0),
            Invocations::PerOutputElement,
        );
        let m = shader_msg(g.raw_kernel(&k, &[x]).unwrap_err());
        assert!(m.contains(want), "want '{want}' in: {m}");
    }
    // A uniform is not part of the convention.
    let src = r#"
@group(0) @binding(0) var<uniform> x: vec4<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) { y[gid.x] = x.x; }
"#;
    let k = RawWgsl::new(
        "u",
        src,
        "main",
        OutputRule::LikeInput(0),
        Invocations::PerOutputElement,
    );
    let m = shader_msg(g.raw_kernel(&k, &[x]).unwrap_err());
    assert!(
        m.contains("'x' at @binding(0) must be declared var<storage, read_write>"),
        "{m}"
    );
}

/// A shader whose bindings disagree with the tensors bound to them would read bits of one
/// type as another, or leave its output unwritten (and, one binding short, write an input):
/// each is refused when the node is built, with the binding and the tensor named.
#[test]
fn bindings_must_hold_their_tensors_dtypes_and_the_output() {
    let mut g = Graph::new();
    let x = g.constant([1.0f32, 2.0]).unwrap();
    let i = g.constant([1i32, 2]).unwrap();
    let k = |src: &str, out: OutputRule| {
        RawWgsl::new("k", src, "reverse_neg", out, Invocations::PerOutputElement)
    };
    // An i32 input read as f32.
    let e = g
        .raw_kernel(&k(REVERSE, OutputRule::LikeInput(0)), &[i])
        .unwrap_err();
    assert_eq!(
        e.build_kind_of(),
        Some(&wgflow::BuildKind::DType {
            inputs: vec![DType::I32]
        }),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("'x' at @binding(0) must be array<i32>: input 0 is i32"),
        "{e}"
    );
    // An i32 output written as f32.
    let e = g
        .raw_kernel(
            &k(REVERSE, OutputRule::Fixed(Shape::new(vec![2]), DType::I32)),
            &[x],
        )
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("'y' at @binding(1) must be array<i32>: the output is i32"),
        "{e}"
    );
    // Two inputs to a shader with one input binding: binding 1 would be read as input 1
    // and written as the output.
    let m = shader_msg(
        g.raw_kernel(&k(REVERSE, OutputRule::LikeInput(0)), &[x, x])
            .unwrap_err(),
    );
    assert!(m.contains("declares no @binding(2) for its output"), "{m}");
    // vec4 and atomic element types of the right scalar are accepted.
    let vec4 = REVERSE.replace("array<f32>", "array<vec4<f32>>");
    g.raw_kernel(&k(&vec4, OutputRule::LikeInput(0)), &[x])
        .unwrap();
    // A gradient kernel is checked the same way: dy has the output's dtype.
    let grad = RawWgsl::new(
        "g",
        GRAD_I32_DY,
        "main",
        OutputRule::LikeInput(0),
        Invocations::PerOutputElement,
    );
    let with_grad = k(REVERSE, OutputRule::LikeInput(0)).with_gradient(0, grad);
    let m = shader_msg(g.raw_kernel(&with_grad, &[x]).unwrap_err());
    assert!(
        m.contains("'dy' at @binding(1) must be array<f32>: input 1 is f32"),
        "{m}"
    );
}

/// A gradient kernel for a one-input f32 kernel whose `dy` binding is wrongly `i32`.
const GRAD_I32_DY: &str = r#"
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> dy: array<i32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < arrayLength(&dx)) { dx[gid.x] = f32(dy[gid.x]) * x[gid.x]; }
}
"#;

#[test]
fn raw_kernel_on_cpu_is_a_placement_error_unless_soft_placement_moves_it() {
    let mut g = Graph::new();
    let x = g.constant([1.0f32, 2.0, 3.0]).unwrap();
    let r = g
        .device("cpu:0", |g| g.raw_kernel(&reverse(), &[x]))
        .unwrap();
    let y = g.relu(r).unwrap();
    let visible = Some(common::gpu_indices());
    let strict = SessionOptions {
        default_device: Some(Device::Cpu),
        visible_devices: visible.clone(),
        ..Default::default()
    };
    let e = Session::new(&g, strict.clone())
        .unwrap()
        .run(&[], &[y])
        .unwrap_err();
    match &e {
        Error::Placement {
            node,
            requested,
            message,
            ..
        } => {
            assert_eq!(node, "reverse_neg");
            assert_eq!(requested, "cpu:0");
            assert!(
                message.contains("runs only on a GPU") && message.contains("raw_kernels.rs"),
                "{message}"
            );
        }
        other => panic!("expected a placement error, got {other:?}"),
    }
    // Default placement on cpu:0 (no scope) is refused the same way.
    let mut g2 = Graph::new();
    let x2 = g2.constant([1.0f32, 2.0, 3.0]).unwrap();
    let r2 = g2.raw_kernel(&reverse(), &[x2]).unwrap();
    let e = Session::new(&g2, strict)
        .unwrap()
        .run(&[], &[r2])
        .unwrap_err();
    assert!(matches!(e, Error::Placement { .. }), "{e}");
    // With no GPU visible, soft placement cannot help.
    let no_gpu = SessionOptions {
        soft_placement: true,
        visible_devices: Some(vec![]),
        ..Default::default()
    };
    let e = Session::new(&g, no_gpu)
        .unwrap()
        .run(&[], &[y])
        .unwrap_err();
    assert!(e.to_string().contains("no GPU is visible"), "{e}");
    // Soft placement moves the raw kernel to a GPU; the relu stays on cpu:0.
    if common::gpus().is_empty() {
        return;
    }
    let soft = SessionOptions {
        default_device: Some(Device::Cpu),
        soft_placement: true,
        visible_devices: visible,
        ..Default::default()
    };
    let mut s = Session::new(&g, soft).unwrap();
    let out = s.run(&[], &[y]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![0.0, 0.0, 0.0]);
    let plan = s.plan(&[y]).unwrap();
    let placed: Vec<(String, Device)> = plan.placement.clone();
    let dev = |name: &str| placed.iter().find(|(n, _)| n == name).map(|(_, d)| *d);
    assert!(dev("reverse_neg").is_some_and(|d| d.is_gpu()), "{placed:?}");
    assert_eq!(dev("relu"), Some(Device::Cpu));
}

#[test]
fn raw_kernels_save_and_load_unless_the_output_rule_is_a_closure() {
    let mut g = Graph::new();
    let x = g.constant([1.0f32, -2.0, 3.0]).unwrap();
    let r = g.raw_kernel(&reverse(), &[x]).unwrap();
    let text = g.to_json().unwrap();
    assert!(
        text.contains("\"op\": \"raw_wgsl\"") && text.contains("\"output_like_input\": 0"),
        "{text}"
    );
    let h = Graph::from_json(&text).unwrap();
    assert_eq!(h.to_def().unwrap(), g.to_def().unwrap());
    for d in common::gpus() {
        let a = gpu_session(&g, d).run(&[], &[r]).unwrap();
        let hr = h.tensor(g.name(r).unwrap()).unwrap();
        let b = gpu_session(&h, d).run(&[], &[hr]).unwrap();
        assert_eq!(a[0].words(), b[0].words());
        assert_eq!(b[0].to_vec::<f32>().unwrap(), vec![-3.0, 2.0, -1.0]);
    }
    // Bad WGSL in a file is an error naming the node.
    let bad = text.replace("arrayLength(&y)", "arrayLength(&nope)");
    let e = Graph::from_json(&bad).unwrap_err().to_string();
    assert!(e.contains("'reverse_neg'") && e.contains("nope"), "{e}");
    // A closure rule cannot be saved.
    let k = RawWgsl::new(
        "closure_rule",
        REVERSE,
        "reverse_neg",
        OutputRule::Fn(Arc::new(|ins: &[(Shape, DType)]| Ok(ins[0].clone()))),
        Invocations::PerOutputElement,
    );
    g.raw_kernel(&k, &[x]).unwrap();
    let e = g.to_def().unwrap_err().to_string();
    assert!(
        e.contains("'closure_rule'") && e.contains("cannot be saved"),
        "{e}"
    );
}

/// With only software adapters the session's default device is cpu:0 (`Device::best`), yet an
/// unscoped raw kernel still runs: it goes to the first visible GPU, the rest to the default.
#[test]
fn an_unscoped_raw_kernel_finds_a_gpu_when_the_default_is_cpu() {
    let mut g = Graph::new();
    let x = g.constant([1.0f32, -2.0, 3.0]).unwrap();
    let r = g.raw_kernel(&reverse(), &[x]).unwrap();
    let y = g.relu(r).unwrap();
    let mut s = Session::new(&g, SessionOptions::default()).unwrap();
    if common::gpus().is_empty() {
        let e = s.run(&[], &[y]).unwrap_err();
        assert!(e.to_string().contains("no GPU is visible"), "{e}");
        return;
    }
    let out = s.run(&[], &[y]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![0.0, 2.0, 0.0]);
    let plan = s.plan(&[y]).unwrap();
    let dev = |name: &str| {
        plan.placement
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, d)| *d)
    };
    assert_eq!(dev("reverse_neg"), Some(Device::Gpu(0)));
    assert_eq!(dev("relu"), Some(s.default_device()));
}

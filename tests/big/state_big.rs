//! Variables and gradients past the sizes where kernels break, checked exactly against values
//! computed in the test: a variable over lavapipe's 128 MiB storage-binding limit (bound as
//! windows, updated by a copy of the same size), and a gradient over 2^24 + 1 elements
//! (past f32's exact integers, so an index computed in f32 would be caught).

use crate::common::{gpus, session_on};
use wgflow::{Axes, DType, Device, Graph, HostTensor, Initializer};

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

#[test]
fn a_variable_over_the_binding_limit_is_updated_exactly_on_every_device() {
    let _heavy = crate::heavy();
    // 2^25 + 1 f32 = 134,217,732 bytes: past 128 MiB (134,217,728).
    let n = (1usize << 25) + 1;
    let mut g = Graph::new();
    let v = g
        .variable_with("v", [n], DType::F32, Initializer::Ones)
        .unwrap();
    let one = g.constant(1.0f32).unwrap();
    let bump = g.assign_add(v, one).unwrap();
    for d in devices() {
        let mut s = session_on(&g, d);
        s.run_targets(&[], &[bump]).unwrap();
        s.run_targets(&[], &[bump]).unwrap();
        let got = s.read_variable(v).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(got.len(), n);
        let wrong = got.iter().position(|&x| x != 3.0);
        assert_eq!(wrong, None, "{d}: element {wrong:?} is not 3");
    }
}

#[test]
fn a_gradient_over_2_pow_24_elements_is_exact_on_every_device() {
    let _heavy = crate::heavy();
    let n = (1usize << 24) + 1;
    let values: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
    let mut g = Graph::new();
    let x = g
        .variable("x", HostTensor::new(vec![n], values.clone()).unwrap())
        .unwrap();
    let sq = g.mul(x, x).unwrap();
    let loss = g.sum(sq, Axes::All, false).unwrap();
    let dx = g.gradients(loss, &[x]).unwrap()[0].unwrap();
    for d in devices() {
        let got = session_on(&g, d).run(&[], &[dx]).unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        let wrong = got.iter().zip(&values).position(|(a, b)| *a != 2.0 * b);
        assert_eq!(wrong, None, "{d}: d(sum x²)/dx at {wrong:?} is not 2x");
    }
}

#[test]
fn initial_values_made_in_pieces_equal_the_whole_value_on_every_device() {
    let _heavy = crate::heavy();
    // Past three 2^20-element pieces, with an odd f16 count so the last piece packs a half word.
    let n = 3 * (1usize << 20) + 5;
    let mut g = Graph::new();
    let cases = [
        (DType::F32, Initializer::GlorotUniform { seed: 11 }),
        (
            DType::F16,
            Initializer::Normal {
                mean: 1.0,
                std: 2.0,
                seed: 12,
            },
        ),
        (DType::I32, Initializer::Ones),
        (DType::F32, Initializer::Zeros),
    ];
    let vars: Vec<_> = cases
        .iter()
        .enumerate()
        .map(|(k, (dtype, init))| {
            g.variable_with(&format!("v{k}"), [n], *dtype, init.clone())
                .unwrap()
        })
        .collect();
    for d in devices() {
        let mut s = session_on(&g, d);
        for ((dtype, init), v) in cases.iter().zip(&vars) {
            let whole = init.value("v", &[n].into(), *dtype).unwrap();
            let got = match s.read_variable(*v) {
                // llvmpipe's GL has no shader-f16.
                Err(wgflow::Error::Placement { .. }) if *dtype == DType::F16 => continue,
                got => got.unwrap(),
            };
            assert_eq!(got.words(), whole.words(), "{d} {dtype} {init:?}");
        }
    }
}

/// Under a 6 GB address-space limit, an 8 GiB variable is an error on every device (the GPU's
/// `max_buffer_size` checked before any value is made; `cpu:0`'s memory asked for fallibly),
/// never an abort. Runs in a child process (this binary again) under `ulimit -v`.
#[cfg(target_os = "linux")]
#[test]
fn a_variable_too_large_for_memory_is_an_error_not_an_abort() {
    let _heavy = crate::heavy();
    if std::env::var_os("WGFLOW_HUGE_VARIABLE_CHILD").is_some() {
        let mut g = Graph::new();
        let v = g
            .variable_with(
                "v",
                [1usize << 31],
                DType::F32,
                Initializer::GlorotUniform { seed: 1 },
            )
            .unwrap();
        for d in devices() {
            let mut s = session_on(&g, d);
            let e = s.read_variable(v).unwrap_err();
            assert!(
                matches!(e, wgflow::Error::Alloc { .. } | wgflow::Error::Limit { .. }),
                "{d}: {e}"
            );
            eprintln!("{d}: {e}");
        }
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 6000000 && exec '{}' --exact state_big::a_variable_too_large_for_memory_is_an_error_not_an_abort --nocapture",
            exe.display()
        ))
        .env("WGFLOW_HUGE_VARIABLE_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stderr}", out.status);
    assert!(stderr.contains("cpu:0"), "{stderr}");
}

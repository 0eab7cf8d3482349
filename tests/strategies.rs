//! The kernel family for real GPUs (workgroup-tiled matmul, 4x4 register blocks), run on the
//! adapters present by forcing it with `WGFLOW_KERNELS=hardware`, checked against cpu:0.
//! CI has only software adapters, which would otherwise never run these kernels. One test
//! in its own binary, so setting the variable races with nothing.

mod common;

use wgflow::backend::gpu::context;
use wgflow::compile::StepKind;
use wgflow::ops::Kernel;
use wgflow::{f16, DType, Device, Graph, HostTensor, Tensor};

fn konst(g: &mut Graph, shape: &[usize], seed: u32, dtype: DType) -> Tensor {
    let n: usize = shape.iter().product();
    let vals: Vec<f32> = (0..n)
        .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 500.0 - 1.0)
        .collect();
    let t = match dtype {
        DType::F16 => HostTensor::new(
            shape.to_vec(),
            vals.into_iter().map(f16::from_f32).collect(),
        )
        .unwrap(),
        _ => HostTensor::new(shape.to_vec(), vals).unwrap(),
    };
    g.constant(t).unwrap()
}

#[test]
fn hardware_kernels_match_cpu_on_every_adapter() {
    std::env::set_var("WGFLOW_KERNELS", "hardware");
    let gpus = common::gpus();
    let f16_gpus: Vec<Device> = wgflow::devices()
        .into_iter()
        .filter(|d| d.device.is_gpu() && d.limits.shader_f16)
        .map(|d| d.device)
        .collect();
    for dtype in [DType::F32, DType::F16] {
        let mut g = Graph::new();
        let mut outs = Vec::new();
        for (i, (a, b)) in [
            (vec![128usize, 64], vec![64usize, 128]),
            (vec![2, 64, 32], vec![32, 64]),
            (vec![3, 1, 64, 48], vec![2, 48, 64]),
            (vec![32, 16], vec![16, 64]),
        ]
        .into_iter()
        .enumerate()
        {
            let x = konst(&mut g, &a, i as u32, dtype);
            let y = konst(&mut g, &b, 50 + i as u32, dtype);
            outs.push(g.matmul(x, y).unwrap());
        }
        // A tiled product with a bias, relu and residual epilogue.
        let x = konst(&mut g, &[64, 32], 7, dtype);
        let w = konst(&mut g, &[32, 128], 8, dtype);
        let bias = konst(&mut g, &[128], 9, dtype);
        let res = konst(&mut g, &[64, 128], 10, dtype);
        let m = g.matmul(x, w).unwrap();
        let m = g.add(m, bias).unwrap();
        let m = g.relu(m).unwrap();
        outs.push(g.add(m, res).unwrap());

        let mut cpu = common::session_on(&g, Device::Cpu);
        let want = cpu.run(&[], &outs).unwrap();
        let plan = cpu.plan(&outs).unwrap();
        for gpu in &gpus {
            if dtype == DType::F16 && !f16_gpus.contains(gpu) {
                continue;
            }
            let Device::Gpu(i) = *gpu else { continue };
            let kind = context::get(i).unwrap().adapter_kind();
            assert!(!kind.software, "WGFLOW_KERNELS=hardware is honoured");
            let tiled: Vec<bool> = plan
                .steps
                .iter()
                .filter_map(|s| match &s.kind {
                    StepKind::Dispatch {
                        kernel: k @ Kernel::MatMul(_),
                        ..
                    } => match k.for_adapter(&kind) {
                        Kernel::MatMul(mk) => Some(mk.tiled),
                        _ => None,
                    },
                    _ => None,
                })
                .collect();
            assert_eq!(
                tiled,
                [true, true, true, false, true],
                "{}",
                plan.describe()
            );
            let got = common::session_on(&g, *gpu).run(&[], &outs).unwrap();
            let tol = if dtype == DType::F16 { 2e-3 } else { 1e-5 };
            for (k, (a, b)) in got.iter().zip(&want).enumerate() {
                common::assert_close(&format!("{gpu} {dtype} output {k}"), a, b, tol, tol);
            }
        }
    }
}

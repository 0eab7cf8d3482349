//! cpu:0's GEMM choice, measured per shape class: `matrixmultiply`'s sgemm, the `gemm`
//! crate's f32 GEMM single-threaded (`Parallelism::None`) and on two rayon threads
//! (`Parallelism::Rayon(2)`), wgflow's direct small-side kernel, cpu:0's matmul kernel
//! (`gemm` under wgflow's threading rule, reading transposed operands in place), and NumPy on the same shapes (`a.T @ b` views for transposed operands; skipped
//! with a note when `$WGFLOW_PYTHON` or `python3` has no NumPy). Medians in GFLOP/s. The
//! Rust columns are timed interleaved, one call of each per round, so a neighbour's build
//! on a shared machine slows them all alike rather than whichever ran at the time.
//!
//! Shapes: W3 (1024³), W4's layers, W6's backward products (`dW = xᵀ·dy`, `dx = dy·Wᵀ`) and
//! a small CNN's convolutions as GEMMs with their backward transposes.
//!
//! A second table puts cpu:0's i32 products (`ops/matmul/igemm.rs`: 8-bit operands shifted
//! by their zero points, as quantized models feed them) beside its f32 product on the same
//! shapes, interleaved: BERT-base's feed-forward layers at 128 tokens and a wide MLP's.
//!
//! `cargo bench --bench cpu_matmul`

use std::hint::black_box;
use std::time::{Duration, Instant};
use wgflow::ops::matmul::cpu::{direct, Operand};
use wgflow::ops::{CpuIn, Kernel, MatMulKernel};
use wgflow::{DType, Shape};

/// `(name, m, k, n, A stored transposed, B stored transposed)`.
const SHAPES: &[(&str, usize, usize, usize, bool, bool)] = &[
    ("W3 1024³", 1024, 1024, 1024, false, false),
    ("W4 x·W1", 256, 784, 512, false, false),
    ("W4 h·W2", 256, 512, 512, false, false),
    ("W4 h·W3", 256, 512, 10, false, false),
    ("W6 dW3=hᵀ·dy", 512, 256, 10, true, false),
    ("W6 dh=dy·W3ᵀ", 256, 10, 512, false, true),
    ("W6 dW2=hᵀ·dy", 512, 256, 512, true, false),
    ("W6 dh=dy·W2ᵀ", 256, 512, 512, false, true),
    ("W6 dW1=xᵀ·dy", 784, 256, 512, true, false),
    ("conv1 W·cols", 16, 9, 4096, false, false),
    ("conv1 dW=dy·colsᵀ", 16, 4096, 9, false, true),
    ("conv1 dcols=Wᵀ·dy", 9, 16, 4096, true, false),
    ("conv2 W·cols", 32, 144, 1024, false, false),
    ("conv2 dW=dy·colsᵀ", 32, 1024, 144, false, true),
    ("conv2 dcols=Wᵀ·dy", 144, 32, 1024, true, false),
    ("LSTM step h·Rᵀ, batch 8", 8, 256, 1024, false, true),
    ("LSTM step h·R, batch 8", 8, 256, 1024, false, false),
    ("LSTM step h·Rᵀ, batch 1", 1, 256, 1024, false, true),
    ("linear 24 tokens 768·3072", 24, 768, 3072, false, false),
];

/// `(name, m, k, n)` of the i32 table.
const INT_SHAPES: &[(&str, usize, usize, usize)] = &[
    ("BERT-base FFN in", 128, 768, 3072),
    ("BERT-base FFN out", 128, 3072, 768),
    ("MLP 64×784·1024", 64, 784, 1024),
    ("MLP 64×1024·1024", 64, 1024, 1024),
];

fn det(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// Median seconds of each of `fs`, timed interleaved (one call of each per round) over rounds
/// filling about `budget`, after one warm-up call each.
fn medians(budget: Duration, fs: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    for f in fs.iter_mut() {
        f();
    }
    let mut times = vec![Vec::new(); fs.len()];
    let start = Instant::now();
    while times[0].len() < 5 || (start.elapsed() < budget && times[0].len() < 500) {
        for (f, ts) in fs.iter_mut().zip(&mut times) {
            let t = Instant::now();
            f();
            ts.push(t.elapsed().as_secs_f64());
        }
    }
    times
        .into_iter()
        .map(|mut ts| {
            ts.sort_by(f64::total_cmp);
            ts[ts.len() / 2]
        })
        .collect()
}

/// `C = A · B` through the `gemm` crate: C row-major `[m, n]`, A and B read through
/// `(row, column)` strides; `read_dst = false`, so C's old contents (and `alpha`) are ignored
/// and `beta` scales the product.
///
/// # Safety
/// A's `m * k` and B's `k * n` strided elements lie inside `a` and `b`; `c` holds `m * n`.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_f32(
    (m, k, n): (usize, usize, usize),
    a: &[f32],
    sa: (usize, usize),
    b: &[f32],
    sb: (usize, usize),
    c: &mut [f32],
    par: gemm::Parallelism,
) {
    gemm::gemm(
        m,
        n,
        k,
        c.as_mut_ptr(),
        1,
        n as isize,
        false,
        a.as_ptr(),
        sa.1 as isize,
        sa.0 as isize,
        b.as_ptr(),
        sb.1 as isize,
        sb.0 as isize,
        0.0,
        1.0,
        false,
        false,
        false,
        par,
    );
}

/// NumPy's GFLOP/s per shape, or why there are none.
fn numpy() -> Result<Vec<f64>, String> {
    let python = std::env::var("WGFLOW_PYTHON").unwrap_or_else(|_| "python3".into());
    let shapes: Vec<String> = SHAPES
        .iter()
        .map(|&(_, m, k, n, ta, tb)| format!("({m},{k},{n},{},{})", ta as u8, tb as u8))
        .collect();
    let script = format!(
        r#"
import time, numpy as np
rng = np.random.default_rng(0)
for m, k, n, ta, tb in [{}]:
    a = rng.standard_normal((k, m) if ta else (m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n), dtype=np.float32)
    a = a.T if ta else a
    b = b.T if tb else b
    a @ b
    ts = []
    t0 = time.perf_counter()
    while len(ts) < 5 or (time.perf_counter() - t0 < 0.4 and len(ts) < 500):
        t = time.perf_counter(); a @ b; ts.append(time.perf_counter() - t)
    ts.sort()
    print(2 * m * k * n / ts[len(ts) // 2] / 1e9)
"#,
        shapes.join(",")
    );
    let out = std::process::Command::new(&python)
        .args(["-c", &script])
        .output()
        .map_err(|e| format!("{python}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{python} has no NumPy ({})",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().parse::<f64>().map_err(|e| e.to_string()))
        .collect()
}

fn main() {
    let budget = Duration::from_millis(1500);
    let np = numpy();
    if let Err(e) = &np {
        println!("note: NumPy column skipped: {e}");
    }
    println!(
        "rayon threads: {}; GFLOP/s, medians",
        rayon::current_num_threads()
    );
    println!(
        "| shape | m×k×n | sgemm | gemm None | gemm Rayon(2) | direct | wgflow cpu:0 | NumPy | wgflow / NumPy |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (i, &(name, m, k, n, ta, tb)) in SHAPES.iter().enumerate() {
        let a = det(m * k, 1);
        let b = det(k * n, 2);
        let (sa, sb) = (
            if ta { (1, m) } else { (k, 1) },
            if tb { (1, k) } else { (n, 1) },
        );
        let flop = 2.0 * (m * k * n) as f64;
        let kernel = Kernel::MatMul(MatMulKernel {
            a: Shape::new(vec![m, k]),
            b: Shape::new(vec![k, n]),
            out: Shape::new(vec![m, n]),
            dtype: DType::F32,
            block: None,
            tiled: false,
            epilogue: None,
            k_chunk: None,
            transposed: [ta, tb],
        });
        let (aw, bw): (&[u32], &[u32]) = (bytemuck::cast_slice(&a), bytemuck::cast_slice(&b));
        let ins = [CpuIn::Words(aw), CpuIn::Words(bw)];
        let mut cs = vec![vec![0f32; m * n]; 4];
        let mut out = vec![0u32; m * n];
        let [c_mm, c_g1, c_g2, c_d] = &mut cs[..] else {
            unreachable!("four output buffers")
        };
        let t = medians(
            budget,
            &mut [
                &mut || {
                    // SAFETY: A is `m * k` and B `k * n` elements read through strides that
                    // stay inside them; C is `m * n` and aliases neither.
                    unsafe {
                        matrixmultiply::sgemm(
                            m,
                            k,
                            n,
                            1.0,
                            a.as_ptr(),
                            sa.0 as isize,
                            sa.1 as isize,
                            b.as_ptr(),
                            sb.0 as isize,
                            sb.1 as isize,
                            0.0,
                            c_mm.as_mut_ptr(),
                            n as isize,
                            1,
                        );
                    }
                    black_box(&c_mm);
                },
                &mut || {
                    // SAFETY: as for sgemm above.
                    unsafe { gemm_f32((m, k, n), &a, sa, &b, sb, c_g1, gemm::Parallelism::None) };
                    black_box(&c_g1);
                },
                &mut || {
                    // SAFETY: as for sgemm above.
                    unsafe {
                        gemm_f32((m, k, n), &a, sa, &b, sb, c_g2, gemm::Parallelism::Rayon(2))
                    };
                    black_box(&c_g2);
                },
                &mut || {
                    let oa = Operand {
                        data: &a,
                        rows: sa.0,
                        cols: sa.1,
                    };
                    let ob = Operand {
                        data: &b,
                        rows: sb.0,
                        cols: sb.1,
                    };
                    direct(m, k, n, oa, ob, c_d);
                    black_box(&c_d);
                },
                &mut || {
                    kernel.run_cpu_into(&ins, &mut out).expect("matmul");
                    black_box(&out);
                },
            ],
        );
        // The columns compute the same product; a wrong stride would show here.
        let reference = &cs[0];
        for (col, c) in ["gemm None", "gemm Rayon(2)", "direct"]
            .iter()
            .zip(&cs[1..])
        {
            let err = reference
                .iter()
                .zip(c)
                .map(|(x, y)| (x - y).abs() / (1.0 + x.abs()))
                .fold(0f32, f32::max);
            assert!(err < 1e-3, "{name}: {col} differs from sgemm by {err}");
        }
        let ours = t[4];
        let (np_col, ratio) = match &np {
            Ok(v) => (
                format!("{:.1}", v[i]),
                format!("{:.2}", flop / ours / 1e9 / v[i]),
            ),
            Err(_) => ("—".into(), "—".into()),
        };
        let tr = |ta: bool| if ta { "ᵀ" } else { "" };
        let g = |s: f64| flop / s / 1e9;
        println!(
            "| {name} | {m}{}×{k}×{n}{} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {np_col} | {ratio} |",
            tr(ta),
            tr(tb),
            g(t[0]),
            g(t[1]),
            g(t[2]),
            g(t[3]),
            g(ours),
        );
    }
    int_table(budget);
}

/// cpu:0's i32 matmul (values in -255..=255) against its f32 matmul on the same shapes.
fn int_table(budget: Duration) {
    println!();
    println!("i32 products (GOP/s, medians; one multiply-add = 2 ops)");
    println!("| shape | m×k×n | wgflow cpu:0 i32 | wgflow cpu:0 f32 | i32 / f32 |");
    println!("|---|---|---|---|---|");
    for &(name, m, k, n) in INT_SHAPES {
        let kernel = |dtype| {
            Kernel::MatMul(MatMulKernel {
                a: Shape::new(vec![m, k]),
                b: Shape::new(vec![k, n]),
                out: Shape::new(vec![m, n]),
                dtype,
                block: None,
                tiled: false,
                epilogue: None,
                k_chunk: None,
                transposed: [false, false],
            })
        };
        let (ki, kf) = (kernel(DType::I32), kernel(DType::F32));
        let ints = |len, seed| -> Vec<u32> {
            det(len, seed)
                .iter()
                .map(|v| ((v * 255.0).round() as i32) as u32)
                .collect()
        };
        let (ai, bi) = (ints(m * k, 3), ints(k * n, 4));
        let (af, bf) = (det(m * k, 3), det(k * n, 4));
        let (afw, bfw): (&[u32], &[u32]) = (bytemuck::cast_slice(&af), bytemuck::cast_slice(&bf));
        let mut oi = vec![0u32; m * n];
        let mut of = vec![0u32; m * n];
        let t = medians(
            budget,
            &mut [
                &mut || {
                    ki.run_cpu_into(&[CpuIn::Words(&ai), CpuIn::Words(&bi)], &mut oi)
                        .expect("i32 matmul");
                    black_box(&oi);
                },
                &mut || {
                    kf.run_cpu_into(&[CpuIn::Words(afw), CpuIn::Words(bfw)], &mut of)
                        .expect("f32 matmul");
                    black_box(&of);
                },
            ],
        );
        // Spot-check the i32 product against an i64 sum.
        for &(i, j) in &[(0, 0), (m - 1, n - 1), (m / 2, n / 3)] {
            let want: i64 = (0..k)
                .map(|q| ai[i * k + q] as i32 as i64 * bi[q * n + j] as i32 as i64)
                .sum();
            assert_eq!(oi[i * n + j] as i32 as i64, want, "{name}: c[{i},{j}]");
        }
        let g = |s: f64| 2.0 * (m * k * n) as f64 / s / 1e9;
        println!(
            "| {name} | {m}×{k}×{n} | {:.1} | {:.1} | {:.2} |",
            g(t[0]),
            g(t[1]),
            t[1] / t[0]
        );
    }
}

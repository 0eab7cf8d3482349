//! gather_elements / scatter_elements on cpu:0 and every GPU: the ONNX specification's worked
//! examples (hand-computed), random cases against loops written here (f64 sums, wrapping
//! integers), duplicates, negative and clamped fed indices, a long axis that runs as several
//! passes, special values, bit-identical repeat runs, gradients against hand-derived
//! rules, errors and graph files.

use crate::common::{assert_close, gpus, session_on};
use wgflow::ops::index::{ScatterReduce, SCATTER_CHUNK};
use wgflow::{DType, Device, Error, Graph, HostTensor, Shape};

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

fn t<T: wgflow::Element>(shape: &[usize], v: Vec<T>) -> HostTensor {
    HostTensor::new(Shape(shape.to_vec()), v).unwrap()
}

/// Row-major coordinates of `i` in `dims`.
fn coords(mut i: usize, dims: &[usize]) -> Vec<usize> {
    let mut c = vec![0; dims.len()];
    for k in (0..dims.len()).rev() {
        c[k] = i % dims[k];
        i /= dims[k];
    }
    c
}

fn offset(c: &[usize], dims: &[usize]) -> usize {
    c.iter().zip(dims).fold(0, |acc, (&c, &d)| acc * d + c)
}

/// The position an index selects: negative from the end, then clamped.
fn pos(k: i32, n: usize) -> usize {
    let k = if k < 0 { k as i64 + n as i64 } else { k as i64 };
    k.clamp(0, n as i64 - 1) as usize
}

fn gather_ref(x: &[f64], xd: &[usize], idx: &[i32], id: &[usize], axis: usize) -> Vec<f64> {
    (0..idx.len())
        .map(|i| {
            let mut c = coords(i, id);
            c[axis] = pos(idx[i], xd[axis]);
            x[offset(&c, xd)]
        })
        .collect()
}

fn scatter_ref(
    data: &[f64],
    dd: &[usize],
    idx: &[i32],
    id: &[usize],
    upd: &[f64],
    axis: usize,
    reduce: ScatterReduce,
) -> Vec<f64> {
    let mut out = data.to_vec();
    for i in 0..idx.len() {
        let mut c = coords(i, id);
        c[axis] = pos(idx[i], dd[axis]);
        let o = offset(&c, dd);
        out[o] = match reduce {
            ScatterReduce::None => upd[i],
            ScatterReduce::Add => out[o] + upd[i],
            ScatterReduce::Mul => out[o] * upd[i],
            ScatterReduce::Max => out[o].max(upd[i]),
            ScatterReduce::Min => out[o].min(upd[i]),
        };
    }
    out
}

fn f32s(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

/// A small deterministic generator (no dependency on the library's random ops).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn value(&mut self) -> f64 {
        (self.next() % 2001) as f64 / 100.0 - 10.0
    }
}

#[test]
fn onnx_specification_examples_on_every_device() {
    for device in devices() {
        let mut g = Graph::new();
        // GatherElements, axis 1 and axis 0.
        let x = g.constant(t(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0])).unwrap();
        let i = g.constant(t(&[2, 2], vec![0i32, 0, 1, 0])).unwrap();
        let a = g.gather_elements(x, i, 1).unwrap();
        let x0 = g
            .constant(t(&[3, 3], (1..=9).map(|v| v as f32).collect()))
            .unwrap();
        let i0 = g.constant(t(&[2, 3], vec![1i32, 2, 0, 2, 0, 0])).unwrap();
        let b = g.gather_elements(x0, i0, 0).unwrap();
        // ScatterElements, axis 0 and axis 1 (with a negative index), and add with duplicates.
        let z = g.zeros([3, 3], DType::F32).unwrap();
        let si = g.constant(t(&[2, 3], vec![1i32, 0, 2, 0, 2, 1])).unwrap();
        let su = g
            .constant(t(&[2, 3], vec![1.0f32, 1.1, 1.2, 2.0, 2.1, 2.2]))
            .unwrap();
        let c = g
            .scatter_elements(z, si, su, 0, ScatterReduce::None)
            .unwrap();
        let d1 = g
            .constant(t(&[1, 5], vec![1.0f32, 2.0, 3.0, 4.0, 5.0]))
            .unwrap();
        let ni = g.constant(t(&[1, 2], vec![1i32, -3])).unwrap();
        let nu = g.constant(t(&[1, 2], vec![1.1f32, 2.1])).unwrap();
        let d = g
            .scatter_elements(d1, ni, nu, 1, ScatterReduce::None)
            .unwrap();
        let di = g.constant(t(&[1, 2], vec![1i32, 1])).unwrap();
        let e = g.scatter_add(d1, di, nu, 1).unwrap();
        let out = session_on(&g, device).run(&[], &[a, b, c, d, e]).unwrap();
        let want = [
            t(&[2, 2], vec![1.0f32, 1.0, 4.0, 3.0]),
            t(&[2, 3], vec![4.0f32, 8.0, 3.0, 7.0, 2.0, 3.0]),
            t(
                &[3, 3],
                vec![2.0f32, 1.1, 0.0, 1.0, 0.0, 2.2, 0.0, 2.1, 1.2],
            ),
            t(&[1, 5], vec![1.0f32, 1.1, 2.1, 4.0, 5.0]),
            t(&[1, 5], vec![1.0f32, 5.2, 3.0, 4.0, 5.0]),
        ];
        for (k, (got, want)) in out.iter().zip(&want).enumerate() {
            assert_close(&format!("{device} case {k}"), got, want, 1e-6, 0.0);
        }
    }
}

#[test]
fn random_cases_with_fed_indices_match_loops_on_every_device() {
    let mut r = Lcg(7);
    // (data dims, index dims, axis): index dims at most data dims except on the axis.
    let cases: &[(&[usize], &[usize], usize)] = &[
        (&[6], &[9], 0),
        (&[4, 5], &[7, 5], 0),
        (&[4, 5], &[3, 8], 1),
        (&[3, 4, 5], &[2, 4, 3], 2),
        (&[3, 4, 5], &[3, 6, 5], 1),
        (&[2, 1, 3], &[2, 1, 3], 0),
    ];
    for &(dd, id, axis) in cases {
        let n: usize = dd.iter().product();
        let m: usize = id.iter().product();
        let data: Vec<f64> = (0..n).map(|_| r.value()).collect();
        let upd: Vec<f64> = (0..m).map(|_| r.value()).collect();
        // Mostly in range with duplicates; some negative, some past either end (clamped).
        let len = dd[axis] as i32;
        let idx: Vec<i32> = (0..m)
            .map(|k| match k % 7 {
                5 => -(1 + r.below(len as usize) as i32),
                6 => [len + 3, -len - 2][r.below(2)],
                _ => r.below(len as usize) as i32,
            })
            .collect();
        for device in devices() {
            for reduce in ScatterReduce::ALL {
                let mut g = Graph::new();
                let x = g.placeholder("x", dd.to_vec(), DType::F32).unwrap();
                let i = g.placeholder("i", id.to_vec(), DType::I32).unwrap();
                let u = g.placeholder("u", id.to_vec(), DType::F32).unwrap();
                let gathered = g.gather_elements(x, i, axis as isize).unwrap();
                let scattered = g.scatter_elements(x, i, u, axis as isize, reduce).unwrap();
                let feeds = [
                    (x, t(dd, f32s(&data))),
                    (i, t(id, idx.clone())),
                    (u, t(id, f32s(&upd))),
                ];
                let out = session_on(&g, device)
                    .run(&feeds, &[gathered, scattered])
                    .unwrap();
                let what = format!("{device} {dd:?} {id:?} axis {axis} {}", reduce.name());
                let want_g = gather_ref(&data, dd, &idx, id, axis);
                assert_close(&what, &out[0], &t(id, f32s(&want_g)), 0.0, 0.0);
                let want_s = scatter_ref(&data, dd, &idx, id, &upd, axis, reduce);
                assert_close(&what, &out[1], &t(dd, f32s(&want_s)), 1e-5, 1e-5);
            }
        }
    }
}

#[test]
fn a_long_axis_runs_in_passes_and_every_device_gives_the_same_bits() {
    // 3 passes along the indices' axis; many updates land on each of 5 rows.
    let n = 2 * SCATTER_CHUNK + 123;
    let (dd, id) = ([5usize, 3], [n, 3]);
    let mut r = Lcg(11);
    let upd: Vec<f64> = (0..n * 3).map(|_| r.value()).collect();
    let idx: Vec<i32> = (0..n * 3).map(|_| r.below(5) as i32).collect();
    let data = vec![0.5f64; 15];
    let want = scatter_ref(&data, &dd, &idx, &id, &upd, 0, ScatterReduce::Add);
    let mut first: Option<Vec<u32>> = None;
    for device in devices() {
        let mut g = Graph::new();
        let x = g.constant(t(&dd, f32s(&data))).unwrap();
        let i = g.constant(t(&id, idx.clone())).unwrap();
        let u = g.constant(t(&id, f32s(&upd))).unwrap();
        let y = g.scatter_add(x, i, u, 0).unwrap();
        let mut s = session_on(&g, device);
        let plan = s.plan(&[y]).unwrap();
        assert_eq!(plan.dispatch_count(), 3, "{device}: {}", plan.describe());
        let a = s.run(&[], &[y]).unwrap().remove(0);
        let b = s.run(&[], &[y]).unwrap().remove(0);
        assert_eq!(a.words(), b.words(), "{device}: two runs differ");
        assert_close(&device.to_string(), &a, &t(&dd, f32s(&want)), 1e-4, 1e-3);
        match &first {
            None => first = Some(a.words().to_vec()),
            Some(w) => assert_eq!(w.as_slice(), a.words(), "{device} differs from cpu:0"),
        }
    }
}

#[test]
fn integers_wrap_and_special_floats_follow_the_rules() {
    for device in devices() {
        let mut g = Graph::new();
        let d = g.constant(t(&[3], vec![i32::MAX, -5, 0])).unwrap();
        let i = g.constant(t(&[4], vec![0i32, 1, 1, 2])).unwrap();
        let u = g.constant(t(&[4], vec![1i32, -7, 3, i32::MIN])).unwrap();
        let add = g.scatter_add(d, i, u, 0).unwrap();
        let max = g.scatter_elements(d, i, u, 0, ScatterReduce::Max).unwrap();
        let min = g.scatter_elements(d, i, u, 0, ScatterReduce::Min).unwrap();
        let ud = g.constant(t(&[2], vec![u32::MAX, 1])).unwrap();
        let ui = g.constant(t(&[2], vec![1i32, 0])).unwrap();
        let uu = g.constant(t(&[2], vec![3u32, 2])).unwrap();
        let umax = g
            .scatter_elements(ud, ui, uu, 0, ScatterReduce::Max)
            .unwrap();
        let umul = g
            .scatter_elements(ud, ui, uu, 0, ScatterReduce::Mul)
            .unwrap();
        let fd = g
            .constant(t(&[4], vec![1.0f32, f32::NAN, -0.0, f32::INFINITY]))
            .unwrap();
        let fi = g.constant(t(&[4], vec![0i32, 1, 2, 3])).unwrap();
        let fu = g
            .constant(t(&[4], vec![f32::NAN, 2.0, 0.0, f32::NEG_INFINITY]))
            .unwrap();
        let fmax = g
            .scatter_elements(fd, fi, fu, 0, ScatterReduce::Max)
            .unwrap();
        let fadd = g.scatter_add(fd, fi, fu, 0).unwrap();
        let b = g.constant(t(&[3], vec![true, false, true])).unwrap();
        let bi = g.constant(t(&[2], vec![2i32, 2])).unwrap();
        let bu = g.constant(t(&[2], vec![true, false])).unwrap();
        let bset = g
            .scatter_elements(b, bi, bu, 0, ScatterReduce::None)
            .unwrap();
        let bget = g.gather_elements(b, bi, 0).unwrap();
        let out = session_on(&g, device)
            .run(&[], &[add, max, min, umax, umul, fmax, fadd, bset, bget])
            .unwrap();
        let what = device.to_string();
        assert_eq!(
            out[0].to_vec::<i32>().unwrap(),
            [i32::MIN, -9, i32::MIN],
            "{what}"
        );
        assert_eq!(out[1].to_vec::<i32>().unwrap(), [i32::MAX, 3, 0], "{what}");
        assert_eq!(out[2].to_vec::<i32>().unwrap(), [1, -7, i32::MIN], "{what}");
        assert_eq!(out[3].to_vec::<u32>().unwrap(), [u32::MAX, 3], "{what}");
        assert_eq!(
            out[4].to_vec::<u32>().unwrap(),
            [u32::MAX.wrapping_mul(2), 3],
            "{what}"
        );
        let fm = out[5].to_vec::<f32>().unwrap();
        assert!(
            fm[0].is_nan() && fm[1].is_nan(),
            "{what}: NaN propagates: {fm:?}"
        );
        assert_eq!(fm[2], 0.0, "{what}");
        assert_eq!(fm[3], f32::INFINITY, "{what}");
        let fa = out[6].to_vec::<f32>().unwrap();
        assert!(
            fa[0].is_nan() && fa[1].is_nan() && fa[3].is_nan(),
            "{what}: {fa:?}"
        );
        assert_eq!(
            out[7].to_vec::<bool>().unwrap(),
            [true, false, false],
            "{what}"
        );
        assert_eq!(out[8].to_vec::<bool>().unwrap(), [true, true], "{what}");
    }
}

#[test]
fn gradients_follow_the_rules_on_every_device() {
    // loss = Σ w·y for fixed weights w: dL/dy = w, so each gradient is computed here by hand.
    let (dd, id) = ([3usize, 4], [5usize, 4]);
    let mut r = Lcg(3);
    let data: Vec<f64> = (0..12).map(|_| r.value()).collect();
    let upd: Vec<f64> = (0..20).map(|_| r.value()).collect();
    let idx: Vec<i32> = (0..20).map(|_| r.below(3) as i32).collect();
    let wg: Vec<f64> = (0..20).map(|_| r.value()).collect();
    let ws: Vec<f64> = (0..12).map(|_| r.value()).collect();
    for device in devices() {
        for reduce in [ScatterReduce::Add, ScatterReduce::None] {
            let mut g = Graph::new();
            let x = g.constant(t(&dd, f32s(&data))).unwrap();
            let i = g.constant(t(&id, idx.clone())).unwrap();
            let u = g.constant(t(&id, f32s(&upd))).unwrap();
            let w1 = g.constant(t(&id, f32s(&wg))).unwrap();
            let w2 = g.constant(t(&dd, f32s(&ws))).unwrap();
            let ga = g.gather_elements(x, i, 0).unwrap();
            let sc = g.scatter_elements(x, i, u, 0, reduce).unwrap();
            let l1 = g.mul(ga, w1).unwrap();
            let l2 = g.mul(sc, w2).unwrap();
            let s1 = g.sum(l1, wgflow::Axes::All, false).unwrap();
            let s2 = g.sum(l2, wgflow::Axes::All, false).unwrap();
            let loss = g.add(s1, s2).unwrap();
            let grads: Vec<_> = g
                .gradients(loss, &[x, u])
                .unwrap()
                .into_iter()
                .map(|d| d.expect("a gradient"))
                .collect();
            let out = session_on(&g, device).run(&[], &grads).unwrap();
            // dx: the gather's weights added at each index, plus the scatter's data path.
            let mut dx = vec![0.0f64; 12];
            let mut written = [false; 12];
            let mut last = [usize::MAX; 12];
            for k in 0..20 {
                let c = coords(k, &id);
                let o = offset(&[idx[k] as usize, c[1]], &dd);
                dx[o] += wg[k];
                written[o] = true;
                last[o] = k;
            }
            let mut du = vec![0.0f64; 20];
            for o in 0..12 {
                dx[o] += match reduce {
                    ScatterReduce::None if written[o] => 0.0,
                    _ => ws[o],
                };
            }
            for (k, du) in du.iter_mut().enumerate() {
                let c = coords(k, &id);
                let o = offset(&[idx[k] as usize, c[1]], &dd);
                *du = match reduce {
                    ScatterReduce::None if last[o] != k => 0.0,
                    _ => ws[o],
                };
            }
            let what = format!("{device} {}", reduce.name());
            assert_close(&what, &out[0], &t(&dd, f32s(&dx)), 1e-5, 1e-5);
            assert_close(&what, &out[1], &t(&id, f32s(&du)), 1e-6, 0.0);
        }
    }
    let mut g = Graph::new();
    let x = g.constant(t(&[3], vec![1.0f32, 2.0, 3.0])).unwrap();
    let i = g.constant(t(&[2], vec![0i32, 1])).unwrap();
    let u = g.constant(t(&[2], vec![2.0f32, 2.0])).unwrap();
    let y = g.scatter_elements(x, i, u, 0, ScatterReduce::Mul).unwrap();
    let s = g.sum(y, wgflow::Axes::All, false).unwrap();
    let err = g.gradients(s, &[u]).unwrap_err();
    assert!(matches!(err, Error::NotDifferentiable { .. }), "{err}");
}

#[test]
fn bad_arguments_are_build_errors() {
    let mut g = Graph::new();
    let x = g.zeros([3, 4], DType::F32).unwrap();
    let i = g.zeros([2, 4], DType::I32).unwrap();
    let f = g.zeros([2, 4], DType::F32).unwrap();
    let r1 = g.zeros([8], DType::I32).unwrap();
    let wide = g.zeros([2, 5], DType::I32).unwrap();
    let u5 = g.zeros([2, 5], DType::F32).unwrap();
    let ui = g.zeros([2, 4], DType::I32).unwrap();
    let b = g.zeros([3, 4], DType::Bool).unwrap();
    let bu = g.zeros([2, 4], DType::Bool).unwrap();
    let bad_const = g
        .constant(t(&[2, 4], vec![0i32, 1, 2, 3, 0, 1, 2, 3]))
        .unwrap();
    let expect = |r: wgflow::Result<wgflow::Tensor>, has: &str| {
        let e = r.unwrap_err().to_string();
        assert!(e.contains(has), "'{e}' should say '{has}'");
        assert!(
            e.contains("ops_index.rs"),
            "'{e}' should point at the caller"
        );
    };
    expect(g.gather_elements(x, f, 0), "must be i32");
    expect(g.gather_elements(x, r1, 0), "rank");
    expect(g.gather_elements(x, wide, 0), "larger than");
    expect(g.gather_elements(x, i, 2), "out of range");
    expect(g.scatter_add(x, i, u5, 0), "indices' shape");
    expect(g.scatter_add(x, i, ui, 0), "cast first");
    expect(g.scatter_add(b, i, bu, 0), "not supported");
    expect(
        g.gather_elements(x, bad_const, 0),
        "index 3 is out of range",
    );
    // Replacing moves any dtype.
    g.scatter_elements(b, i, bu, 0, ScatterReduce::None)
        .unwrap();
}

#[test]
fn graph_files_round_trip() {
    let mut g = Graph::new();
    let x = g.placeholder("x", [3, 4], DType::F32).unwrap();
    let i = g.placeholder("i", [2, 4], DType::I32).unwrap();
    let u = g.placeholder("u", [2, 4], DType::F32).unwrap();
    let a = g.gather_elements(x, i, -2).unwrap();
    let b = g.scatter_elements(x, i, u, 0, ScatterReduce::Max).unwrap();
    let (c, d) = g.top_k(x, 3, 1, false).unwrap();
    let json = g.to_json().unwrap();
    assert!(
        json.contains("\"reduce\": \"max\"") || json.contains("\"reduce\":\"max\""),
        "{json}"
    );
    let h = Graph::from_json(&json).unwrap();
    assert_eq!(h.to_def().unwrap(), g.to_def().unwrap());
    assert!(json.contains("top_k_indices"), "{json}");
    let _ = (a, b, c, d);
}

#[test]
fn an_empty_scatter_is_its_data() {
    for device in devices() {
        let mut g = Graph::new();
        let x = g
            .constant(t(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]))
            .unwrap();
        let i = g.zeros([0, 3], DType::I32).unwrap();
        let u = g.zeros([0, 3], DType::F32).unwrap();
        let y = g.scatter_add(x, i, u, 0).unwrap();
        let out = session_on(&g, device).run(&[], &[y]).unwrap();
        assert_eq!(
            out[0].to_vec::<f32>().unwrap(),
            [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            "{device}"
        );
    }
}

/// Positions of the `k` best along the last axis of `rows × n`, by a stable sort here.
fn top_k_ref(x: &[f32], n: usize, k: usize, largest: bool) -> Vec<i32> {
    let key = |v: f32| if v.is_nan() { f64::INFINITY } else { v as f64 };
    x.chunks(n)
        .flat_map(|row| {
            let mut p: Vec<usize> = (0..n).collect();
            // Stable: equal keys keep their positions' order. NaN above +inf.
            p.sort_by(|&a, &b| {
                let (ka, kb) = (key(row[a]), key(row[b]));
                let (na, nb) = (row[a].is_nan(), row[b].is_nan());
                let ord = (na, ka).partial_cmp(&(nb, kb)).unwrap();
                if largest {
                    ord.reverse()
                } else {
                    ord
                }
            });
            p.into_iter().take(k).map(|s| s as i32).collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn top_k_matches_a_stable_sort_with_ties_and_nan_on_every_device() {
    let mut r = Lcg(5);
    let (rows, n) = (7, 37);
    // Few distinct values (many ties), zeros of both signs, NaN and infinities.
    let mut x: Vec<f32> = (0..rows * n).map(|_| (r.below(9) as f32) - 4.0).collect();
    x[3] = f32::NAN;
    x[40] = -0.0;
    x[41] = 0.0;
    x[50] = f32::INFINITY;
    x[51] = f32::NAN;
    x[52] = f32::NEG_INFINITY;
    for device in devices() {
        for (k, largest) in [(5, true), (5, false), (n, true), (1, false), (0, true)] {
            let mut g = Graph::new();
            let c = g.constant(t(&[rows, n], x.clone())).unwrap();
            let (v, i) = g.top_k(c, k, -1, largest).unwrap();
            let out = session_on(&g, device).run(&[], &[v, i]).unwrap();
            let want = top_k_ref(&x, n, k, largest);
            let what = format!("{device} k={k} largest={largest}");
            assert_eq!(out[1].to_vec::<i32>().unwrap(), want, "{what}");
            let vals: Vec<f32> = want
                .iter()
                .enumerate()
                .map(|(j, &p)| x[(j / k.max(1)) * n + p as usize])
                .collect();
            assert_close(&what, &out[0], &t(&[rows, k], vals), 0.0, 0.0);
        }
        // Integers along a middle axis.
        let xi: Vec<i32> = vec![5, i32::MIN, 3, 5, i32::MAX, -1, 0, 0, 7, 2, 2, -9];
        let mut g = Graph::new();
        let c = g.constant(t(&[2, 3, 2], xi.clone())).unwrap();
        let i = g.top_k_indices(c, 2, 1, true).unwrap();
        let out = session_on(&g, device).run(&[], &[i]).unwrap();
        // Rows along axis 1: (5, 3, i32::MAX) → [2, 0]; (MIN, 5, -1) → [1, 2];
        // (0, 7, 2) → [1, 2]; (0, 2, -9) → [1, 0].
        assert_eq!(
            out[0].to_vec::<i32>().unwrap(),
            [2, 1, 0, 2, 1, 1, 2, 0],
            "{device}"
        );
    }
}

#[test]
fn top_k_values_carry_the_gradient_and_bad_k_is_an_error() {
    for device in devices() {
        let mut g = Graph::new();
        let x = g
            .constant(t(&[2, 4], vec![1.0f32, 4.0, 2.0, 3.0, 9.0, 8.0, 7.0, 6.0]))
            .unwrap();
        let (v, _) = g.top_k(x, 2, 1, true).unwrap();
        let w = g
            .constant(t(&[2, 2], vec![1.0f32, 10.0, 100.0, 1000.0]))
            .unwrap();
        let y = g.mul(v, w).unwrap();
        let s = g.sum(y, wgflow::Axes::All, false).unwrap();
        let dx = g.gradients(s, &[x]).unwrap()[0].unwrap();
        let out = session_on(&g, device).run(&[], &[dx]).unwrap();
        assert_eq!(
            out[0].to_vec::<f32>().unwrap(),
            [0.0, 1.0, 0.0, 10.0, 100.0, 1000.0, 0.0, 0.0],
            "{device}"
        );
    }
    let mut g = Graph::new();
    let x = g.zeros([2, 4], DType::F32).unwrap();
    let b = g.zeros([2, 4], DType::Bool).unwrap();
    for (r, has) in [
        (g.top_k(x, 5, 1, true).map(|p| p.0), "larger than axis"),
        (g.top_k(b, 1, 1, true).map(|p| p.0), "not supported"),
        (g.top_k(x, 1, 2, true).map(|p| p.0), "out of range"),
    ] {
        let e = r.unwrap_err().to_string();
        assert!(e.contains(has) && e.contains("ops_index.rs"), "{e}");
    }
}

#[test]
fn gather_nd_and_scatter_nd_follow_the_onnx_examples_on_every_device() {
    for device in devices() {
        let mut g = Graph::new();
        let d2 = g.constant(t(&[2, 2], vec![0i32, 1, 2, 3])).unwrap();
        let i1 = g.constant(t(&[2, 2], vec![0i32, 0, 1, 1])).unwrap();
        let a = g.gather_nd(d2, i1).unwrap();
        let i2 = g.constant(t(&[2, 1], vec![1i32, 0])).unwrap();
        let b = g.gather_nd(d2, i2).unwrap();
        let d3 = g
            .constant(t(&[2, 2, 2], (0..8).collect::<Vec<i32>>()))
            .unwrap();
        let i3 = g.constant(t(&[2, 1, 2], vec![0i32, 1, 1, 0])).unwrap();
        let c = g.gather_nd(d3, i3).unwrap();
        let i4 = g.constant(t(&[2], vec![-1i32, 0])).unwrap();
        let d = g.gather_nd(d3, i4).unwrap();
        let s = g
            .constant(t(&[8], (1..=8).map(|v| v as f32).collect()))
            .unwrap();
        let si = g.constant(t(&[4, 1], vec![4i32, 3, 1, 7])).unwrap();
        let su = g.constant(t(&[4], vec![9.0f32, 10.0, 11.0, 12.0])).unwrap();
        let e = g.scatter_nd(s, si, su, ScatterReduce::None).unwrap();
        let z = g.zeros([2, 2, 2], DType::F32).unwrap();
        let zi = g.constant(t(&[2, 2], vec![1i32, 0, 0, 1])).unwrap();
        let zu = g.constant(t(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0])).unwrap();
        let f = g.scatter_nd(z, zi, zu, ScatterReduce::None).unwrap();
        let di = g.constant(t(&[3, 1], vec![0i32, 0, -1])).unwrap();
        let du = g.constant(t(&[3], vec![5.0f32, 6.0, 100.0])).unwrap();
        let h = g.scatter_nd(s, di, du, ScatterReduce::Add).unwrap();
        let out = session_on(&g, device)
            .run(&[], &[a, b, c, d, e, f, h])
            .unwrap();
        let what = device.to_string();
        assert_eq!(out[0].to_vec::<i32>().unwrap(), [0, 3], "{what}");
        assert_eq!(out[1].to_vec::<i32>().unwrap(), [2, 3, 0, 1], "{what}");
        assert_eq!(out[2].dims(), [2, 1, 2], "{what}");
        assert_eq!(out[2].to_vec::<i32>().unwrap(), [2, 3, 4, 5], "{what}");
        assert_eq!(out[3].to_vec::<i32>().unwrap(), [4, 5], "{what}");
        assert_eq!(
            out[4].to_vec::<f32>().unwrap(),
            [1.0, 11.0, 3.0, 10.0, 9.0, 6.0, 7.0, 12.0],
            "{what}"
        );
        assert_eq!(
            out[5].to_vec::<f32>().unwrap(),
            [0.0, 0.0, 3.0, 4.0, 1.0, 2.0, 0.0, 0.0],
            "{what}"
        );
        assert_eq!(
            out[6].to_vec::<f32>().unwrap(),
            [12.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 108.0],
            "{what}"
        );
    }
    let mut g = Graph::new();
    let x = g.zeros([2, 3], DType::F32).unwrap();
    let i = g.zeros([4, 3], DType::I32).unwrap();
    let ok = g.zeros([4, 1], DType::I32).unwrap();
    let bad_u = g.zeros([4, 2], DType::F32).unwrap();
    let e = g.gather_nd(x, i).unwrap_err().to_string();
    assert!(
        e.contains("must be 1..=2") && e.contains("ops_index.rs"),
        "{e}"
    );
    let e = g
        .scatter_nd(x, ok, bad_u, ScatterReduce::Add)
        .unwrap_err()
        .to_string();
    assert!(e.contains("updates [4, 2] must be"), "{e}");
}

//! Feeds and fetches move exact words on every device: every dtype's bit patterns (NaN
//! payloads, -0.0, integer extremes, f16 packed two to a word on GPUs with odd and even
//! counts), sizes 0, 1 and 3 and one over the 128 MiB binding limit, a value fetched twice,
//! a fed placeholder fetched back, runs with new feeds seeing no stale staging data, several
//! feeds in one traced run, transfers between devices, and the variable reads and writes
//! that go through their own staging.

use crate::common::{gpus, session_on};
use wgflow::trace::RunOptions;
use wgflow::{DType, Device, Graph, HostTensor, Initializer};

fn devices() -> Vec<Device> {
    let mut d = vec![Device::Cpu];
    d.extend(gpus());
    d
}

const DTYPES: [DType; 5] = [DType::F32, DType::F16, DType::I32, DType::U32, DType::Bool];

/// Whether `d` can hold f16 (a GPU needs the shader-f16 feature; one without refuses f16
/// work with a placement error, tested in `ops_f16.rs`).
fn holds(d: Device, dtype: DType) -> bool {
    dtype != DType::F16
        || wgflow::devices()
            .iter()
            .any(|i| i.device == d && (d == Device::Cpu || i.limits.shader_f16))
}

/// Words of `dtype` cycling through the patterns where a conversion would show: NaN payloads
/// (quiet and signalling, both signs), ±0, ±inf, subnormals, extremes; `salt` shifts the cycle
/// so two feeds differ.
fn pattern(dtype: DType, n: usize, salt: usize) -> HostTensor {
    let specials: &[u32] = match dtype {
        DType::F32 => &[
            0x7fc0_0001, // quiet NaN with a payload
            0x7f80_0001, // signalling NaN
            0xffc1_2345, // negative NaN with a payload
            0x8000_0000, // -0.0
            0x0000_0000,
            0x7f80_0000, // +inf
            0xff80_0000, // -inf
            0x0000_0001, // smallest subnormal
            0x7f7f_ffff, // f32::MAX
            0x3f80_0000, // 1.0
            0xbfc0_0000, // -1.5
        ],
        DType::F16 => &[
            0x7e01, 0x7c01, 0xfe55, 0x8000, 0x0000, 0x7c00, 0xfc00, 0x0001, 0x7bff, 0x3c00, 0xbe00,
        ],
        DType::I32 => &[
            i32::MIN as u32,
            i32::MAX as u32,
            u32::MAX, // -1
            0,
            1,
            0x1234_5678,
            0x8765_4321,
        ],
        DType::U32 => &[0, u32::MAX, 0x8000_0000, 1, 0xdead_beef, 0x7fff_ffff],
        DType::Bool => &[1, 0, 0, 1, 1],
    };
    let words = (0..n)
        .map(|i| {
            let k = i + salt;
            let w = specials[k % specials.len()];
            // Mix the index into the non-special bits so a misplaced element shows.
            match dtype {
                DType::Bool => w,
                DType::F16 if k.is_multiple_of(3) => (k as u32 * 7) & 0x7bff,
                DType::F16 => w,
                _ if k.is_multiple_of(3) => (k as u32).wrapping_mul(2_654_435_761),
                _ => w,
            }
        })
        .collect();
    HostTensor::from_words([n].into(), dtype, words).unwrap()
}

fn same(what: &str, got: &HostTensor, want: &HostTensor) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    let wrong = got
        .words()
        .iter()
        .zip(want.words())
        .position(|(a, b)| a != b);
    assert_eq!(
        wrong,
        None,
        "{what}: word {wrong:?}: {:#x?} instead of {:#x?}",
        wrong.map(|i| got.words()[i]),
        wrong.map(|i| want.words()[i])
    );
}

/// `t` three times over, as `concat([t, t, t])` computes it.
fn thrice(t: &HostTensor) -> HostTensor {
    let mut w = t.words().to_vec();
    w.extend_from_slice(t.words());
    w.extend_from_slice(t.words());
    HostTensor::from_words([3 * t.len()].into(), t.dtype(), w).unwrap()
}

#[test]
fn every_dtype_and_size_round_trips_exactly_through_feeds_kernels_variables_and_fetches() {
    for d in devices() {
        for dtype in DTYPES.into_iter().filter(|&t| holds(d, t)) {
            for n in [0, 1, 2, 3, 5, 1023, 4099] {
                let what = format!("{d} {dtype} n={n}");
                let mut g = Graph::new();
                let x = g.placeholder("x", [n], dtype).unwrap();
                let v = g
                    .variable_with("v", [n], dtype, Initializer::Zeros)
                    .unwrap();
                let set = g.assign(v, x).unwrap();
                // A kernel's output in the arena, 3n elements: odd whenever n is.
                let cat = g.concat(&[x, x, x], 0).unwrap();
                let mut s = session_on(&g, d);
                let value = pattern(dtype, n, 0);
                let out = s.run(&[(x, value.clone())], &[x, cat, set]).unwrap();
                same(&format!("{what}: fed placeholder"), &out[0], &value);
                same(&format!("{what}: kernel output"), &out[1], &thrice(&value));
                same(&format!("{what}: assigned value"), &out[2], &value);
                let read = s.read_variable(v).unwrap();
                same(&format!("{what}: read_variable"), &read, &value);
                let fetched = s.run(&[], &[v]).unwrap();
                same(&format!("{what}: fetched variable"), &fetched[0], &value);
            }
        }
    }
}

#[test]
fn a_second_run_with_new_feeds_sees_no_stale_staging_data() {
    for d in devices() {
        for dtype in [DType::F32, DType::F16, DType::I32] {
            if !holds(d, dtype) {
                continue;
            }
            let n = 1001;
            let mut g = Graph::new();
            let x = g.placeholder("x", [n], dtype).unwrap();
            let y = g.placeholder("y", [3], dtype).unwrap();
            let cat = g.concat(&[x, y], 0).unwrap();
            let mut s = session_on(&g, d);
            for salt in [0, 1, 5, 0] {
                let (a, b) = (pattern(dtype, n, salt), pattern(dtype, 3, salt + 2));
                let out = s
                    .run(&[(x, a.clone()), (y, b.clone())], &[cat, cat, x])
                    .unwrap();
                let mut w = a.words().to_vec();
                w.extend_from_slice(b.words());
                let want = HostTensor::from_words([n + 3].into(), dtype, w).unwrap();
                let what = format!("{d} {dtype} salt {salt}");
                same(&format!("{what}: first fetch"), &out[0], &want);
                same(&format!("{what}: the same tensor again"), &out[1], &want);
                same(&format!("{what}: the fed placeholder"), &out[2], &a);
            }
        }
    }
}

#[test]
fn feeds_that_are_only_targets_land_before_the_next_run_reads_them() {
    for d in devices() {
        let mut g = Graph::new();
        let x = g.placeholder("x", [7], DType::I32).unwrap();
        let v = g
            .variable_with("v", [7], DType::I32, Initializer::Zeros)
            .unwrap();
        let set = g.assign(v, x).unwrap();
        let mut s = session_on(&g, d);
        for salt in 0..3 {
            let value = pattern(DType::I32, 7, salt);
            s.run_targets(&[(x, value.clone())], &[set]).unwrap();
            same(
                &format!("{d} salt {salt}"),
                &s.read_variable(v).unwrap(),
                &value,
            );
        }
    }
}

#[test]
fn several_feeds_in_a_traced_run_and_in_plans_sharing_a_device_stay_apart() {
    for d in devices() {
        // f16 where the device holds it, i32 elsewhere.
        let b_type = if holds(d, DType::F16) {
            DType::F16
        } else {
            DType::I32
        };
        let mut g = Graph::new();
        let a = g.placeholder("a", [5], DType::F32).unwrap();
        let b = g.placeholder("b", [4], b_type).unwrap();
        let c = g.placeholder("c", [3], DType::U32).unwrap();
        let ab = g.concat(&[a, a], 0).unwrap();
        let bb = g.concat(&[b, b], 0).unwrap();
        let cc = g.concat(&[c, c], 0).unwrap();
        let mut s = session_on(&g, d);
        for (salt, trace) in [(0, true), (3, false), (1, true)] {
            let (va, vb, vc) = (
                pattern(DType::F32, 5, salt),
                pattern(b_type, 4, salt),
                pattern(DType::U32, 3, salt),
            );
            let feeds = [(a, va.clone()), (b, vb.clone()), (c, vc.clone())];
            let (out, _) = s
                .run_with(&feeds, &[ab, bb, cc], &RunOptions { trace })
                .unwrap();
            let what = format!("{d} salt {salt} traced {trace}");
            let twice = |t: &HostTensor| {
                let mut w = t.words().to_vec();
                w.extend_from_slice(t.words());
                HostTensor::from_words([2 * t.len()].into(), t.dtype(), w).unwrap()
            };
            same(&format!("{what}: a"), &out[0], &twice(&va));
            same(&format!("{what}: b"), &out[1], &twice(&vb));
            same(&format!("{what}: c"), &out[2], &twice(&vc));
            // Another plan of the same session, with its own staging, in between.
            let only_c = s.run(&[(c, vc.clone())], &[cc]).unwrap();
            same(&format!("{what}: c alone"), &only_c[0], &twice(&vc));
        }
    }
}

#[test]
fn values_transferred_between_devices_arrive_exactly() {
    let Some(&gpu) = gpus().first() else {
        return;
    };
    for dtype in DTYPES.into_iter().filter(|&t| holds(gpu, t)) {
        for n in [1, 3, 1000] {
            let mut g = Graph::new();
            let x = g.placeholder("x", [n], dtype).unwrap();
            // Fed on the GPU, copied on cpu:0, copied back on the GPU.
            let on_cpu = g.device("cpu:0", |g| g.concat(&[x, x], 0)).unwrap();
            let back = g
                .device(&gpu.to_string(), |g| g.concat(&[on_cpu, x], 0))
                .unwrap();
            let mut s = session_on(&g, gpu);
            for salt in [0, 4] {
                let value = pattern(dtype, n, salt);
                let out = s.run(&[(x, value.clone())], &[back]).unwrap();
                same(
                    &format!("{gpu} ⇄ cpu:0 {dtype} n={n} salt {salt}"),
                    &out[0],
                    &thrice(&value),
                );
            }
        }
    }
}

#[test]
fn variable_writes_and_reads_are_exact_and_reuse_no_stale_bytes() {
    for d in devices() {
        for dtype in DTYPES.into_iter().filter(|&t| holds(d, t)) {
            let mut g = Graph::new();
            let big = g
                .variable_with("big", [1001], dtype, Initializer::Zeros)
                .unwrap();
            let small = g
                .variable_with("small", [3], dtype, Initializer::Zeros)
                .unwrap();
            let empty = g
                .variable_with("empty", [0], dtype, Initializer::Zeros)
                .unwrap();
            let mut s = session_on(&g, d);
            let what = format!("{d} {dtype}");
            // Small first, then big (the read-back buffer grows), then small again (a larger
            // buffer whose tail holds the big value's bytes).
            let vs = pattern(dtype, 3, 1);
            let vb = pattern(dtype, 1001, 2);
            s.write_variable(small, &vs).unwrap();
            same(
                &format!("{what}: small"),
                &s.read_variable(small).unwrap(),
                &vs,
            );
            s.write_variable(big, &vb).unwrap();
            same(&format!("{what}: big"), &s.read_variable(big).unwrap(), &vb);
            same(
                &format!("{what}: small again"),
                &s.read_variable(small).unwrap(),
                &vs,
            );
            let ve = pattern(dtype, 0, 0);
            s.write_variable(empty, &ve).unwrap();
            same(
                &format!("{what}: empty"),
                &s.read_variable(empty).unwrap(),
                &ve,
            );
            let vs2 = pattern(dtype, 3, 4);
            s.write_variable(small, &vs2).unwrap();
            let out = s.run(&[], &[small, big, small]).unwrap();
            same(&format!("{what}: fetched small"), &out[0], &vs2);
            same(&format!("{what}: fetched big"), &out[1], &vb);
            same(&format!("{what}: fetched small twice"), &out[2], &vs2);
        }
    }
}

#[test]
fn a_value_over_the_binding_limit_is_fed_and_fetched_exactly() {
    // 2^25 + 3 f32 = 134,217,740 bytes: past 128 MiB (134,217,728), an odd count.
    let n = (1usize << 25) + 3;
    let value = pattern(DType::F32, n, 0);
    let mut g = Graph::new();
    let x = g.placeholder("x", [n], DType::F32).unwrap();
    let v = g
        .variable_with("v", [n], DType::F32, Initializer::Zeros)
        .unwrap();
    let set = g.assign(v, x).unwrap();
    let first = g
        .slice(x, &[wgflow::SliceArg::range(n as isize - 2, n as isize)])
        .unwrap();
    let last = g.concat(&[first, first], 0).unwrap();
    for d in devices() {
        let mut s = session_on(&g, d);
        let out = s.run(&[(x, value.clone())], &[last]).unwrap();
        let tail = &value.words()[n - 2..];
        assert_eq!(
            out[0].words(),
            [tail, tail].concat(),
            "{d}: tail of the feed"
        );
        s.run_targets(&[(x, value.clone())], &[set]).unwrap();
        same(
            &format!("{d}: read_variable"),
            &s.read_variable(v).unwrap(),
            &value,
        );
        let fetched = s.run(&[], &[v]).unwrap().pop().unwrap();
        same(&format!("{d}: fetched"), &fetched, &value);
    }
}

#[test]
fn fetched_tensors_convert_to_vectors_exactly() {
    let value = pattern(DType::F32, 11, 0);
    for d in devices() {
        let mut g = Graph::new();
        let v = g.variable("v", value.clone()).unwrap();
        let out = session_on(&g, d).run(&[], &[v]).unwrap().pop().unwrap();
        let bits: Vec<u32> = out
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect();
        assert_eq!(bits, value.words(), "{d}: to_vec");
        let bits: Vec<u32> = out
            .into_vec::<f32>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect();
        assert_eq!(bits, value.words(), "{d}: into_vec");
    }
}

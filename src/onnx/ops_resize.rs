//! `Resize` (and the older `Upsample`) as separable taps: for each resized axis the host
//! computes, per output position, the source indices and weights of its 1 (nearest), 2
//! (linear) or 4 (cubic) taps, and the graph sums `take(x, idx_k, axis) * w_k`.

use super::build::{bad, Cx, Node};
use super::limits::{self, room};
use super::ops_shape::norm_axis;
use super::tensor::HostValue;
use crate::{DType, HostTensor, Result, Tensor};

fn floats_of(cx: &mut Cx, n: &Node, i: usize) -> Result<Option<Vec<f64>>> {
    if n.input(i).is_none() {
        return Ok(None);
    }
    Ok(match &*cx.host(n, i)? {
        HostValue::Floats(h) => Some(h.to_f32()?.into_iter().map(f64::from).collect()),
        HostValue::Ints { v, .. } => Some(v.iter().map(|&x| x as f64).collect()),
    })
    .map(|v: Option<Vec<f64>>| v.filter(|v| !v.is_empty()))
}

/// The widest antialiasing kernel built (in cells of the input).
const MAX_AA_WIDTH: f64 = 4096.0;

/// Taps of one axis: `(indices, weights)` per tap, each of the output's length.
type Taps = Vec<(Vec<i64>, Vec<f32>)>;

struct AxisPlan<'a> {
    mode: &'a str,
    coord: &'a str,
    nearest: &'a str,
    cubic_a: f64,
    exclude_outside: bool,
    antialias: bool,
}

/// Antialiased linear or cubic weights for the fraction `ratio` (`1` at integers, as the
/// reference has it): the kernel stretched by `1/scale` when downsampling, normalised to sum 1.
fn antialias_coeffs(p: &AxisPlan, ratio: f64, scale: f64) -> Vec<f64> {
    let s = scale.min(1.0);
    let c: Vec<f64> = if p.mode == "linear" {
        let start = (-1.0 / s).floor() as i64 + 1;
        (start..start + 2 - 2 * start)
            .map(|i| (1.0 - ((i as f64 - ratio) * s).abs()).clamp(0.0, 1.0))
            .collect()
    } else {
        let a = p.cubic_a;
        let start = (-2.0 / s).floor() as i64 + 1;
        (start..2 - start)
            .map(|i| {
                let x = (s * (i as f64 - ratio)).abs();
                let (x2, x3) = (x * x, x * x * x);
                if x <= 1.0 {
                    (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
                } else if x < 2.0 {
                    a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
                } else {
                    0.0
                }
            })
            .collect()
    };
    let sum: f64 = c.iter().sum();
    c.into_iter().map(|v| v / sum).collect()
}

/// The taps of one axis, and which outputs lie outside the input (`tf_crop_and_resize` with
/// its `roi` `(start, end)`: those take the extrapolation value instead).
fn taps(
    p: &AxisPlan,
    len_in: usize,
    len_out: usize,
    scale: f64,
    roi: Option<(f64, f64)>,
) -> Result<(Taps, Vec<bool>)> {
    let (inn, out) = (len_in as f64, len_out as f64);
    let last = len_in as i64 - 1;
    let mut taps: Taps = Vec::new();
    let width = match p.mode {
        "nearest" if p.antialias => {
            return Err(bad(crate::onnx::unsupported(
                "unsupported: antialias with mode 'nearest'",
            )))
        }
        // A downsampling kernel is 2/scale cells wide: refuse one too wide to build.
        "linear" | "cubic" if p.antialias && (scale.is_nan() || scale < 1.0 / MAX_AA_WIDTH) => {
            return Err(bad(crate::onnx::unsupported(format!(
                "unsupported: antialiasing at scale {scale} (more than {MAX_AA_WIDTH} taps)"
            ))))
        }
        "linear" | "cubic" if p.antialias => antialias_coeffs(p, 0.5, scale).len(),
        "nearest" => 1,
        "linear" => 2,
        "cubic" => 4,
        m => {
            return Err(bad(crate::onnx::unsupported(format!(
                "unsupported: mode '{m}'"
            ))))
        }
    };
    for _ in 0..width {
        taps.push((room(len_out, "resize taps")?, room(len_out, "resize taps")?));
    }
    let mut outside = room(len_out, "resize taps")?;
    for o in 0..len_out {
        let x = o as f64;
        let mut off = false;
        let src = match p.coord {
            "tf_crop_and_resize" => {
                let (r0, r1) = roi.ok_or_else(|| bad("tf_crop_and_resize needs roi"))?;
                let src = if scale * inn == 1.0 {
                    (r1 - r0) * (inn - 1.0) / 2.0
                } else {
                    x * (r1 - r0) * (inn - 1.0) / (scale * inn - 1.0)
                } + r0 * (inn - 1.0);
                off = src < 0.0 || src > inn - 1.0;
                src
            }
            "half_pixel" => (x + 0.5) / scale - 0.5,
            "half_pixel_symmetric" => {
                let adj = out / (scale * inn);
                let center = inn / 2.0;
                center * (1.0 - adj) + (x + 0.5) / scale - 0.5
            }
            "pytorch_half_pixel" if len_out > 1 => (x + 0.5) / scale - 0.5,
            "pytorch_half_pixel" => 0.0,
            // The float output length (`scale * in`), as the reference does when scales are given.
            "align_corners" if len_out > 1 => x * (inn - 1.0) / (scale * inn - 1.0),
            "align_corners" => 0.0,
            "asymmetric" => x / scale,
            c => {
                return Err(bad(crate::onnx::unsupported(format!(
                    "unsupported: coordinate_transformation_mode '{c}'"
                ))))
            }
        };
        outside.push(off);
        let clamp = |i: i64| i.clamp(0, last.max(0));
        if p.antialias {
            // The reference's neighbours: `width` cells around `src`, the window's start
            // decided by the fraction (ties towards the lower cells).
            let f = src.floor();
            let frac = src - f;
            let ratio = if frac == 0.0 { 1.0 } else { frac };
            let mut w = antialias_coeffs(p, ratio, scale);
            let n = w.len() as i64;
            let offset = if n % 2 == 0 {
                if frac == 0.0 {
                    -(n / 2)
                } else {
                    -(n / 2) + 1
                }
            } else if frac <= 0.5 {
                -((n - 1) / 2)
            } else {
                -((n - 1) / 2) + 1
            };
            let idx: Vec<i64> = (0..n).map(|j| f as i64 + offset + j).collect();
            if p.exclude_outside {
                for (k, &i) in idx.iter().enumerate() {
                    if i < 0 || i > last {
                        w[k] = 0.0;
                    }
                }
                let s: f64 = w.iter().sum();
                if s != 0.0 {
                    w.iter_mut().for_each(|v| *v /= s);
                }
            }
            for k in 0..n as usize {
                taps[k].0.push(clamp(idx[k]));
                taps[k].1.push(w[k] as f32);
            }
            continue;
        }
        match p.mode {
            "nearest" => {
                let f = src.floor();
                let i = match p.nearest {
                    "round_prefer_floor" => {
                        if src - f == 0.5 {
                            f
                        } else {
                            src.round()
                        }
                    }
                    "round_prefer_ceil" => {
                        if src - f == 0.5 {
                            f + 1.0
                        } else {
                            src.round()
                        }
                    }
                    "floor" => f,
                    "ceil" => src.ceil(),
                    m => {
                        return Err(bad(crate::onnx::unsupported(format!(
                            "unsupported: nearest_mode '{m}'"
                        ))))
                    }
                } as i64;
                taps[0].0.push(clamp(i));
                taps[0].1.push(1.0);
            }
            "linear" => {
                let f = src.floor();
                let r = src - f;
                for (k, w) in [1.0 - r, r].into_iter().enumerate() {
                    taps[k].0.push(clamp(f as i64 + k as i64));
                    taps[k].1.push(w as f32);
                }
            }
            _ => {
                let f = src.floor();
                let r = src - f;
                let a = p.cubic_a;
                let near = |t: f64| ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0;
                let far = |t: f64| ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a;
                let mut w = [far(r + 1.0), near(r), near(1.0 - r), far(2.0 - r)];
                let idx: Vec<i64> = (0..4).map(|k| f as i64 - 1 + k).collect();
                if p.exclude_outside {
                    for k in 0..4 {
                        if idx[k] < 0 || idx[k] > last {
                            w[k] = 0.0;
                        }
                    }
                    let s: f64 = w.iter().sum();
                    if s != 0.0 {
                        w.iter_mut().for_each(|v| *v /= s);
                    }
                }
                for k in 0..4 {
                    taps[k].0.push(clamp(idx[k]));
                    taps[k].1.push(w[k] as f32);
                }
            }
        }
    }
    Ok((taps, outside))
}

pub(super) fn resize(cx: &mut Cx, n: &Node) -> Result<Tensor> {
    let s = cx.shape(n, 0)?;
    let r = s.len();
    let legacy = n.op == "Upsample" || n.opset < 11;
    let (scales, sizes) = if n.op == "Upsample" && n.opset < 9 {
        (
            n.floats("scales")
                .map(|v| v.into_iter().map(f64::from).collect()),
            None,
        )
    } else if legacy {
        (floats_of(cx, n, 1)?, None)
    } else {
        (floats_of(cx, n, 2)?, floats_of(cx, n, 3)?)
    };
    let axes: Vec<usize> = match n.ints("axes") {
        Some(a) => a.iter().map(|&a| norm_axis(a, r)).collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    let mut out_len = s.clone();
    let mut scale = vec![1.0f64; r];
    match (sizes, scales) {
        (Some(sz), _) => {
            if sz.len() != axes.len() {
                return Err(bad("sizes do not match the axes"));
            }
            let policy = n
                .string("keep_aspect_ratio_policy")
                .unwrap_or_else(|| "stretch".into());
            let ratios: Vec<f64> = axes
                .iter()
                .zip(&sz)
                .map(|(&a, &z)| z / s[a] as f64)
                .collect();
            let pick = match policy.as_str() {
                "stretch" => None,
                "not_larger" => Some(ratios.iter().copied().fold(f64::INFINITY, f64::min)),
                "not_smaller" => Some(ratios.iter().copied().fold(0.0, f64::max)),
                p => return Err(n.unsupported(format!("keep_aspect_ratio_policy '{p}'"))),
            };
            for (k, &a) in axes.iter().enumerate() {
                match pick {
                    None => {
                        out_len[a] = limits::length(sz[k], cx.opts, "a Resize size")?;
                        scale[a] = ratios[k];
                    }
                    Some(q) => {
                        out_len[a] =
                            limits::length((s[a] as f64 * q).round(), cx.opts, "a Resize size")?;
                        scale[a] = q;
                    }
                }
            }
        }
        (None, Some(sc)) => {
            if sc.len() != axes.len() {
                return Err(bad("scales do not match the axes"));
            }
            for (k, &a) in axes.iter().enumerate() {
                scale[a] = sc[k];
                let len = (s[a] as f64 * sc[k]).floor();
                out_len[a] = limits::length(len, cx.opts, "a Resize output length")?;
            }
        }
        (None, None) => return Err(bad("neither scales nor sizes is given")),
    }
    limits::count(&out_len, cx.opts, "the Resize output")?;
    let mode = n.string("mode").unwrap_or_else(|| "nearest".into());
    let mode = if mode == "bilinear" || mode == "trilinear" {
        "linear".to_string()
    } else {
        mode
    };
    let coord = if legacy {
        "asymmetric".to_string()
    } else {
        n.string("coordinate_transformation_mode")
            .unwrap_or_else(|| "half_pixel".into())
    };
    let nearest = if legacy {
        "floor".to_string()
    } else {
        n.string("nearest_mode")
            .unwrap_or_else(|| "round_prefer_floor".into())
    };
    let plan = AxisPlan {
        mode: &mode,
        coord: &coord,
        nearest: &nearest,
        cubic_a: n.float("cubic_coeff_a", -0.75) as f64,
        exclude_outside: n.int("exclude_outside", 0) != 0,
        antialias: n.int("antialias", 0) != 0,
    };
    // roi as [starts…, ends…] over every axis (1 and 0 where `axes` leaves an axis out).
    let roi = if coord == "tf_crop_and_resize" {
        let v = floats_of(cx, n, 1)?.ok_or_else(|| bad("tf_crop_and_resize needs roi"))?;
        if v.len() != 2 * axes.len() {
            return Err(bad(crate::onnx::unsupported(format!(
                "roi has {} values for {} axes",
                v.len(),
                axes.len()
            ))));
        }
        let mut full = vec![0.0; r];
        full.extend(vec![1.0; r]);
        for (k, &a) in axes.iter().enumerate() {
            full[a] = v[k];
            full[a + r] = v[k + axes.len()];
        }
        Some(full)
    } else {
        None
    };
    let mut x = cx.t(n, 0)?;
    let dt = cx.g.dtype(x)?;
    for a in 0..r {
        let whole = roi.as_ref().is_none_or(|v| v[a] == 0.0 && v[a + r] == 1.0);
        if out_len[a] == s[a] && scale[a] == 1.0 && whole {
            continue;
        }
        if scale[a] <= 0.0 || !scale[a].is_finite() {
            return Err(bad(format!("bad scale {} for axis {a}", scale[a])));
        }
        let axis_roi = roi.as_ref().map(|v| (v[a], v[a + r]));
        let (taps, outside) = taps(&plan, s[a], out_len[a], scale[a], axis_roi)?;
        let mut acc: Option<Tensor> = None;
        for (idx, w) in taps {
            let i = cx.constant(
                &HostValue::Ints {
                    shape: vec![idx.len()],
                    v: idx,
                    dtype: DType::I32,
                },
                "resize index",
            )?;
            let mut t = cx.g.take(x, i, a as isize)?;
            if mode != "nearest" {
                if !dt.is_float() {
                    return Err(n.unsupported(format!("{mode} resize of {dt}")));
                }
                let mut ws = vec![1; r];
                ws[a] = w.len();
                let wt =
                    cx.constant(&HostValue::Floats(HostTensor::new(ws, w)?), "resize weight")?;
                let wt = if dt == DType::F32 {
                    wt
                } else {
                    cx.g.cast(wt, dt)?
                };
                t = cx.g.mul(t, wt)?;
            }
            acc = Some(match acc {
                None => t,
                Some(p) => cx.g.add(p, t)?,
            });
        }
        x = acc.ok_or_else(|| bad("no taps"))?;
        if outside.iter().any(|&o| o) {
            // Outputs outside the input take the extrapolation value: x·keep + value·(1-keep).
            let value = n.float("extrapolation_value", 0.0);
            let mut ws = vec![1; r];
            ws[a] = outside.len();
            let keep: Vec<f32> = outside.iter().map(|&o| if o { 0.0 } else { 1.0 }).collect();
            let fill: Vec<f32> = outside
                .iter()
                .map(|&o| if o { value } else { 0.0 })
                .collect();
            let mut parts = Vec::new();
            for v in [keep, fill] {
                let t = cx.constant(
                    &HostValue::Floats(HostTensor::new(ws.clone(), v)?),
                    "resize extrapolation",
                )?;
                parts.push(if dt == DType::F32 {
                    t
                } else {
                    cx.g.cast(t, dt)?
                });
            }
            x = cx.g.mul(x, parts[0])?;
            x = cx.g.add(x, parts[1])?;
        }
    }
    Ok(x)
}
